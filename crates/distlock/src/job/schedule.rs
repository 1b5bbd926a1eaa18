//! [`spawn_every`]: run a job every interval, once per interval across all instances.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::JobLock;

/// Run `job` every `interval` on this instance, with `lock` making it run once per interval
/// across all instances that call this with the same lock.
///
/// Ticks are aligned to multiples of `interval` since the Unix epoch (every 60 s at :00), so
/// all instances try at the same moment and one wins. Set `at_least_for` on the lock to more
/// than the clock difference between instances (and less than `interval`), or an instance
/// whose clock is late may run the job again after the winner finished. Skipped runs and
/// errors are logged; the loop goes on until the returned handle is aborted or the client
/// is shut down ([`Client::shutdown`](crate::Client::shutdown)): then a run in progress
/// finishes, releases its lock, and the loop ends (shutdown waits for it). Aborting the
/// handle drops a run in progress; its job lock is still released (in the background).
///
/// # Panics
/// Panics when `interval` is zero, or outside a tokio runtime.
pub fn spawn_every<F, Fut>(
    lock: JobLock,
    interval: Duration,
    mut job: F,
) -> tokio::task::JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    assert!(!interval.is_zero(), "interval must be greater than zero");
    let (mut closing, running) = lock.client.inner.holds.scheduled();
    tokio::spawn(crate::holds::IN_SCHEDULED_JOB.scope((), async move {
        let _running = running;
        loop {
            let since_epoch = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            let period = interval.as_nanos();
            let wait = period - since_epoch.as_nanos() % period;
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_nanos(wait as u64)) => {}
                _ = closing.wait_for(|c| *c) => return,
            }
            // A run in progress finishes (and releases its lock) even if shutdown begins.
            match lock.run(job()).await {
                Ok(Some(())) => tracing::debug!(job = %lock.name, "ran"),
                Ok(None) => {
                    tracing::debug!(job = %lock.name, "skipped: another instance holds the lock")
                }
                Err(e) => {
                    tracing::warn!(job = %lock.name, error = format_args!("{e:#}"), "scheduled run failed")
                }
            }
            if *closing.borrow() {
                return;
            }
        }
    }))
}
