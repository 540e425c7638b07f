//! The proxy's core: one client, one server, no I/O. Each message in gives the messages to
//! send each way and the log lines; audit records are written (and flushed) into the
//! [`AuditSink`] before the call they record is handed out for forwarding.
//!
//! Rules it keeps, whatever the framing:
//!
//! - Every `tools/call` is judged: with an id, with `"id": null`, without an id (a
//!   notification: refused ones are not forwarded and only logged and audited; one that needs
//!   confirmation is refused, since nobody can be asked), and each one inside a batch (a batch
//!   of at most [`MAX_BATCH`] elements is split: each element is judged, forwarded and
//!   answered on its own; a longer one is refused whole). What goes to the server is the
//!   judged message, serialized again.
//! - Before the first call is judged the proxy has the server's tools: after the client's
//!   `notifications/initialized` (and after every `notifications/tools/list_changed`) it lists
//!   them itself, with ids of its own ([`OWN_ID_PREFIX`]), following `nextCursor`; when calls
//!   wait and the server answers the client's `initialize`, it lists at once. Calls that
//!   arrive meanwhile wait, and every client message after a waiting one waits behind it, so
//!   the server receives the client's messages in the client's order; a listing that fails, or
//!   a wait that ends ([`Session::wait_expired`]), refuses the waiting calls (fail closed). A
//!   call from a client that has not sent `initialize` is refused at once.
//! - A call is judged against the strictest annotations the server ever listed for its name
//!   in this session, and a name absent from the server's latest complete listing is refused.
//!   Only responses to `tools/list` requests (the client's, matched by id, or the proxy's own)
//!   are listings; a response to another request is forwarded untouched; an unmatched result
//!   carrying a `tools` array is filtered for the client but teaches the proxy nothing.
//! - A server message that is not well-formed JSON-RPC (not an object, a `method` that is not
//!   a string, a `method` with a `result` or `error`, a response without an id) is dropped.
//! - A confirmation counts only for a call held by an earlier message whose held answer the
//!   client had received before sending the confirming one ([`Session::answers_written`],
//!   [`Session::next_client_read`]), within [`crate::mcp::judge::HOLD_TTL_MS`].
//! - A call is forwarded only after its record was written when an audit sink is given; in
//!   advisory mode a failed write stops all forwarding of calls.
//! - Every log line has the client's and the server's text escaped ([`escape_log`]), and one
//!   message yields at most [`MAX_LOG_LINES`] lines.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{json, Map, Value};

use crate::audit::Clock;
use crate::mcp::judge::{Judge, PendingCalls, Refusal};
use crate::mcp::message::{
    answer_id, escape_log, is_own_id, parse_message, rpc_error, valid_id, IdKey, INVALID_PARAMS,
    INVALID_REQUEST, MAX_BATCH, OWN_ID_PREFIX,
};
use crate::mcp::record::{new_decision_id, AuditSink, CallRecord, PolicyRef};

/// At most this many client messages wait for the server's tool list; more are refused.
pub const MAX_WAITING: usize = 1024;
/// At most this many distinct ids of the client's requests are awaited at once (per kind:
/// `tools/list`, other requests).
pub const MAX_LIST_REQUESTS: usize = 4096;
/// At most this many pages of the server's tool list are read; a longer list is a failure.
pub const MAX_LIST_PAGES: usize = 1000;
/// At most this many log lines come of one message; the rest are counted in a last line.
pub const MAX_LOG_LINES: usize = 20;

/// What one message in produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Messages to send the server, in order (serialize each as one line).
    pub to_server: Vec<Value>,
    /// Messages to send the client, in order.
    pub to_client: Vec<Value>,
    /// Lines for the operator (stderr), with peer-supplied text escaped.
    pub log: Vec<String>,
    /// Set when client messages started waiting for the server's tool list: call
    /// [`Session::wait_expired`] with this number when the wait should end.
    pub wait: Option<u64>,
    /// The serial of the latest call held for confirmation when this outcome was made: give
    /// it to [`Session::answers_written`] once `to_client` is written.
    pub holds_through: u64,
}

/// Where the proxy's own listing of the server's tools stands.
#[derive(Clone, Debug)]
enum Listing {
    /// The client has not completed the initialize handshake yet.
    NotStarted,
    /// A request for a page is out.
    InFlight {
        id: String,
        tools: Vec<Value>,
        pages: usize,
        again: bool,
    },
    Ready,
    Failed(String),
}

