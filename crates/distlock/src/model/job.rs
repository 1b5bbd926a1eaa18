//! The model of the job lock (ShedLock's layout): every interleaving of a few instances
//! taking one job lock, over the real scripts and ShedLock's own `SET NX PX`, with the
//! requests built by the engine's own builders (`job::request`).
//!
//! Modelled: a request's first attempt by `SET NX PX` and every later one (a resend after a
//! lost reply, a poll after a refusal) by job_acquire.lua, a refused value replaced by a fresh
//! one and a value whose reply was lost sent again (as `JobRequest::attempt`); a waiter that
//! gives up (the give-back, compared by value); the keep-alive (job_extend.lua to
//! `at_most_for`); the owner-checked release (kept until `at_least_for`), its reply lost and
//! resent; a crash or a pause past the lease; time jumping to the next deadline.
//!
//! Properties, in every state: at most one instance believes it holds the lock with a valid
//! lease ("mutual exclusion"); a release or extension that finds another value (or none)
//! changes nothing ("owner-checked"); no script errs; the key never lives longer than
//! `at_most_for` ("no leak"); and some path gets every instance through its cycle.

use std::time::{Duration, SystemTime};

use stateright::{Model, Property};

use super::counts::{self, START_US};
use super::keyspace::{Keyspace, Reply, Val};
use crate::job::request::{acquire_call, extend_call, first_set, job_value, release_call};
use crate::scripts::reply::{GONE, HELD_BY_OTHER};

