//! A counting global allocator: a bound decision allocates nothing, `offer` allocates only its
//! result (one `Vec`), a compiled 1,200-tool policy holds at most 2 MiB of heap, and reloading a
//! policy keeps nothing.
//!
//! Counts are per thread (the test harness runs tests on several threads at once).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use toolwarden::{Decision, Intent};

#[path = "../benches/support/gen.rs"]
mod gen;

struct Counting;

thread_local! {
    /// (allocations, bytes allocated, bytes freed) on this thread.
    static COUNTS: Cell<(usize, usize, usize)> = const { Cell::new((0, 0, 0)) };
}

fn note(allocs: usize, added: usize, freed: usize) {
    let _ = COUNTS.try_with(|c| {
        let (a, b, f) = c.get();
        c.set((a + allocs, b + added, f + freed));
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(1, layout.size(), 0);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note(0, 0, layout.size());
        System.dealloc(ptr, layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(1, layout.size(), 0);
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(1, new_size, layout.size());
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn counts() -> (usize, usize, usize) {
    COUNTS.with(Cell::get)
}

/// (allocations, net bytes still held) while running `f`, and its result.
fn measure<T>(f: impl FnOnce() -> T) -> (usize, isize, T) {
    let (a0, b0, f0) = counts();
    let out = f();
    let (a1, b1, f1) = counts();
    (a1 - a0, (b1 - b0) as isize - (f1 - f0) as isize, out)
}

const REPO: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn a_bound_decision_allocates_nothing() {
    let (policy, names) = gen::load(180, REPO);
    let request = gen::request();
    let intent = Intent::named("write");
    let bound = policy.bind(&request, &intent).expect("binds");
    // Every stage's outcome: allowed, confirm, and denials at several stages, plus an
    // unknown name.
    let mut probe: Vec<&str> = names.iter().map(String::as_str).collect();
    probe.push("no_such_tool");
    let (allocs, _, decided) = measure(|| {
        let mut tally = [0usize; 3];
        for name in &probe {
            tally[bound.decide(name).decision as usize] += 1;
        }
        tally
    });
    assert_eq!(allocs, 0, "decisions allocated");
    // The generated policy and request give all three outcomes.
    assert!(decided.iter().all(|&n| n > 0), "outcomes: {decided:?}");
    assert_eq!(decided.iter().sum::<usize>(), 181);
    assert_eq!(bound.decide("no_such_tool").decision, Decision::Deny);
}

#[test]
fn binding_a_request_allocates_nothing_for_narrow_policies() {
    // 8 roles, 40 permissions, 4 servers: every set fits one word.
    let (policy, _) = gen::load(180, REPO);
    let request = gen::request();
    let intent = Intent::named("write");
    let (allocs, _, mode) = measure(|| policy.bind(&request, &intent).map(|b| b.mode()));
    assert_eq!(mode, Ok("supervised"));
    assert_eq!(allocs, 0);
}

#[test]
fn offer_allocates_only_its_result() {
    let (policy, names) = gen::load(1_200, REPO);
    let request = gen::request();
    let intent = Intent::named("write");
    let (allocs, held, offer) = measure(|| {
        policy
            .offer(&request, &intent, names.iter().map(String::as_str))
            .expect("offer")
    });
    assert_eq!(allocs, 1, "one Vec for the result");
    assert_eq!(offer.entries().len(), 1_200);
    // What is held is exactly the result's buffer.
    assert_eq!(
        held as usize,
        1_200 * std::mem::size_of::<(&str, toolwarden::ToolDecision)>(),
        "bytes held"
    );
}

#[test]
fn a_compiled_1200_tool_policy_holds_at_most_2_mib() {
    let text = gen::policy_text(1_200);
    let path = format!("{REPO}/policies/bench.warden");
    // Warm-up: anything initialised once per process is not the policy's.
    drop(toolwarden::Policy::parse(&text, &path).expect("loads"));
    let (_, held, policy) = measure(|| toolwarden::Policy::parse(&text, &path).expect("loads"));
    assert_eq!(policy.tools().count(), 1_200);
    // Everything the policy keeps: sources (policy and lexicon text), decision graph, tables,
    // keyword automaton, rule spans.
    assert!(held > 0);
    assert!(
        held <= 2 * 1024 * 1024,
        "a compiled 1,200-tool policy holds {held} bytes"
    );
    eprintln!("compiled 1,200-tool policy: {held} bytes on the heap");
}

#[test]
fn reloading_a_policy_keeps_no_memory() {
    // Keyword, language and intent names are interned once per process (so that a hit copies
    // them without reference counting): after the first load, loading and dropping the same
    // policy again holds nothing.
    let path = format!("{REPO}/policies/finance.warden");
    let text = std::fs::read_to_string(&path).expect("readable");
    drop(toolwarden::Policy::parse(&text, &path).expect("loads"));
    let (allocs, held, ()) = measure(|| {
        for _ in 0..3 {
            drop(toolwarden::Policy::parse(&text, &path).expect("loads"));
        }
    });
    assert!(allocs > 0);
    assert_eq!(held, 0, "three reloads kept {held} bytes");
}

#[test]
fn loading_ever_new_keyword_names_holds_a_bounded_heap() {
    // Names are interned only up to a fixed budget (256 KiB, reckoned with overhead); past it
    // they are freed with their policy. Twenty policies of 2,000 new names each (about 50 bytes
    // a name with its overhead, 2 MB in all) must leave well under 1 MiB behind.
    let policy = |n: usize| {
        let words: Vec<String> = (0..2_000)
            .map(|k| format!("\"name{n:03}x{k:05}\""))
            .collect();
        format!("{SMALL}keywords write {{\n  en {}\n}}\n", words.join(", "))
    };
    let (_, held, ()) = measure(|| {
        for n in 0..20 {
            let text = policy(n);
            let p = toolwarden::Policy::parse(&text, "names.warden").expect("loads");
            assert_eq!(p.classify(&format!("name{n:03}x00007")).name, "write");
        }
    });
    assert!(
        held < 1024 * 1024,
        "twenty policies of new names kept {held} bytes"
    );
}

const SMALL: &str = r#"policy "names" version 1
effects none, write
intents write > read
fallback read
matrix m {
        none   write
  read  allow  deny
  write allow  allow
}
mode supervised { matrix m }
tool list_things { effect none }
"#;
