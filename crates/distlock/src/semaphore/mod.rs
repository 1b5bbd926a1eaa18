//! [`Semaphore`] and its permit; [`LeasedSemaphore`] in `leased`.

pub(crate) mod calls;
mod leased;
mod request;

pub use leased::{LeasedPermit, LeasedSemaphore};
use request::PermitRequest;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::acquire::{acquire, not_acquired};
use crate::client::{process_ms, Client};
use crate::conn::Resend;
use crate::error::{Error, ErrorKind, Result};
use crate::keys::{self, RecordKind, MAX_PERMITS};
use crate::registry::{HoldId, ReleaseRequest};
use crate::scripts::{self, Invocation};

/// How many latch lifetimes a semaphore's grant record (and its tombstone) lives at least, and
/// how long a give-back of unknown outcome is resent.
pub(crate) const GRANT_LATCH_LIFETIMES: u64 = 10;

/// Re-check interval while waiting, in case a wake-up message was lost.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);

pub(super) fn check_permits(what: &str, n: u64) -> Result<()> {
    if n == 0 {
        return Err(Error::invalid(format!(
            "{what} {n} is not between 1 and {MAX_PERMITS}"
        )));
    }
    check_permits_or_zero(what, n)
}

/// As [`check_permits`], zero allowed: acquiring or releasing no permits is a no-op, as in
/// Redisson's `RSemaphore` and tokio's `Semaphore`.
pub(super) fn check_permits_or_zero(what: &str, n: u64) -> Result<()> {
    if n > MAX_PERMITS {
        return Err(Error::invalid(format!(
            "{what} {n} is over the largest count, {MAX_PERMITS}"
        )));
    }
    Ok(())
}

/// Names shared by both semaphores.
#[derive(Clone)]
pub(super) struct Names {
    client: Client,
    name: String,
    key: String,
    channel: String,
}

impl Names {
    fn new(client: &Client, name: String) -> Names {
        let key = format!("{}{}", client.key_prefix(), name);
        let channel = keys::semaphore_channel(&key);
        Names {
            client: client.clone(),
            name,
            key,
            channel,
        }
    }

    fn context(&self, op: &str) -> String {
        format!("semaphore {:?}: {op}", self.name)
    }

    async fn try_set_permits(&self, permits: u64) -> Result<bool> {
        keys::check_name(&self.name)?;
        check_permits("permits", permits)?;
        let inv = calls::set_permits(&self.key, &self.channel, permits);
        let set: i64 = self
            .client
            .backend()
            .eval(&self.context("set permits"), &inv, Resend::Few)
            .await?;
        Ok(set == 1)
    }

    async fn available(&self) -> Result<u64> {
        keys::check_name(&self.name)?;
        let context = self.context("available");
        let v: Option<String> = self
            .client
            .backend()
            .query(&context, redis::cmd("GET").arg(&self.key))
            .await?;
        // An integer as the server's INCRBY takes one: no leading zero, no sign but '-'.
        let count = |v: &str| {
            let digits = v.strip_prefix('-').unwrap_or(v);
            if v != "0" && (digits.starts_with('0') || digits.starts_with('+')) {
                return Err(());
            }
            v.parse::<i64>().map_err(|_| ())
        };
        match v.map(|v| count(&v)) {
            None => Ok(0),
            Some(Ok(n)) => Ok(n.max(0) as u64),
            // A user's string under the name ('bob', '3.5'): not a semaphore's count.
            Some(Err(_)) => Err(Error::new(
                ErrorKind::WrongType,
                format!(
                    "{context}: the key holds a string that is not a count (data that is not \
                     distlock's), not a semaphore; nothing was changed"
                ),
            )),
        }
    }

    /// The script call that gives back `permits`, with a fresh request record taken at its
    /// first send (a release built now and sent later, in the background or at shutdown,
    /// names the record set of the epoch it is sent in, whose TTL covers its resends).
    fn add_request(&self, permits: u64) -> ReleaseRequest {
        // What the call needs, not the whole names (the user's name stays behind).
        let (c, key, channel) = (self.client.clone(), self.key.clone(), self.channel.clone());
        let call = Invocation::at_first_send(&scripts::SEMAPHORE_RELEASE, &self.key, move || {
            let record = c.record(RecordKind::Release, &key, c.latch_ttl_ms());
            calls::release_call(&key, &channel, &record, permits, process_ms())
        });
        ReleaseRequest::new(self.context("release"), call)
    }

    async fn add(&self, permits: u64) -> Result<u64> {
        let request = self.add_request(permits);
        // Idempotent through its request record: resent until answered within the resend
        // window (never added twice).
        let v: i64 = self
            .client
            .backend()
            .eval(
                &request.context,
                request.call(),
                self.client.latched(&self.key),
            )
            .await?;
        Ok(v.max(0) as u64)
    }

