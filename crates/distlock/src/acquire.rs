//! The one acquire driver every waiting primitive goes through: lock holds of every kind,
//! semaphore permits, leased permits, job locks, and a latch's opening.
//!
//! What differs between them is an [`Acquire`] request (one implementation per kind, next to
//! its primitive): the attempt script, the wake channel, the give-back of a grant nobody will
//! use, leaving a wait queue. What is the same is here, in [`acquire`]: input and shutdown
//! checks, the deadline, the wait loop below, the cancel guard that gives back a grant that
//! raced a dropped future (or an attempt whose outcome is unknown), leaving the queue on
//! timeout, and the [`not_acquired`] error of the `acquire` verbs.
//!
//! The wait loop is Redisson's `tryLock(wait, lease)` loop, generalised:
//!
//! 1. Attempt. Done → return.
//! 2. Subscribe to the wake channel and wait for the server's confirmation.
//! 3. Loop: register for the next wake-up, attempt, and if not done wait for a wake-up or a
//!    nap bounded by the attempt's hint (the holder's PTTL), a re-check cap and the deadline.
//!
//! Registering (`Notify::enable`) before each attempt means a wake-up published between the
//! attempt's reply and the wait is not missed; the nap bound means a lost message costs at
//! most one hint (or one cap), never a hang. A kind without a wake channel (a job lock:
//! ShedLock's format has none) polls at its re-check interval.
//!
//! A waiter rides out an unreachable server (a restart, a failover, a broken connection) and
//! grants its replicas did not confirm: an attempt that fails with [`ErrorKind::Connection`]
//! or [`ErrorKind::NotReplicated`] is retried with backoff (50 ms
//! doubling to 1 s, cut short when the subscription reconnects) until the caller's deadline;
//! only if the deadline passes while the server is still unreachable is the error returned.
//! A waiter whose wake channel the server's ACL refuses (no `&channel` rights) polls every
//! 100 ms instead of waiting for messages.
//!
//! An attempt whose outcome is unknown ([`Error::is_outcome_unknown`]) is never retried here:
//! the driver returns its error and the request's give-back resolves it.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use tracing::Instrument;

use crate::client::Client;
use crate::conn::pubsub::{HandedOff, Wake};
use crate::error::{Error, ErrorKind, Result};
use crate::keys;
use crate::metrics;

/// One request the driver takes to a grant: what differs between the kinds.
///
/// Implementations own what they need (the request outlives the caller's future when it is
/// given back in the background).
pub(crate) trait Acquire: Send + Sync {
    /// What a granted attempt hands back to the primitive (hold count and fencing token,
    /// the instant the lease counts from, …).
    type Grant: Send;

    /// What is acquired, for the `distlock.acquire` span: the kind (`lock`, `fair_lock`,
    /// `read_lock`, `write_lock`, `semaphore`, `leased_semaphore`, `job_lock`, `latch`), the
    /// name, and the owner where the kind has one.
    fn describe(&self) -> (&'static str, &str, Option<&str>);

    /// The fencing token of a grant, where the kind issues one (recorded on the span).
    fn token(_grant: &Self::Grant) -> Option<u128> {
        None
    }

    /// The channel a waiter is woken on, and how; `None` for a kind that has none (polled
    /// every [`Acquire::recheck`]).
    fn wake(&self) -> Option<(&str, Wake)>;

    /// Direct hand-off: the grant channel a release announces a hand-off to this waiter on,
    /// and the owner it is for; `None` for kinds (and requests) without hand-off.
    fn handoff(&self) -> Option<(&str, &str)> {
        None
    }

    /// A hand-off announced to this waiter: the grant once the server has confirmed it, or
    /// a wait when the server says it is not one (stale, or not published by a release).
    /// The message alone proves nothing: any client with `PUBLISH` rights on the channel
    /// can send one.
    fn handed_off(
        &self,
        _handed: HandedOff,
    ) -> impl Future<Output = Result<Step<Self::Grant>>> + Send {
        std::future::ready(Ok(Step::Wait(None)))
    }

    /// Longest nap between two attempts (liveness heartbeats, lost messages, polling).
    fn recheck(&self) -> Duration;

    /// Called once, when the first attempt found it taken and the wait begins (e.g. to warn
    /// that this client holds it already).
    fn waiting(&self) {}

    /// One attempt. A grant's lease counts from `started` (see [`wait_loop`]).
    fn attempt(&self, started: Instant) -> impl Future<Output = Result<Step<Self::Grant>>> + Send;

    /// After a wait that elapsed: leave the kind's wait queue at once rather than at the end
    /// of the waiter's liveness. Failures are logged, not returned.
    fn leave(&self) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }

    /// Give back, in the background, whatever an attempt may have been granted when its
    /// caller will never learn of it: the acquire future was dropped mid-attempt, or the
    /// last attempt failed with its outcome unknown. Also leaves the wait queue.
    fn give_back(self);
}

/// Drive `request` until it is granted (`Ok(Some)`), `wait` elapses (`Ok(None)`; zero makes
/// one attempt) or an attempt fails. Refuses a shut-down client and a `wait` over 365 days
/// ([`ErrorKind::InvalidInput`]) before any I/O.
///
/// # Cancel safety
/// Dropping the future, or an error that leaves the last attempt's outcome unknown, hands
/// the request to [`Acquire::give_back`].
///
/// Runs in a DEBUG span `distlock.acquire` with the fields `kind`, `name`, `owner` (where the
/// kind has one), `wait_ms` (the bound), and, when it ends, `outcome` (`granted`,
/// `not_acquired`, `error`), `waited_ms` and `token` (a granted lock's fencing token).
pub(crate) async fn acquire<A: Acquire>(
    client: &Client,
    request: A,
    wait: Duration,
) -> Result<Option<A::Grant>> {
    let (kind, name, owner) = request.describe();
    let span = tracing::debug_span!(
        "distlock.acquire",
        kind,
        name = %name,
        owner,
        wait_ms = wait.as_millis() as u64,
        outcome = tracing::field::Empty,
        waited_ms = tracing::field::Empty,
        token = tracing::field::Empty,
    );
    let name_label = client.metrics_lock_names().then(|| name.to_string());
    let started = Instant::now();
    let mut waited_from = None;
    let acquiring = acquire_in_span(client, request, (started, wait), kind, &mut waited_from);
    // A span nobody records is not entered at every poll (nor the future moved into it).
    let got = if span.is_disabled() {
        acquiring.await
    } else {
        acquiring.instrument(span.clone()).await
    };
    let took = started.elapsed();
    span.record("waited_ms", took.as_millis() as u64);
    let outcome = match &got {
        Ok(Some(_)) => metrics::Outcome::Granted,
        Ok(None) => metrics::Outcome::NotAcquired,
        Err(_) => metrics::Outcome::Error,
    };
    metrics::acquire_done(
        kind,
        name_label,
        outcome,
        took,
        waited_from.map(|from: Instant| from.elapsed()),
    );
    match &got {
        Ok(Some(grant)) => {
            span.record("outcome", "granted");
            // Formatted only for a span someone records.
            if let Some(token) = A::token(grant).filter(|_| !span.is_disabled()) {
                span.record("token", token.to_string());
            }
        }
        Ok(None) => {
            span.record("outcome", "not_acquired");
        }
        Err(e) => {
            span.record("outcome", "error");
            let _in = span.enter();
            tracing::debug!(error = %e, "acquire failed");
        }
    }
    got
}

