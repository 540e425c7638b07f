//! Hot reload: a broken edit keeps the old decisions, a fixed edit takes effect, readers on other
//! threads see the old or the new policy and nothing else, and file changes (root and include)
//! are picked up by the file system watch within a bounded wait.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use toolwarden::watch::{PolicyWatcher, ReloadEvent};
use toolwarden::{Decision, Request};

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("toolwarden-watch-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A policy whose only tool has effect `effect` (`none` is allowed in mode m, `write` is
/// denied by the ceiling).
fn policy(version: u32, effect: &str) -> String {
    format!(
        "policy \"w\" version {version}\neffects none, write\nmode m {{ restrict none }}\ninclude \"extra.warden\"\ntool t {{ effect {effect} }}\n"
    )
}

fn write(path: &Path, text: &str) {
    // Write a sibling and rename it over, as editors do, so a reader never sees half a file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

fn decision(w: &PolicyWatcher, tool: &str) -> Decision {
    let p = w.policy();
    let intent = p.classify("");
    p.decide_tool(&Request::new("m"), &intent, tool)
        .expect("decide")
        .decision
}

type Events = Arc<Mutex<Vec<String>>>;

fn recorder() -> (Events, impl FnMut(&ReloadEvent) + Send + 'static) {
    let events: Events = Arc::new(Mutex::new(Vec::new()));
    let e = Arc::clone(&events);
    let cb = move |ev: &ReloadEvent| {
        let line = match ev {
            ReloadEvent::Reloaded { generation } => format!("reloaded {generation}"),
            ReloadEvent::Rejected { generation, error } => format!(
                "rejected, serving {generation}: {}",
                error.diagnostics()[0].code()
            ),
        };
        e.lock().expect("events").push(line);
    };
    (events, cb)
}

#[test]
fn broken_edit_keeps_old_decisions_and_fixed_edit_takes_effect() {
    let dir = TempDir::new("reload");
    let root = dir.0.join("main.warden");
    std::fs::write(dir.0.join("extra.warden"), "tool u { effect none }\n").expect("write");
    write(&root, &policy(1, "none"));
    let (events, cb) = recorder();
    let w = PolicyWatcher::unwatched(&root, cb).expect("loads");
    assert_eq!(w.generation(), 1);
    assert_eq!(decision(&w, "t"), Decision::Allow);

    // A broken edit: an undefined effect. The old policy keeps deciding.
    write(&root, &policy(2, "explode"));
    let err = w.reload_now().unwrap_err();
    assert_eq!(err.diagnostics()[0].code(), "undefined-effect");
    assert_eq!(w.generation(), 1);
    assert_eq!(w.rejected(), 1);
    assert_eq!(w.current().policy.version(), Some(1));
    assert_eq!(decision(&w, "t"), Decision::Allow);

    // A fixed edit: `t` now writes, which mode m's ceiling denies.
    write(&root, &policy(3, "write"));
    assert_eq!(w.reload_now().expect("reloads"), 2);
    assert_eq!(w.generation(), 2);
    // Reloading unchanged files is no new generation and reports nothing.
    assert_eq!(w.reload_now().expect("reloads"), 2);
    assert_eq!(w.generation(), 2);
    // A broken edit undone: the served text again, reported as the generation still served.
    write(&root, &policy(4, "explode"));
    assert!(w.reload_now().is_err());
    write(&root, &policy(3, "write"));
    assert_eq!(w.reload_now().expect("reloads"), 2);
    assert_eq!(w.generation(), 2);
    let snap = w.current();
    assert_eq!((snap.generation, snap.policy.version()), (2, Some(3)));
    assert_eq!(decision(&w, "t"), Decision::Deny);

    assert_eq!(
        *events.lock().expect("events"),
        [
            "rejected, serving 1: undefined-effect",
            "reloaded 2",
            "rejected, serving 2: undefined-effect",
            "reloaded 2"
        ]
    );
}

#[test]
fn first_load_failure_is_an_error() {
    let dir = TempDir::new("first");
    let root = dir.0.join("main.warden");
    std::fs::write(&root, "policy \"w\"\ntool t { effect nope }\n").expect("write");
    let err = PolicyWatcher::unwatched(&root, |_: &ReloadEvent| {}).unwrap_err();
    assert!(
        err.to_string().starts_with("the policy does not load:"),
        "{err}"
    );
}

#[test]
fn readers_during_reloads_see_old_or_new_and_nothing_else() {
    let dir = TempDir::new("readers");
    let root = dir.0.join("main.warden");
    std::fs::write(dir.0.join("extra.warden"), "tool u { effect none }\n").expect("write");
    write(&root, &policy(1, "none"));
    let w = Arc::new(PolicyWatcher::unwatched(&root, |_: &ReloadEvent| {}).expect("loads"));
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let w = Arc::clone(&w);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut seen = 0u64;
                let mut last_generation = 0;
                while !stop.load(Ordering::SeqCst) {
                    let snap = w.current();
                    // Odd versions declare `t` as none (allow), even ones as write (deny); a
                    // snapshot mixing two policies would break the pairing.
                    let version = snap.policy.version().expect("version");
                    let intent = snap.policy.classify("");
                    let d = snap
                        .policy
                        .decide_tool(&Request::new("m"), &intent, "t")
                        .expect("decide")
                        .decision;
                    let want = if version % 2 == 1 {
                        Decision::Allow
                    } else {
                        Decision::Deny
                    };
                    assert_eq!(d, want, "version {version}");
                    assert_eq!(version, snap.generation, "generation and policy agree");
                    assert!(
                        snap.generation >= last_generation,
                        "generations never go back"
                    );
                    last_generation = snap.generation;
                    seen += 1;
                }
                seen
            })
        })
        .collect();
    for version in 2..=40u32 {
        let effect = if version % 2 == 1 { "none" } else { "write" };
        write(&root, &policy(version, effect));
        assert_eq!(w.reload_now().expect("reloads"), u64::from(version));
        // A broken edit in between never shows.
        write(&root, "policy \"w\" version 999\ntool t {");
        assert!(w.reload_now().is_err());
    }
    stop.store(true, Ordering::SeqCst);
    let reads: u64 = readers.into_iter().map(|r| r.join().expect("reader")).sum();
    assert!(reads > 0);
    assert_eq!(w.generation(), 40);
    assert_eq!(w.rejected(), 39);
}

