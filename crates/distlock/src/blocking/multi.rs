//! Blocking forms of the locks over several nodes: [`MultiLock`] (Redisson's `RedissonMultiLock`)
//! and [`RedLock`] (redis.io's Redlock algorithm over independent masters).

use std::fmt;
use std::time::Duration;

use super::{Held, Lock, Rt, DEFAULT_WORKER_THREADS};
use crate::error::{Error, Result};
use crate::{FencingToken, LockStatus, Owner};

/// Several locks taken all or nothing, blocking form of [`crate::MultiLock`].
#[derive(Clone)]
pub struct MultiLock {
    inner: crate::MultiLock,
    /// The first member's runtime (the MultiLock waits on it), then every other distinct
    /// runtime of its members: each client's runtime must live as long as its lock is used.
    rt: Rt,
    runtimes: Vec<Rt>,
}

impl fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::MultiLock")
            .field(&self.inner)
            .finish()
    }
}

impl MultiLock {
    /// Creates a MultiLock over `locks` (in any order; they are sorted by node and key), as
    /// [`crate::MultiLock::new`].
    ///
    /// The locks may come from different blocking clients; the MultiLock waits on the first
    /// one's runtime and keeps every member's client runtime alive (as do its guards), so
    /// dropping a client does not stop its members' watchdog.
    ///
    /// # Errors
    /// As [`crate::MultiLock::new`]: [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)
    /// when `locks` is empty, holds one lock twice, or a name is invalid.
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> Result<MultiLock> {
        let mut runtimes: Vec<Rt> = Vec::new();
        let asyncs: Vec<crate::Lock> = locks
            .into_iter()
            .map(|l| {
                if !runtimes.iter().any(|r| r.id() == l.rt.id()) {
                    runtimes.push(l.rt.clone());
                }
                l.as_async().clone()
            })
            .collect();
        let inner = crate::MultiLock::new(asyncs)?;
        if runtimes.is_empty() {
            return Err(Error::invalid("a MultiLock needs at least one lock"));
        }
        let rt = runtimes.remove(0);
        Ok(MultiLock {
            inner,
            rt,
            runtimes,
        })
    }

    /// The guard over `held`, keeping every member's runtime alive.
    fn guard(&self, held: Held<crate::MultiLockGuard>) -> MultiLockGuard {
        MultiLockGuard(held, self.runtimes.clone())
    }

    /// Acquires every member (all or nothing), waiting up to the client's default wait, as
    /// [`crate::MultiLock::acquire`].
    ///
    /// The calling thread sleeps while it waits; a release elsewhere wakes it.
    ///
    /// # Errors
    /// As [`crate::MultiLock::acquire`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn acquire(&self) -> Result<MultiLockGuard> {
        self.rt.acquire(self.inner.acquire(), |h| self.guard(h))
    }

    /// Makes one attempt at every member, never waiting, as [`crate::MultiLock::try_acquire`].
    ///
    /// `Ok(None)` when a member is held elsewhere (the members taken are given back).
    ///
    /// # Errors
    /// As [`crate::MultiLock::try_acquire`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire(&self) -> Result<Option<MultiLockGuard>> {
        self.rt
            .try_acquire(self.inner.try_acquire(), |h| self.guard(h))
    }

    /// Acquires every member, waiting at most `wait`, as [`crate::MultiLock::try_acquire_for`].
    ///
    /// `Ok(None)` when the wait elapsed.
    ///
    /// # Errors
    /// As [`crate::MultiLock::try_acquire_for`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<MultiLockGuard>> {
        self.rt
            .try_acquire(self.inner.try_acquire_for(wait), |h| self.guard(h))
    }
}

/// Every member of a [`MultiLock`], held.
///
/// Blocking form of [`crate::MultiLockGuard`], released by [`release`](MultiLockGuard::release) or
/// when dropped (synchronously; see the [module docs](super)).
#[must_use = "dropping the guard releases every member at once"]
#[clippy::has_significant_drop]
pub struct MultiLockGuard(
    Held<crate::MultiLockGuard>,
    /// The other members' client runtimes, kept alive until the release (dropped after it).
    Vec<Rt>,
);

impl fmt::Debug for MultiLockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl MultiLockGuard {
    /// The members' fencing tokens, in acquisition order.
    pub fn fencing_tokens(&self) -> Vec<FencingToken> {
        self.0.get().fencing_tokens()
    }

