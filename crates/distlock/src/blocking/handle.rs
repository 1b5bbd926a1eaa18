//! [`LockHandle`]: the one blocking lock handle of the lock family, with the verbs every kind
//! shares written once; each kind's own are in `lock.rs` ([`Lock`](super::Lock),
//! [`FairLock`](super::FairLock)) and `rwlock.rs` ([`RwLock`](super::RwLock)).

use std::fmt;
use std::time::Duration;

use super::guard::Named;
use super::{Client, Rt};
use crate::error::Result;
use crate::kind::LockKind;

/// A lock of the lock family, blocking form of [`crate::LockHandle`], typed by its kind `K`:
/// code names it by its alias, [`Lock`](super::Lock) (`LockHandle<Plain>`),
/// [`FairLock`](super::FairLock) (`LockHandle<Fair>`) or [`RwLock`](super::RwLock)
/// (`LockHandle<ReadWrite>`).
///
/// The verbs every kind has (its names, client, lease and hand-off settings, whether and how
/// long it is held) are written once here; each kind adds its own (a plain lock's
/// `acquire_as`, a read-write lock's `read` and `write`, …), as on the async handle. Cheap to
/// clone. Made by [`Client::lock`], [`Client::fair_lock`] and [`Client::rw_lock`].
pub struct LockHandle<K: LockKind> {
    pub(super) inner: crate::LockHandle<K>,
    pub(super) rt: Rt,
}

impl<K: LockKind> Clone for LockHandle<K> {
    fn clone(&self) -> Self {
        LockHandle::new(self.inner.clone(), self.rt.clone())
    }
}

impl<K: LockKind + Named> fmt::Debug for LockHandle<K> {
    /// `blocking::Lock(…)`, `blocking::FairLock(…)` or `blocking::RwLock(…)` around the async
    /// handle.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple(K::NAME.unwrap_or("blocking::LockHandle"))
            .field(&self.inner)
            .finish()
    }
}

impl<K: LockKind> LockHandle<K> {
    pub(super) fn new(inner: crate::LockHandle<K>, rt: Rt) -> LockHandle<K> {
        LockHandle { inner, rt }
    }

    /// This lock with an explicit lease, as [`crate::LockHandle::lease`].
    pub fn lease(&self, lease: Duration) -> LockHandle<K> {
        LockHandle::new(self.inner.lease(lease), self.rt.clone())
    }

    /// The explicit lease, if one was set with [`lease`](LockHandle::lease), as
    /// [`crate::LockHandle::lease_setting`].
    pub fn lease_setting(&self) -> Option<Duration> {
        self.inner.lease_setting()
    }

    /// The hand-off policy (a read-write lock's writers'), as
    /// [`crate::LockHandle::handoff_setting`].
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

    /// The lock's wake channel, as [`crate::LockHandle::channel`].
    pub fn channel(&self) -> &str {
        self.inner.channel()
    }

    /// Returns the key of the fencing counter this lock draws its tokens from, as
    /// [`crate::LockHandle::fencing_counter_key`].
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
    pub fn as_async(&self) -> &crate::LockHandle<K> {
        &self.inner
    }

    /// Whether anyone holds the lock (for reading or writing), as
    /// [`crate::LockHandle::is_locked`].
    ///
    /// # Errors
    /// As [`crate::LockHandle::is_locked`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn is_locked(&self) -> Result<bool> {
        self.rt.block_on(self.inner.is_locked())
    }

    /// Time left on the lock's lease, whoever holds it, as [`crate::LockHandle::remaining`].
    ///
    /// # Errors
    /// As [`crate::LockHandle::remaining`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn remaining(&self) -> Result<Option<Duration>> {
        self.rt.block_on(self.inner.remaining())
    }
}