/// `waited_from` is set when the first attempt found the lock taken and the driver began to
/// wait (for the wait metrics).
async fn acquire_in_span<A: Acquire>(
    client: &Client,
    request: A,
    (started, wait): (Instant, Duration),
    kind: &'static str,
    waited_from: &mut Option<Instant>,
) -> Result<Option<A::Grant>> {
    client.check_open()?;
    keys::check_wait(wait)?;
    let deadline = started + wait;
    let mut pending = Pending(Some(request));
    let req = pending.0.as_ref().expect("armed");
    let got = wait_loop(
        client,
        // Named only for a wait: an acquire granted at once needs neither channel.
        || (req.wake(), req.handoff()),
        (started, deadline),
        || req.recheck(),
        (kind, waited_from, &|| req.waiting()),
        move |started| req.attempt(started),
        move |handed| req.handed_off(handed),
    )
    .await;
    // Nothing to give back once the loop answered: a grant goes to the caller, a timeout
    // means the last attempt was refused, and so does `WrongType` (the key holds another
    // kind's data; the script refused before it wrote anything). A refused wait leaves the
    // queue an earlier attempt may have joined. After any other error the last attempt's
    // fate may be unknown, so the guard stays armed.
    let refused = matches!(got, Ok(None))
        || got
            .as_ref()
            .is_err_and(|e| e.kind() == ErrorKind::WrongType);
    if got.is_ok() || refused {
        let req = pending.0.take().expect("armed");
        if refused {
            // Boxed: rarely taken, and as large as an attempt.
            Box::pin(req.leave()).await;
        }
    } else if got.as_ref().is_err_and(|e| e.kind() == ErrorKind::Closed) {
        // Refused because the client shut down: its shutdown's releases may have handed a
        // lock to this waiter. Leave (giving that back) before answering, so the caller
        // finds it free; the guard's give-back still runs for an attempt of unknown outcome.
        if let Some(req) = pending.0.as_ref() {
            Box::pin(req.leave()).await;
        }
    }
    got
}

/// The cancel guard of [`acquire`].
struct Pending<A: Acquire>(Option<A>);

impl<A: Acquire> Drop for Pending<A> {
    fn drop(&mut self) {
        if let Some(request) = self.0.take() {
            request.give_back();
        }
    }
}

/// The error of an `acquire` verb whose wait elapsed: "`what` not acquired within `wait`".
pub(crate) fn not_acquired(what: impl fmt::Display, wait: Duration) -> Error {
    Error::new(
        ErrorKind::NotAcquired,
        format!("{what} not acquired within {wait:?}"),
    )
}

/// First pause after an attempt that could not reach the server; it doubles up to
/// [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(50);
/// Longest pause between attempts while the server is unreachable.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// Longest nap of a waiter whose wake channel the server's ACL refused: it polls.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Whether a waiter keeps trying after this error (until its deadline).
fn rides_out(e: &Error) -> bool {
    (e.kind() == ErrorKind::Connection || e.kind() == ErrorKind::NotReplicated)
        && !e.is_outcome_unknown()
}

/// After a grant sent over `grant`: have the replicas confirm it (`WAIT`, where the
/// deployment asks for it). When they do not, the grant is given back by `undo` before the
/// `NotReplicated` error is returned (which waiters ride out), so a retry finds nothing of it.
pub(crate) async fn confirm_grant<F, Fut>(
    mut grant: crate::conn::GrantChannel,
    context: impl fmt::Display,
    undo: F,
) -> Result<()>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<()>>,
{
    if let Err(e) = grant.confirm(&context).await {
        // Frees the set-aside connection; the give-back goes over the client's own.
        drop(grant);
        // Boxed: a give-back is as large as a release, and rarely runs.
        if let Err(u) = Box::pin(undo()).await {
            tracing::warn!(%context, error = format_args!("{u:#}"), "giving back an unconfirmed grant failed; its lease or the give-back latch ends it");
        }
        return Err(e);
    }
    Ok(())
}

/// Where a waiter hears of its chances: the wake channel and how it wakes, and the grant
/// channel with the owner hand-offs there are for.
type Channels<'a> = (Option<(&'a str, Wake)>, Option<(&'a str, &'a str)>);

/// What one attempt found.
pub(crate) enum Step<T> {
    /// Got it.
    Done(T),
    /// Not yet; wait at most this long before the next attempt (e.g. the holder's PTTL), or
    /// only until the next wake-up / re-check when `None`.
    Wait(Option<Duration>),
}

