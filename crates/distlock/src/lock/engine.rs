//! The engine of the lock family: one acquire loop, one cancel guard, one way to grant,
//! re-enter, release, renew and inspect, for every kind. What differs between kinds comes
//! from the raw layer ([`super::raw::RawLock`]); this module only drives it.

use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use super::raw::{
    inspect_call, not_held_reason, parse_attempt, parse_inspect, renew_call, renew_reply,
    AcquireCall, Attempt, Mode, Resend, Texts,
};
use super::{FencingToken, Hold, LockCore, Owner};
use crate::acquire::{acquire, confirm_grant};
use crate::conn;
use crate::error::{Error, ErrorKind, NotHeldReason, Result};
use crate::keys;
use crate::scripts::{self, reply, Invocation};

use super::request::*;

impl LockCore {
    /// Take a timed-out or cancelled waiter out of the kind's queue (fair lock, waiting
    /// writers, a plain lock's hand-off queue); nothing for kinds without one. `give_back`:
    /// the owner was minted for the wait, so a hold a direct hand-off gave it goes back too.
    /// Returns whether the kind's leave gives back the owner's holds itself (a plain lock's
    /// does, whole), so that nothing is left for the caller to give back.
    pub(super) async fn leave_queue(
        &self,
        owner: &str,
        wait_ms: u64,
        give_back: bool,
    ) -> Result<bool> {
        // Where the lock hands nothing off, a plain lock's waiters do not queue; and only where
        // it hands off can a waiter hold what it never learnt of.
        let hands_off = self.hands_off();
        if !hands_off && self.inner.raw.queues_only_to_hand_off() {
            return Ok(false);
        }
        let give_back = give_back && hands_off;
        let floor = self
            .backend()
            .grant_floor(self.inner.client.fencing_floor());
        if let Some(inv) =
            self.inner
                .raw
                .leave(&self.inner.names, owner, wait_ms, give_back, &floor)
        {
            self.backend()
                .eval::<i64>(&self.context("leave queue"), &inv, conn::Resend::Few)
                .await?;
            return Ok(give_back && self.inner.raw.leave_gives_back());
        }
        Ok(false)
    }

    /// Whether this lock's waiters take direct hand-offs: a fair lock, or a plain lock with
    /// [`Handoff::Fifo`](super::Handoff::Fifo) or
    /// [`Handoff::Retakes`](super::Handoff::Retakes), on a deployment whose grants no replica
    /// must confirm. Where replicas confirm grants (`WAIT`), a handed-off grant would still
    /// need its own confirming round trip, and a waiter that gives up would leave the queue
    /// with a script sent to a master that may be failing over; there the lock keeps
    /// Redisson's behaviour for now.
    pub(super) fn hands_off(&self) -> bool {
        self.inner.raw.handoff_liveness().is_some() && !self.backend().confirms_grants()
    }

