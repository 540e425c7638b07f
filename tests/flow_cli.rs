//! `guard --session FILE` and `explain --labels` / `--session`: the session file is created,
//! carries the labels of allowed calls, is refused when it does not fit the policy (and left
//! unchanged), writes the audit log, takes a label off with `--declassify`, and explain shows
//! stage `flow`.

use std::process::{Command, Output};

use serde_json::Value;

mod scratch;
use scratch::Scratch;

const POLICY: &str = "policy \"s\" version 1\neffects none, write, execute\nmode agent { }\n\
default mode agent\nconfirm fields \"confirmed\"\nlabels untrusted\n\
tool get_webpage { effect none  taints untrusted }\ntool save { effect write }\n\
tool run_shell { effect execute }\n\
after untrusted {\n  confirm write\n  deny execute\n}\n";

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

/// `guard --json --session` for `tool` with `args`; the printed JSON.
fn guard(dir: &Scratch, tool: &str, args: &str, new_turn: bool) -> (i32, Value, String) {
    let mut cmd = toolwarden();
    cmd.arg("guard")
        .arg("-p")
        .arg(dir.path("s.warden"))
        .args(["--tool", tool, "--args", args, "--json", "--session"])
        .arg(dir.path("session.json"));
    if new_turn {
        cmd.arg("--new-turn");
    }
    let (code, stdout, stderr) = outcome(&cmd.output().expect("the binary runs"));
    let v = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (code, v, stderr)
}

#[test]
fn guard_keeps_the_session_in_one_file() {
    let dir = Scratch::new("flow_session");
    std::fs::write(dir.path("s.warden"), POLICY).unwrap();
    let (code, v, _) = guard(&dir, "run_shell", "{}", true);
    assert_eq!((code, v["decision"].as_str()), (0, Some("allow")));
    let (_, v, _) = guard(&dir, "get_webpage", "{}", false);
    assert_eq!(v["decision"], "allow");
    assert_eq!(v["session"]["labels"][0]["label"], "untrusted");
    assert_eq!(v["session"]["labels"][0]["tool"], "get_webpage");
    assert_eq!(v["session"]["labels"][0]["turn"], 1);

    let (_, v, _) = guard(&dir, "run_shell", "{}", true);
    assert_eq!(v["decision"], "deny");
    assert_eq!(v["metadata"]["stage"], "flow");
    assert_eq!(
        v["error"],
        "`run_shell` is denied: the session read untrusted content from get_webpage in turn 1, and `after untrusted` denies effect `execute`"
    );
    assert_eq!(v["session"]["turn"], 2);

    // Held in this turn, then confirmed in the same turn: the user has not answered yet.
    let (_, v, _) = guard(&dir, "save", "{\"path\": \"a\"}", false);
    assert_eq!(v["decision"], "confirm");
    assert_eq!(v["metadata"]["stage"], "flow");
    let (_, v, _) = guard(
        &dir,
        "save",
        "{\"path\": \"a\", \"confirmed\": true}",
        false,
    );
    assert_eq!(v["decision"], "deny");
    assert_eq!(
        v["error"],
        "the user has not answered yet: a call held in this turn is confirmed in a later one (--new-turn)"
    );
    // Another call does not replace it in this turn.
    let (_, v, _) = guard(&dir, "save", "{\"path\": \"b\"}", false);
    assert_eq!(v["decision"], "deny");
    assert_eq!(
        v["error"],
        "`save` is awaiting the user's confirmation of another call; answer it first or start a new turn with --new-turn"
    );
    // The next turn: the user's yes runs it.
    let (_, v, _) = guard(&dir, "save", "{\"path\": \"a\", \"confirmed\": true}", true);
    assert_eq!(v["decision"], "allow");
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path("session.json")).unwrap()).unwrap();
    assert_eq!(file["pending"], Value::Null);
    assert_eq!(file["turn"], 3);
    assert_eq!(file["transactional_calls"], 1);
}

#[test]
fn a_session_file_that_does_not_fit_is_refused_and_kept() {
    let dir = Scratch::new("flow_refused");
    std::fs::write(dir.path("s.warden"), POLICY).unwrap();
    std::fs::write(dir.path("session.json"), "{ nope").unwrap();
    let (code, _, stderr) = guard(&dir, "save", "{}", false);
    assert_eq!(code, 2);
    assert!(
        stderr.starts_with(&format!(
            "error: session file `{}` is refused (the session is corrupt: ",
            dir.path("session.json").display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.ends_with("; delete it to start a new session\n"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path("session.json")).unwrap(),
        "{ nope"
    );
    // Another policy's session.
    let (_, v, _) = guard(&dir, "get_webpage", "{}", false);
    assert_eq!(v, Value::Null);
    std::fs::remove_file(dir.path("session.json")).unwrap();
    guard(&dir, "get_webpage", "{}", false);
    std::fs::write(
        dir.path("s.warden"),
        POLICY.replace("version 1", "version 2"),
    )
    .unwrap();
    let (code, _, stderr) = guard(&dir, "save", "{}", false);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        format!(
            "error: session file `{}` is refused (the session belongs to policy `s` version 1, not `s` version 2; start a new session); delete it to start a new session\n",
            dir.path("session.json").display()
        )
    );
    // A file past the 4 MiB cap is refused by its size, unread past the cap, and kept.
    let big = " ".repeat(4 * 1024 * 1024 + 10);
    std::fs::write(dir.path("session.json"), &big).unwrap();
    let (code, _, stderr) = guard(&dir, "save", "{}", false);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        format!(
            "error: session file `{}` is larger than 4 MiB, too large to be one; delete it\n",
            dir.path("session.json").display()
        )
    );
    assert_eq!(
        std::fs::metadata(dir.path("session.json")).unwrap().len(),
        4 * 1024 * 1024 + 10
    );
}

