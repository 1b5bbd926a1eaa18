//! One hold of a lock-family lock: [`Hold`], and the typed guard over it, [`HoldGuard`]
//! ([`LockGuard`], [`FairLockGuard`] and the read-write lock's guards are its kinds).

use std::fmt;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::raw::not_held_reason;
use super::{FencingToken, LockCore, Owner};
use crate::error::{Error, NotHeldReason, Result};
use crate::keys;
use crate::kind::{Fair, HoldKind, Plain};
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
        if lock.inner.client.registry().take(&hold) {
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
                    .arg(&*s.lock.inner.names.key)
                    .arg(&*s.lock.inner.raw.field(&s.owner)),
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
                .release_in_background(client.backend(), lock.inner.release_request(&owner, lease));
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

/// One hold of a lock-family lock, typed by its kind `K`: [`LockGuard`], [`FairLockGuard`],
/// [`RwLockReadGuard`](crate::RwLockReadGuard) and [`RwLockWriteGuard`](crate::RwLockWriteGuard)
/// are its four kinds.
///
/// Release it with [`release`](HoldGuard::release); dropping it releases in the background
/// (never blocking the runtime) and stops its renewal. Local accessors
/// ([`fencing_token`](HoldGuard::fencing_token), [`owner`](HoldGuard::owner),
/// [`hold_count`](HoldGuard::hold_count), [`lease`](HoldGuard::lease),
/// [`valid_until`](crate::Lease::valid_until)) do no I/O. The guard is `Send` and `Sync`: it can
/// be released from any task. It implements [`Release`](crate::Release),
/// [`Lease`](crate::Lease) and [`Fenced`](crate::Fenced), for code generic over guards.
#[must_use = "dropping the guard releases the lock at once; bind it to a variable"]
#[clippy::has_significant_drop]
pub struct HoldGuard<K: HoldKind> {
    hold: Hold,
    lock: K::Lock,
}

/// One hold of a [`Lock`](crate::Lock).
///
/// A re-entry ([`reenter`](HoldGuard::reenter)) keeps the fencing token: the holder's token is
/// kept in the lock's hash, as Redisson's `RLock` keeps its hold count.
///
/// # Examples
/// ```no_run
/// use distlock::LockGuard;
///
/// async fn outer(guard: &LockGuard) -> distlock::Result<()> {
///     let nested = guard.reenter().await?;   // hold count 2, same owner and token
///     assert_eq!(nested.fencing_token(), guard.fencing_token());
///     nested.release().await                 // back to 1: the lock is still held
/// }
/// ```
pub type LockGuard = HoldGuard<Plain>;

/// One hold of a [`FairLock`](crate::FairLock).
///
/// The verbs of a [`LockGuard`]; its [`lock`](HoldGuard::lock) is the fair lock, and a re-entry
/// keeps the fencing token as a plain lock's does.
///
/// ```compile_fail
/// # async fn f(client: distlock::Client) -> distlock::Result<()> {
/// let guard: distlock::LockGuard = client.fair_lock("tickets").acquire().await?;
/// # Ok(()) }
/// ```
pub type FairLockGuard = HoldGuard<Fair>;

impl<K: HoldKind> HoldGuard<K> {
    pub(crate) fn new(hold: Hold, lock: K::Lock) -> HoldGuard<K> {
        HoldGuard { hold, lock }
    }

    /// The lock this guard holds: a [`Lock`](crate::Lock), a [`FairLock`](crate::FairLock) or
    /// the [`RwLock`](crate::RwLock) of a read or write hold.
    pub fn lock(&self) -> &K::Lock {
        &self.lock
    }

    /// Returns the fencing token of this grant.
    ///
    /// A number that grows with every grant of the lock's hash slot, across restarts and
    /// failovers (see [`FencingToken`]); a re-entry of a plain or fair lock returns the
    /// holder's current token. No I/O.
    pub fn fencing_token(&self) -> FencingToken {
        self.hold.fencing_token()
    }

    /// The owner this guard holds for. No I/O.
    pub fn owner(&self) -> &Owner {
        self.hold.owner()
    }

    /// The owner's hold count right after this guard was granted (1 for a first grant). No
    /// I/O.
    pub fn hold_count(&self) -> u32 {
        self.hold.hold_count()
    }

    /// The lease this guard was granted with (the watchdog lease when none was set). No I/O.
    pub fn lease(&self) -> Duration {
        self.hold.lease()
    }

    /// Takes one more hold with the same owner and returns its guard.
    ///
    /// The hold count goes up by one and the lease is reset; the new guard has the same owner
    /// and lease, and the fencing token its kind gives a re-entry (the holder's own for a
    /// plain or fair lock; a read-write lock's grants each draw a fresh one). Each guard
    /// releases one hold, so the lock is free once every guard is released. Never waits: the
    /// owner holds the lock already. A resent request never counts two holds.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when the lock is no longer held by
    /// this owner (it is not granted anew); server failures. When the server did not answer
    /// a plain lock's re-entry within the resend window, the error says the outcome is
    /// unknown ([`Error::is_outcome_unknown`]) and the re-entry is cancelled in the background.
    ///
    /// # Cancel safety
    /// Cancel safe in that a resent request never counts two holds; a hold granted after the
    /// future was dropped stays until the owner's last release or the lease ends.
    pub async fn reenter(&self) -> Result<HoldGuard<K>> {
        Ok(HoldGuard::new(
            self.hold.reenter().await?,
            self.lock.clone(),
        ))
    }

    /// Whether the server still has this owner's hold (marks the lease lost when it has not).
    ///
    /// # Errors
    /// Server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn is_held(&self) -> Result<bool> {
        self.hold.is_held().await
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
        self.hold.remaining().await
    }

    /// Releases this hold now, and stops its renewal.
    ///
    /// The lock is freed with the owner's last hold, and the first queued waiter is handed it,
    /// or a waiter woken. The same call as [`Release::release`](crate::Release::release),
    /// without the trait in scope.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when the hold was gone before the
    /// release ([`NotHeldReason::Gone`]: its lease ended;
    /// [`NotHeldReason::HeldByOther`]: another owner holds it, left alone;
    /// [`NotHeldReason::Unconfirmed`]: a resend found it gone); server failures. The lost
    /// signal fires then.
    ///
    /// # Cancel safety
    /// A dropped release is finished in the background, as a dropped guard's.
    pub async fn release(self) -> Result<()> {
        self.hold.release().await
    }

    /// Resolves when the lease is lost; never while it is kept.
    ///
    /// The lease is lost when the watchdog finds the lock gone or held by another owner, when
    /// the local deadline passes before a renewal succeeded (the server unreachable), or,
    /// with an explicit lease, when it ends without an extension. A force unlock by any
    /// distlock client fires it within a round trip or two (a notice on this client's
    /// channel); a key deleted by hand or a Redisson client's `forceUnlock` is found at the
    /// next renewal. All guards of one owner share the signal. Stop writing to the protected
    /// resource when it resolves; a resource that checks [fencing tokens](FencingToken)
    /// refuses the late writes it could not stop. The same call as
    /// [`Lease::lost`](crate::Lease::lost), without the trait in scope.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + '_ {
        self.hold.lost()
    }

    /// Stops tracking this hold without releasing it: no renewal, no release on drop.
    ///
    /// The lock stays until its lease ends (a plain lock's owner can also be
    /// [adopted](crate::Lock::adopt), e.g. by another process, and released).
    pub fn forget(self) -> Owner {
        self.hold.forget()
    }
}

