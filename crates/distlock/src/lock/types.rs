//! The values of the lock family: [`Owner`], [`FencingToken`], [`LockStatus`].

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};
use crate::keys::{HOLDER_FIELD, TOKEN_FIELD};
use crate::layout::QUEUED_FIELD;
#[cfg(doc)]
use crate::{ErrorKind, Lock};

/// Longest owner string accepted, in bytes.
const MAX_OWNER_LEN: usize = 512;

/// Who holds a lock: the hash field `<client-uuid>:<owner-id>`.
///
/// Owners are values: clone one, send it to another task, or serialize it with
/// [`Owner::as_str`] and [`Owner::parse`] to hand a held lock to another process
/// ([`Lock::adopt`]).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Owner(Arc<str>);

impl Owner {
    pub(crate) fn from_parts(client_id: &str, n: u64) -> Owner {
        // Every acquire mints one: built on the stack (a client id is a UUID) and copied
        // once into its `Arc`, not formatted.
        let digits = crate::keys::Digits::of(n);
        Owner(crate::keys::concat_shared(&[
            client_id,
            ":",
            digits.as_str(),
        ]))
    }

    /// An owner from its string form `<client-id>:<owner-id>` (e.g. a Redisson
    /// `<uuid>:<threadId>` field).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] when either part is empty, the string has no `:`, is longer
    /// than 512 bytes, or is one of the reserved field names (the fencing token's, the
    /// holder metadata's, the queued mark's).
    pub fn parse(s: &str) -> Result<Owner> {
        let valid = s.len() <= MAX_OWNER_LEN
            && s != TOKEN_FIELD
            && s != HOLDER_FIELD
            && s != QUEUED_FIELD
            && matches!(s.rsplit_once(':'), Some((a, b)) if !a.is_empty() && !b.is_empty());
        if !valid {
            return Err(Error::invalid(format!(
                "owner {s:?} is not of the form <client-id>:<owner-id> (at most {MAX_OWNER_LEN} bytes)"
            )));
        }
        Ok(Owner(s.into()))
    }

    /// The hash field this owner holds a lock under.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// [`Owner::as_str`], shared (no copy).
    pub(crate) fn shared(&self) -> Arc<str> {
        self.0.clone()
    }

    /// The owner whose [`Owner::shared`] string `s` is.
    pub(crate) fn from_shared(s: Arc<str>) -> Owner {
        Owner(s)
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Owner({})", self.0)
    }
}

