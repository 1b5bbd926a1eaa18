//! Each of distlock's coordination primitives used from its own process (the tests kill
//! these processes to show what a crash does):
//!
//! ```text
//! cargo run --example family -- fair-wait   URL NAME LIVENESS_MS   # queue on a fair lock
//! cargo run --example family -- lock-wait   URL NAME LIVENESS_MS   # queue on a plain lock
//! cargo run --example family -- leased-hold URL NAME LEASE_MS      # hold a leased permit
//! cargo run --example family -- leased-wait URL NAME LIVENESS_MS   # queue on a leased semaphore
//! cargo run --example family -- write-wait  URL NAME               # queue for a write lock (5 s liveness)
//! cargo run --example family -- latch-wait  URL NAME               # wait for a latch
//! cargo run --example family -- latch-down  URL NAME               # count a latch down
//! ```
//!
//! Each prints one line when it has done its part (`granted`, `granted <token>`, `held <id>`, `open`,
//! `counted <left>`), then holds or exits.

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(what), Some(url), Some(name)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!(
            "usage: family fair-wait|lock-wait|leased-hold|leased-wait|write-wait|latch-wait|latch-down URL NAME [MS]"
        );
        std::process::exit(2);
    };
    let ms = || -> Duration {
        Duration::from_millis(args.get(4).and_then(|v| v.parse().ok()).unwrap_or(1000))
    };
    let client = distlock::Client::connect(url).await?;
    match what.as_str() {
        "fair-wait" => {
            let lock = client.fair_lock(name.as_str()).liveness_timeout(ms());
            let guard = lock.acquire().await?;
            println!("granted {}", guard.fencing_token().get());
            guard.release().await?;
        }
        "lock-wait" => {
            // A plain lock's waiter, in its direct hand-off queue.
            let lock = client.lock(name.as_str()).liveness_timeout(ms());
            let guard = lock.acquire().await?;
            println!("granted {}", guard.fencing_token().get());
            guard.release().await?;
        }
        "leased-hold" => {
            let permit = client
                .leased_semaphore(name.as_str())
                .lease(ms())
                .acquire()
                .await?;
            println!("held {}", permit.id());
            std::future::pending::<()>().await;
        }
        "leased-wait" => {
            // A leased semaphore's waiter (30 s lease), in its direct hand-off queue.
            let sem = client
                .leased_semaphore(name.as_str())
                .liveness_timeout(ms());
            let permit = sem.lease(Duration::from_secs(30)).acquire().await?;
            println!("held {}", permit.id());
            permit.release().await?;
        }
        "write-wait" => {
            // A read-write lock's writer, in its direct hand-off queue.
            let guard = client.rw_lock(name.as_str()).write().await?;
            println!("granted {}", guard.fencing_token().get());
            guard.release().await?;
        }
        "latch-wait" => {
            client.count_down_latch(name.as_str()).wait().await?;
            println!("open");
        }
        "latch-down" => {
            let left = client.count_down_latch(name.as_str()).count_down().await?;
            println!("counted {left}");
        }
        other => {
            eprintln!("unknown primitive {other}");
            std::process::exit(2);
        }
    }
    Ok(())
}
