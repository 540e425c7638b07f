//! Python bindings for toolwarden (`import toolwarden`), built with PyO3 and maturin.
//!
//! The extension module is `toolwarden._toolwarden`; the pure-Python package `toolwarden`
//! (python/toolwarden/__init__.py) re-exports it. Every class wraps the Rust type of the same
//! name. Policies are immutable (`#[pyclass(frozen)]`, an `Arc` inside) and shared across threads;
//! loading, classification, `offer` and `check_call` run with the GIL released.
//!
//! Bad input never panics: wrong types raise `TypeError` naming the parameter, bad values raise
//! `ValueError` (a tool schema without a name, arguments that are not JSON), a request the policy
//! cannot judge raises `RequestError` (a `ValueError`), a policy that fails to load raises
//! `PolicyError` carrying every diagnostic.

use std::borrow::Cow;
use std::path::PathBuf;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

create_exception!(
    toolwarden,
    PolicyError,
    PyException,
    "A policy failed to load. `str(err)` is the rendered report (file:line:col, the source \
     line, a caret, the message and the help, then a summary line); `err.diagnostics` is the \
     list of `Diagnostic`s (errors and warnings)."
);
create_exception!(
    toolwarden,
    RequestError,
    PyValueError,
    "The request names a mode, connector tier or intent the policy does not declare, or gives \
     no mode when the policy has no `default mode`."
);

/// Deepest nesting accepted when converting Python values to JSON (the guard's own cap is 64;
/// a deeper or self-referencing container is refused before it could exhaust the stack).
const MAX_DEPTH: usize = 64;

// ---------------------------------------------------------------------------------------------
// Conversions
// ---------------------------------------------------------------------------------------------

/// `"<param> must be <expected>, not <type>"` as a `TypeError`.
fn type_error(param: &str, expected: &str, got: &Bound<'_, PyAny>) -> PyErr {
    let ty = got
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".to_string());
    PyTypeError::new_err(format!("{param} must be {expected}, not {ty}"))
}

/// A Python value as JSON: `None`, `bool`, `int` (64-bit), finite `float`, `str`, `dict` with
/// `str` keys, `list` or `tuple`. Errors name `path` (the parameter and the place inside it).
fn py_to_json(obj: &Bound<'_, PyAny>, path: &str, depth: usize) -> PyResult<Value> {
    if depth > MAX_DEPTH {
        return Err(PyValueError::new_err(format!(
            "{path} is nested deeper than {MAX_DEPTH} levels (or contains itself)"
        )));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.downcast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Err(PyValueError::new_err(format!(
            "{path} is an integer outside the 64-bit range JSON arguments support"
        )));
    }
    if let Ok(f) = obj.downcast::<PyFloat>() {
        return Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| PyValueError::new_err(format!("{path} is not a finite number")));
    }
    if let Ok(s) = obj.downcast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if let Ok(d) = obj.downcast::<PyDict>() {
        let mut map = Map::with_capacity(d.len());
        for (k, v) in d.iter() {
            let key = match k.downcast::<PyString>() {
                Ok(s) => s.to_cow()?.into_owned(),
                Err(_) => return Err(type_error(&format!("{path} keys"), "str", &k)),
            };
            let inner = format!("{path}[{key:?}]");
            let value = py_to_json(&v, &inner, depth + 1)?;
            map.insert(key, value);
        }
        return Ok(Value::Object(map));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for (i, item) in obj.try_iter()?.enumerate() {
            out.push(py_to_json(&item?, &format!("{path}[{i}]"), depth + 1)?);
        }
        return Ok(Value::Array(out));
    }
    Err(type_error(
        path,
        "a JSON value (None, bool, int, float, str, list, tuple or dict)",
        obj,
    ))
}

/// A JSON value as Python objects (`dict`, `list`, `str`, `int`, `float`, `bool`, `None`).
fn json_to_py(py: Python<'_>, value: &Value) -> PyResult<PyObject> {
    Ok(match value {
        Value::Null => py.None(),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any().unbind(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any().unbind()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any().unbind()
            } else {
                PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN))
                    .into_any()
                    .unbind()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any().unbind(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(json_to_py(py, item)?)?;
            }
            list.into_any().unbind()
        }
        Value::Object(map) => map_to_py(py, map)?.into_any().unbind(),
    })
}

/// A JSON object as a Python `dict`.
fn map_to_py<'py>(py: Python<'py>, map: &Map<String, Value>) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (k, v) in map {
        dict.set_item(k, json_to_py(py, v)?)?;
    }
    Ok(dict)
}

extern "C" {
    // Part of the stable ABI since 3.10 and exported by every CPython 3 (so by 3.9 too); pyo3
    // only declares it for non-abi3 or 3.10+ builds, hence this declaration.
    fn PyUnicode_AsUTF8AndSize(
        unicode: *mut pyo3::ffi::PyObject,
        size: *mut pyo3::ffi::Py_ssize_t,
    ) -> *const std::os::raw::c_char;
}

/// The UTF-8 text of a Python `str`, borrowed without copying: CPython caches the UTF-8 form in
/// the string object, which `s` keeps alive for the borrow. A string with lone surrogates
/// (not encodable as UTF-8) raises `UnicodeEncodeError`.
fn borrow_str<'a>(s: &'a Bound<'_, PyString>) -> PyResult<&'a str> {
    let mut size: pyo3::ffi::Py_ssize_t = 0;
    // SAFETY: `s` is a live `str` (the GIL is held: `Bound` proves it); the returned buffer is
    // owned by that object and immutable, valid while `s` lives, and `size` bytes of UTF-8.
    unsafe {
        let data = PyUnicode_AsUTF8AndSize(s.as_ptr(), &mut size);
        if data.is_null() {
            return Err(PyErr::fetch(s.py()));
        }
        let len = usize::try_from(size).unwrap_or(0);
        let bytes = std::slice::from_raw_parts(data.cast::<u8>(), len);
        Ok(std::str::from_utf8_unchecked(bytes))
    }
}

/// The parts of a tool schema dict a decision reads, as JSON: `type`, `name`, `annotations`
/// and `function.name` (see `toolwarden::schema_name`). The rest (descriptions, parameter
/// schemas) is never converted, so `offer` over schemas costs little more than over names.
fn schema_keys(obj: &Bound<'_, PyAny>, path: &str) -> PyResult<Value> {
    let py = obj.py();
    let dict = obj.downcast::<PyDict>()?;
    let mut out = Map::new();
    let keys = [
        ("type", intern!(py, "type")),
        ("name", intern!(py, "name")),
        ("annotations", intern!(py, "annotations")),
    ];
    for (key, interned) in keys {
        if let Some(v) = dict.get_item(interned)? {
            out.insert(
                key.to_string(),
                py_to_json(&v, &format!("{path}[{key:?}]"), 1)?,
            );
        }
    }
    if let Some(f) = dict.get_item(intern!(py, "function"))? {
        let function = match f.downcast::<PyDict>() {
            Ok(fd) => {
                let mut m = Map::new();
                if let Some(name) = fd.get_item(intern!(py, "name"))? {
                    let inner = format!("{path}[\"function\"][\"name\"]");
                    m.insert("name".to_string(), py_to_json(&name, &inner, 2)?);
                }
                Value::Object(m)
            }
            Err(_) => Value::Null,
        };
        out.insert("function".to_string(), function);
    }
    Ok(Value::Object(out))
}

/// Call arguments: a dict, or the JSON text a model produced (parsed strictly: duplicate keys
/// and deep nesting are refused).
fn args_value(args: &Bound<'_, PyAny>) -> PyResult<Value> {
    if args.is_instance_of::<PyDict>() {
        py_to_json(args, "args", 0)
    } else if args.is_instance_of::<PyString>() {
        let text = extract_str(args, "args")?;
        toolwarden::parse_args(&text).map_err(|e| PyValueError::new_err(format!("args: {e}")))
    } else {
        Err(type_error("args", "a dict or JSON text (str)", args))
    }
}

