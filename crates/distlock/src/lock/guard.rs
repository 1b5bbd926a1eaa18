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

/// One hold of a [`Lock`]. Release it with [`LockGuard::release`](crate::Release::release); dropping it releases in
/// the background (never blocking the runtime) and stops its renewal.
///
/// Local accessors ([`fencing_token`](LockGuard::fencing_token), [`owner`](LockGuard::owner),
/// [`valid_until`](crate::Lease::valid_until), [`hold_count`](LockGuard::hold_count)) do no
/// I/O. The guard is `Send` and `Sync`: it can be released from any task.
#[must_use = "dropping the guard releases the lock at once; bind it to a variable"]
#[clippy::has_significant_drop]
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

    /// Take the guard's state (`None` when taken already), stop its renewal, and take its
    /// entry back from the client's registry: `Ok` with what releasing needs, or `Err` with
    /// the lock when shutdown released the hold already.
    #[allow(clippy::type_complexity)]
    fn take_hold(&mut self) -> Option<std::result::Result<(Lock, Owner, Duration), Lock>> {
        let GuardState {
            lock,
            owner,
            lease,
            registration,
            hold,
            ..
        } = self.state.take()?;
        drop(registration);
        if lock.inner.client.inner.holds.take(&hold).is_some() {
            Some(Ok((lock, owner, lease)))
        } else {
            Some(Err(lock))
        }
    }

    fn state(&self) -> &GuardState {
        self.state.as_ref().expect("guard used after release")
    }

    /// The local lease state the watchdog keeps for this hold.
    pub(super) fn lease_state(&self) -> &std::sync::Arc<crate::watchdog::LeaseState> {
        self.state().registration.lease()
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

    /// Takes one more hold with the same owner and returns its guard.
    ///
    /// The hold count goes up by one and the lease is reset; the new guard has the same
    /// owner, lease and fencing token (a read-write lock's grant draws a fresh token). Each
    /// guard releases one hold, so the lock is free once every guard is released. Never
    /// waits: the owner holds the lock already. A resent request never counts two holds (a
    /// plain lock's acquire latch answers it; fair and read-write re-entries are sent once).
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when the lock is no longer held by
    /// this owner (it is not granted anew); server failures. For a plain lock, when the
    /// server did not answer within the resend window the error says the outcome is unknown
    /// ([`Error::is_outcome_unknown`]) and the re-entry is cancelled in the background (a
    /// hold it may have added is given back).
    ///
    /// # Cancel safety
    /// Cancel safe in that a resent request never counts two holds; a hold granted after the
    /// future was dropped stays until the owner's last release or the lease ends.
    ///
    /// # Examples
    /// ```no_run
    /// use distlock::Release;
    /// use distlock::LockGuard;
    ///
    /// async fn outer(guard: &LockGuard) -> distlock::Result<()> {
    ///     let nested = guard.reenter().await?;   // hold count 2, same owner and token
    ///     assert_eq!(nested.fencing_token(), guard.fencing_token());
    ///     nested.release().await                 // back to 1: the lock is still held
    /// }
    /// ```
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
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when this owner no longer holds the
    /// lock; server failures.
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
        if let Some(Ok((lock, owner, lease))) = self.take_hold() {
            let client = &lock.inner.client.inner;
            client
                .holds
                .release_in_background(&client.backend, lock.release_request(&owner, lease));
        }
    }
}

impl crate::lease::Sealed for LockGuard {}

impl crate::Release for LockGuard {
    type Released = ();

