//! The gateway's connections: an idle one is closed (HTTP/1.1 keep-alive and HTTP/2 alike)
//! while an open event stream is not, past `max_connections` a new one waits, and out of file
//! descriptors the accept loop backs off and reports once instead of spinning.
#![cfg(feature = "gateway")]

mod gateway_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use gateway_support::*;

fn classify_request(port: u16, close: bool) -> String {
    let body = r#"{"query":"save it"}"#;
    format!(
        "POST /v1/classify HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}\r\n{body}",
        body.len(),
        if close { "Connection: close\r\n" } else { "" }
    )
}

/// Reads until the peer closes; returns how long that took, or `None` after `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> Option<Duration> {
    let start = Instant::now();
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some(start.elapsed()),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Some(start.elapsed())
            }
            Err(_) => return None,
        }
    }
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let g = start(|d| config(d, "[limits]\nidle_timeout_secs = 1\n"));
    let mut s = TcpStream::connect(("127.0.0.1", g.port)).unwrap();
    s.write_all(classify_request(g.port, false).as_bytes())
        .unwrap();
    // The answer comes, then the connection stays open and silent until the idle timeout.
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    let took = closed_within(&mut s, Duration::from_secs(10)).expect("closed as idle");
    assert!(took < Duration::from_secs(4), "closed after {took:?}");
}

#[test]
fn an_idle_http2_connection_is_closed_after_the_idle_timeout() {
    let g = start(|d| config(d, "[limits]\nidle_timeout_secs = 1\n"));
    let mut s = TcpStream::connect(("127.0.0.1", g.port)).unwrap();
    // The HTTP/2 preface and an empty SETTINGS frame, then nothing.
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .unwrap();
    let took = closed_within(&mut s, Duration::from_secs(10)).expect("closed as idle");
    assert!(took < Duration::from_secs(4), "closed after {took:?}");
}

