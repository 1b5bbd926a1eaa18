//! Blocking form of the lock family's guards: one generic [`HoldGuard`], whose kinds are
//! [`LockGuard`], [`FairLockGuard`], [`RwLockReadGuard`] and [`RwLockWriteGuard`].

use std::fmt;
use std::time::{Duration, Instant};

use super::Held;
use crate::error::Result;
use crate::kind::{Fair, HoldKind, Plain, Read, Write};
use crate::{FencingToken, Owner};

/// One hold of a lock of the family, blocking form of [`crate::HoldGuard`].
///
/// `K` is the kind of hold ([`Plain`], [`Fair`], [`Read`] or [`Write`]); code names it by
/// its alias: [`LockGuard`], [`FairLockGuard`], [`RwLockReadGuard`] or [`RwLockWriteGuard`].
/// The verbs below are every kind's; [`downgrade`](HoldGuard::downgrade) is a write hold's
/// own.
///
/// Released by [`release`](HoldGuard::release), or when dropped: synchronously, bounded by
/// twice the command timeout (see the [module docs](super)).
///
/// # Examples
/// ```no_run
/// use distlock::blocking::HoldGuard;
/// use distlock::kind::HoldKind;
///
/// // Any kind of hold: a plain, fair, read or write guard.
/// fn token_of<K: HoldKind>(guard: &HoldGuard<K>) -> u128 {
///     guard.fencing_token().get()
/// }
///
/// fn main() -> distlock::Result<()> {
///     let client = distlock::blocking::Client::connect("redis://127.0.0.1/")?;
///     let rw = client.rw_lock("catalog");
///     let w = rw.write()?;
///     println!("writing under token {}", token_of(&w));
///     let r = w.downgrade()?; // a write hold's own verb
///     w.release()?;
///     println!("reading under token {}", token_of(&r));
///     r.release()
/// }
/// ```
///
/// A fair lock's guard is not a plain lock's:
/// ```compile_fail
/// # fn f(client: distlock::blocking::Client) -> distlock::Result<()> {
/// let guard: distlock::blocking::LockGuard = client.fair_lock("tickets").acquire()?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the hold at once; bind it to a variable"]
#[clippy::has_significant_drop]
pub struct HoldGuard<K: HoldKind>(pub(super) Held<crate::HoldGuard<K>>);

/// One hold of a [`Lock`](super::Lock), blocking form of [`crate::LockGuard`]: a
/// [`HoldGuard`] of kind [`Plain`].
///
/// A re-entry ([`reenter`](HoldGuard::reenter)) keeps the fencing token.
pub type LockGuard = HoldGuard<Plain>;

/// One hold of a [`FairLock`](super::FairLock), blocking form of [`crate::FairLockGuard`]: a
/// [`HoldGuard`] of kind [`Fair`].
///
/// The verbs of a [`LockGuard`]; a re-entry keeps the fencing token as a plain lock's does.
pub type FairLockGuard = HoldGuard<Fair>;

/// A read hold of an [`RwLock`](super::RwLock), blocking form of [`crate::RwLockReadGuard`]:
/// a [`HoldGuard`] of kind [`Read`].
///
/// Many readers hold the lock at once; each read hold has its own lease and fencing token.
pub type RwLockReadGuard = HoldGuard<Read>;

/// The write hold of an [`RwLock`](super::RwLock), blocking form of
/// [`crate::RwLockWriteGuard`]: a [`HoldGuard`] of kind [`Write`].
///
/// Besides the verbs every hold has, a writer can take a read hold while writing
/// ([`downgrade`](HoldGuard::downgrade)).
pub type RwLockWriteGuard = HoldGuard<Write>;

impl<K: HoldKind> HoldGuard<K> {
    /// Returns the fencing token of this grant, as [`crate::HoldGuard::fencing_token`]. No I/O.
    pub fn fencing_token(&self) -> FencingToken {
        self.0.get().fencing_token()
    }

    /// The owner this guard holds for, as [`crate::HoldGuard::owner`]. No I/O.
    pub fn owner(&self) -> &Owner {
        self.0.get().owner()
    }