impl<K: HoldKind> fmt::Debug for HoldGuard<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple(K::GUARD).field(&self.hold).finish()
    }
}

impl<K: HoldKind> crate::lease::Sealed for HoldGuard<K> {}

impl<K: HoldKind> crate::Fenced for HoldGuard<K> {
    fn fencing_token(&self) -> FencingToken {
        self.hold.fencing_token()
    }

    fn owner(&self) -> &Owner {
        self.hold.owner()
    }

    fn hold_count(&self) -> u32 {
        self.hold.hold_count()
    }
}

impl<K: HoldKind> crate::Release for HoldGuard<K> {
    type Released = ();

    /// As [`HoldGuard::release`].
    ///
    /// # Errors
    /// As [`HoldGuard::release`].
    ///
    /// # Cancel safety
    /// A dropped release is finished in the background, as a dropped guard's.
    async fn release(self) -> Result<()> {
        self.hold.release().await
    }
}

impl<K: HoldKind> crate::Lease for HoldGuard<K> {
    /// Whether the lease is known lost (by a renewal, a force-unlock notice, or its local
    /// deadline passed). No I/O; [`is_held`](HoldGuard::is_held) asks the server.
    fn is_lost(&self) -> bool {
        self.hold.is_lost()
    }

    /// As [`HoldGuard::lost`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    fn lost(&self) -> impl Future<Output = ()> + Send + '_ {
        self.hold.lost()
    }

    /// Until when the lock is surely ours by the local monotonic clock: the start of the
    /// latest successful grant, renewal or extension, plus its lease, minus drift (1 % of the
    /// lease + 2 ms). No I/O.
    fn valid_until(&self) -> std::time::Instant {
        self.hold.valid_until()
    }

    /// Sets the lease to `lease` from now, if this owner still holds the lock (Redisson's
    /// `expire` on a held lock); the watchdog, if any, keeps renewing with its own lease
    /// afterwards.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for a zero or overflowing
    /// lease; [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when the lock is gone or held
    /// by another owner (the lost signal fires); server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: PEXPIRE is idempotent.
    async fn extend(&self, lease: Duration) -> Result<()> {
        self.hold.extend(lease).await
    }
}
