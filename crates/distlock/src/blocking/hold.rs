//! Blocking forms of the lock family's guards: [`HoldGuard`], whose kinds are [`LockGuard`],
//! [`FairLockGuard`], [`RwLockReadGuard`] and [`RwLockWriteGuard`], and the verbs of a hold
//! (those of every guard, and of one with a lease or a fencing token, are [`Guard`]'s).

use std::time::Duration;

use super::Guard;
use crate::error::Result;
use crate::kind::HoldKind;
use crate::Owner;

/// One hold of a lock of the family, blocking form of [`crate::HoldGuard`]: a [`Guard`] over
/// it.
///
/// `K` is the kind of hold ([`Plain`](crate::kind::Plain), [`Fair`](crate::kind::Fair),
/// [`Read`](crate::kind::Read) or [`Write`](crate::kind::Write)); code names it by its alias:
/// [`LockGuard`], [`FairLockGuard`], [`RwLockReadGuard`] or [`RwLockWriteGuard`]. Besides the
/// verbs of every guard with a lease and a fencing token, a hold has those of
/// `impl Guard<crate::HoldGuard<K>>` ([`reenter`](Guard::reenter), [`is_held`](Guard::is_held),
/// …); [`downgrade`](Guard::downgrade) is a write hold's own.
///
/// # Examples
/// ```no_run
/// use distlock::blocking::HoldGuard;
/// use distlock::kind::HoldKind;
///
/// // Any kind of hold: a plain, fair, read or write guard.
/// fn still_held<K: HoldKind>(guard: &HoldGuard<K>) -> distlock::Result<bool> {
///     guard.is_held()
/// }
///
/// fn main() -> distlock::Result<()> {
///     let client = distlock::blocking::Client::connect("redis://127.0.0.1/")?;
///     let guard = client.fair_lock("tickets").acquire()?;
///     assert!(still_held(&guard)?);
///     guard.release()
/// }
/// ```
///
/// A fair lock's guard is not a plain lock's:
/// ```compile_fail
/// # fn f(client: distlock::blocking::Client) -> distlock::Result<()> {
/// let guard: distlock::blocking::LockGuard = client.fair_lock("tickets").acquire()?;
/// # Ok(()) }
/// ```
pub type HoldGuard<K> = Guard<crate::HoldGuard<K>>;

/// One hold of a [`Lock`](super::Lock), blocking form of [`crate::LockGuard`].
///
/// A re-entry ([`reenter`](Guard::reenter)) keeps the fencing token.
pub type LockGuard = Guard<crate::LockGuard>;

/// One hold of a [`FairLock`](super::FairLock), blocking form of [`crate::FairLockGuard`].
///
/// The verbs of a [`LockGuard`]; a re-entry keeps the fencing token as a plain lock's does.
pub type FairLockGuard = Guard<crate::FairLockGuard>;

/// A read hold of an [`RwLock`](super::RwLock), blocking form of [`crate::RwLockReadGuard`].
///
/// Many readers hold the lock at once; each read hold has its own lease and fencing token.
pub type RwLockReadGuard = Guard<crate::RwLockReadGuard>;

/// The write hold of an [`RwLock`](super::RwLock), blocking form of
/// [`crate::RwLockWriteGuard`].
///
/// Besides the verbs every hold has, a writer can take a read hold while writing
/// ([`downgrade`](Guard::downgrade)).
pub type RwLockWriteGuard = Guard<crate::RwLockWriteGuard>;

impl<K: HoldKind> Guard<crate::HoldGuard<K>> {
    /// The lease this guard was granted with (the watchdog lease when none was set), as
    /// [`crate::HoldGuard::lease`]. No I/O.
    pub fn lease(&self) -> Duration {
        self.get().lease()
    }

    /// Time left on the lease by the server's clock, as [`crate::HoldGuard::remaining`].
    ///
    /// # Errors
    /// As [`crate::HoldGuard::remaining`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn remaining(&self) -> Result<Duration> {
        self.block_on(self.get().remaining())
    }

    /// Stops tracking this hold without releasing it, as [`crate::HoldGuard::forget`]: no
    /// renewal, no release on drop; the lock stays until its lease ends.
    pub fn forget(self) -> Owner {
        self.into_async().forget()
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
        self.block_on(self.get().is_held())
    }

    /// One more hold with the same owner, as [`crate::HoldGuard::reenter`].
    ///
    /// # Errors
    /// As [`crate::HoldGuard::reenter`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn reenter(&self) -> Result<HoldGuard<K>> {
        let g = self.block_on(self.get().reenter())?;
        Ok(self.wrap(g))
    }
}

impl Guard<crate::RwLockWriteGuard> {
    /// A read hold taken while writing, as [`crate::RwLockWriteGuard::downgrade`].
    ///
    /// # Errors
    /// As [`crate::RwLockWriteGuard::downgrade`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn downgrade(&self) -> Result<RwLockReadGuard> {
        let g = self.block_on(self.get().downgrade())?;
        Ok(self.wrap(g))
    }
}
