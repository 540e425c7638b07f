//! `mcp-proxy`: enforce a policy in front of an MCP server over the stdio transport
//! (newline-delimited JSON-RPC), see docs/mcp-proxy.md.
//!
//! Two threads move lines: client (our stdin) -> server (the child's stdin), and server (the
//! child's stdout) -> client (our stdout). Each side is read and written independently, so a
//! large message or a slow peer on one side never blocks the other. Everything passes through
//! byte for byte except `tools/list` responses (filtered by the policy) and `tools/call`
//! requests (judged before they reach the server). The child's stderr is inherited.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use toolwarden::import::mcp::check_server_name;
use toolwarden::{
    schema_name, Decision, Intent, PendingCall, Policy, Request, Stage, ToolMatch, Turn, Verdict,
};

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

/// At most this many calls wait for confirmation at once; the oldest is forgotten first.
const MAX_PENDING: usize = 256;
/// How long the server gets to exit after its stdin is closed, and again after SIGTERM.
const GRACE: Duration = Duration::from_secs(3);

/// The fixed inputs of every decision.
struct Judge {
    policy: Policy,
    request: Request,
    intent: Intent,
    server: Option<String>,
    advisory: bool,
    confirm_fields: Vec<String>,
}

/// What the two threads share.
#[derive(Default)]
struct State {
    /// Ids (as JSON text) of the client's `tools/list` requests awaiting the server's response.
    list_ids: HashSet<String>,
    /// The last schema the server listed for each tool (by the server's name).
    schemas: HashMap<String, Value>,
    /// Calls awaiting confirmation, by digest, oldest first in `pending_order`.
    pending: HashMap<String, PendingCall>,
    pending_order: VecDeque<String>,
    audit: Option<File>,
}

type Shared = Arc<Mutex<State>>;
type Out = Arc<Mutex<std::io::Stdout>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; keep going.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn log(message: &str) {
    eprintln!("toolwarden mcp-proxy: {message}");
}

/// Writes one message line to the client.
fn send(out: &Out, line: &[u8]) {
    let mut o = lock(out);
    let ok = o
        .write_all(line)
        .and_then(|()| o.write_all(b"\n"))
        .and_then(|()| o.flush());
    if let Err(e) = ok {
        log(&format!("cannot write to the client: {e}"));
    }
}

fn send_value(out: &Out, v: &Value) {
    send(out, v.to_string().as_bytes());
}

fn rpc_error(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut error = json!({"code": code, "message": message});
    if let Some(d) = data {
        error["data"] = d;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": error})
}

/// Runs the proxy; returns the server's exit code.
pub(crate) fn run(req: &RequestArgs, args: &ProxyArgs) -> Result<i32, String> {
    // A peer that goes away must not kill the proxy with SIGPIPE (main restores the default for
    // the filter-like commands): a failed write is logged, and the server's exit code stands.
    #[cfg(unix)]
    // SAFETY: called on the main thread before the proxy starts any thread; SIG_IGN is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let policy = load_policy(&req.policy)?;
    let (request, intent) = request_of(&policy, req)?;
    if let Some(s) = &args.server {
        check_server_name(s).map_err(|e| format!("`--server`: {e}"))?;
    }
    // A request the policy cannot judge is an error now, not a refusal on every call.
    policy
        .decide_tool(&request, &intent, "")
        .map_err(|e| e.to_string())?;
    let audit = match &args.audit {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open audit file `{}`: {e}", path.display()))?,
        ),
        None => None,
    };
    let (program, rest) = args
        .command
        .split_first()
        .ok_or("no server command given after `--`")?;
    let mut child = Command::new(program)
        .args(rest)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start the server `{program}`: {e}"))?;
    let (Some(server_in), Some(server_out)) = (child.stdin.take(), child.stdout.take()) else {
        let _ = child.kill();
        return Err("the server's stdio could not be piped".to_string());
    };
    let judge = Arc::new(Judge {
        confirm_fields: policy.confirm_fields().map(str::to_string).collect(),
        policy,
        request,
        intent,
        server: args.server.clone(),
        advisory: args.advisory,
    });
    let state: Shared = Arc::new(Mutex::new(State {
        audit,
        ..State::default()
    }));
    let out: Out = Arc::new(Mutex::new(std::io::stdout()));
    let exited = Arc::new(AtomicBool::new(false));

    {
        let (judge, state, out, exited) =
            (judge.clone(), state.clone(), out.clone(), exited.clone());
        let pid = child.id();
        std::thread::spawn(move || {
            client_to_server(&judge, &state, &out, server_in);
            shut_down(pid, &exited);
        });
    }
    let reader = {
        let (judge, state, out) = (judge.clone(), state.clone(), out.clone());
        std::thread::spawn(move || server_to_client(&judge, &state, &out, server_out))
    };
    let _ = reader.join();
    let code = wait_code(&mut child);
    exited.store(true, Ordering::SeqCst);
    let _ = lock(&out).flush();
    Ok(code)
}

