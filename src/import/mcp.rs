//! MCP `tools/list` catalogs -> warden `tool` declarations.
//!
//! Input is a `tools/list` result (`{"tools": [...]}`), a whole JSON-RPC response
//! (`{"result": {"tools": [...]}}`) or a bare JSON array of MCP tool objects. Each tool's effect
//! comes from its `annotations` with the defaults of the MCP specification (2025-11-25): a
//! missing `readOnlyHint` means `false`, a missing `destructiveHint` means `true`. So:
//!
//! | `readOnlyHint` | `destructiveHint` | effect   |
//! |----------------|-------------------|----------|
//! | `true`         | (any)             | `none`   |
//! | `false`/missing| `false`           | `write`  |
//! | `false`/missing| `true`/missing    | `delete` |
//!
//! The hints are read from the tool's `annotations` object, as the specification places them,
//! and from the top level of the tool object, where some catalogs flatten them (`null` there
//! means not given). When both places give a hint and they disagree, the stricter value is kept
//! (`readOnlyHint: false`, `destructiveHint: true`) and [`McpTool::warnings`] says so.
//!
//! Annotations are hints from the server, not facts: the specification says clients MUST
//! consider them untrusted unless they come from trusted servers. The imported declarations
//! are a starting point for a reviewer; at run time a policy's `trust annotations tighten`
//! (the default) lets annotations only make a decision stricter (see
//! [`crate::Policy::offer_schemas`]).

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::Value;

pub use crate::syntax::quote;

/// The effect an MCP tool's annotations imply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum McpEffect {
    /// `readOnlyHint: true`: the tool does not modify its environment.
    None,
    /// Not read-only and `destructiveHint: false`: it only adds or updates.
    Write,
    /// Not read-only and destructive (the spec's default): it may delete or overwrite.
    Delete,
}

impl McpEffect {
    /// The warden effect name: `none`, `write` or `delete`.
    pub fn as_str(self) -> &'static str {
        match self {
            McpEffect::None => "none",
            McpEffect::Write => "write",
            McpEffect::Delete => "delete",
        }
    }

    /// The effect implied by the two hints, `None` meaning "not given" (spec defaults:
    /// `readOnlyHint` false, `destructiveHint` true).
    pub fn from_hints(read_only: Option<bool>, destructive: Option<bool>) -> McpEffect {
        if read_only.unwrap_or(false) {
            McpEffect::None
        } else if destructive.unwrap_or(true) {
            McpEffect::Delete
        } else {
            McpEffect::Write
        }
    }
}

/// One imported tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpTool {
    /// The tool's name as the server gives it.
    pub name: String,
    /// `readOnlyHint`, when given (in `annotations` or at the top level; the stricter value
    /// when both give it).
    pub read_only_hint: Option<bool>,
    /// `destructiveHint`, when given (as `read_only_hint`).
    pub destructive_hint: Option<bool>,
    /// Whether the tool object declares its hints at all: an `annotations` object, or a hint
    /// at the top level.
    pub has_annotations: bool,
    /// Problems that did not stop the import, one sentence each with the tool's JSON path: a
    /// hint given in both places with different values.
    pub warnings: Vec<String>,
}

impl McpTool {
    /// The effect its annotations imply, with the spec's defaults.
    pub fn effect(&self) -> McpEffect {
        McpEffect::from_hints(self.read_only_hint, self.destructive_hint)
    }
}

/// A catalog that cannot be imported. `path` locates the problem in the JSON document
/// (`tools[3].annotations.readOnlyHint`); it is empty for a document that is not JSON.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
pub struct ImportError {
    /// Where in the document: `tools[3].name`, `result.tools`, `[0].annotations`, or `""`.
    pub path: String,
    /// What is wrong and what was expected.
    pub message: String,
}

impl ImportError {
    fn at(path: impl Into<String>, message: impl Into<String>) -> ImportError {
        ImportError {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Parses catalog text (see the module docs for the accepted shapes).
///
/// # Errors
///
/// [`ImportError`] when the text is not JSON (with line and column), has no tool list, a tool
/// is not an object, lacks a string `name`, repeats a name, or has a hint that is not a JSON
/// boolean.
pub fn parse_catalog(text: &str) -> Result<Vec<McpTool>, ImportError> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        ImportError::at(
            "",
            format!(
                "not JSON: {} at line {} column {}",
                e.to_string()
                    .split(" at line")
                    .next()
                    .unwrap_or("syntax error"),
                e.line(),
                e.column()
            ),
        )
    })?;
    catalog_from_value(&value)
}

