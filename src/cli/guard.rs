//! `guard` (the execution guard, with pending-call and turn files or one session file for a
//! shell flow) and `import yaml`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolwarden::invisible::escape;
use toolwarden::{parse_args, Decision, PendingCall, Policy, Session, Stage, Turn};

use super::commands::{load_policy, pretty, request_of};
use super::RequestArgs;

type CmdResult = Result<i32, String>;

/// The call-specific flags of `guard`.
pub(crate) struct CallArgs {
    /// `None` only with `declassify`.
    pub tool: Option<String>,
    pub args: String,
    pub args_file: Option<PathBuf>,
    pub pending: Option<PathBuf>,
    pub turn: Option<PathBuf>,
    pub new_turn: bool,
    pub session: Option<PathBuf>,
    pub declassify: Option<String>,
    pub legacy: Option<PathBuf>,
}

/// The turn file of `--turn`: the [`Turn`] count, and the digests of the calls held for
/// confirmation in this turn (absent in files written before they were recorded, and while
/// none is held). A call held in a turn is confirmed in a later one, once the user could answer.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnFile {
    transactional_calls: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    held: Vec<String>,
}

/// Loads a `.warden` policy, or a `tool_policies.yaml` (`.yaml`/`.yml`, with an optional legacy
/// catalog) as [`Policy::from_yaml`] does.
fn load_any(path: &Path, legacy: Option<&Path>) -> Result<Policy, String> {
    let yaml = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"));
    if !yaml {
        if legacy.is_some() {
            return Err("`--legacy` goes with a tool_policies.yaml policy, not warden text (use `include yaml \"…\" legacy \"…\"` there)".to_string());
        }
        return load_policy(path);
    }
    Policy::from_yaml(path, legacy).map_err(|e| {
        format!(
            "policy `{}` does not load:\n{}",
            path.display(),
            e.render().trim_end()
        )
    })
}

/// Reads a small state file: `Ok(None)` when it does not exist.
fn read_state(path: &Path, what: &str) -> Result<Option<String>, String> {
    // Reads a regular file only, of at most 4 MiB: `read_file` stops one byte past the cap, so a
    // longer file is only known to be larger than it, and the message names the cap.
    match toolwarden::limits::read_file(path, 4 * 1024 * 1024) {
        Err(e)
            if e.get_ref()
                .is_some_and(|inner| inner.is::<toolwarden::limits::TooLarge>()) =>
        {
            Err(format!(
                "{what} file `{}` is larger than 4 MiB, too large to be one; delete it",
                path.display()
            ))
        }
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
            format!(
                "{what} file `{}` is corrupt: not UTF-8 text; delete it",
                path.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {what} file `{}`: {e}", path.display())),
    }
}

/// Writes `text` to `path` through a uniquely named temporary file in the same folder and a
/// rename, so a reader never sees half a file and two writers never share a temporary name.
fn write_state(path: &Path, text: &str, what: &str) -> Result<(), String> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let fail =
        |e: &dyn std::fmt::Display| format!("cannot write {what} file `{}`: {e}", path.display());
    // Created new (never an existing file) and, on unix, never through a symlink.
    let mut tmp = tempfile::Builder::new()
        .prefix(".toolwarden-")
        .suffix(".tmp")
        .make_in(dir, |name| {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
            options.open(name)
        })
        .map_err(|e| fail(&e))?;
    tmp.write_all(text.as_bytes())
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| fail(&e))?;
    tmp.persist(path).map_err(|e| fail(&e.error))?;
    Ok(())
}

/// The lock file that guards a state file: `<path>.lock` beside it. It is never renamed or
/// removed, so every process locks the same file whatever the state file's rename did.
fn lock_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

