//! [`Guard`]: the one blocking guard, over any async guard. The verbs every guard has, and those
//! of a guard with a lease or a fencing token, are written once here by trait bound; each
//! guard's own are beside its handle (`hold.rs`, `job.rs`, `semaphore.rs`, `multi.rs`).

use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

use super::Rt;
use crate::error::Result;
use crate::kind::{Fair, HoldKind, Plain, ReadWrite};
use crate::{Fenced, FencingToken, Lease, Owner, Release};

/// A held guard, blocking form of the async guard `G`: every guard of `distlock::blocking` is
/// one, named by its alias ([`LockGuard`](super::LockGuard), [`JobGuard`](super::JobGuard),
/// [`SemaphorePermit`](super::SemaphorePermit), …).
///
/// Its verbs are the async guard's, blocking where that one awaits: those of every guard
/// ([`release`](Guard::release), [`into_async`](Guard::into_async)), those of a guard with a
/// lease (`G:` [`Lease`]: [`is_lost`](Guard::is_lost), [`extend`](Guard::extend), …) and of
/// one with a fencing token (`G:` [`Fenced`]: [`fencing_token`](Guard::fencing_token), …),
/// then each guard's own. What `G` cannot do does not compile.
///
/// Released by [`release`](Guard::release), or when dropped: synchronously, bounded by twice
/// the command timeout (see the [module docs](super)).
///
/// # Examples
/// ```no_run
/// use distlock::blocking::Guard;
/// use distlock::{Fenced, Release};
///
/// // Any guard with a fencing token: a plain, fair, read or write hold.
/// fn token_of<G: Release + Fenced>(guard: &Guard<G>) -> u128 {
///     guard.fencing_token().get()
/// }
///
/// fn main() -> distlock::Result<()> {
///     let client = distlock::blocking::Client::connect("redis://127.0.0.1/")?;
///     let rw = client.rw_lock("catalog");
///     let w = rw.write()?;
///     println!("writing under token {}", token_of(&w));
///     let r = w.downgrade()?; // a write hold's own verb
///     w.release()?;
///     println!("reading under token {}", token_of(&r));
///     r.release()
/// }
/// ```
///
/// A permit has no lease:
/// ```compile_fail
/// # fn f(client: distlock::blocking::Client) -> distlock::Result<()> {
/// let permit = client.semaphore("pool").acquire()?;
/// permit.extend(std::time::Duration::from_secs(5))?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases what it holds at once; bind it to a variable"]
#[clippy::has_significant_drop]
pub struct Guard<G: Release> {
    guard: Option<G>,
    rt: Rt,
    /// Other client runtimes kept alive until the release (a MultiLock's members'), dropped
    /// after it.
    keep: Vec<Rt>,
}

/// What `Debug` prints around an async guard `Self` (`None`: the async guard alone), or
/// before a lock handle of kind `Self`.
pub(super) trait Named {
    const NAME: Option<&'static str>;
}

impl<K: HoldKind> Named for crate::HoldGuard<K> {
    const NAME: Option<&'static str> = Some(K::GUARD);
}
impl Named for crate::JobGuard {
    const NAME: Option<&'static str> = Some("JobGuard");
}
impl Named for crate::SemaphorePermit {
    const NAME: Option<&'static str> = Some("SemaphorePermit");
}
impl Named for crate::LeasedPermit {
    const NAME: Option<&'static str> = Some("LeasedPermit");
}
impl Named for crate::MultiLockGuard {
    const NAME: Option<&'static str> = None;
}
impl Named for crate::RedLockGuard {
    const NAME: Option<&'static str> = Some("RedLockGuard");
}
impl Named for Plain {
    const NAME: Option<&'static str> = Some("blocking::Lock");
}
impl Named for Fair {
    const NAME: Option<&'static str> = Some("blocking::FairLock");
}
impl Named for ReadWrite {
    const NAME: Option<&'static str> = Some("blocking::RwLock");
}

impl<G: Release> Guard<G> {
    /// `guard`, held on `rt`.
    pub(super) fn new(guard: G, rt: Rt) -> Guard<G> {
        Guard {
            guard: Some(guard),
            rt,
            keep: Vec::new(),
        }
    }

    /// This guard keeping `runtimes` alive until its release.
    pub(super) fn keeping(mut self, runtimes: Vec<Rt>) -> Guard<G> {
        self.keep = runtimes;
        self
    }

