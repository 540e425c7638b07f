//! Classifies one query N times, for counting instructions under callgrind on machines without
//! hardware counters: run it with N = 1000 and N = 6000 and divide the difference by 5000.
//!
//! `cargo build --release --example classify_callgrind`, then
//! `valgrind --tool=callgrind target/release/examples/classify_callgrind POLICY QUERY N`.

use std::hint::black_box;
use std::process::ExitCode;

use toolwarden::Policy;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, policy, query, n] = args.as_slice() else {
        eprintln!("usage: classify_callgrind POLICY QUERY N");
        return ExitCode::from(2);
    };
    let policy = match Policy::from_file(policy) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let Ok(n) = n.parse::<u32>() else {
        eprintln!("N must be a whole number, got {n:?}");
        return ExitCode::from(2);
    };
    let mut kept = 0usize;
    for _ in 0..n {
        kept += black_box(policy.classify(black_box(query))).hits.len();
    }
    println!("{kept}");
    ExitCode::SUCCESS
}
