//! A job scheduled on every instance, run once per interval across all of them:
//!
//! ```text
//! cargo run --example scheduled -- redis://127.0.0.1/ &   # instance 1
//! cargo run --example scheduled -- redis://127.0.0.1/     # instance 2: they take turns
//! ```
//!
//! Every instance ticks every 10 s (aligned to the clock), and the job lock lets one of them
//! run the job each time. `at_least_for` (2 s) covers clock differences between hosts.

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1/".into());
    let client = distlock::Client::connect(&url).await?;
    let lock = client
        .job_lock("cleanup")
        .environment("example")
        .at_most_for(Duration::from_secs(8))
        .at_least_for(Duration::from_secs(2));
    let me = std::process::id();
    let handle = distlock::spawn_every(lock, Duration::from_secs(10), move || async move {
        println!("process {me} runs the cleanup");
    });
    handle.await?;
    Ok(())
}
