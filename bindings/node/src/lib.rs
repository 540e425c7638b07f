//! Node.js bindings for toolwarden, a Node-API addon built with napi-rs.
//!
//! The compiled module is loaded by the package's `index.js` (CommonJS) and `index.mjs` (ESM),
//! which add the `PolicyError` class, map `offer` results back to the caller's own tool objects
//! and export the public API. Every class wraps the Rust type of the same name. A `Policy` is
//! immutable (an `Arc` inside), so one instance serves every async call of a process.
//!
//! Evaluation is synchronous: a decision takes nanoseconds to microseconds, so the event loop is
//! never blocked longer than one decision. Bad input never panics: a wrong type throws
//! `TypeError` naming the parameter, a bad value throws `Error` with a message (`code` says
//! which: `RequestError`, `InvalidArg`), a policy that fails to load throws `PolicyError`
//! carrying every diagnostic.

#![deny(clippy::all)]

use std::borrow::Cow;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use napi::bindgen_prelude::*;
use napi::{Env, Status, ValueType};
use napi_derive::napi;
use serde_json::{Map, Value};

// ---------------------------------------------------------------------------------------------
// Errors and conversions
// ---------------------------------------------------------------------------------------------

/// Throws a JS `TypeError` with `message` and returns the error that tells napi-rs an
/// exception is already pending (so it is not thrown twice).
fn type_error(env: &Env, message: String) -> Error {
    match env.throw_type_error(&message, None) {
        Ok(()) => Error::new(Status::PendingException, message),
        Err(e) => e,
    }
}

/// A bad value (not a wrong type): a plain `Error` with `code` `InvalidArg`.
fn invalid(message: impl Into<String>) -> Error {
    Error::new(Status::InvalidArg, message.into())
}

/// A request the policy cannot judge: an `Error` with `code` `RequestError`.
fn request_error(env: &Env, e: toolwarden::RequestError) -> Error {
    throw_coded(env, "RequestError", &e.to_string(), None)
}

/// A JS `Error` with `code` set (and `diagnostics`, when given), not thrown.
fn coded_error<'e>(
    env: &'e Env,
    code: &str,
    message: &str,
    diagnostics: Option<Vec<Diagnostic>>,
) -> Result<Object<'e>> {
    let mut err = env.create_error(Error::new(Status::GenericFailure, message.to_string()))?;
    err.set("code", code)?;
    if let Some(d) = diagnostics {
        err.set("diagnostics", d)?;
    }
    Ok(err)
}

/// Throws an `Error` with `code` set (and `diagnostics`, when given), returning the pending
/// exception marker.
fn throw_coded(
    env: &Env,
    code: &str,
    message: &str,
    diagnostics: Option<Vec<Diagnostic>>,
) -> Error {
    match coded_error(env, code, message, diagnostics).and_then(|err| env.throw(err)) {
        Ok(()) => Error::new(Status::PendingException, message.to_string()),
        Err(e) => e,
    }
}

/// The message and diagnostics of a `toolwarden::PolicyError`, as the JS error carries them.
fn policy_error_parts(e: &toolwarden::PolicyError) -> (String, Vec<Diagnostic>) {
    let diagnostics = e
        .diagnostics()
        .iter()
        .map(|d| Diagnostic::new(d, e.sources()))
        .collect();
    (e.render().trim_end().to_string(), diagnostics)
}

/// A `toolwarden::PolicyError` thrown as an `Error` with `code` `PolicyError` and every
/// diagnostic in `diagnostics` (the package turns it into a `PolicyError` instance).
fn policy_error(env: &Env, e: toolwarden::PolicyError) -> Error {
    let (message, diagnostics) = policy_error_parts(&e);
    throw_coded(env, "PolicyError", &message, Some(diagnostics))
}

/// A `toolwarden::PolicyError` as the value a promise rejects with: the same `Error` (code
/// `PolicyError`, every diagnostic) that the synchronous loaders throw.
fn policy_rejection(env: &Env, e: toolwarden::PolicyError) -> Error {
    let (message, diagnostics) = policy_error_parts(&e);
    match coded_error(env, "PolicyError", &message, Some(diagnostics)) {
        Ok(err) => Error::from(err.to_unknown()),
        Err(e) => e,
    }
}

/// `typeof` of a value, for messages.
fn type_name(v: &Unknown<'_>) -> &'static str {
    match v.get_type() {
        Ok(ValueType::Undefined) => "undefined",
        Ok(ValueType::Null) => "null",
        Ok(ValueType::Boolean) => "boolean",
        Ok(ValueType::Number) => "number",
        Ok(ValueType::String) => "string",
        Ok(ValueType::Symbol) => "symbol",
        Ok(ValueType::Object) => {
            if v.is_array().unwrap_or(false) {
                "array"
            } else {
                "object"
            }
        }
        Ok(ValueType::Function) => "function",
        Ok(ValueType::BigInt) => "bigint",
        _ => "value",
    }
}

fn is_nullish(v: &Unknown<'_>) -> bool {
    matches!(v.get_type(), Ok(ValueType::Undefined) | Ok(ValueType::Null))
}

/// A string parameter, or a `TypeError` naming it.
fn string_arg(env: &Env, v: &Unknown<'_>, param: &str) -> Result<String> {
    if v.get_type()? == ValueType::String {
        // SAFETY: the type was just checked.
        unsafe { v.cast::<String>() }
    } else {
        Err(type_error(
            env,
            format!("{param} must be a string, not {}", type_name(v)),
        ))
    }
}

/// An array of strings, or a `TypeError` naming the parameter (and the element).
fn string_list(env: &Env, v: &Unknown<'_>, param: &str) -> Result<Vec<String>> {
    if v.get_type()? != ValueType::Object || !v.is_array()? {
        return Err(type_error(
            env,
            format!("{param} must be an array of strings, not {}", type_name(v)),
        ));
    }
    // SAFETY: checked to be an array.
    let arr = unsafe { v.cast::<Array>() }?;
    let mut out = Vec::with_capacity(arr.len() as usize);
    for i in 0..arr.len() {
        let item: Unknown = arr.get(i)?.ok_or_else(|| invalid("hole in array"))?;
        out.push(string_arg(env, &item, &format!("{param}[{i}]"))?);
    }
    Ok(out)
}

/// A plain object (not an array, not null), or a `TypeError`.
fn object_arg<'e>(env: &Env, v: &Unknown<'e>, param: &str, expected: &str) -> Result<Object<'e>> {
    if v.get_type()? == ValueType::Object && !v.is_array()? {
        // SAFETY: checked to be an object.
        unsafe { v.cast::<Object>() }
    } else {
        Err(type_error(
            env,
            format!("{param} must be {expected}, not {}", type_name(v)),
        ))
    }
}

