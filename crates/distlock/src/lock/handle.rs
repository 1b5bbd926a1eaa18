//! [`LockHandle`]: the one base under the lock family's typed fronts ([`Lock`](super::Lock),
//! [`FairLock`](super::FairLock), [`RwLock`](super::RwLock) are its kinds), with the verbs
//! every kind shares written once.

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use super::{Handoff, LockCore};
use crate::client::Client;
use crate::conn::Resend;
use crate::error::Result;
use crate::kind::LockKind;

/// A lock of the lock family, typed by its kind `K`: [`Lock`](crate::Lock) (`LockHandle<Plain>`),
/// [`FairLock`](crate::FairLock) (`LockHandle<Fair>`) and [`RwLock`](crate::RwLock)
/// (`LockHandle<ReadWrite>`), as lock_api puts `Mutex<R, T>` over a raw lock.
///
/// The verbs every kind has (its names, client, lease and hand-off settings, whether and how
/// long it is held) are written once here; each kind adds its own (a plain lock's
/// `acquire_as`, a read-write lock's `read` and `write`, …), so what a kind cannot do does not
/// compile. Cheap to clone: clones are the same lock with the same settings. No I/O until a
/// verb that says so.
pub struct LockHandle<K: LockKind> {
    /// The engine over the kind's raw lock (a read-write lock's read side).
    pub(crate) core: LockCore,
    /// A read-write lock's write side; `None` for the other kinds.
    pub(super) write: Option<LockCore>,
    /// Its waiters' hand-off policy and liveness (a read-write lock's writers'), kept here so
    /// no raw kind is asked.
    pub(super) handoff: Handoff,
    pub(super) liveness: Duration,
    kind: PhantomData<fn() -> K>,
}

impl<K: LockKind> Clone for LockHandle<K> {
    fn clone(&self) -> Self {
        LockHandle {
            core: self.core.clone(),
            write: self.write.clone(),
            handoff: self.handoff,
            liveness: self.liveness,
            kind: PhantomData,
        }
    }
}

impl<K: LockKind> fmt::Debug for LockHandle<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.core.fmt(f)
    }
}

impl<K: LockKind> LockHandle<K> {
    /// A handle over `core` (and a read-write lock's `write` side) with these settings.
    pub(super) fn from_parts(
        core: LockCore,
        write: Option<LockCore>,
        handoff: Handoff,
        liveness: Duration,
    ) -> Self {
        LockHandle {
            core,
            write,
            handoff,
            liveness,
            kind: PhantomData,
        }
    }

    /// The side force-unlock and status ask: the write side of a read-write lock, the lock
    /// itself otherwise.
    pub(super) fn whole(&self) -> &LockCore {
        self.write.as_ref().unwrap_or(&self.core)
    }

    /// Returns the same lock with an explicit lease.
    ///
    /// Guards it grants expire after `lease` unless [extended](crate::Lease::extend), and no
    /// watchdog renews them (Redisson's `lock(leaseTime, unit)`). The lease is a [`Duration`]
    /// in whole milliseconds, checked (at least 1 ms, at most 365 days) when the lock is
    /// acquired. No I/O.
    pub fn lease(&self, lease: Duration) -> Self {
        LockHandle::from_parts(
            self.core.lease(lease),
            self.write.as_ref().map(|w| w.lease(lease)),
            self.handoff,
            self.liveness,
        )
    }

    /// The explicit lease, if one was set with [`lease`](LockHandle::lease).
    pub fn lease_setting(&self) -> Option<Duration> {
        self.core.inner.lease
    }

    /// The hand-off policy of its waiters (a read-write lock's writers), set with the kind's
    /// `handoff`.
    pub fn handoff_setting(&self) -> Handoff {
        self.handoff
    }

    /// The lock's name, as given to the client.
    pub fn name(&self) -> &str {
        &self.core.inner.names.name
    }

    /// The Redis key: key prefix + name.
    pub fn key(&self) -> &str {
        &self.core.inner.names.key
    }

    /// The wake channel, Redisson's for the kind: `redisson_lock__channel:{key}` for a plain
    /// or fair lock (a fair lock's waiters are woken on channels of their own),
    /// `redisson_rwlock:{key}` for a read-write lock.
    pub fn channel(&self) -> &str {
        self.core.inner.names.channel()
    }

    /// Returns the key of the fencing counter this lock draws its tokens from.
    ///
    /// The counter of the lock key's cluster hash slot,
    /// `<key prefix>distlock:fencing-counter:{<slot tag>}`
    /// ([`keys::fencing_counter`](crate::keys::fencing_counter)), shared with the other names
    /// in that slot.
    pub fn fencing_counter_key(&self) -> String {
        self.core.inner.names.counter.clone()
    }

    /// The client this lock belongs to.
    pub fn client(&self) -> &Client {
        &self.core.inner.client
    }

    /// Whether anyone holds the lock (the key exists), whoever it is and in whichever mode.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an empty or oversized
    /// name; server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn is_locked(&self) -> Result<bool> {
        self.core.check()?;
        self.core
            .backend()
            .query(
                &self.core.context("is_locked"),
                redis::cmd("EXISTS").arg(self.key()),
            )
            .await
    }

    /// Time left on the lock's lease, whoever holds it: `None` when it is free or has no TTL.
    ///
    /// # Errors
    /// As [`is_locked`](LockHandle::is_locked).
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn remaining(&self) -> Result<Option<Duration>> {
        self.core.check()?;
        let pttl: i64 = self
            .core
            .backend()
            .query(
                &self.core.context("remaining"),
                redis::cmd("PTTL").arg(self.key()),
            )
            .await?;
        Ok((pttl >= 0).then(|| Duration::from_millis(pttl as u64)))
    }

    /// Deletes the lock whoever holds it, tells its holders, and wakes as the kind does
    /// (the kind's `force_unlock` says how); whether it was held.
    pub(super) async fn force_unlock_whole(&self) -> Result<bool> {
        let core = self.whole();
        core.check()?;
        let backend = core.backend();
        let floor = backend.grant_floor(core.inner.client.fencing_floor());
        let inv = core.inner.raw.force_unlock(&core.inner.names, &floor);
        // {1, <owner field>...} when deleted, {0} when there was no lock.
        let mut reply: Vec<String> = backend
            .eval(&core.context("force_unlock"), &inv, Resend::Few)
            .await?;
        if reply.first().map(String::as_str) != Some("1") {
            return Ok(false);
        }
        reply.remove(0);
        crate::notice::tell_holders(backend, &core.inner.names.key, &reply).await;
        Ok(true)
    }
}
