//! The decision log and advisory enforcement.
//!
//! An [`Auditor`] wraps [`Policy::offer`] and [`Policy::check_call`]: it makes the same
//! decision, writes one JSON line per tool decided to a writer the embedder owns, and, in
//! [`Enforcement::Advisory`], lets through what the policy would block while recording what
//! would have happened. Each record is one line:
//!
//! ```json
//! {"time":"2026-11-29T20:00:00Z","decision_id":"5f0c…","policy":"finance-assistant",
//!  "policy_version":3,"policy_sha256":"<hex>","generation":1,"request":"<hex sha-256>",
//!  "op":"offer","tool":"delete_invoice","decision":"deny","stage":"intent",
//!  "source":"finance.warden:28:33","enforcement":"enforce"}
//! ```
//!
//! `decision_id` names the decision (a random UUID, unique per record, as in the gateway's
//! log); `policy`, `policy_version` (`null` when the policy declares none) and `policy_sha256`
//! name the policy that made it, the digest as [`policy_sha256`] computes it (the gateway's
//! records carry the same). In advisory mode `decision` is what the caller got (`allow`) and
//! two more fields say what enforcement would have done: `"enforcement":"advisory"`,
//! `"would_be":"deny"` (present on every record, equal to `decision` when nothing was
//! overridden) and `"overridden":true|false`.
//!
//! `request` is the SHA-256 of the request and intent as canonical JSON, so equal requests
//! share a digest and the log holds no names or tenants. `time` comes from a [`Clock`]
//! (UTC, RFC 3339, second precision); tests inject a fixed one.
//!
//! Within a [`Session`], [`Auditor::check_call_session`] logs a call as `check_call` does, and
//! [`Auditor::declassify`] logs the user's explicit removal of a flow label as a record of its
//! own (`"op":"declassify"`, with `label` and `from`: the tool and turn that had put it there,
//! and no decision fields).
//!
//! What is written when: the records of one call ([`Auditor::offer`]: one per tool;
//! [`Auditor::check_call`]: one) are built whole, handed to the writer in one `write_all`, and
//! the writer is flushed, all before the decision is returned; a decision whose records cannot
//! be written is not returned ([`AuditError::Write`]). For a `File` that puts every record in
//! the kernel's cache before the caller acts on it, so a process killed at any point (`kill
//! -9` included) leaves every record of a decision it acted on. Surviving a power loss or a
//! kernel crash as well needs the data on the disk: [`Auditor::with_sync`] with a file calls
//! `fsync` after each flush (at the cost of a disk write per decision). A writer of another
//! kind (a socket, a buffer) gets the same `write_all` and `flush`; what those promise is its
//! own.
//!
//! ```
//! use toolwarden::audit::{Auditor, Enforcement, FixedClock};
//! use toolwarden::{Policy, Request};
//! let policy = Policy::parse("policy \"p\"\neffects none, write\nmode m { restrict none }\n\
//!     tool t { effect write }\n", "p.warden").unwrap();
//! let mut log = Vec::new();
//! let mut auditor = Auditor::new(&mut log, Enforcement::Advisory)
//!     .with_clock(FixedClock("2026-01-01T00:00:00Z".into()));
//! let offer = auditor.offer(&policy, 1, &Request::new("m"), &policy.classify(""), ["t"]).unwrap();
//! assert_eq!(offer.visible().collect::<Vec<_>>(), ["t"]);   // advisory: let through
//! drop(auditor);
//! let line = String::from_utf8(log).unwrap();
//! assert!(line.contains(r#""decision":"allow""#) && line.contains(r#""would_be":"deny""#));
//! assert!(line.contains(r#""decision_id":""#) && line.contains(r#""policy_sha256":""#));
//! ```

use std::io::Write;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::classify::Intent;
use crate::decision::{Decision, Offer, PendingCall, Turn, Verdict};
use crate::eval::{LabelSource, Request, RequestError, Session, SessionError};
use crate::policy::Policy;

