//! `Policy::check_call_schema`, the library call the MCP proxy judges `tools/call` with: a call
//! is judged with its schema's annotations exactly as `offer_schemas` judges the schema.

use serde_json::json;
use toolwarden::{Policy, Request, Turn};

fn policy() -> Policy {
    Policy::parse(
        r#"
        policy "p" version 1
        effects none, write, delete
        mode agent { restrict none, write, delete  confirm delete }
        confirm fields "confirmed"
        tool edit_doc { effect write }
        tool read_doc { effect none }
        "#,
        "p.warden",
    )
    .unwrap()
}

#[test]
fn without_annotations_it_is_check_call() {
    let p = policy();
    let schema = json!({"name": "edit_doc", "inputSchema": {}});
    let req = Request::new("agent");
    let intent = p.fallback_intent();
    let args = json!({"id": 1});
    let a = p
        .check_call_schema(&req, &intent, &mut Turn::new(), &schema, &args, None)
        .unwrap();
    let b = p
        .check_call(&req, &intent, &mut Turn::new(), "edit_doc", &args)
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(a.decision.as_str(), "allow");
    assert_eq!(a.effect.as_deref(), Some("write"));
}

#[test]
fn destructive_annotations_make_the_call_wait_for_confirmation() {
    let p = policy();
    let schema = json!({"name": "edit_doc", "annotations": {"destructiveHint": true}});
    let req = Request::new("agent");
    let intent = p.fallback_intent();
    let v = p
        .check_call_schema(
            &req,
            &intent,
            &mut Turn::new(),
            &schema,
            &json!({"id": 1}),
            None,
        )
        .unwrap();
    assert_eq!(v.decision.as_str(), "confirm");
    assert_eq!(v.effect.as_deref(), Some("delete"));
    assert_eq!(v.reason, "`edit_doc` needs confirmation: ask the user, then repeat the call with `confirmed` set to true (mode `agent` confirms effect `delete`)");
    let pending = v.pending.unwrap();
    // The confirmed repeat with the same arguments runs, without the field.
    let v = p
        .check_call_schema(
            &req,
            &intent,
            &mut Turn::new(),
            &schema,
            &json!({"id": 1, "confirmed": true}),
            Some(&pending),
        )
        .unwrap();
    assert_eq!(v.decision.as_str(), "allow");
    assert_eq!(
        v.args_for_execution,
        Some(json!({"id": 1}).as_object().unwrap().clone())
    );
    // Other arguments do not match the confirmation.
    let v = p
        .check_call_schema(
            &req,
            &intent,
            &mut Turn::new(),
            &schema,
            &json!({"id": 2, "confirmed": true}),
            Some(&pending),
        )
        .unwrap();
    assert_eq!(v.decision.as_str(), "deny");
    assert_eq!(
        v.reason,
        "the arguments of `edit_doc` differ from the call the user confirmed"
    );
}

#[test]
fn read_only_annotations_never_loosen_the_policy() {
    let p = policy();
    let schema = json!({"name": "edit_doc", "annotations": {"readOnlyHint": true}});
    let v = p
        .check_call_schema(
            &Request::new("agent"),
            &p.fallback_intent(),
            &mut Turn::new(),
            &schema,
            &json!({}),
            None,
        )
        .unwrap();
    assert_eq!(v.decision.as_str(), "allow");
    assert_eq!(
        v.effect.as_deref(),
        Some("write"),
        "judged by the policy's own effect"
    );
}

#[test]
fn a_schema_without_a_name_is_an_error() {
    let p = policy();
    let err = p
        .check_call_schema(
            &Request::new("agent"),
            &p.fallback_intent(),
            &mut Turn::new(),
            &json!({"annotations": {}}),
            &json!({}),
            None,
        )
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("schema [0]: the schema has no name"),
        "{err}"
    );
}
