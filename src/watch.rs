//! Hot reload: [`PolicyWatcher`] keeps a policy file loaded, reloads it when the file or one of
//! its includes changes, and swaps the new policy in atomically. The folders watched are those
//! of the files loaded when the watcher starts: an include added by a later edit is loaded with
//! it, but its own changes are noticed only if its folder is among them (a root edit reloads
//! it in any case).
//!
//! A reload that fails (any error diagnostic) never replaces the policy being served: readers go
//! on seeing the last good one, the failure is reported through the callback, and
//! [`PolicyWatcher::generation`] does not move. A reload that panics (in loading, or in the
//! callback of a rejected edit) is one failed reload too: it is counted as rejected, the last
//! good policy stays served, and later edits are reloaded as before. A callback that panics
//! after a successful reload leaves the new policy served. Readers take a [`Snapshot`] (`Arc`) through an
//! [`arc_swap::ArcSwap`], so a reader holds either the old policy or the new one, fully built,
//! never a mix; a reader never waits for a reload.
//!
//! ```no_run
//! use toolwarden::watch::{PolicyWatcher, ReloadEvent};
//! let watcher = PolicyWatcher::new("policies/finance.warden", |event: &ReloadEvent| {
//!     if let ReloadEvent::Rejected { error, .. } = event {
//!         eprintln!("policy edit rejected, still serving the last good one:\n{}", error.render());
//!     }
//! })?;
//! let snapshot = watcher.current();           // policy + generation, consistent together
//! assert_eq!(snapshot.generation, 1);
//! # Ok::<(), toolwarden::watch::WatchError>(())
//! ```

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use notify::{RecursiveMode, Watcher};

use crate::diagnostic::{Diagnostic, PolicyError, Sources};
use crate::policy::Policy;

/// A policy together with the generation it was loaded as: what a reader sees.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The policy.
    pub policy: Policy,
    /// 1 for the policy loaded by [`PolicyWatcher::new`], then +1 for each successful reload.
    pub generation: u64,
}

/// What a reload attempt did, passed to the watcher's callback.
#[derive(Debug)]
pub enum ReloadEvent {
    /// The new text loaded and is now served as `generation`.
    Reloaded {
        /// The new generation.
        generation: u64,
    },
    /// The new text has errors; the policy of `generation` is still served.
    Rejected {
        /// The generation still served.
        generation: u64,
        /// Every diagnostic of the rejected text.
        error: PolicyError,
    },
}

/// Why a watcher could not start.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The first load failed; there is no good policy to serve.
    #[error("the policy does not load:\n{}", .0.render())]
    Load(PolicyError),
    /// The file system watch could not be set up.
    #[error("cannot watch `{path}`: {reason}")]
    Watch {
        /// The directory that could not be watched.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
}

type Callback = Box<dyn FnMut(&ReloadEvent) + Send>;

struct Shared {
    path: PathBuf,
    current: ArcSwap<Snapshot>,
    generation: AtomicU64,
    rejected: AtomicU64,
    /// Whether the last reload was rejected (so a return to the served text is news).
    last_rejected: AtomicBool,
    /// Serializes reloads (file events and `reload_now`) and owns the callback.
    reload: Mutex<Callback>,
    /// The files the served policy was read from (the root and its includes).
    files: Mutex<Vec<PathBuf>>,
}

/// A policy file kept loaded and reloaded on change. See the [module docs](self).
pub struct PolicyWatcher {
    shared: Arc<Shared>,
    watcher: Option<Mutex<notify::RecommendedWatcher>>,
}

impl std::fmt::Debug for PolicyWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyWatcher")
            .field("path", &self.shared.path)
            .field("generation", &self.generation())
            .finish()
    }
}