/// The server's exit code; 128 + the signal number when a signal ended it.
fn wait_code(child: &mut Child) -> i32 {
    match child.wait() {
        Ok(status) => {
            if let Some(code) = status.code() {
                return code;
            }
            #[cfg(unix)]
            {
                use std::os::unix::process::ExitStatusExt;
                if let Some(sig) = status.signal() {
                    return 128 + sig;
                }
            }
            1
        }
        Err(e) => {
            log(&format!("cannot wait for the server: {e}"));
            1
        }
    }
}

/// After the client went away (its stdin closed, now the server's too): give the server
/// [`GRACE`] to exit, then SIGTERM, then SIGKILL (the MCP stdio shutdown sequence).
fn shut_down(pid: u32, exited: &AtomicBool) {
    let wait = || {
        let steps = GRACE.as_millis() / 50;
        for _ in 0..steps {
            if exited.load(Ordering::SeqCst) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        exited.load(Ordering::SeqCst)
    };
    if wait() {
        return;
    }
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return;
        };
        log("the server did not exit after its stdin closed; sending SIGTERM");
        // SAFETY: kill(2) with a pid we spawned and have not yet reaped (`exited` is false).
        unsafe { libc::kill(pid, libc::SIGTERM) };
        if wait() {
            return;
        }
        log("the server ignored SIGTERM; sending SIGKILL");
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    #[cfg(not(unix))]
    let _ = pid;
}

