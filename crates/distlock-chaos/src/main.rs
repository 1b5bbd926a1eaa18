//! `distlock-chaos`: a fault suite for distlock. It starts real `redis-server` topologies,
//! runs workloads from several OS processes (this binary, spawned as workers), injects faults
//! on a schedule, records a Jepsen-style history and checks it offline.

mod check;
mod history;
mod nemesis;
mod proxy;
mod resource;
mod run;
mod scenario;
mod timeline;
mod topology;
mod worker;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;

use crate::scenario::Profile;
use crate::topology::Topology;

/// A Jepsen-style fault suite for distlock, on real redis-server processes.
///
/// Each scenario starts a deployment (one server, Sentinel, Cluster or five RedLock masters)
/// and a fenced resource on a server of its own, runs a workload from 4 worker processes,
/// injects one kind of fault on a schedule, then checks the recorded history: exclusion (E),
/// fencing (F), lost updates (U), liveness (L) and orphans (O). One JSON line per scenario
/// goes to stdout, a table to stderr; a failed scenario keeps its history, the servers' logs
/// and a timeline (SVG) under --out. Exit status 1 when a scenario fails (scenarios that show
/// a known limit of Redis are reported, not failed).
#[derive(Parser, Debug)]
#[command(name = "distlock-chaos", version)]
struct Args {
    /// Run only the scenarios on this deployment.
    #[arg(long, default_value = "all")]
    topology: String,
    /// Scenarios to run: `all`, or names separated by commas (see --list).
    #[arg(long, default_value = "all")]
    scenario: String,
    /// full: each scenario at its own length (the figures of the docs, about 25 minutes in
    /// all); short: a few seconds each (CI, about 3 minutes).
    #[arg(long, value_enum, default_value = "full")]
    profile: Profile,
    /// Run each scenario this long instead (e.g. 20s), faults on their own schedule.
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// Where failed scenarios keep their files.
    #[arg(long, default_value = "chaos-out")]
    out: PathBuf,
    /// Keep every scenario's files, passed or not.
    #[arg(long)]
    keep: bool,
    /// List the scenarios and exit.
    #[arg(long)]
    list: bool,
}

fn main() -> ExitCode {
    let mut args = std::env::args();
    if args.nth(1).as_deref() == Some("worker") {
        let spec = args.next().unwrap_or_default();
        let result = serde_json::from_str(&spec)
            .context("a worker's spec")
            .and_then(worker::main);
        return match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("distlock-chaos worker: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    match suite(Args::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("distlock-chaos: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn suite(args: Args) -> anyhow::Result<bool> {
    let mut scenarios = scenario::all(args.profile);
    if args.topology != "all" {
        let t = <Topology as clap::ValueEnum>::from_str(&args.topology, true)
            .map_err(|e| anyhow::anyhow!("--topology: {e}"))?;
        scenarios.retain(|s| s.topology == t);
    }
    if args.scenario != "all" {
        let names: Vec<&str> = args.scenario.split(',').map(str::trim).collect();
        for n in &names {
            if !scenarios.iter().any(|s| s.name == *n) {
                anyhow::bail!("--scenario: no scenario {n} (on this topology); see --list");
            }
        }
        scenarios.retain(|s| names.contains(&s.name));
    }
    if let Some(d) = args.duration {
        for s in &mut scenarios {
            s.duration = d;
        }
    }
    if args.list {
        for s in &scenarios {
            println!("{:<22} {:<11} {}", s.name, s.topology.name(), s.about);
        }
        return Ok(true);
    }
    let mut rows = Vec::new();
    let mut ok = true;
    for s in &scenarios {
        eprintln!(
            "distlock-chaos: {} ({}) for up to {:?}",
            s.name,
            s.topology.name(),
            s.duration
        );
        let row = run::scenario(s, &args.out, args.keep)?;
        println!("{}", serde_json::to_string(&row)?);
        for v in row.findings.violations.iter().take(5) {
            eprintln!("  violation ({:?}): {}", v.property, v.detail);
        }
        if let Some(k) = &row.kept {
            eprintln!("  kept: {k}");
        }
        ok &= row.passed || row.known_limit;
        rows.push(row);
    }
    eprintln!("{}", report::table(&rows));
    Ok(ok)
}

mod report {
    //! The table of a run.
    use comfy_table::{presets::ASCII_MARKDOWN, Table};

    use crate::run::Row;

    /// A Markdown table of the rows.
    pub fn table(rows: &[Row]) -> String {
        let mut t = Table::new();
        t.load_style(ASCII_MARKDOWN);
        t.set_header([
            "scenario",
            "topology",
            "s",
            "grants",
            "faults",
            "overlaps",
            "lost leases",
            "stale writes accepted / refused",
            "lost updates",
            "max wait while free, ms",
            "max gap between grants, ms",
            "orphans",
            "passed",
        ]);
        for r in rows {
            let passed = match (r.passed, r.known_limit) {
                (true, _) => "yes".to_owned(),
                (false, true) => "no (known limit)".to_owned(),
                (false, false) => "NO".to_owned(),
            };
            let overlaps = if r.findings.excused_overlaps > 0 {
                format!(
                    "{} (+{} of a lost lease)",
                    r.findings.overlaps, r.findings.excused_overlaps
                )
            } else {
                r.findings.overlaps.to_string()
            };
            t.add_row([
                r.scenario.clone(),
                r.topology.clone(),
                format!("{:.0}", r.duration_s),
                r.findings.grants.to_string(),
                r.findings.faults.to_string(),
                overlaps,
                r.findings.lost_leases.to_string(),
                format!(
                    "{} / {}",
                    r.findings.stale_writes_accepted, r.findings.stale_writes_rejected
                ),
                r.findings.lost_updates.to_string(),
                r.findings.max_unavailable_ms.to_string(),
                r.findings.max_grant_gap_ms.to_string(),
                r.findings.orphans.to_string(),
                passed,
            ]);
        }
        t.to_string()
    }
}
