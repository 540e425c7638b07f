//! Enforcing a policy on an MCP connection: what the model may see (`tools/list`) and run
//! (`tools/call`), with the server's annotations as untrusted hints, and an audit log.
//!
//! The layers, each usable on its own:
//!
//! - [`message`]: one strict parse per JSON-RPC message (the rules of [`crate::parse_args`]:
//!   no duplicated key, nesting and size capped), ids compared by JSON value, error responses.
//! - [`judge`]: [`Judge`] decides a `tools/list` result ([`Judge::judge_list`]) and a
//!   `tools/call` ([`Judge::judge_call`]); no I/O.
//! - [`session`]: [`Session`], one client-server connection as a pure state machine: a message
//!   in gives an [`Outcome`] (messages to the server, messages to the client, log lines), with
//!   audit records written to an [`AuditSink`] before a call is handed out. Deterministic, so
//!   it is what the property tests and the fuzz target drive, and what a gateway in front of
//!   several servers builds one of per upstream server.
//! - [`stdio`]: the stdio transport behind `toolwarden mcp-proxy`: the child process and the
//!   two reader threads.
//!
//! ```
//! use serde_json::{json, Value};
//! use toolwarden::mcp::{Judge, MillisClock, Session};
//! use toolwarden::{Policy, Request};
//!
//! let policy = Policy::parse(r#"
//!     policy "p" version 1
//!     effects none, delete
//!     mode agent { restrict none }
//!     unknown deny
//!     tool read_doc { effect none }
//!     tool erase_all { effect delete }
//! "#, "p.warden").unwrap();
//! let intent = policy.fallback_intent();
//! let judge = Judge::new(policy, Request::new("agent"), intent, None, false).unwrap();
//! let mut s = Session::new(judge, None, Box::new(MillisClock));
//! // The handshake done, the proxy lists the server's tools itself.
//! let out = s.from_client(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
//! assert_eq!(out.to_server.len(), 2);
//! let own_id = out.to_server[1]["id"].clone();
//! let list = json!({"jsonrpc": "2.0", "id": own_id, "result": {"tools": [
//!     {"name": "read_doc", "inputSchema": {}}, {"name": "erase_all", "inputSchema": {}}]}});
//! assert!(s.from_server(list.to_string().as_bytes()).to_client.is_empty());
//! // A call without an id is judged like any other: refused, it never reaches the server.
//! let out = s.from_client(br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"erase_all"}}"#);
//! assert!(out.to_server.is_empty() && out.to_client.is_empty());
//! assert_eq!(out.log.len(), 1);
//! ```

#[cfg(feature = "gateway")]
pub mod gateway;
pub mod judge;
pub mod message;
pub mod record;
pub mod session;
pub mod stdio;

pub use judge::{CallJudgment, Judge, ListJudgment, PendingCalls, Refusal, Tightening};
pub use message::{parse_message, IdKey, MessageError};
pub use record::{args_digest, AuditSink, CallRecord, MillisClock};
pub use session::{Outcome, Session};
pub use stdio::StdioOptions;
