//! [`Lock`]: a reentrant lock with a lease, Redisson's RLock semantics and wire format.
//!
//! # Data layout (shared with Redisson)
//! The lock is a hash at the key `<key prefix><name>`: field `<client-uuid>:<owner-id>` →
//! hold count, key TTL = lease. The final release deletes the key and publishes `0` on
//! `redisson_lock__channel:{<key>}`. A Java service using Redisson's `RLock` on the same
//! name excludes distlock owners and is excluded by them, and each side's release wakes
//! the other side's waiters. distlock adds one field, `distlock:fencing-token`, holding the
//! current holder's [`FencingToken`]; Redisson's scripts never read it.
//!
//! # Ownership
//! Redisson's owner is a thread; async tasks move between threads, so distlock's owner is an
//! explicit value, [`Owner`]. [`Lock::acquire`] mints a fresh owner per call: two calls never
//! share a hold by accident. Re-entry is explicit: [`LockGuard::reenter`] or
//! [`Lock::acquire_as`] with the same owner increments the hold count and resets the lease;
//! each guard's release takes back one hold.
//!
//! # Waiting
//! As Redisson's `tryLock(wait, lease)` (seed 000): one attempt; on failure subscribe to the
//! wake channel; attempt again; then wait for a wake message or the holder's PTTL, whichever
//! comes first, and repeat until the wait elapses. A lost wake message costs at most one
//! PTTL. All local waiters for one name share one subscription.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::Client;
use crate::conn::pubsub::Wake;
use crate::error::{Error, ErrorKind, NotHeldReason, Result};
use crate::holds::{HoldId, ReleaseRequest};
use crate::keys::{self, TOKEN_FIELD, UNLOCK_MESSAGE};
use crate::scripts;
use crate::wait::Step;
use crate::watchdog::Registration;

/// Longest owner string accepted, in bytes.
const MAX_OWNER_LEN: usize = 512;

/// Re-check interval while the holder's key has no TTL (a foreign lock set without expiry).
const NO_TTL_RECHECK: Duration = Duration::from_secs(1);

/// Who holds a lock: the hash field `<client-uuid>:<owner-id>`.
///
/// Owners are values: clone one, send it to another task, or serialize it with
/// [`Owner::as_str`] and [`Owner::parse`] to hand a held lock to another process
/// ([`Lock::adopt`]).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Owner(Arc<str>);

impl Owner {
    pub(crate) fn from_parts(client_id: &str, n: u64) -> Owner {
        Owner(format!("{client_id}:{n}").into())
    }

    /// An owner from its string form `<client-id>:<owner-id>` (e.g. a Redisson
    /// `<uuid>:<threadId>` field).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] when either part is empty, the string has no `:`, is longer
    /// than 512 bytes, or is the reserved fencing-token field name.
    pub fn parse(s: &str) -> Result<Owner> {
        let valid = s.len() <= MAX_OWNER_LEN
            && s != TOKEN_FIELD
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

/// A fencing token: a number issued with every grant, strictly increasing per lock name
/// across releases, expiries, a server restart from an older snapshot and a failover to a
/// replica that missed the last writes (as long as server clocks agree within the failover
/// time). Pass it with every write to the protected resource and have the resource refuse a
/// token lower than the highest it has seen: a holder that was paused past its lease is
/// then refused.
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
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct FencingToken(pub u64);

impl FencingToken {
    /// The token's value.
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for FencingToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
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
    /// The last token issued by the fencing counter this lock draws from
    /// ([`Lock::fencing_counter_key`]: one per cluster hash slot, shared by the names in that
    /// slot, so an upper bound of this lock's last token). Before the slot's first grant: the
    /// floor its counter will start above (the legacy server-wide counter as read at
    /// connect, 0 when there was none).
    pub fencing_counter: u64,
    /// Connections subscribed to the wake channel (`PUBSUB NUMSUB`): one per waiting client
    /// (per waiter for a fair lock, whose waiters have channels of their own).
    pub subscribers: u64,
    /// Read-write locks: `"read"` or `"write"` while held.
    pub mode: Option<String>,
    /// Fair locks: the waiting owners, first in line first.
    pub queue: Vec<String>,
    /// Read-write locks: writers waiting (new readers hold back while there are any).
    pub waiting_writers: u64,
}

/// A reentrant distributed lock named by a string; see the [module docs](self).
///
/// Made by [`Client::lock`]. Cheap to clone; clones are the same lock with the same lease
/// setting. Holding is represented by [`LockGuard`]s, never by the `Lock` value.
///
/// # Examples
/// ```no_run
/// # async fn f() -> distlock::Result<()> {
/// let client = distlock::Client::connect("redis://127.0.0.1/").await?;
/// let lock = client.lock("order:user:42");
/// if let Some(guard) = lock.try_acquire().await? {
///     // one order per user: the critical section
///     println!("token {}", guard.fencing_token());
///     guard.release().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Lock {
    inner: Arc<LockInner>,
}

struct LockInner {
    client: Client,
    name: String,
    key: String,
    channel: String,
    lease: Option<Duration>,
    kind: Kind,
}

/// Which of the lock family a [`Lock`] value is: they share guards, leases, the watchdog and
/// the wait loop, and differ in scripts, hash field and wake channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Redisson `RLock`.
    Plain,
    /// Redisson `RFairLock`; waiters in the queue stay alive by re-attempting within
    /// `liveness`.
    Fair { liveness: Duration },
    /// Read side of Redisson `RReadWriteLock`.
    Read,
    /// Write side of Redisson `RReadWriteLock`; a waiting writer holds readers back while it
    /// re-attempts within `liveness`.
    Write { liveness: Duration },
}

/// What the watchdog runs to renew one hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// `lock_renew.lua` on the hash field.
    Hash,
    /// `rw_read_renew.lua`, with the owner's read-hold key prefix.
    Read { prefix: String },
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("key", &self.inner.key)
            .field("lease", &self.inner.lease)
            .finish()
    }
}

pub(crate) enum Attempt {
    Granted { hold_count: u32, token: u64 },
    Held { pttl_ms: i64 },
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    New,
    As,
    Nested,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::New => "new",
            Mode::As => "as",
            Mode::Nested => "nested",
        }
    }
}

