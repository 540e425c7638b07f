//! `toolwarden diff` made for review: decisions that moved apart from reasons that moved, one
//! summary line per subject and rule, the argument rules that changed in canonical form, and
//! recorded calls replayed against both versions.

use std::path::PathBuf;
use std::process::Command;

use toolwarden::analysis::replay::parse_recording;
use toolwarden::analysis::{Moved, PolicyDiff};
use toolwarden::Policy;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_toolwarden"))
}

/// A unique scratch directory for this test.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tw-diff-review-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// One mode, five intents: every tool has five cells.
const DESK: &str = "policy \"desk\" version 1
effects none, write
intents destructive > execute > export > write > read
fallback read
matrix standard {
               none   write
  read         allow  deny
  write        allow  allow
  destructive  allow  deny
  export       allow  deny
  execute      allow  deny
}
mode agent { matrix standard }
default mode agent
ROLES
TOOLS
";

fn desk(roles: &str, lookup: &str) -> String {
    DESK.replace("ROLES", roles).replace(
        "TOOLS",
        &format!(
            "tool lookup {{ {lookup} }}\ntool notes  {{ effect none   roles clerk }}\ntool refund {{ effect write  roles clerk }}"
        ),
    )
}

fn old_desk() -> String {
    desk("roles { lead > clerk }", "effect none")
}

/// `lookup` disabled, and `lead` no longer includes `clerk`.
fn new_desk() -> String {
    desk("roles { lead, clerk }", "effect none  enabled false")
}

#[test]
fn disabling_a_tool_and_changing_a_role_reads_as_two_summaries() {
    let old = Policy::parse(&old_desk(), "old.warden").expect("loads");
    let new = Policy::parse(&new_desk(), "new.warden").expect("loads");
    let d = PolicyDiff::compute(&old, &new);
    // The 15 cells that moved: 5 decisions, 10 reasons.
    assert_eq!(d.cells.len(), 15);
    assert_eq!(d.moved_counts(), (5, 10));
    assert!(d.cells[..5].iter().all(|c| c.moved == Moved::Decision));
    let summaries: Vec<&str> = d.groups.iter().map(|g| g.summary.as_str()).collect();
    assert_eq!(
        summaries,
        [
            "`tool lookup`: enabled false — 5 cells allow → deny",
            "`tool notes`: roles clerk — 5 cells if role clerk|lead → if role clerk",
            "`tool refund`: roles clerk — 5 cells if role clerk|lead → if role clerk",
        ]
    );
    assert_eq!(d.render(), EXPECTED_DESK);
}

const EXPECTED_DESK: &str = "\
decisions moved: 5 cells
  `tool lookup`: enabled false — 5 cells allow → deny
      by new.warden:16:28: tool lookup { effect none  enabled false }
      was old.warden:16:1: tool lookup { effect none }
      agent/destructive, agent/execute, agent/export, agent/write, agent/read: allow → deny identity
reasons moved (same decision, another stage, rule or condition): 10 cells
  `tool notes`: roles clerk — 5 cells if role clerk|lead → if role clerk
      by new.warden:17:29: tool notes  { effect none   roles clerk }
      agent/destructive, agent/execute, agent/export, agent/write, agent/read: allow if role clerk|lead → allow if role clerk
  `tool refund`: roles clerk — 5 cells if role clerk|lead → if role clerk
      by new.warden:18:29: tool refund { effect write  roles clerk }
      agent/destructive, agent/execute, agent/export, agent/read: deny intent; forced: confirm if role clerk|lead → deny intent; forced: confirm if role clerk
      agent/write: allow if role clerk|lead → allow if role clerk
declarations:
  ~ roles: lead (includes clerk) -> lead
15 cells changed: 5 decisions moved, 10 reasons moved; 0 rows added/removed/changed, 1 declaration changed, 0 argument-rule changes, 0 keywords added, 0 removed, 0 of 0 queries reclassified
";

