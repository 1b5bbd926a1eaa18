//! The engine of the lock family: one acquire loop, one cancel guard, one way to grant,
//! re-enter, release, renew and inspect, for every kind. What differs between kinds comes
//! from the raw layer ([`super::raw::RawLock`]); this module only drives it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::raw::{
    not_held_reason, parse_attempt, parse_token, AcquireCall, Attempt, Mode, ReleaseCall, Renewal,
    Resend, NO_TTL_RECHECK,
};
use super::{FencingToken, Lock, LockGuard, Owner};
use crate::acquire::{acquire, confirm_grant, Acquire, Step};
use crate::conn::pubsub::Wake;
use crate::error::{Error, ErrorKind, NotHeldReason, Result};
use crate::holds::ReleaseRequest;
use crate::keys::{self, TOKEN_FIELD};
use crate::scripts;

impl Lock {
    /// Take a timed-out or cancelled waiter out of the kind's queue (fair lock, waiting
    /// writers); nothing for kinds without one.
    pub(super) async fn leave_queue(&self, owner: &str, wait_ms: u64) -> Result<()> {
        if let Some(inv) = self.inner.raw.leave(&self.inner.names, owner, wait_ms) {
            self.backend()
                .eval::<i64>(&self.context("leave queue"), &inv)
                .await?;
        }
        Ok(())
    }

    pub(super) fn backend(&self) -> &crate::conn::Backend {
        &self.inner.client.inner.backend
    }

