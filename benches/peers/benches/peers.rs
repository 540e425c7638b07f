//! toolwarden, Cedar and Rego (regorus) in the same run: one decision, and an offer over N
//! tools, on the same generated policy and request (see `src/lib.rs`).
//!
//! Run: `cargo bench -p peers`. After criterion's report it prints the ratios of this run's
//! medians (toolwarden / Cedar, toolwarden / regorus); docs/performance.md records them.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use criterion::{BenchmarkId, Criterion};
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

/// Where criterion writes its estimates: `$CARGO_TARGET_DIR/criterion`, else the workspace's
/// `target/criterion`.
fn criterion_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
        .join("criterion")
}

/// The median, in nanoseconds, that criterion wrote for `bench` (its path under `dir`, such
/// as `decide_180/cedar`) in this run: `None` when the file is missing or older than `since`
/// (the bench was filtered out of this run).
fn median_ns(dir: &Path, bench: &str, since: SystemTime) -> Option<f64> {
    let path = dir.join(bench).join("new/estimates.json");
    let modified = std::fs::metadata(&path).ok()?.modified().ok()?;
    if modified < since {
        return None;
    }
    let text = std::fs::read_to_string(&path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}

/// Prints how many times faster toolwarden's median is than each peer's, for every comparison
/// this run measured.
fn print_ratios(dir: &Path, since: SystemTime) {
    let mut rows = Vec::new();
    for n in [180usize, 1_200] {
        let decide = format!("decide_{n}");
        let offer = format!("offer_{n}");
        for (what, ours, group, peer) in [
            ("one decision (bound)", "toolwarden_bound", &decide, ""),
            (
                "one decision (binding each call)",
                "toolwarden_unbound",
                &decide,
                "",
            ),
            ("offer", "toolwarden", &offer, "/"),
        ] {
            let id = |name: &str| {
                if peer.is_empty() {
                    format!("{group}/{name}")
                } else {
                    format!("{group}/{name}/{n}")
                }
            };
            let Some(t) = median_ns(dir, &id(ours), since) else {
                continue;
            };
            let ratio = |name: &str| {
                median_ns(dir, &id(name), since)
                    .map_or("-".to_string(), |p| format!("{:.0}×", p / t))
            };
            rows.push(format!(
                "{:<36} {:>6} tools {:>12.1} ns {:>10} {:>10}",
                what,
                n,
                t,
                ratio("cedar"),
                ratio("regorus")
            ));
        }
    }
    if rows.is_empty() {
        return;
    }
    println!(
        "\ntoolwarden's median, and how many times faster it is (peer median / toolwarden median):"
    );
    println!(
        "{:<36} {:>12} {:>15} {:>10} {:>10}",
        "", "policy", "toolwarden", "vs Cedar", "vs regorus"
    );
    for r in rows {
        println!("{r}");
    }
}

fn main() {
    let since = SystemTime::now();
    let dir = criterion_dir();
    let mut c = Criterion::default()
        .output_directory(&dir)
        .configure_from_args();
    bench(&mut c);
    c.final_summary();
    print_ratios(&dir, since);
}
