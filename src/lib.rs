//! toolwarden decides which tools an AI agent may be offered and may call.
//!
//! A policy is text in the warden language (`*.warden`): it is parsed by a pest grammar,
//! checked (every problem reported with `file:line:col`, the source line, a caret and a `help`),
//! and compiled into a decision graph whose dense tables an embedded evaluator reads in
//! microseconds. The evaluator answers three questions an agent runtime asks on every turn:
//!
//! 1. [`Policy::classify`]: what does this user query intend to change?
//! 2. [`Policy::offer`]: of these tool names, which may the model see?
//! 3. [`Policy::check_call`]: the model called a tool with these arguments: run it, ask the user
//!    first, or block it?
//!
//! ```
//! use toolwarden::{Policy, Request, Turn};
//!
//! let policy = Policy::parse(r#"
//!     policy "demo" version 1
//!     effects none, write
//!     intents write > read
//!     fallback read
//!     keywords write { en "create", "add" }
//!     matrix standard {
//!             none   write
//!       read  allow  deny
//!       write allow  confirm
//!     }
//!     mode supervised { matrix standard }
//!     confirm fields "confirmed"
//!     tool list_notes  { effect none }
//!     tool create_note { effect write }
//! "#, "demo.warden").expect("the policy loads");
//!
//! let request = Request::new("supervised");
//! let intent = policy.classify("please create a note");
//! assert_eq!(intent.name, "write");
//!
//! let offer = policy.offer(&request, &intent, ["list_notes", "create_note", "rm_rf"]).unwrap();
//! assert_eq!(offer.visible().collect::<Vec<_>>(), ["list_notes", "create_note"]);
//!
//! let mut turn = Turn::new();
//! let args = serde_json::json!({"text": "hi"});
//! let verdict = policy.check_call(&request, &intent, &mut turn, "create_note", &args).unwrap();
//! assert_eq!(verdict.decision.as_str(), "confirm");
//! ```

#![warn(missing_docs)]

pub mod analysis;
pub mod args;
pub mod audit;
mod check;
pub mod classify;
pub mod classify_eval;
mod compile;
pub mod condition;
mod decision;
mod diagnostic;
mod eval;
pub mod fmt;
mod glob;
pub mod import;
pub mod invisible;
pub mod limits;
mod load;
pub mod mcp;
mod policy;
mod relation;
mod schemas;
mod span;
pub mod syntax;
mod toolset;
pub mod watch;

pub use args::{parse_args, ArgsError};
pub use check::Cell;
pub use classify::{normalize, Hit, Intent};
pub use compile::{Edge, Node};
pub use decision::{
    Decision, Offer, PendingCall, RuleId, Stage, ToolDecision, ToolMatch, Turn, Verdict,
};
pub use diagnostic::{render_all, Diagnostic, Location, PolicyError, Severity, Sources};
pub use eval::{canonical_json_text, BoundRequest, Request, RequestError};
pub use policy::Policy;
pub use schemas::{schema_name, SchemaDecision, SchemaError};
pub use toolset::ToolSet;