    /// `"<op> <name>"` for messages; formatted only when an error needs it.
    pub(super) fn context(&self, op: &'static str) -> Ctx<'_> {
        Ctx {
            op,
            name: &self.inner.names.name,
        }
    }

    pub(crate) fn check(&self) -> Result<()> {
        keys::check_name(&self.inner.names.name)
    }

    pub(super) fn effective_lease(&self) -> Result<Duration> {
        match self.inner.lease {
            Some(l) => {
                keys::lease_ms("lease", l)?;
                Ok(l)
            }
            None => Ok(self.inner.client.inner.watchdog_lease),
        }
    }

    pub(super) fn not_acquired(&self, wait: Duration) -> Error {
        crate::acquire::not_acquired(format_args!("lock {:?}", self.inner.names.name), wait)
    }

    pub(super) async fn inspect(&self, owner: &Owner) -> Result<(u32, u128, i64)> {
        let mut inv = scripts::LOCK_INSPECT.prepare_invoke();
        inv.key(&self.inner.names.key)
            .arg(self.inner.raw.field(owner))
            .arg(TOKEN_FIELD);
        let r: Vec<String> = self.backend().eval(&self.context("inspect"), &inv).await?;
        let parsed = match r.as_slice() {
            [code] if code == "-2" => Some((0, 0, -2)),
            [count, token, pttl] => match (count.parse(), parse_token(token), pttl.parse()) {
                (Ok(count), Some(token), Ok(pttl)) => Some((count, token, pttl)),
                _ => None,
            },
            _ => None,
        };
        parsed.ok_or_else(|| Error::unexpected(format!("{}: reply {r:?}", self.context("inspect"))))
    }

    pub(crate) async fn attempt(
        &self,
        owner: &Owner,
        mode: Mode,
        lease_ms: u64,
        request_id: &str,
        wait_ms: u64,
    ) -> Result<Attempt> {
        let client = &self.inner.client;
        let context = self.context("acquire");
        // Where replicas must confirm grants, the grant goes over a connection set aside for
        // it, and WAIT follows on that connection; on Sentinel it stays with one master, whose
        // config epoch is the token's generation, riding in front of the floor (see
        // prelude.lua's next_token).
        let mut grant = client
            .inner
            .backend
            .for_grant(&self.inner.names.key)
            .await?;
        let floor = grant.floor(&client.inner.fencing_floor);
        let call = AcquireCall {
            owner,
            mode,
            lease_ms,
            request_id,
            wait_ms,
            latch_ms: client.latch_ttl_ms(),
            floor: &floor,
            holder: &client.inner.holder_meta,
        };
        let (inv, resend) = self.inner.raw.acquire(&self.inner.names, &call);
        let sent: Result<Vec<String>> = match resend {
            Resend::Always => grant.backend.eval(&context, &inv).await,
            // The latch answers a resend while it lives: resend until answered within its
            // window; after that the caller undoes it (`undo_reentry`).
            Resend::Latched => grant
                .backend
                .eval_resolving(&context, &inv, client.resolve_window())
                .await
                .map(|(r, _)| r),
            Resend::Never => grant.backend.eval_once(&context, &inv).await,
        };
        let r = sent.inspect_err(|e| grant.failed(e))?;
        let attempt = match parse_attempt(&r) {
            Ok(a) => a,
            Err(Some(-4)) => {
                return Err(Error::new(
                    ErrorKind::Connection,
                    format!("{context}: the request was cancelled after its outcome was unknown"),
                ))
            }
            Err(Some(-3)) => {
                return Err(Error::new(
                    ErrorKind::WouldDeadlock,
                    format!(
                        "lock {:?}: this owner holds a read lock; a read -> write upgrade would \
                         deadlock (release the read lock first)",
                        self.inner.names.name
                    ),
                ))
            }
            Err(Some(code)) if not_held_reason(code).is_some() => {
                return Err(Error::not_held(
                    &self.inner.names.name,
                    not_held_reason(code).expect("checked"),
                ))
            }
            Err(_) => return Err(Error::unexpected(format!("{context}: reply {r:?}"))),
        };
        if let Attempt::Granted { hold_count, .. } = attempt {
            // Not confirmed by the replicas: give back what this attempt holds before
            // answering, so that a retry by the same owner cannot find it.
            confirm_grant(grant, &context, || async {
                let holds = if mode == Mode::New { hold_count } else { 1 };
                let lease = Duration::from_millis(lease_ms);
                for _ in 0..holds {
                    self.give_back_hold(owner, lease).await?;
                }
                Ok(())
            })
            .await?;
        }
        Ok(attempt)
    }

    /// Acquire for `owner` (a fresh one when `None`) through the crate's acquire driver.
    pub(super) async fn acquire_inner(
        &self,
        owner: Option<Owner>,
        mode: Mode,
        wait: Duration,
    ) -> Result<Option<LockGuard>> {
        self.check()?;
        if mode == Mode::As && !self.inner.raw.acquire_as_allowed() {
            // Reachable only through a fair or read-write guard's `lock()`.
            return Err(Error::invalid(
                "acquiring as a given owner is for plain locks; re-enter a fair or read-write \
                 lock through its guard",
            ));
        }
        let lease = self.effective_lease()?;
        let owner = owner.unwrap_or_else(|| self.inner.client.new_owner());
        let (channel, wake) = self.inner.raw.wake(&self.inner.names, &owner);
        let request = LockRequest {
            lock: self.clone(),
            owner: owner.clone(),
            mode,
            // Only re-entrant requests need a request id (for their acquire latch).
            request_id: std::sync::Mutex::new(match mode {
                Mode::New => String::new(),
                _ => self.inner.client.request_id(),
            }),
            lease_ms: lease.as_millis() as u64,
            // Not 0 unless the wait is: a waiter joins the kind's queue.
            wait_ms: if wait.is_zero() {
                0
            } else {
                (wait.as_millis() as u64).max(1)
            },
            channel,
            wake,
        };
        let granted = acquire(&self.inner.client, request, wait).await?;
        Ok(granted.map(|(hold_count, token, started)| {
            self.granted(owner, hold_count, token, lease, started)
        }))
    }

    pub(super) fn granted(
        &self,
        owner: Owner,
        hold_count: u32,
        token: u128,
        lease: Duration,
        started: Instant,
    ) -> LockGuard {
        let valid_until = started + lease.saturating_sub(keys::drift(lease));
        self.guard(owner, hold_count, token, lease, valid_until)
    }

    pub(super) fn guard(
        &self,
        owner: Owner,
        hold_count: u32,
        token: u128,
        lease: Duration,
        valid_until: Instant,
    ) -> LockGuard {
        let renewal = self
            .inner
            .lease
            .is_none()
            .then(|| self.inner.raw.renewal(&self.inner.names, &owner));
        let registration = self.inner.client.inner.leases.register(
            &self.inner.names.key,
            &self.inner.raw.field(&owner),
            valid_until,
            renewal,
            self.inner.raw.kind(),
        );
        let hold = {
            let (lock, owner) = (self.clone(), owner.clone());
            self.inner.client.inner.holds.register(
                self.inner.raw.kind(),
                Arc::new(move || lock.release_request(&owner, lease)),
            )
        };
        LockGuard::new(
            self.clone(),
            owner,
            FencingToken(token),
            hold_count,
            lease,
            registration,
            hold,
        )
    }

    /// One more hold for `owner`, which must hold this lock (or, for a read lock, the write
    /// side of it): re-entry and downgrade.
    pub(crate) async fn nest_as(&self, owner: &Owner, lease: Duration) -> Result<LockGuard> {
        let request_id = self.inner.client.request_id();
        let started = Instant::now();
        let lease_ms = lease.as_millis() as u64;
        let attempt = self
            .attempt(owner, Mode::Nested, lease_ms, &request_id, 0)
            .await;
        if let Err(e) = &attempt {
            if e.is_outcome_unknown() && self.reentry_latched() {
                self.undo_reentry(owner.clone(), request_id, lease);
            }
        }
        match attempt? {
            Attempt::Granted { hold_count, token } => {
                Ok(self.granted(owner.clone(), hold_count, token, lease, started))
            }
            Attempt::Held { .. } => Err(Error::not_held(
                &self.inner.names.name,
                NotHeldReason::HeldByOther,
            )),
        }
    }

    /// Resolve a re-entrant acquire (`as`, `nested`) whose outcome its caller never learnt:
    /// in the background, tombstone its acquire latch (so a send still queued on the server
    /// does nothing when it runs) and, if it had run, give its hold back. Resent until the
    /// server answers, at most ten resend windows.
    pub(super) fn undo_reentry(&self, owner: Owner, request_id: String, lease: Duration) {
        let lock = self.clone();
        let client = self.inner.client.clone();
        let mut inv = scripts::LATCH_CANCEL.prepare_invoke();
        inv.key(keys::acquire_latch(&self.inner.names.key, &request_id))
            .arg(client.latch_ttl_ms());
        client.inner.backend.resend_in_background(
            &client.inner.runtime,
            self.context("undo re-entry").to_string(),
            inv,
            client.latch_ttl() * 10,
            move |r: Result<String>| match r {
                Ok(prior) if prior.is_empty() => {
                    tracing::info!(lock = %lock.inner.names.name, "re-entry of unknown outcome cancelled before it ran");
                }
                Ok(_) => {
                    tracing::info!(lock = %lock.inner.names.name, "re-entry of unknown outcome had run; giving its hold back");
                    lock.inner.client.inner.runtime.clone().spawn(async move {
                        if let Err(e) = lock.give_back_hold(&owner, lease).await {
                            tracing::warn!(lock = %lock.inner.names.name, error = format_args!("{e:#}"), "giving back a re-entry of unknown outcome failed");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(lock = %lock.inner.names.name, error = format_args!("{e:#}"), "cancelling a re-entry of unknown outcome failed");
                }
            },
        );
    }

    /// The script call that releases one hold of `owner` (with a fresh request id for its
    /// unlock latch): sent by [`Lock::release_hold`], by a dropped guard's background
    /// release, and at shutdown.
    pub(crate) fn release_request(&self, owner: &Owner, lease: Duration) -> ReleaseRequest {
        let n = &self.inner.names;
        let latch = keys::unlock_latch(&n.key, &self.inner.client.request_id());
        self.inner.raw.release(
            n,
            &ReleaseCall {
                owner,
                lease_ms: lease.as_millis() as u64,
                latch: &latch,
                latch_ms: self.inner.client.latch_ttl_ms(),
                context: self.context("release").to_string(),
            },
        )
    }

    /// Whether this kind's re-entries carry an acquire latch (and can be undone by it).
    pub(super) fn reentry_latched(&self) -> bool {
        self.inner.raw.acquire_as_allowed()
    }

    /// Release one hold of `owner`, confirmed by replicas where the deployment asks for it.
    pub(crate) async fn release_hold(&self, owner: &Owner, lease: Duration) -> Result<()> {
        self.release_hold_with(owner, lease, true).await
    }

    /// Give back a hold of a grant that did not count (unconfirmed, cancelled, of unknown
    /// outcome): the same release, not waiting for replicas (which may be what is missing).
    pub(crate) async fn give_back_hold(&self, owner: &Owner, lease: Duration) -> Result<()> {
        self.release_hold_with(owner, lease, false).await
    }

    /// In an INFO span `distlock.release` (`kind`, `name`, `owner`, `give_back`, `outcome`).
    async fn release_hold_with(
        &self,
        owner: &Owner,
        lease: Duration,
        confirmed: bool,
    ) -> Result<()> {
        let span = tracing::info_span!(
            "distlock.release",
            kind = self.inner.raw.kind(),
            name = %self.inner.names.name,
            owner = owner.as_str(),
            give_back = !confirmed,
            outcome = tracing::field::Empty,
        );
        let r = self
            .release_hold_in_span(owner, lease, confirmed)
            .instrument(span.clone())
            .await;
        span.record("outcome", outcome(&r));
        r
    }

    async fn release_hold_in_span(
        &self,
        owner: &Owner,
        lease: Duration,
        confirmed: bool,
    ) -> Result<()> {
        let request = self.release_request(owner, lease);
        let client = &self.inner.client;
        let inv = request.invocation();
        let (r, resent): (i64, bool) = if confirmed {
            client
                .eval_latched(&self.inner.names.key, &request.context, &inv)
                .await?
        } else {
            client
                .eval_latched_unconfirmed(&request.context, &inv)
                .await?
        };
        // The plain lock's final release writes no latch: a resend that finds the lock gone
        // or re-taken may follow an earlier send that released it, or a hold lost before
        // (the server restarted without it, or failed over to a replica that never had it).
        // Counting it as released would hide a loss, so it is reported as unconfirmed.
        if self.inner.raw.final_release_unlatched() && resent && (r == -1 || r == -2) {
            return Err(Error::not_held(
                &self.inner.names.name,
                NotHeldReason::Unconfirmed,
            ));
        }
        match r {
            0 | 1 => Ok(()),
            code => match not_held_reason(code) {
                Some(reason) => Err(Error::not_held(&self.inner.names.name, reason)),
                None => Err(Error::unexpected(format!(
                    "{}: reply {code}",
                    request.context
                ))),
            },
        }
    }

    /// In an INFO span `distlock.extend` (`kind`, `name`, `owner`, `lease_ms`, `outcome`).
    pub(crate) async fn renew_one(&self, owner: &Owner, lease_ms: u64) -> Result<i64> {
        let span = tracing::info_span!(
            "distlock.extend",
            kind = self.inner.raw.kind(),
            name = %self.inner.names.name,
            owner = owner.as_str(),
            lease_ms,
            outcome = tracing::field::Empty,
        );
        let r = self
            .renew_one_in_span(owner, lease_ms)
            .instrument(span.clone())
            .await;
        span.record(
            "outcome",
            match &r {
                Ok(1) => "extended",
                Ok(_) => "not_held",
                Err(_) => outcome(&r),
            },
        );
        r
    }

    async fn renew_one_in_span(&self, owner: &Owner, lease_ms: u64) -> Result<i64> {
        let key = &self.inner.names.key;
        let inv = match self.inner.raw.renewal(&self.inner.names, owner) {
            Renewal::Read { prefix } => {
                let mut inv = scripts::RW_READ_RENEW.prepare_invoke();
                inv.key(key).arg(lease_ms).arg(owner.as_str()).arg(prefix);
                inv
            }
            Renewal::Hash => {
                let mut inv = scripts::LOCK_RENEW.prepare_invoke();
                inv.key(key).arg(lease_ms).arg(self.inner.raw.field(owner));
                inv
            }
        };
        // Confirmed by replicas like a grant (where the deployment asks for it): an extension
        // they did not confirm fails with NotReplicated and moves no local deadline.
        let context = self.context("extend");
        let mut grant = self.backend().for_grant(key).await?;
        let r: Vec<i64> = grant
            .eval_then_confirm(&context, &inv, |r: &Vec<i64>| r.first() == Some(&1))
            .await?;
        r.first()
            .copied()
            .ok_or_else(|| Error::unexpected(format!("{context}: empty reply")))
    }
}

/// An operation on a named lock, for error messages (names longer than 80 bytes are cut).
pub(crate) struct Ctx<'a> {
    op: &'static str,
    name: &'a str,
}

impl fmt::Display for Ctx<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.name;
        if name.len() > 80 {
            let end = (0..=80)
                .rev()
                .find(|&i| name.is_char_boundary(i))
                .unwrap_or(0);
            write!(f, "{} {:?}…", self.op, &name[..end])
        } else {
            write!(f, "{} {name:?}", self.op)
        }
    }
}

/// One acquire of a lock-family hold, for the crate's acquire driver.
struct LockRequest {
    lock: Lock,
    owner: Owner,
    mode: Mode,
    /// The re-entrant modes' request id (their acquire latch); a new one after a grant that
    /// replicas did not confirm was given back, so that the next attempt is not answered by
    /// the latch of the one given back.
    request_id: std::sync::Mutex<String>,
    lease_ms: u64,
    /// The whole wait in ms; 0 for a single attempt (no queue).
    wait_ms: u64,
    channel: String,
    wake: Wake,
}

impl Acquire for LockRequest {
    /// Hold count, fencing token, and the instant the lease counts from.
    type Grant = (u32, u128, Instant);

