//! The blocking API (`distlock::blocking`), from plain `#[test]` functions and thread
//! pools: the watchdog keeps renewing while the calling thread does synchronous work, guards
//! release synchronously when dropped, and every primitive works through it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use distlock::blocking::{self, Client};
use distlock::ErrorKind;

use distlock_test::testing::wait_until;

use crate::util::*;

fn client_on(server: &RedisServer, watchdog: Duration) -> Client {
    Client::builder()
        .url(server.url())
        .watchdog_lease(watchdog)
        .build()
        .expect("connect to test server")
}

/// Synchronous work longer than several leases: the client's runtime renews in the
/// background, so the lock is still held (on a current-thread runtime it would expire).
#[test]
fn watchdog_renews_while_the_thread_blocks() {
    let server = RedisServer::start();
    let client = client_on(&server, Duration::from_millis(300));
    let other = client_on(&server, Duration::from_millis(300));
    let guard = client.lock("report").acquire().unwrap();
    thread::sleep(Duration::from_millis(1200)); // four leases, no call into distlock
    assert!(!guard.is_lost());
    assert!(guard.is_held().unwrap());
    let pttl: i64 = cmd(&server, &["PTTL", "report"]);
    assert!(pttl > 0 && pttl <= 300, "PTTL {pttl}");
    assert!(other.lock("report").try_acquire().unwrap().is_none());
    assert_eq!(client.watchdog_locks(), 1);
    guard.release().unwrap();
    assert_eq!(cmd::<i64>(&server, &["EXISTS", "report"]), 0);
    assert_eq!(client.watchdog_locks(), 0);
}

/// Dropping a guard releases before `drop` returns: the key is gone at once.
#[test]
fn dropped_guards_release_synchronously() {
    let server = RedisServer::start();
    let client = client_on(&server, Duration::from_secs(30));
    for _ in 0..20 {
        let guard = client.lock("orders").acquire().unwrap();
        assert_eq!(cmd::<i64>(&server, &["EXISTS", "orders"]), 1);
        drop(guard);
        assert_eq!(cmd::<i64>(&server, &["EXISTS", "orders"]), 0);
    }
    let sem = client.semaphore("slots");
    assert!(sem.try_set_permits(2).unwrap());
    let permit = sem.acquire_many(2).unwrap();
    assert_eq!(sem.available_permits().unwrap(), 0);
    drop(permit);
    assert_eq!(cmd::<String>(&server, &["GET", "slots"]), "2");
}

