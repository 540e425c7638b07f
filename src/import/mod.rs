//! Importers: policies and tool catalogs written in other formats, turned into warden text.
//!
//! * `mcp`: an MCP `tools/list` result -> `tool` declarations with effects from annotations.
//! * `yaml`: seed 004's `tool_policies.yaml` and the legacy `tools.yaml` catalog, through
//!   [`Policy::from_yaml`], `include yaml "tool_policies.yaml" legacy "tools.yaml"` in warden
//!   text, and [`yaml_to_warden`] (`toolwarden import yaml`).

pub mod mcp;
pub(crate) mod yaml;
pub(crate) mod yaml_depth;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::diagnostic::{Diagnostic, PolicyError, Severity, Sources};
use crate::limits;
use crate::policy::Policy;
use crate::syntax::ast::{FileId, Span, ToolAttr};
use crate::syntax::{self, quote, Origin};

/// The warden text every policy imported from YAML starts with (seed 004): effects `none`
/// (`read_only`) and `write` (`transactional`), one mode `agent` without a matrix (YAML has no
/// notion of query intent), `unknown deny`, the confirmation fields `confirmed` and
/// `confirmation`, and at most one transactional call per turn.
pub fn yaml_header(name: &str, version: Option<u64>) -> String {
    let version = version.map_or(String::new(), |v| format!(" version {v}"));
    let lines = [
        (
            "effects none, write",
            "operation_type: read_only -> none, transactional -> write",
        ),
        (
            "mode agent { }",
            "tool_policies.yaml has no notion of query intent",
        ),
        ("default mode agent", ""),
        ("unknown deny", "tools in neither file never run"),
        (
            "confirm fields \"confirmed\", \"confirmation\"",
            "only a literal JSON true confirms",
        ),
        ("limit transactional 1 per turn", ""),
    ];
    let mut out = format!("policy {}{version}\n\n", quote(name));
    for (code, comment) in lines {
        if comment.is_empty() {
            out.push_str(&format!("{code}\n"));
        } else {
            out.push_str(&format!("{code:<44}# {comment}\n"));
        }
    }
    out
}

/// `s` as a warden name: bare when it is an identifier that is not a keyword, else quoted.
fn name(s: &str) -> String {
    const KEYWORDS: &[&str] = &[
        "effect",
        "permissions",
        "roles",
        "tenant",
        "requires",
        "confirm",
        "enabled",
        "true",
        "false",
        "always",
        "required",
    ];
    let mut chars = s.chars();
    let ident = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if ident && !KEYWORDS.contains(&s) {
        s.to_string()
    } else {
        quote(s)
    }
}

/// The policy name of an imported YAML file: its file stem (`tool_policies`).
fn policy_name(path: &Path) -> String {
    path.file_stem().map_or_else(
        || "tool_policies".to_string(),
        |s| s.to_string_lossy().into_owned(),
    )
}