    /// The members' hold counts right after the grant, in acquisition order.
    pub fn hold_counts(&self) -> Vec<u32> {
        self.0.get().hold_counts()
    }

    /// The earliest local validity deadline of the members.
    pub fn valid_until(&self) -> std::time::Instant {
        self.0.valid_until()
    }

    /// Returns whether a member's lease is known lost, without I/O, as the async guard's
    /// [`is_lost`](crate::Lease::is_lost).
    pub fn is_lost(&self) -> bool {
        self.0.is_lost()
    }

    /// Blocks until a member's lease is lost.
    ///
    /// Never returns while it is kept (see [`lost_timeout`](Self::lost_timeout) for a bounded
    /// wait).
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn lost(&self) {
        self.0.lost()
    }

    /// Block until a member's lease is lost or `timeout` passed: `true` when it was lost.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn lost_timeout(&self, timeout: Duration) -> bool {
        self.0.lost_timeout(timeout)
    }

    /// Re-enter every member, as [`crate::MultiLockGuard::reenter`].
    ///
    /// # Errors
    /// As [`crate::MultiLockGuard::reenter`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn reenter(&self) -> Result<MultiLockGuard> {
        let g = self.0.block_on(self.0.get().reenter())?;
        Ok(MultiLockGuard(self.0.wrap(g), self.1.clone()))
    }

    /// Sets every member's TTL to `lease` from now, as
    /// [`crate::MultiLockGuard::extend`](crate::Lease::extend).
    ///
    /// # Errors
    /// As [`crate::MultiLockGuard::extend`](crate::Lease::extend).
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn extend(&self, lease: Duration) -> Result<()> {
        self.0.extend(lease)
    }

    /// Release every member, as [`crate::MultiLockGuard::release`](crate::Release::release).
    ///
    /// # Errors
    /// As [`crate::MultiLockGuard::release`](crate::Release::release).
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn release(self) -> Result<()> {
        self.0.release()
    }
}

/// The independent masters of blocking [`RedLock`]s, blocking form of [`crate::RedLockNodes`].
///
/// Configure a [`crate::RedLockBuilder`] (its setters do no I/O) and [`build`](RedLockNodes::build)
/// it here; [`RedLockNodes::lock`] names a lock.
#[derive(Clone)]
pub struct RedLockNodes {
    inner: crate::RedLockNodes,
    rt: Rt,
}

impl fmt::Debug for RedLockNodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::RedLockNodes")
            .field(&self.inner)
            .finish()
    }
}

impl RedLockNodes {
    /// Connects the nodes of `builder` on a runtime of its own and checks its settings.
    ///
    /// The runtime has [`DEFAULT_WORKER_THREADS`] workers.
    ///
    /// # Errors
    /// As [`crate::RedLockBuilder::build`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    ///
    /// # Examples
    /// ```no_run
    /// use std::time::Duration;
    /// use distlock::blocking::RedLockNodes;
    ///
    /// let nodes = RedLockNodes::build(
    ///     distlock::RedLockNodes::builder_from_urls([
    ///         "redis://10.0.0.1/", "redis://10.0.0.2/", "redis://10.0.0.3/",
    ///     ])
    ///     .ttl(Duration::from_secs(10)),
    /// )?;
    /// let guard = nodes.lock("payments").acquire()?;
    /// // ... work shorter than the validity ...
    /// guard.release()?;
    /// # Ok::<(), distlock::Error>(())
    /// ```
    pub fn build(builder: crate::RedLockBuilder) -> Result<RedLockNodes> {
        let (inner, rt) = Rt::start(DEFAULT_WORKER_THREADS, builder.build(), |_| {
            crate::DEFAULT_COMMAND_TIMEOUT * 2
        })?;
        Ok(RedLockNodes { inner, rt })
    }

    /// The RedLock called `name` on these nodes, as [`crate::RedLockNodes::lock`]. No I/O.
    pub fn lock(&self, name: impl Into<String>) -> RedLock {
        RedLock {
            inner: self.inner.lock(name),
            rt: self.rt.clone(),
        }
    }

    /// The number of nodes.
    pub fn node_count(&self) -> usize {
        self.inner.node_count()
    }

    /// Grants needed to hold the lock.
    pub fn quorum(&self) -> usize {
        self.inner.quorum()
    }

    /// The TTL of every grant.
    pub fn ttl(&self) -> Duration {
        self.inner.ttl()
    }
}

