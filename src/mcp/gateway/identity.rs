//! Who is asking: a verified bearer JWT (HS256 or RS256, `exp` required and checked) read into
//! roles, permissions, tenant, mode and a connector allowlist; or the anonymous identity.

use std::collections::BTreeMap;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use serde_json::Value;

use super::config::{IdentityConfig, KeySource};
use crate::eval::Request;

/// The identity of one request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// The token's `sub` (`None`: anonymous; a token without one is refused).
    pub subject: Option<String>,
    /// Roles from the roles claim.
    pub roles: Vec<String>,
    /// Permissions from the permissions claim.
    pub permissions: Vec<String>,
    /// The tenant from the tenant claim.
    pub tenant: Option<String>,
    /// The mode from the mode claim (`None`: the policy's default mode).
    pub mode: Option<String>,
    /// The session-tier connector allowlist from the connectors claim, when the token has one.
    pub connectors: Option<Vec<String>>,
}

impl Identity {
    /// The anonymous identity: no roles, no permissions, no tenant, the default mode.
    pub fn anonymous() -> Identity {
        Identity::default()
    }

    /// The evaluator's request for this identity, with the configured connector tiers
    /// (`connectors`), the token's allowlist replacing the `session` tier.
    pub fn request(&self, connectors: &BTreeMap<String, Vec<String>>) -> Request {
        let mut r = match &self.mode {
            Some(m) => Request::new(m.clone()),
            None => Request::default_mode(),
        }
        .roles(self.roles.clone())
        .permissions(self.permissions.clone());
        if let Some(t) = &self.tenant {
            r = r.tenant(t.clone());
        }
        for (tier, servers) in connectors {
            if tier == "session" && self.connectors.is_some() {
                continue;
            }
            r = r.connectors(tier.clone(), servers.clone());
        }
        if let Some(c) = &self.connectors {
            r = r.connectors("session", c.clone());
        }
        r
    }

    /// A stable text naming this principal, whose sessions are its own: `anonymous` without
    /// a subject, else the JSON array `[sub, tenant]` (so no two subjects and tenants give the
    /// same text).
    pub fn principal(&self) -> String {
        match &self.subject {
            None => "anonymous".to_string(),
            Some(sub) => serde_json::json!([sub, self.tenant]).to_string(),
        }
    }
}

/// Why a token without a usable `sub` is refused.
const NO_SUBJECT: &str = "the token has no `sub` claim: the gateway keeps each subject's sessions apart, so a token must name its subject";

/// Verifies bearer tokens with the `[identity]` configuration.
pub struct Verifier {
    key: DecodingKey,
    validation: Validation,
    config: IdentityConfig,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// Reads the key file of `config`.
    ///
    /// # Errors
    ///
    /// A message when the key file cannot be read, is empty, or is not an RSA public key in PEM.
    pub fn new(config: &IdentityConfig) -> Result<Verifier, String> {
        let read = |p: &std::path::Path| {
            crate::limits::read_file(p, 1024 * 1024)
                .map_err(|e| format!("[identity]: cannot read `{}`: {e}", p.display()))
        };
        let (key, alg) = match &config.key {
            KeySource::Hs256Secret(p) => {
                let mut secret = read(p)?;
                while secret.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                    secret.pop();
                }
                if secret.is_empty() {
                    return Err(format!("[identity]: `{}` is empty", p.display()));
                }
                (DecodingKey::from_secret(&secret), Algorithm::HS256)
            }
            KeySource::Rs256PublicKey(p) => (
                DecodingKey::from_rsa_pem(&read(p)?).map_err(|e| {
                    format!(
                        "[identity]: `{}` is not an RSA public key in PEM: {e}",
                        p.display()
                    )
                })?,
                Algorithm::RS256,
            ),
        };
        let mut validation = Validation::new(alg);
        validation.leeway = 0;
        validation.validate_nbf = true;
        validation.validate_aud = config.audience.is_some();
        // A configured audience or issuer is required: a token without the claim, or with
        // one that is not a string (or, for `aud`, an array of strings), is refused.
        let mut required = vec!["exp", "sub"];
        if let Some(a) = &config.audience {
            validation.set_audience(&[a]);
            required.push("aud");
        }
        if let Some(i) = &config.issuer {
            validation.set_issuer(&[i]);
            required.push("iss");
        }
        validation.set_required_spec_claims(&required);
        Ok(Verifier {
            key,
            validation,
            config: config.clone(),
        })
    }

    /// Verifies the value of an `Authorization` header (`Bearer TOKEN`) and reads its claims.
    ///
    /// # Errors
    ///
    /// Why the request is unauthorized: no bearer token, a bad signature, an expired or
    /// malformed token, a header with `crit`, a claim of the wrong type, a configured `aud` or
    /// `iss` missing or different, no `sub` (or one of only whitespace): the subject is
    /// the principal whose sessions the request may use, and tokens without one would share.
    pub fn verify(&self, authorization: Option<&str>) -> Result<Identity, String> {
        let header = authorization.ok_or("no bearer token")?;
        let token = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .ok_or("the Authorization header is not `Bearer TOKEN`")?
            .trim();
        // RFC 7515 §4.1.11: the gateway understands no critical header extension, so a
        // token naming any (`crit`) is refused.
        let head = decode_header(token).map_err(|e| format!("invalid token: {e}"))?;
        if head.crit.is_some() {
            return Err(
                "invalid token: its header has a `crit` parameter, and the gateway understands no critical extension"
                    .to_string(),
            );
        }
        let data = decode::<serde_json::Map<String, Value>>(token, &self.key, &self.validation)
            .map_err(|e| match e.kind() {
                ErrorKind::MissingRequiredClaim(c) if c == "sub" => NO_SUBJECT.to_string(),
                _ => format!("invalid token: {e}"),
            })?;
        let claims = data.claims;
        let c = &self.config;
        let strings = |name: &str| -> Result<Option<Vec<String>>, String> {
            match claims.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(
                    s.split_whitespace().map(str::to_string).collect::<Vec<_>>(),
                )),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|v| {
                        v.as_str().map(str::to_string).ok_or_else(|| {
                            format!("claim `{name}` must be a string or an array of strings")
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(Some),
                Some(_) => Err(format!(
                    "claim `{name}` must be a string or an array of strings"
                )),
            }
        };
        let string = |name: &str| -> Result<Option<String>, String> {
            match claims.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(format!("claim `{name}` must be a string")),
            }
        };
        let subject = match string("sub")? {
            Some(s) if !s.trim().is_empty() => s,
            _ => return Err(NO_SUBJECT.to_string()),
        };
        Ok(Identity {
            subject: Some(subject),
            roles: strings(&c.roles_claim)?.unwrap_or_default(),
            permissions: strings(&c.permissions_claim)?.unwrap_or_default(),
            tenant: string(&c.tenant_claim)?,
            mode: match &c.mode_claim {
                Some(m) => string(m)?,
                None => None,
            },
            connectors: strings(&c.connectors_claim)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_of_different_subjects_and_tenants_never_collide() {
        let who = |sub: Option<&str>, tenant: Option<&str>| {
            Identity {
                subject: sub.map(str::to_string),
                tenant: tenant.map(str::to_string),
                ..Identity::default()
            }
            .principal()
        };
        assert_eq!(who(None, None), "anonymous");
        assert_eq!(who(Some("a|b"), None), r#"["a|b",null]"#);
        assert_eq!(who(Some("a"), Some("b|-")), r#"["a","b|-"]"#);
        assert_eq!(who(Some("anonymous"), None), r#"["anonymous",null]"#);
    }
}