/// A fencing token: a number issued with every grant.
///
/// It increases strictly per lock name across releases, expiries, a server restart from an
/// older snapshot and a failover to a replica that missed the last writes (as long as server
/// clocks agree within the failover time). Pass it with every write to the protected resource
/// and have the resource refuse a token lower than the highest it has seen: a holder that was
/// paused past its lease is then refused.
///
/// Tokens are `max(last + 1, server TIME in µs)`, kept in one counter key per cluster hash
/// slot ([`Lock::fencing_counter_key`]: strictly increasing per name, and across the names
/// of one slot, not across slots), computed by decimal-string arithmetic on the server and
/// sent as decimal strings, so they are exact over their whole range (Lua numbers are
/// doubles, exact only below 2^53). The largest token is `i64::MAX` (2^63 - 1); once the
/// counter reaches it, every grant fails with an error naming the counter, and nothing is
/// granted or written.
/// What they cannot fix: two masters that both grant during a network partition (the
/// resource still sees two increasing streams; only the later-seen lower token is refused).
///
/// On Redis Sentinel and Redis Cluster a token also carries a *generation*, the config epoch
/// of the master that issued it (Sentinel: the epoch the sentinels give the master; Cluster:
/// the node's `cluster_my_epoch`), which rises with every failover: the token's value is
/// `generation × 2^64 + sequence`, so every token of a promoted master is above every token of
/// the master it replaced, whatever the two servers' clocks say — and a grant made by an
/// isolated old master that still serves a stale client is ordered below the new master's.
/// On one server (and a Sentinel master or Cluster node of epoch 0) the generation is 0 and
/// the value is the sequence. One number either way: compare tokens as integers (`u128`),
/// print them in decimal.
///
/// # In a 64-bit column
/// A fenced resource is usually a database row, whose integer columns (SQL `bigint`, a JSON
/// number) hold a signed 64-bit value. [`as_i64`](FencingToken::as_i64) gives every token
/// that form, ordered as the tokens are, on every topology: `generation × 2^52 + sequence`
/// (the generation in the top 11 of the 63 bits, the sequence in the low 52). On one server
/// it is the token's own value. Its limits: generations 0 to 2047 (config epochs: a
/// Sentinel or Cluster deployment that has seen more than 2047 failovers gets `None`) and
/// sequences below 2^52 (microseconds since 1970: until the year 2112 by the clock; a
/// counter set higher by hand gets `None`). Within them, a higher generation is always
/// above a lower one, as with [`get`](FencingToken::get).
///
/// The resource keeps the highest token it has accepted and refuses lower ones, in the same
/// statement as the write — PostgreSQL, say:
///
/// ```sql
/// -- fence bigint NOT NULL DEFAULT 0 on the protected row
/// UPDATE accounts SET balance = $2, fence = $1
///  WHERE id = $3 AND fence < $1;   -- 0 rows updated: a newer holder wrote first
/// ```
///
/// with `$1` = `guard.fencing_token().as_i64()` (a `None` is a deployment past the limits:
/// refuse to write). A stale holder's `UPDATE` then changes nothing (Kleppmann, "How to do
/// distributed locking").
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct FencingToken(pub u128);

/// How a plain [`Lock`] passes from a releasing holder to its waiters.
///
/// Chosen with [`Lock::handoff`](super::Lock::handoff).
///
/// With hand-off on, a waiting acquire joins a queue beside the lock (distlock's own, in
/// the lock's hash slot: `distlock_lock_queue:{<key>}` and `distlock_lock_waiters:{<key>}`)
/// and renews a *liveness deadline* there with each attempt, as a fair lock's waiter does. A
/// release that finds a live waiter does not free the lock: the release script itself grants
/// it to the first live waiter — hold count 1, a fresh fencing token, a short initial lease
/// (the waiter's lease, ending at the latest at its liveness deadline, until the new holder
/// renews it) — and
/// publishes the grant on that waiter's client channel, so the waiter already holds the lock
/// when the message arrives: one message, no second round trip, no thundering herd, no
/// barging by the releasing client. A waiter that died is passed over once its liveness
/// deadline is past; a cancelled or timed-out waiter leaves the queue and gives back a
/// hand-off that raced it, to the next waiter.
///
/// Where replicas confirm grants (Sentinel, or Cluster with
/// [`replica_acks`](crate::ClientBuilder::replica_acks) above 0) there is no hand-off yet:
/// the lock behaves as [`Handoff::Off`].
///
/// Redisson clients on the same lock work as before: they neither queue nor read the queue.
/// A Redisson release frees the lock and wakes distlock waiters as usual, and the first
/// distlock attempt that then finds the lock free hands it to the first live waiter. Redisson
/// waiters are woken when a distlock release finds no distlock waiter queued; while distlock
/// waiters are queued they see the lock held and retry on their own timers.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
#[non_exhaustive]
pub enum Handoff {
    /// Strict arrival order (the default).
    ///
    /// Waiters queue, a release hands the lock to the first live waiter, and a free lock with a
    /// live waiter queued is handed to that waiter rather than granted to a newcomer (`try_acquire`
    /// then returns `None`). A client that releases and acquires again queues behind the waiters
    /// already there.
    #[default]
    Fifo,
    /// Bounded barging: waiters queue and are handed the lock as with [`Handoff::Fifo`].
    ///
    /// Up to `n` acquisitions in a row may go to callers outside the queue's head (most often
    /// the client that just released, re-taking it at once) before a release hands the lock to
    /// the head. A release within that budget frees the lock and wakes one waiter per client,
    /// as Redisson's does; a grant to the head made by a `Retakes` handle's script starts a new
    /// run (one made by a `Fifo` handle leaves the count, which can then only allow fewer
    /// re-takes). So a queued waiter is passed over at most `n` times in a row. It trades
    /// longer waits for fewer hand-offs between clients; whether that buys throughput depends
    /// on the deployment (`distlock-bench bench --handoff retakes:N` measures it: on a loaded
    /// 2-core machine it did not beat `Fifo`). The run's count lives in the waiters hash (field
    /// `distlock:retakes`). `Retakes(0)` is [`Handoff::Fifo`].
    Retakes(u32),
    /// Redisson's `RLock` behaviour.
    ///
    /// This lock's acquires neither queue nor respect the queue, and a released lock goes to
    /// whichever waiter's attempt comes first (often the releasing client's next acquire). Its
    /// releases still hand the lock to waiters that other handles (with hand-off on) queued.
    Off,
}

