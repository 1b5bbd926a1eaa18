//! [`RwLock`] and its read and write guards.

use std::time::Duration;

use crate::client::Client;
use crate::error::Result;
use std::sync::Arc;

use super::{Handoff, HoldGuard, LockCore, LockHandle, LockStatus, Mode};
use crate::kind::{self, ReadWrite};
use crate::lock::raw::{Read, Write};

/// Default time a waiting writer holds readers back without renewing: 5 s.
pub const DEFAULT_WRITER_LIVENESS: Duration = Duration::from_secs(5);

/// A read-write lock. Made by [`Client::rw_lock`]; cheap to
/// clone.
///
/// Many readers or one writer. The writer may also take read holds (downgrade: take the read
/// lock, then release the write lock); a reader asking for the write lock is refused with
/// [`ErrorKind::WouldDeadlock`](crate::ErrorKind::WouldDeadlock) instead of waiting forever
/// for itself.
///
/// **Write-preferring.** Redisson's read lock lets new readers in whenever the mode is `read`,
/// so a steady stream of readers starves writers. Here a waiting writer registers in
/// `distlock_rwlock_writers:{<name>}` (a zset with server-time liveness deadlines, renewed by
/// each of its attempts) and new readers wait while a live writer is registered; re-entrant
/// reads still go through. Redisson readers do not know this set, so they can still overtake
/// distlock writers on a shared lock.
///
/// **Direct hand-off to writers.** A waiting writer also queues in arrival order
/// (`distlock_rwlock_queue:{<name>}`, entries in `distlock_rwlock_waiters:{<name>}`). The
/// release that frees the lock — the last write hold's or the last read hold's — grants the
/// write lock to the first live queued writer itself and tells it on its client's grant
/// channel (`distlock_lock_grant:{<name>}:<client-id>`), as the plain lock's hand-off does:
/// no herd, no second round trip, no barging past the queue (a `try_write` on a free lock
/// with a writer queued hands the lock to that writer and is refused). A writer that dies
/// while queued is skipped after its liveness timeout (5 s); one handed the lock just before
/// it died keeps it at most until then. Redisson clients keep working unchanged: a Redisson
/// release wakes the queued writers, whose attempts serve the queue in order. Off on
/// deployments whose grants replicas confirm (`WAIT`), as for the plain lock.
///
/// Layout: hash `<name>` with `mode`, `<owner>` → read holds and `<owner>:write` → write
/// holds; each read hold has a key `{<name>}:<owner>:rwlock_timeout:<n>` with its own lease,
/// so a crashed reader's holds run out on their own; wake channel `redisson_rwlock:{<name>}`.
/// Every grant, re-entrant or not, draws a fresh fencing token (the hash keeps no token, to
/// stay readable by Redisson's scripts).
///
/// # Examples
/// ```no_run
/// # async fn f(client: distlock::Client) -> distlock::Result<()> {
/// let rw = client.rw_lock("catalog");
/// let r = rw.read().await?;        // many readers at once
/// r.release().await?;
/// let w = rw.write().await?;       // one writer, no readers
/// let r = w.downgrade().await?;    // keep reading after writing
/// w.release().await?;
/// r.release().await?;
/// # Ok(()) }
/// ```
pub type RwLock = LockHandle<ReadWrite>;

impl Client {
    /// The read-write lock called `name`. No I/O.
    pub fn rw_lock(&self, name: impl Into<String>) -> RwLock {
        let name = name.into();
        let write = Write {
            liveness: DEFAULT_WRITER_LIVENESS,
            handoff: true,
        };
        LockHandle::from_parts(
            LockCore::with_raw(self.clone(), name.clone(), Arc::new(Read)),
            Some(LockCore::with_raw(self.clone(), name, Arc::new(write))),
            Handoff::Fifo,
            DEFAULT_WRITER_LIVENESS,
        )
    }
}

/// A read hold of an [`RwLock`].
///
/// The verbs of every [`HoldGuard`]; each grant, a re-entry too, draws a fresh fencing token
/// (the lock's hash keeps none, to stay readable by Redisson's scripts). There is no upgrade:
/// a reader asking for the write lock would wait for itself, so there is no such method:
///
/// ```compile_fail
/// # async fn f(rw: distlock::RwLock) -> distlock::Result<()> {
/// let read = rw.read().await?;
/// let write = read.upgrade().await?; // does not compile: release the read hold first
/// # Ok(()) }
/// ```
/// Nor does taking the read side as a plain lock for its owner:
/// ```compile_fail
/// # async fn f(rw: distlock::RwLock) -> distlock::Result<()> {
/// let read = rw.read().await?;
/// let again = read.lock().acquire_as(read.owner()).await?; // an RwLock has no acquire_as
/// # Ok(()) }
/// ```
pub type RwLockReadGuard = HoldGuard<kind::Read>;

