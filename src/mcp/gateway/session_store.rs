//! Where the gateway keeps each session's state (calls awaiting confirmation, the user turn,
//! the flow labels with their sources), behind [`SessionStore`]: in this process's memory ([`MemoryStore`]) or in Redis, shared by
//! several gateway processes ([`super::redis_store::RedisStore`]). The gateway never reads a
//! count to write it back: each [`SessionStore::change`] checks and applies in one atomic
//! step (a mutex here, a Lua script in Redis), so a turn limit holds and a held call is
//! confirmed once, however many requests race. Labels are only ever added, by the same step
//! that applies a call's judgment, and that step fails ([`Changed::LabelsChanged`]) when the
//! labels changed since the judgment read them ([`SessionStore::labels`]).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::decision::{PendingCall, Turn};
use crate::mcp::judge::PendingCalls;
use crate::LabelSource;

/// The flow labels of one session as a judgment read them: their version (how many times
/// labels were added) and the labels with where each came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Labels {
    /// Grows by one each time a change adds a label; a change naming an older version fails.
    pub version: u64,
    /// The labels on the session, each once, with the tool and turn that put it there.
    pub labels: Vec<LabelSource>,
}

impl Labels {
    /// A [`crate::Session`] holding these labels (bound to no policy, in turn 1), for
    /// [`crate::mcp::Judge::judge_call_effects_in`] and [`crate::mcp::Judge::judge_list_in`].
    ///
    /// # Errors
    ///
    /// A message when the labels cannot be made into a session (never for labels a store
    /// wrote).
    pub fn session(&self) -> Result<crate::Session, String> {
        let labels = serde_json::to_value(&self.labels).map_err(|e| e.to_string())?;
        serde_json::from_value(serde_json::json!({
            "format": crate::SESSION_FORMAT,
            "policy": null,
            "policy_version": null,
            "turn": 1,
            "transactional_calls": 0,
            "labels": labels,
            "pending": null,
            "pending_turn": null,
        }))
        .map_err(|e| format!("the session's labels are corrupt ({e})"))
    }
}

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
    /// The flow labels on the session and their version.
    pub labels: Labels,
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

/// What a store's operation returns: a boxed future, so [`SessionStore`] is object safe.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// One judged request's change of its session, applied atomically by [`SessionStore::change`]:
/// the session is entered with `query` (a different query begins a new turn), then, only if
/// every condition holds (the labels are still those of version `labels_read`, the hold is
/// still held, the turn is not full), the hold `take` is consumed, the call is counted in the
/// turn, `hold` is held and the labels `taints` are added (sourced from `tool` in the current
/// turn). When a condition fails, only the entering is kept.
#[derive(Clone, Copy, Debug, Default)]
pub struct SessionChange<'a> {
    /// The user's query of the request, when the client sent one.
    pub query: Option<&'a str>,
    /// The digest of a held call to consume: it must still be held, and fresh.
    pub take: Option<&'a str>,
    /// Count the call as a transactional call of the turn.
    pub count: bool,
    /// With `count`: the turn's limit, which the count must be below (`limit … per turn`).
    pub limit: Option<u32>,
    /// A call to hold for the user's confirmation (kept as first held when already held).
    pub hold: Option<&'a PendingCall>,
    /// The version of the labels the judgment read ([`Labels::version`]); `None` applies
    /// whatever the labels are now.
    pub labels_read: Option<u64>,
    /// Labels to add (those not yet on the session), put there by `tool`.
    pub taints: &'a [String],
    /// The tool whose call adds `taints` (the gateway's name, `mcp__<server>__<tool>`).
    pub tool: &'a str,
}

/// What [`SessionStore::change`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Changed {
    /// Everything asked was applied.
    Applied,
    /// The hold to take is no longer held (another request took it, or it expired): nothing
    /// but the entering was applied.
    HoldGone,
    /// The turn already counts this many transactional calls, its limit: nothing but the
    /// entering was applied.
    TurnFull(u32),
    /// Labels were added since the judgment read them (the version is now the one given):
    /// nothing but the entering was applied; judge again with the labels as they are.
    LabelsChanged(u64),
}

