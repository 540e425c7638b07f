//! `check_call` on arbitrary JSON arguments against a policy with every kind of argument rule
//! (tests/fixtures/rules/every_rule.warden): never panics; an allowed call fired no `deny` rule,
//! and a `confirm` rule only when it carried the confirmation; a call decided at stage
//! `arguments` names a fired rule of its outcome; what the rules refuse is never allowed
//! (amounts out of range, a fetch that is not https, a path outside the directories).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use toolwarden::{Decision, Intent, Policy, Request, Stage, Turn};

fn policy() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(|| {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/rules/every_rule.warden"
        );
        Policy::from_file(path).expect("every_rule.warden loads")
    })
}

const TOOLS: [&str; 7] = [
    "write_file",
    "send_money",
    "send_email",
    "fetch_url",
    "run_sql",
    "mcp__github__create_issue",
    "not_declared",
];

fuzz_target!(|data: &[u8]| {
    let Ok(args) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let p = policy();
    let request = Request::new("m")
        .context("contacts", ["alice", "bob@example.com"])
        .context("hosts", ["example.org"]);
    let intents = [
        p.classify("pay alice 50 EUR and fetch https://docs.rs for me"),
        Intent::named("write"),
    ];
    for intent in &intents {
        for tool in TOOLS {
            let v = p
                .check_call(&request, intent, &mut Turn::new(), tool, &args)
                .expect("request fits");
            match (v.decision, v.stage) {
                // A fired `confirm` rule lets a call through only when it carries the
                // confirmation (`check_call` trusts it); a fired `deny` never does.
                (Decision::Allow, _) => assert!(
                    v.rules.iter().all(|r| r.outcome == "confirm")
                        && (v.rules.is_empty() || v.confirmation_received),
                    "{tool}: allowed with rules fired: {:?}",
                    v.rules
                ),
                (Decision::Deny, Some(Stage::Arguments)) => {
                    assert!(
                        v.rules.iter().any(|r| r.outcome == "deny"),
                        "{tool}: no deny rule"
                    )
                }
                (Decision::Confirm, Some(Stage::Arguments)) => assert!(
                    !v.rules.is_empty() && v.rules.iter().all(|r| r.outcome == "confirm"),
                    "{tool}: confirm without a confirm rule"
                ),
                _ => {}
            }
            if v.decision != Decision::Allow {
                continue;
            }
            let obj = args.as_object().expect("allowed args are an object");
            match tool {
                "send_money" => {
                    let amount = obj["amount"]
                        .as_f64()
                        .expect("an allowed amount is a number");
                    assert!(amount > 0.0 && amount <= 10000.0, "amount {amount} allowed");
                    assert!(
                        amount < 100.0 || v.confirmation_received,
                        "{amount} unconfirmed"
                    );
                }
                "fetch_url" => {
                    let url = obj["url"].as_str().expect("an allowed url is a string");
                    assert!(url.starts_with("https://"), "url {url} allowed");
                }
                "write_file" => {
                    let path = obj["path"].as_str().expect("an allowed path is a string");
                    assert!(
                        path.starts_with('/') && !path.contains('\0'),
                        "path {path:?}"
                    );
                }
                _ => {}
            }
        }
    }
});