/// The invocation of `lock_acquire.lua` (built on every plain acquire).
#[allow(clippy::too_many_arguments)]
pub(crate) fn plain_acquire_invocation(
    key: &str,
    counter: &str,
    latch: &str,
    lease_ms: u64,
    owner: &str,
    mode: Mode,
    latch_ms: u64,
    floor: &str,
) -> redis::ScriptInvocation<'static> {
    let mut inv = scripts::LOCK_ACQUIRE.prepare_invoke();
    inv.key(key)
        .key(counter)
        .key(latch)
        .arg(lease_ms)
        .arg(owner)
        .arg(mode.as_str())
        .arg(latch_ms)
        .arg(TOKEN_FIELD)
        .arg(floor);
    inv
}

/// The request of `lock_release.lua` (built on every plain release).
fn plain_release_request(
    context: String,
    key: &str,
    channel: &str,
    latch: &str,
    lease_ms: u64,
    owner: &str,
    latch_ms: u64,
) -> ReleaseRequest {
    ReleaseRequest::new(context, &scripts::LOCK_RELEASE)
        .key(key)
        .key(channel)
        .key(latch)
        .arg(UNLOCK_MESSAGE)
        .arg(lease_ms)
        .arg(owner)
        .arg(latch_ms)
}

/// The invocation of `lock_release.lua` (for the criterion benches).
pub(crate) fn plain_release_invocation(
    key: &str,
    channel: &str,
    latch: &str,
    lease_ms: u64,
    owner: &str,
    latch_ms: u64,
) -> redis::ScriptInvocation<'static> {
    plain_release_request(
        String::new(),
        key,
        channel,
        latch,
        lease_ms,
        owner,
        latch_ms,
    )
    .invocation()
}

/// An acquire script's reply: a grant, a refusal with the holder's PTTL, or (as `Err`) a
/// code for the caller to interpret (not held, would deadlock, malformed). The scripts send
/// the token as a decimal string (at most 2^63 - 1), which redis-rs parses into `i64`
/// exactly; a token that is not one fails the parse instead of being rounded.
pub(crate) fn parse_attempt(r: &[i64]) -> std::result::Result<Attempt, &[i64]> {
    match r {
        [1, count, token] if *count > 0 && *token >= 0 => Ok(Attempt::Granted {
            hold_count: *count as u32,
            token: *token as u64,
        }),
        [0, pttl] => Ok(Attempt::Held { pttl_ms: *pttl }),
        other => Err(other),
    }
}

fn not_held_reason(code: i64) -> Option<NotHeldReason> {
    match code {
        -1 => Some(NotHeldReason::Gone),
        -2 => Some(NotHeldReason::HeldByOther),
        _ => None,
    }
}

impl Lock {
    pub(crate) fn new(client: Client, name: String) -> Lock {
        Lock::with_kind(client, name, Kind::Plain)
    }

    pub(crate) fn with_kind(client: Client, name: String, kind: Kind) -> Lock {
        let key = format!("{}{}", client.inner.key_prefix, name);
        let channel = match kind {
            Kind::Plain | Kind::Fair { .. } => keys::lock_channel(&key),
            Kind::Read | Kind::Write { .. } => keys::prefixed("redisson_rwlock", &key),
        };
        Lock {
            inner: Arc::new(LockInner {
                client,
                name,
                key,
                channel,
                lease: None,
                kind,
            }),
        }
    }

    /// The same lock with another kind (the other side of a read-write lock, a fair lock's
    /// liveness), keeping the lease setting.
    pub(crate) fn rekind(&self, kind: Kind) -> Lock {
        let mut l = Lock::with_kind(self.inner.client.clone(), self.inner.name.clone(), kind);
        Arc::get_mut(&mut l.inner).expect("fresh").lease = self.inner.lease;
        l
    }

    /// The hash field `owner` holds this lock under (`<owner>:write` for a write lock).
    fn field(&self, owner: &Owner) -> String {
        match self.inner.kind {
            Kind::Write { .. } => format!("{}:write", owner.as_str()),
            _ => owner.as_str().to_string(),
        }
    }

    /// The read-hold key prefix of `owner`: `{<key>}:<owner>:rwlock_timeout` (Redisson's
    /// `suffixName(name, lockName) + ":rwlock_timeout"`).
    fn read_prefix(&self, owner: &Owner) -> String {
        format!(
            "{}:rwlock_timeout",
            keys::suffixed(&self.inner.key, owner.as_str())
        )
    }

    /// Where a waiter of `owner` is woken, and how.
    fn wake_channel(&self, owner: &Owner) -> (String, Wake) {
        match self.inner.kind {
            Kind::Plain => (self.inner.channel.clone(), Wake::OneOnZero),
            Kind::Fair { .. } => (
                format!("{}:{}", self.inner.channel, owner.as_str()),
                Wake::OneOnZero,
            ),
            Kind::Read | Kind::Write { .. } => (self.inner.channel.clone(), Wake::All),
        }
    }

    /// Longest wait between two attempts of a waiter (liveness heartbeats).
    fn recheck(&self) -> Duration {
        match self.inner.kind {
            Kind::Plain => keys::MAX_DURATION,
            Kind::Fair { liveness } | Kind::Write { liveness } => liveness / 3,
            Kind::Read => NO_TTL_RECHECK,
        }
    }

    /// The same lock with an explicit lease: guards it grants expire after `lease` unless
    /// extended, and no watchdog renews them (Redisson's `lock(leaseTime, unit)`). The lease
    /// is checked (≥ 1 ms, ≤ 365 days) when the lock is acquired.
    pub fn lease(&self, lease: Duration) -> Lock {
        Lock {
            inner: Arc::new(LockInner {
                client: self.inner.client.clone(),
                name: self.inner.name.clone(),
                key: self.inner.key.clone(),
                channel: self.inner.channel.clone(),
                lease: Some(lease),
                kind: self.inner.kind,
            }),
        }
    }

    /// The name given to [`Client::lock`].
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The Redis key: key prefix + name.
    pub fn key(&self) -> &str {
        &self.inner.key
    }

    /// The wake channel: `redisson_lock__channel:{key}`.
    pub fn channel(&self) -> &str {
        &self.inner.channel
    }

