//! The history of a run, as Jepsen records one: every operation as an `invoke` event followed
//! by `ok`, `fail` (it certainly did not happen) or `info` (its outcome is unknown), every
//! lost lease, and every fault the nemesis injected — one JSON object per line.
//!
//! Times are `CLOCK_MONOTONIC` in microseconds: one clock for every process on the machine,
//! so events of the workers and of the nemesis order on one axis.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// `CLOCK_MONOTONIC` now, in µs: comparable across the processes of one machine.
pub fn now_us() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is always available on Linux");
    t.tv_sec() as u64 * 1_000_000 + t.tv_nsec() as u64 / 1_000
}

/// What an event says of its operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Type {
    /// The operation started.
    Invoke,
    /// It happened.
    Ok,
    /// It certainly did not happen (a timeout waiting for a lock, a refused write).
    Fail,
    /// Unknown: it may or may not have happened (an error mid-flight).
    Info,
}

/// The operation an event belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// Take the lock (or a read/write hold, a permit, a job run). `ok` carries the owner and
    /// the fencing token.
    Acquire,
    /// Give it back. The grant ends at the `invoke` (the holder stops acting on it).
    Release,
    /// The client said the lease is lost (`lost()` fired, or `is_lost()` said so).
    Lost,
    /// A fenced read of the resource (raises the highest token the resource has seen).
    Read,
    /// A fenced write of the resource: `value` is what was written; `fail` = refused.
    Write,
    /// An unguarded `GET` + `SET` increment of the counter (the counter workload).
    Increment,
    /// A fault: `invoke` when it starts, `ok` when it is healed (a kill's restart, a pause's
    /// resume), `info` for an instant fault (a `CLIENT KILL`).
    Fault,
}

/// What a hold is, for the overlap checker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Excludes every other hold (a lock, a write hold, a job run).
    #[default]
    Exclusive,
    /// Shares with other shared holds up to the capacity (a read hold, a permit).
    Shared,
}

/// One line of the history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// `CLOCK_MONOTONIC`, µs ([`now_us`]).
    pub t_us: u64,
    /// The process: `w0`, `w1`, … for workers, `nemesis` for faults.
    pub process: String,
    /// The task within the process (a worker runs several at once).
    #[serde(default)]
    pub task: u32,
    /// `invoke`, `ok`, `fail` or `info`.
    #[serde(rename = "type")]
    pub ty: Type,
    /// The operation.
    pub f: Op,
    /// The lock (or semaphore, job) name, where one is involved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The owner a grant was made to (`<client-uuid>:<owner-id>`, or a permit id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The fencing token of the grant, in decimal (tokens are `u128`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// A value read or written, a counter value, a permit count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// Exclusive or shared, on acquire events.
    #[serde(default, skip_serializing_if = "is_exclusive")]
    pub mode: Mode,
    /// A fault's description, an error's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// What kind of hold a grant is, where a workload holds several (`plain`, `fair`,
    /// `write`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The lease a grant was asked for, ms, where it may end while held (a job run's
    /// `at_most_for`, without keep-alive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
}

fn is_exclusive(m: &Mode) -> bool {
    *m == Mode::Exclusive
}

impl Event {
    /// An event now, for `process`/`task`, with the other fields empty.
    pub fn new(process: &str, task: u32, ty: Type, f: Op) -> Event {
        Event::at(now_us(), process, task, ty, f)
    }

    /// An event at `t_us`, with the other fields empty (for tests and seeded histories).
    pub fn at(t_us: u64, process: &str, task: u32, ty: Type, f: Op) -> Event {
        Event {
            t_us,
            process: process.to_owned(),
            task,
            ty,
            f,
            key: None,
            owner: None,
            token: None,
            value: None,
            mode: Mode::Exclusive,
            detail: None,
            kind: None,
            lease_ms: None,
        }
    }

    /// With the lock name.
    pub fn key(mut self, key: &str) -> Event {
        self.key = Some(key.to_owned());
        self
    }

    /// With the owner.
    pub fn owner(mut self, owner: &str) -> Event {
        self.owner = Some(owner.to_owned());
        self
    }

    /// With the fencing token.
    pub fn token(mut self, token: u128) -> Event {
        self.token = Some(token.to_string());
        self
    }

