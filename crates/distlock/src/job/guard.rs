//! [`JobGuard`]: a held job lock; ownership-checked release, extension, keep-alive.

use crate::client::Client;
use crate::conn::Resend;
use crate::error::{Error, ErrorKind, NotHeldReason, Result};
use crate::keys;
use crate::registry::{HoldId, ReleaseRequest};
use crate::scripts::reply;
use crate::watchdog::{KeepAlive, LeaseState, Renew};
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A held job lock.
///
/// Release it with [`JobGuard::release`](crate::Release::release); dropping it releases in the
/// background.
#[must_use = "dropping the guard releases the job lock at once"]
#[clippy::has_significant_drop]
pub struct JobGuard {
    pub(super) inner: Option<Arc<GuardInner>>,
    /// The watchdog's keep-alive of this job lock when asked for, else its check that the
    /// lock still holds this guard's value (dropping it stops either).
    pub(super) keep_alive: Option<KeepAlive>,
    /// This job lock in the client's registry (released at shutdown if still held).
    pub(super) hold: HoldId,
}

pub(crate) struct GuardInner {
    pub(super) client: Client,
    pub(super) key: String,
    pub(super) value: String,
    pub(super) env: String,
    pub(super) name: String,
    /// Until when the release keeps the lock (the start plus `at_least_for`, or the
    /// `at_least_for` of the last [`JobLease::extend_active`] from then).
    pub(super) keep_until: std::sync::Mutex<Instant>,
    pub(super) at_most_for: Duration,
    pub(super) lease: Arc<LeaseState>,
}

impl fmt::Debug for JobGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            Some(g) => f
                .debug_struct("JobGuard")
                .field("key", &g.key)
                .field("value", &g.value)
                .finish(),
            None => f.write_str("JobGuard(released)"),
        }
    }
}

impl GuardInner {
    async fn extend(&self, ttl: Duration) -> Result<()> {
        let started = Instant::now();
        let inv = super::request::extend_call(&self.key, &self.value, ttl.as_millis() as u64);
        // Confirmed by replicas like a grant (where the deployment asks for it): an
        // extension they did not confirm fails with NotReplicated and moves no local deadline.
        let context = format!("extend job {:?}", self.name);
        let mut grant = self.client.backend().for_grant(&self.key).await?;
        let r: i64 = grant
            .backend
            .eval(&context, &inv, Resend::Few)
            .await
            .inspect_err(|e| grant.failed(e))?;
        if r == 1 {
            grant.confirm(&context).await?;
        }
        match r {
            1 => {
                self.lease
                    .set_valid_until(started + ttl.saturating_sub(keys::drift(ttl)));
                Ok(())
            }
            reply::HELD_BY_OTHER => {
                self.lease.mark_lost();
                Err(Error::not_held(&self.name, NotHeldReason::HeldByOther))
            }
            _ => {
                self.lease.mark_lost();
                Err(Error::not_held(&self.name, NotHeldReason::Gone))
            }
        }
    }

    /// [`GuardInner::extend`] to `at_most_for`, then keep the lock at least `at_least_for`
    /// from now (ShedLock's `extendActiveLock(lockAtMostFor, lockAtLeastFor)`).
    async fn extend_active(&self, at_most_for: Duration, at_least_for: Duration) -> Result<()> {
        keys::lease_ms("at_most_for", at_most_for)?;
        if at_least_for > at_most_for {
            return Err(Error::invalid(format!(
                "at_least_for ({at_least_for:?}) exceeds at_most_for ({at_most_for:?})"
            )));
        }
        self.extend(at_most_for).await?;
        *self.keep_until.lock().unwrap() = Instant::now() + at_least_for;
        Ok(())
    }

    /// The ownership-checked release (kept for what is left of `at_least_for`, measured
    /// now): idempotent, it compares the value.
    pub(super) fn release_request(&self) -> ReleaseRequest {
        let keep = self
            .keep_until
            .lock()
            .unwrap()
            .saturating_duration_since(Instant::now());
        let keep_ms = if keep.is_zero() {
            0
        } else {
            keep.as_millis().max(1) as u64
        };
        super::request::release_call(
            format!("release job {:?}", self.name),
            &self.key,
            &self.value,
            keep_ms,
        )
    }

