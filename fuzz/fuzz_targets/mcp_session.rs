//! The MCP proxy's message handling (`toolwarden::mcp::Session`) on arbitrary input: lines from
//! the client and from the server, waits that end and audit writes that fail, in any order.
//! Never panics, and the server receives exactly the calls the audit log records as forwarded
//! (in enforcing mode: each allowed, none a tool the policy refuses).
#![no_main]

#[path = "../../tests/mcp_support/mod.rs"]
mod mcp_support;

use libfuzzer_sys::fuzz_target;
use mcp_support::Harness;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let mut h = Harness::new(mode & 1 == 1);
    h.server_lists = mode & 2 == 0;
    if mode & 4 == 0 {
        h.handshake();
    }
    // Each line: its first byte says what it is, the rest is the message.
    for line in rest.split(|&b| b == b'\n') {
        let Some((&kind, text)) = line.split_first() else { continue };
        match kind % 8 {
            0..=4 => h.client(text),
            5 => h.server(text),
            6 => h.expire(),
            _ => h
                .audit
                .fail
                .store(kind & 8 == 8, std::sync::atomic::Ordering::SeqCst),
        }
        h.check();
    }
    h.expire();
    h.check();
});