    /// With a value.
    pub fn value(mut self, value: i64) -> Event {
        self.value = Some(value);
        self
    }

    /// With a mode.
    pub fn mode(mut self, mode: Mode) -> Event {
        self.mode = mode;
        self
    }

    /// With a detail.
    pub fn detail(mut self, detail: impl Into<String>) -> Event {
        self.detail = Some(detail.into());
        self
    }

    /// With the kind of hold.
    pub fn kind(mut self, kind: &str) -> Event {
        self.kind = Some(kind.to_owned());
        self
    }

    /// With the lease asked for.
    pub fn lease(mut self, lease: std::time::Duration) -> Event {
        self.lease_ms = Some(lease.as_millis() as u64);
        self
    }

    /// The token as a number.
    pub fn token_value(&self) -> Option<u128> {
        self.token.as_deref().and_then(|t| t.parse().ok())
    }
}

/// One operation the fenced resource saw, in the resource's own (serial) order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceOp {
    /// `read` or `write`.
    pub op: String,
    /// The token presented.
    pub token: String,
    /// Who presented it (`<process>/<task>`).
    pub by: String,
    /// Accepted (`true`) or refused because a higher token had been seen.
    pub accepted: bool,
    /// The value before the operation.
    pub before: i64,
    /// The value after it (= `before` for a read or a refusal).
    pub after: i64,
}

impl ResourceOp {
    /// The token as a number.
    pub fn token_value(&self) -> u128 {
        self.token.parse().unwrap_or(0)
    }
}

/// One fault of a history: the nemesis's `invoke`, and the `ok` (healed) or `fail` (not
/// injected) that closed it, if one did.
#[derive(Clone, Copy, Debug)]
pub struct FaultSpan<'a> {
    /// The `invoke`.
    pub opened: &'a Event,
    /// The `ok` or `fail`; `None` when the fault was never closed.
    pub closed: Option<&'a Event>,
}

impl<'a> FaultSpan<'a> {
    /// When it started, µs.
    pub fn start(&self) -> u64 {
        self.opened.t_us
    }

    /// When it was closed, µs.
    pub fn end(&self) -> Option<u64> {
        self.closed.map(|e| e.t_us)
    }

    /// Closed by an `ok`.
    pub fn healed(&self) -> bool {
        self.closed.is_some_and(|e| e.ty == Type::Ok)
    }

    /// What the `invoke` said.
    pub fn detail(&self) -> &'a str {
        self.opened.detail.as_deref().unwrap_or("")
    }
}

/// Pair the fault events of a history (in time order): an `invoke` opens a fault; an `ok` or
/// a `fail` closes the earliest open fault with the same `detail`, else with the same `key`,
/// else the earliest open one. Returns the faults in order of their start, and the instant
/// ones: the `info` events, and an `ok` or `fail` that found nothing open.
pub fn fault_spans<'a>(
    events: impl IntoIterator<Item = &'a Event>,
) -> (Vec<FaultSpan<'a>>, Vec<&'a Event>) {
    let mut spans = Vec::new();
    let mut instants = Vec::new();
    let mut open: Vec<&Event> = Vec::new();
    for e in events.into_iter().filter(|e| e.f == Op::Fault) {
        match e.ty {
            Type::Invoke => open.push(e),
            Type::Ok | Type::Fail => {
                let i = open
                    .iter()
                    .position(|s| s.detail.is_some() && s.detail == e.detail)
                    .or_else(|| open.iter().position(|s| s.key.is_some() && s.key == e.key))
                    .or(if open.is_empty() { None } else { Some(0) });
                match i {
                    Some(i) => spans.push(FaultSpan {
                        opened: open.remove(i),
                        closed: Some(e),
                    }),
                    None => instants.push(e),
                }
            }
            Type::Info => instants.push(e),
        }
    }
    spans.extend(open.into_iter().map(|opened| FaultSpan {
        opened,
        closed: None,
    }));
    spans.sort_by_key(|s| s.opened.t_us);
    (spans, instants)
}

