//! Flow labels: `labels`, `taints` and `after` blocks, judged with a [`Session`]. The
//! language's example is one fixture, loaded exactly as written; the session's JSON form and
//! each of its refusals; `after` blocks inside a mode; labels added only by allowed calls;
//! `declassify` and `next_turn`.

use serde_json::{json, Value};
use toolwarden::{
    Decision, Intent, LabelSource, Policy, Request, RequestError, Session, SessionError, Stage,
    Verdict,
};

const HEADER: &str = r#"policy "flow" version 1
effects none, write, export, execute
intents read
fallback read
matrix standard {
  none write export execute
  read allow allow allow allow
}
confirm fields "confirmed"
context contacts
tool run_shell { effect execute }
"#;

/// The language's own example, exactly as written there.
const EXAMPLE: &str = include_str!("fixtures/flow/language_example.warden");

fn source() -> String {
    format!("{HEADER}{EXAMPLE}")
}

fn policy() -> Policy {
    Policy::parse(&source(), "flow.warden").expect("the example loads")
}

/// `flow.warden:LINE:COL` of the first occurrence of `needle` in the policy text.
fn at(needle: &str) -> String {
    let text = source();
    let offset = text.find(needle).expect("needle in the policy");
    let line = text[..offset].matches('\n').count() + 1;
    let col = offset - text[..offset].rfind('\n').map_or(0, |i| i + 1) + 1;
    format!("flow.warden:{line}:{col}")
}

fn request() -> Request {
    Request::new("autonomous").context("contacts", ["alice"])
}

fn intent(p: &Policy) -> Intent {
    p.classify("pay alice five dollars")
}

fn call(p: &Policy, session: &mut Session, tool: &str, args: Value) -> Verdict {
    p.check_call_session(&request(), &intent(p), session, tool, &args)
        .expect("request fits")
}

fn brief(v: &Verdict) -> (Decision, Option<Stage>) {
    (v.decision, v.stage)
}

const ASK: &str = "ask the user, then repeat the call with `confirmed` set to true";

#[test]
fn the_example_parses_checks_and_compiles_as_written() {
    let p = policy();
    assert!(p.warnings().is_empty(), "{:?}", p.warnings());
    let labels: Vec<&str> = p.labels().collect();
    assert_eq!(labels, ["untrusted", "private"]);
}

#[test]
fn without_labels_the_after_blocks_do_nothing() {
    let p = policy();
    let mut s = Session::new();
    let v = call(&p, &mut s, "send_money", json!({"recipient": "alice"}));
    assert_eq!(brief(&v), (Decision::Allow, None));
    let v = call(&p, &mut s, "run_shell", json!({}));
    assert_eq!(brief(&v), (Decision::Confirm, Some(Stage::Confirmation)));
    assert_eq!(
        v.reason,
        format!(
            "`run_shell` needs confirmation: {ASK} (mode `autonomous` confirms effect `execute`)"
        )
    );
    assert!(s.labels().is_empty());
    assert_eq!(s.policy(), Some(("flow", Some(1))));
}

