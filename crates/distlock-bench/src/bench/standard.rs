//! The four standard workloads, with the semantics of the other libraries' Rust driver: a
//! shared ticket counter keeps every client busy to the end, warm-ups are not measured,
//! failed acquires are counted and not measured.
//!
//! A "client" is one tokio task with its own [`Lock`] object; all clients share one
//! [`distlock::Client`] (one multiplexed connection), as the library is meant to be used.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::RngExt;
use serde_json::Value;

use super::report::{self, handoff_stats, ns, num, Line};
use super::{Bench, PREFIX};
use distlock::Lock;

/// When one locked section started, got the lock, and finished releasing it.
#[derive(Clone, Copy, Debug)]
pub struct Times {
    /// Acquire called.
    pub start: Instant,
    /// Acquire returned.
    pub acquired: Instant,
    /// Release returned.
    pub released: Instant,
}

/// Acquire `lock` (the client's wait bound: `BENCH_WAIT_SECONDS`), run `body`, release.
/// A failed acquire or release is an `Err` with the library's message.
pub async fn locked<F: Future<Output = ()>>(lock: &Lock, body: F) -> Result<Times, String> {
    let start = Instant::now();
    let guard = lock.acquire().await.map_err(|e| e.to_string())?;
    let acquired = Instant::now();
    body.await;
    let released = guard.release().await;
    let t = Times {
        start,
        acquired,
        released: Instant::now(),
    };
    released.map_err(|e| e.to_string())?;
    Ok(t)
}

fn fail_extra(fails: u64, last_err: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("failed_acquires", Value::from(fails)),
        ("last_error", Value::from(last_err)),
    ]
}

/// `uncontended`: 1 client, key `bench:u:lock`; warm-up pairs, then
/// `BENCH_UNCONTENDED_OPS` × {acquire; release}. p50/p99 = acquire latency.
pub async fn uncontended(b: &Bench) -> Result<Line> {
    let s = b.settings();
    let client = b.client().await?;
    let lock = client.lock(format!("{PREFIX}u:lock")).handoff(s.handoff);
    let bar = b.bar("uncontended: warm-up", s.warmup);
    for _ in 0..s.warmup {
        let _ = locked(&lock, async {}).await;
        bar.inc(1);
    }
    bar.set_message("uncontended");
    bar.set_position(0);
    bar.set_length(s.uncontended_ops);
    bar.reset_elapsed();
    let mut lat = Vec::with_capacity(s.uncontended_ops.min(1 << 20) as usize);
    let (mut fails, mut last_err) = (0u64, String::new());
    let srv0 = b.server_snapshot("uncontended").await;
    let t0 = Instant::now();
    let deadline = t0 + s.max;
    while (lat.len() as u64) < s.uncontended_ops && Instant::now() < deadline {
        match locked(&lock, async {}).await {
            Ok(t) => lat.push(ns(t.acquired - t.start)),
            Err(e) => {
                fails += 1;
                last_err = e;
            }
        }
        bar.inc(1);
    }
    let secs = t0.elapsed().as_secs_f64();
    let srv1 = b.server_snapshot("uncontended").await;
    bar.finish_and_clear();
    let ops = lat.len() as u64;
    let mut extra = fail_extra(fails, &last_err);
    extra.extend(b.server_cost(srv0, srv1, ops));
    Ok(Line::new(
        "uncontended",
        1,
        ops,
        secs,
        &lat,
        None,
        b.notes(""),
        extra,
    ))
}