    fn describe(&self) -> (&'static str, &str, Option<&str>) {
        (
            self.lock.inner.raw.kind(),
            &self.lock.inner.names.name,
            Some(self.owner.as_str()),
        )
    }

    fn token(grant: &Self::Grant) -> Option<u128> {
        Some(grant.1)
    }

    fn wake(&self) -> Option<(&str, Wake)> {
        Some((&self.channel, self.wake))
    }

    fn recheck(&self) -> Duration {
        self.lock.inner.raw.recheck()
    }

    async fn attempt(&self, started: Instant) -> Result<Step<Self::Grant>> {
        let request_id = self.request_id.lock().unwrap().clone();
        let attempt = self
            .lock
            .attempt(
                &self.owner,
                self.mode,
                self.lease_ms,
                &request_id,
                self.wait_ms,
            )
            .await
            .inspect_err(|e| {
                if e.kind() == ErrorKind::NotReplicated && self.mode != Mode::New {
                    *self.request_id.lock().unwrap() = self.lock.inner.client.request_id();
                }
            })?;
        Ok(match attempt {
            Attempt::Granted { hold_count, token } => Step::Done((hold_count, token, started)),
            // Wait at most the holder's PTTL; a key without TTL (-1) is re-checked every
            // NO_TTL_RECHECK.
            Attempt::Held { pttl_ms } if pttl_ms >= 0 => {
                Step::Wait(Some(Duration::from_millis(pttl_ms as u64)))
            }
            Attempt::Held { pttl_ms: -1 } => Step::Wait(Some(NO_TTL_RECHECK)),
            // Free, but another waiter is first in line: wait for a wake-up.
            Attempt::Held { .. } => Step::Wait(None),
        })
    }