/// A shared client from a pool of threads: mutual exclusion over an unguarded
/// read-modify-write, and a semaphore that never lets more than its permits in.
#[test]
fn a_thread_pool_shares_one_client() {
    let server = RedisServer::start();
    let client = client_on(&server, Duration::from_secs(30));
    let sem = client.semaphore("pool");
    assert!(sem.try_set_permits(2).unwrap());
    let (inside, most) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let threads = 8;
    let rounds = 25;
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (client, inside, most) = (client.clone(), inside.clone(), most.clone());
            let url = server.url();
            thread::spawn(move || {
                let mut con = redis::Client::open(url).unwrap().get_connection().unwrap();
                for _ in 0..rounds {
                    let guard = client.lock("counter").acquire().unwrap();
                    let n: u64 = redis::cmd("GET")
                        .arg("n")
                        .query::<Option<u64>>(&mut con)
                        .unwrap()
                        .unwrap_or(0);
                    thread::yield_now();
                    let _: () = redis::cmd("SET")
                        .arg("n")
                        .arg(n + 1)
                        .query(&mut con)
                        .unwrap();
                    guard.release().unwrap();

                    let permit = client.semaphore("pool").acquire().unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(1));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    drop(permit);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(cmd::<u64>(&server, &["GET", "n"]), threads * rounds);
    let most = most.load(Ordering::SeqCst);
    assert!((1..=2).contains(&most), "{most} holders at once");
    assert_eq!(sem.available_permits().unwrap(), 2);
}

/// A waiting thread is woken by another thread's release (pub/sub, not the wait bound).
#[test]
fn a_waiting_thread_wakes_on_release() {
    let server = RedisServer::start();
    let client = client_on(&server, Duration::from_secs(30));
    let guard = client.lock("hand-off").acquire().unwrap();
    let waiter = {
        let client = client.clone();
        thread::spawn(move || {
            let started = Instant::now();
            let g = client
                .lock("hand-off")
                .try_acquire_for(Duration::from_secs(20))
                .unwrap();
            (g.map(|g| g.fencing_token()), started.elapsed())
        })
    };
    thread::sleep(Duration::from_millis(300));
    let first = guard.fencing_token();
    guard.release().unwrap();
    let (token, waited) = waiter.join().unwrap();
    assert!(token.expect("granted after the release") > first);
    assert!(waited < Duration::from_secs(5), "waited {waited:?}");
}

/// The hand-off settings reach the async lock: a waiting thread with `Handoff::Off` does not
/// queue; with the default it queues with the liveness given (its entry's deadline is at most
/// that far ahead), and the release hands it the lock.
#[test]
fn handoff_settings_through_the_blocking_api() {
    let server = RedisServer::start();
    let client = client_on(&server, Duration::from_secs(30));
    let lock = client.lock("settings");
    assert_eq!(lock.handoff_setting(), distlock::Handoff::Fifo);
    let off = lock.handoff(distlock::Handoff::Off);
    assert_eq!(off.handoff_setting(), distlock::Handoff::Off);
    let guard = lock.acquire().unwrap();
    let wait = |lock: blocking::Lock| {
        thread::spawn(move || {
            lock.try_acquire_for(Duration::from_secs(20))
                .unwrap()
                .map(|g| g.fencing_token())
        })
    };
    let barging = wait(off);
    thread::sleep(Duration::from_millis(300));
    assert!(!exists(&server, &distlock::layout::lock_queue("settings")));
    let queued = wait(lock.liveness_timeout(Duration::from_secs(2)));
    assert!(wait_until(Duration::from_secs(2), || exists(
        &server,
        &distlock::layout::lock_queue("settings")
    )));
    let waiters = distlock::layout::lock_waiters("settings");
    let entries: std::collections::HashMap<String, String> = cmd(&server, &["HGETALL", &waiters]);
    assert_eq!(entries.len(), 1, "{entries:?}");
    let deadline = entry_deadline(entries.values().next().unwrap().as_bytes());
    let now = server_time_ms(&server);
    assert!(
        deadline > now && deadline <= now + 2_000,
        "deadline {} ms ahead",
        deadline - now
    );
    let first = guard.fencing_token();
    guard.release().unwrap();
    let token = queued.join().unwrap().expect("handed the lock");
    assert!(token > first);
    // The barging waiter gets it after the queued one gave it back.
    let last = barging.join().unwrap().expect("granted at last");
    assert!(last > token);
}

/// Explicit leases end: `lost_timeout` reports it, `extend` and `release` say NotHeld.
#[test]
fn lost_lease_is_a_blocking_wait_and_a_check() {
    let server = RedisServer::start();
    let client = client_on(&server, Duration::from_secs(30));
    let guard = client
        .lock("short")
        .lease(Duration::from_millis(200))
        .acquire()
        .unwrap();
    assert!(!guard.lost_timeout(Duration::from_millis(20)));
    assert!(guard.lost_timeout(Duration::from_secs(5)));
    assert!(guard.is_lost());
    guard.lost(); // returns at once once lost
                  // The local deadline comes a drift before the server's TTL: wait for the key to go.
    assert!(wait_until(Duration::from_secs(5), || cmd::<i64>(
        &server,
        &["EXISTS", "short"]
    ) == 0));
    assert_eq!(
        guard.extend(Duration::from_secs(1)).unwrap_err().kind(),
        ErrorKind::NotHeld
    );
    assert_eq!(guard.release().unwrap_err().kind(), ErrorKind::NotHeld);
}

/// Every primitive through the blocking facade.
/// The blocking builder takes the app name; a grant records it, and status reads it back.
#[test]
fn app_name_and_holder_through_the_blocking_api() {
    let server = RedisServer::start();
    let client = Client::builder()
        .url(server.url())
        .app_name("blocking-app")
        .build()
        .expect("connect to test server");
    assert_eq!(client.app_name(), "blocking-app");
    assert!(
        client
            .connection_name()
            .starts_with("distlock:blocking-app:"),
        "{}",
        client.connection_name()
    );
    let g = client.lock("who-blocks").acquire().unwrap();
    let holder = client.lock("who-blocks").status().unwrap().holder;
    let holder = holder.expect("the grant recorded its holder");
    assert_eq!(holder.app, "blocking-app");
    assert_eq!(holder.owner, g.owner().as_str());
    assert_eq!(holder.pid, std::process::id());
    g.release().unwrap();
    let err = Client::builder()
        .url(server.url())
        .app_name("no spaces")
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
}

#[test]
fn every_primitive() {
    let server = RedisServer::start();
    let client = client_on(&server, Duration::from_secs(30));
    let other = client_on(&server, Duration::from_secs(30));

    // Reentrant lock: hold count, re-entry, remaining.
    let g = client.lock("re").acquire().unwrap();
    let again = g.reenter().unwrap();
    assert_eq!(again.hold_count(), 2);
    assert!(g.remaining().unwrap() > Duration::from_secs(20));
    again.release().unwrap();
    assert!(client.lock("re").is_locked().unwrap());
    g.release().unwrap();
    assert!(!client.lock("re").is_locked().unwrap());

    // Fair lock.
    let f = client.fair_lock("fair").acquire().unwrap();
    assert!(other.fair_lock("fair").try_acquire().unwrap().is_none());
    f.release().unwrap();
    other
        .fair_lock("fair")
        .try_acquire()
        .unwrap()
        .expect("free")
        .release()
        .unwrap();

    // Read-write lock: readers share, a writer waits, downgrade.
    let rw = client.rw_lock("doc");
    let r1 = rw.read().unwrap();
    let r2 = other.rw_lock("doc").read().unwrap();
    assert!(other.rw_lock("doc").try_write().unwrap().is_none());
    drop((r1, r2));
    let w = rw.write().unwrap();
    assert!(other.rw_lock("doc").try_read().unwrap().is_none());
    let r = w.downgrade().unwrap();
    w.release().unwrap();
    assert!(other.rw_lock("doc").try_write().unwrap().is_none());
    r.release().unwrap();
    other
        .rw_lock("doc")
        .try_write_for(Duration::from_secs(1))
        .unwrap()
        .expect("free")
        .release()
        .unwrap();

    // Leased semaphore: a kept-alive permit outlives its lease.
    let ls = client.leased_semaphore("conns");
    assert!(ls.try_set_permits(1).unwrap());
    let mut p = ls.lease(Duration::from_millis(300)).acquire().unwrap();
    p.keep_alive(Duration::from_millis(300)).unwrap();
    thread::sleep(Duration::from_millis(900));
    assert!(!p.is_lost());
    assert!(other
        .leased_semaphore("conns")
        .lease(Duration::from_secs(1))
        .try_acquire()
        .unwrap()
        .is_none());
    p.release().unwrap();
    assert_eq!(ls.permits().unwrap(), (1, 0)); // available, leased out

    // Count-down latch: a thread blocks in wait until the count reaches zero.
    let latch = client.count_down_latch("ready");
    assert!(latch.try_set_count(2).unwrap());
    let waiter = {
        let latch = other.count_down_latch("ready");
        thread::spawn(move || latch.wait_for(Duration::from_secs(20)).unwrap())
    };
    assert_eq!(latch.count_down().unwrap(), 1);
    assert!(!waiter.is_finished());
    assert_eq!(latch.count_down().unwrap(), 0);
    assert!(waiter.join().unwrap());

    // Job lock: a second instance skips, a nested run of the same job runs at once.
    let job = client
        .job_lock("nightly")
        .at_most_for(Duration::from_secs(60));
    let ran = job
        .run(|| {
            assert!(other
                .job_lock("nightly")
                .at_most_for(Duration::from_secs(60))
                .run(|| unreachable!())
                .unwrap()
                .is_none());
            job.run(|| 7).unwrap().expect("nested run")
        })
        .unwrap();
    assert_eq!(ran, Some(7));
    assert!(job.status().unwrap().is_none());

    // MultiLock: all or nothing.
    let blocker = other.lock("m2").acquire().unwrap();
    let multi = blocking::MultiLock::new([client.lock("m1"), client.lock("m2")]).unwrap();
    assert!(multi.try_acquire().unwrap().is_none());
    assert!(!client.lock("m1").is_locked().unwrap());
    blocker.release().unwrap();
    let held = multi.acquire().unwrap();
    assert_eq!(held.fencing_tokens().len(), 2);
    held.release().unwrap();
    assert!(matches!(blocking::MultiLock::new([]), Err(e) if e.kind() == ErrorKind::InvalidInput));
}

/// A MultiLock over two blocking clients keeps both runtimes: dropping the second client
/// does not stop its member's watchdog while the MultiLock is held.
#[test]
fn a_multilock_keeps_every_members_client_alive() {
    let (a, b) = (RedisServer::start(), RedisServer::start());
    let first = client_on(&a, Duration::from_millis(300));
    let second = client_on(&b, Duration::from_millis(300));
    let multi = blocking::MultiLock::new([first.lock("m-a"), second.lock("m-b")]).unwrap();
    drop(second);
    let held = multi.acquire().unwrap();
    thread::sleep(Duration::from_millis(1000)); // three leases of the second node's lock
    assert!(!held.is_lost());
    let pttl: i64 = cmd(&b, &["PTTL", "m-b"]);
    assert!(pttl > 0, "the second member expired: PTTL {pttl}");
    held.release().unwrap();
    assert_eq!(cmd::<i64>(&b, &["EXISTS", "m-b"]), 0);
}

/// RedLock over three independent servers, built from URLs on its own runtime.
#[test]
fn redlock_over_three_servers() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let nodes = blocking::RedLockNodes::build(
        distlock::RedLockNodes::builder_from_urls(servers.iter().map(|s| s.url()))
            .ttl(Duration::from_secs(5)),
    )
    .unwrap();
    assert_eq!(nodes.quorum(), 2);
    let redlock = nodes.lock("payments");
    assert_eq!(redlock.name(), "payments");
    let g = redlock.acquire().unwrap();
    assert_eq!(g.granted_nodes(), 3);
    assert!(redlock.try_acquire().unwrap().is_none());
    drop(g); // synchronous release on every node
    for s in &servers {
        assert_eq!(cmd::<i64>(s, &["EXISTS", "payments"]), 0);
    }
}

/// Misuse gets a typed error or a documented panic, never a silent lost lease.
#[test]
fn misuse() {
    let server = RedisServer::start();
    let err = Client::builder()
        .url(server.url())
        .worker_threads(0)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    let err = Client::connect("redis://127.0.0.1:1/").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection);
    let err = Client::builder()
        .url(server.url())
        .watchdog_lease(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);

    // From async code: a blocking call panics (tokio refuses a runtime in a runtime); a
    // guard dropped there releases in the background instead of blocking.
    let client = client_on(&server, Duration::from_secs(30));
    let guard = client.lock("async-drop").acquire().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let lock = client.lock("async-call");
    let panicked = rt.block_on(async {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| lock.try_acquire()));
        drop(guard);
        r.is_err()
    });
    assert!(panicked, "a blocking call inside a runtime must panic");
    assert!(wait_until(Duration::from_secs(5), || cmd::<i64>(
        &server,
        &["EXISTS", "async-drop"]
    ) == 0));
    drop(rt);
}