/// A store of sessions by [`SessionKey`].
///
/// Every change is one atomic step ([`SessionStore::change`]): two changes of one session
/// never interleave, across threads and, for a shared store, across processes. A store that
/// cannot guarantee it returns [`StoreError::Unavailable`], and the gateway refuses the call
/// (fail closed). Sessions exist only once [`SessionStore::open`] made them; a store never
/// forgets a live session to make room.
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
    fn open<'a>(&'a self, principal: &'a str, id: Option<&'a str>) -> StoreFuture<'a, SessionKey>;

    /// Applies `change` to session `key` atomically (see [`SessionChange`]) and marks the
    /// session used.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unknown`] when the session was not opened for that principal or has
    /// expired; [`StoreError::Unavailable`] when the store cannot be reached. Nothing is
    /// changed then.
    fn change<'a>(
        &'a self,
        key: &'a SessionKey,
        change: SessionChange<'a>,
    ) -> StoreFuture<'a, Changed>;

    /// The call held in session `key` under `digest` when it may be confirmed now: held by an
    /// earlier request and younger than [`crate::mcp::judge::HOLD_TTL_MS`]. Reads only; the
    /// hold is consumed by a [`SessionStore::change`] with `take`.
    ///
    /// # Errors
    ///
    /// As [`SessionStore::change`].
    fn held<'a>(
        &'a self,
        key: &'a SessionKey,
        digest: &'a str,
    ) -> StoreFuture<'a, Option<PendingCall>>;

    /// The flow labels on session `key` now, with their version. Reads only; labels are added
    /// by a [`SessionStore::change`] with `taints`.
    ///
    /// # Errors
    ///
    /// As [`SessionStore::change`].
    fn labels<'a>(&'a self, key: &'a SessionKey) -> StoreFuture<'a, Labels>;

    /// Forgets session `key` (its client ended it); nothing when it is not kept.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when the store cannot be reached.
    fn close<'a>(&'a self, key: &'a SessionKey) -> StoreFuture<'a, ()>;

    /// How many sessions are kept now.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when the store cannot be reached.
    fn len(&self) -> StoreFuture<'_, usize>;

    /// Whether no session is kept now.
    ///
    /// # Errors
    ///
    /// As [`SessionStore::len`].
    fn is_empty(&self) -> StoreFuture<'_, bool> {
        let len = self.len();
        Box::pin(async move { len.await.map(|n| n == 0) })
    }

    /// Forgets the sessions idle longer than the store's idle limit; returns how many.
    ///
    /// # Errors
    ///
    /// [`StoreError::Unavailable`] when the store cannot be reached.
    fn sweep(&self) -> StoreFuture<'_, usize>;
}

fn ready<'a, T: Send + 'a>(value: Result<T, StoreError>) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(value))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
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