#[test]
fn an_open_event_stream_carries_keep_alives_and_is_not_closed_as_idle() {
    let g = start(|d| config(d, "[limits]\nidle_timeout_secs = 1\n"));
    let session = Session::open(g.port, None).unwrap();
    let raw = format!(
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/event-stream\r\n{}\r\n\r\n",
        g.port,
        session.headers().join("\r\n")
    );
    let mut s = TcpStream::connect(("127.0.0.1", g.port)).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while start.elapsed() < Duration::from_secs(3) {
        match s.read(&mut buf) {
            Ok(0) => panic!("the event stream was closed after {:?}", start.elapsed()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
}

#[test]
fn past_max_connections_a_new_connection_waits_for_one_to_close() {
    let g = start(|d| config(d, "[limits]\nmax_connections = 2\n"));
    let first = TcpStream::connect(("127.0.0.1", g.port)).unwrap();
    let _second = TcpStream::connect(("127.0.0.1", g.port)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut third = TcpStream::connect(("127.0.0.1", g.port)).unwrap();
    third
        .write_all(classify_request(g.port, true).as_bytes())
        .unwrap();
    third
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    let mut buf = [0u8; 12];
    let early = third.read(&mut buf);
    assert!(early.is_err(), "answered past the cap: {early:?}");
    drop(first);
    third
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let r = read_response(&mut third);
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["name"], "write");
}

/// CPU time (user + system) of process `pid` in clock ticks, from /proc.
#[cfg(target_os = "linux")]
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    // Fields 14 and 15 of stat(5), counted from the state (field 3) here.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[cfg(target_os = "linux")]
#[test]
fn out_of_file_descriptors_the_accept_loop_backs_off_and_reports_once() {
    let g = start_with(|d| config(d, ""), Some(48));
    // Hold connections until the gateway has no descriptor left to accept with.
    let held: Vec<TcpStream> = (0..80)
        .map(|_| TcpStream::connect(("127.0.0.1", g.port)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let before = cpu_ticks(g.child.id());
    std::thread::sleep(Duration::from_secs(2));
    let spent = cpu_ticks(g.child.id()) - before;
    let reports = g.logged("cannot accept a connection");
    assert_eq!(reports.len(), 1, "{:?}", &reports[..reports.len().min(3)]);
    assert!(
        reports[0].ends_with("Too many open files (os error 24)"),
        "{}",
        reports[0]
    );
    // Two seconds of a spinning loop would be about 200 ticks.
    assert!(spent < 30, "{spent} ticks of CPU in 2 s");
    // Once descriptors are free again, the gateway serves.
    drop(held);
    let r = exchange(g.port, classify_request(g.port, true).as_bytes());
    assert_eq!(r.status, 200);
}

#[test]
fn a_silent_or_half_sent_connection_is_closed_after_the_header_timeout_not_the_idle_one() {
    let g = start(|d| {
        config(
            d,
            "[limits]\nrequest_timeout_secs = 1\nidle_timeout_secs = 60\n",
        )
    });
    let sends: [&[u8]; 4] = [b"", b"P", b"PRI * HTTP/2.0\r\n", b"POST /mcp HTTP/1.1\r\n"];
    let mut held: Vec<TcpStream> = sends
        .iter()
        .map(|bytes| {
            let mut s = TcpStream::connect(("127.0.0.1", g.port)).unwrap();
            s.write_all(bytes).unwrap();
            s
        })
        .collect();
    let start = Instant::now();
    for (s, bytes) in held.iter_mut().zip(sends) {
        let took = closed_within(s, Duration::from_secs(20));
        let text = String::from_utf8_lossy(bytes);
        assert!(took.is_some(), "{text:?} was held open past 20 s");
        let all = start.elapsed();
        assert!(
            all < Duration::from_secs(4),
            "{text:?} closed after {all:?}"
        );
    }
    assert!(start.elapsed() >= Duration::from_millis(900));
    // A client that sends its request in time is served.
    let r = exchange(g.port, classify_request(g.port, true).as_bytes());
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["name"], "write");
}

/// One HTTP/2 frame: its 9-byte header and `payload`.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut f = vec![len[1], len[2], len[3], kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// `POST /v1/classify` over HTTP/2 with prior knowledge, the host named only in `:authority`
/// (HPACK literals, no Huffman); returns the response's status header block and its body.
fn h2_classify(port: u16, authority: &str) -> (Vec<u8>, Vec<u8>) {
    let body = br#"{"query":"save it"}"#;
    let len = body.len().to_string();
    let mut block = Vec::new();
    for (name, value) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/v1/classify"),
        (":authority", authority),
        ("content-type", "application/json"),
        ("content-length", len.as_str()),
    ] {
        block.push(0x00);
        block.push(u8::try_from(name.len()).unwrap());
        block.extend_from_slice(name.as_bytes());
        block.push(u8::try_from(value.len()).unwrap());
        block.extend_from_slice(value.as_bytes());
    }
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(h2_frame(4, 0, 0, &[]));
    out.extend(h2_frame(1, 0x4, 1, &block));
    out.extend(h2_frame(0, 0x1, 1, body));
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&out).unwrap();
    let (mut headers, mut data) = (None, Vec::new());
    loop {
        let mut head = [0u8; 9];
        s.read_exact(&mut head).unwrap();
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        let mut payload = vec![0u8; len];
        s.read_exact(&mut payload).unwrap();
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        match (head[3], stream) {
            (1, 1) => headers = Some(payload),
            (0, 1) => data.extend_from_slice(&payload),
            _ => {}
        }
        if stream == 1 && head[4] & 0x1 != 0 {
            return (headers.expect("a HEADERS frame"), data);
        }
    }
}

#[test]
fn an_http2_request_on_loopback_is_judged_by_its_authority() {
    let g = start(|d| config(d, ""));
    let (status, body) = h2_classify(g.port, &format!("127.0.0.1:{}", g.port));
    // 0x88: the HPACK static entry `:status: 200`.
    assert_eq!(status.first(), Some(&0x88), "{status:?}");
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(json["name"], "write");
    let (status, body) = h2_classify(g.port, "evil.example");
    assert_ne!(status.first(), Some(&0x88), "{status:?}");
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&body).unwrap(),
        serde_json::json!({"error": "forbidden: the Host header does not name this loopback listener"})
    );
}
