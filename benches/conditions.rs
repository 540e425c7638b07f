//! Criterion bench for argument-rule conditions (src/condition): evaluating four compiled
//! conditions (`under`, `=~`, `>`, `in query`) on a typical argument object, each alone and the
//! four in a row, against a query of about twenty words.
//!
//! A second group times the hostile inputs the caps are for: a 1 MiB string through `under`,
//! `=~`, `matches` and `host()`, a 100,000-element array through `[*]` and `any` (past the
//! caps: the rule fires), a glob of 10,000 `*` on a 1 MiB string, and compiling a regular
//! expression of 100 KB (refused) and one that is too large once compiled (refused).
//!
//! Run: `cargo bench --bench conditions`.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use serde_json::json;
use toolwarden::condition::{CompiledCondition, ContextSet, EvalContext};
use toolwarden::syntax::ast::{Decl, FileId};
use toolwarden::syntax::parse_file;

/// The four conditions, compiled from a tool body as a policy writes them.
fn conditions() -> Vec<(String, CompiledCondition)> {
    let text = r#"tool t {
      deny when path not under "/workspace", "/tmp/scratch"
      deny when content =~ "AKIA[0-9A-Z]{16}"
      confirm when amount > 100
      confirm when recipient not in query
    }"#;
    let (tree, diagnostics) = parse_file(text, FileId(0));
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let Some(Decl::Tool(tool)) = tree.decls.first() else {
        panic!("the bench policy is one tool");
    };
    tool.rules
        .iter()
        .map(|r| {
            let c = CompiledCondition::compile(&r.condition, &|_| None)
                .unwrap_or_else(|e| panic!("{e:?}"));
            (r.condition.to_string(), c)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let conditions = conditions();
    let args = json!({
        "path": "/workspace/src/report/summary.md",
        "content": "# Quarterly summary\n\nRevenue grew 4% over the quarter; see the attached figures for the detail per region.",
        "amount": 42.5,
        "recipient": "alice@example.com",
        "options": {"overwrite": true, "mode": "0644"}
    });
    let normalize = |s: &str| s.to_lowercase();
    let query = "please write the quarterly summary to the workspace and send 42.5 to alice@example.com when it is done";
    let sets: [Option<&ContextSet>; 0] = [];
    let ctx = EvalContext::new(query, &normalize, &sets);
    let mut group = c.benchmark_group("conditions");
    for (name, cond) in &conditions {
        group.bench_function(name.as_str(), |b| {
            b.iter(|| black_box(cond.eval(black_box(&args), &ctx).fires()))
        });
    }
    group.bench_function("all four", |b| {
        b.iter(|| {
            conditions
                .iter()
                .filter(|(_, cond)| cond.eval(black_box(&args), &ctx).fires())
                .count()
        })
    });
    group.finish();
}

fn compile_one(cond: &str) -> Result<CompiledCondition, String> {
    let text = format!("rules {{ deny when {cond} }}");
    let (tree, diagnostics) = parse_file(&text, FileId(0));
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let Some(Decl::Rules(r)) = tree.decls.first() else {
        panic!("a rules block");
    };
    CompiledCondition::compile(&r.rules[0].condition, &|_| None)
        .map_err(|e| e[0].message().to_string())
}

fn hostile(c: &mut Criterion) {
    let normalize = |s: &str| s.to_lowercase();
    let sets: [Option<&ContextSet>; 0] = [];
    let ctx = EvalContext::new("", &normalize, &sets);
    let big = json!({ "p": format!("/workspace/{}", "a".repeat(1024 * 1024)) });
    let many: Vec<serde_json::Value> = (0..100_000)
        .map(|i| json!(format!("a{i}@example.com")))
        .collect();
    let many = json!({ "p": many });
    let mut group = c.benchmark_group("hostile");
    group.sample_size(20);
    for (name, cond, args) in [
        ("1 MiB under", r#"p not under "/workspace""#, &big),
        ("1 MiB =~", r#"p =~ "AKIA[0-9A-Z]{16}""#, &big),
        ("1 MiB matches", r#"p matches "**/*.pem""#, &big),
        ("1 MiB host", r#"host(p) in "github.com""#, &big),
        ("1 MiB glob of 10,000 *", "", &big),
        (
            "100,000 elements [*]",
            r#"p[*] not matches "*@example.com""#,
            &many,
        ),
        ("100,000 elements any", r#"any =~ "evil""#, &many),
    ] {
        let cond = if cond.is_empty() {
            compile_one(&format!("p matches \"a{}b\"", "*".repeat(10_000)))
        } else {
            compile_one(cond)
        }
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        group.bench_function(name, |b| {
            b.iter(|| black_box(cond.eval(args, &ctx).fires()))
        });
    }
    let regex = format!("p =~ \"{}\"", "a".repeat(100 * 1024));
    group.bench_function("compile a 100 KB regex (refused)", |b| {
        b.iter(|| black_box(compile_one(&regex).is_err()))
    });
    group.bench_function("compile a regex too large once compiled (refused)", |b| {
        b.iter(|| black_box(compile_one(r#"p =~ "((a{100}){100}){100}""#).is_err()))
    });
    group.finish();
}

criterion_group!(benches, bench, hostile);
criterion_main!(benches);
