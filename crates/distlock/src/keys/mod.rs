//! Key and channel names (the wire contract of doc/design.md §Data layout) and input checks.
//!
//! Names follow Redisson's `prefixName`: a helper key for lock `name` is
//! `<prefix>:{<name>}`, or `<prefix>:<name>` when the name already carries a `{hash tag}`, so
//! that every key one script touches hashes to the lock's cluster slot.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
#[cfg(test)]
use slots::CRC16;
pub use slots::{hash_tag, key_slot, slot_tag, SLOTS};

/// Redisson `RFairLock`'s queue of waiting owners, a list: `redisson_lock_queue:{<name>}`.
pub const FAIR_QUEUE_PREFIX: &str = "redisson_lock_queue";
/// Redisson `RFairLock`'s waiter timeouts, a zset: `redisson_lock_timeout:{<name>}`.
pub const FAIR_TIMEOUTS_PREFIX: &str = "redisson_lock_timeout";
/// distlock's liveness deadlines of a fair lock's waiters: `distlock_fair_liveness:{<name>}`.
pub const FAIR_LIVENESS_PREFIX: &str = "distlock_fair_liveness";
/// distlock's hand-off entries of a fair lock's waiters: `distlock_fair_waiters:{<name>}`.
pub const FAIR_WAITERS_PREFIX: &str = "distlock_fair_waiters";
/// Redisson `RFencedLock`'s token counter of a lock: `redisson_lock_token:{<name>}`.
pub const REDISSON_FENCED_TOKEN_PREFIX: &str = "redisson_lock_token";
/// Redisson `RLock`'s latch of one release request:
/// `redisson_unlock_latch:{<name>}:<request-id>`.
pub const UNLOCK_LATCH_PREFIX: &str = "redisson_unlock_latch";
/// distlock's latch of one re-entrant acquire request:
/// `distlock_acquire_latch:{<name>}:<request-id>`.
pub const ACQUIRE_LATCH_PREFIX: &str = "distlock_acquire_latch";
/// distlock's hand-off queue of a plain lock: `distlock_lock_queue:{<name>}`.
pub const LOCK_QUEUE_PREFIX: &str = "distlock_lock_queue";
/// distlock's waiter entries of a plain lock's queue: `distlock_lock_waiters:{<name>}`.
pub const LOCK_WAITERS_PREFIX: &str = "distlock_lock_waiters";
/// distlock's hand-off queue of a read-write lock's writers: `distlock_rwlock_queue:{<name>}`.
pub const RWLOCK_QUEUE_PREFIX: &str = "distlock_rwlock_queue";
/// distlock's writer entries of a read-write lock's queue: `distlock_rwlock_waiters:{<name>}`.
pub const RWLOCK_WAITERS_PREFIX: &str = "distlock_rwlock_waiters";
/// distlock's waiting writers of a read-write lock: `distlock_rwlock_writers:{<name>}`.
pub const RWLOCK_WRITERS_PREFIX: &str = "distlock_rwlock_writers";
/// distlock's hand-off queue of a leased semaphore: `distlock_permit_queue:{<name>}`.
pub const PERMIT_QUEUE_PREFIX: &str = "distlock_permit_queue";
/// distlock's waiter entries of a leased semaphore's queue: `distlock_permit_waiters:{<name>}`.
pub const PERMIT_WAITERS_PREFIX: &str = "distlock_permit_waiters";
/// The leases of a leased semaphore as older distlock versions kept them:
/// `redisson__timeout__set:{<name>}`.
///
/// The scripts move them to [`semaphore_leases`].
pub const LEGACY_SEMAPHORE_LEASES_PREFIX: &str = "redisson__timeout__set";
/// distlock's records of one client's semaphore acquires begun in one epoch and block:
/// `distlock_semaphore_grants:{<name>}:<client-id>:<epoch>:<block>`, a set of request records.
pub const SEMAPHORE_GRANT_LATCH_PREFIX: &str = "distlock_semaphore_grants";
/// distlock's records of one client's semaphore releases begun in one epoch and block:
/// `distlock_semaphore_releases:{<name>}:<client-id>:<epoch>:<block>`, a set of request records.
pub const SEMAPHORE_RELEASE_LATCH_PREFIX: &str = "distlock_semaphore_releases";
/// distlock's records of one client's count-downs of a latch begun in one epoch and block:
/// `distlock_latch_count_downs:{<name>}:<client-id>:<epoch>:<block>`, a set of request records.
pub const LATCH_COUNT_DOWN_LATCH_PREFIX: &str = "distlock_latch_count_downs";
/// distlock's fencing counters.
///
/// `distlock:fencing-counter:{<slot tag>}`, one per hash slot, and the server-wide
/// `distlock:fencing-counter` of older versions (after the client's key prefix, which comes first).
pub const FENCING_COUNTER_PREFIX: &str = "distlock:fencing-counter";
/// ShedLock's job locks: `job-lock:<env>:<name>`.
pub const JOB_LOCK_PREFIX: &str = "job-lock";
/// Redisson `RPermitExpirableSemaphore`'s lease set: `{<name>}:timeout`.
pub const SEMAPHORE_LEASES_SUFFIX: &str = "timeout";
/// Redisson `RReadWriteLock`'s key of one read hold: `{<name>}:<owner>:rwlock_timeout:<n>`.
pub const RWLOCK_READ_TIMEOUT_SUFFIX: &str = "rwlock_timeout";

