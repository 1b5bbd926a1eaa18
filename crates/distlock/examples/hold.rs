//! Hold a lock until killed, with the watchdog renewing it: shows that a crashed holder frees
//! the lock once its lease ends.
//!
//! ```text
//! cargo run --example hold -- redis://127.0.0.1/ my-lock 2s
//! ```
//!
//! Prints `held <fencing token>` once the lock is granted, then sleeps forever.

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, name, lease] = args.as_slice() else {
        eprintln!("usage: hold URL LOCK WATCHDOG_LEASE (e.g. 2s, 1500ms)");
        std::process::exit(2);
    };
    let lease = parse_ms(lease).ok_or("lease must look like 2s or 1500ms")?;
    let client = distlock::Client::builder()
        .url(url.as_str())
        .watchdog_lease(lease)
        .build()
        .await?;
    let guard = client.lock(name.as_str()).acquire().await?;
    println!("held {}", guard.fencing_token());
    tokio::select! {
        _ = guard.lost() => eprintln!("lease lost"),
        _ = std::future::pending::<()>() => {}
    }
    Ok(())
}

fn parse_ms(s: &str) -> Option<Duration> {
    if let Some(ms) = s.strip_suffix("ms") {
        return ms.parse().ok().map(Duration::from_millis);
    }
    s.strip_suffix('s')?.parse().ok().map(Duration::from_secs)
}