/// `true` is [`Handoff::Fifo`], `false` [`Handoff::Off`]: what the fair lock's, the
/// read-write lock's and the leased semaphore's `handoff` took before they took a
/// [`Handoff`].
impl From<bool> for Handoff {
    fn from(on: bool) -> Handoff {
        if on {
            Handoff::Fifo
        } else {
            Handoff::Off
        }
    }
}

impl Handoff {
    /// Whether waiters queue to be handed the lock (every policy but [`Handoff::Off`]).
    pub fn is_on(self) -> bool {
        self != Handoff::Off
    }

    /// The policy of a kind that hands off in strict arrival order only (all but the plain
    /// lock): [`Handoff::Retakes`] is [`Handoff::Fifo`] there.
    pub(crate) fn in_order(self) -> Handoff {
        match self {
            Handoff::Off => Handoff::Off,
            _ => Handoff::Fifo,
        }
    }
}

impl FencingToken {
    /// The token's value: `generation × 2^64 + sequence`.
    pub fn get(self) -> u128 {
        self.0
    }

    /// Returns the generation: the config epoch of the master that issued the token.
    ///
    /// On Sentinel, the epoch the sentinels give that master; on Cluster, the node's
    /// `cluster_my_epoch`; 0 on one server.
    pub fn generation(self) -> u64 {
        (self.0 >> 64) as u64
    }

    /// The sequence within the generation (`max(last + 1, server µs)`).
    pub fn sequence(self) -> u64 {
        self.0 as u64
    }

