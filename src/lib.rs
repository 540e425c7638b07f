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
//!
//! # Public API
//!
//! What a user of the crate may rely on is the crate root and the modules listed as supported
//! below; a change to them is a change to the API. Everything else is private to the crate
//! (the checker, the compiled tables, the evaluator's internals, the loader, the classifier's
//! automaton), so it can change without notice.
//!
//! **The crate root**, for embedding the engine (the Python and Node bindings use only this,
//! plus [`watch`]):
//!
//! - loading and deciding: [`Policy`] ([`Policy::parse`], [`Policy::from_file`],
//!   [`Policy::from_yaml`], [`Policy::classify`], [`Policy::offer`], [`Policy::check_call`]),
//!   [`Request`], [`BoundRequest`], [`RequestError`];
//! - classification: [`Intent`], [`Hit`], [`normalize`] and its [`Normalized`] text;
//! - decisions: [`Offer`], [`ToolDecision`], [`ToolMatch`], [`Verdict`], [`Decision`],
//!   [`Stage`], [`RuleId`], [`PendingCall`], [`Turn`], [`canonical_json_text`];
//! - flow labels: [`Session`] (labels with their [`LabelSource`], turn, pending call),
//!   [`SessionError`], [`SESSION_FORMAT`];
//! - diagnostics: [`Diagnostic`], [`Severity`], [`Location`], [`PolicyError`], [`Sources`],
//!   [`render_all`];
//! - tool sets and MCP tool schemas: [`ToolSet`], [`schema_name`], [`SchemaDecision`],
//!   [`SchemaError`];
//! - strict call arguments: [`parse_args`], [`ArgsError`];
//! - the decision graph ([`Policy::graph`]): [`Node`], [`Edge`], [`Cell`].
//!
//! **Supported modules**, the features the `toolwarden` command exposes, for a program that
//! embeds them (the command line is a thin caller of these same paths):
//!
//! - [`classify`]: how a query is classified (its documentation states the rules); it holds
//!   the same four items as the root ([`Intent`], [`Hit`], [`normalize`], [`Normalized`]);
//! - [`watch`]: hot reload that never replaces a good policy with a failed one;
//! - [`audit`]: the decision log and advisory enforcement;
//! - [`mcp`]: enforcing a policy on an MCP connection ([`mcp::Judge`], [`mcp::Session`],
//!   [`mcp::stdio::run`]) and, with the `gateway` feature, the gateway (`mcp::gateway`);
//! - [`analysis`]: explain, the decision table, the diff of two policies, the graph drawn as
//!   DOT or Mermaid, and the policy test runner;
//! - [`fmt`]: the canonical formatter ([`fmt::format_source`]);
//! - [`import`]: warden text from YAML tool policies and MCP `tools/list` results;
//! - [`limits`]: the caps on every input and the bounded file readers that enforce them.
//!
//! **Hidden** (`#[doc(hidden)]`, public only because a caller outside the library crate must
//! reach them; no user may rely on them): `syntax` (the syntax tree, which the parser and
//! formatter tests walk and which changes with the grammar), `condition` (the argument-rule
//! condition evaluator, reached by its tests and bench), `classify_eval` (the scoring of
//! `toolwarden classify --eval`, shaped by that command's output) and `invisible` (how the
//! command line escapes characters a reader cannot see in what it prints).
//!
//! Every public type is `Send + Sync` except [`mcp::Session`] (`Send`: one connection's state
//! machine, holding the embedder's clock and audit sink), so a [`Policy`] compiled once can be
//! shared across threads. The policy, requests, intents, decisions, diagnostics and the
//! supported modules' types are `UnwindSafe + RefUnwindSafe` too, except [`audit::Auditor`] and
//! [`mcp::Session`] (they hold boxed trait objects of the embedder's) and
//! [`audit::AuditError`] (it wraps a [`std::io::Error`]). `tests/api.rs` asserts all of this.

#![warn(missing_docs)]

pub mod analysis;
mod args;
pub mod audit;
mod check;
pub mod classify;
// Hidden: the scoring behind `toolwarden classify --eval`, reached by the command line (a
// separate crate in this package that uses only public paths). Its report shapes follow the
// command's output and may change with it.
#[doc(hidden)]
pub mod classify_eval;
mod compile;
// Hidden: the argument-rule condition evaluator, which its allocation tests and bench reach
// from outside the crate; users will reach rules through `Policy::check_call`.
#[doc(hidden)]
pub mod condition;
mod decision;
mod diagnostic;
mod eval;
pub mod fmt;
mod glob;
pub mod import;
// Hidden: the command line escapes invisible characters in what it prints with
// `invisible::escape`; a helper of its output, not part of the policy API.
#[doc(hidden)]
pub mod invisible;
pub mod limits;
mod load;
pub mod mcp;
mod policy;
mod relation;
mod schemas;
mod span;
// Hidden: the syntax tree changes with the grammar (new tool attributes and stages add
// variants); the parser and formatter tests in `tests/` walk it, nothing else outside the
// crate may.
#[doc(hidden)]
pub mod syntax;
mod toolset;
pub mod watch;

pub use args::{parse_args, ArgsError};
pub use check::Cell;
pub use classify::{normalize, Hit, Intent, Normalized};
pub use compile::{Edge, Node};
pub use decision::{
    Decision, FiredRule, Offer, PendingCall, RuleId, Stage, ToolDecision, ToolMatch, Turn, Verdict,
};
pub use diagnostic::{render_all, Diagnostic, Location, PolicyError, Severity, Sources};
pub use eval::{
    canonical_json_text, BoundRequest, LabelSource, Request, RequestError, Session, SessionError,
    SESSION_FORMAT,
};
pub use policy::Policy;
pub use schemas::{schema_name, SchemaDecision, SchemaError};
pub use toolset::ToolSet;
