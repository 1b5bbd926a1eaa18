//! CountDownLatch across processes.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::*;

/// 5 processes wait, 5 count down: all waiters wake within a short bound of the last count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_waiting_processes_wake_after_five_count_downs() {
    let (server, client) = setup().await;
    let latch = client.count_down_latch("batch");
    assert!(latch.try_set_count(5).await.unwrap());
    assert!(!latch.try_set_count(9).await.unwrap());
    let bin = example_bin("family");
    let waiters: Vec<_> = (0..5)
        .map(|_| {
            Command::new(&bin)
                .args(["latch-wait", &server.url(), "batch"])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // All five subscribed (one connection each).
    assert!(
        eventually(Duration::from_secs(5), || numsub(
            &server,
            "redisson_countdownlatch__channel__{batch}"
        ) == 5)
        .await,
        "not all five waiters subscribed"
    );
    for i in 0..5 {
        let out = Command::new(&bin)
            .args(["latch-down", &server.url(), "batch"])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("counted {}", 4 - i)
        );
    }
    let opened = tokio::time::Instant::now();
    for w in waiters {
        let out = tokio::task::spawn_blocking(move || w.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "open");
    }
    assert!(
        opened.elapsed() < Duration::from_secs(2),
        "{:?}",
        opened.elapsed()
    );
    assert_eq!(latch.count().await.unwrap(), 0);
}

/// A closed latch's wait times out; counting down opens it, and it stays open. On every
/// topology.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_times_out_and_counts_are_checked() {
    for topology in topologies() {
        let (deployment, client) = setup_on(topology).await;
        let latch = client.count_down_latch("slow");
        latch.try_set_count(2).await.unwrap();
        let start = tokio::time::Instant::now();
        assert!(!latch.wait_for(Duration::from_millis(200)).await.unwrap());
        assert!(start.elapsed() >= Duration::from_millis(200));
        assert!(start.elapsed() < Duration::from_secs(1));
        assert_eq!(latch.count_down().await.unwrap(), 1);
        assert_eq!(latch.count().await.unwrap(), 1);
        let stored: u64 = cmd(deployment.node_for("slow"), &["GET", "slow"]);
        assert_eq!(stored, 1, "the server's count");
        assert_eq!(latch.count_down().await.unwrap(), 0);
        assert!(latch.wait_for(Duration::ZERO).await.unwrap(), "open");
        assert_eq!(
            latch.count_down().await.unwrap(),
            0,
            "an open latch stays open"
        );
        assert_eq!(
            latch.try_set_count(0).await.unwrap_err().kind(),
            distlock::ErrorKind::InvalidInput
        );
    }
}
