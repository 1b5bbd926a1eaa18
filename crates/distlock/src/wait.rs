//! The one wait loop every primitive uses (Redisson's `tryLock(wait, lease)` loop,
//! generalised).
//!
//! 1. Attempt. Done → return.
//! 2. Subscribe to the wake channel and wait for the server's confirmation.
//! 3. Loop: register for the next wake-up, attempt, and if not done wait for a wake-up or a
//!    nap bounded by the attempt's hint (the holder's PTTL), a re-check cap and the deadline.
//!
//! Registering (`Notify::enable`) before each attempt means a wake-up published between the
//! attempt's reply and the wait is not missed; the nap bound means a lost message costs at
//! most one hint (or one cap), never a hang.
//!
//! A waiter rides out an unreachable server (a restart, a failover, a broken connection):
//! an attempt that fails with [`ErrorKind::Connection`] is retried with backoff (50 ms
//! doubling to 1 s, cut short when the subscription reconnects) until the caller's deadline;
//! only if the deadline passes while the server is still unreachable is the error returned.
//! A waiter whose wake channel the server's ACL refuses (no `&channel` rights) polls every
//! 100 ms instead of waiting for messages.
//!
//! An attempt whose outcome is unknown ([`Error::is_outcome_unknown`]) is never retried here:
//! its caller resolves it.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::Client;
use crate::conn::pubsub::Wake;
use crate::error::{Error, ErrorKind, Result};

/// First pause after an attempt that could not reach the server; it doubles up to
/// [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(50);
/// Longest pause between attempts while the server is unreachable.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// Longest nap of a waiter whose wake channel the server's ACL refused: it polls.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Whether a waiter keeps trying after this error (until its deadline).
fn rides_out(e: &Error) -> bool {
    e.kind() == ErrorKind::Connection && !e.is_outcome_unknown()
}

/// What one attempt found.
pub(crate) enum Step<T> {
    /// Got it.
    Done(T),
    /// Not yet; wait at most this long before the next attempt (e.g. the holder's PTTL), or
    /// only until the next wake-up / re-check when `None`.
    Wait(Option<Duration>),
}

/// Run `attempt` until it is done or `deadline` passes (`Ok(None)`); wake-ups come from
/// `channel`. `attempt` gets the instant a grant it makes counts its lease from: its own
/// start, or — after attempts whose answer never came (a broken connection) — the start of
/// the earliest of those, since one of them may have been granted, and a later attempt that
/// finds that grant does not move every kind's TTL. `recheck` bounds every nap (liveness heartbeats, lost messages).
pub(crate) async fn wait_loop<T, F, Fut>(
    client: &Client,
    channel: &str,
    wake: Wake,
    deadline: Instant,
    recheck: Duration,
    mut attempt: F,
) -> Result<Option<T>>
where
    F: FnMut(Instant) -> Fut,
    Fut: Future<Output = Result<Step<T>>>,
{
    // Every attempt is passed the instant its grant's lease counts from: its own start, or
    // the start of the earliest attempt not answered since (see `since`).
    let mut since: Option<Instant> = None;
    let mut attempt = move |since: &mut Option<Instant>| {
        let started = *since.get_or_insert_with(Instant::now);
        attempt(started)
    };
    // The error of the latest attempt while the server is unreachable: returned if the
    // deadline passes before it answers again.
    let mut unreachable: Option<Error> = None;
    let mut backoff = MIN_BACKOFF;
    match attempt(&mut since).await {
        Ok(Step::Done(v)) => return Ok(Some(v)),
        Ok(Step::Wait(_)) => since = None,
        Err(e) if rides_out(&e) => {
            tracing::debug!(
                error = format_args!("{e:#}"),
                "waiter: server unreachable; retrying until the deadline"
            );
            unreachable = Some(e);
        }
        Err(e) => return Err(e),
    }
    if Instant::now() >= deadline {
        return unreachable.map_or(Ok(None), Err);
    }
    let mut sub = client.inner.hub.subscribe(channel, wake);
    let confirm = deadline
        .saturating_duration_since(Instant::now())
        .min(client.inner.command_timeout);
    sub.ready(confirm).await;
    loop {
        let notified = sub.channel().notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        // A client shut down meanwhile makes no new grants, not even to its own waiters.
        client.check_open()?;
        let hint = match attempt(&mut since).await {
            Ok(Step::Done(v)) => return Ok(Some(v)),
            Ok(Step::Wait(hint)) => {
                since = None;
                unreachable = None;
                backoff = MIN_BACKOFF;
                hint
            }
            Err(e) if rides_out(&e) => {
                tracing::debug!(
                    error = format_args!("{e:#}"),
                    "waiter: server unreachable; retrying until the deadline"
                );
                unreachable = Some(e);
                let pause = backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                Some(pause)
            }
            Err(e) => return Err(e),
        };
        let now = Instant::now();
        if now >= deadline {
            return unreachable.map_or(Ok(None), Err);
        }
        let mut nap = (deadline - now).min(recheck);
        if let Some(h) = hint {
            nap = nap.min(h.max(Duration::from_millis(1)));
        }
        if sub.channel().is_denied() {
            nap = nap.min(POLL_INTERVAL);
        }
        let _ = tokio::time::timeout(nap, notified).await;
    }
}