/// Takes an exclusive lock on the lock file of each state file (in a fixed order, so two runs
/// naming the same files never wait on each other in a cycle), blocking until it is free. The
/// locks are held until the returned files are dropped: for the whole read, judge and write.
fn lock_state(paths: &[&Path]) -> Result<Vec<std::fs::File>, String> {
    use fs4::fs_std::FileExt;
    let mut locks: Vec<PathBuf> = paths.iter().map(|p| lock_path(p)).collect();
    locks.sort();
    locks.dedup();
    let mut held = Vec::with_capacity(locks.len());
    for lock in locks {
        let mut options = std::fs::OpenOptions::new();
        options.create(true).truncate(false).write(true);
        // A FIFO or device in the lock file's place must not block the open (it is refused
        // below as not a regular file), and a symlink there is never followed: opening it
        // would create or truncate whatever file it points to.
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(
            &mut options,
            libc::O_NONBLOCK | libc::O_NOFOLLOW,
        );
        let file = options.open(&lock).map_err(|e| {
            if is_symlink(&lock) {
                format!(
                    "lock file `{}` is a symbolic link; toolwarden does not follow it: delete it",
                    lock.display()
                )
            } else {
                format!("cannot open lock file `{}`: {e}", lock.display())
            }
        })?;
        if !file
            .metadata()
            .map_err(|e| format!("cannot read lock file `{}`: {e}", lock.display()))?
            .is_file()
        {
            return Err(format!(
                "lock file `{}` is not a regular file; delete it",
                lock.display()
            ));
        }
        file.lock_exclusive()
            .map_err(|e| format!("cannot lock `{}`: {e}", lock.display()))?;
        held.push(file);
    }
    Ok(held)
}

/// The call's arguments, parsed: from `--args-file`, from standard input for `--args -`, else
/// the `--args` text. Files and standard input are read up to
/// [`toolwarden::limits::MAX_ARGS_BYTES`] and
/// must be UTF-8.
fn read_call_args(call: &CallArgs) -> Result<Value, String> {
    use std::io::Read as _;
    let max = toolwarden::limits::MAX_ARGS_BYTES;
    let (flag, text) = match &call.args_file {
        Some(path) => {
            let text = toolwarden::limits::read_text(path, max)
                .map_err(|e| format!("`--args-file`: cannot read `{}`: {e}", path.display()))?;
            ("--args-file", text)
        }
        None if call.args == "-" => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .lock()
                .take(max as u64 + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| format!("`--args -`: cannot read standard input: {e}"))?;
            if bytes.len() > max {
                return Err(format!(
                    "`--args -`: standard input is larger than the limit of {max} bytes"
                ));
            }
            let text = String::from_utf8(bytes).map_err(|e| {
                format!(
                    "`--args -`: standard input is not valid UTF-8 (byte {})",
                    e.utf8_error().valid_up_to()
                )
            })?;
            ("--args -", text)
        }
        None => ("--args", call.args.clone()),
    };
    parse_args(&text).map_err(|e| format!("`{flag}`: {e}"))
}