#[test]
fn explain_shows_the_flow_stage_for_labels() {
    let dir = Scratch::new("flow_explain");
    std::fs::write(dir.path("s.warden"), POLICY).unwrap();
    let out = toolwarden()
        .arg("explain")
        .arg("-p")
        .arg(dir.path("s.warden"))
        .args(["--tool", "run_shell", "--labels", "untrusted", "--json"])
        .output()
        .expect("the binary runs");
    let (code, stdout, stderr) = outcome(&out);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["decision"], "deny");
    assert_eq!(v["stage"], "flow");
    let flow = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "flow")
        .unwrap();
    assert_eq!(flow["result"], "fail");
    assert_eq!(flow["detail"], "`after untrusted` denies effect `execute`");

    let out = toolwarden()
        .arg("explain")
        .arg("-p")
        .arg(dir.path("s.warden"))
        .args(["--tool", "run_shell", "--labels", "tainted"])
        .output()
        .expect("the binary runs");
    let (code, _, stderr) = outcome(&out);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        "error: `--labels`: the session holds label `tainted`, which the policy does not declare; it declares `untrusted`\n"
    );
}

/// `toolwarden guard -p s.warden --session session.json` with `extra` flags; (code, stdout,
/// stderr).
fn guard_with(dir: &Scratch, extra: &[&str]) -> (i32, String, String) {
    let out = toolwarden()
        .arg("guard")
        .arg("-p")
        .arg(dir.path("s.warden"))
        .arg("--session")
        .arg(dir.path("session.json"))
        .args(extra)
        .output()
        .expect("the binary runs");
    outcome(&out)
}

/// The audit log's records, each without `decision_id`, `policy_sha256` and `request`.
fn audit_records(dir: &Scratch) -> Vec<Value> {
    std::fs::read_to_string(dir.path("audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            let o = v.as_object_mut().unwrap();
            for k in ["decision_id", "policy_sha256", "request", "time"] {
                o.remove(k);
            }
            v
        })
        .collect()
}

#[test]
fn guard_with_a_session_writes_the_audit_log_and_declassify_is_recorded() {
    let dir = Scratch::new("flow_audit");
    std::fs::write(dir.path("s.warden"), POLICY).unwrap();
    let audit = dir.path("audit.jsonl");
    let audit = audit.to_str().unwrap();
    let (code, _, stderr) = guard_with(&dir, &["--tool", "get_webpage", "--audit", audit]);
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, _) = guard_with(&dir, &["--tool", "run_shell", "--audit", audit, "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (&v["decision"], &v["metadata"]["stage"]),
        (&Value::from("deny"), &Value::from("flow"))
    );

    let (code, stdout, stderr) = guard_with(&dir, &["--declassify", "untrusted", "--audit", audit]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert_eq!(
        stdout,
        "declassified: untrusted (from get_webpage in turn 1)\n\
         session:      turn 1, 0 transactional calls, labels: none\n"
    );
    // The label is gone from the file: run_shell is allowed again.
    let (_, stdout, _) = guard_with(&dir, &["--tool", "run_shell", "--audit", audit, "--json"]);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["decision"], "allow");
    // Declassifying a label that is not on the session changes nothing and logs nothing.
    let (code, stdout, _) = guard_with(&dir, &["--declassify", "untrusted", "--audit", audit]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        "declassified: nothing: untrusted is not on the session\n\
         session:      turn 1, 1 transactional call, labels: none\n"
    );

    let at = |lc: &str| Value::from(format!("{}:{lc}", dir.path("s.warden").display()));
    let base = |tool: &str, decision: &str, stage: Value, source: Value| {
        serde_json::json!({"policy": "s", "policy_version": 1, "generation": 1, "op": "call",
            "tool": tool, "decision": decision, "stage": stage, "source": source,
            "enforcement": "enforce"})
    };
    assert_eq!(
        audit_records(&dir),
        [
            base("get_webpage", "allow", Value::Null, at("7:1")),
            base("run_shell", "deny", "flow".into(), at("12:3")),
            serde_json::json!({"policy": "s", "policy_version": 1, "generation": 1,
                "op": "declassify", "label": "untrusted",
                "from": {"tool": "get_webpage", "turn": 1}, "enforcement": "enforce"}),
            base("run_shell", "allow", Value::Null, at("9:1")),
        ]
    );
}

#[test]
fn declassify_refuses_an_undeclared_label_and_a_missing_session() {
    let dir = Scratch::new("flow_declassify");
    std::fs::write(dir.path("s.warden"), POLICY).unwrap();
    let (code, _, stderr) = guard_with(&dir, &["--declassify", "untrusted"]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        format!(
            "error: `--declassify untrusted`: session file `{}` does not exist\n",
            dir.path("session.json").display()
        )
    );
    guard_with(&dir, &["--tool", "get_webpage"]);
    let (code, _, stderr) = guard_with(&dir, &["--declassify", "tainted"]);
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        "error: `--declassify tainted`: the policy declares no label `tainted`; it declares `untrusted`\n"
    );
    let (code, stdout, _) = guard_with(&dir, &["--declassify", "untrusted", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["declassified"], true);
    assert_eq!(
        v["from"],
        serde_json::json!({"tool": "get_webpage", "turn": 1})
    );
    assert_eq!(v["session"]["labels"], serde_json::json!([]));
    // `--declassify` judges no call: it does not go with `--tool`.
    let (code, _, stderr) = guard_with(&dir, &["--declassify", "untrusted", "--tool", "save"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}
