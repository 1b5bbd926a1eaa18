//! Return from `main` while holding a lock, a fair lock, a semaphore permit, a leased permit
//! and a job lock — the guards are dropped as the runtime shuts down, and every one of them is
//! still released (nothing waits for a lease to end):
//!
//! ```text
//! cargo run --example return_while_holding -- redis://127.0.0.1/ demo multi
//! redis-cli --scan    # no lock key of "demo" is left; the semaphores have all their permits
//! ```
//!
//! The last argument picks the runtime: `multi` (`#[tokio::main]`'s default) or `current`
//! (`flavor = "current_thread"`, where the background releases never get to run before
//! the runtime is dropped).

use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, name, flavor] = args.as_slice() else {
        eprintln!("usage: return_while_holding URL NAME multi|current");
        std::process::exit(2);
    };
    let runtime = match flavor.as_str() {
        "current" => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        _ => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?,
    };
    runtime.block_on(hold_and_return(url, name))
}

async fn hold_and_return(url: &str, name: &str) -> Result<(), Box<dyn std::error::Error>> {
    let client = distlock::Client::connect(url).await?;
    let _lock = client.lock(format!("{name}:lock")).acquire().await?;
    let _fair = client.fair_lock(format!("{name}:fair")).acquire().await?;
    let sem = client.semaphore(format!("{name}:sem"));
    sem.try_set_permits(100).await?;
    let _permit = sem.acquire().await?;
    let leased = client.leased_semaphore(format!("{name}:leased"));
    leased.try_set_permits(100).await?;
    let _leased = leased.lease(Duration::from_secs(60)).acquire().await?;
    let _job = client
        .job_lock(format!("{name}:job"))
        .at_most_for(Duration::from_secs(60))
        .try_acquire()
        .await?
        .ok_or("job lock taken")?;
    println!("holding");
    Ok(()) // every guard is dropped here, as the runtime is about to shut down
}
