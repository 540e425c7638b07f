//! [`Session`]: what one agent session has seen. The flow labels its tools put on it (each with
//! the tool, turn and time that put it there), the current turn's transactional calls, and the
//! call awaiting the user's confirmation. `check_call_session` and `offer_session` (in
//! `call.rs` and `stages.rs`) read it; this file holds the type, its methods and its JSON form.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::decision::{PendingCall, Turn};

use super::Policy;

/// The version of the session's JSON form that [`Session::to_json`] writes and
/// [`Session::from_json`] reads.
pub const SESSION_FORMAT: u32 = 1;

/// Where a label on the session came from: the tool whose call put it there, in which turn,
/// and when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelSource {
    /// The label.
    pub label: String,
    /// The tool whose call (allowed by `check_call_session`, or recorded with
    /// [`Session::record`]) put it there.
    pub tool: String,
    /// The turn of that call (the first turn is 1).
    pub turn: u32,
    /// When, in seconds since the Unix epoch.
    pub time: u64,
}

/// What one agent session has seen, for the `after` blocks of a policy: the labels on it with
/// their sources, the current turn (its number and its transactional calls, what [`Turn`]
/// counts) and the call awaiting the user's confirmation.
///
/// A new session is bound to no policy; the first call judged or recorded with a policy binds
/// it to that policy's name and version, like a [`PendingCall`], and a session bound to another
/// policy or version is refused from then on. Labels are added when
/// [`Policy::check_call_session`] allows a call of a tool that `taints` (an allowed call is
/// assumed to run) and by [`Session::record`] for calls the runtime made without the guard;
/// [`Session::declassify`] is the user's explicit reset. [`Session::next_turn`] starts a new
/// turn: it resets the turn's count, not the labels.
///
/// Serializable: [`Session::to_json`] and [`Session::from_json`] keep it in a file between
/// runs, and `from_json` refuses a corrupt file, another policy's session and a label the
/// policy does not declare.
///
/// ```
/// use serde_json::json;
/// use toolwarden::{Decision, Policy, Request, Session, Stage};
/// let policy = Policy::parse(
///     "policy \"p\" version 1\neffects none, export\nmode m { }\nconfirm fields \"confirmed\"\n\
///      labels untrusted\ntool get_webpage { effect none  taints untrusted }\n\
///      tool post { effect export }\nafter untrusted { deny export }\n",
///     "p.warden",
/// ).unwrap();
/// let (request, intent) = (Request::new("m"), policy.fallback_intent());
/// let mut session = Session::new();
/// let v = policy.check_call_session(&request, &intent, &mut session, "post", &json!({})).unwrap();
/// assert_eq!(v.decision, Decision::Allow);
/// policy.check_call_session(&request, &intent, &mut session, "get_webpage", &json!({})).unwrap();
/// assert!(session.has_label("untrusted"));
/// let v = policy.check_call_session(&request, &intent, &mut session, "post", &json!({})).unwrap();
/// assert_eq!((v.decision, v.stage), (Decision::Deny, Some(Stage::Flow)));
/// ```
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    /// [`SESSION_FORMAT`].
    format: u32,
    /// The policy the session is bound to (`None` until first used).
    policy: Option<String>,
    /// Its version.
    policy_version: Option<u64>,
    /// The current turn's number, from 1.
    turn: u32,
    /// The current turn's transactional calls.
    transactional_calls: u32,
    /// The labels on the session, each once, in the order they came.
    labels: Vec<LabelSource>,
    /// The call awaiting the user's confirmation.
    pending: Option<PendingCall>,
    /// The turn in which `pending` was held.
    pending_turn: Option<u32>,
    /// The labels as a mask over the bound policy's labels, once computed.
    #[serde(skip)]
    mask: Option<u8>,
}

impl PartialEq for Session {
    /// Equal when everything but the cached label mask is equal.
    fn eq(&self, other: &Session) -> bool {
        self.format == other.format
            && self.policy == other.policy
            && self.policy_version == other.policy_version
            && self.turn == other.turn
            && self.transactional_calls == other.transactional_calls
            && self.labels == other.labels
            && self.pending == other.pending
            && self.pending_turn == other.pending_turn
    }
}

impl Eq for Session {}

impl Default for Session {
    fn default() -> Session {
        Session::new()
    }
}