    /// The key of the fencing counter this lock draws its tokens from: the counter of the
    /// lock key's cluster hash slot, `<key prefix>distlock:fencing-counter:{<slot tag>}`
    /// ([`keys::fencing_counter`]), shared with the other names in that slot.
    pub fn fencing_counter_key(&self) -> String {
        keys::fencing_counter(&self.inner.client.inner.key_prefix, &self.inner.key)
    }

    /// The client this lock belongs to.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The explicit lease, if one was set with [`Lock::lease`].
    pub fn lease_setting(&self) -> Option<Duration> {
        self.inner.lease
    }

    /// Acquire the lock for a fresh owner, waiting at most the client's default wait
    /// ([`ClientBuilder::default_wait`](crate::ClientBuilder::default_wait), 60 s unless set).
    ///
    /// Without an explicit [lease](Lock::lease) the lock gets the watchdog lease (30 s) and
    /// the watchdog renews it every third of it while the guard lives.
    ///
    /// # Errors
    /// - [`ErrorKind::NotAcquired`] when the wait elapsed;
    /// - [`ErrorKind::InvalidInput`] for an empty or oversized name or a bad lease;
    /// - [`ErrorKind::WrongType`] when the key holds another Redis type;
    /// - [`ErrorKind::Connection`], [`ErrorKind::Backend`] for server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future leaves no hold (a grant that raced the drop is
    /// released in the background), no subscription and no key behind.
    pub async fn acquire(&self) -> Result<LockGuard> {
        let wait = self.inner.client.inner.default_wait;
        self.try_acquire_for(wait)
            .await?
            .ok_or_else(|| self.not_acquired(wait))
    }

    /// One attempt for a fresh owner: `Ok(None)` when another owner holds the lock.
    ///
    /// # Errors
    /// As [`Lock::acquire`], except that contention is `Ok(None)`, not an error.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Lock::acquire`].
    pub async fn try_acquire(&self) -> Result<Option<LockGuard>> {
        self.acquire_inner(None, Mode::New, Some(Duration::ZERO))
            .await
    }

