//! The offline checkers: they read a finished history (and the fenced resource's own log)
//! and report every violation of
//!
//! - **E** exclusion: no two holds overlap beyond what the lock allows (one exclusive hold,
//!   or shared holds up to the capacity) while neither was reported lost;
//! - **F** fencing: the resource never accepted a token lower than one it had accepted, and a
//!   grant's token is above that of every grant that ended before it started (so tokens
//!   never repeat or decrease);
//! - **U** updates: every write the resource accepted was based on the latest accepted value,
//!   and the unguarded counter lost no increment;
//! - **L** liveness: no waiter idles longer than the limit while the lock is free (outside
//!   faults), and after a fault heals a waiter acquires within the allowance;
//! - **O** orphans: what the run's end found left behind (keys, queue entries,
//!   subscriptions, missing permits), as the orchestrator read it from the servers;
//! - **Q** fairness (fair-lock scenarios): no waiter is granted the lock before another that
//!   began waiting [`FIFO_MARGIN`] or more before it and was granted later, unless that one's
//!   process was stopped meanwhile;
//! - **R** renewal (fault-free scenarios whose holds outlast the lease): no lease is lost,
//!   and each kind the scenario must renew was held, without a loss, for two leases;
//! - **A** acknowledgement (`WAIT` on): no grant is recorded while every replica has been
//!   stopped for [`ACK_MARGIN`] or more, whenever its waiter began to wait;
//! - **J** job runs: no run begins while another holds the lock, and none is told its lock
//!   is gone, before the holder's `at_most_for` ran out;
//! - **W** wake-ups (fault-free scenarios with a bound): the median time from a release to
//!   the next grant, while someone waited, stays below the bound.
//!
//! A hold starts at its acquire's `ok` and ends at its release's `invoke` (a correct lock
//! grants the next hold after the release started, and the next holder hears of its grant
//! before its `ok`), so two holds of a correct lock never overlap on this clock. For
//! liveness the lock counts as free from the release's completion.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::Serialize;

use crate::history::{self, Event, Mode, Op, Property, ResourceOp, Type, Violation};

/// One hold, rebuilt from the history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    /// The process and task that held it.
    pub process: String,
    /// The task.
    pub task: u32,
    /// The lock name.
    pub key: String,
    /// The fencing token, if the kind issues one.
    pub token: Option<u128>,
    /// The kind of hold, where the workload holds several.
    pub kind: Option<String>,
    /// The lease asked for, µs, where it may end while held (a job run's `at_most_for`).
    pub lease: Option<u64>,
    /// The granted acquire's `invoke`, µs: the grant was made after it.
    pub invoked: u64,
    /// Exclusive or shared.
    pub mode: Mode,
    /// The acquire's `ok`, µs.
    pub start: u64,
    /// The release's `invoke` (or the lost report, or the end of the history), µs.
    pub end: u64,
    /// When the release completed (or failed), µs: the lock is free from then on.
    pub freed: u64,
    /// When the client reported the lease lost, if it did.
    pub lost_at: Option<u64>,
}

/// What the checkers allow, per scenario.
#[derive(Clone, Debug)]
pub struct Limits {
    /// How many shared holds may overlap (`None`: any number, as read holds).
    pub shared_capacity: Option<u32>,
    /// Longest a waiter may idle while the lock is free, outside faults.
    pub idle_limit: Duration,
    /// After a fault heals: how long until a waiter must have acquired.
    pub heal_allowance: Duration,
    /// The lease: with it, a holder paused past its lease must report the loss in time
    /// ([`pause_loss`]).
    pub lease: Option<Duration>,
    /// With it, a paused process's queued waiters may keep the lock free while others wait
    /// for at most this long at a time ([`waiter_pause`]).
    pub waiter_stall: Option<Duration>,
    /// Whether liveness applies (not to job locks, whose runs are scheduled, nor to
    /// semaphores with free permits).
    pub liveness: bool,
    /// Whether grants must follow the waiters' arrival order (Q; the fair lock).
    pub fifo: bool,
    /// Whether every lease must last to its release (R; scenarios without faults).
    pub no_loss: bool,
    /// Kinds of hold that must each be held, without a loss, for two leases (R).
    pub renewed_kinds: &'static [&'static str],
    /// Longest median time from a release to the next grant while someone waited (W).
    pub wake_median: Option<Duration>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            shared_capacity: None,
            idle_limit: Duration::from_secs(1),
            heal_allowance: Duration::from_secs(5),
            liveness: true,
            lease: None,
            waiter_stall: None,
            fifo: false,
            no_loss: false,
            renewed_kinds: &[],
            wake_median: None,
        }
    }
}

/// The checkers' findings for one run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Findings {
    /// Holds granted.
    pub grants: usize,
    /// Faults injected (spans and instants).
    pub faults: usize,
    /// Leases the clients reported lost.
    pub lost_leases: usize,
    /// E: overlaps while neither hold was reported lost.
    pub overlaps: usize,
    /// Overlaps involving a hold reported lost (excused by E; fencing must catch them).
    pub excused_overlaps: usize,
    /// F: writes the resource accepted with a token below one it had accepted.
    pub stale_writes_accepted: usize,
    /// Writes (and reads) the resource refused: stale holders fenced off.
    pub stale_writes_rejected: usize,
    /// F: grants whose token was not above every earlier-ended grant's.
    pub token_regressions: usize,
    /// U: updates lost.
    pub lost_updates: usize,
    /// L: the longest time a waiter waited while no one held the lock, ms (faults included).
    pub max_unavailable_ms: u64,
    /// The longest time between two grants, ms: what the clients saw of a failover.
    pub max_grant_gap_ms: u64,
    /// W: the median time from a release to the next grant while someone waited, ms (where
    /// the scenario bounds it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub median_wake_ms: Option<f64>,
    /// L: violations of the idle limit and the heal allowance.
    pub liveness_violations: usize,
    /// O: things left behind.
    pub orphans: usize,
    /// Every violation, for the report and the timeline.
    #[serde(skip)]
    pub violations: Vec<Violation>,
}