/// Finds the tool array in a parsed document: returns it and its JSON path (`""` for a bare
/// array, `tools`, or `result.tools`).
///
/// # Errors
///
/// [`ImportError`] when the document has no tool array where one belongs.
pub fn tool_array(value: &Value) -> Result<(&[Value], &'static str), ImportError> {
    match value {
        Value::Array(a) => Ok((a, "")),
        Value::Object(o) => {
            if let Some(result) = o.get("result") {
                let Some(tools) = result.get("tools") else {
                    return Err(ImportError::at(
                        "result",
                        "a JSON-RPC result without `tools`; expected a tools/list result",
                    ));
                };
                return match tools {
                    Value::Array(a) => Ok((a, "result.tools")),
                    other => Err(ImportError::at(
                        "result.tools",
                        format!(
                            "expected an array of tools, found {}",
                            crate::args::json_kind(other)
                        ),
                    )),
                };
            }
            if let Some(err) = o.get("error") {
                return Err(ImportError::at(
                    "error",
                    format!("the document is a JSON-RPC error response: {err}"),
                ));
            }
            match o.get("tools") {
                Some(Value::Array(a)) => Ok((a, "tools")),
                Some(other) => Err(ImportError::at(
                    "tools",
                    format!("expected an array of tools, found {}", crate::args::json_kind(other)),
                )),
                None => Err(ImportError::at(
                    "",
                    "expected a tools/list result ({\"tools\": [...]}), a JSON-RPC response or an array of tools; found an object without `tools`",
                )),
            }
        }
        other => Err(ImportError::at(
            "",
            format!(
                "expected a tools/list result or an array of tools, found {}",
                crate::args::json_kind(other)
            ),
        )),
    }
}

/// The JSON path of element `i` of an array at `base`.
pub(crate) fn elem_path(base: &str, i: usize) -> String {
    format!("{base}[{i}]")
}

/// `(readOnlyHint, destructiveHint)`, each `None` when not given.
pub type Hints = (Option<bool>, Option<bool>);

/// Reads the two hints of an MCP tool object's `annotations`. Returns `None` when the tool has
/// no `annotations` member, else `(readOnlyHint, destructiveHint)`.
///
/// # Errors
///
/// [`ImportError`] at `<path>.annotations` when it is not an object, or at
/// `<path>.annotations.<hint>` when a hint is present but not a JSON boolean.
pub fn read_hints(
    tool: &serde_json::Map<String, Value>,
    path: &str,
) -> Result<Option<Hints>, ImportError> {
    let Some(annotations) = tool.get("annotations") else {
        return Ok(None);
    };
    let Value::Object(a) = annotations else {
        return Err(ImportError::at(
            format!("{path}.annotations"),
            format!(
                "expected an object, found {}",
                crate::args::json_kind(annotations)
            ),
        ));
    };
    let hint = |key: &str| -> Result<Option<bool>, ImportError> {
        match a.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(ImportError::at(
                format!("{path}.annotations.{key}"),
                format!(
                    "expected true or false, found {} (leave the hint out to use the spec default)",
                    crate::args::json_kind(other)
                ),
            )),
        }
    };
    Ok(Some((hint("readOnlyHint")?, hint("destructiveHint")?)))
}

/// Reads the two hints written at the top level of an MCP tool object, as catalogs that
/// flatten `annotations` into the row do; `null` there means not given.
///
/// # Errors
///
/// [`ImportError`] at `<path>.<hint>` when a hint is neither a JSON boolean nor `null`.
pub fn read_top_level_hints(
    tool: &serde_json::Map<String, Value>,
    path: &str,
) -> Result<Hints, ImportError> {
    let hint = |key: &str| -> Result<Option<bool>, ImportError> {
        match tool.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(ImportError::at(
                format!("{path}.{key}"),
                format!(
                    "expected true, false or null, found {} (leave the hint out to use the spec default)",
                    crate::args::json_kind(other)
                ),
            )),
        }
    };
    Ok((hint("readOnlyHint")?, hint("destructiveHint")?))
}

