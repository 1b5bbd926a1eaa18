//! Uncontended operation pairs of one primitive, one after another, for counting what they
//! cost the server (`tools/script-cost/prims.sh` runs it against a `redis-server` under
//! callgrind twice, with two counts, and divides the difference):
//!
//! ```text
//! cargo run --release --example cost_pairs -- redis://127.0.0.1/ lock 1000
//! ```
//!
//! PRIMITIVE is one of: `lock`, `fair`, `read`, `write` (acquire + release of a lock of that
//! kind, 64 names in turn (see `NAMES`), lease by the watchdog as `lock()` takes it), `semaphore`,
//! `leased` (acquire + release of one permit of a 1-permit semaphore, one name), `latch` (one
//! count-down of a latch set to N), `job` (acquire + release of a job lock, `at_most_for` 30
//! s, 64 names in turn), `extend` (one extension of a held plain lock's lease, as a
//! watchdog renewal of one lock), `bare` (the bare lock, for comparison: `SET NX PX` of a
//! fresh UUID and a compare-and-delete script, over one redis-rs connection, a name of its
//! own per pair), `mixed` (a `lock` pair and a `semaphore` pair in turn: minus `lock`, what
//! a semaphore pair costs among other requests). One pair runs before the N counted ones
//! (connections, scripts, counters of the slots warmed up); the program prints `done N` at
//! the end.

use distlock::Lease;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, primitive, n] = args.as_slice() else {
        eprintln!("usage: cost_pairs URL PRIMITIVE N");
        std::process::exit(2);
    };
    let n: u64 = n.parse()?;
    let client = distlock::Client::connect(url).await?;
    // The bare lock's connection and compare-and-delete script.
    // (A redis-cluster:// URL is a Cluster for distlock; redis-rs opens its seed node.)
    let bare = redis::Client::open(url.replacen("redis-cluster://", "redis://", 1))?
        .get_multiplexed_async_connection()
        .await?;
    let unlock = redis::Script::new(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
    );
    let lease = Duration::from_secs(30);
    match primitive.as_str() {
        "semaphore" | "mixed" => {
            client.semaphore("cost").try_set_permits(1).await?;
        }
        "leased" => {
            client.leased_semaphore("cost").try_set_permits(1).await?;
        }
        "latch" => {
            client.count_down_latch("cost").try_set_count(n + 1).await?;
        }
        "extend" => {
            let guard = client.lock("cost:extend").lease(lease).acquire().await?;
            let _ = EXTENDED.set(guard);
        }
        _ => {}
    }
    // Each primitive's pair is a future of its own type, sized by what it awaits (one async
    // block for every primitive would be as large as the largest, and moving it would be
    // counted against each).
    let c = &client;
    match primitive.as_str() {
        "lock" => {
            pairs(n, |i| async move {
                c.lock(format!("cost:{}", i % NAMES))
                    .acquire()
                    .await?
                    .release()
                    .await
            })
            .await?
        }
        "fair" => {
            pairs(n, |i| async move {
                c.fair_lock(format!("cost:{}", i % NAMES))
                    .acquire()
                    .await?
                    .release()
                    .await
            })
            .await?
        }
        "read" => {
            pairs(n, |i| async move {
                c.rw_lock(format!("cost:{}", i % NAMES))
                    .read()
                    .await?
                    .release()
                    .await
            })
            .await?
        }
        "write" => {
            pairs(n, |i| async move {
                c.rw_lock(format!("cost:{}", i % NAMES))
                    .write()
                    .await?
                    .release()
                    .await
            })
            .await?
        }
        "semaphore" => {
            pairs(n, |_| async move {
                c.semaphore("cost").acquire().await?.release().await
            })
            .await?
        }
        // A lock pair and a semaphore pair, in turn: the semaphore's request records beside
        // the client's other requests (minus "lock", the semaphore pair's share).
        "mixed" => {
            pairs(n, |i| async move {
                c.lock(format!("cost:{}", i % NAMES))
                    .acquire()
                    .await?
                    .release()
                    .await?;
                c.semaphore("cost").acquire().await?.release().await
            })
            .await?
        }
        "leased" => {
            pairs(n, |_| async move {
                let permit = c.leased_semaphore("cost").lease(lease).acquire().await?;
                permit.release().await
            })
            .await?
        }
        "latch" => {
            pairs(n, |_| async move {
                c.count_down_latch("cost").count_down().await
            })
            .await?
        }
        "job" => {
            pairs(n, |i| async move {
                let job = c.job_lock(format!("cost:{}", i % NAMES)).at_most_for(lease);
                job.try_acquire().await?.expect("free").release().await
            })
            .await?
        }
        // The lock of "cost:extend" is taken once, before the pairs.
        "extend" => {
            pairs(n, |_| async move {
                EXTENDED.get().expect("held").extend(lease).await
            })
            .await?
        }
        "bare" => {
            let unlock = &unlock;
            pairs(n, |i| {
                let mut bare = bare.clone();
                async move {
                    let name = format!("cost:{}", i % NAMES);
                    let value = uuid::Uuid::new_v4().to_string();
                    let set: Option<String> = redis::cmd("SET")
                        .arg(&name)
                        .arg(&value)
                        .arg("NX")
                        .arg("PX")
                        .arg(30_000)
                        .query_async(&mut bare)
                        .await?;
                    assert!(set.is_some(), "the bare lock {name} was free");
                    let deleted: i64 = unlock
                        .key(&name)
                        .arg(&value)
                        .invoke_async(&mut bare)
                        .await?;
                    assert_eq!(deleted, 1);
                    Ok::<(), redis::RedisError>(())
                }
            })
            .await?
        }
        other => return Err(format!("unknown primitive {other}").into()),
    }
    println!("done {n}");
    Ok(())
}

/// Lock names in turn (`cost:0` … `cost:63`): each name's hash slot has its fencing counter
/// after its first grant, as in a service's steady state; the first `NAMES` pairs of every run
/// create them, so they cancel between two runs.
const NAMES: u64 = 64;

/// One warm-up pair (`i` = `u64::MAX`), then `n` pairs, one after another.
async fn pairs<F, Fut, T, E>(n: u64, mut pair: F) -> Result<(), Box<dyn std::error::Error>>
where
    F: FnMut(u64) -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
    E: std::error::Error + 'static,
{
    pair(u64::MAX).await?;
    for i in 0..n {
        pair(i).await?;
    }
    Ok(())
}

/// The lock `extend` extends.
static EXTENDED: std::sync::OnceLock<distlock::LockGuard> = std::sync::OnceLock::new();
