//! Seed 004's `tool_policies.yaml` and the legacy `tools.yaml` catalog, read as warden tool
//! declarations.
//!
//! `tool_policies.yaml`:
//!
//! ```yaml
//! version: 1
//! defaults:
//!   operation_type: read_only        # read_only | transactional
//!   require_confirmation: false      # a YAML boolean, never the string "true"
//! tool_policies:
//!   alterar_plano:
//!     operation_type: transactional
//!     require_confirmation: true
//!     requires: [new_plan_id]
//! ```
//!
//! Legacy `tools.yaml` (the catalog: endpoint, schema, enablement, cache), either a mapping
//! `tools: {name: {...}}` or a list `tools: [{name: ..., ...}]`, whose entries may carry the
//! legacy policy fields `tool_type` (`read_only` | `transactional`), `requires`,
//! `confirmation_required` (boolean) and `execution_policy` (`auto` | `confirm` | `blocked`),
//! plus the catalog fields `description`, `endpoint`, `schema`, `enabled` and `cache`, which
//! the guard does not use except `enabled: false` (the tool is disabled).
//!
//! How a tool's attributes are decided (seed 004, "Compatibilidade"):
//!
//! * a tool with an entry in `tool_policies.yaml`: `operation_type` and confirmation come from
//!   the entry, else from its `defaults`; the legacy fields of that tool are not read, except
//!   `requires` when the entry has none;
//! * a tool only in `tools.yaml`: its legacy fields, else the `defaults` of
//!   `tool_policies.yaml` (when there is one);
//! * an operation type that neither the entry nor `defaults` gives fails closed:
//!   `transactional`, with a `yaml-no-operation-type` warning at the entry; confirmation that
//!   neither gives is off;
//! * `enabled: false` in the catalog disables the tool whatever `tool_policies.yaml` says;
//! * `read_only` is effect `none`, `transactional` is effect `write`.
//!
//! Every problem is reported, each with the YAML file's `line:col`: unknown keys (with a
//! "did you mean"), a string where a boolean is required (`"true"` is not `true`), unknown
//! values, wrong types, YAML syntax errors. Positions of keys written in YAML's block style are
//! exact; a key inside a flow mapping (`{a: 1}`) is reported at its nearest block-style parent.

use std::collections::HashMap;

use serde_yaml::{Mapping, Value};

use crate::check::suggest;
use crate::diagnostic::Diagnostic;
use crate::syntax::ast::{FileId, Name, PolicyFile, Span, ToolAttr, ToolDecl};

/// One YAML file registered in the policy's sources.
pub(crate) struct YamlFile<'a> {
    /// Its id in the sources.
    pub file: FileId,
    /// Its text.
    pub text: &'a str,
}

/// The result of reading the YAML files: tool declarations whose spans point into the YAML,
/// the `version` of `tool_policies.yaml`, and every diagnostic.
pub(crate) struct Converted {
    pub tools: Vec<ToolDecl>,
    pub version: Option<u64>,
    pub diagnostics: Vec<Diagnostic>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    ReadOnly,
    Transactional,
}

impl Op {
    fn effect(self) -> &'static str {
        match self {
            Op::ReadOnly => "none",
            Op::Transactional => "write",
        }
    }
}

/// One tool's settings as written, each with the span that decided it.
#[derive(Clone, Debug, Default)]
struct Entry {
    key: Span,
    op: Option<(Op, Span)>,
    confirm: Option<(bool, Span)>,
    requires: Option<(Vec<(String, Span)>, Span)>,
    enabled: Option<(bool, Span)>,
    blocked: Option<Span>,
}