/// One client-server connection's state. See the module docs.
pub struct Session {
    judge: Judge,
    /// The policy the records name.
    policy_ref: PolicyRef,
    audit: Option<Box<dyn AuditSink>>,
    clock: Box<dyn Clock + Send>,
    /// In-flight client `tools/list` requests, counted per id.
    list_ids: HashMap<IdKey, usize>,
    /// In-flight forwarded client requests of other methods, counted per id.
    other_ids: HashMap<IdKey, usize>,
    /// The strictest schema the server listed for each tool (by the server's name).
    schemas: HashMap<String, Value>,
    /// The names in the server's latest complete listing (and in listings since).
    listed: HashSet<String>,
    pending: PendingCalls,
    /// The connection's flow labels: what the calls it forwarded put on it.
    flow: crate::Session,
    listing: Listing,
    own_seq: u64,
    waiting: VecDeque<Value>,
    wait_generation: u64,
    told: HashSet<String>,
    /// Set in advisory mode once an audit write failed: no call is forwarded any more.
    halted: Option<String>,
    /// The ids of the client's `initialize` requests not yet answered.
    initialize_ids: HashSet<IdKey>,
    /// Whether the client sent an `initialize`.
    client_initialized: bool,
    /// Whether the server answered an `initialize`.
    server_initialized: bool,
    /// Holds up to this serial had their answer written to the client (when the transport
    /// does not report writes).
    written_through: u64,
    /// Whether the transport reports writes ([`Session::answers_written`]); if not, an
    /// outcome counts as written when it is returned.
    reports_writes: bool,
    /// Reported writes not yet armed: (hold serial, the last client read before the write).
    writes: VecDeque<(u64, u64)>,
    /// The client read that brought the first byte of the next client line.
    next_read: u64,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("judge", &self.judge)
            .field("listing", &self.listing)
            .field("waiting", &self.waiting.len())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session judging with `judge`, recording into `audit` when given, with `clock` for
    /// the records' `time` and the age of held calls.
    pub fn new(
        judge: Judge,
        audit: Option<Box<dyn AuditSink>>,
        clock: Box<dyn Clock + Send>,
    ) -> Session {
        Session {
            policy_ref: PolicyRef::of(judge.policy()),
            judge,
            audit,
            clock,
            list_ids: HashMap::new(),
            other_ids: HashMap::new(),
            schemas: HashMap::new(),
            listed: HashSet::new(),
            pending: PendingCalls::default(),
            flow: crate::Session::new(),
            listing: Listing::NotStarted,
            own_seq: 0,
            waiting: VecDeque::new(),
            wait_generation: 0,
            told: HashSet::new(),
            halted: None,
            initialize_ids: HashSet::new(),
            client_initialized: false,
            server_initialized: false,
            written_through: 0,
            reports_writes: false,
            writes: VecDeque::new(),
            next_read: 0,
        }
    }

    /// Whether the server's tool list has been read and calls are judged at once.
    pub fn tools_known(&self) -> bool {
        matches!(self.listing, Listing::Ready)
    }

    /// Tells the session that the `to_client` messages of an outcome were written to the
    /// client: `holds_through` is that outcome's [`Outcome::holds_through`], `reads_before`
    /// the number of the transport's last read of client input that may hold bytes sent
    /// before these answers (see [`Session::next_client_read`]). A held call can then be
    /// confirmed only by a client line whose first byte came in a later read. From the first
    /// report on the session relies on them; without any, an outcome counts as written when
    /// it is returned and the next message counts as later.
    pub fn answers_written(&mut self, holds_through: u64, reads_before: u64) {
        self.reports_writes = true;
        if holds_through > self.written_through {
            self.written_through = holds_through;
            self.writes.push_back((holds_through, reads_before));
            if self.writes.len() > MAX_WAITING {
                // Fail closed: the oldest holds are never armed.
                self.writes.pop_front();
            }
        }
    }

    /// Tells the session the number of the transport's read of client input (counting from
    /// 1, in order) that brought the first byte of the next line given to
    /// [`Session::from_client`].
    pub fn next_client_read(&mut self, read: u64) {
        self.next_read = read;
    }

    /// Arms the holds whose answers the client had before it sent the message now handled.
    fn arm_holds(&mut self) {
        if !self.reports_writes {
            self.pending.arm_through(self.written_through);
            return;
        }
        while let Some(&(holds, reads_before)) = self.writes.front() {
            if reads_before >= self.next_read {
                break;
            }
            self.pending.arm_through(holds);
            self.writes.pop_front();
        }
    }

    /// Handles one message from the client (one line, without its newline).
    pub fn from_client(&mut self, text: &[u8]) -> Outcome {
        self.arm_holds();
        let mut out = Outcome::default();
        match parse_message(text) {
            Ok(msg) => self.client_value(msg, &mut out),
            Err(e) => {
                out.log.push(format!("refused a client message: {e}"));
                out.to_client
                    .push(rpc_error(&Value::Null, e.code(), &e.to_string(), None));
            }
        }
        self.finish(out)
    }

