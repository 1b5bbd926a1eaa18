use std::time::Duration;

use crate::util::*;
use distlock::Lease;

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
    // Script calls: FCALLs (Redis Functions) and EVALSHAs.
    let script_calls = |info: &str| -> u64 {
        info.lines()
            .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_fcall:"))
            .filter_map(|l| l.split("calls=").nth(1))
            .filter_map(|v| v.split(',').next())
            .filter_map(|v| v.parse::<u64>().ok())
            .sum()
    };
    // The scenario: two lease periods of renewals, counted.
    tokio::time::sleep(lease * 2).await;
    let after: String = cmd(&server, &["INFO", "commandstats"]);
    let calls = script_calls(&after) - script_calls(&before);
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

/// Every kind the watchdog renews is held across three renewals (and more) while another
/// client is refused: a plain, a fair, a read and a write lock, a re-entered write lock, a
/// MultiLock's members, a leased permit with keep-alive and a job lock with keep-alive. A
/// renewal that extends nothing for one kind (a write lock's renewal refused for its hash's
/// mode field) shows as that kind's key gone and its lost signal fired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_the_watchdog_renews_is_held_across_three_renewals() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(900);
    let client = client_with_watchdog(&server, lease).await;
    let other = client_for(&server).await;

    let plain = client.lock("wd:plain").acquire().await.unwrap();
    let fair = client.fair_lock("wd:fair").acquire().await.unwrap();
    let read = client.rw_lock("wd:read").read().await.unwrap();
    let write = client.rw_lock("wd:write").write().await.unwrap();
    let rewrite = client.rw_lock("wd:rewrite").write().await.unwrap();
    let rewrite_inner = rewrite.reenter().await.unwrap();
    let multi = distlock::MultiLock::new([client.lock("wd:m1"), client.lock("wd:m2")])
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let sem = client.leased_semaphore("wd:sem").lease(lease);
    assert!(sem.try_set_permits(1).await.unwrap());
    let mut permit = sem.acquire().await.unwrap();
    permit.keep_alive(lease).unwrap();
    let job = client
        .job_lock("wd:job")
        .at_most_for(lease)
        .keep_alive()
        .acquire()
        .await
        .unwrap();

    let keys = [
        "wd:plain",
        "wd:fair",
        "wd:read",
        "wd:write",
        "wd:rewrite",
        "wd:m1",
        "wd:m2",
    ];
    // Renewals every lease/3 (job locks every half of at_most_for): 4 lease periods hold
    // at least 8 renewals of each lock and permit and 6 of the job lock.
    let start = tokio::time::Instant::now();
    while start.elapsed() < lease * 4 {
        for key in keys {
            let pttl: i64 = cmd(&server, &["PTTL", key]);
            assert!(
                pttl > 0,
                "{key}: the lease ran out while held (pttl {pttl}) after {:?}",
                start.elapsed()
            );
        }
        let job_pttl: i64 = cmd(&server, &["PTTL", job.key()]);
        assert!(
            job_pttl > 0,
            "job lock: the lease ran out while held after {:?}",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(other
        .lock("wd:plain")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert!(other
        .fair_lock("wd:fair")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert!(other
        .rw_lock("wd:read")
        .try_write()
        .await
        .unwrap()
        .is_none());
    assert!(other
        .rw_lock("wd:write")
        .try_read()
        .await
        .unwrap()
        .is_none());
    assert!(other
        .rw_lock("wd:rewrite")
        .try_write()
        .await
        .unwrap()
        .is_none());
    assert!(other.lock("wd:m2").try_acquire().await.unwrap().is_none());
    assert!(other
        .leased_semaphore("wd:sem")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    assert!(other
        .job_lock("wd:job")
        .at_most_for(lease)
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    for (what, lost) in [
        ("plain", plain.is_lost()),
        ("fair", fair.is_lost()),
        ("read", read.is_lost()),
        ("write", write.is_lost()),
        ("re-entered write", rewrite_inner.is_lost()),
        ("multi", multi.guards().iter().any(|g| g.is_lost())),
        ("permit", permit.is_lost()),
        ("job", job.is_lost()),
    ] {
        assert!(!lost, "{what}: lost() fired while the watchdog renewed it");
    }
    assert!(write.is_held().await.unwrap());
    assert!(rewrite.is_held().await.unwrap());
    rewrite_inner.release().await.unwrap();
    rewrite.release().await.unwrap();
    write.release().await.unwrap();
    read.release().await.unwrap();
    fair.release().await.unwrap();
    plain.release().await.unwrap();
    multi.release().await.unwrap();
    permit.release().await.unwrap();
    job.release().await.unwrap();
}

/// A watchdog batch (one `lock_renew.lua` call) renews only the holds it still has: of three
/// plain locks, the one taken over by another owner and the one whose hash became a
/// read-write lock's with a field of the holder's name are reported lost and keep the TTL
/// their new owner gave them; of two write holds, the one whose hash became a plain lock's
/// with a field named like the write hold's likewise. The others stay held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_renews_only_the_holds_it_still_has() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(900);
    let client = client_with_watchdog(&server, lease).await;
    let keep = client.lock("wb:keep").acquire().await.unwrap();
    let taken = client.lock("wb:taken").acquire().await.unwrap();
    let plain_kind = client.lock("wb:kind").acquire().await.unwrap();
    let write_keep = client.rw_lock("wb:wkeep").write().await.unwrap();
    let write_kind = client.rw_lock("wb:wkind").write().await.unwrap();
    let plain_field = plain_kind.owner().as_str().to_string();
    let write_field = format!("{}:write", write_kind.owner().as_str());
    // Each replaced by someone else's hash with a 20 s TTL, which a renewal would cut.
    for (key, fields) in [
        ("wb:taken", vec!["someone-else:1", "1"]),
        ("wb:kind", vec!["mode", "read", plain_field.as_str(), "1"]),
        ("wb:wkind", vec![write_field.as_str(), "1"]),
    ] {
        let mut hset = vec!["HSET", key];
        hset.extend(fields);
        let _: i64 = cmd(&server, &["DEL", key]);
        let _: i64 = cmd(&server, &hset);
        let _: i64 = cmd(&server, &["PEXPIRE", key, "20000"]);
    }
    let wait = |what: &'static str, lost: bool| assert!(lost, "{what}: lost() did not fire");
    wait(
        "taken",
        tokio::time::timeout(Duration::from_secs(3), taken.lost())
            .await
            .is_ok(),
    );
    wait(
        "plain in a read-write hash",
        tokio::time::timeout(Duration::from_secs(3), plain_kind.lost())
            .await
            .is_ok(),
    );
    wait(
        "write in a plain hash",
        tokio::time::timeout(Duration::from_secs(3), write_kind.lost())
            .await
            .is_ok(),
    );
    // The scenario: two more lease periods, which only renewals survive.
    tokio::time::sleep(lease * 2).await;
    for key in ["wb:taken", "wb:kind", "wb:wkind"] {
        let pttl: i64 = cmd(&server, &["PTTL", key]);
        assert!(pttl > 15_000, "{key}: its 20 s TTL was cut to {pttl} ms");
    }
    for (key, lost) in [
        ("wb:keep", keep.is_lost()),
        ("wb:wkeep", write_keep.is_lost()),
    ] {
        assert!(!lost, "{key}: lost() fired while renewed");
        let pttl: i64 = cmd(&server, &["PTTL", key]);
        assert!(pttl > 0, "{key} was not renewed");
    }
    let _ = (taken.forget(), plain_kind.forget(), write_kind.forget());
    keep.release().await.unwrap();
    write_keep.release().await.unwrap();
}

/// A lock alone in its batch is renewed by `lock_renew_one.lua`: a plain lock and a write
/// lock, each its client's only hold, are held across three renewals and more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_plain_or_write_hold_is_renewed() {
    let server = RedisServer::start();
    let lease = Duration::from_millis(600);
    let plain_client = client_with_watchdog(&server, lease).await;
    let write_client = client_with_watchdog(&server, lease).await;
    let plain = plain_client.lock("lone:plain").acquire().await.unwrap();
    let write = write_client.rw_lock("lone:write").write().await.unwrap();
    let start = tokio::time::Instant::now();
    while start.elapsed() < lease * 4 {
        for key in ["lone:plain", "lone:write"] {
            let pttl: i64 = cmd(&server, &["PTTL", key]);
            assert!(
                pttl > 0,
                "{key}: the lease ran out while held (pttl {pttl}) after {:?}",
                start.elapsed()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!plain.is_lost() && !write.is_lost());
    plain.release().await.unwrap();
    write.release().await.unwrap();
}
