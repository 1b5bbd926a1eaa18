//! `distlock-bench bench`: the four standard workloads (`uncontended`, `distinct`, `contended`,
//! `handoff`, defined alike for distlock and the libraries it is compared with) measured on
//! distlock's [`Lock`](distlock::Lock), plus three distlock-only workloads:
//!
//! - `watchdog`: one client holds many locks under the watchdog (short lease) and we count
//!   the Redis commands and the CPU time their renewal costs;
//! - `waiters`: many tasks of one client wait on one lock; one subscription serves them all,
//!   and each release hands the lock to the next waiter;
//! - `memory`: bytes and keys per held lock, and keys left behind per idle lock name;
//! - `lost`: how soon a holder's lost signal fires after another client force-unlocks its
//!   lock.
//!
//! Output: a table once every workload has run, or with `--json` one line per workload in
//! the format of the other libraries' drivers (`impl` = `rust/distlock`), so the lines
//! compare side by side. Sizes come from the same `BENCH_*` environment variables.
//!
//! Redis-side cost: `uncontended`, `distinct`, `contended` and `handoff` read
//! `INFO commandstats` of every master (on a Cluster each master's own, as redis-rs answers
//! `INFO` with one text per master) just before and just after their measured part, and add
//! to `extra` (see [`server`]):
//!
//! - `server_us_per_pair`: the time Redis spent in scripts (`usec` of `EVAL`, `EVALSHA`,
//!   their `_RO` forms and `FCALL`/`FCALL_RO`, summed over the masters) during the measured
//!   part, in µs, divided by its acquire+release pairs: `ops` for `uncontended`, `distinct`
//!   and `contended`, 2 × `ops` for `handoff` (A's pair and B's pair per repetition). Every
//!   acquire attempt, failed ones included, and every release is one script, so this is what
//!   a pair costs Redis, contention included. Scripts only: the bench's own commands
//!   (`contended`'s counter `GET`/`SET`, the `INFO` calls) are not scripts and stay out, and
//!   so do the library's few non-script commands (waiters' `SUBSCRIBE`/`UNSUBSCRIBE`). A
//!   script's `usec` already includes the commands it runs with `redis.call` (also listed
//!   under their own names, not added again). It is wall time inside the server: on a busy
//!   machine a descheduled server's wait counts too.
//! - `server_calls_per_pair`: the scripts run per pair (same count, same divisor; 3
//!   decimals): 2.0 for an uncontended pair (one acquire, one release), more where acquires
//!   fail first and retry (`contended`; `handoff`: 3.0, as B tries before and after
//!   subscribing and once more when woken).
//! - `server_reads_per_pair`: the socket reads the servers processed per pair
//!   (`total_reads_processed` of `INFO stats`, every client's, summed over the masters; 3
//!   decimals). Below `server_calls_per_pair` when requests arrive pipelined: `distinct`'s
//!   clients are tasks sharing one multiplexed connection, whose concurrent `EVALSHA`s reach
//!   the server several to a read; about 2 for `uncontended` (one request in flight).
//! - On a Cluster only: `server_us_per_master`, one figure per master, its own script time
//!   divided by all the workload's pairs (so they add up to `server_us_per_pair`), and
//!   `server_masters`, the masters' addresses in the same order (by host, then port).
//!   `distinct`'s lock names spread over the masters; the other workloads use one lock name,
//!   so one master does the work.
//!
//! All `null` when `INFO` cannot be read (said once on stderr). The table shows them at the
//! end of the notes (`Redis 27.0 µs in 2.00 scripts (2.01 reads) per pair`, on a Cluster
//! followed by `(per master 19.6 / 40.6 / 18.8)`).
//!
//! Charts: `--plot DIR` writes SVG charts of the run into DIR (created if missing), plus
//! `bench-data.json`, the recorded distributions they are drawn from (format in [`data`]):
//!
//! - `acquire-cdf.svg`: acquire latency, cumulative, of `uncontended`, `distinct` and
//!   `contended` (how long each acquire waited);
//! - `handoff.svg`: hand-off latency, cumulative, of `handoff` and of `contended`
//!   (hand-offs between different clients);
//! - `contended-per-client.svg`: the acquisitions each client got in `contended`;
//! - `throughput.svg` (with `--compare` only): ops/s of every implementation.
//!
//! `--png` writes a PNG beside each SVG (the text needs a font on the system: Debian's
//! `fonts-dejavu-core`, for one). `--compare FILE…` draws other runs' JSON lines beside
//! distlock's (another library's, or an earlier distlock run): they carry only percentiles,
//! so they are drawn as steps through p50, p90, p99 and max. `--from DIR/bench-data.json`
//! draws the charts again without running anything. A bad `--compare` or `--from` file, or
//! no font for `--png`, is an error before anything runs or is written. See [`plot`].
//!
//! Without `--url` (or `DISTLOCK_URL`) a private deployment is started, as for `demo`:
//! `--topology standalone` (the default) one `redis-server`, `sentinel` a master with 2
//! replicas and 3 sentinels, `cluster` a Redis Cluster of 3 masters with a replica each.