    /// Handles one client message that the transport refused before parsing (a line over
    /// [`crate::mcp::message::MAX_MESSAGE_BYTES`]): answers `-32600`.
    pub fn client_too_large(&mut self, len: usize) -> Outcome {
        let message = format!(
            "Invalid Request: the message is over {len} bytes, over the limit of {} bytes",
            crate::mcp::message::MAX_MESSAGE_BYTES
        );
        self.finish(Outcome {
            to_client: vec![rpc_error(&Value::Null, INVALID_REQUEST, &message, None)],
            log: vec![format!("refused a client message: {message}")],
            ..Outcome::default()
        })
    }

    /// Escapes and caps the log lines, and notes the holds made so far.
    fn finish(&mut self, mut out: Outcome) -> Outcome {
        if out.log.len() > MAX_LOG_LINES {
            let left = out.log.len() - (MAX_LOG_LINES - 1);
            out.log.truncate(MAX_LOG_LINES - 1);
            out.log
                .push(format!("… and {left} more log lines about this message"));
        }
        for line in &mut out.log {
            *line = escape_log(line);
        }
        out.holds_through = self.pending.latest();
        if !self.reports_writes {
            self.written_through = out.holds_through;
        }
        out
    }

    fn client_value(&mut self, msg: Value, out: &mut Outcome) {
        match msg {
            Value::Array(items) if items.is_empty() => {
                out.to_client.push(rpc_error(
                    &Value::Null,
                    INVALID_REQUEST,
                    "Invalid Request: empty batch",
                    None,
                ));
            }
            // Each element is judged and sent on its own (MCP since 2025-06-18 has no
            // batches, so a server may not read one); its answer comes on its own too.
            Value::Array(items) => {
                debug_assert!(items.len() <= MAX_BATCH);
                for item in items {
                    self.client_step(item, out);
                }
            }
            msg => self.client_step(msg, out),
        }
    }

    /// One client message (or batch element) in arrival order: handled now, or queued behind
    /// the messages waiting for the server's tool list.
    fn client_step(&mut self, item: Value, out: &mut Outcome) {
        if !self.waiting.is_empty() {
            if self.waiting.len() >= MAX_WAITING {
                self.overflow(item, out);
            } else {
                self.waiting.push_back(item);
            }
            return;
        }
        let is_call = item.get("method").and_then(Value::as_str) == Some("tools/call");
        if !is_call || !matches!(self.listing, Listing::NotStarted | Listing::InFlight { .. }) {
            self.handle_item(item, out, None);
            return;
        }
        if !self.client_initialized {
            self.handle_item(
                item,
                out,
                Some("the client has not sent initialize; MCP needs the initialize handshake before tools/call"),
            );
            return;
        }
        out.wait = Some(self.wait_generation);
        self.waiting.push_back(item);
        // A client that calls tools before it sent `notifications/initialized`, once the server
        // has answered `initialize`: list now rather than make the call wait in vain.
        if matches!(self.listing, Listing::NotStarted) && self.server_initialized {
            self.start_listing(out);
        }
    }

    /// A message that cannot wait (the queue is full) and must not overtake the waiting
    /// ones: a call is refused, another request answered with an error, a notification
    /// dropped.
    fn overflow(&mut self, item: Value, out: &mut Outcome) {
        let reason =
            format!("more than {MAX_WAITING} messages are waiting for the server's tool list");
        if item.get("method").and_then(Value::as_str) == Some("tools/call") {
            self.handle_item(item, out, Some(&reason));
            return;
        }
        out.log.push(format!("refused a client message: {reason}"));
        if let Some(id) = item.get("id").filter(|id| valid_id(id)) {
            out.to_client.push(rpc_error(
                &answer_id(id),
                INVALID_REQUEST,
                &format!("Invalid Request: {reason}"),
                None,
            ));
        }
    }

    /// Ends the wait numbered `generation` (from [`Outcome::wait`]): the client messages still
    /// waiting for the server's tool list are handled now, and their calls refused (the tools
    /// are not known). Does nothing when that wait is over already.
    pub fn wait_expired(&mut self, generation: u64) -> Outcome {
        let mut out = Outcome::default();
        if generation != self.wait_generation || self.waiting.is_empty() {
            return self.finish(out);
        }
        let reason = match &self.listing {
            Listing::NotStarted => {
                "the client has not completed the initialize handshake".to_string()
            }
            Listing::InFlight { .. } => "the server did not answer tools/list in time".to_string(),
            Listing::Failed(r) => r.clone(),
            Listing::Ready => String::new(),
        };
        out.log.push(format!(
            "gave up waiting for the server's tool list ({reason}); the waiting calls are refused"
        ));
        self.release_waiting(&mut out, Some(&reason));
        self.finish(out)
    }

    fn release_waiting(&mut self, out: &mut Outcome, not_ready: Option<&str>) {
        self.wait_generation += 1;
        let waiting = std::mem::take(&mut self.waiting);
        for msg in waiting {
            self.handle_item(msg, out, not_ready);
        }
    }

