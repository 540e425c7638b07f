//! Function schemas in, function schemas out: [`Policy::offer_schemas`].
//!
//! An agent holds its tools as a list of schemas in one of three shapes:
//!
//! - OpenAI Chat Completions: `{"type": "function", "function": {"name": …, "parameters": …}}`
//!   (the Responses API's flat `{"type": "function", "name": …}` works too);
//! - Anthropic: `{"name": …, "description": …, "input_schema": …}`;
//! - MCP `tools/list` entries: `{"name": …, "inputSchema": …, "annotations": {…}}`.
//!
//! `offer_schemas` decides each schema's tool name exactly as [`Policy::offer`] does and returns
//! the visible ones (`allow` and `confirm`) unchanged, in input order, so the agent swaps its
//! list for the result in one line. Shapes may be mixed in one list.
//!
//! MCP annotations are untrusted hints. The MCP specification (2025-11-25, Tools page,
//! <https://modelcontextprotocol.io/specification/2025-11-25/server/tools>) says: "For trust &
//! safety and security, clients MUST consider tool annotations to be untrusted unless they come
//! from trusted servers." A
//! malicious or careless server can mark a deleting tool `readOnlyHint: true`. So a policy's
//! own rules always stand, and under `trust annotations tighten` (the default) annotations can
//! only make a decision stricter: the tool is also judged as if its effect were the one its
//! annotations imply (spec defaults: a missing `readOnlyHint` is false, a missing
//! `destructiveHint` is true; read-only -> `none`, else destructive -> `delete`, else `write`),
//! and the stricter of the two decisions (deny > confirm > allow) is kept. A schema without an
//! `annotations` object asserts nothing and is judged by the policy alone; an implied effect the
//! policy does not declare is ignored. `trust annotations ignore` turns the tightening off.

use serde_json::Value;

use crate::classify::Intent;
use crate::decision::{Decision, PendingCall, ToolDecision, Turn, Verdict};
use crate::eval::{Request, RequestError};
use crate::import::mcp::{read_hints, McpEffect};
use crate::policy::Policy;

/// Why [`Policy::offer_schemas`] could not decide.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The request does not fit the policy.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// A schema has no name, is not an object, or has malformed annotations.
    #[error("schema [{index}]: {message}")]
    Schema {
        /// The schema's index in the input list.
        index: usize,
        /// What is wrong (with the JSON path inside the schema, when there is one).
        message: String,
    },
}

/// The decision about one schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaDecision {
    /// The schema's index in the input list.
    pub index: usize,
    /// The tool name read from the schema.
    pub name: String,
    /// The final decision (after tightening).
    pub decision: ToolDecision,
    /// The effect the schema's MCP annotations imply, when it has annotations.
    pub annotation_effect: Option<&'static str>,
    /// Whether the annotations made the decision stricter than the policy's own.
    pub tightened: bool,
}

/// The tool name of a schema in any of the accepted shapes.
///
/// # Errors
///
/// A message (without the index) when the value is not an object or carries no string name.
pub fn schema_name(schema: &Value) -> Result<&str, String> {
    let Value::Object(obj) = schema else {
        return Err("expected a tool schema object".to_string());
    };
    if obj.get("type").and_then(Value::as_str) == Some("function") {
        if let Some(f) = obj.get("function") {
            // A schema that names two different tools is refused: a host reading `name` and a
            // policy reading `function.name` must never judge different tools.
            if let (Some(Value::String(outer)), Some(Value::String(inner))) =
                (obj.get("name"), f.get("name"))
            {
                if outer != inner {
                    return Err(format!(
                        "the schema names two tools: name `{outer}` and function.name `{inner}`"
                    ));
                }
            }
            return match f.get("name") {
                Some(Value::String(s)) if !s.is_empty() => Ok(s),
                Some(Value::String(_)) => Err("function.name is empty".to_string()),
                Some(_) => Err("function.name is not a string".to_string()),
                None => Err("the OpenAI tool has no function.name".to_string()),
            };
        }
    }
    match obj.get("name") {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) => Err("name is empty".to_string()),
        Some(_) => Err("name is not a string".to_string()),
        None => Err(
            "the schema has no name; expected {\"type\":\"function\",\"function\":{\"name\":…}}, \
             {\"name\":…,\"input_schema\":…} or {\"name\":…,\"inputSchema\":…}"
                .to_string(),
        ),
    }
}

impl Policy {
    /// Decides every schema in `schemas` (see the module docs of `schemas` for the shapes and
    /// the annotation rule) and returns one [`SchemaDecision`] per schema, in input order.
    ///
    /// # Errors
    ///
    /// [`SchemaError::Request`] for a request the policy cannot judge;
    /// [`SchemaError::Schema`] naming the index of the first schema without a name or with
    /// non-boolean annotation hints.
    pub fn schema_decisions(
        &self,
        request: &Request,
        intent: &Intent,
        schemas: &[Value],
    ) -> Result<Vec<SchemaDecision>, SchemaError> {
        self.schema_decisions_in(request, intent, schemas, None)
    }