/// Why a session cannot be used with a policy.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    /// The text is not a session (not JSON, a missing or unknown field, a wrong type).
    #[error("the session is corrupt: {message}")]
    Corrupt {
        /// What is wrong, from the JSON reader.
        message: String,
    },
    /// The session was written in another format version.
    #[error("the session is in format {found}; this toolwarden reads format {SESSION_FORMAT}")]
    Format {
        /// The format the session names.
        found: u32,
    },
    /// The session (or its pending call) belongs to another policy or version.
    #[error("the session belongs to policy `{policy}` version {version}, not `{expected}` version {expected_version}; start a new session")]
    OtherPolicy {
        /// The session's policy.
        policy: String,
        /// Its version (`none` when it declares none).
        version: String,
        /// The policy it was used with.
        expected: String,
        /// That policy's version (`none` when it declares none).
        expected_version: String,
    },
    /// The session holds a label the policy does not declare.
    #[error(
        "the session holds label `{label}`, which the policy does not declare; it declares {known}"
    )]
    UndeclaredLabel {
        /// The label.
        label: String,
        /// The declared labels, as a readable list.
        known: String,
    },
}

/// The current time in seconds since the Unix epoch (0 if the clock is before it).
fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn version_text(v: Option<u64>) -> String {
    v.map_or_else(|| "none".to_string(), |v| v.to_string())
}

impl Session {
    /// A new session: turn 1, no label, no call made, nothing pending, bound to no policy.
    pub fn new() -> Session {
        Session {
            format: SESSION_FORMAT,
            policy: None,
            policy_version: None,
            turn: 1,
            transactional_calls: 0,
            labels: Vec::new(),
            pending: None,
            pending_turn: None,
            mask: Some(0),
        }
    }

    /// A new session bound to `policy` that already holds `labels`, each sourced from `source`
    /// (what put it there, for the reasons: a test case, `--labels`) in turn 1, now: for
    /// explaining and testing decisions under a label set.
    ///
    /// # Errors
    ///
    /// [`SessionError::UndeclaredLabel`] for a label `policy` does not declare.
    pub fn with_labels(
        policy: &Policy,
        labels: &[&str],
        source: &str,
    ) -> Result<Session, SessionError> {
        let declared = &policy.tables().labels;
        let mut mask = 0u8;
        for l in labels {
            match declared.iter().position(|d| **d == **l) {
                Some(i) => mask |= 1u8 << i,
                None => {
                    return Err(SessionError::UndeclaredLabel {
                        label: l.to_string(),
                        known: super::request::known(declared),
                    })
                }
            }
        }
        let mut s = Session::new();
        s.bind(policy)?;
        s.taint(policy, mask, source);
        Ok(s)
    }

    /// The labels on the session with their sources, in the order they came.
    pub fn labels(&self) -> &[LabelSource] {
        &self.labels
    }

    /// Whether `label` is on the session.
    pub fn has_label(&self, label: &str) -> bool {
        self.labels.iter().any(|l| l.label == label)
    }

    /// The current turn's number (the first turn is 1).
    pub fn turn(&self) -> u32 {
        self.turn
    }

    /// The current turn's count of transactional calls, as a [`Turn`].
    pub fn turn_state(&self) -> Turn {
        Turn {
            transactional_calls: self.transactional_calls,
        }
    }

    /// Sets the current turn's count of transactional calls (the audit log's advisory
    /// enforcement counts a call it lets through).
    pub(crate) fn set_turn_state(&mut self, turn: Turn) {
        self.transactional_calls = turn.transactional_calls;
    }

    /// The call awaiting the user's confirmation, if any.
    pub fn pending(&self) -> Option<&PendingCall> {
        self.pending.as_ref()
    }

    /// The turn in which the pending call was held, if one is.
    pub fn pending_turn(&self) -> Option<u32> {
        self.pending.as_ref().and(self.pending_turn)
    }

    /// Removes and returns the call awaiting confirmation (the user declined it, or the
    /// caller judges a call as if nothing were pending).
    pub fn take_pending(&mut self) -> Option<PendingCall> {
        self.pending_turn = None;
        self.pending.take()
    }

    /// Puts back a call awaiting confirmation, held in `turn` (what [`Session::take_pending`]
    /// and [`Session::pending_turn`] returned).
    pub fn restore_pending(&mut self, pending: PendingCall, turn: u32) {
        self.pending = Some(pending);
        self.pending_turn = Some(turn);
    }

