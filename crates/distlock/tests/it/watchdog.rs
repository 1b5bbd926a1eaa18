use std::time::Duration;

use crate::util::*;
use distlock::{Lease, Release};

/// A holder that works for 3× the watchdog lease keeps the lock; after release no renewal
/// brings the key back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_keeps_a_slow_holder_and_stops_after_release() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(1500);
    let client = client_with_watchdog(&server, lease).await;
    let other = client_for(&server).await;
    let guard = client.lock("slow").acquire().await.unwrap();
    assert_eq!(guard.lease(), lease);
    let mut min_pttl = i64::MAX;
    let start = tokio::time::Instant::now();
    while start.elapsed() < lease * 3 {
        let pttl: i64 = cmd(&server, &["PTTL", "slow"]);
        assert!(
            pttl > 0,
            "lease ran out while the holder lived (pttl {pttl})"
        );
        min_pttl = min_pttl.min(pttl);
        assert!(other.lock("slow").try_acquire().await.unwrap().is_none());
        // The scenario: the holder works on, checked every 50 ms.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Renewed every lease/3 = 500 ms, so the TTL stays near 2/3 of the lease (1,000 ms);
    // above a third of it, a renewal may run half a period late on a loaded machine.
    assert!(min_pttl > 500, "min pttl {min_pttl}");
    assert!(guard.valid_until() > std::time::Instant::now());
    assert!(!guard.is_lost());
    guard.release().await.unwrap();
    assert_eq!(client.watchdog_locks(), 0);
    // Observation window: a renewal still scheduled would run within one lease.
    tokio::time::sleep(lease).await;
    let exists: bool = cmd(&server, &["EXISTS", "slow"]);
    assert!(!exists, "a renewal recreated or kept the key after release");
}

/// The watchdog renews many locks in one script call per batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_renews_many_locks_in_batches() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(900);
    let client = client_with_watchdog(&server, lease).await;
    let mut guards = Vec::new();
    for i in 0..1200 {
        guards.push(client.lock(format!("many:{i}")).acquire().await.unwrap());
    }
    let before: String = cmd(&server, &["INFO", "commandstats"]);
    let evalsha_calls = |info: &str| -> u64 {
        info.lines()
            .find(|l| l.starts_with("cmdstat_evalsha:"))
            .and_then(|l| l.split("calls=").nth(1))
            .and_then(|v| v.split(',').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    // The scenario: two lease periods of renewals, counted.
    tokio::time::sleep(lease * 2).await;
    let after: String = cmd(&server, &["INFO", "commandstats"]);
    let calls = evalsha_calls(&after) - evalsha_calls(&before);
    // 2 lease periods = ~6 renewal rounds × 3 batches of ≤ 500.
    assert!(
        calls > 0 && calls <= 30,
        "{calls} renewal calls for 1200 locks"
    );
    for i in [0, 599, 1199] {
        let pttl: i64 = cmd(&server, &["PTTL", &format!("many:{i}")]);
        assert!(pttl > 0);
    }
    drop(guards);
}

/// A key of another type in a watchdog batch does not stop the renewal of the batch's other
/// locks (it used to abort the whole renewal script): the victim is reported lost, the rest
/// are renewed.
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
    let deleted: i64 = cmd(&server, &["DEL", "batch:victim"]);
    assert_eq!(deleted, 1);
    let _: () = cmd(&server, &["SET", "batch:victim", "someone else's string"]);
    tokio::time::timeout(Duration::from_secs(2), victim.lost())
        .await
        .expect("the victim's loss is reported");
    // The scenario: two more lease periods, which only renewals survive.
    tokio::time::sleep(lease * 2).await;
    for (i, g) in keep.iter().enumerate() {
        assert!(!g.is_lost(), "lock {i} was lost");
        let pttl: i64 = cmd(&server, &["PTTL", &format!("batch:{i}")]);
        assert!(pttl > 0, "lock {i} was not renewed");
    }
    let _ = victim.forget();
}