mod data;
mod native;
mod plot;
mod report;
mod server;
mod standard;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use comfy_table::{CellAlignment, Table};
use distlock::Client;
use serde_json::Value;

use crate::connect::Options;
use crate::embedded::{url_or_embedded, Embedded, Topology};
use crate::exit;
use crate::out::{errln, outln};
use report::Line;

/// Every workload, in the default order.
pub const WORKLOADS: &[&str] = &[
    "uncontended",
    "distinct",
    "contended",
    "handoff",
    "watchdog",
    "waiters",
    "memory",
    "lost",
];

/// Key prefix of every benchmark key (the peers' `--prefix` default).
pub const PREFIX: &str = "bench:";

/// Arguments of `distlock-bench bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Workloads to run, comma-separated, in the given order. Unknown names are skipped with
    /// a warning.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "uncontended,distinct,contended,handoff,watchdog,waiters,memory,lost"
    )]
    pub workloads: Vec<String>,

    /// Concurrent clients of `distinct` and `contended`.
    #[arg(long, env = "BENCH_CLIENTS", hide_env_values = true, default_value_t = 16,
          value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub clients: u64,

    /// How the plain locks of the workloads pass from a releasing holder to their waiters:
    /// fifo (direct hand-off in arrival order, the library's default), retakes:N (the same,
    /// but up to N acquisitions in a row may pass the queue's head: the releasing client
    /// re-takes the lock) or off (Redisson's behaviour: a release frees the lock and wakes
    /// a waiter; whoever attempts first gets it).
    #[arg(long, value_name = "POLICY", default_value = "fifo", value_parser = parse_handoff)]
    pub handoff: distlock::Handoff,

    /// The private deployment to start when neither --url nor DISTLOCK_URL is given: one
    /// redis-server (standalone, the default), a Sentinel set (a master, 2 replicas, 3
    /// sentinels) or a Redis Cluster (3 masters with a replica each; the lock names of
    /// distinct spread over the masters, and the Redis-side time of each master is
    /// reported). With a URL it does not apply: the bench runs on the deployment the URL
    /// names.
    #[arg(long, value_enum, value_name = "TOPOLOGY")]
    pub topology: Option<Topology>,

    /// Print one JSON line per workload instead of the table (the format of the comparison
    /// with other lock libraries), and no progress bar. uncontended, distinct, contended and
    /// handoff add the time Redis spent in the lock scripts per acquire+release pair
    /// (server_us_per_pair, from INFO commandstats of every master), the scripts run per pair
    /// (server_calls_per_pair), the socket reads the server processed per pair (below the
    /// scripts when requests arrive pipelined: server_reads_per_pair, from INFO stats) and,
    /// on a Cluster, each master's share of that time (server_us_per_master, in the order of
    /// server_masters).
    #[arg(long)]
    pub json: bool,

    /// Write charts of the run into DIR (created if missing), as SVG: acquire-cdf.svg
    /// (acquire latency of uncontended, distinct and contended, cumulative %, latency on a
    /// log axis in µs/ms/s), handoff.svg (hand-off latency of handoff and contended, same
    /// axes), contended-per-client.svg (acquisitions of each client in contended, counts),
    /// with --compare also throughput.svg (ops/s per implementation); and bench-data.json
    /// (the recorded latency distributions, in ns, for --from). Charts of workloads that did
    /// not run are left out. Where the charts went is said on stdout (stderr with --json).
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,

    /// With --plot: also write a PNG of every chart beside its SVG (acquire-cdf.png, …).
    /// Needs a font on the system for the text (e.g. Debian's fonts-dejavu-core); without
    /// one it is an error before anything runs.
    #[arg(long, requires = "plot")]
    pub png: bool,

    /// With --plot: draw these runs beside distlock's: JSON-lines files as --json prints
    /// them (any impl, e.g. other lock libraries' runs of the same workloads, or an earlier
    /// distlock run, whose lines are labelled "rust/distlock (FILE)"). They carry only
    /// percentiles, drawn as steps through p50, p90, p99 and max (µs); adds
    /// throughput.svg. Lines of one impl and workload in several files (rounds) are drawn
    /// as the median of each figure. A file that cannot be read, has a line that is not a
    /// JSON object with "impl" and "workload", or no line of uncontended, distinct,
    /// contended or handoff is an error before anything runs or is written.
    #[arg(long, value_name = "FILE", num_args = 1.., requires = "plot")]
    pub compare: Vec<PathBuf>,

    /// With --plot: draw the charts from the bench-data.json an earlier --plot wrote,
    /// instead of running the benchmark (no server is used; --workloads, --clients and the
    /// BENCH_* sizes do not apply). Writes the charts only, not bench-data.json.
    #[arg(long, value_name = "FILE", requires = "plot")]
    pub from: Option<PathBuf>,
}

