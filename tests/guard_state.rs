//! `guard`'s state files (`--pending`, `--turn`): lock files are never followed through a
//! symlink, a pending call is neither replaced by another call nor confirmed in the turn it was
//! held in, and the arguments can come from a file or standard input.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

mod scratch;
use scratch::Scratch;

/// A policy whose `send` always needs confirmation, one transactional call per turn.
const SEND: &str =
    "policy \"g\" version 1\neffects none, write\nmode agent { }\ndefault mode agent\n\
confirm fields \"confirmed\"\nlimit transactional 1 per turn\n\
tool read { effect none }\ntool send { effect write confirm always }\n";

fn toolwarden() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolwarden"))
}

/// (exit code, stdout, stderr)
fn outcome(out: &Output) -> (i32, String, String) {
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[cfg(unix)]
#[test]
fn a_symlink_in_a_lock_files_place_is_refused_and_not_followed() {
    let dir = Scratch::new("symlink");
    std::fs::write(dir.path("g.warden"), SEND).unwrap();
    let target = dir.path("created_by_guard");
    let pending = dir.path("pending.json");
    let lock = dir.path("pending.json.lock");
    std::os::unix::fs::symlink(&target, &lock).expect("symlink");
    let out = toolwarden()
        .arg("guard")
        .arg("-p")
        .arg(dir.path("g.warden"))
        .args(["--tool", "read", "--pending"])
        .arg(&pending)
        .output()
        .expect("the binary runs");
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, 2, "{stdout}");
    assert_eq!(
        stderr,
        format!(
            "error: lock file `{}` is a symbolic link; toolwarden does not follow it: delete it\n",
            lock.display()
        )
    );
    assert!(!target.exists(), "the symlink's target was created");
    assert!(!pending.exists());
}

/// Runs `guard --json` on `policy` for `send` with `args`, the pending file and the turn file
/// in `dir` (`--new-turn` when `new_turn`); returns the JSON printed.
fn send(dir: &Scratch, args: &str, new_turn: bool) -> Value {
    std::fs::write(dir.path("g.warden"), SEND).unwrap();
    let mut cmd = toolwarden();
    cmd.current_dir(dir.dir())
        .args([
            "guard", "-p", "g.warden", "--tool", "send", "--args", args, "--json",
        ])
        .args(["--pending", "pending.json", "--turn", "turn.json"]);
    if new_turn {
        cmd.arg("--new-turn");
    }
    let out = cmd.output().expect("the binary runs");
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).expect("JSON")
}

fn pending_args(dir: &Scratch) -> Value {
    let text = std::fs::read_to_string(dir.path("pending.json")).expect("a pending file");
    serde_json::from_str::<Value>(&text).expect("JSON")["args"].clone()
}

/// A deny at stage `confirmation`, decided by the rule at `source` in g.warden.
fn deny_at_confirmation(reason: &str, source: &str) -> Value {
    json!({
        "ok": false,
        "decision": "deny",
        "tool": "send",
        "error": reason,
        "metadata": {
            "blocked_by_policy": true,
            "stage": "confirmation",
            "operation_type": "transactional",
            "effect": "write",
            "policy_source": format!("g.warden:{source}"),
        }
    })
}

const AWAITING: &str = "`send` is awaiting the user's confirmation of another call; answer it first or start a new turn with --new-turn";
const UNANSWERED: &str =
    "the user has not answered yet: a call held in this turn is confirmed in a later one (--new-turn)";

