//! The proxy's audit log: one JSON line per decision, written and flushed before the call it
//! records is forwarded.

use std::io::Write;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::audit::Clock;

/// Where audit records go. Implemented for every [`Write`] (one JSON line per record, flushed
/// each time); a test or a gateway can collect records in memory instead.
pub trait AuditSink: Send {
    /// Writes one record and makes it durable as far as the sink can (a file is flushed).
    ///
    /// # Errors
    ///
    /// The I/O error; the proxy then forwards no call this record was about.
    fn record(&mut self, record: &Value) -> std::io::Result<()>;
}

impl<W: Write + Send> AuditSink for W {
    fn record(&mut self, record: &Value) -> std::io::Result<()> {
        let mut line = record.to_string();
        line.push('\n');
        self.write_all(line.as_bytes())?;
        self.flush()
    }
}

/// The system clock at millisecond precision (`2026-11-29T19:54:58.682Z`), the `time` of the
/// proxy's records.
#[derive(Clone, Copy, Debug, Default)]
pub struct MillisClock;

impl Clock for MillisClock {
    fn now(&self) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let secs = crate::audit::rfc3339(now.as_secs());
        // `…:SSZ` -> `…:SS.mmmZ`
        format!("{}.{:03}Z", secs.trim_end_matches('Z'), now.subsec_millis())
    }
}

/// Hex SHA-256 of the canonical JSON of `args` (object keys sorted at every depth): the
/// `args_sha256` of a call record.
pub fn args_digest(args: &Value) -> String {
    let text = crate::canonical_json_text(args);
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The fields of one `tools/call` record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallRecord {
    /// The tool's name as the server knows it.
    pub tool: String,
    /// The name the policy judged (`mcp__<server>__<tool>` with a server name).
    pub policy_tool: String,
    /// [`args_digest`] of the arguments as they arrived.
    pub args_sha256: String,
    /// `allow`, `confirm` or `deny`.
    pub decision: &'static str,
    /// The deciding stage (`error` when no decision could be made).
    pub stage: Option<String>,
    /// `file:line:col` of the deciding rule.
    pub rule: Option<String>,
    /// Why, in one sentence.
    pub reason: String,
    /// Whether the call is forwarded to the server.
    pub forwarded: bool,
}

impl CallRecord {
    /// The record as its JSON line: `time`, `event: "tools/call"`, the fields, `advisory`.
    pub fn to_json(&self, time: String, advisory: bool) -> Value {
        json!({
            "time": time,
            "event": "tools/call",
            "tool": self.tool,
            "policy_tool": self.policy_tool,
            "args_sha256": self.args_sha256,
            "decision": self.decision,
            "stage": self.stage,
            "rule": self.rule,
            "reason": self.reason,
            "advisory": advisory,
            "forwarded": self.forwarded,
        })
    }
}
