//! [`LeasedPermit`]: one permit of a [`LeasedSemaphore`], its extension and release.

use crate::conn::Resend;
use crate::error::{Error, ErrorKind, NotHeldReason, Result};
use crate::keys;
use crate::registry::HoldId;
use crate::watchdog::{KeepAlive, LeaseState, Renew};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use super::LeasedSemaphore;

/// One permit of a [`LeasedSemaphore`], with an id and a lease.
///
/// Release it with [`LeasedPermit::release`](crate::Release::release); dropping it releases in the
/// background.
#[must_use = "dropping the permit gives it back at once"]
#[clippy::has_significant_drop]
pub struct LeasedPermit {
    pub(super) sem: Option<LeasedSemaphore>,
    pub(super) id: String,
    pub(super) lease: Arc<LeaseState>,
    /// This permit in the client's registry (given back at shutdown if still held).
    pub(super) hold: HoldId,
    /// The watchdog's keep-alive, when asked for ([`LeasedPermit::keep_alive`]).
    pub(super) keep_alive: Option<KeepAlive>,
}

/// Move the expiry of permit `id` to `lease` from now; `NotHeld` (and the lost signal) when
/// the permit is gone.
async fn extend_permit(
    sem: &LeasedSemaphore,
    id: &str,
    lease: Duration,
    lease_ms: u64,
    state: &LeaseState,
) -> Result<()> {
    let started = Instant::now();
    let inv = sem.calls().extend(id, lease_ms);
    // Confirmed by replicas like a grant (where the deployment asks for it): an extension
    // they did not confirm fails with NotReplicated and moves no local deadline.
    let context = sem.names.context("extend");
    let mut grant = sem.names.client.backend().for_grant(&sem.names.key).await?;
    let r: Vec<i64> = grant
        .backend
        .eval(&context, &inv, Resend::Few)
        .await
        .inspect_err(|e| grant.failed(e))?;
    if r.first() == Some(&1) {
        grant.confirm(&context).await?;
    }
    if r.first() == Some(&1) {
        state.set_valid_until(started + lease.saturating_sub(keys::drift(lease)));
        Ok(())
    } else {
        state.mark_lost();
        Err(Error::not_held(&sem.names.name, NotHeldReason::Gone))
    }
}

impl fmt::Debug for LeasedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedPermit")
            .field("id", &self.id)
            .finish()
    }
}

impl LeasedPermit {
    /// Returns the permit's id: 32 lowercase hex characters, Redisson's permit-id format.
    ///
    /// Its 16 bytes are the permit's member of the leases zset `{<name>}:timeout`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Has the client's watchdog extend this permit to `lease` every third of it while it is
    /// held.
    ///
    /// The watchdog keeps it as it keeps locks, so a holder that lives keeps its permit and one
    /// that dies gives it back within `lease`. The [`lost`](crate::Lease::lost) signal fires
    /// when an extension finds the permit gone, or renewals keep failing until the lease ends.
    /// Stops when the permit is released or dropped.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a zero or overflowing `lease` (at most 365 days).
    pub fn keep_alive(&mut self, lease: Duration) -> Result<()> {
        let lease_ms = keys::lease_ms("lease", lease)?;
        let sem = self.sem.clone().expect("released");
        let (id, state) = (self.id.clone(), self.lease.clone());
        let renew: Renew = Arc::new(move || {
            let (sem, id, state) = (sem.clone(), id.clone(), state.clone());
            Box::pin(async move {
                match extend_permit(&sem, &id, lease, lease_ms, &state).await {
                    Ok(()) => Ok(true),
                    Err(e) if e.kind() == ErrorKind::NotHeld => Ok(false),
                    Err(e) => Err(e),
                }
            })
        });
        let sem = self.sem.as_ref().expect("released");
        self.keep_alive = Some(sem.names.client.leases().keep_alive(
            sem.names.context("permit keep-alive"),
            lease,
            lease / 3,
            self.lease.clone(),
            renew,
        ));
        Ok(())
    }
}

impl Drop for LeasedPermit {
    fn drop(&mut self) {
        let Some(sem) = self.sem.take() else { return };
        let client = &sem.names.client;
        client
            .registry()
            .release_dropped(client.backend(), &self.hold, || {
                sem.release_request(&self.id, Some(&self.lease))
            });
    }
}

impl crate::lease::Sealed for LeasedPermit {}

impl LeasedPermit {
    /// Give the permit back and wake waiters.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when the lease had ended (the permit went back to the pool
    /// already); server failures.
    ///
    /// # Cancel safety
    /// Cancel safe in effect: giving back twice is refused by the id.
    pub async fn release(mut self) -> Result<()> {
        let sem = self.sem.take().expect("released twice");
        self.keep_alive.take();
        sem.names
            .client
            .registry()
            .take_for_release(&self.hold, &sem.names.name)?;
        match sem.release_id(&self.id, Some(&self.lease)).await? {
            1 => Ok(()),
            _ => {
                // Already back in the pool: the lease was lost.
                self.lease.mark_lost();
                Err(Error::not_held(&sem.names.name, NotHeldReason::Gone))
            }
        }
    }

    /// Resolves when the lease ends without an extension (or an extension found it gone).
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) {
        self.lease.lost().await
    }
}

impl crate::Release for LeasedPermit {
    type Released = ();

    /// As [`LeasedPermit::release`].
    async fn release(self) -> Result<()> {
        LeasedPermit::release(self).await
    }
}

impl crate::Lease for LeasedPermit {
    /// Whether the permit's lease is known lost (an extension found it gone, or its local
    /// deadline passed). No I/O.
    fn is_lost(&self) -> bool {
        self.lease.is_lost()
    }

    /// As [`LeasedPermit::lost`].
    async fn lost(&self) {
        LeasedPermit::lost(self).await
    }

    /// Until when the permit is surely ours by the local monotonic clock.
    fn valid_until(&self) -> std::time::Instant {
        self.lease.valid_until().into_std()
    }

    /// Move the lease's end to `lease` from now.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when the lease had ended (the permit is reclaimed);
    /// [`ErrorKind::InvalidInput`] for a zero or overflowing lease; server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: idempotent.
    async fn extend(&self, lease: Duration) -> Result<()> {
        let lease_ms = keys::lease_ms("lease", lease)?;
        let sem = self.sem.as_ref().expect("released");
        extend_permit(sem, &self.id, lease, lease_ms, &self.lease).await
    }
}
