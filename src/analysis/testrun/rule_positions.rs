//! A case's `expect.rule` (`file:line:col`, the file relative to the test file) resolved to
//! the location of a rule of the policy, as the policy reports it in verdicts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::decision::RuleId;
use crate::policy::Policy;

/// The `file:line:col` of every rule of a policy, to resolve a case's `expect.rule` (written
/// relative to the test file) to the location the policy reports.
pub(super) struct RulePositions {
    /// The test file's directory.
    dir: PathBuf,
    /// `(file, line, column, location as the policy prints it)`, files canonicalized.
    all: Vec<(PathBuf, usize, usize, String)>,
}

impl RulePositions {
    pub(super) fn new(policy: &Policy, dir: &Path) -> RulePositions {
        let mut files: BTreeMap<String, PathBuf> = BTreeMap::new();
        let mut all = Vec::new();
        let count = policy.tables().rules.len();
        for i in 0..count {
            let Ok(id) = u32::try_from(i) else { break };
            let Some(loc) = policy.rule_source(RuleId(id)) else {
                continue;
            };
            let file = files
                .entry(loc.file.clone())
                .or_insert_with(|| canonical(Path::new(&loc.file)))
                .clone();
            all.push((file, loc.line, loc.column, loc.to_string()));
        }
        all.sort();
        all.dedup();
        RulePositions {
            dir: dir.to_path_buf(),
            all,
        }
    }

    /// The policy's location string for `expected` (`file:line:col`, the file relative to the
    /// test file), or why it names no rule.
    pub(super) fn resolve(&self, expected: &str) -> Result<&str, String> {
        let mut parts = expected.rsplitn(3, ':');
        let (col, line, file) = (parts.next(), parts.next(), parts.next());
        let (Some(col), Some(line), Some(file)) = (col, line, file) else {
            return Err(format!(
                "`rule: {expected}` must be the rule's position, `file:line:col`"
            ));
        };
        let (Ok(line), Ok(col)) = (line.parse::<usize>(), col.parse::<usize>()) else {
            return Err(format!(
                "`rule: {expected}` must be the rule's position, `file:line:col` (line and column are numbers)"
            ));
        };
        let want = canonical(&self.dir.join(file));
        self.all
            .iter()
            .find(|(f, l, c, _)| *f == want && *l == line && *c == col)
            .map(|(_, _, _, s)| s.as_str())
            .ok_or_else(|| {
                let near: Vec<String> = self
                    .all
                    .iter()
                    .filter(|(f, l, _, _)| *f == want && *l == line)
                    .map(|(_, _, _, s)| format!("`{}`", self.shown(s)))
                    .collect();
                if near.is_empty() {
                    format!("no rule of the policy starts at `{expected}`")
                } else {
                    format!(
                        "no rule of the policy starts at `{expected}`; on that line: {}",
                        near.join(", ")
                    )
                }
            })
    }

    /// A location the policy reports, with its file relative to the test file's directory
    /// when it is below it.
    pub(super) fn shown(&self, location: &str) -> String {
        let prefix = format!("{}/", self.dir.display());
        match location.strip_prefix(&prefix) {
            Some(rest) if !self.dir.as_os_str().is_empty() => rest.to_string(),
            _ => location.to_string(),
        }
    }
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}
