//! The checker's diagnostics, pinned: every `tests/fixtures/check/*.warden` is a small policy
//! with one kind of problem (or, for `several_errors.warden`, many), and its full rendered
//! report (`file:line:col`, source line, caret, message, `help`) is an insta snapshot.
//!
//! Fixtures are loaded by their path relative to the crate root, written with `/`, so the
//! snapshots read the same on every platform. Files under `fixtures/check/include/` are only
//! included by the fixtures, never checked on their own.

use std::path::Path;

use toolwarden::{render_all, Policy, Severity};

/// `path` relative to the crate root, with `/` separators.
fn relative(path: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// The report `toolwarden check` prints for a policy: every diagnostic, then the totals.
fn report(path: &str) -> (String, bool) {
    match Policy::from_file(path) {
        Ok(policy) => (render_all(policy.warnings(), policy.sources()), true),
        Err(e) => (e.render(), false),
    }
}

/// The fixtures whose problems are warnings only: they load.
const WARNINGS_ONLY: &[&str] = &[
    "catch_all_read_only",
    "context_warnings",
    "keyword_warnings",
    "rule_warnings",
    "shadowed_pattern",
];

#[test]
fn every_fixture_renders_its_diagnostics() {
    insta::glob!("fixtures/check/*.warden", |path| {
        let rel = relative(path);
        let (rendered, loaded) = report(&rel);
        // Each fixture shows a problem: errors (no policy), or for a warnings-only fixture, at
        // least one warning.
        assert!(
            rendered
                .lines()
                .last()
                .is_some_and(|l| l != "0 errors, 0 warnings"),
            "{rel} reports nothing"
        );
        if WARNINGS_ONLY
            .iter()
            .any(|w| rel.ends_with(&format!("/{w}.warden")))
        {
            assert!(loaded, "warnings never stop a policy from loading");
        } else {
            assert!(!loaded, "{rel} should not load");
        }
        insta::assert_snapshot!(rendered);
    });
}

/// The number of errors and warnings of each fixture, and the codes, so a change in what is
/// reported shows up even without reading the snapshots.
#[test]
fn each_fixture_reports_the_expected_codes() {
    let expected: &[(&str, &[&str])] = &[
        ("catch_all_read_only", &["catch-all-read-only"]),
        (
            "context_errors",
            &[
                "bad-window",
                "bad-negator",
                "bad-embedded",
                "duplicate",
                "bad-keyword",
            ],
        ),
        (
            "context_warnings",
            &[
                "embedded-counts",
                "exception-is-keyword",
                "exception-is-keyword",
                "unmatchable-keyword",
            ],
        ),
        ("default_mode_missing", &["undefined-mode"]),
        ("duplicate_effect", &["duplicate"]),
        ("duplicate_matrix", &["duplicate"]),
        ("duplicate_mode", &["duplicate"]),
        ("duplicate_tool", &["duplicate"]),
        (
            "flow_errors",
            &[
                "undefined-label",
                "duplicate",
                "too-many-labels",
                "undefined-label",
                "empty-after",
                "undefined-effect",
            ],
        ),
        ("implies_cycle", &["cycle"]),
        ("include_cycle", &["include-cycle"]),
        ("include_unreadable", &["include-unreadable"]),
        ("invisible_characters", &["invisible-character"; 6]),
        (
            "keyword_errors",
            &[
                "bad-keyword",
                "invisible-character",
                "bad-keyword",
                "bad-keyword",
                "invisible-character",
                "bad-keyword",
                "bad-keyword",
                "bad-keyword",
                "bad-keyword",
                "invisible-character",
            ],
        ),
        (
            "keyword_warnings",
            &[
                "unmatchable-keyword",
                "unmatchable-keyword",
                "unmatchable-keyword",
                "unmatchable-keyword",
                "duplicate-keyword",
                "duplicate-keyword",
                "redundant-keyword",
                "redundant-keyword",
                "shadowed-keyword",
                "unmatchable-keyword",
            ],
        ),
        ("matrix_bad_cell", &["matrix-cell", "matrix-cell"]),
        ("matrix_cell_count", &["matrix-row", "matrix-row"]),
        ("matrix_header", &["matrix-header", "matrix-header"]),
        ("matrix_missing_row", &["matrix-row"]),
        ("role_cycle", &["cycle"]),
        (
            "rule_warnings",
            &[
                "rule-never-fires",
                "redundant-confirm",
                "redundant-confirm",
                "redundant-confirm",
                "rule-never-fires",
            ],
        ),
        (
            "several_errors",
            &[
                "matrix-cell",
                "undefined-effect",
                "undefined-role",
                "undefined-effect",
                "duplicate",
                "missing-effect",
                "undefined-permission",
            ],
        ),
        (
            "shadowed_pattern",
            &["shadowed-pattern", "shadowed-pattern"],
        ),
        ("syntax_bad_escape", &["bad-escape"]),
        ("syntax_bad_keyword", &["syntax"]),
        ("syntax_keyword_comma", &["syntax"]),
        ("syntax_missing_brace", &["syntax"]),
        ("syntax_several", &["syntax", "syntax", "undefined-effect"]),
        ("syntax_single_quotes", &["syntax"]),
        (
            "undefined_effect",
            &["undefined-effect", "undefined-effect"],
        ),
        (
            "undefined_intent",
            &["undefined-intent", "undefined-intent"],
        ),
        (
            "undefined_matrix",
            &["undefined-matrix", "undefined-matrix"],
        ),
        ("undefined_mode", &["undefined-mode"]),
        (
            "undefined_permission",
            &["undefined-permission", "undefined-permission"],
        ),
        ("undefined_role", &["undefined-role", "undefined-role"]),
    ];
    let mut on_disk: Vec<String> = std::fs::read_dir("tests/fixtures/check")
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_suffix(".warden").map(str::to_string)
        })
        .collect();
    on_disk.sort();
    let listed: Vec<&str> = expected.iter().map(|(n, _)| *n).collect();
    assert_eq!(on_disk, listed, "every fixture is listed here, in order");
    for (name, codes) in expected {
        let path = format!("tests/fixtures/check/{name}.warden");
        let diagnostics = match Policy::from_file(&path) {
            Ok(p) => p.warnings().to_vec(),
            Err(e) => e.diagnostics().to_vec(),
        };
        let got: Vec<&str> = diagnostics.iter().map(|d| d.code()).collect();
        assert_eq!(&got, codes, "{name}");
        // Every diagnostic about text points at it and says what to write instead.
        for d in &diagnostics {
            assert!(d.span().is_some(), "{name}: {} has no span", d.code());
            assert!(d.help_text().is_some(), "{name}: {} has no help", d.code());
        }
        let warnings_only = diagnostics
            .iter()
            .all(|d| d.severity() == Severity::Warning);
        assert_eq!(warnings_only, WARNINGS_ONLY.contains(name), "{name}");
    }
}

