//! The gateway's configuration file (TOML), read strictly: an unknown key, a server with both
//! or neither of `command` and `url`, or a non-loopback `listen` without `[identity]` is an
//! error naming the key.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::import::mcp::check_server_name;

/// Largest configuration file read (1 MiB).
pub const MAX_CONFIG_BYTES: usize = 1024 * 1024;

/// The whole configuration, paths resolved against the configuration file's folder.
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayConfig {
    /// The policy file.
    pub policy: PathBuf,
    /// Where to serve Streamable HTTP (`/mcp`) and the decision API (`/v1/…`); `None`: one
    /// client on stdio.
    pub listen: Option<SocketAddr>,
    /// The intent when a request carries no query (default: the policy's fallback intent).
    pub intent: Option<String>,
    /// The audit log (JSON lines, appended).
    pub audit: Option<PathBuf>,
    /// `audit_fsync = true`: each record is also synced to the disk (`fsync`) before its call
    /// is forwarded, so it survives a power loss too, not only the gateway being killed.
    pub audit_fsync: bool,
    /// Record decisions but forward every call.
    pub advisory: bool,
    /// `elicitation_only = true`: a call that needs confirmation is confirmed by the user
    /// through elicitation or not at all; a client without elicitation is offered no
    /// confirmation field and such a call is refused (the model cannot confirm it).
    pub elicitation_only: bool,
    /// Connector allowlists by tier (`task`, `session`, `project`) for every session; a
    /// token's connectors claim replaces the `session` tier.
    pub connectors: BTreeMap<String, Vec<String>>,
    /// Bounds of the HTTP side and of the sessions.
    pub limits: Limits,
    /// Who is asking, from a bearer JWT (HTTP only).
    pub identity: Option<IdentityConfig>,
    /// The upstream servers by name.
    pub servers: BTreeMap<String, ServerConfig>,
    /// Where session state is kept (the `[state]` table): `None` in this process's memory.
    pub redis: Option<String>,
    /// Where decision spans are exported (the `[telemetry]` table): `None` exports none.
    pub otlp_endpoint: Option<String>,
}

/// Bounds of the HTTP side, of the sessions and of the upstream lists (the `[limits]` table).
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Largest request body (`max_body_bytes`, default 4 MiB): a larger one gets HTTP 413.
    pub max_body_bytes: usize,
    /// Time a client has to send its request headers, and again its body
    /// (`request_timeout_secs`, default 30): slower headers close the connection, a slower
    /// body gets HTTP 408.
    pub request_timeout: Duration,
    /// A connection on which no byte moved either way for this long is closed
    /// (`idle_timeout_secs`, default 120). Open event streams carry keep-alive comments more
    /// often than that, so only a silent connection is closed.
    pub idle_timeout: Duration,
    /// Most connections served at once (`max_connections`, default 1,024): past it a new
    /// connection waits in the listen backlog until one closes.
    pub max_connections: usize,
    /// Most sessions kept (`max_sessions`, default 10,000): past it a new session is refused
    /// (HTTP 503); no live session is ever forgotten to make room.
    pub max_sessions: usize,
    /// Most sessions kept for one principal (`max_sessions_per_principal`, default 100): past
    /// it that principal's new session is refused (HTTP 429).
    pub max_sessions_per_principal: usize,
    /// A session unused this long is forgotten (`session_idle_secs`, default 1,800).
    pub session_idle: Duration,
    /// Time an upstream has to answer one request (`upstream_timeout_secs`, default 60).
    pub upstream_timeout: Duration,
    /// Time an upstream has to give its whole tool list, connecting included
    /// (`list_timeout_secs`, default 10).
    pub list_timeout: Duration,
    /// After an upstream failed to connect or to list, it is reported unavailable without
    /// being tried again for this long (`upstream_retry_secs`, default 5).
    pub upstream_retry: Duration,
    /// Most pages read of one upstream's tool list (`max_list_pages`, default 100).
    pub max_list_pages: usize,
    /// Most tools one upstream may list (`max_tools_per_server`, default 1,000).
    pub max_tools_per_server: usize,
    /// Time the user has to answer a confirmation (`confirm_timeout_secs`, default 300); no
    /// answer is a decline.
    pub confirm_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_body_bytes: 4 * 1024 * 1024,
            request_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(120),
            max_connections: 1024,
            max_sessions: 10_000,
            max_sessions_per_principal: 100,
            session_idle: Duration::from_secs(1800),
            upstream_timeout: Duration::from_secs(60),
            list_timeout: Duration::from_secs(10),
            upstream_retry: Duration::from_secs(5),
            max_list_pages: 100,
            max_tools_per_server: 1000,
            confirm_timeout: Duration::from_secs(300),
        }
    }
}