/// Whether decisions are enforced or only logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enforcement {
    /// Decisions are returned as the policy makes them.
    Enforce,
    /// Every tool is offered and every call allowed; the log records what enforcement would
    /// have done. For trying a policy on live traffic before turning it on.
    Advisory,
}

impl Enforcement {
    /// `"enforce"` or `"advisory"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Enforcement::Enforce => "enforce",
            Enforcement::Advisory => "advisory",
        }
    }
}

/// A source of the `time` field: UTC, RFC 3339 (`2026-11-29T20:00:00Z`).
pub trait Clock {
    /// The current time as RFC 3339 UTC text.
    fn now(&self) -> String;
}

/// The system clock, at second precision.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> String {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        rfc3339(secs)
    }
}

/// A clock that always says the same time (for tests and replays).
#[derive(Clone, Debug)]
pub struct FixedClock(pub String);

impl Clock for FixedClock {
    fn now(&self) -> String {
        self.0.clone()
    }
}

/// Formats seconds since the Unix epoch as RFC 3339 UTC (`1970-01-01T00:00:00Z`).
pub fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Hex SHA-256 of a policy's text: over each of its source files in order (the policy's file,
/// then its includes), the file's length in bytes (8 bytes, little-endian) and then its text.
/// The same text has the same digest wherever it is read from; the `policy_sha256` of every
/// audit record (the [`Auditor`]'s and the gateway's).
pub fn policy_sha256(policy: &Policy) -> String {
    let sources = policy.sources();
    let mut h = Sha256::new();
    for i in 0..sources.len() {
        let file = crate::span::FileId(u32::try_from(i).unwrap_or(u32::MAX));
        let text = sources.text(file);
        h.update((text.len() as u64).to_le_bytes());
        h.update(text.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A fresh `decision_id`: a random version 4 UUID.
pub fn new_decision_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Hex SHA-256 of the request and the intents that count, as canonical JSON.
pub fn request_digest(request: &Request, intent: &Intent) -> String {
    let canonical = json!({ "request": request, "intents": intent.intents });
    let bytes = serde_json::to_vec(&canonical).unwrap_or_default();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The labels `policy` declares as a readable list (`` `a`, `b` ``, or `none`).
fn declared_list(policy: &Policy) -> String {
    let names: Vec<String> = policy.labels().map(|l| format!("`{l}`")).collect();
    if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    }
}

/// Why a decision could not be made or logged.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The request does not fit the policy (nothing was logged).
    #[error(transparent)]
    Request(#[from] RequestError),
    /// Writing the log failed; the decision was not returned, since an unlogged decision is
    /// what an audit log exists to prevent.
    #[error("cannot write the decision log: {0}")]
    Write(#[from] std::io::Error),
}

/// Decides through a policy and logs every decision as a JSON line. See the
/// [module docs](self).
pub struct Auditor<W: Write> {
    writer: W,
    enforcement: Enforcement,
    clock: Box<dyn Clock + Send + Sync>,
    /// Called after each flush when set ([`Auditor::with_sync`]).
    sync: Option<fn(&mut W) -> std::io::Result<()>>,
    /// The last policy's digest, by the address of its compiled form (a policy is immutable,
    /// and kept alive by the `Policy` handle the caller passes, so an address names one text
    /// while it is live; the handle kept here keeps it live).
    digest: Option<(Policy, String)>,
}

impl Auditor<std::fs::File> {
    /// Has the file's data synced to its disk (`fsync`, as `File::sync_data`) after each
    /// flush, so a record survives a power loss or a kernel crash too, not only the process
    /// dying; each decision then waits for a disk write.
    pub fn with_sync(self) -> Auditor<std::fs::File> {
        self.with_sync_by(|f: &mut std::fs::File| f.sync_data())
    }
}

impl<W: Write> std::fmt::Debug for Auditor<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auditor")
            .field("enforcement", &self.enforcement)
            .finish()
    }
}

impl<W: Write> Auditor<W> {
    /// An auditor writing to `writer` (a file, a socket, a `Vec<u8>`; the embedder owns it)
    /// with the system clock.
    pub fn new(writer: W, enforcement: Enforcement) -> Auditor<W> {
        Auditor {
            writer,
            enforcement,
            clock: Box::new(SystemClock),
            sync: None,
            digest: None,
        }
    }

    /// Replaces the clock (e.g. a [`FixedClock`] in tests).
    pub fn with_clock(mut self, clock: impl Clock + Send + Sync + 'static) -> Auditor<W> {
        self.clock = Box::new(clock);
        self
    }

    /// The digest of `policy` ([`policy_sha256`]), computed once per policy.
    fn policy_digest(&mut self, policy: &Policy) -> String {
        match &self.digest {
            Some((p, d)) if std::sync::Arc::ptr_eq(&p.inner, &policy.inner) => d.clone(),
            _ => {
                let d = policy_sha256(policy);
                self.digest = Some((policy.clone(), d.clone()));
                d
            }
        }
    }

    /// The enforcement mode.
    pub fn enforcement(&self) -> Enforcement {
        self.enforcement
    }

    /// Has `sync` called on the writer after each flush, before the decision is returned (an
    /// error of it is an [`AuditError::Write`], and the decision is not returned).
    pub fn with_sync_by(mut self, sync: fn(&mut W) -> std::io::Result<()>) -> Auditor<W> {
        self.sync = Some(sync);
        self
    }

    /// Gives the writer back.
    pub fn into_writer(self) -> W {
        self.writer
    }

    /// [`Policy::offer`], logged: one record per tool (`"op":"offer"`). `generation` labels the
    /// policy version served (e.g. the generation of a watched policy's snapshot; use 1 for a policy
    /// loaded once). In advisory mode every denied tool is offered (`allow`) and its record
    /// says `"would_be":"deny"`.
    ///
    /// # Errors
    ///
    /// [`AuditError::Request`] as for [`Policy::offer`]; [`AuditError::Write`] when the log
    /// cannot be written.
    pub fn offer<'t, I>(
        &mut self,
        policy: &Policy,
        generation: u64,
        request: &Request,
        intent: &Intent,
        tools: I,
    ) -> Result<Offer<'t>, AuditError>
    where
        I: IntoIterator<Item = &'t str>,
    {
        let mut offer = policy.offer(request, intent, tools)?;
        let digest = request_digest(request, intent);
        let policy_digest = self.policy_digest(policy);
        let time = self.clock.now();
        let mut out = Vec::new();
        for (name, d) in &mut offer.entries {
            let would_be = d.decision;
            if self.enforcement == Enforcement::Advisory && d.decision == Decision::Deny {
                d.decision = Decision::Allow;
            }
            let record = self.record(
                &time,
                (policy, &policy_digest),
                generation,
                &digest,
                "offer",
                name,
                (d.decision, would_be),
                d.stage.map(|s| s.as_str()),
                policy.rule_source(d.rule).map(|l| l.to_string()),
            );
            out.push(record);
        }
        self.write(&out)?;
        Ok(offer)
    }

    /// [`Policy::check_call_with`], logged as one record (`"op":"call"`). In advisory mode a
    /// denied or unconfirmed call is allowed (its arguments handed back, confirmation fields
    /// removed, and the turn counted) and the record says what enforcement would have done.
    ///
    /// # Errors
    ///
    /// As for [`Auditor::offer`].
    #[allow(clippy::too_many_arguments)]
    pub fn check_call(
        &mut self,
        policy: &Policy,
        generation: u64,
        request: &Request,
        intent: &Intent,
        turn: &mut Turn,
        tool: &str,
        args: &Value,
        pending: Option<&PendingCall>,
    ) -> Result<Verdict, AuditError> {
        let verdict = policy.check_call_with(request, intent, turn, tool, args, pending)?;
        self.log_call(
            policy, generation, request, intent, turn, tool, args, verdict,
        )
    }

    /// [`Policy::check_call_strict`] (a confirmation is trusted only against `pending`), logged
    /// and under advisory enforcement exactly as [`Auditor::check_call`].
    ///
    /// # Errors
    ///
    /// As for [`Auditor::offer`].
    #[allow(clippy::too_many_arguments)]
    pub fn check_call_strict(
        &mut self,
        policy: &Policy,
        generation: u64,
        request: &Request,
        intent: &Intent,
        turn: &mut Turn,
        tool: &str,
        args: &Value,
        pending: Option<&PendingCall>,
    ) -> Result<Verdict, AuditError> {
        let verdict = policy.check_call_strict(request, intent, turn, tool, args, pending)?;
        self.log_call(
            policy, generation, request, intent, turn, tool, args, verdict,
        )
    }

    /// [`Policy::check_call_session`], logged as one record (`"op":"call"`) exactly as
    /// [`Auditor::check_call`]. In advisory mode a call the policy would deny or hold is allowed
    /// and the session is updated as for an allowed call: the labels its tool taints go on it,
    /// the turn counts it, and the pending call its hold would have made is not kept.
    ///
    /// The session changes only when the decision is returned: on an error (the session cannot
    /// be used with `policy`, or the log cannot be written) it is as it was.
    ///
    /// # Errors
    ///
    /// [`AuditError::Request`] as for [`Policy::check_call_session`] (a session of another
    /// policy or version, or with an undeclared label, is [`RequestError::Session`]);
    /// [`AuditError::Write`] when the log cannot be written.
    #[allow(clippy::too_many_arguments)]
    pub fn check_call_session(
        &mut self,
        policy: &Policy,
        generation: u64,
        request: &Request,
        intent: &Intent,
        session: &mut Session,
        tool: &str,
        args: &Value,
    ) -> Result<Verdict, AuditError> {
        let mut next = session.clone();
        let verdict = policy.check_call_session(request, intent, &mut next, tool, args)?;
        let would_be = verdict.decision;
        let mut turn = next.turn_state();
        let verdict = self.log_call(
            policy, generation, request, intent, &mut turn, tool, args, verdict,
        )?;
        if would_be != Decision::Allow && verdict.decision == Decision::Allow {
            // Advisory: the call runs. Its hold (if it made a new one) goes, its labels come.
            if would_be == Decision::Confirm
                && next.pending().map(|p| &p.digest) != session.pending().map(|p| &p.digest)
            {
                match (session.pending().cloned(), session.pending_turn()) {
                    (Some(p), Some(t)) => next.restore_pending(p, t),
                    _ => {
                        next.take_pending();
                    }
                }
            }
            next.set_turn_state(turn);
            next.record(policy, tool)
                .map_err(|e| AuditError::Request(RequestError::Session(e)))?;
        }
        *session = next;
        Ok(verdict)
    }

    /// [`Session::declassify`], logged: takes `label` off `session` (the user's explicit reset)
    /// and writes one record, `"op":"declassify"` with the `label` and where it came from
    /// (`from`: `tool` and `turn`). Returns that source, or `None` when the label is declared
    /// but not on the session (then nothing is written and the session is unchanged).
    ///
    /// # Errors
    ///
    /// [`AuditError::Request`] with [`RequestError::Session`] when the session belongs to
    /// another policy or version, holds a label `policy` does not declare, or `label` is not
    /// one `policy` declares; [`AuditError::Write`] when the log cannot be written (the label
    /// then stays on the session).
    pub fn declassify(
        &mut self,
        policy: &Policy,
        generation: u64,
        session: &mut Session,
        label: &str,
    ) -> Result<Option<LabelSource>, AuditError> {
        let session_error = |e| AuditError::Request(RequestError::Session(e));
        session.mask_for(policy).map_err(session_error)?;
        if !policy.labels().any(|l| l == label) {
            return Err(session_error(SessionError::UndeclaredLabel {
                label: label.to_string(),
                known: declared_list(policy),
            }));
        }
        let mut next = session.clone();
        let Some(source) = next.declassify(label) else {
            return Ok(None);
        };
        let policy_digest = self.policy_digest(policy);
        let mut r = json!({
            "time": self.clock.now(),
            "decision_id": new_decision_id(),
            "policy": policy.name(),
            "policy_version": policy.version(),
            "policy_sha256": policy_digest,
            "generation": generation,
            "op": "declassify",
            "label": label,
            "from": { "tool": source.tool, "turn": source.turn },
            "enforcement": self.enforcement.as_str(),
        });
        if self.enforcement == Enforcement::Advisory {
            r["overridden"] = json!(false);
        }
        self.write(&[r])?;
        *session = next;
        Ok(Some(source))
    }

    /// Applies advisory enforcement to `verdict` and writes its record.
    #[allow(clippy::too_many_arguments)]
    fn log_call(
        &mut self,
        policy: &Policy,
        generation: u64,
        request: &Request,
        intent: &Intent,
        turn: &mut Turn,
        tool: &str,
        args: &Value,
        mut verdict: Verdict,
    ) -> Result<Verdict, AuditError> {
        let would_be = verdict.decision;
        let stage = verdict.stage.map(|s| s.as_str());
        let source = verdict.source.clone();
        if self.enforcement == Enforcement::Advisory && verdict.decision != Decision::Allow {
            verdict.decision = Decision::Allow;
            verdict.would_be = Some(would_be);
            verdict.reason = format!("advisory: would be {would_be}: {}", verdict.reason);
            let mut exec = args.as_object().cloned().unwrap_or_default();
            for field in &verdict.confirm_fields {
                exec.remove(field);
            }
            verdict.args_for_execution = Some(exec);
            verdict.pending = None;
            if verdict.operation_type != Some("read_only") {
                turn.transactional_calls = turn.transactional_calls.saturating_add(1);
            }
        }
        let digest = request_digest(request, intent);
        let policy_digest = self.policy_digest(policy);
        let time = self.clock.now();
        let record = self.record(
            &time,
            (policy, &policy_digest),
            generation,
            &digest,
            "call",
            tool,
            (verdict.decision, would_be),
            stage,
            source,
        );
        self.write(&[record])?;
        Ok(verdict)
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        time: &str,
        (policy, policy_digest): (&Policy, &str),
        generation: u64,
        digest: &str,
        op: &str,
        tool: &str,
        (decision, would_be): (Decision, Decision),
        stage: Option<&str>,
        source: Option<String>,
    ) -> Value {
        let mut r = json!({
            "time": time,
            "decision_id": new_decision_id(),
            "policy": policy.name(),
            "policy_version": policy.version(),
            "policy_sha256": policy_digest,
            "generation": generation,
            "request": digest,
            "op": op,
            "tool": tool,
            "decision": decision,
            "stage": stage,
            "source": source,
            "enforcement": self.enforcement.as_str(),
        });
        if self.enforcement == Enforcement::Advisory {
            r["would_be"] = json!(would_be);
            r["overridden"] = json!(decision != would_be);
        }
        r
    }

    fn write(&mut self, records: &[Value]) -> Result<(), std::io::Error> {
        let mut buf = Vec::new();
        for r in records {
            serde_json::to_writer(&mut buf, r)?;
            buf.push(b'\n');
        }
        self.writer.write_all(&buf)?;
        self.writer.flush()?;
        match self.sync {
            Some(sync) => sync(&mut self.writer),
            None => Ok(()),
        }
    }
}
