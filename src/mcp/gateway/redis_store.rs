//! Session state in Redis (`[state] redis = "redis://…"`), shared by every gateway replica
//! that names the same server: a session opened on one replica is used on any other, its
//! turn limit holds across all of them and a held call is confirmed once.
//!
//! Every operation is one Lua script (sent with `EVALSHA`, `EVAL` the first time), which Redis
//! runs atomically: the gateway never reads a count to write it back. Times come from the
//! Redis server's clock (`TIME`), so replicas whose clocks differ agree on expiry and on the
//! age of a hold. A session's keys share one hash tag; the session indexes are two sorted
//! sets, so this store needs one Redis server (or a primary with replicas), not a cluster.
//!
//! When Redis cannot be reached, or answers anything unexpected, the operation is
//! [`StoreError::Unavailable`] and the gateway refuses the call; the connection is made again
//! on later requests, so service resumes when Redis is back.
//!
//! Keys, with `S` = hex SHA-256 of the principal and `ID` the session id:
//! - `tw:{S:ID}:s`, a hash: `turns`, `tx` (transactional calls of the turn), `q` (the query
//!   that began the turn), `serial` (holds made), `lv` (the labels' version: how many changes
//!   added labels);
//! - `tw:{S:ID}:l`, a hash: flow label → `TURN TIME TOOL` (the turn, the Redis time in seconds
//!   and the tool of the call that put it there). Labels are only added, by the change script
//!   (`HSETNX`), which fails when `lv` is no longer the version the judgment read;
//! - `tw:{S:ID}:p` (digest → held call as JSON), `tw:{S:ID}:m` (digest → when it was held, ms),
//!   `tw:{S:ID}:o` (a sorted set, digest by serial, to forget the oldest past
//!   [`MAX_PENDING`]);
//! - `tw:sessions` (every session `S:ID` by expiry, ms) and `tw:principal:S` (the principal's
//!   session ids by expiry).
//!
//! Each key of a session expires `session_idle_secs` after its last use.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;
use sha2::{Digest, Sha256};

use super::session_store::{
    new_session_id, Changed, Labels, SessionChange, SessionKey, SessionStore, StoreError,
    StoreFuture,
};
use crate::decision::PendingCall;
use crate::mcp::judge::{HOLD_TTL_MS, MAX_PENDING};
use crate::LabelSource;

/// Time Redis has to answer one operation; past it the call is refused.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(2);
/// Time one connection attempt has.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

const NOW: &str = "local t = redis.call('TIME')\nlocal now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n";

/// KEYS: all, mine, s. ARGV: member, id, max, per_principal, idle_ms.
const OPEN: &str = r"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('EXISTS', KEYS[3]) == 1 then return 'taken' end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then return 'principal_full' end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 'full' end
local idle = tonumber(ARGV[5])
redis.call('HSET', KEYS[3], 'turns', 0, 'tx', 0, 'serial', 0)
redis.call('PEXPIRE', KEYS[3], idle)
redis.call('ZADD', KEYS[1], now + idle, ARGV[1])
redis.call('ZADD', KEYS[2], now + idle, ARGV[2])
redis.call('PEXPIRE', KEYS[2], idle)
return 'ok'
";

/// KEYS: s, p, m, o, all, mine, l. ARGV: member, id, idle_ms, has_query, query, take, count,
/// limit (-1: none), hold digest, hold json, max_pending, ttl_ms, labels read (-1: any),
/// tool, then the labels to add.
const CHANGE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return {'unknown', 0} end
local idle = tonumber(ARGV[3])
local turns = tonumber(redis.call('HGET', KEYS[1], 'turns') or '0')
if turns == 0 then
  redis.call('HSET', KEYS[1], 'turns', 1)
  if ARGV[4] == '1' then redis.call('HSET', KEYS[1], 'q', ARGV[5]) else redis.call('HDEL', KEYS[1], 'q') end
elseif ARGV[4] == '1' and redis.call('HGET', KEYS[1], 'q') ~= ARGV[5] then
  redis.call('HSET', KEYS[1], 'turns', turns + 1, 'tx', 0, 'q', ARGV[5])
end
for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], idle) end
redis.call('PEXPIRE', KEYS[7], idle)
redis.call('ZADD', KEYS[5], now + idle, ARGV[1])
redis.call('ZADD', KEYS[6], now + idle, ARGV[2])
redis.call('PEXPIRE', KEYS[6], idle)
local lv = tonumber(redis.call('HGET', KEYS[1], 'lv') or '0')
if ARGV[13] ~= '-1' and tonumber(ARGV[13]) ~= lv then return {'labels', lv} end
local ttl = tonumber(ARGV[12])
if ARGV[6] ~= '' then
  local made = tonumber(redis.call('HGET', KEYS[3], ARGV[6]) or '-1')
  if made < 0 or now < made or now - made >= ttl then return {'gone', 0} end
