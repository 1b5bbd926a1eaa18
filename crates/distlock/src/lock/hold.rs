//! [`Hold`]: one hold of a lock-family lock, under every guard front ([`LockGuard`](super::LockGuard) and the others).

use std::fmt;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::raw::not_held_reason;
use super::{FencingToken, LockCore, Owner};
use crate::error::{Error, NotHeldReason, Result};
use crate::keys;
use crate::registry::HoldId;
use crate::watchdog::Registration;

/// One hold of a [`LockCore`]. Release it with [`Hold::release`]; dropping it releases in the
/// background (never blocking the runtime) and stops its renewal.
#[clippy::has_significant_drop]
pub(crate) struct Hold {
    state: Option<GuardState>,
}

struct GuardState {
    lock: LockCore,
    owner: Owner,
    token: FencingToken,
    hold_count: u32,
    lease: Duration,
    registration: Registration,
    /// This hold in the client's registry (released at shutdown if still live).
    hold: HoldId,
}

impl fmt::Debug for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.state {
            Some(s) => f
                .debug_struct("Hold")
                .field("key", &s.lock.inner.names.key)
                .field("owner", &s.owner)
                .field("token", &s.token)
                .field("hold_count", &s.hold_count)
                .finish(),
            None => f.write_str("Hold(released)"),
        }
    }
}

impl Hold {
    pub(crate) fn new(
        lock: LockCore,
        owner: Owner,
        token: FencingToken,
        hold_count: u32,
        lease: Duration,
        registration: Registration,
        hold: HoldId,
    ) -> Hold {
        Hold {
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

    /// Take the guard's state (`None` when taken already), stop its renewal, and take its entry
    /// back from the client's registry: `Ok` with what releasing needs, or `Err` with the lock
    /// when shutdown released the hold already.
    #[allow(clippy::type_complexity)]
    fn take_hold(&mut self) -> Option<std::result::Result<(LockCore, Owner, Duration), LockCore>> {
        let GuardState {
            lock,
            owner,
            lease,
            registration,
            hold,
            ..
        } = self.state.take()?;
        drop(registration);
        if lock.inner.client.registry().take(&hold).is_some() {
            Some(Ok((lock, owner, lease)))
        } else {
            Some(Err(lock))
        }
    }

    fn state(&self) -> &GuardState {
        self.state.as_ref().expect("guard used after release")
    }

    /// The fencing token of this grant (re-entry returns the holder's current token).
    pub(crate) fn fencing_token(&self) -> FencingToken {
        self.state().token
    }

    /// The owner this guard holds for.
    pub(crate) fn owner(&self) -> &Owner {
        &self.state().owner
    }

    /// The owner's hold count right after this guard was granted (1 for a first grant).
    pub(crate) fn hold_count(&self) -> u32 {
        self.state().hold_count
    }

    /// The lease this guard was granted with (the watchdog lease when none was set).
    pub(crate) fn lease(&self) -> Duration {
        self.state().lease
    }

    /// Takes one more hold with the same owner and returns its guard.
    pub(crate) async fn reenter(&self) -> Result<Hold> {
        let s = self.state();
        s.lock.nest_as(&s.owner, s.lease).await
    }

    /// Whether the server still has this owner's hold.
    pub(crate) async fn is_held(&self) -> Result<bool> {
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
    pub(crate) async fn remaining(&self) -> Result<Duration> {
        let s = self.state();
        let (count, _, pttl) = s.lock.inspect(&s.owner).await?;
        if count == 0 {
            // Learnt the hold is gone: the lost signal fires, as for a renewal.
            s.registration.lease().mark_lost();
            let reason = if pttl == -2 {
                NotHeldReason::Gone
            } else {
                NotHeldReason::HeldByOther
            };
            return Err(Error::not_held(&s.lock.inner.names.name, reason));
        }
        Ok(Duration::from_millis(pttl.max(0) as u64))
    }

    /// Stop tracking this hold without releasing it: no renewal, no release on drop. The lock
    /// stays until its lease ends (a plain lock's returned owner can also be
    /// [adopted](crate::Lock::adopt), e.g. by another process, and released).
    pub(crate) fn forget(mut self) -> Owner {
        let s = self.state.take().expect("guard released twice");
        s.lock.inner.client.registry().take(&s.hold);
        s.owner
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(Ok((lock, owner, lease))) = self.take_hold() {
            let client = &lock.inner.client;
            client
                .registry()
                .release_in_background(client.backend(), lock.release_request(&owner, lease));
        }
    }
}

impl Hold {
    /// Releases this guard's hold.
    pub(crate) async fn release(mut self) -> Result<()> {
        // Kept until the answer: a release that finds the hold gone reports the lease lost.
        let state = self.state().registration.lease().clone();
        match self.take_hold().expect("guard released twice") {
            Ok((lock, owner, lease)) => {
                let released = lock.release_hold(&owner, lease).await;
                if released
                    .as_ref()
                    .is_err_and(|e| e.kind() == crate::ErrorKind::NotHeld)
                {
                    state.mark_lost();
                }
                released
            }
            // Client::shutdown released it already.
            Err(lock) => Err(Error::not_held(&lock.inner.names.name, NotHeldReason::Gone)),
        }
    }
}

impl Hold {
    /// Whether the lease is known lost (by a renewal, a force-unlock notice, or its local
    /// deadline passed). No I/O; [`Hold::is_held`] asks the server.
    pub(crate) fn is_lost(&self) -> bool {
        self.state().registration.lease().is_lost()
    }

    /// Resolves when the lease is lost. Never resolves while the lease is kept.
    pub(crate) fn lost(&self) -> impl Future<Output = ()> + Send + '_ {
        self.state().registration.lease().lost()
    }

    /// Until when the lock is surely ours by the local monotonic clock: the start of the latest
    /// successful grant, renewal or extension, plus its lease, minus drift (1 % of the lease +
    /// 2 ms). No I/O.
    pub(crate) fn valid_until(&self) -> std::time::Instant {
        self.state().registration.lease().valid_until().into_std()
    }

    /// Sets the lock's TTL to `lease` from now, if this owner still holds it.
    pub(crate) async fn extend(&self, lease: Duration) -> Result<()> {
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
}
