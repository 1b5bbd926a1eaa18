//! [`Lock`]: the plain reentrant lock, a typed front over the lock family's engine.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::client::Client;
use crate::error::Result;
use crate::kind::Plain;

/// A reentrant distributed lock named by a string.
///
/// Made by [`Client::lock`]. Cheap to clone; clones are the same lock with the same lease
/// setting. Holding is represented by [`LockGuard`]s, never by the `Lock` value.
///
/// # Data layout (shared with Redisson)
/// The lock is a hash at the key `<key prefix><name>`: field `<client-uuid>:<owner-id>` →
/// hold count, key TTL = lease. The final release deletes the key and publishes `0` on
/// `redisson_lock__channel:{<key>}`. A Java service using Redisson's `RLock` on the same
/// name excludes distlock owners and is excluded by them, and each side's release wakes
/// the other side's waiters. distlock adds two fields, which Redisson's scripts never read:
/// `distlock:fencing-token`, the current holder's [`FencingToken`], and `distlock:holder`,
/// who was granted the lock ([`HolderInfo`]: owner, application, host, process id, since
/// when), written with a grant to a new holder.
///
/// # Ownership
/// Redisson's owner is a thread; async tasks move between threads, so distlock's owner is an
/// explicit value, [`Owner`]. [`Lock::acquire`](crate::Lock::acquire) mints a fresh owner per call: two calls never
/// share a hold by accident. Re-entry is explicit: [`LockGuard::reenter`](crate::LockGuard::reenter) or
/// [`Lock::acquire_as`](crate::Lock::acquire_as) with the same owner increments the hold count and resets the lease;
/// each guard's release takes back one hold.
///
/// # Waiting
/// As Redisson's `tryLock(wait, lease)` loop: one attempt; on failure subscribe to the wake
/// channel; attempt again; then wait for a wake message or the holder's PTTL, whichever
/// comes first, and repeat until the wait elapses. A lost wake message costs at most one
/// PTTL. All local waiters for one name share one subscription.
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
pub type Lock = LockHandle<Plain>;

impl Client {
    /// Returns the reentrant lock called `name` (the Redis key is the key prefix followed by
    /// `name`).
    ///
    /// No I/O; the name is checked when the lock is first used.
    pub fn lock(&self, name: impl Into<String>) -> Lock {
        // The default settings' kind, shared by every handle made with them.
        static DEFAULT: std::sync::LazyLock<Arc<raw::Plain>> =
            std::sync::LazyLock::new(|| Arc::new(raw::Plain::default()));
        let settings = **DEFAULT;
        LockHandle::from_parts(
            LockCore::with_raw(self.clone(), name.into(), DEFAULT.clone()),
            None,
            settings.handoff,
            settings.liveness,
        )
    }
}

impl LockHandle<Plain> {
    /// This lock with other settings, under the same lease (the same lock when unchanged).
    fn with(&self, handoff: Handoff, liveness: Duration) -> Lock {
        if (handoff, liveness) == (self.handoff, self.liveness) {
            return self.clone();
        }
        let raw = raw::Plain { handoff, liveness };
        LockHandle::from_parts(self.core.rekind(Arc::new(raw)), None, handoff, liveness)
    }

    /// Returns the same lock with another hand-off policy for its waiters.
    ///
    /// [`Handoff::Fifo`] (the default: a release grants the lock directly to the first live waiter,
    /// in arrival order), [`Handoff::Retakes`] (the same, but up to `n` acquisitions in a row may
    /// pass the queue's head first) or [`Handoff::Off`] (Redisson's `RLock` behaviour: a release
    /// frees the lock and wakes a waiter, whose attempt may lose to a barging acquire). One setting
    /// per lock name across a fleet: a handle with hand-off off neither queues nor respects the
    /// queue. `Retakes(0)` is stored as `Fifo`. No I/O.
    pub fn handoff(&self, handoff: impl Into<Handoff>) -> Lock {
        let handoff = match handoff.into() {
            Handoff::Retakes(0) => Handoff::Fifo,
            h => h,
        };
        self.with(handoff, self.liveness)
    }

    /// Returns the same lock with another liveness timeout for its queued waiters.
    ///
    /// The timeout is a [`Duration`] of at least 3 ms, 5 seconds by default (as the fair
    /// lock's): a waiter that has not re-attempted within it is passed over by a hand-off, and
    /// a hand-off's initial lease ends at the latest when the waiter's liveness would have (so
    /// a waiter that died just after its last attempt blocks the lock no longer than it would
    /// have kept its place). Each waiter attempts once per third of it. No I/O.
    pub fn liveness_timeout(&self, liveness: Duration) -> Lock {
        self.with(self.handoff, liveness.max(Duration::from_millis(3)))
    }