/// Longest lock name accepted, in bytes (64 KiB).
///
/// Redis allows 512 MB keys; a longer name is almost surely a bug in the caller, and every script
/// call carries it several times.
pub const MAX_NAME_LEN: usize = 64 * 1024;

/// Longest lease, wait or extension accepted: 365 days.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);

/// Largest count or number of permits accepted.
///
/// 2^53, the largest integer a Lua number (a double) holds exactly.
pub const MAX_PERMITS: u64 = 1 << 53;

/// The hash field that stores the current holder's fencing token inside a lock hash.
///
/// Redisson's scripts only look at their own `<uuid>:<threadId>` field, so the extra field does not
/// disturb them; distlock's scripts and `status` skip it when counting owners.
pub const TOKEN_FIELD: &str = "distlock:fencing-token";

/// The hash field that records who was granted a plain or fair lock.
///
/// It is written with the grant to a new holder (not on re-entry) and deleted with the key on
/// the last release. Its value is `<app>;<host>;<pid>;<since>` — the application name (at most
/// 16 characters), host name (at most 24), process id and the server time of the grant in whole
/// seconds since the Unix epoch — read back as [`HolderInfo`](crate::HolderInfo). The caps keep
/// the value within 64 bytes, so the lock hash keeps Redis's compact listpack encoding.
/// Redisson's plain and fair lock scripts only look at their own `<uuid>:<threadId>` field and
/// delete the key on the last release, so they are not disturbed; distlock's scripts and
/// `status` skip it when counting owners. Read-write locks never carry it: Redisson's
/// read-write unlock scripts decide whether to delete the hash by its field count (`HLEN`).
pub const HOLDER_FIELD: &str = "distlock:holder";

/// Unlock message published on the wake channel when a lock is freed (Redisson's
/// `LockPubSub.UNLOCK_MESSAGE`): wakes one waiter.
pub(crate) const UNLOCK_MESSAGE: &str = "0";

/// Redisson's `prefixName(prefix, name)`.
pub(crate) fn prefixed(prefix: &str, key: &str) -> String {
    tagged(Some(prefix), key, &[])
}

/// [`prefixed`], then `:<tail>`.
fn prefixed_with(prefix: &str, key: &str, tail: &str) -> String {
    tagged(Some(prefix), key, &[tail])
}

/// Redisson's `suffixName(name, suffix)`: `{<key>}:<suffix>`, or `<key>:<suffix>` when the key
/// already carries a `{hash tag}`.
pub(crate) fn suffixed(key: &str, suffix: &str) -> String {
    tagged(None, key, &[suffix])
}

