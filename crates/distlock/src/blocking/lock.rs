//! Blocking forms of the lock family: [`Lock`], [`FairLock`], [`RwLock`] and their guards.

use std::fmt;
use std::time::Duration;

use super::{Held, Rt};
use crate::error::Result;
use crate::{FencingToken, LockStatus, Owner};

/// A reentrant lock, blocking form of [`crate::Lock`] (Redisson's `RLock` layout).
///
/// Cheap to clone. Made by [`Client::lock`](super::Client::lock).
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

    fn guard(&self, guard: crate::LockGuard) -> LockGuard {
        LockGuard(Held::new(guard, self.rt.clone()))
    }

    acquire_verbs!("Lock" => LockGuard);

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

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The lock's Redis key.
    pub fn key(&self) -> &str {
        self.inner.key()
    }

    /// The async lock underneath.
    pub fn as_async(&self) -> &crate::Lock {
        &self.inner
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
        self.rt
            .block_on(self.inner.acquire_as(owner))
            .map(|g| self.guard(g))
    }

    /// Take over a hold that `owner` has now, as [`crate::Lock::adopt`].
    ///
    /// # Errors
    /// As [`crate::Lock::adopt`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn adopt(&self, owner: Owner) -> Result<LockGuard> {
        self.rt
            .block_on(self.inner.adopt(owner))
            .map(|g| self.guard(g))
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

/// The accessors every lock-family guard shares, blocking where the async one awaits.
macro_rules! guard_accessors {
    ($guard:ident) => {
        impl $guard {
            /// The fencing token of this grant, as [`crate::LockGuard::fencing_token`].
            pub fn fencing_token(&self) -> FencingToken {
                self.0.get().fencing_token()
            }

            /// The owner of this hold, as [`crate::LockGuard::owner`].
            pub fn owner(&self) -> &Owner {
                self.0.get().owner()
            }

            /// The hold count right after this grant, as [`crate::LockGuard::hold_count`].
            pub fn hold_count(&self) -> u32 {
                self.0.get().hold_count()
            }

            /// The lease (the watchdog lease when none was set), as
            /// [`crate::LockGuard::lease`].
            pub fn lease(&self) -> Duration {
                self.0.get().lease()
            }

            /// Returns the instant until which the hold is surely ours by the local monotonic
            /// clock, as [`crate::LockGuard::valid_until`](crate::Lease::valid_until).
            pub fn valid_until(&self) -> std::time::Instant {
                crate::Lease::valid_until(self.0.get())
            }

            lost_verbs!();

            /// Time left on the lease by the server's clock, as [`crate::LockGuard::remaining`].
            ///
            /// # Errors
            /// As [`crate::LockGuard::remaining`].
            ///
            /// # Panics
            /// Inside an async runtime (see the [module docs](super#panics)).
            pub fn remaining(&self) -> Result<Duration> {
                self.0.block_on(self.0.get().remaining())
            }

            /// Stops tracking this hold without releasing it, as [`crate::LockGuard::forget`]:
            /// no renewal, no release on drop; the lock stays until its lease ends.
            pub fn forget(self) -> Owner {
                self.0.into_inner().forget()
            }

            /// Ask the server whether it still has this owner's hold, as
            /// [`crate::LockGuard::is_held`].
            ///
            /// # Errors
            /// Server failures.
            ///
            /// # Panics
            /// Inside an async runtime (see the [module docs](super#panics)).
            pub fn is_held(&self) -> Result<bool> {
                self.0.block_on(self.0.get().is_held())
            }

            /// Sets the TTL to `lease` from now if still held, as
            /// [`crate::LockGuard::extend`](crate::Lease::extend).
            ///
            /// # Errors
            /// As [`crate::LockGuard::extend`](crate::Lease::extend).
            ///
            /// # Panics
            /// Inside an async runtime (see the [module docs](super#panics)).
            pub fn extend(&self, lease: Duration) -> Result<()> {
                self.0.block_on(crate::Lease::extend(self.0.get(), lease))
            }

            /// Releases this hold and waits for the server's answer, as the async guard's
            /// `release`.
            ///
            /// Dropping the guard releases too (synchronously, bounded; errors only logged).
            ///
            /// # Errors
            /// As [`crate::LockGuard::release`](crate::Release::release): [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld)
            /// when the lease had ended or another owner holds the lock; server failures.
            ///
            /// # Panics
            /// Inside an async runtime (see the [module docs](super#panics)).
            pub fn release(self) -> Result<()> {
                self.0.release()
            }
        }
    };
}