/// Reads one line (without its `\n`); `None` at end of input.
fn read_line(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> Option<()> {
    buf.clear();
    match reader.read_until(b'\n', buf) {
        Ok(0) => None,
        Ok(_) => {
            if buf.last() == Some(&b'\n') {
                buf.pop();
            }
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            Some(())
        }
        Err(e) => {
            log(&format!("read error: {e}"));
            None
        }
    }
}

fn client_to_server(judge: &Judge, state: &Shared, out: &Out, server_in: ChildStdin) {
    let mut server_in = std::io::BufWriter::new(server_in);
    let mut to_server = |line: &[u8]| {
        let ok = server_in
            .write_all(line)
            .and_then(|()| server_in.write_all(b"\n"))
            .and_then(|()| server_in.flush());
        if let Err(e) = ok {
            log(&format!("cannot write to the server: {e}"));
        }
    };
    let stdin = std::io::stdin();
    let mut reader = BufReader::new(stdin.lock());
    let mut buf = Vec::new();
    while read_line(&mut reader, &mut buf).is_some() {
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let msg: Value = match serde_json::from_slice(&buf) {
            Ok(v) => v,
            Err(e) => {
                log(&format!("malformed JSON from the client: {e}"));
                send_value(
                    out,
                    &rpc_error(&Value::Null, -32700, &format!("Parse error: {e}"), None),
                );
                continue;
            }
        };
        match msg {
            // A batch (JSON-RPC 2.0; MCP 2025-03-26): every element is handled on its own, so
            // no call inside a batch escapes the policy.
            Value::Array(items) => {
                if items.is_empty() {
                    send_value(
                        out,
                        &rpc_error(&Value::Null, -32600, "Invalid Request: empty batch", None),
                    );
                }
                for item in items {
                    let line = item.to_string();
                    from_client(judge, state, out, item, line.as_bytes(), &mut to_server);
                }
            }
            msg => {
                let line = std::mem::take(&mut buf);
                from_client(judge, state, out, msg, &line, &mut to_server);
                buf = line;
            }
        }
    }
    // The client went away: returning drops `server_in`, and closing the server's stdin asks
    // it to exit.
}

/// Handles one client message; `line` is its original text, forwarded untouched when the
/// message passes through.
fn from_client(
    judge: &Judge,
    state: &Shared,
    out: &Out,
    msg: Value,
    line: &[u8],
    to_server: &mut impl FnMut(&[u8]),
) {
    let Value::Object(obj) = &msg else {
        log("a client message is not a JSON object");
        send_value(
            out,
            &rpc_error(
                &Value::Null,
                -32600,
                "Invalid Request: expected a JSON-RPC object",
                None,
            ),
        );
        return;
    };
    let method = obj.get("method").and_then(Value::as_str);
    let id = obj.get("id").filter(|id| !id.is_null());
    match (method, id) {
        (Some("tools/list"), Some(id)) => {
            lock(state).list_ids.insert(id.to_string());
            to_server(line);
        }
        (Some("tools/call"), Some(id)) => {
            if let Some(forward) = judge_call(judge, state, out, id, obj) {
                match forward {
                    Forward::Untouched => to_server(line),
                    Forward::Rewritten(v) => to_server(v.to_string().as_bytes()),
                }
            }
        }
        _ => to_server(line),
    }
}

/// What to send the server after judging a call.
enum Forward {
    Untouched,
    Rewritten(Value),
}

/// The name the policy judges: `mcp__<server>__<tool>` with `--server`.
fn policy_name(judge: &Judge, tool: &str) -> String {
    match &judge.server {
        Some(s) => format!("mcp__{s}__{tool}"),
        None => tool.to_string(),
    }
}

/// Judges a `tools/call`; answers the client itself (refusal, confirmation, error) or returns
/// what to forward.
fn judge_call(
    judge: &Judge,
    state: &Shared,
    out: &Out,
    id: &Value,
    obj: &Map<String, Value>,
) -> Option<Forward> {
    let params = obj.get("params").and_then(Value::as_object);
    let Some(tool) = params.and_then(|p| p.get("name")).and_then(Value::as_str) else {
        send_value(
            out,
            &rpc_error(
                id,
                -32602,
                "Invalid params: tools/call needs params.name, a string",
                None,
            ),
        );
        return None;
    };
    let args = params
        .and_then(|p| p.get("arguments"))
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    let pname = policy_name(judge, tool);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        evaluate(judge, state, tool, &pname, &args)
    }))
    .unwrap_or_else(|_| Err("the evaluator panicked".to_string()));
    let digest = args_digest(&args);
    let verdict = match outcome {
        Ok(Evaluated::Unknown(reason, rule)) => {
            audit(
                state,
                call_record(
                    judge,
                    tool,
                    &pname,
                    &digest,
                    "deny",
                    Some("identity"),
                    rule.as_deref(),
                    &reason,
                    judge.advisory,
                ),
            );
            if judge.advisory {
                return Some(Forward::Untouched);
            }
            send_value(
                out,
                &rpc_error(
                    id,
                    -32602,
                    &format!("Unknown tool: {tool}"),
                    Some(json!({"reason": reason, "blocked_by_policy": true})),
                ),
            );
            return None;
        }
        Ok(Evaluated::Verdict(v)) => *v,
        Err(error) => {
            // Fail closed, even in advisory mode: a decision that could not be made is a refusal.
            let reason = format!(
                "toolwarden could not evaluate the policy for `{tool}` ({error}); the call is refused"
            );
            log(&reason);
            audit(
                state,
                call_record(
                    judge,
                    tool,
                    &pname,
                    &digest,
                    "deny",
                    Some("error"),
                    None,
                    &reason,
                    false,
                ),
            );
            let structured = json!({
                "ok": false,
                "decision": "deny",
                "error": reason,
                "metadata": {"blocked_by_policy": true, "stage": "error"},
            });
            send_value(out, &tool_error(id, &reason, structured));
            return None;
        }
    };
    let stage = verdict.stage.map(Stage::as_str);
    audit(
        state,
        call_record(
            judge,
            tool,
            &pname,
            &digest,
            verdict.decision.as_str(),
            stage,
            verdict.source.as_deref(),
            &verdict.reason,
            judge.advisory,
        ),
    );
    match verdict.decision {
        Decision::Allow => match verdict.args_for_execution {
            Some(exec) if Value::Object(exec.clone()) != args => {
                let mut msg = Value::Object(obj.clone());
                msg["params"]["arguments"] = Value::Object(exec);
                Some(Forward::Rewritten(msg))
            }
            _ => Some(Forward::Untouched),
        },
        _ if judge.advisory => Some(Forward::Untouched),
        _ => {
            let text = explain(judge, tool, &verdict);
            let mut structured = verdict.to_json();
            structured["decision"] = Value::from(verdict.decision.as_str());
            structured["tool"] = Value::from(tool);
            send_value(out, &tool_error(id, &text, structured));
            None
        }
    }
}

