//! Job locks (ShedLock's model) on a real server, including ShedLock's provider test cases.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use distlock::{holds_job_lock, spawn_every, ErrorKind, NotHeldReason};

use crate::util::*;
use distlock::Lease;

/// A job lock's value names its client (`ADDED:<time>@<host>:<client-id>`), so one client's
/// grants of one job lock must never write the same value twice: a stale guard's release
/// compares the value and would delete a newer grant that wrote the same. Forty grants in a
/// row (several per millisecond) write forty values, each naming the client, with times
/// that increase.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_clients_job_values_never_repeat() {
    let (_server, client) = setup().await;
    let lock = client
        .job_lock("burst")
        .at_most_for(Duration::from_secs(10));
    let mut values = Vec::new();
    for _ in 0..40 {
        let guard = lock.try_acquire().await.unwrap().expect("free");
        values.push(guard.value().to_string());
        guard.release().await.unwrap();
    }
    let id = client.id().to_string();
    for v in &values {
        let holder = distlock::JobHolder::parse(v, None).expect("a ShedLock value");
        assert_eq!(holder.id.as_deref(), Some(id.as_str()), "{v}");
    }
    let mut distinct = values.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), values.len(), "a value repeated: {values:?}");
    assert_eq!(distinct, values, "value times go back: {values:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_instance_is_skipped_while_the_first_runs() {
    let (server, client) = setup().await;
    let other = client_for(&server).await;
    let lock = client
        .job_lock("report")
        .at_most_for(Duration::from_secs(10));
    let other_lock = other
        .job_lock("report")
        .at_most_for(Duration::from_secs(10));
    let ran = lock
        .run(async {
            let skipped = other_lock.run(async { "second" }).await.unwrap();
            assert_eq!(skipped, None);
            "first"
        })
        .await
        .unwrap();
    assert_eq!(ran, Some("first"));
    // Released after the run: the next run goes through.
    assert_eq!(other_lock.run(async { 2 }).await.unwrap(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_expires_after_at_most_for() {
    let (server, client) = setup().await;
    let lock = client
        .job_lock("crashy")
        .at_most_for(Duration::from_millis(300));
    let guard = lock.try_acquire().await.unwrap().expect("free");
    let pttl: i64 = cmd(&server, &["PTTL", "job-lock:default:crashy"]);
    assert!(pttl > 0 && pttl <= 300);
    assert!(lock.try_acquire().await.unwrap().is_none());
    // The scenario: the holder never releases, at_most_for (300 ms) runs out.
    tokio::time::sleep(Duration::from_millis(350)).await;
    let next = lock
        .try_acquire()
        .await
        .unwrap()
        .expect("expired after at_most_for");
    // The expired guard's release finds another value and leaves it.
    let err = guard.release().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld, "{err}");
    assert_eq!(err.not_held_reason(), Some(NotHeldReason::HeldByOther));
    let value: String = cmd(&server, &["GET", "job-lock:default:crashy"]);
    assert_eq!(
        value,
        next.value(),
        "the expired guard touched the next lock"
    );
    next.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerun_right_after_finish() {
    let (_server, client) = setup().await;
    let lock = client.job_lock("again").at_most_for(Duration::from_secs(5));
    for i in 0..5 {
        assert_eq!(lock.run(async { i }).await.unwrap(), Some(i));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_least_for_keeps_the_lock_after_a_short_job_then_frees_it() {
    let (server, client) = setup().await;
    let lock = client
        .job_lock("min-spacing")
        .at_most_for(Duration::from_secs(10))
        .at_least_for(Duration::from_millis(600));
    let start = tokio::time::Instant::now();
    assert_eq!(lock.run(async { 1 }).await.unwrap(), Some(1));
    // Still locked: the TTL was shortened to what remains of at_least_for.
    let pttl: i64 = cmd(&server, &["PTTL", "job-lock:default:min-spacing"]);
    assert!(pttl > 0 && pttl <= 600, "pttl {pttl}");
    assert_eq!(lock.run(async { 2 }).await.unwrap(), None);
    // The scenario: wait out the rest of at_least_for.
    tokio::time::sleep(Duration::from_millis(650).saturating_sub(start.elapsed())).await;
    assert_eq!(lock.run(async { 3 }).await.unwrap(), Some(3));
}

/// ShedLock's fuzz test: 8 tasks × 100 increments, each increment a job run that skips when
/// another task holds the lock; the total is exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzz_8_tasks_100_increments() {
    let (server, client) = setup().await;
    let url = server.url();
    let mut tasks = Vec::new();
    let skipped = Arc::new(AtomicU64::new(0));
    for _ in 0..8 {
        let lock = client.job_lock("fuzz").at_most_for(Duration::from_secs(5));
        let url = url.clone();
        let skipped = skipped.clone();
        tasks.push(tokio::spawn(async move {
            let con = data_connection(&url).await;
            let mut done = 0;
            while done < 100 {
                let mut c = con.clone();
                let ran = lock
                    .run(async move { unguarded_increment(&mut c, "fuzz-counter").await })
                    .await
                    .unwrap();
                if ran.is_some() {
                    done += 1;
                } else {
                    skipped.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let total: u64 = cmd(&server, &["GET", "fuzz-counter"]);
    assert_eq!(total, 800);
    assert!(
        skipped.load(Ordering::Relaxed) > 0,
        "no contention happened"
    );
}

/// ShedLock's unsafe unlock: the first instance's job outruns at_most_for, a second instance
/// takes the lock, the first finishes. ShedLock's DEL would delete the second's lock; here the second's
/// lock is untouched and the first gets NotHeld.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overrun_never_deletes_the_next_holders_lock() {
    let (server, client) = setup().await;
    let second_client = client_for(&server).await;
    let first = client
        .job_lock("overrun")
        .at_most_for(Duration::from_millis(200));
    let second = second_client
        .job_lock("overrun")
        .at_most_for(Duration::from_secs(30));
    let (tx, rx) = tokio::sync::oneshot::channel();
    let first_run = tokio::spawn(async move {
        first
            .run(async {
                // Outrun at_most_for; the second instance takes over meanwhile.
                rx.await.unwrap();
            })
            .await
    });
    let key = "job-lock:default:overrun";
    assert!(
        eventually(Duration::from_secs(2), || cmd::<bool>(
            &server,
            &["EXISTS", key]
        ))
        .await,
        "the first instance did not take the lock"
    );
    let first_value: String = cmd(&server, &["GET", key]);
    // The first instance's 200 ms at_most_for runs out while its job still runs.
    let second_guard = second
        .try_acquire_for(Duration::from_secs(2))
        .await
        .unwrap()
        .expect("first lock expired");
    let value_before: String = cmd(&server, &["GET", key]);
    assert_eq!(value_before, second_guard.value());
    assert_ne!(value_before, first_value);
    tx.send(()).unwrap();
    let err = first_run.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld);
    assert_eq!(err.not_held_reason(), Some(NotHeldReason::HeldByOther));
    let value_after: String = cmd(&server, &["GET", "job-lock:default:overrun"]);
    assert_eq!(value_before, value_after);
    let pttl: i64 = cmd(&server, &["PTTL", "job-lock:default:overrun"]);
    assert!(pttl > 25_000, "the second holder's TTL was touched: {pttl}");
    second_guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_keeps_a_long_job_locked() {
    let (server, client) = setup().await;
    let at_most = Duration::from_millis(400);
    let lock = client.job_lock("long").at_most_for(at_most).keep_alive();
    // Another instance probes (the same client would count as a nested run).
    let other = client_for(&server).await;
    let probe = other.job_lock("long").at_most_for(at_most);
    let ran = lock
        .run(async {
            let start = tokio::time::Instant::now();
            while start.elapsed() < at_most * 3 {
                let pttl: i64 = cmd(&server, &["PTTL", "job-lock:default:long"]);
                assert!(pttl > 0, "lock expired during the job");
                assert_eq!(probe.run(async {}).await.unwrap(), None);
                // The scenario: the job works on, checked every 50 ms.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .unwrap();
    assert_eq!(ran, Some(()));
    let exists: bool = cmd(&server, &["EXISTS", "job-lock:default:long"]);
    assert!(!exists);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_and_value_match_shedlocks_formats() {
    let (server, client) = setup().await;
    let lock = client
        .job_lock("hello-world")
        .environment("test")
        .at_most_for(Duration::from_secs(30));
    assert_eq!(lock.key(), "job-lock:test:hello-world");
    let guard = lock.try_acquire().await.unwrap().unwrap();
    let value: String = cmd(&server, &["GET", "job-lock:test:hello-world"]);
    assert_eq!(value, guard.value());
    // ADDED:<ISO-8601 UTC with millis>@<hostname>:<uuid>
    let rest = value.strip_prefix("ADDED:").expect("ADDED: prefix");
    let (time, who) = rest.split_once('@').expect("@");
    assert_eq!(time.len(), "2021-05-12T13:31:45.006Z".len(), "{time}");
    assert!(time.ends_with('Z') && time.as_bytes()[10] == b'T', "{time}");
    let (host, id) = who.rsplit_once(':').unwrap();
    assert_eq!(host, gethostname_str());
    assert_eq!(id.len(), 36);
    let holder = lock.status().await.unwrap().unwrap();
    assert_eq!(holder.host, host);
    assert_eq!(holder.locked_at, time);
    guard.release().await.unwrap();
    assert_eq!(lock.status().await.unwrap(), None);
}

fn gethostname_str() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_job_inputs_are_refused() {
    let (server, client) = setup().await;
    let ok = Duration::from_secs(10);
    let cases = [
        ("empty name", client.job_lock("").at_most_for(ok)),
        ("no at_most_for", client.job_lock("j")),
        (
            "zero at_most_for",
            client.job_lock("j").at_most_for(Duration::ZERO),
        ),
        (
            "at_least_for > at_most_for",
            client
                .job_lock("j")
                .at_most_for(ok)
                .at_least_for(Duration::from_secs(11)),
        ),
        (
            "empty environment",
            client.job_lock("j").environment("").at_most_for(ok),
        ),
    ];
    for (what, lock) in cases {
        let err = lock.try_acquire().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}: {err}");
        let err = lock
            .try_acquire_for(Duration::from_secs(1))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}: {err}");
        let err = lock.acquire().await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}: {err}");
        let err = lock.run(async {}).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}");
    }
    assert!(keys(&server).is_empty());
    let _: () = cmd(&server, &["HSET", "job-lock:default:hashy", "f", "v"]);
    let err = client
        .job_lock("hashy")
        .at_most_for(ok)
        .try_acquire()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::WrongType, "{err}");
    let fields: Vec<String> = cmd(&server, &["HKEYS", "job-lock:default:hashy"]);
    assert_eq!(fields, vec!["f".to_string()]);
}

/// `try_acquire_for` polls (every 100 ms) until the holder releases or the wait ends;
/// `acquire` ends with `NotAcquired` after the client's default wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn try_acquire_for_and_acquire_poll_within_the_wait() {
    let server = RedisServer::start();
    let client = distlock::Client::builder()
        .url(server.url())
        .default_wait(Duration::from_millis(400))
        .build()
        .await
        .unwrap();
    let other = client_for(&server).await;
    let lock = client.job_lock("poll").at_most_for(Duration::from_secs(10));
    let held = other
        .job_lock("poll")
        .at_most_for(Duration::from_secs(10))
        .try_acquire()
        .await
        .unwrap()
        .expect("free");

    let before = script_calls(&server);
    assert!(lock
        .try_acquire_for(Duration::ZERO)
        .await
        .unwrap()
        .is_none());
    assert_eq!(script_calls(&server) - before, 1, "zero wait: one attempt");

    let start = tokio::time::Instant::now();
    assert!(lock
        .try_acquire_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(1),
        "took {took:?}"
    );

    let start = tokio::time::Instant::now();
    let err = lock.acquire().await.unwrap_err();
    let took = start.elapsed();
    assert_eq!(err.kind(), ErrorKind::NotAcquired, "{err}");
    assert!(err.to_string().contains("poll"), "{err}");
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(1),
        "took {took:?}"
    );

    // Released while a waiter polls: it gets the lock within about one poll interval.
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.try_acquire_for(Duration::from_secs(5)).await })
    };
    // The scenario: the waiter polls, and fails, a couple of times first.
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(!waiter.is_finished(), "the waiter got a held lock");
    let released = tokio::time::Instant::now();
    held.release().await.unwrap();
    let g = waiter
        .await
        .unwrap()
        .unwrap()
        .expect("acquired after the release");
    // About one poll interval (100 ms); a second of slack for a loaded machine.
    assert!(
        released.elapsed() < Duration::from_secs(1),
        "{:?} after the release",
        released.elapsed()
    );
    let value: String = cmd(&server, &["GET", "job-lock:default:poll"]);
    assert_eq!(value, g.value());
    g.release().await.unwrap();

    // A second acquire after the release goes through at once: one attempt, ShedLock's own
    // `SET NX PX` (a fresh value needs no script).
    let (scripts, sets) = (script_calls(&server), command_calls(&server, "set"));
    let g = lock.acquire().await.unwrap();
    assert_eq!(
        (
            script_calls(&server) - scripts,
            command_calls(&server, "set") - sets
        ),
        (0, 1),
        "acquired at the first attempt"
    );
    g.release().await.unwrap();

    assert_eq!(
        lock.try_acquire_for(Duration::MAX)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidInput
    );
}

/// ShedLock's two-value `extendActiveLock(lockAtMostFor, lockAtLeastFor)`: the TTL becomes
/// `at_most_for` from now, and the release keeps the lock until `at_least_for` from the
/// extension has passed (here longer than the `at_least_for` it was taken with). An
/// `at_least_for` over `at_most_for` is refused and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_active_sets_at_most_and_at_least_from_now() {
    let (server, client) = setup().await;
    let key = "job-lock:default:ext-active";
    let lock = client
        .job_lock("ext-active")
        .at_most_for(Duration::from_secs(10))
        .at_least_for(Duration::from_millis(100));
    let ran = lock
        .run_with(|lease| async move {
            lease
                .extend_active(Duration::from_secs(60), Duration::from_secs(3))
                .await
                .unwrap();
            let refused = lease
                .extend_active(Duration::from_secs(1), Duration::from_secs(2))
                .await
                .unwrap_err();
            assert_eq!(refused.kind(), ErrorKind::InvalidInput, "{refused}");
        })
        .await
        .unwrap();
    assert!(ran.is_some());
    let pttl: i64 = cmd(&server, &["PTTL", key]);
    assert!(
        pttl > 2_000 && pttl <= 3_000,
        "kept for the extension's at_least_for after the run: PTTL {pttl}"
    );
    // On the guard too, with at_least_for zero: the release deletes the lock at once.
    let other = lock.clone().at_least_for(Duration::ZERO);
    let _: () = cmd(&server, &["DEL", key]);
    let g = other.try_acquire().await.unwrap().expect("free");
    g.extend_active(Duration::from_secs(30), Duration::ZERO)
        .await
        .unwrap();
    let pttl: i64 = cmd(&server, &["PTTL", key]);
    assert!(pttl > 29_000 && pttl <= 30_000, "PTTL {pttl}");
    g.release().await.unwrap();
    assert!(!cmd::<bool>(&server, &["EXISTS", key]));
}

/// `extend(lease)` sets the TTL to `lease` from now, shorter or longer than what was left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_sets_the_ttl_to_the_lease() {
    let (server, client) = setup().await;
    let lock = client.job_lock("ext").at_most_for(Duration::from_secs(10));
    let g = lock.try_acquire().await.unwrap().expect("free");
    g.extend(Duration::from_secs(60)).await.unwrap();
    let pttl: i64 = cmd(&server, &["PTTL", "job-lock:default:ext"]);
    assert!(pttl > 59_000 && pttl <= 60_000, "pttl {pttl}");
    g.extend(Duration::from_secs(2)).await.unwrap();
    let pttl: i64 = cmd(&server, &["PTTL", "job-lock:default:ext"]);
    assert!(pttl > 1_000 && pttl <= 2_000, "pttl {pttl}");
    assert_eq!(
        g.extend(Duration::ZERO).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    g.release().await.unwrap();
}

/// `holds_job_lock` (ShedLock's `LockAssert`, as a bool) inside and outside a run, and a
/// nested run of the same job, which runs without locking again. The former name answers the
/// same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_run_and_holds_job_lock() {
    let (_server, client) = setup().await;
    let lock = client
        .job_lock("outer")
        .at_most_for(Duration::from_secs(10));
    assert!(!holds_job_lock("outer"));
    let inner_lock = lock.clone();
    let ran = lock
        .run(async move {
            assert!(holds_job_lock("outer"));
            #[allow(deprecated)]
            let former = distlock::assert_locked("outer");
            assert!(former);
            // Same job inside itself: runs without locking again.
            inner_lock
                .run(async { holds_job_lock("outer") })
                .await
                .unwrap()
        })
        .await
        .unwrap();
    assert_eq!(ran, Some(Some(true)));
    assert!(!holds_job_lock("outer"));
}

/// The job gets its lease (ShedLock's `LockExtender`): it extends the lock, hears at once
/// that an operator force-unlocked it, and a nested run gets the outer run's lease. The run
/// then reports the release finding the lock gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_with_hands_the_job_its_lease() {
    let (server, client) = setup().await;
    let operator = client_for(&server).await;
    let client_id = client.id().to_string();
    // A long at_most_for: the watchdog looks again only after 20 s (or renews after 30 s),
    // so a lost signal within 4 s is the force unlock's notice.
    let lock = client
        .job_lock("leased")
        .at_most_for(Duration::from_secs(60));
    let inner_lock = lock.clone();
    let key = lock.key();
    // Borrowed: the server must outlive the task (the release after it).
    let server = &server;
    let ran = lock
        .run_with(|lease| async move {
            lease.extend(Duration::from_secs(60)).await.unwrap();
            let pttl: i64 = cmd(server, &["PTTL", &key]);
            assert!(pttl > 30_000, "extended: PTTL {pttl}");
            let nested = inner_lock
                .run_with(|inner| async move { inner.value().to_string() })
                .await
                .unwrap();
            assert_eq!(
                nested.as_deref(),
                Some(lease.value()),
                "the outer run's lease"
            );
            assert!(!lease.is_lost());
            // The notice comes on the holder client's own channel (its value names the
            // client), well before the watchdog's next look (a third of at_most_for).
            let channel = distlock::layout::client_notice_channel(&client_id);
            assert!(eventually(Duration::from_secs(5), || numsub(server, &channel) == 1).await);
            assert!(operator.job_lock("leased").force_unlock().await.unwrap());
            tokio::time::timeout(Duration::from_secs(4), lease.lost())
                .await
                .expect("the job heard that its lock was force-unlocked");
            assert!(lease.is_lost());
            "stopped"
        })
        .await;
    assert_eq!(ran.unwrap_err().kind(), ErrorKind::NotHeld);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_every_runs_once_per_interval_across_instances() {
    let (server, client) = setup().await;
    let other = client_for(&server).await;
    let runs = Arc::new(AtomicU64::new(0));
    let interval = Duration::from_millis(300);
    let mut handles = Vec::new();
    for c in [&client, &other] {
        let lock = c
            .job_lock("tick")
            .at_most_for(Duration::from_millis(250))
            .at_least_for(Duration::from_millis(200));
        let runs = runs.clone();
        handles.push(spawn_every(lock, interval, move || {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // The scenario: 5 intervals of both instances' schedules.
    tokio::time::sleep(interval * 5 + Duration::from_millis(50)).await;
    for h in &handles {
        h.abort();
    }
    let n = runs.load(Ordering::Relaxed);
    // One run per interval (5), not one per instance and interval (10); one either way for
    // a tick that a loaded machine runs late.
    assert!(
        (3..=7).contains(&n),
        "{n} runs in 5 intervals by 2 instances"
    );
}

/// A cron schedule (every second, Spring's six fields) on two instances runs once per tick,
/// not once per instance; a bad expression is refused before anything is spawned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_cron_runs_once_per_tick_across_instances() {
    let (server, client) = setup().await;
    let other = client_for(&server).await;
    let runs = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for c in [&client, &other] {
        let lock = c
            .job_lock("cron-tick")
            .at_most_for(Duration::from_millis(900))
            .at_least_for(Duration::from_millis(500));
        let runs = runs.clone();
        let tz = chrono::FixedOffset::east_opt(5 * 3600 + 1800).unwrap();
        handles.push(
            distlock::spawn_cron(lock, "* * * * * *", tz, move |_lease| {
                let runs = runs.clone();
                async move {
                    runs.fetch_add(1, Ordering::Relaxed);
                    Ok::<(), std::convert::Infallible>(())
                }
            })
            .unwrap(),
        );
    }
    // The scenario: 4 ticks of both instances' schedules.
    tokio::time::sleep(Duration::from_millis(4_050)).await;
    for h in &handles {
        h.abort();
    }
    let n = runs.load(Ordering::Relaxed);
    // One run per tick (4), not one per instance and tick (8); one either way for a tick
    // that a loaded machine runs late.
    assert!((2..=6).contains(&n), "{n} runs in 4 ticks by 2 instances");
    let e = distlock::spawn_cron(
        client
            .job_lock("cron-bad")
            .at_most_for(Duration::from_secs(1)),
        "61 * * * * *",
        chrono::Utc,
        |_lease| async { Ok::<(), std::convert::Infallible>(()) },
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
}

/// A schedule whose job lock cannot be taken as configured (no `at_most_for`) is refused when
/// it is started, not logged as a failed run at every tick for ever.
#[tokio::test]
async fn a_schedule_without_at_most_for_is_refused_at_the_start() {
    let (_server, client) = setup().await;
    let e = distlock::spawn_cron(
        client.job_lock("no-at-most"),
        "* * * * * *",
        chrono::Utc,
        |_lease| async { Ok::<(), std::convert::Infallible>(()) },
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput);
    assert!(
        e.to_string().contains("\"no-at-most\"") && e.to_string().contains("at_most_for"),
        "{e}"
    );
    let lock = client.job_lock("no-at-most");
    let spawned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        spawn_every(lock, Duration::from_secs(1), || async {})
    }));
    let panic = spawned.expect_err("spawn_every started a schedule that cannot run");
    let said = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(said.contains("at_most_for"), "{said}");
}

/// A resent job-lock acquire (the same value, as a retry after a lost reply sends it)
/// recognises its own grant; it used to answer "held by another instance" to itself, so the
/// job was skipped everywhere until at_most_for passed.
#[test]
fn a_resent_acquire_recognises_its_own_grant() {
    let server = RedisServer::start();
    let src = source("job_acquire.lua");
    let mut con = server.connection();
    let run = |con: &mut redis::Connection, value: &str| -> i64 {
        redis::cmd("EVAL")
            .arg(src)
            .arg(1)
            .arg("job-lock:default:nightly")
            .arg(value)
            .arg(60_000)
            .query(con)
            .unwrap()
    };
    assert_eq!(run(&mut con, "ADDED:2026-11-21T00:00:00.000Z@h:1"), 1);
    assert_eq!(
        run(&mut con, "ADDED:2026-11-21T00:00:00.000Z@h:1"),
        1,
        "resend"
    );
    assert_eq!(
        run(&mut con, "ADDED:2026-11-21T00:00:01.000Z@h2:2"),
        0,
        "another instance"
    );
}
