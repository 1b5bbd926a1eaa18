//! [`MultiLock`] and its guard.

use std::fmt;
use std::time::Duration;

use futures_util::future::{join_all, select_all};
use tokio::time::Instant;

use crate::error::{Error, ErrorKind, Result};
use crate::lock::{FencingToken, Lock, LockGuard};

/// Several locks taken as one.
///
/// Members are acquired one by one in a fixed global order (node, then key), each waiting
/// at most what is left of the overall wait. Since every MultiLock over the same members
/// takes them in the same order, two MultiLocks can never hold one member each while waiting
/// for the other's: no deadlock, whatever order the members were given in. When a member
/// cannot be had in time, or fails, every member taken so far is released.
///
/// # Examples
/// ```no_run
/// # async fn f(a: distlock::Client, b: distlock::Client) -> distlock::Result<()> {
/// let multi = distlock::MultiLock::new([a.lock("order:7"), b.lock("order:7")])?;
/// let guard = multi.acquire().await?;
/// println!("tokens {:?}", guard.fencing_tokens());
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MultiLock {
    /// Members in acquisition order.
    members: Vec<Lock>,
}

impl fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(
                self.members
                    .iter()
                    .map(|m| (m.client().redacted_url(), m.key())),
            )
            .finish()
    }
}

impl MultiLock {
    /// A MultiLock over `locks` (in any order; they are sorted by node and key).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] when `locks` is empty, when one lock is given twice (same
    /// node and key), or when a name is invalid.
    pub fn new(locks: impl IntoIterator<Item = Lock>) -> Result<MultiLock> {
        let mut members: Vec<Lock> = locks.into_iter().collect();
        if members.is_empty() {
            return Err(Error::invalid("a MultiLock needs at least one lock"));
        }
        for m in &members {
            m.core.check()?;
        }
        members.sort_by(|a, b| {
            (a.client().redacted_url(), a.key()).cmp(&(b.client().redacted_url(), b.key()))
        });
        for pair in members.windows(2) {
            if pair[0].client().redacted_url() == pair[1].client().redacted_url()
                && pair[0].key() == pair[1].key()
            {
                return Err(Error::invalid(format!(
                    "lock {:?} on {} is given twice",
                    pair[0].name(),
                    pair[0].client().redacted_url()
                )));
            }
        }
        Ok(MultiLock { members })
    }

    /// The members, in acquisition order.
    pub fn members(&self) -> &[Lock] {
        &self.members
    }

    /// Acquires every member, waiting at most the default wait overall.
    ///
    /// The wait is the first member's client's
    /// ([`ClientBuilder::default_wait`](crate::ClientBuilder::default_wait), 60 seconds
    /// unless set).
    ///
    /// Members are taken one after another in the fixed order of [`MultiLock::members`]
    /// (node, then key), each with a fresh owner and waiting at most what is left of the
    /// overall wait; so two MultiLocks over the same members cannot deadlock. When a member
    /// cannot be had in time, or fails, the members taken so far are released before the
    /// call returns. Each member has its own lease and watchdog, as [`Lock::acquire`](crate::Lock::acquire).
    ///
    /// # Errors
    /// [`ErrorKind::NotAcquired`] when the wait elapsed (nothing is held then); a member's
    /// error (after releasing the members already taken).
    ///
    /// # Cancel safety
    /// Cancel safe: members taken so far are guards, released in the background on drop.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// // Move stock between two warehouses: both or neither.
    /// let multi = distlock::MultiLock::new([
    ///     client.lock("stock:warehouse-a"),
    ///     client.lock("stock:warehouse-b"),
    /// ])?;
    /// let guard = multi.acquire().await?;   // Err(NotAcquired): nothing is held
    /// // ... move the stock, passing guard.fencing_tokens() to the stores ...
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn acquire(&self) -> Result<MultiLockGuard> {
        let wait = self.members[0].client().default_wait();
        self.try_acquire_for(wait).await?.ok_or_else(|| {
            Error::new(
                ErrorKind::NotAcquired,
                format!(
                    "MultiLock of {} locks not acquired within {wait:?}",
                    self.members.len()
                ),
            )
        })
    }

    /// Makes one attempt at every member.
    ///
    /// `Ok(None)` when any is held by another owner (the members taken before it are released).
    ///
    /// # Errors
    /// As [`MultiLock::acquire`], except that contention is `Ok(None)`.
    ///
    /// # Cancel safety
    /// As [`MultiLock::acquire`].
    pub async fn try_acquire(&self) -> Result<Option<MultiLockGuard>> {
        self.try_acquire_for(Duration::ZERO).await
    }

