//! A counting global allocator: evaluating a compiled condition allocates nothing on the common
//! path (`under`, `=~`, number comparisons, `in` literals and `context` sets, `matches` on a
//! normalized path, `host()` of a lower-case ASCII host, `present`, `any`, `in query` of an
//! ASCII value of at most 16 words), whether it fires or not, once a regular expression's
//! search cache exists; `in query` of a non-ASCII value allocates its normalized text, and of
//! a value of more than 16 words also the value's words and the query's. Through `check_call`,
//! a tool with four rules that do not fire allocates exactly what the same call on a tool
//! without rules does, with `context` sets (looked up on the stack) and `in query` alike: the
//! verdict is all the rest.
//!
//! Counts are per thread (the test harness runs tests on several threads at once).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use serde_json::json;
use toolwarden::condition::{CompiledCondition, ContextId, ContextSet, EvalContext};
use toolwarden::syntax::ast::{Decl, FileId};
use toolwarden::syntax::parse_file;

struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn compiled(cond: &str) -> CompiledCondition {
    let text = format!("rules {{ deny when {cond} }}");
    let (tree, diagnostics) = parse_file(&text, FileId(0));
    assert!(diagnostics.is_empty(), "{diagnostics:?}");
    let Some(Decl::Rules(r)) = tree.decls.first() else {
        panic!("a rules block");
    };
    let resolve = |name: &str| (name == "contacts").then_some(ContextId(0));
    CompiledCondition::compile(&r.rules[0].condition, &resolve).expect("compiles")
}

