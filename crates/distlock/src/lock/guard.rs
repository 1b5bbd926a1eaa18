//! [`LockGuard`]: one hold of a lock of the family (plain, fair, read or write side).

use std::fmt;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::raw::not_held_reason;
use super::{FencingToken, Lock, Owner};
use crate::error::{Error, NotHeldReason, Result};
use crate::holds::HoldId;
use crate::keys;
use crate::watchdog::Registration;

/// One hold of a [`Lock`]. Release it with [`LockGuard::release`]; dropping it releases in
/// the background (never blocking the runtime) and stops its renewal.
///
/// Local accessors ([`fencing_token`](LockGuard::fencing_token), [`owner`](LockGuard::owner),
/// [`valid_until`](LockGuard::valid_until), [`hold_count`](LockGuard::hold_count)) do no
/// I/O. The guard is `Send` and `Sync`: it can be released from any task.
#[must_use = "dropping the guard releases the lock at once; bind it to a variable"]
pub struct LockGuard {
    state: Option<GuardState>,
}

struct GuardState {
    lock: Lock,
    owner: Owner,
    token: FencingToken,
    hold_count: u32,
    lease: Duration,
    registration: Registration,
    /// This hold in the client's registry (released at shutdown if still live).
    hold: HoldId,
}

impl fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            Some(s) => f
                .debug_struct("LockGuard")
                .field("key", &s.lock.inner.names.key)
                .field("owner", &s.owner)
                .field("token", &s.token)
                .field("hold_count", &s.hold_count)
                .finish(),
            None => f.write_str("LockGuard(released)"),
        }
    }
}

impl LockGuard {
    pub(super) fn new(
        lock: Lock,
        owner: Owner,
        token: FencingToken,
        hold_count: u32,
        lease: Duration,
        registration: Registration,
        hold: HoldId,
    ) -> LockGuard {
        LockGuard {
            state: Some(GuardState {
                lock,
                owner,
                token,
                hold_count,
                lease,
                registration,
                hold,
            }),
        }
    }

    fn state(&self) -> &GuardState {
        self.state.as_ref().expect("guard used after release")
    }

    /// The lock this guard holds.
    pub fn lock(&self) -> &Lock {
        &self.state().lock
    }

    /// The fencing token of this grant (re-entry returns the holder's current token).
    pub fn fencing_token(&self) -> FencingToken {
        self.state().token
    }

    /// The owner this guard holds for.
    pub fn owner(&self) -> &Owner {
        &self.state().owner
    }

    /// The owner's hold count right after this guard was granted (1 for a first grant).
    pub fn hold_count(&self) -> u32 {
        self.state().hold_count
    }

    /// The lease this guard was granted with (the watchdog lease when none was set).
    pub fn lease(&self) -> Duration {
        self.state().lease
    }

    /// Until when the lock is surely ours by the local monotonic clock: the start of the
    /// latest successful grant, renewal or extension, plus its lease, minus drift (1 % of
    /// the lease + 2 ms). No I/O.
    pub fn valid_until(&self) -> std::time::Instant {
        self.state().registration.lease().valid_until().into_std()
    }

    /// Whether the lease is known lost (by a renewal, or its local deadline passed). No I/O;
    /// use [`LockGuard::is_held`] to ask the server.
    pub fn is_lost(&self) -> bool {
        self.state().registration.lease().is_lost()
    }