    /// Acquire for a fresh owner, waiting at most `wait` (zero: one attempt). `Ok(None)` when
    /// the wait elapsed.
    ///
    /// # Errors
    /// As [`Lock::acquire`], except that an elapsed wait is `Ok(None)`.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Lock::acquire`].
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        self.acquire_inner(None, Mode::New, Some(wait)).await
    }

    /// Acquire as `owner`, waiting at most the client's default wait: grant if the lock is
    /// free, add a hold if `owner` holds it already (re-entry: hold count + 1, lease reset).
    /// This is seed 003's `method1 → method2`: method2 takes the owner (or the guard, see
    /// [`LockGuard::reenter`]) from method1.
    ///
    /// # Errors
    /// As [`Lock::acquire`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Lock::acquire`]; a resent request never counts two holds.
    pub async fn acquire_as(&self, owner: &Owner) -> Result<LockGuard> {
        let wait = self.inner.client.inner.default_wait;
        self.try_acquire_as(owner, wait)
            .await?
            .ok_or_else(|| self.not_acquired(wait))
    }

    /// Like [`Lock::acquire_as`] but waits at most `wait` and returns `Ok(None)` when it
    /// elapsed.
    ///
    /// # Errors
    /// As [`Lock::try_acquire_for`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Lock::acquire`].
    pub async fn try_acquire_as(&self, owner: &Owner, wait: Duration) -> Result<Option<LockGuard>> {
        self.acquire_inner(Some(owner.clone()), Mode::As, Some(wait))
            .await
    }

    /// Take over a hold that `owner` has now (e.g. an owner handed over from another
    /// process): the returned guard stands for one of its holds, without adding one. The
    /// guard's lease is this lock's lease setting (the watchdog renews it when none is set).
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when `owner` does not hold the lock; otherwise as
    /// [`Lock::acquire`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn adopt(&self, owner: Owner) -> Result<LockGuard> {
        self.check()?;
        let started = Instant::now();
        let (count, token, pttl) = self.inspect(&owner).await?;
        if count == 0 {
            return Err(Error::not_held(&self.inner.name, NotHeldReason::Gone));
        }
        let lease = self.effective_lease()?;
        let pttl = Duration::from_millis(pttl.max(0) as u64);
        let valid_until = started + pttl.saturating_sub(keys::drift(lease));
        Ok(self.guard(owner, count, token, lease, valid_until))
    }

    /// Whether anyone holds the lock (the key exists), whoever it is.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a bad name; server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn is_locked(&self) -> Result<bool> {
        self.check()?;
        self.backend()
            .query(
                &self.context("is_locked"),
                redis::cmd("EXISTS").arg(&self.inner.key),
            )
            .await
    }

    /// Time left on the lock's lease, whoever holds it: `None` when it is free or has no TTL.
    ///
    /// # Errors
    /// As [`Lock::is_locked`].
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn remaining(&self) -> Result<Option<Duration>> {
        self.check()?;
        let pttl: i64 = self
            .backend()
            .query(
                &self.context("remaining"),
                redis::cmd("PTTL").arg(&self.inner.key),
            )
            .await?;
        Ok((pttl >= 0).then(|| Duration::from_millis(pttl as u64)))
    }

    /// Delete the lock whoever holds it and wake its waiters (Redisson's `forceUnlock`).
    /// Returns whether it was held. The holder's guard then reports [`ErrorKind::NotHeld`]
    /// and its lost signal fires at its next renewal.
    ///
    /// # Errors
    /// As [`Lock::is_locked`].
    ///
    /// # Cancel safety
    /// Cancel safe: one script, idempotent.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.check()?;
        if let Kind::Fair { .. } = self.inner.kind {
            return Ok(self.leave_queue("", true).await? == 1);
        }
        let message = match self.inner.kind {
            Kind::Read | Kind::Write { .. } => "1",
            _ => UNLOCK_MESSAGE,
        };
        let mut inv = scripts::LOCK_FORCE_UNLOCK.prepare_invoke();
        inv.key(&self.inner.key)
            .key(&self.inner.channel)
            .arg(message);
        let deleted: i64 = self
            .backend()
            .eval(&self.context("force_unlock"), &inv)
            .await?;
        Ok(deleted == 1)
    }

    /// A snapshot of the lock as the server sees it: holders with hold counts, TTL,
    /// fencing token, and the number of connections subscribed to its wake channel (each
    /// distlock client subscribes once however many local waiters it has). Two round trips,
    /// not atomic with respect to each other.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key holds something other than a lock hash;
    /// [`ErrorKind::UnexpectedReply`] when the fencing counter is not a decimal integer (no
    /// grant can draw a token then either); as [`Lock::is_locked`] otherwise.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn status(&self) -> Result<LockStatus> {
        self.check()?;
        let client = &self.inner.client.inner;
        let counter_key = self.fencing_counter_key();
        let mut pipe = redis::pipe();
        pipe.cmd("TYPE")
            .arg(&self.inner.key)
            .cmd("PTTL")
            .arg(&self.inner.key)
            .cmd("GET")
            .arg(&counter_key)
            .cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(&self.inner.channel);
        let (kind, pttl, counter, numsub): (String, i64, Option<String>, (String, u64)) = self
            .backend()
            .pipeline(&self.context("status"), &pipe)
            .await?;
        // Before the slot's first grant, its counter will start above the floor (the legacy
        // server-wide counter read at connect): report that.
        let (counter, counter_key) = match counter {
            None => (
                client.fencing_floor.clone(),
                keys::legacy_fencing_counter(&client.key_prefix),
            ),
            Some(c) => (c, counter_key),
        };
        let counter = counter.parse::<u64>().map_err(|_| {
            Error::new(
                ErrorKind::UnexpectedReply,
                format!(
                    "{}: the fencing counter {counter_key} holds {counter:?}, not a decimal \
                     integer below 2^64 (no grant can draw a token until it is fixed or deleted)",
                    self.context("status"),
                ),
            )
        })?;
        let mut status = LockStatus {
            name: self.inner.name.clone(),
            key: self.inner.key.clone(),
            holders: Vec::new(),
            ttl: (pttl >= 0).then(|| Duration::from_millis(pttl as u64)),
            fencing_token: None,
            fencing_counter: counter,
            subscribers: numsub.1,
            mode: None,
            queue: Vec::new(),
            waiting_writers: 0,
        };
        match kind.as_str() {
            "none" => {}
            "hash" => {
                let fields: Vec<(String, String)> = self
                    .backend()
                    .query(
                        &self.context("status"),
                        redis::cmd("HGETALL").arg(&self.inner.key),
                    )
                    .await?;
                for (field, value) in fields {
                    if field == TOKEN_FIELD {
                        status.fencing_token = value.parse().ok().map(FencingToken);
                    } else if field == "mode" {
                        status.mode = Some(value);
                    } else if let Ok(holds) = value.parse() {
                        status.holders.push((field, holds));
                    }
                }
            }
            other => {
                return Err(Error::new(
                    ErrorKind::WrongType,
                    format!(
                        "{}: the key holds a {other}, not a lock hash",
                        self.context("status")
                    ),
                ))
            }
        }
        match self.inner.kind {
            Kind::Fair { .. } => {
                status.queue = self
                    .backend()
                    .query(
                        &self.context("status"),
                        redis::cmd("LRANGE")
                            .arg(keys::prefixed("redisson_lock_queue", &self.inner.key))
                            .arg(0)
                            .arg(-1),
                    )
                    .await?;
            }
            Kind::Read | Kind::Write { .. } => {
                status.waiting_writers = self
                    .backend()
                    .query(
                        &self.context("status"),
                        redis::cmd("ZCARD").arg(self.writers_key()),
                    )
                    .await?;
            }
            Kind::Plain => {}
        }
        Ok(status)
    }

    // ---- internals ----

    fn writers_key(&self) -> String {
        keys::prefixed("distlock_rwlock_writers", &self.inner.key)
    }

    /// Leave a fair queue or the waiting writers (after a timeout or cancel); with `force`,
    /// delete a fair lock first. Returns the script's answer.
    async fn leave_queue(&self, owner: &str, force: bool) -> Result<i64> {
        match self.inner.kind {
            Kind::Fair { .. } => {
                let mut inv = scripts::FAIR_LEAVE.prepare_invoke();
                inv.key(&self.inner.key)
                    .key(keys::prefixed("redisson_lock_queue", &self.inner.key))
                    .key(keys::prefixed("redisson_lock_timeout", &self.inner.key))
                    .arg(owner)
                    .arg(if force { "1" } else { "0" })
                    .arg(&self.inner.channel);
                self.backend()
                    .eval(&self.context("leave queue"), &inv)
                    .await
            }
            Kind::Write { .. } => {
                let mut inv = scripts::RW_WRITER_LEAVE.prepare_invoke();
                inv.key(self.writers_key())
                    .key(&self.inner.channel)
                    .arg(owner);
                self.backend()
                    .eval(&self.context("leave queue"), &inv)
                    .await
            }
            _ => Ok(0),
        }
    }

    fn backend(&self) -> &crate::conn::Backend {
        &self.inner.client.inner.backend
    }

    /// `"<op> <name>"` for messages; formatted only when an error needs it.
    fn context(&self, op: &'static str) -> Ctx<'_> {
        Ctx {
            op,
            name: &self.inner.name,
        }
    }

    pub(crate) fn check(&self) -> Result<()> {
        keys::check_name(&self.inner.name)
    }

    fn effective_lease(&self) -> Result<Duration> {
        match self.inner.lease {
            Some(l) => {
                keys::lease_ms("lease", l)?;
                Ok(l)
            }
            None => Ok(self.inner.client.inner.watchdog_lease),
        }
    }

    fn not_acquired(&self, wait: Duration) -> Error {
        Error::new(
            ErrorKind::NotAcquired,
            format!("lock {:?} not acquired within {wait:?}", self.inner.name),
        )
    }

    async fn inspect(&self, owner: &Owner) -> Result<(u32, u64, i64)> {
        let mut inv = scripts::LOCK_INSPECT.prepare_invoke();
        inv.key(&self.inner.key)
            .arg(self.field(owner))
            .arg(TOKEN_FIELD);
        let r: Vec<i64> = self.backend().eval(&self.context("inspect"), &inv).await?;
        match r.as_slice() {
            [-2] => Ok((0, 0, -2)),
            [count, token, pttl] if *count >= 0 => Ok((*count as u32, *token as u64, *pttl)),
            _ => Err(Error::unexpected(format!(
                "{}: reply {r:?}",
                self.context("inspect")
            ))),
        }
    }

    pub(crate) async fn attempt(
        &self,
        owner: &Owner,
        mode: Mode,
        lease_ms: u64,
        request_id: &str,
        enqueue: bool,
    ) -> Result<Attempt> {
        let client = &self.inner.client.inner;
        let key = &self.inner.key;
        let counter = self.fencing_counter_key();
        let floor = client.fencing_floor.as_str();
        let context = self.context("acquire");
        let enqueue = if enqueue { "1" } else { "0" };
        // Acquiring as a given owner ('as') exists for plain locks only; the others take
        // fresh owners or nest under a guard.
        let short_mode = if mode == Mode::Nested {
            "nested"
        } else {
            "new"
        };
        let r: Vec<i64> = match self.inner.kind {
            Kind::Plain => {
                // A fresh owner's request needs no latch: pass the lock key in its place (it
                // is never read then, and shares the lock's cluster slot).
                let latch = match mode {
                    Mode::New => None,
                    _ => Some(keys::acquire_latch(key, request_id)),
                };
                let latch_ms = self.inner.client.latch_ttl_ms();
                let inv = plain_acquire_invocation(
                    key,
                    &counter,
                    latch.as_deref().unwrap_or(key),
                    lease_ms,
                    owner.as_str(),
                    mode,
                    latch_ms,
                    floor,
                );
                match mode {
                    // Recognises its own resend by the owner's field, however late.
                    Mode::New => self.backend().eval(&context, &inv).await?,
                    // The latch answers a resend while it lives: resend until answered
                    // within its window; after that the caller undoes it (`undo_reentry`).
                    _ => self.inner.client.eval_latched(&context, &inv).await?.0,
                }
            }
            Kind::Fair { liveness } => {
                let mut inv = scripts::FAIR_ACQUIRE.prepare_invoke();
                inv.key(key)
                    .key(keys::prefixed("redisson_lock_queue", key))
                    .key(keys::prefixed("redisson_lock_timeout", key))
                    .key(&counter)
                    .arg(lease_ms)
                    .arg(owner.as_str())
                    .arg(liveness.as_millis() as u64)
                    .arg(short_mode)
                    .arg(enqueue)
                    .arg(TOKEN_FIELD)
                    .arg(&self.inner.channel)
                    .arg(floor);
                self.eval_acquire(mode, &context, &inv).await?
            }
            Kind::Read => {
                let mut inv = scripts::RW_READ_ACQUIRE.prepare_invoke();
                inv.key(key)
                    .key(self.read_prefix(owner))
                    .key(self.writers_key())
                    .key(&counter)
                    .arg(lease_ms)
                    .arg(owner.as_str())
                    .arg(format!("{}:write", owner.as_str()))
                    .arg(short_mode)
                    .arg(floor);
                self.eval_acquire(mode, &context, &inv).await?
            }
            Kind::Write { liveness } => {
                let mut inv = scripts::RW_WRITE_ACQUIRE.prepare_invoke();
                inv.key(key)
                    .key(self.writers_key())
                    .key(&counter)
                    .arg(lease_ms)
                    .arg(self.field(owner))
                    .arg(owner.as_str())
                    .arg(short_mode)
                    .arg(liveness.as_millis() as u64)
                    .arg(enqueue)
                    .arg(floor);
                self.eval_acquire(mode, &context, &inv).await?
            }
        };
        match parse_attempt(&r) {
            Ok(a) => Ok(a),
            Err([-4]) => Err(Error::new(
                ErrorKind::Connection,
                format!("{context}: the request was cancelled after its outcome was unknown"),
            )),
            Err([-3]) => Err(Error::new(
                ErrorKind::WouldDeadlock,
                format!(
                    "lock {:?}: this owner holds a read lock; a read -> write upgrade would \
                     deadlock (release the read lock first)",
                    self.inner.name
                ),
            )),
            Err([code]) if not_held_reason(*code).is_some() => Err(Error::not_held(
                &self.inner.name,
                not_held_reason(*code).expect("checked"),
            )),
            Err(_) => Err(Error::unexpected(format!("{context}: reply {r:?}"))),
        }
    }

    /// Send a fair or read-write acquire: fresh-owner requests recognise a resend of
    /// themselves and may be resent; re-entries carry no latch in these scripts, so they are
    /// sent once (after a connection failure the extra hold, if any, ends with the lease).
    async fn eval_acquire(
        &self,
        mode: Mode,
        context: &Ctx<'_>,
        inv: &redis::ScriptInvocation<'_>,
    ) -> Result<Vec<i64>> {
        if mode == Mode::Nested {
            self.backend().eval_once(context, inv).await
        } else {
            self.backend().eval(context, inv).await
        }
    }

    /// The acquire loop. `wait` None is never used for waiting forever: every public caller
    /// passes a bound.
    async fn acquire_inner(
        &self,
        owner: Option<Owner>,
        mode: Mode,
        wait: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        self.check()?;
        self.inner.client.check_open()?;
        if mode == Mode::As && self.inner.kind != Kind::Plain {
            return Err(Error::invalid(
                "acquiring as a given owner is for plain locks; re-enter a fair or read-write \
                 lock through its guard",
            ));
        }
        let lease = self.effective_lease()?;
        let lease_ms = lease.as_millis() as u64;
        let wait = wait.unwrap_or(self.inner.client.inner.default_wait);
        keys::check_wait(wait)?;
        let deadline = Instant::now() + wait;
        let owner = owner.unwrap_or_else(|| self.inner.client.new_owner());
        // Only re-entrant requests need a request id (for their acquire latch).
        let request_id = match mode {
            Mode::New => String::new(),
            _ => self.inner.client.request_id(),
        };

        // A grant that lands after this future was dropped must be given back: the pending
        // guard releases it when dropped before `disarm`.
        let mut pending = PendingGrant::new(self, &owner, mode, &request_id);

        let (channel, wake) = self.wake_channel(&owner);
        let enqueue = !wait.is_zero();
        let granted = crate::wait::wait_loop(
            &self.inner.client,
            &channel,
            wake,
            deadline,
            self.recheck(),
            || async {
                let started = Instant::now();
                Ok(
                    match self
                        .attempt(&owner, mode, lease_ms, &request_id, enqueue)
                        .await?
                    {
                        Attempt::Granted { hold_count, token } => {
                            Step::Done((hold_count, token, started))
                        }
                        // Wait at most the holder's PTTL; a key without TTL (-1) is re-checked
                        // every NO_TTL_RECHECK.
                        Attempt::Held { pttl_ms } if pttl_ms >= 0 => {
                            Step::Wait(Some(Duration::from_millis(pttl_ms as u64)))
                        }
                        Attempt::Held { pttl_ms: -1 } => Step::Wait(Some(NO_TTL_RECHECK)),
                        // Free, but another waiter is first in line: wait for a wake-up.
                        Attempt::Held { .. } => Step::Wait(None),
                    },
                )
            },
        )
        .await;
        pending.disarm_unless_error(&granted);
        if enqueue && matches!(granted, Ok(None)) {
            // Timed out: leave the queue at once rather than at the end of our liveness.
            if let Err(e) = self.leave_queue(owner.as_str(), false).await {
                tracing::debug!(
                    error = format_args!("{e:#}"),
                    "leaving the wait queue failed; liveness ends it"
                );
            }
        }
        Ok(granted?.map(|(hold_count, token, started)| {
            self.granted(owner, hold_count, token, lease, started)
        }))
    }

    fn granted(
        &self,
        owner: Owner,
        hold_count: u32,
        token: u64,
        lease: Duration,
        started: Instant,
    ) -> LockGuard {
        let valid_until = started + lease.saturating_sub(keys::drift(lease));
        self.guard(owner, hold_count, token, lease, valid_until)
    }

    fn guard(
        &self,
        owner: Owner,
        hold_count: u32,
        token: u64,
        lease: Duration,
        valid_until: Instant,
    ) -> LockGuard {
        let renewal = self.inner.lease.is_none().then(|| match self.inner.kind {
            Kind::Read => Renewal::Read {
                prefix: self.read_prefix(&owner),
            },
            _ => Renewal::Hash,
        });
        let registration = self.inner.client.inner.leases.register(
            &self.inner.key,
            &self.field(&owner),
            valid_until,
            renewal,
        );
        let hold = {
            let (lock, owner) = (self.clone(), owner.clone());
            self.inner
                .client
                .inner
                .holds
                .register(Arc::new(move || lock.release_request(&owner, lease)))
        };
        LockGuard {
            state: Some(GuardState {
                lock: self.clone(),
                owner,
                token: FencingToken(token),
                hold_count,
                lease,
                registration,
                hold,
            }),
        }
    }

    /// One more hold for `owner`, which must hold this lock (or, for a read lock, the write
    /// side of it): re-entry and downgrade.
    pub(crate) async fn nest_as(&self, owner: &Owner, lease: Duration) -> Result<LockGuard> {
        let request_id = self.inner.client.request_id();
        let started = Instant::now();
        let lease_ms = lease.as_millis() as u64;
        let attempt = self
            .attempt(owner, Mode::Nested, lease_ms, &request_id, false)
            .await;
        if let Err(e) = &attempt {
            if e.is_outcome_unknown() && self.inner.kind == Kind::Plain {
                self.undo_reentry(owner.clone(), request_id, lease);
            }
        }
        match attempt? {
            Attempt::Granted { hold_count, token } => {
                Ok(self.granted(owner.clone(), hold_count, token, lease, started))
            }
            Attempt::Held { .. } => Err(Error::not_held(
                &self.inner.name,
                NotHeldReason::HeldByOther,
            )),
        }
    }

    /// Resolve a re-entrant acquire (`as`, `nested`) whose outcome its caller never learnt:
    /// in the background, tombstone its acquire latch (so a send still queued on the server
    /// does nothing when it runs) and, if it had run, give its hold back. Resent until the
    /// server answers, at most ten resend windows.
    fn undo_reentry(&self, owner: Owner, request_id: String, lease: Duration) {
        let lock = self.clone();
        let client = self.inner.client.clone();
        let mut inv = scripts::LATCH_CANCEL.prepare_invoke();
        inv.key(keys::acquire_latch(&self.inner.key, &request_id))
            .arg(client.latch_ttl_ms());
        client.inner.backend.resend_in_background(
            &client.inner.runtime,
            self.context("undo re-entry").to_string(),
            inv,
            client.latch_ttl() * 10,
            move |r: Result<String>| match r {
                Ok(prior) if prior.is_empty() => {
                    tracing::info!(lock = %lock.inner.name, "re-entry of unknown outcome cancelled before it ran");
                }
                Ok(_) => {
                    tracing::info!(lock = %lock.inner.name, "re-entry of unknown outcome had run; giving its hold back");
                    lock.inner.client.inner.runtime.clone().spawn(async move {
                        if let Err(e) = lock.release_hold(&owner, lease).await {
                            tracing::warn!(lock = %lock.inner.name, error = format_args!("{e:#}"), "giving back a re-entry of unknown outcome failed");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(lock = %lock.inner.name, error = format_args!("{e:#}"), "cancelling a re-entry of unknown outcome failed");
                }
            },
        );
    }

    /// The script call that releases one hold of `owner` (with a fresh request id for its
    /// unlock latch): sent by [`Lock::release_hold`], by a dropped guard's background
    /// release, and at shutdown.
    pub(crate) fn release_request(&self, owner: &Owner, lease: Duration) -> ReleaseRequest {
        let key = &self.inner.key;
        let latch = keys::unlock_latch(key, &self.inner.client.request_id());
        let latch_ms = self.inner.client.latch_ttl_ms();
        let lease_ms = lease.as_millis() as u64;
        let context = self.context("release").to_string();
        match self.inner.kind {
            Kind::Plain => plain_release_request(
                context,
                key,
                &self.inner.channel,
                &latch,
                lease_ms,
                owner.as_str(),
                latch_ms,
            ),
            Kind::Fair { .. } => ReleaseRequest::new(context, &scripts::FAIR_RELEASE)
                .key(key)
                .key(keys::prefixed("redisson_lock_queue", key))
                .key(keys::prefixed("redisson_lock_timeout", key))
                .key(latch)
                .arg(UNLOCK_MESSAGE)
                .arg(lease_ms)
                .arg(owner.as_str())
                .arg(latch_ms)
                .arg(&self.inner.channel),
            Kind::Read => ReleaseRequest::new(context, &scripts::RW_READ_RELEASE)
                .key(key)
                .key(&self.inner.channel)
                .key(self.read_prefix(owner))
                .key(keys::hash_tagged(key))
                .key(latch)
                .arg(UNLOCK_MESSAGE)
                .arg(owner.as_str())
                .arg(latch_ms),
            Kind::Write { .. } => ReleaseRequest::new(context, &scripts::RW_WRITE_RELEASE)
                .key(key)
                .key(&self.inner.channel)
                .key(latch)
                .arg("1")
                .arg(lease_ms)
                .arg(self.field(owner))
                .arg(latch_ms),
        }
    }

    pub(crate) async fn release_hold(&self, owner: &Owner, lease: Duration) -> Result<()> {
        let request = self.release_request(owner, lease);
        let (r, resent): (i64, bool) = self
            .inner
            .client
            .eval_latched(&request.context, &request.invocation())
            .await?;
        // The plain lock's final release writes no latch: a resend that finds the lock gone
        // or re-taken means an earlier send released it.
        let r = if self.inner.kind == Kind::Plain && resent && (r == -1 || r == -2) {
            1
        } else {
            r
        };
        match r {
            0 | 1 => Ok(()),
            code => match not_held_reason(code) {
                Some(reason) => Err(Error::not_held(&self.inner.name, reason)),
                None => Err(Error::unexpected(format!(
                    "{}: reply {code}",
                    request.context
                ))),
            },
        }
    }

    pub(crate) async fn renew_one(&self, owner: &Owner, lease_ms: u64) -> Result<i64> {
        let r: Vec<i64> = if self.inner.kind == Kind::Read {
            let mut inv = scripts::RW_READ_RENEW.prepare_invoke();
            inv.key(&self.inner.key)
                .arg(lease_ms)
                .arg(owner.as_str())
                .arg(self.read_prefix(owner));
            self.backend().eval(&self.context("extend"), &inv).await?
        } else {
            let mut inv = scripts::LOCK_RENEW.prepare_invoke();
            inv.key(&self.inner.key)
                .arg(lease_ms)
                .arg(self.field(owner));
            self.backend().eval(&self.context("extend"), &inv).await?
        };
        r.first()
            .copied()
            .ok_or_else(|| Error::unexpected(format!("{}: empty reply", self.context("extend"))))
    }
}

/// An operation on a named lock, for error messages (names longer than 80 bytes are cut).
pub(crate) struct Ctx<'a> {
    op: &'static str,
    name: &'a str,
}

impl fmt::Display for Ctx<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name;
        if name.len() > 80 {
            let end = (0..=80)
                .rev()
                .find(|&i| name.is_char_boundary(i))
                .unwrap_or(0);
            write!(f, "{} {:?}…", self.op, &name[..end])
        } else {
            write!(f, "{} {name:?}", self.op)
        }
    }
}

