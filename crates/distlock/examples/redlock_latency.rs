//! Acquire latency of a RedLock over 3 and 5 local redis-server processes (started on free
//! ports by distlock-test), compared with a single-node `Lock`:
//!
//! ```text
//! cargo run --release -p distlock --example redlock_latency
//! ```

use std::time::{Duration, Instant};

use distlock_test::RedisServer;

const PAIRS: usize = 2000;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    for n in [1usize, 3, 5] {
        let servers: Vec<RedisServer> = (0..n).map(|_| RedisServer::start()).collect();
        let mut clients = Vec::new();
        for s in &servers {
            clients.push(distlock::Client::connect(&s.url()).await?);
        }
        let mut samples = Vec::with_capacity(PAIRS);
        if n == 1 {
            let lock = clients[0].lock("latency").lease(Duration::from_secs(10));
            for i in 0..PAIRS + 100 {
                let t = Instant::now();
                let g = lock.acquire().await?;
                if i >= 100 {
                    samples.push(t.elapsed());
                }
                g.release().await?;
            }
        } else {
            let redlock = distlock::RedLockNodes::builder(clients.clone())
                .ttl(Duration::from_secs(10))
                .build()
                .await?;
            for i in 0..PAIRS + 100 {
                let t = Instant::now();
                let g = redlock.lock("latency").acquire().await?;
                if i >= 100 {
                    samples.push(t.elapsed());
                }
                g.release().await?;
            }
        }
        samples.sort();
        let what = if n == 1 {
            "Lock, 1 node".to_string()
        } else {
            format!("RedLock, {n} nodes")
        };
        println!(
            "{what:<16} acquire p50 {:>7.1} us   p99 {:>7.1} us   ({PAIRS} acquire/release pairs)",
            percentile(&samples, 50.0).as_secs_f64() * 1e6,
            percentile(&samples, 99.0).as_secs_f64() * 1e6,
        );
    }
    Ok(())
}