/// One hint from its two places: the value both give, the one place's value, or, when they
/// disagree, `stricter` with a warning.
fn merge_hint(
    path: &str,
    key: &str,
    annotated: Option<bool>,
    top: Option<bool>,
    stricter: bool,
    warnings: &mut Vec<String>,
) -> Option<bool> {
    match (annotated, top) {
        (Some(a), Some(t)) if a != t => {
            warnings.push(format!(
                "{path}: `{key}` is {t} at the top level but {a} in `annotations`: kept {stricter}, the stricter"
            ));
            Some(stricter)
        }
        (Some(a), _) => Some(a),
        (None, t) => t,
    }
}

/// Reads the tools of a parsed catalog (see [`parse_catalog`]).
///
/// # Errors
///
/// As [`parse_catalog`], minus the JSON syntax error.
pub fn catalog_from_value(value: &Value) -> Result<Vec<McpTool>, ImportError> {
    let (items, base) = tool_array(value)?;
    let mut tools = Vec::with_capacity(items.len());
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        let path = elem_path(base, i);
        let Value::Object(obj) = item else {
            return Err(ImportError::at(
                path,
                format!(
                    "expected a tool object, found {}",
                    crate::args::json_kind(item)
                ),
            ));
        };
        let name = match obj.get("name") {
            Some(Value::String(s)) if !s.is_empty() => s.as_str(),
            Some(Value::String(_)) => {
                return Err(ImportError::at(
                    format!("{path}.name"),
                    "the tool name is empty",
                ))
            }
            Some(other) => {
                return Err(ImportError::at(
                    format!("{path}.name"),
                    format!("expected a string, found {}", crate::args::json_kind(other)),
                ))
            }
            None => return Err(ImportError::at(path, "the tool has no `name`")),
        };
        if name.contains('\n') {
            return Err(ImportError::at(
                format!("{path}.name"),
                "the tool name contains a line break, which a warden name cannot hold",
            ));
        }
        if let Some(first) = seen.insert(name, i) {
            return Err(ImportError::at(
                format!("{path}.name"),
                format!(
                    "duplicate tool name `{name}` (first at {}.name)",
                    elem_path(base, first)
                ),
            ));
        }
        let annotated = read_hints(obj, &path)?;
        let top = read_top_level_hints(obj, &path)?;
        let mut warnings = Vec::new();
        let read_only_hint = merge_hint(
            &path,
            "readOnlyHint",
            annotated.and_then(|h| h.0),
            top.0,
            false,
            &mut warnings,
        );
        let destructive_hint = merge_hint(
            &path,
            "destructiveHint",
            annotated.and_then(|h| h.1),
            top.1,
            true,
            &mut warnings,
        );
        tools.push(McpTool {
            name: name.to_string(),
            read_only_hint,
            destructive_hint,
            has_annotations: annotated.is_some() || top.0.is_some() || top.1.is_some(),
            warnings,
        });
    }
    Ok(tools)
}

/// Whether `s` can be written as a bare warden identifier (`[A-Za-z_][A-Za-z0-9_.-]*`).
pub fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// `s` as a warden name: bare when it is an identifier, else a quoted string with `"` and `\`
/// escaped. Never changes the name's text.
pub fn warden_name(s: &str) -> String {
    if is_ident(s) {
        s.to_string()
    } else {
        quote(s)
    }
}

/// Checks a `--server` name: non-empty, no `__` (the connector separator), not ending in `_`
/// (`mcp__x___y` would read as server `x`, tool `_y`: a server `x_` could never be named
/// apart from it), no line break, quote or backslash.
///
/// # Errors
///
/// A message saying what is wrong with the name.
pub fn check_server_name(server: &str) -> Result<(), String> {
    if server.is_empty() {
        return Err("the server name is empty".to_string());
    }
    if server.contains("__") {
        return Err(format!(
            "server name `{server}` contains `__`, which separates server and tool in mcp__<server>__<tool>"
        ));
    }
    if server.ends_with('_') {
        return Err(format!(
            "server name `{server}` ends with `_`: in mcp__{server}__<tool> the separator `__` would be read one `_` early (server `{}`, tool `_<tool>`)",
            server.trim_end_matches('_')
        ));
    }
    if server.contains('\n') || server.contains('"') || server.contains('\\') {
        return Err(format!(
            "server name `{}` contains a line break, quote or backslash",
            server.escape_debug()
        ));
    }
    Ok(())
}

