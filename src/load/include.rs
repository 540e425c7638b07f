//! The include walk: parses a policy's text and every file it `include`s, recursively, with
//! cycle, depth and count limits; `include yaml` files go through the YAML converter.

use std::path::{Path, PathBuf};

use crate::diagnostic::{Diagnostic, Sources};
use crate::limits;
use crate::syntax::ast::{self, Decl, PolicyFile};

/// Where a source came from, for resolving its includes.
#[derive(Clone, Debug)]
pub(crate) enum Origin {
    /// A file on disk; includes resolve relative to its directory.
    Path(PathBuf),
    /// Text given in memory; includes resolve relative to this directory.
    Memory(PathBuf),
}

impl Origin {
    fn dir(&self) -> PathBuf {
        match self {
            Origin::Path(p) => p.parent().map(Path::to_path_buf).unwrap_or_default(),
            Origin::Memory(dir) => dir.clone(),
        }
    }
}

/// Parses `text` (named `name`) and every file it includes, recursively.
///
/// Returns the parsed files, root first, each include after the file that includes it (depth
/// first, in declaration order), plus every diagnostic: syntax errors, unreadable includes,
/// include cycles (naming the cycle) and includes nested deeper than
/// [`limits::MAX_INCLUDE_DEPTH`].
pub(crate) fn load(
    name: &str,
    text: &str,
    origin: Origin,
    sources: &mut Sources,
) -> (Vec<PolicyFile>, Vec<Diagnostic>) {
    let mut files = Vec::new();
    let mut diagnostics = Vec::new();
    let mut visited = Visited::default();
    if let Origin::Path(p) = &origin {
        visited.stack.push(canonical(p));
        visited.loaded.insert(canonical(p));
    }
    load_one(
        name,
        text,
        &origin,
        sources,
        &mut visited,
        &mut files,
        &mut diagnostics,
    );
    (files, diagnostics)
}

/// The include walk's state: the chain of files being loaded (for cycles) and every file
/// loaded so far (each is loaded once).
#[derive(Default)]
struct Visited {
    stack: Vec<PathBuf>,
    loaded: std::collections::HashSet<PathBuf>,
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

fn load_one(
    name: &str,
    text: &str,
    origin: &Origin,
    sources: &mut Sources,
    visited: &mut Visited,
    files: &mut Vec<PolicyFile>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let file = sources.add(name, text);
    if text.len() > limits::MAX_POLICY_BYTES {
        diagnostics.push(
            Diagnostic::error(
                "too-large",
                format!(
                    "policy file `{name}` is {} bytes, over the limit of {} bytes",
                    text.len(),
                    limits::MAX_POLICY_BYTES
                ),
            )
            .help("split the policy into smaller files joined with `include`"),
        );
        return;
    }
    let (tree, mut diags) = crate::syntax::parse_file(text, file);
    diagnostics.append(&mut diags);
    type Inc = (String, ast::Span, bool, Option<String>);
    let includes: Vec<Inc> = tree
        .decls
        .iter()
        .filter_map(|d| match d {
            Decl::Include {
                path, yaml, legacy, ..
            } => Some((
                path.text.clone(),
                path.span,
                *yaml,
                legacy.as_ref().map(|l| l.text.clone()),
            )),
            _ => None,
        })
        .collect();
    files.push(tree);
    let dir = origin.dir();
    for (rel, span, yaml, legacy) in includes {
        if yaml {
            // `include yaml`: seed 004's tool_policies.yaml (and legacy tools.yaml) become
            // tool declarations whose spans point into the YAML.
            let legacy = legacy.map(|l| dir.join(l));
            let loaded = super::yaml_files::load_files(
                &dir.join(&rel),
                legacy.as_deref(),
                Some(span),
                sources,
                diagnostics,
            );
            if loaded.policies.is_some() || loaded.legacy.is_some() {
                let policies = loaded
                    .policies
                    .as_ref()
                    .map(|(file, text)| super::yaml::YamlFile { file: *file, text });
                let legacy = loaded
                    .legacy
                    .as_ref()
                    .map(|(file, text)| super::yaml::YamlFile { file: *file, text });
                let (tree, mut diags) =
                    super::yaml::include_file(policies.as_ref(), legacy.as_ref());
                diagnostics.append(&mut diags);
                files.push(tree);
            }
            continue;
        }
        let path = dir.join(&rel);
        let key = canonical(&path);
        if let Some(pos) = visited.stack.iter().position(|p| *p == key) {
            let mut cycle: Vec<String> = visited.stack[pos..]
                .iter()
                .map(|p| display_name(p))
                .collect();
            cycle.push(display_name(&key));
            diagnostics.push(
                Diagnostic::error(
                    "include-cycle",
                    format!("include cycle: {}", cycle.join(" -> ")),
                )
                .at(span, "this include closes the cycle")
                .help("remove one of the includes in the cycle; a file may be included once"),
            );
            continue;
        }
        // A file reached by two include paths (a diamond) is loaded once: its declarations are
        // already in the policy, and loading it again would only grow the work exponentially.
        if visited.loaded.contains(&key) {
            continue;
        }
        if visited.loaded.len() >= limits::MAX_INCLUDED_FILES {
            diagnostics.push(
                Diagnostic::error(
                    "include-count",
                    format!(
                        "more than {} files are included",
                        limits::MAX_INCLUDED_FILES
                    ),
                )
                .at(span, "")
                .help("merge included files"),
            );
            continue;
        }
        if visited.stack.len() >= limits::MAX_INCLUDE_DEPTH {
            diagnostics.push(
                Diagnostic::error(
                    "include-depth",
                    format!(
                        "includes are nested more than {} deep",
                        limits::MAX_INCLUDE_DEPTH
                    ),
                )
                .at(span, "")
                .help("flatten the include chain"),
            );
            continue;
        }
        let included = match limits::read_file(&path, limits::MAX_POLICY_BYTES) {
            Ok(bytes) => match String::from_utf8(bytes) {
                Ok(s) => s,
                Err(e) => {
                    diagnostics.push(
                        Diagnostic::error(
                            "include-unreadable",
                            format!(
                                "cannot include `{rel}`: not valid UTF-8 (byte {})",
                                e.utf8_error().valid_up_to()
                            ),
                        )
                        .at(span, "")
                        .help("save the file as UTF-8"),
                    );
                    continue;
                }
            },
            Err(e) => {
                diagnostics.push(
                    Diagnostic::error(
                        "include-unreadable",
                        format!(
                            "cannot read included file `{}`: {}",
                            path.display(),
                            super::io_reason(&e)
                        ),
                    )
                    .at(span, "included here")
                    .help(format!(
                        "the path is relative to the including file's folder `{}`",
                        if dir.as_os_str().is_empty() {
                            ".".to_string()
                        } else {
                            dir.display().to_string()
                        }
                    )),
                );
                continue;
            }
        };
        visited.loaded.insert(key.clone());
        visited.stack.push(key);
        let child_name = path.display().to_string();
        load_one(
            &child_name,
            &included,
            &Origin::Path(path),
            sources,
            visited,
            files,
            diagnostics,
        );
        visited.stack.pop();
    }
}

fn display_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}