#[test]
fn untrusted_content_makes_writes_confirm_and_execution_denied() {
    let p = policy();
    let mut s = Session::new();
    let v = call(
        &p,
        &mut s,
        "get_webpage",
        json!({"url": "https://example.com"}),
    );
    assert_eq!(brief(&v), (Decision::Allow, None));
    assert_eq!(s.labels().len(), 1);
    assert_eq!(
        (
            &*s.labels()[0].label,
            &*s.labels()[0].tool,
            s.labels()[0].turn
        ),
        ("untrusted", "get_webpage", 1)
    );

    s.next_turn();
    let v = call(&p, &mut s, "send_money", json!({"recipient": "alice"}));
    assert_eq!(brief(&v), (Decision::Confirm, Some(Stage::Flow)));
    assert_eq!(
        v.reason,
        format!("`send_money` needs confirmation: {ASK} (the session read untrusted content from get_webpage in turn 1, and `after untrusted` confirms effect `write`)")
    );
    assert_eq!(v.source, Some(at("confirm write, export")));
    let pending = v.pending.clone().expect("a pending call");
    assert_eq!(s.pending(), Some(&pending));
    assert_eq!(s.pending_turn(), Some(2));

    // Confirmed by the user: digest-bound, exactly as stage `confirmation` does it.
    let v = call(
        &p,
        &mut s,
        "send_money",
        json!({"recipient": "alice", "confirmed": true}),
    );
    assert_eq!(brief(&v), (Decision::Allow, None));
    assert_eq!(s.pending(), None);
    // Another call under the same pending call: the arguments differ, denied.
    let held = call(
        &p,
        &mut s,
        "send_money",
        json!({"recipient": "alice", "amount": 1}),
    );
    assert_eq!(brief(&held), (Decision::Confirm, Some(Stage::Flow)));
    let v = call(
        &p,
        &mut s,
        "send_money",
        json!({"recipient": "alice", "amount": 2, "confirmed": true}),
    );
    assert_eq!(brief(&v), (Decision::Deny, Some(Stage::Confirmation)));
    assert_eq!(
        v.reason,
        "the arguments of `send_money` differ from the call the user confirmed"
    );

    let v = call(&p, &mut s, "run_shell", json!({}));
    assert_eq!(brief(&v), (Decision::Deny, Some(Stage::Flow)));
    assert_eq!(
        v.reason,
        "`run_shell` is denied: the session read untrusted content from get_webpage in turn 1, and `after untrusted` denies effect `execute`"
    );
    assert_eq!(v.source, Some(at("deny    execute")));
}

#[test]
fn an_after_blocks_argument_rule_applies_to_every_tool() {
    let p = policy();
    let mut s = Session::new();
    call(&p, &mut s, "get_webpage", json!({}));
    // `bob` is not in the query: the block's rule fires on a tool with no rule of its own.
    let v = call(&p, &mut s, "get_balance", json!({"recipient": "bob"}));
    assert_eq!(brief(&v), (Decision::Confirm, Some(Stage::Flow)));
    let rule = at("confirm when recipient not in query");
    assert_eq!(
        v.reason,
        format!("`get_balance` needs confirmation: {ASK} (the session read untrusted content from get_webpage in turn 1, and the argument rule at {rule} on `recipient` = `bob`)")
    );
    assert_eq!(v.rules.len(), 1);
    assert_eq!(v.rules[0].source, rule);
    assert_eq!(v.rules[0].outcome, "confirm");
    // A recipient the query names: the block's rule stays silent.
    let v = call(&p, &mut s, "get_balance", json!({"recipient": "alice"}));
    assert_eq!(brief(&v), (Decision::Allow, None));
}

#[test]
fn the_trifecta_denies_export_and_names_both_calls() {
    let p = policy();
    let mut s = Session::new();
    // Untrusted alone: export already needs the user (the mode, and the block).
    call(&p, &mut s, "get_webpage", json!({}));
    let v = call(&p, &mut s, "post_webpage", json!({}));
    assert_eq!(brief(&v), (Decision::Confirm, Some(Stage::Confirmation)));
    assert_eq!(
        v.reason,
        format!("`post_webpage` needs confirmation: {ASK} (mode `autonomous` confirms effect `export`; and the session read untrusted content from get_webpage in turn 1, and `after untrusted` confirms effect `export`)")
    );
    s.next_turn();
    // Under `untrusted`, the block's `confirm when recipient not in query` fires for a call
    // without `recipient` (an absent argument fails closed), so this read needs the user:
    let v = call(&p, &mut s, "read_inbox", json!({}));
    assert_eq!(brief(&v), (Decision::Confirm, Some(Stage::Flow)));
    assert_eq!(
        v.rules[0].problem.as_deref(),
        Some("the argument is absent")
    );
    // the runtime ran it anyway, with the user's consent, outside the guard.
    assert_eq!(s.record(&p, "read_inbox").unwrap(), ["private"]);
    // `untrusted` stays where it came from; `private` is new.
    let labels: Vec<(&str, &str, u32)> = s
        .labels()
        .iter()
        .map(|l| (l.label.as_str(), l.tool.as_str(), l.turn))
        .collect();
    assert_eq!(
        labels,
        [
            ("untrusted", "get_webpage", 1),
            ("private", "read_inbox", 2)
        ]
    );
    let v = call(&p, &mut s, "post_webpage", json!({}));
    assert_eq!(brief(&v), (Decision::Deny, Some(Stage::Flow)));
    assert_eq!(
        v.reason,
        "`post_webpage` is denied: the session read untrusted content from get_webpage in turn 1 and private content from read_inbox in turn 2, and `after untrusted, private` denies effect `export`"
    );
    assert_eq!(v.source, Some(at("deny export")));
}

