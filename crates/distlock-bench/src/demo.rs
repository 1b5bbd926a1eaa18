//! `distlock-bench demo`: a flash sale (one order per user; the stock must never oversell), run by
//! several OS processes against one Redis.
//!
//! The sale has `--stock` units spread over `--vouchers` vouchers. Each of `--users` users
//! makes `--attempts` purchase attempts on random vouchers; attempt `j` of user `u` runs in
//! worker process `(u + j) mod P`, so every user's attempts race across processes. An
//! attempt runs the classic flash-sale `createVoucherOrder`:
//!
//! 1. take the user's lock `lock:order:<user>`;
//! 2. if the user already has an order for this voucher, refuse (one order per user);
//! 3. else take the voucher's stock lock, `GET` its stock and, if positive, `SET` it one
//!    lower (two commands, so broken exclusion shows as oversell) and record the order;
//! 4. release both.
//!
//! Orders go to a Redis list that allows duplicates, so a broken user lock shows up as a
//! duplicate order. The parent then checks: oversold = 0, duplicate orders = 0,
//! orders + stock left = initial stock; it exits 3 when one fails.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use comfy_table::{CellAlignment, Table};
use hdrhistogram::Histogram;
use rand::{RngExt, SeedableRng};
use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::connect::Options;
use crate::embedded::{url_or_embedded, Topology};
use crate::exit;
use crate::out::outln;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Units for sale, spread evenly over the vouchers.
    #[arg(long, default_value_t = 5000)]
    pub stock: u64,
    /// Number of users buying.
    #[arg(long, default_value_t = 200)]
    pub users: u64,
    /// Purchase attempts per user (on random vouchers).
    #[arg(long, default_value_t = 60)]
    pub attempts: u64,
    /// Number of vouchers (products) in the sale.
    #[arg(long, default_value_t = 30)]
    pub vouchers: u64,
    /// Worker OS processes.
    #[arg(long, default_value_t = 4)]
    pub processes: u64,
    /// Concurrent buyers (tokio tasks) per process.
    #[arg(long, default_value_t = 16)]
    pub concurrency: u64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// The private deployment to start when no --url is given: one server, a Sentinel set
    /// (master, 2 replicas, 3 sentinels) or a Redis Cluster (3 masters, 3 replicas).
    #[arg(long, value_enum, default_value_t = Topology::Standalone)]
    pub topology: Topology,
}

#[derive(Args, Debug)]
pub struct WorkerArgs {
    #[arg(long)]
    run: String,
    #[arg(long)]
    users: u64,
    #[arg(long)]
    attempts: u64,
    #[arg(long)]
    vouchers: u64,
    #[arg(long)]
    worker: u64,
    #[arg(long)]
    workers: u64,
    #[arg(long)]
    concurrency: u64,
}

/// What a worker reports on its last stdout line (`result <json>`).
#[derive(Serialize, Deserialize, Debug, Default)]
struct WorkerReport {
    attempts: u64,
    acquisitions: u64,
    placed: u64,
    sold_out: u64,
    refused_duplicate: u64,
    wait_us: Vec<u64>,
}

/// The summary `demo --json` prints.
#[derive(Serialize, Debug)]
struct Summary {
    stock_initial: u64,
    vouchers: u64,
    users: u64,
    attempts_per_user: u64,
    processes: u64,
    orders: u64,
    stock_left: i64,
    oversold: u64,
    duplicate_orders: u64,
    consistent: bool,
    refused_duplicate: u64,
    sold_out_attempts: u64,
    acquisitions: u64,
    seconds: f64,
    acquisitions_per_s: f64,
    wait_p50_us: u64,
    wait_p99_us: u64,
    ok: bool,
}

fn keys(run: &str) -> Keys {
    Keys {
        base: format!("demo:{run}:"),
    }
}

struct Keys {
    base: String,
}

impl Keys {
    fn stock(&self, v: u64) -> String {
        format!("{}stock:{v}", self.base)
    }
    fn orders(&self) -> String {
        format!("{}orders", self.base)
    }
    fn user_orders(&self, u: u64) -> String {
        format!("{}user-orders:{u}", self.base)
    }
    fn user_lock(&self, u: u64) -> String {
        format!("{}lock:order:{u}", self.base)
    }
    fn stock_lock(&self, v: u64) -> String {
        format!("{}lock:stock:{v}", self.base)
    }
}