    /// [`Policy::schema_decisions`] within a session: its labels' `after` blocks hide or
    /// confirm tools as in [`Policy::offer_session`].
    pub(crate) fn schema_decisions_in(
        &self,
        request: &Request,
        intent: &Intent,
        schemas: &[Value],
        session: Option<&crate::Session>,
    ) -> Result<Vec<SchemaDecision>, SchemaError> {
        let bound = match session {
            Some(s) => self.bind_session(request, intent, s)?,
            None => self.bind(request, intent)?,
        };
        let mut out = Vec::with_capacity(schemas.len());
        for (index, schema) in schemas.iter().enumerate() {
            let name =
                schema_name(schema).map_err(|message| SchemaError::Schema { index, message })?;
            let hints = match schema.as_object() {
                Some(obj) => read_hints(obj, "").map_err(|e| SchemaError::Schema {
                    index,
                    message: format!("{}: {}", e.path.trim_start_matches('.'), e.message),
                })?,
                None => None,
            };
            let annotation_effect = hints.map(|(r, d)| McpEffect::from_hints(r, d).as_str());
            let (decision, tightened) = self.decide_tightened(&bound, name, annotation_effect);
            out.push(SchemaDecision {
                index,
                name: name.to_string(),
                decision,
                annotation_effect,
                tightened,
            });
        }
        Ok(out)
    }

    /// Judges a call to the tool `schema` describes, as [`Policy::check_call_with`] does, with
    /// the schema's MCP annotations as untrusted hints (`trust annotations tighten`): when the
    /// effect they imply makes stages 1–7 stricter than the policy's own effect, the whole call
    /// (stages 1–11, including confirmation and the turn limit) is judged under that effect, so
    /// a call is never treated more leniently than [`Policy::offer_schemas`] treats its schema.
    /// The tool name is read from the schema; `args` are the call's arguments.
    ///
    /// ```
    /// use serde_json::json;
    /// use toolwarden::{Policy, Request, Turn};
    /// let policy = Policy::parse(r#"
    ///     policy "p" version 1
    ///     effects none, write, delete
    ///     mode agent { restrict none, write }
    ///     tool edit_doc { effect write }
    /// "#, "p.warden").unwrap();
    /// let schema = json!({"name": "edit_doc", "inputSchema": {}, "annotations": {"destructiveHint": true}});
    /// let v = policy.check_call_schema(&Request::new("agent"), &policy.fallback_intent(),
    ///     &mut Turn::new(), &schema, &json!({}), None).unwrap();
    /// assert_eq!(v.decision.as_str(), "deny");
    /// assert_eq!(v.effect.as_deref(), Some("delete"));
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Policy::schema_decisions`].
    pub fn check_call_schema(
        &self,
        request: &Request,
        intent: &Intent,
        turn: &mut Turn,
        schema: &Value,
        args: &Value,
        pending: Option<&PendingCall>,
    ) -> Result<Verdict, SchemaError> {
        self.check_call_schema_in(request, intent, turn, schema, args, pending, None)
    }

    /// [`Policy::check_call_schema`] with stage `flow` judged against `session`'s labels;
    /// the session is not changed.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check_call_schema_in(
        &self,
        request: &Request,
        intent: &Intent,
        turn: &mut Turn,
        schema: &Value,
        args: &Value,
        pending: Option<&PendingCall>,
        session: Option<&crate::Session>,
    ) -> Result<Verdict, SchemaError> {
        let decisions =
            self.schema_decisions_in(request, intent, std::slice::from_ref(schema), session)?;
        let name =
            schema_name(schema).map_err(|message| SchemaError::Schema { index: 0, message })?;
        let t = self.tables();
        let effect = decisions
            .first()
            .filter(|d| d.tightened)
            .and_then(|d| d.annotation_effect)
            .and_then(|e| t.effects.iter().position(|x| &**x == e))
            .and_then(|i| u8::try_from(i).ok());
        Ok(self.check_call_as_in(request, intent, turn, name, args, pending, effect, session)?)
    }

    /// The schemas the model may see (decision `allow` or `confirm`), unchanged in shape and
    /// order: OpenAI, Anthropic and MCP tool schemas, mixed freely. MCP annotations may only
    /// hide a tool the policy would show, never show one it hides (`trust annotations`).
    ///
    /// ```
    /// use serde_json::json;
    /// use toolwarden::{Policy, Request};
    /// let policy = Policy::parse(r#"
    ///     policy "p" version 1
    ///     effects none, write, delete
    ///     mode agent { restrict none, write }
    ///     tool read_doc  { effect none }
    ///     tool edit_doc  { effect write }
    /// "#, "p.warden").unwrap();
    /// let tools = [
    ///     json!({"type": "function", "function": {"name": "read_doc", "parameters": {}}}),
    ///     json!({"name": "rm_rf", "input_schema": {}}),
    ///     json!({"name": "edit_doc", "inputSchema": {}, "annotations": {"destructiveHint": true}}),
    /// ];
    /// let request = Request::new("agent");
    /// let shown = policy.offer_schemas(&request, &policy.fallback_intent(), &tools).unwrap();
    /// // rm_rf is unknown; edit_doc's annotations say `delete`, which mode agent restricts.
    /// assert_eq!(shown, vec![tools[0].clone()]);
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Policy::schema_decisions`].
    pub fn offer_schemas(
        &self,
        request: &Request,
        intent: &Intent,
        schemas: &[Value],
    ) -> Result<Vec<Value>, SchemaError> {
        let decisions = self.schema_decisions(request, intent, schemas)?;
        Ok(decisions
            .iter()
            .filter(|d| d.decision.decision != Decision::Deny)
            .map(|d| schemas[d.index].clone())
            .collect())
    }
}