#[test]
fn offer_hides_what_the_session_denies_and_asks_for_what_it_confirms() {
    let p = policy();
    let tools = ["get_webpage", "send_money", "post_webpage", "run_shell"];
    let plain = |s: &Session| {
        p.offer_session(&request(), &intent(&p), s, tools)
            .unwrap()
            .entries()
            .iter()
            .map(|(n, d)| (n.to_string(), d.decision, d.stage))
            .collect::<Vec<_>>()
    };
    let s = Session::new();
    assert_eq!(
        plain(&s),
        [
            ("get_webpage".to_string(), Decision::Allow, None),
            ("send_money".to_string(), Decision::Allow, None),
            (
                "post_webpage".to_string(),
                Decision::Confirm,
                Some(Stage::Confirmation)
            ),
            (
                "run_shell".to_string(),
                Decision::Confirm,
                Some(Stage::Confirmation)
            ),
        ]
    );
    let s = Session::with_labels(&p, &["untrusted", "private"], "the test").unwrap();
    assert_eq!(
        plain(&s),
        [
            ("get_webpage".to_string(), Decision::Allow, None),
            (
                "send_money".to_string(),
                Decision::Confirm,
                Some(Stage::Flow)
            ),
            (
                "post_webpage".to_string(),
                Decision::Deny,
                Some(Stage::Flow)
            ),
            ("run_shell".to_string(), Decision::Deny, Some(Stage::Flow)),
        ]
    );
    // The offer's decisions are those of `explain_labels`.
    for tool in tools {
        let trace = p
            .explain_labels(&request(), &intent(&p), tool, &["untrusted", "private"])
            .unwrap();
        let offered = p
            .bind_session(&request(), &intent(&p), &s)
            .unwrap()
            .decide(tool);
        assert_eq!(
            (trace.decision, trace.stage),
            (offered.decision, offered.stage),
            "{tool}"
        );
    }
    let d = p
        .bind_session(&request(), &intent(&p), &s)
        .unwrap()
        .decide("post_webpage");
    assert_eq!(
        p.reason("post_webpage", &d, &request()),
        "the session's labels bring in `after untrusted, private`, which denies effect `export`"
    );
}

#[test]
fn explain_shows_the_flow_stage() {
    let p = policy();
    let trace = p
        .explain_labels(&request(), &intent(&p), "run_shell", &["untrusted"])
        .unwrap();
    assert_eq!(
        (trace.decision, trace.stage),
        (Decision::Deny, Some(Stage::Flow))
    );
    assert!(
        trace.summary().ends_with(&format!(
            "intent=pass @{}, flow=fail @{}",
            at("allow\n}"),
            at("deny    execute")
        )),
        "{}",
        trace.summary()
    );
    let flow = trace.steps.iter().find(|s| s.stage == Stage::Flow).unwrap();
    assert_eq!(flow.detail, "`after untrusted` denies effect `execute`");
    // Without labels the trace has no flow stage.
    let trace = p.explain(&request(), &intent(&p), "run_shell").unwrap();
    assert!(trace.steps.iter().all(|s| s.stage != Stage::Flow));
    assert_eq!(
        (trace.decision, trace.stage),
        (Decision::Confirm, Some(Stage::Confirmation))
    );
    let err = p
        .explain_labels(&request(), &intent(&p), "run_shell", &["untrustd"])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the session holds label `untrustd`, which the policy does not declare; it declares `untrusted`, `private`"
    );
}