    async fn release(&self) -> Result<()> {
        let request = self.release_request();
        let r: i64 = self
            .client
            .backend()
            .eval(&request.context, request.call(), Resend::Few)
            .await?;
        match r {
            0 | 1 => Ok(()),
            reply::HELD_BY_OTHER => Err(Error::not_held(&self.name, NotHeldReason::HeldByOther)),
            _ => Err(Error::not_held(&self.name, NotHeldReason::Gone)),
        }
    }
}

/// A handle on a held job lock for the job that runs under it (ShedLock's `LockExtender`).
///
/// Its lost signal and its extension, without the release. Made by [`JobGuard::lease`], and handed
/// to the job by [`JobLock::run_with`](crate::JobLock::run_with) and
/// [`spawn_every_with`](crate::spawn_every_with). Cheap to clone; it does not keep the lock held
/// (the guard does), and after the guard's release its calls answer as for a lost lock.
#[derive(Clone)]
pub struct JobLease {
    inner: Arc<GuardInner>,
}

impl fmt::Debug for JobLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobLease")
            .field("key", &self.inner.key)
            .field("value", &self.inner.value)
            .finish()
    }
}

impl JobLease {
    /// The key: `<prefix>job-lock:<env>:<name>`.
    pub fn key(&self) -> &str {
        &self.inner.key
    }

    /// The value the guard wrote: `ADDED:<time>@<host>:<client-id>`.
    pub fn value(&self) -> &str {
        &self.inner.value
    }

    /// As [`JobGuard::valid_until`](crate::Lease::valid_until).
    pub fn valid_until(&self) -> std::time::Instant {
        self.inner.lease.valid_until().into_std()
    }

    /// Whether the lock is known lost (no I/O): as [`JobGuard::lost`](crate::Lease::lost) has resolved.
    pub fn is_lost(&self) -> bool {
        self.inner.lease.is_lost()
    }

    /// As [`JobGuard::lost`](crate::Lease::lost).
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + '_ {
        self.inner.lease.lost()
    }

    /// As [`JobGuard::extend`](crate::Lease::extend) (ShedLock's `LockExtender.extendActiveLock`).
    ///
    /// # Errors
    /// As [`JobGuard::extend`](crate::Lease::extend).
    ///
    /// # Cancel safety
    /// As [`JobGuard::extend`](crate::Lease::extend).
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        keys::lease_ms("extension", lease)?;
        self.inner.extend(lease).await
    }

    /// Extends the lock to `at_most_for` from now and keeps it at least `at_least_for` from
    /// now: ShedLock's `LockExtender.extendActiveLock(lockAtMostFor, lockAtLeastFor)`.
    ///
    /// As [`extend`](JobLease::extend) with `at_most_for`; once it succeeded, the release
    /// keeps the lock until `at_least_for` from now has passed, in place of the
    /// [`at_least_for`](crate::JobLock::at_least_for) the lock was taken with (longer or
    /// shorter, as in ShedLock). `Duration::ZERO` lets the release delete the lock at once.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a zero or overflowing
    /// `at_most_for`, or an `at_least_for` over it (nothing is sent). Otherwise as
    /// [`extend`](JobLease::extend); the release keeps its previous bound then.
    ///
    /// # Cancel safety
    /// As [`extend`](JobLease::extend); cancelled, the release keeps its previous bound.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn f(client: distlock::Client) -> distlock::Result<()> {
    /// use std::time::Duration;
    /// let lock = client.job_lock("export").at_most_for(Duration::from_secs(600));
    /// lock.run_with(|lease| async move {
    ///     // More to do than planned: 20 more minutes at most, and no rerun for 5.
    ///     lease
    ///         .extend_active(Duration::from_secs(1200), Duration::from_secs(300))
    ///         .await
    /// })
    /// .await?;
    /// # Ok(()) }
    /// ```
    pub async fn extend_active(&self, at_most_for: Duration, at_least_for: Duration) -> Result<()> {
        self.inner.extend_active(at_most_for, at_least_for).await
    }
}