/// Run `attempt` until it is done or `deadline` passes (`Ok(None)`); wake-ups come from
/// `wake`'s channel (none: poll every `recheck`). `attempt` gets the instant a grant it makes
/// counts its lease from: its own start (the first attempt's is the caller's `started`, read
/// a little before it), or — after attempts whose answer never came (a broken connection) —
/// the start of the earliest of those, since one of them may have been granted, and a later
/// attempt that finds that grant does not move every kind's TTL.
/// `recheck` (asked for when a wait begins, as the channels are) bounds every nap (liveness
/// heartbeats, lost messages). With a grant channel
/// (`handoff`: channel, owner) a waiter also takes hand-offs announced there, through
/// `handed_off`, without an attempt of its own. From the first attempt
/// that finds it taken with the deadline ahead, the loop sets `waited_from` to then, calls
/// `on_wait` and counts itself in the `distlock_waiting` gauge of `kind` while it waits (an
/// unreachable server is not contention).
async fn wait_loop<'c, T, F, Fut, H, HFut>(
    client: &Client,
    channels: impl FnOnce() -> Channels<'c>,
    (started, deadline): (Instant, Instant),
    recheck: impl FnOnce() -> Duration,
    (kind, waited_from, on_wait): (&'static str, &mut Option<Instant>, &(dyn Fn() + Sync)),
    mut attempt: F,
    handed_off: H,
) -> Result<Option<T>>
where
    F: FnMut(Instant) -> Fut,
    Fut: Future<Output = Result<Step<T>>>,
    H: FnMut(HandedOff) -> HFut,
    HFut: Future<Output = Result<Step<T>>>,
{
    // The first attempt counts its lease from the caller's start (no later than its own).
    // Its future is the only one in the caller's: the wait, rarely taken, is boxed, so that
    // an uncontended acquire moves and polls a small future.
    let mut wait = Waiting {
        since: Some(started),
        unreachable: None,
        backoff: MIN_BACKOFF,
        waiting: None,
    };
    match attempt(started).await {
        Ok(Step::Done(v)) => return Ok(Some(v)),
        Ok(Step::Wait(_)) => {
            wait.since = None;
            if Instant::now() < deadline {
                wait.contended(kind, waited_from, on_wait);
            }
        }
        Err(e) if rides_out(&e) => {
            tracing::debug!(
                error = format_args!("{e:#}"),
                "waiter: server unreachable; retrying until the deadline"
            );
            wait.unreachable = Some(e);
        }
        Err(e) => return Err(e),
    }
    if Instant::now() >= deadline {
        return wait.unreachable.map_or(Ok(None), Err);
    }
    Box::pin(wait_on(
        client,
        channels(),
        deadline,
        recheck(),
        (kind, waited_from, on_wait),
        wait,
        attempt,
        handed_off,
    ))
    .await
}

/// A wait loop's state between attempts.
struct Waiting {
    /// The instant the next attempt's grant counts its lease from: the start of the earliest
    /// attempt not answered since (see [`wait_loop`]); `None`: the next attempt's own start.
    since: Option<Instant>,
    /// The error of the latest attempt while the server is unreachable: returned if the
    /// deadline passes before it answers again.
    unreachable: Option<Error>,
    backoff: Duration,
    /// Counted as waiting (metrics) from the first attempt that found it taken: not while
    /// the server is unreachable.
    waiting: Option<metrics::Waiting>,
}

impl Waiting {
    /// An attempt found it taken: from the first such, the request counts as waiting.
    fn contended(
        &mut self,
        kind: &'static str,
        waited_from: &mut Option<Instant>,
        on_wait: &(dyn Fn() + Sync),
    ) {
        if self.waiting.is_none() {
            *waited_from = Some(Instant::now());
            self.waiting = Some(metrics::Waiting::start(kind));
            on_wait();
        }
    }
}

