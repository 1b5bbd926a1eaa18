//! [`FairLock`].

use std::time::Duration;

use crate::client::Client;
use crate::error::Result;
use std::sync::Arc;

use super::{FairLockGuard, Handoff, HoldGuard, LockCore, LockHandle, LockStatus, Mode};
use crate::kind::Fair;
use crate::lock::raw;

/// Default time a queued waiter stays in line without renewing: 5 s.
///
/// Waiters renew every third of it while they wait.
pub const DEFAULT_FAIR_LIVENESS: Duration = Duration::from_secs(5);

/// A fair (FIFO) reentrant lock.
///
/// Made by [`Client::fair_lock`]; cheap to clone. Grants are [`FairLockGuard`]s: re-entry, lease,
/// watchdog, fencing token and lost-lease signal work as for [`Lock`](crate::Lock).
///
/// Layout (Redisson's): the lock hash, a queue list `redisson_lock_queue:{<name>}` and a zset
/// `redisson_lock_timeout:{<name>}`; each waiter is woken on its own channel
/// `redisson_lock__channel:{<name>}:<owner>`, and a release wakes only the head of the queue.
///
/// Redisson's worst fair-lock problem, reported by its users several times, is a waiter that
/// crashed or gave up and stays at the head of the queue for minutes (5 minutes per waiter,
/// on client clocks). Here a waiter that times out or is cancelled leaves the queue at once,
/// and every waiter renews a *liveness deadline* (server `TIME`) with each attempt; a crashed
/// waiter is skipped once its deadline passes ([`FairLock::liveness_timeout`], default 5 s).
/// Mixing Redisson and distlock waiters on one fair lock keeps mutual exclusion but not the
/// arrival order (Redisson rewrites every waiter's timeout on each grant).
///
/// A release that finds a distlock waiter at the head of the queue hands it the lock directly,
/// as [`Handoff::Fifo`] does for [`Lock`](crate::Lock): the release script grants it
/// (hold count 1, a fresh fencing token, an initial lease of the waiter's lease, ending at the
/// latest at its liveness deadline, until the new holder sets its full lease) and announces
/// it on the waiter's client channel, so the waiter holds the lock when the message arrives:
/// one message after the release instead of a wake-up and an attempt. A Redisson waiter at the
/// head is woken on its own channel, as Redisson's release does. Where replicas confirm
/// grants (Sentinel, or Cluster with [`replica_acks`](crate::ClientBuilder::replica_acks)
/// above 0) there is no hand-off yet: every waiter is woken to attempt.
///
/// # Examples
/// ```no_run
/// # async fn f(client: distlock::Client) -> distlock::Result<()> {
/// let lock = client.fair_lock("tickets");
/// let guard = lock.acquire().await?;       // served in the order callers arrived
/// guard.release().await?;
/// # Ok(()) }
/// ```
///
/// What a fair lock cannot do does not compile: taking it for a given owner
/// ([`Lock::acquire_as`](crate::Lock::acquire_as)) would bypass the queue, and a fair lock's
/// guard is no plain [`LockGuard`](crate::LockGuard):
/// ```compile_fail
/// # async fn f(client: distlock::Client, owner: distlock::Owner) -> distlock::Result<()> {
/// let fair = client.fair_lock("tickets");
/// let guard = fair.acquire_as(&owner).await?; // no such verb on a FairLock
/// # Ok(()) }
/// ```
/// ```compile_fail
/// # async fn f(client: distlock::Client) -> distlock::Result<()> {
/// let guard: distlock::LockGuard = client.fair_lock("tickets").acquire().await?;
/// # Ok(()) }
/// ```
pub type FairLock = LockHandle<Fair>;

impl Client {
    /// The fair lock called `name`. No I/O.
    pub fn fair_lock(&self, name: impl Into<String>) -> FairLock {
        let raw = raw::Fair {
            liveness: DEFAULT_FAIR_LIVENESS,
            handoff: true,
        };
        let core = LockCore::with_raw(self.clone(), name.into(), Arc::new(raw));
        LockHandle::from_parts(core, None, Handoff::Fifo, DEFAULT_FAIR_LIVENESS)
    }
}

impl LockHandle<Fair> {
    /// This lock with other settings, under the same lease.
    fn with(&self, handoff: Handoff, liveness: Duration) -> FairLock {
        let raw = raw::Fair {
            liveness,
            handoff: handoff.is_on(),
        };
        LockHandle::from_parts(self.core.rekind(Arc::new(raw)), None, handoff, liveness)
    }

    /// Returns the same lock with another liveness timeout for queued waiters.
    ///
    /// The timeout is a [`Duration`] of at least 3 ms, 5 seconds by default: a waiter that has
    /// not re-attempted within it is skipped. A shorter one skips crashed waiters sooner, and
    /// costs one attempt per third of it per waiter. No I/O.
    pub fn liveness_timeout(&self, liveness: Duration) -> FairLock {
        self.with(self.handoff, liveness.max(Duration::from_millis(3)))
    }

