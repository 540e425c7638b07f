//! The argument-rule warnings are sound: on the fixture that shows them, no call fires a rule
//! the checker says can never fire, and every call that fires a `confirm` rule it calls
//! redundant fires the `deny` rule it names too (so the deny decides). Judged by `check_call`
//! itself over argument values of every shape the fail-closed semantics distinguish.

use serde_json::{json, Value};
use toolwarden::{Policy, Request, Turn};

const FIXTURE: &str = "tests/fixtures/check/rule_warnings.warden";

/// Values an argument may take: absent (`None`), `null`, numbers around the thresholds, a
/// numeric string, an array, an object, a name in and out of the contacts.
fn values() -> Vec<Option<Value>> {
    vec![
        None,
        Some(Value::Null),
        Some(json!(50)),
        Some(json!(150)),
        Some(json!(600)),
        Some(json!(999.5)),
        Some(json!(1000)),
        Some(json!(-1)),
        Some(json!("600")),
        Some(json!([600])),
        Some(json!({"v": 1})),
        Some(json!("bob")),
        Some(json!("eve")),
    ]
}

/// A tool, the arguments looked at, the rules that never fire, and the pairs (redundant
/// confirm, the deny that overrides it), each rule by `file:line:col`.
type Case = (
    &'static str,
    [&'static str; 3],
    Vec<String>,
    Vec<(String, String)>,
);

#[test]
fn warned_rules_behave_as_the_warnings_say_on_every_call() {
    let policy = Policy::from_file(FIXTURE).expect("warnings only: the fixture loads");
    let at = |line: u32| format!("{FIXTURE}:{line}:3");
    let cases: [Case; 2] = [
        (
            "send_money",
            ["amount", "recipient", "memo"],
            vec![at(9), at(30)],
            vec![(at(12), at(11)), (at(14), at(15))],
        ),
        (
            "transfer",
            ["amount", "note", "iban"],
            vec![at(30)],
            vec![(at(20), at(21))],
        ),
    ];
    let mut calls = 0;
    let mut confirms_fired = std::collections::BTreeMap::<String, usize>::new();
    for (tool, names, never, redundant) in &cases {
        for a in values() {
            for b in values() {
                for c in values() {
                    let mut args = serde_json::Map::new();
                    for (name, v) in names.iter().zip([&a, &b, &c]) {
                        if let Some(v) = v {
                            args.insert((*name).to_string(), v.clone());
                        }
                    }
                    for contacts in [None, Some(vec!["bob"])] {
                        let mut request = Request::new("m");
                        if let Some(set) = &contacts {
                            request = request.context("contacts", set.clone());
                        }
                        let verdict = policy
                            .check_call(
                                &request,
                                &policy.fallback_intent(),
                                &mut Turn::new(),
                                tool,
                                &Value::Object(args.clone()),
                            )
                            .expect("a declared mode and context set");
                        calls += 1;
                        let fired: Vec<&str> =
                            verdict.rules.iter().map(|r| r.source.as_str()).collect();
                        for rule in never {
                            assert!(!fired.contains(&rule.as_str()), "{tool} {args:?}: {rule}");
                        }
                        for (confirm, deny) in redundant {
                            if fired.contains(&confirm.as_str()) {
                                *confirms_fired.entry(confirm.clone()).or_default() += 1;
                                assert!(
                                    fired.contains(&deny.as_str()),
                                    "{tool} {args:?} {contacts:?}: {confirm} fired without {deny}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(calls, 2 * 13 * 13 * 13 * 2);
    // Every redundant confirm fired on some calls: the check above is not vacuous.
    let fired: Vec<&str> = confirms_fired.keys().map(String::as_str).collect();
    assert_eq!(fired, [at(12), at(14), at(20)]);
}

/// The warnings' codes for a policy of `body` in one tool (the policy itself checks).
fn warning_codes(body: &str) -> Vec<&'static str> {
    let text = format!("policy \"p\" version 1\neffects none\nintents read\nfallback read\nmatrix m {{\n       none\n  read allow\n}}\nmode a {{ matrix m }}\ntool t {{\n  effect none\n{body}}}\n");
    match Policy::parse(&text, "p.warden") {
        Ok(p) => p.warnings().iter().map(|d| d.code()).collect(),
        Err(e) => panic!("the policy checks: {e}"),
    }
}

/// Deciding that a confirm rule is redundant searches both conditions at once; shapes that
/// make the search exponential (an `and` chain against an `or` chain, each nested 31 deep) or
/// quadratic (thousands of items, thousands of rule pairs) end when the body's budget is spent,
/// and then warn only of what was proved. Without the budget the first of these took hours.
#[test]
fn the_redundancy_search_is_bounded_and_stays_sound() {
    let n = 31;
    let chain = |op: &str, arg: &str| {
        format!(
            "{}present({arg}){}",
            format!("present({arg}) {op} (").repeat(n),
            ")".repeat(n)
        )
    };
    let deep = format!(
        "  confirm when {}\n  deny when {}\n",
        chain("and", "a"),
        chain("or", "b")
    );
    assert_eq!(warning_codes(&deep), Vec::<&str>::new());
    let k = 4_000;
    let flat = format!(
        "  confirm when {}\n  deny when {}\n",
        (0..k)
            .map(|i| format!("present(a{i})"))
            .collect::<Vec<_>>()
            .join(" and "),
        (0..k)
            .map(|i| format!("present(b{i})"))
            .collect::<Vec<_>>()
            .join(" or ")
    );
    assert_eq!(warning_codes(&flat), Vec::<&str>::new());
    // Within the budget the lint still proves what it did: the last item of the `and` is
    // an item of the `or`.
    let found = "  confirm when present(a0) and present(a1) and present(x)\n  deny when present(b0) or present(x)\n";
    assert_eq!(warning_codes(found), vec!["redundant-confirm"]);
}