/// Which property a [`Violation`] breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Property {
    /// E: two holds overlapped beyond what the lock allows while neither was reported lost.
    Exclusion,
    /// F: the fenced resource accepted a token lower than one it had accepted, or a token
    /// was granted twice.
    Fencing,
    /// U: an update was lost (a write not based on the latest accepted value).
    Updates,
    /// L: a waiter did not get a free lock in time.
    Liveness,
    /// O: something was left behind after the run.
    Orphans,
    /// Q: a fair lock served a waiter before one that had waited longer.
    Fairness,
    /// R: a lease was lost while no fault ran (the watchdog failed to renew it), or a kind
    /// the scenario must renew was never held long enough to show it.
    Renewal,
    /// A: a grant was made while no replica could acknowledge it (`WAIT` on).
    Replication,
    /// J: a job run began while another still held the lock, or was told its lock was gone,
    /// before the holder's `at_most_for` had run out.
    JobRuns,
    /// W: waiters were woken too slowly: the median time from a release to the next grant
    /// while someone waited is above the scenario's bound.
    Wakeup,
}

/// One violation a checker found, at a time of the history (µs, 0 when it has none).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// When, on the history's clock.
    pub t_us: u64,
    /// Until when (= `t_us` for an instant).
    pub until_us: u64,
    /// The property broken.
    pub property: Property,
    /// What was seen.
    pub detail: String,
}

impl Violation {
    /// A violation of `property` from `t_us` to `until_us` (0 and 0: no time).
    pub fn new(
        property: Property,
        t_us: u64,
        until_us: u64,
        detail: impl Into<String>,
    ) -> Violation {
        Violation {
            t_us,
            until_us,
            property,
            detail: detail.into(),
        }
    }
}

/// An append-only history file shared by the tasks of one process: events are written as
/// they happen, one JSON line each, and flushed by [`Recorder::flush`].
#[derive(Clone)]
pub struct Recorder {
    process: String,
    out: Arc<Mutex<BufWriter<File>>>,
}

impl Recorder {
    /// A recorder for `process` writing to `path` (created or truncated).
    pub fn create(path: &Path, process: &str) -> io::Result<Recorder> {
        Ok(Recorder {
            process: process.to_owned(),
            out: Arc::new(Mutex::new(BufWriter::new(File::create(path)?))),
        })
    }

    /// A new event of this process, now.
    pub fn event(&self, task: u32, ty: Type, f: Op) -> Event {
        Event::new(&self.process, task, ty, f)
    }

    /// Append `event`.
    pub fn record(&self, event: &Event) {
        let line = serde_json::to_string(event).expect("events serialize");
        let mut out = self.out.lock().expect("recorder lock");
        let _ = writeln!(out, "{line}");
    }

    /// Flush what was recorded to the file.
    pub fn flush(&self) -> io::Result<()> {
        self.out.lock().expect("recorder lock").flush()
    }
}

/// Read a history file (JSON lines).
pub fn read(path: &Path) -> io::Result<Vec<Event>> {
    let mut events = Vec::new();
    for line in BufReader::new(File::open(path)?).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let event = serde_json::from_str(&line).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: {e}: {line}", path.display()),
            )
        })?;
        events.push(event);
    }
    Ok(events)
}

/// Merge histories into one, ordered by time (stable: a process's own order is kept).
pub fn merge(histories: impl IntoIterator<Item = Vec<Event>>) -> Vec<Event> {
    let mut all: Vec<Event> = histories.into_iter().flatten().collect();
    all.sort_by_key(|e| e.t_us);
    all
}

/// Write events as JSON lines.
pub fn write(path: &Path, events: &[Event]) -> io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    for e in events {
        writeln!(
            out,
            "{}",
            serde_json::to_string(e).expect("events serialize")
        )?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_as_json_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let rec = Recorder::create(&path, "w0").unwrap();
        let big = (7u128 << 64) + 42;
        let e = rec
            .event(3, Type::Ok, Op::Acquire)
            .key("k")
            .owner("u:1")
            .token(big)
            .mode(Mode::Shared);
        rec.record(&e);
        rec.record(&rec.event(3, Type::Invoke, Op::Release).key("k"));
        rec.flush().unwrap();
        let back = read(&path).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0], e);
        assert_eq!(back[0].token_value(), Some(big));
        assert!(back[1].t_us >= back[0].t_us);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\"type\":\"ok\""), "{text}");
        assert!(text.contains("\"f\":\"acquire\""), "{text}");
    }
}
