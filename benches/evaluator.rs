//! Evaluator benches over generated policies of realistic shape: 8 roles in a hierarchy, 40
//! permissions with implications, the standard 5×5 matrix, 3 modes, 3 tiers, the shipped
//! lexicon, and N tools with mixed effects, permissions and `mcp__<server>__` names (see
//! `benches/support/gen.rs`).
//!
//! Run: `cargo bench --bench evaluator` (one group: `cargo bench --bench evaluator -- evaluate/`;
//! stage `flow` with and without a session: `-- flow/`).
//! The group `rules` times `check_call` on a tool with four argument rules (`under`, `=~`, `>`,
//! `in query`) against the same call on the same tool without them, and compiling a 1,200-tool
//! policy with three rules on every tool (`-- rules/`).
//! docs/performance.md records the figures.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use toolwarden::{Intent, Session, ToolSet, Turn};

#[path = "support/gen.rs"]
mod gen;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// The 180-tool bench policy plus one tool, `pay`, with `rules` in its body (or none).
fn with_pay_tool(rules: &str) -> toolwarden::Policy {
    let mut text = gen::policy_text(180);
    text.push_str(&format!(
        "tool pay {{\n  effect write  permissions \"area0.add\"  tenant required\n{rules}}}\n"
    ));
    let path = format!("{REPO}/policies/bench.warden");
    match toolwarden::Policy::parse(&text, &path) {
        Ok(p) => p,
        Err(e) => panic!("bench policy must load: {e}"),
    }
}

fn bench_rules(c: &mut Criterion) {
    let mut group = c.benchmark_group("rules");
    let four = "  deny when path not under \"/workspace\"\n  deny when content =~ \"AKIA[0-9A-Z]{16}\"\n  confirm when amount > 100\n  confirm when recipient not in query\n";
    let args = serde_json::json!({
        "business_id": "b-42",
        "path": "/workspace/reports/q3.md",
        "content": "Quarterly summary: revenue grew 4% over the quarter, see the figures per region.",
        "amount": 42.5,
        "recipient": "alice@example.com",
        "confirmed": true
    });
    let request = gen::request();
    for (label, rules) in [
        ("check_call_without_rules", ""),
        ("check_call_four_rules", four),
    ] {
        let policy = with_pay_tool(rules);
        let intent = policy.classify("please pay 42.5 to alice@example.com for the q3 report");
        // The rules must be evaluated and stay silent: the call is allowed either way.
        let mut turn = Turn::new();
        match policy.check_call(&request, &intent, &mut turn, "pay", &args) {
            Ok(v) if v.decision == toolwarden::Decision::Allow => {}
            other => panic!("{label}: the bench call must be allowed: {other:?}"),
        }
        group.bench_function(label, |b| {
            b.iter(|| {
                let mut turn = Turn::new();
                policy.check_call(&request, &intent, &mut turn, black_box("pay"), &args)
            })
        });
    }
    group.sample_size(20);
    let path = format!("{REPO}/policies/bench.warden");
    let text = gen::policy_text_with_rules(1_200);
    group.bench_function("parse_check_compile_1200_tools_3_rules", |b| {
        b.iter(|| toolwarden::Policy::parse(black_box(&text), &path).map(|p| p.tools().count()))
    });
    group.finish();
}

fn bench_compile(c: &mut Criterion) {
    let mut group = c.benchmark_group("compile");
    group.sample_size(20);
    let path = format!("{REPO}/policies/bench.warden");
    for n in [180usize, 1_200] {
        let text = gen::policy_text(n);
        group.bench_with_input(BenchmarkId::new("parse_check_compile", n), &text, |b, t| {
            b.iter(|| toolwarden::Policy::parse(black_box(t), &path).map(|p| p.tools().count()))
        });
    }
    group.finish();
}