/// [`wait_loop`] after a first attempt that was not granted: subscribe, and attempt again on
/// every wake-up, hand-off or nap until done or `deadline`.
#[allow(clippy::too_many_arguments)]
async fn wait_on<T, F, Fut, H, HFut>(
    client: &Client,
    (wake, handoff): Channels<'_>,
    deadline: Instant,
    recheck: Duration,
    (kind, waited_from, on_wait): (&'static str, &mut Option<Instant>, &(dyn Fn() + Sync)),
    mut wait: Waiting,
    mut attempt: F,
    mut handed_off: H,
) -> Result<Option<T>>
where
    F: FnMut(Instant) -> Fut,
    Fut: Future<Output = Result<Step<T>>>,
    H: FnMut(HandedOff) -> HFut,
    HFut: Future<Output = Result<Step<T>>>,
{
    let confirm = deadline
        .saturating_duration_since(Instant::now())
        .min(client.command_timeout());
    let mut sub = wake.map(|(channel, wake)| client.hub().subscribe(channel, wake));
    // Both subscriptions go out at once; a hand-off made before the grant channel's is
    // confirmed is found by the next attempt (the waiter's own hold).
    let mut grants = handoff.map(|(channel, owner)| {
        let sub = client.hub().subscribe(channel, Wake::Grant);
        let watch = sub.expect_grant(owner);
        (sub, watch)
    });
    if let Some(sub) = sub.as_mut() {
        sub.ready(confirm).await;
    }
    if let Some((sub, _)) = grants.as_mut() {
        sub.ready(confirm).await;
    }
    let watch = grants.as_ref().map(|(_, w)| w);
    loop {
        let notified = sub.as_ref().map(|s| s.channel().notify.notified());
        tokio::pin!(notified);
        if let Some(n) = notified.as_mut().as_pin_mut() {
            n.enable();
        }
        // A client shut down meanwhile makes no new grants, not even to its own waiters.
        client.check_open()?;
        // A hand-off announced before this attempt started was made before it runs: if it is
        // still this waiter's, the attempt finds it and answers it; if not, the attempt says
        // so, and a second confirmation would only cost a round trip.
        if let Some(w) = watch {
            let _ = w.take();
        }
        let started = *wait.since.get_or_insert_with(Instant::now);
        let hint = match attempt(started).await {
            Ok(Step::Done(v)) => return Ok(Some(v)),
            Ok(Step::Wait(hint)) => {
                wait.contended(kind, waited_from, on_wait);
                wait.since = None;
                wait.unreachable = None;
                wait.backoff = MIN_BACKOFF;
                hint
            }
            Err(e) if rides_out(&e) => {
                tracing::debug!(
                    error = format_args!("{e:#}"),
                    "waiter: server unreachable; retrying until the deadline"
                );
                wait.unreachable = Some(e);
                let pause = wait.backoff;
                wait.backoff = (wait.backoff * 2).min(MAX_BACKOFF);
                Some(pause)
            }
            Err(e) => return Err(e),
        };
        let now = Instant::now();
        if now >= deadline {
            // A hand-off that arrived meanwhile is taken rather than given back.
            if let Some(handed) = watch.and_then(|w| w.take()) {
                if let Step::Done(v) = handed_off(handed).await? {
                    return Ok(Some(v));
                }
            }
            return wait.unreachable.map_or(Ok(None), Err);
        }
        let mut nap = (deadline - now).min(recheck);
        if let Some(h) = hint {
            nap = nap.min(h.max(Duration::from_millis(1)));
        }
        let denied = sub.as_ref().is_some_and(|s| s.channel().is_denied())
            || grants
                .as_ref()
                .is_some_and(|(s, _)| s.channel().is_denied());
        if denied {
            nap = nap.min(POLL_INTERVAL);
        }
        let woken = async {
            match notified.as_pin_mut() {
                Some(notified) => notified.await,
                None => std::future::pending().await,
            }
        };
        let handed = async {
            match watch {
                Some(w) => w.wait().await,
                None => std::future::pending().await,
            }
        };
        let got = tokio::time::timeout(nap, async {
            tokio::select! {
                () = woken => None,
                handed = handed => Some(handed),
            }
        })
        .await;
        if let Ok(Some(handed)) = got {
            if let Step::Done(v) = handed_off(handed).await? {
                return Ok(Some(v));
            }
        }
    }
}