/// A lock over independent masters (redis.io's Redlock), blocking form of [`crate::RedLock`].
///
/// Made by [`RedLockNodes::lock`]. Cheap to clone.
#[derive(Clone)]
pub struct RedLock {
    inner: crate::RedLock,
    rt: Rt,
}

impl fmt::Debug for RedLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("blocking::RedLock")
            .field(&self.inner)
            .finish()
    }
}

impl RedLock {
    fn guard(&self, guard: crate::RedLockGuard) -> RedLockGuard {
        RedLockGuard(Held::new(guard, self.rt.clone()))
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// One round of grants, as [`crate::RedLock::try_acquire`].
    ///
    /// # Errors
    /// As [`crate::RedLock::try_acquire`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire(&self) -> Result<Option<RedLockGuard>> {
        Ok(self
            .rt
            .block_on(self.inner.try_acquire())?
            .map(|g| self.guard(g)))
    }

    /// Rounds until a quorum grants or `wait` passed, as [`crate::RedLock::try_acquire_for`].
    ///
    /// # Errors
    /// As [`crate::RedLock::try_acquire_for`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<RedLockGuard>> {
        Ok(self
            .rt
            .block_on(self.inner.try_acquire_for(wait))?
            .map(|g| self.guard(g)))
    }

    /// Rounds until a quorum grants, up to the default wait, as [`crate::RedLock::acquire`].
    ///
    /// # Errors
    /// As [`crate::RedLock::acquire`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn acquire(&self) -> Result<RedLockGuard> {
        self.rt
            .block_on(self.inner.acquire())
            .map(|g| self.guard(g))
    }

    /// Each node's view of the lock, as [`crate::RedLock::status`].
    ///
    /// # Errors
    /// As [`crate::RedLock::status`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn status(&self) -> Result<Vec<(String, Result<LockStatus>)>> {
        self.rt.block_on(self.inner.status())
    }
}

/// A RedLock held by a quorum, blocking form of [`crate::RedLockGuard`].
///
/// Released by [`release`](RedLockGuard::release) or when dropped (synchronously; see the [module
/// docs](super)).
#[must_use = "dropping the guard releases the lock at once"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct RedLockGuard(Held<crate::RedLockGuard>);

impl RedLockGuard {
    /// The owner field written on the nodes.
    pub fn owner(&self) -> &Owner {
        self.0.get().owner()
    }

    /// Per node, the fencing token it issued, or `None` where it did not grant.
    pub fn node_tokens(&self) -> &[Option<FencingToken>] {
        self.0.get().node_tokens()
    }

    /// Nodes that granted this lock.
    pub fn granted_nodes(&self) -> usize {
        self.0.get().granted_nodes()
    }

    /// End of the validity by the local monotonic clock.
    pub fn valid_until(&self) -> std::time::Instant {
        self.0.valid_until()
    }

    /// Returns whether the lock's lease is known lost, without I/O, as the async guard's
    /// [`is_lost`](crate::Lease::is_lost).
    pub fn is_lost(&self) -> bool {
        self.0.is_lost()
    }

    /// Blocks until the lock's lease is lost.
    ///
    /// Never returns while it is kept (see [`lost_timeout`](Self::lost_timeout) for a bounded
    /// wait).
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn lost(&self) {
        self.0.lost()
    }

    /// Block until the lock's lease is lost or `timeout` passed: `true` when it was lost.
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn lost_timeout(&self, timeout: Duration) -> bool {
        self.0.lost_timeout(timeout)
    }

    /// Extend on a quorum, as [`crate::RedLockGuard::extend`](crate::Lease::extend).
    ///
    /// # Errors
    /// As [`crate::RedLockGuard::extend`](crate::Lease::extend).
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn extend(&self, lease: Duration) -> Result<()> {
        self.0.extend(lease)
    }

    /// Have a watchdog extend the lock while the guard lives, as
    /// [`crate::RedLockGuard::keep_alive`].
    ///
    /// # Errors
    /// As [`crate::RedLockGuard::keep_alive`].
    pub fn keep_alive(&mut self, lease: Duration) -> Result<()> {
        let _runtime = self.0.rt.enter();
        self.0.get_mut().keep_alive(lease)
    }

    /// Release on every node, as [`crate::RedLockGuard::release`](crate::Release::release).
    ///
    /// # Errors
    /// As [`crate::RedLockGuard::release`](crate::Release::release).
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn release(self) -> Result<()> {
        self.0.release()
    }
}
