//! The README's examples, run: the small policy loads without a diagnostic, its typo gives the
//! report the README prints, and the README's test file passes against it. A README edit that
//! breaks one of them fails here.

use std::path::{Path, PathBuf};
use std::process::Command;

use toolwarden::analysis::testrun::run_file;
use toolwarden::Policy;

fn readme() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md is readable")
}

/// The body of the first fenced block with info string `lang` after the heading `heading`.
fn block(text: &str, heading: &str, lang: &str) -> String {
    nth_block(text, heading, lang, 0)
}

/// The body of fenced block `n` (from 0) with info string `lang` after the heading `heading`.
fn nth_block(text: &str, heading: &str, lang: &str, n: usize) -> String {
    let mut from = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("README has no heading `{heading}`"));
    let fence = format!("```{lang}\n");
    for _ in 0..n {
        from = text[from..]
            .find(&fence)
            .map(|i| from + i + fence.len())
            .unwrap_or_else(|| panic!("too few ```{lang} blocks after `{heading}`"));
    }
    let start = text[from..]
        .find(&fence)
        .map(|i| from + i + fence.len())
        .unwrap_or_else(|| panic!("no ```{lang} block after `{heading}`"));
    let end = text[start..]
        .find("```")
        .map(|i| start + i)
        .expect("the block is closed");
    text[start..end].to_string()
}

/// A fresh directory under the system temp dir.
fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("toolwarden-readme-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn the_small_policy_loads_without_diagnostics() {
    let policy = Policy::parse(
        &block(&readme(), "## A small policy", "warden"),
        "notes.warden",
    )
    .unwrap_or_else(|e| panic!("{}", e.render()));
    assert_eq!(policy.warnings().len(), 0);
    assert_eq!(policy.tools().count(), 2);
}

#[test]
fn the_typo_gives_the_report_the_readme_shows() {
    let text = readme();
    let policy = block(&text, "## A small policy", "warden");
    let typo = policy.replace("{ effect write  requires", "{ effect wrte  requires");
    assert_ne!(typo, policy, "the README's typo applies to its policy");
    let dir = scratch("typo");
    std::fs::write(dir.join("notes.warden"), typo).expect("write policy");
    let out = Command::new(env!("CARGO_BIN_EXE_toolwarden"))
        .args(["check", "notes.warden"])
        .current_dir(&dir)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    let shown = text
        .split("what to write instead:\n\n```text\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("README shows the report");
    assert_eq!(String::from_utf8_lossy(&out.stdout), shown);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_test_file_passes_against_the_small_policy() {
    let text = readme();
    let dir = scratch("test");
    std::fs::write(
        dir.join("notes.warden"),
        block(&text, "## A small policy", "warden"),
    )
    .expect("write policy");
    let test = dir.join("notes.test.yaml");
    std::fs::write(&test, block(&text, "## Testing a policy", "yaml")).expect("write test");
    let report = run_file(&test, None);
    assert_eq!(report.error, None);
    assert_eq!((report.passed(), report.failed()), (2, 0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The header the README gives the argument-rule and flow-label fragments.
#[test]
fn the_argument_rules_and_flow_labels_examples_check_with_the_readme_header() {
    let text = readme();
    let header = nth_block(&text, "### Argument rules", "warden", 0);
    assert!(
        header.starts_with("policy \"example\" version 1\n"),
        "{header}"
    );
    let rules = nth_block(&text, "### Argument rules", "warden", 1);
    let flow = block(&text, "### Flow labels", "warden");
    for (name, fragment) in [("argument rules", rules), ("flow labels", flow)] {
        match Policy::parse(&format!("{header}{fragment}"), "readme.warden") {
            Ok(p) => assert_eq!(p.warnings().len(), 0, "{name}: {:?}", p.warnings()),
            Err(e) => panic!("{name}: {e}"),
        }
    }
}