    /// Resolves when the lease is lost: the watchdog found the lock gone or held by another
    /// owner, or the lease ended locally before a renewal (or, with an explicit lease,
    /// before an [`extend`](LockGuard::extend)). Never resolves while the lease is kept.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + '_ {
        self.state().registration.lease().lost()
    }

    /// Take one more hold with the same owner (hold count + 1, lease reset) and return its
    /// guard; each guard releases one hold.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when the lock is no longer held by this owner (it is not
    /// granted anew); server failures.
    ///
    /// # Cancel safety
    /// Cancel safe in that a resent request never counts two holds; a hold granted after the
    /// future was dropped stays until the owner's last release or the lease ends.
    pub async fn reenter(&self) -> Result<LockGuard> {
        let s = self.state();
        s.lock.nest_as(&s.owner, s.lease).await
    }

    /// Whether the server still has this owner's hold.
    ///
    /// # Errors
    /// Server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn is_held(&self) -> Result<bool> {
        let s = self.state();
        let held: bool = s
            .lock
            .backend()
            .query(
                &s.lock.context("is_held"),
                redis::cmd("HEXISTS")
                    .arg(&s.lock.inner.names.key)
                    .arg(s.lock.inner.raw.field(&s.owner)),
            )
            .await?;
        if !held {
            s.registration.lease().mark_lost();
        }
        Ok(held)
    }

    /// Time left on the lease by the server's clock (PTTL).
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when this owner no longer holds the lock; server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn remaining(&self) -> Result<Duration> {
        let s = self.state();
        let (count, _, pttl) = s.lock.inspect(&s.owner).await?;
        if count == 0 {
            let reason = if pttl == -2 {
                NotHeldReason::Gone
            } else {
                NotHeldReason::HeldByOther
            };
            return Err(Error::not_held(&s.lock.inner.names.name, reason));
        }
        Ok(Duration::from_millis(pttl.max(0) as u64))
    }

    /// Set the lock's TTL to `lease` from now, if this owner still holds it. Under the
    /// watchdog, its next renewal sets the TTL back to the watchdog lease.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a zero or overflowing `lease`; [`ErrorKind::NotHeld`]
    /// when the lock was lost (the lost signal fires too); server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: PEXPIRE is idempotent.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        let lease_ms = keys::lease_ms("extension", lease)?;
        let s = self.state();
        let started = Instant::now();
        match s.lock.renew_one(&s.owner, lease_ms).await? {
            1 => {
                // Exactly, not at least: the extension may have shortened the TTL.
                s.registration
                    .lease()
                    .set_valid_until(started + lease.saturating_sub(keys::drift(lease)));
                Ok(())
            }
            code => {
                s.registration.lease().mark_lost();
                Err(Error::not_held(
                    &s.lock.inner.names.name,
                    not_held_reason(code).unwrap_or(NotHeldReason::Gone),
                ))
            }
        }
    }

    /// Release this guard's hold: decrement the hold count; on the last hold delete the key
    /// and wake one waiter (Redisson's unlock script). Idempotent under resends (unlock latch
    /// per request, seed 004). Renewal of the owner stops once none of its guards is left.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when the lock had expired or was taken by another owner
    /// ([`Error::not_held_reason`] tells which); nothing is changed then. Server failures.
    ///
    /// # Cancel safety
    /// Not cancel safe in the sense that a dropped release may or may not have happened; if
    /// it did not, the lease ends it.
    pub async fn release(mut self) -> Result<()> {
        let s = self.state.take().expect("guard released twice");
        let GuardState {
            lock,
            owner,
            lease,
            registration,
            hold,
            ..
        } = s;
        drop(registration);
        if lock.inner.client.inner.holds.take(&hold).is_none() {
            // Client::shutdown released it already.
            return Err(Error::not_held(&lock.inner.names.name, NotHeldReason::Gone));
        }
        lock.release_hold(&owner, lease).await
    }

    /// Stop tracking this hold without releasing it: no renewal, no release on drop. The
    /// lock stays until its lease ends, or until the returned owner is
    /// [adopted](Lock::adopt) (e.g. by another process) and released.
    pub fn forget(mut self) -> Owner {
        let s = self.state.take().expect("guard released twice");
        s.lock.inner.client.inner.holds.take(&s.hold);
        s.owner
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let Some(s) = self.state.take() else { return };
        let GuardState {
            lock,
            owner,
            lease,
            registration,
            hold,
            ..
        } = s;
        drop(registration);
        let client = &lock.inner.client.inner;
        if client.holds.take(&hold).is_some() {
            client
                .holds
                .release_in_background(&client.backend, lock.release_request(&owner, lease));
        }
    }
}
