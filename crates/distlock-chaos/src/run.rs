//! Run one scenario: start the deployment, spawn the workers, run the nemesis, collect the
//! histories, look for orphans, check, and keep what a failure needs.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use serde::Serialize;

use crate::check::{self, Findings};
use crate::history::{self, Op, Property, ResourceOp, Type, Violation};
use crate::nemesis::{self, Schedule, Worker};
use crate::scenario::Scenario;
use crate::topology::{query_connection, Deployment};
use crate::worker::{Spec, Workload};

/// One report line: the figures of one scenario.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// The scenario.
    pub scenario: String,
    /// The deployment.
    pub topology: String,
    /// How long the workload ran, s.
    pub duration_s: f64,
    /// What the checkers found (its fields inline in the JSON line).
    #[serde(flatten)]
    pub findings: Findings,
    /// Request records (unlock/acquire latches) still waiting for their TTL at the end: not
    /// orphans, they expire by themselves.
    pub request_records: usize,
    /// A limit of Redis, not of distlock: recorded, does not fail the suite.
    pub known_limit: bool,
    /// No violation.
    pub passed: bool,
    /// Where the history, the server logs and the timeline were kept (failures only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
}

/// Run `s`, keeping its files under `out/<name>` on failure (always with `keep`).
pub fn scenario(s: &Scenario, out: &Path, keep: bool) -> anyhow::Result<Row> {
    let dir = out.join(s.dir);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut d = Deployment::start(s.topology, s.persistent);
    let key = format!("chaos:{}", s.name);
    if s.fault == nemesis::Fault::PartitionClients {
        d.start_proxies(2)?;
    }
    let semaphore = semaphore_of(s, &key);
    if let Some((name, permits, kind)) = &semaphore {
        set_permits(&d, name, *permits, *kind)?;
    }

    let started = Instant::now();
    let mut workers = Vec::new();
    for p in 0..s.processes {
        let process = format!("w{p}");
        let spec = Spec {
            process: process.clone(),
            url: d.url_of(p as usize),
            redlock_urls: d.redlock_urls(),
            resource_url: d.resource.url(),
            workload: s.workload,
            key: key.clone(),
            tasks: s.tasks,
            grants: s.grants.div_ceil(u64::from(s.processes)),
            duration_ms: s.duration.as_millis() as u64,
            lease_ms: s.lease.as_millis() as u64,
            wait_ms: 5_000,
            hold_max_ms: s.hold_max.as_millis() as u64,
            replica_acks: s.replica_acks,
            permits: s.permits,
            job_interval_ms: 500,
            history: dir.join(format!("history-{process}.jsonl")),
        };
        workers.push(spawn(spec)?);
    }
    let ids: Vec<Worker> = workers
        .iter_mut()
        .map(|w| {
            let line = w
                .lines
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_default();
            Worker {
                process: w.process.clone(),
                pid: w.child.id() as i32,
                client: line.strip_prefix("client ").unwrap_or("").to_owned(),
            }
        })
        .collect();
    if let Some(w) = ids.iter().find(|w| w.client.is_empty()) {
        bail!(
            "worker {} did not connect: see {}",
            w.process,
            dir.display()
        );
    }

    let schedule = Schedule {
        fault: s.fault,
        first_after: s.first_after,
        every: s.every,
        pause: s.pause,
        key: key.clone(),
    };
    let stop = AtomicBool::new(false);
    let limit = s.duration + Duration::from_secs(90);
    // The nemesis runs on this thread: servers it restarts are its children, and the test
    // harness has them die with the thread that spawned them (PR_SET_PDEATHSIG).
    let lines: Vec<(String, mpsc::Receiver<String>)> = workers
        .iter_mut()
        .map(|w| {
            (
                w.process.clone(),
                std::mem::replace(&mut w.lines, mpsc::channel().1),
            )
        })
        .collect();
    let (nemesis_errors, unfinished) = std::thread::scope(|scope| {
        let stop = &stop;
        let waiter = scope.spawn(move || {
            let mut unfinished = Vec::new();
            for (process, lines) in lines {
                let left = limit.saturating_sub(started.elapsed());
                let done = loop {
                    match lines.recv_timeout(left) {
                        Ok(l) if l == "done" => break true,
                        Ok(_) => continue,
                        Err(_) => break false,
                    }
                };
                if !done {
                    unfinished.push(process);
                }
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            unfinished
        });
        let errors = nemesis::run(
            &mut d,
            &schedule,
            &ids,
            dir.join("history-nemesis.jsonl"),
            stop,
        );
        (errors, waiter.join().unwrap_or_default())
    });
    let duration_s = started.elapsed().as_secs_f64();

    // Orphans, while the clients are still connected: a lease the restored snapshot or a
    // job's at-least-for left gets time to expire by itself.
    let semaphore = semaphore
        .as_ref()
        .map(|(name, permits, _)| (name.as_str(), *permits));
    // A plain lock's hand-off queue left by a waiter whose leave was lost (a failover)
    // expires with its waiters' liveness deadlines.
    let grace = (s.lease * 3).max(distlock::DEFAULT_FAIR_LIVENESS) + Duration::from_secs(1);
    let (mut orphans, request_records) = d.orphans(semaphore, grace);
    for w in &mut workers {
        w.finish();
    }
    for p in unfinished {
        orphans.push(format!("worker {p} did not finish within {limit:?}"));
    }

    let mut parts = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            parts.push(history::read(&path)?);
        }
    }
    let events = history::merge(parts);
    history::write(&dir.join("history.jsonl"), &events)?;
    let (resource, counter) = resource_state(&d, &events)?;

    let limits = check::Limits {
        lease: Some(s.lease),
        ..s.limits.clone()
    };
    let mut f: Findings = check::check(&events, &resource, counter, &orphans, &limits);
    for e in nemesis_errors {
        f.violations
            .push(Violation::new(Property::Liveness, 0, 0, e));
    }
    let passed = f.passed();
    let kept = !passed || keep;
    if kept {
        std::fs::write(dir.join("servers.log"), d.logs())?;
        let mut v = std::fs::File::create(dir.join("violations.txt"))?;
        for violation in &f.violations {
            writeln!(v, "{violation:?}")?;
        }
        crate::timeline::draw(
            &format!("{} ({})", s.name, s.topology.name()),
            &events,
            &f.violations,
            &dir.join("timeline.svg"),
        )?;
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let row = Row {
        scenario: s.name.to_owned(),
        topology: s.topology.name().to_owned(),
        duration_s: (duration_s * 10.0).round() / 10.0,
        request_records,
        known_limit: s.known_limit,
        passed,
        kept: kept.then(|| dir.display().to_string()),
        findings: f,
    };
    Ok(row)
}

