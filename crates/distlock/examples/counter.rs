//! Increment a shared counter under a lock, from as many processes as you like:
//!
//! ```text
//! cargo run --example counter -- redis://127.0.0.1/ my-lock my-counter 100 &
//! cargo run --example counter -- redis://127.0.0.1/ my-lock my-counter 100
//! redis-cli GET my-counter   # 200: no update was lost
//! ```
//!
//! The read and the write are two separate commands, so without mutual exclusion two
//! processes would overwrite each other's increments.

use redis::AsyncCommands;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, lock_name, counter, n] = args.as_slice() else {
        eprintln!("usage: counter URL LOCK COUNTER_KEY N");
        std::process::exit(2);
    };
    let n: u64 = n.parse()?;
    let client = distlock::Client::connect(url).await?;
    let mut con = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    let lock = client.lock(lock_name.as_str());
    for _ in 0..n {
        let guard = lock.acquire().await?;
        let v: Option<u64> = con.get(counter).await?;
        let _: () = con.set(counter, v.unwrap_or(0) + 1).await?;
        guard.release().await?;
    }
    println!("done {n}");
    Ok(())
}
