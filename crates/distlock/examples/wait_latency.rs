//! What confirming grants and releases with `WAIT` costs: acquire + release latency on a
//! Sentinel set (a master, two replicas, three sentinels) and a Cluster (three masters with a
//! replica each) — real processes started by distlock-test — with replica confirmation
//! (`replica_acks(1)`, the default) and without (`replica_acks(0)`), and on a standalone
//! server for reference:
//!
//! ```text
//! cargo run --release -p distlock --example wait_latency
//! ```

use std::time::{Duration, Instant};

use distlock_test::{ClusterSet, RedisServer, SentinelSet};

const PAIRS: usize = 3000;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn measure(client: &distlock::Client) -> Result<(Duration, Duration, f64), distlock::Error> {
    let lock = client.lock("latency").lease(Duration::from_secs(10));
    let mut samples = Vec::with_capacity(PAIRS);
    let started = Instant::now();
    for i in 0..PAIRS + 100 {
        let t = Instant::now();
        let guard = lock.acquire().await?;
        let acquired = t.elapsed();
        guard.release().await?;
        if i >= 100 {
            samples.push(acquired);
        }
    }
    let pairs_per_s = (PAIRS + 100) as f64 / started.elapsed().as_secs_f64();
    samples.sort();
    Ok((
        percentile(&samples, 50.0),
        percentile(&samples, 99.0),
        pairs_per_s,
    ))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = RedisServer::start();
    let standalone = distlock::Client::connect(&server.url()).await?;
    let set = SentinelSet::start();
    let confirmed = distlock::Client::builder().url(set.url()).build().await?;
    let unconfirmed = distlock::Client::builder()
        .url(set.url())
        .replica_acks(0)
        .build()
        .await?;
    let cluster = ClusterSet::start();
    let cluster_confirmed = distlock::Client::builder()
        .url(cluster.url())
        .build()
        .await?;
    let cluster_unconfirmed = distlock::Client::builder()
        .url(cluster.url())
        .replica_acks(0)
        .build()
        .await?;
    println!(
        "acquire latency p50 / p99, acquire+release pairs per second ({PAIRS} pairs, one task)"
    );
    for (what, client) in [
        ("standalone", &standalone),
        ("sentinel, replica_acks(0)", &unconfirmed),
        ("sentinel, replica_acks(1)", &confirmed),
        ("cluster, replica_acks(0)", &cluster_unconfirmed),
        ("cluster, replica_acks(1)", &cluster_confirmed),
    ] {
        let (p50, p99, rate) = measure(client).await?;
        println!("{what:<28} {p50:>10.1?} {p99:>10.1?} {rate:>8.0}/s");
    }
    Ok(())
}
