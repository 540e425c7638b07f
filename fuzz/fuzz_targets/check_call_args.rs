//! `check_call` on arbitrary JSON arguments: never panics, and never allows a call the
//! finance policy's `requires`/tenant rules deny.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use toolwarden::{Decision, Intent, Policy, Request, Turn};

fn policy() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../policies/finance.warden");
        Policy::from_file(path).expect("finance.warden loads")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(args) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let p = policy();
    let request = Request::new("autonomous")
        .roles(["accountant"])
        .permissions(["invoices.manage"])
        .tenant("b-42");
    let intent = Intent::named("write");
    for tool in ["create_invoice", "alterar_plano", "search_invoices"] {
        let v = p
            .check_call(&request, &intent, &mut Turn::new(), tool, &args)
            .expect("request fits");
        if v.decision == Decision::Allow {
            let obj = args.as_object().expect("allowed args are an object");
            if let Some(t) = obj.get("business_id").filter(|t| !t.is_null()) {
                assert_eq!(t, "b-42", "a call naming another tenant was allowed");
            }
            if tool == "alterar_plano" {
                assert!(obj.get("new_plan_id").is_some_and(|v| !v.is_null()));
            }
        }
    }
});
