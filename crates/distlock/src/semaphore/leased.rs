//! [`LeasedSemaphore`]: Redisson's `RPermitExpirableSemaphore` — permits with ids and
//! leases, so a crashed holder's permit returns when its lease ends.

use crate::acquire::{acquire, confirm_grant, not_acquired, Acquire, Step};
use crate::client::Client;
use crate::conn::pubsub::Wake;
use crate::error::{Error, ErrorKind, NotHeldReason, Result};
use crate::holds::{HoldId, ReleaseRequest};
use crate::keys;
use crate::scripts;
use crate::watchdog::{KeepAlive, LeaseState, Renew};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use super::{check_permits, Names, RECHECK};

/// A semaphore whose permits have ids and leases (Redisson's `RPermitExpirableSemaphore`); see
/// the [semaphore docs](crate::Semaphore). Made by [`Client::leased_semaphore`]; cheap to clone.
#[derive(Clone)]
pub struct LeasedSemaphore {
    names: Names,
}

impl Client {
    /// The leased semaphore called `name` (Redisson `RPermitExpirableSemaphore` layout).
    /// No I/O.
    pub fn leased_semaphore(&self, name: impl Into<String>) -> LeasedSemaphore {
        LeasedSemaphore {
            names: Names::new(self, name.into()),
        }
    }
}

impl fmt::Debug for LeasedSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedSemaphore")
            .field("key", &self.names.key)
            .finish()
    }
}

impl LeasedSemaphore {
    /// Redisson's leases zset, `{<name>}:timeout`.
    fn leases_key(&self) -> String {
        keys::semaphore_leases(&self.names.key)
    }

    /// The leases key of distlock before it followed Redisson's name; the scripts move what
    /// they find there into [`LeasedSemaphore::leases_key`].
    fn old_leases_key(&self) -> String {
        keys::prefixed("redisson__timeout__set", &self.names.key)
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        &self.names.name
    }

    /// Set the number of permits if the semaphore has none yet. Returns whether it was set.
    ///
    /// # Errors
    /// As [`Semaphore::try_set_permits`](crate::Semaphore::try_set_permits).
    ///
    /// # Cancel safety
    /// Cancel safe: idempotent.
    pub async fn try_set_permits(&self, permits: u64) -> Result<bool> {
        self.names.try_set_permits(permits).await
    }

    /// Add permits and wake waiters. Returns the permits available afterwards.
    ///
    /// # Errors
    /// As [`Semaphore::add_permits`](crate::Semaphore::add_permits).
    ///
    /// # Cancel safety
    /// Not idempotent.
    pub async fn add_permits(&self, permits: u64) -> Result<u64> {
        keys::check_name(&self.names.name)?;
        check_permits("permits", permits)?;
        self.names.add(permits).await
    }

    /// Set the number of permits to `permits` whatever it was, keeping the permits held now
    /// valid (Redisson's `RPermitExpirableSemaphore.setPermits`, which sees distlock's leases
    /// as distlock sees Redisson's). Returns the number before: available plus leased permits,
    /// as [`LeasedSemaphore::total_permits`] (0 when the semaphore had none).
    ///
    /// Growing frees the added permits at once and wakes waiters. Shrinking below the permits
    /// held now takes none away: the available count goes below zero, and permits are
    /// granted again only once enough holders have given theirs back. Unlike
    /// [`add_permits`](LeasedSemaphore::add_permits), it is safe to repeat, and concurrent
    /// callers setting the same number agree.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for 0 or more than [`MAX_PERMITS`](crate::MAX_PERMITS)
    /// permits, or a bad name (nothing is changed); [`ErrorKind::WrongType`] when a key holds
    /// another type; server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: idempotent (a call whose reply was lost may have set the number; setting
    /// it again changes nothing).
    pub async fn set_permits(&self, permits: u64) -> Result<u64> {
        keys::check_name(&self.names.name)?;
        check_permits("permits", permits)?;
        let mut inv = scripts::LEASED_SET_PERMITS.prepare_invoke();
        inv.key(&self.names.key)
            .key(self.leases_key())
            .key(&self.names.channel)
            .key(self.old_leases_key())
            .arg(permits);
        let before: i64 = self
            .names
            .client
            .inner
            .backend
            .eval(&self.names.context("set permits"), &inv)
            .await?;
        Ok(before.max(0) as u64)
    }