impl JobGuard {
    fn inner(&self) -> &GuardInner {
        self.inner.as_ref().expect("guard used after release")
    }

    /// Returns a handle for the job that runs under this lock.
    ///
    /// Its lost signal and extension ([`JobLease`]), to pass into the job while the caller keeps
    /// the guard for the release.
    pub fn lease(&self) -> JobLease {
        JobLease {
            inner: self.inner.clone().expect("guard used after release"),
        }
    }

    /// Have the client's watchdog extend this job lock to `at_most_for` every half of it
    /// (ShedLock's keep-alive), until the guard is released or dropped.
    pub(super) fn start_keep_alive(&mut self) {
        let me = self.inner.clone().expect("fresh guard");
        let renew: Renew = {
            let me = me.clone();
            Arc::new(move || {
                let me = me.clone();
                Box::pin(async move {
                    match me.extend(me.at_most_for).await {
                        Ok(()) => Ok(true),
                        Err(e) if e.kind() == ErrorKind::NotHeld => Ok(false),
                        Err(e) => Err(e),
                    }
                })
            })
        };
        self.keep_alive = Some(
            me.client
                .leases()
                .keep_alive(
                    format!("job {:?}", me.name),
                    me.at_most_for,
                    me.at_most_for / 2,
                    me.lease.clone(),
                    renew,
                )
                .hears(me.key.clone(), me.value.clone()),
        );
    }

    /// Without keep-alive: have the client's watchdog check every third of `at_most_for`
    /// (one `GET`) that the job lock still holds this guard's value, so that a force unlock
    /// whose notice cannot reach this client (an ACL without `&distlock_client:*`), a key
    /// deleted by hand or a ShedLock unlock from another service (which publishes nothing)
    /// fires the lost signal within a third of the lease, as a renewal would find it.
    pub(super) fn start_check(&mut self) {
        let me = self.inner.clone().expect("fresh guard");
        let check: Renew = {
            let me = me.clone();
            Arc::new(move || {
                let me = me.clone();
                Box::pin(async move {
                    let context = format!("check job {:?}", me.name);
                    crate::notice::job_value_held(me.client.backend(), &me.key, &me.value, context)
                        .await
                })
            })
        };
        self.keep_alive = Some(
            me.client
                .leases()
                .keep_alive(
                    format!("job {:?}", me.name),
                    Duration::ZERO,
                    me.at_most_for / 3,
                    me.lease.clone(),
                    check,
                )
                .hears(me.key.clone(), me.value.clone()),
        );
    }

    /// The value this guard wrote: `ADDED:<time>@<host>:<client-id>`.
    pub fn value(&self) -> &str {
        &self.inner().value
    }

    /// The key: `<prefix>job-lock:<env>:<name>`.
    pub fn key(&self) -> &str {
        &self.inner().key
    }

    /// The environment the job runs in.
    pub fn environment(&self) -> &str {
        &self.inner().env
    }

    /// Extends the lock to `at_most_for` from now and keeps it at least `at_least_for` from
    /// now, as [`JobLease::extend_active`] (ShedLock's `extendActiveLock`).
    ///
    /// # Errors
    /// As [`JobLease::extend_active`].
    ///
    /// # Cancel safety
    /// As [`JobLease::extend_active`].
    pub async fn extend_active(&self, at_most_for: Duration, at_least_for: Duration) -> Result<()> {
        self.inner().extend_active(at_most_for, at_least_for).await
    }
}

impl Drop for JobGuard {
    fn drop(&mut self) {
        let Some(g) = self.inner.take() else { return };
        self.keep_alive.take();
        let client = &g.client;
        client
            .registry()
            .release_dropped(client.backend(), &self.hold, || g.release_request());
    }
}

impl crate::lease::Sealed for JobGuard {}

impl crate::lease::Sealed for JobLease {}

/// The job's view of the lease: the verbs above, through the trait.
impl crate::Lease for JobLease {
    fn is_lost(&self) -> bool {
        JobLease::is_lost(self)
    }

