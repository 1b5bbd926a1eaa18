//! [`RedLockGuard`]: a lock held on a quorum of nodes; extension and release everywhere.

use super::*;
use crate::watchdog::{KeepAlive, LeaseState, Renew};

/// A held RedLock. Dropping it releases on every node in the background.
#[must_use = "dropping the guard releases the lock at once"]
#[clippy::has_significant_drop]
pub struct RedLockGuard {
    pub(super) redlock: RedLock,
    pub(super) name: String,
    pub(super) owner: Owner,
    pub(super) tokens: Vec<Option<FencingToken>>,
    pub(super) valid_until: Arc<Mutex<Instant>>,
    pub(super) extensions: Arc<AtomicU32>,
    pub(super) released: bool,
    /// The watchdog's keep-alive, when asked for ([`RedLockGuard::keep_alive`]).
    pub(super) keep_alive: Option<KeepAlive>,
}

impl fmt::Debug for RedLockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedLockGuard")
            .field("name", &self.name)
            .field("owner", &self.owner)
            .field("tokens", &self.tokens)
            .finish()
    }
}

impl RedLockGuard {
    /// The owner field written on the nodes.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// Returns, per node, the fencing token it issued or `None` where it did not grant.
    ///
    /// Tokens of different nodes come from different counters and are not comparable with each
    /// other.
    pub fn node_tokens(&self) -> &[Option<FencingToken>] {
        &self.tokens
    }

    /// Nodes that granted this lock.
    pub fn granted_nodes(&self) -> usize {
        self.tokens.iter().filter(|t| t.is_some()).count()
    }

    /// Has a watchdog [extend](crate::Lease::extend) the lock to `lease` every third of it
    /// while the guard lives.
    ///
    /// The watchdog is the first node's client's: one task, not one per lock. Each extension
    /// needs a quorum, as `extend` does; when one fails the validity is left to end and
    /// [`lost`](crate::Lease::lost) fires then. Stops when the guard is released or dropped.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a zero or overflowing `lease` or one not above the node
    /// timeout (as [`RedLockGuard::extend`](crate::Lease::extend)).
    pub fn keep_alive(&mut self, lease: Duration) -> Result<()> {
        keys::lease_ms("extension", lease)?;
        let inner = &self.redlock.nodes.inner;
        if lease <= inner.node_timeout {
            return Err(Error::invalid(format!(
                "RedLock {:?}: a keep-alive lease of {lease:?} is not above the node timeout {:?}",
                self.name, inner.node_timeout
            )));
        }
        let Some(client) = inner
            .nodes
            .iter()
            .find_map(|n| n.client.lock().unwrap().clone())
        else {
            return Err(Error::not_held(&self.name, NotHeldReason::Gone));
        };
        let (redlock, name, owner) = (self.redlock.clone(), self.name.clone(), self.owner.clone());
        let (valid_until, extensions) = (self.valid_until.clone(), self.extensions.clone());
        let renew: Renew = Arc::new(move || {
            let (redlock, name, owner) = (redlock.clone(), name.clone(), owner.clone());
            let (valid_until, extensions) = (valid_until.clone(), extensions.clone());
            Box::pin(async move {
                match extend_quorum(&redlock, &name, &owner, &valid_until, &extensions, lease).await
                {
                    Ok(()) => Ok(true),
                    // Gone, or no extension left (`max_extensions`): let the validity end.
                    Err(e) if matches!(e.kind(), ErrorKind::NotHeld | ErrorKind::InvalidInput) => {
                        Ok(false)
                    }
                    Err(e) => Err(e),
                }
            })
        });
        // The guard's own validity is what `lost()` watches; the watchdog's state only bounds
        // its retries.
        let state = Arc::new(LeaseState::unreported(
            *self.valid_until.lock().unwrap(),
            crate::kind::REDLOCK,
        ));
        self.keep_alive = Some(client.leases().keep_alive(
            format!("RedLock {:?}", self.name),
            lease,
            lease / 3,
            state,
            renew,
        ));
        Ok(())
    }
}

async fn release_everywhere(redlock: &RedLock, name: &str, owner: &Owner) -> usize {
    let inner = &redlock.nodes.inner;
    let results = futures_util::future::join_all(inner.nodes.iter().map(|node| async {
        let c = node.client.lock().unwrap().clone()?;
        let lock = c.lock(name);
        match tokio::time::timeout(
            inner.node_timeout.max(Duration::from_millis(100)),
            lock.core.release_hold(owner, inner.ttl),
        )
        .await
        {
            Ok(Ok(())) => Some(()),
            _ => None,
        }
    }))
    .await;
    results.iter().filter(|r| r.is_some()).count()
}

impl Drop for RedLockGuard {
    fn drop(&mut self) {
        self.keep_alive.take();
        if self.released {
            return;
        }
        let (redlock, name, owner) = (self.redlock.clone(), self.name.clone(), self.owner.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                release_everywhere(&redlock, &name, &owner).await;
            });
        }
    }
}