impl Findings {
    /// No violation of any property.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Rebuild the holds of a history (events in time order).
fn holds(events: &[Event]) -> Vec<Hold> {
    let last = events.last().map_or(0, |e| e.t_us);
    let mut open: HashMap<(&str, u32), Hold> = HashMap::new();
    let mut invoked: HashMap<(&str, u32), u64> = HashMap::new();
    let mut done = Vec::new();
    for e in events {
        let who = (e.process.as_str(), e.task);
        match (e.f, e.ty) {
            (Op::Acquire, Type::Invoke) => {
                invoked.insert(who, e.t_us);
            }
            (Op::Acquire, Type::Ok) => {
                let hold = Hold {
                    process: e.process.clone(),
                    task: e.task,
                    key: e.key.clone().unwrap_or_default(),
                    token: e.token_value(),
                    kind: e.kind.clone(),
                    lease: e.lease_ms.map(|ms| ms * 1000),
                    invoked: invoked.get(&who).copied().unwrap_or(e.t_us),
                    mode: e.mode,
                    start: e.t_us,
                    end: last,
                    freed: last,
                    lost_at: None,
                };
                if let Some(mut prev) = open.insert(who, hold) {
                    // A new grant without a release: the old hold ended unreleased.
                    prev.end = e.t_us;
                    prev.freed = e.t_us;
                    done.push(prev);
                }
            }
            (Op::Lost, _) => {
                if let Some(h) = open.get_mut(&who) {
                    h.lost_at.get_or_insert(e.t_us);
                }
            }
            (Op::Release, Type::Invoke) => {
                if let Some(h) = open.get_mut(&who) {
                    h.end = e.t_us;
                }
            }
            (Op::Release, _) => {
                if let Some(mut h) = open.remove(&who) {
                    h.end = h.end.min(e.t_us);
                    h.freed = e.t_us;
                    done.push(h);
                }
            }
            _ => {}
        }
    }
    done.extend(open.into_values());
    done.sort_by_key(|h| (h.start, h.end));
    done
}

/// Check a history. `resource` is the fenced resource's log in its own order (empty when the
/// workload has none); `counter` is `(increments acknowledged, final value)` for the counter
/// workload; `orphans` what the end of the run found left behind.
pub fn check(
    events: &[Event],
    resource: &[ResourceOp],
    counter: Option<(u64, i64)>,
    orphans: &[String],
    limits: &Limits,
) -> Findings {
    let holds = holds(events);
    let mut f = Findings {
        grants: holds.len(),
        faults: events
            .iter()
            .filter(|e| e.f == Op::Fault && e.ty != Type::Ok)
            .count(),
        lost_leases: holds.iter().filter(|h| h.lost_at.is_some()).count(),
        ..Findings::default()
    };
    let mut starts: Vec<u64> = holds.iter().map(|h| h.start).collect();
    starts.sort_unstable();
    f.max_grant_gap_ms = starts
        .windows(2)
        .map(|w| (w[1] - w[0]) / 1000)
        .max()
        .unwrap_or(0);
    exclusion(&holds, limits, &mut f);
    // The SIGSTOP spans, read once: the fencing and liveness checks both allow for them.
    let stops = stops(events);
    fencing(events, &stops, &holds, resource, &mut f);
    updates(resource, counter, &mut f);
    if limits.liveness {
        liveness(events, &stops, &holds, limits, &mut f);
    }
    // These find something only where their fault or workload ran.
    if let Some(lease) = limits.lease {
        pause_loss(events, &holds, lease, &mut f);
    }
    if let Some(stall) = limits.waiter_stall {
        waiter_pause(events, &stops, &holds, stall, &mut f);
    }
    if limits.fifo {
        fairness(events, &stops, &mut f);
    }
    if limits.no_loss {
        renewal(&holds, &mut f);
        renewed_kinds(&holds, limits, &mut f);
    }
    if let Some(bound) = limits.wake_median {
        wake_ups(events, &stops, &holds, bound, &mut f);
    }
    unreplicated(events, &mut f);
    job_ticks(events, &mut f);
    job_runs(&holds, &mut f);
    for o in orphans {
        f.orphans += 1;
        f.violations.push(Violation::new(
            Property::Orphans,
            events.last().map_or(0, |e| e.t_us),
            events.last().map_or(0, |e| e.t_us),
            o.clone(),
        ));
    }
    f.violations.sort_by_key(|v| v.t_us);
    f
}

/// How much earlier a waiter must have begun waiting than another for Q to require that it
/// be served first: the time from a task's `invoke` to its request's arrival at the server
/// varies with scheduling (4 processes on 2 cores), and arrival is what orders the queue.
pub const FIFO_MARGIN: Duration = Duration::from_millis(200);

/// Q: for each grant, the waiters passed over: acquires that began [`FIFO_MARGIN`] or more
/// before the granted one's and were granted after its `ok`, whose process no SIGSTOP touched
/// between their `invoke` and that `ok` (a stopped waiter may be dropped from the queue after
/// its liveness timeout, by design). Acquires that timed out or failed are left out: a
/// waiter's leave hands the lock to the next one before the waiter records its timeout.
fn fairness(events: &[Event], stops: &[Stop], f: &mut Findings) {
    // Each acquire: (process, task, invoke, outcome time or the end, granted).
    let end = events.last().map_or(0, |e| e.t_us);
    let mut open: HashMap<(&str, u32), u64> = HashMap::new();
    let mut waits: Vec<(&str, u32, u64, u64, bool)> = Vec::new();
    for e in events.iter().filter(|e| e.f == Op::Acquire) {
        let who = (e.process.as_str(), e.task);
        if e.ty == Type::Invoke {
            open.insert(who, e.t_us);
        } else if let Some(invoked) = open.remove(&who) {
            waits.push((who.0, who.1, invoked, e.t_us, e.ty == Type::Ok));
        }
    }
    waits.extend(open.into_iter().map(|((p, t), i)| (p, t, i, end, false)));
    waits.sort_by_key(|w| w.2);
    let margin = FIFO_MARGIN.as_micros() as u64;
    for &(bp, bt, b_invoked, b_granted, granted) in &waits {
        if !granted {
            continue;
        }
        let passed: Vec<String> = waits
            .iter()
            .take_while(|a| a.2 + margin <= b_invoked)
            .filter(|a| a.4 && a.3 > b_granted && (a.0, a.1) != (bp, bt))
            .filter(|a| {
                !stops
                    .iter()
                    .any(|&(p, stopped, resumed)| p == a.0 && stopped < b_granted && resumed > a.2)
            })
            .map(|a| {
                format!(
                    "{}/{} (waiting {} ms longer)",
                    a.0,
                    a.1,
                    (b_invoked - a.2) / 1000
                )
            })
            .collect();
        if !passed.is_empty() {
            f.violations.push(Violation::new(
                Property::Fairness,
                b_invoked,
                b_granted,
                format!(
                    "{bp}/{bt} was granted the fair lock while earlier waiters still waited: {}",
                    passed.join(", ")
                ),
            ));
        }
    }
}

/// R: a lease reported lost while no fault ran: the watchdog let it run out.
fn renewal(holds: &[Hold], f: &mut Findings) {
    for h in holds {
        if let Some(lost) = h.lost_at {
            f.violations.push(Violation::new(
                Property::Renewal,
                h.start,
                lost,
                format!(
                    "{}/{} lost its lease {} ms into its hold, with no fault running",
                    h.process,
                    h.task,
                    (lost - h.start) / 1000
                ),
            ));
        }
    }
}

/// R, what it covered: each kind in `limits.renewed_kinds` was held, without a loss, for
/// two leases at least once. Every kind renews at least every half lease (a job lock's
/// keep-alive every half `at_most_for`, which the scenario sets to the lease), so such a hold
/// was renewed three times or more, and a kind whose renewal fails cannot pass unseen.
fn renewed_kinds(holds: &[Hold], limits: &Limits, f: &mut Findings) {
    let Some(lease) = limits.lease else {
        return;
    };
    let long = 2 * lease.as_micros() as u64;
    for kind in limits.renewed_kinds {
        let renewed = holds
            .iter()
            .filter(|h| h.kind.as_deref() == Some(kind) && h.lost_at.is_none())
            .any(|h| h.end.saturating_sub(h.start) >= long);
        if !renewed {
            f.violations.push(Violation::new(
                Property::Renewal,
                0,
                0,
                format!(
                    "no {kind} hold lasted two leases ({} ms) without a loss: its renewal \
                     went unchecked",
                    long / 1000
                ),
            ));
        }
    }
}

/// Fewer releases with a waiter than this cannot tell a wake-up median (W).
pub const WAKE_SAMPLES: usize = 50;

/// W, for scenarios of one lock: for each release (its `invoke`) while someone waited, the
/// time to the next grant of its key; their median is at most `bound`. A waiter woken by the
/// release's message (or handed the lock) is granted within milliseconds; one left to its
/// periodic re-check waits out a nap.
fn wake_ups(events: &[Event], stops: &[Stop], holds: &[Hold], bound: Duration, f: &mut Findings) {
    let mut waiting = waits(events, stops, None);
    waiting.sort_unstable();
    // reach[i]: the latest end of the first i + 1 waits (by start).
    let reach: Vec<u64> = waiting
        .iter()
        .scan(0, |m, &(_, b)| {
            *m = (*m).max(b);
            Some(*m)
        })
        .collect();
    let waited_at = |t: u64| {
        let n = waiting.partition_point(|&(a, _)| a < t);
        n > 0 && reach[n - 1] > t
    };
    let mut starts: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for h in holds {
        starts.entry(&h.key).or_default().push(h.start);
    }
    for s in starts.values_mut() {
        s.sort_unstable();
    }
    let mut gaps: Vec<u64> = holds
        .iter()
        .filter(|h| waited_at(h.end))
        .filter_map(|h| {
            let s = &starts[h.key.as_str()];
            s.get(s.partition_point(|&t| t < h.end)).map(|&t| t - h.end)
        })
        .collect();
    gaps.sort_unstable();
    let Some(&median) = gaps.get(gaps.len() / 2) else {
        f.violations.push(Violation::new(
            Property::Wakeup,
            0,
            0,
            "no release while someone waited: no wake-up to measure",
        ));
        return;
    };
    f.median_wake_ms = Some((median / 100) as f64 / 10.0);
    let end = events.last().map_or(0, |e| e.t_us);
    if gaps.len() < WAKE_SAMPLES {
        f.violations.push(Violation::new(
            Property::Wakeup,
            0,
            end,
            format!(
                "only {} releases while someone waited (at least {WAKE_SAMPLES} tell a median)",
                gaps.len()
            ),
        ));
    } else if median > bound.as_micros() as u64 {
        f.violations.push(Violation::new(
            Property::Wakeup,
            0,
            end,
            format!(
                "the median time from a release to the next grant while someone waited is \
                 {:.1} ms over {} releases (bound {} ms): waiters are not woken by releases",
                median as f64 / 1000.0,
                gaps.len(),
                bound.as_millis()
            ),
        ));
    }
}

/// E: a sweep over the holds of each key; an episode is counted when the active holds start
/// to exceed what the lock allows.
fn exclusion(holds: &[Hold], limits: &Limits, f: &mut Findings) {
    let all = overlap_episodes(holds.iter(), limits);
    let unexcused = overlap_episodes(holds.iter().filter(|h| h.lost_at.is_none()), limits);
    f.overlaps = unexcused.len();
    f.excused_overlaps = all.len().saturating_sub(unexcused.len());
    for (start, end, who) in unexcused {
        f.violations.push(Violation::new(
            Property::Exclusion,
            start,
            end,
            format!("holds overlap while none was reported lost: {who}"),
        ));
    }
}

fn overlap_episodes<'a>(
    holds: impl Iterator<Item = &'a Hold>,
    limits: &Limits,
) -> Vec<(u64, u64, String)> {
    let mut by_key: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for h in holds {
        by_key.entry(&h.key).or_default().push(h);
    }
    let mut episodes = Vec::new();
    for holds in by_key.values() {
        // (time, 0 = end / 1 = start, index): ends sort before starts at the same µs.
        let mut points: Vec<(u64, u8, usize)> = Vec::with_capacity(holds.len() * 2);
        for (i, h) in holds.iter().enumerate() {
            points.push((h.start, 1, i));
            points.push((h.end.max(h.start), 0, i));
        }
        points.sort_unstable();
        let mut active: Vec<usize> = Vec::new();
        let mut episode: Option<(u64, String)> = None;
        for (t, kind, i) in points {
            if kind == 1 {
                active.push(i);
            } else {
                active.retain(|&a| a != i);
            }
            let exclusive = active
                .iter()
                .filter(|&&a| holds[a].mode == Mode::Exclusive)
                .count();
            let shared = active.len() - exclusive;
            let bad = exclusive > 1
                || (exclusive == 1 && shared > 0)
                || limits.shared_capacity.is_some_and(|c| shared > c as usize);
            match (&episode, bad) {
                (None, true) => {
                    let who: Vec<String> = active
                        .iter()
                        .map(|&a| {
                            let h = holds[a];
                            let token = h.token.map_or("-".to_owned(), |t| t.to_string());
                            format!("{}/{} token {token}", h.process, h.task)
                        })
                        .collect();
                    episode = Some((t, format!("{}: {}", holds[i].key, who.join(", "))));
                }
                (Some((start, who)), false) => {
                    episodes.push((*start, t, who.clone()));
                    episode = None;
                }
                _ => {}
            }
        }
        if let Some((start, who)) = episode {
            episodes.push((start, start, who));
        }
    }
    episodes
}

