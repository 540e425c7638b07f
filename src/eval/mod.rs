//! The evaluator: `offer` (schema visibility, stages 1–7) and `check_call` (the execution
//! guard, stages 1–13) over a compiled policy's tables.
//!
//! A request is bound to the policy once per call ([`Policy::offer`] binds, then decides each
//! tool with a few bit operations and one hash lookup, allocating only the result).
//!
//! * `policy`: the [`Policy`] handle and the table accessors the stages read.
//! * `request`: [`Request`], [`RequestError`] and binding a request ([`BoundRequest`]).
//! * `stages`: stages 1–7, one tool name at a time (`offer`, `decide_tool`).
//! * `call`: the execution guard, `check_call` and its variants (stages 8–13, argument rules, flow, confirmation).
//! * `session`: [`Session`], the labels, turn and pending call of one agent session.
//! * `reason`: the one-sentence reason of a decision.
//! * `json`: canonical JSON for call digests, and the argument depth check.

mod call;
mod json;
mod policy;
mod reason;
mod request;
mod session;
mod stages;

#[cfg(feature = "gateway")]
pub(crate) use call::confirmation_why;
pub use json::canonical_json_text;
pub use policy::Policy;
pub(crate) use policy::{Inner, Relations};
pub use request::{BoundRequest, Request, RequestError};
pub use session::{LabelSource, Session, SessionError, SESSION_FORMAT};