/// The `[identity]` table: how bearer tokens are verified and read.
#[derive(Clone, Debug, PartialEq)]
pub struct IdentityConfig {
    /// The verification key.
    pub key: KeySource,
    /// The claim holding the roles (a string or an array of strings; default `roles`).
    pub roles_claim: String,
    /// The claim holding the permissions (default `permissions`).
    pub permissions_claim: String,
    /// The claim holding the tenant (a string; default `tenant`).
    pub tenant_claim: String,
    /// The claim holding the mode; absent: the policy's default mode.
    pub mode_claim: Option<String>,
    /// The claim holding the session's connector allowlist (default `connectors`).
    pub connectors_claim: String,
    /// The `iss` a token must carry, when set.
    pub issuer: Option<String>,
    /// The `aud` a token must carry, when set.
    pub audience: Option<String>,
}

/// Where the token verification key is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// A shared secret for HS256 (the file's bytes, a trailing newline removed).
    Hs256Secret(PathBuf),
    /// An RSA public key in PEM for RS256.
    Rs256PublicKey(PathBuf),
}

/// One upstream server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerConfig {
    /// Started as a child process speaking MCP on its stdio: the program and its arguments.
    Command(Vec<String>),
    /// Reached over Streamable HTTP at this URL.
    Url(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    policy: PathBuf,
    listen: Option<String>,
    intent: Option<String>,
    audit: Option<PathBuf>,
    #[serde(default)]
    audit_fsync: bool,
    #[serde(default)]
    advisory: bool,
    #[serde(default)]
    elicitation_only: bool,
    #[serde(default)]
    connectors: BTreeMap<String, Vec<String>>,
    limits: Option<RawLimits>,
    identity: Option<RawIdentity>,
    #[serde(default)]
    servers: BTreeMap<String, RawServer>,
    state: Option<RawState>,
    telemetry: Option<RawTelemetry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawState {
    redis: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTelemetry {
    otlp_endpoint: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    max_body_bytes: Option<usize>,
    request_timeout_secs: Option<u64>,
    idle_timeout_secs: Option<u64>,
    max_connections: Option<usize>,
    max_sessions: Option<usize>,
    max_sessions_per_principal: Option<usize>,
    session_idle_secs: Option<u64>,
    upstream_timeout_secs: Option<u64>,
    list_timeout_secs: Option<u64>,
    upstream_retry_secs: Option<u64>,
    max_list_pages: Option<usize>,
    max_tools_per_server: Option<usize>,
    confirm_timeout_secs: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIdentity {
    jwt_hs256_secret_file: Option<PathBuf>,
    jwt_rs256_public_key_file: Option<PathBuf>,
    roles_claim: Option<String>,
    permissions_claim: Option<String>,
    tenant_claim: Option<String>,
    mode_claim: Option<String>,
    connectors_claim: Option<String>,
    issuer: Option<String>,
    audience: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    command: Option<Vec<String>>,
    url: Option<String>,
}

impl GatewayConfig {
    /// Reads and checks the configuration file at `path`.
    ///
    /// # Errors
    ///
    /// A message naming the file and what is wrong: unreadable, not TOML, an unknown key, a
    /// bad value (see [`GatewayConfig::parse`]).
    pub fn from_file(path: &Path) -> Result<GatewayConfig, String> {
        let bytes = crate::limits::read_file(path, MAX_CONFIG_BYTES)
            .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        let text =
            String::from_utf8(bytes).map_err(|_| format!("`{}` is not UTF-8", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        GatewayConfig::parse(&text, base).map_err(|e| format!("`{}`: {e}", path.display()))
    }

    /// Parses configuration `text`, resolving relative paths against `base`.
    ///
    /// # Errors
    ///
    /// A message for TOML that does not parse or has an unknown key, a server with both or
    /// neither of `command` and `url` (or an empty `command`, or a name with `__`), an
    /// `[identity]` with both or neither key file, a `listen` that is not `HOST:PORT`, a
    /// non-loopback `listen` without `[identity]`, a zero limit.
    pub fn parse(text: &str, base: &Path) -> Result<GatewayConfig, String> {
        let raw: Raw = toml::from_str(text).map_err(|e| e.to_string())?;
        let resolve = |p: PathBuf| if p.is_absolute() { p } else { base.join(p) };
        let listen = match &raw.listen {
            None => None,
            Some(l) => Some(l.parse::<SocketAddr>().map_err(|e| {
                format!("`listen = \"{l}\"` is not an address and port like 127.0.0.1:8931 ({e})")
            })?),
        };
        let identity = match raw.identity {
            None => None,
            Some(i) => {
                let key = match (i.jwt_hs256_secret_file, i.jwt_rs256_public_key_file) {
                    (Some(s), None) => KeySource::Hs256Secret(resolve(s)),
                    (None, Some(k)) => KeySource::Rs256PublicKey(resolve(k)),
                    _ => {
                        return Err("[identity] needs exactly one of `jwt_hs256_secret_file` and `jwt_rs256_public_key_file`".to_string())
                    }
                };
                Some(IdentityConfig {
                    key,
                    roles_claim: i.roles_claim.unwrap_or_else(|| "roles".into()),
                    permissions_claim: i.permissions_claim.unwrap_or_else(|| "permissions".into()),
                    tenant_claim: i.tenant_claim.unwrap_or_else(|| "tenant".into()),
                    mode_claim: i.mode_claim,
                    connectors_claim: i.connectors_claim.unwrap_or_else(|| "connectors".into()),
                    issuer: i.issuer,
                    audience: i.audience,
                })
            }
        };
        if let Some(addr) = listen {
            if identity.is_none() && !addr.ip().is_loopback() {
                return Err(format!(
                    "`listen = \"{addr}\"` is not a loopback address: without [identity] every request is anonymous, so the gateway only listens on 127.0.0.1 or ::1"
                ));
            }
        }
        let mut limits = Limits::default();
        if let Some(l) = raw.limits {
            let secs = |v: Option<u64>, key: &str, d: Duration| match v {
                Some(0) => Err(format!("[limits] `{key}` must be at least 1")),
                Some(s) => Ok(Duration::from_secs(s)),
                None => Ok(d),
            };
            let count = |v: Option<usize>, key: &str, d: usize| match v {
                Some(0) => Err(format!("[limits] `{key}` must be at least 1")),
                Some(n) => Ok(n),
                None => Ok(d),
            };
            let d = Limits::default();
            limits = Limits {
                max_body_bytes: count(l.max_body_bytes, "max_body_bytes", d.max_body_bytes)?,
                request_timeout: secs(
                    l.request_timeout_secs,
                    "request_timeout_secs",
                    d.request_timeout,
                )?,
                idle_timeout: secs(l.idle_timeout_secs, "idle_timeout_secs", d.idle_timeout)?,
                max_connections: count(l.max_connections, "max_connections", d.max_connections)?,
                max_sessions: count(l.max_sessions, "max_sessions", d.max_sessions)?,
                max_sessions_per_principal: count(
                    l.max_sessions_per_principal,
                    "max_sessions_per_principal",
                    d.max_sessions_per_principal,
                )?,
                session_idle: secs(l.session_idle_secs, "session_idle_secs", d.session_idle)?,
                upstream_timeout: secs(
                    l.upstream_timeout_secs,
                    "upstream_timeout_secs",
                    d.upstream_timeout,
                )?,
                list_timeout: secs(l.list_timeout_secs, "list_timeout_secs", d.list_timeout)?,
                upstream_retry: secs(
                    l.upstream_retry_secs,
                    "upstream_retry_secs",
                    d.upstream_retry,
                )?,
                max_list_pages: count(l.max_list_pages, "max_list_pages", d.max_list_pages)?,
                max_tools_per_server: count(
                    l.max_tools_per_server,
                    "max_tools_per_server",
                    d.max_tools_per_server,
                )?,
                confirm_timeout: secs(
                    l.confirm_timeout_secs,
                    "confirm_timeout_secs",
                    d.confirm_timeout,
                )?,
            };
        }
        let mut servers = BTreeMap::new();
        for (name, s) in raw.servers {
            check_server_name(&name).map_err(|e| format!("[servers.{name}]: {e}"))?;
            let server = match (s.command, s.url) {
                (Some(c), None) if !c.is_empty() => ServerConfig::Command(c),
                (Some(_), None) => return Err(format!("[servers.{name}]: `command` is empty")),
                (None, Some(u)) if u.starts_with("http://") || u.starts_with("https://") => {
                    ServerConfig::Url(u)
                }
                (None, Some(u)) => {
                    return Err(format!(
                        "[servers.{name}]: `url = \"{u}\"` must start with http:// or https://"
                    ))
                }
                _ => {
                    return Err(format!(
                        "[servers.{name}] needs exactly one of `command` (stdio) and `url` (Streamable HTTP)"
                    ))
                }
            };
            servers.insert(name, server);
        }
        if servers.is_empty() {
            return Err("no upstream server: add a [servers.NAME] table".to_string());
        }
        let redis = raw.state.and_then(|s| s.redis);
        if let Some(url) = &redis {
            if !(url.starts_with("redis://")
                || url.starts_with("rediss://")
                || url.starts_with("redis+unix://")
                || url.starts_with("unix://"))
            {
                return Err(
                    "[state] `redis` must be a redis://, rediss:// or unix:// URL".to_string(),
                );
            }
        }
        let otlp_endpoint = raw.telemetry.and_then(|t| t.otlp_endpoint);
        if let Some(url) = &otlp_endpoint {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!(
                    "[telemetry] `otlp_endpoint = \"{url}\"` must start with http:// or https://"
                ));
            }
        }
        if raw.audit_fsync && raw.audit.is_none() {
            return Err(
                "`audit_fsync = true` needs `audit`: it syncs the audit log's records to the disk"
                    .to_string(),
            );
        }
        Ok(GatewayConfig {
            policy: resolve(raw.policy),
            listen,
            intent: raw.intent,
            audit: raw.audit.map(resolve),
            audit_fsync: raw.audit_fsync,
            advisory: raw.advisory,
            elicitation_only: raw.elicitation_only,
            connectors: raw.connectors,
            limits,
            identity,
            servers,
            redis,
            otlp_endpoint,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_example_parses_and_paths_resolve_against_the_file() {
        let c = GatewayConfig::parse(
            r#"
policy = "gateway.warden"
listen = "127.0.0.1:8931"
[identity]
jwt_hs256_secret_file = "jwt.secret"
roles_claim = "roles"
permissions_claim = "permissions"
tenant_claim = "tenant"
mode_claim = "mode"
[servers.fs]
command = ["mcp-server-filesystem", "/srv/data"]
[servers.notes]
url = "http://127.0.0.1:9100/mcp"
"#,
            Path::new("/etc/tw"),
        )
        .unwrap();
        assert_eq!(c.policy, PathBuf::from("/etc/tw/gateway.warden"));
        assert_eq!(c.listen, Some("127.0.0.1:8931".parse().unwrap()));
        let id = c.identity.unwrap();
        assert_eq!(id.key, KeySource::Hs256Secret("/etc/tw/jwt.secret".into()));
        assert_eq!(id.mode_claim.as_deref(), Some("mode"));
        assert_eq!(
            c.servers["fs"],
            ServerConfig::Command(vec!["mcp-server-filesystem".into(), "/srv/data".into()])
        );
        assert_eq!(
            c.servers["notes"],
            ServerConfig::Url("http://127.0.0.1:9100/mcp".into())
        );
    }

    #[test]
    fn audit_fsync_is_off_by_default_and_needs_an_audit_log() {
        let fs = "\n[servers.fs]\ncommand = [\"x\"]\n";
        let parse = |top: &str| {
            GatewayConfig::parse(&format!("policy = \"p\"\n{top}{fs}"), Path::new("/t"))
        };
        let c = parse("audit = \"a.jsonl\"\n").unwrap();
        assert_eq!(
            (c.audit, c.audit_fsync),
            (Some(PathBuf::from("/t/a.jsonl")), false)
        );
        let c = parse("audit = \"a.jsonl\"\naudit_fsync = true\n").unwrap();
        assert!(c.audit_fsync);
        assert_eq!(
            parse("audit_fsync = true\n").unwrap_err(),
            "`audit_fsync = true` needs `audit`: it syncs the audit log's records to the disk"
        );
    }

    #[test]
    fn the_connection_session_and_list_limits_have_defaults_and_can_be_set() {
        let fs = "\n[servers.fs]\ncommand = [\"x\"]\n";
        let c = GatewayConfig::parse(&format!("policy = \"p\"{fs}"), Path::new(".")).unwrap();
        let l = &c.limits;
        assert_eq!(
            (
                l.idle_timeout,
                l.max_connections,
                l.max_sessions_per_principal,
                l.list_timeout,
                l.upstream_retry,
                l.max_list_pages,
                l.max_tools_per_server
            ),
            (
                Duration::from_secs(120),
                1024,
                100,
                Duration::from_secs(10),
                Duration::from_secs(5),
                100,
                1000
            )
        );
        let c = GatewayConfig::parse(
            &format!(
                "policy = \"p\"\n[limits]\nidle_timeout_secs = 7\nmax_connections = 3\n\
                 max_sessions_per_principal = 4\nlist_timeout_secs = 2\nupstream_retry_secs = 9\n\
                 max_list_pages = 5\nmax_tools_per_server = 6\nmax_body_bytes = 10{fs}"
            ),
            Path::new("."),
        )
        .unwrap();
        let l = &c.limits;
        assert_eq!(
            (
                l.idle_timeout,
                l.max_connections,
                l.max_sessions_per_principal,
                l.list_timeout,
                l.upstream_retry,
                l.max_list_pages,
                l.max_tools_per_server,
                l.max_body_bytes,
                l.max_sessions
            ),
            (
                Duration::from_secs(7),
                3,
                4,
                Duration::from_secs(2),
                Duration::from_secs(9),
                5,
                6,
                10,
                10_000
            )
        );
    }

    #[test]
    fn bad_configurations_are_refused_with_the_key_named() {
        let err = |t: &str| GatewayConfig::parse(t, Path::new(".")).unwrap_err();
        let fs = "\n[servers.fs]\ncommand = [\"x\"]\n";
        assert!(err(&format!("policy = \"p\"\nlisten = \"0.0.0.0:1\"{fs}"))
            .contains("is not a loopback address"));
        assert!(err(&format!("policy = \"p\"\nlisten = \"nowhere\"{fs}"))
            .contains("is not an address and port"));
        assert!(err(&format!("policy = \"p\"\nlisen = \"127.0.0.1:1\"{fs}"))
            .contains("unknown field `lisen`"));
        assert!(
            err("policy = \"p\"\n[servers.a]\ncommand = [\"x\"]\nurl = \"http://h\"\n")
                .contains("needs exactly one of `command`")
        );
        assert!(err("policy = \"p\"\n[servers.a__b]\ncommand = [\"x\"]\n").contains("`__`"));
        assert_eq!(
            err("policy = \"p\"\n[servers.x_]\ncommand = [\"x\"]\n"),
            "[servers.x_]: server name `x_` ends with `_`: in mcp__x___<tool> the separator `__` would be read one `_` early (server `x`, tool `_<tool>`)"
        );
        assert!(err("policy = \"p\"\n").contains("no upstream server"));
        assert!(
            err(&format!("policy = \"p\"\n[limits]\nmax_sessions = 0{fs}"))
                .contains("`max_sessions` must be at least 1")
        );
        assert!(err(&format!(
            "policy = \"p\"\n[identity]\nroles_claim = \"r\"{fs}"
        ))
        .contains("exactly one of `jwt_hs256_secret_file`"));
    }
}