/// The job lock's key.
const KEY: &str = "job-lock:default:j";
/// `at_most_for` (ms).
const AT_MOST_MS: u64 = 3_000;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Phase {
    Idle,
    /// An attempt with value `v` whose reply was lost: sent again, by the script.
    Acquiring {
        v: u32,
    },
    /// Refused: the next attempt writes a fresh value.
    Waiting,
    /// Granted at `since` (ms), valid locally until `valid_until`.
    Holding {
        v: u32,
        since: u64,
        valid_until: u64,
    },
    /// A release whose reply was lost, kept `keep_ms`.
    Releasing {
        v: u32,
        keep_ms: u64,
    },
    /// Giving back a grant of unknown outcome.
    GivingBack {
        v: u32,
    },
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct State {
    ks: Keyspace,
    clients: Vec<Phase>,
    left: Vec<u8>,
    minted: u32,
    /// A release or an extension by an instance that does not hold the lock changed it.
    meddled: bool,
    lost_left: u8,
    crashes_left: u8,
    cancels_left: u8,
    renewals_left: Vec<u8>,
    waits_left: Vec<u8>,
    error: Option<String>,
}

crate::model::trace::traced!(State);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Action {
    Send {
        client: usize,
        lost: bool,
    },
    /// The keep-alive of a holder.
    KeepAlive {
        client: usize,
    },
    /// A waiter gives up.
    Cancel {
        client: usize,
    },
    Crash {
        client: usize,
    },
    Tick,
}

/// `at_least_ms` per instance (its `at_least_for`), one cycle each.
pub(super) struct JobModel {
    pub(super) at_least_ms: Vec<u64>,
    pub(super) lost: u8,
    pub(super) crashes: u8,
    pub(super) cancels: u8,
    pub(super) renewals: u8,
    pub(super) waits: u8,
}

/// The value instance `client` writes for its `v`th attempt (a fresh uuid each).
fn value(client: usize, v: u32) -> String {
    let at = SystemTime::UNIX_EPOCH + Duration::from_micros(START_US);
    job_value(
        at,
        &format!("host{client}"),
        uuid::Uuid::from_u128(u128::from(v)),
    )
}

fn valid(now: u64) -> u64 {
    counts::valid_until(now, AT_MOST_MS)
}

/// Send `inv`, an owner-checked call for `value` (a release or an extension): when the key
/// held another value or none, the call must have changed nothing (else `meddled`).
fn owner_checked(s: &mut State, value: &str, inv: &crate::scripts::Invocation<'_>) -> Reply {
    let before = s.ks.entry(KEY.as_bytes()).cloned();
    let ours = matches!(&before, Some(e) if e.val == Val::Str(value.as_bytes().to_vec()));
    let r = counts::send(&mut s.ks, inv, false);
    if !ours && s.ks.entry(KEY.as_bytes()).cloned() != before {
        s.meddled = true;
    }
    r
}

fn end_cycle(s: &mut State, client: usize) {
    s.clients[client] = Phase::Idle;
    s.left[client] = s.left[client].saturating_sub(1);
}

impl JobModel {
    /// An attempt with value `v` (by `SET NX PX` when `first`).
    fn attempt(&self, s: &mut State, client: usize, v: u32, first: bool, lost: bool) {
        let now = s.ks.now_ms();
        let value = value(client, v);
        let set_taken = first
            && match counts::command(&mut s.ks, &first_set(KEY, &value, AT_MOST_MS)) {
                Reply::Status(_) => true,
                Reply::Nil => false,
                other => {
                    s.error = Some(format!("set: {other:?}"));
                    return;
                }
            };
        let taken = set_taken
            || match counts::send(&mut s.ks, &acquire_call(KEY, &value, AT_MOST_MS), false) {
                Reply::Int(1) => true,
                Reply::Int(0) => false,
                other => {
                    s.error = Some(format!("acquire: {other:?}"));
                    return;
                }
            };
        s.clients[client] = match (lost, taken) {
            (true, _) => Phase::Acquiring { v },
            (false, true) => Phase::Holding {
                v,
                since: now,
                valid_until: valid(now),
            },
            (false, false) => Phase::Waiting,
        };
    }

    /// The owner-checked release of `v`, kept `keep_ms`: a release that finds another value
    /// or none must change nothing.
    fn release(&self, s: &mut State, client: usize, v: u32, keep_ms: u64, lost: bool, give: bool) {
        let value = value(client, v);
        let request = release_call("model".into(), KEY, &value, keep_ms);
        match owner_checked(s, &value, request.call()) {
            Reply::Int(0 | 1 | GONE | HELD_BY_OTHER) if lost => {
                s.clients[client] = if give {
                    Phase::GivingBack { v }
                } else {
                    Phase::Releasing { v, keep_ms }
                };
            }
            Reply::Int(0 | 1 | GONE | HELD_BY_OTHER) => end_cycle(s, client),
            other => s.error = Some(format!("release: {other:?}")),
        }
    }
}

impl Model for JobModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let n = self.at_least_ms.len();
        vec![State {
            ks: Keyspace::new(START_US),
            clients: vec![Phase::Idle; n],
            left: vec![1; n],
            minted: 0,
            meddled: false,
            lost_left: self.lost,
            crashes_left: self.crashes,
            cancels_left: self.cancels,
            renewals_left: vec![self.renewals; n],
            waits_left: vec![self.waits; n],
            error: None,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.error.is_some() || s.meddled {
            return;
        }
        for (client, phase) in s.clients.iter().enumerate() {
            match phase {
                Phase::Done => continue,
                Phase::Idle if s.left[client] == 0 => continue,
                Phase::Waiting if s.waits_left[client] == 0 => {}
                _ => {
                    actions.push(Action::Send {
                        client,
                        lost: false,
                    });
                    if s.lost_left > 0 {
                        actions.push(Action::Send { client, lost: true });
                    }
                }
            }
            if matches!(phase, Phase::Waiting | Phase::Acquiring { .. }) && s.cancels_left > 0 {
                actions.push(Action::Cancel { client });
            }
            if matches!(phase, Phase::Holding { .. }) && s.renewals_left[client] > 0 {
                actions.push(Action::KeepAlive { client });
            }
            if !matches!(phase, Phase::Idle) && s.crashes_left > 0 {
                actions.push(Action::Crash { client });
            }
        }
        actions.push(Action::Tick);
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        let now = s.ks.now_ms();
        match action {
            Action::Tick => {
                let valid: Vec<u64> = s
                    .clients
                    .iter()
                    .filter_map(|c| match c {
                        Phase::Holding { valid_until, .. } => Some(*valid_until),
                        _ => None,
                    })
                    .collect();
                counts::tick(&mut s.ks, valid)?;
                return Some(s);
            }
            Action::Crash { client } => {
                s.crashes_left -= 1;
                s.clients[client] = Phase::Done;
            }
            Action::Cancel { client } => {
                s.cancels_left -= 1;
                match s.clients[client] {
                    // A refused value is not given back (it was never written).
                    Phase::Waiting => end_cycle(&mut s, client),
                    Phase::Acquiring { v } => s.clients[client] = Phase::GivingBack { v },
                    _ => return None,
                }
            }
            Action::KeepAlive { client } => {
                s.renewals_left[client] -= 1;
                let Phase::Holding { v, .. } = s.clients[client] else {
                    return None;
                };
                let value = value(client, v);
                match owner_checked(&mut s, &value, &extend_call(KEY, &value, AT_MOST_MS)) {
                    Reply::Int(1) => {
                        if let Phase::Holding { valid_until, .. } = &mut s.clients[client] {
                            *valid_until = valid(now);
                        }
                    }
                    // Not held: lost() fires, the job's run ends.
                    Reply::Int(GONE | HELD_BY_OTHER) => end_cycle(&mut s, client),
                    other => s.error = Some(format!("extend: {other:?}")),
                }
            }
            Action::Send { client, lost } => {
                if lost {
                    s.lost_left -= 1;
                }
                match s.clients[client].clone() {
                    Phase::Idle => {
                        s.minted += 1;
                        let v = s.minted;
                        self.attempt(&mut s, client, v, true, lost);
                    }
                    Phase::Acquiring { v } => self.attempt(&mut s, client, v, false, lost),
                    Phase::Waiting => {
                        s.waits_left[client] -= 1;
                        s.minted += 1;
                        let v = s.minted;
                        self.attempt(&mut s, client, v, false, lost);
                    }
                    Phase::Holding { v, since, .. } => {
                        // GuardInner::release_request: kept for what is left of at_least_for.
                        let keep = (since + self.at_least_ms[client]).saturating_sub(now);
                        self.release(&mut s, client, v, keep, lost, false);
                    }
                    Phase::Releasing { v, keep_ms } => {
                        self.release(&mut s, client, v, keep_ms, lost, false)
                    }
                    Phase::GivingBack { v } => self.release(&mut s, client, v, 0, lost, true),
                    Phase::Done => return None,
                }
            }
        }
        counts::settle(&mut s.ks);
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("mutual exclusion", |_, s: &State| {
                let now = s.ks.now_ms();
                s.clients
                    .iter()
                    .filter(
                        |c| matches!(c, Phase::Holding { valid_until, .. } if *valid_until > now),
                    )
                    .count()
                    <= 1
            }),
            Property::always("owner-checked", |_, s: &State| !s.meddled),
            Property::always("scripts run", |_, s: &State| s.error.is_none()),
            Property::always("no leak", |_, s: &State| {
                counts::no_leak(&s.ks, &[], |k| (k == KEY.as_bytes()).then_some(AT_MOST_MS))
            }),
            Property::sometimes("every cycle done", |_, s: &State| {
                s.left.iter().all(|l| *l == 0)
            }),
        ]
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.ks.now_us <= START_US + 4 * AT_MOST_MS * 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two instances (three with `DISTLOCK_MODEL_DEEP` set), one with an `at_least_for`:
    /// every interleaving of their attempts, keep-alives and releases, with lost replies, a
    /// give-up, a crash and time passing (a holder paused past its lease included).
    #[test]
    fn the_job_lock_keeps_its_properties_in_every_interleaving() {
        let deep = counts::deep();
        let mut at_least_ms = vec![1_000, 0];
        if deep {
            at_least_ms.push(0);
        }
        counts::check(
            if deep {
                "job lock, 3 instances (deep)"
            } else {
                "job lock, 2 instances"
            },
            JobModel {
                at_least_ms,
                lost: 1,
                crashes: 1,
                cancels: 1,
                renewals: 1,
                waits: 2,
            },
        );
    }
}