/// Gives back a grant whose acquire future was dropped mid-flight (cancel safety).
struct PendingGrant {
    armed: Option<(Lock, Owner, Mode, String)>,
}

impl PendingGrant {
    fn new(lock: &Lock, owner: &Owner, mode: Mode, request_id: &str) -> PendingGrant {
        PendingGrant {
            armed: Some((lock.clone(), owner.clone(), mode, request_id.to_string())),
        }
    }

    /// Nothing to give back once the loop returned an answer: a grant became a guard, a
    /// timeout means the last attempt was refused. After an error the last attempt's fate is
    /// unknown, so stay armed.
    fn disarm_unless_error<T>(&mut self, r: &Result<T>) {
        if r.is_ok() {
            self.armed = None;
        }
    }
}

impl Drop for PendingGrant {
    fn drop(&mut self) {
        let Some((lock, owner, mode, request_id)) = self.armed.take() else {
            return;
        };
        // Dropped (or failed with an unknown outcome) while an attempt may have been granted
        // on the server. For a fresh owner, any hold it has is ours to give back entirely; a
        // plain lock's re-entrant request is undone through its acquire latch.
        // A queued waiter (fair lock, waiting writer) leaves the queue at once.
        if mode != Mode::New && lock.inner.kind == Kind::Plain {
            let lease = lock.effective_lease().unwrap_or(Duration::from_millis(1));
            lock.undo_reentry(owner, request_id, lease);
            return;
        }
        let runtime = lock.inner.client.inner.runtime.clone();
        runtime.spawn(async move {
            let _ = lock.leave_queue(owner.as_str(), false).await;
            if mode != Mode::New {
                return;
            }
            let lease = lock.effective_lease().unwrap_or(Duration::from_millis(1));
            if let Ok((count, _, _)) = lock.inspect(&owner).await {
                for _ in 0..count {
                    if lock.release_hold(&owner, lease).await.is_err() {
                        break;
                    }
                }
            }
        });
    }
}