#[test]
fn labels_are_added_only_when_the_call_is_allowed() {
    let p = Policy::parse(
        "policy \"t\" version 3\neffects none, write\nconfirm fields \"confirmed\"\n\
         labels private\nmode m { }\nmode closed { restrict write }\n\
         tool read_mail { effect none  taints private  confirm always }\n\
         tool peek { effect none  taints private }\n",
        "t.warden",
    )
    .unwrap();
    let intent = p.fallback_intent();
    let mut s = Session::new();
    // Denied (the mode's ceiling): nothing ran, nothing is added.
    let v = p
        .check_call_session(&Request::new("closed"), &intent, &mut s, "peek", &json!({}))
        .unwrap();
    assert_eq!(brief(&v), (Decision::Deny, Some(Stage::Mode)));
    assert!(s.labels().is_empty());
    // Held for confirmation: not run yet, nothing added.
    let m = Request::new("m");
    let v = p
        .check_call_session(&m, &intent, &mut s, "read_mail", &json!({}))
        .unwrap();
    assert_eq!(brief(&v), (Decision::Confirm, Some(Stage::Confirmation)));
    assert!(s.labels().is_empty());
    // Confirmed and allowed: it runs, its label is on the session.
    let v = p
        .check_call_session(
            &m,
            &intent,
            &mut s,
            "read_mail",
            &json!({"confirmed": true}),
        )
        .unwrap();
    assert_eq!(brief(&v), (Decision::Allow, None));
    assert_eq!(s.labels().len(), 1);
    assert_eq!(
        (
            &*s.labels()[0].label,
            &*s.labels()[0].tool,
            s.labels()[0].turn
        ),
        ("private", "read_mail", 1)
    );
}

#[test]
fn record_declassify_and_next_turn() {
    let p = policy();
    let mut s = Session::new();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert_eq!(
        s.record(&p, "read_inbox").unwrap(),
        ["untrusted", "private"]
    );
    assert_eq!(s.record(&p, "get_webpage").unwrap(), Vec::<String>::new());
    assert_eq!(s.record(&p, "no_such_tool").unwrap(), Vec::<String>::new());
    let time = s.labels()[0].time;
    assert!(time >= before && time <= before + 60, "{time}");

    let v = call(&p, &mut s, "post_webpage", json!({}));
    assert_eq!(brief(&v), (Decision::Deny, Some(Stage::Flow)));
    assert_eq!(s.turn_state().transactional_calls, 0);

    let removed = s.declassify("private");
    assert_eq!(
        removed,
        Some(LabelSource {
            label: "private".to_string(),
            tool: "read_inbox".to_string(),
            turn: 1,
            time,
        })
    );
    assert_eq!(s.declassify("private"), None);
    let v = call(&p, &mut s, "post_webpage", json!({}));
    assert_eq!(brief(&v), (Decision::Confirm, Some(Stage::Confirmation)));

    let v = call(
        &p,
        &mut s,
        "send_money",
        json!({"recipient": "alice", "confirmed": true}),
    );
    assert_eq!(brief(&v), (Decision::Deny, Some(Stage::Confirmation)));
    s.declassify("untrusted");
    let v = call(&p, &mut s, "send_money", json!({"recipient": "alice"}));
    assert_eq!(brief(&v), (Decision::Allow, None));
    assert_eq!(s.turn_state().transactional_calls, 1);
    s.record(&p, "get_webpage").unwrap();
    s.next_turn();
    assert_eq!(s.turn(), 2);
    assert_eq!(s.turn_state().transactional_calls, 0);
    assert!(s.has_label("untrusted"), "a new turn keeps the labels");
}

