//! `mcp-proxy`: enforce a policy in front of an MCP server over the stdio transport, see
//! docs/mcp-proxy.md. The work is [`toolwarden::mcp`]'s; this reads the flags and opens the
//! audit file.

use std::path::PathBuf;

use toolwarden::import::mcp::check_server_name;
use toolwarden::mcp::{stdio, AuditSink, Judge, MillisClock, Session, StdioOptions};

use super::commands::{load_policy, request_of};
use super::RequestArgs;

/// The proxy-specific flags.
pub(crate) struct ProxyArgs {
    /// Names are judged as `mcp__<server>__<tool>` when set.
    pub server: Option<String>,
    /// The audit log (JSON lines, appended).
    pub audit: Option<PathBuf>,
    /// Log decisions but forward every call and every tool.
    pub advisory: bool,
    /// The server command and its arguments.
    pub command: Vec<String>,
}

/// Runs the proxy; returns the server's exit code.
pub(crate) fn run(req: &RequestArgs, args: &ProxyArgs) -> Result<i32, String> {
    let policy = load_policy(&req.policy)?;
    let (request, intent) = request_of(&policy, req)?;
    if let Some(s) = &args.server {
        check_server_name(s).map_err(|e| format!("`--server`: {e}"))?;
    }
    let judge = Judge::new(policy, request, intent, args.server.clone(), args.advisory)?;
    let audit: Option<Box<dyn AuditSink>> = match &args.audit {
        Some(path) => Some(Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open audit file `{}`: {e}", path.display()))?,
        )),
        None => None,
    };
    let session = Session::new(judge, audit, Box::new(MillisClock));
    stdio::run(session, &args.command, StdioOptions::default())
}