/// The file of `--plot DIR` that keeps the distributions the charts are drawn from.
pub const DATA_FILE: &str = "bench-data.json";

/// `--plot`: where the charts go and what they need, all checked before the run.
struct PlotOut {
    dir: PathBuf,
    png: Option<plot::Png>,
    peers: Vec<data::Peer>,
    /// `--from`: distlock's workloads from an earlier run's bench-data.json.
    from: Option<(String, Vec<data::Own>)>,
}

impl PlotOut {
    /// Read the `--compare` and `--from` files, find a font for `--png`, then create the
    /// directory: a bad file or no font fails before anything is written.
    fn prepare(dir: &Path, args: &BenchArgs) -> Result<PlotOut> {
        let peers = data::load_compare(&args.compare)?;
        let from = match &args.from {
            Some(path) => {
                let name = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| path.display().to_string());
                Some((format!("{} ({name})", report::IMPL), data::load_data(path)?))
            }
            None => None,
        };
        let png = if args.png {
            Some(plot::Png::new()?)
        } else {
            None
        };
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--plot {}: cannot create the directory", dir.display()))?;
        Ok(PlotOut {
            dir: dir.to_path_buf(),
            png,
            peers,
            from,
        })
    }

    /// Draw the charts (and with `data`, bench-data.json) in memory, then write them; say
    /// where on stdout, or on stderr with `json`.
    fn write(
        &self,
        own: &[data::Own],
        own_label: String,
        with_data: bool,
        json: bool,
    ) -> Result<()> {
        let charts = plot::charts(&plot::Inputs {
            own,
            own_label,
            peers: &self.peers,
        })?;
        let mut files: Vec<(String, Vec<u8>)> = Vec::new();
        for c in &charts {
            if let Some(png) = &self.png {
                files.push((format!("{}.png", c.name), png.render(&c.svg)?));
            }
            files.push((format!("{}.svg", c.name), c.svg.clone().into_bytes()));
        }
        if with_data {
            files.push((DATA_FILE.to_string(), data::to_json(own).into_bytes()));
        }
        for (name, bytes) in &files {
            let path = self.dir.join(name);
            std::fs::write(&path, bytes)
                .with_context(|| format!("--plot: cannot write {}", path.display()))?;
        }
        let svgs: Vec<String> = charts.iter().map(|c| format!("{}.svg", c.name)).collect();
        let mut msg = format!("distlock-bench bench: charts in {}: ", self.dir.display());
        if svgs.is_empty() {
            msg.push_str(&format!("none (none of {} ran)", data::CHARTED.join(", ")));
        } else {
            msg.push_str(&svgs.join(", "));
            if let Some(png) = &self.png {
                msg.push_str(&format!(" (and .png of each, text in {})", png.family));
            }
        }
        if with_data {
            msg.push_str(&format!("; data: {DATA_FILE}"));
        }
        if json {
            errln!("{msg}");
        } else {
            outln!("{msg}")?;
        }
        Ok(())
    }
}