end
local tx = tonumber(redis.call('HGET', KEYS[1], 'tx') or '0')
local limit = tonumber(ARGV[8])
if ARGV[7] == '1' and limit >= 0 and tx >= limit then return {'full', tx} end
if ARGV[6] ~= '' then
  redis.call('HDEL', KEYS[2], ARGV[6])
  redis.call('HDEL', KEYS[3], ARGV[6])
  redis.call('ZREM', KEYS[4], ARGV[6])
end
if ARGV[7] == '1' then tx = redis.call('HINCRBY', KEYS[1], 'tx', 1) end
if ARGV[9] ~= '' and redis.call('HEXISTS', KEYS[2], ARGV[9]) == 0 then
  local serial = redis.call('HINCRBY', KEYS[1], 'serial', 1)
  redis.call('HSET', KEYS[2], ARGV[9], ARGV[10])
  redis.call('HSET', KEYS[3], ARGV[9], now)
  redis.call('ZADD', KEYS[4], serial, ARGV[9])
  local max = tonumber(ARGV[11])
  while redis.call('ZCARD', KEYS[4]) > max do
    local old = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
    redis.call('HDEL', KEYS[2], old)
    redis.call('HDEL', KEYS[3], old)
    redis.call('ZREM', KEYS[4], old)
  end
  for i = 2, 4 do redis.call('PEXPIRE', KEYS[i], idle) end
end
if #ARGV > 14 then
  local source = redis.call('HGET', KEYS[1], 'turns') .. ' ' .. math.floor(now / 1000) .. ' ' .. ARGV[14]
  local added = 0
  for i = 15, #ARGV do added = added + redis.call('HSETNX', KEYS[7], ARGV[i], source) end
  if added > 0 then redis.call('HINCRBY', KEYS[1], 'lv', 1) end
  redis.call('PEXPIRE', KEYS[7], idle)
end
return {'applied', tx}
";

/// KEYS: s, l. The labels' version, then label, source pairs.
const LABELS: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return {'unknown'} end
local out = {'labels', redis.call('HGET', KEYS[1], 'lv') or '0'}
for _, v in ipairs(redis.call('HGETALL', KEYS[2])) do out[#out + 1] = v end
return out
";

/// KEYS: s, p, m. ARGV: digest, ttl_ms.
const HELD: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return {'unknown'} end
local made = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '-1')
if made < 0 or now < made or now - made >= tonumber(ARGV[2]) then return {'none'} end
local call = redis.call('HGET', KEYS[2], ARGV[1])
if not call then return {'none'} end
return {'held', call}
";

/// KEYS: s, p, m, o, all, mine, l. ARGV: member, id.
const CLOSE: &str = r"
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[7])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('ZREM', KEYS[6], ARGV[2])
return 1
";

/// KEYS: all. ARGV: 1 to count the expired ones, 0 to count the live ones.
const SWEEP: &str = r"
local gone = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if ARGV[1] == '1' then return gone end
return redis.call('ZCARD', KEYS[1])
";

const ALL: &str = "tw:sessions";

/// Sessions in Redis; see the module documentation.
pub struct RedisStore {
    conn: ConnectionManager,
    max: usize,
    per_principal: usize,
    idle_ms: u64,
    open: Script,
    change: Script,
    held: Script,
    labels: Script,
    close: Script,
    sweep: Script,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("max", &self.max)
            .field("per_principal", &self.per_principal)
            .field("idle_ms", &self.idle_ms)
            .finish_non_exhaustive()
    }
}

/// The keys of one session: its hash tag's prefix, its member in `tw:sessions`, its
/// principal's index.
struct Keys {
    s: String,
    p: String,
    m: String,
    o: String,
    l: String,
    mine: String,
    member: String,
}

