//! Locks across OS processes: the `counter` and `hold` examples are the other processes.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::*;

/// 3 processes × 100 increments of a GET/SET counter under one lock: the exact total.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_fuzz_across_three_processes() {
    let server = RedisServer::start();
    let url = server.url();
    run_examples(
        &example_bin("counter"),
        &[&url, "xproc", "xproc-counter", "100"],
        3,
    )
    .await;
    let total: u64 = cmd(&server, &["GET", "xproc-counter"]);
    assert_eq!(total, 300);
}

/// A holder process killed with SIGKILL frees the lock once its lease ends, not before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_holder_process_frees_the_lock_after_its_lease() {
    let server = RedisServer::start();
    let client = client_for(&server).await;
    let mut child = Command::new(example_bin("hold"))
        .args([&server.url(), "victim-of-kill", "1500ms"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn hold example");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("held"), "{line}");
    // The scenario: the watchdog keeps it past its first lease while the process lives.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(client
        .lock("victim-of-kill")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    child.kill().unwrap();
    let killed = tokio::time::Instant::now();
    child.wait().unwrap();
    // What was left of the lease when the holder died (1.5 s leases renewed every 0.5 s).
    let pttl: i64 = cmd(&server, &["PTTL", "victim-of-kill"]);
    let left = Duration::from_millis(u64::try_from(pttl).expect("the lock has a lease"));
    let read = killed.elapsed();
    let g = client
        .lock("victim-of-kill")
        .try_acquire_for(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("lock freed after the dead holder's lease");
    let waited = killed.elapsed();
    // Not before the lease ran out, and soon after (the waiter retries at the holder's PTTL;
    // a second of slack for a loaded machine).
    assert!(
        waited + Duration::from_millis(5) >= left,
        "freed after {waited:?}, before the lease's {left:?} ran out"
    );
    assert!(
        waited <= read + left + Duration::from_secs(1),
        "freed after {waited:?}, {left:?} of lease left"
    );
    g.release().await.unwrap();
}