/// A write hold of an [`RwLock`].
///
/// The verbs of every [`HoldGuard`], and [`downgrade`](HoldGuard::downgrade) to a read hold;
/// each grant, a re-entry too, draws a fresh fencing token.
pub type RwLockWriteGuard = HoldGuard<kind::Write>;

impl LockHandle<ReadWrite> {
    /// The write side's engine.
    fn writer(&self) -> &LockCore {
        self.write
            .as_ref()
            .expect("a read-write lock has a write side")
    }

    /// Returns the same lock with direct hand-off to writers on ([`Handoff::Fifo`], the
    /// default) or off ([`Handoff::Off`]; `true` and `false` convert to them). No I/O.
    ///
    /// Writers are handed the lock in arrival order only: [`Handoff::Retakes`] is taken as
    /// [`Handoff::Fifo`] ([`RwLock::handoff_setting`] says so).
    ///
    /// On: a writer that waits queues beside the lock (`distlock_rwlock_queue:{<name>}`), and
    /// the release that frees the lock grants it to the first live queued writer itself, as
    /// [`Lock::handoff`](crate::Lock::handoff) does for the plain lock; readers are never handed the lock. Off:
    /// Redisson's `RReadWriteLock` behaviour for this handle's writers: they do not queue, and
    /// a release wakes them all to attempt again. Writers queued by other handles are still
    /// served first: an attempt that finds the lock free while one of them waits hands it to
    /// that writer. Deployments whose grants replicas confirm hand nothing off either way.
    pub fn handoff(&self, handoff: impl Into<Handoff>) -> RwLock {
        let handoff = handoff.into().in_order();
        let write = self.writer().rekind(Arc::new(Write {
            liveness: self.liveness,
            handoff: handoff.is_on(),
        }));
        LockHandle::from_parts(self.core.clone(), Some(write), handoff, self.liveness)
    }