/// A `tools/call` result the client shows the model: `isError: true`, a text content and the
/// structured verdict.
fn tool_error(id: &Value, text: &str, structured: Value) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {
            "content": [{"type": "text", "text": text}],
            "structuredContent": structured,
            "isError": true,
        }
    })
}

enum Evaluated {
    /// The policy knows no such tool (JSON-RPC -32602): the reason and the rule's source.
    Unknown(String, Option<String>),
    Verdict(Box<Verdict>),
}

/// Judges one call. Confirmation: a call that needs it is remembered by its digest; a later
/// call with a confirmation field set to `true` and the same arguments is checked against the
/// remembered one ([`Policy::check_call_with`]'s pending digest) and then allowed.
fn evaluate(
    judge: &Judge,
    state: &Shared,
    tool: &str,
    pname: &str,
    args: &Value,
) -> Result<Evaluated, String> {
    let p = &judge.policy;
    let d = p
        .decide_tool(&judge.request, &judge.intent, pname)
        .map_err(|e| e.to_string())?;
    if d.stage == Some(Stage::Identity) && d.matched == ToolMatch::Unknown {
        return Ok(Evaluated::Unknown(
            p.reason(pname, &d, &judge.request),
            p.rule_source(d.rule).map(|l| l.to_string()),
        ));
    }
    // The tool's schema as the server last listed it, under the policy's name for it: its
    // annotations may tighten the decision exactly as they did in tools/list.
    let mut schema = lock(state)
        .schemas
        .get(tool)
        .cloned()
        .unwrap_or_else(|| json!({}));
    if !schema.is_object() {
        schema = json!({});
    }
    schema["name"] = Value::from(pname);
    let mut confirmed = false;
    let stripped = match args {
        Value::Object(o) => {
            let mut o = o.clone();
            for f in &judge.confirm_fields {
                if let Some(v) = o.remove(f) {
                    confirmed |= v == Value::Bool(true);
                }
            }
            Value::Object(o)
        }
        other => other.clone(),
    };
    // A proxy sees no user turns: each call is judged in a turn of its own.
    let check = |args: &Value, pending: Option<&PendingCall>| {
        p.check_call_schema(
            &judge.request,
            &judge.intent,
            &mut Turn::new(),
            &schema,
            args,
            pending,
        )
        .map_err(|e| e.to_string())
    };
    let unconfirmed = check(&stripped, None)?;
    let Some(pending) = unconfirmed.pending.clone() else {
        return Ok(Evaluated::Verdict(Box::new(check(args, None)?)));
    };
    let mut st = lock(state);
    if confirmed {
        if let Some(earlier) = st.pending.get(&pending.digest).cloned() {
            drop(st);
            let v = check(args, Some(&earlier))?;
            if v.is_allowed() {
                let mut st = lock(state);
                st.pending.remove(&pending.digest);
                st.pending_order.retain(|d| *d != pending.digest);
            }
            return Ok(Evaluated::Verdict(Box::new(v)));
        }
    }
    // Not confirmed, or confirmed without an earlier call asking for it: ask now.
    if !st.pending.contains_key(&pending.digest) {
        st.pending_order.push_back(pending.digest.clone());
        st.pending.insert(pending.digest.clone(), pending);
        while st.pending_order.len() > MAX_PENDING {
            if let Some(old) = st.pending_order.pop_front() {
                st.pending.remove(&old);
            }
        }
    }
    let mut v = unconfirmed;
    if confirmed {
        v.reason = format!(
            "{} (no earlier call to this tool with these arguments was waiting for confirmation, so this confirmation does not count; this call now waits for one)",
            v.reason
        );
    }
    Ok(Evaluated::Verdict(Box::new(v)))
}

