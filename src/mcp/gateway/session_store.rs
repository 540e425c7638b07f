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

/// A session as the gateway names it: the principal it belongs to and the id the gateway
/// issued for it. One principal never reaches another's session: the pair is the key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionKey {
    /// The principal ([`super::Identity::principal`]).
    pub principal: String,
    /// The id the gateway issued (an `Mcp-Session-Id`, or one of [`new_session_id`]).
    pub id: String,
}

impl SessionKey {
    /// The session `id` of `principal`.
    pub fn new(principal: impl Into<String>, id: impl Into<String>) -> SessionKey {
        SessionKey {
            principal: principal.into(),
            id: id.into(),
        }
    }
}

/// A fresh unguessable session id (a random version 4 UUID).
pub fn new_session_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Why the store could not serve a session; the request is refused (fail closed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The principal has no session with this id: never issued, issued to another principal,
    /// or forgotten after its idle time.
    #[error("unknown session `{0}`: sessions are issued by the gateway (initialize, or POST /v1/sessions) to one principal, and forgotten when idle")]
    Unknown(String),
    /// The principal keeps as many sessions as it may.
    #[error("this principal keeps {0} sessions, its limit; let one expire or end it first")]
    PrincipalFull(usize),
    /// The store keeps as many sessions as it may.
    #[error("the gateway keeps {0} sessions, its limit; try again later")]
    Full(usize),
    /// The store cannot be reached or cannot guarantee an exclusive change.
    #[error("session store: {0}")]
    Unavailable(String),
}

/// A store of sessions by [`SessionKey`].
///
/// The contract is one exclusive read-change-write per call: [`SessionStore::with_session`]
/// must not let two changes of one session interleave, across threads and, for a shared
/// store, across processes (a store in Redis holds a per-session lock, or runs the change
/// under `WATCH`/`MULTI` and retries). A store that cannot guarantee it returns
/// [`StoreError::Unavailable`], and the gateway refuses the call. Sessions exist only once
/// [`SessionStore::open`] made them; a store never forgets a live session to make room.
pub trait SessionStore: Send + Sync {
    /// Opens a new session for `principal` with the id `id` (one the gateway issued, such as
    /// rmcp's `Mcp-Session-Id`), or a fresh one of [`new_session_id`] when `None`. Returns the
    /// session's key.
    ///
    /// # Errors
    ///
    /// [`StoreError::PrincipalFull`] or [`StoreError::Full`] at a cap (idle sessions are
    /// forgotten first); [`StoreError::Unavailable`] when the id is taken or the store cannot
    /// be reached.
    fn open(&self, principal: &str, id: Option<&str>) -> Result<SessionKey, StoreError>;

    /// Runs `change` on the state of session `key` with the session held exclusively, and
    /// keeps the result.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unknown`] when the session was not opened for that principal or has
    /// expired; [`StoreError::Unavailable`] when the store cannot be reached. Nothing is
    /// changed then.
    fn with_session(
        &self,
        key: &SessionKey,
        change: &mut dyn FnMut(&mut SessionState),
    ) -> Result<(), StoreError>;

    /// Forgets session `key` (its client ended it); nothing when it is not kept.
    fn close(&self, key: &SessionKey);

    /// How many sessions are kept now.
    fn len(&self) -> usize;

    /// Whether no session is kept.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets the sessions idle longer than the store's idle limit; returns how many.
    fn sweep(&self) -> usize;
}

/// Sessions in this process's memory: at most `max` in all and `per_principal` for one
/// principal (past either, a new session is refused), each forgotten after `idle` unused.
#[derive(Debug)]
pub struct MemoryStore {
    inner: Mutex<Memory>,
    max: usize,
    per_principal: usize,
    idle: Duration,
}

#[derive(Debug, Default)]
struct Memory {
    sessions: HashMap<SessionKey, (SessionState, (Instant, u64))>,
    /// Last use -> key, oldest first.
    order: BTreeMap<(Instant, u64), SessionKey>,
    /// Sessions kept per principal.
    counts: HashMap<String, usize>,
    seq: u64,
}

impl MemoryStore {
    /// A store keeping at most `max` sessions and `per_principal` of one principal (each at
    /// least 1), each for `idle` after its last use.
    pub fn new(max: usize, per_principal: usize, idle: Duration) -> MemoryStore {
        MemoryStore {
            inner: Mutex::new(Memory::default()),
            max: max.max(1),
            per_principal: per_principal.max(1),
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
    fn forget(&mut self, key: &SessionKey) -> bool {
        let Some((_, stamp)) = self.sessions.remove(key) else {
            return false;
        };
        self.order.remove(&stamp);
        if let Some(n) = self.counts.get_mut(&key.principal) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.counts.remove(&key.principal);
            }
        }
        true
    }