/// `{<key>}`, or the key itself when it already carries a `{hash tag}`.
pub(crate) fn hash_tagged(key: &str) -> String {
    tagged(None, key, &[])
}

/// `[<prefix>:]{<key>}[:<tail>]` (the tail's parts joined), the key without braces added
/// when it already carries a `{hash tag}`: every helper name's one rule, built in one
/// allocation (these names are built on every request; `format!` took about ten times as
/// long).
fn tagged(prefix: Option<&str>, key: &str, tail: &[&str]) -> String {
    let braces = !key.contains('{');
    let tail_len: usize = tail.iter().map(|t| t.len()).sum();
    let mut s = String::with_capacity(prefix.map_or(0, |p| p.len() + 1) + key.len() + 3 + tail_len);
    if let Some(prefix) = prefix {
        s.push_str(prefix);
        s.push(':');
    }
    if braces {
        s.push('{');
    }
    s.push_str(key);
    if braces {
        s.push('}');
    }
    if !tail.is_empty() {
        s.push(':');
        tail.iter().for_each(|t| s.push_str(t));
    }
    s
}

/// Wake channel of a lock: `redisson_lock__channel:{key}`.
pub fn lock_channel(key: &str) -> String {
    prefixed("redisson_lock__channel", key)
}

/// Returns the wake channel of a semaphore, plain or leased.
///
/// `redisson_sc:{key}` (Redisson's `RSemaphore` and `RPermitExpirableSemaphore`).
pub fn semaphore_channel(key: &str) -> String {
    prefixed("redisson_sc", key)
}

/// Returns the lease set of a leased semaphore.
///
/// `{key}:timeout` (`key:timeout` when the key has a `{hash tag}`), a zset of permit ids by expiry
/// (Redisson's `RPermitExpirableSemaphore`).
pub fn semaphore_leases(key: &str) -> String {
    suffixed(key, SEMAPHORE_LEASES_SUFFIX)
}

/// Returns the wake channel of a count-down latch.
///
/// `redisson_countdownlatch__channel__{key}`, with braces around the whole key even when it has a
/// `{hash tag}` (Redisson's `RCountDownLatch`).
pub fn latch_channel(key: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{key}}}")
}

/// Returns Redisson `RFencedLock`'s token counter of a lock.
///
/// `redisson_lock_token:{key}` (a string Redisson draws tokens from with `INCR`). distlock never
/// creates it; when it exists, a plain lock's grant takes a token above it and writes it there.
pub fn redisson_fenced_token(key: &str) -> String {
    prefixed(REDISSON_FENCED_TOKEN_PREFIX, key)
}

/// Returns the unlock latch of one release request.
///
/// `redisson_unlock_latch:{key}:<request-id>` (the key Redisson's `RLock` unlock script uses, so
/// that a resent release answers the first send's result instead of taking a second hold away).
pub fn unlock_latch(key: &str, request_id: &str) -> String {
    prefixed_with(UNLOCK_LATCH_PREFIX, key, request_id)
}

/// [`unlock_latch`] of the request id `<client id>:r<n>` ([`Client::request_id`]'s form),
/// built in one allocation.
///
/// [`Client::request_id`]: crate::Client
pub(crate) fn unlock_latch_of(key: &str, client_id: &str, n: u64) -> String {
    tagged(
        Some(UNLOCK_LATCH_PREFIX),
        key,
        &[client_id, ":r", Digits::of(n).as_str()],
    )
}

/// `parts` joined, in one allocation of the shared string (built on the stack first when
/// short): names built on every request (a lock's key with its prefix, a minted owner, a write
/// hold's field) without formatting.
pub(crate) fn concat_shared(parts: &[&str]) -> Arc<str> {
    let mut buf = [0u8; 256];
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len > buf.len() {
        return parts.concat().into();
    }
    let mut at = 0;
    for p in parts {
        buf[at..at + p.len()].copy_from_slice(p.as_bytes());
        at += p.len();
    }
    std::str::from_utf8(&buf[..len])
        .expect("strs joined")
        .into()
}

