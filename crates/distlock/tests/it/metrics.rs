//! Metrics (feature `metrics`): the `metrics_service` example, scraped over HTTP the way
//! Prometheus does, after a short run against a real server.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::*;

/// The value of the sample `name{labels…}` (every label given must match), if present.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?;
        let (labelset, value) = match rest.strip_prefix('{') {
            Some(r) => r.split_once("} ")?,
            None => ("", rest.strip_prefix(' ')?),
        };
        labels
            .iter()
            .all(|(k, v)| labelset.split(',').any(|l| l == format!("{k}=\"{v}\"")))
            .then(|| value.trim().parse().ok())?
    })
}

fn scrape(port: u16) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to /metrics");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response
}

#[test]
fn the_example_service_serves_histograms_counters_and_gauges() {
    let server = RedisServer::start();
    let port = distlock_test::free_port();
    let mut child = Command::new(example_bin("metrics_service"))
        .args([&server.url(), &format!("127.0.0.1:{port}"), "1500ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn metrics_service");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let orders: f64 = lines
        .next()
        .expect("orders line")
        .unwrap()
        .strip_prefix("orders ")
        .expect("orders N")
        .parse()
        .unwrap();
    let serving = lines.next().expect("serving line").unwrap();
    assert!(serving.starts_with("serving http://"), "{serving}");
    let text = scrape(port);
    child.kill().ok();
    child.wait().ok();

    let lock = [("kind", "lock")];
    // Every grant counted: the orders, the report's lock and the refund's.
    assert!(orders > 0.0);
    assert_eq!(
        sample(&text, "distlock_acquisitions_total", &lock),
        Some(orders + 2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "distlock_acquisitions_total",
            &[("kind", "job_lock")]
        ),
        Some(1.0)
    );
    // The histogram of granted acquires has one observation per grant, in buckets.
    assert!(text.contains("# TYPE distlock_acquire_duration_seconds histogram"));
    let granted = [("kind", "lock"), ("outcome", "granted")];
    assert_eq!(
        sample(&text, "distlock_acquire_duration_seconds_count", &granted),
        Some(orders + 2.0)
    );
    assert_eq!(
        sample(
            &text,
            "distlock_acquire_duration_seconds_bucket",
            &[("kind", "lock"), ("outcome", "granted"), ("le", "+Inf")]
        ),
        Some(orders + 2.0)
    );
    // Eight workers on three SKUs contend: some waited, and each wait is in the wait histogram.
    let waits = sample(&text, "distlock_acquire_waits_total", &lock).expect("waits");
    assert!(waits > 0.0);
    assert_eq!(
        sample(&text, "distlock_acquire_wait_seconds_count", &lock),
        Some(waits)
    );
    // The report's hold outlived a 600 ms watchdog lease's renewal period; the refund's
    // explicit lease ran out.
    assert!(sample(&text, "distlock_watchdog_renewals_total", &lock).expect("renewals") >= 1.0);
    assert_eq!(
        sample(&text, "distlock_leases_lost_total", &lock),
        Some(1.0)
    );
    // Nothing is held or waiting once the run is over.
    assert_eq!(sample(&text, "distlock_held", &lock), Some(0.0));
    assert_eq!(sample(&text, "distlock_waiting", &lock), Some(0.0));
    // Names are not labels unless the client opts in.
    assert!(!text.contains("name=\""), "lock names leaked into labels");
}

/// In-process, through a Prometheus recorder installed for this test binary: timeouts and
/// errors are counted, and a client that opts in labels acquires by lock name (the names
/// here are unique, so other tests' acquires do not disturb the figures).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_errors_and_opt_in_name_labels() {
    let handle = metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .expect("the only recorder of this test binary");
    let server = RedisServer::start();
    let client = distlock::Client::builder()
        .url(server.url())
        .metrics_lock_names(true)
        .build()
        .await
        .unwrap();
    let holder = client_for(&server).await;
    let _held = holder.lock("metrics-busy").acquire().await.unwrap();
    assert!(client
        .lock("metrics-busy")
        .try_acquire_for(Duration::from_millis(100))
        .await
        .unwrap()
        .is_none());
    assert!(client
        .lock("metrics-busy")
        .try_acquire()
        .await
        .unwrap()
        .is_none());
    let _: () = cmd(&server, &["SET", "metrics-string", "x"]);
    assert!(client.lock("metrics-string").try_acquire().await.is_err());

    let text = handle.render();
    let busy = [("kind", "lock"), ("name", "metrics-busy")];
    // The bounded wait that ended empty is a timeout; the zero-wait refusal is not.
    assert_eq!(
        sample(&text, "distlock_acquire_timeouts_total", &busy),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "distlock_acquire_waits_total", &busy),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "distlock_acquire_duration_seconds_count",
            &[("name", "metrics-busy"), ("outcome", "not_acquired")]
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(
            &text,
            "distlock_acquire_errors_total",
            &[("kind", "lock"), ("name", "metrics-string")]
        ),
        Some(1.0)
    );
    // The holder's client did not opt in: its grant carries no name label.
    assert_eq!(sample(&text, "distlock_acquisitions_total", &busy), None);
}
