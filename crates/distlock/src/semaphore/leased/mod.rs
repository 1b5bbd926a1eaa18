//! [`LeasedSemaphore`]: Redisson's `RPermitExpirableSemaphore` — permits with ids and
//! leases, so a crashed holder's permit returns when its lease ends.

mod permit;

pub use permit::LeasedPermit;

use crate::acquire::{acquire, confirm_grant, not_acquired, Acquire, Step};
use crate::client::Client;
use crate::conn::pubsub::{HandedOff, Wake};
use crate::conn::Resend;
use crate::error::{Error, Result};
use crate::keys;
use crate::lock::{Contention, Handoff, DEFAULT_FAIR_LIVENESS};
use crate::registry::ReleaseRequest;
use crate::scripts::{self, Invocation};
use crate::watchdog::LeaseState;
#[cfg(doc)]
use crate::ErrorKind;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use super::calls::{self, LeasedKeys};
use super::{check_permits, check_permits_or_zero, Names, RECHECK};

/// A semaphore whose permits have ids and leases (Redisson's `RPermitExpirableSemaphore`).
///
/// See the [semaphore docs](crate::Semaphore). Made by [`Client::leased_semaphore`]; cheap to
/// clone.
///
/// **Direct hand-off** (on by default; [`LeasedSemaphore::handoff`]). A waiter joins a
/// distlock-only queue in the semaphore's slot (`distlock_permit_queue:{<name>}`, with a
/// liveness deadline that each of its attempts renews), and a release grants the permit to the
/// first live queued waiter itself: the waiter holds it when the grant message arrives, with
/// no attempt of its own, no herd of woken waiters and no barging. Permits go to queued
/// waiters in arrival order, also when an acquire finds permits freed some other way (an ended
/// lease, [`LeasedSemaphore::set_permits`]). A waiter that died is passed over once its
/// liveness deadline is past, and a permit handed to a waiter that died just before gets a
/// lease no longer than that deadline; a cancelled waiter leaves the queue and gives back a
/// hand-off that raced it. Redisson clients see only the available count: their acquires take
/// any available permit (ahead of distlock's queue), and they are woken as before whenever a
/// release leaves permits available. Where replicas must confirm grants (`WAIT`), waiters do
/// not queue (as the lock's hand-off).
#[derive(Clone)]
pub struct LeasedSemaphore {
    names: Names,
    /// Whether waiters queue for direct hand-off (and one attempt lets queued waiters first).
    handoff: bool,
    /// How long a queued waiter keeps its place without an attempt.
    liveness: Duration,
    /// The lease of the permits this handle takes (`None`: the client's watchdog lease).
    lease: Option<Duration>,
    /// Its keys, and the script calls over them (made once per handle, shared by clones).
    keys: Arc<LeasedKeys>,
    /// When the handle last met contention (a refused attempt, a fast path that answered
    /// nil): its requests skip the fast paths for a while after (shared by clones).
    contention: Arc<Contention>,
}

