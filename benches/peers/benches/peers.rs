//! toolwarden, Cedar and Rego (regorus) in the same run: one decision, and an offer over N
//! tools, on the same generated policy and request (see `src/lib.rs`).
//!
//! Run: `cargo bench -p peers`. docs/performance.md records the figures and ratios.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use peers::{gen, Cedar, PeerRequest, Rego, REPO};
use toolwarden::Intent;

fn bench(c: &mut Criterion) {
    let req = PeerRequest::bench();
    for n in [180usize, 1_200] {
        let (policy, names) = gen::load(n, REPO);
        let tools: Vec<gen::ToolSpec> = (0..n).map(gen::tool).collect();
        let tw_request = req.to_toolwarden();
        let intent = Intent::named(req.intent);
        let bound = policy.bind(&tw_request, &intent).expect("binds");
        let cedar = Cedar::new(&tools, &req);
        let cedar_requests: Vec<_> = names.iter().map(|t| cedar.request(t)).collect();
        let mut rego = Rego::new(&tools);
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        // A visible tool (area0 write, `tool_1`), decided by all three.
        let one = "tool_1";
        let one_i = names.iter().position(|x| x == one).expect("tool_1");
        let rego_one = Rego::input(&req, Some(one), &[]);
        let rego_all = Rego::input(&req, None, &refs);

        let mut group = c.benchmark_group(format!("decide/{n}"));
        group.bench_function("toolwarden_bound", |b| {
            b.iter(|| bound.decide(black_box(one)))
        });
        group.bench_function("toolwarden_unbound", |b| {
            b.iter(|| policy.decide_tool(&tw_request, &intent, black_box(one)))
        });
        group.bench_function("cedar", |b| {
            b.iter(|| cedar.decide(black_box(&cedar_requests[one_i])))
        });
        group.bench_function("regorus", |b| b.iter(|| rego.decide(black_box(&rego_one))));
        group.finish();

        let mut group = c.benchmark_group(format!("offer/{n}"));
        if n > 180 {
            group.sample_size(10);
        }
        group.bench_with_input(BenchmarkId::new("toolwarden", n), &refs, |b, refs| {
            b.iter(|| {
                policy
                    .offer(&tw_request, &intent, refs.iter().copied())
                    .map(|o| o.entries().len())
            })
        });
        group.bench_with_input(BenchmarkId::new("cedar", n), &cedar_requests, |b, rs| {
            b.iter(|| cedar.offer(rs).len())
        });
        group.bench_with_input(BenchmarkId::new("regorus", n), &rego_all, |b, input| {
            b.iter(|| rego.offer(input).len())
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