/// Workload sizes: the standard workloads' `BENCH_*` environment variables (same names, same
/// defaults as the compared libraries' runs), plus the distlock-only ones.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `--clients` / `BENCH_CLIENTS` (16).
    pub clients: u64,
    /// `BENCH_WARMUP` (200): warm-up pairs of `uncontended` (`distinct`: per client
    /// max(warmup / clients, 2)).
    pub warmup: u64,
    /// `BENCH_UNCONTENDED_OPS` (5,000).
    pub uncontended_ops: u64,
    /// `BENCH_DISTINCT_OPS` (20,000).
    pub distinct_ops: u64,
    /// `BENCH_KEYS` (10,000): lock names of `distinct`.
    pub keys: u64,
    /// `BENCH_CONTENDED_OPS` (5,000).
    pub contended_ops: u64,
    /// `BENCH_MAX_SECONDS` (10): measurement cap of the throughput workloads.
    pub max: Duration,
    /// `BENCH_HANDOFF_REPS` (200).
    pub handoff_reps: u64,
    /// `BENCH_HANDOFF_MAX_SECONDS` (120).
    pub handoff_max: Duration,
    /// `BENCH_HOLD_MIN_MS` (10).
    pub hold_min_ms: u64,
    /// `BENCH_HOLD_MAX_MS` (210).
    pub hold_max_ms: u64,
    /// `BENCH_WAIT_SECONDS` (10): the acquire wait bound.
    pub wait: Duration,
    /// `BENCH_WATCHDOG_LOCKS` (10,000): locks held in `watchdog`.
    pub watchdog_locks: u64,
    /// `BENCH_WATCHDOG_SECONDS` (60): how long `watchdog` holds them.
    pub watchdog_hold: Duration,
    /// `BENCH_WATCHDOG_LEASE_MS` (3,000): the watchdog lease of the `watchdog` client
    /// (renewal every third of it).
    pub watchdog_lease: Duration,
    /// `BENCH_WAITERS` (1,000): tasks waiting in `waiters`.
    pub waiters: u64,
    /// `BENCH_MEMORY_LOCKS` (1,000): locks held in `memory`.
    pub memory_locks: u64,
    /// `BENCH_LOST_REPS` (200): force unlocks in `lost`.
    pub lost_reps: u64,
    /// `--handoff`: the plain locks' hand-off policy.
    pub handoff: distlock::Handoff,
}

