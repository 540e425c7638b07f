//! Criterion bench for argument-rule conditions (src/condition): evaluating four compiled
//! conditions (`under`, `=~`, `>`, `in query`) on a typical argument object, each alone and the
//! four in a row, against a query of about twenty words.
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

criterion_group!(benches, bench);
criterion_main!(benches);
