//! The guard fronts of the lock family: [`LockGuard`], [`FairLockGuard`], and the read-write
//! lock's guards (in `rwlock`), each over one [`Hold`] and the handle it came from.

use super::hold::Hold;
use super::{FairLock, Lock};

/// The accessors, `reenter` and the [`Release`](crate::Release) and [`Lease`](crate::Lease)
/// verbs every guard front of the lock family shares, over its `hold`; `$handle` is the
/// handle type [`lock`](LockGuard::lock) returns.
macro_rules! hold_front {
    ($guard:ident, $handle:ty) => {
        impl $guard {
            pub(crate) fn new(hold: $crate::lock::hold::Hold, lock: $handle) -> $guard {
                $guard { hold, lock }
            }

            /// The lock this guard holds.
            pub fn lock(&self) -> &$handle {
                &self.lock
            }

            /// Returns the fencing token of this grant.
            ///
            /// A number that grows with every grant of the lock's hash slot, across restarts and
            /// failovers (see [`FencingToken`](crate::FencingToken)); a re-entry returns the
            /// holder's current token. No I/O.
            pub fn fencing_token(&self) -> $crate::FencingToken {
                self.hold.fencing_token()
            }

            /// The owner this guard holds for. No I/O.
            pub fn owner(&self) -> &$crate::Owner {
                self.hold.owner()
            }

            /// The owner's hold count right after this guard was granted (1 for a first
            /// grant). No I/O.
            pub fn hold_count(&self) -> u32 {
                self.hold.hold_count()
            }

            /// The lease this guard was granted with (the watchdog lease when none was set).
            /// No I/O.
            pub fn lease(&self) -> std::time::Duration {
                self.hold.lease()
            }

            /// Takes one more hold with the same owner and returns its guard.
            ///
            /// The hold count goes up by one and the lease is reset; the new guard has the
            /// same owner and lease (a plain or fair lock's also the same fencing token; a
            /// read-write lock's grant draws a fresh one). Each guard releases one hold, so
            /// the lock is free once every guard is released. Never waits: the owner holds
            /// the lock already. A resent request never counts two holds.
            ///
            /// # Errors
            /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when the lock is no longer
            /// held by this owner (it is not granted anew); server failures. For a plain
            /// lock, when the server did not answer within the resend window the error says
            /// the outcome is unknown ([`Error::is_outcome_unknown`](crate::Error::is_outcome_unknown))
            /// and the re-entry is cancelled in the background.
            ///
            /// # Cancel safety
            /// Cancel safe in that a resent request never counts two holds; a hold granted
            /// after the future was dropped stays until the owner's last release or the
            /// lease ends.
            pub async fn reenter(&self) -> $crate::Result<$guard> {
                Ok($guard::new(self.hold.reenter().await?, self.lock.clone()))
            }

            /// Whether the server still has this owner's hold (marks the lease lost when it
            /// has not).
            ///
            /// # Errors
            /// Server failures.
            ///
            /// # Cancel safety
            /// Cancel safe: read-only.
            pub async fn is_held(&self) -> $crate::Result<bool> {
                self.hold.is_held().await
            }

            /// Time left on the lease by the server's clock (PTTL).
            ///
            /// # Errors
            /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when this owner no longer
            /// holds the lock; server failures.
            ///
            /// # Cancel safety
            /// Cancel safe: read-only.
            pub async fn remaining(&self) -> $crate::Result<std::time::Duration> {
                self.hold.remaining().await
            }

            /// Releases this hold now, as [`Release::release`](crate::Release::release) (the
            /// same call, without the trait in scope).
            ///
            /// # Errors
            /// As [`Release::release`](crate::Release::release) for this guard.
            ///
            /// # Cancel safety
            /// A dropped release is finished in the background, as a dropped guard's.
            pub async fn release(self) -> $crate::Result<()> {
                self.hold.release().await
            }

            /// Resolves when the lease is lost, as [`Lease::lost`](crate::Lease::lost) (the
            /// same call, without the trait in scope).
            ///
            /// # Cancel safety
            /// Cancel safe: it only observes.
            pub fn lost(&self) -> impl std::future::Future<Output = ()> + Send + '_ {
                self.hold.lost()
            }

            /// Stops tracking this hold without releasing it: no renewal, no release on drop.
            ///
            /// The lock stays until its lease ends (a plain lock's owner can also be
            /// [adopted](crate::Lock::adopt), e.g. by another process, and released).
            pub fn forget(self) -> $crate::Owner {
                self.hold.forget()
            }
        }

        impl std::fmt::Debug for $guard {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_tuple(stringify!($guard)).field(&self.hold).finish()
            }
        }

        impl $crate::lease::Sealed for $guard {}

        impl $crate::Fenced for $guard {
            fn fencing_token(&self) -> $crate::FencingToken {
                self.hold.fencing_token()
            }

            fn owner(&self) -> &$crate::Owner {
                self.hold.owner()
            }

            fn hold_count(&self) -> u32 {
                self.hold.hold_count()
            }
        }

        impl $crate::Release for $guard {
            type Released = ();

            /// Releases this hold (the lock is freed with the owner's last hold, and the
            /// first queued waiter is handed it, or a waiter woken), and stops its renewal.
            ///
            /// # Errors
            /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when the hold was gone before
            /// the release ([`NotHeldReason::Gone`](crate::NotHeldReason::Gone): its lease
            /// ended; [`NotHeldReason::HeldByOther`](crate::NotHeldReason::HeldByOther):
            /// another owner holds it, left alone; [`NotHeldReason::Unconfirmed`](crate::NotHeldReason::Unconfirmed):
            /// a resend found it gone); server failures. The lost signal fires then.
            ///
            /// # Cancel safety
            /// A dropped release is finished in the background, as a dropped guard's.
            async fn release(self) -> $crate::Result<()> {
                self.hold.release().await
            }
        }

        impl $crate::Lease for $guard {
            /// Whether the lease is known lost (by a renewal, a force-unlock notice, or its
            /// local deadline passed). No I/O; [`is_held`](Self::is_held) asks the server.
            fn is_lost(&self) -> bool {
                self.hold.is_lost()
            }

            /// Resolves when the lease is lost; never while it is kept.
            ///
            /// The lease is lost when the watchdog finds the lock gone or held by another
            /// owner, when the local deadline passes before a renewal succeeded (the server
            /// unreachable), or, with an explicit lease, when it ends without an extension.
            /// A force unlock by any distlock client fires it within a round trip or two (a
            /// notice on this client's channel); a key deleted by hand or a Redisson client's
            /// `forceUnlock` is found at the next renewal. All guards of one owner share the
            /// signal. Stop writing to the protected resource when it resolves; a resource
            /// that checks [fencing tokens](crate::FencingToken) refuses the late writes it
            /// could not stop.
            ///
            /// # Cancel safety
            /// Cancel safe: it only observes.
            fn lost(&self) -> impl std::future::Future<Output = ()> + Send + '_ {
                self.hold.lost()
            }

            /// Until when the lock is surely ours by the local monotonic clock: the start of
            /// the latest successful grant, renewal or extension, plus its lease, minus drift
            /// (1 % of the lease + 2 ms). No I/O.
            fn valid_until(&self) -> std::time::Instant {
                self.hold.valid_until()
            }

            /// Sets the lease to `lease` from now, if this owner still holds the lock
            /// (Redisson's `expire` on a held lock); the watchdog, if any, keeps renewing
            /// with its own lease afterwards.
            ///
            /// # Errors
            /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for a zero or
            /// overflowing lease; [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when the
            /// lock is gone or held by another owner (the lost signal fires); server
            /// failures.
            ///
            /// # Cancel safety
            /// Cancel safe: PEXPIRE is idempotent.
            async fn extend(&self, lease: std::time::Duration) -> $crate::Result<()> {
                self.hold.extend(lease).await
            }
        }
    };
}
pub(crate) use hold_front;