/// Writes a complete, loadable policy declaring `tools`: a header (policy name, the three
/// effects, `unknown deny`, one mode that confirms `write` and `delete`, a connector prefix when
/// `server` is given) and one `tool` declaration per tool, named `mcp__<server>__<name>` when
/// `server` is given. Names that are not identifiers are quoted, never changed. A tool whose
/// effect rests on a defaulted hint, or whose hints disagree between `annotations` and the top
/// level, says so in a trailing comment. `source` names the input in the header comment.
///
/// The text is laid out by [`crate::fmt::format_source`] when it parses (it always does for
/// names accepted by [`catalog_from_value`]).
///
/// # Errors
///
/// The message of [`check_server_name`] for a bad `server`.
pub fn to_warden(tools: &[McpTool], server: Option<&str>, source: &str) -> Result<String, String> {
    if let Some(s) = server {
        check_server_name(s)?;
    }
    let mut out = intro(tools, source);
    let policy_name = match server {
        Some(s) => format!("mcp-{s}"),
        None => "mcp-import".to_string(),
    };
    let _ = writeln!(out, "policy {} version 1\n", quote(&policy_name));
    out.push_str("effects none, write, delete\n\n");
    out.push_str("mode agent { confirm write, delete }\ndefault mode agent\n\n");
    out.push_str("unknown deny\n");
    out.push_str("confirm fields \"confirmed\"\n");
    out.push_str("trust annotations tighten\n");
    if server.is_some() {
        out.push_str("connectors prefix \"mcp__\"\n");
    }
    out.push('\n');
    tool_lines(&mut out, tools, server);
    Ok(crate::fmt::format_source(&out, "import.warden").unwrap_or(out))
}

/// Writes only the `tool` declarations of [`to_warden`] (with its comments), no `policy`,
/// `effects`, mode or other setting, so the text can be included into an existing policy
/// (`include "github.tools.warden"`). The including policy must declare the effects `none`,
/// `write` and `delete`.
///
/// # Errors
///
/// The message of [`check_server_name`] for a bad `server`.
pub fn to_warden_tools(
    tools: &[McpTool],
    server: Option<&str>,
    source: &str,
) -> Result<String, String> {
    if let Some(s) = server {
        check_server_name(s)?;
    }
    let mut out = intro(tools, source);
    out.push_str(
        "# Tool declarations only: include this file from a policy that declares\n\
         # `effects none, write, delete`.\n\n",
    );
    tool_lines(&mut out, tools, server);
    Ok(crate::fmt::format_source(&out, "import.warden").unwrap_or(out))
}

/// The comment lines every import starts with.
fn intro(tools: &[McpTool], source: &str) -> String {
    let mut out = String::new();
    let source_line = source.replace('\n', " ");
    let _ = writeln!(
        out,
        "# Imported by `toolwarden import mcp` from {source_line}: {} tool{}.",
        tools.len(),
        if tools.len() == 1 { "" } else { "s" }
    );
    out.push_str(
        "# Effects come from MCP annotations with the spec's defaults (2025-11-25: a missing\n\
         # readOnlyHint is false, a missing destructiveHint is true). Annotations are untrusted\n\
         # hints from the server: review every effect before relying on it.\n",
    );
    out
}

/// One `tool` line per tool, with a trailing comment for defaulted or disagreeing hints.
fn tool_lines(out: &mut String, tools: &[McpTool], server: Option<&str>) {
    for t in tools {
        let full = match server {
            Some(s) => format!("mcp__{s}__{}", t.name),
            None => t.name.clone(),
        };
        let _ = write!(
            out,
            "tool {} {{ effect {} }}",
            warden_name(&full),
            t.effect().as_str()
        );
        let mut defaulted = Vec::new();
        if t.read_only_hint.is_none() {
            defaulted.push("readOnlyHint");
        }
        if t.read_only_hint != Some(true) && t.destructive_hint.is_none() {
            defaulted.push("destructiveHint");
        }
        let mut notes = Vec::new();
        if !t.has_annotations {
            notes.push("no annotations: spec defaults".to_string());
        } else if !defaulted.is_empty() {
            notes.push(format!("defaulted: {}", defaulted.join(", ")));
        }
        if !t.warnings.is_empty() {
            notes.push("hints disagree: kept the stricter".to_string());
        }
        if !notes.is_empty() {
            let _ = write!(out, "  # {}", notes.join("; "));
        }
        out.push('\n');
    }
}