/// Reads `tool_policies.yaml` and/or the legacy `tools.yaml` into tool declarations.
pub(crate) fn convert(policies: Option<&YamlFile<'_>>, legacy: Option<&YamlFile<'_>>) -> Converted {
    let mut diagnostics = Vec::new();
    let mut version = None;
    let mut defaults = Entry::default();
    let mut entries: Vec<(String, Entry)> = Vec::new();
    if let Some(f) = policies {
        let mut r = Reader::new(f, &mut diagnostics);
        if let Some(root) = r.parse() {
            let (v, d, e) = r.tool_policies(&root);
            version = v;
            defaults = d;
            entries = e;
        }
    }
    let mut legacy_entries: Vec<(String, Entry)> = Vec::new();
    if let Some(f) = legacy {
        let mut r = Reader::new(f, &mut diagnostics);
        if let Some(root) = r.parse() {
            legacy_entries = r.legacy_tools(&root);
        }
    }
    let legacy_of: HashMap<&str, &Entry> = legacy_entries
        .iter()
        .map(|(n, e)| (n.as_str(), e))
        .collect();
    let mut tools = Vec::new();
    for (name, entry) in &entries {
        let leg = legacy_of.get(name.as_str()).copied();
        let op = entry.op.or(defaults.op).unwrap_or_else(|| {
            transactional_by_default(name, entry.key, Source::Policies, &mut diagnostics)
        });
        let confirm = entry.confirm.or(defaults.confirm);
        let requires = entry
            .requires
            .clone()
            .or_else(|| leg.and_then(|l| l.requires.clone()));
        let enabled = leg.and_then(|l| l.enabled);
        tools.push(declare(name, entry.key, op, confirm, requires, enabled));
    }
    for (name, leg) in &legacy_entries {
        if entries.iter().any(|(n, _)| n == name) {
            continue;
        }
        let op = leg.op.or(defaults.op).unwrap_or_else(|| {
            transactional_by_default(name, leg.key, Source::Legacy, &mut diagnostics)
        });
        let confirm = match (leg.blocked, leg.confirm) {
            (_, Some(c)) => Some(c),
            _ => defaults.confirm,
        };
        let enabled = match leg.blocked {
            Some(span) => Some((false, span)),
            None => leg.enabled,
        };
        tools.push(declare(
            name,
            leg.key,
            op,
            confirm,
            leg.requires.clone(),
            enabled,
        ));
    }
    Converted {
        tools,
        version,
        diagnostics,
    }
}

/// Which file a tool's entry comes from, for the fail-closed warning's wording.
#[derive(Clone, Copy)]
enum Source {
    /// An entry of `tool_policies.yaml`.
    Policies,
    /// An entry of the legacy `tools.yaml` catalog.
    Legacy,
}

/// The operation type of a tool whose entry names none and whose `defaults` set none: fail
/// closed, `transactional` (effect `write`: counted against the turn limit, gated as a
/// change), with a warning at the entry saying so and what to write.
fn transactional_by_default(
    name: &str,
    key: Span,
    source: Source,
    diagnostics: &mut Vec<Diagnostic>,
) -> (Op, Span) {
    let (message, help) = match source {
        Source::Policies => (
            format!(
                "`{name}` has no `operation_type` and `defaults` sets none: treated as `transactional`"
            ),
            "write `operation_type: read_only` in the entry if the tool changes nothing, or `operation_type: transactional` to keep this; `defaults: operation_type:` sets it for every entry",
        ),
        Source::Legacy => (
            format!(
                "`{name}` has no `tool_type` and no `defaults.operation_type` applies: treated as `transactional`"
            ),
            "write `tool_type: read_only` in the catalog entry if the tool changes nothing, or `tool_type: transactional` to keep this",
        ),
    };
    diagnostics.push(
        Diagnostic::warning("yaml-no-operation-type", message)
            .at(key, "no operation type")
            .help(help),
    );
    (Op::Transactional, key)
}

fn declare(
    name: &str,
    key: Span,
    op: (Op, Span),
    confirm: Option<(bool, Span)>,
    requires: Option<(Vec<(String, Span)>, Span)>,
    enabled: Option<(bool, Span)>,
) -> ToolDecl {
    let named = |text: &str, span: Span| Name {
        text: text.to_string(),
        span,
        quoted: true,
    };
    let (op, op_span) = op;
    let mut attrs = vec![ToolAttr::Effect {
        name: named(op.effect(), op_span),
        span: op_span,
    }];
    if let Some((names, span)) = requires {
        if !names.is_empty() {
            attrs.push(ToolAttr::Requires {
                names: names.iter().map(|(n, s)| named(n, *s)).collect(),
                span,
            });
        }
    }
    if let Some((true, span)) = confirm {
        attrs.push(ToolAttr::ConfirmAlways { span });
    }
    if let Some((false, span)) = enabled {
        attrs.push(ToolAttr::Enabled { value: false, span });
    }
    // The declaration covers its key and every attribute written in the same file, so checks
    // that look inside a declaration (an undefined effect) find them.
    let span = attrs
        .iter()
        .map(ToolAttr::span)
        .filter(|s| s.file == key.file)
        .fold(key, Span::to);
    ToolDecl {
        name: named(name, key),
        attrs,
        rules: Vec::new(),
        span,
    }
}