#[test]
fn another_call_does_not_replace_a_call_awaiting_confirmation_in_the_same_turn() {
    let dir = Scratch::new("swap");
    // The user is shown bob/5.
    let v = send(&dir, r#"{"to": "bob", "amount": 5}"#, true);
    assert_eq!(v["decision"], json!("confirm"));
    // The model proposes eve/5000 in the same turn: refused, bob/5 stays pending.
    let v = send(&dir, r#"{"to": "eve", "amount": 5000}"#, false);
    assert_eq!(v, deny_at_confirmation(AWAITING, "8:26"));
    assert_eq!(pending_args(&dir), json!({"to": "bob", "amount": 5}));
    // The same call asked again keeps the same pending call.
    let v = send(&dir, r#"{"to": "bob", "amount": 5}"#, false);
    assert_eq!(v["decision"], json!("confirm"));
    assert_eq!(pending_args(&dir), json!({"to": "bob", "amount": 5}));
    // eve/5000 confirmed in the next turn does not match what the user was shown.
    let v = send(
        &dir,
        r#"{"to": "eve", "amount": 5000, "confirmed": true}"#,
        true,
    );
    assert_eq!(
        v["error"],
        json!("the arguments of `send` differ from the call the user confirmed")
    );
    // A new turn replaces the stale pending call: the user is now asked about eve/5000.
    let v = send(&dir, r#"{"to": "eve", "amount": 5000}"#, true);
    assert_eq!(v["decision"], json!("confirm"));
    assert_eq!(pending_args(&dir), json!({"to": "eve", "amount": 5000}));
}

#[test]
fn a_call_held_in_this_turn_is_not_confirmed_in_the_same_turn() {
    let dir = Scratch::new("same-turn");
    let v = send(&dir, r#"{"to": "bob"}"#, true);
    assert_eq!(v["decision"], json!("confirm"));
    let digest = v["pending_call"]["digest"].clone();
    assert_eq!(
        serde_json::from_str::<Value>(&std::fs::read_to_string(dir.path("turn.json")).unwrap())
            .unwrap(),
        json!({"transactional_calls": 0, "held": [digest]})
    );
    // The model confirms its own call in the same turn: nobody answered.
    let v = send(&dir, r#"{"to": "bob", "confirmed": true}"#, false);
    assert_eq!(v, deny_at_confirmation(UNANSWERED, "5:16"));
    assert!(dir.path("pending.json").exists(), "the pending call stays");
    // In the next turn (the user said yes) the confirmation counts, once.
    let v = send(&dir, r#"{"to": "bob", "confirmed": true}"#, true);
    assert_eq!(v["decision"], json!("allow"), "{v}");
    assert_eq!(v["args"], json!({"to": "bob"}));
    assert!(!dir.path("pending.json").exists());
    assert_eq!(
        std::fs::read_to_string(dir.path("turn.json")).unwrap(),
        r#"{"transactional_calls":1}"#
    );
}

#[test]
fn a_turn_file_without_held_calls_still_reads() {
    let dir = Scratch::new("old-turn");
    std::fs::write(dir.path("turn.json"), r#"{"transactional_calls":0}"#).unwrap();
    let v = send(&dir, r#"{"to": "bob"}"#, false);
    assert_eq!(v["decision"], json!("confirm"));
}

/// Runs `guard --json` for `read` with extra flags and standard input `stdin`.
fn read_with(dir: &Scratch, flags: &[&str], stdin: &[u8]) -> (i32, String, String) {
    std::fs::write(dir.path("g.warden"), SEND).unwrap();
    let mut child = toolwarden()
        .current_dir(dir.dir())
        .args(["guard", "-p", "g.warden", "--tool", "read", "--json"])
        .args(flags)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut input = child.stdin.take().expect("stdin");
    // The guard may stop reading at the cap; a closed pipe is not an error here.
    let _ = input.write_all(stdin);
    drop(input);
    outcome(&child.wait_with_output().expect("the run ends"))
}

fn allowed_args(stdout: &str) -> Value {
    serde_json::from_str::<Value>(stdout).expect("JSON")["args"].clone()
}

#[test]
fn arguments_come_from_a_file_or_standard_input() {
    let dir = Scratch::new("args");
    // Longer than one command-line string may be (128 KiB on Linux), under the 1 MiB cap.
    let long = "x".repeat(600 * 1024);
    let text = format!(r#"{{"note": "{long}"}}"#);
    std::fs::write(dir.path("args.json"), &text).unwrap();
    let (code, stdout, stderr) = read_with(&dir, &["--args-file", "args.json"], b"");
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(allowed_args(&stdout), json!({"note": long}));
    let (code, stdout, stderr) = read_with(&dir, &["--args", "-"], text.as_bytes());
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(allowed_args(&stdout), json!({"note": long}));
    // Both are parsed strictly: a duplicated key is refused.
    let (code, _, stderr) = read_with(&dir, &["--args", "-"], br#"{"a": 1, "a": 2}"#);
    assert_eq!(
        (code, stderr.as_str()),
        (2, "error: `--args -`: the arguments are not acceptable JSON: duplicate key `a` at line 1 column 12\n")
    );
}

#[test]
fn arguments_from_a_file_or_standard_input_are_capped_at_one_mib() {
    let dir = Scratch::new("args-cap");
    let big = format!(r#"{{"note": "{}"}}"#, "x".repeat(1024 * 1024));
    std::fs::write(dir.path("big.json"), &big).unwrap();
    let (code, _, stderr) = read_with(&dir, &["--args-file", "big.json"], b"");
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "error: `--args-file`: cannot read `big.json`: larger than the limit of 1048576 bytes\n"
        )
    );
    let (code, _, stderr) = read_with(&dir, &["--args", "-"], big.as_bytes());
    assert_eq!(
        (code, stderr.as_str()),
        (
            2,
            "error: `--args -`: standard input is larger than the limit of 1048576 bytes\n"
        )
    );
    // A directory is not an arguments file; --args and --args-file do not go together.
    let (code, _, stderr) = read_with(&dir, &["--args-file", "."], b"");
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with("error: `--args-file`: cannot read `.`: "),
        "{stderr}"
    );
    let (code, _, stderr) = read_with(&dir, &["--args", "{}", "--args-file", "big.json"], b"");
    assert_eq!(code, 2);
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}

#[test]
fn a_tenant_argument_that_is_null_fails_closed_from_the_cli() {
    let dir = Scratch::new("tenant");
    std::fs::write(
        dir.path("t.warden"),
        "policy \"t\"\neffects none\nmode agent { }\ndefault mode agent\n\
         tenant arg \"business_id\"\ntool read { effect none }\n",
    )
    .unwrap();
    let out = toolwarden()
        .current_dir(dir.dir())
        .args([
            "guard", "-p", "t.warden", "--tenant", "b-42", "--tool", "read",
        ])
        .args(["--args", r#"{"business_id": null}"#, "--json"])
        .output()
        .expect("the binary runs");
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(
        (&v["decision"], &v["metadata"]["stage"], &v["error"]),
        (
            &json!("deny"),
            &json!("tenant_arg"),
            &json!("argument `business_id` must be the tenant's id (a string), not null")
        )
    );
}

#[test]
fn text_output_shows_invisible_characters_as_code_points() {
    let dir = Scratch::new("escape");
    std::fs::write(dir.path("g.warden"), SEND).unwrap();
    let tool = "nope\ntoolwarden: FORGED line\u{1b}[31m\u{202e}\u{85}";
    let out = toolwarden()
        .current_dir(dir.dir())
        .args(["guard", "-p", "g.warden", "--tool", tool])
        .output()
        .expect("the binary runs");
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, 0, "{stderr}");
    let shown = "nope<U+000A>toolwarden: FORGED line<U+001B>[31m<U+202E><U+0085>";
    assert_eq!(
        stdout,
        format!(
            "decision: deny\nstage:    identity\nreason:   `{shown}` is not declared by the policy and unknown tools are denied\n"
        )
    );
    // Values too: an argument with a bidi override and DEL is printed escaped.
    let out = toolwarden()
        .current_dir(dir.dir())
        .args(["guard", "-p", "g.warden", "--tool", "read"])
        .args(["--args", "{\"q\": \"a\u{202e}b\u{7f}\"}"])
        .output()
        .expect("the binary runs");
    let (_, stdout, _) = outcome(&out);
    assert!(
        stdout.contains("execute:  {\"q\":\"a<U+202E>b<U+007F>\"}\n"),
        "{stdout}"
    );
}
