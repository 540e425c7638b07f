//! The proxy's core: one client, one server, no I/O. Each message in gives the messages to
//! send each way and the log lines; audit records are written (and flushed) into the
//! [`AuditSink`] before the call they record is handed out for forwarding.
//!
//! Rules it keeps, whatever the framing:
//!
//! - Every `tools/call` is judged: with an id, with `"id": null`, without an id (a
//!   notification: refused ones are not forwarded and only logged and audited), and each one
//!   inside a batch (a batch is split: each element is judged, forwarded and answered on its
//!   own). What goes to the server is the judged message, serialized again.
//! - Before the first call is judged the proxy has the server's tools: after the client's
//!   `notifications/initialized` (and after every `notifications/tools/list_changed`) it lists
//!   them itself, with ids of its own ([`OWN_ID_PREFIX`]), following `nextCursor`; a client
//!   that calls a tool without sending `notifications/initialized` gets the listing as soon as
//!   the server has answered its `initialize`. Calls that
//!   arrive meanwhile wait; a listing that fails, or a wait that ends
//!   ([`Session::wait_expired`]), refuses them (fail closed).
//! - Every `tools/list` result is filtered: responses are matched to the client's requests by
//!   id value, and a response carrying a `tools` array is filtered even when it matches none.
//! - A call is forwarded only after its record was written when an audit sink is given; in
//!   advisory mode a failed write stops all forwarding of calls.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{json, Map, Value};

use crate::audit::Clock;
use crate::mcp::judge::{Judge, PendingCalls, Refusal};
use crate::mcp::message::{
    is_own_id, parse_message, rpc_error, valid_id, IdKey, INVALID_PARAMS, INVALID_REQUEST,
    OWN_ID_PREFIX,
};
use crate::mcp::record::{AuditSink, CallRecord};

/// At most this many client messages wait for the server's tool list; more are refused.
pub const MAX_WAITING: usize = 1024;
/// At most this many distinct ids of the client's `tools/list` requests are awaited at once.
pub const MAX_LIST_REQUESTS: usize = 4096;
/// At most this many pages of the server's tool list are read; a longer list is a failure.
pub const MAX_LIST_PAGES: usize = 1000;

