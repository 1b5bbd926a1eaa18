//! [`spawn_every`]: run a job every interval, once per interval across all instances.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{JobLease, JobLock};

/// Runs `job` every `interval` on this instance.
///
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
/// For a job that needs its lock (its lost signal, an extension) or reports errors, use
/// [`spawn_every_with`].
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
    spawn_every_with(lock, interval, move |_| {
        let run = job();
        async move {
            run.await;
            Ok::<(), std::convert::Infallible>(())
        }
    })
}

/// Runs `job` as [`spawn_every`], handing it the [`JobLease`] of each run's lock.
///
/// As [`spawn_every`], for a job that gets the [`JobLease`] of each run's lock (to watch
/// [`lost`](JobLease::lost) or [`extend`](JobLease::extend) it, as ShedLock's
/// `LockExtender`) and returns a `Result`: an `Err` is logged as a WARN event
/// `distlock.job_failed` (fields `job`, `error`), as a Spring scheduler logs a job's
/// exception, and the schedule goes on.
///
/// # Panics
/// As [`spawn_every`].
///
/// # Examples
/// ```no_run
/// # async fn sweep(_: &distlock::JobLease) -> Result<u32, std::io::Error> { Ok(0) }
/// # fn f(client: distlock::Client) {
/// use std::time::Duration;
/// let lock = client.job_lock("sweep").at_most_for(Duration::from_secs(50));
/// distlock::spawn_every_with(lock, Duration::from_secs(60), |lease| async move {
///     let swept = sweep(&lease).await?;
///     tracing::info!(swept, "sweep done");
///     Ok::<(), std::io::Error>(())
/// });
/// # }
/// ```
pub fn spawn_every_with<F, Fut, E>(
    lock: JobLock,
    interval: Duration,
    job: F,
) -> tokio::task::JoinHandle<()>
where
    F: FnMut(JobLease) -> Fut + Send + 'static,
    Fut: Future<Output = std::result::Result<(), E>> + Send,
    E: std::fmt::Display + Send,
{
    assert!(!interval.is_zero(), "interval must be greater than zero");
    let next = move || {
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let period = interval.as_nanos();
        let wait = period - since_epoch.as_nanos() % period;
        Some(Duration::from_nanos(wait as u64))
    };
    spawn_schedule(lock, next, job)
}

/// Runs `job` at the times of the cron `expression` read in the time zone `tz`.
///
/// Run `job` at the times of the cron `expression` read in the time zone `tz`, with `lock`
/// making each run happen once across all instances that call this with the same lock:
/// ShedLock's `@Scheduled(cron = …)` with `@SchedulerLock` (feature `cron`).
///
/// `expression` is Spring's and Quartz's format, seconds first: `sec min hour day-of-month
/// month day-of-week [year]`, with `*`, lists, ranges, steps and names (`0 0 3 * * MON-FRI`);
/// a five-field crontab line (`*/5 * * * *`) is taken with the seconds at 0. Day-of-week
/// numbers run 1-7 from Sunday here (Spring's from 0): names avoid the difference. `tz` is
/// any chrono time zone: `chrono::Utc`, `chrono::Local`, a `chrono::FixedOffset`, or a named
/// zone of the `chrono-tz` crate (daylight-saving changes as that zone has them).
///
/// Every instance fires at the same instant (by its own clock) and one wins; set
/// `at_least_for` on the lock to more than the clock difference between instances (and less
/// than the time between two runs), or an instance whose clock is late may run it again.
/// Otherwise as [`spawn_every_with`]: an `Err` of the job is a WARN event
/// `distlock.job_failed`, a shutdown lets a run in progress finish, aborting the handle
/// drops it. The schedule ends after the expression's last time (a year field in the past).
///
/// # Errors
/// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an expression that does
/// not parse (the message points at the place).
///
/// # Panics
/// Outside a tokio runtime.
///
/// # Examples
/// ```no_run
/// # fn f(client: distlock::Client) -> distlock::Result<()> {
/// use std::time::Duration;
/// let lock = client
///     .job_lock("nightly-report")
///     .at_most_for(Duration::from_secs(600))
///     .at_least_for(Duration::from_secs(30));
/// // 03:00 every weekday, Paris time.
/// let tz = chrono::FixedOffset::east_opt(3600).unwrap();
/// distlock::spawn_cron(lock, "0 0 3 * * MON-FRI", tz, |_lease| async {
///     Ok::<(), std::io::Error>(())
/// })?;
/// # Ok(()) }
/// ```
#[cfg(feature = "cron")]
#[cfg_attr(docsrs, doc(cfg(feature = "cron")))]
pub fn spawn_cron<Z, F, Fut, E>(
    lock: JobLock,
    expression: &str,
    tz: Z,
    job: F,
) -> crate::Result<tokio::task::JoinHandle<()>>
where
    Z: chrono::TimeZone + Send + 'static,
    Z::Offset: Send,
    F: FnMut(JobLease) -> Fut + Send + 'static,
    Fut: Future<Output = std::result::Result<(), E>> + Send,
    E: std::fmt::Display + Send,
{
    let schedule = parse_cron(expression)?;
    let next = move || cron_wait(&schedule, &tz, chrono::Utc::now());
    Ok(spawn_schedule(lock, next, job))
}