/// One hold of a [`Lock`].
///
/// Release it with [`Release::release`](crate::Release::release); dropping it releases in the
/// background (never blocking the runtime) and stops its renewal.
///
/// Local accessors ([`fencing_token`](LockGuard::fencing_token), [`owner`](LockGuard::owner),
/// [`valid_until`](crate::Lease::valid_until), [`hold_count`](LockGuard::hold_count)) do no
/// I/O. The guard is `Send` and `Sync`: it can be released from any task.
///
/// # Examples
/// ```no_run
/// use distlock::{LockGuard, Release};
///
/// async fn outer(guard: &LockGuard) -> distlock::Result<()> {
///     let nested = guard.reenter().await?;   // hold count 2, same owner and token
///     assert_eq!(nested.fencing_token(), guard.fencing_token());
///     nested.release().await                 // back to 1: the lock is still held
/// }
/// ```
#[must_use = "dropping the guard releases the lock at once; bind it to a variable"]
#[clippy::has_significant_drop]
pub struct LockGuard {
    hold: Hold,
    lock: Lock,
}

hold_front!(LockGuard, Lock);

/// One hold of a [`FairLock`].
///
/// The verbs of a [`LockGuard`], and its [`lock`](FairLockGuard::lock) is the
/// fair lock. Release it with [`Release::release`](crate::Release::release); dropping it releases
/// in the background.
#[must_use = "dropping the guard releases the lock at once; bind it to a variable"]
#[clippy::has_significant_drop]
pub struct FairLockGuard {
    hold: Hold,
    lock: FairLock,
}

hold_front!(FairLockGuard, FairLock);