    /// Handles one client message (or batch element) now: forwards it, answers it, or both
    /// not. `not_ready`: why the tools are not known, when calls must be refused for that.
    fn handle_item(&mut self, item: Value, out: &mut Outcome, not_ready: Option<&str>) {
        let Value::Object(mut obj) = item else {
            out.log
                .push("refused a client message that is not a JSON object".to_string());
            out.to_client.push(rpc_error(
                &Value::Null,
                INVALID_REQUEST,
                "Invalid Request: expected a JSON-RPC object",
                None,
            ));
            return;
        };
        if let Some(bad) = obj.get("id").filter(|id| !valid_id(id)) {
            out.log.push(format!(
                "refused a client message whose id is not a string, a number or null: {bad}"
            ));
            out.to_client.push(rpc_error(
                &Value::Null,
                INVALID_REQUEST,
                "Invalid Request: the id must be a string, a number or null",
                None,
            ));
            return;
        }
        // The id as it is answered and forwarded (`-0` as `0`).
        if let Some(id) = obj.get_mut("id") {
            *id = answer_id(id);
        }
        let id = obj.get("id").cloned();
        if let Some(own) = id.as_ref().filter(|id| is_own_id(id)) {
            out.log.push(format!(
                "refused a client message with the reserved id {own}"
            ));
            out.to_client.push(rpc_error(
                own,
                INVALID_REQUEST,
                &format!(
                    "Invalid Request: ids starting with `{OWN_ID_PREFIX}` are reserved by the proxy"
                ),
                None,
            ));
            return;
        }
        let method = match obj.get("method") {
            None => None,
            Some(Value::String(m)) => Some(m.clone()),
            Some(_) => {
                out.log
                    .push("refused a client message whose method is not a string".to_string());
                let id = id.unwrap_or(Value::Null);
                out.to_client.push(rpc_error(
                    &id,
                    INVALID_REQUEST,
                    "Invalid Request: the method must be a string",
                    None,
                ));
                return;
            }
        };
        let key = id.as_ref().and_then(IdKey::of);
        let forward = match method.as_deref() {
            Some("tools/call") => {
                let (forward, answer) = self.client_call(obj, id.as_ref(), out, not_ready);
                out.to_client.extend(answer);
                forward
            }
            Some("tools/list") => {
                // Bounded: past the cap a request is not counted, and its answer is filtered
                // all the same when it carries a `tools` array.
                if let Some(key) = key.clone() {
                    count(&mut self.list_ids, key);
                }
                out.to_server.push(Value::Object(obj));
                return;
            }
            Some("initialize") => {
                self.client_initialized = true;
                if let Some(key) = key.clone() {
                    self.initialize_ids.insert(key);
                }
                Some(Value::Object(obj))
            }
            Some("notifications/initialized") => {
                out.to_server.push(Value::Object(obj));
                if matches!(self.listing, Listing::NotStarted) {
                    self.start_listing(out);
                }
                return;
            }
            _ => Some(Value::Object(obj)),
        };
        if let Some(msg) = forward {
            // A request's answer is a response to this id, not a listing.
            if let (Some(key), Some(_)) = (key, method.as_ref()) {
                count(&mut self.other_ids, key);
            }
            out.to_server.push(msg);
        }
    }