/// The text a refused or held call returns: what happened, where the rule is, and what would
/// allow the call.
fn explain(judge: &Judge, tool: &str, v: &Verdict) -> String {
    let stage = v.stage.map_or("none", Stage::as_str);
    let source = v
        .source
        .as_deref()
        .map(|s| format!(", rule at {s}"))
        .unwrap_or_default();
    let effect = v.effect.as_deref().unwrap_or("?");
    let fields = judge
        .confirm_fields
        .iter()
        .map(|f| format!("`{f}`"))
        .collect::<Vec<_>>()
        .join(" or ");
    if v.decision == Decision::Confirm {
        return format!(
            "toolwarden holds `{tool}` until the user confirms it: {} (stage {stage}{source}). \
             To run it: ask the user; if they agree, call `{tool}` again with the same arguments \
             and {fields} set to true.",
            v.reason
        );
    }
    let allow = match v.stage {
        Some(Stage::Identity) => "declaring or enabling the tool in the policy".to_string(),
        Some(Stage::Connector) => {
            "adding this server to the connector allowlist (`--connectors`)".to_string()
        }
        Some(Stage::Tenant) => "a session tenant (`--tenant`)".to_string(),
        Some(Stage::Role) => "a principal with one of the tool's roles (`--role`)".to_string(),
        Some(Stage::Permission) => "the missing permission (`--permission`)".to_string(),
        Some(Stage::Mode) => format!("a mode whose ceiling allows effect `{effect}` (`--mode`)"),
        Some(Stage::Intent) => {
            format!("an intent whose matrix row offers effect `{effect}` (`--intent`)")
        }
        Some(Stage::TenantArg) => "naming this session's tenant in the arguments".to_string(),
        Some(Stage::Requires) => "supplying the required arguments as a JSON object".to_string(),
        Some(Stage::Confirmation) => {
            format!("repeating exactly the call the user confirmed, with {fields} set to true")
        }
        Some(Stage::TurnLimit) => "a new user turn".to_string(),
        None => "a policy that allows it".to_string(),
    };
    format!(
        "toolwarden blocked `{tool}`: {} (stage {stage}{source}). It would be allowed by {allow}.",
        v.reason
    )
}

fn server_to_client(
    judge: &Judge,
    state: &Shared,
    out: &Out,
    server_out: std::process::ChildStdout,
) {
    let mut reader = BufReader::new(server_out);
    let mut buf = Vec::new();
    while read_line(&mut reader, &mut buf).is_some() {
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let msg: Value = match serde_json::from_slice(&buf) {
            Ok(v) => v,
            Err(e) => {
                let shown: String = String::from_utf8_lossy(&buf).chars().take(200).collect();
                log(&format!(
                    "dropped a malformed line from the server ({e}): {shown}"
                ));
                continue;
            }
        };
        match msg {
            Value::Array(items) => {
                for item in items {
                    let line = item.to_string();
                    from_server(judge, state, out, item, line.as_bytes());
                }
            }
            msg => from_server(judge, state, out, msg, &buf),
        }
    }
}

fn from_server(judge: &Judge, state: &Shared, out: &Out, mut msg: Value, line: &[u8]) {
    let is_list_response = match msg.as_object() {
        Some(obj) if !obj.contains_key("method") => obj
            .get("id")
            .is_some_and(|id| lock(state).list_ids.remove(&id.to_string())),
        _ => false,
    };
    if !is_list_response {
        send(out, line);
        return;
    }
    let filtered = catch_unwind(AssertUnwindSafe(|| filter_list(judge, state, &mut msg)))
        .unwrap_or_else(|_| {
            log("the evaluator panicked on a tools/list response; no tool is offered");
            if let Some(result) = msg.get_mut("result").and_then(Value::as_object_mut) {
                result.insert("tools".to_string(), Value::Array(Vec::new()));
            }
            true
        });
    if filtered {
        send_value(out, &msg);
    } else {
        send(out, line);
    }
}