/// What one message in produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Messages to send the server, in order (serialize each as one line).
    pub to_server: Vec<Value>,
    /// Messages to send the client, in order.
    pub to_client: Vec<Value>,
    /// Lines for the operator (stderr).
    pub log: Vec<String>,
    /// Set when client messages started waiting for the server's tool list: call
    /// [`Session::wait_expired`] with this number when the wait should end.
    pub wait: Option<u64>,
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
    audit: Option<Box<dyn AuditSink>>,
    clock: Box<dyn Clock + Send>,
    /// In-flight client `tools/list` requests, counted per id.
    list_ids: HashMap<IdKey, usize>,
    /// The last schema the server listed for each tool (by the server's name).
    schemas: HashMap<String, Value>,
    pending: PendingCalls,
    listing: Listing,
    own_seq: u64,
    waiting: VecDeque<Value>,
    wait_generation: u64,
    told: HashSet<String>,
    /// Set in advisory mode once an audit write failed: no call is forwarded any more.
    halted: Option<String>,
    /// The ids of the client's `initialize` requests not yet answered.
    initialize_ids: HashSet<IdKey>,
    /// Whether the server answered an `initialize`.
    server_initialized: bool,
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
    /// the records' `time`.
    pub fn new(
        judge: Judge,
        audit: Option<Box<dyn AuditSink>>,
        clock: Box<dyn Clock + Send>,
    ) -> Session {
        Session {
            judge,
            audit,
            clock,
            list_ids: HashMap::new(),
            schemas: HashMap::new(),
            pending: PendingCalls::default(),
            listing: Listing::NotStarted,
            own_seq: 0,
            waiting: VecDeque::new(),
            wait_generation: 0,
            told: HashSet::new(),
            halted: None,
            initialize_ids: HashSet::new(),
            server_initialized: false,
        }
    }

    /// Whether the server's tool list has been read and calls are judged at once.
    pub fn tools_known(&self) -> bool {
        matches!(self.listing, Listing::Ready)
    }

    /// Handles one message from the client (one line, without its newline).
    pub fn from_client(&mut self, text: &[u8]) -> Outcome {
        let mut out = Outcome::default();
        let msg = match parse_message(text) {
            Ok(v) => v,
            Err(e) => {
                out.log.push(format!("refused a client message: {e}"));
                out.to_client
                    .push(rpc_error(&Value::Null, e.code(), &e.to_string(), None));
                return out;
            }
        };
        self.client_value(msg, &mut out);
        out
    }

    /// Handles one client message that the transport refused before parsing (a line over
    /// [`crate::mcp::message::MAX_MESSAGE_BYTES`]): answers `-32600`.
    pub fn client_too_large(&mut self, len: usize) -> Outcome {
        let message = format!(
            "Invalid Request: the message is over {len} bytes, over the limit of {} bytes",
            crate::mcp::message::MAX_MESSAGE_BYTES
        );
        Outcome {
            to_client: vec![rpc_error(&Value::Null, INVALID_REQUEST, &message, None)],
            log: vec![format!("refused a client message: {message}")],
            ..Outcome::default()
        }
    }

    fn client_value(&mut self, msg: Value, out: &mut Outcome) {
        let waits = matches!(self.listing, Listing::NotStarted | Listing::InFlight { .. })
            && has_call(&msg);
        if !waits {
            self.handle_client(msg, out, None);
            return;
        }
        if self.waiting.len() >= MAX_WAITING {
            let reason =
                format!("more than {MAX_WAITING} messages are waiting for the server's tool list");
            self.handle_client(msg, out, Some(&reason));
            return;
        }
        if self.waiting.is_empty() {
            out.wait = Some(self.wait_generation);
        }
        self.waiting.push_back(msg);
        // A client that calls tools before it sent `notifications/initialized`, once the server
        // has answered `initialize`: list now rather than make the call wait in vain.
        if matches!(self.listing, Listing::NotStarted) && self.server_initialized {
            self.start_listing(out);
        }
    }

    /// Ends the wait numbered `generation` (from [`Outcome::wait`]): the client messages still
    /// waiting for the server's tool list are handled now, and their calls refused (the tools
    /// are not known). Does nothing when that wait is over already.
    pub fn wait_expired(&mut self, generation: u64) -> Outcome {
        let mut out = Outcome::default();
        if generation != self.wait_generation || self.waiting.is_empty() {
            return out;
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
        out
    }

    fn release_waiting(&mut self, out: &mut Outcome, not_ready: Option<&str>) {
        self.wait_generation += 1;
        let waiting = std::mem::take(&mut self.waiting);
        for msg in waiting {
            self.handle_client(msg, out, not_ready);
        }
    }

    /// Handles a parsed client message now. `not_ready`: why the tools are not known, when
    /// calls must be refused for that.
    fn handle_client(&mut self, msg: Value, out: &mut Outcome, not_ready: Option<&str>) {
        let mut start_listing = false;
        match msg {
            Value::Array(items) => {
                if items.is_empty() {
                    out.to_client.push(rpc_error(
                        &Value::Null,
                        INVALID_REQUEST,
                        "Invalid Request: empty batch",
                        None,
                    ));
                    return;
                }
                // Each element is judged and sent on its own (MCP since 2025-06-18 has no
                // batches, so a server may not read one); its answer comes on its own too.
                for item in items {
                    let (f, a) = self.client_item(item, out, not_ready, &mut start_listing);
                    out.to_server.extend(f);
                    out.to_client.extend(a);
                }
            }
            msg => {
                let (f, a) = self.client_item(msg, out, not_ready, &mut start_listing);
                out.to_server.extend(f);
                out.to_client.extend(a);
            }
        }
        if start_listing {
            self.start_listing(out);
        }
    }

    /// One client message (or batch element): what to forward, what to answer.
    fn client_item(
        &mut self,
        item: Value,
        out: &mut Outcome,
        not_ready: Option<&str>,
        start_listing: &mut bool,
    ) -> (Option<Value>, Option<Value>) {
        let Value::Object(obj) = item else {
            out.log
                .push("refused a client message that is not a JSON object".to_string());
            return (
                None,
                Some(rpc_error(
                    &Value::Null,
                    INVALID_REQUEST,
                    "Invalid Request: expected a JSON-RPC object",
                    None,
                )),
            );
        };
        let id = obj.get("id").cloned();
        if let Some(bad) = id.as_ref().filter(|id| !valid_id(id)) {
            out.log.push(format!(
                "refused a client message whose id is not a string, a number or null: {bad}"
            ));
            return (
                None,
                Some(rpc_error(
                    &Value::Null,
                    INVALID_REQUEST,
                    "Invalid Request: the id must be a string, a number or null",
                    None,
                )),
            );
        }
        if let Some(own) = id.as_ref().filter(|id| is_own_id(id)) {
            out.log.push(format!(
                "refused a client message with the reserved id {own}"
            ));
            return (
                None,
                Some(rpc_error(
                    own,
                    INVALID_REQUEST,
                    &format!(
                        "Invalid Request: ids starting with `{OWN_ID_PREFIX}` are reserved by the proxy"
                    ),
                    None,
                )),
            );
        }
        let method = match obj.get("method") {
            None => None,
            Some(Value::String(m)) => Some(m.clone()),
            Some(_) => {
                out.log
                    .push("refused a client message whose method is not a string".to_string());
                return (
                    None,
                    id.map(|id| {
                        rpc_error(
                            &id,
                            INVALID_REQUEST,
                            "Invalid Request: the method must be a string",
                            None,
                        )
                    }),
                );
            }
        };
        match method.as_deref() {
            Some("tools/call") => self.client_call(obj, id.as_ref(), out, not_ready),
            Some("tools/list") => {
                // Bounded: past the cap a request is not counted, and its answer is filtered
                // all the same when it carries a `tools` array.
                if let Some(key) = id.as_ref().and_then(IdKey::of) {
                    if self.list_ids.len() < MAX_LIST_REQUESTS || self.list_ids.contains_key(&key) {
                        *self.list_ids.entry(key).or_default() += 1;
                    }
                }
                (Some(Value::Object(obj)), None)
            }
            Some("initialize") => {
                if let Some(key) = id.as_ref().and_then(IdKey::of) {
                    self.initialize_ids.insert(key);
                }
                (Some(Value::Object(obj)), None)
            }
            Some("notifications/initialized") => {
                if matches!(self.listing, Listing::NotStarted) {
                    *start_listing = true;
                }
                (Some(Value::Object(obj)), None)
            }
            _ => (Some(Value::Object(obj)), None),
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
            (None, None) => {
                self.judge
                    .judge_call(&mut self.pending, self.schemas.get(&tool), &tool, &args)
            }
        };
        // Record first; a call that cannot be recorded is not forwarded.
        if let Err(e) = self.write_audit(
            &judgment
                .record
                .to_json(self.clock.now(), self.judge.advisory()),
        ) {
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
                return out;
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
        out
    }

    /// Handles a server line the transport dropped before parsing (over the size cap).
    pub fn server_too_large(&mut self, len: usize) -> Outcome {
        Outcome {
            log: vec![format!(
                "dropped a line from the server of more than {len} bytes (the limit is {} bytes)",
                crate::mcp::message::MAX_MESSAGE_BYTES
            )],
            ..Outcome::default()
        }
    }

    fn server_item(&mut self, mut msg: Value, out: &mut Outcome) -> Option<Value> {
        let Some(obj) = msg.as_object() else {
            return Some(msg);
        };
        if let Some(method) = obj.get("method") {
            if method == "notifications/tools/list_changed" {
                self.start_listing(out);
            }
            return Some(msg);
        }
        let id = obj.get("id").cloned().unwrap_or(Value::Null);
        if is_own_id(&id) {
            self.own_list_response(&id, msg, out);
            return None;
        }
        if let Some(key) = IdKey::of(&id) {
            if self.initialize_ids.remove(&key) && obj.contains_key("result") {
                self.server_initialized = true;
            }
        }
        let matched = match IdKey::of(&id).and_then(|k| self.list_ids.get_mut(&k).map(|n| (k, n))) {
            Some((key, n)) => {
                *n -= 1;
                if *n == 0 {
                    self.list_ids.remove(&key);
                }
                true
            }
            None => false,
        };
        let has_tools = msg
            .get("result")
            .and_then(|r| r.get("tools"))
            .is_some_and(Value::is_array);
        if has_tools || (matched && msg.get("result").is_some_and(Value::is_object)) {
            self.filter_result(&mut msg, out);
        }
        Some(msg)
    }

    /// Filters a `tools/list` result in place and records it.
    fn filter_result(&mut self, msg: &mut Value, out: &mut Outcome) {
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
        for schema in &tools {
            if let Ok(name) = crate::schema_name(schema) {
                self.schemas.insert(name.to_string(), schema.clone());
            }
        }
        let judgment = self.judge.judge_list(tools);
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
                let judgment = self.judge.judge_list(tools.clone());
                self.tell_tightened(&judgment.tightened, out);
                self.schemas.clear();
                for schema in tools {
                    if let Ok(name) = crate::schema_name(&schema) {
                        self.schemas.insert(name.to_string(), schema);
                    }
                }
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

/// Whether a client message is, or holds in its batch, a `tools/call`.
fn has_call(msg: &Value) -> bool {
    let is_call = |v: &Value| v.get("method").and_then(Value::as_str) == Some("tools/call");
    match msg {
        Value::Array(items) => items.iter().any(is_call),
        v => is_call(v),
    }
}