/// Builds the syntax tree of an `include yaml`: one file of tool declarations.
pub(crate) fn include_file(
    policies: Option<&YamlFile<'_>>,
    legacy: Option<&YamlFile<'_>>,
) -> (PolicyFile, Vec<Diagnostic>) {
    let converted = convert(policies, legacy);
    let file = policies.or(legacy).map_or(FileId(0), |f| f.file);
    (
        PolicyFile {
            file,
            decls: converted
                .tools
                .into_iter()
                .map(crate::syntax::ast::Decl::Tool)
                .collect(),
            comments: Vec::new(),
            defaults_rules: Vec::new(),
        },
        converted.diagnostics,
    )
}

/// Reads one YAML file: parses it with serde_yaml, walks the value, reports problems with
/// positions from a block-style key index.
struct Reader<'a, 'd> {
    file: FileId,
    text: &'a str,
    index: HashMap<Vec<String>, KeyPos>,
    diagnostics: &'d mut Vec<Diagnostic>,
}

#[derive(Clone, Copy, Debug)]
struct KeyPos {
    key: (usize, usize),
    value: Option<(usize, usize)>,
}

const POLICY_KEYS: &[&str] = &["version", "defaults", "tool_policies"];
const DEFAULT_KEYS: &[&str] = &["operation_type", "require_confirmation"];
const ENTRY_KEYS: &[&str] = &["operation_type", "require_confirmation", "requires"];
const LEGACY_ROOT_KEYS: &[&str] = &["version", "tools"];
const LEGACY_KEYS: &[&str] = &[
    "name",
    "tool_type",
    "requires",
    "confirmation_required",
    "execution_policy",
    "description",
    "endpoint",
    "schema",
    "enabled",
    "cache",
];

impl<'a, 'd> Reader<'a, 'd> {
    fn new(f: &YamlFile<'a>, diagnostics: &'d mut Vec<Diagnostic>) -> Reader<'a, 'd> {
        Reader {
            file: f.file,
            text: f.text,
            // Filled by `parse`, once the nesting depth is known to be within the cap.
            index: HashMap::new(),
            diagnostics,
        }
    }

    fn span(&self, range: (usize, usize)) -> Span {
        Span::new(self.file, range.0, range.1)
    }

    /// The span of the key at `path`, or of its nearest indexed parent (or the file start).
    fn key_span(&self, path: &[&str]) -> Span {
        for len in (0..=path.len()).rev() {
            let key: Vec<String> = path[..len].iter().map(|s| s.to_string()).collect();
            if let Some(p) = self.index.get(&key) {
                return self.span(p.key);
            }
        }
        Span::new(self.file, 0, 0)
    }

    /// The span of the value at `path` when it is written on its key's line, else the key's.
    fn value_span(&self, path: &[&str]) -> Span {
        let key: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        match self.index.get(&key) {
            Some(KeyPos { value: Some(v), .. }) => self.span(*v),
            _ => self.key_span(path),
        }
    }

    fn error(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }

    fn parse(&mut self) -> Option<Value> {
        if self.text.trim().is_empty() {
            return Some(Value::Mapping(Mapping::new()));
        }
        // Nesting is checked before the key index and the YAML parser read the text; both take
        // time that grows with its depth.
        let parsed = super::yaml_depth::parse::<Value>(self.text);
        if !matches!(parsed, Err(super::yaml_depth::YamlError::TooDeep(_))) {
            self.index = index_keys(self.text);
        }
        match parsed {
            Ok(v) => Some(v),
            Err(super::yaml_depth::YamlError::TooDeep(at)) => {
                let end = self
                    .text
                    .get(at..)
                    .and_then(|rest| rest.chars().next())
                    .map_or(at, |c| at + c.len_utf8());
                self.error(
                    Diagnostic::error(
                        "too-deep",
                        format!(
                            "YAML nested more than {} levels deep",
                            crate::limits::MAX_YAML_DEPTH
                        ),
                    )
                    .at(Span::new(self.file, at, end), "")
                    .help("flatten the YAML: tool policies need a few levels of nesting"),
                );
                None
            }
            Err(super::yaml_depth::YamlError::Syntax(e)) => {
                // From line and column (1-based, in characters), never trusting an index to
                // fall on a character boundary.
                let at = e
                    .location()
                    .map_or(0, |l| byte_offset(self.text, l.line(), l.column()));
                // serde_yaml puts a duplicated key at its mapping's start; the key index holds
                // the second occurrence, which is the one to point at.
                let at = duplicate_key_offset(&self.index, &e.to_string()).unwrap_or(at);
                let end = self
                    .text
                    .get(at..)
                    .and_then(|rest| rest.chars().next())
                    .map_or(at, |c| at + c.len_utf8());
                let message = e.to_string();
                let message = message
                    .split(" at line ")
                    .next()
                    .unwrap_or(&message)
                    .to_string();
                self.error(
                    Diagnostic::error("yaml-syntax", format!("invalid YAML: {message}"))
                        .at(Span::new(self.file, at, end), "")
                        .help("fix the YAML syntax; each key is written once, `key: value`"),
                );
                None
            }
        }
    }