    /// Acquires the lock for a fresh owner, waiting at most the client's default wait.
    ///
    /// The wait is [`ClientBuilder::default_wait`](crate::ClientBuilder::default_wait) (60
    /// seconds unless set); to choose it per call use [`Lock::try_acquire_for`](crate::Lock::try_acquire_for). Every call
    /// mints a new [`Owner`], so two `acquire` calls never share a hold, whatever tasks they
    /// run in; re-entry is explicit ([`LockGuard::reenter`](crate::LockGuard::reenter), [`Lock::acquire_as`](crate::Lock::acquire_as)).
    ///
    /// Without an explicit [lease](Lock::lease) the lock gets the watchdog lease
    /// ([`ClientBuilder::watchdog_lease`](crate::ClientBuilder::watchdog_lease), 30 seconds
    /// unless set) and the watchdog renews it every third of it while the guard lives; with
    /// one, the lock expires after the lease unless [extended](crate::Lease::extend).
    ///
    /// While another owner holds the lock, the call waits for the release message on the
    /// lock's wake channel, re-attempting at the latest when the holder's lease would end
    /// (Redisson's `tryLock(wait, lease)` loop). An unreachable server is retried with
    /// backoff until the wait ends.
    ///
    /// Every acquire is a new owner, even in the task that holds the lock: unlike Redisson's
    /// `lock()`, which re-enters from the holding thread, a nested acquire waits for the
    /// holder's release. Re-entry is explicit ([`LockGuard::reenter`](crate::LockGuard::reenter), [`Lock::acquire_as`](crate::Lock::acquire_as)).
    /// A wait in the task that holds the lock (the task that acquired, re-entered or
    /// adopted a guard still alive; outside a task, the thread) logs a WARN event
    /// `distlock.waiting_for_own_lock` as it begins, and its `NotAcquired` error says so. A
    /// wait for another task's hold is ordinary contention: no such event, no such hint.
    ///
    /// # Errors
    /// - [`ErrorKind::NotAcquired`] when the wait elapsed;
    /// - [`ErrorKind::InvalidInput`] for an empty or oversized name or a bad lease;
    /// - [`ErrorKind::WrongType`] when the key holds another Redis type;
    /// - [`ErrorKind::Closed`] after [`Client::shutdown`];
    /// - [`ErrorKind::Connection`] when the server was still unreachable when the wait
    ///   ended; [`ErrorKind::Backend`] and the other server-side kinds for server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future leaves no hold (a grant that raced the drop is
    /// released in the background), no subscription and no key behind.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// let lock = client.lock("report:daily");
    /// let guard = lock.acquire().await?;   // Err(NotAcquired) after the default wait
    /// // ... the critical section ...
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<LockGuard> {
        let hold = self.core.acquire(None, Mode::New).await?;
        Ok(HoldGuard::new(hold, self.clone()))
    }