/// A healed SIGSTOP span: (process, stopped, resumed), µs.
type Stop<'a> = (&'a str, u64, u64);

/// The healed SIGSTOP spans of the history.
fn stops(events: &[Event]) -> Vec<Stop<'_>> {
    let (spans, _) = history::fault_spans(events);
    spans
        .iter()
        .filter(|s| s.healed())
        .filter_map(|s| {
            let detail = s.detail();
            let process = detail
                .strip_prefix("SIGSTOP holder ")
                .or_else(|| detail.strip_prefix("SIGSTOP waiter "))?;
            Some((process, s.start(), s.end()?))
        })
        .collect()
}

/// When the grant of `h` may have been made, at the earliest of what the history tells: its
/// `ok`, or, when its process was stopped (SIGSTOP) after its task's last event before that
/// `ok` and resumed before it, the start of that stop. A grant made just before the stop is
/// read and recorded only after the resume, after holds that began and ended while the
/// process was stopped (their later tokens are no regression). The task's events count, not
/// the process's: after a resume the process's tasks record what they had pending in any
/// order, so another task may record first.
fn granted_from(h: &Hold, events: &[Event], stops: &[Stop]) -> u64 {
    let resumed_before: Vec<(u64, u64)> = stops
        .iter()
        .filter(|&&(p, _, resumed)| p == h.process && resumed <= h.start)
        .map(|&(_, stopped, resumed)| (stopped, resumed))
        .collect();
    // Most holds: no stop of their process before them (and no scan of the history).
    if resumed_before.is_empty() {
        return h.start;
    }
    // Events are in time order: the task's last one before the `ok`.
    let previous = events
        .iter()
        .take_while(|e| e.t_us < h.start)
        .filter(|e| e.process == h.process && e.task == h.task)
        .map(|e| e.t_us)
        .last()
        .unwrap_or(0);
    resumed_before
        .into_iter()
        .filter(|&(_, resumed)| previous < resumed)
        .map(|(stopped, _)| stopped.min(h.start))
        .min()
        .unwrap_or(h.start)
}

/// F: tokens rise across grants (per key) and the resource accepted no stale token.
fn fencing(
    events: &[Event],
    stops: &[Stop],
    holds: &[Hold],
    resource: &[ResourceOp],
    f: &mut Findings,
) {
    let mut by_key: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for h in holds.iter().filter(|h| h.token.is_some()) {
        by_key.entry(&h.key).or_default().push(h);
    }
    for holds in by_key.values() {
        let mut by_end: Vec<&Hold> = holds.clone();
        by_end.sort_by_key(|h| h.end);
        let mut ended = 0;
        // The highest-token hold among those ended: of every mode, and exclusive only.
        let mut max_any: Option<&Hold> = None;
        let mut max_exclusive: Option<&Hold> = None;
        let mut by_grant: Vec<(u64, &Hold)> = holds
            .iter()
            .map(|h| (granted_from(h, events, stops), *h))
            .collect();
        by_grant.sort_by_key(|&(from, h)| (from, h.start));
        for (from, h) in by_grant {
            while ended < by_end.len() && by_end[ended].end <= from {
                let e = by_end[ended];
                if max_any.is_none_or(|m| e.token > m.token) {
                    max_any = Some(e);
                }
                if e.mode == Mode::Exclusive && max_exclusive.is_none_or(|m| e.token > m.token) {
                    max_exclusive = Some(e);
                }
                ended += 1;
            }
            // Shared holds may be granted while another shared hold is held, so the ok of an
            // earlier grant can come after the release of a later one: a shared hold is
            // ordered only after exclusive holds, an exclusive one after every hold.
            let before = if h.mode == Mode::Exclusive {
                max_any
            } else {
                max_exclusive
            };
            if let Some(m) = before.filter(|m| h.token <= m.token) {
                f.token_regressions += 1;
                f.violations.push(Violation::new(
                    Property::Fencing,
                    h.start,
                    h.start,
                    format!(
                        "{}: {}/{} was granted token {} after {}/{} held token {}",
                        h.key,
                        h.process,
                        h.task,
                        h.token.unwrap_or(0),
                        m.process,
                        m.task,
                        m.token.unwrap_or(0)
                    ),
                ));
            }
        }
    }
    let mut highest: Option<(u128, &str)> = None;
    for (i, op) in resource.iter().enumerate() {
        if !op.accepted {
            if op.op == "write" {
                f.stale_writes_rejected += 1;
            }
            continue;
        }
        let token = op.token_value();
        match highest {
            Some((h, by)) if token < h => {
                f.stale_writes_accepted += 1;
                f.violations.push(Violation::new(
                    Property::Fencing,
                    0,
                    0,
                    format!(
                        "the resource accepted {} #{i} by {} with token {token} after \
                         token {h} by {by}",
                        op.op, op.by
                    ),
                ));
            }
            _ => highest = Some((token, &op.by)),
        }
    }
}

/// U: the accepted writes form one chain of increments; the counter lost nothing.
fn updates(resource: &[ResourceOp], counter: Option<(u64, i64)>, f: &mut Findings) {
    for (i, op) in resource.iter().enumerate() {
        if op.op == "write" && op.accepted && op.after != op.before + 1 {
            f.lost_updates += 1;
            f.violations.push(Violation::new(
                Property::Updates,
                0,
                0,
                format!(
                    "write #{i} by {} (token {}) wrote {} over {}: an update was lost",
                    op.by, op.token, op.after, op.before
                ),
            ));
        }
    }
    if let Some((acked, value)) = counter {
        if (value as i128) < acked as i128 {
            let lost = (acked as i128 - value as i128) as usize;
            f.lost_updates += lost;
            f.violations.push(Violation::new(
                Property::Updates,
                0,
                0,
                format!(
                    "the counter is {value} after {acked} acknowledged increments: {lost} lost"
                ),
            ));
        }
    }
}

