//! Uncontended operation pairs of one primitive, one after another, for counting what they
//! cost the server (`tools/script-cost/prims.sh` runs it against a `redis-server` under
//! callgrind twice, with two counts, and divides the difference):
//!
//! ```text
//! cargo run --release --example cost_pairs -- redis://127.0.0.1/ lock 1000
//! ```
//!
//! PRIMITIVE is one of: `lock`, `fair`, `read`, `write` (acquire + release of a lock of that
//! kind, a name of its own per pair, lease by the watchdog as `lock()` takes it), `semaphore`,
//! `leased` (acquire + release of one permit of a 1-permit semaphore, one name), `latch` (one
//! count-down of a latch set to N), `job` (acquire + release of a job lock, `at_most_for` 30
//! s, a name of its own per pair), `extend` (one extension of a held plain lock's lease, as a
//! watchdog renewal of one lock), `bare` (the bare lock, for comparison: `SET NX PX` of a
//! fresh UUID and a compare-and-delete script, over one redis-rs connection, a name of its
//! own per pair). One pair runs before the N counted ones (connections,
//! scripts, counters of the slots warmed up); the program prints `done N` at the end.

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
    let bare = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let unlock = redis::Script::new(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
    );
    let lease = Duration::from_secs(30);
    let pair = |i: u64| {
        let client = client.clone();
        let (mut bare, unlock) = (bare.clone(), unlock.clone());
        let primitive = primitive.clone();
        async move {
            let name = format!("cost:{i}");
            match primitive.as_str() {
                "lock" => client.lock(name).acquire().await?.release().await?,
                "fair" => client.fair_lock(name).acquire().await?.release().await?,
                "read" => client.rw_lock(name).read().await?.release().await?,
                "write" => client.rw_lock(name).write().await?.release().await?,
                "semaphore" => {
                    client.semaphore("cost").acquire().await?.release().await?;
                }
                "leased" => {
                    let permit = client
                        .leased_semaphore("cost")
                        .lease(lease)
                        .acquire()
                        .await?;
                    permit.release().await?;
                }
                "latch" => {
                    client.count_down_latch("cost").count_down().await?;
                }
                "job" => {
                    let job = client.job_lock(name).at_most_for(lease);
                    job.try_acquire().await?.expect("free").release().await?;
                }
                "bare" => {
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
                }
                "extend" => {
                    // The lock of "cost:extend" is taken once, in the warm-up pair.
                    EXTENDED.get().expect("held").extend(lease).await?;
                }
                other => return Err(format!("unknown primitive {other}").into()),
            }
            Ok::<(), Box<dyn std::error::Error>>(())
        }
    };
    match primitive.as_str() {
        "semaphore" => {
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
    pair(u64::MAX).await?;
    for i in 0..n {
        pair(i).await?;
    }
    println!("done {n}");
    Ok(())
}

/// The lock `extend` extends.
static EXTENDED: std::sync::OnceLock<distlock::LockGuard> = std::sync::OnceLock::new();