/// The instance of native class `T` that `v` is, if it is one (checked by type tag).
fn instance<'e, T: 'static + napi::bindgen_prelude::ObjectFinalize>(
    v: &Unknown<'e>,
) -> Option<ClassInstance<'e, T>>
where
    ClassInstance<'e, T>: FromNapiValue,
{
    if v.get_type().ok()? != ValueType::Object {
        return None;
    }
    // SAFETY: FromNapiValue for ClassInstance checks the type tag before the cast.
    unsafe { v.cast::<ClassInstance<'e, T>>() }.ok()
}

/// A JS value as JSON (bounded by napi-rs: 128 levels, 1,000,000 values; a cycle fails).
fn json_value(env: &Env, v: &Unknown<'_>, param: &str) -> Result<Value> {
    // SAFETY: Value's FromNapiValue inspects the type itself.
    unsafe { v.cast::<Value>() }.map_err(|e| {
        type_error(
            env,
            format!("{param} is not representable as JSON: {}", e.reason),
        )
    })
}

/// Call arguments: a plain object, or the JSON text a model produced (parsed strictly:
/// duplicate keys and deep nesting are refused).
fn args_value(env: &Env, v: &Unknown<'_>) -> Result<Value> {
    match v.get_type()? {
        ValueType::String => {
            // SAFETY: the type was just checked.
            let text = unsafe { v.cast::<String>() }?;
            toolwarden::parse_args(&text).map_err(|e| invalid(format!("args: {e}")))
        }
        ValueType::Object if !v.is_array()? => json_value(env, v, "args"),
        _ => Err(type_error(
            env,
            format!(
                "args must be an object or JSON text (a string), not {}",
                type_name(v)
            ),
        )),
    }
}

/// A property of an options object; `undefined` and `null` read as absent.
fn opt_field<'e>(opts: &Option<Object<'e>>, key: &str) -> Result<Option<Unknown<'e>>> {
    match opts {
        Some(o) => Ok(o.get::<Unknown>(key)?.filter(|v| !is_nullish(v))),
        None => Ok(None),
    }
}

/// The options object of a call (`undefined` or `null` for none).
fn options_arg<'e>(env: &Env, v: Option<Unknown<'e>>, param: &str) -> Result<Option<Object<'e>>> {
    match v {
        Some(v) if !is_nullish(&v) => Ok(Some(object_arg(env, &v, param, "an options object")?)),
        _ => Ok(None),
    }
}

/// Where the intent of an evaluation comes from.
enum IntentSource<'e> {
    Query(String),
    Given(toolwarden::Intent),
    /// An `Intent` instance, borrowed for the call (not copied).
    Instance(ClassInstance<'e, Intent>),
    Fallback,
}

impl<'e> IntentSource<'e> {
    /// `{ query, intent }` of an options object.
    fn from_options(env: &Env, opts: &Option<Object<'e>>) -> Result<IntentSource<'e>> {
        IntentSource::from_values(env, opt_field(opts, "query")?, opt_field(opts, "intent")?)
    }

    /// `query` and `intent` given as values (`undefined` and `null` read as absent).
    fn from_values(
        env: &Env,
        query: Option<Unknown<'e>>,
        intent: Option<Unknown<'e>>,
    ) -> Result<IntentSource<'e>> {
        let query = query.filter(|v| !is_nullish(v));
        let intent = intent.filter(|v| !is_nullish(v));
        match (query, intent) {
            (Some(_), Some(_)) => Err(invalid(
                "give query or intent, not both (the intent decides; the query would be ignored)",
            )),
            (Some(q), None) => Ok(IntentSource::Query(string_arg(env, &q, "query")?)),
            (None, Some(i)) => {
                if let Some(it) = instance::<Intent>(&i) {
                    return Ok(IntentSource::Instance(it));
                }
                match i.get_type()? {
                    ValueType::String => Ok(IntentSource::Given(toolwarden::Intent::named(
                        string_arg(env, &i, "intent")?,
                    ))),
                    ValueType::Object if i.is_array()? => Ok(IntentSource::Given(
                        toolwarden::Intent::union(string_list(env, &i, "intent")?),
                    )),
                    _ => Err(type_error(
                        env,
                        format!(
                            "intent must be an Intent, a string or an array of strings, not {}",
                            type_name(&i)
                        ),
                    )),
                }
            }
            (None, None) => Ok(IntentSource::Fallback),
        }
    }

    fn resolve(&self, policy: &toolwarden::Policy) -> Cow<'_, toolwarden::Intent> {
        match self {
            IntentSource::Query(q) => Cow::Owned(policy.classify(q)),
            IntentSource::Given(i) => Cow::Borrowed(i),
            IntentSource::Instance(i) => Cow::Borrowed(&i.inner),
            IntentSource::Fallback => Cow::Owned(policy.fallback_intent()),
        }
    }
}

/// A count: a non-negative integer number up to 2^32 - 1, or a `TypeError`.
fn count_arg(env: &Env, v: &Unknown<'_>, param: &str) -> Result<u32> {
    if v.get_type()? == ValueType::Number {
        // SAFETY: the type was just checked.
        let n = unsafe { v.cast::<f64>() }?;
        if n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&n) {
            return Ok(n as u32);
        }
    }
    Err(type_error(
        env,
        format!(
            "{param} must be a non-negative integer, not {}",
            type_name(v)
        ),
    ))
}

/// The `Request` a parameter holds, or a `TypeError`.
fn request_arg<'e>(env: &Env, v: &Unknown<'e>) -> Result<ClassInstance<'e, Request>> {
    instance::<Request>(v).ok_or_else(|| {
        type_error(
            env,
            format!("request must be a Request, not {}", type_name(v)),
        )
    })
}

/// The parts of a tool schema a decision reads (`type`, `name`, `annotations`,
/// `function.name`), as JSON; a string is a bare name. Descriptions and parameter schemas are
/// never converted.
fn schema_keys(env: &Env, v: &Unknown<'_>, path: &str) -> Result<Value> {
    if v.get_type()? == ValueType::String {
        let mut m = Map::new();
        m.insert("name".to_string(), Value::String(string_arg(env, v, path)?));
        return Ok(Value::Object(m));
    }
    let obj = object_arg(env, v, path, "a tool name (string) or a tool schema object")?;
    let mut out = Map::new();
    for key in ["type", "name", "annotations"] {
        if let Some(value) = obj.get::<Unknown>(key)? {
            out.insert(
                key.to_string(),
                json_value(env, &value, &format!("{path}.{key}"))?,
            );
        }
    }
    if let Some(f) = obj.get::<Unknown>("function")? {
        let function = if f.get_type()? == ValueType::Object && !f.is_array()? {
            // SAFETY: checked to be an object.
            let fo = unsafe { f.cast::<Object>() }?;
            let mut m = Map::new();
            if let Some(name) = fo.get::<Unknown>("name")? {
                m.insert(
                    "name".to_string(),
                    json_value(env, &name, &format!("{path}.function.name"))?,
                );
            }
            Value::Object(m)
        } else {
            Value::Null
        };
        out.insert("function".to_string(), function);
    }
    Ok(Value::Object(out))
}

/// An array parameter, or a `TypeError`.
fn array_arg<'e>(env: &Env, v: &Unknown<'e>, param: &str, expected: &str) -> Result<Array<'e>> {
    if v.get_type()? == ValueType::Object && v.is_array()? {
        // SAFETY: checked to be an array.
        unsafe { v.cast::<Array>() }
    } else {
        Err(type_error(
            env,
            format!("{param} must be {expected}, not {}", type_name(v)),
        ))
    }
}