/// Whether `path` itself (not what it points to) is a symbolic link.
fn is_symlink(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

pub(crate) fn guard(
    req: &RequestArgs,
    call: &CallArgs,
    json: bool,
    log: &super::AuditArgs,
) -> CmdResult {
    if call.new_turn && call.turn.is_none() && call.session.is_none() {
        return Err("`--new-turn` needs `--turn FILE` or `--session FILE`: the state whose turn starts again".to_string());
    }
    let policy = load_any(&req.policy, call.legacy.as_deref())?;
    if let (Some(label), Some(path)) = (&call.declassify, &call.session) {
        return guard_declassify(&policy, label, path, json, log);
    }
    let Some(tool) = call.tool.as_deref() else {
        return Err(
            "`guard` needs `--tool NAME` (or `--declassify LABEL` with `--session`)".to_string(),
        );
    };
    let (request, intent) = request_of(&policy, req)?;
    let args = read_call_args(call)?;
    if let Some(path) = &call.session {
        return guard_session(
            &policy, &request, &intent, tool, call, &args, path, json, log,
        );
    }
    // One run at a time per state file, from reading it to writing it back: parallel runs see
    // each other's counts and pending calls, so the turn limit holds across processes.
    let state_files: Vec<&Path> = [call.pending.as_deref(), call.turn.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    let _locks = lock_state(&state_files)?;
    // A missing turn file, or `--new-turn`, starts a new turn: nothing held in it yet.
    let mut turn_file = match (&call.turn, call.new_turn) {
        (Some(path), false) => match read_state(path, "turn")? {
            Some(text) => serde_json::from_str::<TurnFile>(&text).map_err(|e| {
                format!(
                    "turn file `{}` is corrupt ({e}); delete it to start a new turn",
                    path.display()
                )
            })?,
            None => TurnFile::default(),
        },
        _ => TurnFile::default(),
    };
    let mut turn = Turn {
        transactional_calls: turn_file.transactional_calls,
    };
    let pending: Option<PendingCall> = match &call.pending {
        Some(path) => match read_state(path, "pending")? {
            Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
                format!(
                    "pending file `{}` is corrupt ({e}); delete it and ask the user to confirm again",
                    path.display()
                )
            })?),
            None => None,
        },
        None => None,
    };
    // Whether the pending call was held in this very turn: then the user has not had the
    // chance to answer it yet. Without `--turn` the guard cannot tell turns apart and takes
    // every pending call as current (so another call never replaces it).
    let held_this_turn = |p: &PendingCall| match &call.turn {
        Some(_) => turn_file.held.contains(&p.digest),
        None => true,
    };
    let pending_this_turn = pending.as_ref().is_some_and(held_this_turn);
    // A confirmation counts only after the user could have answered: a call held in this turn
    // is judged as if nothing awaited confirmation (denied at stage `confirmation`).
    let unanswered =
        call.turn.is_some() && pending_this_turn && policy.strip_confirmation(&args) != args;
    let judged_pending = if unanswered { None } else { pending.as_ref() };
    // With a pending file, the guard knows which call awaits confirmation: a confirmation is
    // trusted only against it (strict). Without one, there is nothing to check it against.
    let strict = call.pending.is_some();
    let verdict = match (super::commands::auditor(log)?, strict) {
        (Some(mut a), true) => a.check_call_strict(
            &policy,
            1,
            &request,
            &intent,
            &mut turn,
            tool,
            &args,
            judged_pending,
        ),
        (Some(mut a), false) => a.check_call(
            &policy,
            1,
            &request,
            &intent,
            &mut turn,
            tool,
            &args,
            judged_pending,
        ),
        (None, true) => policy
            .check_call_strict(&request, &intent, &mut turn, tool, &args, judged_pending)
            .map_err(Into::into),
        (None, false) => policy
            .check_call_with(&request, &intent, &mut turn, tool, &args, judged_pending)
            .map_err(Into::into),
    }
    .map_err(|e: toolwarden::audit::AuditError| e.to_string())?;
    let mut verdict = verdict;
    if unanswered && verdict.stage == Some(Stage::Confirmation) && verdict.is_denied() {
        verdict.reason = "the user has not answered yet: a call held in this turn is confirmed in a later one (--new-turn)".to_string();
    }
    // Another call held while one is still awaiting the user's answer in this turn would
    // replace the call the user is being shown: refuse it. A new turn replaces a stale one; the
    // same call asked again keeps its pending call.
    if let (Some(old), Some(new)) = (&pending, &verdict.pending) {
        if verdict.decision == Decision::Confirm && old.digest != new.digest && pending_this_turn {
            verdict.decision = Decision::Deny;
            verdict.stage = Some(Stage::Confirmation);
            verdict.reason = format!(
                "`{}` is awaiting the user's confirmation of another call; answer it first or start a new turn with --new-turn",
                verdict.tool
            );
            verdict.pending = None;
        }
    }
    let mut notes = Vec::new();
    if let Some(path) = &call.pending {
        match (verdict.decision, &verdict.pending) {
            (Decision::Confirm, Some(p))
                if pending.as_ref().is_some_and(|o| o.digest == p.digest) =>
            {
                notes.push(format!(
                    "the same call is already pending in {}",
                    path.display()
                ));
            }
            (Decision::Confirm, Some(p)) => {
                let text = serde_json::to_string_pretty(p).map_err(|e| e.to_string())?;
                write_state(path, &text, "pending")?;
                if !turn_file.held.contains(&p.digest) {
                    turn_file.held.push(p.digest.clone());
                }
                notes.push(format!("pending call written to {}", path.display()));
            }
            (Decision::Allow, _) if pending.as_ref().is_some_and(|p| p.tool == verdict.tool) => {
                std::fs::remove_file(path)
                    .map_err(|e| format!("cannot remove pending file `{}`: {e}", path.display()))?;
                notes.push(format!(
                    "pending call confirmed; {} removed",
                    path.display()
                ));
            }
            _ => {}
        }
    }
    if let Some(path) = &call.turn {
        turn_file.transactional_calls = turn.transactional_calls;
        let text = serde_json::to_string(&turn_file).map_err(|e| e.to_string())?;
        write_state(path, &text, "turn")?;
    }
    if json {
        println!("{}", pretty(&verdict.to_json()));
        return Ok(0);
    }
    // Tool names, reasons and values come from the caller (the model): invisible characters
    // are shown as `<U+XXXX>`, so they cannot forge a line, colour the terminal or hide text.
    let show = |label: &str, text: &str| println!("{label}{}", escape(text));
    show("decision: ", verdict.decision.as_str());
    if let Some(stage) = verdict.stage {
        show("stage:    ", stage.as_str());
    }
    show("reason:   ", &verdict.reason);
    if let Some(src) = &verdict.source {
        show("rule:     ", src);
    }
    if !verdict.missing.is_empty() {
        show("missing:  ", &verdict.missing.join(", "));
    }
    if let Some(args) = &verdict.args_for_execution {
        show("execute:  ", &Value::Object(args.clone()).to_string());
    }
    if let Some(p) = &verdict.pending {
        show(
            "pending:  ",
            &format!(
                "{} {} (digest {})",
                p.tool,
                Value::Object(p.args.clone()),
                &p.digest[..16.min(p.digest.len())]
            ),
        );
    }
    if call.turn.is_some() {
        show(
            "turn:     ",
            &format!(
                "{} transactional call{} so far",
                turn.transactional_calls,
                if turn.transactional_calls == 1 {
                    ""
                } else {
                    "s"
                }
            ),
        );
    }
    for n in notes {
        show("note:     ", &n);
    }
    Ok(0)
}

