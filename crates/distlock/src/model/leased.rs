//! The model of the leased semaphore (Redisson's `RPermitExpirableSemaphore` layout, with
//! distlock's direct hand-off): every interleaving of a few clients taking permits with
//! leases, over the real scripts, with the calls built by the engine's own builders
//! (`semaphore::calls::LeasedKeys`).
//!
//! Modelled: an acquire under a permit id, queued for hand-off when refused (each attempt
//! renews its place), its reply delivered or lost (a lost one is resent under the same id),
//! its first attempt's first send trying the fast path (`leased_acquire_fast.lua`) as the
//! engine's does, resends and later attempts going to the full script; a
//! grant found by an attempt with its lease cut short confirmed by extending it to the lease
//! asked for (`extend_to_lease`), as is a hand-off message (which only makes the waiter ask
//! the server, so it may come at any step); a waiter that gives up and leaves the queue
//! (giving back a hand-off that raced it); renewal (leased_extend.lua); release by id (its
//! first send through the fast path while the holder counts on its lease, as the engine
//! decides), its reply lost and resent; a crash (the permit returns when its lease ends);
//! time jumping to the next deadline (a lease, a waiter's liveness, a holder's local
//! validity).
//!
//! Properties, in every state: the available count and the leases add up to the size ("count
//! conserved": a resent acquire or release applied twice breaks it); no more live leases than
//! the size, no more clients holding with a valid lease than the size, and every such client's
//! lease lives on the server at least as long as it counts on ("live permits"); no script
//! errs; an attempt is never refused while its own permit is live ("a resend finds its
//! grant"); a release answers 1 only for a lease still running (the fast path reads no
//! clock; part of "scripts run"); the hand-off queue's keys live no longer than a waiter's
//! liveness ("no leak"); and some path gets every client through its cycle.

use stateright::{Model, Property};

use super::counts::{self, START_US};
use super::keyspace::{Keyspace, Reply, Val};
use crate::keys;
use crate::scripts::reply::GONE;
use crate::semaphore::calls::{self, member, LeasedKeys};