/// An integer's decimal digits, written without an allocation (by `itoa`) and kept beside
/// the value that needs them: a request's number in its latch's name, an owner's number, an
/// integer in a script's reply read as text.
#[derive(Clone, Copy)]
pub(crate) struct Digits {
    bytes: [u8; 40],
    len: u8,
}

impl Digits {
    /// `n` in decimal (at most 40 bytes: `i128::MIN`).
    pub(crate) fn of(n: impl itoa::Integer) -> Digits {
        let mut buf = itoa::Buffer::new();
        let s = buf.format(n);
        let mut d = Digits {
            bytes: [0; 40],
            len: s.len() as u8,
        };
        d.bytes[..s.len()].copy_from_slice(s.as_bytes());
        d
    }

    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).expect("ASCII digits")
    }
}

/// Returns the acquire latch of one re-entrant acquire request:
/// `distlock_acquire_latch:{key}:<id>`.
///
/// Makes a resent acquire idempotent (in Redisson, a re-entrant acquire resent after a lost reply
/// leaves hold count 2).
pub fn acquire_latch(key: &str, request_id: &str) -> String {
    prefixed_with(ACQUIRE_LATCH_PREFIX, key, request_id)
}

/// Returns the direct hand-off queue of a plain lock.
///
/// `distlock_lock_queue:{key}`, a zset of waiting owners by arrival (server ms). distlock's own:
/// Redisson's `RLock` has no queue.
pub fn lock_queue(key: &str) -> String {
    prefixed(LOCK_QUEUE_PREFIX, key)
}

/// Returns the waiter entries of a plain lock's hand-off queue.
///
/// `distlock_lock_waiters:{key}`, a hash owner →
/// `<liveness deadline ms>;<initial lease ms>;<client id>;<app>;<host>;<pid>`.
pub fn lock_waiters(key: &str) -> String {
    prefixed(LOCK_WAITERS_PREFIX, key)
}

/// Returns the direct hand-off queue of a read-write lock's writers.
///
/// `distlock_rwlock_queue:{key}`, a zset of waiting writers (owners) by arrival (server ms).
/// distlock's own: Redisson's `RReadWriteLock` has no queue.
pub fn rwlock_queue(key: &str) -> String {
    prefixed(RWLOCK_QUEUE_PREFIX, key)
}

/// Returns the writer entries of a read-write lock's hand-off queue.
///
/// `distlock_rwlock_waiters:{key}`, a hash owner →
/// `<liveness deadline ms>;<initial lease ms>;<client id>;`.
pub fn rwlock_waiters(key: &str) -> String {
    prefixed(RWLOCK_WAITERS_PREFIX, key)
}

/// Returns the waiting writers of a read-write lock.
///
/// `distlock_rwlock_writers:{key}`, a zset owner → liveness deadline (server ms). While a live
/// writer is in it, new readers wait (write-preferring). distlock's own: Redisson's
/// `RReadWriteLock` ignores it.
pub fn rwlock_writers(key: &str) -> String {
    prefixed(RWLOCK_WRITERS_PREFIX, key)
}

/// Returns the hand-off entries of a fair lock's distlock waiters.
///
/// `distlock_fair_waiters:{key}`, a hash owner →
/// `<initial lease ms>;<wait ms>;<client id>;<app>;<host>;<pid>`, beside Redisson's queue
/// `redisson_lock_queue:{key}`. distlock's own: Redisson's `RFairLock` ignores it.
pub fn fair_waiters(key: &str) -> String {
    prefixed(FAIR_WAITERS_PREFIX, key)
}

/// Returns Redisson `RFairLock`'s queue of a fair lock.
///
/// `redisson_lock_queue:{key}`, a list of the waiting owners, first in line first.
pub fn fair_queue(key: &str) -> String {
    prefixed(FAIR_QUEUE_PREFIX, key)
}