/// (increments acknowledged, the counter's final value), for the counter workloads.
type CounterState = Option<(u64, i64)>;

/// The resource's log and, for the counter workloads, (increments acknowledged, final value).
fn resource_state(
    d: &Deployment,
    events: &[history::Event],
) -> anyhow::Result<(Vec<ResourceOp>, CounterState)> {
    let mut conn = query_connection(&d.resource).context("the resource's server")?;
    let lines: Vec<String> = redis::cmd("LRANGE")
        .arg(crate::resource::LOG)
        .arg(0)
        .arg(-1)
        .query(&mut conn)?;
    let log = lines
        .iter()
        .map(|l| serde_json::from_str(l).with_context(|| format!("a resource log line: {l}")))
        .collect::<anyhow::Result<Vec<ResourceOp>>>()?;
    let acked = events
        .iter()
        .filter(|e| e.f == Op::Increment && e.ty == Type::Ok)
        .count() as u64;
    let counter = if acked > 0 {
        let v: Option<i64> = redis::cmd("GET")
            .arg(crate::resource::COUNTER)
            .query(&mut conn)?;
        Some((acked, v.unwrap_or(0)))
    } else {
        None
    };
    Ok((log, counter))
}

/// The semaphore a scenario's workload uses: its name, permits and kind.
fn semaphore_of(s: &Scenario, key: &str) -> Option<(String, u32, Workload)> {
    match s.workload {
        Workload::Semaphore | Workload::LeasedSemaphore => {
            Some((key.to_owned(), s.permits, s.workload))
        }
        // One permit: its holds exclude one another.
        Workload::Watchdog => Some((format!("{key}:leased-permit"), 1, Workload::LeasedSemaphore)),
        _ => None,
    }
}

fn set_permits(d: &Deployment, key: &str, permits: u32, kind: Workload) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let client = distlock::Client::connect(&d.url()).await?;
        if kind == Workload::LeasedSemaphore {
            client
                .leased_semaphore(key)
                .try_set_permits(u64::from(permits))
                .await?;
        } else {
            client
                .semaphore(key)
                .try_set_permits(u64::from(permits))
                .await?;
        }
        client.shutdown().await?;
        Ok::<_, distlock::Error>(())
    })?;
    Ok(())
}

struct Spawned {
    process: String,
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Spawned {
    /// Close its stdin (it shuts its client down and exits); kill it if it does not.
    fn finish(&mut self) {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGCONT,
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(spec: Spec) -> anyhow::Result<Spawned> {
    let exe: PathBuf = std::env::current_exe().context("cannot find the distlock-chaos binary")?;
    let mut child = Command::new(exe)
        .arg("worker")
        .arg(serde_json::to_string(&spec)?)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot spawn a worker")?;
    let stdout = child.stdout.take().expect("piped");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Ok(Spawned {
        process: spec.process,
        child,
        lines,
    })
}
