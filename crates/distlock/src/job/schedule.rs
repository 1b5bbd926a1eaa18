//! [`spawn_every`]: run a job every interval, once per interval across all instances.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{JobLease, JobLock};

/// Runs `job` every `interval` on this instance.
///
/// `lock` makes it run once per interval across all instances that call this with the same
/// lock.
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
/// Panics when `interval` is zero, when `lock` cannot be taken as configured (no
/// [`at_most_for`](JobLock::at_most_for), `at_least_for` above it, an empty environment or an
/// oversized name: the message says which), or outside a tokio runtime. A schedule started
/// anyway would fail every run.
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
/// The job can watch the lease's [`lost`](JobLease::lost) signal or
/// [`extend`](JobLease::extend) it, as ShedLock's `LockExtender`. It returns a `Result`: an
/// `Err` is logged as a WARN event `distlock.job_failed` (fields `job`, `error`), as a Spring
/// scheduler logs a job's exception, and the schedule goes on.
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
    if let Err(e) = takeable(&lock) {
        panic!("{e}");
    }
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
/// `lock` makes each run happen once across all instances that call this with the same lock:
/// ShedLock's `@Scheduled(cron = …)` with `@SchedulerLock` (feature `cron`).
///
/// `expression` is read as Spring's `@Scheduled(cron = …)` reads it, seconds first: `sec min
/// hour day-of-month month day-of-week`, with `*`, `?`, lists, ranges, steps (`*/15`, `0/15`),
/// names (`0 0 3 * * MON-FRI`) and the `L`, `W` and `#` of Spring and Quartz; a seventh field,
/// when given, is the year. A five-field crontab(5) line (`*/5 * * * *`) is taken with the
/// seconds at 0, and so are `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`,
/// `@midnight` and `@hourly`.
///
/// Day-of-week numbers are Spring's and crontab(5)'s: 0 and 7 are Sunday, 1 is Monday, so
/// `1-5` is Monday to Friday. Quartz numbers the days from 1 (Sunday) to 7 (Saturday) and is
/// not followed: a Quartz line whose day of week is a number must be written with names
/// instead (Quartz's `2-6` as `MON-FRI`), which read the same in Quartz, Spring and crontab;
/// pasted with its numbers, it runs a day later than in Quartz. When both day
/// fields are restricted, a six- or seven-field line runs on the days that match both, as in
/// Spring (`0 0 0 13 * FRI`: every Friday the 13th), a five-field line on the days that match
/// either, as in crontab(5) (`0 0 13 * 5`: every 13th and every Friday).
///
/// `tz` is any chrono time zone: `chrono::Utc`, `chrono::Local`, a `chrono::FixedOffset`
/// (re-exported as [`distlock::chrono`](crate::chrono), so no `chrono` dependency of your own
/// is needed), or a named zone of the `chrono-tz` crate, with its daylight-saving changes. Across them, a line
/// with one fixed time of day (a single second, minute and hour, such as `0 30 2 * * *`) runs
/// once on each of its days, as cron(8) runs it: when that time does not exist because the
/// clock springs forward over it, at the first instant after the gap (`0 30 2 * * *` in
/// `Europe/Berlin` on the last Sunday of March runs at 03:00 CEST), and when it happens twice
/// because the clock falls back, at the first of the two. Spring's `CronExpression` skips the
/// spring-forward day instead. Other lines follow the clock: `0 */30 * * * *` has no run in the
/// hour that is skipped and runs in both passes of the hour that is repeated.
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
/// not parse (the message quotes it and says what is wrong), or a `lock` that cannot be taken
/// as configured: no [`at_most_for`](JobLock::at_most_for), `at_least_for` above it, an empty
/// environment or an oversized name (a schedule started anyway would fail every run).
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
/// // 03:00 every weekday, Paris time (`1-5` would say the same).
/// distlock::spawn_cron(lock.clone(), "0 0 3 * * MON-FRI", chrono_tz::Europe::Paris, |_lease| async {
///     Ok::<(), std::io::Error>(())
/// })?;
/// // Every five minutes in UTC, with the chrono that distlock re-exports.
/// distlock::spawn_cron(lock, "*/5 * * * *", distlock::chrono::Utc, |_lease| async {
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
    takeable(&lock)?;
    let next = move || cron_wait(&schedule, &tz, chrono::Utc::now());
    Ok(spawn_schedule(lock, next, job))
}