    /// Judges one `tools/call` (any id, or none).
    fn client_call(
        &mut self,
        obj: Map<String, Value>,
        id: Option<&Value>,
        out: &mut Outcome,
        not_ready: Option<&str>,
    ) -> (Option<Value>, Option<Value>) {
        let answer = |out: &mut Outcome, response: Value, text: &str| match id {
            Some(_) => (None, Some(response)),
            None => {
                out.log
                    .push(format!("refused a tools/call notification (no id): {text}"));
                (None, None)
            }
        };
        let null = Value::Null;
        let rid = id.unwrap_or(&null);
        let params = obj.get("params").and_then(Value::as_object);
        let Some(tool) = params
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            let text = "Invalid params: tools/call needs params.name, a string";
            return answer(out, rpc_error(rid, INVALID_PARAMS, text, None), text);
        };
        let args = params
            .and_then(|p| p.get("arguments"))
            .cloned()
            .unwrap_or_else(|| Value::Object(Map::new()));
        let unready = match (&self.listing, not_ready) {
            (Listing::Failed(r), _) => Some(r.clone()),
            (Listing::Ready, _) => None,
            (_, Some(r)) => Some(r.to_string()),
            (_, None) => Some("the tool list is still being read".to_string()),
        };
        let mut judgment = match (&self.halted, unready) {
            (Some(why), _) => {
                let reason = format!(
                    "toolwarden forwards no call: the audit log cannot be written ({why}), and advisory mode forwards only what it records"
                );
                refused_record(&self.judge, &tool, &args, &reason)
            }
            (None, Some(why)) => {
                let reason = format!(
                    "toolwarden refuses `{tool}`: it could not read the server's tool list ({why}), so it cannot judge the call against the tool's annotations"
                );
                refused_record(&self.judge, &tool, &args, &reason)
            }
            (None, None) if !self.listed.contains(&tool) => {
                unlisted_record(&self.judge, &tool, &args)
            }
            (None, None) => {
                self.pending.set_now(epoch_millis(&self.clock.now()));
                let before = self.pending.latest();
                let mut j = self.judge.judge_call_in_session(
                    &mut self.pending,
                    &mut crate::Turn::new(),
                    self.schemas.get(&tool),
                    &tool,
                    &args,
                    Some(&self.flow),
                );
                if id.is_none() {
                    // Nobody can be asked about a notification: nothing stays held for it.
                    self.pending.forget_after(before);
                    if j.record.decision == "confirm" && j.forward.is_err() {
                        refuse_unconfirmable(&mut j, &tool);
                    }
                }
                j
            }
        };
        // Record first; a call that cannot be recorded is not forwarded.
        if let Err(e) = self.write_audit(&judgment.record.to_json(
            self.clock.now(),
            self.judge.advisory(),
            &self.policy_ref,
            &new_decision_id(),
        )) {
            out.log.push(format!("cannot write the audit file: {e}"));
            if judgment.forward.is_ok() {
                let reason = if self.judge.advisory() {
                    out.log.push(format!(
                        "advisory mode stops forwarding calls: the audit log cannot be written ({e})"
                    ));
                    self.halted = Some(e.to_string());
                    format!(
                        "toolwarden forwards no call: the audit log cannot be written ({e}), and advisory mode forwards only what it records"
                    )
                } else {
                    format!(
                        "toolwarden could not record the call to `{tool}` in the audit log ({e}); the call is not forwarded"
                    )
                };
                judgment.forward = Err(Refusal::error(&reason));
            }
        }
        match judgment.forward {
            Ok(rewritten) => {
                self.record_labels(&tool, out);
                let mut msg = Value::Object(obj);
                if let Some(exec) = rewritten {
                    msg["params"]["arguments"] = Value::Object(exec);
                }
                (Some(msg), None)
            }
            Err(refusal) => {
                if matches!(&refusal, Refusal::ToolError { structured, .. }
                    if structured["metadata"]["stage"] == "error")
                {
                    out.log.push(refusal.text());
                }
                answer(out, refusal.response(rid), &refusal.text())
            }
        }
    }

    /// The connection's flow labels, with where each came from.
    pub fn labels(&self) -> &[crate::LabelSource] {
        self.flow.labels()
    }

    /// A forwarded call of `tool` puts its labels on the connection; when that changes the
    /// tools offered, the client is told (`notifications/tools/list_changed`).
    fn record_labels(&mut self, tool: &str, out: &mut Outcome) {
        if self
            .judge
            .call_labels(self.schemas.get(tool), tool)
            .is_empty()
        {
            return;
        }
        let before = self.offered_now();
        match self
            .judge
            .record_call(&mut self.flow, self.schemas.get(tool), tool)
        {
            Ok(added) if !added.is_empty() => {
                out.log.push(format!(
                    "the session now carries {} (from `{tool}`)",
                    added.join(", ")
                ));
                if self.offered_now() != before {
                    out.to_client.push(json!({
                        "jsonrpc": "2.0",
                        "method": "notifications/tools/list_changed",
                    }));
                }
            }
            Ok(_) => {}
            Err(e) => out
                .log
                .push(format!("cannot record the labels of `{tool}`: {e}")),
        }
    }

    /// The tools offered now (and how), by name, under the connection's labels.
    fn offered_now(&self) -> (Vec<String>, Vec<String>) {
        let tools: Vec<Value> = self
            .schemas
            .iter()
            .filter(|(name, _)| self.listed.contains(*name))
            .map(|(_, s)| s.clone())
            .collect();
        let j = self.judge.judge_list_in(tools, Some(&self.flow));
        let (mut offered, mut confirmed) = (j.offered, j.confirmed);
        offered.sort();
        confirmed.sort();
        (offered, confirmed)
    }

    fn write_audit(&mut self, record: &Value) -> std::io::Result<()> {
        match self.audit.as_mut() {
            Some(sink) => sink.record(record),
            None => Ok(()),
        }
    }

    fn start_listing(&mut self, out: &mut Outcome) {
        match &mut self.listing {
            Listing::InFlight { again, .. } => *again = true,
            _ => {
                let id = self.next_own_id();
                out.to_server.push(list_request(&id, None));
                self.listing = Listing::InFlight {
                    id,
                    tools: Vec::new(),
                    pages: 0,
                    again: false,
                };
            }
        }
    }

    fn next_own_id(&mut self) -> String {
        self.own_seq += 1;
        format!("{OWN_ID_PREFIX}tools-list-{}", self.own_seq)
    }

    /// Handles one message from the server (one line, without its newline).
    pub fn from_server(&mut self, text: &[u8]) -> Outcome {
        let mut out = Outcome::default();
        let msg = match parse_message(text) {
            Ok(v) => v,
            Err(e) => {
                let shown: String = String::from_utf8_lossy(text).chars().take(200).collect();
                out.log.push(format!(
                    "dropped a malformed line from the server ({e}): {shown}"
                ));
                return self.finish(out);
            }
        };
        match msg {
            Value::Array(items) => {
                for item in items {
                    if let Some(m) = self.server_item(item, &mut out) {
                        out.to_client.push(m);
                    }
                }
            }
            msg => {
                if let Some(m) = self.server_item(msg, &mut out) {
                    out.to_client.push(m);
                }
            }
        }
        self.finish(out)
    }

    /// Handles a server line the transport dropped before parsing (over the size cap).
    pub fn server_too_large(&mut self, len: usize) -> Outcome {
        let out = Outcome {
            log: vec![format!(
                "dropped a line from the server of more than {len} bytes (the limit is {} bytes)",
                crate::mcp::message::MAX_MESSAGE_BYTES
            )],
            ..Outcome::default()
        };
        self.finish(out)
    }

    fn server_item(&mut self, mut msg: Value, out: &mut Outcome) -> Option<Value> {
        let Some(obj) = msg.as_object() else {
            out.log
                .push("dropped a message from the server that is not a JSON object".to_string());
            return None;
        };
        let reply = obj.contains_key("result") as u8 + obj.contains_key("error") as u8;
        match obj.get("method") {
            Some(Value::String(method)) if reply == 0 => {
                if method == "notifications/tools/list_changed" {
                    self.start_listing(out);
                }
                return Some(msg);
            }
            Some(Value::String(_)) => {
                out.log.push(
                    "dropped a message from the server with both a method and a result or error"
                        .to_string(),
                );
                return None;
            }
            Some(_) => {
                out.log.push(
                    "dropped a message from the server whose method is not a string".to_string(),
                );
                return None;
            }
            None => {}
        }
        if reply != 1 {
            out.log.push(
                "dropped a message from the server that is neither a request, a notification nor a response with one result or error"
                    .to_string(),
            );
            return None;
        }
        let Some(id) = obj.get("id").cloned() else {
            out.log
                .push("dropped a response from the server without an id".to_string());
            return None;
        };
        if is_own_id(&id) {
            self.own_list_response(&id, msg, out);
            return None;
        }
        let key = IdKey::of(&id);
        if let Some(key) = &key {
            if self.initialize_ids.remove(key) && obj.contains_key("result") {
                self.server_initialized = true;
                // Calls wait and the client may never send `notifications/initialized`.
                if !self.waiting.is_empty() && matches!(self.listing, Listing::NotStarted) {
                    self.start_listing(out);
                }
            }
        }
        let to_list = key.as_ref().is_some_and(|k| uncount(&mut self.list_ids, k));
        let to_other = key
            .as_ref()
            .is_some_and(|k| uncount(&mut self.other_ids, k));
        let has_tools = msg
            .get("result")
            .and_then(|r| r.get("tools"))
            .is_some_and(Value::is_array);
        let is_result = msg.get("result").is_some_and(Value::is_object);
        match (to_list, to_other) {
            // The answer to the client's tools/list: a listing.
            (true, false) if is_result => self.filter_result(&mut msg, out, true),
            // A call's (or another request's) result: the client's business alone.
            (false, true) => {}
            // Unmatched or ambiguous: filtered, never a listing.
            _ if has_tools => self.filter_result(&mut msg, out, false),
            _ => {}
        }
        Some(msg)
    }

    /// Filters a `tools/list` result in place and records it. `listing`: whether it answers
    /// a `tools/list` request, so it updates the judging schemas (only ever tightening).
    fn filter_result(&mut self, msg: &mut Value, out: &mut Outcome, listing: bool) {
        let Some(result) = msg.get_mut("result").and_then(Value::as_object_mut) else {
            return;
        };
        let tools = match result.remove("tools") {
            Some(Value::Array(tools)) => tools,
            Some(_) => {
                out.log.push(
                    "a tools/list result's `tools` is not an array; no tool is offered".to_string(),
                );
                Vec::new()
            }
            None => Vec::new(),
        };
        let tools = self.strictest(tools, listing);
        if listing {
            for schema in &tools {
                if let Ok(name) = crate::schema_name(schema) {
                    self.listed.insert(name.to_string());
                }
            }
        }
        let judgment = self.judge.judge_list_in(tools, Some(&self.flow));
        result.insert("tools".to_string(), Value::Array(judgment.kept.clone()));
        self.tell_tightened(&judgment.tightened, out);
        for h in &judgment.hidden {
            if h["stage"] == "error" {
                out.log.push(format!(
                    "hid {}: {}",
                    h["tool"]
                        .as_str()
                        .map_or("a tool".to_string(), |t| format!("`{t}`")),
                    h["reason"].as_str().unwrap_or("")
                ));
            }
        }
        if let Some(line) = judgment.all_hidden_line() {
            out.log.push(line);
        }
        let record = json!({
            "time": self.clock.now(),
            "event": "tools/list",
            "offered": judgment.offered,
            "hidden": judgment.hidden,
            "advisory": self.judge.advisory(),
        });
        if let Err(e) = self.write_audit(&record) {
            out.log.push(format!("cannot write the audit file: {e}"));
        }
    }

    /// Each listed schema with the strictest annotations seen for its name in this session;
    /// `remember`: whether they become the judging schemas.
    fn strictest(&mut self, tools: Vec<Value>, remember: bool) -> Vec<Value> {
        tools
            .into_iter()
            .map(|schema| {
                let Ok(name) = crate::schema_name(&schema).map(str::to_string) else {
                    return schema;
                };
                let merged = stricter(self.schemas.get(&name), schema);
                if remember {
                    self.schemas.insert(name, merged.clone());
                }
                merged
            })
            .collect()
    }

    fn tell_tightened(&mut self, tightened: &[crate::mcp::Tightening], out: &mut Outcome) {
        for t in tightened {
            if self.told.insert(t.tool.clone()) {
                out.log.push(t.log_line());
            }
        }
    }

    /// A response to the proxy's own `tools/list`.
    fn own_list_response(&mut self, id: &Value, msg: Value, out: &mut Outcome) {
        let (mut tools, pages, again) = match &mut self.listing {
            Listing::InFlight {
                id: expected,
                tools,
                pages,
                again,
            } if id.as_str() == Some(expected.as_str()) => {
                (std::mem::take(tools), *pages + 1, *again)
            }
            // A stale or unknown response to an id of ours: never the client's business.
            _ => return,
        };
        let failure = if let Some(error) = msg.get("error") {
            Some(format!(
                "the server answered tools/list with an error: {error}"
            ))
        } else {
            match msg
                .get("result")
                .and_then(|r| r.get("tools"))
                .and_then(Value::as_array)
            {
                Some(page) => {
                    tools.extend(page.iter().cloned());
                    match msg["result"].get("nextCursor") {
                        Some(Value::String(cursor)) if pages < MAX_LIST_PAGES => {
                            let next = self.next_own_id();
                            out.to_server.push(list_request(&next, Some(cursor)));
                            self.listing = Listing::InFlight {
                                id: next,
                                tools,
                                pages,
                                again,
                            };
                            return;
                        }
                        Some(Value::String(_)) => Some(format!(
                            "the server's tool list has more than {MAX_LIST_PAGES} pages"
                        )),
                        _ => None,
                    }
                }
                None => Some("the server's tools/list result has no `tools` array".to_string()),
            }
        };
        match failure {
            Some(reason) => {
                out.log.push(format!(
                    "cannot read the server's tool list: {reason}; calls are refused until a listing succeeds"
                ));
                self.listing = Listing::Failed(reason);
            }
            None => {
                let tools = self.strictest(tools, true);
                self.listed = tools
                    .iter()
                    .filter_map(|t| crate::schema_name(t).ok().map(str::to_string))
                    .collect();
                let judgment = self.judge.judge_list(tools);
                self.tell_tightened(&judgment.tightened, out);
                self.listing = Listing::Ready;
            }
        }
        if again {
            self.start_listing(out);
        }
        if !matches!(self.listing, Listing::InFlight { .. }) {
            self.release_waiting(out, None);
        }
    }
}