/// The schema keys of every element of an array (names become `{name}`).
fn schema_list(env: &Env, v: &Unknown<'_>, param: &str) -> Result<Vec<Value>> {
    let arr = array_arg(
        env,
        v,
        param,
        "an array of tool names or tool schema objects",
    )?;
    let mut out = Vec::with_capacity(arr.len() as usize);
    for i in 0..arr.len() {
        let item: Unknown = arr.get(i)?.ok_or_else(|| invalid("hole in array"))?;
        out.push(schema_keys(env, &item, &format!("{param}[{i}]"))?);
    }
    Ok(out)
}

fn schema_error(env: &Env, e: toolwarden::SchemaError, param: &str) -> Error {
    match e {
        toolwarden::SchemaError::Request(r) => request_error(env, r),
        toolwarden::SchemaError::Schema { index, message } => {
            invalid(format!("{param}[{index}]: {message}"))
        }
    }
}

/// Writes the visible indexes into `out` (the caller's scratch buffer, at least as long as the
/// input) and returns how many there are: no allocation crosses into JS.
fn write_indices(
    out: &mut Uint32ArraySlice<'_>,
    indices: impl Iterator<Item = usize>,
) -> Result<u32> {
    // SAFETY: the slice views a live Uint32Array argument, borrowed for this call only.
    let buf = unsafe { out.as_mut() };
    let mut n = 0usize;
    for i in indices {
        let slot = buf
            .get_mut(n)
            .ok_or_else(|| invalid("the index buffer is shorter than the tool list"))?;
        *slot = u32::try_from(i).map_err(|_| invalid("too many tools"))?;
        n += 1;
    }
    u32::try_from(n).map_err(|_| invalid("too many tools"))
}

// ---------------------------------------------------------------------------------------------
// Diagnostic
// ---------------------------------------------------------------------------------------------

/// One message about policy text: where (`file`, 1-based `line` and `column`), what
/// (`message`, `code`, `severity`), the source `text`, the `help` and further `notes`, and the
/// `rendered` multi-line report.
#[napi(object, use_nullable = true)]
pub struct Diagnostic {
    /// `"error"` or `"warning"`.
    pub severity: String,
    /// The stable code (e.g. `unknown-effect`).
    pub code: String,
    /// What is wrong, in one sentence.
    pub message: String,
    /// The file, or `null` for a diagnostic about no place.
    pub file: Option<String>,
    /// The 1-based line, or `null`.
    pub line: Option<u32>,
    /// The 1-based column (in characters), or `null`.
    pub column: Option<u32>,
    /// The source text the diagnostic is about, or `null`.
    pub text: Option<String>,
    /// What to write instead, or `null`.
    pub help: Option<String>,
    /// Further notes (other places involved).
    pub notes: Vec<String>,
    /// The rendered report (file:line:col, the source line, a caret, the message, the help).
    pub rendered: String,
}

impl Diagnostic {
    fn new(d: &toolwarden::Diagnostic, sources: &toolwarden::Sources) -> Diagnostic {
        let j = d.to_json(sources);
        let s = |k: &str| j.get(k).and_then(Value::as_str).map(str::to_string);
        let n = |k: &str| {
            j.get(k)
                .and_then(Value::as_u64)
                .map(|v| u32::try_from(v).unwrap_or(u32::MAX))
        };
        Diagnostic {
            severity: s("severity").unwrap_or_default(),
            code: d.code().to_string(),
            message: d.message().to_string(),
            file: s("file"),
            line: n("line"),
            column: n("column"),
            text: s("text"),
            help: d.help_text().map(str::to_string),
            notes: d.notes().to_vec(),
            rendered: d.render(sources),
        }
    }
}