fn bench_evaluate(c: &mut Criterion) {
    let mut group = c.benchmark_group("evaluate");
    for n in [10usize, 180, 1_200, 10_000] {
        let (policy, names) = gen::load(n, REPO);
        let request = gen::request();
        let intent = Intent::named("write");
        let name = names[n / 2].clone();
        let bound = match policy.bind(&request, &intent) {
            Ok(b) => b,
            Err(e) => panic!("bench request must bind: {e}"),
        };
        // One decision on a request bound once (the per-tool cost inside `offer`).
        group.bench_with_input(BenchmarkId::new("decide_bound", n), &name, |b, name| {
            b.iter(|| bound.decide(black_box(name)))
        });
        // One decision including binding the request (`Policy::decide_tool`).
        group.bench_with_input(BenchmarkId::new("decide_one", n), &name, |b, name| {
            b.iter(|| policy.decide_tool(&request, &intent, black_box(name)))
        });
        group.throughput(Throughput::Elements(n as u64));
        // Bind + one decision per tool + the result vector (`Policy::offer`).
        group.bench_with_input(BenchmarkId::new("offer_all", n), &names, |b, names| {
            b.iter(|| {
                policy
                    .offer(&request, &intent, names.iter().map(String::as_str))
                    .map(|o| o.entries().len())
            })
        });
        // The same offer over a prepared set (`Policy::offer_set`, what the bindings call).
        let set = ToolSet::from_names(&names);
        group.bench_with_input(BenchmarkId::new("offer_set", n), &set, |b, set| {
            b.iter(|| {
                policy
                    .offer_set(&request, &intent, black_box(set))
                    .map(|o| o.entries().len())
            })
        });
        group.throughput(Throughput::Elements(1));
    }
    let (policy, _) = gen::load(180, REPO);
    let request = gen::request();
    let intent = Intent::named("write");
    group.bench_function("bind/180", |b| {
        b.iter(|| {
            policy
                .bind(black_box(&request), &intent)
                .map(|b| b.mode().len())
        })
    });
    let args = serde_json::json!({"business_id": "b-42", "amount": 120.5, "lines": [{"sku": "A-1", "qty": 2}], "confirmed": true});
    group.bench_function("check_call/180", |b| {
        b.iter(|| {
            let mut turn = Turn::new();
            policy.check_call(&request, &intent, &mut turn, black_box("tool_1"), &args)
        })
    });
    group.finish();
}

/// The flow labels and `after` blocks the `flow` group adds to the generated policy.
const FLOW: &str = "labels untrusted, private\n\
after untrusted { confirm write, export  deny execute }\n\
after untrusted, private { deny export }\n\
mode supervised2 { matrix standard  after private { deny delete } }\n";