/// Counts one more in-flight request with `key` (bounded: past the cap a new id is not
/// counted).
fn count(ids: &mut HashMap<IdKey, usize>, key: IdKey) {
    if ids.len() < MAX_LIST_REQUESTS || ids.contains_key(&key) {
        *ids.entry(key).or_default() += 1;
    }
}

/// Takes one in-flight request with `key` off; whether there was one.
fn uncount(ids: &mut HashMap<IdKey, usize>, key: &IdKey) -> bool {
    match ids.get_mut(key) {
        Some(n) => {
            *n -= 1;
            if *n == 0 {
                ids.remove(key);
            }
            true
        }
        None => false,
    }
}

/// How strict a schema's annotations are, by the effect they imply: none asserted (0),
/// read-only (1), write (2), destructive (3), malformed (4, refused).
fn annotation_rank(schema: &Value) -> u8 {
    match schema.get("annotations") {
        None => 0,
        Some(Value::Object(a)) => {
            let (ro, de) = (a.get("readOnlyHint"), a.get("destructiveHint"));
            if ro.is_some_and(|v| !v.is_boolean()) || de.is_some_and(|v| !v.is_boolean()) {
                4
            } else if ro == Some(&Value::Bool(true)) {
                1
            } else if de == Some(&Value::Bool(false)) {
                2
            } else {
                3
            }
        }
        Some(_) => 4,
    }
}

