//! `diff` of two generated 1,200-tool policies (issue 5 target: well under a second).
//!
//! Run: `cargo bench --bench diff`; criterion reports the median-centred estimate per group.

use criterion::{criterion_group, criterion_main, Criterion};
use toolwarden::analysis::{PolicyDiff, Table};
use toolwarden::Policy;

/// A policy with `n` tools of mixed effects, roles, permissions and tenant rules; `variant`
/// changes one matrix cell, every 7th tool's effect and every 11th tool's roles.
fn generate(n: usize, variant: bool) -> String {
    let mut s = String::from(
        "policy \"gen\" version 1\n\
         effects none, write, delete, export, execute\n\
         intents destructive > execute > export > write > read\n\
         fallback read\n\
         keywords destructive { en \"delete\", \"remove\" }\n\
         keywords write { en \"create\", \"update\" }\n\
         keywords export { en \"export\" }\n\
         keywords execute { en \"run\" }\n",
    );
    s.push_str(&format!(
        "matrix standard {{\n  none write delete export execute\n  read allow deny deny deny deny\n  write allow allow {} deny deny\n  destructive allow deny allow deny deny\n  export allow deny deny allow deny\n  execute allow deny deny deny allow\n}}\n",
        if variant { "allow" } else { "deny" }
    ));
    s.push_str(
        "mode analyzer { matrix standard restrict none }\n\
         mode supervised { matrix standard confirm write, delete, export, execute }\n\
         mode autonomous { matrix standard confirm export, execute }\n\
         default mode supervised\n\
         roles { admin > manager > clerk > viewer }\n\
         permission \"all.manage\" implies \"a.view\", \"a.edit\", \"a.delete\"\n\
         tiers task > session > project\n\
         connectors prefix \"mcp__\"\n\
         unknown deny\n",
    );
    let effects = ["none", "write", "delete", "export", "execute"];
    let roles = ["viewer", "clerk", "manager", "admin"];
    let perms = ["a.view", "a.edit", "a.delete"];
    for i in 0..n {
        let mut e = effects[i % 5];
        if variant && i.is_multiple_of(7) {
            e = effects[(i + 1) % 5];
        }
        let mut r = roles[(i / 5) % 4];
        if variant && i.is_multiple_of(11) {
            r = roles[(i / 5 + 1) % 4];
        }
        let name = if i.is_multiple_of(3) {
            format!("mcp__srv{}__tool_{i}", i % 13)
        } else {
            format!("tool_{i}")
        };
        s.push_str(&format!(
            "tool \"{name}\" {{ effect {e} roles {r} permissions \"{}\"{} }}\n",
            perms[i % 3],
            if i.is_multiple_of(2) {
                " tenant required"
            } else {
                ""
            }
        ));
    }
    s.push_str("match \"mcp__*__get_*\" { effect none }\n");
    s
}

fn bench(c: &mut Criterion) {
    let old = Policy::parse(&generate(1200, false), "old.warden").expect("generated policy loads");
    let new = Policy::parse(&generate(1200, true), "new.warden").expect("generated policy loads");
    let d = PolicyDiff::compute(&old, &new);
    assert!(!d.cells.is_empty());
    let mut g = c.benchmark_group("diff_1200_tools");
    g.sample_size(20);
    g.bench_function("compute", |b| b.iter(|| PolicyDiff::compute(&old, &new)));
    g.bench_function("table", |b| b.iter(|| Table::build(&new, None)));
    g.finish();

    // Deep role chains: loading closes them, diff compares them, both in near-linear time.
    let chain = |n: usize| {
        let roles: Vec<String> = (0..n).map(|i| format!("r{i}")).collect();
        format!(
            "policy \"chain\" version 1\neffects none\nmode m {{ }}\nroles {{ {} }}\n",
            roles.join(" > ")
        )
    };
    let text = chain(20_000);
    let ten = Policy::parse(&chain(10_000), "chain.warden").expect("chain loads");
    let mut g = c.benchmark_group("role_chains");
    g.sample_size(10);
    g.bench_function("load_20000", |b| {
        b.iter(|| Policy::parse(&text, "chain.warden").expect("chain loads"))
    });
    g.bench_function("diff_10000_with_itself", |b| {
        b.iter(|| PolicyDiff::compute(&ten, &ten))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
