//! A harness for counting instructions with callgrind (load-independent, unlike wall-clock
//! benches): the calls and compiles of the bench group `rules/` in `benches/evaluator.rs`,
//! repeated N times.
//!
//! ```text
//! cargo build --release --example rules_callgrind
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \
//!     target/release/examples/rules_callgrind MODE N
//! ```
//!
//! MODE is `four` (`check_call` on the tool `pay` with four argument rules: `under`, `=~`, `>`,
//! `in query`), `none` (the same call on the same tool without rules), `compile` (parse, check
//! and compile the 1,200-tool policy with three rules on every tool) or `compile-plain` (the
//! same 1,200 tools without rules). Run it with two values of N: the difference of the two
//! totals over the difference of the Ns is the cost of one iteration (the setup cancels out).

use std::hint::black_box;
use std::process::ExitCode;

use toolwarden::{Decision, Policy, Turn};

#[path = "../benches/support/gen.rs"]
mod gen;

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// The four rules of the bench's `pay` tool.
const FOUR: &str = "  deny when path not under \"/workspace\"\n  deny when content =~ \"AKIA[0-9A-Z]{16}\"\n  confirm when amount > 100\n  confirm when recipient not in query\n";

fn bench_path() -> String {
    format!("{REPO}/policies/bench.warden")
}

/// The 180-tool bench policy plus the tool `pay` with `rules` in its body.
fn with_pay_tool(rules: &str) -> Result<Policy, String> {
    let mut text = gen::policy_text(180);
    text.push_str(&format!(
        "tool pay {{\n  effect write  permissions \"area0.add\"  tenant required\n{rules}}}\n"
    ));
    Policy::parse(&text, &bench_path()).map_err(|e| e.to_string())
}

fn calls(rules: &str, n: usize) -> Result<(), String> {
    let policy = with_pay_tool(rules)?;
    let request = gen::request();
    let intent = policy.classify("please pay 42.5 to alice@example.com for the q3 report");
    let args = serde_json::json!({
        "business_id": "b-42",
        "path": "/workspace/reports/q3.md",
        "content": "Quarterly summary: revenue grew 4% over the quarter, see the figures per region.",
        "amount": 42.5,
        "recipient": "alice@example.com",
        "confirmed": true
    });
    for _ in 0..n {
        let mut turn = Turn::new();
        let v = policy
            .check_call(&request, &intent, &mut turn, black_box("pay"), &args)
            .map_err(|e| e.to_string())?;
        if v.decision != Decision::Allow {
            return Err(format!("the call must be allowed: {v:?}"));
        }
    }
    Ok(())
}

fn compiles(text: &str, n: usize) -> Result<(), String> {
    let path = bench_path();
    for _ in 0..n {
        let p = Policy::parse(black_box(text), &path).map_err(|e| e.to_string())?;
        black_box(p.tools().count());
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(mode), Some(n)) = (args.get(1), args.get(2).and_then(|n| n.parse().ok())) else {
        eprintln!("usage: rules_callgrind four|none|compile|compile-plain N");
        return ExitCode::from(2);
    };
    let result = match mode.as_str() {
        "four" => calls(FOUR, n),
        "none" => calls("", n),
        "compile" => compiles(&gen::policy_text_with_rules(1_200), n),
        "compile-plain" => compiles(&gen::policy_text(1_200), n),
        other => Err(format!("unknown mode `{other}`")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