    /// Makes one attempt for a fresh owner: `Ok(None)` when another owner holds the lock.
    ///
    /// Never waits and never subscribes: one script call. Lease and watchdog as for
    /// [`Lock::acquire`](crate::Lock::acquire).
    ///
    /// # Errors
    /// As [`Lock::acquire`](crate::Lock::acquire), except that contention is `Ok(None)`, not an error.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Lock::acquire`](crate::Lock::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// match client.lock("cache:rebuild").try_acquire().await? {
    ///     Some(guard) => {
    ///         // ... rebuild the cache ...
    ///         guard.release().await?;
    ///     }
    ///     None => println!("another instance is rebuilding; skip"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire(&self) -> Result<Option<LockGuard>> {
        let hold = self
            .core
            .acquire_for(None, Mode::New, Duration::ZERO)
            .await?;
        Ok(hold.map(|hold| HoldGuard::new(hold, self.clone())))
    }

    /// Acquires the lock for a fresh owner, waiting at most `wait`: `Ok(None)` when the wait
    /// elapsed.
    ///
    /// `wait` is a [`Duration`] (at most 365 days); zero makes one attempt, as
    /// [`Lock::try_acquire`](crate::Lock::try_acquire). Waiting, lease and watchdog as for [`Lock::acquire`](crate::Lock::acquire).
    ///
    /// # Errors
    /// As [`Lock::acquire`](crate::Lock::acquire), except that an elapsed wait is `Ok(None)`;
    /// [`ErrorKind::InvalidInput`] for a `wait` over 365 days.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Lock::acquire`](crate::Lock::acquire).
    ///
    /// # Examples
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// let lock = client.lock("order:user:42");
    /// if let Some(guard) = lock.try_acquire_for(Duration::from_secs(2)).await? {
    ///     // ... place the order, passing guard.fencing_token() to the store ...
    ///     guard.release().await?;
    /// } else {
    ///     println!("busy for 2 s: try again later");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        let hold = self.core.acquire_for(None, Mode::New, wait).await?;
        Ok(hold.map(|hold| HoldGuard::new(hold, self.clone())))
    }

    /// Acquires the lock as `owner`, waiting at most the client's default wait.
    ///
    /// Grants it if it is free, adds a hold if `owner` holds it already (re-entry: hold count + 1,
    /// lease reset).
    ///
    /// This is how a function that already holds the lock calls another that takes it too
    /// (Redisson's re-entrant `lock()` in `method1 → method2`): the callee is given the owner
    /// (or the guard, see [`LockGuard::reenter`](crate::LockGuard::reenter)) instead of relying on a thread identity.
    /// Each returned guard releases one hold. A resent request never counts two holds (an
    /// acquire latch answers it). Plain locks only: fair and read-write locks re-enter
    /// through their guards.
    ///
    /// # Errors
    /// As [`Lock::acquire`](crate::Lock::acquire). When the server did not answer within the resend window the
    /// error says the outcome is unknown
    /// ([`Error::is_outcome_unknown`](crate::Error::is_outcome_unknown)); the request is then
    /// cancelled in the background, and a hold it may have added is given back.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Lock::acquire`](crate::Lock::acquire): a hold granted to a dropped future is given back.
    ///
    /// # Examples
    /// ```no_run
    /// use distlock::{Lock, Owner};
    ///
    /// async fn method1(lock: &Lock) -> distlock::Result<()> {
    ///     let owner = lock.client().new_owner();
    ///     let outer = lock.acquire_as(&owner).await?;   // hold count 1
    ///     method2(lock, &owner).await?;
    ///     outer.release().await                          // the last hold: the lock is free
    /// }
    ///
    /// async fn method2(lock: &Lock, owner: &Owner) -> distlock::Result<()> {
    ///     let inner = lock.acquire_as(owner).await?;     // same owner: hold count 2
    ///     inner.release().await                          // back to 1
    /// }
    /// ```
    pub async fn acquire_as(&self, owner: &Owner) -> Result<LockGuard> {
        let hold = self.core.acquire(Some(owner.clone()), Mode::As).await?;
        Ok(HoldGuard::new(hold, self.clone()))
    }

    /// Acquires the lock as `owner` like [`Lock::acquire_as`](crate::Lock::acquire_as), waiting
    /// at most `wait`.
    ///
    /// A zero `wait` makes one attempt. Returns `Ok(None)` when the wait elapsed.
    ///
    /// # Errors
    /// As [`Lock::try_acquire_for`](crate::Lock::try_acquire_for); an unknown outcome as for [`Lock::acquire_as`](crate::Lock::acquire_as).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Lock::acquire`](crate::Lock::acquire).
    pub async fn try_acquire_as(&self, owner: &Owner, wait: Duration) -> Result<Option<LockGuard>> {
        let hold = self
            .core
            .acquire_for(Some(owner.clone()), Mode::As, wait)
            .await?;
        Ok(hold.map(|hold| HoldGuard::new(hold, self.clone())))
    }

    /// Takes over a hold that `owner` has now, without adding one.
    ///
    /// For an owner handed over from another process (see [`LockGuard::forget`](crate::LockGuard::forget)):
    /// the returned guard stands for one of its holds. The guard's lease is this lock's lease
    /// setting (the watchdog renews it when none is set).
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when `owner` does not hold the lock; otherwise as
    /// [`Lock::acquire`](crate::Lock::acquire).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn adopt(&self, owner: Owner) -> Result<LockGuard> {
        let hold = self.core.adopt(owner).await?;
        Ok(HoldGuard::new(hold, self.clone()))
    }

    /// Deletes the lock whoever holds it and wakes its waiters (Redisson's `forceUnlock`).
    ///
    /// Returns whether it was held. The holder's guard then reports [`ErrorKind::NotHeld`], and its
    /// lost signal ([`LockGuard::lost`](crate::Lease::lost)) fires within a round trip or two: this
    /// call publishes a notice on each holder client's channel
    /// ([`layout::client_notice_channel`](crate::layout::client_notice_channel)) after the delete.
    /// A holder that misses the notice (its subscription connection down at that moment) learns at
    /// its next renewal, as one whose lock a Redisson client force-unlocked or an operator deleted
    /// by hand.
    ///
    /// Only a lock's hash is deleted: a key that holds anything else (a user's data under a
    /// mistyped name, a hash with fields no lock has, a read-write lock) is refused and left
    /// unchanged.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key is not a plain or fair lock: another type, a hash
    /// with a field no lock has, or a read-write lock (nothing is deleted); as
    /// [`Lock::is_locked`](crate::Lock::is_locked).
    ///
    /// # Cancel safety
    /// Cancel safe: one script, idempotent.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.force_unlock_whole().await
    }

    /// Reads a snapshot of the lock as the server sees it.
    ///
    /// Holders with hold counts, TTL, fencing token, who was granted it
    /// ([`LockStatus::holder`]: application, host, process id and since when, for plain and
    /// fair locks held by a distlock client), and the number of connections subscribed to its
    /// wake channel (each distlock client subscribes once however many local waiters it
    /// has). Two round trips, not atomic with respect to each other.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key holds something other than a lock hash;
    /// [`ErrorKind::UnexpectedReply`] when the fencing counter is not a decimal integer (no
    /// grant can draw a token then either); as [`Lock::is_locked`](crate::Lock::is_locked) otherwise.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn status(&self) -> Result<LockStatus> {
        self.core.status().await
    }
}