/// `guard --session FILE`: the call judged in the session the file holds (a new one when it
/// does not exist), the session written back atomically. As with `--turn` and `--pending`, a
/// call held in this turn is confirmed only in a later one, and another call does not replace
/// it in the same turn.
#[allow(clippy::too_many_arguments)]
fn guard_session(
    policy: &Policy,
    request: &toolwarden::Request,
    intent: &toolwarden::Intent,
    tool: &str,
    call: &CallArgs,
    args: &Value,
    path: &Path,
    json: bool,
    log: &super::AuditArgs,
) -> CmdResult {
    let _locks = lock_state(&[path])?;
    // A missing file is a new session, in its first turn (`--new-turn` or not).
    let mut session = match read_session(policy, path)? {
        Some(mut s) => {
            if call.new_turn {
                s.next_turn();
            }
            s
        }
        None => Session::new(),
    };
    let held = session.pending().cloned().zip(session.pending_turn());
    let held_this_turn = held.as_ref().is_some_and(|(_, t)| *t == session.turn());
    // A confirmation counts only after the user could have answered.
    let unanswered = held_this_turn && policy.strip_confirmation(args) != *args;
    if unanswered {
        session.take_pending();
    }
    let mut verdict = match super::commands::auditor(log)? {
        Some(mut a) => a
            .check_call_session(policy, 1, request, intent, &mut session, tool, args)
            .map_err(|e| e.to_string())?,
        None => policy
            .check_call_session(request, intent, &mut session, tool, args)
            .map_err(|e| e.to_string())?,
    };
    let mut notes = Vec::new();
    if unanswered {
        if let Some((p, t)) = held.clone() {
            session.restore_pending(p, t);
        }
        if verdict.stage == Some(Stage::Confirmation) && verdict.is_denied() {
            verdict.reason = "the user has not answered yet: a call held in this turn is confirmed in a later one (--new-turn)".to_string();
        }
    }
    if let (Some((old, t)), Some(new)) = (&held, &verdict.pending) {
        if verdict.decision == Decision::Confirm && old.digest != new.digest && held_this_turn {
            session.restore_pending(old.clone(), *t);
            verdict.decision = Decision::Deny;
            verdict.stage = Some(Stage::Confirmation);
            verdict.reason = format!(
                "`{}` is awaiting the user's confirmation of another call; answer it first or start a new turn with --new-turn",
                verdict.tool
            );
            verdict.pending = None;
        }
    }
    match (verdict.decision, &verdict.pending) {
        (Decision::Confirm, Some(p))
            if held.as_ref().is_some_and(|(o, _)| o.digest == p.digest) =>
        {
            notes.push(format!(
                "the same call is already pending in {}",
                path.display()
            ));
        }
        (Decision::Confirm, Some(_)) => {
            notes.push(format!("pending call written to {}", path.display()));
        }
        (Decision::Allow, _) if held.is_some() && session.pending().is_none() => {
            notes.push("pending call confirmed".to_string());
        }
        _ => {}
    }
    write_state(path, &session.to_json(), "session")?;
    if json {
        let mut v = verdict.to_json();
        v["session"] = serde_json::json!({
            "turn": session.turn(),
            "transactional_calls": session.turn_state().transactional_calls,
            "labels": session.labels(),
        });
        println!("{}", pretty(&v));
        return Ok(0);
    }
    let show = |label: &str, text: &str| println!("{label}{}", escape(text));
    show("decision: ", verdict.decision.as_str());
    if let Some(stage) = verdict.stage {
        show("stage:    ", stage.as_str());
    }
    show("reason:   ", &verdict.reason);
    if let Some(src) = &verdict.source {
        show("rule:     ", src);
    }
    if !verdict.missing.is_empty() {
        show("missing:  ", &verdict.missing.join(", "));
    }
    if let Some(args) = &verdict.args_for_execution {
        show("execute:  ", &Value::Object(args.clone()).to_string());
    }
    if let Some(p) = &verdict.pending {
        show(
            "pending:  ",
            &format!(
                "{} {} (digest {})",
                p.tool,
                Value::Object(p.args.clone()),
                &p.digest[..16.min(p.digest.len())]
            ),
        );
    }
    show("session:  ", &session_line(&session));
    for n in notes {
        show("note:     ", &n);
    }
    Ok(0)
}