#[test]
fn the_session_round_trips_through_json() {
    let p = policy();
    let mut s = Session::new();
    call(&p, &mut s, "get_webpage", json!({}));
    s.next_turn();
    call(&p, &mut s, "send_money", json!({"recipient": "alice"}));
    let text = s.to_json();
    let back = Session::from_json(&text, &p).unwrap();
    assert_eq!(back, s);
    assert_eq!(back.to_json(), text);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["format"], 1);
    assert_eq!(v["policy"], "flow");
    assert_eq!(v["policy_version"], 1);
    assert_eq!(v["turn"], 2);
    assert_eq!(v["labels"][0]["label"], "untrusted");
    assert_eq!(v["pending"]["tool"], "send_money");
    assert_eq!(v["pending_turn"], 2);
    // The read-back session decides as the original.
    let mut back = back;
    let v = call(&p, &mut back, "run_shell", json!({}));
    assert_eq!(brief(&v), (Decision::Deny, Some(Stage::Flow)));
}

#[test]
fn a_session_file_that_does_not_fit_is_refused() {
    let p = policy();
    let mut s = Session::new();
    call(&p, &mut s, "get_webpage", json!({}));
    let text = s.to_json();

    let err = Session::from_json("{ not json", &p).unwrap_err();
    assert!(matches!(err, SessionError::Corrupt { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with("the session is corrupt: "),
        "{err}"
    );
    let err = Session::from_json(
        &text.replace("\"turn\": 1,", "\"turn\": 1, \"extra\": 0,"),
        &p,
    )
    .unwrap_err();
    assert!(err.to_string().contains("unknown field `extra`"), "{err}");

    let err = Session::from_json(&text.replace("\"format\": 1", "\"format\": 2"), &p).unwrap_err();
    assert_eq!(err, SessionError::Format { found: 2 });
    assert_eq!(
        err.to_string(),
        "the session is in format 2; this toolwarden reads format 1"
    );

    let other = Policy::parse(&source().replace("version 1", "version 2"), "flow.warden").unwrap();
    let err = Session::from_json(&text, &other).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the session belongs to policy `flow` version 1, not `flow` version 2; start a new session"
    );
    let renamed = Policy::parse(&source().replace("\"flow\"", "\"other\""), "o.warden").unwrap();
    let err = Session::from_json(&text, &renamed).unwrap_err();
    assert!(matches!(err, SessionError::OtherPolicy { .. }), "{err:?}");
    // Used with another policy directly: refused, and the session is unchanged.
    let before = s.clone();
    let err = renamed
        .check_call_session(
            &request(),
            &intent(&renamed),
            &mut s,
            "get_webpage",
            &json!({}),
        )
        .unwrap_err();
    assert!(
        matches!(err, RequestError::Session(SessionError::OtherPolicy { .. })),
        "{err:?}"
    );
    assert_eq!(s, before);

    let err = Session::from_json(&text.replace("\"untrusted\"", "\"tainted\""), &p).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the session holds label `tainted`, which the policy does not declare; it declares `untrusted`, `private`"
    );
}

