//! Blocking forms of the semaphores: [`Semaphore`] (Redisson's `RSemaphore`) and
//! [`LeasedSemaphore`] (permits with ids and leases), with their permits.

use std::fmt;
use std::time::Duration;

use super::{Guard, Rt};
use crate::error::Result;

/// A counting semaphore, blocking form of [`crate::Semaphore`].
///
/// Cheap to clone. Made by [`Client::semaphore`](super::Client::semaphore).
#[derive(Clone)]
pub struct Semaphore {
    inner: crate::Semaphore,
    rt: Rt,
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::Semaphore")
            .field(&self.inner)
            .finish()
    }
}

impl Semaphore {
    pub(super) fn new(inner: crate::Semaphore, rt: Rt) -> Semaphore {
        Semaphore { inner, rt }
    }

    /// Takes one permit, waiting up to the client's default wait, as [`crate::Semaphore::acquire`].
    ///
    /// The calling thread sleeps while it waits; a release elsewhere wakes it.
    ///
    /// # Errors
    /// As [`crate::Semaphore::acquire`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn acquire(&self) -> Result<SemaphorePermit> {
        self.rt.acquire(self.inner.acquire())
    }

    /// Takes one permit if one is free now, never waiting, as [`crate::Semaphore::try_acquire`].
    ///
    /// `Ok(None)` when none is free.
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_acquire`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire(&self) -> Result<Option<SemaphorePermit>> {
        self.rt.try_acquire(self.inner.try_acquire())
    }

    /// Takes one permit, waiting at most `wait`, as [`crate::Semaphore::try_acquire_for`].
    ///
    /// `Ok(None)` when the wait elapsed.
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_acquire_for`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<SemaphorePermit>> {
        self.rt.try_acquire(self.inner.try_acquire_for(wait))
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Set the number of permits if none is set, as [`crate::Semaphore::try_set_permits`].
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_set_permits`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_set_permits(&self, permits: u64) -> Result<bool> {
        self.rt.block_on(self.inner.try_set_permits(permits))
    }

    /// Permits free now, as [`crate::Semaphore::available_permits`].
    ///
    /// # Errors
    /// As [`crate::Semaphore::available_permits`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn available_permits(&self) -> Result<u64> {
        self.rt.block_on(self.inner.available_permits())
    }

    /// Add permits to the pool, as [`crate::Semaphore::add_permits`].
    ///
    /// # Errors
    /// As [`crate::Semaphore::add_permits`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn add_permits(&self, permits: u64) -> Result<u64> {
        self.rt.block_on(self.inner.add_permits(permits))
    }

    /// Take every free permit, as [`crate::Semaphore::drain_permits`].
    ///
    /// # Errors
    /// As [`crate::Semaphore::drain_permits`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn drain_permits(&self) -> Result<u64> {
        self.rt.block_on(self.inner.drain_permits())
    }

    /// Acquires `permits` permits at once, waiting up to the client's default wait, as
    /// [`crate::Semaphore::acquire_many`].
    ///
    /// # Errors
    /// As [`crate::Semaphore::acquire_many`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn acquire_many(&self, permits: u64) -> Result<SemaphorePermit> {
        self.rt.acquire(self.inner.acquire_many(permits))
    }

    /// `permits` permits at once, waiting at most `wait`, as
    /// [`crate::Semaphore::try_acquire_many_for`].
    ///
    /// # Errors
    /// As [`crate::Semaphore::try_acquire_many_for`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire_many_for(
        &self,
        permits: u64,
        wait: Duration,
    ) -> Result<Option<SemaphorePermit>> {
        self.rt
            .try_acquire(self.inner.try_acquire_many_for(permits, wait))
    }
}

/// Permits taken from a [`Semaphore`], blocking form of [`crate::SemaphorePermit`]: a
/// [`Guard`] over it, without a lease.
///
/// Given back by [`release`](Guard::release) (which answers the permits available after it) or
/// when dropped (synchronously, bounded by twice the command timeout; see the [module
/// docs](super)).
pub type SemaphorePermit = Guard<crate::SemaphorePermit>;

impl Guard<crate::SemaphorePermit> {
    /// How many permits this guard holds.
    pub fn permits(&self) -> u64 {
        self.get().permits()
    }

    /// Keep the permits taken for good, as [`crate::SemaphorePermit::forget`].
    pub fn forget(self) -> u64 {
        self.into_async().forget()
    }
}

/// A semaphore whose permits have ids and leases, blocking form of [`crate::LeasedSemaphore`].
///
/// Cheap to clone. Made by [`Client::leased_semaphore`](super::Client::leased_semaphore).
#[derive(Clone)]
pub struct LeasedSemaphore {
    inner: crate::LeasedSemaphore,
    rt: Rt,
}

impl fmt::Debug for LeasedSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::LeasedSemaphore")
            .field(&self.inner)
            .finish()
    }
}

impl LeasedSemaphore {
    pub(super) fn new(inner: crate::LeasedSemaphore, rt: Rt) -> LeasedSemaphore {
        LeasedSemaphore { inner, rt }
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The same semaphore with direct hand-off on or off, as
    /// [`crate::LeasedSemaphore::handoff`]. No I/O.
    pub fn handoff(&self, handoff: impl Into<crate::Handoff>) -> LeasedSemaphore {
        LeasedSemaphore::new(self.inner.handoff(handoff), self.rt.clone())
    }

    /// The hand-off policy, as [`crate::LeasedSemaphore::handoff_setting`].
    pub fn handoff_setting(&self) -> crate::Handoff {
        self.inner.handoff_setting()
    }

    /// Returns the same semaphore with another liveness timeout for its queued waiters, as
    /// [`crate::LeasedSemaphore::liveness_timeout`]. No I/O.
    pub fn liveness_timeout(&self, liveness: Duration) -> LeasedSemaphore {
        LeasedSemaphore::new(self.inner.liveness_timeout(liveness), self.rt.clone())
    }

    /// Set the number of permits if none is set, as
    /// [`crate::LeasedSemaphore::try_set_permits`].
    ///
    /// # Errors
    /// As [`crate::LeasedSemaphore::try_set_permits`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_set_permits(&self, permits: u64) -> Result<bool> {
        self.rt.block_on(self.inner.try_set_permits(permits))
    }

    /// Add permits, as [`crate::LeasedSemaphore::add_permits`].
    ///
    /// # Errors
    /// As [`crate::LeasedSemaphore::add_permits`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn add_permits(&self, permits: u64) -> Result<u64> {
        self.rt.block_on(self.inner.add_permits(permits))
    }

    /// Sets the number of permits, keeping held permits valid, as
    /// [`crate::LeasedSemaphore::set_permits`].
    ///
    /// Returns the number before.
    ///
    /// # Errors
    /// As [`crate::LeasedSemaphore::set_permits`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn set_permits(&self, permits: u64) -> Result<u64> {
        self.rt.block_on(self.inner.set_permits(permits))
    }

    /// The number of permits, available plus leased, as
    /// [`crate::LeasedSemaphore::total_permits`].
    ///
    /// # Errors
    /// As [`crate::LeasedSemaphore::total_permits`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn total_permits(&self) -> Result<u64> {
        self.rt.block_on(self.inner.total_permits())
    }

    /// `(available, leased)` permits, as [`crate::LeasedSemaphore::permits`].
    ///
    /// # Errors
    /// As [`crate::LeasedSemaphore::permits`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn permits(&self) -> Result<(u64, u64)> {
        self.rt.block_on(self.inner.permits())
    }

    /// Permits free now, as [`crate::LeasedSemaphore::available_permits`].
    ///
    /// # Errors
    /// As [`crate::LeasedSemaphore::available_permits`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn available_permits(&self) -> Result<u64> {
        self.rt.block_on(self.inner.available_permits())
    }

    /// Returns the number of permits free now as stored (below zero while a shrink waits), as
    /// [`crate::LeasedSemaphore::available_permits_signed`].
    ///
    /// # Errors
    /// As [`crate::LeasedSemaphore::available_permits_signed`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn available_permits_signed(&self) -> Result<i64> {
        self.rt.block_on(self.inner.available_permits_signed())
    }

    /// This semaphore taking permits with `lease`, as [`crate::LeasedSemaphore::lease`].
    /// No I/O.
    pub fn lease(&self, lease: Duration) -> LeasedSemaphore {
        LeasedSemaphore {
            inner: self.inner.lease(lease),
            rt: self.rt.clone(),
        }
    }

    /// A permit, waiting up to the client's default wait, as
    /// [`crate::LeasedSemaphore::acquire`].
    ///
    /// # Errors
    /// As [`crate::LeasedSemaphore::acquire`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn acquire(&self) -> Result<LeasedPermit> {
        self.rt.acquire(self.inner.acquire())
    }

    /// A permit if one is free now, as [`crate::LeasedSemaphore::try_acquire`].
    ///
    /// # Errors
    /// As [`crate::LeasedSemaphore::try_acquire`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire(&self) -> Result<Option<LeasedPermit>> {
        self.rt.try_acquire(self.inner.try_acquire())
    }

    /// A permit, waiting at most `wait`, as [`crate::LeasedSemaphore::try_acquire_for`].
    ///
    /// # Errors
    /// As [`crate::LeasedSemaphore::try_acquire_for`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<LeasedPermit>> {
        self.rt.try_acquire(self.inner.try_acquire_for(wait))
    }
}

/// A permit of a [`LeasedSemaphore`], blocking form of [`crate::LeasedPermit`]: a [`Guard`]
/// over it, with a lease.
///
/// Given back by [`release`](Guard::release) or when dropped (synchronously, bounded by twice
/// the command timeout; see the [module docs](super)).
pub type LeasedPermit = Guard<crate::LeasedPermit>;

impl Guard<crate::LeasedPermit> {
    /// The permit's id.
    pub fn id(&self) -> &str {
        self.get().id()
    }

    /// Has the client's watchdog extend the permit while it is held, as
    /// [`crate::LeasedPermit::keep_alive`].
    ///
    /// # Errors
    /// As [`crate::LeasedPermit::keep_alive`].
    pub fn keep_alive(&mut self, lease: Duration) -> Result<()> {
        self.with_mut(|p| p.keep_alive(lease))
    }
}