/// Returns Redisson `RFairLock`'s waiter timeouts of a fair lock.
///
/// `redisson_lock_timeout:{key}`, a zset owner → the time its turn expires (ms).
pub fn fair_timeouts(key: &str) -> String {
    prefixed(FAIR_TIMEOUTS_PREFIX, key)
}

/// Returns the liveness deadlines of a fair lock's distlock waiters.
///
/// `distlock_fair_liveness:{key}`, a zset owner → deadline (server ms). distlock's own: Redisson's
/// `RFairLock` ignores it.
pub fn fair_liveness(key: &str) -> String {
    prefixed(FAIR_LIVENESS_PREFIX, key)
}

/// Returns Redisson `RReadWriteLock`'s key of read hold `n` of `owner`.
///
/// `{key}:<owner>:rwlock_timeout:<n>` (`key:…` when the key has a `{hash tag}`), with that hold's
/// lease, so a crashed reader's holds run out on their own.
pub fn rwlock_read_timeout(key: &str, owner: &str, n: u64) -> String {
    format!(
        "{}:{}:{n}",
        suffixed(key, owner),
        RWLOCK_READ_TIMEOUT_SUFFIX
    )
}

/// Returns the lease set of a leased semaphore as older distlock versions named it.
///
/// `redisson__timeout__set:{key}`. No longer written: the scripts move what they find there into
/// [`semaphore_leases`].
pub fn legacy_semaphore_leases(key: &str) -> String {
    prefixed(LEGACY_SEMAPHORE_LEASES_PREFIX, key)
}

/// One client's semaphore grant records of one epoch and block of 64 requests (a set of
/// integer members: the request numbers, and a tombstone for each given back):
/// `distlock_semaphore_grants:{key}:<tail>`, `tail` = `<client-id>:<epoch>:<block>`.
pub fn semaphore_grant_latch(key: &str, tail: &str) -> String {
    prefixed_with(SEMAPHORE_GRANT_LATCH_PREFIX, key, tail)
}

/// One client's semaphore release records of one epoch and block of 64 requests (a set of
/// integer members: the request numbers applied):
/// `distlock_semaphore_releases:{key}:<tail>`, `tail` = `<client-id>:<epoch>:<block>`.
pub fn semaphore_release_latch(key: &str, tail: &str) -> String {
    prefixed_with(SEMAPHORE_RELEASE_LATCH_PREFIX, key, tail)
}

/// One client's count-down records of a latch of one epoch and block of 64 requests (a set
/// of integer members: each request with the count it left):
/// `distlock_latch_count_downs:{key}:<tail>`, `tail` = `<client-id>:<epoch>:<block>`.
pub fn latch_count_down_latch(key: &str, tail: &str) -> String {
    prefixed_with(LATCH_COUNT_DOWN_LATCH_PREFIX, key, tail)
}

/// The key of a job lock (ShedLock's format): `job-lock:<env>:<name>`, without the client's
/// key prefix.
pub fn job_lock(env: &str, name: &str) -> String {
    format!("{}:{env}:{name}", JOB_LOCK_PREFIX)
}

/// The parts of a job lock's value `ADDED:<time>@<host>[:<id>]` (ShedLock's, with distlock's
/// id after the host): the time as written, the host, and the id when what follows the last
/// `:` is a UUID (this version's holder client's id; distlock 0.1 wrote a fresh one per
/// grant, ShedLock none). `None` when it does not start with `ADDED:` and contain `@`.
pub(crate) fn job_value_parts(value: &str) -> Option<(&str, &str, Option<&str>)> {
    let (locked_at, who) = value.strip_prefix("ADDED:")?.split_once('@')?;
    Some(match who.rsplit_once(':') {
        Some((host, id)) if uuid::Uuid::parse_str(id).is_ok() => (locked_at, host, Some(id)),
        _ => (locked_at, who, None),
    })
}