    async fn leave(&self) {
        if self.wait_ms == 0 {
            return;
        }
        if let Err(e) = self
            .lock
            .leave_queue(self.owner.as_str(), self.wait_ms)
            .await
        {
            tracing::debug!(
                error = format_args!("{e:#}"),
                "leaving the wait queue failed; liveness ends it"
            );
        }
    }

    fn give_back(self) {
        let LockRequest {
            lock,
            owner,
            mode,
            request_id,
            wait_ms,
            ..
        } = self;
        let request_id = request_id.into_inner().unwrap_or_else(|e| e.into_inner());
        // For a fresh owner, any hold it has is ours to give back entirely; a plain lock's
        // re-entrant request is undone through its acquire latch. A queued waiter (fair
        // lock, waiting writer) leaves the queue at once.
        if mode != Mode::New && lock.reentry_latched() {
            let lease = lock.effective_lease().unwrap_or(Duration::from_millis(1));
            lock.undo_reentry(owner, request_id, lease);
            return;
        }
        let runtime = lock.inner.client.inner.runtime.clone();
        runtime.spawn(async move {
            let _ = lock.leave_queue(owner.as_str(), wait_ms).await;
            if mode != Mode::New {
                return;
            }
            let lease = lock.effective_lease().unwrap_or(Duration::from_millis(1));
            if let Ok((count, _, _)) = lock.inspect(&owner).await {
                for _ in 0..count {
                    if lock.give_back_hold(&owner, lease).await.is_err() {
                        break;
                    }
                }
            }
        });
    }
}

/// A span's `outcome` for a finished request: `ok`, `not_held`, `not_replicated`,
/// `outcome_unknown` or `error`.
fn outcome<T>(r: &Result<T>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) if e.is_outcome_unknown() => "outcome_unknown",
        Err(e) if e.kind() == ErrorKind::NotHeld => "not_held",
        Err(e) if e.kind() == ErrorKind::NotReplicated => "not_replicated",
        Err(_) => "error",
    }
}