/// One hold of a [`Lock`]. Release it with [`LockGuard::release`]; dropping it releases in
/// the background (never blocking the runtime) and stops its renewal.
///
/// Local accessors ([`fencing_token`](LockGuard::fencing_token), [`owner`](LockGuard::owner),
/// [`valid_until`](LockGuard::valid_until), [`hold_count`](LockGuard::hold_count)) do no
/// I/O. The guard is `Send` and `Sync`: it can be released from any task.
#[must_use = "dropping the guard releases the lock at once; bind it to a variable"]
pub struct LockGuard {
    state: Option<GuardState>,
}

struct GuardState {
    lock: Lock,
    owner: Owner,
    token: FencingToken,
    hold_count: u32,
    lease: Duration,
    registration: Registration,
    /// This hold in the client's registry (released at shutdown if still live).
    hold: HoldId,
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            Some(s) => f
                .debug_struct("LockGuard")
                .field("key", &s.lock.inner.key)
                .field("owner", &s.owner)
                .field("token", &s.token)
                .field("hold_count", &s.hold_count)
                .finish(),
            None => f.write_str("LockGuard(released)"),
        }
    }
}

impl LockGuard {
    fn state(&self) -> &GuardState {
        self.state.as_ref().expect("guard used after release")
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &Lock {
        &self.state().lock
    }

    /// The fencing token of this grant (re-entry returns the holder's current token).
    pub fn fencing_token(&self) -> FencingToken {
        self.state().token
    }

    /// The owner this guard holds for.
    pub fn owner(&self) -> &Owner {
        &self.state().owner
    }

    /// The owner's hold count right after this guard was granted (1 for a first grant).
    pub fn hold_count(&self) -> u32 {
        self.state().hold_count
    }

    /// The lease this guard was granted with (the watchdog lease when none was set).
    pub fn lease(&self) -> Duration {
        self.state().lease
    }

    /// Until when the lock is surely ours by the local monotonic clock: the start of the
    /// latest successful grant, renewal or extension, plus its lease, minus drift (1 % of
    /// the lease + 2 ms). No I/O.
    pub fn valid_until(&self) -> std::time::Instant {
        self.state().registration.lease().valid_until().into_std()
    }

    /// Whether the lease is known lost (by a renewal, or its local deadline passed). No I/O;
    /// use [`LockGuard::is_held`] to ask the server.
    pub fn is_lost(&self) -> bool {
        self.state().registration.lease().is_lost()
    }

    /// Resolves when the lease is lost: the watchdog found the lock gone or held by another
    /// owner, or the lease ended locally before a renewal (or, with an explicit lease,
    /// before an [`extend`](LockGuard::extend)). Never resolves while the lease is kept.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + '_ {
        self.state().registration.lease().lost()
    }

