//! The audit log of the proxy and the gateway: one JSON line per decision, written with one
//! `write` of the whole line and flushed before the call it records is forwarded.
//!
//! Each record names its decision (`decision_id`, a random UUID) and the policy that made it
//! (`policy`, `policy_version`, `policy_sha256`, [`PolicyRef`]).

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
    /// The record and its newline in one buffer, handed to one `write_all` (for a file opened
    /// to append: one `write(2)`, so lines of several writers never interleave and a killed
    /// process leaves whole lines), then `flush`. Nothing calls `fsync`: a record written is in
    /// the kernel's cache, safe from the process dying, not from the machine losing power.
    fn record(&mut self, record: &Value) -> std::io::Result<()> {
        let mut line = record.to_string();
        line.push('\n');
        self.write_all(line.as_bytes())?;
        self.flush()
    }
}

/// An audit file whose every record is also synced to its disk: [`AuditSink::record`] writes
/// the line with one `write_all`, flushes, then calls `File::sync_data` (`fsync`), so a record
/// survives a power loss or a kernel crash, not only the process dying. Each record waits for
/// a disk write.
#[derive(Debug)]
pub struct SyncedFile(pub std::fs::File);

impl AuditSink for SyncedFile {
    fn record(&mut self, record: &Value) -> std::io::Result<()> {
        self.0.record(record)?;
        self.0.sync_data()
    }
}

/// The policy a record's decision was made by: its name and version (from its `policy`
/// declaration) and the hex SHA-256 of its source, so a record names exactly the text that
/// decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyRef {
    /// The policy's name.
    pub name: String,
    /// Its version, when declared.
    pub version: Option<u64>,
    /// Hex SHA-256 over the text of each source file of the policy, each after its length in
    /// bytes (8 bytes, little-endian): the same text has the same digest wherever it is read
    /// from ([`crate::audit::policy_sha256`]).
    pub sha256: String,
}

impl PolicyRef {
    /// The reference of `policy`.
    pub fn of(policy: &crate::Policy) -> PolicyRef {
        PolicyRef {
            name: policy.name().to_string(),
            version: policy.version(),
            sha256: crate::audit::policy_sha256(policy),
        }
    }
}

pub use crate::audit::new_decision_id;

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
    /// The record as its JSON line: `time`, `event: "tools/call"`, `decision_id`, the
    /// policy's `policy`, `policy_version` and `policy_sha256`, the fields, `advisory`.
    pub fn to_json(
        &self,
        time: String,
        advisory: bool,
        policy: &PolicyRef,
        decision_id: &str,
    ) -> Value {
        json!({
            "time": time,
            "event": "tools/call",
            "decision_id": decision_id,
            "policy": policy.name,
            "policy_version": policy.version,
            "policy_sha256": policy.sha256,
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
