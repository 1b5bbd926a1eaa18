//! The one wait loop every primitive uses (seed 000's `tryLock` loop, generalised).
//!
//! 1. Attempt. Done → return.
//! 2. Subscribe to the wake channel and wait for the server's confirmation.
//! 3. Loop: register for the next wake-up, attempt, and if not done wait for a wake-up or a
//!    nap bounded by the attempt's hint (the holder's PTTL), a re-check cap and the deadline.
//!
//! Registering (`Notify::enable`) before each attempt means a wake-up published between the
//! attempt's reply and the wait is not missed; the nap bound means a lost message costs at
//! most one hint (or one cap), never a hang.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::Client;
use crate::conn::pubsub::Wake;
use crate::error::Result;

/// What one attempt found.
pub(crate) enum Step<T> {
    /// Got it.
    Done(T),
    /// Not yet; wait at most this long before the next attempt (e.g. the holder's PTTL), or
    /// only until the next wake-up / re-check when `None`.
    Wait(Option<Duration>),
}

/// Run `attempt` until it is done or `deadline` passes (`Ok(None)`); wake-ups come from
/// `channel`. `recheck` bounds every nap (liveness heartbeats, lost messages).
pub(crate) async fn wait_loop<T, F, Fut>(
    client: &Client,
    channel: &str,
    wake: Wake,
    deadline: Instant,
    recheck: Duration,
    mut attempt: F,
) -> Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Step<T>>>,
{
    if let Step::Done(v) = attempt().await? {
        return Ok(Some(v));
    }
    if Instant::now() >= deadline {
        return Ok(None);
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
        let hint = match attempt().await? {
            Step::Done(v) => return Ok(Some(v)),
            Step::Wait(hint) => hint,
        };
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        let mut nap = (deadline - now).min(recheck);
        if let Some(h) = hint {
            nap = nap.min(h.max(Duration::from_millis(1)));
        }
        let _ = tokio::time::timeout(nap, notified).await;
    }
}
