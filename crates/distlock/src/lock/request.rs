//! One acquire of a lock-family hold ([`LockRequest`]), for the crate's acquire driver; a
//! handle's contention memory ([`Contention`]: its fast paths are skipped for a while after)
//! and the operation names of error messages ([`Ctx`], from `error`).

use std::time::Duration;

use tokio::time::Instant;

use super::raw::{parse_token, Attempt, Mode, NO_TTL_RECHECK};
use super::{LockCore, Owner};
use crate::acquire::{Acquire, Step};
use crate::conn::pubsub::{HandedOff, Wake};
pub(crate) use crate::error::Ctx;
use crate::error::{Error, ErrorKind, Result};
use crate::keys::{self};

/// One acquire of a lock-family hold, for the crate's acquire driver.
pub(super) struct LockRequest {
    pub(super) lock: LockCore,
    pub(super) owner: Owner,
    pub(super) mode: Mode,
    /// The re-entrant modes' request id (their acquire latch); a new one after a grant that
    /// replicas did not confirm was given back, so that the next attempt is not answered by
    /// the latch of the one given back.
    pub(super) request_id: std::sync::Mutex<String>,
    pub(super) lease_ms: u64,
    /// The whole wait in ms; 0 for a single attempt (no queue).
    pub(super) wait_ms: u64,
    /// The wake channel and how it wakes, named when a wait first needs it (an acquire
    /// granted at once never does).
    pub(super) wake: std::sync::OnceLock<(String, Wake)>,
    /// Whether this waiter takes direct hand-offs (a fair lock, or a plain lock with
    /// hand-off on; a fresh owner that waits), and where a release announces one to it: its
    /// grant channel, named when a wait first needs it.
    pub(super) takes_handoff: bool,
    pub(super) grant_channel: std::sync::OnceLock<String>,
    /// The highest token this request's refused attempts reported (another holder's, or the
    /// last one issued in the lock's slot): a hand-off message with a token at or below it
    /// was made before that attempt and has run out or been given back since (read late),
    /// so it is not a grant.
    pub(super) holder_seen: std::sync::Mutex<Option<u128>>,
    /// Counted among its handle's waiters ([`Contention`]) once refused, until it is dropped
    /// (the handle's releases skip the fast paths while it waits, however long).
    pub(super) counted: std::sync::atomic::AtomicBool,
}

/// A lock-family grant, as the acquire driver hands it back.
pub(super) struct Granted {
    pub(super) hold_count: u32,
    pub(super) token: u128,
    /// The instant the lease counts from.
    pub(super) since: Instant,
}

/// Why an acquire of a lock that its own task holds waits: Redisson's `lock()` re-enters
/// from the thread that holds it; here every acquire is a new owner, and re-entry is
/// explicit. Only for the task that holds the lock (a self-deadlock until the wait ends):
/// another task's hold is ordinary contention.
pub(super) const SELF_HELD_HINT: &str = "this task already holds it: every acquire is a new owner \
     and waits for the holder's release, even in the task that holds it (Redisson's lock() \
     re-enters per thread; here re-entry is explicit: LockGuard::reenter, or acquire_as \
     with the guard's owner)";

impl Acquire for LockRequest {
    type Grant = Granted;

    fn describe(&self) -> (&'static str, &str, Option<&str>) {
        (
            self.lock.inner.raw.kind(),
            &self.lock.inner.names.name,
            Some(self.owner.as_str()),
        )
    }

    fn token(grant: &Self::Grant) -> Option<u128> {
        Some(grant.token)
    }

    fn wake(&self) -> Option<(&str, Wake)> {
        let (channel, wake) = self.wake.get_or_init(|| {
            self.lock
                .inner
                .raw
                .wake(&self.lock.inner.names, &self.owner)
        });
        Some((channel, *wake))
    }

    fn handoff(&self) -> Option<(&str, &str)> {
        let lock = &self.lock.inner;
        self.takes_handoff.then(|| {
            let channel = self
                .grant_channel
                .get_or_init(|| keys::lock_grant_channel(&lock.names.key, lock.client.id_str()));
            (channel.as_str(), self.owner.as_str())
        })
    }