    /// Register a live hold of `permits` in the client's registry (released at shutdown).
    fn register_permits(&self, permits: u64) -> HoldId {
        let names = self.clone();
        self.client.registry().register(
            crate::kind::SEMAPHORE,
            Arc::new(move || names.add_request(permits)),
        )
    }
}

/// A distributed counting semaphore. Made by
/// [`Client::semaphore`]; cheap to clone.
///
/// Both keep the available permits in a string key and wake waiters with a message on
/// `redisson_sc:{<name>}`, as Redisson does, so Java and Rust services can share them.
///
/// **A plain semaphore's permits are not owned**: if a process takes a permit and crashes,
/// the permit is gone for good (the same holds in Redisson). Use [`LeasedSemaphore`] when
/// holders can crash: each of its permits has an id and a lease, and a crashed holder's
/// permit returns when its lease ends.
///
/// # Examples
/// ```no_run
/// # async fn f(client: distlock::Client) -> distlock::Result<()> {
/// let sem = client.semaphore("exports");
/// sem.try_set_permits(3).await?;                 // at most 3 exports at once
/// let permit = sem.acquire().await?;
/// // ... export ...
/// permit.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    names: Names,
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("key", &self.names.key)
            .finish()
    }
}

impl Client {
    /// The semaphore called `name` (Redisson `RSemaphore` layout). No I/O.
    pub fn semaphore(&self, name: impl Into<String>) -> Semaphore {
        Semaphore {
            names: Names::new(self, name.into()),
        }
    }
}

impl Semaphore {
    /// The semaphore's name.
    pub fn name(&self) -> &str {
        &self.names.name
    }

    /// Set the number of permits if the semaphore has none yet. Returns whether it was set.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for 0 or more than 2^53 permits, or a bad name; server
    /// failures.
    ///
    /// # Cancel safety
    /// Cancel safe: idempotent.
    pub async fn try_set_permits(&self, permits: u64) -> Result<bool> {
        self.names.try_set_permits(permits).await
    }

    /// Permits available now.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key holds another type; server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    pub async fn available_permits(&self) -> Result<u64> {
        self.names.available().await
    }

    /// Adds `permits` permits and wakes waiters; returns the permits available afterwards.
    ///
    /// Also how permits taken without a [`SemaphorePermit`] are given back (Redisson's
    /// `release(n)`, e.g. for permits a process that is gone took). Zero adds nothing and
    /// wakes nobody (as Redisson's `release(0)` and tokio's `add_permits(0)`): it only reads
    /// the count.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`] for more than 2^53 permits or a bad name;
    /// [`ErrorKind::WrongType`] when the key holds another type; server failures.
    ///
    /// # Cancel safety
    /// Not idempotent: a call whose reply was lost may have added the permits.
    pub async fn add_permits(&self, permits: u64) -> Result<u64> {
        keys::check_name(&self.names.name)?;
        check_permits_or_zero("permits", permits)?;
        if permits == 0 {
            return self.names.available().await;
        }
        self.names.add(permits).await
    }

    /// Take every available permit; returns how many.
    ///
    /// # Errors
    /// [`ErrorKind::WrongType`] when the key holds another type, or a string that is not an
    /// integer as Redis's `INCRBY` takes one (a user's data under a mistyped name: nothing is
    /// changed; an integer is a semaphore's permits in Redisson's layout, and is drained);
    /// server failures.
    ///
    /// # Cancel safety
    /// Not idempotent: a call whose reply was lost may have drained.
    pub async fn drain_permits(&self) -> Result<u64> {
        keys::check_name(&self.names.name)?;
        let mut inv = scripts::SEMAPHORE_DRAIN.prepare_invoke();
        inv.key(&self.names.key);
        let v: i64 = self
            .names
            .client
            .backend()
            .eval(self.names.context("drain"), &inv, Resend::Never)
            .await?;
        Ok(v.max(0) as u64)
    }

    /// Take one permit, waiting at most the client's default wait.
    ///
    /// # Errors
    /// [`ErrorKind::NotAcquired`] when the wait elapsed; as [`Semaphore::acquire_many`].
    ///
    /// # Cancel safety
    /// Cancel safe: a permit granted to a dropped call is given back.
    pub async fn acquire(&self) -> Result<SemaphorePermit> {
        self.acquire_many(1).await
    }

    /// Takes `permits` permits at once (all or nothing), waiting at most the client's default wait.
    ///
    /// Zero permits are granted at once without a round trip (an empty [`SemaphorePermit`]), as
    /// Redisson's `acquire(0)` and tokio's `acquire_many(0)`.
    ///
    /// # Errors
    /// [`ErrorKind::NotAcquired`] when the wait elapsed; [`ErrorKind::InvalidInput`] for
    /// more than 2^53 permits or a bad name; [`ErrorKind::WrongType`]; server failures.
    ///
    /// # Cancel safety
    /// Cancel safe: a grant that raced the drop is given back in the background.
    pub async fn acquire_many(&self, permits: u64) -> Result<SemaphorePermit> {
        let wait = self.names.client.default_wait();
        self.try_acquire_many_for(permits, wait)
            .await?
            .ok_or_else(|| {
                let what = match permits {
                    1 => "a permit".to_string(),
                    n => format!("{n} permits"),
                };
                not_acquired(
                    format_args!("{what} of semaphore {:?}", self.names.name),
                    wait,
                )
            })
    }

    /// One attempt at one permit: `Ok(None)` when none is available.
    ///
    /// # Errors
    /// As [`Semaphore::acquire_many`], except that no permit is `Ok(None)`.
    ///
    /// # Cancel safety
    /// As [`Semaphore::acquire_many`].
    pub async fn try_acquire(&self) -> Result<Option<SemaphorePermit>> {
        self.try_acquire_many_for(1, Duration::ZERO).await
    }

    /// One permit, waiting at most `wait`: `Ok(None)` when it elapsed.
    ///
    /// # Errors
    /// As [`Semaphore::try_acquire`].
    ///
    /// # Cancel safety
    /// As [`Semaphore::acquire_many`].
    pub async fn try_acquire_for(&self, wait: Duration) -> Result<Option<SemaphorePermit>> {
        self.try_acquire_many_for(1, wait).await
    }

    /// `permits` permits at once, waiting at most `wait` (zero: one attempt): `Ok(None)` when
    /// it elapsed.
    ///
    /// # Errors
    /// As [`Semaphore::try_acquire`].
    ///
    /// # Cancel safety
    /// As [`Semaphore::acquire_many`].
    pub async fn try_acquire_many_for(
        &self,
        permits: u64,
        wait: Duration,
    ) -> Result<Option<SemaphorePermit>> {
        let n = &self.names;
        keys::check_name(&n.name)?;
        check_permits_or_zero("permits", permits)?;
        n.client.check_open()?;
        if permits == 0 {
            return Ok(Some(SemaphorePermit {
                names: Some(n.clone()),
                permits: 0,
                hold: None,
            }));
        }
        let request = PermitRequest::new(n.clone(), permits);
        let got = acquire(&n.client, request, wait).await?;
        Ok(got.map(|_| SemaphorePermit {
            hold: Some(n.register_permits(permits)),
            names: Some(n.clone()),
            permits,
        }))
    }
}