/// Why one tool is shown or hidden (`Policy.explain`).
#[napi(object, use_nullable = true)]
pub struct Explanation {
    /// The tool name asked about.
    pub tool: String,
    /// `"allow"`, `"confirm"` or `"deny"`.
    #[napi(ts_type = "'allow' | 'confirm' | 'deny'")]
    pub decision: String,
    /// The deciding stage, or `null` for an allow.
    pub stage: Option<String>,
    /// Why, in one sentence.
    pub reason: String,
    /// `file:line:col` of the deciding rule, or `null`.
    pub source: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Request
// ---------------------------------------------------------------------------------------------

/// Who is asking, in which mode: `new Request({ mode, roles, permissions, tenant, connectors,
/// forced })`, every field optional. Without `mode`, the policy's `default mode`. Unknown roles
/// and permissions grant nothing. In `connectors`, a tier mapped to an array is an allowlist of
/// servers (`[]` means zero connectors, never "unrestricted"); a tier mapped to `null` is left
/// unset. `forced` names are exempt from the intent stage (a confirmation in flight).
#[napi]
pub struct Request {
    inner: toolwarden::Request,
}

/// An argument rule that fired in a `checkCall` (`verdict.rules`).
#[napi(object)]
pub struct FiredRule {
    /// `file:line:col` of the rule in the policy.
    pub source: String,
    /// What the rule does when it fires.
    #[napi(ts_type = "'deny' | 'confirm'")]
    pub outcome: String,
    /// The argument reference as the rule writes it (`recipients[*]`, `host(url)`, `any`).
    pub reference: String,
    /// The value that made it fire, cut to 80 characters; absent for an absent argument.
    pub value: Option<String>,
    /// Why the condition could not be evaluated, when that is why it fired (fail closed).
    pub problem: Option<String>,
}

impl From<&toolwarden::FiredRule> for FiredRule {
    fn from(r: &toolwarden::FiredRule) -> FiredRule {
        FiredRule {
            source: r.source.clone(),
            outcome: r.outcome.to_string(),
            reference: r.reference.clone(),
            value: r.value.clone(),
            problem: r.problem.clone(),
        }
    }
}

#[napi]
impl Request {
    /// Builds a request from its options object (or none: the default mode, no roles).
    /// Throws `TypeError` for a field of the wrong type.
    #[napi(
        constructor,
        ts_args_type = "options?: { mode?: string | null; roles?: string[]; permissions?: string[]; tenant?: string | null; connectors?: Record<string, string[] | null>; forced?: string[]; context?: Record<string, string[]> }"
    )]
    pub fn new(env: Env, options: Option<Unknown>) -> Result<Request> {
        let opts = options_arg(&env, options, "options")?;
        let mut r = match opt_field(&opts, "mode")? {
            Some(m) => toolwarden::Request::new(string_arg(&env, &m, "mode")?),
            None => toolwarden::Request::default_mode(),
        };
        if let Some(v) = opt_field(&opts, "roles")? {
            r = r.roles(string_list(&env, &v, "roles")?);
        }
        if let Some(v) = opt_field(&opts, "permissions")? {
            r = r.permissions(string_list(&env, &v, "permissions")?);
        }
        if let Some(v) = opt_field(&opts, "tenant")? {
            r = r.tenant(string_arg(&env, &v, "tenant")?);
        }
        if let Some(v) = opt_field(&opts, "connectors")? {
            let c = object_arg(
                &env,
                &v,
                "connectors",
                "an object of tier -> array of servers or null",
            )?;
            for tier in Object::keys(&c)? {
                let servers: Option<Unknown> = c.get(&tier)?;
                match servers {
                    Some(s) if !is_nullish(&s) => {
                        let servers = string_list(&env, &s, &format!("connectors.{tier}"))?;
                        r = r.connectors(tier, servers);
                    }
                    _ => {}
                }
            }
        }
        if let Some(v) = opt_field(&opts, "forced")? {
            r = r.forced(string_list(&env, &v, "forced")?);
        }
        if let Some(v) = opt_field(&opts, "context")? {
            let sets = object_arg(
                &env,
                &v,
                "context",
                "an object of set name -> array of strings",
            )?;
            for name in Object::keys(&sets)? {
                let values: Option<Unknown> = sets.get(&name)?;
                let Some(values) = values else { continue };
                let values = string_list(&env, &values, &format!("context.{name}"))?;
                r = r.context(name, values);
            }
        }
        Ok(Request { inner: r })
    }

    /// The mode, or `null` for the policy's default mode.
    #[napi(getter)]
    pub fn mode(&self) -> Option<String> {
        self.inner.mode().map(str::to_string)
    }

    /// The names of the `context` sets the request supplies, in the order given.
    #[napi(getter)]
    pub fn context_names(&self) -> Vec<String> {
        self.inner.context_names().map(str::to_string).collect()
    }

    /// The roles as given.
    #[napi(getter)]
    pub fn roles(&self) -> Vec<String> {
        self.inner.role_names().to_vec()
    }

    /// The permissions as given.
    #[napi(getter)]
    pub fn permissions(&self) -> Vec<String> {
        self.inner.permission_names().to_vec()
    }

    /// The tenant, or `null`.
    #[napi(getter)]
    pub fn tenant(&self) -> Option<String> {
        self.inner.tenant_id().map(str::to_string)
    }

    /// The tiers set, each with its server allowlist.
    #[napi(getter)]
    pub fn connectors(&self) -> std::collections::HashMap<String, Vec<String>> {
        self.inner.connector_tiers().iter().cloned().collect()
    }

    /// The tool names exempt from the intent stage.
    #[napi(getter)]
    pub fn forced(&self) -> Vec<String> {
        self.inner.forced_names().to_vec()
    }

    /// A copy of this request with `forced` replaced by `names` (e.g. the tool of a pending
    /// confirmation, so that "yes" still reaches it).
    #[napi(ts_args_type = "names: string[]")]
    pub fn with_forced(&self, env: Env, names: Unknown) -> Result<Request> {
        Ok(Request {
            inner: self
                .inner
                .clone()
                .forced(string_list(&env, &names, "names")?),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Intent, Turn, PendingCall, Verdict
// ---------------------------------------------------------------------------------------------

/// The classification of one query: the intent that gates tools (`name`), every intent that
/// counts (`intents`), the keyword hits that counted and those a negator dropped, whether the
/// fallback was used and whether the query was truncated.
#[napi]
pub struct Intent {
    inner: toolwarden::Intent,
}

#[napi]
impl Intent {
    /// An intent given by name, without a query.
    #[napi(factory, ts_args_type = "name: string")]
    pub fn named(env: Env, name: Unknown) -> Result<Intent> {
        Ok(Intent {
            inner: toolwarden::Intent::named(string_arg(&env, &name, "name")?),
        })
    }

    /// Several intents at once, highest priority first.
    #[napi(factory, ts_args_type = "names: string[]")]
    pub fn union(env: Env, names: Unknown) -> Result<Intent> {
        Ok(Intent {
            inner: toolwarden::Intent::union(string_list(&env, &names, "names")?),
        })
    }

    /// The deciding intent.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name.to_string()
    }

    /// Every intent that counts.
    #[napi(getter)]
    pub fn intents(&self) -> Vec<String> {
        self.inner.intents.iter().map(|s| s.to_string()).collect()
    }

    /// Keyword hits that counted, in query order (`{ keyword, intent, lang, span }`).
    #[napi(getter, ts_return_type = "Array<Record<string, unknown>>")]
    pub fn hits(&self) -> Value {
        serde_json::to_value(&self.inner.hits).unwrap_or(Value::Null)
    }

    /// Keyword hits a negator dropped, in query order (with `negated_by`).
    #[napi(getter, ts_return_type = "Array<Record<string, unknown>>")]
    pub fn dropped(&self) -> Value {
        serde_json::to_value(&self.inner.dropped).unwrap_or(Value::Null)
    }

    /// Whether no keyword counted and the policy's fallback intent was used.
    #[napi(getter)]
    pub fn fallback(&self) -> bool {
        self.inner.fallback
    }

    /// Whether the query was too long and only its start was read.
    #[napi(getter)]
    pub fn truncated(&self) -> bool {
        self.inner.truncated
    }

    /// The intent as a plain object (name, intents, hits, dropped, fallback, truncated).
    #[napi(js_name = "toJSON", ts_return_type = "Record<string, unknown>")]
    pub fn to_json(&self) -> Value {
        serde_json::to_value(&self.inner).unwrap_or(Value::Null)
    }
}

/// What one user turn has executed so far. Keep one per turn and pass it to every `checkCall`
/// of that turn: an allowed transactional call increments `transactionalCalls`, and the
/// policy's `limit transactional N per turn` denies calls beyond N. The count is updated
/// atomically (checked and counted under one lock).
#[napi]
pub struct Turn {
    inner: Mutex<toolwarden::Turn>,
}

impl Turn {
    fn lock(&self) -> MutexGuard<'_, toolwarden::Turn> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[napi]
impl Turn {
    /// A fresh turn (or one that has already run `transactionalCalls` calls). Throws
    /// `TypeError` for anything but a non-negative integer.
    #[napi(constructor, ts_args_type = "transactionalCalls?: number")]
    pub fn new(env: Env, transactional_calls: Option<Unknown>) -> Result<Turn> {
        let count = match transactional_calls.filter(|v| !is_nullish(v)) {
            Some(v) => count_arg(&env, &v, "transactionalCalls")?,
            None => 0,
        };
        Ok(Turn {
            inner: Mutex::new(toolwarden::Turn {
                transactional_calls: count,
            }),
        })
    }

    /// Transactional (non-read-only) calls allowed so far in this turn.
    #[napi(getter)]
    pub fn transactional_calls(&self) -> u32 {
        self.lock().transactional_calls
    }

    /// Sets the count (e.g. restored from a store); `TypeError` for a non-count.
    #[napi(setter, ts_args_type = "value: number")]
    pub fn set_transactional_calls(&self, env: Env, value: Unknown) -> Result<()> {
        let count = count_arg(&env, &value, "transactionalCalls")?;
        self.lock().transactional_calls = count;
        Ok(())
    }

    /// `{ transactional_calls }`.
    #[napi(js_name = "toJSON", ts_return_type = "{ transactional_calls: number }")]
    pub fn to_json(&self) -> Value {
        serde_json::to_value(&*self.lock()).unwrap_or(Value::Null)
    }
}

/// A call held until the user confirms it (`transaction_status == "AWAITING_CONFIRMATION"`).
/// Keep it between turns with `JSON.stringify(pending)` / `PendingCall.fromJSON(text)`, then pass
/// it as `checkCall(..., { pending })` with the confirmed call: the `digest` binds the tool, the
/// arguments (confirmation fields removed) and the policy, so a confirmed call with other
/// arguments is denied.
#[napi]
pub struct PendingCall {
    inner: toolwarden::PendingCall,
}

impl PendingCall {
    fn from_value(value: Value, param: &str) -> Result<PendingCall> {
        serde_json::from_value(value)
            .map(|inner| PendingCall { inner })
            .map_err(|e| invalid(format!("{param} is not a pending call: {e}")))
    }

    /// A `PendingCall` instance, or a plain object of its JSON shape.
    fn from_arg(env: &Env, v: &Unknown<'_>, param: &str) -> Result<toolwarden::PendingCall> {
        if let Some(p) = instance::<PendingCall>(v) {
            return Ok(p.inner.clone());
        }
        let obj = object_arg(env, v, param, "a PendingCall or its JSON object")?;
        let _ = obj;
        Ok(PendingCall::from_value(json_value(env, v, param)?, param)?.inner)
    }
}

#[napi]
impl PendingCall {
    /// A pending call from the JSON text `JSON.stringify(pending)` produced, or from the
    /// parsed object. Throws `Error` for text that is not a pending call.
    #[napi(
        factory,
        js_name = "fromJSON",
        ts_args_type = "text: string | Record<string, unknown>"
    )]
    pub fn from_json(env: Env, text: Unknown) -> Result<PendingCall> {
        if text.get_type()? == ValueType::String {
            let text = string_arg(&env, &text, "text")?;
            let value: Value = toolwarden::parse_args(&text)
                .map_err(|e| invalid(format!("text is not a pending call: {e}")))?;
            PendingCall::from_value(value, "text")
        } else {
            Ok(PendingCall {
                inner: PendingCall::from_arg(&env, &text, "text")?,
            })
        }
    }

    /// The pending call as a plain object: tool, args, digest, transaction_status, policy,
    /// policy_version.
    #[napi(js_name = "toJSON", ts_return_type = "Record<string, unknown>")]
    pub fn to_json(&self) -> Value {
        serde_json::to_value(&self.inner).unwrap_or(Value::Null)
    }

    /// The tool called.
    #[napi(getter)]
    pub fn tool(&self) -> String {
        self.inner.tool.clone()
    }

    /// The arguments, confirmation fields removed.
    #[napi(getter, ts_return_type = "Record<string, unknown>")]
    pub fn args(&self) -> Value {
        Value::Object(self.inner.args.clone())
    }

    /// Hex SHA-256 over the policy name and version, the tool and the canonical arguments.
    #[napi(getter)]
    pub fn digest(&self) -> String {
        self.inner.digest.clone()
    }

    /// Always `"AWAITING_CONFIRMATION"`.
    #[napi(getter)]
    pub fn transaction_status(&self) -> String {
        self.inner.transaction_status.clone()
    }

    /// The name of the policy that asked for confirmation.
    #[napi(getter)]
    pub fn policy(&self) -> String {
        self.inner.policy.clone()
    }

    /// Its version, or `null`.
    #[napi(getter)]
    pub fn policy_version(&self) -> Option<f64> {
        self.inner.policy_version.map(|v| v as f64)
    }
}

/// The answer of `checkCall`: `decision` is `"allow"` (run it with `argsForExecution`),
/// `"confirm"` (ask the user first; `pending` holds the call) or `"deny"` (block it), with the
/// deciding `stage`, a one-sentence `reason` and the rule's `source` (`file:line:col`).
/// `toJSON()` is seed 004's result shape (`{ ok: false, error, metadata: { blocked_by_policy:
/// true, ... } }` for a blocked call), the tool result to hand back to the model.
#[napi]
pub struct Verdict {
    inner: toolwarden::Verdict,
}

#[napi]
impl Verdict {
    /// `"allow"`, `"confirm"` or `"deny"`.
    #[napi(getter, ts_return_type = "'allow' | 'confirm' | 'deny'")]
    pub fn decision(&self) -> &'static str {
        self.inner.decision.as_str()
    }

    /// The tool called.
    #[napi(getter)]
    pub fn tool(&self) -> String {
        self.inner.tool.clone()
    }

    /// The deciding stage (`identity`, `connector`, `tenant`, `role`, `permission`, `mode`,
    /// `intent`, `tenant_arg`, `requires`, `confirmation`, `turn_limit`), or `null` for an
    /// allow.
    #[napi(getter)]
    pub fn stage(&self) -> Option<&'static str> {
        self.inner.stage.map(|s| s.as_str())
    }

    /// Why, in one sentence.
    #[napi(getter)]
    pub fn reason(&self) -> String {
        self.inner.reason.clone()
    }

    /// The tool's effect, when the name resolved to one.
    #[napi(getter)]
    pub fn effect(&self) -> Option<String> {
        self.inner.effect.clone()
    }

    /// `"read_only"` or `"transactional"`, when the effect is known.
    #[napi(getter)]
    pub fn operation_type(&self) -> Option<&'static str> {
        self.inner.operation_type
    }

    /// `file:line:col` of the deciding rule.
    #[napi(getter)]
    pub fn source(&self) -> Option<String> {
        self.inner.source.clone()
    }

    /// On allow: the arguments to execute (confirmation fields removed); otherwise `null`.
    #[napi(getter, ts_return_type = "Record<string, unknown> | null")]
    pub fn args_for_execution(&self) -> Option<Value> {
        self.inner
            .args_for_execution
            .as_ref()
            .map(|m| Value::Object(m.clone()))
    }

    /// On confirm: the call awaiting confirmation; otherwise `null`.
    #[napi(getter)]
    pub fn pending(&self) -> Option<PendingCall> {
        self.inner
            .pending
            .clone()
            .map(|inner| PendingCall { inner })
    }

    /// On a `requires` deny: the missing argument names.
    #[napi(getter)]
    pub fn missing(&self) -> Vec<String> {
        self.inner.missing.clone()
    }

    /// The argument rules that fired, in evaluation order; empty when none fired.
    #[napi(getter)]
    pub fn rules(&self) -> Vec<FiredRule> {
        self.inner.rules.iter().map(FiredRule::from).collect()
    }

    /// Whether the call carried a confirmation field set to the literal `true`.
    #[napi(getter)]
    pub fn confirmation_received(&self) -> bool {
        self.inner.confirmation_received
    }

    /// Whether the call may run now.
    #[napi(getter)]
    pub fn is_allowed(&self) -> bool {
        self.inner.is_allowed()
    }

    /// Whether the call waits for the user's confirmation (then `pending` is set).
    #[napi(getter)]
    pub fn needs_confirmation(&self) -> bool {
        self.inner.needs_confirmation()
    }

    /// Whether the call is blocked.
    #[napi(getter)]
    pub fn is_denied(&self) -> bool {
        self.inner.is_denied()
    }

    /// The result in seed 004's shape.
    #[napi(js_name = "toJSON", ts_return_type = "Record<string, unknown>")]
    pub fn to_json(&self) -> Value {
        self.inner.to_json()
    }
}