    /// Acquires every member within `wait` (a [`Duration`]) overall.
    ///
    /// `Ok(None)` when it elapsed (the members taken so far are released).
    ///
    /// # Errors
    /// As [`MultiLock::acquire`], except that an elapsed wait is `Ok(None)`.
    ///
    /// # Cancel safety
    /// As [`MultiLock::acquire`].
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<MultiLockGuard>> {
        crate::keys::check_wait(wait)?;
        let deadline = Instant::now() + wait;
        let mut guards = Vec::with_capacity(self.members.len());
        for m in &self.members {
            let left = deadline.saturating_duration_since(Instant::now());
            match m.try_acquire_for(left).await {
                Ok(Some(g)) => guards.push(g),
                Ok(None) => {
                    release_all(guards).await;
                    return Ok(None);
                }
                Err(e) => {
                    release_all(guards).await;
                    return Err(e);
                }
            }
        }
        Ok(Some(MultiLockGuard { guards }))
    }
}

async fn release_all(guards: Vec<LockGuard>) {
    for r in join_all(guards.into_iter().map(|g| g.release())).await {
        if let Err(e) = r {
            tracing::warn!(
                error = format_args!("{e:#}"),
                "releasing a MultiLock member failed"
            );
        }
    }
}

/// All members of a [`MultiLock`], held. Dropping it releases every member in the
/// background.
#[must_use = "dropping the guard releases every member at once"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct MultiLockGuard {
    guards: Vec<LockGuard>,
}

impl MultiLockGuard {
    /// The members' guards, in acquisition order.
    pub fn guards(&self) -> &[LockGuard] {
        &self.guards
    }

    /// The members' fencing tokens, in acquisition order (each from its own node).
    pub fn fencing_tokens(&self) -> Vec<FencingToken> {
        self.guards.iter().map(|g| g.fencing_token()).collect()
    }

    /// The members' hold counts right after the grant, in acquisition order.
    pub fn hold_counts(&self) -> Vec<u32> {
        self.guards.iter().map(|g| g.hold_count()).collect()
    }

    /// Re-enters every member with its owner (hold count + 1 on every node).
    ///
    /// As [`LockGuard::reenter`](crate::LockGuard::reenter) over a MultiLock: for a function
    /// that holds the MultiLock and calls another that takes it too.
    ///
    /// # Errors
    /// A member's [`LockGuard::reenter`](crate::LockGuard::reenter) error; members re-entered before it are released.
    ///
    /// # Cancel safety
    /// As [`LockGuard::reenter`](crate::LockGuard::reenter).
    pub async fn reenter(&self) -> Result<MultiLockGuard> {
        let mut guards = Vec::with_capacity(self.guards.len());
        for g in &self.guards {
            match g.reenter().await {
                Ok(inner) => guards.push(inner),
                Err(e) => {
                    release_all(guards).await;
                    return Err(e);
                }
            }
        }
        Ok(MultiLockGuard { guards })
    }
}

impl crate::lease::Sealed for MultiLockGuard {}

impl MultiLockGuard {
    /// Releases every member (one hold each), concurrently.
    ///
    /// # Errors
    /// The first member's error ([`ErrorKind::NotHeld`] when one was lost); every member is
    /// released all the same.
    ///
    /// # Cancel safety
    /// As [`LockGuard::release`](crate::LockGuard::release).
    pub async fn release(self) -> Result<()> {
        let results = join_all(self.guards.into_iter().map(|g| g.release())).await;
        results.into_iter().collect::<Result<Vec<()>>>().map(|_| ())
    }

    /// Resolves when any member's lease is lost.
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) {
        let futures: Vec<_> = self.guards.iter().map(|g| Box::pin(g.lost())).collect();
        select_all(futures).await;
    }
}

impl crate::Release for MultiLockGuard {
    type Released = ();

    /// As [`MultiLockGuard::release`].
    async fn release(self) -> Result<()> {
        MultiLockGuard::release(self).await
    }
}

impl crate::Lease for MultiLockGuard {
    /// Whether any member's lease is known lost (no I/O).
    fn is_lost(&self) -> bool {
        self.guards.iter().any(|g| g.is_lost())
    }

    /// As [`MultiLockGuard::lost`].
    async fn lost(&self) {
        MultiLockGuard::lost(self).await
    }

    /// The earliest local validity deadline of the members.
    fn valid_until(&self) -> std::time::Instant {
        self.guards
            .iter()
            .map(|g| g.valid_until())
            .min()
            .expect("a MultiLock has members")
    }

    /// Sets every member's TTL to `lease` (a [`Duration`], at least 1 ms) from now, as
    /// [`LockGuard::extend`](crate::Lease::extend).
    ///
    /// # Errors
    /// The first member's error ([`ErrorKind::NotHeld`] when one was lost); the others are
    /// still extended.
    ///
    /// # Cancel safety
    /// Cancel safe: PEXPIRE is idempotent.
    async fn extend(&self, lease: Duration) -> Result<()> {
        let results = join_all(self.guards.iter().map(|g| g.extend(lease))).await;
        results.into_iter().collect::<Result<Vec<()>>>().map(|_| ())
    }
}