#[test]
fn the_shipped_policies_check_clean() {
    for path in [
        "policies/finance.warden",
        "policies/connectors.warden",
        "policies/retail.warden",
        "policies/examples/agentdojo-banking.warden",
        "policies/examples/agentdojo-slack.warden",
    ] {
        let policy = Policy::from_file(path).unwrap_or_else(|e| panic!("{}", e.render()));
        let (rendered, _) = report(path);
        assert_eq!(rendered, "0 errors, 0 warnings\n", "{path}");
        assert!(policy.warnings().is_empty(), "{path}");
    }
}

/// A report's `file:line:col` counts characters, as the JSON form and `Location` do, also on a
/// line with non-ASCII text before the span (miette alone would count bytes: 4:37 here).
#[test]
fn rendered_columns_count_characters() {
    let text =
        "policy \"fa\" version 1\neffects none\nmode m { }\ntool \"حذف_فاکتور\" { effect wrte }\n";
    let err = Policy::parse(text, "fa.warden").unwrap_err();
    let d = &err.diagnostics()[0];
    assert_eq!(d.to_json(err.sources())["column"], 28);
    let rendered = err.render();
    assert!(rendered.contains("╭─[fa.warden:4:28]"), "{rendered}");
}

/// Codes and messages of a policy's warnings (it must load).
fn warnings_of(text: &str) -> Vec<(&'static str, String)> {
    let policy = Policy::parse(text, "w.warden").unwrap_or_else(|e| panic!("{}", e.render()));
    policy
        .warnings()
        .iter()
        .map(|d| (d.code(), d.message().to_string()))
        .collect()
}