/// L: intervals in which some waiter waited while no one held the lock.
fn liveness(events: &[Event], stops: &[Stop], holds: &[Hold], limits: &Limits, f: &mut Findings) {
    // Fault windows: from the fault's start to its heal plus the allowance (to the end of
    // the history when it never healed); an instant fault's from its time.
    let allowance = limits.heal_allowance.as_micros() as u64;
    let end = events.last().map_or(0, |e| e.t_us);
    let (spans, instants) = history::fault_spans(events);
    let windows: Vec<(u64, u64)> = spans
        .iter()
        .map(|f| (f.start(), f.end().map_or(end, |e| e + allowance)))
        .chain(instants.iter().map(|e| (e.t_us, e.t_us + allowance)))
        .collect();
    let heals: Vec<u64> = spans
        .iter()
        .filter(|f| f.healed())
        .filter_map(|f| f.end())
        .collect();
    let waiting = waits(events, stops, None);
    let idle = idle_intervals(holds, &waiting);
    let limit = limits.idle_limit.as_micros() as u64;
    for (a, b) in idle {
        f.max_unavailable_ms = f.max_unavailable_ms.max((b - a) / 1000);
        let in_fault = windows.iter().any(|&(s, e)| a < e && b > s);
        if b - a > limit && !in_fault {
            f.liveness_violations += 1;
            f.violations.push(Violation::new(
                Property::Liveness,
                a,
                b,
                format!(
                    "a waiter waited {} ms while no one held the lock (limit {} ms)",
                    (b - a) / 1000,
                    limit / 1000
                ),
            ));
        }
    }
    // After each heal: the first grant comes within the allowance, if anyone waits — and
    // the workload went on that long (a heal after the workers stopped proves nothing).
    let last_try = events
        .iter()
        .filter(|e| e.f == Op::Acquire && e.ty == Type::Invoke)
        .map(|e| e.t_us)
        .max()
        .unwrap_or(0);
    for h in heals.into_iter().filter(|&h| h + allowance <= last_try) {
        let waited = waiting.iter().any(|&(a, b)| a <= h + allowance && b > h);
        if !waited {
            continue;
        }
        let next = holds.iter().map(|g| g.start).filter(|&s| s >= h).min();
        let late = next.is_none_or(|s| s > h + allowance);
        if late {
            f.liveness_violations += 1;
            f.violations.push(Violation::new(
                Property::Liveness,
                h,
                next.unwrap_or(end).max(h),
                format!(
                    "no grant within {} ms after a fault healed{}",
                    allowance / 1000,
                    next.map_or(String::new(), |s| format!(
                        " (next after {} ms)",
                        (s - h) / 1000
                    ))
                ),
            ));
        }
    }
}

/// Waiting intervals (µs), from an acquire's invoke to its grant, across the attempts that
/// failed or timed out in between (a client retrying through a failover still waits); those
/// of process `except` left out. A process does not wait while it is stopped (SIGSTOP): its
/// waits are cut around its stops, so a stopped process's queued tasks are not counted as
/// waiting for a lock that is free, for instance after the others finished their work.
fn waits(events: &[Event], stops: &[Stop], except: Option<&str>) -> Vec<(u64, u64)> {
    let mut waiting: Vec<(&str, u64, u64)> = Vec::new();
    let mut pending: HashMap<(&str, u32), (u64, u64)> = HashMap::new();
    for e in events
        .iter()
        .filter(|e| e.f == Op::Acquire && Some(e.process.as_str()) != except)
    {
        let who = (e.process.as_str(), e.task);
        match e.ty {
            Type::Invoke => {
                pending.entry(who).or_insert((e.t_us, e.t_us));
            }
            Type::Ok => {
                if let Some((since, _)) = pending.remove(&who) {
                    waiting.push((who.0, since, e.t_us));
                }
            }
            _ => {
                if let Some(p) = pending.get_mut(&who) {
                    p.1 = e.t_us;
                }
            }
        }
    }
    waiting.extend(pending.into_iter().map(|((p, _), (a, b))| (p, a, b)));
    let mut cut = Vec::with_capacity(waiting.len());
    for (process, a, b) in waiting {
        let mut pieces = vec![(a, b)];
        for &(_, stopped, resumed) in stops.iter().filter(|s| s.0 == process) {
            pieces = pieces
                .into_iter()
                .flat_map(|(a, b)| {
                    if resumed <= a || stopped >= b {
                        vec![(a, b)]
                    } else {
                        [(a, stopped), (resumed, b)]
                            .into_iter()
                            .filter(|(a, b)| a < b)
                            .collect()
                    }
                })
                .collect();
        }
        cut.extend(pieces);
    }
    cut
}

/// The intervals (µs) when someone waited and no one held the lock: a sweep, +1/-1 for holds
/// (start..freed) and waits.
fn idle_intervals(holds: &[Hold], waiting: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut points: Vec<(u64, i32, i32)> = Vec::new();
    for h in holds {
        points.push((h.start, 1, 0));
        points.push((h.freed.max(h.start), -1, 0));
    }
    for (a, b) in waiting {
        points.push((*a, 0, 1));
        points.push((*b, 0, -1));
    }
    points.sort_by_key(|&(t, h, w)| (t, h.min(w)));
    let (mut held, mut waiters) = (0i32, 0i32);
    let mut idle_since: Option<u64> = None;
    let mut idle: Vec<(u64, u64)> = Vec::new();
    for (t, dh, dw) in points {
        held += dh;
        waiters += dw;
        let is_idle = held <= 0 && waiters > 0;
        match (idle_since, is_idle) {
            (None, true) => idle_since = Some(t),
            (Some(s), false) => {
                idle.push((s, t));
                idle_since = None;
            }
            _ => {}
        }
    }
    idle
}

/// The pause-waiter scenario: while a process that held nothing is paused, its queued
/// waiters stall the others for at most `limit` at a time (the fair lock skips a waiter that
/// stopped renewing its place once its liveness deadline passed).
fn waiter_pause(
    events: &[Event],
    stops: &[Stop],
    holds: &[Hold],
    limit: Duration,
    f: &mut Findings,
) {
    let limit = limit.as_micros() as u64;
    let (spans, _) = history::fault_spans(events);
    for span in spans.iter().filter(|s| s.healed()) {
        let Some(process) = span.detail().strip_prefix("SIGSTOP waiter ") else {
            continue;
        };
        let (paused, resumed) = (span.start(), span.end().unwrap_or_default());
        let others = waits(events, stops, Some(process));
        for (a, b) in idle_intervals(holds, &others) {
            let (a, b) = (a.max(paused), b.min(resumed));
            if b > a + limit {
                f.liveness_violations += 1;
                f.violations.push(Violation::new(
                    Property::Liveness,
                    a,
                    b,
                    format!(
                        "while {process} was paused, the others waited {} ms for a free lock \
                         (limit {} ms)",
                        (b - a) / 1000,
                        limit / 1000
                    ),
                ));
            }
        }
    }
}

/// The pause-holder scenario: a holder paused past its lease reports the loss within
/// `lease + renewal` of its resume.
fn pause_loss(events: &[Event], holds: &[Hold], lease: Duration, f: &mut Findings) {
    let within = (lease + lease / 3).as_micros() as u64;
    let (spans, _) = history::fault_spans(events);
    for span in spans.iter().filter(|s| s.healed()) {
        let Some(process) = span.detail().strip_prefix("SIGSTOP holder ") else {
            continue;
        };
        let (paused, resumed) = (span.start(), span.end().unwrap_or_default());
        if resumed - paused <= lease.as_micros() as u64 {
            continue;
        }
        // The nemesis logs the fault before it sends SIGSTOP: what the process logged in the
        // first half of the pause, it logged before it stopped (a release invoked then may
        // have run on the server before the stop, its reply read after the resume).
        let stopped = events
            .iter()
            .filter(|e| e.process == process)
            .map(|e| e.t_us)
            .filter(|&t| t >= paused && t < paused + (resumed - paused) / 2)
            .max()
            .unwrap_or(paused);
        let Some(hold) = holds
            .iter()
            .find(|h| h.process == process && h.start <= stopped && h.end > stopped)
        else {
            continue;
        };
        if hold.lost_at.is_none_or(|t| t > resumed + within) {
            f.liveness_violations += 1;
            f.violations.push(Violation::new(
                Property::Liveness,
                resumed,
                hold.lost_at.unwrap_or(resumed + within),
                format!(
                    "{process}/{} was paused {} ms past its {} ms lease and reported the loss \
                     {} (limit {} ms after the resume)",
                    hold.task,
                    (resumed - paused) / 1000,
                    lease.as_millis(),
                    hold.lost_at.map_or("never".to_owned(), |t| format!(
                        "{} ms after the resume",
                        t.saturating_sub(resumed) / 1000
                    )),
                    within / 1000
                ),
            ));
        }
    }
}

/// How long into a stop of every replica a grant recorded by a waiter that began waiting
/// before the stop counts as unacknowledged (A): an acknowledgement given just before the
/// stop may still be on its way, and its grant recorded late on a loaded machine.
pub const ACK_MARGIN: Duration = Duration::from_millis(300);