/// Permits taken from a [`Semaphore`].
///
/// Release with [`SemaphorePermit::release`](crate::Release::release); dropping it gives the
/// permits back in the background; [`SemaphorePermit::forget`] keeps them taken.
#[must_use = "dropping the permit gives it back at once"]
#[clippy::has_significant_drop]
pub struct SemaphorePermit {
    names: Option<Names>,
    permits: u64,
    /// These permits in the client's registry (given back at shutdown if still held); `None`
    /// for zero permits (nothing to give back).
    hold: Option<HoldId>,
}

impl fmt::Debug for SemaphorePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("permits", &self.permits)
            .finish()
    }
}

impl SemaphorePermit {
    /// How many permits this holds.
    pub fn permits(&self) -> u64 {
        self.permits
    }

    /// Keeps the permits taken.
    ///
    /// Nothing is given back (Redisson's semantics of an acquire without release), not even at
    /// [`Client::shutdown`]. Returns how many permits were held.
    pub fn forget(mut self) -> u64 {
        if let (Some(n), Some(hold)) = (self.names.take(), &self.hold) {
            n.client.registry().take(hold);
        }
        self.permits
    }
}

impl Drop for SemaphorePermit {
    fn drop(&mut self) {
        let (Some(n), Some(hold)) = (self.names.take(), &self.hold) else {
            return;
        };
        let client = &n.client;
        client
            .registry()
            .release_dropped(client.backend(), hold, || n.add_request(self.permits));
    }
}

impl crate::lease::Sealed for SemaphorePermit {}

impl SemaphorePermit {
    /// Give the permits back and wake waiters. Returns the permits available afterwards.
    ///
    /// # Errors
    /// Server failures. When the server does not answer within the resend window the error
    /// says the outcome is unknown ([`Error::is_outcome_unknown`](crate::Error::is_outcome_unknown)):
    /// the release was applied at most once (a request record answers resends), and a send
    /// still queued on a stalled server applies it when the server resumes.
    ///
    /// # Cancel safety
    /// A dropped release may or may not have happened.
    pub async fn release(mut self) -> Result<u64> {
        let n = self.names.take().expect("released twice");
        let Some(hold) = &self.hold else {
            // Zero permits: nothing to give back.
            return n.available().await;
        };
        n.client.registry().take_for_release(hold, &n.name)?;
        n.add(self.permits).await
    }
}

impl crate::Release for SemaphorePermit {
    type Released = u64;

    /// As [`SemaphorePermit::release`].
    async fn release(self) -> Result<u64> {
        SemaphorePermit::release(self).await
    }
}