    /// Takes a read hold for a fresh owner, waiting at most the client's default wait.
    ///
    /// The wait is [`ClientBuilder::default_wait`](crate::ClientBuilder::default_wait) (60
    /// seconds unless set). Many readers hold the lock at once; a reader waits while a writer
    /// holds it, and also while a writer waits (write preference: a stream of readers cannot
    /// starve writers). Each read hold has its own lease, so a crashed reader's hold runs out
    /// on its own. Lease and watchdog as for [`Lock::acquire`](crate::Lock::acquire).
    ///
    /// # Errors
    /// As [`Lock::acquire`](crate::Lock::acquire).
    ///
    /// # Cancel safety
    /// Cancel safe: a grant that raced the drop is released.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// let rw = client.rw_lock("catalog");
    /// let r = rw.read().await?;        // other readers may hold it too
    /// // ... read the catalog ...
    /// r.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn read(&self) -> Result<RwLockReadGuard> {
        let hold = self.core.acquire(None, Mode::New).await?;
        Ok(HoldGuard::new(hold, self.clone()))
    }

    /// Makes one attempt at a read hold: `Ok(None)` when a writer holds the lock or waits
    /// for it.
    ///
    /// # Errors
    /// As [`Lock::try_acquire`](crate::Lock::try_acquire).
    ///
    /// # Cancel safety
    /// As [`RwLock::read`].
    pub async fn try_read(&self) -> Result<Option<RwLockReadGuard>> {
        let hold = self
            .core
            .acquire_for(None, Mode::New, Duration::ZERO)
            .await?;
        Ok(hold.map(|hold| HoldGuard::new(hold, self.clone())))
    }

    /// Takes a read hold, waiting at most `wait` (a [`Duration`]; zero: one attempt).
    ///
    /// `Ok(None)` when it elapsed.
    ///
    /// # Errors
    /// As [`Lock::try_acquire_for`](crate::Lock::try_acquire_for).
    ///
    /// # Cancel safety
    /// As [`RwLock::read`].
    pub async fn try_read_for(&self, wait: Duration) -> Result<Option<RwLockReadGuard>> {
        let hold = self.core.acquire_for(None, Mode::New, wait).await?;
        Ok(hold.map(|hold| HoldGuard::new(hold, self.clone())))
    }

    /// Takes the write hold for a fresh owner, waiting at most the client's default wait.
    ///
    /// The wait is [`ClientBuilder::default_wait`](crate::ClientBuilder::default_wait) (60
    /// seconds unless set). One writer and no reader hold the lock at a time. While it waits,
    /// the writer is registered as waiting and new readers hold back; it re-attempts every
    /// third of its liveness timeout (5 seconds), and a crashed writer stops holding readers
    /// back once that passes. Lease and watchdog as for [`Lock::acquire`](crate::Lock::acquire).
    ///
    /// # Errors
    /// As [`Lock::acquire`](crate::Lock::acquire).
    ///
    /// # Cancel safety
    /// Cancel safe: a waiting writer that is dropped stops holding readers back at once, and
    /// a grant that raced the drop is released.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// let rw = client.rw_lock("catalog");
    /// let w = rw.write().await?;       // no reader and no other writer now
    /// // ... rewrite the catalog, passing w.fencing_token() to the store ...
    /// w.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn write(&self) -> Result<RwLockWriteGuard> {
        let hold = self.writer().acquire(None, Mode::New).await?;
        Ok(HoldGuard::new(hold, self.clone()))
    }

    /// Makes one attempt at the write hold, without registering as a waiting writer.
    ///
    /// `Ok(None)` when the lock is held.
    ///
    /// # Errors
    /// As [`Lock::try_acquire`](crate::Lock::try_acquire).
    ///
    /// # Cancel safety
    /// As [`RwLock::write`].
    pub async fn try_write(&self) -> Result<Option<RwLockWriteGuard>> {
        let hold = self
            .writer()
            .acquire_for(None, Mode::New, Duration::ZERO)
            .await?;
        Ok(hold.map(|hold| HoldGuard::new(hold, self.clone())))
    }

    /// Takes the write hold, waiting at most `wait`: `Ok(None)` when it elapsed.
    ///
    /// `wait` is a [`Duration`] (at most 365 days); zero makes one attempt, as
    /// [`RwLock::try_write`]. While it waits, new readers hold back, as for
    /// [`RwLock::write`]; on timeout the writer stops holding them back at once.
    ///
    /// # Errors
    /// As [`Lock::try_acquire_for`](crate::Lock::try_acquire_for).
    ///
    /// # Cancel safety
    /// As [`RwLock::write`].
    ///
    /// # Examples
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// let rw = client.rw_lock("catalog");
    /// if let Some(w) = rw.try_write_for(Duration::from_millis(500)).await? {
    ///     // ... rewrite the catalog ...
    ///     w.release().await?;
    /// } else {
    ///     println!("readers or a writer kept it for 500 ms");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_write_for(&self, wait: Duration) -> Result<Option<RwLockWriteGuard>> {
        let hold = self.writer().acquire_for(None, Mode::New, wait).await?;
        Ok(hold.map(|hold| HoldGuard::new(hold, self.clone())))
    }

    /// Mode (`read`/`write`), holders, TTL and waiting writers.
    ///
    /// # Errors
    /// As [`Lock::status`](crate::Lock::status).
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn status(&self) -> Result<LockStatus> {
        self.writer().status().await
    }

    /// Delete the lock whoever holds it and wake every waiter.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`](crate::ErrorKind::WrongType) when the key is not a read-write
    /// lock: another type, a hash with a field no lock has, or a plain or fair lock (nothing is
    /// deleted); as [`Lock::is_locked`](crate::Lock::is_locked).
    ///
    /// # Cancel safety
    /// Cancel safe: idempotent.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.force_unlock_whole().await
    }
}

impl HoldGuard<kind::Write> {
    /// Takes a read hold with this writer's owner.
    ///
    /// Releasing the write hold afterwards leaves the read hold, a downgrade.
    ///
    /// A writer may take read holds while it writes; no other reader gets in until the write
    /// hold is released, and no writer gets in between the two (the read hold is taken
    /// before the write hold goes). The read guard has the writer's owner and lease, and a
    /// fresh fencing token. Never waits. There is no upgrade: a reader asking for the write
    /// lock would wait for itself.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when the write hold was lost; server
    /// failures.
    ///
    /// # Cancel safety
    /// As [`LockGuard::reenter`](crate::LockGuard::reenter).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// let rw = client.rw_lock("catalog");
    /// let w = rw.write().await?;
    /// // ... write the catalog ...
    /// let r = w.downgrade().await?;   // read hold, same owner, while still writing
    /// w.release().await?;             // other readers may come in now; writers may not
    /// // ... read what was written ...
    /// r.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn downgrade(&self) -> Result<RwLockReadGuard> {
        let hold = self.lock().core.nest_as(self.owner(), self.lease()).await?;
        Ok(HoldGuard::new(hold, self.lock().clone()))
    }
}