#[test]
fn shadowed_keywords_name_the_intent_that_decides() {
    let head = "policy \"w\"\nmode m { }\neffects none\nintents destructive > write > read\nfallback read\n";
    let text = format!(
        "{head}keywords read {{ en \"purge\" }}\nkeywords write {{ en \"purge\" }}\nkeywords destructive {{ en \"purge\" }}\n"
    );
    let never = |intent: &str| {
        (
            "shadowed-keyword",
            format!("keyword `purge` of intent `{intent}` never decides: the same keyword of `destructive` comes first under `combine priority`"),
        )
    };
    assert_eq!(warnings_of(&text), [never("read"), never("write")]);
    // Under `combine union` every intent hit counts: nothing is shadowed.
    assert_eq!(warnings_of(&format!("{text}combine union\n")), []);
}

#[test]
fn a_phrase_a_stem_starts_is_not_redundant() {
    // The phrase's hit spans "it"; a negator after it treats the two differently.
    let text = "policy \"w\"\nmode m { }\neffects none\nintents write > read\nfallback read\nkeywords write { en \"delet*\", \"delete it\", \"deletes\" }\nnegation after 1 { en \"it\" }\n";
    assert_eq!(
        warnings_of(text),
        [(
            "redundant-keyword",
            "keyword `deletes` adds nothing: the `en` stem `delet*` of intent `write` matches every word it does".to_string()
        )]
    );
}

#[test]
fn a_pattern_matching_every_name_with_the_read_only_effect_warns() {
    let head = "policy \"w\"\neffects none, write\nmode m { }\nunknown deny\n";
    let warns = |glob: &str| {
        (
            "catch-all-read-only",
            format!("pattern `{glob}` matches every tool name with the read-only effect `none`: every undeclared tool is offered and runs"),
        )
    };
    assert_eq!(
        warnings_of(&format!("{head}match \"*\" {{ effect none }}\n")),
        [warns("*")]
    );
    // The effect taken from `defaults` counts too, and the help says where it comes from.
    let text = format!("{head}defaults {{ effect none }}\nmatch \"**\" {{ confirm always }}\n");
    assert_eq!(warnings_of(&text), [warns("**")]);
    let policy = Policy::parse(&text, "w.warden").expect("loads");
    let d = &policy.warnings()[0];
    assert_eq!(
        policy
            .sources()
            .location(d.span().expect("span"))
            .to_string(),
        "w.warden:6:7"
    );
    assert_eq!(
        d.help_text(),
        Some("the pattern takes `effect none` from `defaults`, so `unknown deny` never refuses a tool; give it a stricter effect (`match \"**\" { effect write }`), narrow it (`mcp__github__get_*`), or delete it")
    );
    // Not every name, a stricter effect, or disabled: no warning.
    for body in [
        "match \"*_*\" { effect none }",
        "match \"mcp__*\" { effect none }",
        "match \"*\" { effect write }",
        "match \"*\" { effect none  enabled false }",
    ] {
        assert_eq!(warnings_of(&format!("{head}{body}\n")), [], "{body}");
    }
}

#[test]
fn deny_warnings_fails_on_a_read_only_catch_all() {
    let run = |deny: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_toolwarden"));
        cmd.arg("check");
        if deny {
            cmd.arg("--deny-warnings");
        }
        cmd.arg("tests/fixtures/check/catch_all_read_only.warden")
            .output()
            .expect("runs")
    };
    let plain = run(false);
    assert_eq!(plain.status.code(), Some(0));
    let denied = run(true);
    assert_eq!(denied.status.code(), Some(1));
    let out = String::from_utf8_lossy(&denied.stdout);
    assert!(
        out.contains("⚠ pattern `*` matches every tool name with the read-only effect `none`"),
        "{out}"
    );
    assert!(out.ends_with("\n0 errors, 1 warning\ntests/fixtures/check/catch_all_read_only.warden: failed (warnings denied by --deny-warnings)\n"), "{out}");
}