impl Keys {
    fn of(key: &SessionKey) -> Keys {
        let principal: String = Sha256::digest(key.principal.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let tag = format!("tw:{{{principal}:{}}}", key.id);
        Keys {
            s: format!("{tag}:s"),
            p: format!("{tag}:p"),
            m: format!("{tag}:m"),
            o: format!("{tag}:o"),
            l: format!("{tag}:l"),
            mine: format!("tw:principal:{principal}"),
            member: format!("{principal}:{}", key.id),
        }
    }
}

/// The source of `label` as the change script wrote it: `TURN TIME TOOL`.
fn label_source(label: &str, source: &str) -> Result<LabelSource, StoreError> {
    let mut parts = source.splitn(3, ' ');
    let (Some(turn), Some(time), Some(tool)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(unexpected("a label source of another shape"));
    };
    let turn: u64 = turn
        .parse()
        .map_err(|_| unexpected("a label's turn that is not a number"))?;
    Ok(LabelSource {
        label: label.to_string(),
        tool: tool.to_string(),
        turn: u32::try_from(turn).unwrap_or(u32::MAX),
        time: time
            .parse()
            .map_err(|_| unexpected("a label's time that is not a number"))?,
    })
}

fn script(body: &str) -> Script {
    Script::new(&format!("{NOW}{body}"))
}

fn unavailable(e: &redis::RedisError) -> StoreError {
    StoreError::Unavailable(format!("Redis cannot be reached ({e})"))
}

fn unexpected(what: &str) -> StoreError {
    StoreError::Unavailable(format!(
        "Redis answered {what}, which this gateway does not expect"
    ))
}

impl RedisStore {
    /// A store in the Redis server at `url` (`redis://host:port/db`, `rediss://…`,
    /// `unix://…`), keeping at most `max` sessions and `per_principal` of one principal, each
    /// for `idle` after its last use. Connects lazily: a Redis that is down at start makes
    /// the first requests fail, not the gateway.
    ///
    /// # Errors
    ///
    /// A message when `url` is not a Redis URL.
    pub fn new(
        url: &str,
        max: usize,
        per_principal: usize,
        idle: Duration,
    ) -> Result<RedisStore, String> {
        let client = redis::Client::open(url)
            .map_err(|e| format!("[state] `redis` is not a Redis URL ({:?})", e.kind()))?;
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let conn = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| format!("cannot set up the Redis connection ({e})"))?;
        Ok(RedisStore {
            conn,
            max: max.max(1),
            per_principal: per_principal.max(1),
            idle_ms: u64::try_from(idle.as_millis()).unwrap_or(u64::MAX).max(1),
            open: script(OPEN),
            change: script(CHANGE),
            held: script(HELD),
            labels: script(LABELS),
            close: script(CLOSE),
            sweep: script(SWEEP),
        })
    }
}