/// `distinct`: C clients over `BENCH_KEYS` names split into C disjoint sets (client i,
/// iteration j: `bench:d:{i + C·(j mod keys/C)}`); `BENCH_DISTINCT_OPS` pairs in total.
/// p50/p99 = acquire latency over all pairs.
pub async fn distinct(b: &Bench) -> Result<Line> {
    let s = b.settings().clone();
    let client = b.client().await?;
    let warm = (s.warmup / s.clients).max(2);
    let bar = b.bar("distinct: warm-up", warm * s.clients);
    // Brief warm-up on every client (connections, script cache), as the peers do.
    for i in 0..s.clients {
        let lock = client.lock(format!("{PREFIX}d:{i}")).handoff(s.handoff);
        for _ in 0..warm {
            let _ = locked(&lock, async {}).await;
            bar.inc(1);
        }
    }
    bar.set_message("distinct");
    bar.set_position(0);
    bar.set_length(s.distinct_ops);
    bar.reset_elapsed();
    let tickets = Arc::new(AtomicU64::new(0));
    let srv0 = b.server_snapshot("distinct").await;
    let t0 = Instant::now();
    let deadline = t0 + s.max;
    let mut handles = Vec::new();
    for i in 0..s.clients {
        let (tickets, s, client, bar) = (tickets.clone(), s.clone(), client.clone(), bar.clone());
        handles.push(tokio::spawn(async move {
            let per = s.per_client_keys();
            let (mut lat, mut fails, mut last_err) = (Vec::new(), 0u64, String::new());
            let mut j = 0u64;
            loop {
                if Instant::now() >= deadline
                    || tickets.fetch_add(1, Ordering::Relaxed) >= s.distinct_ops
                {
                    break;
                }
                let lock = client
                    .lock(format!("{PREFIX}d:{}", i + s.clients * (j % per)))
                    .handoff(s.handoff);
                j += 1;
                match locked(&lock, async {}).await {
                    Ok(t) => lat.push(ns(t.acquired - t.start)),
                    Err(e) => {
                        fails += 1;
                        last_err = e;
                    }
                }
                bar.inc(1);
            }
            (lat, fails, last_err)
        }));
    }
    let (mut lat, mut fails, mut last_err) = (Vec::new(), 0u64, String::new());
    for h in handles {
        let (l, f, e) = h.await.context("a distinct client panicked")?;
        lat.extend(l);
        fails += f;
        if !e.is_empty() {
            last_err = e;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let srv1 = b.server_snapshot("distinct").await;
    bar.finish_and_clear();
    let ops = lat.len() as u64;
    let mut extra = fail_extra(fails, &last_err);
    extra.extend(b.server_cost(srv0, srv1, ops));
    Ok(Line::new(
        "distinct",
        s.clients,
        ops,
        secs,
        &lat,
        None,
        b.notes(""),
        extra,
    ))
}

/// `contended`: C clients on `bench:c:lock`; critical section `GET bench:c:counter` then
/// `SET` it one higher (two commands, so broken exclusion shows as lost updates);
/// `BENCH_CONTENDED_OPS` acquisitions. p50/p99 = hand-off latency between different
/// clients; `lost_updates` = acquisitions − final counter.
pub async fn contended(b: &Bench) -> Result<Line> {
    let s = b.settings().clone();
    let client = b.client().await?;
    let mut hconn = b.conn();
    let counter = format!("{PREFIX}c:counter");
    let lock_name = format!("{PREFIX}c:lock");
    let _: () = redis::cmd("SET")
        .arg(&counter)
        .arg(0)
        .query_async(&mut hconn)
        .await
        .context("reset the counter")?;
    let bar = b.bar("contended", s.contended_ops);
    let tickets = Arc::new(AtomicU64::new(0));
    let srv0 = b.server_snapshot("contended").await;
    let t0 = Instant::now();
    let deadline = t0 + s.max;
    let mut handles = Vec::new();
    for i in 0..s.clients as usize {
        let (tickets, s, bar) = (tickets.clone(), s.clone(), bar.clone());
        let lock = client.lock(lock_name.clone()).handoff(s.handoff);
        let (hconn, counter) = (hconn.clone(), counter.clone());
        handles.push(tokio::spawn(async move {
            let (mut ev, mut fails, mut last_err) = (Vec::new(), 0u64, String::new());
            let mut waits: Vec<u64> = Vec::new();
            'outer: loop {
                if Instant::now() >= deadline
                    || tickets.fetch_add(1, Ordering::Relaxed) >= s.contended_ops
                {
                    break;
                }
                loop {
                    let mut conn = hconn.clone();
                    let ck = counter.clone();
                    let body = async move {
                        let v: Option<i64> = redis::cmd("GET")
                            .arg(&ck)
                            .query_async(&mut conn)
                            .await
                            .unwrap_or(None);
                        let _: Result<(), _> = redis::cmd("SET")
                            .arg(&ck)
                            .arg(v.unwrap_or(0) + 1)
                            .query_async(&mut conn)
                            .await;
                    };
                    match locked(&lock, body).await {
                        Ok(t) => {
                            ev.push((t.acquired, t.released, i));
                            waits.push(ns(t.acquired - t.start));
                            bar.inc(1);
                            break;
                        }
                        Err(e) => {
                            fails += 1;
                            last_err = e;
                            if Instant::now() >= deadline {
                                break 'outer;
                            }
                        }
                    }
                }
            }
            (ev, fails, last_err, waits)
        }));
    }
    let (mut ev, mut fails, mut last_err) = (Vec::new(), 0u64, String::new());
    let mut waits: Vec<u64> = Vec::new();
    for h in handles {
        let (e, f, le, w) = h.await.context("a contended client panicked")?;
        ev.extend(e);
        waits.extend(w);
        fails += f;
        if !le.is_empty() {
            last_err = le;
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let srv1 = b.server_snapshot("contended").await;
    bar.finish_and_clear();
    let ops = ev.len() as u64;
    let fin: Option<i64> = redis::cmd("GET")
        .arg(&counter)
        .query_async(&mut hconn)
        .await
        .context("read the counter")?;
    let lost = ops as i64 - fin.unwrap_or(0);
    let mut per_client = vec![0u64; s.clients as usize];
    for e in &ev {
        per_client[e.2] += 1;
    }
    let h = handoff_stats(ev);
    let mut extra = report::contended_extra(&h, fails, &last_err);
    let waits = report::histogram(&waits);
    extra.push(("wait_p50_us", num(report::pct(&waits, 0.50))));
    extra.push(("wait_p99_us", num(report::pct(&waits, 0.99))));
    extra.push(("wait_max_us", num(report::max_us(&waits))));
    extra.extend(b.server_cost(srv0, srv1, ops));
    let mut line = Line::new(
        "contended",
        s.clients,
        ops,
        secs,
        &h.handoffs_ns,
        Some(lost),
        b.notes(""),
        extra,
    );
    line.recorded.wait = (!waits.is_empty()).then_some(waits);
    line.recorded.per_client = per_client;
    Ok(line)
}

/// `handoff`: clients A and B on `bench:h:lock`, `BENCH_HANDOFF_REPS` repetitions. A
/// acquires; inside A's critical section B starts its acquire, A holds for a time drawn
/// uniformly from [`BENCH_HOLD_MIN_MS`, `BENCH_HOLD_MAX_MS`] counted from B's start, then
/// releases. Sample = B's acquire returned − A's release returned (negative → 0, counted
/// in `release_races`).
pub async fn handoff(b: &Bench) -> Result<Line> {
    let s = b.settings().clone();
    let client = b.client().await?;
    let name = format!("{PREFIX}h:lock");
    let lock_a = client.lock(name.clone()).handoff(s.handoff);
    let lock_b = client.lock(name).handoff(s.handoff);
    let bar = b.bar("handoff", s.handoff_reps);
    let (mut lat, mut fails, mut races, mut last_err) = (Vec::new(), 0u64, 0u64, String::new());
    let srv0 = b.server_snapshot("handoff").await;
    let t0 = Instant::now();
    for _ in 0..s.handoff_reps {
        if t0.elapsed() > s.handoff_max {
            break;
        }
        let hold = Duration::from_millis(if s.hold_max_ms <= s.hold_min_ms {
            s.hold_min_ms
        } else {
            rand::rng().random_range(s.hold_min_ms..=s.hold_max_ms)
        });
        let guard_a = match lock_a.acquire().await {
            Ok(g) => g,
            Err(e) => {
                fails += 1;
                last_err = e.to_string();
                continue;
            }
        };
        let lb = lock_b.clone();
        let tb = tokio::spawn(async move { locked(&lb, async {}).await });
        tokio::time::sleep(hold).await;
        let ra = guard_a.release().await;
        let a_released = Instant::now();
        let rb = tb.await.context("client B panicked")?;
        match (ra, rb) {
            (Ok(()), Ok(tb)) => {
                if tb.acquired < a_released {
                    races += 1;
                    lat.push(0);
                } else {
                    lat.push(ns(tb.acquired - a_released));
                }
            }
            (ra, rb) => {
                fails += 1;
                if let Err(e) = ra {
                    last_err = e.to_string();
                }
                if let Err(e) = rb {
                    last_err = e;
                }
            }
        }
        bar.inc(1);
    }
    let secs = t0.elapsed().as_secs_f64();
    let srv1 = b.server_snapshot("handoff").await;
    bar.finish_and_clear();
    let ops = lat.len() as u64;
    let mut extra = vec![
        ("failed_acquires", Value::from(fails)),
        ("release_races", Value::from(races)),
        ("last_error", Value::from(last_err)),
    ];
    // Two acquire+release pairs per repetition: A's and B's.
    extra.extend(b.server_cost(srv0, srv1, 2 * ops));
    Ok(Line::new(
        "handoff",
        2,
        ops,
        secs,
        &lat,
        None,
        b.notes(""),
        extra,
    ))
}