/// The `(text, name)` arguments of `parse` (`name` defaults to `"<string>"`).
fn text_args(env: &Env, text: &Unknown<'_>, name: Option<Unknown<'_>>) -> Result<(String, String)> {
    let text = string_arg(env, text, "text")?;
    let name = match name.filter(|n| !is_nullish(n)) {
        Some(n) => string_arg(env, &n, "name")?,
        None => "<string>".to_string(),
    };
    Ok((text, name))
}

/// The `(path, legacy)` arguments of `fromYaml`.
fn yaml_args(
    env: &Env,
    path: &Unknown<'_>,
    legacy: Option<Unknown<'_>>,
) -> Result<(String, Option<String>)> {
    let path = string_arg(env, path, "path")?;
    let legacy = match legacy.filter(|n| !is_nullish(n)) {
        Some(l) => Some(string_arg(env, &l, "legacy")?),
        None => None,
    };
    Ok((path, legacy))
}

// ---------------------------------------------------------------------------------------------
// Loading on the thread pool
// ---------------------------------------------------------------------------------------------

/// What an asynchronous load reads: a `.warden` file, policy text, or seed 004's YAML.
enum LoadSource {
    File(String),
    Text {
        text: String,
        name: String,
    },
    Yaml {
        path: String,
        legacy: Option<String>,
    },
}