/// `--handoff`: `fifo`, `retakes:<n>` or `off`.
fn parse_handoff(s: &str) -> std::result::Result<distlock::Handoff, String> {
    match s {
        "fifo" => Ok(distlock::Handoff::Fifo),
        "off" => Ok(distlock::Handoff::Off),
        _ => s
            .strip_prefix("retakes:")
            .and_then(|n| n.parse::<u32>().ok())
            .map(distlock::Handoff::Retakes)
            .ok_or_else(|| format!("{s:?}: expected fifo, off or retakes:<n> (n a count)")),
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn env_secs(name: &str, default: f64) -> Duration {
    let secs = std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
        .unwrap_or(default);
    Duration::from_secs_f64(secs.min(365.0 * 24.0 * 3600.0))
}

impl Settings {
    /// Sizes from the environment; `clients` from `--clients` (which reads `BENCH_CLIENTS`).
    pub fn from_env(clients: u64) -> Settings {
        Settings {
            clients: clients.max(1),
            warmup: env_u64("BENCH_WARMUP", 200),
            uncontended_ops: env_u64("BENCH_UNCONTENDED_OPS", 5000),
            distinct_ops: env_u64("BENCH_DISTINCT_OPS", 20000),
            keys: env_u64("BENCH_KEYS", 10000),
            contended_ops: env_u64("BENCH_CONTENDED_OPS", 5000),
            max: env_secs("BENCH_MAX_SECONDS", 10.0),
            handoff_reps: env_u64("BENCH_HANDOFF_REPS", 200),
            handoff_max: env_secs("BENCH_HANDOFF_MAX_SECONDS", 120.0),
            hold_min_ms: env_u64("BENCH_HOLD_MIN_MS", 10),
            hold_max_ms: env_u64("BENCH_HOLD_MAX_MS", 210),
            wait: env_secs("BENCH_WAIT_SECONDS", 10.0),
            watchdog_locks: env_u64("BENCH_WATCHDOG_LOCKS", 10000).max(1),
            watchdog_hold: env_secs("BENCH_WATCHDOG_SECONDS", 60.0),
            watchdog_lease: Duration::from_millis(env_u64("BENCH_WATCHDOG_LEASE_MS", 3000).max(3)),
            waiters: env_u64("BENCH_WAITERS", 1000).max(1),
            memory_locks: env_u64("BENCH_MEMORY_LOCKS", 1000).max(1),
            lost_reps: env_u64("BENCH_LOST_REPS", 200).max(1),
            handoff: distlock::Handoff::default(),
        }
    }

    /// Lock names per client in `distinct`: `keys / clients`, at least 1.
    pub fn per_client_keys(&self) -> u64 {
        (self.keys / self.clients).max(1)
    }
}

/// What every workload needs: where the server is, the sizes, how to report progress.
pub struct Bench {
    url: String,
    key_prefix: String,
    watchdog_lease: Duration,
    /// The global options (connect and command timeouts among them).
    opts: Options,
    settings: Settings,
    /// A client kept for the data commands of the workloads (its connection routes on
    /// every deployment).
    data: Client,
    json: bool,
    /// Whether a failure to read `INFO commandstats` was said already.
    server_warned: AtomicBool,
}

impl Bench {
    /// A distlock client as the standard workloads use it: one per workload, shared by all
    /// its clients; acquire waits `BENCH_WAIT_SECONDS`; the watchdog lease of the global
    /// `--watchdog-lease` (30 s by default).
    pub async fn client(&self) -> Result<Client> {
        self.client_with_lease(self.watchdog_lease).await
    }

    /// A distlock client with the given watchdog lease.
    pub async fn client_with_lease(&self, lease: Duration) -> Result<Client> {
        let builder = self
            .opts
            .builder_for(self.url.as_str())
            .watchdog_lease(lease)
            .default_wait(self.settings.wait);
        self.opts.connect(builder).await
    }

    /// The command timeout of the bench's clients (`--command-timeout`).
    pub fn command_timeout(&self) -> Duration {
        self.opts.command_timeout
    }

    /// A redis-rs connection for the counter, `INFO`, `PUBSUB`, `MEMORY` and `SCAN`: the
    /// library's, so it reaches the master on Sentinel and routes by key on a Cluster.
    pub fn conn(&self) -> distlock::RedisConnection {
        self.data.redis_connection()
    }

    /// `INFO commandstats` of every master (the scripts' calls and time), taken before and
    /// after a standard workload's measured part for its Redis-side cost. `None` when it
    /// cannot be read (e.g. an ACL user without `+info`), said once on stderr; the
    /// workload runs on without the figures.
    pub async fn server_snapshot(&self, workload: &str) -> Option<server::Snapshot> {
        match server::snapshot(&mut self.conn()).await {
            Ok(s) => Some(s),
            Err(e) => {
                if !self.server_warned.swap(true, Ordering::Relaxed) {
                    errln!(
                        "distlock-bench bench: no Redis-side cost from {workload} on (server_us_per_pair \
                         null): {e:#}"
                    );
                }
                None
            }
        }
    }

    /// The Redis-side figures of a workload over its acquire+release `pairs`
    /// ([`server::cost_extra`]; per master on a Cluster), or `null` ones without both
    /// snapshots.
    pub fn server_cost(
        &self,
        before: Option<server::Snapshot>,
        after: Option<server::Snapshot>,
        pairs: u64,
    ) -> Vec<(&'static str, Value)> {
        match (before, after) {
            (Some(b), Some(a)) => server::cost_extra(&b, &a, pairs, self.is_cluster()),
            _ => vec![
                ("server_us_per_pair", Value::Null),
                ("server_calls_per_pair", Value::Null),
                ("server_reads_per_pair", Value::Null),
            ],
        }
    }

    /// Whether the URL names a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.url.starts_with("redis-cluster://") || self.url.starts_with("rediss-cluster://")
    }

    /// The sizes.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// A progress bar on stderr (hidden with `--json`).
    pub fn bar(&self, what: &str, len: u64) -> indicatif::ProgressBar {
        let bar = indicatif::ProgressBar::new(len);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {msg:<24} {bar:40} {pos}/{len}  {per_sec}  {elapsed}",
            )
            .expect("template"),
        );
        bar.set_message(what.to_string());
        if self.json {
            bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        bar
    }

    /// The `notes` of a line: library version, wait strategy, settings, then `more`.
    pub fn notes(&self, more: &str) -> String {
        let mut n = format!(
            "distlock {}; Lock::acquire: one attempt, then pub/sub wake-up on \
             redisson_lock__channel (retry at the holder's PTTL), wait {:?}; lease {:?} \
             renewed by the watchdog; one Client (1 multiplexed + 1 subscription connection) \
             shared by all clients; hand-off {}",
            env!("CARGO_PKG_VERSION"),
            self.settings.wait,
            self.watchdog_lease,
            match self.settings.handoff {
                distlock::Handoff::Fifo => "fifo".to_string(),
                distlock::Handoff::Retakes(n) => format!("retakes:{n}"),
                _ => "off".to_string(),
            },
        );
        if !self.key_prefix.is_empty() {
            n.push_str(&format!("; key prefix {:?}", self.key_prefix));
        }
        if !more.is_empty() {
            n.push_str("; ");
            n.push_str(more);
        }
        n
    }
}

