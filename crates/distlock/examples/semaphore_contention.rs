//! 16 tasks of one client take and give back the permits of a 2-permit leased semaphore
//! (holding each for 200 µs), with direct hand-off on and off, against a private
//! redis-server started on a free port by distlock-test. Prints acquisitions/s, the script
//! calls and script time per acquisition (`INFO commandstats`), and the waits' p50, p99 and
//! max:
//!
//! ```text
//! cargo run --release -p distlock --example semaphore_contention [LEASE_MS]
//! ```
//!
//! LEASE_MS (default 3000) is each permit's lease; one longer than what is left of a waiter's
//! liveness (5 s by default) makes every hand-off cost the waiter one extension.

use std::time::{Duration, Instant};

use distlock_test::RedisServer;

const TASKS: usize = 16;
const PER_TASK: usize = 300;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `field` (`calls`, `usec`) of `command` in an `INFO commandstats` reply.
fn stat(info: &str, command: &str, field: &str) -> u64 {
    let prefix = format!("cmdstat_{command}:");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| {
            rest.split(',')
                .find_map(|f| f.strip_prefix(field)?.strip_prefix('='))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let lease = Duration::from_millis(
        std::env::args()
            .nth(1)
            .map(|v| v.parse())
            .transpose()?
            .unwrap_or(3000),
    );
    let server = RedisServer::start();
    let client = distlock::Client::connect(&server.url()).await?;
    let mut con = redis::Client::open(server.url())?
        .get_multiplexed_async_connection()
        .await?;
    for handoff in [true, false] {
        let sem = client
            .leased_semaphore(format!("contention-{handoff}"))
            .handoff(handoff);
        sem.try_set_permits(2).await?;
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut con)
            .await?;
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..TASKS {
            let sem = sem.clone();
            tasks.push(tokio::spawn(async move {
                let mut waits = Vec::with_capacity(PER_TASK);
                for _ in 0..PER_TASK {
                    let asked = Instant::now();
                    let permit = sem.acquire(lease).await?;
                    waits.push(asked.elapsed());
                    tokio::time::sleep(Duration::from_micros(200)).await;
                    permit.release().await?;
                }
                Ok::<_, distlock::Error>(waits)
            }));
        }
        let mut waits = Vec::new();
        for t in tasks {
            waits.extend(t.await??);
        }
        let took = start.elapsed();
        waits.sort();
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut con)
            .await?;
        let n = waits.len() as f64;
        println!(
            "hand-off {}: {:.0} acquisitions/s, {:.2} script calls and {:.1} µs of script time \
             per acquisition, wait p50 {:?} p99 {:?} max {:?}",
            if handoff { "on " } else { "off" },
            n / took.as_secs_f64(),
            stat(&info, "evalsha", "calls") as f64 / n,
            stat(&info, "evalsha", "usec") as f64 / n,
            percentile(&waits, 50.0),
            percentile(&waits, 99.0),
            waits[waits.len() - 1],
        );
    }
    Ok(())
}
