//! Increment a counter under a RedLock over independent masters, from many processes:
//!
//! ```text
//! cargo run --example redlock_counter -- redis://h1/,redis://h2/,redis://h3/ redis://data/ my-counter 100
//! ```
//!
//! The counter lives on its own server (the second argument); the read and the write are two
//! commands, so broken exclusion shows up as lost increments.

use std::time::Duration;

use redis::AsyncCommands;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, nodes, data_url, counter, n] = args.as_slice() else {
        eprintln!("usage: redlock_counter NODE_URL,NODE_URL,... DATA_URL COUNTER_KEY N");
        std::process::exit(2);
    };
    let n: u64 = n.parse()?;
    let redlock = distlock::RedLockNodes::builder_from_urls(nodes.split(','))
        .ttl(Duration::from_secs(5))
        .node_timeout(Duration::from_millis(500))
        .retry_delay(Duration::from_millis(1), Duration::from_millis(20))
        .build()
        .await?;
    let mut con = redis::Client::open(data_url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    for _ in 0..n {
        let guard = redlock.lock("redlock-counter").acquire().await?;
        let v: Option<u64> = con.get(counter).await?;
        let _: () = con.set(counter, v.unwrap_or(0) + 1).await?;
        guard.release().await?;
    }
    println!("done {n}");
    Ok(())
}