/// A `str` parameter, or a `TypeError` naming it.
fn extract_str(obj: &Bound<'_, PyAny>, param: &str) -> PyResult<String> {
    match obj.downcast::<PyString>() {
        Ok(s) => Ok(s.to_cow()?.into_owned()),
        Err(_) => Err(type_error(param, "str", obj)),
    }
}

/// A list (or other iterable) of `str`; a bare `str` is refused (it would iterate characters).
fn extract_str_list(obj: &Bound<'_, PyAny>, param: &str) -> PyResult<Vec<String>> {
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{param} must be a list of str, not a single str (write [{:?}])",
            obj.downcast::<PyString>()?.to_cow()?
        )));
    }
    let iter = obj
        .try_iter()
        .map_err(|_| type_error(param, "a list of str", obj))?;
    let mut out = Vec::new();
    for (i, item) in iter.enumerate() {
        let item = item?;
        out.push(extract_str(&item, &format!("{param}[{i}]"))?);
    }
    Ok(out)
}

fn request_error(e: toolwarden::RequestError) -> PyErr {
    RequestError::new_err(e.to_string())
}

/// A `toolwarden::PolicyError` as `toolwarden.PolicyError` with `.diagnostics` set.
fn policy_error(py: Python<'_>, e: toolwarden::PolicyError) -> PyErr {
    let err = PolicyError::new_err(e.render().trim_end().to_string());
    let diagnostics: Vec<Diagnostic> = e
        .diagnostics()
        .iter()
        .map(|d| Diagnostic::new(d, e.sources()))
        .collect();
    let set =
        PyList::new(py, diagnostics).and_then(|list| err.value(py).setattr("diagnostics", list));
    match set {
        Ok(()) => err,
        Err(other) => other,
    }
}

// ---------------------------------------------------------------------------------------------
// Diagnostic
// ---------------------------------------------------------------------------------------------

/// One message about policy text: where (`file`, `line`, `column`, 1-based; `None` when the
/// problem has no place, like an unreadable file), what (`message`, `code`, `severity`) and what
/// to write instead (`help`). `str(d)` is the rendered report with the source line and a caret.
#[pyclass(frozen, module = "toolwarden", name = "Diagnostic")]
struct Diagnostic {
    /// `"error"` or `"warning"`.
    #[pyo3(get)]
    severity: String,
    /// A stable kebab-case code such as `"undefined-effect"`.
    #[pyo3(get)]
    code: String,
    /// The message.
    #[pyo3(get)]
    message: String,
    /// The file the diagnostic points into, or `None`.
    #[pyo3(get)]
    file: Option<String>,
    /// The 1-based line, or `None`.
    #[pyo3(get)]
    line: Option<usize>,
    /// The 1-based column (in characters), or `None`.
    #[pyo3(get)]
    column: Option<usize>,
    /// The source text the diagnostic is about, or `None`.
    #[pyo3(get)]
    text: Option<String>,
    /// What to write instead, or `None`.
    #[pyo3(get)]
    help: Option<String>,
    /// Further notes (other places involved), as text.
    #[pyo3(get)]
    notes: Vec<String>,
    /// The rendered multi-line report.
    #[pyo3(get)]
    rendered: String,
}

impl Diagnostic {
    fn new(d: &toolwarden::Diagnostic, sources: &toolwarden::Sources) -> Diagnostic {
        let j = d.to_json(sources);
        let s = |k: &str| j.get(k).and_then(Value::as_str).map(str::to_string);
        let n = |k: &str| j.get(k).and_then(Value::as_u64).map(|v| v as usize);
        Diagnostic {
            severity: s("severity").unwrap_or_default(),
            code: d.code().to_string(),
            message: d.message().to_string(),
            file: s("file"),
            line: n("line"),
            column: n("column"),
            text: s("text"),
            help: d.help_text().map(str::to_string),
            notes: j
                .get("notes")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            rendered: d.render(sources),
        }
    }
}

#[pymethods]
impl Diagnostic {
    /// The diagnostic as a dict: severity, code, message, file, line, column, text, help, notes.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("severity", &self.severity)?;
        d.set_item("code", &self.code)?;
        d.set_item("message", &self.message)?;
        d.set_item("file", &self.file)?;
        d.set_item("line", self.line)?;
        d.set_item("column", self.column)?;
        d.set_item("text", &self.text)?;
        d.set_item("help", &self.help)?;
        d.set_item("notes", &self.notes)?;
        Ok(d)
    }

    fn __str__(&self) -> String {
        self.rendered.clone()
    }

    fn __repr__(&self) -> String {
        match (&self.file, self.line, self.column) {
            (Some(f), Some(l), Some(c)) => format!(
                "<Diagnostic {} {} at {f}:{l}:{c}: {:?}>",
                self.severity, self.code, self.message
            ),
            _ => format!(
                "<Diagnostic {} {}: {:?}>",
                self.severity, self.code, self.message
            ),
        }
    }
}

/// The tool name of an object `offer` shows: a name (`str`) or a schema dict (OpenAI's
/// `function.name`, else `name`).
fn offered_name(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = obj.downcast::<PyString>() {
        return Ok(borrow_str(s)?.to_string());
    }
    let schema = schema_keys(obj, "tools")?;
    toolwarden::schema_name(&schema)
        .map(str::to_string)
        .map_err(|e| PyValueError::new_err(format!("tools: {e}")))
}

// ---------------------------------------------------------------------------------------------
// Request, Intent, Turn, PendingCall
// ---------------------------------------------------------------------------------------------

/// Who is asking, in which mode. Keyword-only:
/// `Request(mode="supervised", roles=["accountant"], permissions=["invoices.view"],
/// tenant="b-42", connectors={"session": ["github"], "task": None}, forced=["delete_invoice"])`.
///
/// `mode=None` uses the policy's `default mode`. Unknown roles and permissions grant nothing.
/// In `connectors`, a tier mapped to a list is an allowlist of servers (`[]` means zero
/// connectors, never "unrestricted"); a tier mapped to `None` is left unset. `forced` names are
/// exempt from the intent stage (seed 001's `force_tool_names`, e.g. a confirmation in flight).
#[pyclass(frozen, eq, module = "toolwarden", name = "Request")]
#[derive(PartialEq)]
struct Request {
    inner: toolwarden::Request,
}

#[pymethods]
impl Request {
    #[new]
    #[pyo3(signature = (*, mode=None, roles=None, permissions=None, tenant=None, connectors=None, forced=None, context=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        mode: Option<&Bound<'_, PyAny>>,
        roles: Option<&Bound<'_, PyAny>>,
        permissions: Option<&Bound<'_, PyAny>>,
        tenant: Option<&Bound<'_, PyAny>>,
        connectors: Option<&Bound<'_, PyAny>>,
        forced: Option<&Bound<'_, PyAny>>,
        context: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Request> {
        let mut r = match mode {
            Some(m) if !m.is_none() => toolwarden::Request::new(extract_str(m, "mode")?),
            _ => toolwarden::Request::default_mode(),
        };
        if let Some(v) = roles.filter(|v| !v.is_none()) {
            r = r.roles(extract_str_list(v, "roles")?);
        }
        if let Some(v) = permissions.filter(|v| !v.is_none()) {
            r = r.permissions(extract_str_list(v, "permissions")?);
        }
        if let Some(v) = tenant.filter(|v| !v.is_none()) {
            r = r.tenant(extract_str(v, "tenant")?);
        }
        if let Some(v) = connectors.filter(|v| !v.is_none()) {
            let d = v.downcast::<PyDict>().map_err(|_| {
                type_error("connectors", "a dict of tier -> list of servers or None", v)
            })?;
            for (tier, servers) in d.iter() {
                let tier = extract_str(&tier, "connectors keys")?;
                if servers.is_none() {
                    continue;
                }
                let servers = extract_str_list(&servers, &format!("connectors[{tier:?}]"))?;
                r = r.connectors(tier, servers);
            }
        }
        if let Some(v) = forced.filter(|v| !v.is_none()) {
            r = r.forced(extract_str_list(v, "forced")?);
        }
        if let Some(v) = context.filter(|v| !v.is_none()) {
            let d = v
                .downcast::<PyDict>()
                .map_err(|_| type_error("context", "a dict of set name -> list of str", v))?;
            for (name, values) in d.iter() {
                let name = extract_str(&name, "context keys")?;
                let values = extract_str_list(&values, &format!("context[{name:?}]"))?;
                r = r.context(name, values);
            }
        }
        Ok(Request { inner: r })
    }