/// Reads a YAML file for import: `Ok(None)` when it does not exist, an error diagnostic when it
/// cannot be read, is not UTF-8 or is over [`limits::MAX_POLICY_BYTES`].
pub(crate) fn read_yaml(path: &Path) -> Result<Option<String>, Box<Diagnostic>> {
    let shown = path.display();
    // Read at most one byte over the limit, and only from a regular file.
    match limits::read_file(path, limits::MAX_POLICY_BYTES + 1) {
        Ok(bytes) if bytes.len() > limits::MAX_POLICY_BYTES => Err(Box::new(
            Diagnostic::error(
                "too-large",
                format!(
                    "`{shown}` is {} bytes, over the limit of {} bytes",
                    bytes.len(),
                    limits::MAX_POLICY_BYTES
                ),
            )
            .help("split the tool policies into smaller files"),
        )),
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|e| {
            Box::new(
                Diagnostic::error(
                    "unreadable",
                    format!(
                        "cannot read `{shown}`: not valid UTF-8 (byte {})",
                        e.utf8_error().valid_up_to()
                    ),
                )
                .help("save the file as UTF-8"),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Box::new(
            Diagnostic::error(
                "unreadable",
                format!("cannot read `{shown}`: {}", syntax::io_reason(&e)),
            )
            .help("check the path and its permissions"),
        )),
    }
}

/// The YAML files of one import, read and registered in `sources`.
pub(crate) struct Loaded {
    pub policies: Option<(FileId, String)>,
    pub legacy: Option<(FileId, String)>,
}

/// Reads `tool_policies` and `legacy` into `sources`. A missing `tool_policies` file with a
/// legacy catalog is seed 004's legacy behaviour (a warning); missing without one is an
/// error, and so is a missing legacy catalog. `at` is the span of the `include` that asked
/// for them, when there is one.
pub(crate) fn load_files(
    tool_policies: &Path,
    legacy: Option<&Path>,
    at: Option<Span>,
    sources: &mut Sources,
    diagnostics: &mut Vec<Diagnostic>,
) -> Loaded {
    let place = |d: Diagnostic| match at {
        Some(span) => d.at(span, ""),
        None => d,
    };
    let mut loaded = Loaded {
        policies: None,
        legacy: None,
    };
    match read_yaml(tool_policies) {
        Ok(Some(text)) => {
            let id = sources.add(tool_policies.display().to_string(), text.as_str());
            loaded.policies = Some((id, text));
        }
        Ok(None) if legacy.is_some() => diagnostics.push(place(
            Diagnostic::warning(
                "yaml-missing",
                format!(
                    "`{}` does not exist: using the legacy fields of the tools catalog (seed 004)",
                    tool_policies.display()
                ),
            )
            .help("create the file to give tools an explicit policy"),
        )),
        Ok(None) => diagnostics.push(place(
            Diagnostic::error(
                "unreadable",
                format!("cannot read `{}`: no such file", tool_policies.display()),
            )
            .help("check the path, or name a legacy tools.yaml catalog to fall back on"),
        )),
        Err(d) => diagnostics.push(place(*d)),
    }
    if let Some(path) = legacy {
        match read_yaml(path) {
            Ok(Some(text)) => {
                let id = sources.add(path.display().to_string(), text.as_str());
                loaded.legacy = Some((id, text));
            }
            Ok(None) => diagnostics.push(place(
                Diagnostic::error(
                    "unreadable",
                    format!("cannot read `{}`: no such file", path.display()),
                )
                .help("check the path of the legacy tools.yaml catalog"),
            )),
            Err(d) => diagnostics.push(place(*d)),
        }
    }
    loaded
}

/// Converts loaded files.
pub(crate) fn convert_loaded(loaded: &Loaded) -> yaml::Converted {
    let policies = loaded
        .policies
        .as_ref()
        .map(|(file, text)| yaml::YamlFile { file: *file, text });
    let legacy = loaded
        .legacy
        .as_ref()
        .map(|(file, text)| yaml::YamlFile { file: *file, text });
    yaml::convert(policies.as_ref(), legacy.as_ref())
}

/// Translates seed 004's `tool_policies.yaml` (and optionally the legacy `tools.yaml` catalog)
/// into equivalent warden text: [`yaml_header`] followed by one `tool` declaration per tool,
/// each with a comment naming the YAML `file:line:col` it came from. The text checks clean
/// and compiles to the same decisions as [`Policy::from_yaml`] on the same files, and is laid
/// out by [`crate::fmt::format_source`] (so `toolwarden fmt --check` accepts it as it is).
///
/// When `tool_policies` does not exist and `legacy` is given, the result follows the legacy
/// fields alone (seed 004) and says so in a comment.
///
/// # Errors
///
/// A [`PolicyError`] with every problem found in the YAML, each at its `file:line:col`.
pub fn yaml_to_warden(tool_policies: &Path, legacy: Option<&Path>) -> Result<String, PolicyError> {
    let mut sources = Sources::new();
    let mut diagnostics = Vec::new();
    let loaded = load_files(tool_policies, legacy, None, &mut sources, &mut diagnostics);
    let converted = convert_loaded(&loaded);
    diagnostics.extend(converted.diagnostics);
    if diagnostics.iter().any(|d| d.severity() == Severity::Error) {
        return Err(PolicyError::new(diagnostics, Arc::new(sources)));
    }
    let stem = if loaded.policies.is_some() || legacy.is_none() {
        policy_name(tool_policies)
    } else {
        policy_name(legacy.unwrap_or(tool_policies))
    };
    let mut out = String::new();
    let mut command = format!("toolwarden import yaml {}", tool_policies.display());
    if let Some(l) = legacy {
        command.push_str(&format!(" --legacy {}", l.display()));
    }
    out.push_str(&format!("# Generated by `{command}`.\n"));
    for d in &diagnostics {
        out.push_str(&format!("# note: {}\n", d.message()));
    }
    out.push_str(&yaml_header(&stem, converted.version));
    if !converted.tools.is_empty() {
        out.push('\n');
    }
    for tool in &converted.tools {
        let mut attrs = Vec::new();
        for a in &tool.attrs {
            attrs.push(match a {
                ToolAttr::Effect { name: e, .. } => format!("effect {}", e.text),
                ToolAttr::Requires { names, .. } => format!(
                    "requires {}",
                    names
                        .iter()
                        .map(|n| name(&n.text))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                ToolAttr::ConfirmAlways { .. } => "confirm always".to_string(),
                ToolAttr::Enabled { value, .. } => format!("enabled {value}"),
                other => other.keyword().to_string(),
            });
        }
        let line = format!("tool {} {{ {} }}", name(&tool.name.text), attrs.join("  "));
        out.push_str(&format!("{line} # {}\n", sources.location(tool.name.span)));
    }
    // The text is generated to parse; were it not to, the caller sees why when it loads it.
    Ok(crate::fmt::format_source(&out, "import.warden").unwrap_or(out))
}

impl Policy {
    /// Loads a policy from seed 004's `tool_policies.yaml`, with the legacy `tools.yaml`
    /// catalog as fallback for tools without an entry: the same policy as
    /// [`yaml_header`] followed by `include yaml "tool_policies" legacy "legacy"`. Rules taken
    /// from YAML report the YAML's `file:line:col` as their source. When `tool_policies` does
    /// not exist and `legacy` is given, the legacy fields alone decide (a warning).
    ///
    /// The policy is named after the file stem (`tool_policies`) and takes the YAML `version`.
    ///
    /// # Errors
    ///
    /// A [`PolicyError`] with every problem found, YAML ones at the YAML's `file:line:col`.
    pub fn from_yaml(
        tool_policies: impl AsRef<Path>,
        legacy: Option<&Path>,
    ) -> Result<Policy, PolicyError> {
        let tool_policies = tool_policies.as_ref();
        let version = read_yaml(tool_policies)
            .ok()
            .flatten()
            .and_then(|text| yaml_depth::parse::<serde_yaml::Value>(&text).ok())
            .and_then(|v| v.get("version").and_then(serde_yaml::Value::as_u64));
        let stem = if tool_policies.exists() {
            policy_name(tool_policies)
        } else {
            policy_name(legacy.unwrap_or(tool_policies))
        };
        let mut text = yaml_header(&stem, version);
        text.push_str(&format!(
            "include yaml {}",
            quote(&tool_policies.to_string_lossy())
        ));
        if let Some(l) = legacy {
            text.push_str(&format!(" legacy {}", quote(&l.to_string_lossy())));
        }
        text.push('\n');
        let name = format!("{} (generated)", tool_policies.display());
        Policy::build(&name, &text, Origin::Memory(PathBuf::new()))
    }
}
