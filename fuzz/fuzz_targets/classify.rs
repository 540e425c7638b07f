//! `classify` on arbitrary strings against the multilingual finance policy.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use toolwarden::Policy;

fn policy() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../policies/finance.warden");
        Policy::from_file(path).expect("finance.warden loads")
    })
}

fuzz_target!(|data: &[u8]| {
    let query = String::from_utf8_lossy(data);
    let intent = policy().classify(&query);
    assert!(!intent.intents.is_empty());
});