/// The semaphore's key.
const KEY: &str = "p";
/// The lease of every permit (ms).
const LEASE_MS: u64 = 3_000;
/// The waiters' liveness (ms).
const LIVENESS_MS: u64 = 1_500;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Phase {
    Idle,
    /// An attempt for permit `id` whose reply was lost, started at `started` (ms).
    Acquiring {
        id: u32,
        started: u64,
    },
    /// Refused and queued: attempts again, or hears of a hand-off.
    Waiting {
        id: u32,
    },
    /// A grant whose lease may be cut: extends it to the lease asked for (the lease then
    /// counts from the extension's start, as `extend_to_lease` counts it).
    Confirming {
        id: u32,
    },
    Holding {
        id: u32,
        valid_until: u64,
    },
    /// A release whose reply was lost.
    Releasing {
        id: u32,
    },
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct State {
    ks: Keyspace,
    clients: Vec<Phase>,
    left: Vec<u8>,
    minted: u32,
    lost_left: u8,
    crashes_left: u8,
    cancels_left: u8,
    renewals_left: Vec<u8>,
    waits_left: Vec<u8>,
    /// An attempt was refused while the server held a live permit under its own id (a
    /// resend that did not find its grant).
    forgot: bool,
    error: Option<String>,
}

crate::model::trace::traced!(State);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Action {
    Send {
        client: usize,
        lost: bool,
    },
    /// A waiter hears of a hand-off (or a stale or forged message) and asks the server.
    HandedOff {
        client: usize,
    },
    /// A holder's renewal.
    Renew {
        client: usize,
    },
    /// A waiter gives up and leaves the queue.
    Cancel {
        client: usize,
    },
    Crash {
        client: usize,
    },
    Tick,
}

pub(super) struct LeasedModel {
    pub(super) clients: usize,
    pub(super) size: u64,
    pub(super) lost: u8,
    pub(super) crashes: u8,
    pub(super) cancels: u8,
    pub(super) renewals: u8,
    pub(super) waits: u8,
}

fn id(n: u32) -> String {
    format!("{n:032x}")
}

fn keys_() -> LeasedKeys {
    LeasedKeys::new(KEY)
}

fn valid(started: u64) -> u64 {
    counts::valid_until(started, LEASE_MS)
}

fn end_cycle(s: &mut State, client: usize) {
    s.clients[client] = Phase::Idle;
    s.left[client] = s.left[client].saturating_sub(1);
}

/// The leases zset: member → expiry (ms).
fn leases(ks: &Keyspace) -> Vec<(Vec<u8>, u64)> {
    match ks.entry(keys_().leases.as_bytes()).map(|e| &e.val) {
        Some(Val::ZSet(z)) => z.iter().map(|(m, s)| (m.clone(), *s as u64)).collect(),
        _ => Vec::new(),
    }
}

/// A reply of integers, as the engine reads leased_acquire.lua's and leased_extend.lua's.
fn ints(r: &Reply) -> Option<Vec<i64>> {
    counts::strings(r)?.iter().map(|s| s.parse().ok()).collect()
}

impl LeasedModel {
    /// `LeasedRequest::attempt` for permit `n`, started at `started`.
    fn attempt(&self, s: &mut State, client: usize, n: u32, started: u64, lost: bool) {
        let entry = calls::queue_entry(
            u128::from(LIVENESS_MS),
            LEASE_MS,
            &format!("c{client}"),
            &id(n),
        );
        // A fresh id's first send tries the fast path, as the engine's first attempt does;
        // a resend or a later attempt (which may find a hand-off) the full script.
        let fresh = matches!(s.clients[client], Phase::Idle);
        let k = keys_();
        let inv = super::with_fast(
            k.acquire(&id(n), LEASE_MS, &entry),
            fresh.then(|| k.acquire_fast(&id(n), LEASE_MS)),
        );
        let r = counts::send(&mut s.ks, &inv, fresh);
        if lost {
            if matches!(r, Reply::Error(_)) {
                s.error = Some(format!("acquire: {r:?}"));
            }
            s.clients[client] = Phase::Acquiring { id: n, started };
            return;
        }
        s.clients[client] = match ints(&r).as_deref() {
            // A queued waiter whose grant's lease was cut (a hand-off it had not heard of).
            Some([1, _, left]) if *left < LEASE_MS as i64 => Phase::Confirming { id: n },
            Some([1, _, _]) => Phase::Holding {
                id: n,
                valid_until: valid(started),
            },
            Some([0, _]) => {
                let now = s.ks.now_ms();
                let mine = member(&id(n));
                if leases(&s.ks).iter().any(|(m, at)| *m == mine && *at > now) {
                    s.forgot = true;
                }
                Phase::Waiting { id: n }
            }
            _ => {
                s.error = Some(format!("acquire: {r:?}"));
                return;
            }
        };
    }

    /// `extend_to_lease`: the server's word that permit `n` is this waiter's.
    fn confirm(&self, s: &mut State, client: usize, n: u32) {
        let started = s.ks.now_ms();
        let r = counts::send(&mut s.ks, &keys_().extend(&id(n), LEASE_MS), false);
        s.clients[client] = match ints(&r).as_deref() {
            Some([1, _]) => Phase::Holding {
                id: n,
                valid_until: valid(started),
            },
            Some([GONE]) => Phase::Waiting { id: n },
            _ => {
                s.error = Some(format!("extend: {r:?}"));
                return;
            }
        };
    }

    /// The release (or a waiter's leaving) of permit `n`, by id; `fast`: a first send of a
    /// holder that counts on its lease still (as `LeasedSemaphore::release_request` decides),
    /// which tries the fast path. A reply other than 1 or GONE, or 1 for a lease that was not
    /// running (the fast path reads no clock: its caller must know the lease runs), is an
    /// error of the state.
    fn release(&self, s: &mut State, n: u32, fast: bool) {
        let now = s.ks.now_ms();
        let running = leases(&s.ks)
            .iter()
            .any(|(m, at)| *m == member(&id(n)) && *at > now);
        let request = std::sync::Arc::new(keys_()).release("model".into(), &id(n), fast);
        match counts::send(&mut s.ks, request.call(), fast) {
            Reply::Int(1) if !running => {
                s.error = Some("release: 1 for a lease that is not running".into());
            }
            Reply::Int(1 | GONE) => {}
            other => s.error = Some(format!("release: {other:?}")),
        }
    }
}

impl Model for LeasedModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let mut ks = Keyspace::new(START_US);
        let set = calls::set_permits(KEY, &keys::semaphore_channel(KEY), self.size);
        let _ = counts::send(&mut ks, &set, false);
        counts::settle(&mut ks);
        vec![State {
            ks,
            clients: vec![Phase::Idle; self.clients],
            left: vec![1; self.clients],
            minted: 0,
            lost_left: self.lost,
            crashes_left: self.crashes,
            cancels_left: self.cancels,
            renewals_left: vec![self.renewals; self.clients],
            waits_left: vec![self.waits; self.clients],
            forgot: false,
            error: None,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.error.is_some() {
            return;
        }
        for (client, phase) in s.clients.iter().enumerate() {
            let waiting = matches!(phase, Phase::Waiting { .. });
            match phase {
                Phase::Done => continue,
                Phase::Idle if s.left[client] == 0 => continue,
                Phase::Waiting { .. } if s.waits_left[client] == 0 => {}
                _ => {
                    actions.push(Action::Send {
                        client,
                        lost: false,
                    });
                    if s.lost_left > 0 && !matches!(phase, Phase::Confirming { .. }) {
                        actions.push(Action::Send { client, lost: true });
                    }
                }
            }
            if waiting && s.waits_left[client] > 0 {
                actions.push(Action::HandedOff { client });
            }
            if waiting && s.cancels_left > 0 {
                actions.push(Action::Cancel { client });
            }
            if matches!(phase, Phase::Holding { .. }) && s.renewals_left[client] > 0 {
                actions.push(Action::Renew { client });
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
                let deadlines: Vec<u64> = s
                    .clients
                    .iter()
                    .filter_map(|c| match c {
                        Phase::Holding { valid_until, .. } => Some(*valid_until),
                        _ => None,
                    })
                    .chain(leases(&s.ks).into_iter().map(|(_, at)| at))
                    .collect();
                counts::tick(&mut s.ks, deadlines)?;
                return Some(s);
            }
            Action::Crash { client } => {
                s.crashes_left -= 1;
                s.clients[client] = Phase::Done;
            }
            Action::Cancel { client } => {
                s.cancels_left -= 1;
                let Phase::Waiting { id } = s.clients[client] else {
                    return None;
                };
                self.release(&mut s, id, false);
                end_cycle(&mut s, client);
            }
            Action::HandedOff { client } => {
                s.waits_left[client] -= 1;
                let Phase::Waiting { id } = s.clients[client] else {
                    return None;
                };
                self.confirm(&mut s, client, id);
            }
            Action::Renew { client } => {
                s.renewals_left[client] -= 1;
                let Phase::Holding { id: n, .. } = s.clients[client] else {
                    return None;
                };
                let r = counts::send(&mut s.ks, &keys_().extend(&id(n), LEASE_MS), false);
                match ints(&r).as_deref() {
                    Some([1, _]) => {
                        if let Phase::Holding { valid_until, .. } = &mut s.clients[client] {
                            *valid_until = (*valid_until).max(valid(now));
                        }
                    }
                    // Gone: lost() fires; the holder gives up this permit.
                    Some([GONE]) => end_cycle(&mut s, client),
                    _ => s.error = Some(format!("extend: {r:?}")),
                }
            }
            Action::Send { client, lost } => {
                if lost {
                    s.lost_left -= 1;
                }
                match s.clients[client].clone() {
                    Phase::Idle => {
                        s.minted += 1;
                        let n = s.minted;
                        self.attempt(&mut s, client, n, now, lost);
                    }
                    // A resend: the lease counts from the earliest attempt not answered
                    // since, as the engine's wait loop counts it.
                    Phase::Acquiring { id, started } => {
                        self.attempt(&mut s, client, id, started, lost)
                    }
                    Phase::Waiting { id } => {
                        s.waits_left[client] -= 1;
                        self.attempt(&mut s, client, id, now, lost);
                    }
                    Phase::Confirming { id } => self.confirm(&mut s, client, id),
                    Phase::Holding { id, valid_until } => {
                        self.release(&mut s, id, valid_until > now);
                        if lost {
                            s.clients[client] = Phase::Releasing { id };
                        } else {
                            end_cycle(&mut s, client);
                        }
                    }
                    Phase::Releasing { id } => {
                        self.release(&mut s, id, false);
                        if lost {
                            s.clients[client] = Phase::Releasing { id };
                        } else {
                            end_cycle(&mut s, client);
                        }
                    }
                    Phase::Done => return None,
                }
            }
        }
        counts::settle(&mut s.ks);
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("count conserved", |m: &LeasedModel, s: &State| {
                counts::count(&s.ks, KEY.as_bytes()) + leases(&s.ks).len() as i64 == m.size as i64
            }),
            Property::always("live permits", |m: &LeasedModel, s: &State| {
                let now = s.ks.now_ms();
                let leases = leases(&s.ks);
                let live = leases.iter().filter(|(_, at)| *at > now).count() as u64;
                let holders: Vec<(u32, u64)> = s
                    .clients
                    .iter()
                    .filter_map(|c| match c {
                        Phase::Holding { id, valid_until } if *valid_until > now => {
                            Some((*id, *valid_until))
                        }
                        _ => None,
                    })
                    .collect();
                live <= m.size
                    && holders.len() as u64 <= m.size
                    && holders.iter().all(|(n, until)| {
                        leases
                            .iter()
                            .any(|(mem, at)| *mem == member(&id(*n)) && at >= until)
                    })
            }),
            Property::always("a resend finds its grant", |_, s: &State| !s.forgot),
            Property::always("scripts run", |_, s: &State| s.error.is_none()),
            Property::always("no leak", |_, s: &State| {
                let k = keys_();
                counts::no_leak(&s.ks, &[KEY.as_bytes(), k.leases.as_bytes()], |key| {
                    (key == k.queue.as_bytes() || key == k.waiters.as_bytes())
                        .then_some(LIVENESS_MS)
                })
            }),
            Property::sometimes("every cycle done", |_, s: &State| {
                s.left.iter().all(|l| *l == 0)
            }),
        ]
    }

    fn within_boundary(&self, s: &State) -> bool {
        s.ks.now_us <= START_US + 4 * LEASE_MS * 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two clients, one permit (with `DISTLOCK_MODEL_DEEP` set: two lost replies; three clients
    /// do not finish within minutes):
    /// every interleaving of their acquires (queued for hand-off), hand-off messages,
    /// renewals and releases, with lost replies, a give-up, a crash and time passing.
    #[test]
    fn the_leased_semaphore_keeps_its_properties_in_every_interleaving() {
        let deep = counts::deep();
        counts::check(
            if deep {
                "leased semaphore, 2 clients, 1 permit, 2 lost replies (deep)"
            } else {
                "leased semaphore, 2 clients, 1 permit"
            },
            LeasedModel {
                clients: 2,
                size: 1,
                lost: if deep { 2 } else { 1 },
                crashes: 1,
                cancels: 1,
                renewals: 1,
                waits: 2,
            },
        );
    }
}