    /// The mode, or `None` for the policy's default mode.
    #[getter]
    fn mode(&self) -> Option<&str> {
        self.inner.mode()
    }

    /// The names of the `context` sets the request supplies, in the order given.
    #[getter]
    fn context_names(&self) -> Vec<String> {
        self.inner.context_names().map(str::to_string).collect()
    }

    /// The roles as given.
    #[getter]
    fn roles(&self) -> Vec<String> {
        self.inner.role_names().to_vec()
    }

    /// The permissions as given.
    #[getter]
    fn permissions(&self) -> Vec<String> {
        self.inner.permission_names().to_vec()
    }

    /// The tenant, or `None`.
    #[getter]
    fn tenant(&self) -> Option<&str> {
        self.inner.tenant_id()
    }

    /// The tiers set, each with its server allowlist.
    #[getter]
    fn connectors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (tier, servers) in self.inner.connector_tiers() {
            d.set_item(tier, servers)?;
        }
        Ok(d)
    }

    /// The tool names exempt from the intent stage.
    #[getter]
    fn forced(&self) -> Vec<String> {
        self.inner.forced_names().to_vec()
    }

    /// A copy of this request with `forced` replaced by `names` (e.g. the tool of a pending
    /// confirmation, so that "yes" still reaches it).
    fn with_forced(&self, names: &Bound<'_, PyAny>) -> PyResult<Request> {
        Ok(Request {
            inner: self.inner.clone().forced(extract_str_list(names, "names")?),
        })
    }

    fn __repr__(&self) -> String {
        let r = &self.inner;
        let mut parts = vec![match r.mode() {
            Some(m) => format!("mode={m:?}"),
            None => "mode=None".to_string(),
        }];
        if !r.role_names().is_empty() {
            parts.push(format!("roles={:?}", r.role_names()));
        }
        if !r.permission_names().is_empty() {
            parts.push(format!("permissions={:?}", r.permission_names()));
        }
        if let Some(t) = r.tenant_id() {
            parts.push(format!("tenant={t:?}"));
        }
        if !r.connector_tiers().is_empty() {
            let c: Vec<String> = r
                .connector_tiers()
                .iter()
                .map(|(t, s)| format!("{t:?}: {s:?}"))
                .collect();
            parts.push(format!("connectors={{{}}}", c.join(", ")));
        }
        if !r.forced_names().is_empty() {
            parts.push(format!("forced={:?}", r.forced_names()));
        }
        format!("Request({})", parts.join(", "))
    }
}

/// The classification of one query: the intent that gates tools (`name`), every intent that
/// counts (`intents`), the keyword hits that counted and those a negator dropped (dicts with
/// `keyword`, `intent`, `lang`, `span` and, for dropped ones, `negated_by`), whether the fallback
/// was used and whether the query was truncated. Build one without a query with
/// `Intent.named("write")` or `Intent.union(["write", "export"])`.
#[pyclass(frozen, eq, module = "toolwarden", name = "Intent")]
#[derive(PartialEq)]
struct Intent {
    inner: toolwarden::Intent,
}

#[pymethods]
impl Intent {
    /// An intent given by name, without a query.
    #[staticmethod]
    fn named(name: &Bound<'_, PyAny>) -> PyResult<Intent> {
        Ok(Intent {
            inner: toolwarden::Intent::named(extract_str(name, "name")?),
        })
    }

    /// Several intents at once, highest priority first (as `combine union` yields them).
    #[staticmethod]
    fn union(names: &Bound<'_, PyAny>) -> PyResult<Intent> {
        Ok(Intent {
            inner: toolwarden::Intent::union(extract_str_list(names, "names")?),
        })
    }

    /// The deciding intent.
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// Every intent that counts.
    #[getter]
    fn intents(&self) -> Vec<String> {
        self.inner.intents.iter().map(|s| s.to_string()).collect()
    }

    /// Keyword hits that counted, in query order.
    #[getter]
    fn hits(&self, py: Python<'_>) -> PyResult<PyObject> {
        json_to_py(
            py,
            &serde_json::to_value(&self.inner.hits).unwrap_or(Value::Null),
        )
    }

    /// Keyword hits a negator dropped, in query order.
    #[getter]
    fn dropped(&self, py: Python<'_>) -> PyResult<PyObject> {
        json_to_py(
            py,
            &serde_json::to_value(&self.inner.dropped).unwrap_or(Value::Null),
        )
    }

    /// Whether no keyword counted and the policy's fallback intent was used.
    #[getter]
    fn fallback(&self) -> bool {
        self.inner.fallback
    }

    /// Whether the query was too long and only its start was read.
    #[getter]
    fn truncated(&self) -> bool {
        self.inner.truncated
    }

    /// The intent as a dict (name, intents, hits, dropped, fallback, truncated).
    fn to_dict(&self, py: Python<'_>) -> PyResult<PyObject> {
        json_to_py(
            py,
            &serde_json::to_value(&self.inner).unwrap_or(Value::Null),
        )
    }

    fn __str__(&self) -> &str {
        &self.inner.name
    }

    fn __repr__(&self) -> String {
        format!(
            "Intent(name={:?}, intents={:?}, fallback={})",
            self.inner.name,
            self.inner.intents,
            if self.inner.fallback { "True" } else { "False" }
        )
    }
}

/// What one user turn has executed so far. Keep one per turn and pass it to every `check_call`
/// of that turn: an allowed transactional call increments `transactional_calls`, and the
/// policy's `limit transactional N per turn` denies calls beyond N.
///
/// One `Turn` may be shared by threads: its count sits behind a lock that `check_call` holds
/// from checking the limit to counting the call, so N threads calling at once run at most the
/// limit's calls.
#[pyclass(frozen, eq, module = "toolwarden", name = "Turn")]
struct Turn {
    inner: std::sync::Mutex<toolwarden::Turn>,
}

impl Turn {
    /// The turn's state, locked. A lock poisoned by a panic keeps the last count written.
    fn lock(&self) -> std::sync::MutexGuard<'_, toolwarden::Turn> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl PartialEq for Turn {
    fn eq(&self, other: &Turn) -> bool {
        // Copied one at a time: never two locks held at once.
        let mine = self.lock().clone();
        let theirs = other.lock().clone();
        mine == theirs
    }
}

#[pymethods]
impl Turn {
    #[new]
    #[pyo3(signature = (transactional_calls=0))]
    fn new(transactional_calls: u32) -> Turn {
        Turn {
            inner: std::sync::Mutex::new(toolwarden::Turn {
                transactional_calls,
            }),
        }
    }

    /// Transactional (non-read-only) calls allowed so far in this turn.
    #[getter]
    fn transactional_calls(&self) -> u32 {
        self.lock().transactional_calls
    }

    #[setter]
    fn set_transactional_calls(&self, value: u32) {
        self.lock().transactional_calls = value;
    }

    fn __repr__(&self) -> String {
        format!(
            "Turn(transactional_calls={})",
            self.lock().transactional_calls
        )
    }
}

/// A call held until the user confirms it (seed 004's `pending_tool_call` with
/// `transaction_status == "AWAITING_CONFIRMATION"`). Persist it between turns with `to_dict()`
/// / `PendingCall.from_dict(d)` (or `to_json()` / `from_json(s)`), then pass it as
/// `check_call(..., pending=...)` with the confirmed call: the `digest` binds the tool, the
/// arguments (confirmation fields removed) and the policy, so a confirmed call with other
/// arguments is denied.
#[pyclass(frozen, eq, module = "toolwarden", name = "PendingCall")]
#[derive(PartialEq)]
struct PendingCall {
    inner: toolwarden::PendingCall,
}