    /// A hand-off message is a claim, not a grant: anyone with `PUBLISH` rights on the
    /// grant channel can send one. The waiter asks the server with an attempt of its own
    /// (the full acquire script, whose answer for an owner the lock was handed to is that
    /// hold, the token the server issued and the full lease), so a guard only ever carries
    /// a grant and a token the server made. A message with a token at or below one this
    /// request was refused with is stale and costs no round trip.
    async fn handed_off(&self, grant: HandedOff) -> Result<Step<Granted>> {
        // A client shutting down releases its holds, which may hand one to its own waiter:
        // refuse it (the acquire driver leaves the queue on `Closed`, giving it back).
        self.lock.inner.client.check_open()?;
        let Some(token) = parse_token(&grant.token) else {
            tracing::warn!(
                lock = %self.lock.inner.names.name,
                "ignoring a hand-off message whose token is not a token"
            );
            return Ok(Step::Wait(None));
        };
        if self
            .holder_seen
            .lock()
            .unwrap()
            .is_some_and(|seen| token <= seen)
        {
            return Ok(Step::Wait(None));
        }
        self.lock.inner.contention.seen();
        let step = self.attempt(Instant::now()).await?;
        if !matches!(step, Step::Done(_)) {
            // Refused: the message was stale (the hold ran out and went on), or not the
            // server's.
            tracing::debug!(
                lock = %self.lock.inner.names.name,
                "a hand-off message the server did not confirm; waiting on"
            );
        }
        Ok(step)
    }

    fn waiting(&self) {
        if self.lock.held_by_this_task() {
            tracing::warn!(
                name: "distlock.waiting_for_own_lock",
                lock = %self.lock.inner.names.name,
                "waiting for a lock this task holds: {SELF_HELD_HINT}"
            );
        }
    }