/// `expression` as a schedule: six or seven fields, or a five-field crontab line with the
/// seconds at 0.
#[cfg(feature = "cron")]
fn parse_cron(expression: &str) -> crate::Result<cron::Schedule> {
    use std::str::FromStr;
    let trimmed = expression.trim();
    let full = if trimmed.split_whitespace().count() == 5 {
        format!("0 {trimmed}")
    } else {
        trimmed.to_string()
    };
    cron::Schedule::from_str(&full)
        .map_err(|e| crate::error::Error::invalid(format!("cron expression {expression:?}: {e}")))
}

/// How long from `now` until the next time of `schedule` in `tz`; `None` when it has none.
#[cfg(feature = "cron")]
fn cron_wait<Z: chrono::TimeZone>(
    schedule: &cron::Schedule,
    tz: &Z,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<Duration> {
    let at = schedule.after(&now.with_timezone(tz)).next()?;
    Some(
        at.with_timezone(&chrono::Utc)
            .signed_duration_since(now)
            .to_std()
            .unwrap_or_default(),
    )
}

/// The loop under [`spawn_every_with`] and [`spawn_cron`]: wait `next()` (`None`: the
/// schedule is over), run `job` under `lock`, again.
fn spawn_schedule<N, F, Fut, E>(
    lock: JobLock,
    mut next: N,
    mut job: F,
) -> tokio::task::JoinHandle<()>
where
    N: FnMut() -> Option<Duration> + Send + 'static,
    F: FnMut(JobLease) -> Fut + Send + 'static,
    Fut: Future<Output = std::result::Result<(), E>> + Send,
    E: std::fmt::Display + Send,
{
    let (mut closing, running) = lock.client.inner.holds.scheduled();
    tokio::spawn(crate::holds::IN_SCHEDULED_JOB.scope((), async move {
        let _running = running;
        loop {
            let Some(wait) = next() else {
                tracing::debug!(job = %lock.name, "the schedule has no more runs");
                return;
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = closing.wait_for(|c| *c) => return,
            }
            // A run in progress finishes (and releases its lock) even if shutdown begins.
            match lock.run_with(&mut job).await {
                Ok(Some(Ok(()))) => tracing::debug!(job = %lock.name, "ran"),
                Ok(Some(Err(e))) => tracing::warn!(
                    name: "distlock.job_failed",
                    job = %lock.name,
                    error = %e,
                    "scheduled job failed"
                ),
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

#[cfg(all(test, feature = "cron"))]
mod tests {
    use super::{cron_wait, parse_cron};
    use std::time::Duration;

    #[test]
    fn cron_times_are_read_in_the_time_zone_given() {
        use chrono::TimeZone;
        let noon = parse_cron("0 0 12 * * *").unwrap();
        let now = chrono::Utc.with_ymd_and_hms(2026, 11, 27, 9, 0, 0).unwrap();
        // Noon at UTC+2 is 10:00 UTC: an hour from 09:00 UTC.
        let plus2 = chrono::FixedOffset::east_opt(2 * 3600).unwrap();
        assert_eq!(
            cron_wait(&noon, &plus2, now),
            Some(Duration::from_secs(3600))
        );
        assert_eq!(
            cron_wait(&noon, &chrono::Utc, now),
            Some(Duration::from_secs(3 * 3600))
        );
        // A five-field crontab line: the seconds at 0.
        let every5 = parse_cron("*/5 * * * *").unwrap();
        assert_eq!(
            cron_wait(&every5, &chrono::Utc, now),
            Some(Duration::from_secs(300))
        );
        let over = parse_cron("0 0 0 1 1 * 2020").unwrap();
        assert_eq!(cron_wait(&over, &chrono::Utc, now), None);
        let e = parse_cron("0 0 25 * * *").unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("\"0 0 25 * * *\""), "{e}");
    }
}
