//! Blocking form of the read-write lock, [`RwLock`]: its own verbs (the shared ones are in
//! `handle.rs`, its guards in `hold.rs`).

use std::time::Duration;

use super::{LockHandle, RwLockReadGuard, RwLockWriteGuard};
use crate::error::Result;
use crate::kind::ReadWrite;
use crate::LockStatus;

/// A read-write lock, blocking form of [`crate::RwLock`] (Redisson's `RReadWriteLock` layout):
/// a [`LockHandle`] of kind [`ReadWrite`].
///
/// Cheap to clone. Made by [`Client::rw_lock`](super::Client::rw_lock).
pub type RwLock = LockHandle<ReadWrite>;

impl LockHandle<ReadWrite> {
    /// A read hold, waiting up to the client's default wait, as [`crate::RwLock::read`].
    ///
    /// # Errors
    /// As [`crate::RwLock::read`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn read(&self) -> Result<RwLockReadGuard> {
        self.rt.acquire(self.inner.read())
    }

    /// A read hold if one is free now, as [`crate::RwLock::try_read`].
    ///
    /// # Errors
    /// As [`crate::RwLock::try_read`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_read(&self) -> Result<Option<RwLockReadGuard>> {
        self.rt.try_acquire(self.inner.try_read())
    }

    /// A read hold, waiting at most `wait`, as [`crate::RwLock::try_read_for`].
    ///
    /// # Errors
    /// As [`crate::RwLock::try_read_for`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_read_for(&self, wait: Duration) -> Result<Option<RwLockReadGuard>> {
        self.rt.try_acquire(self.inner.try_read_for(wait))
    }

    /// The write hold, waiting up to the client's default wait, as [`crate::RwLock::write`].
    ///
    /// # Errors
    /// As [`crate::RwLock::write`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn write(&self) -> Result<RwLockWriteGuard> {
        self.rt.acquire(self.inner.write())
    }

    /// The write hold if it is free now, as [`crate::RwLock::try_write`].
    ///
    /// # Errors
    /// As [`crate::RwLock::try_write`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_write(&self) -> Result<Option<RwLockWriteGuard>> {
        self.rt.try_acquire(self.inner.try_write())
    }

    /// The write hold, waiting at most `wait`, as [`crate::RwLock::try_write_for`].
    ///
    /// # Errors
    /// As [`crate::RwLock::try_write_for`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_write_for(&self, wait: Duration) -> Result<Option<RwLockWriteGuard>> {
        self.rt.try_acquire(self.inner.try_write_for(wait))
    }

    /// This lock with direct hand-off to writers on or off, as [`crate::RwLock::handoff`].
    /// No I/O.
    pub fn handoff(&self, handoff: impl Into<crate::Handoff>) -> RwLock {
        LockHandle::new(self.inner.handoff(handoff), self.rt.clone())
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