/// Filters a `tools/list` response in place; returns whether it changed.
fn filter_list(judge: &Judge, state: &Shared, msg: &mut Value) -> bool {
    let Some(tools) = msg
        .get_mut("result")
        .and_then(|r| r.get_mut("tools"))
        .and_then(Value::as_array_mut)
    else {
        // An error response, or a result without a tool list: nothing to show, nothing to hide.
        return false;
    };
    let p = &judge.policy;
    let mut kept = Vec::with_capacity(tools.len());
    let mut offered = Vec::new();
    let mut hidden = Vec::new();
    for schema in tools.drain(..) {
        let name = match schema_name(&schema) {
            Ok(n) => n.to_string(),
            Err(e) => {
                log(&format!(
                    "hid a tool the server listed without a usable name: {e}"
                ));
                hidden.push(json!({"tool": Value::Null, "stage": "error", "reason": e}));
                continue;
            }
        };
        let pname = policy_name(judge, &name);
        let mut judged = schema.clone();
        judged["name"] = Value::from(pname.as_str());
        let decision =
            p.schema_decisions(&judge.request, &judge.intent, std::slice::from_ref(&judged));
        lock(state).schemas.insert(name.clone(), schema.clone());
        match decision {
            Ok(d)
                if d.first()
                    .is_some_and(|d| d.decision.decision != Decision::Deny) =>
            {
                offered.push(Value::from(name));
                let confirm = d
                    .first()
                    .is_some_and(|d| d.decision.decision == Decision::Confirm);
                let mut schema = schema;
                if confirm && !judge.advisory {
                    declare_confirm_field(judge, &mut schema);
                }
                kept.push(schema);
            }
            Ok(d) => {
                let entry = match d.first() {
                    Some(d) => json!({
                        "tool": name,
                        "stage": d.decision.stage.map(Stage::as_str),
                        "rule": p.rule_source(d.decision.rule).map(|l| l.to_string()),
                        "annotation_effect": d.annotation_effect,
                        "tightened": d.tightened,
                    }),
                    None => json!({"tool": name}),
                };
                hidden.push(entry);
                if judge.advisory {
                    kept.push(schema);
                }
            }
            Err(e) => {
                log(&format!("hid `{name}`: {e}"));
                hidden.push(json!({"tool": name, "stage": "error", "reason": e.to_string()}));
                if judge.advisory {
                    kept.push(schema);
                }
            }
        }
    }
    *tools = kept;
    audit(
        state,
        json!({
            "time": now_rfc3339(),
            "event": "tools/list",
            "offered": offered,
            "hidden": hidden,
            "advisory": judge.advisory,
        }),
    );
    true
}

/// Adds the policy's first confirmation field to the `inputSchema` of a tool whose calls need
/// confirmation, so the model learns the field exists and clients that validate arguments let
/// it through. A schema that already has a property of that name (the server's own argument) or
/// whose `inputSchema`/`properties` is not an object is left as it is.
fn declare_confirm_field(judge: &Judge, schema: &mut Value) {
    let Some(field) = judge.confirm_fields.first() else {
        return;
    };
    let Some(input) = schema.get_mut("inputSchema").and_then(Value::as_object_mut) else {
        return;
    };
    let properties = input
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(properties) = properties.as_object_mut() else {
        return;
    };
    if properties.contains_key(field) {
        return;
    }
    properties.insert(
        field.clone(),
        json!({
            "type": "boolean",
            "description": "toolwarden policy: this tool needs the user's confirmation. Leave this out; when a call is held, ask the user, and only if they agree repeat the same call with this set to true.",
        }),
    );
}

/// One audit record for a call.
#[allow(clippy::too_many_arguments)]
fn call_record(
    judge: &Judge,
    tool: &str,
    pname: &str,
    digest: &str,
    decision: &str,
    stage: Option<&str>,
    rule: Option<&str>,
    reason: &str,
    forwarded_anyway: bool,
) -> Value {
    json!({
        "time": now_rfc3339(),
        "event": "tools/call",
        "tool": tool,
        "policy_tool": pname,
        "args_sha256": digest,
        "decision": decision,
        "stage": stage,
        "rule": rule,
        "reason": reason,
        "advisory": judge.advisory,
        "forwarded": decision == "allow" || forwarded_anyway,
    })
}

/// Appends one JSON line to the audit file and flushes it.
fn audit(state: &Shared, record: Value) {
    let mut st = lock(state);
    if let Some(file) = st.audit.as_mut() {
        let mut line = record.to_string();
        line.push('\n');
        if let Err(e) = file.write_all(line.as_bytes()).and_then(|()| file.flush()) {
            log(&format!("cannot write the audit file: {e}"));
        }
    }
}

/// Hex SHA-256 of the canonical JSON of the arguments (object keys sorted at every depth).
fn args_digest(args: &Value) -> String {
    let text = toolwarden::canonical_json_text(args);
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn now_rfc3339() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        now.subsec_millis()
    )
}
