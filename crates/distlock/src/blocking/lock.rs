//! Blocking forms of the plain and fair locks: [`Lock`] and [`FairLock`] (their guards are
//! in `hold.rs`, the read-write lock in `rwlock.rs`).

use std::fmt;
use std::time::Duration;

use super::{Client, FairLockGuard, HoldGuard, LockGuard, Rt};
use crate::error::Result;
use crate::{LockStatus, Owner};

/// A reentrant lock, blocking form of [`crate::Lock`] (Redisson's `RLock` layout).
///
/// Cheap to clone. Made by [`Client::lock`].
#[derive(Clone)]
pub struct Lock {
    inner: crate::Lock,
    pub(super) rt: Rt,
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::Lock").field(&self.inner).finish()
    }
}

impl Lock {
    pub(super) fn new(inner: crate::Lock, rt: Rt) -> Lock {
        Lock { inner, rt }
    }

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
        self.rt.acquire(self.inner.acquire(), HoldGuard)
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
        self.rt.try_acquire(self.inner.try_acquire(), HoldGuard)
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
        self.rt
            .try_acquire(self.inner.try_acquire_for(wait), HoldGuard)
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
        self.rt.acquire(self.inner.acquire_as(owner), HoldGuard)
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
        self.rt
            .try_acquire(self.inner.try_acquire_as(owner, wait), HoldGuard)
    }

    /// Take over a hold that `owner` has now, as [`crate::Lock::adopt`].
    ///
    /// # Errors
    /// As [`crate::Lock::adopt`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn adopt(&self, owner: Owner) -> Result<LockGuard> {
        self.rt.acquire(self.inner.adopt(owner), HoldGuard)
    }

    /// This lock with an explicit lease, as [`crate::Lock::lease`].
    pub fn lease(&self, lease: Duration) -> Lock {
        Lock::new(self.inner.lease(lease), self.rt.clone())
    }

    /// This lock with another hand-off policy for its waiters, as [`crate::Lock::handoff`].
    /// No I/O.
    pub fn handoff(&self, handoff: crate::Handoff) -> Lock {
        Lock::new(self.inner.handoff(handoff), self.rt.clone())
    }

    /// Returns this lock with another liveness timeout for its queued waiters, as
    /// [`crate::Lock::liveness_timeout`]. No I/O.
    pub fn liveness_timeout(&self, liveness: Duration) -> Lock {
        Lock::new(self.inner.liveness_timeout(liveness), self.rt.clone())
    }

    /// The hand-off policy, as [`crate::Lock::handoff_setting`].
    pub fn handoff_setting(&self) -> crate::Handoff {
        self.inner.handoff_setting()
    }

    /// The explicit lease, if one was set with [`Lock::lease`], as
    /// [`crate::Lock::lease_setting`].
    pub fn lease_setting(&self) -> Option<Duration> {
        self.inner.lease_setting()
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The lock's Redis key.
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// The lock's wake channel, as [`crate::Lock::channel`].
    pub fn channel(&self) -> &str {
        self.inner.channel()
    }

    /// Returns the key of the fencing counter this lock draws its tokens from, as
    /// [`crate::Lock::fencing_counter_key`].
    pub fn fencing_counter_key(&self) -> String {
        self.inner.fencing_counter_key()
    }

    /// The blocking client this lock belongs to (a clone, sharing its runtime and
    /// connections).
    pub fn client(&self) -> Client {
        Client {
            inner: self.inner.client().clone(),
            rt: self.rt.clone(),
        }
    }

    /// The async lock underneath.
    pub fn as_async(&self) -> &crate::Lock {
        &self.inner
    }

    /// Whether anyone holds the lock, as [`crate::Lock::is_locked`].
    ///
    /// # Errors
    /// As [`crate::Lock::is_locked`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn is_locked(&self) -> Result<bool> {
        self.rt.block_on(self.inner.is_locked())
    }

    /// Time left on the holder's lease, as [`crate::Lock::remaining`].
    ///
    /// # Errors
    /// As [`crate::Lock::remaining`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn remaining(&self) -> Result<Option<Duration>> {
        self.rt.block_on(self.inner.remaining())
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

/// A fair (FIFO) lock, blocking form of [`crate::FairLock`].
///
/// Cheap to clone. Made by [`Client::fair_lock`].
#[derive(Clone)]
pub struct FairLock {
    inner: crate::FairLock,
    rt: Rt,
}

impl fmt::Debug for FairLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::FairLock")
            .field(&self.inner)
            .finish()
    }
}

impl FairLock {
    pub(super) fn new(inner: crate::FairLock, rt: Rt) -> FairLock {
        FairLock { inner, rt }
    }

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
        self.rt.acquire(self.inner.acquire(), HoldGuard)
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
        self.rt.try_acquire(self.inner.try_acquire(), HoldGuard)
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
        self.rt
            .try_acquire(self.inner.try_acquire_for(wait), HoldGuard)
    }

    /// This lock with an explicit lease, as [`crate::FairLock::lease`].
    pub fn lease(&self, lease: Duration) -> FairLock {
        FairLock::new(self.inner.lease(lease), self.rt.clone())
    }

    /// This lock with another waiter liveness timeout, as
    /// [`crate::FairLock::liveness_timeout`].
    pub fn liveness_timeout(&self, liveness: Duration) -> FairLock {
        FairLock::new(self.inner.liveness_timeout(liveness), self.rt.clone())
    }

    /// This lock with direct hand-off on or off, as [`crate::FairLock::handoff`]. No I/O.
    pub fn handoff(&self, handoff: impl Into<crate::Handoff>) -> FairLock {
        FairLock::new(self.inner.handoff(handoff), self.rt.clone())
    }

    /// The hand-off policy, as [`crate::FairLock::handoff_setting`].
    pub fn handoff_setting(&self) -> crate::Handoff {
        self.inner.handoff_setting()
    }

    /// The explicit lease, if one was set with [`FairLock::lease`], as
    /// [`crate::FairLock::lease_setting`].
    pub fn lease_setting(&self) -> Option<Duration> {
        self.inner.lease_setting()
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The lock's Redis key.
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// The lock's wake channel, as [`crate::FairLock::channel`].
    pub fn channel(&self) -> &str {
        self.inner.channel()
    }

    /// Returns the key of the fencing counter this lock draws its tokens from, as
    /// [`crate::FairLock::fencing_counter_key`].
    pub fn fencing_counter_key(&self) -> String {
        self.inner.fencing_counter_key()
    }

    /// The blocking client this lock belongs to (a clone, sharing its runtime and
    /// connections).
    pub fn client(&self) -> Client {
        Client {
            inner: self.inner.client().clone(),
            rt: self.rt.clone(),
        }
    }

    /// The async lock underneath.
    pub fn as_async(&self) -> &crate::FairLock {
        &self.inner
    }

    /// Whether anyone holds the lock, as [`crate::FairLock::is_locked`].
    ///
    /// # Errors
    /// As [`crate::FairLock::is_locked`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn is_locked(&self) -> Result<bool> {
        self.rt.block_on(self.inner.is_locked())
    }

    /// Time left on the holder's lease, as [`crate::FairLock::remaining`].
    ///
    /// # Errors
    /// As [`crate::FairLock::remaining`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn remaining(&self) -> Result<Option<Duration>> {
        self.rt.block_on(self.inner.remaining())
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
