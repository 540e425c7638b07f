//! `--context NAME=v1,v2` on the command line: the sets argument rules read.

use std::process::{Command, Output};

use serde_json::Value;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

fn guard(context: &[&str]) -> Output {
    let mut args = vec![
        "guard",
        "-p",
        "tests/fixtures/rules/money.warden",
        "--mode",
        "m",
        "--tool",
        "send_money",
        "--args",
        r#"{"recipient": "bob"}"#,
        "--json",
    ];
    args.extend_from_slice(context);
    run(&args)
}

fn decision(o: &Output) -> (String, Value) {
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON verdict");
    (v["decision"].as_str().unwrap_or("").to_string(), v)
}

#[test]
fn guard_reads_context_sets() {
    let o = guard(&["--context", "contacts=alice, bob"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(decision(&o).0, "allow");

    let o = guard(&["--context", "contacts=alice"]);
    let (d, v) = decision(&o);
    assert_eq!(d, "confirm");
    assert_eq!(v["metadata"]["stage"], "arguments");
    assert_eq!(
        v["rules"],
        serde_json::json!([{
            "source": "tests/fixtures/rules/money.warden:15:3",
            "outcome": "confirm",
            "reference": "recipient",
            "value": "bob",
            "problem": null,
        }])
    );

    // `NAME=` is the empty set; no flag at all leaves the set unsupplied (fail closed).
    assert_eq!(decision(&guard(&["--context", "contacts="])).0, "confirm");
    let (d, v) = decision(&guard(&[]));
    assert_eq!(d, "confirm");
    assert_eq!(
        v["rules"][0]["problem"],
        "the request did not supply the set"
    );
}

#[test]
fn bad_context_flags_exit_2_with_one_line() {
    for (flag, message) in [
        (
            "friends=bob",
            "unknown context set `friends`; the policy declares `contacts`",
        ),
        (
            "contacts",
            "`--context contacts` must be NAME=value1,value2 (or NAME= for the empty set)",
        ),
    ] {
        let o = guard(&["--context", flag]);
        assert_eq!(o.status.code(), Some(2), "{flag}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(message), "{err}");
    }
    let o = guard(&["--context", "contacts=a", "--context", "contacts=b"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains(
        "`--context` sets `contacts` twice; give each set once, its values comma-separated"
    ));
}

#[test]
fn offer_and_explain_take_context() {
    let base = ["-p", "tests/fixtures/rules/money.warden", "--mode", "m"];
    let mut offer = vec!["offer"];
    offer.extend_from_slice(&base);
    offer.extend_from_slice(&["--context", "contacts=bob"]);
    let o = run(&offer);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("send_money"));

    let mut explain = vec!["explain"];
    explain.extend_from_slice(&base);
    explain.extend_from_slice(&[
        "--tool",
        "send_money",
        "--args",
        r#"{"recipient": "bob"}"#,
        "--context",
        "contacts=bob",
        "--json",
    ]);
    let o = run(&explain);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(v["call"]["decision"], "allow");
}

#[test]
fn explain_args_shows_every_rule_fired_or_not() {
    let explain = |contacts: &str, json: bool| {
        let mut args = vec![
            "explain",
            "-p",
            "tests/fixtures/rules/money.warden",
            "--mode",
            "m",
            "--tool",
            "send_money",
            "--args",
            r#"{"recipient": "bob"}"#,
            "--context",
            contacts,
        ];
        if json {
            args.push("--json");
        }
        run(&args)
    };
    let o = explain("contacts=alice", false);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        text.lines().any(|l| l
            == "rule tests/fixtures/rules/money.warden:15:3: confirm when recipient not in context.contacts  -> fires (confirm) on `recipient` = `bob`"),
        "{text}"
    );
    let o = explain("contacts=bob", true);
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(
        v["argument_rules"],
        serde_json::json!([{
            "source": "tests/fixtures/rules/money.warden:15:3",
            "text": "confirm when recipient not in context.contacts",
            "fired": null,
        }])
    );
}