/// The `blocking_counter` example (a synchronous program, a pool of threads sharing one
/// client) run as two processes at once: 2 × 4 threads × 25 increments, none lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_example_across_processes() {
    let server = RedisServer::start();
    let url = server.url();
    run_examples(
        &example_bin("blocking_counter"),
        &[&url, "bx", "bx-counter", "4", "25"],
        2,
    )
    .await;
    assert_eq!(cmd::<u64>(&server, &["GET", "bx-counter"]), 200);
}

/// A synchronous program has the async client's settings: a password given apart (with
/// characters a URL would need encoded), a private CA instead of `#insecure`, a client built
/// from a `Config` (the file form of Redisson's, with the CA as a file) — and the fair lock's
/// guard can be forgotten, leaving the hold on the server.
#[test]
fn a_blocking_client_takes_a_password_a_private_ca_and_a_config() {
    let password = "p@ss:w/rd#1";
    let server = RedisServer::options().tls().password(password).start();
    let ca_path = server.tls_ca_cert().unwrap();
    let ca = std::fs::read(&ca_path).unwrap();
    let verified_url = format!("rediss://127.0.0.1:{}/", server.port());

    let client = Client::builder()
        .url(&verified_url)
        .password(password)
        .tls_ca_cert(ca)
        .build()
        .expect("password apart and a private CA");
    client.lock("b-pw").acquire().unwrap().release().unwrap();

    let config: distlock::Config = serde_json::from_value(serde_json::json!({
        "single": { "address": format!("127.0.0.1:{}", server.port()) },
        "tls": true,
        "password": password,
        "tls_ca_cert": ca_path,
        "key_prefix": "cfg:",
    }))
    .unwrap();
    let client = config
        .blocking_builder()
        .unwrap()
        .worker_threads(1)
        .build()
        .expect("a blocking client from a Config");
    let g = client.fair_lock("b-fair").acquire().unwrap();
    let owner = g.forget();
    assert!(!owner.as_str().is_empty());
    let mut con = redis::Client::open(format!(
        "rediss://:{}@127.0.0.1:{}/#insecure",
        "p%40ss%3Aw%2Frd%231",
        server.port()
    ))
    .unwrap()
    .get_connection()
    .unwrap();
    let holds: Option<i64> = redis::cmd("HGET")
        .arg("cfg:b-fair")
        .arg(owner.as_str())
        .query(&mut con)
        .unwrap();
    assert_eq!(holds, Some(1), "a forgotten fair guard keeps its hold");
    assert!(
        client.fair_lock("b-fair").is_locked().unwrap(),
        "still locked"
    );
}