impl SessionStore for RedisStore {
    fn open<'a>(&'a self, principal: &'a str, id: Option<&'a str>) -> StoreFuture<'a, SessionKey> {
        Box::pin(async move {
            let key = SessionKey::new(principal, id.map_or_else(new_session_id, str::to_string));
            let k = Keys::of(&key);
            let mut conn = self.conn.clone();
            let answer: String = self
                .open
                .key(ALL)
                .key(&k.mine)
                .key(&k.s)
                .arg(&k.member)
                .arg(&key.id)
                .arg(self.max)
                .arg(self.per_principal)
                .arg(self.idle_ms)
                .invoke_async(&mut conn)
                .await
                .map_err(|e| unavailable(&e))?;
            match answer.as_str() {
                "ok" => Ok(key),
                "taken" => Err(StoreError::Unavailable(format!(
                    "the session id `{}` is taken",
                    key.id
                ))),
                "principal_full" => Err(StoreError::PrincipalFull(self.per_principal)),
                "full" => Err(StoreError::Full(self.max)),
                other => Err(unexpected(other)),
            }
        })
    }

    fn change<'a>(
        &'a self,
        key: &'a SessionKey,
        change: SessionChange<'a>,
    ) -> StoreFuture<'a, Changed> {
        Box::pin(async move {
            let k = Keys::of(key);
            let hold = match change.hold {
                Some(h) => Some((
                    h.digest.as_str(),
                    serde_json::to_string(h).map_err(|e| {
                        StoreError::Unavailable(format!("the held call cannot be written ({e})"))
                    })?,
                )),
                None => None,
            };
            let limit = match change.limit {
                Some(l) => i64::from(l),
                None => -1,
            };
            let mut conn = self.conn.clone();
            let mut invocation = self.change.prepare_invoke();
            invocation
                .key(&k.s)
                .key(&k.p)
                .key(&k.m)
                .key(&k.o)
                .key(ALL)
                .key(&k.mine)
                .key(&k.l)
                .arg(&k.member)
                .arg(&key.id)
                .arg(self.idle_ms)
                .arg(if change.query.is_some() { "1" } else { "0" })
                .arg(change.query.unwrap_or(""))
                .arg(change.take.unwrap_or(""))
                .arg(if change.count { "1" } else { "0" })
                .arg(limit)
                .arg(hold.as_ref().map_or("", |h| h.0))
                .arg(hold.as_ref().map_or("", |h| h.1.as_str()))
                .arg(MAX_PENDING)
                .arg(HOLD_TTL_MS)
                .arg(
                    change
                        .labels_read
                        .map_or(-1, |v| i64::try_from(v).unwrap_or(i64::MAX)),
                )
                .arg(change.tool);
            for label in change.taints {
                invocation.arg(label);
            }
            let (answer, tx): (String, i64) = invocation
                .invoke_async(&mut conn)
                .await
                .map_err(|e| unavailable(&e))?;
            match answer.as_str() {
                "applied" => Ok(Changed::Applied),
                "labels" => Ok(Changed::LabelsChanged(u64::try_from(tx).unwrap_or(0))),
                "gone" => Ok(Changed::HoldGone),
                "full" => Ok(Changed::TurnFull(u32::try_from(tx).unwrap_or(u32::MAX))),
                "unknown" => Err(StoreError::Unknown(key.id.clone())),
                other => Err(unexpected(other)),
            }
        })
    }

    fn held<'a>(
        &'a self,
        key: &'a SessionKey,
        digest: &'a str,
    ) -> StoreFuture<'a, Option<PendingCall>> {
        Box::pin(async move {
            let k = Keys::of(key);
            let mut conn = self.conn.clone();
            let answer: Vec<String> = self
                .held
                .key(&k.s)
                .key(&k.p)
                .key(&k.m)
                .arg(digest)
                .arg(HOLD_TTL_MS)
                .invoke_async(&mut conn)
                .await
                .map_err(|e| unavailable(&e))?;
            match answer.as_slice() {
                [tag] if tag == "unknown" => Err(StoreError::Unknown(key.id.clone())),
                [tag] if tag == "none" => Ok(None),
                [tag, call] if tag == "held" => {
                    let call: PendingCall = serde_json::from_str(call)
                        .map_err(|_| unexpected("a held call that is not one"))?;
                    // The digest is the key it was held under; anything else is corrupt.
                    if call.digest != digest {
                        return Err(unexpected("a held call under another digest"));
                    }
                    Ok(Some(call))
                }
                _ => Err(unexpected("an answer of another shape")),
            }
        })
    }

    fn labels<'a>(&'a self, key: &'a SessionKey) -> StoreFuture<'a, Labels> {
        Box::pin(async move {
            let k = Keys::of(key);
            let mut conn = self.conn.clone();
            let answer: Vec<String> = self
                .labels
                .key(&k.s)
                .key(&k.l)
                .invoke_async(&mut conn)
                .await
                .map_err(|e| unavailable(&e))?;
            match answer.as_slice() {
                [tag] if tag == "unknown" => Err(StoreError::Unknown(key.id.clone())),
                [tag, version, pairs @ ..] if tag == "labels" && pairs.len() % 2 == 0 => {
                    let version: u64 = version
                        .parse()
                        .map_err(|_| unexpected("a labels version that is not a number"))?;
                    let mut labels = Vec::with_capacity(pairs.len() / 2);
                    for pair in pairs.chunks_exact(2) {
                        labels.push(label_source(&pair[0], &pair[1])?);
                    }
                    // The order they came: by turn, then time, then name.
                    labels.sort_by(|a: &LabelSource, b: &LabelSource| {
                        (a.turn, a.time, &a.label).cmp(&(b.turn, b.time, &b.label))
                    });
                    Ok(Labels { version, labels })
                }
                _ => Err(unexpected("an answer of another shape")),
            }
        })
    }

    fn close<'a>(&'a self, key: &'a SessionKey) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let k = Keys::of(key);
            let mut conn = self.conn.clone();
            let _: i64 = self
                .close
                .key(&k.s)
                .key(&k.p)
                .key(&k.m)
                .key(&k.o)
                .key(ALL)
                .key(&k.mine)
                .key(&k.l)
                .arg(&k.member)
                .arg(&key.id)
                .invoke_async(&mut conn)
                .await
                .map_err(|e| unavailable(&e))?;
            Ok(())
        })
    }

    fn len(&self) -> StoreFuture<'_, usize> {
        Box::pin(async move {
            let mut conn = self.conn.clone();
            let n: u64 = self
                .sweep
                .key(ALL)
                .arg("0")
                .invoke_async(&mut conn)
                .await
                .map_err(|e| unavailable(&e))?;
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        })
    }

    fn sweep(&self) -> StoreFuture<'_, usize> {
        Box::pin(async move {
            let mut conn = self.conn.clone();
            let n: u64 = self
                .sweep
                .key(ALL)
                .arg("1")
                .invoke_async(&mut conn)
                .await
                .map_err(|e| unavailable(&e))?;
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        })
    }
}