/// One hold of a [`Lock`], blocking form of [`crate::LockGuard`] (a [`FairLock`] gives a
/// [`FairLockGuard`]).
///
/// Released by [`release`](LockGuard::release), or when dropped: synchronously, bounded by twice
/// the command timeout (see the [module docs](super)).
#[must_use = "dropping the guard releases the lock at once; bind it to a variable"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct LockGuard(Held<crate::LockGuard>);

guard_accessors!(LockGuard);

impl LockGuard {
    /// One more hold with the same owner, as [`crate::LockGuard::reenter`].
    ///
    /// # Errors
    /// As [`crate::LockGuard::reenter`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn reenter(&self) -> Result<LockGuard> {
        let g = self.0.block_on(self.0.get().reenter())?;
        Ok(LockGuard(self.0.wrap(g)))
    }

    /// Returns the async guard underneath (its drop then releases in the background).
    ///
    /// It runs on this blocking client's runtime: keep the client (or another of its handles) alive
    /// while the async guard is in use, or its watchdog and connections stop with it.
    pub fn into_async(self) -> crate::LockGuard {
        self.0.into_inner()
    }
}

/// One hold of a fair lock, blocking form of [`crate::FairLockGuard`].
///
/// Released by [`release`](FairLockGuard::release), or when dropped: synchronously, bounded by
/// twice the command timeout (see the [module docs](super)).
#[must_use = "dropping the guard releases the lock at once; bind it to a variable"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct FairLockGuard(Held<crate::FairLockGuard>);

guard_accessors!(FairLockGuard);

impl FairLockGuard {
    /// One more hold with the same owner, as [`crate::FairLockGuard::reenter`].
    ///
    /// # Errors
    /// As [`crate::FairLockGuard::reenter`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn reenter(&self) -> Result<FairLockGuard> {
        let g = self.0.block_on(self.0.get().reenter())?;
        Ok(FairLockGuard(self.0.wrap(g)))
    }

    /// The async guard underneath (its drop then releases in the background), as
    /// [`LockGuard::into_async`].
    pub fn into_async(self) -> crate::FairLockGuard {
        self.0.into_inner()
    }
}