    /// The policy the session is bound to, with its version; `None` before its first use.
    pub fn policy(&self) -> Option<(&str, Option<u64>)> {
        self.policy.as_deref().map(|p| (p, self.policy_version))
    }

    /// Starts a new turn: the turn number goes up by one and its count of transactional calls
    /// starts again from zero. The labels stay (what the session read is still in its
    /// context), and so does a call awaiting confirmation.
    pub fn next_turn(&mut self) {
        self.turn = self.turn.saturating_add(1);
        self.transactional_calls = 0;
    }

    /// Takes `label` off the session: the user's explicit reset, for an audit log to record.
    /// Returns where the label came from, or `None` when it was not on the session.
    pub fn declassify(&mut self, label: &str) -> Option<LabelSource> {
        let i = self.labels.iter().position(|l| l.label == label)?;
        self.mask = None;
        Some(self.labels.remove(i))
    }

    /// Records a call of `tool` that the runtime ran without the guard: the labels the
    /// tool `taints` (in `policy`) are added to the session, from this turn and now. Returns
    /// the labels that were not on the session before, in the policy's order. A tool the
    /// policy does not know adds nothing (unless `unknown allow` defaults taint).
    ///
    /// # Errors
    ///
    /// [`SessionError`] when the session belongs to another policy or version, or holds a
    /// label the policy does not declare; the session is unchanged then.
    pub fn record(&mut self, policy: &Policy, tool: &str) -> Result<Vec<String>, SessionError> {
        self.bind(policy)?;
        let taints = policy.resolve_tool(tool).1.map_or(0, |r| r.taints);
        Ok(self.taint(policy, taints, tool))
    }

    /// Records a call of the MCP tool `tool` (the name the policy judges) that a proxy or
    /// gateway forwarded: the labels of [`Policy::call_labels`] (the tool's `taints`, and the
    /// labels of `taint openworld` when `open_world`, that is when the server's
    /// `annotations.openWorldHint` is true or missing) are added, from this turn and now.
    /// Returns the labels that were not on the session before, in the policy's order.
    ///
    /// # Errors
    ///
    /// As [`Session::record`]; the session is unchanged then.
    pub fn record_mcp(
        &mut self,
        policy: &Policy,
        tool: &str,
        open_world: bool,
    ) -> Result<Vec<String>, SessionError> {
        self.bind(policy)?;
        Ok(self.taint(policy, policy.call_mask(tool, open_world), tool))
    }

    /// Adds the labels of `mask` that are not yet on the session, as put there by `tool` in
    /// this turn; returns their names. The session must be bound to `policy`.
    #[inline]
    pub(crate) fn taint(&mut self, policy: &Policy, mask: u8, tool: &str) -> Vec<String> {
        let have = self.mask.unwrap_or(0);
        let new = mask & !have;
        if new == 0 {
            return Vec::new();
        }
        self.add_labels(policy, have, new, tool)
    }

    /// Puts the labels of mask `new` (none of them in `have`, the session's mask) on the
    /// session, from `tool` in this turn, and returns their names.
    fn add_labels(&mut self, policy: &Policy, have: u8, new: u8, tool: &str) -> Vec<String> {
        let time = now();
        let mut added = Vec::new();
        for (i, name) in policy.tables().labels.iter().enumerate() {
            if new & (1u8 << i) != 0 {
                self.labels.push(LabelSource {
                    label: name.to_string(),
                    tool: tool.to_string(),
                    turn: self.turn,
                    time,
                });
                added.push(name.to_string());
            }
        }
        self.mask = Some(have | new);
        added
    }

    /// Binds the session to `policy` when it is bound to none, and returns its labels as a
    /// mask over the policy's labels (computed once, then cached).
    ///
    /// # Errors
    ///
    /// [`SessionError::OtherPolicy`] when it is bound to another policy or version (or its
    /// pending call is), [`SessionError::UndeclaredLabel`] for a label the policy does not
    /// declare. Nothing changes then.
    #[inline]
    pub(crate) fn bind(&mut self, policy: &Policy) -> Result<u8, SessionError> {
        let mask = self.mask_for(policy)?;
        if self.policy.is_none() {
            self.policy = Some(policy.name().to_string());
            self.policy_version = policy.version();
        }
        self.mask = Some(mask);
        Ok(mask)
    }