    /// Take one more hold with the same owner (hold count + 1, lease reset) and return its
    /// guard; each guard releases one hold.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when the lock is no longer held by this owner (it is not
    /// granted anew); server failures.
    ///
    /// # Cancel safety
    /// Cancel safe in that a resent request never counts two holds; a hold granted after the
    /// future was dropped stays until the owner's last release or the lease ends.
    pub async fn reenter(&self) -> Result<LockGuard> {
        let s = self.state();
        s.lock.nest_as(&s.owner, s.lease).await
    }

    /// Whether the server still has this owner's hold.
    ///
    /// # Errors
    /// Server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn is_held(&self) -> Result<bool> {
        let s = self.state();
        let held: bool = s
            .lock
            .backend()
            .query(
                &s.lock.context("is_held"),
                redis::cmd("HEXISTS")
                    .arg(&s.lock.inner.key)
                    .arg(s.lock.field(&s.owner)),
            )
            .await?;
        if !held {
            s.registration.lease().mark_lost();
        }
        Ok(held)
    }

    /// Time left on the lease by the server's clock (PTTL).
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when this owner no longer holds the lock; server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn remaining(&self) -> Result<Duration> {
        let s = self.state();
        let (count, _, pttl) = s.lock.inspect(&s.owner).await?;
        if count == 0 {
            let reason = if pttl == -2 {
                NotHeldReason::Gone
            } else {
                NotHeldReason::HeldByOther
            };
            return Err(Error::not_held(&s.lock.inner.name, reason));
        }
        Ok(Duration::from_millis(pttl.max(0) as u64))
    }

    /// Set the lock's TTL to `lease` from now, if this owner still holds it. Under the
    /// watchdog, its next renewal sets the TTL back to the watchdog lease.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a zero or overflowing `lease`; [`ErrorKind::NotHeld`]
    /// when the lock was lost (the lost signal fires too); server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: PEXPIRE is idempotent.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        let lease_ms = keys::lease_ms("extension", lease)?;
        let s = self.state();
        let started = Instant::now();
        match s.lock.renew_one(&s.owner, lease_ms).await? {
            1 => {
                // Exactly, not at least: the extension may have shortened the TTL.
                s.registration
                    .lease()
                    .set_valid_until(started + lease.saturating_sub(keys::drift(lease)));
                Ok(())
            }
            code => {
                s.registration.lease().mark_lost();
                Err(Error::not_held(
                    &s.lock.inner.name,
                    not_held_reason(code).unwrap_or(NotHeldReason::Gone),
                ))
            }
        }
    }

    /// Release this guard's hold: decrement the hold count; on the last hold delete the key
    /// and wake one waiter (Redisson's unlock script). Idempotent under resends (unlock latch
    /// per request, seed 004). Renewal of the owner stops once none of its guards is left.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when the lock had expired or was taken by another owner
    /// ([`Error::not_held_reason`] tells which); nothing is changed then. Server failures.
    ///
    /// # Cancel safety
    /// Not cancel safe in the sense that a dropped release may or may not have happened; if
    /// it did not, the lease ends it.
    pub async fn release(mut self) -> Result<()> {
        let s = self.state.take().expect("guard released twice");
        let GuardState {
            lock,
            owner,
            lease,
            registration,
            hold,
            ..
        } = s;
        drop(registration);
        if lock.inner.client.inner.holds.take(&hold).is_none() {
            // Client::shutdown released it already.
            return Err(Error::not_held(&lock.inner.name, NotHeldReason::Gone));
        }
        lock.release_hold(&owner, lease).await
    }

    /// Stop tracking this hold without releasing it: no renewal, no release on drop. The
    /// lock stays until its lease ends, or until the returned owner is
    /// [adopted](Lock::adopt) (e.g. by another process) and released.
    pub fn forget(mut self) -> Owner {
        let s = self.state.take().expect("guard released twice");
        s.lock.inner.client.inner.holds.take(&s.hold);
        s.owner
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(s) = self.state.take() else { return };
        let GuardState {
            lock,
            owner,
            lease,
            registration,
            hold,
            ..
        } = s;
        drop(registration);
        let client = &lock.inner.client.inner;
        if client.holds.take(&hold).is_some() {
            client
                .holds
                .release_in_background(&client.backend, lock.release_request(&owner, lease));
        }
    }
}