    /// Returns the token as a signed 64-bit integer, for a database column or a JSON number.
    ///
    /// `generation × 2^52 + sequence`, ordered as the tokens are; `None` past its limits (a
    /// generation above 2047, a sequence of 2^52 or more). See [In a 64-bit
    /// column](FencingToken#in-a-64-bit-column).
    pub fn as_i64(self) -> Option<i64> {
        let (generation, sequence) = (self.generation(), self.sequence());
        if generation >= 1 << 11 || sequence >= 1 << 52 {
            return None;
        }
        Some(((generation << 52) | sequence) as i64)
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Who was granted a plain or fair lock.
///
/// The grant records it in the lock hash's holder field
/// ([`layout::HOLDER_FIELD`](crate::layout::HOLDER_FIELD), value `<app>;<host>;<pid>;<since>`).
/// Reported by [`Lock::status`] as [`LockStatus::holder`].
///
/// The record is written with the grant to a new holder and stays, unchanged, through its
/// re-entries and partial releases until the last release deletes the lock; a hold taken
/// over with [`Lock::adopt`] keeps the record of the process that was granted it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HolderInfo {
    /// The owner holding the lock: its hash field `<client-uuid>:<owner-id>`.
    pub owner: String,
    /// The granting client's application name.
    ///
    /// Its first 16 characters, as set by
    /// [`ClientBuilder::app_name`](crate::ClientBuilder::app_name).
    pub app: String,
    /// The host name of the granting process's machine.
    ///
    /// Its first 24 characters, those outside `[A-Za-z0-9._-]` replaced by `_`.
    pub host: String,
    /// The granting process's id.
    pub pid: u32,
    /// When the lock was granted, by the server's clock (`TIME`, whole seconds).
    pub since: SystemTime,
}

impl HolderInfo {
    /// Parses a holder field's `value` for the lock's holder `owner` (the hash's one owner field).
    ///
    /// `<app>;<host>;<pid>;<since>`, `since` in whole seconds since the Unix epoch; further
    /// `;`-separated parts are ignored (a later version may record more). `None` when a part is
    /// missing, `pid` is not a `u32` or `since` not a whole number.
    ///
    /// # Examples
    /// ```
    /// use std::time::{Duration, UNIX_EPOCH};
    ///
    /// let h = distlock::HolderInfo::parse("6f1c…:7", "billing;web-1;4242;1700000000").unwrap();
    /// assert_eq!((h.owner.as_str(), h.app.as_str(), h.pid), ("6f1c…:7", "billing", 4242));
    /// assert_eq!(h.since, UNIX_EPOCH + Duration::from_secs(1_700_000_000));
    /// ```
    pub fn parse(owner: &str, value: &str) -> Option<HolderInfo> {
        let mut parts = value.split(';');
        let (app, host) = (parts.next()?, parts.next()?);
        let pid = parts.next()?.parse::<u32>().ok()?;
        let since = parts.next()?.parse::<u64>().ok()?;
        Some(HolderInfo {
            owner: owner.to_string(),
            app: app.to_string(),
            host: host.to_string(),
            pid,
            since: SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(since))?,
        })
    }
}

/// Who holds a read-write lock.
///
/// Readers or a writer (the hash's `mode` field, `read` or `write`, as Redisson's `RReadWriteLock`
/// writes it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockMode {
    /// One or more readers.
    Read,
    /// One writer (which may hold read locks too).
    Write,
}

impl LockMode {
    /// `read` or `write`: the `mode` field's value.
    pub fn as_str(self) -> &'static str {
        match self {
            LockMode::Read => "read",
            LockMode::Write => "write",
        }
    }

    /// The mode a `mode` field's value names; `None` for another value.
    pub(crate) fn parse(value: &str) -> Option<LockMode> {
        match value {
            "read" => Some(LockMode::Read),
            "write" => Some(LockMode::Write),
            _ => None,
        }
    }
}