/// Whether a schema's annotations leave the tool open-world: `openWorldHint` is true, missing
/// or not a boolean (the MCP default is true); only a literal `false` closes it.
fn open_world(schema: &Value) -> bool {
    schema
        .get("annotations")
        .and_then(|a| a.get("openWorldHint"))
        != Some(&Value::Bool(false))
}

/// The schema `new` with the annotations of `old` when those are stricter, and open-world when
/// either is: a tool's annotations only tighten over the listings seen (within a proxy
/// session, or over a gateway upstream's life), so a server cannot loosen a tool's effect or
/// drop its `taint openworld` labels by listing it again or twice.
pub(crate) fn stricter(old: Option<&Value>, mut new: Value) -> Value {
    let Some(old) = old else { return new };
    let open = open_world(old) || open_world(&new);
    if let Some(obj) = new.as_object_mut() {
        if annotation_rank(old) > annotation_rank(&Value::Object(obj.clone())) {
            match old.get("annotations") {
                Some(a) => obj.insert("annotations".to_string(), a.clone()),
                None => obj.remove("annotations"),
            };
        }
        if open {
            if let Some(Value::Object(a)) = obj.get_mut("annotations") {
                if a.get("openWorldHint") == Some(&Value::Bool(false)) {
                    a.insert("openWorldHint".to_string(), Value::Bool(true));
                }
            }
        }
    }
    new
}

