//! [`Release`], [`Lease`] and [`Fenced`]: the verbs guards share.

use std::future::Future;
use std::time::Duration;

use crate::error::Result;
use crate::lock::{FencingToken, Owner};

mod sealed {
    /// Only distlock's guards implement [`Release`](super::Release),
    /// [`Lease`](super::Lease) and [`Fenced`](super::Fenced).
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

/// A hold with a lease on the server: it may be lost and extended.
///
/// Its implementors are listed below: every guard whose hold has a lease, and a
/// [`JobLease`](crate::JobLease) (a job's view of its guard's lease, which the guard
/// releases). A [`SemaphorePermit`](crate::SemaphorePermit) is not one: its permit has no
/// lease (Redisson's `RSemaphore`), so what it cannot do does not compile. Releasing is
/// [`Release`]'s; a function that also releases asks for both. Sealed.
///
/// # Examples
/// Run work under any lease, stopping when it is lost, then release:
/// ```no_run
/// use distlock::{Lease, Release};
///
/// async fn guarded<L: Lease + Release>(lease: L, work: impl std::future::Future<Output = ()>)
///     -> distlock::Result<()>
/// {
///     tokio::select! {
///         _ = lease.lost() => return Ok(()), // another owner may hold it now
///         _ = work => {}
///     }
///     lease.release().await.map(|_| ())
/// }
/// ```
pub trait Lease: Sealed + Send + Sync {
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

/// A grant of the lock family, which carries a fencing token: the guards of
/// [`Lock`](crate::Lock), [`FairLock`](crate::FairLock) and [`RwLock`](crate::RwLock).
///
/// Pass [`fencing_token`](Fenced::fencing_token) with every write to the protected resource
/// and have it refuse a token below the last it accepted (Kleppmann's fencing tokens): a
/// holder that paused past its lease is then refused. Sealed.
///
/// # Examples
/// ```no_run
/// use distlock::Fenced;
///
/// // The statement's parameters: the resource keeps the row only under a newer token
/// // (`UPDATE t SET v = $1, token = $2 WHERE id = $3 AND token < $2`).
/// fn token_param<G: Fenced>(guard: &G) -> String {
///     guard.fencing_token().to_string()
/// }
/// ```
pub trait Fenced: Sealed {
    /// The fencing token of this grant: larger than every token granted before it in the
    /// lock's hash slot, across restarts and failovers. No I/O.
    fn fencing_token(&self) -> FencingToken;

    /// The owner this grant holds for. No I/O.
    fn owner(&self) -> &Owner;

    /// The owner's hold count right after this grant (1 for a first grant). No I/O.
    fn hold_count(&self) -> u32;
}
