//! RwLock: shared reads, exclusive writes, downgrade, refused upgrade, write preference.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::util::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_readers_at_once_writer_alone() {
    let (server, client) = setup().await;
    let rw = client.rw_lock("doc");
    let mut readers = Vec::new();
    for _ in 0..10 {
        readers.push(rw.try_read().await.unwrap().expect("readers share"));
    }
    let mode: String = cmd(&server, &["HGET", "doc", "mode"]);
    assert_eq!(mode, "read");
    assert!(
        rw.try_write().await.unwrap().is_none(),
        "writer while reading"
    );
    for r in readers {
        r.release().await.unwrap();
    }
    let w = rw.try_write().await.unwrap().expect("free for the writer");
    assert!(
        rw.try_read().await.unwrap().is_none(),
        "reader while writing"
    );
    assert!(rw.try_write().await.unwrap().is_none(), "second writer");
    w.release().await.unwrap();
    assert!(lock_keys(&server).is_empty(), "{:?}", lock_keys(&server));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgrade_keeps_a_shared_read_hold() {
    let (server, client) = setup().await;
    let rw = client.rw_lock("grade");
    let w = rw.write().await.unwrap();
    let r = w.downgrade().await.unwrap();
    w.release().await.unwrap();
    let mode: String = cmd(&server, &["HGET", "grade", "mode"]);
    assert_eq!(mode, "read", "the downgraded holder still reads");
    // Others may read alongside now, but not write.
    let other = rw
        .try_read()
        .await
        .unwrap()
        .expect("shared after downgrade");
    assert!(rw.try_write().await.unwrap().is_none());
    // (A read → write upgrade does not compile: see `RwLockReadGuard`'s docs.)
    other.release().await.unwrap();
    r.release().await.unwrap();
    let exists: bool = cmd(&server, &["EXISTS", "grade"]);
    assert!(!exists);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reader_lease_expiry_frees_the_lock_for_a_writer() {
    let (_server, client) = setup().await;
    let rw = client.rw_lock("ttl");
    let r = rw
        .lease(Duration::from_millis(300))
        .try_read()
        .await
        .unwrap()
        .unwrap();
    let _ = r.forget();
    let start = tokio::time::Instant::now();
    let w = rw
        .try_write_for(Duration::from_secs(3))
        .await
        .unwrap()
        .expect("the dead reader's lease ran out");
    assert!(start.elapsed() < Duration::from_millis(1500));
    w.release().await.unwrap();
}

/// A stream of overlapping readers does not starve a writer: once it waits, new readers hold
/// back and the writer gets in within a few reader hold times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_are_not_starved_by_readers() {
    let (server, client) = setup().await;
    let rw = client.rw_lock("busy-doc");
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = Vec::new();
    for _ in 0..4 {
        let rw = rw.clone();
        let stop = stop.clone();
        readers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                if let Some(r) = rw.try_read_for(Duration::from_millis(50)).await.unwrap() {
                    // The scenario: each reader holds a while, overlapping the others.
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    r.release().await.unwrap();
                }
            }
        }));
    }
    // The readers are streaming before the writer arrives.
    assert!(
        eventually(Duration::from_secs(2), || cmd::<Option<String>>(
            &server,
            &["HGET", "busy-doc", "mode"]
        )
        .as_deref()
            == Some("read"))
        .await,
        "no reader got in"
    );
    let start = tokio::time::Instant::now();
    let w = rw
        .try_write_for(Duration::from_secs(3))
        .await
        .unwrap()
        .expect("the writer was starved");
    let waited = start.elapsed();
    w.release().await.unwrap();
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.await.unwrap();
    }
    assert!(
        waited < Duration::from_millis(1000),
        "writer waited {waited:?}"
    );
}

/// Mixed readers and writers under fuzz: a writer never overlaps a reader or another writer,
/// and the counter the writers increment is exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_fuzz_never_overlaps_a_writer() {
    let (server, client) = setup().await;
    let url = server.url();
    let readers_in = Arc::new(AtomicUsize::new(0));
    let writer_in = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for i in 0..12 {
        let rw = client.rw_lock("mixed");
        let (readers_in, writer_in, url) = (readers_in.clone(), writer_in.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            let mut con = data_connection(&url).await;
            for _ in 0..40 {
                if i % 2 == 0 {
                    let w = rw.write().await.unwrap();
                    assert!(!writer_in.swap(true, Ordering::SeqCst), "two writers");
                    assert_eq!(readers_in.load(Ordering::SeqCst), 0, "writer with readers");
                    unguarded_increment(&mut con, "mixed-counter").await;
                    writer_in.store(false, Ordering::SeqCst);
                    w.release().await.unwrap();
                } else {
                    let r = rw.read().await.unwrap();
                    readers_in.fetch_add(1, Ordering::SeqCst);
                    assert!(!writer_in.load(Ordering::SeqCst), "reader with a writer");
                    let _: Option<u64> = redis::cmd("GET")
                        .arg("mixed-counter")
                        .query_async(&mut con)
                        .await
                        .unwrap();
                    readers_in.fetch_sub(1, Ordering::SeqCst);
                    r.release().await.unwrap();
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let total: u64 = cmd(&server, &["GET", "mixed-counter"]);
    assert_eq!(total, 6 * 40);
}

/// Read holds are renewed by the watchdog (hash and per-hold keys) and stop after release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_renews_read_holds() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_millis(600)).await;
    let rw = client.rw_lock("long-read");
    let r = rw.read().await.unwrap();
    // The scenario: hold for 2.5 leases, which only renewals survive.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let hold = format!("{{long-read}}:{}:rwlock_timeout:1", r.owner());
    let pttl: i64 = cmd(&server, &["PTTL", &hold]);
    assert!(pttl > 0, "the read hold key expired while held");
    assert!(r.is_held().await.unwrap());
    r.release().await.unwrap();
    let exists: bool = cmd(&server, &["EXISTS", "long-read"]);
    assert!(!exists);
}