    pub(super) fn backend(&self) -> &crate::conn::Backend {
        self.inner.client.backend()
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
            None => Ok(self.inner.client.watchdog_lease()),
        }
    }

    pub(super) fn not_acquired(&self, wait: Duration) -> Error {
        let e =
            crate::acquire::not_acquired(format_args!("lock {:?}", self.inner.names.name), wait);
        if self.held_by_this_task() {
            return e.with_hint(SELF_HELD_HINT);
        }
        e
    }

    /// Whether the calling task took a guard of this client that holds this lock (any
    /// owner, any kind on the key): a nested acquire, which waits for its own task's
    /// release. Another task's guard is ordinary contention.
    pub(super) fn held_by_this_task(&self) -> bool {
        self.inner
            .client
            .leases()
            .held_by_current_task(&self.inner.names.key)
    }

    pub(super) async fn inspect(&self, owner: &Owner) -> Result<(u32, u128, i64)> {
        let inv = inspect_call(&*self.inner.raw, &self.inner.names.key, owner);
        let r: Vec<String> = self
            .backend()
            .eval(&self.context("inspect"), &inv, conn::Resend::Few)
            .await?;
        parse_inspect(&r)
            .ok_or_else(|| Error::unexpected(format!("{}: reply {r:?}", self.context("inspect"))))
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
        let mut grant = client.backend().for_grant(&self.inner.names.key).await?;
        let floor = grant.floor(client.fencing_floor());
        // A fresh owner's fast path on one server: the clock as a grant last read it, so that
        // this grant need not read it (`ServerClock`; the token is its value, never later than
        // the server's clock).
        let fast = self.inner.contention.calm();
        let clock = (fast && mode == Mode::New && !floor.contains(':'))
            .then(|| grant.backend.deployment().clock())
            .flatten();
        let call = AcquireCall {
            owner,
            mode,
            lease_ms,
            request_id,
            wait_ms,
            latch_ms: client.latch_ttl_ms(),
            floor: &floor,
            holder: client.holder_meta(),
            client_id: client.id_str(),
            handoff: self.hands_off(),
            fast,
            clock: clock.as_ref().and_then(|c| c.estimate()),
        };
        let (raw, names) = (&*self.inner.raw, &self.inner.names);
        let resend = raw.resend(mode);
        // With a fast path, the full script's call is built only if a send needs it.
        let inv = match raw.acquire_fast(names, &call) {
            Some(fast) => Invocation::later(|| raw.acquire(names, &call), fast),
            None => raw.acquire(names, &call),
        };
        let rule = match resend {
            Resend::Always => conn::Resend::Few,
            // The latch answers a resend while it lives: resend until answered within its
            // window; after that the caller undoes it (`undo_reentry`).
            Resend::Latched => conn::Resend::Within {
                left: client.resolve_window(),
            },
            Resend::Never => conn::Resend::Never,
        };
        let sent: Result<redis::Value> = grant.backend.eval(&context, &inv, rule).await;
        let value = sent.inspect_err(|e| grant.failed(e))?;
        // Read as `Vec<String>` reads it, without allocating a string per element.
        let r = Texts::of(&value)
            .map_err(|e| Error::from_redis(&context.to_string(), e.into()))
            .inspect_err(|e| grant.failed(e))?;
        let attempt = match parse_attempt(&r) {
            Ok(a) => a,
            Err(Some(reply::CANCELLED)) => {
                return Err(Error::new(
                    ErrorKind::Connection,
                    format!("{context}: the request was cancelled after its outcome was unknown"),
                ))
            }
            Err(Some(reply::READ_HELD)) => {
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
        // Refused, or a fast path that found the lock held or queued: this handle's next
        // requests go to the full scripts for a while.
        if inv.fast_deferred() || matches!(attempt, Attempt::Held { .. }) {
            self.inner.contention.seen();
        }
        // A grant by the fast script itself that read TIME: its token is the server's clock, a
        // reading for the grants after it. Never a full script's token (a resend's, or after a
        // nil): it may be the counter's, ahead of the clock. Its arrival is taken now, a little
        // after the reply: later makes the estimate lower, never ahead.
        if let (Some(clock), Attempt::Granted { token, .. }) = (&clock, &attempt) {
            if call.clock.is_none() && inv.fast_answered() {
                if let Ok(us) = u64::try_from(*token) {
                    clock.read(us, Instant::now());
                }
            }
        }
        match attempt {
            // Not confirmed by the replicas: give back what this attempt holds before
            // answering, so that a retry by the same owner cannot find it. (Boxed: only
            // where replicas confirm grants.)
            Attempt::Granted { hold_count, .. } if grant.confirms() => {
                Box::pin(confirm_grant(grant, &context, || async {
                    let holds = if mode == Mode::New { hold_count } else { 1 };
                    let lease = Duration::from_millis(lease_ms);
                    for _ in 0..holds {
                        self.give_back_hold(owner, lease).await?;
                    }
                    Ok(())
                }))
                .await?;
            }
            _ => {}
        }
        Ok(attempt)
    }

    /// Acquire for `owner` (a fresh one when `None`), waiting at most the client's default
    /// wait: [`ErrorKind::NotAcquired`] when it elapsed.
    pub(super) async fn acquire(&self, owner: Option<Owner>, mode: Mode) -> Result<Hold> {
        let wait = self.inner.client.default_wait();
        self.acquire_for(owner, mode, wait)
            .await?
            .ok_or_else(|| self.not_acquired(wait))
    }

    /// Acquire for `owner` (a fresh one when `None`) through the crate's acquire driver,
    /// waiting at most `wait` (zero: one attempt): `None` when it elapsed. `Mode::As` is for
    /// plain locks only, which their types ensure (only `Lock` has `acquire_as`).
    pub(super) async fn acquire_for(
        &self,
        owner: Option<Owner>,
        mode: Mode,
        wait: Duration,
    ) -> Result<Option<Hold>> {
        self.check()?;
        let lease = self.effective_lease()?;
        let owner = owner.unwrap_or_else(|| self.inner.client.new_owner());
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
            wake: Default::default(),
            takes_handoff: mode == Mode::New && !wait.is_zero() && self.hands_off(),
            grant_channel: Default::default(),
            holder_seen: std::sync::Mutex::new(None),
            counted: Default::default(),
        };
        let granted = acquire(&self.inner.client, request, wait).await?;
        Ok(granted
            .map(|grant| self.granted(owner, grant.hold_count, grant.token, lease, grant.since)))
    }

    /// A hold of this lock for `owner`, who has one now (handed over from another process),
    /// without adding one.
    pub(super) async fn adopt(&self, owner: Owner) -> Result<Hold> {
        self.check()?;
        let started = Instant::now();
        let (count, token, pttl) = self.inspect(&owner).await?;
        if count == 0 {
            return Err(Error::not_held(&self.inner.names.name, NotHeldReason::Gone));
        }
        let lease = self.effective_lease()?;
        let pttl = Duration::from_millis(pttl.max(0) as u64);
        let valid_until = started + pttl.saturating_sub(keys::drift(lease));
        Ok(self.guard(owner, count, token, lease, valid_until))
    }

    pub(super) fn granted(
        &self,
        owner: Owner,
        hold_count: u32,
        token: u128,
        lease: Duration,
        started: Instant,
    ) -> Hold {
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
    ) -> Hold {
        let renewal = self
            .inner
            .lease
            .is_none()
            .then(|| self.inner.raw.renewal(&self.inner.names, &owner));
        let registration = self.inner.client.leases().register(
            &self.inner.names.key,
            self.inner.raw.field(&owner),
            valid_until,
            renewal,
            self.inner.raw.kind(),
        );
        let hold = self.inner.client.registry().register_holds(
            self.inner.raw.kind(),
            self.inner.clone(),
            owner.shared(),
            lease,
        );
        Hold::new(
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
    pub(crate) async fn nest_as(&self, owner: &Owner, lease: Duration) -> Result<Hold> {
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
        client.backend().resend_in_background(
            client.runtime(),
            self.context("undo re-entry").to_string(),
            inv,
            client.latch_ttl() * 10,
            move |r: Result<String>| match r {
                Ok(prior) if prior.is_empty() => {
                    tracing::info!(lock = %lock.inner.names.name, "re-entry of unknown outcome cancelled before it ran");
                }
                Ok(_) => {
                    tracing::info!(lock = %lock.inner.names.name, "re-entry of unknown outcome had run; giving its hold back");
                    lock.inner.client.runtime().clone().spawn(async move {
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

    /// Whether this kind's re-entries carry an acquire latch (and can be undone by it).
    pub(super) fn reentry_latched(&self) -> bool {
        self.inner.raw.reentry_latched()
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

    /// In a DEBUG span `distlock.release` (`kind`, `name`, `owner`, `give_back`, `outcome`).
    async fn release_hold_with(
        &self,
        owner: &Owner,
        lease: Duration,
        confirmed: bool,
    ) -> Result<()> {
        let span = tracing::debug_span!(
            "distlock.release",
            kind = self.inner.raw.kind(),
            name = %self.inner.names.name,
            owner = owner.as_str(),
            give_back = !confirmed,
            outcome = tracing::field::Empty,
        );
        let releasing = self.release_hold_in_span(owner, lease, confirmed);
        // A span nobody records is not entered at every poll (nor the future moved into it).
        let r = if span.is_disabled() {
            releasing.await
        } else {
            releasing.instrument(span.clone()).await
        };
        span.record("outcome", outcome(&r));
        r
    }

    async fn release_hold_in_span(
        &self,
        owner: &Owner,
        lease: Duration,
        confirmed: bool,
    ) -> Result<()> {
        let request = self.inner.release_request(owner, lease);
        let client = &self.inner.client;
        let inv = request.call();
        let rule = if confirmed {
            client.latched(&self.inner.names.key)
        } else {
            client.latched_unconfirmed()
        };
        let conn::Sent { value: r, resent } = client
            .backend()
            .eval::<conn::Sent<i64>>(&request.context, inv, rule)
            .await?;
        if inv.fast_deferred() {
            self.inner.contention.seen();
        }
        // A final release writes no latch (every kind's, so that no record outlives the
        // lock): a resend that finds the lock gone or re-taken may follow an earlier send
        // that released it, or a hold lost before (the server restarted without it, or failed
        // over to a replica that never had it). Counting it as released would hide a loss,
        // so it is reported as unconfirmed.
        if resent && (r == reply::GONE || r == reply::HELD_BY_OTHER) {
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

    /// In a DEBUG span `distlock.extend` (`kind`, `name`, `owner`, `lease_ms`, `outcome`).
    pub(crate) async fn renew_one(&self, owner: &Owner, lease_ms: u64) -> Result<i64> {
        let span = tracing::debug_span!(
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
        let inv = renew_call(&*self.inner.raw, &self.inner.names, owner, lease_ms);
        // Confirmed by replicas like a grant (where the deployment asks for it): an extension
        // they did not confirm fails with NotReplicated and moves no local deadline.
        let context = self.context("extend");
        let mut grant = self.backend().for_grant(key).await?;
        let r: redis::Value = grant
            .backend
            .eval(&context, &inv, conn::Resend::Few)
            .await
            .inspect_err(|e| grant.failed(e))?;
        let code =
            renew_reply(&r).ok_or_else(|| Error::unexpected(format!("{context}: reply {r:?}")))?;
        if code == 1 {
            grant.confirm(&context).await?;
        }
        Ok(code)
    }
}