#[test]
fn cli_diff_json_has_the_documented_shape_and_fail_on_change_exits_1() {
    let dir = scratch("json");
    let (old, new) = (dir.join("old.warden"), dir.join("new.warden"));
    std::fs::write(&old, old_desk()).expect("write");
    std::fs::write(&new, new_desk()).expect("write");
    let out = bin()
        .arg("diff")
        .arg(&old)
        .arg(&new)
        .args(["--json", "--fail-on-change"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["changed"], true);
    assert_eq!(v["decisions_moved"], 5);
    assert_eq!(v["reasons_moved"], 10);
    let g = &v["groups"][0];
    assert_eq!(g["moved"], "decision");
    assert_eq!(g["kind"], "tool");
    assert_eq!(g["name"], "lookup");
    assert_eq!(g["label"], "enabled false");
    assert_eq!(g["count"], 5);
    assert_eq!(
        g["summary"],
        "`tool lookup`: enabled false — 5 cells allow → deny"
    );
    assert_eq!(g["transitions"][0]["old"], "allow");
    assert_eq!(g["transitions"][0]["new"], "deny identity");
    assert_eq!(
        g["transitions"][0]["cells"],
        serde_json::json!([
            "agent/destructive",
            "agent/execute",
            "agent/export",
            "agent/write",
            "agent/read"
        ])
    );
    assert!(g["rule"]["location"]
        .as_str()
        .is_some_and(|l| l.ends_with("new.warden:16:28")));
    let c = &v["cells"][0];
    assert_eq!(c["moved"], "decision");
    assert_eq!(c["label"], "enabled false");
    assert_eq!(c["old"]["decision"], "allow");
    assert_eq!(c["new"]["decision"], "deny");
    assert_eq!(c["new"]["stage"], "identity");
    assert_eq!(v["cells"][5]["moved"], "reason");
    assert_eq!(v["rules"], serde_json::json!([]));
    assert_eq!(v["calls"], serde_json::json!([]));
    assert_eq!(v["calls_checked"], 0);
    // The same policy twice: nothing moved, exit 0.
    let same = bin()
        .arg("diff")
        .arg(&old)
        .arg(&old)
        .arg("--fail-on-change")
        .output()
        .expect("runs");
    assert_eq!(same.status.code(), Some(0));
    // Without the flag a change exits 0; a policy that does not load is an error (2).
    let plain = bin()
        .arg("diff")
        .arg(&old)
        .arg(&new)
        .output()
        .expect("runs");
    assert_eq!(plain.status.code(), Some(0));
    let missing = bin()
        .arg("diff")
        .arg(&old)
        .arg(dir.join("absent.warden"))
        .arg("--fail-on-change")
        .output()
        .expect("runs");
    assert_eq!(missing.status.code(), Some(2));
}

const MONEY: &str = "policy \"money\" version VERSION
effects none, write
mode autonomous { }
default mode autonomous
context contacts
tool send_money {
  effect write
RULES
}
tool balance { effect none }
";

fn money(version: u32, rules: &str) -> Policy {
    Policy::parse(
        &MONEY
            .replace("VERSION", &version.to_string())
            .replace("RULES", rules),
        &format!("v{version}.warden"),
    )
    .expect("loads")
}

#[test]
fn changed_argument_rules_are_listed_side_by_side_in_canonical_form() {
    let old = money(
        1,
        "  confirm when recipient not in context.contacts\n  confirm when amount > 100\n  deny when amount > 10000",
    );
    // The same first rule in another layout, the threshold moved, a new rule.
    let new = money(
        2,
        "  deny    when amount >   10000\n  confirm when (recipient not in context.contacts)\n  confirm when amount > 500\n  deny when host(callback) not in \"bank.example\"",
    );
    let d = PolicyDiff::compute(&old, &new);
    assert!(d.cells.is_empty());
    assert_eq!(d.rules.len(), 1);
    let r = &d.rules[0];
    assert_eq!(r.name, "send_money");
    let texts = |v: &[toolwarden::analysis::rule_changes::RuleText]| {
        v.iter().map(|t| t.text.clone()).collect::<Vec<_>>()
    };
    assert_eq!(
        texts(&r.old),
        [
            "confirm when amount > 100",
            "confirm when recipient not in context.contacts",
            "deny when amount > 10000",
        ]
    );
    assert_eq!(
        texts(&r.new),
        [
            "confirm when amount > 500",
            "confirm when recipient not in context.contacts",
            "deny when amount > 10000",
            "deny when host(callback) not in \"bank.example\"",
        ]
    );
    assert_eq!(
        r.render(),
        "  ~ tool send_money
      - confirm when amount > 100   (v1.warden:9:3)
        confirm when recipient not in context.contacts   (v1.warden:8:3 | v2.warden:9:3)
        deny when amount > 10000   (v1.warden:10:3 | v2.warden:8:3)
      + confirm when amount > 500   (v2.warden:10:3)
      + deny when host(callback) not in \"bank.example\"   (v2.warden:11:3)
"
    );
    assert!(d
        .render()
        .contains("argument rules:\n  ~ tool send_money\n"));
    assert!(d.render().ends_with(
        "1 argument-rule change, 0 keywords added, 0 removed, 0 of 0 queries reclassified\n"
    ));
    // Only a layout change: nothing moved.
    let relaid = money(
        2,
        "  deny when amount > 10000\n  confirm when amount>100\n  confirm when recipient not in context.contacts",
    );
    assert!(PolicyDiff::compute(&old, &relaid).is_empty());
}

const CALLS: &str = r#"{"tool": "send_money", "args": {"recipient": "bob", "amount": 300}, "context": {"contacts": ["bob"]}}
{"tool": "send_money", "args": {"recipient": "eve", "amount": 50}, "context": {"contacts": ["bob"]}}

{"tool": "send_money", "args": {"recipient": "bob", "amount": 700}, "context": {"contacts": ["bob"]}, "mode": "autonomous", "roles": [], "permissions": [], "forced": [], "connectors": {}}
{"tool": "balance", "query": "how much do I have"}
"#;

#[test]
fn recorded_calls_whose_verdict_moved_are_reported_with_their_rules() {
    let old = money(1, "  confirm when amount > 100\n  deny when amount > 10000");
    let new = money(
        2,
        "  confirm when amount > 500\n  deny when amount > 10000\n  deny when recipient not in context.contacts",
    );
    let calls = parse_recording(CALLS).expect("parses");
    assert_eq!(
        calls.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
        [1, 2, 4, 5]
    );
    let d = PolicyDiff::compute(&old, &new).with_calls(&old, &new, &calls);
    assert_eq!(d.calls_checked, 4);
    let rendered: Vec<String> = d.calls.iter().map(|c| c.render()).collect();
    assert_eq!(
        rendered,
        [
            "  ~ line 1 send_money: confirm at arguments (confirm when amount > 100, v1.warden:8:3) → allow\n",
            "  ~ line 2 send_money: allow → deny at arguments (deny when recipient not in context.contacts, v2.warden:10:3)\n",
            "  ~ line 4 send_money: confirm at arguments (confirm when amount > 100, v1.warden:8:3) → confirm at arguments (confirm when amount > 500, v2.warden:8:3)\n",
        ]
    );
}

#[test]
fn a_malformed_recorded_call_is_an_error_naming_its_line() {
    for (text, message) in [
        (
            "{\"tool\": \"balance\"}\n{\"tool\": \"balance\", \"arg\": {}}\n",
            "line 2: unknown field `arg`",
        ),
        (
            "{\"tool\": \"balance\"}\n\nnot json\n",
            "line 3: not acceptable JSON",
        ),
        (
            "[1]\n",
            "line 1: a recorded call is a JSON object, not an array",
        ),
        ("{\"args\": {}}\n", "line 1: missing field `tool`"),
        (
            "{\"tool\": \"a\", \"query\": \"q\", \"intent\": \"read\"}\n",
            "line 1: give `query` or `intent`, not both",
        ),
        (
            "{\"tool\": \"a\", \"tool\": \"b\"}\n",
            "line 1: not acceptable JSON",
        ),
        ("{\"tool\": \"a\", \"args\": [1]}\n", "line 1: invalid type"),
    ] {
        let e = parse_recording(text).expect_err(text);
        assert!(e.starts_with(message), "{text:?}: {e}");
    }
}

#[test]
fn cli_diff_calls_reports_moved_calls_and_refuses_a_malformed_file() {
    let dir = scratch("calls");
    let (old, new) = (dir.join("old.warden"), dir.join("new.warden"));
    std::fs::write(
        &old,
        MONEY
            .replace("VERSION", "1")
            .replace("RULES", "  confirm when amount > 100"),
    )
    .expect("write");
    std::fs::write(
        &new,
        MONEY
            .replace("VERSION", "2")
            .replace("RULES", "  confirm when amount > 500"),
    )
    .expect("write");
    let calls = dir.join("calls.jsonl");
    std::fs::write(&calls, CALLS).expect("write");
    let out = bin()
        .arg("diff")
        .arg(&old)
        .arg(&new)
        .arg("--calls")
        .arg(&calls)
        .arg("--fail-on-change")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let expected_line = format!(
        "  ~ line 1 send_money: confirm at arguments (confirm when amount > 100, {}:8:3) → allow\n",
        old.display()
    );
    assert!(text.contains(&format!("calls:\n{expected_line}")), "{text}");
    assert!(text.ends_with(", 2 of 4 calls moved\n"), "{text}");
    let json = bin()
        .arg("diff")
        .arg(&old)
        .arg(&new)
        .arg("--calls")
        .arg(&calls)
        .arg("--json")
        .output()
        .expect("runs");
    assert_eq!(json.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json");
    assert_eq!(v["calls_checked"], 4);
    let c = &v["calls"][0];
    assert_eq!(c["line"], 1);
    assert_eq!(c["tool"], "send_money");
    assert_eq!(c["old"]["decision"], "confirm");
    assert_eq!(c["old"]["stage"], "arguments");
    assert_eq!(c["old"]["rule_text"], "confirm when amount > 100");
    assert_eq!(c["new"]["decision"], "allow");
    assert_eq!(c["new"]["stage"], serde_json::Value::Null);
    // A malformed line: an error naming it, nothing printed on stdout.
    let bad = dir.join("bad.jsonl");
    std::fs::write(&bad, format!("{CALLS}{{\"tool\": 5}}\n")).expect("write");
    let out = bin()
        .arg("diff")
        .arg(&old)
        .arg(&new)
        .arg("--calls")
        .arg(&bad)
        .arg("--fail-on-change")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(&format!(
            "error: calls file `{}`, line 6: invalid type: integer `5`, expected a string",
            bad.display()
        )),
        "{err}"
    );
}

/// A policy with flow labels; `flow` adds the mode `strict`, taints and `after` blocks.
fn flow_policy(flow: &str) -> Policy {
    let text = format!(
        "policy \"flow\" version 1
effects none, write, execute, export
mode agent {{ }}
default mode agent
unknown deny
labels untrusted, private
tool shell {{ effect execute }}
tool post  {{ effect export }}
{flow}
"
    );
    match Policy::parse(&text, "flow.warden") {
        Ok(p) => p,
        Err(e) => panic!("flow policy must load: {e}"),
    }
}

#[test]
fn flow_labels_taints_and_after_blocks_that_change_are_declaration_changes() {
    let old = flow_policy(
        "tool fetch { effect none  taints untrusted }
after untrusted { deny execute  confirm write }
after untrusted, private { deny export }
mode strict { }",
    );
    let same = flow_policy(
        "tool fetch { effect none  taints untrusted }
after untrusted { confirm write  deny execute }
after untrusted, private { deny export }
mode strict { }",
    );
    assert!(PolicyDiff::compute(&old, &same).is_empty());
    let new = flow_policy(
        "tool fetch { effect none }
after untrusted { confirm write  confirm when to not in query }
mode strict { after private { deny write } }",
    );
    let diff = PolicyDiff::compute(&old, &new);
    assert_eq!(
        diff.settings,
        [
            "after private in mode strict: (none) -> { deny write }",
            "after untrusted: { confirm write; deny execute } -> \
             { confirm when to not in query; confirm write }",
            "after untrusted, private: { deny export } -> (none)",
            "taints of `fetch`: untrusted -> (none)",
        ]
    );
    assert!(!diff.is_empty());
}