/// A, the replica-pause scenario: with `WAIT` on, a grant needs a replica's acknowledgement,
/// and a stopped replica acknowledges nothing. No grant is recorded while every replica is
/// stopped: neither one whose waiter began waiting after the stop, nor, from [`ACK_MARGIN`]
/// into it, one whose waiter had been waiting since before it (most waiters have: each waits
/// up to 5 s, attempt after attempt). The nemesis stamps the resume before it sends
/// `SIGCONT`, so no acknowledgement can come before the span's end.
fn unreplicated(events: &[Event], f: &mut Findings) {
    let (spans, _) = history::fault_spans(events);
    let paused: Vec<(u64, u64)> = spans
        .iter()
        .filter(|s| s.healed() && s.detail().contains("both replicas"))
        .filter_map(|s| Some((s.start(), s.end()?)))
        .collect();
    let margin = ACK_MARGIN.as_micros() as u64;
    let mut invoked: HashMap<(&str, u32), u64> = HashMap::new();
    for e in events.iter().filter(|e| e.f == Op::Acquire) {
        let who = (e.process.as_str(), e.task);
        if e.ty == Type::Invoke {
            invoked.insert(who, e.t_us);
            continue;
        }
        let Some(a) = invoked.remove(&who) else {
            continue;
        };
        let stopped = |&&(s, r): &&(u64, u64)| e.t_us <= r && (a >= s || e.t_us >= s + margin);
        if let Some((s, _)) = paused.iter().find(stopped).filter(|_| e.ty == Type::Ok) {
            f.violations.push(Violation::new(
                Property::Replication,
                a,
                e.t_us,
                format!(
                    "{}/{} was granted the lock {} ms into a stop of every replica (waiting \
                     since {} ms {} it): a grant no replica acknowledged",
                    e.process,
                    e.task,
                    (e.t_us - s) / 1000,
                    a.abs_diff(*s) / 1000,
                    if a >= *s { "into" } else { "before" }
                ),
            ));
        }
    }
}

/// J: job runs (holds with a lease: `at_most_for`, no keep-alive). A run's lock lives until
/// its release deletes it or, at the earliest, `at_most_for` after its acquire's `invoke`
/// (the `SET … PX` ran after that). Another run that began before both, or a report that the
/// lock was gone before the latter (less the client's drift allowance, 1 % + 2 ms, by which
/// its own deadline runs early), means the lock was taken from under the run, by another
/// instance's release say. E excuses an overlap with a hold reported lost; J does not while
/// the lost hold's `at_most_for` still ran.
fn job_runs(holds: &[Hold], f: &mut Findings) {
    let runs: Vec<(&Hold, u64)> = holds.iter().filter_map(|h| Some((h, h.lease?))).collect();
    for &(h, lease) in &runs {
        let expires = h.invoked + lease;
        for &(g, _) in &runs {
            let after = (g.start, &g.process, g.task) > (h.start, &h.process, h.task);
            if g.key == h.key && after && g.start < h.end && g.start < expires {
                f.violations.push(Violation::new(
                    Property::JobRuns,
                    g.start,
                    h.end.min(expires),
                    format!(
                        "job {}: {}/{} began a run while {}/{} ran with its lock ({} ms of \
                         its {} ms at_most_for left)",
                        h.key,
                        g.process,
                        g.task,
                        h.process,
                        h.task,
                        (expires - g.start) / 1000,
                        lease / 1000
                    ),
                ));
            }
        }
        let drift = lease / 100 + 2_000;
        if let Some(lost) = h.lost_at.filter(|&t| t + drift < expires) {
            f.violations.push(Violation::new(
                Property::JobRuns,
                h.start,
                lost,
                format!(
                    "job {}: {}/{} was told its lock was gone {} ms before its {} ms \
                     at_most_for ran out",
                    h.key,
                    h.process,
                    h.task,
                    (expires - lost) / 1000,
                    lease / 1000
                ),
            ));
        }
    }
}