/// The `p` percentile (0 to 100) of a µs histogram; 0 without samples. Nearest rank, as
/// `value_at_quantile` reads it (3 significant figures).
fn percentile(h: &Histogram<u64>, p: f64) -> u64 {
    if h.is_empty() {
        return 0;
    }
    h.value_at_quantile(p / 100.0)
}

pub async fn run(opts: &Options, args: DemoArgs) -> Result<u8> {
    for (what, v) in [
        ("--stock", args.stock),
        ("--users", args.users),
        ("--attempts", args.attempts),
        ("--vouchers", args.vouchers),
        ("--processes", args.processes),
        ("--concurrency", args.concurrency),
    ] {
        if v == 0 {
            bail!("{what} must be at least 1");
        }
    }
    if args.processes > 64 || args.concurrency > 1024 {
        bail!("at most 64 processes and 1024 tasks per process");
    }
    let (url, _server) = url_or_embedded(opts, args.topology)?;
    let run_id = uuid_like();
    let k = keys(&run_id);
    // The sale's data goes over the library's connection: on Sentinel to the master, on a
    // Cluster routed by key.
    let client = opts.client_for(&url).await?;
    let mut con = client.redis_connection();

    // Stock per voucher: even split, the remainder on the first vouchers.
    let mut stock_initial = HashMap::new();
    for v in 0..args.vouchers {
        let s = args.stock / args.vouchers + u64::from(v < args.stock % args.vouchers);
        stock_initial.insert(v, s);
        let _: () = con.set(k.stock(v), s).await?;
    }

    let total_attempts = args.users * args.attempts;
    let bar = indicatif::ProgressBar::new(total_attempts);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} flash sale {bar:40} {pos}/{len} attempts  {per_sec}  {elapsed}",
        )
        .expect("template"),
    );
    if args.json {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }

    let exe = std::env::current_exe().context("cannot find the distlock-bench binary")?;
    let started = Instant::now();
    let mut children = Vec::new();
    for w in 0..args.processes {
        let mut cmd = tokio::process::Command::new(&exe);
        cmd.arg("--url")
            .arg(&url)
            .arg("--key-prefix")
            .arg(&opts.key_prefix)
            .arg("--connect-timeout")
            .arg(humantime::format_duration(opts.connect_timeout).to_string())
            .arg("--command-timeout")
            .arg(humantime::format_duration(opts.command_timeout).to_string())
            .arg("demo-worker")
            .args(["--run", &run_id])
            .args(["--users", &args.users.to_string()])
            .args(["--attempts", &args.attempts.to_string()])
            .args(["--vouchers", &args.vouchers.to_string()])
            .args(["--worker", &w.to_string()])
            .args(["--workers", &args.processes.to_string()])
            .args(["--concurrency", &args.concurrency.to_string()])
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        children.push(cmd.spawn().context("cannot start a worker process")?);
    }
    let mut readers = Vec::new();
    for child in &mut children {
        let stdout = child.stdout.take().expect("piped");
        let bar = bar.clone();
        readers.push(tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            let mut report = None;
            let mut shown = 0u64;
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(n) = line.strip_prefix("progress ") {
                    let total: u64 = n.parse().unwrap_or(shown);
                    bar.inc(total.saturating_sub(shown));
                    shown = shown.max(total);
                } else if let Some(json) = line.strip_prefix("result ") {
                    report = serde_json::from_str::<WorkerReport>(json).ok();
                }
            }
            report
        }));
    }
    let mut reports = Vec::new();
    for (child, reader) in children.iter_mut().zip(readers) {
        let status = child.wait().await?;
        let report = reader.await?;
        match report {
            Some(r) if status.success() => reports.push(r),
            _ => bail!("a demo worker failed ({status})"),
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();

    // Check the invariants from what is in Redis, not from what the workers say.
    let orders: Vec<String> = con.lrange(k.orders(), 0, -1).await?;
    let mut per_pair: HashMap<&str, u64> = HashMap::new();
    let mut per_voucher: HashMap<u64, u64> = HashMap::new();
    for o in &orders {
        *per_pair.entry(o.as_str()).or_default() += 1;
        let v: u64 = o
            .rsplit(':')
            .next()
            .and_then(|v| v.parse().ok())
            .context("malformed order record")?;
        *per_voucher.entry(v).or_default() += 1;
    }
    let duplicate_orders: u64 = per_pair.values().map(|n| n - 1).sum();
    let mut stock_left: i64 = 0;
    let mut oversold: u64 = 0;
    for v in 0..args.vouchers {
        let left: i64 = con.get(k.stock(v)).await?;
        stock_left += left;
        let sold = per_voucher.get(&v).copied().unwrap_or(0);
        oversold += sold.saturating_sub(stock_initial[&v]);
        if left < 0 {
            oversold = oversold.max((-left) as u64);
        }
    }
    let consistent = orders.len() as i64 + stock_left == args.stock as i64;

    let mut waits = Histogram::<u64>::new(3).expect("3 significant figures are supported");
    for &w in reports.iter().flat_map(|r| r.wait_us.iter()) {
        // It grows as needed; only a wait beyond its largest range fails, and is clamped.
        if waits.record(w).is_err() {
            waits.saturating_record(w);
        }
    }
    let acquisitions: u64 = reports.iter().map(|r| r.acquisitions).sum();
    let summary = Summary {
        stock_initial: args.stock,
        vouchers: args.vouchers,
        users: args.users,
        attempts_per_user: args.attempts,
        processes: args.processes,
        orders: orders.len() as u64,
        stock_left,
        oversold,
        duplicate_orders,
        consistent,
        refused_duplicate: reports.iter().map(|r| r.refused_duplicate).sum(),
        sold_out_attempts: reports.iter().map(|r| r.sold_out).sum(),
        acquisitions,
        seconds,
        acquisitions_per_s: acquisitions as f64 / seconds,
        wait_p50_us: percentile(&waits, 50.0),
        wait_p99_us: percentile(&waits, 99.0),
        ok: oversold == 0 && duplicate_orders == 0 && consistent,
    };

    // Leave nothing behind on a shared server.
    let mut cleanup: Vec<String> = (0..args.vouchers).map(|v| k.stock(v)).collect();
    cleanup.push(k.orders());
    cleanup.extend((0..args.users).map(|u| k.user_orders(u)));
    for chunk in cleanup.chunks(500) {
        let _: i64 = con.del(chunk).await?;
    }

    if args.json {
        outln!("{}", serde_json::to_string(&summary)?)?;
    } else {
        print_table(&summary)?;
    }
    Ok(if summary.ok {
        0
    } else {
        exit::INVARIANT_BROKEN
    })
}

/// The summary as an aligned block: label, figure (right-aligned), remark; no borders.
fn print_table(s: &Summary) -> Result<()> {
    let mark = |ok: bool| if ok { "ok" } else { "BROKEN" };
    let rows: [(&str, String, String); 11] = [
        (
            "stock (initial)",
            s.stock_initial.to_string(),
            format!("over {} vouchers", s.vouchers),
        ),
        (
            "purchase attempts",
            (s.users * s.attempts_per_user).to_string(),
            format!(
                "{} users x {} attempts, {} processes",
                s.users, s.attempts_per_user, s.processes
            ),
        ),
        ("orders placed", s.orders.to_string(), String::new()),
        ("stock left", s.stock_left.to_string(), String::new()),
        (
            "oversold",
            s.oversold.to_string(),
            mark(s.oversold == 0).to_string(),
        ),
        (
            "duplicate orders",
            s.duplicate_orders.to_string(),
            mark(s.duplicate_orders == 0).to_string(),
        ),
        (
            "orders + stock left",
            (s.orders as i64 + s.stock_left).to_string(),
            format!("{} (= initial stock)", mark(s.consistent)),
        ),
        (
            "refused attempts",
            (s.refused_duplicate + s.sold_out_attempts).to_string(),
            format!(
                "(already ordered: {}, sold out: {})",
                s.refused_duplicate, s.sold_out_attempts
            ),
        ),
        (
            "lock acquisitions",
            s.acquisitions.to_string(),
            format!("in {:.2} s", s.seconds),
        ),
        (
            "acquisitions/s",
            format!("{:.0}", s.acquisitions_per_s),
            String::new(),
        ),
        (
            "acquire wait p50 (us)",
            s.wait_p50_us.to_string(),
            format!("p99 {} us", s.wait_p99_us),
        ),
    ];
    let mut table = Table::new();
    table.load_style(comfy_table::presets::NOTHING);
    table.add_rows(rows.map(|(label, figure, remark)| [label.to_string(), figure, remark]));
    // Indented by two, three spaces before the remark.
    let paddings = [(2, 2), (0, 0), (3, 0)];
    for (column, padding) in table.column_iter_mut().zip(paddings) {
        column.set_padding(padding);
    }
    if let Some(figures) = table.column_mut(1) {
        figures.set_cell_alignment(CellAlignment::Right);
    }
    outln!("distlock-bench demo: flash sale, one order per user per voucher")?;
    outln!("{}", table.trim_fmt())?;
    outln!("result: {}", if s.ok { "OK" } else { "INVARIANT BROKEN" })
}

/// A short random run id, so concurrent demos on one server do not collide.
fn uuid_like() -> String {
    let mut rng = rand::rng();
    (0..8)
        .map(|_| char::from(b"0123456789abcdef"[rng.random_range(0..16)]))
        .collect()
}

pub async fn worker(opts: &Options, args: WorkerArgs) -> Result<u8> {
    let url = opts
        .url
        .clone()
        .context("demo-worker needs --url (it is started by `distlock-bench demo`)")?;
    let client = opts.client_for(&url).await?;
    let con = client.redis_connection();
    let k = Arc::new(keys(&args.run));

    // This worker's attempts: (user, voucher) for every (u, j) with (u + j) mod P == worker.
    // The voucher of attempt (u, j) is fixed by the run id, the same in every process.
    let seed = args
        .run
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut work = Vec::new();
    for u in 0..args.users {
        for j in 0..args.attempts {
            let v = rng.random_range(0..args.vouchers);
            if (u + j) % args.workers == args.worker {
                work.push((u, v));
            }
        }
    }
    let work = Arc::new(work);
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let report = Arc::new(Mutex::new(WorkerReport::default()));

    let printer = {
        let done = done.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                // Read by `demo`; nobody left to tell when it is gone.
                if outln!("progress {}", done.load(Ordering::Relaxed)).is_err() {
                    break;
                }
            }
        })
    };

    let mut tasks = Vec::new();
    for _ in 0..args.concurrency {
        let (client, mut con, k) = (client.clone(), con.clone(), k.clone());
        let (work, next, done, report) = (work.clone(), next.clone(), done.clone(), report.clone());
        tasks.push(tokio::spawn(async move {
            let mut mine = WorkerReport::default();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(u, v)) = work.get(i) else { break };
                mine.attempts += 1;
                let t = Instant::now();
                let user = client.lock(k.user_lock(u)).acquire().await?;
                mine.wait_us.push(t.elapsed().as_micros() as u64);
                mine.acquisitions += 1;
                let already: bool = con.sismember(k.user_orders(u), v).await?;
                if already {
                    mine.refused_duplicate += 1;
                } else {
                    let t = Instant::now();
                    let stock = client.lock(k.stock_lock(v)).acquire().await?;
                    mine.wait_us.push(t.elapsed().as_micros() as u64);
                    mine.acquisitions += 1;
                    let left: i64 = con.get(k.stock(v)).await?;
                    if left > 0 {
                        let _: () = con.set(k.stock(v), left - 1).await?;
                        let _: i64 = con.sadd(k.user_orders(u), v).await?;
                        let _: i64 = con.rpush(k.orders(), format!("{u}:{v}")).await?;
                        mine.placed += 1;
                    } else {
                        mine.sold_out += 1;
                    }
                    stock.release().await?;
                }
                user.release().await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            let mut r = report.lock().unwrap();
            r.attempts += mine.attempts;
            r.acquisitions += mine.acquisitions;
            r.placed += mine.placed;
            r.sold_out += mine.sold_out;
            r.refused_duplicate += mine.refused_duplicate;
            r.wait_us.extend(mine.wait_us);
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    printer.abort();
    outln!("progress {}", done.load(Ordering::Relaxed))?;
    let report = std::mem::take(&mut *report.lock().unwrap());
    outln!("result {}", serde_json::to_string(&report)?)?;
    Ok(0)
}