/// A fair (FIFO) lock, blocking form of [`crate::FairLock`].
///
/// Cheap to clone. Made by [`Client::fair_lock`](super::Client::fair_lock).
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

    fn guard(&self, guard: crate::FairLockGuard) -> FairLockGuard {
        FairLockGuard(Held::new(guard, self.rt.clone()))
    }

    acquire_verbs!("FairLock" => FairLockGuard);

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

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// The lock's Redis key.
    pub fn key(&self) -> &str {
        self.inner.key()
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

/// A read-write lock, blocking form of [`crate::RwLock`] (Redisson's `RReadWriteLock` layout).
///
/// Cheap to clone. Made by [`Client::rw_lock`](super::Client::rw_lock).
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

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// A read hold, waiting up to the client's default wait, as [`crate::RwLock::read`].
    ///
    /// # Errors
    /// As [`crate::RwLock::read`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn read(&self) -> Result<RwLockReadGuard> {
        let g = self.rt.block_on(self.inner.read())?;
        Ok(RwLockReadGuard(Held::new(g, self.rt.clone())))
    }

    /// A read hold if one is free now, as [`crate::RwLock::try_read`].
    ///
    /// # Errors
    /// As [`crate::RwLock::try_read`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_read(&self) -> Result<Option<RwLockReadGuard>> {
        let g = self.rt.block_on(self.inner.try_read())?;
        Ok(g.map(|g| RwLockReadGuard(Held::new(g, self.rt.clone()))))
    }

    /// A read hold, waiting at most `wait`, as [`crate::RwLock::try_read_for`].
    ///
    /// # Errors
    /// As [`crate::RwLock::try_read_for`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_read_for(&self, wait: Duration) -> Result<Option<RwLockReadGuard>> {
        let g = self.rt.block_on(self.inner.try_read_for(wait))?;
        Ok(g.map(|g| RwLockReadGuard(Held::new(g, self.rt.clone()))))
    }

    /// The write hold, waiting up to the client's default wait, as [`crate::RwLock::write`].
    ///
    /// # Errors
    /// As [`crate::RwLock::write`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn write(&self) -> Result<RwLockWriteGuard> {
        let g = self.rt.block_on(self.inner.write())?;
        Ok(RwLockWriteGuard(Held::new(g, self.rt.clone())))
    }

    /// The write hold if it is free now, as [`crate::RwLock::try_write`].
    ///
    /// # Errors
    /// As [`crate::RwLock::try_write`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_write(&self) -> Result<Option<RwLockWriteGuard>> {
        let g = self.rt.block_on(self.inner.try_write())?;
        Ok(g.map(|g| RwLockWriteGuard(Held::new(g, self.rt.clone()))))
    }

    /// The write hold, waiting at most `wait`, as [`crate::RwLock::try_write_for`].
    ///
    /// # Errors
    /// As [`crate::RwLock::try_write_for`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_write_for(&self, wait: Duration) -> Result<Option<RwLockWriteGuard>> {
        let g = self.rt.block_on(self.inner.try_write_for(wait))?;
        Ok(g.map(|g| RwLockWriteGuard(Held::new(g, self.rt.clone()))))
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

/// A read hold of an [`RwLock`], blocking form of [`crate::RwLockReadGuard`].
///
/// Released when dropped, as [`LockGuard`].
#[must_use = "dropping the guard releases the read lock at once"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct RwLockReadGuard(Held<crate::RwLockReadGuard>);

guard_accessors!(RwLockReadGuard);

impl RwLockReadGuard {
    /// One more read hold with the same owner, as [`crate::RwLockReadGuard::reenter`].
    ///
    /// # Errors
    /// As [`crate::RwLockReadGuard::reenter`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn reenter(&self) -> Result<RwLockReadGuard> {
        let g = self.0.block_on(self.0.get().reenter())?;
        Ok(RwLockReadGuard(self.0.wrap(g)))
    }
}

/// The write hold of an [`RwLock`], blocking form of [`crate::RwLockWriteGuard`].
///
/// Released when dropped, as [`LockGuard`].
#[must_use = "dropping the guard releases the write lock at once"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct RwLockWriteGuard(Held<crate::RwLockWriteGuard>);

guard_accessors!(RwLockWriteGuard);

impl RwLockWriteGuard {
    /// One more write hold with the same owner, as [`crate::RwLockWriteGuard::reenter`].
    ///
    /// # Errors
    /// As [`crate::RwLockWriteGuard::reenter`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn reenter(&self) -> Result<RwLockWriteGuard> {
        let g = self.0.block_on(self.0.get().reenter())?;
        Ok(RwLockWriteGuard(self.0.wrap(g)))
    }

    /// A read hold taken while writing, as [`crate::RwLockWriteGuard::downgrade`].
    ///
    /// # Errors
    /// As [`crate::RwLockWriteGuard::downgrade`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn downgrade(&self) -> Result<RwLockReadGuard> {
        let g = self.0.block_on(self.0.get().downgrade())?;
        Ok(RwLockReadGuard(self.0.wrap(g)))
    }
}
