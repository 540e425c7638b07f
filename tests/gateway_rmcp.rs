//! What rmcp itself does with the framings the gateway's strict layer refuses before rmcp sees
//! them (a `tools/call` without an id or with `"id": null`, a batch): driven here straight into
//! the gateway's rmcp handler, without that layer, to prove the second line of defence holds
//! too: none of them runs the call.
#![cfg(feature = "gateway")]

mod gateway_support;

use std::sync::Arc;
use std::time::Duration;

use gateway_support::{calls_received, config};
use rmcp::ServiceExt;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use toolwarden::mcp::gateway::handler::GatewayHandler;
use toolwarden::mcp::gateway::{
    Changed, Gateway, GatewayConfig, Identity, Labels, MemoryStore, SessionChange, SessionKey,
    SessionStore, StoreError, StoreFuture,
};
use toolwarden::PendingCall;
use toolwarden::Policy;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_alone_runs_no_call_without_an_id_and_no_batch() {
    let dir = tempfile::tempdir().unwrap();
    let text = config(dir.path(), "").replace("listen = \"127.0.0.1:0\"\n", "");
    let config = GatewayConfig::parse(&text, dir.path()).unwrap();
    let policy = Policy::from_file(&config.policy).unwrap();
    let store = Arc::new(MemoryStore::new(10, 10, Duration::from_secs(60)));
    let gateway = Arc::new(Gateway::new(policy, config, store, None).unwrap());
    let (client, server) = tokio::io::duplex(1 << 16);
    let (server_read, server_write) = tokio::io::split(server);
    let session = gateway.store().open("anonymous", None).await.unwrap();
    let handler = GatewayHandler::stdio(gateway, Identity::anonymous(), session.id);
    tokio::spawn(async move {
        if let Ok(running) = handler.serve((server_read, server_write)).await {
            let _ = running.waiting().await;
        }
    });
    let (client_read, mut client_write) = tokio::io::split(client);
    let mut lines = BufReader::new(client_read).lines();
    let mut send = async |msg: &str| {
        client_write.write_all(msg.as_bytes()).await.unwrap();
        client_write.write_all(b"\n").await.unwrap();
    };
    send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#).await;
    let init: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(init["result"]["serverInfo"]["name"], "toolwarden-gateway");
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
    // `touch` is allowed: only the framing can keep these from running.
    send(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"mcp__a__touch","arguments":{"n":1}}}"#).await;
    send(r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"mcp__a__touch","arguments":{"n":2}}}"#).await;
    send(r#"[{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mcp__a__touch","arguments":{"n":3}}}]"#).await;
    // A well-framed call after them runs, and is the only one upstream `a` received.
    send(r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"mcp__a__touch","arguments":{"n":4}}}"#).await;
    let mut answers = Vec::new();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("an answer to id 6")
            .unwrap()
            .expect("the session is open");
        let msg: Value = serde_json::from_str(&line).unwrap();
        let done = msg["id"] == 6;
        answers.push(msg);
        if done {
            break;
        }
    }
    let last = answers.last().unwrap();
    assert_eq!(
        last["result"]["structuredContent"],
        json!({"server": "a", "tool": "touch", "arguments": {"n": 4}})
    );
    assert_eq!(calls_received(dir.path()), ["touch"]);
    // rmcp 3.11 drops the id-less call without an answer and refuses the null id and the
    // batch with -32600 "Invalid request" (no id).
    let refusals: Vec<&Value> = answers[..answers.len() - 1].iter().collect();
    assert_eq!(
        refusals,
        [
            &json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid request"}}),
            &json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid request"}}),
        ]
    );
}

/// A store that is down.
struct Down;

fn down<'a, T: Send + 'a>() -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(Err(StoreError::Unavailable(
        "connection refused".to_string(),
    ))))
}

impl SessionStore for Down {
    fn open<'a>(
        &'a self,
        _principal: &'a str,
        _id: Option<&'a str>,
    ) -> StoreFuture<'a, SessionKey> {
        down()
    }
    fn change<'a>(
        &'a self,
        _key: &'a SessionKey,
        _change: SessionChange<'a>,
    ) -> StoreFuture<'a, Changed> {
        down()
    }
    fn held<'a>(
        &'a self,
        _key: &'a SessionKey,
        _digest: &'a str,
    ) -> StoreFuture<'a, Option<PendingCall>> {
        down()
    }
    fn labels<'a>(&'a self, _key: &'a SessionKey) -> StoreFuture<'a, Labels> {
        down()
    }
    fn close<'a>(&'a self, _key: &'a SessionKey) -> StoreFuture<'a, ()> {
        down()
    }
    fn len(&self) -> StoreFuture<'_, usize> {
        down()
    }
    fn sweep(&self) -> StoreFuture<'_, usize> {
        down()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_store_that_is_down_refuses_every_call_and_an_audit_log_that_fails_too() {
    use toolwarden::mcp::gateway::{CallAnswer, UserAnswer};
    type NoConfirm = fn(String) -> std::future::Ready<UserAnswer>;
    let dir = tempfile::tempdir().unwrap();
    let text = config(dir.path(), "").replace("listen = \"127.0.0.1:0\"\n", "");
    let config = GatewayConfig::parse(&text, dir.path()).unwrap();
    let policy = Policy::from_file(&config.policy).unwrap();
    let gateway = Gateway::new(policy.clone(), config.clone(), Arc::new(Down), None).unwrap();
    let args = json!({}).as_object().cloned();
    let k = SessionKey::new("anonymous", "k");
    let r = gateway
        .call(
            &Identity::anonymous(),
            &k,
            None,
            "mcp__a__touch",
            args.clone(),
            None::<NoConfirm>,
        )
        .await;
    assert_eq!(
        r,
        CallAnswer::Error {
            code: -32603,
            message: "toolwarden cannot judge `mcp__a__touch`: session store: connection refused; the call is refused".to_string(),
            data: Some(json!({"blocked_by_policy": true, "stage": "error", "tool": "mcp__a__touch"})),
        }
    );
    // An audit log that cannot be written: the call it would record is refused.
    struct Full;
    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("no space left on device"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let store = Arc::new(MemoryStore::new(10, 10, Duration::from_secs(60)));
    let k = store.open("anonymous", None).await.unwrap();
    let gateway = Gateway::new(policy, config, store, Some(Box::new(Full))).unwrap();
    let r = gateway
        .call(
            &Identity::anonymous(),
            &k,
            None,
            "mcp__a__touch",
            args,
            None::<NoConfirm>,
        )
        .await;
    let CallAnswer::Result(r) = r else {
        panic!("{r:?}")
    };
    assert_eq!(r["isError"], true);
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("the audit log could not be written"),
        "{r}"
    );
    assert_eq!(calls_received(dir.path()), Vec::<String>::new());
}