/// The job scenario: at most one run per tick of the schedule (a run's `value` is its tick).
fn job_ticks(events: &[Event], f: &mut Findings) {
    let mut runs: HashMap<(&str, i64), Vec<&Event>> = HashMap::new();
    for e in events
        .iter()
        .filter(|e| e.f == Op::Acquire && e.ty == Type::Ok && e.value.is_some())
    {
        runs.entry((e.key.as_deref().unwrap_or(""), e.value.unwrap_or(0)))
            .or_default()
            .push(e);
    }
    let mut ticks: Vec<_> = runs.into_iter().filter(|(_, r)| r.len() > 1).collect();
    ticks.sort_by_key(|((_, tick), _)| *tick);
    for ((key, tick), r) in ticks {
        f.overlaps += 1;
        let who: Vec<String> = r
            .iter()
            .map(|e| format!("{}/{}", e.process, e.task))
            .collect();
        f.violations.push(Violation::new(
            Property::Exclusion,
            r[0].t_us,
            r[r.len() - 1].t_us,
            format!(
                "job {key} ran {} times in tick {tick}: {}",
                r.len(),
                who.join(", ")
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    //! Each checker against a clean history and against one with a seeded violation: none
    //! can pass vacuously.
    use super::*;

    const MS: u64 = 1000;

    /// A hold of `key` by `p`/0 from `a` to `b` ms, token `token`.
    fn hold(p: &str, a: u64, b: u64, token: u128) -> Vec<Event> {
        vec![
            Event::at(a * MS - 100, p, 0, Type::Invoke, Op::Acquire).key("k"),
            Event::at(a * MS, p, 0, Type::Ok, Op::Acquire)
                .key("k")
                .token(token),
            Event::at(b * MS, p, 0, Type::Invoke, Op::Release).key("k"),
            Event::at(b * MS + 100, p, 0, Type::Ok, Op::Release).key("k"),
        ]
    }

    fn history(parts: Vec<Vec<Event>>) -> Vec<Event> {
        crate::history::merge(parts)
    }

    fn write(by: &str, token: u128, before: i64, after: i64, accepted: bool) -> ResourceOp {
        ResourceOp {
            op: "write".into(),
            token: token.to_string(),
            by: by.into(),
            accepted,
            before,
            after: if accepted { after } else { before },
        }
    }

    fn run(events: &[Event]) -> Findings {
        check(events, &[], None, &[], &Limits::default())
    }

    #[test]
    fn a_clean_history_passes() {
        let h = history(vec![hold("w0", 10, 20, 1), hold("w1", 21, 30, 2)]);
        let f = run(&h);
        assert!(f.passed(), "{:?}", f.violations);
        assert_eq!(f.grants, 2);
        assert_eq!(f.overlaps, 0);
    }

    /// A waiter `p`/0 that invokes at `a` ms and is granted at `g` ms, holding to `r` ms.
    fn waited(p: &str, a: u64, g: u64, r: u64, token: u128) -> Vec<Event> {
        vec![
            Event::at(a * MS, p, 0, Type::Invoke, Op::Acquire).key("k"),
            Event::at(g * MS, p, 0, Type::Ok, Op::Acquire)
                .key("k")
                .token(token),
            Event::at(r * MS, p, 0, Type::Invoke, Op::Release).key("k"),
            Event::at(r * MS + 100, p, 0, Type::Ok, Op::Release).key("k"),
        ]
    }

    #[test]
    fn fairness_finds_a_waiter_passed_over_and_allows_for_arrival_and_stops() {
        let limits = Limits {
            fifo: true,
            ..Limits::default()
        };
        // w0 holds 0..1000; w1 waits from 100, w2 from 400 (300 ms later): w1 first.
        let fifo = history(vec![
            waited("w0", 0, 0, 1000, 1),
            waited("w1", 100, 1000, 1200, 2),
            waited("w2", 400, 1200, 1300, 3),
        ]);
        assert!(check(&fifo, &[], None, &[], &limits).passed());
        // w2 is served before w1, which had waited 300 ms longer.
        let passed = history(vec![
            waited("w0", 0, 0, 1000, 1),
            waited("w2", 400, 1000, 1200, 2),
            waited("w1", 100, 1200, 1300, 3),
        ]);
        let f = check(&passed, &[], None, &[], &limits);
        assert_eq!(f.violations.len(), 1, "{:?}", f.violations);
        assert_eq!(f.violations[0].property, Property::Fairness);
        assert!(
            f.violations[0].detail.contains("w1/0"),
            "{:?}",
            f.violations
        );
        // Without the check (not a fair-lock scenario) the same history passes.
        assert!(check(&passed, &[], None, &[], &Limits::default()).passed());
        // A waiter that timed out after the other's grant: its leave may have handed the
        // lock on before it recorded the timeout.
        let timed_out = history(vec![
            waited("w0", 0, 0, 1000, 1),
            waited("w2", 400, 1000, 1200, 2),
            vec![
                Event::at(100 * MS, "w1", 0, Type::Invoke, Op::Acquire).key("k"),
                Event::at(1001 * MS, "w1", 0, Type::Fail, Op::Acquire)
                    .key("k")
                    .detail("timed out"),
            ],
        ]);
        assert!(check(&timed_out, &[], None, &[], &limits).passed());
        // Arrivals closer than the margin are not ordered by the history's clock.
        let close = history(vec![
            waited("w0", 0, 0, 1000, 1),
            waited("w2", 150, 1000, 1200, 2),
            waited("w1", 100, 1200, 1300, 3),
        ]);
        assert!(check(&close, &[], None, &[], &limits).passed());
        // A waiter stopped (SIGSTOP) while the other was served may have been dropped.
        let stopped = history(vec![
            passed.clone(),
            vec![
                Event::at(500 * MS, "nemesis", 0, Type::Invoke, Op::Fault)
                    .detail("SIGSTOP waiter w1"),
                Event::at(900 * MS, "nemesis", 0, Type::Ok, Op::Fault).detail("SIGSTOP waiter w1"),
            ],
        ]);
        let f = check(&stopped, &[], None, &[], &limits);
        assert!(
            f.violations
                .iter()
                .all(|v| v.property != Property::Fairness),
            "{:?}",
            f.violations
        );
    }

    #[test]
    fn renewal_finds_a_lease_lost_without_a_fault() {
        let limits = Limits {
            no_loss: true,
            ..Limits::default()
        };
        let mut h = hold("w0", 10, 3000, 1);
        assert!(check(&history(vec![h.clone()]), &[], None, &[], &limits).passed());
        h.insert(2, Event::at(800 * MS, "w0", 0, Type::Ok, Op::Lost).key("k"));
        let f = check(&history(vec![h.clone()]), &[], None, &[], &limits);
        assert_eq!(f.violations.len(), 1, "{:?}", f.violations);
        assert_eq!(f.violations[0].property, Property::Renewal);
        assert!(check(&history(vec![h]), &[], None, &[], &Limits::default()).passed());
    }

    #[test]
    fn exclusion_finds_an_overlap() {
        let h = history(vec![hold("w0", 10, 20, 1), hold("w1", 15, 30, 2)]);
        let f = run(&h);
        assert_eq!(f.overlaps, 1, "{:?}", f.violations);
        let v = &f.violations[0];
        assert_eq!(v.property, Property::Exclusion);
        assert_eq!((v.t_us, v.until_us), (15 * MS, 20 * MS));
        assert!(
            v.detail.contains("w0/0") && v.detail.contains("w1/0"),
            "{}",
            v.detail
        );
    }

    #[test]
    fn exclusion_excuses_an_overlap_with_a_hold_reported_lost() {
        let mut w0 = hold("w0", 10, 20, 1);
        w0.push(Event::at(18 * MS, "w0", 0, Type::Ok, Op::Lost).key("k"));
        let f = run(&history(vec![w0, hold("w1", 15, 30, 2)]));
        assert_eq!(f.overlaps, 0, "{:?}", f.violations);
        assert_eq!(f.excused_overlaps, 1);
        assert_eq!(f.lost_leases, 1);
    }

    #[test]
    fn exclusion_allows_shared_holds_up_to_the_capacity() {
        let shared = |p: &str, a, b| {
            hold(p, a, b, 0)
                .into_iter()
                .map(|e| {
                    if e.f == Op::Acquire && e.ty == Type::Ok {
                        e.mode(Mode::Shared)
                    } else {
                        e
                    }
                })
                .collect::<Vec<_>>()
        };
        let two = history(vec![shared("w0", 10, 20), shared("w1", 12, 22)]);
        let limits = Limits {
            shared_capacity: Some(2),
            ..Limits::default()
        };
        let f = check(&two, &[], None, &[], &limits);
        assert_eq!(f.overlaps, 0, "{:?}", f.violations);
        let three = history(vec![
            shared("w0", 10, 20),
            shared("w1", 12, 22),
            shared("w2", 14, 16),
        ]);
        let f = check(&three, &[], None, &[], &limits);
        assert_eq!(f.overlaps, 1, "{:?}", f.violations);
        // A writer among readers overlaps.
        let mixed = history(vec![shared("w0", 10, 20), hold("w1", 12, 13, 0)]);
        assert_eq!(run(&mixed).overlaps, 1);
    }

    #[test]
    fn fencing_finds_a_token_that_did_not_rise() {
        let h = history(vec![hold("w0", 10, 20, 5), hold("w1", 21, 30, 5)]);
        let f = run(&h);
        assert_eq!(f.token_regressions, 1, "{:?}", f.violations);
        assert_eq!(f.violations[0].property, Property::Fencing);
        let h = history(vec![hold("w0", 10, 20, 5), hold("w1", 21, 30, 4)]);
        assert_eq!(run(&h).token_regressions, 1);
        // Overlapping holds (one lost) may carry tokens in either order.
        let mut w0 = hold("w0", 10, 20, 5);
        w0.push(Event::at(18 * MS, "w0", 0, Type::Ok, Op::Lost).key("k"));
        let f = run(&history(vec![w0, hold("w1", 15, 30, 6)]));
        assert_eq!(f.token_regressions, 0, "{:?}", f.violations);
    }

    #[test]
    fn a_grant_recorded_after_its_process_resumed_may_predate_the_stop() {
        // w0 asks at 10 ms and is stopped from 100 to 1000 ms; meanwhile w1 holds token 7
        // from 500 to 900 ms; w0's grant (token 5) is recorded at 1001 ms, after the resume:
        // it may have been made before the stop (w1 then had the lock once w0's lease ran
        // out), so it is no regression.
        let stop = |detail: &str| {
            vec![
                Event::at(100 * MS, "nemesis", 0, Type::Invoke, Op::Fault).detail(detail),
                Event::at(1000 * MS, "nemesis", 0, Type::Ok, Op::Fault).detail(detail),
            ]
        };
        let w0 = || {
            let mut w0 = hold("w0", 1001, 1010, 5);
            w0[0].t_us = 10 * MS;
            w0
        };
        let h = history(vec![
            w0(),
            hold("w1", 500, 900, 7),
            stop("SIGSTOP holder w0"),
        ]);
        let f = run(&h);
        assert_eq!(f.token_regressions, 0, "{:?}", f.violations);
        // Without the stop it is one.
        let h = history(vec![w0(), hold("w1", 500, 900, 7)]);
        assert_eq!(run(&h).token_regressions, 1);
        // Nor does another process's stop excuse it.
        let h = history(vec![
            w0(),
            hold("w1", 500, 900, 7),
            stop("SIGSTOP waiter w2"),
        ]);
        assert_eq!(run(&h).token_regressions, 1);
        // A hold that ended before the stop still counts.
        let h = history(vec![w0(), hold("w1", 20, 90, 7), stop("SIGSTOP holder w0")]);
        assert_eq!(run(&h).token_regressions, 1);
        // Another task of w0 recording first after the resume excuses it still (the tasks
        // record what they had pending in any order)...
        let other_task = vec![
            Event::at(50 * MS, "w0", 1, Type::Invoke, Op::Acquire).key("other"),
            Event::at(1000 * MS + 500, "w0", 1, Type::Fail, Op::Acquire).key("other"),
        ];
        let h = history(vec![
            w0(),
            other_task.clone(),
            hold("w1", 500, 900, 7),
            stop("SIGSTOP holder w0"),
        ]);
        assert_eq!(run(&h).token_regressions, 0, "{:?}", run(&h).violations);
        // ...but not when its own task recorded something after the resume first.
        let mut w0_late = w0();
        w0_late.push(Event::at(1000 * MS + 500, "w0", 0, Type::Info, Op::Acquire).key("k"));
        let h = history(vec![
            w0_late,
            hold("w1", 500, 900, 7),
            stop("SIGSTOP holder w0"),
        ]);
        assert_eq!(run(&h).token_regressions, 1);
    }

    #[test]
    fn fencing_finds_a_stale_write_the_resource_accepted() {
        let h = history(vec![hold("w0", 10, 20, 1), hold("w1", 21, 30, 2)]);
        let ok = [write("w0/0", 1, 0, 1, true), write("w1/0", 2, 1, 2, true)];
        let f = check(&h, &ok, None, &[], &Limits::default());
        assert!(f.passed(), "{:?}", f.violations);
        let refused = [write("w1/0", 2, 0, 1, true), write("w0/0", 1, 1, 1, false)];
        let f = check(&h, &refused, None, &[], &Limits::default());
        assert!(f.passed(), "{:?}", f.violations);
        assert_eq!(f.stale_writes_rejected, 1);
        let stale = [write("w1/0", 2, 0, 1, true), write("w0/0", 1, 1, 2, true)];
        let f = check(&h, &stale, None, &[], &Limits::default());
        assert_eq!(f.stale_writes_accepted, 1, "{:?}", f.violations);
        assert!(f.violations[0].detail.contains("token 1 after token 2"));
    }

    #[test]
    fn updates_finds_a_lost_update_and_a_short_counter() {
        let h = history(vec![hold("w0", 10, 20, 1)]);
        let lost = [write("w0/0", 1, 0, 1, true), write("w1/0", 2, 1, 1, true)];
        let f = check(&h, &lost, None, &[], &Limits::default());
        assert_eq!(f.lost_updates, 1, "{:?}", f.violations);
        assert_eq!(f.violations[0].property, Property::Updates);
        let f = check(&h, &[], Some((10, 10)), &[], &Limits::default());
        assert!(f.passed(), "{:?}", f.violations);
        let f = check(&h, &[], Some((10, 7)), &[], &Limits::default());
        assert_eq!(f.lost_updates, 3);
    }

    #[test]
    fn a_stopped_process_does_not_wait_while_it_is_stopped() {
        // w2's task waits from 50 ms; w2 is stopped from 100 ms to 9,000 ms; w0 holds from
        // 10 to 200 ms and then stops working (the end of a run); w2 gets the lock at
        // 9,001 ms, just after its resume. No one that could act waited while it was free.
        let mut w2 = hold("w2", 9001, 9010, 2);
        w2[0].t_us = 50 * MS;
        let stop = |detail: &str| {
            vec![
                Event::at(100 * MS, "nemesis", 0, Type::Invoke, Op::Fault).detail(detail),
                Event::at(9000 * MS, "nemesis", 0, Type::Ok, Op::Fault).detail(detail),
            ]
        };
        let h = history(vec![
            hold("w0", 10, 200, 1),
            w2.clone(),
            stop("SIGSTOP waiter w2"),
        ]);
        let f = run(&h);
        assert!(f.max_unavailable_ms <= 1, "{}", f.max_unavailable_ms);
        // Another process's stop leaves w2's wait whole: 8.8 s with the lock free.
        let h = history(vec![hold("w0", 10, 200, 1), w2, stop("SIGSTOP waiter w1")]);
        let f = run(&h);
        assert!(f.max_unavailable_ms >= 8_800, "{}", f.max_unavailable_ms);
    }

    #[test]
    fn liveness_finds_a_waiter_idle_while_the_lock_is_free() {
        // w1 waits from 19 ms; w0 releases at 20 ms; w1 gets it at 21 ms: fine.
        let mut w1 = hold("w1", 21, 30, 2);
        w1[0].t_us = 19 * MS;
        let f = run(&history(vec![hold("w0", 10, 20, 1), w1.clone()]));
        assert!(f.passed(), "{:?}", f.violations);
        assert!(f.max_unavailable_ms <= 1, "{}", f.max_unavailable_ms);
        // w1 gets it only 1.5 s after the release.
        let mut late = hold("w1", 1521, 1530, 2);
        late[0].t_us = 19 * MS;
        let f = run(&history(vec![hold("w0", 10, 20, 1), late.clone()]));
        assert_eq!(f.liveness_violations, 1, "{:?}", f.violations);
        assert_eq!(f.violations[0].property, Property::Liveness);
        assert!(f.max_unavailable_ms >= 1500);
        // The same during a fault is excused by the idle limit...
        let fault = vec![
            Event::at(15 * MS, "nemesis", 0, Type::Invoke, Op::Fault).detail("kill"),
            Event::at(1500 * MS, "nemesis", 0, Type::Ok, Op::Fault).detail("kill"),
        ];
        let f = run(&history(vec![hold("w0", 10, 20, 1), late, fault.clone()]));
        assert!(f.passed(), "{:?}", f.violations);
        // ...but not a grant later than the allowance after the heal.
        let mut too_late = hold("w1", 7000, 7010, 2);
        too_late[0].t_us = 19 * MS;
        let next = hold("w2", 8000, 8010, 3);
        let f = run(&history(vec![
            hold("w0", 10, 20, 1),
            too_late.clone(),
            fault.clone(),
        ]));
        assert!(
            f.passed(),
            "the workload stopped too soon to judge: {:?}",
            f.violations
        );
        let f = run(&history(vec![hold("w0", 10, 20, 1), too_late, next, fault]));
        assert!(f.liveness_violations >= 1, "{:?}", f.violations);
        assert!(f
            .violations
            .iter()
            .any(|v| v.detail.contains("after a fault healed")));
    }

    #[test]
    fn orphans_are_violations() {
        let h = history(vec![hold("w0", 10, 20, 1)]);
        let f = check(&h, &[], None, &["key k left".into()], &Limits::default());
        assert_eq!(f.orphans, 1);
        assert_eq!(f.violations[0].property, Property::Orphans);
    }

    #[test]
    fn pause_loss_finds_a_loss_reported_late() {
        let lease = Duration::from_millis(1000);
        let pause = |a: u64, b: u64| {
            vec![
                Event::at(a * MS, "nemesis", 0, Type::Invoke, Op::Fault)
                    .detail("SIGSTOP holder w0"),
                Event::at(b * MS, "nemesis", 0, Type::Ok, Op::Fault).detail("SIGSTOP holder w0"),
            ]
        };
        let mut w0 = hold("w0", 10, 3000, 1);
        w0.push(Event::at(2600 * MS, "w0", 0, Type::Ok, Op::Lost).key("k"));
        let h = history(vec![w0, pause(100, 2500)]);
        let mut f = Findings::default();
        pause_loss(&h, &holds(&h), lease, &mut f);
        assert!(f.violations.is_empty(), "{:?}", f.violations);
        let h = history(vec![hold("w0", 10, 3000, 1), pause(100, 2500)]);
        let mut f = Findings::default();
        pause_loss(&h, &holds(&h), lease, &mut f);
        assert_eq!(f.violations.len(), 1);
        assert!(
            f.violations[0].detail.contains("never"),
            "{}",
            f.violations[0].detail
        );
        // A release invoked just after the nemesis logged the pause (before the signal took
        // effect) ended the hold before the stop: its reply comes after the resume.
        let mut w0 = hold("w0", 10, 100, 1);
        w0[2].t_us += 200;
        w0[3].t_us = 2500 * MS + 500;
        let h = history(vec![w0, pause(100, 2500)]);
        let mut f = Findings::default();
        pause_loss(&h, &holds(&h), lease, &mut f);
        assert!(f.violations.is_empty(), "{:?}", f.violations);
    }

    #[test]
    fn waiter_pause_finds_a_paused_waiter_stalling_the_others() {
        let stall = Duration::from_millis(2000);
        let pause = vec![
            Event::at(100 * MS, "nemesis", 0, Type::Invoke, Op::Fault).detail("SIGSTOP waiter w2"),
            Event::at(8000 * MS, "nemesis", 0, Type::Ok, Op::Fault).detail("SIGSTOP waiter w2"),
        ];
        // w2 (paused) waits from 50 ms to past the resume; w1 waits from 150 ms for a lock
        // w0 frees at 200 ms.
        let paused = vec![Event::at(50 * MS, "w2", 0, Type::Invoke, Op::Acquire).key("k")];
        let mut w1 = hold("w1", 1500, 1600, 2);
        w1[0].t_us = 150 * MS;
        let h = history(vec![
            hold("w0", 10, 200, 1),
            w1,
            paused.clone(),
            pause.clone(),
        ]);
        let mut f = Findings::default();
        waiter_pause(&h, &stops(&h), &holds(&h), stall, &mut f);
        assert!(f.violations.is_empty(), "{:?}", f.violations);
        // w1 gets the lock only 4.8 s after it was freed (at 200.1 ms): the paused waiter stalled it.
        let mut w1 = hold("w1", 5000, 5100, 2);
        w1[0].t_us = 150 * MS;
        let h = history(vec![hold("w0", 10, 200, 1), w1, paused, pause]);
        let mut f = Findings::default();
        waiter_pause(&h, &stops(&h), &holds(&h), stall, &mut f);
        assert_eq!(f.violations.len(), 1, "{:?}", f.violations);
        assert!(
            f.violations[0].detail.contains("4799 ms"),
            "{}",
            f.violations[0].detail
        );
    }

    #[test]
    fn unreplicated_finds_a_grant_while_the_replicas_were_paused() {
        let fault = vec![
            Event::at(5 * MS, "nemesis", 0, Type::Invoke, Op::Fault)
                .detail("SIGSTOP both replicas of 1"),
            Event::at(50 * MS, "nemesis", 0, Type::Ok, Op::Fault)
                .detail("SIGSTOP both replicas of 1"),
        ];
        let h = history(vec![hold("w0", 60, 70, 1), fault.clone()]);
        let mut f = Findings::default();
        unreplicated(&h, &mut f);
        assert!(f.violations.is_empty(), "{:?}", f.violations);
        let h = history(vec![hold("w0", 10, 20, 1), fault.clone()]);
        let mut f = Findings::default();
        unreplicated(&h, &mut f);
        assert_eq!(f.violations.len(), 1);
        assert_eq!(f.violations[0].property, Property::Replication);
    }

    #[test]
    fn unreplicated_finds_a_grant_to_a_waiter_that_began_before_the_stop() {
        // Every replica stopped from 100 to 1,600 ms; the waiter waits from 50 ms.
        let fault = vec![
            Event::at(100 * MS, "nemesis", 0, Type::Invoke, Op::Fault)
                .detail("SIGSTOP both replicas of 1"),
            Event::at(1600 * MS, "nemesis", 0, Type::Ok, Op::Fault)
                .detail("SIGSTOP both replicas of 1"),
        ];
        let waited_from_50 = |granted: u64| {
            let mut h = hold("w0", granted, granted + 10, 1);
            h[0].t_us = 50 * MS;
            h
        };
        let check = |granted: u64| {
            let h = history(vec![waited_from_50(granted), fault.clone()]);
            let mut f = Findings::default();
            unreplicated(&h, &mut f);
            f.violations
        };
        // An acknowledgement given before the stop, recorded within the margin: fine.
        assert!(check(150).is_empty(), "{:?}", check(150));
        // A grant 1 s into the stop (a WAIT that gave up, taken as confirmed): not.
        let v = check(1100);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].detail.contains("1000 ms into"), "{}", v[0].detail);
        // After the resume: fine.
        assert!(check(1700).is_empty());
    }

    /// A job run by `p`/0: acquire invoked 0.1 ms before `a` ms, granted at `a` with
    /// `at_most_for` `lease` ms, released at `b`.
    fn job_run(p: &str, a: u64, b: u64, lease: u64) -> Vec<Event> {
        let mut h = hold(p, a, b, 0);
        h[1] = Event::at(a * MS, p, 0, Type::Ok, Op::Acquire)
            .key("k")
            .lease(Duration::from_millis(lease));
        h
    }

    #[test]
    fn job_runs_finds_a_run_begun_or_a_loss_told_within_another_runs_lease() {
        let check = |h: &[Event]| {
            let mut f = Findings::default();
            job_runs(&holds(h), &mut f);
            f.violations
        };
        // w0 overruns its 300 ms (told by its own deadline, 300 ms less the 5 ms drift
        // allowance after its acquire, at 306 ms; its release at 800 ms finds another's
        // lock); w1 takes the lock at 500 ms: fine.
        let mut w0 = job_run("w0", 10, 800, 300);
        w0.insert(2, Event::at(306 * MS, "w0", 0, Type::Ok, Op::Lost).key("k"));
        let w1 = job_run("w1", 500, 1250, 5000);
        let ok = history(vec![w0.clone(), w1.clone()]);
        assert!(check(&ok).is_empty(), "{:?}", check(&ok));
        // w2 begins at 1,000 ms while w1 runs with 4.5 s of its lease left.
        let bad = history(vec![
            w0.clone(),
            w1.clone(),
            job_run("w2", 1000, 1100, 5000),
        ]);
        let v = check(&bad);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].property, Property::JobRuns);
        assert!(
            v[0].detail.contains("w2/0 began a run while w1/0"),
            "{}",
            v[0].detail
        );
        // w1 is told its lock is gone at its release, 4.2 s before its lease ran out.
        let mut told = w1.clone();
        told.insert(
            3,
            Event::at(1250 * MS + 50, "w1", 0, Type::Ok, Op::Lost).key("k"),
        );
        let v = check(&history(vec![w0.clone(), told]));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].detail.contains("was told its lock was gone"),
            "{}",
            v[0].detail
        );
        // E excuses the overlap with w1 once w1 was told; J does not.
        let mut told = w1;
        told.insert(
            2,
            Event::at(1050 * MS, "w1", 0, Type::Ok, Op::Lost).key("k"),
        );
        let h = history(vec![w0, told, job_run("w2", 1100, 1200, 5000)]);
        let f = check_all(&h);
        assert_eq!(f.overlaps, 0, "{:?}", f.violations);
        assert!(f.violations.iter().any(|v| v.property == Property::JobRuns));
    }

    fn check_all(h: &[Event]) -> Findings {
        check(h, &[], None, &[], &Limits::default())
    }

    #[test]
    fn renewal_finds_a_kind_never_held_for_two_leases() {
        let limits = Limits {
            no_loss: true,
            lease: Some(Duration::from_millis(600)),
            renewed_kinds: &["plain", "write"],
            ..Limits::default()
        };
        // Each kind on a lock of its own.
        let held = |p: &str, kind: &str, a: u64, b: u64| {
            let mut h = hold(p, a, b, 0);
            h[1] = h[1].clone().kind(kind);
            h.into_iter().map(|e| e.key(kind)).collect::<Vec<_>>()
        };
        let both = history(vec![
            held("w0", "plain", 10, 1300),
            held("w1", "write", 10, 1300),
        ]);
        let f = check(&both, &[], None, &[], &limits);
        assert!(f.passed(), "{:?}", f.violations);
        // The write holds were all shorter than two leases.
        let short = history(vec![
            held("w0", "plain", 10, 1300),
            held("w1", "write", 10, 1000),
        ]);
        let f = check(&short, &[], None, &[], &limits);
        assert_eq!(f.violations.len(), 1, "{:?}", f.violations);
        assert_eq!(f.violations[0].property, Property::Renewal);
        assert!(f.violations[0].detail.contains("no write hold"));
        // A write hold lost: the loss, and no write hold that counts.
        let mut lost = held("w1", "write", 10, 1300);
        lost.insert(
            2,
            Event::at(700 * MS, "w1", 0, Type::Ok, Op::Lost).key("write"),
        );
        let f = check(
            &history(vec![held("w0", "plain", 10, 1300), lost]),
            &[],
            None,
            &[],
            &limits,
        );
        assert_eq!(f.violations.len(), 2, "{:?}", f.violations);
    }

    /// `n` holds of one lock in a row, each 10 ms long, `gap` ms after the previous one's
    /// release; every holder waits from 1 ms.
    fn chain(n: u64, gap: u64) -> Vec<Event> {
        let parts = (0..n)
            .map(|i| {
                let a = 10 + i * (10 + gap);
                let mut h = hold(&format!("w{i}"), a, a + 10, 0);
                h[0].t_us = MS;
                h
            })
            .collect();
        history(parts)
    }

    #[test]
    fn wake_ups_finds_a_slow_median() {
        let bound = Duration::from_millis(50);
        let check = |h: &[Event]| {
            let mut f = Findings::default();
            wake_ups(h, &stops(h), &holds(h), bound, &mut f);
            f
        };
        let fast = check(&chain(60, 1));
        assert!(fast.violations.is_empty(), "{:?}", fast.violations);
        assert_eq!(fast.median_wake_ms, Some(1.0));
        let slow = check(&chain(60, 300));
        assert_eq!(slow.violations.len(), 1, "{:?}", slow.violations);
        assert_eq!(slow.violations[0].property, Property::Wakeup);
        assert_eq!(slow.median_wake_ms, Some(300.0));
        // Too few releases with a waiter to tell.
        let few = check(&chain(10, 1));
        assert_eq!(few.violations.len(), 1, "{:?}", few.violations);
        assert!(few.violations[0].detail.contains("only 9"));
    }

    #[test]
    fn job_ticks_finds_two_runs_in_one_tick() {
        let run = |p: &str, t: u64, tick: i64| {
            Event::at(t * MS, p, 0, Type::Ok, Op::Acquire)
                .key("job")
                .value(tick)
        };
        let h = history(vec![vec![run("w0", 10, 1), run("w1", 20, 2)]]);
        let mut f = Findings::default();
        job_ticks(&h, &mut f);
        assert!(f.violations.is_empty());
        let h = history(vec![vec![run("w0", 10, 1), run("w1", 12, 1)]]);
        job_ticks(&h, &mut f);
        assert_eq!(f.violations.len(), 1);
        assert!(f.violations[0].detail.contains("tick 1"));
    }
}
