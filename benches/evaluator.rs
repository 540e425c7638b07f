//! Evaluator benches over generated policies of realistic shape: 8 roles in a hierarchy, 40
//! permissions with implications, the standard 5×5 matrix, 3 modes, 3 tiers, the shipped
//! lexicon, and N tools with mixed effects, permissions and `mcp__<server>__` names.
//!
//! Run: `cargo bench --bench evaluator`.

use std::fmt::Write as _;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use toolwarden::{Intent, Policy, Request, Turn};

const EFFECTS: [&str; 5] = ["none", "write", "delete", "export", "execute"];
const SERVERS: [&str; 4] = ["github", "slack", "drive", "jira"];

/// Policy text with `n` tools.
fn policy_text(n: usize) -> String {
    let mut s = String::new();
    s.push_str("policy \"bench\" version 1\n");
    s.push_str("effects none, write, delete, export, execute\n");
    s.push_str("intents destructive > execute > export > write > read\nfallback read\n");
    s.push_str("include \"lexicon/standard.warden\"\n");
    s.push_str(
        "matrix standard {\n              none   write  delete export execute\n  read        allow  deny   deny   deny   deny\n  write       allow  allow  deny   deny   deny\n  destructive allow  deny   allow  deny   deny\n  export      allow  deny   deny   allow  deny\n  execute     allow  deny   deny   deny   allow\n}\n",
    );
    s.push_str("mode analyzer { matrix standard restrict none }\n");
    s.push_str("mode supervised { matrix standard confirm write, delete, export, execute }\n");
    s.push_str("mode autonomous { matrix standard confirm export, execute }\n");
    s.push_str("default mode supervised\n");
    s.push_str("roles { owner > admin > manager > accountant > clerk > viewer, auditor > viewer, support > viewer }\n");
    for g in 0..8 {
        let _ = writeln!(
            s,
            "permission \"area{g}.manage\" implies \"area{g}.add\", \"area{g}.delete\", \"area{g}.view\", \"area{g}.export\""
        );
    }
    s.push_str("tiers task > session > project\nconnectors prefix \"mcp__\"\nunknown deny\n");
    s.push_str("confirm fields \"confirmed\"\ntenant arg \"business_id\"\nlimit transactional 1 per turn\n");
    for i in 0..n {
        let effect = EFFECTS[i % 5];
        let area = i % 8;
        let perm = match effect {
            "none" => "view",
            "write" => "add",
            "delete" => "delete",
            _ => "export",
        };
        let name = if i % 3 == 0 {
            format!("mcp__{}__tool_{i}", SERVERS[i % 4])
        } else {
            format!("tool_{i}")
        };
        let roles = if i % 7 == 0 { " roles accountant" } else { "" };
        let _ = writeln!(
            s,
            "tool {name} {{ effect {effect} permissions \"area{area}.{perm}\" tenant required{roles} }}"
        );
    }
    s
}

fn load(n: usize) -> (Policy, Vec<String>) {
    let text = policy_text(n);
    let policy = match Policy::parse(&text, "policies/bench.warden") {
        Ok(p) => p,
        Err(e) => panic!("generated policy must load: {e}"),
    };
    let names = policy.tools().map(str::to_string).collect();
    (policy, names)
}

fn request() -> Request {
    Request::new("supervised")
        .roles(["accountant"])
        .permissions(["area0.manage", "area1.manage", "area2.view", "area3.manage"])
        .tenant("b-42")
        .connectors("session", ["github", "drive"])
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("compile");
    for n in [180usize, 1_200] {
        let text = policy_text(n);
        group.bench_with_input(BenchmarkId::new("parse_check_compile", n), &text, |b, t| {
            b.iter(|| {
                Policy::parse(black_box(t), "policies/bench.warden").map(|p| p.tools().count())
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("evaluate");
    for n in [10usize, 180, 1_200, 10_000] {
        let (policy, names) = load(n);
        let request = request();
        let intent = Intent::named("write");
        let name = names[n / 2].clone();
        group.bench_with_input(BenchmarkId::new("decide_one", n), &name, |b, name| {
            b.iter(|| policy.decide_tool(&request, &intent, black_box(name)))
        });
        group.bench_with_input(BenchmarkId::new("offer_all", n), &names, |b, names| {
            b.iter(|| {
                policy
                    .offer(&request, &intent, names.iter().map(String::as_str))
                    .map(|o| o.visible().count())
            })
        });
    }
    let (policy, _) = load(180);
    let request = request();
    let intent = Intent::named("write");
    let args = serde_json::json!({"business_id": "b-42", "amount": 120.5, "lines": [{"sku": "A-1", "qty": 2}], "confirmed": true});
    group.bench_function("check_call/180", |b| {
        b.iter(|| {
            let mut turn = Turn::new();
            policy.check_call(&request, &intent, &mut turn, black_box("tool_1"), &args)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