    fn lost(&self) -> impl Future<Output = ()> + Send + '_ {
        JobLease::lost(self)
    }

    fn valid_until(&self) -> std::time::Instant {
        JobLease::valid_until(self)
    }

    async fn extend(&self, lease: Duration) -> Result<()> {
        JobLease::extend(self, lease).await
    }
}

impl JobGuard {
    /// Release: delete the lock if it is ours, or, while `at_least_for` has not passed since
    /// the start, shorten its TTL to what remains of it. Never touches another holder's lock.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when the lock expired (the job
    /// outran `at_most_for`) or another instance took it over. Server failures.
    ///
    /// # Cancel safety
    /// A dropped release may or may not have happened; `at_most_for` ends it anyway.
    pub async fn release(mut self) -> Result<()> {
        let g = self.inner.take().expect("released twice");
        self.keep_alive.take();
        g.client.registry().take_for_release(&self.hold, &g.name)?;
        let released = g.release().await;
        if released
            .as_ref()
            .is_err_and(|e| e.kind() == ErrorKind::NotHeld)
        {
            // The release found it gone or another instance's: the lease was lost.
            g.lease.mark_lost();
        }
        released
    }

    /// Resolves when the lock is lost: `at_most_for` (or the last extension) passed, an
    /// extension found another holder, or a force unlock ([`JobLock::force_unlock`](crate::JobLock::force_unlock),
    /// `distlock unlock --force`) deleted it (told on the job's notice channel within a round
    /// trip or two).
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub fn lost(&self) -> impl Future<Output = ()> + Send + '_ {
        self.inner().lease.lost()
    }
}

impl crate::Release for JobGuard {
    type Released = ();

    /// As [`JobGuard::release`].
    async fn release(self) -> Result<()> {
        JobGuard::release(self).await
    }
}

impl crate::Lease for JobGuard {
    /// Whether the lock is known lost. No I/O.
    fn is_lost(&self) -> bool {
        self.inner().lease.is_lost()
    }

    /// As [`JobGuard::lost`].
    fn lost(&self) -> impl Future<Output = ()> + Send + '_ {
        JobGuard::lost(self)
    }

    /// Until when the lock is surely ours by the local monotonic clock (start + at_most_for,
    /// or the last extension, minus drift).
    fn valid_until(&self) -> std::time::Instant {
        self.inner().lease.valid_until().into_std()
    }

    /// Set the lock's TTL to `lease` from now, if it is still ours (shorter or longer than
    /// what was left). [`valid_until`](crate::Lease::valid_until) moves to now + `lease` − drift.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a zero or
    /// overflowing `lease`; [`ErrorKind::NotHeld`] when the lock
    /// expired or another instance holds it (nothing changed then; [`lost`](crate::Lease::lost)
    /// fires). Server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: PEXPIRE is idempotent.
    async fn extend(&self, lease: Duration) -> Result<()> {
        keys::lease_ms("extension", lease)?;
        self.inner().extend(lease).await
    }
}

impl super::JobLock {
    /// A guard for the grant of `value` made at `started`.
    pub(super) fn guard(
        &self,
        key: String,
        value: String,
        started: Instant,
        at_most: Duration,
    ) -> JobGuard {
        let lease = Arc::new(LeaseState::new(
            started + at_most.saturating_sub(keys::drift(at_most)),
            crate::kind::JOB_LOCK,
            key.clone(),
        ));
        let inner = Arc::new(GuardInner {
            client: self.client.clone(),
            key,
            value,
            env: self.env.clone(),
            name: self.name.clone(),
            keep_until: std::sync::Mutex::new(started + self.at_least_for),
            at_most_for: at_most,
            lease,
        });
        let hold = {
            let g = inner.clone();
            self.client
                .registry()
                .register(crate::kind::JOB_LOCK, Arc::new(move || g.release_request()))
        };
        let mut guard = JobGuard {
            inner: Some(inner),
            keep_alive: None,
            hold,
        };
        if self.keep_alive {
            guard.start_keep_alive();
        } else {
            guard.start_check();
        }
        guard
    }
}