/// Milliseconds since the epoch of an RFC 3339 UTC time (`2026-12-01T20:15:00.123Z`), or
/// `u64::MAX` when it cannot be read (every hold is then expired: fail closed).
fn epoch_millis(text: &str) -> u64 {
    let read = || -> Option<u64> {
        let (date, time) = text.strip_suffix('Z')?.split_once('T')?;
        let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
        let (y, m, day) = (d.next()??, d.next()??, d.next()??);
        let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
        let mut t = hms.splitn(3, ':').map(|p| p.parse::<u64>().ok());
        let (h, min, s) = (t.next()??, t.next()??, t.next()??);
        let ms: u64 = format!("{frac:0<3}").get(..3)?.parse().ok()?;
        // Days from the civil date (H. Hinnant's algorithm).
        let y = if m <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = (m + 9) % 12;
        let doy = (153 * mp + 2) / 5 + day - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = u64::try_from(era * 146_097 + doe - 719_468).ok()?;
        Some(((days * 24 + h) * 60 + min) * 60 * 1000 + s * 1000 + ms)
    };
    read().unwrap_or(u64::MAX)
}

/// Turns the judgment of a call notification that needs confirmation into a refusal.
fn refuse_unconfirmable(j: &mut crate::mcp::CallJudgment, tool: &str) {
    let reason = format!(
        "`{tool}` needs the user's confirmation, and a tools/call notification (no id) cannot be held: nobody could be asked; send it as a request with an id"
    );
    j.record.decision = "deny";
    j.record.stage = Some("confirmation".to_string());
    j.record.reason = reason.clone();
    j.record.forwarded = false;
    j.forward = Err(Refusal::error(&reason));
}

/// The audit record and refusal of a call to a name the server does not list.
fn unlisted_record(judge: &Judge, tool: &str, args: &Value) -> crate::mcp::CallJudgment {
    let reason = format!(
        "the server does not list `{tool}` in its latest tools/list, so toolwarden cannot judge it against the tool's annotations"
    );
    let advisory = judge.advisory();
    crate::mcp::CallJudgment {
        record: CallRecord {
            tool: tool.to_string(),
            policy_tool: judge.policy_name(tool),
            args_sha256: crate::mcp::args_digest(args),
            decision: "deny",
            stage: Some("identity".to_string()),
            rule: None,
            reason: reason.clone(),
            forwarded: advisory,
        },
        forward: if advisory {
            Ok(None)
        } else {
            Err(Refusal::UnknownTool {
                tool: tool.to_string(),
                reason,
            })
        },
    }
}

/// The audit record and refusal of a call refused before it could be judged.
fn refused_record(
    judge: &Judge,
    tool: &str,
    args: &Value,
    reason: &str,
) -> crate::mcp::CallJudgment {
    crate::mcp::CallJudgment {
        record: CallRecord {
            tool: tool.to_string(),
            policy_tool: judge.policy_name(tool),
            args_sha256: crate::mcp::args_digest(args),
            decision: "deny",
            stage: Some("error".to_string()),
            rule: None,
            reason: reason.to_string(),
            forwarded: false,
        },
        forward: Err(Refusal::error(reason)),
    }
}

fn list_request(id: &str, cursor: Option<&str>) -> Value {
    let params = match cursor {
        Some(c) => json!({"cursor": c}),
        None => json!({}),
    };
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params})
}