impl MemoryStore {
    fn open_now(&self, principal: &str, id: Option<&str>) -> Result<SessionKey, StoreError> {
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

    /// Runs `f` on the state of session `key`, marked used, under the store's lock.
    fn with_session<T>(
        &self,
        key: &SessionKey,
        f: impl FnOnce(&mut SessionState) -> T,
    ) -> Result<T, StoreError> {
        let now = Instant::now();
        let mut guard = self.lock();
        let m = &mut *guard;
        m.expire(now, self.idle);
        let stamp = m.stamp(now);
        let Some((state, old)) = m.sessions.get_mut(key) else {
            return Err(StoreError::Unknown(key.id.clone()));
        };
        // Every hold of an earlier request may be confirmed (each request is answered before
        // the client sends the one that confirms it); expired holds are forgotten.
        state.pending.set_now(now_ms());
        state.pending.arm_through(state.pending.latest());
        let out = f(state);
        let old = std::mem::replace(old, stamp);
        m.order.remove(&old);
        m.order.insert(stamp, key.clone());
        Ok(out)
    }
}

impl SessionStore for MemoryStore {
    fn open<'a>(&'a self, principal: &'a str, id: Option<&'a str>) -> StoreFuture<'a, SessionKey> {
        ready(self.open_now(principal, id))
    }

    fn change<'a>(
        &'a self,
        key: &'a SessionKey,
        change: SessionChange<'a>,
    ) -> StoreFuture<'a, Changed> {
        ready(self.with_session(key, |s| {
            s.enter(change.query);
            if let Some(v) = change.labels_read {
                if v != s.labels.version {
                    return Changed::LabelsChanged(s.labels.version);
                }
            }
            if let Some(d) = change.take {
                if s.pending.confirmable(d).is_none() {
                    return Changed::HoldGone;
                }
            }
            if change.count {
                if let Some(limit) = change.limit {
                    if s.turn.transactional_calls >= limit {
                        return Changed::TurnFull(s.turn.transactional_calls);
                    }
                }
            }
            if let Some(d) = change.take {
                s.pending.release(d);
            }
            if change.count {
                s.turn.transactional_calls = s.turn.transactional_calls.saturating_add(1);
            }
            if let Some(h) = change.hold {
                s.pending.hold(h.clone());
            }
            let time = now_ms() / 1000;
            let turn = u32::try_from(s.turns).unwrap_or(u32::MAX);
            let mut added = false;
            for label in change.taints {
                if !s.labels.labels.iter().any(|l| l.label == *label) {
                    s.labels.labels.push(LabelSource {
                        label: label.clone(),
                        tool: change.tool.to_string(),
                        turn,
                        time,
                    });
                    added = true;
                }
            }
            if added {
                s.labels.version += 1;
            }
            Changed::Applied
        }))
    }

    fn held<'a>(
        &'a self,
        key: &'a SessionKey,
        digest: &'a str,
    ) -> StoreFuture<'a, Option<PendingCall>> {
        ready(self.with_session(key, |s| s.pending.confirmable(digest).cloned()))
    }

    fn labels<'a>(&'a self, key: &'a SessionKey) -> StoreFuture<'a, Labels> {
        ready(self.with_session(key, |s| s.labels.clone()))
    }

    fn close<'a>(&'a self, key: &'a SessionKey) -> StoreFuture<'a, ()> {
        self.lock().forget(key);
        ready(Ok(()))
    }

    fn len(&self) -> StoreFuture<'_, usize> {
        ready(Ok(self.lock().sessions.len()))
    }

    fn sweep(&self) -> StoreFuture<'_, usize> {
        let idle = self.idle;
        ready(Ok(self.lock().expire(Instant::now(), idle)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block<T>(f: StoreFuture<'_, T>) -> Result<T, StoreError> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(f)
    }

    fn count<'a>(limit: u32) -> SessionChange<'a> {
        SessionChange {
            count: true,
            limit: Some(limit),
            ..SessionChange::default()
        }
    }

    #[test]
    fn sessions_exist_only_once_opened_and_belong_to_their_principal() {
        let s = MemoryStore::new(10, 10, Duration::from_secs(60));
        let a = block(s.open("ann", None)).unwrap();
        assert_eq!(a.id.len(), 36, "{}", a.id);
        assert_eq!(block(s.change(&a, count(5))), Ok(Changed::Applied));
        // Another principal naming the id, or any id never issued, is unknown.
        let stolen = SessionKey::new("bob", a.id.clone());
        assert_eq!(
            block(s.change(&stolen, SessionChange::default())),
            Err(StoreError::Unknown(a.id.clone()))
        );
        let chosen = SessionKey::new("ann", "my-own-id");
        assert_eq!(
            block(s.held(&chosen, "d")),
            Err(StoreError::Unknown("my-own-id".to_string()))
        );
        assert_eq!(block(s.len()), Ok(1));
        // An id the gateway issued elsewhere (rmcp's) is opened as given, once.
        let m = block(s.open("ann", Some("mcp-1"))).unwrap();
        assert_eq!(m, SessionKey::new("ann", "mcp-1"));
        assert_eq!(
            block(s.open("ann", Some("mcp-1"))),
            Err(StoreError::Unavailable(
                "the session id `mcp-1` is taken".to_string()
            ))
        );
        block(s.close(&m)).unwrap();
        assert_eq!(block(s.len()), Ok(1));
    }

    #[test]
    fn at_a_cap_new_sessions_are_refused_and_no_live_session_is_forgotten() {
        let s = MemoryStore::new(3, 2, Duration::from_millis(300));
        let a1 = block(s.open("ann", None)).unwrap();
        let a2 = block(s.open("ann", None)).unwrap();
        assert_eq!(
            block(s.open("ann", None)),
            Err(StoreError::PrincipalFull(2))
        );
        let b1 = block(s.open("bob", None)).unwrap();
        assert_eq!(block(s.open("cy", None)), Err(StoreError::Full(3)));
        for k in [&a1, &a2, &b1] {
            assert_eq!(
                block(s.change(k, SessionChange::default())),
                Ok(Changed::Applied)
            );
        }
        // Idle sessions expire, and make room.
        std::thread::sleep(Duration::from_millis(350));
        assert_eq!(block(s.sweep()), Ok(3));
        assert_eq!(block(s.len()), Ok(0));
        assert_eq!(
            block(s.change(&a1, SessionChange::default())),
            Err(StoreError::Unknown(a1.id.clone()))
        );
        assert!(block(s.open("cy", None)).is_ok());
        assert!(block(s.open("ann", None)).is_ok());
    }

    #[test]
    fn the_turn_limit_is_checked_and_counted_in_one_change_and_a_hold_is_taken_once() {
        let s = MemoryStore::new(10, 10, Duration::from_secs(60));
        let k = block(s.open("ann", None)).unwrap();
        assert_eq!(block(s.change(&k, count(1))), Ok(Changed::Applied));
        assert_eq!(block(s.change(&k, count(1))), Ok(Changed::TurnFull(1)));
        // A new query begins a new turn.
        let next = SessionChange {
            query: Some("pay invoice 8"),
            ..count(1)
        };
        assert_eq!(block(s.change(&k, next)), Ok(Changed::Applied));
        let held = PendingCall {
            tool: "pay".to_string(),
            args: serde_json::Map::new(),
            digest: "d1".to_string(),
            transaction_status: "AWAITING_CONFIRMATION".to_string(),
            policy: "p".to_string(),
            policy_version: None,
        };
        let hold = SessionChange {
            hold: Some(&held),
            ..SessionChange::default()
        };
        assert_eq!(block(s.held(&k, "d1")), Ok(None));
        assert_eq!(block(s.change(&k, hold)), Ok(Changed::Applied));
        assert_eq!(block(s.held(&k, "d1")), Ok(Some(held.clone())));
        let take = SessionChange {
            take: Some("d1"),
            ..SessionChange::default()
        };
        assert_eq!(block(s.change(&k, take)), Ok(Changed::Applied));
        assert_eq!(block(s.change(&k, take)), Ok(Changed::HoldGone));
        assert_eq!(block(s.held(&k, "d1")), Ok(None));
    }

    #[test]
    fn labels_are_added_once_with_their_source_and_a_change_judged_on_old_labels_fails() {
        let s = MemoryStore::new(10, 10, Duration::from_secs(60));
        let k = block(s.open("ann", None)).unwrap();
        let other = block(s.open("ann", None)).unwrap();
        let read = block(s.labels(&k)).unwrap();
        assert_eq!((read.version, read.labels.len()), (0, 0));
        let untrusted = ["untrusted".to_string()];
        let taint = SessionChange {
            labels_read: Some(0),
            taints: &untrusted,
            tool: "mcp__a__get_doc",
            ..SessionChange::default()
        };
        assert_eq!(block(s.change(&k, taint)), Ok(Changed::Applied));
        // A second call judged on version 0 raced the first: it fails, and counts nothing.
        let write = SessionChange {
            labels_read: Some(0),
            ..count(5)
        };
        assert_eq!(block(s.change(&k, write)), Ok(Changed::LabelsChanged(1)));
        let now = block(s.labels(&k)).unwrap();
        assert_eq!(now.version, 1);
        let sources: Vec<(&str, &str, u32)> = now
            .labels
            .iter()
            .map(|l| (l.label.as_str(), l.tool.as_str(), l.turn))
            .collect();
        assert_eq!(sources, [("untrusted", "mcp__a__get_doc", 1)]);
        assert!(now.session().unwrap().has_label("untrusted"));
        // Judged on the labels as they are, it applies; a label already there adds nothing.
        let write = SessionChange {
            labels_read: Some(1),
            taints: &untrusted,
            tool: "mcp__b__get_doc",
            ..count(5)
        };
        assert_eq!(block(s.change(&k, write)), Ok(Changed::Applied));
        let now = block(s.labels(&k)).unwrap();
        assert_eq!(
            (now.version, now.labels[0].tool.as_str()),
            (1, "mcp__a__get_doc")
        );
        // Another session holds none.
        assert_eq!(block(s.labels(&other)), Ok(Labels::default()));
    }

    #[test]
    fn labels_added_by_racing_changes_are_never_lost() {
        let s = MemoryStore::new(10, 10, Duration::from_secs(60));
        let k = block(s.open("ann", None)).unwrap();
        // 8 threads, each adding its own label the way the gateway does: read the labels,
        // then change on that version, again while the version moved meanwhile.
        std::thread::scope(|scope| {
            for i in 0..8 {
                let (s, k) = (&s, &k);
                scope.spawn(move || {
                    let label = [format!("l{i}")];
                    loop {
                        let read = block(s.labels(k)).unwrap();
                        let change = SessionChange {
                            labels_read: Some(read.version),
                            taints: &label,
                            tool: "t",
                            ..count(100)
                        };
                        match block(s.change(k, change)).unwrap() {
                            Changed::Applied => break,
                            Changed::LabelsChanged(_) => continue,
                            other => panic!("{other:?}"),
                        }
                    }
                });
            }
        });
        let now = block(s.labels(&k)).unwrap();
        let mut names: Vec<&str> = now.labels.iter().map(|l| l.label.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7"]);
        assert_eq!(now.version, 8);
        // Each change counted once: 8 calls in the turn, none lost, none twice.
        assert_eq!(block(s.change(&k, count(8))), Ok(Changed::TurnFull(8)));
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