    /// Another guard on the same runtimes (a re-entry, a downgrade).
    pub(super) fn wrap<H: Release>(&self, guard: H) -> Guard<H> {
        Guard::new(guard, self.rt.clone()).keeping(self.keep.clone())
    }

    pub(super) fn get(&self) -> &G {
        self.guard.as_ref().expect("guard present until released")
    }

    /// The async guard, in this guard's runtime context (for a call that spawns there).
    pub(super) fn with_mut<T>(&mut self, f: impl FnOnce(&mut G) -> T) -> T {
        let _runtime = self.rt.enter();
        f(self.guard.as_mut().expect("guard present until released"))
    }

    pub(super) fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.rt.block_on(future)
    }

    /// Gives back what the guard holds and waits for the server's answer, as the async
    /// guard's [`release`](Release::release): `()`, or a [`SemaphorePermit`]'s permits
    /// available after it.
    ///
    /// Dropping the guard releases too (synchronously, bounded; errors only logged).
    ///
    /// # Errors
    /// As the async guard's [`release`](Release::release):
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when the hold was gone before the
    /// release; server failures.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    ///
    /// [`SemaphorePermit`]: super::SemaphorePermit
    pub fn release(mut self) -> Result<G::Released> {
        let guard = self.guard.take().expect("guard present until released");
        self.rt.block_on(guard.release())
    }

    /// Returns the async guard underneath (its drop then releases in the background).
    ///
    /// It runs on this blocking client's runtime: keep the client (or another of its handles)
    /// alive while the async guard is in use, or its watchdog and connections stop with it.
    pub fn into_async(mut self) -> G {
        self.guard.take().expect("guard present until released")
    }
}

impl<G: Release + Lease> Guard<G> {
    /// Returns the instant until which the hold is surely ours by the local monotonic clock,
    /// as the async guard's [`valid_until`](Lease::valid_until). No I/O.
    pub fn valid_until(&self) -> Instant {
        self.get().valid_until()
    }

    /// Returns whether the lease is known lost, without I/O, as the async guard's
    /// [`is_lost`](Lease::is_lost).
    pub fn is_lost(&self) -> bool {
        self.get().is_lost()
    }

    /// Blocks until the lease is lost, as the async guard's [`lost`](Lease::lost) resolves.
    ///
    /// Never returns while it is kept (see [`lost_timeout`](Guard::lost_timeout) for a
    /// bounded wait).
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn lost(&self) {
        self.block_on(self.get().lost())
    }

    /// Block until the lease is lost or `timeout` passed: `true` when it was lost.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn lost_timeout(&self, timeout: Duration) -> bool {
        self.block_on(async {
            tokio::time::timeout(timeout, self.get().lost())
                .await
                .is_ok()
        })
    }

    /// Sets the lease to `lease` from now if still held, as the async guard's
    /// [`extend`](Lease::extend).
    ///
    /// # Errors
    /// As the async guard's [`extend`](Lease::extend).
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn extend(&self, lease: Duration) -> Result<()> {
        self.block_on(self.get().extend(lease))
    }
}

impl<G: Release + Fenced> Guard<G> {
    /// Returns the fencing token of this grant, as the async guard's
    /// [`fencing_token`](Fenced::fencing_token). No I/O.
    pub fn fencing_token(&self) -> FencingToken {
        self.get().fencing_token()
    }

    /// The owner this guard holds for, as the async guard's [`owner`](Fenced::owner). No I/O.
    pub fn owner(&self) -> &Owner {
        self.get().owner()
    }

    /// The owner's hold count right after this grant, as the async guard's
    /// [`hold_count`](Fenced::hold_count). No I/O.
    pub fn hold_count(&self) -> u32 {
        self.get().hold_count()
    }
}

impl<G: Release + Named> fmt::Debug for Guard<G> {
    /// As before the generic guard: the async guard inside its name (`LockGuard(…)`,
    /// `JobGuard(…)`, …), a MultiLock's guard alone.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.guard, G::NAME) {
            (Some(g), Some(name)) => f.debug_tuple(name).field(g).finish(),
            (Some(g), None) => g.fmt(f),
            (None, Some(name)) => write!(f, "{name}(released)"),
            (None, None) => f.write_str("released"),
        }
    }
}

impl<G: Release> Drop for Guard<G> {
    fn drop(&mut self) {
        if let Some(guard) = self.guard.take() {
            let what = format!("{guard:?}");
            self.rt.release_on_drop(&what, guard, Release::release);
        }
    }
}