/// `distlock-bench bench`: run the workloads; exit 0, or 3 when an invariant broke (lost
/// updates in `contended`, keys left behind by released locks in `memory`).
pub async fn run(opts: &Options, args: BenchArgs) -> Result<u8> {
    let plot = match &args.plot {
        Some(dir) => Some(PlotOut::prepare(dir, &args)?),
        None => None,
    };
    if let Some((label, own)) = plot.as_ref().and_then(|p| p.from.as_ref()) {
        let out = plot.as_ref().expect("--from requires --plot");
        out.write(own, label.clone(), false, args.json)?;
        return Ok(0);
    }
    let mut settings = Settings::from_env(args.clients);
    settings.handoff = args.handoff;
    let mut workloads: Vec<&'static str> = Vec::new();
    for w in args
        .workloads
        .iter()
        .map(|w| w.trim())
        .filter(|w| !w.is_empty())
    {
        match WORKLOADS.iter().find(|k| **k == w) {
            Some(k) => workloads.push(k),
            None => errln!(
                "distlock-bench bench: unknown workload {w:?} skipped (known: {})",
                WORKLOADS.join(", ")
            ),
        }
    }
    if let (Some(t), Some(_)) = (args.topology, &opts.url) {
        let name = t.to_possible_value().map(|v| v.get_name().to_string());
        errln!(
            "distlock-bench bench: --topology {} ignored: the server comes from --url or DISTLOCK_URL",
            name.unwrap_or_default()
        );
    }
    let (url, server) = url_or_embedded(opts, args.topology.unwrap_or_default())?;
    // Fail fast (and with the library's message) when the server is unreachable.
    let data = opts.client_for(&url).await?;
    let bench = Bench {
        url,
        key_prefix: opts.key_prefix.clone(),
        watchdog_lease: opts.watchdog_lease,
        opts: opts.clone(),
        settings,
        data,
        json: args.json,
        server_warned: AtomicBool::new(false),
    };
    if !args.json {
        outln!(
            "distlock-bench bench: distlock {} on {}{}",
            env!("CARGO_PKG_VERSION"),
            bench.data.redacted_url(),
            match &server {
                None => "",
                Some(Embedded::Server(_)) => " (private redis-server)",
                Some(Embedded::Sentinel(_)) =>
                    " (private Sentinel set: a master, 2 replicas, 3 sentinels)",
                Some(Embedded::Cluster(_)) =>
                    " (private Redis Cluster: 3 masters with a replica each)",
            }
        )?;
    }
    let mut table = results_table();

    let mut failed = Vec::new();
    let mut broken = false;
    let mut done = Vec::new();
    for w in workloads {
        if w == "memory" && bench.is_cluster() {
            errln!(
                "distlock-bench bench: workload memory skipped: it counts keys with SCAN and \
                 MEMORY USAGE on one server, not across a Cluster"
            );
            continue;
        }
        let result = match w {
            "uncontended" => standard::uncontended(&bench).await,
            "distinct" => standard::distinct(&bench).await,
            "contended" => standard::contended(&bench).await,
            "handoff" => standard::handoff(&bench).await,
            "watchdog" => native::watchdog(&bench).await,
            "waiters" => native::waiters(&bench).await,
            "memory" => native::memory(&bench).await,
            "lost" => native::lost(&bench).await,
            _ => unreachable!("checked above"),
        };
        match result {
            Ok(line) => {
                broken |= line.lost_updates.unwrap_or(0) != 0
                    || line.extra.f64("keys_left_per_idle_name").unwrap_or(0.0) != 0.0;
                if args.json {
                    outln!("{}", line.to_json())?;
                } else {
                    table.add_row(row(&line));
                }
                if plot.is_some() {
                    done.push(data::Own::from_line(&line));
                }
            }
            Err(e) => {
                errln!("distlock-bench bench: workload {w} failed: {e:#}");
                failed.push(w);
            }
        }
    }
    drop(server);
    if !args.json {
        outln!("{}", table.trim_fmt())?;
    }
    if let Some(out) = &plot {
        out.write(
            &done,
            format!("{} (this run)", report::IMPL),
            true,
            args.json,
        )?;
    }
    if !failed.is_empty() {
        anyhow::bail!("workloads failed: {}", failed.join(", "));
    }
    Ok(if broken { exit::INVARIANT_BROKEN } else { 0 })
}