    /// The keys of a mapping as strings; reports non-string keys and unknown keys.
    fn keys<'v>(
        &mut self,
        map: &'v Mapping,
        path: &[&str],
        known: &[&str],
        what: &str,
    ) -> Vec<(String, &'v Value)> {
        let mut out = Vec::new();
        for (k, v) in map {
            let Some(key) = k.as_str() else {
                self.error(
                    Diagnostic::error(
                        "yaml-key",
                        format!("a key of {what} is not a string: {}", short(k)),
                    )
                    .at(self.key_span(path), "")
                    .help("keys are names such as `operation_type`"),
                );
                continue;
            };
            if !known.is_empty() && !known.contains(&key) {
                let mut p = path.to_vec();
                p.push(key);
                let mut d =
                    Diagnostic::error("yaml-unknown-key", format!("unknown key `{key}` in {what}"))
                        .at(self.key_span(&p), "not a key toolwarden knows");
                d = match suggest(key, known.iter().copied()) {
                    Some(s) => d.help(format!("did you mean `{s}`? keys here are {}", list(known))),
                    None => d.help(format!("keys here are {}", list(known))),
                };
                self.error(d);
                continue;
            }
            out.push((key.to_string(), v));
        }
        out
    }

    fn mapping<'v>(&mut self, v: &'v Value, path: &[&str], what: &str) -> Option<&'v Mapping> {
        match v {
            Value::Mapping(m) => Some(m),
            Value::Null => None,
            other => {
                self.error(
                    Diagnostic::error(
                        "yaml-type",
                        format!("{what} must be a mapping, not {}", kind(other)),
                    )
                    .at(self.value_span(path), "")
                    .help("write one `key: value` per line under it"),
                );
                None
            }
        }
    }

    fn boolean(&mut self, v: &Value, path: &[&str]) -> Option<(bool, Span)> {
        let span = self.value_span(path);
        let key = path.last().copied().unwrap_or("");
        match v {
            Value::Bool(b) => Some((*b, span)),
            Value::String(s) => {
                let lower = s.to_ascii_lowercase();
                let help = match lower.as_str() {
                    "true" | "yes" | "on" | "y" | "1" => {
                        format!("write `{key}: true` without quotes")
                    }
                    "false" | "no" | "off" | "n" | "0" => {
                        format!("write `{key}: false` without quotes")
                    }
                    _ => format!("write `{key}: true` or `{key}: false`"),
                };
                self.error(
                    Diagnostic::error(
                        "yaml-not-boolean",
                        format!("`{key}` must be a boolean, not the string \"{s}\""),
                    )
                    .at(span, "a string, not a boolean")
                    .help(help),
                );
                None
            }
            other => {
                self.error(
                    Diagnostic::error(
                        "yaml-not-boolean",
                        format!("`{key}` must be a boolean, not {}", kind(other)),
                    )
                    .at(span, "")
                    .help(format!("write `{key}: true` or `{key}: false`")),
                );
                None
            }
        }
    }

    fn op(&mut self, v: &Value, path: &[&str]) -> Option<(Op, Span)> {
        let span = self.value_span(path);
        let key = path.last().copied().unwrap_or("");
        match v.as_str() {
            Some("read_only") => Some((Op::ReadOnly, span)),
            Some("transactional") => Some((Op::Transactional, span)),
            Some(other) => {
                let mut d =
                    Diagnostic::error("yaml-value", format!("unknown `{key}` value `{other}`"))
                        .at(span, "");
                d = match suggest(other, ["read_only", "transactional"].into_iter()) {
                    Some(s) => d.help(format!("did you mean `{s}`? the values are `read_only` and `transactional`")),
                    None => d.help("the values are `read_only` (effect none) and `transactional` (effect write)"),
                };
                self.error(d);
                None
            }
            None => {
                self.error(
                    Diagnostic::error(
                        "yaml-value",
                        format!("`{key}` must be `read_only` or `transactional`, not {}", kind(v)),
                    )
                    .at(span, "")
                    .help("the values are `read_only` (effect none) and `transactional` (effect write)"),
                );
                None
            }
        }
    }

    fn requires(&mut self, v: &Value, path: &[&str]) -> Option<(Vec<(String, Span)>, Span)> {
        let span = self.value_span(path);
        let Value::Sequence(items) = v else {
            let help = match v {
                Value::String(s) => format!("write a list: `requires: [{s}]`"),
                _ => "write a list of argument names: `requires: [order_id, reason]`".to_string(),
            };
            self.error(
                Diagnostic::error(
                    "yaml-type",
                    format!(
                        "`requires` must be a list of argument names, not {}",
                        kind(v)
                    ),
                )
                .at(span, "")
                .help(help),
            );
            return None;
        };
        let mut names = Vec::new();
        for item in items {
            match item.as_str() {
                Some(s) if !s.trim().is_empty() => names.push((s.to_string(), span)),
                _ => self.error(
                    Diagnostic::error(
                        "yaml-type",
                        format!(
                            "an item of `requires` must be a non-empty name, not {}",
                            short(item)
                        ),
                    )
                    .at(span, "")
                    .help("write argument names: `requires: [order_id, reason]`"),
                ),
            }
        }
        Some((names, span))
    }

    fn root<'v>(&mut self, root: &'v Value, what: &str) -> Option<&'v Mapping> {
        match root {
            Value::Mapping(m) => Some(m),
            other => {
                self.error(
                    Diagnostic::error(
                        "yaml-type",
                        format!("{what} must be a mapping at the top, not {}", kind(other)),
                    )
                    .at(Span::new(self.file, 0, 0), "")
                    .help("see seed 004: `version`, `defaults` and `tool_policies` at the top"),
                );
                None
            }
        }
    }

    /// `version`, `defaults` and the entries of `tool_policies.yaml`.
    fn tool_policies(&mut self, root: &Value) -> (Option<u64>, Entry, Vec<(String, Entry)>) {
        let mut version = None;
        let mut defaults = Entry::default();
        let mut entries = Vec::new();
        let Some(map) = self.root(root, "tool_policies.yaml") else {
            return (version, defaults, entries);
        };
        for (key, v) in self.keys(map, &[], POLICY_KEYS, "tool_policies.yaml") {
            match key.as_str() {
                "version" => match v.as_u64() {
                    Some(n) => version = Some(n),
                    None => self.error(
                        Diagnostic::error(
                            "yaml-value",
                            format!("`version` must be a whole number, not {}", short(v)),
                        )
                        .at(self.value_span(&["version"]), "")
                        .help("write `version: 1`"),
                    ),
                },
                "defaults" => {
                    defaults.key = self.key_span(&["defaults"]);
                    if let Some(m) = self.mapping(v, &["defaults"], "`defaults`") {
                        for (k, v) in self.keys(m, &["defaults"], DEFAULT_KEYS, "`defaults`") {
                            let path = ["defaults", k.as_str()];
                            match k.as_str() {
                                "operation_type" => defaults.op = self.op(v, &path),
                                _ => defaults.confirm = self.boolean(v, &path),
                            }
                        }
                    }
                }
                _ => {
                    let Some(m) = self.mapping(v, &["tool_policies"], "`tool_policies`") else {
                        continue;
                    };
                    for (name, v) in self.keys(m, &["tool_policies"], &[], "`tool_policies`") {
                        let mut e = Entry {
                            key: self.key_span(&["tool_policies", &name]),
                            ..Entry::default()
                        };
                        if name.trim().is_empty() {
                            self.error(
                                Diagnostic::error("yaml-value", "a tool name cannot be empty")
                                    .at(e.key, "")
                                    .help("write the name the agent uses for the tool"),
                            );
                            continue;
                        }
                        let what = format!("the policy of `{name}`");
                        if let Some(m) = self.mapping(v, &["tool_policies", &name], &what) {
                            for (k, v) in self.keys(m, &["tool_policies", &name], ENTRY_KEYS, &what)
                            {
                                let path = ["tool_policies", name.as_str(), k.as_str()];
                                match k.as_str() {
                                    "operation_type" => e.op = self.op(v, &path),
                                    "require_confirmation" => e.confirm = self.boolean(v, &path),
                                    _ => e.requires = self.requires(v, &path),
                                }
                            }
                        }
                        entries.push((name, e));
                    }
                }
            }
        }
        (version, defaults, entries)
    }

    /// The tools of a legacy `tools.yaml` catalog.
    fn legacy_tools(&mut self, root: &Value) -> Vec<(String, Entry)> {
        let mut out = Vec::new();
        let Some(map) = self.root(root, "tools.yaml") else {
            return out;
        };
        for (key, v) in self.keys(map, &[], LEGACY_ROOT_KEYS, "tools.yaml") {
            if key != "tools" {
                continue;
            }
            match v {
                Value::Mapping(m) => {
                    for (name, v) in self.keys(m, &["tools"], &[], "`tools`") {
                        let path = ["tools", name.as_str()];
                        if let Some(e) = self.legacy_entry(v, &path, Some(&name)) {
                            out.push((name.clone(), e));
                        }
                    }
                }
                Value::Sequence(items) => {
                    for (i, v) in items.iter().enumerate() {
                        let idx = i.to_string();
                        let path = ["tools", idx.as_str()];
                        let name = v.get("name").and_then(Value::as_str).map(str::to_string);
                        let Some(name) = name.filter(|n| !n.trim().is_empty()) else {
                            self.error(
                                Diagnostic::error(
                                    "yaml-value",
                                    format!("tool #{} of `tools` has no `name`", i + 1),
                                )
                                .at(self.key_span(&path), "")
                                .help("give every tool `name: <the name the agent uses>`"),
                            );
                            continue;
                        };
                        if let Some(mut e) = self.legacy_entry(v, &path, None) {
                            let mut np = path.to_vec();
                            np.push("name");
                            e.key = self.value_span(&np);
                            out.push((name, e));
                        }
                    }
                }
                Value::Null => {}
                other => self.error(
                    Diagnostic::error(
                        "yaml-type",
                        format!("`tools` must be a mapping or a list, not {}", kind(other)),
                    )
                    .at(self.value_span(&["tools"]), "")
                    .help("write `tools:` followed by one entry per tool"),
                ),
            }
        }
        let mut seen: HashMap<String, Span> = HashMap::new();
        out.retain(|(name, e)| {
            if let Some(first) = seen.get(name) {
                self.diagnostics.push(
                    Diagnostic::error("duplicate", format!("tool `{name}` is listed twice"))
                        .at(e.key, "listed again here")
                        .help("keep one entry per tool")
                        .related(*first, "first listed"),
                );
                return false;
            }
            seen.insert(name.clone(), e.key);
            true
        });
        out
    }

    fn legacy_entry(&mut self, v: &Value, path: &[&str], name: Option<&str>) -> Option<Entry> {
        let mut e = Entry {
            key: self.key_span(path),
            ..Entry::default()
        };
        let what = match name {
            Some(n) => format!("the catalog entry of `{n}`"),
            None => "a catalog entry".to_string(),
        };
        let Some(m) = self.mapping(v, path, &what) else {
            return Some(e);
        };
        for (k, v) in self.keys(m, path, LEGACY_KEYS, &what) {
            let mut p = path.to_vec();
            p.push(k.as_str());
            match k.as_str() {
                "tool_type" => e.op = self.op(v, &p),
                "requires" => e.requires = self.requires(v, &p),
                "confirmation_required" => e.confirm = self.boolean(v, &p),
                "enabled" => e.enabled = self.boolean(v, &p),
                "execution_policy" => {
                    let span = self.value_span(&p);
                    match v.as_str() {
                        Some("auto") => {}
                        Some("confirm") => e.confirm = Some((true, span)),
                        Some("blocked") => e.blocked = Some(span),
                        _ => self.error(
                            Diagnostic::error(
                                "yaml-value",
                                format!("unknown `execution_policy` value {}", short(v)),
                            )
                            .at(span, "")
                            .help("the values are `auto`, `confirm` (ask the user first) and `blocked` (never run)"),
                        ),
                    }
                }
                _ => {}
            }
        }
        Some(e)
    }
}

