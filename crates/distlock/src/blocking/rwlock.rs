//! Blocking form of the read-write lock: [`RwLock`] (its guards are in `hold.rs`).

use std::fmt;
use std::time::Duration;

use super::{Client, HoldGuard, Rt, RwLockReadGuard, RwLockWriteGuard};
use crate::error::Result;
use crate::LockStatus;

/// A read-write lock, blocking form of [`crate::RwLock`] (Redisson's `RReadWriteLock` layout).
///
/// Cheap to clone. Made by [`Client::rw_lock`].
#[derive(Clone)]
pub struct RwLock {
    inner: crate::RwLock,
    rt: Rt,
}

impl fmt::Debug for RwLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::RwLock")
            .field(&self.inner)
            .finish()
    }
}

impl RwLock {
    pub(super) fn new(inner: crate::RwLock, rt: Rt) -> RwLock {
        RwLock { inner, rt }
    }

    /// A read hold, waiting up to the client's default wait, as [`crate::RwLock::read`].
    ///
    /// # Errors
    /// As [`crate::RwLock::read`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn read(&self) -> Result<RwLockReadGuard> {
        self.rt.acquire(self.inner.read(), HoldGuard)
    }

    /// A read hold if one is free now, as [`crate::RwLock::try_read`].
    ///
    /// # Errors
    /// As [`crate::RwLock::try_read`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_read(&self) -> Result<Option<RwLockReadGuard>> {
        self.rt.try_acquire(self.inner.try_read(), HoldGuard)
    }

    /// A read hold, waiting at most `wait`, as [`crate::RwLock::try_read_for`].
    ///
    /// # Errors
    /// As [`crate::RwLock::try_read_for`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_read_for(&self, wait: Duration) -> Result<Option<RwLockReadGuard>> {
        self.rt
            .try_acquire(self.inner.try_read_for(wait), HoldGuard)
    }

    /// The write hold, waiting up to the client's default wait, as [`crate::RwLock::write`].
    ///
    /// # Errors
    /// As [`crate::RwLock::write`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn write(&self) -> Result<RwLockWriteGuard> {
        self.rt.acquire(self.inner.write(), HoldGuard)
    }

    /// The write hold if it is free now, as [`crate::RwLock::try_write`].
    ///
    /// # Errors
    /// As [`crate::RwLock::try_write`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_write(&self) -> Result<Option<RwLockWriteGuard>> {
        self.rt.try_acquire(self.inner.try_write(), HoldGuard)
    }

    /// The write hold, waiting at most `wait`, as [`crate::RwLock::try_write_for`].
    ///
    /// # Errors
    /// As [`crate::RwLock::try_write_for`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_write_for(&self, wait: Duration) -> Result<Option<RwLockWriteGuard>> {
        self.rt
            .try_acquire(self.inner.try_write_for(wait), HoldGuard)
    }

    /// This lock with an explicit lease, as [`crate::RwLock::lease`].
    pub fn lease(&self, lease: Duration) -> RwLock {
        RwLock::new(self.inner.lease(lease), self.rt.clone())
    }

    /// This lock with direct hand-off to writers on or off, as [`crate::RwLock::handoff`].
    /// No I/O.
    pub fn handoff(&self, handoff: impl Into<crate::Handoff>) -> RwLock {
        RwLock::new(self.inner.handoff(handoff), self.rt.clone())
    }

    /// The writers' hand-off policy, as [`crate::RwLock::handoff_setting`].
    pub fn handoff_setting(&self) -> crate::Handoff {
        self.inner.handoff_setting()
    }

    /// The explicit lease of its holds, if one was set with [`RwLock::lease`], as
    /// [`crate::RwLock::lease_setting`].
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

    /// The lock's wake channel, as [`crate::RwLock::channel`].
    pub fn channel(&self) -> &str {
        self.inner.channel()
    }

    /// Returns the key of the fencing counter this lock draws its tokens from, as
    /// [`crate::RwLock::fencing_counter_key`].
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
    pub fn as_async(&self) -> &crate::RwLock {
        &self.inner
    }

    /// Whether anyone holds the lock, for reading or writing, as
    /// [`crate::RwLock::is_locked`].
    ///
    /// # Errors
    /// As [`crate::RwLock::is_locked`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn is_locked(&self) -> Result<bool> {
        self.rt.block_on(self.inner.is_locked())
    }

    /// Time left on the lock's lease, whoever holds it, as [`crate::RwLock::remaining`].
    ///
    /// # Errors
    /// As [`crate::RwLock::remaining`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn remaining(&self) -> Result<Option<Duration>> {
        self.rt.block_on(self.inner.remaining())
    }

    /// Holders and TTL, as [`crate::RwLock::status`].
    ///
    /// # Errors
    /// As [`crate::RwLock::status`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn status(&self) -> Result<LockStatus> {
        self.rt.block_on(self.inner.status())
    }

    /// Delete the lock whoever holds it, as [`crate::RwLock::force_unlock`].
    ///
    /// # Errors
    /// As [`crate::RwLock::force_unlock`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn force_unlock(&self) -> Result<bool> {
        self.rt.block_on(self.inner.force_unlock())
    }
}