impl PolicyWatcher {
    /// Loads the policy at `path` and watches it and its includes; `on_reload` is called (from
    /// the watcher's thread, or from [`PolicyWatcher::reload_now`]'s caller) after every reload
    /// attempt.
    ///
    /// # Errors
    ///
    /// [`WatchError::Load`] when the policy does not load the first time, and
    /// [`WatchError::Watch`] when the file system watch cannot be set up.
    pub fn new(
        path: impl AsRef<Path>,
        on_reload: impl FnMut(&ReloadEvent) + Send + 'static,
    ) -> Result<PolicyWatcher, WatchError> {
        let mut watcher = PolicyWatcher::unwatched(path, on_reload)?;
        let shared = Arc::clone(&watcher.shared);
        let handler = move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else { return };
            if matches!(event.kind, notify::EventKind::Access(_)) {
                return;
            }
            let touches_policy = shared.files.lock().is_ok_and(|files| {
                event.paths.iter().any(|p| {
                    let p = canonical(p);
                    files.contains(&p)
                })
            });
            if touches_policy {
                let _ = shared.reload();
            }
        };
        let mut w = notify::recommended_watcher(handler).map_err(|e| WatchError::Watch {
            path: watcher.shared.path.display().to_string(),
            reason: e.to_string(),
        })?;
        // Watch directories, not files: editors save by writing a new file and renaming it
        // over the old one, which a watch on the old file would miss.
        let mut dirs: Vec<PathBuf> = watcher.watched_files().iter().map(|f| parent(f)).collect();
        dirs.sort();
        dirs.dedup();
        for dir in dirs {
            w.watch(&dir, RecursiveMode::NonRecursive)
                .map_err(|e| WatchError::Watch {
                    path: dir.display().to_string(),
                    reason: e.to_string(),
                })?;
        }
        watcher.watcher = Some(Mutex::new(w));
        Ok(watcher)
    }

    /// Loads the policy at `path` without watching the file system: reloads happen only
    /// through [`PolicyWatcher::reload_now`] (for tests and for embedders with their own
    /// change notification).
    ///
    /// # Errors
    ///
    /// [`WatchError::Load`] when the policy does not load.
    pub fn unwatched(
        path: impl AsRef<Path>,
        on_reload: impl FnMut(&ReloadEvent) + Send + 'static,
    ) -> Result<PolicyWatcher, WatchError> {
        let path = path.as_ref().to_path_buf();
        let policy = Policy::from_file(&path).map_err(WatchError::Load)?;
        let files = source_files(&policy);
        Ok(PolicyWatcher {
            shared: Arc::new(Shared {
                path,
                current: ArcSwap::from_pointee(Snapshot {
                    policy,
                    generation: 1,
                }),
                generation: AtomicU64::new(1),
                rejected: AtomicU64::new(0),
                last_rejected: AtomicBool::new(false),
                reload: Mutex::new(Box::new(on_reload)),
                files: Mutex::new(files),
            }),
            watcher: None,
        })
    }

    /// The policy served now with its generation. Never blocks on a reload.
    pub fn current(&self) -> Arc<Snapshot> {
        self.shared.current.load_full()
    }

    /// The policy served now (a cheap clone).
    pub fn policy(&self) -> Policy {
        self.shared.current.load().policy.clone()
    }

    /// The generation served now: 1 after the first load, +1 per successful reload that changed
    /// the text of the policy or of an include (a reload of unchanged files is none).
    pub fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::SeqCst)
    }

    /// How many reloads were rejected because the new text had errors.
    pub fn rejected(&self) -> u64 {
        self.shared.rejected.load(Ordering::SeqCst)
    }

    /// Reloads now, whatever the file system says, and calls the callback, unless the files
    /// are the served ones: then the served generation is returned, and reported only when the
    /// reload before was rejected (a broken edit undone).
    ///
    /// # Errors
    ///
    /// The [`PolicyError`] of text that does not load, or a `reload-failed` diagnostic when the
    /// reload panicked (the callback included); the last good policy stays served.
    pub fn reload_now(&self) -> Result<u64, PolicyError> {
        self.shared.reload()
    }

    /// The files (root and includes, canonical paths) the served policy was read from.
    pub fn watched_files(&self) -> Vec<PathBuf> {
        self.shared
            .files
            .lock()
            .map(|f| f.clone())
            .unwrap_or_default()
    }
}

impl Shared {
    /// One reload attempt. Whatever it meets (a panic in loading or in the callback included)
    /// stays inside it: the last good policy stays served, and later edits are reloaded.
    fn reload(&self) -> Result<u64, PolicyError> {
        // A poisoned lock only means an earlier callback panicked; reloading stays safe.
        let mut callback = self.reload.lock().unwrap_or_else(|e| e.into_inner());
        let before = self.generation.load(Ordering::SeqCst);
        let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.reload_with(&mut callback)
        }));
        attempt.unwrap_or_else(|panic| {
            // The callback of a successful reload panicked: the new policy is served.
            let now = self.generation.load(Ordering::SeqCst);
            if now != before {
                return Ok(now);
            }
            self.rejected.fetch_add(1, Ordering::SeqCst);
            self.last_rejected.store(true, Ordering::SeqCst);
            let reason = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            let d = Diagnostic::error(
                "reload-failed",
                format!("reloading `{}` failed: {reason}", self.path.display()),
            )
            .help("the last good policy is still served; save the file again to retry");
            Err(PolicyError::new(vec![d], Arc::new(Sources::new())))
        })
    }

    fn reload_with(&self, callback: &mut Callback) -> Result<u64, PolicyError> {
        match Policy::from_file(&self.path) {
            Ok(policy) => {
                // One edit can raise several file events (truncate, then write): text that is
                // what is served already is not a new generation. After a rejected edit, a
                // return to it is reported (as the generation still served).
                let served = self.current.load();
                if same_sources(&served.policy, &policy) {
                    if self.last_rejected.swap(false, Ordering::SeqCst) {
                        callback(&ReloadEvent::Reloaded {
                            generation: served.generation,
                        });
                    }
                    return Ok(served.generation);
                }
                self.last_rejected.store(false, Ordering::SeqCst);
                let files = source_files(&policy);
                let generation = self.generation.load(Ordering::SeqCst) + 1;
                // Publish the whole snapshot first, then the counter: a reader that sees the
                // new generation number can always load the policy of that generation.
                self.current
                    .store(Arc::new(Snapshot { policy, generation }));
                self.generation.store(generation, Ordering::SeqCst);
                if let Ok(mut f) = self.files.lock() {
                    *f = files;
                }
                callback(&ReloadEvent::Reloaded { generation });
                Ok(generation)
            }
            Err(error) => {
                self.rejected.fetch_add(1, Ordering::SeqCst);
                self.last_rejected.store(true, Ordering::SeqCst);
                let generation = self.generation.load(Ordering::SeqCst);
                callback(&ReloadEvent::Rejected {
                    generation,
                    error: error.clone(),
                });
                Err(error)
            }
        }
    }
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

fn parent(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Whether two policies were read from the same files with the same texts.
fn same_sources(a: &Policy, b: &Policy) -> bool {
    let (a, b) = (a.sources(), b.sources());
    a.len() == b.len()
        && (0..a.len()).all(|i| {
            let id = crate::syntax::ast::FileId(u32::try_from(i).unwrap_or(u32::MAX));
            a.name(id) == b.name(id) && a.text(id) == b.text(id)
        })
}

/// The canonical paths of every file a policy was read from.
fn source_files(policy: &Policy) -> Vec<PathBuf> {
    let sources = policy.sources();
    (0..sources.len())
        .map(|i| {
            let id = crate::syntax::ast::FileId(u32::try_from(i).unwrap_or(u32::MAX));
            canonical(Path::new(sources.name(id)))
        })
        .collect()
}
