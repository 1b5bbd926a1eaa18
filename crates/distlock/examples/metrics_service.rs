//! A small order service that exposes distlock's metrics to Prometheus with
//! `metrics-exporter-prometheus` (feature `metrics`):
//!
//! ```text
//! cargo run --features metrics --example metrics_service -- redis://127.0.0.1/ 127.0.0.1:9464 3s
//! curl -s http://127.0.0.1:9464/metrics | grep distlock_
//! ```
//!
//! For `RUN_FOR` it places orders from eight workers under per-SKU locks (three SKUs, so
//! workers contend and wait), runs a report as a job lock, holds one lock across watchdog
//! renewals, and lets one explicit lease run out (a lost lease, as a paused holder would);
//! then it prints `serving http://ADDR/metrics` and serves until killed.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use distlock::Lease;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, url, listen, run_for] = args.as_slice() else {
        eprintln!("usage: metrics_service URL LISTEN_ADDR RUN_FOR   (e.g. 3s)");
        std::process::exit(2);
    };
    let addr: SocketAddr = listen.parse()?;
    let run_for = humantime::parse_duration(run_for)?;
    // Histograms with buckets (the exporter renders summaries without them).
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(
            Matcher::Prefix("distlock_acquire".into()),
            distlock::ACQUIRE_BUCKETS,
        )?
        .install()?;

    let client = distlock::Client::builder()
        .url(url.as_str())
        .watchdog_lease(Duration::from_millis(600))
        .build()
        .await?;

    // Orders: eight workers, three SKUs.
    let orders = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + run_for;
    let workers: Vec<_> = (0..8)
        .map(|w| {
            let (client, orders) = (client.clone(), orders.clone());
            tokio::spawn(async move {
                let mut n = w;
                while Instant::now() < until {
                    let guard = client
                        .lock(format!("stock:sku-{}", n % 3))
                        .acquire()
                        .await?;
                    tokio::time::sleep(Duration::from_millis(2)).await; // take the stock
                    guard.release().await?;
                    orders.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
                Ok::<_, distlock::Error>(())
            })
        })
        .collect();

    // A report under a job lock, held across watchdog renewals (every 200 ms of 600 ms).
    let report = client
        .job_lock("daily-report")
        .at_most_for(Duration::from_secs(30))
        .run(async {
            let guard = client.lock("report:ledger").acquire().await?;
            tokio::time::sleep(Duration::from_millis(700)).await;
            guard.release().await
        })
        .await?;
    report.expect("no other instance runs the report")?;

    // A holder whose work outruns its explicit lease: the lease is lost.
    let slow = client
        .lock("refund:42")
        .lease(Duration::from_millis(100))
        .acquire()
        .await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    if slow.is_lost() {
        eprintln!("refund 42: lease lost before the work ended; the work is abandoned");
    }
    drop(slow);

    for w in workers {
        w.await??;
    }
    println!("orders {}", orders.load(Ordering::Relaxed));
    println!("serving http://{addr}/metrics");
    std::future::pending::<()>().await;
    Ok(())
}
