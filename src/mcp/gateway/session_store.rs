//! Where the gateway keeps each session's state (calls awaiting confirmation, the user turn),
//! behind [`SessionStore`] so a store shared by several gateway processes can replace the
//! in-memory one. Each change runs with the session held exclusively, so a turn limit is
//! checked and counted in one step.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::decision::Turn;
use crate::mcp::judge::PendingCalls;

/// The state of one session.
#[derive(Clone, Debug, Default)]
pub struct SessionState {
    /// Calls held for the user's confirmation (the digest-bound confirmation field).
    pub pending: PendingCalls,
    /// The current user turn: its transactional calls so far.
    pub turn: Turn,
    /// How many turns the session has begun (1 once a first request was judged).
    pub turns: u64,
    /// The user's query that began the current turn, when the client sends queries.
    pub last_query: Option<String>,
}

impl SessionState {
    /// Begins a new turn when `query` differs from the one that began the current turn (and
    /// the first turn on the first request). Without queries the session stays in one turn.
    pub fn enter(&mut self, query: Option<&str>) {
        if self.turns == 0 {
            self.turns = 1;
            self.last_query = query.map(str::to_string);
            return;
        }
        if let Some(q) = query {
            if self.last_query.as_deref() != Some(q) {
                self.turns += 1;
                self.turn = Turn::new();
                self.last_query = Some(q.to_string());
            }
        }
    }
}

/// Why the store could not serve a session; the request is refused (fail closed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("session store: {0}")]
pub struct StoreError(pub String);

/// A store of sessions by key.
///
/// The contract is one exclusive read-change-write per call: [`SessionStore::with_session`]
/// must not let two changes of one session interleave, across threads and, for a shared
/// store, across processes (a store in Redis holds a per-session lock, or runs the change
/// under `WATCH`/`MULTI` and retries). A store that cannot guarantee it returns
/// [`StoreError`], and the gateway refuses the call.
pub trait SessionStore: Send + Sync {
    /// Runs `change` on the state of session `key` (a fresh state when the session is new or
    /// expired) with the session held exclusively, and keeps the result.
    ///
    /// # Errors
    ///
    /// [`StoreError`] when the store cannot be reached; nothing is changed then.
    fn with_session(
        &self,
        key: &str,
        change: &mut dyn FnMut(&mut SessionState),
    ) -> Result<(), StoreError>;

    /// How many sessions are kept now.
    fn len(&self) -> usize;

    /// Whether no session is kept.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets the sessions idle longer than the store's idle limit; returns how many.
    fn sweep(&self) -> usize;
}

/// Sessions in this process's memory: at most `max` (the least recently used is forgotten
/// first), each forgotten after `idle` unused.
#[derive(Debug)]
pub struct MemoryStore {
    inner: Mutex<Memory>,
    max: usize,
    idle: Duration,
}

#[derive(Debug, Default)]
struct Memory {
    sessions: HashMap<String, (SessionState, (Instant, u64))>,
    /// Last use -> key, oldest first.
    order: BTreeMap<(Instant, u64), String>,
    seq: u64,
}

impl MemoryStore {
    /// A store keeping at most `max` sessions (at least 1), each for `idle` after its last use.
    pub fn new(max: usize, idle: Duration) -> MemoryStore {
        MemoryStore {
            inner: Mutex::new(Memory::default()),
            max: max.max(1),
            idle,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Memory {
    fn expire(&mut self, now: Instant, idle: Duration) -> usize {
        let mut n = 0;
        while let Some((&stamp, _)) = self.order.first_key_value() {
            if now.duration_since(stamp.0) < idle {
                break;
            }
            if let Some((_, key)) = self.order.pop_first() {
                self.sessions.remove(&key);
                n += 1;
            }
        }
        n
    }
}

impl SessionStore for MemoryStore {
    fn with_session(
        &self,
        key: &str,
        change: &mut dyn FnMut(&mut SessionState),
    ) -> Result<(), StoreError> {
        let now = Instant::now();
        let mut m = self.lock();
        m.expire(now, self.idle);
        m.seq += 1;
        let stamp = (now, m.seq);
        let mut state = match m.sessions.remove(key) {
            Some((state, old)) => {
                m.order.remove(&old);
                state
            }
            None => {
                while m.sessions.len() >= self.max {
                    let Some((_, oldest)) = m.order.pop_first() else {
                        break;
                    };
                    m.sessions.remove(&oldest);
                }
                SessionState::default()
            }
        };
        change(&mut state);
        m.order.insert(stamp, key.to_string());
        m.sessions.insert(key.to_string(), (state, stamp));
        Ok(())
    }

    fn len(&self) -> usize {
        self.lock().sessions.len()
    }

    fn sweep(&self) -> usize {
        let idle = self.idle;
        self.lock().expire(Instant::now(), idle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_store_forgets_the_least_recently_used_and_idle_sessions_expire() {
        let s = MemoryStore::new(2, Duration::from_millis(200));
        s.with_session("a", &mut |st| st.enter(None)).unwrap();
        s.with_session("b", &mut |st| st.enter(None)).unwrap();
        s.with_session("a", &mut |st| st.turn.transactional_calls = 1)
            .unwrap();
        s.with_session("c", &mut |st| st.enter(None)).unwrap();
        assert_eq!(s.len(), 2);
        let mut seen = None;
        s.with_session("a", &mut |st| seen = Some(st.turn.transactional_calls))
            .unwrap();
        assert_eq!(seen, Some(1));
        s.with_session("b", &mut |st| seen = Some(st.turns as u32))
            .unwrap();
        assert_eq!(seen, Some(0), "b was forgotten, so it starts afresh");
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(s.sweep(), 2);
        assert!(s.is_empty());
    }

    #[test]
    fn a_different_query_begins_a_new_turn_and_no_query_keeps_the_turn() {
        let mut st = SessionState::default();
        st.enter(Some("pay invoice 7"));
        st.turn.transactional_calls = 1;
        st.enter(Some("pay invoice 7"));
        st.enter(None);
        assert_eq!((st.turns, st.turn.transactional_calls), (1, 1));
        st.enter(Some("pay invoice 8"));
        assert_eq!((st.turns, st.turn.transactional_calls), (2, 0));
    }
}
