//! Flow labels through `toolwarden mcp-proxy`: one session per connection, tainted by the
//! calls the proxy forwards (the tool's `taints`, and `taint openworld` for a tool without
//! `openWorldHint: false`), `tools/call` judged at stage `flow`, `tools/list` filtered and
//! marked as labels accumulate, and `notifications/tools/list_changed` when the offered set
//! changes.

mod proxy_support;

use proxy_support::{python, text, Session};
use serde_json::{json, Value};

fn start() -> Session {
    start_server(&[])
}

/// The proxy in front of the fake server started with `server_args`.
fn start_server(server_args: &[&str]) -> Session {
    let mut server = vec![python(), "tests/fixtures/proxy/fake_server.py"];
    server.extend_from_slice(server_args);
    let mut s = Session::start(
        &[
            "-p",
            "tests/fixtures/proxy/flow.warden",
            "--server",
            "notes",
        ],
        &server,
    );
    let init = s.initialize();
    assert_eq!(init["result"]["serverInfo"]["name"], "fake", "{init}");
    s
}

/// The listed tools as `(name, declares the confirmation field)`.
fn listing(s: &mut Session, id: i64) -> Vec<(String, bool)> {
    let r = s.request(id, "tools/list", json!({}));
    r["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {r}"))
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap_or("").to_string(),
                t["inputSchema"]["properties"].get("confirmed").is_some(),
            )
        })
        .collect()
}

/// How many `notifications/tools/list_changed` were stashed, and clears the stash. The proxy
/// writes the notification with the call it forwards, after the call went to the server, so it
/// may follow the call's answer: count after the next request's answer.
fn list_changed(s: &mut Session) -> usize {
    let n = s
        .stash
        .iter()
        .filter(|m| m["method"] == "notifications/tools/list_changed")
        .count();
    s.stash.clear();
    n
}

fn names(v: &[(&str, bool)]) -> Vec<(String, bool)> {
    v.iter().map(|(n, c)| (n.to_string(), *c)).collect()
}

#[test]
fn labels_accumulate_per_connection_and_tighten_calls_and_listings() {
    let mut s = start();
    assert_eq!(
        listing(&mut s, 2),
        names(&[
            ("get_note", false),
            ("echo", false),
            ("save_note", false),
            ("erase_all", false)
        ])
    );
    // get_note is open-world (no openWorldHint): the call puts `untrusted` on the session.
    let r = s.call(3, "get_note", json!({}));
    assert_eq!(text(&r), "called get_note", "{r}");
    let listed = listing(&mut s, 4);
    assert_eq!(list_changed(&mut s), 1);
    assert_eq!(
        listed,
        names(&[
            ("get_note", false),
            ("echo", false),
            ("save_note", true),
            ("erase_all", false)
        ])
    );
    // A write now needs the user: held at stage flow, the reason names the label and the call.
    let r = s.call(5, "save_note", json!({"text": "x"}));
    assert_eq!(r["result"]["isError"], true, "{r}");
    let meta = &r["result"]["structuredContent"];
    assert_eq!(meta["decision"], "confirm", "{r}");
    assert_eq!(meta["metadata"]["stage"], "flow", "{r}");
    assert!(
        text(&r).contains("the session read untrusted content from get_note in turn 1, and `after untrusted` confirms effect `write`"),
        "{}",
        text(&r)
    );
    // echo taints `private`: both labels, save_note is hidden.
    let r = s.call(6, "echo", json!({}));
    assert_eq!(text(&r), "called echo", "{r}");
    let listed = listing(&mut s, 7);
    assert_eq!(list_changed(&mut s), 1);
    assert_eq!(
        listed,
        names(&[("get_note", false), ("echo", false), ("erase_all", false)])
    );
    let r = s.call(8, "save_note", json!({"text": "x"}));
    let meta = &r["result"]["structuredContent"];
    assert_eq!(meta["decision"], "deny", "{r}");
    assert_eq!(meta["metadata"]["stage"], "flow", "{r}");
    let t = text(&r);
    assert_eq!(
        t,
        "toolwarden blocked `save_note`: `mcp__notes__save_note` is denied: the session read untrusted content from get_note in turn 1 and private content from echo in turn 1, and `after untrusted, private` denies effect `write` (stage flow, rule at tests/fixtures/proxy/flow.warden:28:28). It would be allowed by a connection that has not read the content named above (the labels stay on this connection until it closes)."
    );
    assert!(!t.contains("declassify"));
    // Another call adds nothing new: no notification.
    let r = s.call(9, "get_note", json!({}));
    assert_eq!(text(&r), "called get_note", "{r}");
    listing(&mut s, 10);
    assert_eq!(list_changed(&mut s), 0);
    let (code, stderr) = s.close();
    assert_eq!(
        code, 3,
        "the fake server exits 3 when its stdin closes: {stderr}"
    );
    assert!(
        stderr.contains("the session now carries untrusted (from `get_note`)"),
        "{stderr}"
    );
}

#[test]
fn a_new_connection_starts_without_labels() {
    let mut s = start();
    let r = s.call(2, "echo", json!({}));
    assert_eq!(text(&r), "called echo", "{r}");
    let (code, _) = s.close();
    assert_eq!(code, 3, "the fake server exits 3 when its stdin closes");
    let mut s = start();
    let r: Value = s.call(2, "save_note", json!({"text": "x"}));
    assert_eq!(text(&r), "called save_note", "{r}");
    s.close();
}

#[test]
fn a_server_cannot_close_an_open_world_tool_by_listing_it_again_or_twice() {
    // The first listing leaves get_note open-world; the second says `openWorldHint: false`,
    // twice. The session keeps the strictest reading: the call still taints `untrusted`.
    let mut s = start_server(&["--close-world-on-relist"]);
    listing(&mut s, 2);
    listing(&mut s, 3);
    let r = s.call(4, "get_note", json!({}));
    assert_eq!(text(&r), "called get_note", "{r}");
    let r = s.call(5, "save_note", json!({"text": "x"}));
    let meta = &r["result"]["structuredContent"];
    assert_eq!(meta["decision"], "confirm", "{r}");
    assert_eq!(meta["metadata"]["stage"], "flow", "{r}");
    let (_, stderr) = s.close();
    assert!(
        stderr.contains("the session now carries untrusted (from `get_note`)"),
        "{stderr}"
    );
}
