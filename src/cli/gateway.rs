//! `gateway`: one MCP server in front of several, judging every call; see docs/gateway.md.
//! The work is [`toolwarden::mcp::gateway`]'s; this reads the configuration and the flags.

use std::path::Path;

use toolwarden::mcp::gateway::{self, GatewayConfig, Identity};

use super::commands::load_policy;

/// The identity of the stdio client, from the command line.
pub(crate) struct StdioIdentity {
    /// Roles (`--role`).
    pub roles: Vec<String>,
    /// Permissions (`--permission`).
    pub permissions: Vec<String>,
    /// Tenant (`--tenant`).
    pub tenant: Option<String>,
    /// Mode (`--mode`).
    pub mode: Option<String>,
}

/// Runs the gateway of the configuration file `config`; returns the exit code.
pub(crate) fn run(config: &Path, who: StdioIdentity) -> Result<i32, String> {
    let config = GatewayConfig::from_file(config)?;
    if config.listen.is_some()
        && (!who.roles.is_empty()
            || !who.permissions.is_empty()
            || who.tenant.is_some()
            || who.mode.is_some())
    {
        return Err(
            "--role, --permission, --tenant and --mode are for stdio (no `listen`): over HTTP, the identity comes from each request's token, or is anonymous".to_string(),
        );
    }
    let policy = load_policy(&config.policy)?;
    let identity = Identity {
        subject: None,
        roles: who.roles,
        permissions: who.permissions,
        tenant: who.tenant,
        mode: who.mode,
        connectors: None,
    };
    gateway::serve(policy, config, identity)?;
    Ok(0)
}
