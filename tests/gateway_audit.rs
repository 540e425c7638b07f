//! The gateway's audit log under load and a `kill -9`: every call an upstream received has
//! its record (written before the call was forwarded), every line is whole, and each record
//! names its decision and the policy that made it.
#![cfg(all(feature = "gateway", unix))]

mod gateway_support;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use gateway_support::{config, fixture, start, Session};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use toolwarden::mcp::record::{args_digest, PolicyRef};
use toolwarden::Policy;

#[test]
fn a_gateway_killed_mid_load_has_a_whole_record_for_every_call_it_forwarded() {
    let mut g = start(|dir| config(dir, ""));
    let port = g.port;
    let calls = g.dir.path().join("calls.jsonl");
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        for t in 0..8u64 {
            let stop = &stop;
            scope.spawn(move || {
                let Ok(mut s) = Session::open(port, None) else {
                    return;
                };
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n += 1;
                    s.next += 1;
                    let msg = json!({"jsonrpc": "2.0", "id": s.next, "method": "tools/call",
                        "params": {"name": "mcp__a__get_doc", "arguments": {"t": t, "n": n}}});
                    // The gateway is killed under the call: the exchange fails, and the
                    // thread stops.
                    let done =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.send(&msg)));
                    if done.is_err() {
                        return;
                    }
                }
            });
        }
        // Kill it once the upstream has received a good number of calls.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let received = std::fs::read_to_string(&calls)
                .map(|t| t.lines().count())
                .unwrap_or(0);
            if received >= 200 {
                break;
            }
            assert!(Instant::now() < deadline, "only {received} calls in 60 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        // SIGKILL.
        g.child.kill().unwrap();
        g.child.wait().unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    // Give the orphaned upstream a moment to log what it was sent before it saw EOF.
    std::thread::sleep(Duration::from_millis(300));
    let received: Vec<Value> = std::fs::read_to_string(&calls)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let audit = std::fs::read_to_string(g.dir.path().join("audit.jsonl")).unwrap();
    assert!(audit.ends_with('\n'), "the last record is whole");
    let records: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a torn line {l:?}: {e}")))
        .collect();
    let policy = Policy::from_file(fixture("gateway.warden")).unwrap();
    let reference = PolicyRef::of(&policy);
    let text = std::fs::read_to_string(fixture("gateway.warden")).unwrap();
    let mut h = Sha256::new();
    h.update((text.len() as u64).to_le_bytes());
    h.update(text.as_bytes());
    let sha: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(reference.sha256, sha);
    let mut ids = HashSet::new();
    let mut forwarded: HashMap<String, usize> = HashMap::new();
    for r in &records {
        assert_eq!(r["policy"], "gateway");
        assert_eq!(r["policy_version"], 1);
        assert_eq!(r["policy_sha256"], sha.as_str());
        let id = r["decision_id"].as_str().unwrap();
        assert!(uuid_v4(id), "{id}");
        assert!(ids.insert(id.to_string()), "decision_id {id} twice");
        if r["forwarded"] == true {
            *forwarded
                .entry(r["args_sha256"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    assert!(received.len() >= 200, "{}", received.len());
    for c in &received {
        assert_eq!(c["tool"], "get_doc");
        let d = args_digest(&c["arguments"]);
        assert_eq!(
            forwarded.get(&d),
            Some(&1),
            "the call {c} reached the upstream without exactly one record"
        );
    }
}

fn uuid_v4(id: &str) -> bool {
    let b = id.as_bytes();
    id.len() == 36
        && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-')
        && b[14] == b'4'
        && id
            .chars()
            .enumerate()
            .all(|(i, c)| [8, 13, 18, 23].contains(&i) || c.is_ascii_hexdigit())
}