impl Client {
    /// The leased semaphore called `name` (Redisson `RPermitExpirableSemaphore` layout).
    /// No I/O.
    pub fn leased_semaphore(&self, name: impl Into<String>) -> LeasedSemaphore {
        let names = Names::new(self, name.into());
        let keys = Arc::new(LeasedKeys::new(&names.key));
        LeasedSemaphore {
            names,
            handoff: true,
            liveness: DEFAULT_FAIR_LIVENESS,
            lease: None,
            keys,
            contention: Arc::default(),
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
    /// Its keys and calls.
    fn calls(&self) -> &LeasedKeys {
        &self.keys
    }

    /// The semaphore's name.
    pub fn name(&self) -> &str {
        &self.names.name
    }

    /// Returns the same semaphore taking permits with a `lease`.
    ///
    /// `lease` is a [`Duration`] in whole milliseconds, checked when a permit is taken: at
    /// least 1 ms, at most 365 days. It is to a permit what [`Lock::lease`](crate::Lock::lease)
    /// is to a lock. No I/O.
    ///
    /// A permit's lease ends it on the server unless extended ([`LeasedPermit::extend`](crate::Lease::extend),
    /// [`LeasedPermit::keep_alive`]); Redisson's `tryAcquire(waitTime, leaseTime)` takes it
    /// per call. Without this setting permits get the client's watchdog lease
    /// ([`ClientBuilder::watchdog_lease`](crate::ClientBuilder::watchdog_lease), 30 seconds
    /// by default), which nothing renews unless the permit is kept alive.
    pub fn lease(&self, lease: Duration) -> LeasedSemaphore {
        LeasedSemaphore {
            lease: Some(lease),
            ..self.clone()
        }
    }

    /// The lease this handle's permits get: the one set with [`LeasedSemaphore::lease`], else
    /// the client's watchdog lease.
    fn permit_lease(&self) -> Duration {
        self.lease.unwrap_or(self.names.client.watchdog_lease())
    }

    /// Returns the same semaphore with direct hand-off on ([`Handoff::Fifo`], the default) or
    /// off ([`Handoff::Off`]; `true` and `false` convert to them).
    ///
    /// Permits are handed over in arrival order only: [`Handoff::Retakes`] is taken as
    /// [`Handoff::Fifo`] ([`LeasedSemaphore::handoff_setting`] says so). On, waiters queue, and a release grants its permit to the first
    /// live queued waiter; an acquire lets queued waiters go first. Off is Redisson's
    /// `RPermitExpirableSemaphore` behaviour: a release wakes every waiter, and the first
    /// attempt to arrive takes the permit. One setting per semaphore name across a fleet: a
    /// handle with hand-off off neither queues nor lets the queue go first. No I/O.
    pub fn handoff(&self, handoff: impl Into<Handoff>) -> LeasedSemaphore {
        LeasedSemaphore {
            handoff: handoff.into().is_on(),
            ..self.clone()
        }
    }

    /// The hand-off policy set with [`LeasedSemaphore::handoff`]: [`Handoff::Fifo`] or
    /// [`Handoff::Off`].
    pub fn handoff_setting(&self) -> Handoff {
        self.handoff.into()
    }

    /// Returns the same semaphore with another liveness timeout for its queued waiters.
    ///
    /// The timeout is a [`Duration`] of at least 3 ms, 5 seconds by default (as the locks'): a
    /// waiter that has not attempted within it is passed over by a hand-off, and a permit
    /// handed to a waiter has a lease no longer than what was left of the waiter's liveness
    /// (the waiter extends it to the lease it asked for when the grant arrives). Each queued
    /// waiter attempts once per third of it. No I/O.
    pub fn liveness_timeout(&self, liveness: Duration) -> LeasedSemaphore {
        LeasedSemaphore {
            liveness: liveness.max(Duration::from_millis(3)),
            ..self.clone()
        }
    }

    /// Whether this handle's waiters queue: hand-off on, on a deployment whose grants no
    /// replica must confirm (a handed-off grant would need its own confirming round trip).
    fn hands_off(&self) -> bool {
        self.handoff && !self.names.client.backend().confirms_grants()
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

    /// Adds permits and wakes waiters.
    ///
    /// Returns the permits available afterwards. Zero adds nothing and wakes nobody (as Redisson's
    /// `addPermits(0)`): it only reads the count.
    ///
    /// # Errors
    /// As [`Semaphore::add_permits`](crate::Semaphore::add_permits).
    ///
    /// # Cancel safety
    /// Not idempotent.
    pub async fn add_permits(&self, permits: u64) -> Result<u64> {
        keys::check_name(&self.names.name)?;
        check_permits_or_zero("permits", permits)?;
        if permits == 0 {
            return self.available_permits().await;
        }
        self.names.add(permits).await
    }

    /// Sets the number of permits to `permits` whatever it was, keeping the permits held now valid.
    ///
    /// As Redisson's `RPermitExpirableSemaphore.setPermits`, which sees distlock's leases as
    /// distlock sees Redisson's. Returns the number before: available plus leased permits, as
    /// [`LeasedSemaphore::total_permits`] (0 when the semaphore had none).
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
    /// another type, or the semaphore's key a string that is not an integer (a user's data
    /// under a mistyped name: nothing is changed); server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: idempotent (a call whose reply was lost may have set the number; setting
    /// it again changes nothing).
    pub async fn set_permits(&self, permits: u64) -> Result<u64> {
        keys::check_name(&self.names.name)?;
        check_permits("permits", permits)?;
        let mut inv = scripts::LEASED_SET_PERMITS.prepare_invoke();
        inv.key(&self.names.key)
            .key(&self.keys.leases)
            .key(&self.names.channel)
            .key(&self.keys.old_leases)
            .arg(permits);
        let before: i64 = self
            .names
            .client
            .backend()
            .eval(&self.names.context("set permits"), &inv, Resend::Few)
            .await?;
        Ok(before.max(0) as u64)
    }

    /// Returns the number of permits.
    ///
    /// Available plus leased (Redisson's `getPermits`), what
    /// [`set_permits`](LeasedSemaphore::set_permits) sets. While a shrink waits for holders to give
    /// permits back it is less than the sum of [`permits`](LeasedSemaphore::permits), which counts
    /// no available permit below zero.
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
            .key(&self.keys.leases)
            .key(&self.names.channel)
            .key(&self.keys.old_leases);
        let v: (i64, i64) = self
            .names
            .client
            .backend()
            .eval(&self.names.context("available"), &inv, Resend::Few)
            .await?;
        Ok(v)
    }

    /// Returns the number of permits available now (after reclaiming expired leases).
    ///
    /// While a [shrink](LeasedSemaphore::set_permits) below the leased permits waits for holders to
    /// give theirs back this is 0, where Redisson's `availablePermits()` reports the negative
    /// count: [`available_permits_signed`](LeasedSemaphore::available_permits_signed) gives that
    /// figure.
    ///
    /// # Errors
    /// As [`LeasedSemaphore::permits`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn available_permits(&self) -> Result<u64> {
        Ok(self.permits().await?.0)
    }

    /// Returns the number of permits available now as stored, as Redisson's `availablePermits()`.
    ///
    /// Below zero by the permits still to be given back while a
    /// [shrink](LeasedSemaphore::set_permits) below the leased permits waits for holders.
    ///
    /// # Errors
    /// As [`LeasedSemaphore::permits`].
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn available_permits_signed(&self) -> Result<i64> {
        Ok(self.raw_permits().await?.0)
    }

    /// Takes one permit, waiting at most the client's default wait.
    ///
    /// The permit has this handle's lease ([`LeasedSemaphore::lease`]).
    ///
    /// # Errors
    /// [`ErrorKind::NotAcquired`] when the wait elapsed; as
    /// [`LeasedSemaphore::try_acquire_for`].
    ///
    /// # Cancel safety
    /// Cancel safe: a permit granted to a dropped call is given back.
    pub async fn acquire(&self) -> Result<LeasedPermit> {
        let wait = self.names.client.default_wait();
        self.try_acquire_for(wait).await?.ok_or_else(|| {
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
    pub async fn try_acquire(&self) -> Result<Option<LeasedPermit>> {
        self.try_acquire_for(Duration::ZERO).await
    }

    /// Takes one permit, waiting at most `wait`: `Ok(None)` when it elapsed.
    ///
    /// The permit has this handle's lease ([`LeasedSemaphore::lease`]). Waits are also
    /// bounded by the earliest running lease, so a crashed holder's permit is picked up when
    /// its lease ends even if no message arrives.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for a zero or overflowing lease or wait, or a bad name;
    /// [`ErrorKind::WrongType`]; server failures.
    ///
    /// # Cancel safety
    /// As [`LeasedSemaphore::acquire`].
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<LeasedPermit>> {
        let n = &self.names;
        keys::check_name(&n.name)?;
        let lease = self.permit_lease();
        let lease_ms = keys::lease_ms("lease", lease)?;
        let id = new_permit_id();
        let hands_off = self.hands_off();
        // Only a call that waits queues; one attempt lets the queue go first.
        let (entry, grant_channel) = match (hands_off, wait.is_zero()) {
            (false, _) => (String::new(), None),
            (true, true) => ("0".to_string(), None),
            (true, false) => {
                let client_id = &n.client.id_str();
                (
                    calls::queue_entry(self.liveness.as_millis(), lease_ms, client_id, &id),
                    Some(keys::permit_grant_channel(&n.key, client_id)),
                )
            }
        };
        let request = LeasedRequest {
            sem: self.clone(),
            grant: grant_channel.map(|channel| (channel, id.clone())),
            entry,
            id: std::sync::Mutex::new(id),
            lease_ms,
            fresh: AtomicBool::new(true),
        };
        let got = acquire(&n.client, request, wait).await?;
        Ok(got.map(|(started, id)| {
            let lease = Arc::new(LeaseState::new(
                started + lease.saturating_sub(keys::drift(lease)),
                crate::kind::LEASED_SEMAPHORE,
                self.names.name.clone(),
            ));
            LeasedPermit {
                hold: {
                    let (sem, id, lease) = (self.clone(), id.clone(), lease.clone());
                    n.client.registry().register(
                        crate::kind::LEASED_SEMAPHORE,
                        Arc::new(move || sem.release_request(&id, Some(&lease))),
                    )
                },
                sem: Some(self.clone()),
                id,
                lease,
                keep_alive: None,
            }
        }))
    }

    /// The script call that gives back the permit `id` (idempotent: by id), handing it to
    /// the first live queued waiter; it also takes `id` out of the hand-off queue. With the
    /// permit's `lease` still counted on (its holder's deadline ahead, which ends before the
    /// server's expiry) and no contention met lately, `leased_release_fast.lua` is tried
    /// first: the lease is running, so it reads no clock.
    pub(super) fn release_request(&self, id: &str, lease: Option<&LeaseState>) -> ReleaseRequest {
        let fast = lease.is_some_and(LeaseState::counted_on) && self.contention.calm();
        self.keys.release(self.names.context("release"), id, fast)
    }

    /// Give back the permit `id` ([`LeasedSemaphore::release_request`]).
    async fn release_id(&self, id: &str, lease: Option<&LeaseState>) -> Result<i64> {
        let request = self.release_request(id, lease);
        let inv = request.call();
        let backend = self.names.client.backend();
        let r = backend.eval(&request.context, inv, Resend::Few).await;
        if inv.fast_deferred() {
            // A queue: the releases and acquires of the next while go to the full scripts.
            self.contention.seen();
        }
        r
    }
}

/// One acquire of a leased permit, for the crate's acquire driver.
struct LeasedRequest {
    sem: LeasedSemaphore,
    /// The permit id asked for: a resend that finds it granted answers the same. A new one
    /// after a grant the replicas did not confirm (given back by id: a late give-back must
    /// not meet the next grant). Never changes where waiters queue (no replica confirms).
    id: std::sync::Mutex<String>,
    lease_ms: u64,
    /// `leased_acquire.lua`'s `ARGV[3]`: the queue entry of a waiter that queues, `0` for one
    /// attempt that lets the queue go first, empty without hand-off.
    entry: String,
    /// No attempt was sent yet: the first tries `leased_acquire_fast.lua` (a later one, its id
    /// queued or handed off, would find only nil there).
    fresh: AtomicBool,
    /// Where hand-offs to this waiter are announced, and its permit id: `None` when it does
    /// not queue.
    grant: Option<(String, String)>,
}

impl LeasedRequest {
    /// A permit announced as handed to this waiter: the server confirms it by extending it
    /// to the lease asked for (one round trip; a hand-off may have cut the lease to the
    /// waiter's liveness deadline). The grant counts from this call's start. When the server
    /// does not hold the permit (the cut lease ended, the message was stale or not a
    /// release's), a wait with no nap: the next attempt queues the waiter again.
    async fn extend_to_lease(&self, id: String) -> Result<Step<(Instant, String)>> {
        let started = Instant::now();
        let inv = self.sem.calls().extend(&id, self.lease_ms);
        let r: Vec<i64> = self
            .sem
            .names
            .client
            .backend()
            .eval(
                &self.sem.names.context("extend a handed-off permit"),
                &inv,
                Resend::Few,
            )
            .await?;
        if r.first() == Some(&1) {
            return Ok(Step::Done((started, id)));
        }
        Ok(Step::Wait(Some(Duration::ZERO)))
    }
}

/// A new permit id: 16 random bytes as 32 hex characters (Redisson's form).
fn new_permit_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

impl Acquire for LeasedRequest {
    /// The instant the lease counts from, and the permit id.
    type Grant = (Instant, String);

    fn describe(&self) -> (&'static str, &str, Option<&str>) {
        (crate::kind::LEASED_SEMAPHORE, &self.sem.names.name, None)
    }

    fn wake(&self) -> Option<(&str, Wake)> {
        Some((&self.sem.names.channel, Wake::All))
    }

    fn handoff(&self) -> Option<(&str, &str)> {
        self.grant.as_ref().map(|(c, id)| (c.as_str(), id.as_str()))
    }

    async fn handed_off(&self, _grant: HandedOff) -> Result<Step<Self::Grant>> {
        // A client shutting down releases its permits, which may hand one to its own waiter:
        // refuse it (the acquire driver leaves the queue on `Closed`, giving it back).
        self.sem.names.client.check_open()?;
        // The message is a claim, not a grant (anyone with PUBLISH rights on the channel can
        // send one): the extension to the full lease is the server's word that the permit
        // is this waiter's, and it answers GONE for a permit it does not hold (a forged or
        // stale message, a lease that ran out before the message was read).
        let id = self.id.lock().unwrap().clone();
        self.extend_to_lease(id).await
    }

    fn recheck(&self) -> Duration {
        if self.grant.is_some() {
            // Queued: each attempt renews the liveness deadline (see `handed_off` for the
            // lease).
            RECHECK
                .min(self.sem.liveness / 3)
                .min(Duration::from_millis(self.lease_ms) / 3)
        } else {
            RECHECK
        }
    }

    async fn leave(&self) {
        // Out of the queue, giving back a hand-off that raced the end of the wait (by id).
        if self.grant.is_none() {
            return;
        }
        let id = self.id.lock().unwrap().clone();
        if let Err(e) = self.sem.release_id(&id, None).await {
            tracing::warn!(
                semaphore = %self.sem.names.name,
                error = format_args!("{e:#}"),
                "leaving the hand-off queue failed; the waiter's entry ends with its liveness"
            );
        }
    }

    async fn attempt(&self, started: Instant) -> Result<Step<Self::Grant>> {
        let n = &self.sem.names;
        let id = self.id.lock().unwrap().clone();
        let calls = self.sem.calls();
        // A calm handle's first attempt tries the fast path (the full call built only if a
        // send needs it); a later one the full script, which answers a hand-off to its id.
        let fast = self.fresh.swap(false, Ordering::Relaxed) && self.sem.contention.calm();
        let inv = if fast {
            Invocation::later(
                || calls.acquire(&id, self.lease_ms, &self.entry),
                calls.acquire_fast(&id, self.lease_ms),
            )
        } else {
            calls.acquire(&id, self.lease_ms, &self.entry)
        };
        let context = n.context("acquire");
        // Where replicas confirm grants, over a connection set aside for it (see `for_grant`).
        let mut grant = n.client.backend().for_grant(&n.key).await?;
        let r: Vec<i64> = grant
            .backend
            .eval(&context, &inv, Resend::Few)
            .await
            .inspect_err(|e| grant.failed(e))?;
        if inv.fast_deferred() || r.first() == Some(&0) {
            self.sem.contention.seen();
        }
        drop(inv);
        Ok(match r.as_slice() {
            [1, _, left] => {
                // Not confirmed: released by id; the next attempt asks for a new id.
                confirm_grant(grant, &context, || async {
                    *self.id.lock().unwrap() = new_permit_id();
                    self.sem.release_id(&id, None).await.map(|_| ())
                })
                .await?;
                if self.grant.is_some() && *left < self.lease_ms as i64 {
                    // A hand-off this attempt found before its message: its lease may be
                    // cut to the waiter's liveness.
                    return self.extend_to_lease(id).await;
                }
                Step::Done((started, id))
            }
            // Waits are bounded by the earliest running lease.
            [0, wait_ms] if *wait_ms >= 0 => {
                Step::Wait(Some(Duration::from_millis(*wait_ms as u64)))
            }
            [0, _] => Step::Wait(None),
            other => {
                return Err(Error::unexpected(format!(
                    "{context}: reply {other:?} of leased_acquire.lua"
                )))
            }
        })
    }

    fn give_back(self) {
        // Released by id (idempotent); tracked like a release, so it is sent even when the
        // runtime is shutting down.
        let client = &self.sem.names.client;
        client.registry().release_in_background(
            client.backend(),
            self.sem.release_request(&self.id.lock().unwrap(), None),
        );
    }
}