/// `$SSL_CERT_FILE` is the default trust store of the library, as of the CLI: a TLS server
/// signed by a private CA is verified against it without `tls_ca_cert` (run in a child
/// process, whose environment alone has the variable).
#[test]
fn ssl_cert_file_is_the_default_trust_store() {
    if let Some(port) = std::env::var_os("DISTLOCK_TEST_SSL_CERT_FILE_PORT") {
        let url = format!("rediss://127.0.0.1:{}/", port.to_str().unwrap());
        let client = Client::connect(&url).expect("verified against $SSL_CERT_FILE");
        client.lock("env-ca").acquire().unwrap().release().unwrap();
        return;
    }
    let server = RedisServer::options().tls().start();
    let ca = server.tls_ca_cert().unwrap();
    let child = |ssl_cert_file: &std::path::Path| {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "blocking::ssl_cert_file_is_the_default_trust_store",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(
                "DISTLOCK_TEST_SSL_CERT_FILE_PORT",
                server.port().to_string(),
            )
            .env("SSL_CERT_FILE", ssl_cert_file)
            .output()
            .unwrap()
    };
    let out = child(&ca);
    assert!(out.status.success(), "with the CA: {out:?}");
    let other = RedisServer::options().tls().start();
    let out = child(&other.tls_ca_cert().unwrap());
    assert!(!out.status.success(), "another CA must fail: {out:?}");
    let out = child(std::path::Path::new("/nonexistent/ca.pem"));
    let stderr = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("$SSL_CERT_FILE"),
        "an unreadable file is named: {stderr}"
    );
}