/// Where the second occurrence of a duplicated key is, from serde_yaml's message
/// `a.b: duplicate entry with key "k" at line …`.
fn duplicate_key_offset(index: &HashMap<Vec<String>, KeyPos>, message: &str) -> Option<usize> {
    let (path, rest) = match message.split_once(": duplicate entry with key \"") {
        Some((path, rest)) => (path, rest),
        None => ("", message.strip_prefix("duplicate entry with key \"")?),
    };
    let key = rest.split('"').next()?;
    let mut full: Vec<String> = if path.is_empty() {
        Vec::new()
    } else {
        path.split('.').map(str::to_string).collect()
    };
    full.push(key.to_string());
    index.get(&full).map(|p| p.key.0)
}

/// The byte offset of 1-based `line` and `column` (in characters) in `text`, clamped to the
/// text.
fn byte_offset(text: &str, line: usize, column: usize) -> usize {
    let mut offset = 0;
    for (i, l) in text.split_inclusive('\n').enumerate() {
        if i + 1 == line {
            return offset
                + l.char_indices()
                    .nth(column.saturating_sub(1))
                    .map_or(l.trim_end_matches('\n').len(), |(b, _)| b);
        }
        offset += l.len();
    }
    text.len()
}

fn list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

fn short(v: &Value) -> String {
    match v {
        Value::String(s) => format!("\"{}\"", s.chars().take(40).collect::<String>()),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => kind(other).to_string(),
    }
}

