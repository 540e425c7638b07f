//! The names a classification result carries (keyword texts, language tags, intent names and
//! negators), interned once per process within a budget ([`Names`]).

use arcstr::ArcStr;
use rustc_hash::FxHashSet;

/// The names a classification result carries (keyword texts, language tags, intent names and
/// negators), interned as static strings for the life of the process up to
/// [`INTERNED_NAME_BYTES`]: building a hit then copies three of them without touching a
/// reference count. (With counted strings, the atomic increments and decrements of one 200-byte
/// query's hits took about a tenth of its time.) Names past the budget are ordinary counted
/// strings, freed with their policy, so a process that loads ever new names (generated
/// lexicons, a watcher over a file being edited) holds at most the budget; reloading a policy
/// keeps nothing (tests/alloc.rs checks both).
pub(super) struct Names {
    interned: std::sync::MutexGuard<'static, Interned>,
    /// Names of this build past the budget, shared within it.
    counted: FxHashSet<ArcStr>,
}

/// The process's interned names and the bytes they are reckoned to take.
#[derive(Default)]
struct Interned {
    names: FxHashSet<ArcStr>,
    bytes: usize,
}

/// Heap the interned names may take, reckoned as each name's length plus 48 bytes (its
/// allocation header and its slot in the set). The shipped lexicon's names take about 45 KiB.
const INTERNED_NAME_BYTES: usize = 256 * 1024;

impl Names {
    /// The interned names, locked until the value is dropped.
    pub(super) fn lock() -> Names {
        static INTERNED: std::sync::LazyLock<std::sync::Mutex<Interned>> =
            std::sync::LazyLock::new(Default::default);
        // A panic while the set was held leaves it valid: every entry is whole.
        let interned = INTERNED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Names {
            interned,
            counted: FxHashSet::default(),
        }
    }

    /// `s` as a shared string: static while the budget lasts, counted after.
    pub(super) fn get(&mut self, s: &str) -> ArcStr {
        if let Some(a) = self.interned.names.get(s).or_else(|| self.counted.get(s)) {
            return a.clone();
        }
        let a = ArcStr::from(s);
        let cost = s.len() + 48;
        if self.interned.bytes + cost <= INTERNED_NAME_BYTES {
            a.leak();
            self.interned.bytes += cost;
            self.interned.names.insert(a.clone());
        } else {
            self.counted.insert(a.clone());
        }
        a
    }
}
