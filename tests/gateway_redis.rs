//! Two gateway processes sharing their session state in a real Redis (`[state] redis`): one
//! session whose requests alternate between them, a confirmation held on one and accepted on
//! the other, a turn limit that holds across both under concurrent calls, and Redis stopped
//! and started again mid-session (calls fail closed, then service resumes); a flow label put
//! on a session through one gateway and judged through the other.
//!
//! Needs `TOOLWARDEN_REDIS_SERVER` (the path of a `redis-server`, Debian's package): ignored by
//! a plain `cargo test`; .ci/run installs it and runs this with `--include-ignored`, where a
//! missing server fails it. The test owns the `redis-server` process and kills it on drop.
#![cfg(feature = "gateway")]

mod gateway_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gateway_support::{calls_received, config, fixture, post, start, Gateway, Session};
use serde_json::{json, Value};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `redis-server` on `port` keeping its append-only file in `dir`, so a restart finds the
/// sessions again.
struct Redis {
    child: Option<Child>,
    program: String,
    port: u16,
    dir: PathBuf,
}

impl Redis {
    fn start(program: &str, port: u16, dir: &Path) -> Redis {
        let mut r = Redis {
            child: None,
            program: program.to_string(),
            port,
            dir: dir.to_path_buf(),
        };
        r.restart();
        r
    }