/// Whether `lock` can be taken as configured (a schedule started anyway would fail every
/// run); the error names the lock.
fn takeable(lock: &JobLock) -> crate::Result<()> {
    lock.check()
        .map(drop)
        .map_err(|e| crate::error::Error::invalid(format!("job lock {:?}: {e}", lock.name())))
}

/// `expression` as a schedule: Spring's six fields (or seven, with the year), a five-field
/// crontab line or a crontab `@` name with the seconds at 0; day-of-week numbers from 0
/// (Sunday) to 7 (Sunday again).
#[cfg(feature = "cron")]
fn parse_cron(expression: &str) -> crate::Result<croner::Cron> {
    use croner::parser::{CronParser, Seconds};
    let trimmed = expression.trim();
    // crontab(5)'s and Spring's `@midnight` is croner's `@daily`.
    let line = if trimmed.eq_ignore_ascii_case("@midnight") {
        "@daily"
    } else {
        trimmed
    };
    let parse = |line: &str| {
        CronParser::builder()
            .seconds(Seconds::Optional)
            // Spring: a day matches both restricted day fields; crontab(5): either of them.
            .dom_and_dow(line.split_whitespace().count() >= 6)
            // Spring's and Quartz's `0/15` (from 0, every 15).
            .sloppy_ranges(true)
            .build()
            .parse(line)
    };
    parse(line).map_err(|e| {
        let field = culprit_field(line, |probe| parse(probe).is_ok())
            .map(|(name, value, range)| format!("its {name} field {value:?} is wrong ({range}); "))
            .unwrap_or_default();
        crate::error::Error::invalid(format!("cron expression {expression:?}: {field}{e}"))
    })
}

/// The field of a cron line that makes it fail: its name, its text and what it may hold —
/// the one field whose replacement by `*` makes `parses` accept the line.
#[cfg(feature = "cron")]
fn culprit_field(
    line: &str,
    parses: impl Fn(&str) -> bool,
) -> Option<(&'static str, String, &'static str)> {
    const SPRING: [(&str, &str); 7] = [
        ("seconds", "0-59"),
        ("minutes", "0-59"),
        ("hours", "0-23"),
        ("day-of-month", "1-31, L, W, ?"),
        ("month", "1-12 or JAN-DEC"),
        ("day-of-week", "0-7 (0 and 7 are Sunday) or SUN-SAT"),
        ("year", "a year"),
    ];
    let fields: Vec<&str> = line.split_whitespace().collect();
    let names: &[(&str, &str)] = match fields.len() {
        5 => &SPRING[1..6],
        6 | 7 => &SPRING[..fields.len()],
        _ => return None,
    };
    (0..fields.len()).find_map(|i| {
        let mut probe = fields.clone();
        probe[i] = "*";
        parses(&probe.join(" ")).then(|| (names[i].0, fields[i].to_string(), names[i].1))
    })
}

