//! 16 tasks of one client contend, with direct hand-off on and off, against a private
//! redis-server started on a free port by distlock-test: for the leased semaphore, on the
//! permits of a 2-permit semaphore; for the read-write lock, on its write lock. Each task
//! holds what it got for 200 µs and gives it back, 300 times. Prints acquisitions/s, the
//! script calls and script time per acquisition (`INFO commandstats`), and the waits' p50,
//! p99 and max:
//!
//! ```text
//! cargo run --release -p distlock --example contention [semaphore|write] [LEASE_MS]
//! ```
//!
//! The kind is `semaphore` (the leased semaphore) by default. LEASE_MS (default 3000) is each
//! hold's lease; one longer than what is left of a waiter's liveness (5 s by default) makes
//! every hand-off cost the waiter one extension.

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

/// What the tasks contend for: a leased semaphore's permits, or a read-write lock's write
/// lock.
#[derive(Clone)]
enum Target {
    Semaphore(distlock::LeasedSemaphore),
    Write(distlock::RwLock),
}

/// One task's turns: `PER_TASK` times take from `target`, hold it 200 µs, give it back;
/// returns the waits.
async fn turns(target: Target, lease: Duration) -> Result<Vec<Duration>, distlock::Error> {
    let mut waits = Vec::with_capacity(PER_TASK);
    for _ in 0..PER_TASK {
        let asked = Instant::now();
        match &target {
            Target::Semaphore(sem) => {
                let permit = sem.lease(lease).acquire().await?;
                waits.push(asked.elapsed());
                tokio::time::sleep(Duration::from_micros(200)).await;
                permit.release().await?;
            }
            Target::Write(rw) => {
                let guard = rw.write().await?;
                waits.push(asked.elapsed());
                tokio::time::sleep(Duration::from_micros(200)).await;
                guard.release().await?;
            }
        }
    }
    Ok(waits)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // [semaphore|write] [LEASE_MS]
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let write = args.first().is_some_and(|a| a == "write");
    if args
        .first()
        .is_some_and(|a| a == "write" || a == "semaphore")
    {
        args.remove(0);
    }
    let lease = Duration::from_millis(args.first().map(|v| v.parse()).transpose()?.unwrap_or(3000));
    let server = RedisServer::start();
    let client = distlock::Client::connect(&server.url()).await?;
    let mut con = redis::Client::open(server.url())?
        .get_multiplexed_async_connection()
        .await?;
    for handoff in [true, false] {
        let name = format!("contention-{handoff}");
        let target = if write {
            Target::Write(client.rw_lock(name.as_str()).lease(lease).handoff(handoff))
        } else {
            let sem = client.leased_semaphore(name.as_str()).handoff(handoff);
            sem.try_set_permits(2).await?;
            Target::Semaphore(sem)
        };
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut con)
            .await?;
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..TASKS {
            tasks.push(tokio::spawn(turns(target.clone(), lease)));
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
            "{} hand-off {}: {:.0} acquisitions/s, {:.2} script calls and {:.1} µs of script \
             time per acquisition, wait p50 {:?} p99 {:?} max {:?}",
            if write {
                "write lock"
            } else {
                "leased semaphore"
            },
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
