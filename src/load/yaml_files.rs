//! Reading the YAML files of an `include yaml` declaration or a YAML import: capped, UTF-8,
//! registered in the policy's sources, and converted to tool declarations.

use std::path::Path;

use crate::diagnostic::{Diagnostic, Sources};
use crate::limits;
use crate::span::{FileId, Span};

use super::yaml;

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
                format!("cannot read `{shown}`: {}", super::io_reason(&e)),
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