/// Extend `name` held by `owner` to `lease` on every node; counts only with a quorum within
/// the validity (see `Lease::extend` of [`RedLockGuard`]).
async fn extend_quorum(
    redlock: &RedLock,
    name: &str,
    owner: &Owner,
    valid_until: &Mutex<Instant>,
    extensions: &AtomicU32,
    lease: Duration,
) -> Result<()> {
    let inner = &redlock.nodes.inner;
    let lease_ms = keys::lease_ms("extension", lease)?;
    if lease <= inner.node_timeout {
        return Err(Error::invalid(format!(
            "RedLock {name:?}: an extension of {lease:?} is not above the node timeout {:?}",
            inner.node_timeout
        )));
    }
    if let Some(max) = inner.max_extensions {
        if extensions.load(Ordering::Relaxed) >= max {
            return Err(Error::invalid(format!(
                "RedLock {name:?}: the limit of {max} extensions is reached"
            )));
        }
    }
    let start = Instant::now();
    if start >= *valid_until.lock().unwrap() {
        return Err(Error::not_held(name, NotHeldReason::Gone));
    }
    let results = futures_util::future::join_all(inner.nodes.iter().map(|node| async {
        let c = node.client.lock().unwrap().clone()?;
        let lock = c.lock(name);
        match tokio::time::timeout(inner.node_timeout, lock.core.renew_one(owner, lease_ms)).await {
            Ok(Ok(1)) => Some(()),
            _ => None,
        }
    }))
    .await;
    let extended = results.iter().filter(|r| r.is_some()).count();
    let elapsed = start.elapsed();
    let validity = lease
        .checked_sub(elapsed)
        .and_then(|v| v.checked_sub(redlock.drift(lease)));
    match validity {
        Some(v) if extended >= inner.quorum && !v.is_zero() => {
            extensions.fetch_add(1, Ordering::Relaxed);
            *valid_until.lock().unwrap() = start + v;
            Ok(())
        }
        _ => Err(Error::not_held(name, NotHeldReason::Gone)),
    }
}

impl crate::lease::Sealed for RedLockGuard {}

impl RedLockGuard {
    /// Release on every node, in parallel, each bounded by the node timeout (at least
    /// 100 ms). Only this owner's hold is removed: a node where another owner holds the lock
    /// is left alone.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when fewer than a quorum of nodes still had our hold (the
    /// validity had ended); every node is released all the same.
    ///
    /// # Cancel safety
    /// A dropped release may or may not have reached each node; the TTL ends the rest.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(redlock: distlock::RedLock) -> distlock::Result<()> {
    /// if let Some(guard) = redlock.try_acquire().await? {
    ///     // the work
    ///     if let Err(e) = guard.release().await {
    ///         eprintln!("the lock had expired before the release: {e}");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn release(mut self) -> Result<()> {
        self.released = true;
        self.keep_alive.take();
        let released = release_everywhere(&self.redlock, &self.name, &self.owner).await;
        if released >= self.redlock.nodes.inner.quorum {
            Ok(())
        } else {
            Err(Error::not_held(&self.name, NotHeldReason::Gone))
        }
    }

    /// Resolves when the validity ends (unless extended first).
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) {
        loop {
            let until = *self.valid_until.lock().unwrap();
            if Instant::now() >= until {
                return;
            }
            tokio::time::sleep_until(until).await;
        }
    }
}

impl crate::Release for RedLockGuard {
    type Released = ();

    /// As [`RedLockGuard::release`].
    async fn release(self) -> Result<()> {
        RedLockGuard::release(self).await
    }
}

impl crate::Lease for RedLockGuard {
    /// Whether the validity has ended by the local monotonic clock. No I/O.
    fn is_lost(&self) -> bool {
        Instant::now() >= *self.valid_until.lock().unwrap()
    }

    /// As [`RedLockGuard::lost`].
    async fn lost(&self) {
        RedLockGuard::lost(self).await
    }

    /// End of the validity by the local monotonic clock: start + TTL − elapsed − drift, or,
    /// after an [extension](crate::Lease::extend), its start + lease − elapsed − drift.
    fn valid_until(&self) -> std::time::Instant {
        self.valid_until.lock().unwrap().into_std()
    }

    /// Set the lock's TTL to `lease` from now on every node (shorter or longer than what was
    /// left), if it is still ours.
    ///
    /// The extension counts only if a quorum of nodes extends within the current validity;
    /// the new validity is measured from the start of this call, as an acquire's is:
    /// `lease` − elapsed − drift, drift = `lease` × drift factor (0.01) + 2 ms. Nodes that
    /// did not extend keep their old TTL.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when the validity already ended or fewer than a quorum of
    /// nodes still had our hold (then [`lost`](crate::Lease::lost) fires at the old
    /// validity's end); [`ErrorKind::InvalidInput`] for a zero or overflowing `lease`, a
    /// `lease` not above the node timeout (it would leave no validity), or when the
    /// configured number of extensions is used up. Nothing is sent to the nodes then.
    ///
    /// # Cancel safety
    /// Cancel safe: PEXPIRE is idempotent; a dropped extension leaves the validity as it was.
    ///
    /// # Examples
    /// ```no_run
    /// use distlock::{Lease, Release};
    /// # async fn f(redlock: distlock::RedLock) -> distlock::Result<()> {
    /// use std::time::Duration;
    /// let guard = redlock.acquire().await?;
    /// // more work than one TTL: extend before the validity ends
    /// guard.extend(Duration::from_secs(30)).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    async fn extend(&self, lease: Duration) -> Result<()> {
        extend_quorum(
            &self.redlock,
            &self.name,
            &self.owner,
            &self.valid_until,
            &self.extensions,
            lease,
        )
        .await
    }
}
