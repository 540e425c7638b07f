//! The public types can be shared across threads, and most survive a caught panic: an embedder
//! compiles a policy once and shares it (`Arc<Policy>`) across threads and agents, and may call
//! it under `catch_unwind` (the MCP layer does, to refuse a call when judging panics).
//!
//! These are compile-time assertions: a type that stops being `Send + Sync` (or
//! `UnwindSafe + RefUnwindSafe`) makes this file fail to build.

use std::panic::{RefUnwindSafe, UnwindSafe};

fn send<T: Send>() {}
fn send_sync<T: Send + Sync>() {}
fn unwind_safe<T: UnwindSafe + RefUnwindSafe>() {}

/// Every public type is `Send + Sync`, except `mcp::Session`, which is `Send` only: it is one
/// connection's state machine, owned by the thread that moves that connection's messages, and
/// holds the embedder's clock and audit sink, which need not be `Sync`.
#[test]
fn public_types_are_send_and_sync() {
    // Loading and deciding.
    send_sync::<toolwarden::Policy>();
    send_sync::<toolwarden::Request>();
    send_sync::<toolwarden::BoundRequest<'static>>();
    send_sync::<toolwarden::RequestError>();
    // Classification.
    send_sync::<toolwarden::Intent>();
    send_sync::<toolwarden::Hit>();
    send_sync::<toolwarden::Normalized>();
    // Decisions.
    send_sync::<toolwarden::Offer<'static>>();
    send_sync::<toolwarden::ToolDecision>();
    send_sync::<toolwarden::ToolMatch>();
    send_sync::<toolwarden::Verdict>();
    send_sync::<toolwarden::Decision>();
    send_sync::<toolwarden::Stage>();
    send_sync::<toolwarden::RuleId>();
    send_sync::<toolwarden::PendingCall>();
    send_sync::<toolwarden::Turn>();
    send_sync::<toolwarden::Session>();
    send_sync::<toolwarden::LabelSource>();
    send_sync::<toolwarden::SessionError>();
    // Diagnostics.
    send_sync::<toolwarden::Diagnostic>();
    send_sync::<toolwarden::Severity>();
    send_sync::<toolwarden::Location>();
    send_sync::<toolwarden::PolicyError>();
    send_sync::<toolwarden::Sources>();
    // Tool sets, schemas, arguments, the decision graph.
    send_sync::<toolwarden::ToolSet>();
    send_sync::<toolwarden::SchemaDecision>();
    send_sync::<toolwarden::SchemaError>();
    send_sync::<toolwarden::ArgsError>();
    send_sync::<toolwarden::Cell>();
    send_sync::<toolwarden::Node>();
    send_sync::<toolwarden::Edge>();
    // Modules.
    send_sync::<toolwarden::watch::PolicyWatcher>();
    send_sync::<toolwarden::watch::Snapshot>();
    send_sync::<toolwarden::watch::ReloadEvent>();
    send_sync::<toolwarden::watch::WatchError>();
    send_sync::<toolwarden::audit::Auditor<Vec<u8>>>();
    send_sync::<toolwarden::audit::Enforcement>();
    send_sync::<toolwarden::audit::AuditError>();
    send_sync::<toolwarden::mcp::Judge>();
    send_sync::<toolwarden::mcp::PendingCalls>();
    send::<toolwarden::mcp::Session>();
    send_sync::<toolwarden::mcp::Outcome>();
    send_sync::<toolwarden::mcp::MessageError>();
    send_sync::<toolwarden::mcp::CallRecord>();
    send_sync::<toolwarden::mcp::StdioOptions>();
    send_sync::<toolwarden::analysis::Trace>();
    send_sync::<toolwarden::analysis::Table>();
    send_sync::<toolwarden::analysis::PolicyDiff>();
    send_sync::<toolwarden::analysis::CellGroup>();
    send_sync::<toolwarden::analysis::diff::Transition>();
    send_sync::<toolwarden::analysis::rule_changes::RuleChange>();
    send_sync::<toolwarden::analysis::replay::RecordedCall>();
    send_sync::<toolwarden::analysis::replay::CallChange>();
}

/// The policy, its requests and every value a decision returns survive a caught panic. Not
/// unwind-safe, so not listed: `audit::Auditor` and `mcp::Session` (they hold the embedder's
/// boxed clock and sink, trait objects that promise nothing about unwinding) and
/// `audit::AuditError` (it wraps a `std::io::Error`, whose custom payload is a boxed error).
#[test]
fn decision_types_are_unwind_safe() {
    unwind_safe::<toolwarden::Policy>();
    unwind_safe::<toolwarden::Request>();
    unwind_safe::<toolwarden::BoundRequest<'static>>();
    unwind_safe::<toolwarden::RequestError>();
    unwind_safe::<toolwarden::Intent>();
    unwind_safe::<toolwarden::Hit>();
    unwind_safe::<toolwarden::Normalized>();
    unwind_safe::<toolwarden::Offer<'static>>();
    unwind_safe::<toolwarden::ToolDecision>();
    unwind_safe::<toolwarden::ToolMatch>();
    unwind_safe::<toolwarden::Verdict>();
    unwind_safe::<toolwarden::Decision>();
    unwind_safe::<toolwarden::Stage>();
    unwind_safe::<toolwarden::RuleId>();
    unwind_safe::<toolwarden::PendingCall>();
    unwind_safe::<toolwarden::Turn>();
    unwind_safe::<toolwarden::Session>();
    unwind_safe::<toolwarden::LabelSource>();
    unwind_safe::<toolwarden::SessionError>();
    unwind_safe::<toolwarden::Diagnostic>();
    unwind_safe::<toolwarden::Severity>();
    unwind_safe::<toolwarden::Location>();
    unwind_safe::<toolwarden::PolicyError>();
    unwind_safe::<toolwarden::Sources>();
    unwind_safe::<toolwarden::ToolSet>();
    unwind_safe::<toolwarden::SchemaDecision>();
    unwind_safe::<toolwarden::SchemaError>();
    unwind_safe::<toolwarden::ArgsError>();
    unwind_safe::<toolwarden::Cell>();
    unwind_safe::<toolwarden::Node>();
    unwind_safe::<toolwarden::Edge>();
    unwind_safe::<toolwarden::watch::PolicyWatcher>();
    unwind_safe::<toolwarden::watch::Snapshot>();
    unwind_safe::<toolwarden::watch::ReloadEvent>();
    unwind_safe::<toolwarden::watch::WatchError>();
    unwind_safe::<toolwarden::audit::Enforcement>();
    unwind_safe::<toolwarden::mcp::Judge>();
    unwind_safe::<toolwarden::mcp::PendingCalls>();
    unwind_safe::<toolwarden::mcp::Outcome>();
    unwind_safe::<toolwarden::mcp::MessageError>();
    unwind_safe::<toolwarden::mcp::CallRecord>();
    unwind_safe::<toolwarden::mcp::StdioOptions>();
    unwind_safe::<toolwarden::analysis::Trace>();
    unwind_safe::<toolwarden::analysis::Table>();
    unwind_safe::<toolwarden::analysis::PolicyDiff>();
    unwind_safe::<toolwarden::analysis::CellGroup>();
    unwind_safe::<toolwarden::analysis::diff::Transition>();
    unwind_safe::<toolwarden::analysis::rule_changes::RuleChange>();
    unwind_safe::<toolwarden::analysis::replay::RecordedCall>();
    unwind_safe::<toolwarden::analysis::replay::CallChange>();
}