    /// The number of permits: available plus leased (Redisson's `getPermits`), what
    /// [`set_permits`](LeasedSemaphore::set_permits) sets. While a shrink waits for holders to
    /// give permits back it is less than the sum of [`permits`](LeasedSemaphore::permits),
    /// which counts no available permit below zero.
    ///
    /// # Errors
    /// As [`LeasedSemaphore::permits`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn total_permits(&self) -> Result<u64> {
        let (available, leased) = self.raw_permits().await?;
        Ok(available.saturating_add(leased).max(0) as u64)
    }

    /// Permits available now and permits leased out, after reclaiming expired leases.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`]; server failures.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn permits(&self) -> Result<(u64, u64)> {
        let (available, leased) = self.raw_permits().await?;
        Ok((available.max(0) as u64, leased.max(0) as u64))
    }

    /// [`LeasedSemaphore::permits`] as stored: the available count may be below zero.
    async fn raw_permits(&self) -> Result<(i64, i64)> {
        keys::check_name(&self.names.name)?;
        let mut inv = scripts::LEASED_AVAILABLE.prepare_invoke();
        inv.key(&self.names.key)
            .key(self.leases_key())
            .key(&self.names.channel)
            .key(self.old_leases_key());
        let v: (i64, i64) = self
            .names
            .client
            .inner
            .backend
            .eval(&self.names.context("available"), &inv)
            .await?;
        Ok(v)
    }

    /// Permits available now (after reclaiming expired leases).
    ///
    /// # Errors
    /// As [`LeasedSemaphore::permits`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn available_permits(&self) -> Result<u64> {
        Ok(self.permits().await?.0)
    }

    /// Take one permit with a `lease`, waiting at most the client's default wait.
    ///
    /// # Errors
    /// [`ErrorKind::NotAcquired`] when the wait elapsed; as
    /// [`LeasedSemaphore::try_acquire_for`].
    ///
    /// # Cancel safety
    /// Cancel safe: a permit granted to a dropped call is given back.
    pub async fn acquire(&self, lease: Duration) -> Result<LeasedPermit> {
        let wait = self.names.client.default_wait();
        self.try_acquire_for(lease, wait).await?.ok_or_else(|| {
            not_acquired(
                format_args!("a permit of leased semaphore {:?}", self.names.name),
                wait,
            )
        })
    }

    /// One attempt: `Ok(None)` when no permit is available.
    ///
    /// # Errors
    /// As [`LeasedSemaphore::try_acquire_for`].
    ///
    /// # Cancel safety
    /// As [`LeasedSemaphore::acquire`].
    pub async fn try_acquire(&self, lease: Duration) -> Result<Option<LeasedPermit>> {
        self.try_acquire_for(lease, Duration::ZERO).await
    }

    /// Take one permit with a `lease`, waiting at most `wait`: `Ok(None)` when it elapsed.
    /// Waits are also bounded by the earliest running lease, so a crashed holder's permit is
    /// picked up when its lease ends even if no message arrives.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a zero or overflowing lease or wait, or a bad name;
    /// [`ErrorKind::WrongType`]; server failures.
    ///
    /// # Cancel safety
    /// As [`LeasedSemaphore::acquire`].
    pub async fn try_acquire_for(
        &self,
        lease: Duration,
        wait: Duration,
    ) -> Result<Option<LeasedPermit>> {
        let n = &self.names;
        keys::check_name(&n.name)?;
        let lease_ms = keys::lease_ms("lease", lease)?;
        let request = LeasedRequest {
            sem: self.clone(),
            leases: self.leases_key(),
            old_leases: self.old_leases_key(),
            id: std::sync::Mutex::new(new_permit_id()),
            lease_ms,
        };
        let got = acquire(&n.client, request, wait).await?;
        Ok(got.map(|(started, id)| LeasedPermit {
            hold: {
                let (sem, id) = (self.clone(), id.clone());
                n.client.inner.holds.register(
                    "leased_semaphore",
                    Arc::new(move || sem.release_request(&id)),
                )
            },
            sem: Some(self.clone()),
            id,
            lease: Arc::new(LeaseState::new(
                started + lease.saturating_sub(keys::drift(lease)),
                "leased_semaphore",
                self.names.name.clone(),
            )),
            keep_alive: None,
        }))
    }

    /// The script call that gives back the permit `id` (idempotent: by id).
    fn release_request(&self, id: &str) -> ReleaseRequest {
        ReleaseRequest::new(self.names.context("release"), &scripts::LEASED_RELEASE)
            .key(&self.names.key)
            .key(self.leases_key())
            .key(&self.names.channel)
            .key(self.old_leases_key())
            .arg_bytes(member(id))
    }

    async fn release_id(&self, id: &str) -> Result<i64> {
        let request = self.release_request(id);
        self.names
            .client
            .inner
            .backend
            .eval(&request.context, &request.invocation())
            .await
    }
}