    /// The session's labels as a mask over `policy`'s labels, without changing the session.
    ///
    /// # Errors
    ///
    /// As [`Session::bind`].
    #[inline]
    pub(crate) fn mask_for(&self, policy: &Policy) -> Result<u8, SessionError> {
        if let Some(p) = &self.policy {
            if p != policy.name() || self.policy_version != policy.version() {
                return Err(self.other_policy(p, self.policy_version, policy));
            }
        }
        if let Some(p) = &self.pending {
            if p.policy != policy.name() || p.policy_version != policy.version() {
                return Err(self.other_policy(&p.policy, p.policy_version, policy));
            }
        }
        if let Some(mask) = self.mask {
            return Ok(mask);
        }
        let declared = &policy.tables().labels;
        let mut mask = 0u8;
        for l in &self.labels {
            match declared.iter().position(|d| **d == *l.label) {
                Some(i) => mask |= 1u8 << i,
                None => {
                    return Err(SessionError::UndeclaredLabel {
                        label: l.label.clone(),
                        known: super::request::known(declared),
                    })
                }
            }
        }
        Ok(mask)
    }

    fn other_policy(&self, name: &str, version: Option<u64>, policy: &Policy) -> SessionError {
        SessionError::OtherPolicy {
            policy: name.to_string(),
            version: version_text(version),
            expected: policy.name().to_string(),
            expected_version: version_text(policy.version()),
        }
    }

    /// The source of label `label` (by index in the bound policy's labels), if on the session.
    pub(crate) fn source_of(&self, policy: &Policy, label: usize) -> Option<&LabelSource> {
        let name = policy.tables().labels.get(label)?;
        self.labels.iter().find(|l| *l.label == **name)
    }

    /// The session as JSON text (pretty-printed), for [`Session::from_json`] to read back.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads a session that [`Session::to_json`] wrote, for use with `policy`.
    ///
    /// # Errors
    ///
    /// [`SessionError::Corrupt`] for text that is not a session, [`SessionError::Format`] for
    /// another format version, [`SessionError::OtherPolicy`] for a session (or pending call)
    /// of another policy or version, [`SessionError::UndeclaredLabel`] for a label `policy`
    /// does not declare (or one listed twice, reported as corrupt).
    pub fn from_json(text: &str, policy: &Policy) -> Result<Session, SessionError> {
        let mut s: Session = serde_json::from_str(text).map_err(|e| SessionError::Corrupt {
            message: e.to_string(),
        })?;
        if s.format != SESSION_FORMAT {
            return Err(SessionError::Format { found: s.format });
        }
        if s.turn == 0 {
            return Err(SessionError::Corrupt {
                message: "turn 0: turns are numbered from 1".to_string(),
            });
        }
        for (i, l) in s.labels.iter().enumerate() {
            if s.labels[..i].iter().any(|m| m.label == l.label) {
                return Err(SessionError::Corrupt {
                    message: format!("label `{}` is listed twice", l.label),
                });
            }
        }
        s.mask = Some(s.mask_for(policy)?);
        Ok(s)
    }

    /// After `check_call_session` judged a call: the turn's new count, the pending call a
    /// confirm holds (or the confirmed one it clears), and on an allow the labels the tool
    /// taints.
    #[inline]
    pub(crate) fn after_call(
        &mut self,
        policy: &Policy,
        turn: Turn,
        verdict: &crate::decision::Verdict,
        taints: u8,
    ) {
        self.transactional_calls = turn.transactional_calls;
        match verdict.decision {
            crate::decision::Decision::Confirm => {
                if let Some(p) = &verdict.pending {
                    if self
                        .pending
                        .as_ref()
                        .is_none_or(|old| old.digest != p.digest)
                    {
                        self.pending = Some(p.clone());
                        self.pending_turn = Some(self.turn);
                    }
                }
            }
            crate::decision::Decision::Allow => {
                let confirmed = match (&self.pending, &verdict.args_for_execution) {
                    (Some(p), Some(args)) => p.digest == policy.call_digest(&verdict.tool, args),
                    _ => false,
                };
                if confirmed {
                    self.take_pending();
                }
                self.taint(policy, taints, &verdict.tool);
            }
            crate::decision::Decision::Deny => {}
        }
    }
}
