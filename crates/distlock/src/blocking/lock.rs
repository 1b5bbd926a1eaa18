//! Blocking forms of the plain and fair locks, [`Lock`] and [`FairLock`]: each kind's own verbs
//! (the shared ones are in `handle.rs`, their guards in `hold.rs`, the read-write lock in
//! `rwlock.rs`).

use std::time::Duration;

use super::{FairLockGuard, LockGuard, LockHandle};
use crate::error::Result;
use crate::kind::{Fair, Plain};
use crate::{LockStatus, Owner};

/// A reentrant lock, blocking form of [`crate::Lock`] (Redisson's `RLock` layout): a
/// [`LockHandle`] of kind [`Plain`].
///
/// Cheap to clone. Made by [`Client::lock`](super::Client::lock).
pub type Lock = LockHandle<Plain>;

/// A fair (FIFO) lock, blocking form of [`crate::FairLock`]: a [`LockHandle`] of kind
/// [`Fair`].
///
/// Cheap to clone. Made by [`Client::fair_lock`](super::Client::fair_lock).
pub type FairLock = LockHandle<Fair>;

impl LockHandle<Plain> {
    /// Acquires the lock for a fresh owner, waiting up to the client's default wait, as
    /// [`crate::Lock::acquire`].
    ///
    /// The calling thread sleeps while it waits; a release elsewhere wakes it.
    ///
    /// # Errors
    /// As [`crate::Lock::acquire`]: [`ErrorKind::NotAcquired`](crate::ErrorKind::NotAcquired)
    /// when the wait elapsed.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn acquire(&self) -> Result<LockGuard> {
        self.rt.acquire(self.inner.acquire())
    }

    /// Makes one attempt for a fresh owner, never waiting, as [`crate::Lock::try_acquire`].
    ///
    /// `Ok(None)` when another owner holds the lock.
    ///
    /// # Errors
    /// As [`crate::Lock::try_acquire`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire(&self) -> Result<Option<LockGuard>> {
        self.rt.try_acquire(self.inner.try_acquire())
    }

    /// Acquires the lock for a fresh owner, waiting at most `wait`, as
    /// [`crate::Lock::try_acquire_for`].
    ///
    /// `Ok(None)` when the wait elapsed; a zero `wait` makes one attempt.
    ///
    /// # Errors
    /// As [`crate::Lock::try_acquire_for`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        self.rt.try_acquire(self.inner.try_acquire_for(wait))
    }

    /// Acquire as `owner` (re-entering if it holds the lock already), as
    /// [`crate::Lock::acquire_as`].
    ///
    /// # Errors
    /// As [`crate::Lock::acquire_as`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn acquire_as(&self, owner: &Owner) -> Result<LockGuard> {
        self.rt.acquire(self.inner.acquire_as(owner))
    }

    /// Acquires the lock as `owner` (re-entering if it holds it already), waiting at most
    /// `wait`, as [`crate::Lock::try_acquire_as`].
    ///
    /// `Ok(None)` when the wait elapsed; a zero `wait` makes one attempt.
    ///
    /// # Errors
    /// As [`crate::Lock::try_acquire_as`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire_as(&self, owner: &Owner, wait: Duration) -> Result<Option<LockGuard>> {
        self.rt.try_acquire(self.inner.try_acquire_as(owner, wait))
    }

    /// Take over a hold that `owner` has now, as [`crate::Lock::adopt`].
    ///
    /// # Errors
    /// As [`crate::Lock::adopt`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn adopt(&self, owner: Owner) -> Result<LockGuard> {
        self.rt.acquire(self.inner.adopt(owner))
    }

    /// This lock with another hand-off policy for its waiters, as [`crate::Lock::handoff`].
    /// No I/O.
    pub fn handoff(&self, handoff: impl Into<crate::Handoff>) -> Lock {
        LockHandle::new(self.inner.handoff(handoff), self.rt.clone())
    }

    /// Returns this lock with another liveness timeout for its queued waiters, as
    /// [`crate::Lock::liveness_timeout`]. No I/O.
    pub fn liveness_timeout(&self, liveness: Duration) -> Lock {
        LockHandle::new(self.inner.liveness_timeout(liveness), self.rt.clone())
    }

    /// Delete the lock whoever holds it, as [`crate::Lock::force_unlock`].
    ///
    /// # Errors
    /// As [`crate::Lock::force_unlock`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn force_unlock(&self) -> Result<bool> {
        self.rt.block_on(self.inner.force_unlock())
    }

    /// Holders, TTL and fencing state, as [`crate::Lock::status`].
    ///
    /// # Errors
    /// As [`crate::Lock::status`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn status(&self) -> Result<LockStatus> {
        self.rt.block_on(self.inner.status())
    }
}

impl LockHandle<Fair> {
    /// Acquires the lock in turn (first come, first served), waiting up to the client's
    /// default wait, as [`crate::FairLock::acquire`].
    ///
    /// The calling thread sleeps in the queue while it waits; its turn wakes it.
    ///
    /// # Errors
    /// As [`crate::FairLock::acquire`]:
    /// [`ErrorKind::NotAcquired`](crate::ErrorKind::NotAcquired) when the wait elapsed (the
    /// caller has left the queue then).
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn acquire(&self) -> Result<FairLockGuard> {
        self.rt.acquire(self.inner.acquire())
    }

    /// Makes one attempt, without joining the queue, as [`crate::FairLock::try_acquire`].
    ///
    /// `Ok(None)` unless the lock is free and nobody waits before us.
    ///
    /// # Errors
    /// As [`crate::FairLock::try_acquire`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire(&self) -> Result<Option<FairLockGuard>> {
        self.rt.try_acquire(self.inner.try_acquire())
    }

    /// Acquires the lock in turn, waiting in the queue at most `wait`, as
    /// [`crate::FairLock::try_acquire_for`].
    ///
    /// `Ok(None)` when the wait elapsed (the caller has left the queue then).
    ///
    /// # Errors
    /// As [`crate::FairLock::try_acquire_for`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<FairLockGuard>> {
        self.rt.try_acquire(self.inner.try_acquire_for(wait))
    }

    /// This lock with another waiter liveness timeout, as
    /// [`crate::FairLock::liveness_timeout`].
    pub fn liveness_timeout(&self, liveness: Duration) -> FairLock {
        LockHandle::new(self.inner.liveness_timeout(liveness), self.rt.clone())
    }

    /// This lock with direct hand-off on or off, as [`crate::FairLock::handoff`]. No I/O.
    pub fn handoff(&self, handoff: impl Into<crate::Handoff>) -> FairLock {
        LockHandle::new(self.inner.handoff(handoff), self.rt.clone())
    }

    /// Deletes the lock whoever holds it and wakes the head waiter, as
    /// [`crate::FairLock::force_unlock`].
    ///
    /// The lock is left free, the queue kept.
    ///
    /// # Errors
    /// As [`crate::FairLock::force_unlock`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn force_unlock(&self) -> Result<bool> {
        self.rt.block_on(self.inner.force_unlock())
    }

    /// Holders and TTL, as [`crate::FairLock::status`].
    ///
    /// # Errors
    /// As [`crate::FairLock::status`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn status(&self) -> Result<LockStatus> {
        self.rt.block_on(self.inner.status())
    }
}