/// The watcher's generation once no reload has happened for half a second (bounded wait).
fn settled(w: &PolicyWatcher) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut generation = w.generation();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = w.generation();
        if now == generation || Instant::now() > deadline {
            return now;
        }
        generation = now;
    }
}

/// Waits (polling, bounded) until `f` holds.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn file_changes_to_root_and_include_are_picked_up() {
    let dir = TempDir::new("notify");
    let root = dir.0.join("main.warden");
    let extra = dir.0.join("extra.warden");
    std::fs::write(&extra, "tool u { effect none }\n").expect("write");
    write(&root, &policy(1, "none"));
    let (events, cb) = recorder();
    let w = PolicyWatcher::new(&root, cb).expect("watches");
    assert_eq!(w.watched_files().len(), 2);
    assert_eq!(decision(&w, "u"), Decision::Allow);

    // Edit the include: `u` becomes a write tool, denied by the ceiling.
    write(&extra, "tool u { effect write }\n");
    eventually("the include edit", || decision(&w, "u") == Decision::Deny);

    // A broken root edit is reported and changes nothing. One edit can raise several file
    // events (truncate, then write), so wait until reloads of the include edit have stopped.
    let generation = settled(&w);
    write(&root, "policy \"w\" version 2\ntool t { effect }\n");
    eventually("the rejection", || w.rejected() >= 1);
    assert_eq!(w.generation(), generation);
    assert_eq!(decision(&w, "u"), Decision::Deny);

    // Fixing it takes effect.
    write(&root, &policy(3, "write"));
    eventually("the fix", || w.current().policy.version() == Some(3));
    assert_eq!(decision(&w, "t"), Decision::Deny);
    let events = events.lock().expect("events").clone();
    assert!(
        events.iter().any(|e| e.starts_with("rejected, serving")),
        "{events:?}"
    );
}