/// Stage `flow`: the same call and the same offer on one policy with labels and `after`
/// blocks, without a session and within one holding `untrusted` (the cost of a session is one
/// mask lookup per decision).
fn bench_flow(c: &mut Criterion) {
    let mut group = c.benchmark_group("flow");
    let text = format!("{}{FLOW}", gen::policy_text(180));
    let path = format!("{REPO}/policies/bench.warden");
    let policy = match toolwarden::Policy::parse(&text, &path) {
        Ok(p) => p,
        Err(e) => panic!("the flow bench policy must load: {e}"),
    };
    let names: Vec<String> = policy.tools().map(str::to_string).collect();
    let request = gen::request();
    let intent = Intent::named("write");
    let bind = |labels: &[&str]| match Session::with_labels(&policy, labels, "bench") {
        Ok(s) => s,
        Err(e) => panic!("the bench session must bind: {e}"),
    };
    // `private` alone tightens nothing in mode `supervised`: a call is decided as without a
    // session, so the difference is the cost of the session (its binding, one mask test, the
    // update after the call). `untrusted` makes the `after` block that confirms writes apply.
    let session = bind(&["untrusted"]);
    let quiet = bind(&["private"]);
    let args = serde_json::json!({"business_id": "b-42", "amount": 120.5, "lines": [{"sku": "A-1", "qty": 2}]});
    let decided = |v: Result<toolwarden::Verdict, toolwarden::RequestError>| match v {
        Ok(v) => (v.decision, v.stage),
        Err(e) => panic!("the flow bench call must be judged: {e}"),
    };
    let alone = |tool: &str| {
        decided(policy.check_call_strict(&request, &intent, &mut Turn::new(), tool, &args, None))
    };
    let within = |s: &Session, tool: &str| {
        decided(policy.check_call_session(&request, &intent, &mut s.clone(), tool, &args))
    };
    // The rows compare like with like: `tool_10` (effect none) is allowed and `tool_1` (write)
    // asks the user, with or without the quiet session; the untrusted one holds `tool_1` at stage
    // flow as well (the confirmation stage, which asks first, names the reason).
    assert_eq!(alone("tool_10").0, toolwarden::Decision::Allow);
    assert_eq!(alone("tool_1").0, toolwarden::Decision::Confirm);
    for tool in ["tool_10", "tool_1"] {
        assert_eq!(
            alone(tool),
            within(&quiet, tool),
            "`private` must not change {tool}"
        );
    }
    assert_eq!(
        within(&session, "tool_1"),
        (
            toolwarden::Decision::Confirm,
            Some(toolwarden::Stage::Confirmation)
        )
    );
    // Each call starts from a new turn, or from the session as bound: a call the previous
    // iteration left pending would be compared with this one. The copies are made and dropped
    // outside the timing.
    for (row, tool) in [("allow", "tool_10"), ("confirm", "tool_1")] {
        group.bench_function(format!("check_call/{row}/without_session"), |b| {
            b.iter_batched_ref(
                Turn::new,
                |turn| {
                    policy.check_call_strict(&request, &intent, turn, black_box(tool), &args, None)
                },
                BatchSize::SmallInput,
            )
        });
        group.bench_function(format!("check_call/{row}/with_session"), |b| {
            b.iter_batched_ref(
                || quiet.clone(),
                |s| policy.check_call_session(&request, &intent, s, black_box(tool), &args),
                BatchSize::SmallInput,
            )
        });
    }
    group.bench_function("check_call/confirm/untrusted", |b| {
        b.iter_batched_ref(
            || session.clone(),
            |s| policy.check_call_session(&request, &intent, s, black_box("tool_1"), &args),
            BatchSize::SmallInput,
        )
    });
    group.throughput(Throughput::Elements(names.len() as u64));
    // One decision on a request bound once (the per-tool cost inside `offer`), without labels,
    // with the quiet session's (the mask test finds nothing) and with `untrusted`'s (the mask
    // test hits and the `after` block's line decides).
    let bound = |s: Option<&Session>| {
        let b = match s {
            Some(s) => policy.bind_session(&request, &intent, s),
            None => policy.bind(&request, &intent),
        };
        match b {
            Ok(b) => b,
            Err(e) => panic!("the flow bench request must bind: {e}"),
        }
    };
    for (row, s) in [
        ("without_session", None),
        ("with_session", Some(&quiet)),
        ("untrusted", Some(&session)),
    ] {
        let b = bound(s);
        group.bench_function(format!("decide_bound/{row}"), |bench| {
            bench.iter(|| b.decide(black_box("tool_1")))
        });
    }
    group.bench_function("offer_all/without_session", |b| {
        b.iter(|| {
            policy
                .offer(&request, &intent, names.iter().map(String::as_str))
                .map(|o| o.entries().len())
        })
    });
    group.bench_function("offer_all/with_session", |b| {
        b.iter(|| {
            policy
                .offer_session(
                    &request,
                    &intent,
                    black_box(&session),
                    names.iter().map(String::as_str),
                )
                .map(|o| o.entries().len())
        })
    });
    group.finish();
}

/// Queries: short and about 200 bytes, in English, Spanish, Portuguese and Persian.
const QUERIES: [(&str, &str); 8] = [
    ("en_short", "delete invoice 7"),
    ("es_short", "borrar la factura 7"),
    ("pt_short", "apagar a fatura 7"),
    ("fa_short", "فاکتور ۷ را حذف کن"),
    ("en_200", "Hi, could you please take a look at last month's supplier invoices for the Lisbon office and then delete the duplicate one from ACME that was entered twice on the 14th? Thanks a lot."),
    ("es_200", "Hola, ¿podrías revisar las facturas de proveedores del mes pasado de la oficina de Sevilla y luego borrar la factura duplicada de ACME que se registró dos veces el día 14? Gracias."),
    ("pt_200", "Olá, você poderia verificar as faturas de fornecedores do mês passado do escritório de Lisboa e depois apagar a fatura duplicada da ACME que foi lançada duas vezes no dia 14?"),
    ("fa_200", "سلام، لطفاً فاکتورهای تامین‌کنندگان ماه گذشته دفتر تهران را بررسی کن و سپس فاکتور تکراری را که دو بار ثبت شده حذف کن. ممنون"),
];

fn bench_classify(c: &mut Criterion) {
    let (policy, _) = gen::load(180, REPO);
    let mut group = c.benchmark_group("classify");
    for (label, q) in QUERIES {
        group.bench_with_input(BenchmarkId::new(label, q.len()), q, |b, q| {
            b.iter(|| policy.classify(black_box(q)))
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    bench_compile,
    bench_evaluate,
    bench_flow,
    bench_classify,
    bench_rules
);
criterion_main!(benches);