/// Reads the session file at `path` for `policy`: `Ok(None)` when it does not exist.
fn read_session(policy: &Policy, path: &Path) -> Result<Option<Session>, String> {
    match read_state(path, "session")? {
        Some(text) => Session::from_json(&text, policy).map(Some).map_err(|e| {
            format!(
                "session file `{}` is refused ({e}); delete it to start a new session",
                path.display()
            )
        }),
        None => Ok(None),
    }
}

/// The session's state in one line: turn, transactional calls, labels with their sources.
fn session_line(session: &Session) -> String {
    let labels: Vec<String> = session
        .labels()
        .iter()
        .map(|l| format!("{} (from {} in turn {})", l.label, l.tool, l.turn))
        .collect();
    format!(
        "turn {}, {} transactional call{}, labels: {}",
        session.turn(),
        session.turn_state().transactional_calls,
        if session.turn_state().transactional_calls == 1 {
            ""
        } else {
            "s"
        },
        if labels.is_empty() {
            "none".to_string()
        } else {
            labels.join(", ")
        }
    )
}

/// `guard --session FILE --declassify LABEL`: takes the label off the session in FILE (the
/// user's explicit reset) and writes the file back; with `--audit` the log records it first.
/// A label the policy does not declare, a missing file and a refused session are errors; a
/// declared label that is not on the session changes nothing (exit 0, and the output says so).
fn guard_declassify(
    policy: &Policy,
    label: &str,
    path: &Path,
    json: bool,
    log: &super::AuditArgs,
) -> CmdResult {
    if !policy.labels().any(|l| l == label) {
        let known: Vec<String> = policy.labels().map(|l| format!("`{l}`")).collect();
        return Err(format!(
            "`--declassify {label}`: the policy declares no label `{label}`; it declares {}",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ));
    }
    let _locks = lock_state(&[path])?;
    let Some(mut session) = read_session(policy, path)? else {
        return Err(format!(
            "`--declassify {label}`: session file `{}` does not exist",
            path.display()
        ));
    };
    let removed = match super::commands::auditor(log)? {
        Some(mut a) => a
            .declassify(policy, 1, &mut session, label)
            .map_err(|e| e.to_string())?,
        None => session.declassify(label),
    };
    if removed.is_some() {
        write_state(path, &session.to_json(), "session")?;
    }
    if json {
        let v = serde_json::json!({
            "declassified": removed.is_some(),
            "label": label,
            "from": removed.as_ref().map(|s| serde_json::json!({"tool": s.tool, "turn": s.turn})),
            "session": {
                "turn": session.turn(),
                "transactional_calls": session.turn_state().transactional_calls,
                "labels": session.labels(),
            },
        });
        println!("{}", pretty(&v));
        return Ok(0);
    }
    let show = |label: &str, text: &str| println!("{label}{}", escape(text));
    match &removed {
        Some(s) => show(
            "declassified: ",
            &format!("{label} (from {} in turn {})", s.tool, s.turn),
        ),
        None => show(
            "declassified: ",
            &format!("nothing: {label} is not on the session"),
        ),
    }
    show("session:      ", &session_line(&session));
    Ok(0)
}

pub(crate) fn import_yaml(file: &Path, legacy: Option<&Path>) -> CmdResult {
    let text = toolwarden::import::yaml_to_warden(file, legacy).map_err(|e| {
        format!(
            "`{}` does not import:\n{}",
            file.display(),
            e.render().trim_end()
        )
    })?;
    print!("{text}");
    Ok(0)
}