/// A broken edit whose diagnostic starts past column 65,535 (undefined effect `wrte`).
fn far_right_edit() -> String {
    format!(
        "policy \"w\" version 2\neffects none, write\nmode m {{ restrict none }}\n{}tool t {{ effect wrte }}\n",
        " ".repeat(70_000)
    )
}

#[test]
fn a_far_right_diagnostic_renders_and_the_watcher_keeps_reloading() {
    let dir = TempDir::new("far-right");
    let root = dir.0.join("main.warden");
    std::fs::write(dir.0.join("extra.warden"), "").expect("write");
    write(&root, &policy(1, "none"));
    let rendered: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    let r = Arc::clone(&rendered);
    // As `offer --watch` does: every rejected edit is rendered.
    let w = PolicyWatcher::new(&root, move |ev: &ReloadEvent| {
        if let ReloadEvent::Rejected { error, .. } = ev {
            let text = error.render();
            r.lock().expect("rendered").push(text);
        }
    })
    .expect("watches");
    write(&root, &far_right_edit());
    eventually("the rendered rejection", || {
        !rendered.lock().expect("rendered").is_empty()
    });
    let first = rendered.lock().expect("rendered")[0].clone();
    assert!(
        first.contains(&format!("[{}:4:70017]", root.display())),
        "{first}"
    );
    assert_eq!(w.generation(), 1);
    assert_eq!(decision(&w, "t"), Decision::Allow);
    // A later good edit is served.
    write(&root, &policy(3, "write"));
    eventually("the fix", || w.current().policy.version() == Some(3));
    assert_eq!(decision(&w, "t"), Decision::Deny);
}

#[test]
fn a_panicking_reload_callback_does_not_stop_the_watcher() {
    let dir = TempDir::new("panic");
    let root = dir.0.join("main.warden");
    std::fs::write(dir.0.join("extra.warden"), "").expect("write");
    write(&root, &policy(1, "none"));
    let w = PolicyWatcher::new(&root, |ev: &ReloadEvent| {
        if matches!(ev, ReloadEvent::Rejected { .. }) {
            panic!("callback failed");
        }
    })
    .expect("watches");
    // Through the file system watch: the panic stays inside that reload.
    write(&root, "policy \"w\" version 2\ntool t { effect }\n");
    eventually("the rejection", || w.rejected() >= 1);
    assert_eq!(w.generation(), 1);
    write(&root, &policy(3, "write"));
    eventually("the fix", || w.current().policy.version() == Some(3));
    assert_eq!(decision(&w, "t"), Decision::Deny);
    // Through `reload_now`: the panic is an error of that reload, not the caller's panic.
    let generation = settled(&w);
    write(&root, "policy \"w\" version 4\ntool t { effect }\n");
    let err = w.reload_now().expect_err("rejected");
    let codes: Vec<&str> = err.diagnostics().iter().map(|d| d.code()).collect();
    assert_eq!(codes, ["reload-failed"]);
    assert_eq!(
        err.diagnostics()[0].message(),
        format!("reloading `{}` failed: callback failed", root.display())
    );
    assert_eq!(w.current().policy.version(), Some(3));
    assert_eq!(w.generation(), generation);
}

#[test]
fn a_callback_panicking_after_a_good_reload_leaves_the_new_policy_served() {
    let dir = TempDir::new("panic-after-reload");
    let root = dir.0.join("main.warden");
    std::fs::write(dir.0.join("extra.warden"), "").expect("write");
    write(&root, &policy(1, "none"));
    let w = PolicyWatcher::unwatched(&root, |ev: &ReloadEvent| {
        if matches!(ev, ReloadEvent::Reloaded { .. }) {
            panic!("callback failed");
        }
    })
    .expect("loads");
    write(&root, &policy(2, "write"));
    assert_eq!(w.reload_now().expect("reloaded"), 2);
    assert_eq!((w.generation(), w.rejected()), (2, 0));
    assert_eq!(w.current().policy.version(), Some(2));
    // Later edits still reload.
    write(&root, &policy(3, "none"));
    assert_eq!(w.reload_now().expect("reloaded"), 3);
    assert_eq!(decision(&w, "t"), Decision::Allow);
}
