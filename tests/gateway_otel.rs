//! The gateway's OpenTelemetry spans, received by a small OTLP/HTTP receiver in this test and
//! decoded with the OpenTelemetry protobuf types: one span per `tools/call`, its parent the
//! client's `traceparent`, the GenAI and MCP attributes and the decision's.
#![cfg(feature = "otel")]

mod gateway_support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gateway_support::{config, start, Session};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{json, Value};

/// The spans received, each with its request's path and content type.
type Received = Arc<Mutex<Vec<(String, String, Span)>>>;

/// Accepts OTLP/HTTP exports (HTTP/1.1, keep-alive) and keeps every span it decodes, with the
/// path and content type of its request.
fn receiver() -> (u16, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let spans = Arc::new(Mutex::new(Vec::new()));
    let kept = spans.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let kept = kept.clone();
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                let mut reader = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let path = line.split(' ').nth(1).unwrap_or("").to_string();
                    let (mut length, mut kind) = (0usize, String::new());
                    loop {
                        let mut h = String::new();
                        reader.read_line(&mut h).unwrap();
                        let h = h.trim_end();
                        if h.is_empty() {
                            break;
                        }
                        let (k, v) = h.split_once(':').unwrap();
                        match k.to_ascii_lowercase().as_str() {
                            "content-length" => length = v.trim().parse().unwrap(),
                            "content-type" => kind = v.trim().to_string(),
                            _ => {}
                        }
                    }
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).unwrap();
                    let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
                    for rs in request.resource_spans {
                        for ss in rs.scope_spans {
                            for span in ss.spans {
                                kept.lock()
                                    .unwrap()
                                    .push((path.clone(), kind.clone(), span));
                            }
                        }
                    }
                    writer
                        .write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n",
                        )
                        .unwrap();
                }
            });
        }
    });
    (port, spans)
}

fn attributes(span: &Span) -> BTreeMap<String, Value> {
    span.attributes
        .iter()
        .map(|kv| {
            let v = match kv.value.as_ref().and_then(|v| v.value.clone()) {
                Some(Any::StringValue(s)) => Value::from(s),
                Some(Any::BoolValue(b)) => Value::from(b),
                Some(Any::IntValue(i)) => Value::from(i),
                other => Value::from(format!("{other:?}")),
            };
            (kv.key.clone(), v)
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn every_tools_call_is_one_span_under_the_clients_trace_with_its_decision() {
    let (port, spans) = receiver();
    let g = start(|dir| {
        config(
            dir,
            &format!("[telemetry]\notlp_endpoint = \"http://127.0.0.1:{port}\"\n"),
        )
    });
    let mut s = Session::open(g.port, None).unwrap();
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let r = s.request(
        "tools/call",
        json!({"name": "mcp__a__touch", "arguments": {"n": 1},
               "_meta": {"traceparent": format!("00-{trace}-{parent}-01")}}),
    );
    assert_eq!(r["result"]["structuredContent"]["tool"], "touch", "{r}");
    let allowed_id = s.next;
    let r = s.call("mcp__a__erase_all", json!({}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    let denied_id = s.next;

    let deadline = Instant::now() + Duration::from_secs(20);
    while spans.lock().unwrap().len() < 2 {
        assert!(Instant::now() < deadline, "no spans in 20 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let got = spans.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "{got:#?}");
    for (path, kind, _) in &got {
        assert_eq!(path, "/v1/traces");
        assert_eq!(kind, "application/x-protobuf");
    }
    let audit: Vec<Value> = std::fs::read_to_string(g.dir.path().join("audit.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(audit.len(), 2);

    let touch = &got
        .iter()
        .find(|(_, _, s)| s.name == "execute_tool mcp__a__touch")
        .unwrap()
        .2;
    // Kind server; the client's trace and span are its trace and parent.
    assert_eq!(touch.kind, 2);
    assert_eq!(hex(&touch.trace_id), trace);
    assert_eq!(hex(&touch.parent_span_id), parent);
    let expected = |id: u64, audit: &Value, more: Value| {
        let mut m: BTreeMap<String, Value> = serde_json::from_value(json!({
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.call.id": id.to_string(),
            "jsonrpc.request.id": id.to_string(),
            "mcp.method.name": "tools/call",
            "mcp.session.id": s.id,
            "toolwarden.policy": "gateway",
            "toolwarden.policy.version": 1,
            "toolwarden.decision_id": audit["decision_id"],
        }))
        .unwrap();
        for (k, v) in more.as_object().unwrap() {
            m.insert(k.clone(), v.clone());
        }
        m
    };
    assert_eq!(
        attributes(touch),
        expected(
            allowed_id,
            &audit[0],
            json!({"gen_ai.tool.name": "mcp__a__touch", "toolwarden.decision": "allow",
                   "toolwarden.rule": audit[0]["rule"], "toolwarden.forwarded": true})
        )
    );

    let erase = &got
        .iter()
        .find(|(_, _, s)| s.name == "execute_tool mcp__a__erase_all")
        .unwrap()
        .2;
    // No traceparent: a trace of its own.
    assert!(erase.parent_span_id.is_empty());
    assert_ne!(hex(&erase.trace_id), trace);
    assert_eq!(audit[1]["stage"], "mode");
    assert!(audit[0]["rule"]
        .as_str()
        .unwrap()
        .ends_with("gateway.warden:33:1"));
    assert_eq!(
        attributes(erase),
        expected(
            denied_id,
            &audit[1],
            json!({"gen_ai.tool.name": "mcp__a__erase_all", "toolwarden.decision": "deny",
                   "toolwarden.stage": "mode", "toolwarden.rule": audit[1]["rule"],
                   "toolwarden.forwarded": false, "error.type": "tool_error"})
        )
    );
    // Status error, with the refusal's text.
    let status = erase.status.as_ref().unwrap();
    assert_eq!(status.code, 2);
    assert!(
        status
            .message
            .starts_with("toolwarden blocked `mcp__a__erase_all`"),
        "{}",
        status.message
    );
}