/// One acquire of a leased permit, for the crate's acquire driver.
struct LeasedRequest {
    sem: LeasedSemaphore,
    leases: String,
    old_leases: String,
    /// The permit id asked for: a resend that finds it granted answers the same. A new one
    /// after a grant the replicas did not confirm (given back by id: a late give-back must
    /// not meet the next grant).
    id: std::sync::Mutex<String>,
    lease_ms: u64,
}

/// A new permit id: 16 random bytes as 32 hex characters (Redisson's form).
fn new_permit_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

impl Acquire for LeasedRequest {
    /// The instant the lease counts from, and the permit id.
    type Grant = (Instant, String);

    fn describe(&self) -> (&'static str, &str, Option<&str>) {
        ("leased_semaphore", &self.sem.names.name, None)
    }

    fn wake(&self) -> Option<(&str, Wake)> {
        Some((&self.sem.names.channel, Wake::All))
    }

    fn recheck(&self) -> Duration {
        RECHECK
    }

    async fn attempt(&self, started: Instant) -> Result<Step<Self::Grant>> {
        let n = &self.sem.names;
        let id = self.id.lock().unwrap().clone();
        let mut inv = scripts::LEASED_ACQUIRE.prepare_invoke();
        inv.key(&n.key)
            .key(&self.leases)
            .key(&n.channel)
            .key(&self.old_leases)
            .arg(member(&id))
            .arg(self.lease_ms);
        let context = n.context("acquire");
        // Where replicas confirm grants, over a connection set aside for it (see `for_grant`).
        let mut grant = n.client.inner.backend.for_grant(&n.key).await?;
        let r: (i64, i64) = grant
            .backend
            .eval(&context, &inv)
            .await
            .inspect_err(|e| grant.failed(e))?;
        Ok(match r {
            (1, _) => {
                // Not confirmed: released by id; the next attempt asks for a new id.
                confirm_grant(grant, &context, || async {
                    *self.id.lock().unwrap() = new_permit_id();
                    self.sem.release_id(&id).await.map(|_| ())
                })
                .await?;
                Step::Done((started, id))
            }
            // Waits are bounded by the earliest running lease.
            (_, wait_ms) if wait_ms >= 0 => Step::Wait(Some(Duration::from_millis(wait_ms as u64))),
            _ => Step::Wait(None),
        })
    }

    fn give_back(self) {
        // Released by id (idempotent); tracked like a release, so it is sent even when the
        // runtime is shutting down.
        let client = &self.sem.names.client.inner;
        client.holds.release_in_background(
            &client.backend,
            self.sem.release_request(&self.id.lock().unwrap()),
        );
    }
}

/// The zset member of permit `id`: its 16 bytes, as Redisson stores permit ids (an id that
/// is not 32 hex characters is sent as it is, and matches nothing Redisson wrote).
fn member(id: &str) -> Vec<u8> {
    match uuid::Uuid::try_parse(id) {
        Ok(u) if id.len() == 32 => u.as_bytes().to_vec(),
        _ => id.as_bytes().to_vec(),
    }
}

/// One permit of a [`LeasedSemaphore`], with an id and a lease. Release it with
/// [`LeasedPermit::release`]; dropping it releases in the background.
#[must_use = "dropping the permit gives it back at once"]
pub struct LeasedPermit {
    sem: Option<LeasedSemaphore>,
    id: String,
    lease: Arc<LeaseState>,
    /// This permit in the client's registry (given back at shutdown if still held).
    hold: HoldId,
    /// The watchdog's keep-alive, when asked for ([`LeasedPermit::keep_alive`]).
    keep_alive: Option<KeepAlive>,
}

/// Move the expiry of permit `id` to `lease` from now; `NotHeld` (and the lost signal) when
/// the permit is gone.
async fn extend_permit(
    sem: &LeasedSemaphore,
    id: &str,
    lease: Duration,
    lease_ms: u64,
    state: &LeaseState,
) -> Result<()> {
    let started = Instant::now();
    let mut inv = scripts::LEASED_EXTEND.prepare_invoke();
    inv.key(sem.leases_key())
        .key(sem.old_leases_key())
        .arg(member(id))
        .arg(lease_ms);
    // Confirmed by replicas like a grant (where the deployment asks for it): an extension
    // they did not confirm fails with NotReplicated and moves no local deadline.
    let context = sem.names.context("extend");
    let mut grant = sem
        .names
        .client
        .inner
        .backend
        .for_grant(&sem.names.key)
        .await?;
    let r: Vec<i64> = grant
        .eval_then_confirm(&context, &inv, |r: &Vec<i64>| r.first() == Some(&1))
        .await?;
    if r.first() == Some(&1) {
        state.set_valid_until(started + lease.saturating_sub(keys::drift(lease)));
        Ok(())
    } else {
        state.mark_lost();
        Err(Error::not_held(&sem.names.name, NotHeldReason::Gone))
    }
}