impl PendingCall {
    fn from_value(value: Value, param: &str) -> PyResult<PendingCall> {
        serde_json::from_value(value)
            .map(|inner| PendingCall { inner })
            .map_err(|e| PyValueError::new_err(format!("{param} is not a pending call: {e}")))
    }
}

#[pymethods]
impl PendingCall {
    /// A pending call from the dict `to_dict()` returned.
    #[staticmethod]
    fn from_dict(data: &Bound<'_, PyAny>) -> PyResult<PendingCall> {
        if !data.is_instance_of::<PyDict>() {
            return Err(type_error("data", "dict", data));
        }
        PendingCall::from_value(py_to_json(data, "data", 0)?, "data")
    }

    /// A pending call from the JSON text `to_json()` returned.
    #[staticmethod]
    fn from_json(text: &Bound<'_, PyAny>) -> PyResult<PendingCall> {
        let text = extract_str(text, "text")?;
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| PyValueError::new_err(format!("text is not JSON: {e}")))?;
        PendingCall::from_value(value, "text")
    }

    /// The pending call as a dict: tool, args, digest, transaction_status, policy,
    /// policy_version.
    fn to_dict(&self, py: Python<'_>) -> PyResult<PyObject> {
        json_to_py(
            py,
            &serde_json::to_value(&self.inner).unwrap_or(Value::Null),
        )
    }

    /// The pending call as JSON text.
    fn to_json(&self) -> String {
        serde_json::to_string(&self.inner).unwrap_or_default()
    }

    /// The tool called.
    #[getter]
    fn tool(&self) -> &str {
        &self.inner.tool
    }

    /// The arguments, confirmation fields removed.
    #[getter]
    fn args<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        map_to_py(py, &self.inner.args)
    }

    /// Hex SHA-256 over the policy name and version, the tool and the canonical arguments.
    #[getter]
    fn digest(&self) -> &str {
        &self.inner.digest
    }

    /// Always `"AWAITING_CONFIRMATION"`.
    #[getter]
    fn transaction_status(&self) -> &str {
        &self.inner.transaction_status
    }

    /// The name of the policy that asked for confirmation.
    #[getter]
    fn policy(&self) -> &str {
        &self.inner.policy
    }

    /// Its version, or `None`.
    #[getter]
    fn policy_version(&self) -> Option<u64> {
        self.inner.policy_version
    }

    fn __repr__(&self) -> String {
        format!(
            "PendingCall(tool={:?}, args={}, digest={:?})",
            self.inner.tool,
            Value::Object(self.inner.args.clone()),
            self.inner.digest
        )
    }
}

/// What one agent session has seen: the flow labels its tools put on it (each with the tool,
/// turn and time that put it there), the current turn's transactional calls and the call
/// awaiting the user's confirmation. Pass it as `check_call(..., session=...)`: an allowed call
/// of a tool that `taints` adds its labels, and the policy's `after` blocks tighten what the
/// session may do once their labels are on it (stage `flow`).
///
/// `record(policy, tool)` adds the labels of a call the runtime made without the guard,
/// `declassify(label)` takes one off (the user's explicit reset), `next_turn()` starts a new
/// turn (the labels stay). `to_json()` / `Session.from_json(text, policy)` keep it between runs
/// (`from_json` refuses a corrupt text, another policy's session and an undeclared label with
/// `ValueError`); it pickles through the same JSON. Thread-safe: its state sits behind a lock
/// held for each call.
#[pyclass(frozen, eq, module = "toolwarden", name = "Session")]
struct Session {
    inner: std::sync::Mutex<toolwarden::Session>,
}

impl Session {
    /// The session, locked. A lock poisoned by a panic keeps the last state written.
    fn lock(&self) -> std::sync::MutexGuard<'_, toolwarden::Session> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn wrap(inner: toolwarden::Session) -> Session {
        Session {
            inner: std::sync::Mutex::new(inner),
        }
    }
}

impl PartialEq for Session {
    fn eq(&self, other: &Session) -> bool {
        // Copied one at a time: never two locks held at once.
        let mine = self.lock().clone();
        let theirs = other.lock().clone();
        mine == theirs
    }
}

/// A label's source as a dict: label, tool, turn, time.
fn label_source_to_py(py: Python<'_>, l: &toolwarden::LabelSource) -> PyResult<PyObject> {
    json_to_py(py, &serde_json::to_value(l).unwrap_or(Value::Null))
}

#[pymethods]
impl Session {
    /// A new session: turn 1, no label, nothing pending, bound to no policy yet.
    #[new]
    fn new() -> Session {
        Session::wrap(toolwarden::Session::new())
    }