/// Indexes the keys written in YAML block style: path of keys (list items by their index) ->
/// byte ranges of the key and of a value written on the same line.
fn index_keys(text: &str) -> HashMap<Vec<String>, KeyPos> {
    struct Frame {
        indent: usize,
        comp: String,
        item: bool,
    }
    let mut index = HashMap::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut counters: HashMap<Vec<String>, usize> = HashMap::new();
    let mut offset = 0usize;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let body = line.trim_end_matches(['\n', '\r']);
        let indent = body.len() - body.trim_start_matches(' ').len();
        let mut col = indent;
        let mut rest = &body[indent..];
        if rest.is_empty()
            || rest.starts_with('#')
            || rest.starts_with("---")
            || rest.starts_with("...")
        {
            continue;
        }
        while rest == "-" || rest.starts_with("- ") {
            let dash = start + col;
            while stack.last().is_some_and(|f| f.indent > col) {
                stack.pop();
            }
            if stack.last().is_some_and(|f| f.indent == col && f.item) {
                stack.pop();
            }
            let parent: Vec<String> = stack.iter().map(|f| f.comp.clone()).collect();
            let n = counters.entry(parent).or_insert(0);
            let comp = n.to_string();
            *n += 1;
            stack.push(Frame {
                indent: col,
                comp,
                item: true,
            });
            let after = &rest[1..];
            let skip = after.len() - after.trim_start_matches(' ').len();
            col += 1 + skip;
            rest = &after[skip..];
            let path: Vec<String> = stack.iter().map(|f| f.comp.clone()).collect();
            index.entry(path).or_insert(KeyPos {
                key: (dash, dash + 1),
                value: None,
            });
        }
        let Some((key, key_len, value)) = parse_key(rest) else {
            continue;
        };
        while stack.last().is_some_and(|f| f.indent >= col) {
            stack.pop();
        }
        let mut path: Vec<String> = stack.iter().map(|f| f.comp.clone()).collect();
        path.push(key.clone());
        let key_start = start + col;
        index.insert(
            path,
            KeyPos {
                key: (key_start, key_start + key_len),
                value: value.map(|(a, b)| (key_start + a, key_start + b)),
            },
        );
        stack.push(Frame {
            indent: col,
            comp: key,
            item: false,
        });
    }
    index
}