    fn expire(&mut self, now: Instant, idle: Duration) -> usize {
        let mut n = 0;
        while let Some((&stamp, key)) = self.order.first_key_value() {
            if now.duration_since(stamp.0) < idle {
                break;
            }
            let key = key.clone();
            self.forget(&key);
            n += 1;
        }
        n
    }

    fn stamp(&mut self, now: Instant) -> (Instant, u64) {
        self.seq += 1;
        (now, self.seq)
    }
}

impl SessionStore for MemoryStore {
    fn open(&self, principal: &str, id: Option<&str>) -> Result<SessionKey, StoreError> {
        let now = Instant::now();
        let mut m = self.lock();
        m.expire(now, self.idle);
        if m.counts.get(principal).copied().unwrap_or(0) >= self.per_principal {
            return Err(StoreError::PrincipalFull(self.per_principal));
        }
        if m.sessions.len() >= self.max {
            return Err(StoreError::Full(self.max));
        }
        let key = SessionKey::new(principal, id.map_or_else(new_session_id, str::to_string));
        if m.sessions.contains_key(&key) {
            return Err(StoreError::Unavailable(format!(
                "the session id `{}` is taken",
                key.id
            )));
        }
        let stamp = m.stamp(now);
        m.order.insert(stamp, key.clone());
        m.sessions
            .insert(key.clone(), (SessionState::default(), stamp));
        *m.counts.entry(principal.to_string()).or_default() += 1;
        Ok(key)
    }

    fn with_session(
        &self,
        key: &SessionKey,
        change: &mut dyn FnMut(&mut SessionState),
    ) -> Result<(), StoreError> {
        let now = Instant::now();
        let mut guard = self.lock();
        let m = &mut *guard;
        m.expire(now, self.idle);
        let stamp = m.stamp(now);
        let Some((state, old)) = m.sessions.get_mut(key) else {
            return Err(StoreError::Unknown(key.id.clone()));
        };
        change(state);
        let old = std::mem::replace(old, stamp);
        m.order.remove(&old);
        m.order.insert(stamp, key.clone());
        Ok(())
    }

    fn close(&self, key: &SessionKey) {
        self.lock().forget(key);
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
    fn sessions_exist_only_once_opened_and_belong_to_their_principal() {
        let s = MemoryStore::new(10, 10, Duration::from_secs(60));
        let a = s.open("ann", None).unwrap();
        assert_eq!(a.id.len(), 36, "{}", a.id);
        s.with_session(&a, &mut |st| st.turn.transactional_calls = 1)
            .unwrap();
        // Another principal naming the id, or any id never issued, is unknown.
        let stolen = SessionKey::new("bob", a.id.clone());
        assert_eq!(
            s.with_session(&stolen, &mut |_| {}),
            Err(StoreError::Unknown(a.id.clone()))
        );
        let chosen = SessionKey::new("ann", "my-own-id");
        assert_eq!(
            s.with_session(&chosen, &mut |_| {}),
            Err(StoreError::Unknown("my-own-id".to_string()))
        );
        assert_eq!(s.len(), 1);
        let mut seen = None;
        s.with_session(&a, &mut |st| seen = Some(st.turn.transactional_calls))
            .unwrap();
        assert_eq!(seen, Some(1));
        // An id the gateway issued elsewhere (rmcp's) is opened as given, once.
        let m = s.open("ann", Some("mcp-1")).unwrap();
        assert_eq!(m, SessionKey::new("ann", "mcp-1"));
        assert_eq!(
            s.open("ann", Some("mcp-1")),
            Err(StoreError::Unavailable(
                "the session id `mcp-1` is taken".to_string()
            ))
        );
        s.close(&m);
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn at_a_cap_new_sessions_are_refused_and_no_live_session_is_forgotten() {
        let s = MemoryStore::new(3, 2, Duration::from_millis(300));
        let a1 = s.open("ann", None).unwrap();
        let a2 = s.open("ann", None).unwrap();
        assert_eq!(s.open("ann", None), Err(StoreError::PrincipalFull(2)));
        let b1 = s.open("bob", None).unwrap();
        assert_eq!(s.open("cy", None), Err(StoreError::Full(3)));
        for k in [&a1, &a2, &b1] {
            assert_eq!(s.with_session(k, &mut |_| {}), Ok(()));
        }
        // Idle sessions expire, and make room.
        std::thread::sleep(Duration::from_millis(350));
        assert_eq!(s.sweep(), 3);
        assert!(s.is_empty());
        assert_eq!(
            s.with_session(&a1, &mut |_| {}),
            Err(StoreError::Unknown(a1.id.clone()))
        );
        assert!(s.open("cy", None).is_ok());
        assert!(s.open("ann", None).is_ok());
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