impl fmt::Debug for LeasedPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeasedPermit")
            .field("id", &self.id)
            .finish()
    }
}

impl LeasedPermit {
    /// Whether the permit's lease is known lost (an extension found it gone, or its local
    /// deadline passed). No I/O.
    pub fn is_lost(&self) -> bool {
        self.lease.is_lost()
    }

    /// The permit's id: 32 lowercase hex characters, Redisson's permit-id format. Its 16
    /// bytes are the permit's member of the leases zset `{<name>}:timeout`.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Until when the permit is surely ours by the local monotonic clock.
    pub fn valid_until(&self) -> std::time::Instant {
        self.lease.valid_until().into_std()
    }

    /// Resolves when the lease ends without an extension (or an extension found it gone).
    ///
    /// # Cancel safety
    /// Cancel safe: it only observes.
    pub async fn lost(&self) {
        self.lease.lost().await
    }

    /// Move the lease's end to `lease` from now.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when the lease had ended (the permit is reclaimed);
    /// [`ErrorKind::InvalidInput`] for a zero or overflowing lease; server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: idempotent.
    pub async fn extend(&self, lease: Duration) -> Result<()> {
        let lease_ms = keys::lease_ms("lease", lease)?;
        let sem = self.sem.as_ref().expect("released");
        extend_permit(sem, &self.id, lease, lease_ms, &self.lease).await
    }

    /// Have the client's watchdog extend this permit to `lease` every third of it while the
    /// permit is held (the way the watchdog keeps locks), so a holder that lives keeps its
    /// permit and one that dies gives it back within `lease`. The [`lost`](LeasedPermit::lost)
    /// signal fires when an extension finds the permit gone, or renewals keep failing until
    /// the lease ends. Stops when the permit is released or dropped.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a zero or overflowing `lease` (at most 365 days).
    pub fn keep_alive(&mut self, lease: Duration) -> Result<()> {
        let lease_ms = keys::lease_ms("lease", lease)?;
        let sem = self.sem.clone().expect("released");
        let (id, state) = (self.id.clone(), self.lease.clone());
        let renew: Renew = Arc::new(move || {
            let (sem, id, state) = (sem.clone(), id.clone(), state.clone());
            Box::pin(async move {
                match extend_permit(&sem, &id, lease, lease_ms, &state).await {
                    Ok(()) => Ok(true),
                    Err(e) if e.kind() == ErrorKind::NotHeld => Ok(false),
                    Err(e) => Err(e),
                }
            })
        });
        let sem = self.sem.as_ref().expect("released");
        self.keep_alive = Some(sem.names.client.inner.leases.keep_alive(
            sem.names.context("permit keep-alive"),
            lease,
            lease / 3,
            self.lease.clone(),
            renew,
        ));
        Ok(())
    }

    /// Give the permit back and wake waiters.
    ///
    /// # Errors
    /// [`ErrorKind::NotHeld`] when the lease had ended (the permit went back to the pool
    /// already); server failures.
    ///
    /// # Cancel safety
    /// Cancel safe in effect: giving back twice is refused by the id.
    pub async fn release(mut self) -> Result<()> {
        let sem = self.sem.take().expect("released twice");
        self.keep_alive.take();
        sem.names
            .client
            .inner
            .holds
            .take_for_release(&self.hold, &sem.names.name)?;
        match sem.release_id(&self.id).await? {
            1 => Ok(()),
            _ => {
                // Already back in the pool: the lease was lost.
                self.lease.mark_lost();
                Err(Error::not_held(&sem.names.name, NotHeldReason::Gone))
            }
        }
    }
}

impl Drop for LeasedPermit {
    fn drop(&mut self) {
        let Some(sem) = self.sem.take() else { return };
        let client = &sem.names.client.inner;
        client
            .holds
            .release_dropped(&client.backend, &self.hold, || {
                sem.release_request(&self.id)
            });
    }
}