/// A block-style key at the start of `s`: its text, its byte length as written, and the byte
/// range (relative to `s`) of a value on the same line.
/// A parsed key: its text, its byte length as written, the byte range of a same-line value.
type ParsedKey = (String, usize, Option<(usize, usize)>);

fn parse_key(s: &str) -> Option<ParsedKey> {
    let (key, len) = if let Some(q) = s.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let close = s[1..].find(q)? + 1;
        (s[1..close].to_string(), close + 1)
    } else {
        if s.starts_with(['{', '[', '&', '*', '!', '|', '>']) {
            return None;
        }
        let mut end = None;
        for (i, c) in s.char_indices() {
            if c == ':'
                && s[i + 1..]
                    .chars()
                    .next()
                    .is_none_or(|n| n == ' ' || n == '\t')
            {
                end = Some(i);
                break;
            }
            if c == '#' && i > 0 && s[..i].ends_with(' ') {
                return None;
            }
        }
        let end = end?;
        (s[..end].trim_end().to_string(), end)
    };
    let after = s.get(len..)?;
    let after = after.strip_prefix(':')?;
    let value_off = len + 1 + (after.len() - after.trim_start().len());
    let value_text = s[value_off..].trim_end();
    let value = if value_text.is_empty() || value_text.starts_with('#') {
        None
    } else {
        let quote = value_text
            .chars()
            .next()
            .filter(|c| *c == '"' || *c == '\'');
        let end = match quote {
            Some(q) => value_text[1..].find(q).map_or(value_text.len(), |i| i + 2),
            None if value_text.starts_with(['[', '{']) => value_text.len(),
            None => value_text.find(" #").unwrap_or(value_text.len()),
        };
        Some((value_off, value_off + value_text[..end].trim_end().len()))
    };
    Some((key, len, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_finds_nested_block_keys_and_values() {
        let text = "version: 1\ntool_policies:\n  alterar_plano:\n    require_confirmation: \"true\"  # x\n";
        let ix = index_keys(text);
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let k = ix[&p(&["tool_policies", "alterar_plano", "require_confirmation"])];
        assert_eq!(&text[k.key.0..k.key.1], "require_confirmation");
        let v = k.value.expect("value on the same line");
        assert_eq!(&text[v.0..v.1], "\"true\"");
        let k = ix[&p(&["tool_policies", "alterar_plano"])];
        assert_eq!(&text[k.key.0..k.key.1], "alterar_plano");
        assert!(k.value.is_none());
    }

    #[test]
    fn byte_offsets_count_columns_in_characters() {
        let text = "a: é\nbé: [\n";
        assert_eq!(byte_offset(text, 1, 1), 0);
        assert_eq!(byte_offset(text, 2, 3), 9);
        assert_eq!(byte_offset(text, 2, 99), 12);
        assert_eq!(byte_offset(text, 9, 1), text.len());
    }

    #[test]
    fn arbitrary_text_never_panics() {
        for text in [
            "é: [",
            "- - - x",
            "\"a\": {b: \"c",
            "tools:\n- ",
            "tool_policies:\n  é:\n    requires: 'x\n",
            "&a [*a]",
            ": :",
            "version: 1\n\t- x",
            "\u{FEFF}version: 1",
        ] {
            let f = YamlFile {
                file: FileId(0),
                text,
            };
            let _ = convert(Some(&f), Some(&f));
        }
    }

    proptest::proptest! {
        /// Any text made of YAML's structural characters converts without panicking.
        #[test]
        fn yaml_like_text_never_panics(text in "[a-z_é:\\-\\[\\]{}\"' #\n\t&*!|>,.0-9]{0,120}") {
            let f = YamlFile { file: FileId(0), text: &text };
            let _ = convert(Some(&f), Some(&f));
            let _ = index_keys(&text);
        }
    }

    #[test]
    fn index_handles_lists_of_mappings() {
        let text = "tools:\n- name: a\n  tool_type: read_only\n- name: b\n  enabled: false\n";
        let ix = index_keys(text);
        let p = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let k = ix[&p(&["tools", "1", "enabled"])];
        assert_eq!(&text[k.key.0..k.key.1], "enabled");
        let v = ix[&p(&["tools", "0", "name"])].value.expect("value");
        assert_eq!(&text[v.0..v.1], "a");
    }
}