fn lat(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(x) if x < 100.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.0}"),
    }
}

fn ex(line: &Line, key: &str) -> String {
    match line.extra.get(key) {
        None | Some(Value::Null) => "–".into(),
        Some(Value::Number(n)) => {
            let x = n.as_f64().unwrap_or(0.0);
            if n.is_f64() {
                lat(Some(x))
            } else {
                n.to_string()
            }
        }
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

/// The Redis-side cost of a standard workload for its notes: `; Redis 31.2 µs in 2.00
/// scripts (0.31 reads) per pair`, on a Cluster then `(per master 10.1 / 10.6 / 10.5)`; empty when not
/// measured.
fn server_notes(l: &Line) -> String {
    let Some(us) = l.extra.f64("server_us_per_pair") else {
        return String::new();
    };
    let mut n = format!("; Redis {} µs", lat(Some(us)));
    if let Some(calls) = l.extra.f64("server_calls_per_pair") {
        n.push_str(&format!(" in {calls:.2} scripts"));
    }
    if let Some(reads) = l.extra.f64("server_reads_per_pair") {
        n.push_str(&format!(" ({reads:.2} reads)"));
    }
    n.push_str(" per pair");
    if l.workload == "handoff" {
        n.push_str(" (2 pairs per rep)");
    }
    if let Some(Value::Array(masters)) = l.extra.get("server_us_per_master") {
        let each: Vec<String> = masters.iter().map(|v| lat(v.as_f64())).collect();
        n.push_str(&format!(" (per master {})", each.join(" / ")));
    }
    n
}

/// The one-line summary of a workload's own figures in the table.
fn row_notes(l: &Line) -> String {
    let fails = ex(l, "failed_acquires");
    let failed = if fails == "0" || fails == "–" {
        String::new()
    } else {
        format!("; {fails} failed acquires")
    };
    // Failed acquires, then the Redis-side cost: last in the notes.
    let tail = format!("{failed}{}", server_notes(l));
    match l.workload {
        "uncontended" | "distinct" => format!("acquire latency{tail}"),
        "contended" => format!(
            "hand-off latency; same client {} %, served {}/{}, wait p50 {} p99 {} µs{tail}",
            ex(l, "same_client_pct"),
            ex(l, "clients_served"),
            l.clients,
            ex(l, "wait_p50_us"),
            ex(l, "wait_p99_us"),
        ),
        "handoff" => format!(
            "B acquired − A released; {} release races{tail}",
            ex(l, "release_races")
        ),
        "watchdog" => format!(
            "{} locks, lease {} ms: {} commands per renewal period = {} per 100 locks ({} run \
             inside the scripts); CPU {} % of a core; {}/{} alive after {} s",
            l.ops,
            ex(l, "lease_ms"),
            ex(l, "commands_per_period"),
            ex(l, "round_trips_per_100_locks"),
            ex(l, "server_commands_per_period"),
            ex(l, "cpu_pct_of_core"),
            ex(l, "alive_after"),
            l.ops,
            ex(l, "hold_s"),
        ),
        "waiters" => format!(
            "hand-off between consecutive holders; PUBSUB NUMSUB {} while {} waited{tail}",
            ex(l, "numsub"),
            l.clients,
        ),
        "lost" => format!(
            "force unlock called → holder's lost() fired; {} of {} fired within the wait",
            ex(l, "fired"),
            l.ops,
        ),
        "memory" => format!(
            "held: {} B per lock key (MEMORY USAGE), {} keys per lock; released: {} keys per \
             name + {} unlock latches (gone after {} ms) + {} fencing counters (one per slot)",
            ex(l, "memory_usage_bytes"),
            ex(l, "keys_per_held_lock"),
            ex(l, "keys_left_per_idle_name"),
            ex(l, "unlock_latches_after_release"),
            ex(l, "latches_gone_after_ms"),
            ex(l, "fencing_counter_keys"),
        ),
        _ => String::new(),
    }
}

/// The results table, without rows: no borders, one space between columns (two before the
/// notes), the figures right-aligned.
fn results_table() -> Table {
    let mut table = Table::new();
    table.load_style(comfy_table::presets::NOTHING).set_header([
        "workload", "clients", "ops", "seconds", "ops/s", "p50 µs", "p99 µs", "lost", "notes",
    ]);
    let last = table.column_count() - 1;
    for (i, column) in table.column_iter_mut().enumerate() {
        if i == last {
            column.set_padding((1, 0));
        } else {
            column.set_padding((0, 1));
        }
        if i > 0 && i < last {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}

/// A workload's row of the results table.
fn row(l: &Line) -> [String; 9] {
    [
        l.workload.to_string(),
        l.clients.to_string(),
        l.ops.to_string(),
        format!("{:.3}", l.seconds),
        format!("{:.1}", l.ops_per_s),
        lat(l.p50_us),
        lat(l.p99_us),
        l.lost_updates
            .map(|v| v.to_string())
            .unwrap_or_else(|| "–".into()),
        row_notes(l),
    ]
}
