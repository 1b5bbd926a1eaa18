//! [`Release`] and [`Lease`]: the verbs every guard shares.

use std::future::Future;
use std::time::Duration;

use crate::error::Result;

mod sealed {
    /// Only distlock's guards implement [`Release`](super::Release) and
    /// [`Lease`](super::Lease).
    pub trait Sealed {}
}
pub(crate) use sealed::Sealed;

/// A guard that gives back what it holds: every lock guard, permit and job guard of distlock.
///
/// Its implementors are listed below; the guards of `distlock::blocking` release by a method
/// of their own.
///
/// Dropping a guard releases it too (in the background, never blocking the runtime); `release`
/// does it now and says how it went. Sealed. [`Lease`] adds the verbs of guards whose hold has
/// a lease.
///
/// # Examples
/// One function for every kind of guard:
/// ```no_run
/// use distlock::Release;
///
/// async fn give_back<G: Release>(guard: G) -> distlock::Result<G::Released> {
///     guard.release().await
/// }
/// ```
pub trait Release: Sealed + std::fmt::Debug + Send + Sync + Sized + 'static {
    /// What a release answers: `()`, or a [`SemaphorePermit`](crate::SemaphorePermit)'s
    /// permits available after it.
    type Released: Send + 'static;

    /// Gives back what the guard holds, and stops its renewal.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when the hold was gone before the
    /// release (its lease ended, another owner took over, a force unlock); server failures.
    /// Each guard's own documentation says more.
    ///
    /// # Cancel safety
    /// A dropped release may or may not have reached the server; the lease (where there is
    /// one) ends the rest. Each guard's own documentation says more.
    fn release(self) -> impl Future<Output = Result<Self::Released>> + Send;
}

/// A guard whose hold has a lease on the server: it may be lost, extended and released.
///
/// Its implementors are listed below. A [`SemaphorePermit`](crate::SemaphorePermit) is not one:
/// its permit has no lease (Redisson's `RSemaphore`), so what it cannot do does not compile.
/// Sealed.
///
/// # Examples
/// Run work under any lease, stopping when it is lost:
/// ```no_run
/// use distlock::Lease;
///
/// async fn guarded<L: Lease>(lease: L, work: impl std::future::Future<Output = ()>)
///     -> distlock::Result<()>
/// {
///     tokio::select! {
///         _ = lease.lost() => return Ok(()), // another owner may hold it now
///         _ = work => {}
///     }
///     lease.release().await.map(|_| ())
/// }
/// ```
pub trait Lease: Release {
    /// Whether the lease is known lost. No I/O.
    fn is_lost(&self) -> bool;

    /// Resolves when the lease is lost; never while it is kept.
    ///
    /// Stop writing to the protected resource when it resolves: another owner may hold it by
    /// then.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    fn lost(&self) -> impl Future<Output = ()> + Send + '_;

    /// Until when the hold is surely ours by the local monotonic clock: the start of the
    /// latest grant, renewal or extension, plus its lease, minus drift. No I/O.
    fn valid_until(&self) -> std::time::Instant;

    /// Sets the lease to `lease` (a [`Duration`] in whole milliseconds) from now.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when the hold is gone;
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for a zero or
    /// overflowing lease; server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: an extension sent twice sets the same lease.
    fn extend(&self, lease: Duration) -> impl Future<Output = Result<()>> + Send + '_;
}