#[test]
fn an_after_block_in_a_mode_applies_in_that_mode_only() {
    let p = Policy::parse(
        "policy \"m\" version 2\neffects none, write\nlabels untrusted\n\
         mode strict {\n  after untrusted { deny write }\n}\nmode relaxed { }\n\
         tool fetch { effect none  taints untrusted }\ntool save { effect write }\n",
        "m.warden",
    )
    .unwrap();
    let intent = p.fallback_intent();
    let mut s = Session::new();
    s.record(&p, "fetch").unwrap();
    let strict = Request::new("strict");
    let v = p
        .check_call_session(&strict, &intent, &mut s, "save", &json!({}))
        .unwrap();
    assert_eq!(brief(&v), (Decision::Deny, Some(Stage::Flow)));
    assert_eq!(
        v.reason,
        "`save` is denied: the session read untrusted content from fetch in turn 1, and `after untrusted` denies effect `write`"
    );
    assert_eq!(v.source.as_deref(), Some("m.warden:5:21"));
    let v = p
        .check_call_session(
            &Request::new("relaxed"),
            &intent,
            &mut s,
            "save",
            &json!({}),
        )
        .unwrap();
    assert_eq!(brief(&v), (Decision::Allow, None));
}

#[test]
fn the_checker_reports_every_flow_mistake() {
    let err = Policy::parse(
        "policy \"f\"\neffects none, write, export\nmode m { after untrustd { deny write } }\n\
         labels untrusted, private, untrusted\nlabels a, b, c, d, e, f, g\n\
         tool fetch { effect none  taints untrusted, privte }\nafter { deny write }\n\
         after private { confirm exprt }\n",
        "f.warden",
    )
    .unwrap_err();
    let got: Vec<(String, String, String)> = err
        .diagnostics()
        .iter()
        .filter(|d| d.severity() == toolwarden::Severity::Error)
        .map(|d| {
            (
                d.code().to_string(),
                d.message().to_string(),
                d.help_text().unwrap_or("").to_string(),
            )
        })
        .collect();
    // In source order: the mode's block (line 3) comes first.
    let want = [
        (
            "undefined-label",
            "undefined label `untrustd`",
            "did you mean `untrusted`?",
        ),
        (
            "duplicate",
            "label `untrusted` is declared twice",
            "rename one of them or delete the second declaration of `untrusted`",
        ),
        (
            "too-many-labels",
            "more than 8 labels are declared",
            "a session holds a set of at most 8 labels; merge labels that always travel together",
        ),
        (
            "undefined-label",
            "undefined label `privte`",
            "did you mean `private`?",
        ),
        (
            "empty-after",
            "an `after` block names no label",
            "name the labels the block waits for, comma-separated: `after untrusted { ... }`",
        ),
        (
            "undefined-effect",
            "undefined effect `exprt`",
            "did you mean `export`?",
        ),
    ];
    let want: Vec<(String, String, String)> = want
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn the_formatter_lays_out_the_new_syntax_and_keeps_comments() {
    let text = source();
    let once = toolwarden::fmt::format_source(&text, "flow.warden").unwrap();
    let twice = toolwarden::fmt::format_source(&once, "flow.warden").unwrap();
    assert_eq!(once, twice);
    let tail = &once[once.find("labels").unwrap()..];
    assert_eq!(
        tail,
        "labels untrusted, private

tool get_webpage { effect none  taints untrusted }
tool read_inbox  { effect none  taints untrusted, private }
tool get_balance { effect none  taints private }
tool send_money {
  effect write
  confirm when recipient not in context.contacts
}
tool post_webpage { effect export }

after untrusted {
  confirm write, export  # effects that now need the user
  deny execute
  confirm when recipient not in query  # argument rules, as in tool bodies, for every tool
}
after untrusted, private { deny export }  # all listed labels present: the trifecta

mode autonomous { matrix standard  confirm export, execute }
"
    );
    let mode = "policy \"m\"\neffects none, write\nlabels u\nmode strict { matrix x  after u { deny write }  after u {\n  # why\n  confirm write } }\n";
    let out = toolwarden::fmt::format_source(mode, "m.warden").unwrap();
    assert_eq!(
        out,
        "policy \"m\"\neffects none, write\nlabels u\nmode strict {\n  matrix x\n  after u { deny write }\n  after u {\n    # why\n    confirm write\n  }\n}\n"
    );
    assert_eq!(
        toolwarden::fmt::format_source(&out, "m.warden").unwrap(),
        out
    );
}