    /// A session from the JSON text `to_json()` returned, for use with `policy`. Raises
    /// `ValueError` for a corrupt text, another policy's or version's session, or a label the
    /// policy does not declare.
    #[staticmethod]
    fn from_json(text: &Bound<'_, PyAny>, policy: PyRef<'_, Policy>) -> PyResult<Session> {
        let text = extract_str(text, "text")?;
        toolwarden::Session::from_json(&text, &policy.inner)
            .map(Session::wrap)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The session as JSON text.
    fn to_json(&self) -> String {
        self.lock().to_json()
    }

    /// The labels on the session, in the order they came: dicts with `label`, `tool`, `turn`
    /// and `time` (seconds since the Unix epoch).
    #[getter]
    fn labels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let labels = self.lock().labels().to_vec();
        let items = labels
            .iter()
            .map(|l| label_source_to_py(py, l))
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// Whether `label` is on the session.
    fn has_label(&self, label: &str) -> bool {
        self.lock().has_label(label)
    }

    /// The current turn's number (from 1).
    #[getter]
    fn turn(&self) -> u32 {
        self.lock().turn()
    }

    /// The current turn's transactional calls.
    #[getter]
    fn transactional_calls(&self) -> u32 {
        self.lock().turn_state().transactional_calls
    }

    /// The call awaiting the user's confirmation, or `None`.
    #[getter]
    fn pending(&self) -> Option<PendingCall> {
        self.lock()
            .pending()
            .cloned()
            .map(|inner| PendingCall { inner })
    }

    /// Starts a new turn: the turn number goes up, its count starts from 0; labels stay.
    fn next_turn(&self) {
        self.lock().next_turn();
    }

    /// Takes `label` off the session (the user's explicit reset) and returns where it came
    /// from (a dict), or `None` when it was not on the session.
    fn declassify(&self, py: Python<'_>, label: &str) -> PyResult<Option<PyObject>> {
        let removed = self.lock().declassify(label);
        removed.map(|l| label_source_to_py(py, &l)).transpose()
    }

    /// Adds the labels `tool` taints in `policy`, for a call the runtime ran without the guard;
    /// returns the labels that are new. Raises `ValueError` when the session belongs to another
    /// policy or version.
    fn record(&self, policy: PyRef<'_, Policy>, tool: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        let tool = extract_str(tool, "tool")?;
        self.lock()
            .record(&policy.inner, &tool)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Pickles through `to_json()`; the policy checks the session again on its next use.
    fn __reduce__(&self, py: Python<'_>) -> PyResult<(PyObject, (String,))> {
        let rebuild = py
            .import("toolwarden")?
            .getattr("Session")?
            .getattr("_from_state")?
            .unbind();
        Ok((rebuild, (self.to_json(),)))
    }

    /// The session `__reduce__` pickled (checked against the policy on its first use).
    #[staticmethod]
    fn _from_state(text: &str) -> PyResult<Session> {
        serde_json::from_str::<toolwarden::Session>(text)
            .map(Session::wrap)
            .map_err(|e| PyValueError::new_err(format!("the session is corrupt: {e}")))
    }

    fn __repr__(&self) -> String {
        let s = self.lock();
        let labels: Vec<&str> = s.labels().iter().map(|l| l.label.as_str()).collect();
        format!(
            "Session(turn={}, transactional_calls={}, labels={:?}, pending={})",
            s.turn(),
            s.turn_state().transactional_calls,
            labels,
            if s.pending().is_some() {
                "True"
            } else {
                "False"
            }
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Verdict
// ---------------------------------------------------------------------------------------------

/// The answer of `check_call`: `decision` is `"allow"` (run it with `args_for_execution`),
/// `"confirm"` (ask the user first; `pending` holds the call) or `"deny"` (block it), with the
/// deciding `stage`, a one-sentence `reason` and the rule's `source` (`file:line:col`).
/// `to_dict()` is seed 004's result shape (`{"ok": False, "error": ..., "metadata":
/// {"blocked_by_policy": True, ...}}` for a blocked call).
#[pyclass(frozen, module = "toolwarden", name = "Verdict")]
struct Verdict {
    inner: toolwarden::Verdict,
}

#[pymethods]
impl Verdict {
    /// `"allow"`, `"confirm"` or `"deny"`.
    #[getter]
    fn decision(&self) -> &'static str {
        self.inner.decision.as_str()
    }

    /// The tool called.
    #[getter]
    fn tool(&self) -> &str {
        &self.inner.tool
    }

    /// The deciding stage (`"identity"`, `"connector"`, `"tenant"`, `"role"`, `"permission"`,
    /// `"mode"`, `"intent"`, `"tenant_arg"`, `"requires"`, `"confirmation"`, `"turn_limit"`), or
    /// `None` for an allow.
    #[getter]
    fn stage(&self) -> Option<&'static str> {
        self.inner.stage.map(|s| s.as_str())
    }

    /// Why, in one sentence (for an allow: "`tool` may run").
    #[getter]
    fn reason(&self) -> &str {
        &self.inner.reason
    }

    /// The tool's effect, when the name resolved to one.
    #[getter]
    fn effect(&self) -> Option<&str> {
        self.inner.effect.as_deref()
    }

    /// `"read_only"` or `"transactional"` (seed 004), when the effect is known.
    #[getter]
    fn operation_type(&self) -> Option<&'static str> {
        self.inner.operation_type
    }

    /// `file:line:col` of the deciding rule.
    #[getter]
    fn source(&self) -> Option<&str> {
        self.inner.source.as_deref()
    }

    /// On allow: the arguments to execute (confirmation fields removed); otherwise `None`.
    #[getter]
    fn args_for_execution(&self, py: Python<'_>) -> PyResult<PyObject> {
        match &self.inner.args_for_execution {
            Some(m) => Ok(map_to_py(py, m)?.into_any().unbind()),
            None => Ok(py.None()),
        }
    }

    /// On confirm: the call awaiting confirmation; otherwise `None`.
    #[getter]
    fn pending(&self) -> Option<PendingCall> {
        self.inner
            .pending
            .clone()
            .map(|inner| PendingCall { inner })
    }

    /// On a `requires` deny: the missing argument names.
    #[getter]
    fn missing(&self) -> Vec<String> {
        self.inner.missing.clone()
    }

    /// The argument rules that fired, in evaluation order, each a dict with `source`,
    /// `outcome`, `reference`, `value` and `problem`; empty when none fired.
    #[getter]
    fn rules(&self, py: Python<'_>) -> PyResult<PyObject> {
        json_to_py(
            py,
            &serde_json::to_value(&self.inner.rules).unwrap_or(Value::Null),
        )
    }

    /// Whether the call carried a confirmation field set to the literal `True`.
    #[getter]
    fn confirmation_received(&self) -> bool {
        self.inner.confirmation_received
    }

    /// Whether the call may run now.
    #[getter]
    fn is_allowed(&self) -> bool {
        self.inner.is_allowed()
    }

    /// Whether the call waits for the user's confirmation (then `pending` is set).
    #[getter]
    fn needs_confirmation(&self) -> bool {
        self.inner.needs_confirmation()
    }

    /// Whether the call is blocked.
    #[getter]
    fn is_denied(&self) -> bool {
        self.inner.is_denied()
    }

    /// The result in seed 004's shape, as the tool result to hand back to the model.
    fn to_dict(&self, py: Python<'_>) -> PyResult<PyObject> {
        json_to_py(py, &self.inner.to_json())
    }

    /// `to_dict()` as JSON text.
    fn to_json(&self) -> String {
        self.inner.to_json().to_string()
    }

    fn __repr__(&self) -> String {
        match self.inner.stage {
            Some(stage) => format!(
                "Verdict(decision={:?}, tool={:?}, stage={:?}, reason={:?})",
                self.inner.decision.as_str(),
                self.inner.tool,
                stage.as_str(),
                self.inner.reason
            ),
            None => format!(
                "Verdict(decision={:?}, tool={:?})",
                self.inner.decision.as_str(),
                self.inner.tool
            ),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Policy
// ---------------------------------------------------------------------------------------------

/// A prepared tool set, made by `policy.tools(tools)`: the tool names (and, for schema dicts,
/// the names and MCP annotations) read once, so `offer(request, tool_set, ...)` decides them on
/// every turn without converting them again, and returns the very objects given. The set keeps
/// its own tuple of the objects: changing the list afterwards changes nothing. It holds no
/// policy, so one set serves any policy (a reloaded one too).
#[pyclass(frozen, module = "toolwarden", name = "ToolSet")]
struct ToolSet {
    inner: toolwarden::ToolSet,
    items: Py<PyTuple>,
}

impl ToolSet {
    fn new(tools: &Bound<'_, PyAny>) -> PyResult<ToolSet> {
        let py = tools.py();
        let expected = "a list of tool names or tool schema dicts";
        if tools.is_instance_of::<PyString>() || tools.is_instance_of::<PyDict>() {
            return Err(type_error("tools", expected, tools));
        }
        let iter = tools
            .try_iter()
            .map_err(|_| type_error("tools", expected, tools))?;
        let mut objects: Vec<Bound<'_, PyAny>> = Vec::new();
        for obj in iter {
            objects.push(obj?);
        }
        let mut names = Vec::with_capacity(objects.len());
        let mut schemas: Option<Vec<Value>> = None;
        for (i, obj) in objects.iter().enumerate() {
            if let Ok(s) = obj.downcast::<PyString>() {
                names.push(borrow_str(s)?.to_string());
            } else if obj.is_instance_of::<PyDict>() {
                schemas = Some(Vec::new());
            } else {
                return Err(type_error(
                    &format!("tools[{i}]"),
                    "a tool name (str) or a tool schema dict",
                    obj,
                ));
            }
        }
        let inner = match schemas {
            None => toolwarden::ToolSet::from_names(&names),
            Some(mut values) => {
                for (i, obj) in objects.iter().enumerate() {
                    values.push(match obj.downcast::<PyString>() {
                        Ok(s) => {
                            let mut m = Map::new();
                            m.insert(
                                "name".to_string(),
                                Value::String(borrow_str(s)?.to_string()),
                            );
                            Value::Object(m)
                        }
                        Err(_) => schema_keys(obj, &format!("tools[{i}]"))?,
                    });
                }
                toolwarden::ToolSet::from_schemas(&values).map_err(|e| match e {
                    toolwarden::SchemaError::Schema { index, message } => {
                        PyValueError::new_err(format!("tools[{index}]: {message}"))
                    }
                    toolwarden::SchemaError::Request(r) => request_error(r),
                })?
            }
        };
        Ok(ToolSet {
            inner,
            items: PyTuple::new(py, objects)?.unbind(),
        })
    }
}

#[pymethods]
impl ToolSet {
    /// The tool names, in order.
    #[getter]
    fn names(&self) -> Vec<String> {
        self.inner.names().map(str::to_string).collect()
    }

    /// The objects the set was made from, in order.
    #[getter]
    fn items(&self, py: Python<'_>) -> Py<PyTuple> {
        self.items.clone_ref(py)
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!("<ToolSet of {} tools>", self.inner.len())
    }
}

/// Where the intent of an evaluation comes from.
enum IntentSource<'a> {
    /// Classify this query.
    Query(String),
    /// Use this intent (made from a name or a list of names).
    Given(toolwarden::Intent),
    /// Use this `Intent` object's intent, borrowed for the call rather than copied.
    Borrowed(&'a toolwarden::Intent),
    /// Neither given: the policy's fallback intent.
    Fallback,
}

impl<'a> IntentSource<'a> {
    fn from_args(
        query: Option<&'a Bound<'_, PyAny>>,
        intent: Option<&'a Bound<'_, PyAny>>,
    ) -> PyResult<IntentSource<'a>> {
        let query = query.filter(|q| !q.is_none());
        let intent = intent.filter(|i| !i.is_none());
        match (query, intent) {
            (Some(_), Some(_)) => Err(PyValueError::new_err(
                "give query or intent, not both (the intent decides; the query would be ignored)",
            )),
            (Some(q), None) => Ok(IntentSource::Query(extract_str(q, "query")?)),
            (None, Some(i)) => {
                if let Ok(it) = i.downcast::<Intent>() {
                    Ok(IntentSource::Borrowed(&it.get().inner))
                } else if i.is_instance_of::<PyString>() {
                    Ok(IntentSource::Given(toolwarden::Intent::named(extract_str(
                        i, "intent",
                    )?)))
                } else if i.is_instance_of::<PyList>() || i.is_instance_of::<PyTuple>() {
                    Ok(IntentSource::Given(toolwarden::Intent::union(
                        extract_str_list(i, "intent")?,
                    )))
                } else {
                    Err(type_error("intent", "an Intent, a str or a list of str", i))
                }
            }
            (None, None) => Ok(IntentSource::Fallback),
        }
    }

    /// Whether resolving classifies a query (work that grows with the query's length).
    fn classifies(&self) -> bool {
        matches!(self, IntentSource::Query(_))
    }

    fn resolve(self, policy: &toolwarden::Policy) -> Cow<'a, toolwarden::Intent> {
        match self {
            IntentSource::Query(q) => Cow::Owned(policy.classify(&q)),
            IntentSource::Given(i) => Cow::Owned(i),
            IntentSource::Borrowed(i) => Cow::Borrowed(i),
            IntentSource::Fallback => Cow::Owned(policy.fallback_intent()),
        }
    }
}

/// The largest prepared set `offer` decides without releasing the GIL (when no query is to be
/// classified). Deciding one tool takes some 15 ns, so 1024 tools hold the GIL for about 15 µs:
/// far below the interpreter's 5 ms switch interval, while releasing and taking back the GIL
/// costs about what deciding a few tools does. Larger sets, and any call that classifies a
/// query, release it so other Python threads run meanwhile.
const OFFER_HOLDS_GIL_UP_TO: usize = 1024;

/// An iterator that knows how many items it yields (counted beforehand), so `PyList::new`
/// fills a list of the exact size without an intermediate `Vec`.
struct Counted<I> {
    inner: I,
    left: usize,
}

impl<I: Iterator> Iterator for Counted<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let item = self.inner.next()?;
        self.left = self.left.saturating_sub(1);
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<I: Iterator> ExactSizeIterator for Counted<I> {}

/// Keeps the policy at `path` loaded and reloads it when the file or one of its includes
/// changes (`watch=True`, the default), or when `reload_now()` is called. A broken edit never
/// replaces the good policy: it is rejected, counted in `rejected`, and its report kept in
/// `last_error`; `policy()` keeps returning the last good one. Raises `PolicyError` when the
/// first load fails.
#[pyclass(frozen, module = "toolwarden", name = "PolicyWatcher")]
struct PolicyWatcher {
    inner: toolwarden::watch::PolicyWatcher,
    last_error: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

#[pymethods]
impl PolicyWatcher {
    #[new]
    #[pyo3(signature = (path, watch=true))]
    fn new(py: Python<'_>, path: PathBuf, watch: bool) -> PyResult<PolicyWatcher> {
        let last_error = std::sync::Arc::new(std::sync::Mutex::new(None));
        let sink = std::sync::Arc::clone(&last_error);
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
        let made = py.allow_threads(|| {
            if watch {
                toolwarden::watch::PolicyWatcher::new(&path, on_reload)
            } else {
                toolwarden::watch::PolicyWatcher::unwatched(&path, on_reload)
            }
        });
        match made {
            Ok(inner) => Ok(PolicyWatcher { inner, last_error }),
            Err(toolwarden::watch::WatchError::Load(e)) => Err(policy_error(py, e)),
            Err(other) => Err(pyo3::exceptions::PyOSError::new_err(other.to_string())),
        }
    }

    /// The policy served now (the last one that loaded).
    fn policy(&self) -> Policy {
        Policy {
            inner: self.inner.policy(),
        }
    }

    /// 1 after the first load, +1 per reload that changed the policy text (reloading unchanged
    /// files is no new generation).
    #[getter]
    fn generation(&self) -> u64 {
        self.inner.generation()
    }

    /// How many edits were rejected because they did not load.
    #[getter]
    fn rejected(&self) -> u64 {
        self.inner.rejected()
    }

    /// The rendered report of the last rejected edit, or `None` after a successful reload.
    #[getter]
    fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|e| e.clone())
    }

    /// Reloads now; returns the generation served afterwards. Raises `PolicyError` when the
    /// text has errors (the previous policy stays served).
    fn reload_now(&self, py: Python<'_>) -> PyResult<u64> {
        py.allow_threads(|| self.inner.reload_now())
            .map_err(|e| policy_error(py, e))
    }
}

/// A compiled, immutable policy. Load with `Policy.from_file(path)`, `Policy.parse(text,
/// name=...)` or `Policy.from_yaml(path, legacy=None)`; share one instance across threads.
#[pyclass(frozen, module = "toolwarden", name = "Policy")]
struct Policy {
    inner: toolwarden::Policy,
}

#[pymethods]
impl Policy {
    /// Reads, checks and compiles the `.warden` policy at `path` (a `str` or path-like),
    /// following its `include`s. Raises `PolicyError` with every diagnostic.
    #[staticmethod]
    fn from_file(py: Python<'_>, path: PathBuf) -> PyResult<Policy> {
        py.allow_threads(|| toolwarden::Policy::from_file(&path))
            .map(|inner| Policy { inner })
            .map_err(|e| policy_error(py, e))
    }

    /// Checks and compiles policy text. `name` labels diagnostics (`name:line:col`) and
    /// `include`s resolve relative to its folder. Raises `PolicyError`.
    #[staticmethod]
    #[pyo3(signature = (text, name=None))]
    fn parse(
        py: Python<'_>,
        text: &Bound<'_, PyAny>,
        name: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Policy> {
        let text = extract_str(text, "text")?;
        let name = match name.filter(|n| !n.is_none()) {
            Some(n) => extract_str(n, "name")?,
            None => "<string>".to_string(),
        };
        py.allow_threads(|| toolwarden::Policy::parse(&text, &name))
            .map(|inner| Policy { inner })
            .map_err(|e| policy_error(py, e))
    }

    /// Loads seed 004's `tool_policies.yaml` at `path`, with the legacy `tools.yaml` catalog
    /// `legacy` as fallback for tools without an entry. YAML problems are diagnostics at the
    /// YAML's `file:line:col`. Raises `PolicyError`.
    #[staticmethod]
    #[pyo3(signature = (path, legacy=None))]
    fn from_yaml(py: Python<'_>, path: PathBuf, legacy: Option<PathBuf>) -> PyResult<Policy> {
        py.allow_threads(|| toolwarden::Policy::from_yaml(&path, legacy.as_deref()))
            .map(|inner| Policy { inner })
            .map_err(|e| policy_error(py, e))
    }

    /// The name from the `policy` declaration.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The version from the `policy` declaration, or `None`.
    #[getter]
    fn version(&self) -> Option<u64> {
        self.inner.version()
    }

    /// The warnings found while loading (the policy loaded despite them).
    #[getter]
    fn warnings(&self) -> Vec<Diagnostic> {
        self.inner
            .warnings()
            .iter()
            .map(|d| Diagnostic::new(d, self.inner.sources()))
            .collect()
    }

    /// The declared effects, in order.
    #[getter]
    fn effects(&self) -> Vec<String> {
        self.inner.effects().map(str::to_string).collect()
    }

    /// The declared intents, highest priority first.
    #[getter]
    fn intents(&self) -> Vec<String> {
        self.inner.intents().map(str::to_string).collect()
    }

    /// The declared modes.
    #[getter]
    fn modes(&self) -> Vec<String> {
        self.inner.modes().map(str::to_string).collect()
    }

    /// The `default mode`, or `None`.
    #[getter]
    fn default_mode(&self) -> Option<&str> {
        self.inner.default_mode()
    }

    /// The declared tool names.
    #[getter]
    fn tool_names(&self) -> Vec<String> {
        self.inner.tools().map(str::to_string).collect()
    }

    /// A prepared tool set: `tools` (tool names and/or tool schema dicts, as `offer` takes
    /// them) read once, for `offer` on every turn without converting them again. Raises
    /// `TypeError` for a wrong type, `ValueError` for a schema without a name.
    fn tools(&self, tools: &Bound<'_, PyAny>) -> PyResult<ToolSet> {
        ToolSet::new(tools)
    }

    /// The declared roles.
    #[getter]
    fn roles(&self) -> Vec<String> {
        self.inner.roles().map(str::to_string).collect()
    }

    /// The declared permissions.
    #[getter]
    fn permissions(&self) -> Vec<String> {
        self.inner.permissions().map(str::to_string).collect()
    }

    /// The declared connector tiers.
    #[getter]
    fn tiers(&self) -> Vec<String> {
        self.inner.tiers().map(str::to_string).collect()
    }

    /// Classifies a user query into the intent that gates tools (multilingual keywords,
    /// negation, the policy's fallback when nothing matches).
    fn classify(&self, py: Python<'_>, text: &Bound<'_, PyAny>) -> PyResult<Intent> {
        let text = extract_str(text, "text")?;
        let inner = py.allow_threads(|| self.inner.classify(&text));
        Ok(Intent { inner })
    }

    /// The tools the model may see (decision `allow` or `confirm`), in input order, as the very
    /// objects given: `tools` is a `ToolSet` from `policy.tools(...)` (prepared once, the fast
    /// path), or a list of tool names (`str`) and/or tool schemas (OpenAI
    /// `{"type": "function", "function": {"name": ...}}`, Anthropic `{"name": ...,
    /// "input_schema": ...}`, MCP `{"name": ..., "inputSchema": ..., "annotations": ...}`).
    ///
    /// The intent comes from `intent` (an `Intent`, a name, or a list of names) or from
    /// classifying `query`; with neither, the policy's fallback intent. Raises `RequestError`
    /// for a mode, tier or intent the policy does not declare, `ValueError` for a schema
    /// without a name, `TypeError` for a wrong type.
    ///
    /// With `session` (a `Session`, not changed), the offer is that of the session's flow
    /// labels: a tool whose effect an `after` block denies is hidden (one it makes `confirm`
    /// is still shown). Raises `RequestError` for a session of another policy or version.
    #[pyo3(signature = (request, tools, query=None, intent=None, *, session=None))]
    fn offer<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, Request>,
        tools: &Bound<'py, PyAny>,
        query: Option<&Bound<'py, PyAny>>,
        intent: Option<&Bound<'py, PyAny>>,
        session: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let source = IntentSource::from_args(query, intent)?;
        if let Some(s) = session.filter(|s| !s.is_none()) {
            let s = s
                .downcast::<Session>()
                .map_err(|_| type_error("session", "a Session", s))?;
            let shown = self.offer(py, request, tools, query, intent, None)?;
            let mut names: Vec<String> = Vec::with_capacity(shown.len());
            for obj in shown.iter() {
                names.push(offered_name(&obj)?);
            }
            let policy = &self.inner;
            let req = &request.get().inner;
            let session = s.get().lock().clone();
            let keep: Vec<bool> = py
                .allow_threads(|| {
                    let intent = source.resolve(policy);
                    policy
                        .offer_session(req, &intent, &session, names.iter().map(String::as_str))
                        .map(|o| {
                            o.entries()
                                .iter()
                                .map(|(_, d)| d.decision != toolwarden::Decision::Deny)
                                .collect()
                        })
                })
                .map_err(request_error)?;
            let kept: Vec<Bound<'py, PyAny>> = shown
                .iter()
                .zip(keep)
                .filter(|(_, k)| *k)
                .map(|(o, _)| o)
                .collect();
            return PyList::new(py, kept);
        }
        if let Ok(set) = tools.downcast::<ToolSet>() {
            let set = set.get();
            let request = &request.get().inner;
            let policy = &self.inner;
            let release = source.classifies() || set.inner.len() > OFFER_HOLDS_GIL_UP_TO;
            let decide = || policy.offer_set(request, &source.resolve(policy), &set.inner);
            let offer = if release {
                py.allow_threads(decide)
            } else {
                decide()
            }
            .map_err(request_error)?;
            // The set's tuple holds its objects in the order of its names, one each.
            let entries = offer.entries();
            let visible = |d: &toolwarden::ToolDecision| d.decision != toolwarden::Decision::Deny;
            let shown = entries.iter().filter(|(_, d)| visible(d)).count();
            let items = set.items.bind(py);
            let objects = items
                .iter_borrowed()
                .zip(entries)
                .filter(|(_, (_, d))| visible(d))
                .map(|(obj, _)| obj);
            return PyList::new(
                py,
                Counted {
                    inner: objects,
                    left: shown,
                },
            );
        }
        if tools.is_instance_of::<PyString>() || tools.is_instance_of::<PyDict>() {
            return Err(type_error(
                "tools",
                "a list of tool names or tool schema dicts",
                tools,
            ));
        }
        let iter = tools
            .try_iter()
            .map_err(|_| type_error("tools", "a list of tool names or tool schema dicts", tools))?;
        let mut objects: Vec<Bound<'py, PyAny>> = Vec::new();
        let mut all_names = true;
        for (i, obj) in iter.enumerate() {
            let obj = obj?;
            if obj.is_instance_of::<PyDict>() {
                all_names = false;
            } else if !obj.is_instance_of::<PyString>() {
                return Err(type_error(
                    &format!("tools[{i}]"),
                    "a tool name (str) or a tool schema dict",
                    &obj,
                ));
            }
            objects.push(obj);
        }
        let request = &request.get().inner;
        let policy = &self.inner;
        let visible: Vec<usize> = if all_names {
            // The fast path: names borrowed from the Python strings, no copy.
            let mut names: Vec<&str> = Vec::with_capacity(objects.len());
            for obj in &objects {
                names.push(borrow_str(obj.downcast::<PyString>()?)?);
            }
            py.allow_threads(|| {
                let intent = source.resolve(policy);
                policy
                    .offer(request, &intent, names.iter().copied())
                    .map(|o| o.visible_indices().collect())
            })
            .map_err(request_error)?
        } else {
            let mut schemas: Vec<Value> = Vec::with_capacity(objects.len());
            for (i, obj) in objects.iter().enumerate() {
                schemas.push(match obj.downcast::<PyString>() {
                    Ok(s) => {
                        let mut m = Map::new();
                        m.insert(
                            "name".to_string(),
                            Value::String(borrow_str(s)?.to_string()),
                        );
                        Value::Object(m)
                    }
                    Err(_) => schema_keys(obj, &format!("tools[{i}]"))?,
                });
            }
            py.allow_threads(|| {
                let intent = source.resolve(policy);
                policy
                    .schema_decisions(request, &intent, &schemas)
                    .map(|ds| {
                        ds.iter()
                            .filter(|d| d.decision.decision != toolwarden::Decision::Deny)
                            .map(|d| d.index)
                            .collect()
                    })
            })
            .map_err(|e| match e {
                toolwarden::SchemaError::Request(r) => request_error(r),
                toolwarden::SchemaError::Schema { index, message } => {
                    PyValueError::new_err(format!("tools[{index}]: {message}"))
                }
            })?
        };
        PyList::new(py, visible.into_iter().map(|i| objects[i].clone()))
    }

    /// Why one tool is shown or hidden: a dict with `tool`, `decision` (`"allow"`,
    /// `"confirm"`, `"deny"`), `stage`, `reason` and `source` (`file:line:col` of the deciding
    /// rule), decided exactly as `offer` decides it.
    #[pyo3(signature = (request, tool, query=None, intent=None))]
    fn explain<'py>(
        &self,
        py: Python<'py>,
        request: PyRef<'py, Request>,
        tool: &Bound<'py, PyAny>,
        query: Option<&Bound<'py, PyAny>>,
        intent: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let source = IntentSource::from_args(query, intent)?;
        let tool = extract_str(tool, "tool")?;
        let request = &request.inner;
        let policy = &self.inner;
        let (d, reason, src) = py
            .allow_threads(|| {
                let intent = source.resolve(policy);
                policy.decide_tool(request, &intent, &tool).map(|d| {
                    let reason = policy.reason(&tool, &d, request);
                    (d, reason, policy.rule_source(d.rule).map(|l| l.to_string()))
                })
            })
            .map_err(request_error)?;
        let out = PyDict::new(py);
        out.set_item("tool", &tool)?;
        out.set_item("decision", d.decision.as_str())?;
        out.set_item("stage", d.stage.map(|s| s.as_str()))?;
        out.set_item("reason", reason)?;
        out.set_item("source", src)?;
        Ok(out)
    }

    /// Judges one tool call the model made: stages 1–7 as in `offer`, then the tenant argument,
    /// required arguments, confirmation and the per-turn limit. `args` is a dict or the JSON
    /// text the model produced (parsed strictly: duplicate keys and deep nesting are refused).
    /// `turn` (a `Turn`, updated in place, atomically) counts this turn's transactional calls;
    /// `pending` (a `PendingCall` or its dict) is the call awaiting the user's confirmation.
    ///
    /// `strict=True` (the default): a confirmation is trusted only against `pending`, so a call
    /// that needs confirmation and carries a confirmation field while `pending` is `None` is
    /// denied ("no call is awaiting confirmation"): the model cannot confirm its own call.
    /// `strict=False` trusts a literal `True` confirmation field without a pending call. A
    /// `pending` call that matches this call (same digest) exempts its tool from the intent
    /// stage. Raises `RequestError`, `ValueError` for unacceptable JSON text, `TypeError` for
    /// wrong types.
    ///
    /// `session` (a `Session`, updated in place) holds the turn's count, the pending call and
    /// the flow labels instead of `turn` and `pending` (which cannot be given with it; it is
    /// always strict): stage `flow` applies the policy's `after` blocks, and an allowed call of
    /// a tool that `taints` adds its labels. Raises `RequestError` for a session of another
    /// policy or version.
    #[pyo3(signature = (request, tool, args, turn=None, pending=None, query=None, intent=None, *, strict=true, session=None))]
    #[allow(clippy::too_many_arguments)]
    fn check_call<'py>(
        &self,
        py: Python<'py>,
        request: PyRef<'py, Request>,
        tool: &Bound<'py, PyAny>,
        args: &Bound<'py, PyAny>,
        turn: Option<&Bound<'py, PyAny>>,
        pending: Option<&Bound<'py, PyAny>>,
        query: Option<&Bound<'py, PyAny>>,
        intent: Option<&Bound<'py, PyAny>>,
        strict: bool,
        session: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Verdict> {
        let source = IntentSource::from_args(query, intent)?;
        let tool = extract_str(tool, "tool")?;
        let args = args_value(args)?;
        if let Some(s) = session.filter(|s| !s.is_none()) {
            let s = s
                .downcast::<Session>()
                .map_err(|_| type_error("session", "a Session", s))?;
            if turn.is_some_and(|t| !t.is_none()) || pending.is_some_and(|p| !p.is_none()) {
                return Err(PyTypeError::new_err(
                    "session holds the turn and the pending call: give session, or turn and pending, not both",
                ));
            }
            if !strict {
                return Err(PyValueError::new_err(
                    "a session is always strict: a confirmation is trusted only against its pending call",
                ));
            }
            let session = s.get();
            let request = &request.inner;
            let policy = &self.inner;
            let verdict = py
                .allow_threads(|| {
                    let intent = source.resolve(policy);
                    let mut locked = session.lock();
                    policy.check_call_session(request, &intent, &mut locked, &tool, &args)
                })
                .map_err(request_error)?;
            return Ok(Verdict { inner: verdict });
        }
        let turn: Option<Py<Turn>> = match turn.filter(|t| !t.is_none()) {
            Some(t) => Some(
                t.downcast::<Turn>()
                    .map_err(|_| type_error("turn", "a Turn", t))?
                    .clone()
                    .unbind(),
            ),
            None => None,
        };
        let pending: Option<toolwarden::PendingCall> = match pending.filter(|p| !p.is_none()) {
            Some(p) => {
                if let Ok(pc) = p.downcast::<PendingCall>() {
                    Some(pc.get().inner.clone())
                } else if p.is_instance_of::<PyDict>() {
                    Some(PendingCall::from_value(py_to_json(p, "pending", 0)?, "pending")?.inner)
                } else {
                    return Err(type_error("pending", "a PendingCall or its dict", p));
                }
            }
            None => None,
        };
        let request = &request.inner;
        let policy = &self.inner;
        let verdict = py
            .allow_threads(|| {
                let intent = source.resolve(policy);
                // The turn stays locked from the limit check to the count: atomic.
                let mut fresh = toolwarden::Turn::new();
                let mut locked = turn.as_ref().map(|t| t.get().lock());
                let state = match locked.as_deref_mut() {
                    Some(state) => state,
                    None => &mut fresh,
                };
                if strict {
                    policy.check_call_strict(
                        request,
                        &intent,
                        state,
                        &tool,
                        &args,
                        pending.as_ref(),
                    )
                } else {
                    policy.check_call_with(request, &intent, state, &tool, &args, pending.as_ref())
                }
            })
            .map_err(request_error)?;
        Ok(Verdict { inner: verdict })
    }

    /// `args` (a dict or JSON text) as a new dict without the policy's confirmation fields
    /// (`confirm fields`): judge the model's own call with it before deciding whether to ask the
    /// user, so a model that writes `"confirmed": True` itself still reaches the human. Raises
    /// `ValueError` for text that is not a JSON object, `TypeError` for other types.
    fn strip_confirmation<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        match self.inner.strip_confirmation(&args_value(args)?) {
            Value::Object(map) => map_to_py(py, &map),
            other => Err(PyValueError::new_err(format!(
                "args must be a JSON object, not {}",
                match other {
                    Value::Array(_) => "an array",
                    Value::String(_) => "a string",
                    Value::Number(_) => "a number",
                    Value::Bool(_) => "a boolean",
                    _ => "null",
                }
            ))),
        }
    }

    fn __repr__(&self) -> String {
        match self.inner.version() {
            Some(v) => format!("<Policy {:?} version {v}>", self.inner.name()),
            None => format!("<Policy {:?}>", self.inner.name()),
        }
    }
}

/// The compiled core of the `toolwarden` package.
#[pymodule]
fn _toolwarden(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Policy>()?;
    m.add_class::<PolicyWatcher>()?;
    m.add_class::<Request>()?;
    m.add_class::<Intent>()?;
    m.add_class::<Turn>()?;
    m.add_class::<Session>()?;
    m.add_class::<PendingCall>()?;
    m.add_class::<Verdict>()?;
    m.add_class::<ToolSet>()?;
    m.add_class::<Diagnostic>()?;
    m.add("PolicyError", py.get_type::<PolicyError>())?;
    m.add("RequestError", py.get_type::<RequestError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