/// Returns the grant channel of one client's waiters of a plain or fair lock.
///
/// `distlock_lock_grant:{key}:<client id>`. A release that hands the lock to a waiter publishes
/// `h;<fencing token>;<initial lease ms>;<owner>` there (same hash slot as the key, so a Cluster's
/// sharded pub/sub can carry it).
pub fn lock_grant_channel(key: &str, client_id: &str) -> String {
    prefixed_with("distlock_lock_grant", key, client_id)
}

/// Returns the notice channel of one client: `distlock_client:{<client id>}`.
///
/// A force unlock publishes `l;<field length>;<owner field>;<lock key>` there for each hold it
/// deleted of that client's, which fires the hold's lost signal at once. Hash-tagged by the client
/// id, so a Cluster's sharded pub/sub carries it on one slot.
pub fn client_notice_channel(client_id: &str) -> String {
    prefixed("distlock_client", client_id)
}

/// Returns the notice channel of a job lock: `distlock_job:{<key>}`.
///
/// A force unlock publishes the value it deleted there, for the guards of distlock 0.1,
/// which listen on it while they hold the lock; this version's guards hear on their
/// client's notice channel ([`client_notice_channel`]), named by the value. distlock's own:
/// ShedLock has no channel.
pub fn job_notice_channel(key: &str) -> String {
    prefixed("distlock_job", key)
}

/// Returns the direct hand-off queue of a leased semaphore.
///
/// `distlock_permit_queue:{key}`, a zset of waiting permit ids (16 raw bytes) by arrival (server
/// ms). distlock's own: Redisson's `RPermitExpirableSemaphore` has no queue.
pub fn permit_queue(key: &str) -> String {
    prefixed(PERMIT_QUEUE_PREFIX, key)
}

/// Returns the waiter entries of a leased semaphore's hand-off queue.
///
/// `distlock_permit_waiters:{key}`, a hash permit id →
/// `<liveness deadline ms>;<lease ms>;<client id>;<id as 32 hex characters>`.
pub fn permit_waiters(key: &str) -> String {
    prefixed(PERMIT_WAITERS_PREFIX, key)
}

/// Returns the grant channel of one client's waiters of a leased semaphore.
///
/// `distlock_permit_grant:{key}:<client id>`. A release (or an acquire that finds permits for
/// queued waiters) that hands a permit to a waiter publishes
/// `h;<expiry ms since the epoch>;<lease ms>;<permit id>` there, in the key's hash slot.
pub fn permit_grant_channel(key: &str, client_id: &str) -> String {
    prefixed_with("distlock_permit_grant", key, client_id)
}

/// Returns the fencing counter a lock draws its tokens from.
///
/// One per cluster hash slot, `<key prefix>distlock:fencing-counter:{<tag>}` with `<tag>` the
/// [`slot_tag`] of the slot of `lock_key`, so that the counter hashes to the lock's slot and every
/// acquire script touches one slot only (ready for Redis Cluster). Tokens are strictly increasing
/// per lock name, and across the names of one slot. At most 16384 counters exist per key prefix;
/// none is created per lock name (Redisson's `RFencedLock` keeps a `redisson_lock_token` key per
/// lock name that never expires, so they accumulate).
///
/// When `key_prefix` carries a complete `{hash tag}` itself, every key of the client hashes
/// to that tag's slot, the counter included. A prefix with an unmatched or empty `{`, e.g.
/// `"a{b"`, leaves the counter (and Redisson's helper keys) in other slots than the lock.
pub fn fencing_counter(key_prefix: &str, lock_key: &str) -> String {
    // Built on every lock handle: pushed, not formatted.
    let tag = slot_tag(key_slot(lock_key));
    let mut s =
        String::with_capacity(key_prefix.len() + FENCING_COUNTER_PREFIX.len() + tag.len() + 3);
    s.push_str(key_prefix);
    s.push_str(FENCING_COUNTER_PREFIX);
    s.push_str(":{");
    s.push_str(tag);
    s.push('}');
    s
}