/// Reads, checks and compiles a policy on the libuv thread pool (`Policy.fromFileAsync`,
/// `Policy.parseAsync`, `Policy.fromYamlAsync`): the event loop keeps running while a large
/// policy loads. The promise resolves to the `Policy`, or rejects with the `PolicyError` the
/// synchronous loader would throw.
pub struct LoadPolicy {
    source: LoadSource,
}

impl Task for LoadPolicy {
    type Output = std::result::Result<toolwarden::Policy, toolwarden::PolicyError>;
    type JsValue = Policy;

    fn compute(&mut self) -> Result<Self::Output> {
        Ok(match &self.source {
            LoadSource::File(path) => toolwarden::Policy::from_file(path),
            LoadSource::Text { text, name } => toolwarden::Policy::parse(text, name),
            LoadSource::Yaml { path, legacy } => toolwarden::Policy::from_yaml(
                std::path::Path::new(path),
                legacy.as_deref().map(std::path::Path::new),
            ),
        })
    }

    fn resolve(&mut self, env: Env, output: Self::Output) -> Result<Policy> {
        output
            .map(|inner| Policy { inner })
            .map_err(|e| policy_rejection(&env, e))
    }
}

// ---------------------------------------------------------------------------------------------
// ToolSet, PolicyWatcher, Policy
// ---------------------------------------------------------------------------------------------

/// A prepared tool set: names (or schemas' names and MCP annotations) read once, offered on
/// every turn without converting them again. Made by `policy.tools(items)`; holds the items
/// themselves in `items`, so `offer` returns them.
#[napi]
pub struct ToolSet {
    inner: toolwarden::ToolSet,
}

#[napi]
impl ToolSet {
    /// A set of tool names. Throws `TypeError` for anything but an array of strings.
    #[napi(writable, configurable, factory, ts_args_type = "names: string[]")]
    pub fn from_names(env: Env, names: Unknown) -> Result<ToolSet> {
        Ok(ToolSet {
            inner: toolwarden::ToolSet::from_names(string_list(&env, &names, "names")?),
        })
    }

    /// A set of tool names and/or tool schema objects (OpenAI, Anthropic, MCP). Throws
    /// `TypeError` for a wrong type, `Error` for a schema without a name.
    #[napi(
        writable,
        configurable,
        factory,
        ts_args_type = "tools: Array<string | Record<string, unknown>>"
    )]
    pub fn from_schemas(env: Env, tools: Unknown) -> Result<ToolSet> {
        let schemas = schema_list(&env, &tools, "tools")?;
        toolwarden::ToolSet::from_schemas(&schemas)
            .map(|inner| ToolSet { inner })
            .map_err(|e| schema_error(&env, e, "tools"))
    }

    /// How many tools the set holds.
    #[napi(getter)]
    pub fn size(&self) -> u32 {
        u32::try_from(self.inner.len()).unwrap_or(u32::MAX)
    }

    /// The tool names, in order.
    #[napi(getter)]
    pub fn names(&self) -> Vec<String> {
        self.inner.names().map(str::to_string).collect()
    }
}

/// Keeps the policy at a path loaded and reloads it when the file or one of its includes
/// changes (or on `reloadNow()`). A broken edit never replaces the good policy: it is rejected,
/// counted in `rejected`, and its report kept in `lastError`; `policy()` keeps returning the
/// last good one.
#[napi]
pub struct PolicyWatcher {
    inner: toolwarden::watch::PolicyWatcher,
    last_error: Arc<Mutex<Option<String>>>,
}

#[napi]
impl PolicyWatcher {
    /// The policy served now (the last one that loaded).
    #[napi]
    pub fn policy(&self) -> Policy {
        Policy {
            inner: self.inner.policy(),
        }
    }

    /// 1 after the first load, +1 per reload that changed the policy text.
    #[napi(getter)]
    pub fn generation(&self) -> f64 {
        self.inner.generation() as f64
    }

    /// How many edits were rejected because they did not load.
    #[napi(getter)]
    pub fn rejected(&self) -> f64 {
        self.inner.rejected() as f64
    }

    /// The rendered report of the last rejected edit, or `null` after a successful reload.
    #[napi(getter)]
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|e| e.clone())
    }

    /// Reloads now; returns the generation served afterwards. Throws `PolicyError` when the
    /// text has errors (the previous policy stays served).
    #[napi]
    pub fn reload_now(&self, env: Env) -> Result<f64> {
        self.inner
            .reload_now()
            .map(|g| g as f64)
            .map_err(|e| policy_error(&env, e))
    }
}

/// A compiled, immutable policy. Load with `Policy.fromFile(path)`, `Policy.parse(text, name)`
/// or `Policy.fromYaml(path, legacy)`; share one instance across every async call.
#[napi]
pub struct Policy {
    inner: toolwarden::Policy,
}

#[napi]
impl Policy {
    /// Reads, checks and compiles the `.warden` policy at `path`, following its `include`s.
    /// Throws `PolicyError` with every diagnostic.
    #[napi(writable, configurable, factory, ts_args_type = "path: string")]
    pub fn from_file(env: Env, path: Unknown) -> Result<Policy> {
        let path = string_arg(&env, &path, "path")?;
        toolwarden::Policy::from_file(&path)
            .map(|inner| Policy { inner })
            .map_err(|e| policy_error(&env, e))
    }