    fn restart(&mut self) {
        let child = Command::new(&self.program)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
            ])
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.program));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.answers() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn answers(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        let mut buf = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A gateway in front of upstreams `a` and `b`, judging with the test policy at
/// `limit transactional 1 per turn`, its session state in the Redis on `port`.
fn gateway(policy: &Path, redis: u16) -> Gateway {
    let policy = policy.to_path_buf();
    start(move |dir| {
        config(
            dir,
            &format!("[state]\nredis = \"redis://127.0.0.1:{redis}/0\"\n"),
        )
        .replace(
            &format!("{:?}", fixture("gateway.warden").display().to_string()),
            &format!("{:?}", policy.display().to_string()),
        )
    })
}

/// A `tools/call` of `name` in the shared session `session`, with the user's `query`.
fn call(s: &mut Session, session: &str, name: &str, args: Value, query: &str) -> Value {
    s.request(
        "tools/call",
        json!({"name": name, "arguments": args,
               "_meta": {"toolwarden/session": session, "toolwarden/query": query}}),
    )
}

fn text(r: &Value) -> String {
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
#[ignore = "needs TOOLWARDEN_REDIS_SERVER, a redis-server (.ci/run installs Debian's)"]
fn two_gateways_share_one_session_in_redis_and_fail_closed_while_it_is_down() {
    let program = std::env::var("TOOLWARDEN_REDIS_SERVER")
        .unwrap_or_else(|_| panic!("set TOOLWARDEN_REDIS_SERVER (see .ci/run)"));
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut redis = Redis::start(&program, port, data.path());
    let policy = data.path().join("gateway.warden");
    let text_of_policy = std::fs::read_to_string(fixture("gateway.warden"))
        .unwrap()
        .replace(
            "limit transactional 2 per turn",
            "limit transactional 1 per turn",
        );
    std::fs::write(&policy, text_of_policy).unwrap();
    let a = gateway(&policy, port);
    let b = gateway(&policy, port);

    // One session, issued by A, used on both.
    let r = post(a.port, "/v1/sessions", &[], b"{}");
    assert_eq!(r.status, 200, "{r:?}");
    let session = r.json()["session"].as_str().unwrap().to_string();
    let mut on_a = Session::open(a.port, None).unwrap();
    let mut on_b = Session::open(b.port, None).unwrap();
    // A session B never issued, and no Redis knows, is refused on B as on A.
    let r = call(&mut on_b, "made-up", "mcp__a__touch", json!({}), "save it");
    assert_eq!(r["error"]["code"], -32602, "{r}");

    // A confirmation held on A is accepted on B, once.
    let q = "save doc 1";
    let r = call(&mut on_a, &session, "mcp__a__save_doc", json!({"n": 1}), q);
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["decision"], "confirm",
        "{r}"
    );
    let confirmed = json!({"n": 1, "confirmed": true});
    let r = call(
        &mut on_b,
        &session,
        "mcp__a__save_doc",
        confirmed.clone(),
        q,
    );
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"server": "a", "tool": "save_doc", "arguments": {"n": 1}}),
        "{r}"
    );
    let r = call(
        &mut on_a,
        &session,
        "mcp__a__save_doc",
        confirmed,
        "save doc 1 again",
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(
        r["result"]["structuredContent"]["metadata"]["stage"], "confirmation",
        "{r}"
    );
    assert_eq!(calls_received(a.dir.path()), Vec::<String>::new());
    assert_eq!(calls_received(b.dir.path()), ["save_doc"]);

    // A new turn, 16 calls at once, 8 through each gateway: the limit of 1 holds.
    let q = "save the batch";
    let answers: Vec<Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16)
            .map(|i| {
                let port = if i % 2 == 0 { a.port } else { b.port };
                let session = session.clone();
                scope.spawn(move || {
                    let mut s = Session::open(port, None).unwrap();
                    call(&mut s, &session, "mcp__a__touch", json!({"n": i}), q)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let allowed: Vec<&Value> = answers
        .iter()
        .filter(|r| r["result"]["isError"] != true)
        .collect();
    assert_eq!(allowed.len(), 1, "{answers:#?}");
    assert_eq!(allowed[0]["result"]["structuredContent"]["tool"], "touch");
    for r in answers.iter().filter(|r| r["result"]["isError"] == true) {
        assert_eq!(
            r["result"]["structuredContent"]["metadata"]["stage"], "turn_limit",
            "{r}"
        );
    }
    let touched = calls_received(a.dir.path())
        .into_iter()
        .chain(calls_received(b.dir.path()))
        .filter(|t| t == "touch")
        .count();
    assert_eq!(touched, 1);

    // Redis stopped: every call fails closed with a JSON-RPC error, on both, and none is
    // forwarded.
    redis.stop();
    let before = (calls_received(a.dir.path()), calls_received(b.dir.path()));
    for s in [&mut on_a, &mut on_b] {
        let r = call(s, &session, "mcp__a__get_doc", json!({}), "save more");
        assert_eq!(r["error"]["code"], -32603, "{r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(
                "toolwarden cannot judge `mcp__a__get_doc`: session store: Redis cannot be reached ("
            ) && message.ends_with("); the call is refused"),
            "{message}"
        );
        assert_eq!(r["error"]["data"]["blocked_by_policy"], true);
    }
    assert_eq!(
        (calls_received(a.dir.path()), calls_received(b.dir.path())),
        before
    );

    // Redis back (its append-only file kept the session): service resumes on both, the turn
    // still full, and a new turn runs again.
    redis.restart();
    for s in [&mut on_a, &mut on_b] {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let r = call(s, &session, "mcp__a__touch", json!({"n": 99}), q);
            if r.get("error").is_none() {
                assert_eq!(
                    r["result"]["structuredContent"]["metadata"]["stage"], "turn_limit",
                    "{r}"
                );
                break;
            }
            assert_eq!(r["error"]["code"], -32603, "{r}");
            assert!(
                Instant::now() < deadline,
                "the gateway did not reconnect: {r}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let r = call(
        &mut on_b,
        &session,
        "mcp__a__touch",
        json!({"n": 100}),
        "save again",
    );
    assert_eq!(
        r["result"]["structuredContent"],
        json!({"server": "a", "tool": "touch", "arguments": {"n": 100}}),
        "{}",
        text(&r)
    );
}

#[test]
#[ignore = "needs TOOLWARDEN_REDIS_SERVER, a redis-server (.ci/run installs Debian's)"]
fn a_label_put_on_a_session_through_one_gateway_is_judged_through_the_other() {
    use toolwarden::mcp::gateway::{Changed, RedisStore, SessionChange, SessionStore};
    let program = std::env::var("TOOLWARDEN_REDIS_SERVER")
        .unwrap_or_else(|_| panic!("set TOOLWARDEN_REDIS_SERVER (see .ci/run)"));
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let _redis = Redis::start(&program, port, data.path());
    let policy = fixture("flow.warden");
    let a = gateway(&policy, port);
    let b = gateway(&policy, port);
    let open = |g: &Gateway| {
        let r = post(g.port, "/v1/sessions", &[], b"{}");
        assert_eq!(r.status, 200, "{r:?}");
        r.json()["session"].as_str().unwrap().to_string()
    };
    let (session, fresh) = (open(&a), open(&b));
    let mut on_a = Session::open(a.port, None).unwrap();
    let mut on_b = Session::open(b.port, None).unwrap();
    let q = "read and save";
    // The tainting call through A.
    let r = call(&mut on_a, &session, "mcp__a__get_doc", json!({}), q);
    assert_eq!(r["result"]["structuredContent"]["tool"], "get_doc", "{r}");
    // The write through B is judged with the label: held for the user at stage flow.
    let r = call(&mut on_b, &session, "mcp__a__touch", json!({"x": 1}), q);
    let sc = &r["result"]["structuredContent"];
    assert_eq!(
        (&sc["decision"], &sc["metadata"]["stage"]),
        (&json!("confirm"), &json!("flow")),
        "{r}"
    );
    assert!(
        text(&r).contains("mcp__a__get_doc in turn 1"),
        "{}",
        text(&r)
    );
    // B's listing of that session declares the confirmation field on the write.
    let touch = on_b.listed(
        "mcp__a__touch",
        json!({"_meta": {"toolwarden/session": session}}),
    );
    assert_eq!(
        touch["inputSchema"]["properties"]["confirmed"]["type"],
        "boolean"
    );
    // Another session, unlabelled, runs the same write through B.
    let r = call(&mut on_b, &fresh, "mcp__a__touch", json!({"x": 1}), q);
    assert_eq!(r["result"]["structuredContent"]["tool"], "touch", "{r}");
    assert_eq!(calls_received(a.dir.path()), ["get_doc"]);
    assert_eq!(calls_received(b.dir.path()), ["touch"]);

    // The store itself: a change judged on labels that changed since is refused, whole.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = RedisStore::new(
            &format!("redis://127.0.0.1:{port}/0"),
            100,
            100,
            Duration::from_secs(60),
        )
        .unwrap();
        let key = store.open("ann", None).await.unwrap();
        let read = store.labels(&key).await.unwrap();
        assert_eq!((read.version, read.labels.len()), (0, 0));
        let untrusted = ["untrusted".to_string()];
        let taint = SessionChange {
            labels_read: Some(0),
            taints: &untrusted,
            tool: "mcp__a__get_doc",
            ..SessionChange::default()
        };
        assert_eq!(store.change(&key, taint).await, Ok(Changed::Applied));
        let stale = SessionChange {
            labels_read: Some(0),
            count: true,
            limit: Some(5),
            ..SessionChange::default()
        };
        assert_eq!(
            store.change(&key, stale).await,
            Ok(Changed::LabelsChanged(1))
        );
        // The same label again adds nothing: the version stays.
        assert_eq!(
            store.change(&key, taint).await,
            Ok(Changed::LabelsChanged(1))
        );
        let again = SessionChange {
            labels_read: Some(1),
            tool: "mcp__b__get_doc",
            ..taint
        };
        assert_eq!(store.change(&key, again).await, Ok(Changed::Applied));
        let now = store.labels(&key).await.unwrap();
        assert_eq!(now.version, 1);
        let sources: Vec<(&str, &str, u32)> = now
            .labels
            .iter()
            .map(|l| (l.label.as_str(), l.tool.as_str(), l.turn))
            .collect();
        assert_eq!(sources, [("untrusted", "mcp__a__get_doc", 1)]);
        store.close(&key).await.unwrap();
        assert!(store.labels(&key).await.is_err());
    });
}
