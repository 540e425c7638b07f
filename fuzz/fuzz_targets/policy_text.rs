//! Parser + checker + compiler on arbitrary text: loading never panics, and a policy that
//! loads answers offer and check_call for its own tools without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolwarden::{Policy, Request, Turn};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(policy) = Policy::parse(text, "fuzz.warden") else { return };
    let intent = policy.classify(text);
    let names: Vec<String> = policy.tools().map(str::to_string).collect();
    for mode in policy.modes().map(str::to_string).collect::<Vec<_>>() {
        let request = Request::new(mode).tenant("t");
        if let Ok(offer) = policy.offer(&request, &intent, names.iter().map(String::as_str)) {
            for (name, d) in offer.entries() {
                let _ = policy.reason(name, d, &request);
                let _ = policy.rule_source(d.rule);
            }
        }
        if let Some(name) = names.first() {
            let _ = policy.check_call(&request, &intent, &mut Turn::new(), name, &serde_json::json!({}));
        }
    }
});