/// Returns the server-wide fencing counter of distlock before per-slot counters.
///
/// `<key prefix>distlock:fencing-counter`. No longer written; a client reads it once at connect,
/// and a slot counter that does not exist yet starts above it, so tokens keep rising across the
/// upgrade.
pub fn legacy_fencing_counter(key_prefix: &str) -> String {
    format!("{key_prefix}{}", FENCING_COUNTER_PREFIX)
}

/// Checks the name of a primitive with helper keys (every one but the job lock): as
/// [`check_name_len`], and braces only as a Redis Cluster hash tag. A name with a `{` must
/// have a non-empty hash tag (`{user42}:orders`), and one with a `}` but no `{` is refused:
/// the helper keys are `<prefix>:<name>` or `<prefix>:{<name>}` (Redisson's `prefixName`),
/// which land in the name's slot only then — `a{b`, `{}x` or `x}{y` would put them in other
/// slots, and every script would fail with `CROSSSLOT` on a Cluster. Checked on every
/// topology, so that moving to a Cluster breaks nothing.
///
/// # Errors
/// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an empty or longer name,
/// or braces that do not make a hash tag.
pub(crate) fn check_name(name: &str) -> Result<()> {
    check_name_len(name)?;
    let tagged = hash_tag(name.as_bytes()).len() < name.len();
    if (name.contains('{') && !tagged) || (name.contains('}') && !name.contains('{')) {
        return Err(Error::invalid(format!(
            "name {name:?} has braces that do not make a Redis Cluster hash tag: a '{{' must \
             open a non-empty tag closed by a later '}}' (as \"{{user42}}:orders\"), since the \
             helper keys of a primitive must hash to its slot"
        )));
    }
    Ok(())
}

/// Checks a name's length: non-empty, at most [`MAX_NAME_LEN`] bytes (64 KiB).
///
/// # Errors
/// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an empty or longer name.
pub(crate) fn check_name_len(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("lock name is empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::invalid(format!(
            "lock name is {} bytes; the limit is {MAX_NAME_LEN}",
            name.len()
        )));
    }
    Ok(())
}

/// A lease, extension or TTL as whole milliseconds: at least 1 ms, at most [`MAX_DURATION`]
/// (365 days). `what` names the value in the error message.
///
/// # Errors
/// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for a duration that is zero,
/// shorter than 1 ms or longer than 365 days.
pub(crate) fn lease_ms(what: &str, d: Duration) -> Result<u64> {
    if d.is_zero() {
        return Err(Error::invalid(format!("{what} is zero")));
    }
    if d > MAX_DURATION {
        return Err(Error::invalid(format!(
            "{what} of {d:?} exceeds the limit of {MAX_DURATION:?}"
        )));
    }
    let ms = d.as_millis() as u64;
    if ms == 0 {
        return Err(Error::invalid(format!(
            "{what} of {d:?} is shorter than 1 ms (Redis key TTLs are whole milliseconds)"
        )));
    }
    Ok(ms)
}

/// Checks a wait: zero means one attempt; at most [`MAX_DURATION`] (365 days).
///
/// # Errors
/// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for a wait over 365 days.
pub(crate) fn check_wait(d: Duration) -> Result<()> {
    if d > MAX_DURATION {
        return Err(Error::invalid(format!(
            "wait of {d:?} exceeds the limit of {MAX_DURATION:?}"
        )));
    }
    Ok(())
}

/// Clock drift allowance subtracted from local validity: 1 % of the lease + 2 ms, as the
/// redis.io Redlock description and go-redsync (`driftFactor` 0.01).
pub(crate) fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

/// The first `n` characters of `s` (ASCII here: app and host names are sanitized).
pub(crate) fn first_chars(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

mod record;
mod slots;
pub use record::LEGACY_REQUEST_RECORD_PREFIXES;
pub(crate) use record::{Record, RecordKind};
#[cfg(test)]
mod tests;