    fn recheck(&self) -> Duration {
        match (self.takes_handoff, self.lock.inner.raw.handoff_liveness()) {
            // Queued for hand-off: each attempt renews the liveness deadline; and as a
            // hand-off's initial lease is at most the lease, re-attempting every third of it
            // means a hand-off read on time always has two thirds of it left (`handed_off`).
            (true, Some(liveness)) => (liveness / 3).min(Duration::from_millis(self.lease_ms) / 3),
            _ => self.lock.inner.raw.recheck(),
        }
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
        if let Attempt::Held { holder_token, .. } = attempt {
            if self.wait_ms > 0 {
                self.waits();
            }
            if let Some(t) = holder_token {
                let mut seen = self.holder_seen.lock().unwrap();
                *seen = (*seen).max(Some(t));
            }
        }
        if let Attempt::Granted { .. } = attempt {
            // A fresh owner's grant learnt only after its lease may have run out (the process
            // was paused, the runtime starved): another owner may hold the lock by now, with
            // a higher token. It is no grant: give it back (if it is still there) and go on.
            let lease = Duration::from_millis(self.lease_ms);
            if self.mode == Mode::New
                && Instant::now() >= started + lease.saturating_sub(keys::drift(lease))
            {
                tracing::debug!(lock = %self.lock.inner.names.name, "grant learnt after its lease could have run out; giving it back");
                let _ = Box::pin(self.lock.give_back_hold(&self.owner, lease)).await;
                return Ok(Step::Wait(None));
            }
        }
        Ok(match attempt {
            Attempt::Granted { hold_count, token } => Step::Done(Granted {
                hold_count,
                token,
                since: started,
            }),
            // Wait at most the holder's PTTL; a key without TTL (-1) is re-checked every
            // NO_TTL_RECHECK.
            Attempt::Held { pttl_ms, .. } if pttl_ms >= 0 => {
                Step::Wait(Some(Duration::from_millis(pttl_ms as u64)))
            }
            Attempt::Held { pttl_ms: -1, .. } => Step::Wait(Some(NO_TTL_RECHECK)),
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
            .leave_queue(self.owner.as_str(), self.wait_ms, self.mode == Mode::New)
            .await
        {
            leave_failed(&self.lock.inner.names.name, &e);
        }
    }

    fn give_back(self) {
        // The request itself goes (no longer counted as waiting) when this returns.
        let (lock, owner, mode, wait_ms) = (
            self.lock.clone(),
            self.owner.clone(),
            self.mode,
            self.wait_ms,
        );
        let request_id =
            std::mem::take(&mut *self.request_id.lock().unwrap_or_else(|e| e.into_inner()));
        // For a fresh owner, any hold it has is ours to give back entirely; a plain lock's
        // re-entrant request is undone through its acquire latch. A queued waiter (fair
        // lock, waiting writer) leaves the queue at once.
        if mode != Mode::New && lock.reentry_latched() {
            let lease = lock.effective_lease().unwrap_or(Duration::from_millis(1));
            lock.undo_reentry(owner, request_id, lease);
            return;
        }
        let runtime = lock.inner.client.runtime().clone();
        runtime.spawn(async move {
            let left = lock
                .leave_queue(owner.as_str(), wait_ms, mode == Mode::New)
                .await;
            if let Err(e) = &left {
                leave_failed(&lock.inner.names.name, e);
            }
            // A plain lock's leave gave back the whole hold already.
            if mode != Mode::New || matches!(left, Ok(true)) {
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

/// Logs a waiter's failed leave of the wait queue: at debug level when the server could not
/// be reached or the outcome is unknown (the entry's liveness deadline ends it then), else
/// at warn level, since a leave the server refuses (a script error, a missing ACL rule)
/// fails the same way for every waiter.
pub(super) fn leave_failed(lock: &str, e: &Error) {
    if e.kind() == ErrorKind::Connection || e.kind() == ErrorKind::Closed || e.is_outcome_unknown()
    {
        tracing::debug!(
            lock,
            error = format_args!("{e:#}"),
            "leaving the wait queue failed; liveness ends it"
        );
    } else {
        tracing::warn!(
            lock,
            error = format_args!("{e:#}"),
            "leaving the wait queue failed; liveness ends it"
        );
    }
}

/// A span's `outcome` for a finished request: `ok`, `not_held`, `not_replicated`,
/// `outcome_unknown` or `error`.
pub(super) fn outcome<T>(r: &Result<T>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) if e.is_outcome_unknown() => "outcome_unknown",
        Err(e) if e.kind() == ErrorKind::NotHeld => "not_held",
        Err(e) if e.kind() == ErrorKind::NotReplicated => "not_replicated",
        Err(_) => "error",
    }
}

/// How long a lock handle that met contention (a refused attempt, a hand-off, a fast path
/// that found a queue) sends its requests' full scripts directly: a fast path would only
/// answer nil there, costing a round trip and a script call.
pub(super) const CONTENTION_MEMORY: Duration = Duration::from_secs(2);

/// When a lock handle last met contention, in ms since the process's first reading (0:
/// never), and how many of its requests wait now.
#[derive(Default)]
pub(crate) struct Contention {
    pub(super) at: std::sync::atomic::AtomicU64,
    /// Requests of this handle refused at least once and not yet granted or given up.
    pub(super) waiting: std::sync::atomic::AtomicUsize,
}

impl Contention {
    /// [`process_ms`](crate::client::process_ms) plus 1: 0 in `at` means never.
    fn now_ms() -> u64 {
        crate::client::process_ms() + 1
    }

    /// Contention was met now.
    pub(crate) fn seen(&self) {
        self.at
            .store(Self::now_ms(), std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether to try the fast paths: no request of this handle waits, and no contention
    /// was met within [`CONTENTION_MEMORY`].
    pub(crate) fn calm(&self) -> bool {
        if self.waiting.load(std::sync::atomic::Ordering::Relaxed) > 0 {
            return false;
        }
        let at = self.at.load(std::sync::atomic::Ordering::Relaxed);
        at == 0 || Self::now_ms() - at >= CONTENTION_MEMORY.as_millis() as u64
    }
}

impl LockRequest {
    /// The request waits: counted among its handle's waiters (once, however often it is
    /// refused).
    fn waits(&self) {
        if !self
            .counted
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            self.lock
                .inner
                .contention
                .waiting
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

impl Drop for LockRequest {
    fn drop(&mut self) {
        if *self.counted.get_mut() {
            self.lock
                .inner
                .contention
                .waiting
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