    /// The owner's hold count right after this grant, as [`crate::HoldGuard::hold_count`].
    /// No I/O.
    pub fn hold_count(&self) -> u32 {
        self.0.get().hold_count()
    }

    /// The lease this guard was granted with (the watchdog lease when none was set), as
    /// [`crate::HoldGuard::lease`]. No I/O.
    pub fn lease(&self) -> Duration {
        self.0.get().lease()
    }

    /// Returns the instant until which the hold is surely ours by the local monotonic clock,
    /// as the async guard's [`valid_until`](crate::Lease::valid_until). No I/O.
    pub fn valid_until(&self) -> Instant {
        self.0.valid_until()
    }

    /// Returns whether the lease is known lost, without I/O, as the async guard's
    /// [`is_lost`](crate::Lease::is_lost).
    pub fn is_lost(&self) -> bool {
        self.0.is_lost()
    }

    /// Blocks until the lease is lost, as [`crate::HoldGuard::lost`] resolves.
    ///
    /// Never returns while it is kept (see [`lost_timeout`](HoldGuard::lost_timeout) for a
    /// bounded wait).
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn lost(&self) {
        self.0.lost()
    }

    /// Block until the lease is lost or `timeout` passed: `true` when it was lost.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn lost_timeout(&self, timeout: Duration) -> bool {
        self.0.lost_timeout(timeout)
    }

    /// Time left on the lease by the server's clock, as [`crate::HoldGuard::remaining`].
    ///
    /// # Errors
    /// As [`crate::HoldGuard::remaining`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn remaining(&self) -> Result<Duration> {
        self.0.block_on(self.0.get().remaining())
    }

    /// Stops tracking this hold without releasing it, as [`crate::HoldGuard::forget`]: no
    /// renewal, no release on drop; the lock stays until its lease ends.
    pub fn forget(self) -> Owner {
        self.0.into_inner().forget()
    }

    /// Ask the server whether it still has this owner's hold, as
    /// [`crate::HoldGuard::is_held`].
    ///
    /// # Errors
    /// Server failures.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn is_held(&self) -> Result<bool> {
        self.0.block_on(self.0.get().is_held())
    }

    /// Sets the TTL to `lease` from now if still held, as the async guard's
    /// [`extend`](crate::Lease::extend).
    ///
    /// # Errors
    /// As the async guard's [`extend`](crate::Lease::extend).
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn extend(&self, lease: Duration) -> Result<()> {
        self.0.extend(lease)
    }

    /// Releases this hold and waits for the server's answer, as
    /// [`crate::HoldGuard::release`].
    ///
    /// Dropping the guard releases too (synchronously, bounded; errors only logged).
    ///
    /// # Errors
    /// As [`crate::HoldGuard::release`]: [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld)
    /// when the lease had ended or another owner holds the lock; server failures.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn release(self) -> Result<()> {
        self.0.release()
    }

    /// One more hold with the same owner, as [`crate::HoldGuard::reenter`].
    ///
    /// # Errors
    /// As [`crate::HoldGuard::reenter`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn reenter(&self) -> Result<HoldGuard<K>> {
        let g = self.0.block_on(self.0.get().reenter())?;
        Ok(HoldGuard(self.0.wrap(g)))
    }

    /// Returns the async guard underneath (its drop then releases in the background).
    ///
    /// It runs on this blocking client's runtime: keep the client (or another of its handles)
    /// alive while the async guard is in use, or its watchdog and connections stop with it.
    pub fn into_async(self) -> crate::HoldGuard<K> {
        self.0.into_inner()
    }
}

impl HoldGuard<Write> {
    /// A read hold taken while writing, as [`crate::RwLockWriteGuard::downgrade`].
    ///
    /// # Errors
    /// As [`crate::RwLockWriteGuard::downgrade`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn downgrade(&self) -> Result<RwLockReadGuard> {
        let g = self.0.block_on(self.0.get().downgrade())?;
        Ok(HoldGuard(self.0.wrap(g)))
    }
}

impl<K: HoldKind> fmt::Debug for HoldGuard<K> {
    /// As the async guard's (`LockGuard(…)`, …).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple(K::GUARD).field(&self.0).finish()
    }
}