#[test]
fn the_common_path_allocates_nothing() {
    let args = json!({
        "path": "/workspace/src/main.rs",
        "url": "https://github.com/acme/repo",
        "content": "fn main() {}",
        "amount": 250,
        "recipient": "alice@example.com",
        "to": ["a@example.com", "b@evil.com"],
    });
    let contacts = ContextSet::new(["alice@example.com"]);
    let sets = [Some(&contacts)];
    let normalize = |s: &str| s.to_lowercase();
    let ctx = EvalContext::new("pay alice", &normalize, &sets);
    for (cond, fires) in [
        (r#"path not under "/workspace", "/tmp""#, false),
        (r#"path under "/workspace""#, true),
        (r#"content =~ "AKIA[0-9A-Z]{16}""#, false),
        (r#"content !~ "AKIA""#, true),
        ("amount > 100", true),
        ("amount <= 100", false),
        ("amount > 100 and not present(nothing)", true),
        (r#"recipient not in context.contacts, "bob""#, false),
        (r#"recipient in "alice@example.com""#, true),
        (r#"path matches "**/*.rs""#, true),
        (r#"host(url) not in "github.com""#, false),
        (r#"host(url) in "github.com""#, true),
        (r#"to[*] not matches "*@example.com""#, true),
        (r#"any =~ "evil""#, true),
        ("missing > 1", true),
        ("amount > 1 or missing > 1", true),
    ] {
        let c = compiled(cond);
        // A regular expression takes its search cache from the `regex` crate's pool on its
        // first use (one allocation, once); every later use reuses it.
        let _ = c.eval(&args, &ctx);
        let before = ALLOCS.with(Cell::get);
        let out = c.eval(&args, &ctx);
        let witness = out
            .witness()
            .map(|w| (w.reference().len(), w.value().is_some()));
        let allocs = ALLOCS.with(Cell::get) - before;
        assert_eq!((out.fires(), allocs), (fires, 0), "{cond}: {witness:?}");
    }
}

#[test]
fn in_query_allocates_only_for_non_ascii_or_long_values() {
    let seventeen = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen";
    // 21 words, 147 bytes: more than is compared at once, and more words than are walked.
    let long = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty twenty-one";
    let query = format!("pay alice and ålice, or {long}");
    let normalize = |s: &str| s.to_lowercase();
    let ctx = EvalContext::new(&query, &normalize, &[]);
    let c = compiled("recipient not in query");
    for (value, allocs) in [
        // An ASCII value of at most 16 words: compared in place.
        ("Alice", 0),
        ("alice and", 0),
        // An ASCII value of at most 128 bytes found as it is written, whatever its words.
        (seventeen, 0),
        // A non-ASCII value: the normalizer's `String`.
        ("Ålice", 1),
        // Over 128 bytes and 16 words: the normalizer's `String`, the value's words and the
        // query's.
        (long, 3),
    ] {
        let args = json!({ "recipient": value });
        let before = ALLOCS.with(Cell::get);
        let fires = c.eval(&args, &ctx).fires();
        let n = ALLOCS.with(Cell::get) - before;
        assert_eq!((fires, n), (false, allocs), "{value}");
    }
    // The query's words are built once per call: a second long value adds only its own.
    let args = json!({ "recipient": long });
    let before = ALLOCS.with(Cell::get);
    let fires = c.eval(&args, &ctx).fires();
    assert_eq!((fires, ALLOCS.with(Cell::get) - before), (false, 2));
}

/// A policy with two tools alike but for the four rules of `ruled`; `context` sets declared
/// when `contexts`.
fn two_tools(rules: &str, contexts: bool) -> toolwarden::Policy {
    let text = format!(
        "policy \"p\" version 1\neffects none, write\nintents write > read\nfallback read\n\
         keywords write {{ en \"send\" }}\n\
         matrix m {{\n  none write\n  read allow allow\n  write allow allow\n}}\nmode m {{ matrix m }}\n\
         confirm fields \"confirmed\"\n{}\
         tool plain {{ effect write  requires path }}\n\
         tool ruled {{\n  effect write\n  requires path\n{rules}}}\n",
        if contexts { "context contacts\n" } else { "" }
    );
    toolwarden::Policy::parse(&text, "p.warden").expect("loads")
}

/// Allocations of one `check_call` of `tool`, after one call that warms the regular
/// expressions' caches.
fn call_allocs(
    policy: &toolwarden::Policy,
    request: &toolwarden::Request,
    intent: &toolwarden::Intent,
    tool: &str,
    args: &serde_json::Value,
) -> usize {
    let mut turn = toolwarden::Turn::new();
    let _ = policy.check_call(request, intent, &mut turn, tool, args);
    let before = ALLOCS.with(Cell::get);
    let v = policy
        .check_call(request, intent, &mut turn, tool, args)
        .expect("fits");
    let allocs = ALLOCS.with(Cell::get) - before;
    assert_eq!(
        v.decision,
        toolwarden::Decision::Allow,
        "{tool}: {}",
        v.reason
    );
    assert!(v.rules.is_empty());
    drop(v);
    allocs
}

#[test]
fn check_call_with_rules_allocates_what_the_call_without_rules_does() {
    let args = json!({
        "path": "/workspace/report.md",
        "content": "quarterly figures",
        "amount": 42.5,
        "recipient": "alice",
    });
    let four = "  deny when path not under \"/workspace\"\n  deny when content =~ \"AKIA[0-9A-Z]{16}\"\n  confirm when amount > 100\n";
    // `under`, `=~`, `>` and `in` a literal list: nothing more than the call without rules.
    let p = two_tools(
        &format!("{four}  confirm when recipient not in \"alice\", \"bob\"\n"),
        false,
    );
    let (request, intent) = (
        toolwarden::Request::new("m"),
        toolwarden::Intent::named("write"),
    );
    let plain = call_allocs(&p, &request, &intent, "plain", &args);
    let ruled = call_allocs(&p, &request, &intent, "ruled", &args);
    assert_eq!(ruled, plain);

    // `in context.contacts`: the request's sets are looked up on the stack.
    let p = two_tools(
        &format!("{four}  confirm when recipient not in context.contacts\n"),
        true,
    );
    let request = toolwarden::Request::new("m").context("contacts", ["alice"]);
    let plain = call_allocs(&p, &request, &intent, "plain", &args);
    let ruled = call_allocs(&p, &request, &intent, "ruled", &args);
    assert_eq!(ruled, plain);

    // `in query` of an ASCII value: the query's words are read in place.
    let p = two_tools(
        &format!("{four}  confirm when recipient not in query\n"),
        false,
    );
    let intent = p.classify("send the report to alice");
    let request = toolwarden::Request::new("m");
    let plain = call_allocs(&p, &request, &intent, "plain", &args);
    let ruled = call_allocs(&p, &request, &intent, "ruled", &args);
    assert_eq!(ruled, plain);
}
