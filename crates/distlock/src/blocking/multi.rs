//! Blocking forms of the locks over several nodes: [`MultiLock`] (Redisson's `RedissonMultiLock`)
//! and [`RedLock`] (redis.io's Redlock algorithm over independent masters).

use std::fmt;
use std::time::Duration;

use super::{Guard, Lock, Rt, DEFAULT_WORKER_THREADS};
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

    /// `guard`, keeping every member's runtime alive.
    fn guard(&self, guard: Guard<crate::MultiLockGuard>) -> MultiLockGuard {
        guard.keeping(self.runtimes.clone())
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
        self.rt.acquire(self.inner.acquire()).map(|g| self.guard(g))
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
        let g = self.rt.try_acquire(self.inner.try_acquire())?;
        Ok(g.map(|g| self.guard(g)))
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
        let g = self.rt.try_acquire(self.inner.try_acquire_for(wait))?;
        Ok(g.map(|g| self.guard(g)))
    }
}

/// Every member of a [`MultiLock`], held: blocking form of [`crate::MultiLockGuard`], a
/// [`Guard`] over it.
///
/// It keeps the other members' client runtimes alive until its release. Released by
/// [`release`](Guard::release) or when dropped (synchronously; see the [module docs](super)).
pub type MultiLockGuard = Guard<crate::MultiLockGuard>;

impl Guard<crate::MultiLockGuard> {
    /// The members' fencing tokens, in acquisition order.
    pub fn fencing_tokens(&self) -> Vec<FencingToken> {
        self.get().fencing_tokens()
    }

    /// The members' hold counts right after the grant, in acquisition order.
    pub fn hold_counts(&self) -> Vec<u32> {
        self.get().hold_counts()
    }

    /// Re-enter every member, as [`crate::MultiLockGuard::reenter`].
    ///
    /// # Errors
    /// As [`crate::MultiLockGuard::reenter`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn reenter(&self) -> Result<MultiLockGuard> {
        let g = self.block_on(self.get().reenter())?;
        Ok(self.wrap(g))
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
        self.rt.try_acquire(self.inner.try_acquire())
    }

    /// Rounds until a quorum grants or `wait` passed, as [`crate::RedLock::try_acquire_for`].
    ///
    /// # Errors
    /// As [`crate::RedLock::try_acquire_for`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn try_acquire_for(&self, wait: Duration) -> Result<Option<RedLockGuard>> {
        self.rt.try_acquire(self.inner.try_acquire_for(wait))
    }

    /// Rounds until a quorum grants, up to the default wait, as [`crate::RedLock::acquire`].
    ///
    /// # Errors
    /// As [`crate::RedLock::acquire`].
    ///
    /// # Panics
    /// Inside an async runtime (see the [module docs](super#panics)).
    pub fn acquire(&self) -> Result<RedLockGuard> {
        self.rt.acquire(self.inner.acquire())
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

/// A RedLock held by a quorum, blocking form of [`crate::RedLockGuard`]: a [`Guard`] over it.
///
/// Released by [`release`](Guard::release) (on every node) or when dropped (synchronously; see
/// the [module docs](super)).
pub type RedLockGuard = Guard<crate::RedLockGuard>;

impl Guard<crate::RedLockGuard> {
    /// The owner field written on the nodes.
    pub fn owner(&self) -> &Owner {
        self.get().owner()
    }

    /// Per node, the fencing token it issued, or `None` where it did not grant.
    pub fn node_tokens(&self) -> &[Option<FencingToken>] {
        self.get().node_tokens()
    }

    /// Nodes that granted this lock.
    pub fn granted_nodes(&self) -> usize {
        self.get().granted_nodes()
    }

    /// Have a watchdog extend the lock while the guard lives, as
    /// [`crate::RedLockGuard::keep_alive`].
    ///
    /// # Errors
    /// As [`crate::RedLockGuard::keep_alive`].
    pub fn keep_alive(&mut self, lease: Duration) -> Result<()> {
        self.with_mut(|g| g.keep_alive(lease))
    }
}