    /// Returns the same lock with direct hand-off on ([`Handoff::Fifo`], the default) or off
    /// ([`Handoff::Off`]; `true` and `false` convert to them). No I/O.
    ///
    /// A fair lock hands off in arrival order only: [`Handoff::Retakes`] is taken as
    /// [`Handoff::Fifo`] ([`FairLock::handoff_setting`] says so). On: a queued waiter of this handle has an entry beside the queue
    /// (`distlock_fair_waiters:{<name>}`), and the release that finds it at the head grants
    /// it the lock and announces the grant on its client's channel: the waiter holds the lock
    /// when the message arrives. Off: Redisson's `RFairLock` behaviour for this handle's
    /// waiters: the release wakes the head on its own channel, and the head takes the lock by
    /// an attempt of its own. Either way the queue's order is kept. Deployments whose grants
    /// replicas confirm hand nothing off either way.
    pub fn handoff(&self, handoff: impl Into<Handoff>) -> FairLock {
        self.with(handoff.into().in_order(), self.liveness)
    }

    /// Acquires the lock in turn, waiting at most the client's default wait.
    ///
    /// The wait is [`ClientBuilder::default_wait`](crate::ClientBuilder::default_wait) (60
    /// seconds unless set). A refused caller joins the queue and is granted the lock when
    /// every waiter before it was served or left; a release wakes only the head of the
    /// queue. While it waits, the caller re-attempts every third of the
    /// [liveness timeout](FairLock::liveness_timeout) (5 seconds unless set), which keeps
    /// its place; a waiter that stops doing so (crashed) is skipped. A caller that gives up
    /// leaves the queue at once. Fresh owner, lease and watchdog as for [`Lock::acquire`](crate::Lock::acquire).
    ///
    /// # Errors
    /// As [`Lock::acquire`](crate::Lock::acquire): [`ErrorKind::NotAcquired`](crate::ErrorKind::NotAcquired) when
    /// the wait elapsed (the caller has left the queue then).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped waiter leaves the queue at once (in the background), and a
    /// grant that raced the drop is released.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// let lock = client.fair_lock("printer");
    /// let guard = lock.acquire().await?;   // served in the order callers arrived
    /// // ... print ...
    /// guard.release().await?;              // wakes the next in line
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<FairLockGuard> {
        let hold = self.core.acquire(None, Mode::New).await?;
        Ok(HoldGuard::new(hold, self.clone()))
    }

    /// Makes one attempt, without joining the queue.
    ///
    /// Granted only if the lock is free and nobody waits before us.
    ///
    /// # Errors
    /// As [`Lock::try_acquire`](crate::Lock::try_acquire).
    ///
    /// # Cancel safety
    /// As [`FairLock::acquire`].
    pub async fn try_acquire(&self) -> Result<Option<FairLockGuard>> {
        let hold = self
            .core
            .acquire_for(None, Mode::New, Duration::ZERO)
            .await?;
        Ok(hold.map(|hold| HoldGuard::new(hold, self.clone())))
    }

    /// Joins the queue and waits at most `wait` for its turn.
    ///
    /// On timeout leaves the queue and returns `Ok(None)`.
    ///
    /// `wait` is a [`Duration`] (at most 365 days); zero makes one attempt without joining
    /// the queue, as [`FairLock::try_acquire`]. Queueing as for [`FairLock::acquire`].
    ///
    /// # Errors
    /// As [`Lock::try_acquire_for`](crate::Lock::try_acquire_for).
    ///
    /// # Cancel safety
    /// As [`FairLock::acquire`].
    ///
    /// # Examples
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// let lock = client.fair_lock("tickets");
    /// match lock.try_acquire_for(Duration::from_secs(5)).await? {
    ///     Some(guard) => {
    ///         // ... serve the ticket ...
    ///         guard.release().await?;
    ///     }
    ///     None => println!("not our turn within 5 s; we left the queue"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<FairLockGuard>> {
        let hold = self.core.acquire_for(None, Mode::New, wait).await?;
        Ok(hold.map(|hold| HoldGuard::new(hold, self.clone())))
    }

    /// Deletes the lock whoever holds it and wakes the head waiter, as Redisson's
    /// `RFairLock.forceUnlock`.
    ///
    /// The lock is left free ([`FairLock::is_locked`] is false afterwards) and the queue kept.
    /// The head is woken, not handed the lock, so a head waiter whose process died cannot keep
    /// the lock; a live head takes it by its own attempt. Returns whether it was held.
    ///
    /// # Errors
    /// As [`Lock::force_unlock`](crate::Lock::force_unlock).
    ///
    /// # Cancel safety
    /// Cancel safe: idempotent.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.force_unlock_whole().await
    }

    /// Holders, TTL, token and the queue of waiting owners ([`LockStatus::queue`]).
    ///
    /// # Errors
    /// As [`Lock::status`](crate::Lock::status).
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn status(&self) -> Result<LockStatus> {
        self.core.status().await
    }
}