/// The first time of `schedule` in `tz` after `now`; `None` when it has none.
#[cfg(feature = "cron")]
fn cron_next<Z: chrono::TimeZone>(
    schedule: &croner::Cron,
    tz: &Z,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<chrono::DateTime<chrono::Utc>> {
    // An error is a search that found no time (a year in the past, a 30th of February).
    let at = schedule
        .find_next_occurrence(&now.with_timezone(tz), false)
        .ok()?;
    Some(at.with_timezone(&chrono::Utc))
}

/// How long from `now` until the next time of `schedule` in `tz`; `None` when it has none.
#[cfg(feature = "cron")]
fn cron_wait<Z: chrono::TimeZone>(
    schedule: &croner::Cron,
    tz: &Z,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<Duration> {
    let at = cron_next(schedule, tz, now)?;
    Some(at.signed_duration_since(now).to_std().unwrap_or_default())
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
    let (mut closing, running) = lock.client.registry().scheduled();
    tokio::spawn(crate::registry::IN_SCHEDULED_JOB.scope((), async move {
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
    use super::{cron_next, cron_wait, parse_cron};
    use chrono::TimeZone;
    use chrono_tz::Europe::Berlin;
    use std::time::Duration;

    /// The first `n` times of `expression` in `tz` after `start` (RFC 3339), each found from
    /// the one before as the schedule's loop does, written `2026-03-09 Mon 03:00:00 UTC`.
    fn runs<Z>(expression: &str, tz: Z, start: &str, n: usize) -> Vec<String>
    where
        Z: TimeZone,
        Z::Offset: std::fmt::Display,
    {
        let schedule = parse_cron(expression).unwrap();
        let mut at = chrono::DateTime::parse_from_rfc3339(start)
            .unwrap()
            .with_timezone(&chrono::Utc);
        let mut out = Vec::new();
        for _ in 0..n {
            at = cron_next(&schedule, &tz, at).unwrap();
            out.push(
                at.with_timezone(&tz)
                    .format("%Y-%m-%d %a %H:%M:%S %Z")
                    .to_string(),
            );
        }
        out
    }

    #[test]
    fn cron_times_are_read_in_the_time_zone_given() {
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
        let never = parse_cron("0 0 0 30 2 *").unwrap();
        assert_eq!(cron_wait(&never, &chrono::Utc, now), None);
        let e = parse_cron("0 0 25 * * *").unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("\"0 0 25 * * *\""), "{e}");
    }

    /// The lines people paste from Spring's `@Scheduled(cron = …)` and from crontab(5): day
    /// numbers 1-5 are Monday to Friday, 0 and 7 are Sunday (Quartz would read 1-5 as Sunday
    /// to Thursday and 7 as Saturday).
    #[test]
    fn a_wrong_field_is_named_as_written() {
        for (line, field) in [
            (
                "0 0 9 * * MON-FRY",
                "its day-of-week field \"MON-FRY\" is wrong",
            ),
            ("61 * * * * *", "its seconds field \"61\" is wrong"),
            ("0 25 * * *", "its hours field \"25\" is wrong"),
            ("0 0 9 32 * *", "its day-of-month field \"32\" is wrong"),
        ] {
            let e = super::parse_cron(line).unwrap_err().to_string();
            assert!(e.contains(field), "{line}: {e}");
        }
    }

    #[test]
    fn day_of_week_numbers_are_spring_and_crontab_ones() {
        // From Friday 2026-03-06, 12:00 UTC.
        let start = "2026-03-06T12:00:00Z";
        let weekdays_at_3 = [
            "2026-03-09 Mon 03:00:00 UTC",
            "2026-03-10 Tue 03:00:00 UTC",
            "2026-03-11 Wed 03:00:00 UTC",
            "2026-03-12 Thu 03:00:00 UTC",
            "2026-03-13 Fri 03:00:00 UTC",
            "2026-03-16 Mon 03:00:00 UTC",
        ];
        assert_eq!(runs("0 0 3 * * 1-5", chrono::Utc, start, 6), weekdays_at_3);
        assert_eq!(runs("0 0 3 ? * 1-5", chrono::Utc, start, 6), weekdays_at_3);
        assert_eq!(runs("0 3 * * 1-5", chrono::Utc, start, 6), weekdays_at_3);
        assert_eq!(
            runs("0 0 9 * * MON-FRI", chrono::Utc, start, 6),
            weekdays_at_3.map(|t| t.replace("03:00", "09:00"))
        );
        let sundays_at_3 = [
            "2026-03-08 Sun 03:00:00 UTC",
            "2026-03-15 Sun 03:00:00 UTC",
            "2026-03-22 Sun 03:00:00 UTC",
        ];
        for line in [
            "0 3 * * 0",
            "0 3 * * 7",
            "0 0 3 * * 0",
            "0 0 3 * * 7",
            "0 0 3 * * SUN",
        ] {
            assert_eq!(runs(line, chrono::Utc, start, 3), sundays_at_3, "{line}");
        }
        // 5-7 is Friday to Sunday (Saturday is 6).
        assert_eq!(
            runs("0 0 3 * * 5-7", chrono::Utc, start, 4),
            [
                "2026-03-07 Sat 03:00:00 UTC",
                "2026-03-08 Sun 03:00:00 UTC",
                "2026-03-13 Fri 03:00:00 UTC",
                "2026-03-14 Sat 03:00:00 UTC",
            ]
        );
        assert!(parse_cron("0 0 3 * * 8").is_err());
    }

    #[test]
    fn crontab_names_run_at_midnight_or_on_the_hour() {
        let start = "2026-03-06T12:00:00Z";
        let midnights = [
            "2026-03-07 Sat 00:00:00 UTC",
            "2026-03-08 Sun 00:00:00 UTC",
            "2026-03-09 Mon 00:00:00 UTC",
        ];
        assert_eq!(runs("@daily", chrono::Utc, start, 3), midnights);
        assert_eq!(runs("@midnight", chrono::Utc, start, 3), midnights);
        assert_eq!(
            runs("@weekly", chrono::Utc, start, 2),
            ["2026-03-08 Sun 00:00:00 UTC", "2026-03-15 Sun 00:00:00 UTC"]
        );
        assert_eq!(
            runs("@hourly", chrono::Utc, start, 2),
            ["2026-03-06 Fri 13:00:00 UTC", "2026-03-06 Fri 14:00:00 UTC"]
        );
        assert_eq!(
            runs("@monthly", chrono::Utc, start, 1),
            ["2026-04-01 Wed 00:00:00 UTC"]
        );
        assert!(parse_cron("@reboot").is_err());
    }

    /// Both day fields restricted: Spring's six fields take the days that match both,
    /// crontab(5)'s five fields the days that match either.
    #[test]
    fn both_day_fields_as_spring_and_as_crontab() {
        assert_eq!(
            runs("0 0 0 13 * FRI", chrono::Utc, "2026-01-01T00:00:00Z", 3),
            [
                "2026-02-13 Fri 00:00:00 UTC",
                "2026-03-13 Fri 00:00:00 UTC",
                "2026-11-13 Fri 00:00:00 UTC",
            ]
        );
        assert_eq!(
            runs("0 0 13 * 5", chrono::Utc, "2026-04-08T12:00:00Z", 3),
            [
                "2026-04-10 Fri 00:00:00 UTC",
                "2026-04-13 Mon 00:00:00 UTC",
                "2026-04-17 Fri 00:00:00 UTC",
            ]
        );
    }

    /// In Europe/Berlin the clock goes from 02:00 CET to 03:00 CEST on 2026-03-29 and from
    /// 03:00 CEST back to 02:00 CET on 2026-10-25. A fixed time of day runs once each day, as
    /// cron(8) runs it: at 03:00 when 02:30 does not exist, at the first 02:30 when there are
    /// two. Other lines follow the clock.
    #[test]
    fn daylight_saving_changes_neither_skip_nor_repeat_a_daily_run() {
        assert_eq!(
            runs("0 30 2 * * *", Berlin, "2026-03-27T12:00:00Z", 3),
            [
                "2026-03-28 Sat 02:30:00 CET",
                "2026-03-29 Sun 03:00:00 CEST",
                "2026-03-30 Mon 02:30:00 CEST",
            ]
        );
        assert_eq!(
            runs("30 2 * * *", Berlin, "2026-03-27T12:00:00Z", 3),
            [
                "2026-03-28 Sat 02:30:00 CET",
                "2026-03-29 Sun 03:00:00 CEST",
                "2026-03-30 Mon 02:30:00 CEST",
            ]
        );
        assert_eq!(
            runs("0 30 2 * * *", Berlin, "2026-10-24T12:00:00Z", 2),
            [
                "2026-10-25 Sun 02:30:00 CEST",
                "2026-10-26 Mon 02:30:00 CET"
            ]
        );
        // A time outside the changes keeps its wall-clock time.
        assert_eq!(
            runs("0 0 9 * * *", Berlin, "2026-03-28T12:00:00Z", 2),
            [
                "2026-03-29 Sun 09:00:00 CEST",
                "2026-03-30 Mon 09:00:00 CEST"
            ]
        );
        // Every half hour: none in the skipped hour, both passes of the repeated one.
        assert_eq!(
            runs("0 */30 * * * *", Berlin, "2026-03-29T00:45:00Z", 2),
            [
                "2026-03-29 Sun 03:00:00 CEST",
                "2026-03-29 Sun 03:30:00 CEST"
            ]
        );
        assert_eq!(
            runs("0 */30 * * * *", Berlin, "2026-10-24T23:45:00Z", 5),
            [
                "2026-10-25 Sun 02:00:00 CEST",
                "2026-10-25 Sun 02:30:00 CEST",
                "2026-10-25 Sun 02:00:00 CET",
                "2026-10-25 Sun 02:30:00 CET",
                "2026-10-25 Sun 03:00:00 CET",
            ]
        );
        // The wait to the spring-forward run is the real time to it: from 01:00 CET
        // (00:00 UTC) to 03:00 CEST (01:00 UTC), one hour.
        let nightly = parse_cron("0 30 2 * * *").unwrap();
        let now = chrono::Utc.with_ymd_and_hms(2026, 3, 29, 0, 0, 0).unwrap();
        assert_eq!(
            cron_wait(&nightly, &Berlin, now),
            Some(Duration::from_secs(3600))
        );
    }
}