impl std::fmt::Display for LockMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What [`Lock::status`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockStatus {
    /// The lock's name.
    pub name: String,
    /// The lock's Redis key.
    pub key: String,
    /// Owner fields (`<client-uuid>:<owner-id>`) with their hold counts; empty when free.
    pub holders: Vec<(String, u64)>,
    /// Time left on the lease; `None` when free or without TTL.
    pub ttl: Option<Duration>,
    /// The current holder's fencing token, when the holder is a distlock owner.
    pub fencing_token: Option<FencingToken>,
    /// The last token issued by the fencing counter this lock draws from.
    ///
    /// The counter is [`Lock::fencing_counter_key`]: one per cluster hash slot, shared by the
    /// names in that slot, so this is an upper bound of this lock's last token. Before the
    /// slot's first grant: the floor its counter will start above (the legacy server-wide
    /// counter as read at connect, 0 when there was none).
    pub fencing_counter: u128,
    /// Connections subscribed to the wake channel.
    ///
    /// Counted by `PUBSUB NUMSUB`, plus `PUBSUB SHARDNUMSUB` where waiters use sharded pub/sub
    /// (a Redis 7 Cluster): one per waiting client (per waiter for a fair lock, whose waiters
    /// have channels of their own).
    pub subscribers: u64,
    /// Read-write locks: whether readers or a writer hold it; `None` when free and for the
    /// other kinds.
    pub mode: Option<LockMode>,
    /// Fair locks: the waiting owners, first in line first.
    pub queue: Vec<String>,
    /// Read-write locks: writers waiting (new readers hold back while there are any).
    pub waiting_writers: u64,
    /// Plain and fair locks: who was granted the lock.
    ///
    /// Owner, application, host, process id and since when — as the grant recorded it. `None` when
    /// the lock is free, when its holder did not record it (a Redisson client; a distlock client
    /// older than this field) or the record cannot be parsed, and always for read-write locks:
    /// Redisson's `RReadWriteLock` unlock scripts decide whether to delete the hash by its number
    /// of fields (`HLEN`), so distlock adds no field to a read-write lock's hash.
    pub holder: Option<HolderInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn token(generation: u64, sequence: u64) -> FencingToken {
        FencingToken((u128::from(generation) << 64) | u128::from(sequence))
    }

    proptest::proptest! {
        /// The 64-bit form orders tokens as their full values do, across generations, and
        /// is the value itself on one server.
        #[test]
        fn the_64_bit_form_keeps_the_order(
            g1 in 0u64..2047, step in 0u64..2, s1 in 0u64..(1 << 52), s2 in 0u64..(1 << 52),
        ) {
            // The same or the next generation: where an encoding too narrow would overlap.
            let g2 = g1 + step;
            let (a, b) = (token(g1, s1), token(g2, s2));
            let (x, y) = (a.as_i64().unwrap(), b.as_i64().unwrap());
            proptest::prop_assert!(x >= 0);
            proptest::prop_assert_eq!(a.cmp(&b), x.cmp(&y));
            proptest::prop_assert_eq!(token(0, s1).as_i64(), Some(s1 as i64));
        }
    }

    /// An owner minted from a client id and a number is `<client id>:<n>`, whatever their
    /// lengths.
    #[test]
    fn owners_are_the_client_id_and_the_number() {
        let uuid = "0b2c4d5e-6f70-4182-93a4-b5c6d7e8f901";
        for id in [uuid, "c", &"x".repeat(80)] {
            for n in [0, 7, u64::MAX] {
                assert_eq!(Owner::from_parts(id, n).as_str(), format!("{id}:{n}"));
            }
        }
    }

    #[test]
    fn the_64_bit_form_has_limits() {
        // The last generation and sequence fit; the next of either does not.
        assert_eq!(token(2047, (1 << 52) - 1).as_i64(), Some(i64::MAX));
        assert_eq!(token(2048, 0).as_i64(), None);
        assert_eq!(token(0, 1 << 52).as_i64(), None);
        // Today's clock in µs, in a late generation: well inside.
        assert!(token(1000, 1_764_000_000_000_000).as_i64().is_some());
    }

    #[test]
    fn holder_records_parse() {
        let h = HolderInfo::parse("u-1:7", "billing;web-1;42;1700000000").unwrap();
        assert_eq!(
            h,
            HolderInfo {
                owner: "u-1:7".into(),
                app: "billing".into(),
                host: "web-1".into(),
                pid: 42,
                since: at(1_700_000_000),
            }
        );
        // Parts after the fourth are ignored.
        let h = HolderInfo::parse("u:1", "a;h;1;5;zone=eu-1;x").unwrap();
        assert_eq!((h.app.as_str(), h.pid, h.since), ("a", 1, at(5)));
    }

    #[test]
    fn unparsable_holder_records_are_none() {
        for bad in [
            "",
            "a;h;1",
            "a;h;;5",
            "a;h;-1;5",
            "a;h;4294967296;5",
            "a;h;1;soon",
            "a;h;1;1.5",
            "owner=u:1;app=a;host=h;pid=1;since=5",
        ] {
            assert_eq!(HolderInfo::parse("u:1", bad), None, "{bad:?}");
        }
    }

    #[test]
    fn reserved_fields_are_not_owners() {
        assert!(Owner::parse(TOKEN_FIELD).is_err());
        assert!(Owner::parse(HOLDER_FIELD).is_err());
        assert!(Owner::parse(QUEUED_FIELD).is_err());
        assert!(Owner::parse("distlock:holders").is_ok());
    }
}