    /// `fromFile` on the libuv thread pool: a promise of the `Policy`, rejected with
    /// `PolicyError` (every diagnostic) when it does not load. A wrong type throws `TypeError`
    /// before anything is read (the package turns it into a rejection).
    #[napi(
        writable,
        configurable,
        ts_args_type = "path: string",
        ts_return_type = "Promise<Policy>"
    )]
    pub fn from_file_async(env: Env, path: Unknown) -> Result<AsyncTask<LoadPolicy>> {
        let path = string_arg(&env, &path, "path")?;
        Ok(AsyncTask::new(LoadPolicy {
            source: LoadSource::File(path),
        }))
    }

    /// Checks and compiles policy text; `name` (default `"<string>"`) labels diagnostics and
    /// anchors `include`s. Throws `PolicyError`.
    #[napi(
        writable,
        configurable,
        factory,
        ts_args_type = "text: string, name?: string"
    )]
    pub fn parse(env: Env, text: Unknown, name: Option<Unknown>) -> Result<Policy> {
        let (text, name) = text_args(&env, &text, name)?;
        toolwarden::Policy::parse(&text, &name)
            .map(|inner| Policy { inner })
            .map_err(|e| policy_error(&env, e))
    }

    /// `parse` on the libuv thread pool: a promise of the `Policy`, rejected with
    /// `PolicyError`. The text is copied once, into the task.
    #[napi(
        writable,
        configurable,
        ts_args_type = "text: string, name?: string",
        ts_return_type = "Promise<Policy>"
    )]
    pub fn parse_async(
        env: Env,
        text: Unknown,
        name: Option<Unknown>,
    ) -> Result<AsyncTask<LoadPolicy>> {
        let (text, name) = text_args(&env, &text, name)?;
        Ok(AsyncTask::new(LoadPolicy {
            source: LoadSource::Text { text, name },
        }))
    }

    /// Loads seed 004's `tool_policies.yaml` at `path`, with the legacy `tools.yaml` catalog
    /// `legacy` as fallback. YAML problems are diagnostics at the YAML's `file:line:col`.
    /// Throws `PolicyError`.
    #[napi(
        writable,
        configurable,
        factory,
        ts_args_type = "path: string, legacy?: string"
    )]
    pub fn from_yaml(env: Env, path: Unknown, legacy: Option<Unknown>) -> Result<Policy> {
        let (path, legacy) = yaml_args(&env, &path, legacy)?;
        toolwarden::Policy::from_yaml(
            std::path::Path::new(&path),
            legacy.as_deref().map(std::path::Path::new),
        )
        .map(|inner| Policy { inner })
        .map_err(|e| policy_error(&env, e))
    }

    /// `fromYaml` on the libuv thread pool: a promise of the `Policy`, rejected with
    /// `PolicyError`.
    #[napi(
        writable,
        configurable,
        ts_args_type = "path: string, legacy?: string",
        ts_return_type = "Promise<Policy>"
    )]
    pub fn from_yaml_async(
        env: Env,
        path: Unknown,
        legacy: Option<Unknown>,
    ) -> Result<AsyncTask<LoadPolicy>> {
        let (path, legacy) = yaml_args(&env, &path, legacy)?;
        Ok(AsyncTask::new(LoadPolicy {
            source: LoadSource::Yaml { path, legacy },
        }))
    }

    /// Loads the policy at `path` and keeps it current (`{ watch: false }`: only on
    /// `reloadNow()`). Throws `PolicyError` when the first load fails.
    #[napi(
        writable,
        configurable,
        ts_args_type = "path: string, options?: { watch?: boolean }"
    )]
    pub fn watch(env: Env, path: Unknown, options: Option<Unknown>) -> Result<PolicyWatcher> {
        let path = string_arg(&env, &path, "path")?;
        let opts = options_arg(&env, options, "options")?;
        let watch = match opt_field(&opts, "watch")? {
            Some(w) if w.get_type()? == ValueType::Boolean => {
                // SAFETY: the type was just checked.
                unsafe { w.cast::<bool>() }?
            }
            Some(w) => {
                return Err(type_error(
                    &env,
                    format!("watch must be a boolean, not {}", type_name(&w)),
                ))
            }
            None => true,
        };
        let last_error = Arc::new(Mutex::new(None));
        let sink = Arc::clone(&last_error);
        let on_reload = move |event: &toolwarden::watch::ReloadEvent| {
            if let Ok(mut slot) = sink.lock() {
                *slot = match event {
                    toolwarden::watch::ReloadEvent::Rejected { error, .. } => {
                        Some(error.render().trim_end().to_string())
                    }
                    toolwarden::watch::ReloadEvent::Reloaded { .. } => None,
                };
            }
        };
        let made = if watch {
            toolwarden::watch::PolicyWatcher::new(&path, on_reload)
        } else {
            toolwarden::watch::PolicyWatcher::unwatched(&path, on_reload)
        };
        match made {
            Ok(inner) => Ok(PolicyWatcher { inner, last_error }),
            Err(toolwarden::watch::WatchError::Load(e)) => Err(policy_error(&env, e)),
            Err(other) => Err(Error::new(Status::GenericFailure, other.to_string())),
        }
    }

    /// The name from the `policy` declaration.
    #[napi(getter)]
    pub fn name(&self) -> String {
        self.inner.name().to_string()
    }

    /// The version from the `policy` declaration, or `null`.
    #[napi(getter)]
    pub fn version(&self) -> Option<f64> {
        self.inner.version().map(|v| v as f64)
    }

    /// The warnings found while loading (the policy loaded despite them).
    #[napi(getter)]
    pub fn warnings(&self) -> Vec<Diagnostic> {
        self.inner
            .warnings()
            .iter()
            .map(|d| Diagnostic::new(d, self.inner.sources()))
            .collect()
    }

    /// The declared effects, in order.
    #[napi(getter)]
    pub fn effects(&self) -> Vec<String> {
        self.inner.effects().map(str::to_string).collect()
    }

    /// The declared intents, highest priority first.
    #[napi(getter)]
    pub fn intents(&self) -> Vec<String> {
        self.inner.intents().map(str::to_string).collect()
    }

    /// The declared modes.
    #[napi(getter)]
    pub fn modes(&self) -> Vec<String> {
        self.inner.modes().map(str::to_string).collect()
    }

    /// The `default mode`, or `null`.
    #[napi(getter)]
    pub fn default_mode(&self) -> Option<String> {
        self.inner.default_mode().map(str::to_string)
    }

    /// The declared tool names.
    #[napi(getter)]
    pub fn tool_names(&self) -> Vec<String> {
        self.inner.tools().map(str::to_string).collect()
    }

    /// The declared roles.
    #[napi(getter)]
    pub fn roles(&self) -> Vec<String> {
        self.inner.roles().map(str::to_string).collect()
    }

    /// The declared permissions.
    #[napi(getter)]
    pub fn permissions(&self) -> Vec<String> {
        self.inner.permissions().map(str::to_string).collect()
    }

    /// The declared connector tiers.
    #[napi(getter)]
    pub fn tiers(&self) -> Vec<String> {
        self.inner.tiers().map(str::to_string).collect()
    }

    /// The argument names that carry a confirmation (`confirm fields`), in order.
    #[napi(getter)]
    pub fn confirm_fields(&self) -> Vec<String> {
        self.inner.confirm_fields().map(str::to_string).collect()
    }

    /// Classifies a user query into the intent that gates tools.
    #[napi(ts_args_type = "text: string")]
    pub fn classify(&self, env: Env, text: Unknown) -> Result<Intent> {
        let text = string_arg(&env, &text, "text")?;
        Ok(Intent {
            inner: self.inner.classify(&text),
        })
    }

    /// Writes the indexes of the visible tools (decision `allow` or `confirm`) of `tools`, an
    /// array of names or a `ToolSet`, into `out` in input order and returns how many; the
    /// intent from `query` or `intent`. The package's `offer` maps them to the tools (and reads
    /// its options object in JS, so the call crosses into Rust once, with plain arguments).
    #[napi(
        ts_args_type = "request: Request, tools: string[] | ToolSet, query: string | undefined | null, intent: Intent | string | string[] | undefined | null, out: Uint32Array"
    )]
    pub fn offer_indices(
        &self,
        env: Env,
        request: Unknown,
        tools: Unknown,
        query: Option<Unknown>,
        intent: Option<Unknown>,
        mut out: Uint32ArraySlice,
    ) -> Result<u32> {
        let request = request_arg(&env, &request)?;
        let source = IntentSource::from_values(&env, query, intent)?;
        let intent = source.resolve(&self.inner);
        if let Some(set) = instance::<ToolSet>(&tools) {
            let offer = self
                .inner
                .offer_set(&request.inner, &intent, &set.inner)
                .map_err(|e| request_error(&env, e))?;
            return write_indices(&mut out, offer.visible_indices());
        }
        let names = string_list(&env, &tools, "tools")?;
        let offer = self
            .inner
            .offer(&request.inner, &intent, names.iter().map(String::as_str))
            .map_err(|e| request_error(&env, e))?;
        write_indices(&mut out, offer.visible_indices())
    }

    /// `offerIndices` for names and/or OpenAI, Anthropic, MCP tool schema objects (or a
    /// `ToolSet`); MCP annotations only tighten.
    #[napi(
        ts_args_type = "request: Request, tools: Array<string | Record<string, unknown>> | ToolSet, query: string | undefined | null, intent: Intent | string | string[] | undefined | null, out: Uint32Array"
    )]
    pub fn offer_schema_indices(
        &self,
        env: Env,
        request: Unknown,
        tools: Unknown,
        query: Option<Unknown>,
        intent: Option<Unknown>,
        mut out: Uint32ArraySlice,
    ) -> Result<u32> {
        let request = request_arg(&env, &request)?;
        let source = IntentSource::from_values(&env, query, intent)?;
        if let Some(set) = instance::<ToolSet>(&tools) {
            let intent = source.resolve(&self.inner);
            let offer = self
                .inner
                .offer_set(&request.inner, &intent, &set.inner)
                .map_err(|e| request_error(&env, e))?;
            return write_indices(&mut out, offer.visible_indices());
        }
        let schemas = schema_list(&env, &tools, "tools")?;
        let intent = source.resolve(&self.inner);
        let decisions = self
            .inner
            .schema_decisions(&request.inner, &intent, &schemas)
            .map_err(|e| schema_error(&env, e, "tools"))?;
        write_indices(
            &mut out,
            decisions
                .iter()
                .filter(|d| d.decision.decision != toolwarden::Decision::Deny)
                .map(|d| d.index),
        )
    }

    /// Why one tool is shown or hidden, decided exactly as `offer` decides it.
    #[napi(
        ts_args_type = "request: Request, tool: string, options?: { query?: string; intent?: Intent | string | string[] }"
    )]
    pub fn explain(
        &self,
        env: Env,
        request: Unknown,
        tool: Unknown,
        options: Option<Unknown>,
    ) -> Result<Explanation> {
        let request = request_arg(&env, &request)?;
        let tool = string_arg(&env, &tool, "tool")?;
        let opts = options_arg(&env, options, "options")?;
        let source = IntentSource::from_options(&env, &opts)?;
        let intent = source.resolve(&self.inner);
        let d = self
            .inner
            .decide_tool(&request.inner, &intent, &tool)
            .map_err(|e| request_error(&env, e))?;
        let reason = self.inner.reason(&tool, &d, &request.inner);
        let source = self.inner.rule_source(d.rule).map(|l| l.to_string());
        Ok(Explanation {
            tool,
            decision: d.decision.as_str().to_string(),
            stage: d.stage.map(|s| s.as_str().to_string()),
            reason,
            source,
        })
    }

    /// Judges one tool call the model made: stages 1–7 as in `offer`, then the tenant
    /// argument, required arguments, confirmation and the per-turn limit. `args` is an object
    /// or the JSON text the model produced (parsed strictly). `turn` counts this turn's
    /// transactional calls (updated in place); `pending` (a `PendingCall` or its JSON object)
    /// is the call awaiting the user's confirmation.
    ///
    /// `strict: true` (the default): a confirmation is trusted only against `pending`, so a
    /// call that needs confirmation and carries a confirmation field while no call is pending
    /// is denied: the model cannot confirm its own call. `strict: false` trusts a literal
    /// `true` confirmation field without a pending call.
    #[napi(
        ts_args_type = "request: Request, tool: string, args: Record<string, unknown> | string, options?: { turn?: Turn; pending?: PendingCall | Record<string, unknown> | null; query?: string; intent?: Intent | string | string[]; strict?: boolean }"
    )]
    pub fn check_call(
        &self,
        env: Env,
        request: Unknown,
        tool: Unknown,
        args: Unknown,
        options: Option<Unknown>,
    ) -> Result<Verdict> {
        let request = request_arg(&env, &request)?;
        let tool = string_arg(&env, &tool, "tool")?;
        let args = args_value(&env, &args)?;
        let opts = options_arg(&env, options, "options")?;
        let source = IntentSource::from_options(&env, &opts)?;
        let turn = match opt_field(&opts, "turn")? {
            Some(t) => Some(instance::<Turn>(&t).ok_or_else(|| {
                type_error(&env, format!("turn must be a Turn, not {}", type_name(&t)))
            })?),
            None => None,
        };
        let pending = match opt_field(&opts, "pending")? {
            Some(p) => Some(PendingCall::from_arg(&env, &p, "pending")?),
            None => None,
        };
        let strict = match opt_field(&opts, "strict")? {
            Some(s) if s.get_type()? == ValueType::Boolean => {
                // SAFETY: the type was just checked.
                unsafe { s.cast::<bool>() }?
            }
            Some(s) => {
                return Err(type_error(
                    &env,
                    format!("strict must be a boolean, not {}", type_name(&s)),
                ))
            }
            None => true,
        };
        let intent = source.resolve(&self.inner);
        let mut fresh = toolwarden::Turn::new();
        let mut locked = turn.as_ref().map(|t| t.lock());
        let state = match locked.as_deref_mut() {
            Some(state) => state,
            None => &mut fresh,
        };
        let verdict = if strict {
            self.inner.check_call_strict(
                &request.inner,
                &intent,
                state,
                &tool,
                &args,
                pending.as_ref(),
            )
        } else {
            self.inner.check_call_with(
                &request.inner,
                &intent,
                state,
                &tool,
                &args,
                pending.as_ref(),
            )
        }
        .map_err(|e| request_error(&env, e))?;
        Ok(Verdict { inner: verdict })
    }

    /// `args` (an object or JSON text) as a new object without the policy's confirmation
    /// fields: judge the model's own call with it before deciding whether to ask the user, so
    /// a model that writes `"confirmed": true` itself still reaches the human.
    #[napi(
        ts_args_type = "args: Record<string, unknown> | string",
        ts_return_type = "Record<string, unknown>"
    )]
    pub fn strip_confirmation(&self, env: Env, args: Unknown) -> Result<Value> {
        match self.inner.strip_confirmation(&args_value(&env, &args)?) {
            Value::Object(map) => Ok(Value::Object(map)),
            _ => Err(invalid("args must be a JSON object")),
        }
    }
}
