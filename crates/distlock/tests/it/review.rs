//! Regressions for defects found in review: each test failed before its fix.

use std::time::Duration;

use distlock::ErrorKind;

use crate::util::*;

/// `acquire_as` on a fair (or read-write) lock used to hand out a second guard for the same
/// single hold; it is refused now (re-entry goes through the guard).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_as_is_refused_for_fair_and_rw_locks() {
    let (server, client) = setup().await;
    let g = client.fair_lock("fair-as").acquire().await.unwrap();
    let err = g.lock().acquire_as(g.owner()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    // A read guard has no `lock()` (nor `upgrade()`); only its untyped inner guard leads to
    // the read-side lock value, and that still refuses.
    let r = client.rw_lock("rw-as").read().await.unwrap().into_inner();
    assert_eq!(
        r.lock().acquire_as(r.owner()).await.unwrap_err().kind(),
        ErrorKind::InvalidInput
    );
    // Re-entry through the guard still counts holds.
    let inner = g.reenter().await.unwrap();
    assert_eq!(inner.hold_count(), 2);
    let n: u64 = cmd(&server, &["HGET", "fair-as", g.owner().as_str()]);
    assert_eq!(n, 2);
    inner.release().await.unwrap();
    g.release().await.unwrap();
    r.release().await.unwrap();
}

/// Extending to a shorter lease used to leave the local deadline at the old, later value,
/// so `lost()` fired ~30 s late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extending_to_a_shorter_lease_moves_the_deadline_back() {
    let (_server, client) = setup().await;
    let g = client
        .lock("shorten")
        .lease(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    g.extend(Duration::from_millis(300)).await.unwrap();
    assert!(g.valid_until() < std::time::Instant::now() + Duration::from_millis(300));
    tokio::time::timeout(Duration::from_secs(1), g.lost())
        .await
        .expect("lost() at the end of the shortened lease");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(client
        .lock("shorten")
        .try_acquire()
        .await
        .unwrap()
        .is_some());
    let _ = g.forget();
}

/// A key of another type in a watchdog batch used to abort the whole renewal script, so the
/// other locks of the batch stopped being renewed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_type_key_does_not_stop_the_rest_of_a_watchdog_batch() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(900);
    let client = client_with_watchdog(&server, lease).await;
    let mut keep = Vec::new();
    for i in 0..5 {
        keep.push(client.lock(format!("batch:{i}")).acquire().await.unwrap());
    }
    let victim = client.lock("batch:victim").acquire().await.unwrap();
    let _: i64 = cmd(&server, &["DEL", "batch:victim"]);
    let _: () = cmd(&server, &["SET", "batch:victim", "someone else's string"]);
    tokio::time::timeout(Duration::from_secs(2), victim.lost())
        .await
        .expect("the victim's loss is reported");
    tokio::time::sleep(lease * 2).await;
    for (i, g) in keep.iter().enumerate() {
        assert!(!g.is_lost(), "lock {i} was lost");
        let pttl: i64 = cmd(&server, &["PTTL", &format!("batch:{i}")]);
        assert!(pttl > 0, "lock {i} was not renewed");
    }
    let _ = victim.forget();
}

/// A resent job-lock acquire used to answer "held by another instance" to itself, so the job
/// was skipped everywhere until at_most_for passed.
#[test]
fn a_resent_job_acquire_recognises_its_own_grant() {
    let server = RedisServer::start();
    let src = distlock::SCRIPT_SOURCES
        .iter()
        .find(|(f, _)| *f == "job_acquire.lua")
        .unwrap()
        .1;
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