    /// Releases this guard's hold.
    ///
    /// The hold count goes down by one; on the last hold the key is deleted and one waiter
    /// is woken (as Redisson's `RLock` unlock script; a fair lock wakes the head of its
    /// queue, a read-write lock every waiter). Only this guard's owner can release: the
    /// script checks the owner field first. Idempotent under resends: a release that leaves
    /// holds records its result in an unlock latch per request (as Redisson's unlock latch),
    /// so a resend never takes a second hold away. Renewal of the owner stops once none of
    /// its guards is left. Dropping the guard instead releases in the background.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when the lock had expired or was
    /// taken by another owner ([`Error::not_held_reason`] tells which), or when
    /// [`Client::shutdown`](crate::Client::shutdown) released it already; nothing is changed
    /// then. A release that had to be resent and then found the lock gone or re-taken is
    /// [`NotHeldReason::Unconfirmed`]: an earlier send may have released it, or the hold was
    /// lost first (a server restart or failover), and the server keeps nothing that tells
    /// which. Server failures; when the server did not answer within the resend window the
    /// error says the outcome is unknown ([`Error::is_outcome_unknown`]): the release was
    /// applied at most once, and if it was not, the lease ends the hold.
    ///
    /// # Cancel safety
    /// Not cancel safe in the sense that a dropped release may or may not have happened; if
    /// it did not, the lease ends it.
    ///
    /// # Examples
    /// ```no_run
    /// use distlock::Release;
    /// use distlock::{ErrorKind, NotHeldReason};
    ///
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// let guard = client.lock("stock:sku-1").acquire().await?;
    /// // ... update the stock ...
    /// match guard.release().await {
    ///     Ok(()) => {}
    ///     Err(e) if e.kind() == ErrorKind::NotHeld => {
    ///         // The lease ended (or another owner took the lock) before the release.
    ///         let expired = e.not_held_reason() == Some(NotHeldReason::Gone);
    ///         eprintln!("lost the lock before releasing it (expired: {expired})");
    ///     }
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    async fn release(mut self) -> Result<()> {
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

impl crate::Lease for LockGuard {
    /// Whether the lease is known lost (by a renewal, or its local deadline passed). No I/O;
    /// use [`LockGuard::is_held`] to ask the server.
    fn is_lost(&self) -> bool {
        self.state().registration.lease().is_lost()
    }

    /// Resolves when the lease is lost. Never resolves while the lease is kept.
    ///
    /// The lease is lost when the watchdog finds the lock gone or held by another owner,
    /// when the local deadline ([`valid_until`](crate::Lease::valid_until)) passes before a
    /// renewal succeeded (the server unreachable), or, with an explicit lease, when the lease
    /// ends without an [`extend`](crate::Lease::extend). After a reconnect of the subscription
    /// connection (e.g. a server restart) every lease is checked at once. A force unlock by
    /// any distlock client ([`Lock::force_unlock`], `distlock unlock --force`) fires it within
    /// a round trip or two, by a notice on this client's channel (p50 about 0.25 ms on one
    /// idle server in `distlock-bench bench --workloads lost`); a key deleted by hand or a
    /// Redisson client's `forceUnlock` is found at the next renewal. Resolves at once
    /// when the lease is already known lost ([`is_lost`](crate::Lease::is_lost)). No I/O of its
    /// own; all guards of one owner share the signal.
    ///
    /// Stop writing to the protected resource when it resolves: another owner may hold the
    /// lock by then. A resource that checks [fencing tokens](LockGuard::fencing_token) refuses
    /// the late writes it could not stop.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes; a new call resolves as the dropped one would have.
    ///
    /// # Examples
    /// Stop the work when the lease is lost:
    /// ```no_run
    /// use distlock::{Lease, Release};
    /// # async fn do_work(_token: distlock::FencingToken) -> distlock::Result<()> { Ok(()) }
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// let guard = client.lock("ledger:close").acquire().await?;
    /// tokio::select! {
    ///     _ = guard.lost() => {
    ///         eprintln!("lease lost: the work was stopped; another owner may hold the lock");
    ///         return Ok(()); // dropping the guard stops its renewal
    ///     }
    ///     r = do_work(guard.fencing_token()) => r?,
    /// }
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    fn lost(&self) -> impl Future<Output = ()> + Send + '_ {
        self.state().registration.lease().lost()
    }

    /// Until when the lock is surely ours by the local monotonic clock: the start of the
    /// latest successful grant, renewal or extension, plus its lease, minus drift (1 % of
    /// the lease + 2 ms). No I/O.
    fn valid_until(&self) -> std::time::Instant {
        self.state().registration.lease().valid_until().into_std()
    }

    /// Sets the lock's TTL to `lease` from now, if this owner still holds it.
    ///
    /// `lease` is a [`Duration`] in whole milliseconds (at least 1 ms, at most 365 days). It
    /// replaces the remaining TTL, so it may also shorten it, and it moves the local deadline
    /// ([`valid_until`](crate::Lease::valid_until)) to `lease` minus drift from the start of
    /// the call. Under the watchdog, its next renewal sets the TTL back to the watchdog
    /// lease; with an explicit lease, call it before the lease ends to keep the lock.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for a `lease` that is zero,
    /// under 1 ms or over 365 days (nothing is sent);
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when the lock was lost (the lost
    /// signal fires too); server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: `PEXPIRE` is idempotent; a dropped call may or may not have extended.
    ///
    /// # Examples
    /// ```no_run
    /// use distlock::{Lease, Release};
    /// use std::time::Duration;
    ///
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// // An explicit 10 s lease, no watchdog: extend it while the work goes on.
    /// let guard = client.lock("import").lease(Duration::from_secs(10)).acquire().await?;
    /// for batch in 0..3 {
    ///     // ... import batch `batch` (well under 10 s) ...
    ///     # let _ = batch;
    ///     guard.extend(Duration::from_secs(10)).await?;  // Err(NotHeld) if it was lost
    /// }
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    async fn extend(&self, lease: Duration) -> Result<()> {
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
