//! The model of the semaphore: every interleaving of a few clients taking and giving back
//! permits, over the real scripts, with the requests built by the engine's own builders
//! (`semaphore::calls`).
//!
//! Modelled: an acquire under a grant record (a member of its client's record set of the epoch
//! and block of its first send; a refused one waits and attempts again under the same record;
//! one answered CANCELLED takes a new one), its reply delivered or lost (a lost one is resent
//! under the same record within the resend window, and given back past it), a waiter that
//! gives up (the give-back, which tombstones a record that has not run), a release under a
//! fresh request record (resent with the same record within its window), a
//! first send of an acquire or of a release held up on its way and run later (after its
//! resends, its release or its give-back, or before them), a crash (a plain semaphore's
//! permits are not owned: a crashed holder's are gone for good, as in Redisson), and time
//! jumping to the next deadline (a record set's TTL, a resend window's end).
//!
//! Properties, in every state: the permits taken (as the server answered, replies lost or not)
//! and the available count add up to the permits set ("count conserved": a resend applied
//! twice breaks it); no client holds a permit the server did not take, and no more than the
//! permits are held at once; no script errs; every helper key (grant and release record sets)
//! has a TTL no longer than its documented one ("no leak"); and some path gets every
//! client through its cycle.

use stateright::{Model, Property};

use super::counts::{self, LATCH_MS, RESEND_MS, START_US};
use super::keyspace::{Keyspace, Reply};
use crate::keys;
use crate::scripts::reply::{CANCELLED, GONE};
use crate::semaphore::calls;

/// The semaphore's key.
const KEY: &str = "s";
/// A waiter's re-check interval (ms).
const RECHECK_MS: u64 = crate::semaphore::RECHECK.as_millis() as u64;
/// How long a grant record lives at least (ms).
const GRANT_MS: u64 = crate::semaphore::GRANT_LATCH_LIFETIMES * LATCH_MS;

/// Where one client is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Phase {
    Idle,
    /// An acquire under grant record `req` whose reply was lost, first sent at `since` (ms).
    Acquiring {
        req: u32,
        since: u64,
    },
    /// Refused: attempts again under the same record, at the latest at `next` (ms: its
    /// re-check), and gives up (giving back) once its attempts are used up.
    Waiting {
        req: u32,
        next: u64,
    },
    Holding {
        req: u32,
    },
    /// A release (request record `rel`) whose reply was lost, first sent at `since`.
    Releasing {
        req: u32,
        rel: u32,
        since: u64,
    },
    /// Giving back the acquire under `req` (a waiter gave up, or its outcome is unknown).
    GivingBack {
        req: u32,
    },
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct State {
    ks: Keyspace,
    clients: Vec<Phase>,
    left: Vec<u8>,
    minted: u32,
    /// When each request id was minted (ms; index: the id), which names its record set.
    born: Vec<u64>,
    /// Per client, whether the server counts a permit taken by it (from the replies it gave,
    /// whether or not they reached the client).
    taken: Vec<bool>,
    lost_left: u8,
    crashes_left: u8,
    cancels_left: u8,
    waits_left: Vec<u8>,
    /// A first send held up on its way (client, the request, sent at ms), run later; and how
    /// many more may be.
    stalled: Option<(usize, HeldUp, u64)>,
    stalls_left: u8,
    error: Option<String>,
}

crate::model::trace::traced!(State);

/// A request whose first send is held up on its way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum HeldUp {
    /// An acquire under grant record `req`.
    Acquire { req: u32 },
    /// The release, under request record `rel`, of the permit granted under `req`.
    Release { req: u32, rel: u32 },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Action {
    /// Client `client` sends its next request; the reply arrives, or is lost.
    Send {
        client: usize,
        lost: bool,
    },
    /// Client `client`'s acquire (when idle) or release (when holding) is held up on its way
    /// (the client sees no reply).
    Stall {
        client: usize,
    },
    /// The held-up send reaches the server, its reply to no one.
    Deliver,
    /// A waiter gives up: it gives back what its acquire may have got.
    Cancel {
        client: usize,
    },
    Crash {
        client: usize,
    },
    Tick,
}

/// `clients` clients taking one permit each of a semaphore of `permits`, `cycles` times.
pub(super) struct SemaphoreModel {
    pub(super) clients: usize,
    pub(super) permits: u64,
    pub(super) cycles: u8,
    pub(super) lost: u8,
    pub(super) crashes: u8,
    pub(super) cancels: u8,
    pub(super) waits: u8,
    pub(super) stalls: u8,
}

/// The grant record of client `client`'s acquire `req`, begun at `born` (ms).
fn grant_latch(client: usize, req: u32, born: u64) -> keys::Record {
    keys::Record::new(
        keys::RecordKind::Grant,
        KEY,
        &format!("c{client}"),
        req.into(),
        born,
        LATCH_MS,
        GRANT_MS,
    )
}

/// Client `client`'s acquire of one permit for request `req` (under its grant record), the
/// attempt sent first at `at` (ms).
fn acquire_call(
    s: &State,
    client: usize,
    req: u32,
    at: u64,
) -> crate::scripts::Invocation<'static> {
    calls::acquire(KEY, &grant_latch(client, req, s.born[req as usize]), 1, at)
}

/// Mint a request id at the present time.
fn mint(s: &mut State) -> u32 {
    s.minted += 1;
    let now = s.ks.now_ms();
    s.born.push(now);
    s.minted
}

impl SemaphoreModel {
    /// `since`: when this attempt was first sent (a resend's is its first send's).
    fn acquire(&self, s: &mut State, client: usize, req: u32, since: u64, lost: bool) {
        let inv = acquire_call(s, client, req, since);
        let r = counts::send(&mut s.ks, &inv, false);
        match r {
            Reply::Int(1) => {
                s.taken[client] = true;
                s.clients[client] = if lost {
                    Phase::Acquiring { req, since }
                } else {
                    Phase::Holding { req }
                };
            }
            Reply::Int(0) | Reply::Int(CANCELLED) if lost => {
                s.clients[client] = Phase::Acquiring { req, since }
            }
            Reply::Int(0) => {
                let next = s.ks.now_ms() + RECHECK_MS;
                s.clients[client] = Phase::Waiting { req, next };
            }
            Reply::Int(CANCELLED) => {
                // This record was given back: a new one, and attempt again at once.
                let req = mint(s);
                let next = s.ks.now_ms();
                s.clients[client] = Phase::Waiting { req, next };
            }
            other => s.error = Some(format!("acquire: {other:?}")),
        }
    }

    fn release(&self, s: &mut State, client: usize, req: u32, rel: u32, since: u64, lost: bool) {
        let inv = release_call(s, client, rel);
        match counts::send(&mut s.ks, &inv, false) {
            Reply::Int(v) if v >= 0 => {
                s.taken[client] = false;
                if lost {
                    s.clients[client] = Phase::Releasing { req, rel, since };
                } else {
                    end_cycle(s, client);
                }
            }
            other => s.error = Some(format!("release: {other:?}")),
        }
    }

    fn give_back(&self, s: &mut State, client: usize, req: u32, lost: bool) {
        let request = calls::give_back(
            "model".into(),
            KEY,
            &keys::semaphore_channel(KEY),
            &grant_latch(client, req, s.born[req as usize]),
            1,
            s.ks.now_ms(),
        );
        match counts::send(&mut s.ks, request.call(), false) {
            Reply::Int(v) if v >= 0 || v == GONE => {
                if v >= 0 {
                    s.taken[client] = false;
                }
                if !lost {
                    end_cycle(s, client);
                }
            }
            other => s.error = Some(format!("give back: {other:?}")),
        }
    }
}

/// Client `client`'s release under request record `rel` (built when it was first sent).
fn release_call(s: &State, client: usize, rel: u32) -> crate::scripts::Invocation<'static> {
    let born = s.born[rel as usize];
    let record = keys::Record::new(
        keys::RecordKind::Release,
        KEY,
        &format!("c{client}"),
        rel.into(),
        born,
        LATCH_MS,
        LATCH_MS,
    );
    calls::release_call(KEY, &keys::semaphore_channel(KEY), &record, 1, born)
}

fn end_cycle(s: &mut State, client: usize) {
    s.clients[client] = Phase::Idle;
    s.left[client] = s.left[client].saturating_sub(1);
}

impl Model for SemaphoreModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let mut ks = Keyspace::new(START_US);
        let set = calls::set_permits(KEY, &keys::semaphore_channel(KEY), self.permits);
        let _ = counts::send(&mut ks, &set, false);
        counts::settle(&mut ks);
        vec![State {
            ks,
            clients: vec![Phase::Idle; self.clients],
            left: vec![self.cycles; self.clients],
            minted: 0,
            born: vec![START_US / 1000],
            taken: vec![false; self.clients],
            lost_left: self.lost,
            crashes_left: self.crashes,
            cancels_left: self.cancels,
            waits_left: vec![self.waits; self.clients],
            stalled: None,
            stalls_left: self.stalls,
            error: None,
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.error.is_some() {
            return;
        }
        for (client, phase) in s.clients.iter().enumerate() {
            let send = |actions: &mut Vec<Action>| {
                actions.push(Action::Send {
                    client,
                    lost: false,
                });
                if s.lost_left > 0 {
                    actions.push(Action::Send { client, lost: true });
                }
            };
            match phase {
                Phase::Done => continue,
                Phase::Idle if s.left[client] == 0 => continue,
                _ => send(actions),
            }
            let acquiring = matches!(phase, Phase::Waiting { .. } | Phase::Acquiring { .. });
            if acquiring && s.cancels_left > 0 {
                actions.push(Action::Cancel { client });
            }
            let stalls = match phase {
                Phase::Idle => s.left[client] > 0,
                Phase::Holding { .. } => true,
                _ => false,
            };
            if stalls && s.stalls_left > 0 {
                actions.push(Action::Stall { client });
            }
            if !matches!(phase, Phase::Idle) && s.crashes_left > 0 {
                actions.push(Action::Crash { client });
            }
        }
        if s.stalled.is_some() {
            actions.push(Action::Deliver);
        }
        // A client acts when its resend window ends (the driver's timer): time goes no
        // further before it has (a client that stops acting is a crash).
        let now = s.ks.now_ms();
        let due = s.clients.iter().any(|c| match c {
            Phase::Acquiring { since, .. } | Phase::Releasing { since, .. } => {
                now >= since + RESEND_MS
            }
            Phase::Waiting { next, .. } => now >= *next,
            // A give-back goes out at once.
            Phase::GivingBack { .. } => true,
            _ => false,
        });
        if !due {
            actions.push(Action::Tick);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        let now = s.ks.now_ms();
        match action {
            Action::Tick => {
                let windows = s.clients.iter().filter_map(|c| match c {
                    Phase::Acquiring { since, .. } | Phase::Releasing { since, .. } => {
                        Some(since + RESEND_MS)
                    }
                    Phase::Waiting { next, .. } => Some(*next),
                    _ => None,
                });
                let windows: Vec<u64> = windows.collect();
                counts::tick(&mut s.ks, windows)?;
                return Some(s);
            }
            Action::Stall { client } => {
                s.stalls_left -= 1;
                let id = mint(&mut s);
                if let Phase::Holding { req } = s.clients[client] {
                    s.stalled = Some((client, HeldUp::Release { req, rel: id }, now));
                    s.clients[client] = Phase::Releasing {
                        req,
                        rel: id,
                        since: now,
                    };
                } else {
                    s.stalled = Some((client, HeldUp::Acquire { req: id }, now));
                    s.clients[client] = Phase::Acquiring {
                        req: id,
                        since: now,
                    };
                }
            }
            Action::Deliver => {
                let (client, held, at) = s.stalled.take()?;
                let before = counts::count(&s.ks, KEY.as_bytes());
                // Its reply reaches no one: what it did is what the count says (a request
                // answered from its record takes and gives back nothing).
                match held {
                    HeldUp::Acquire { req } => {
                        let inv = acquire_call(&s, client, req, at);
                        match counts::send(&mut s.ks, &inv, false) {
                            Reply::Int(1 | 0 | CANCELLED) => {
                                if counts::count(&s.ks, KEY.as_bytes()) < before {
                                    s.taken[client] = true;
                                }
                            }
                            other => s.error = Some(format!("acquire: {other:?}")),
                        }
                    }
                    HeldUp::Release { rel, .. } => {
                        let inv = release_call(&s, client, rel);
                        match counts::send(&mut s.ks, &inv, false) {
                            Reply::Int(v) if v >= 0 => {
                                if counts::count(&s.ks, KEY.as_bytes()) > before {
                                    s.taken[client] = false;
                                }
                            }
                            other => s.error = Some(format!("release: {other:?}")),
                        }
                    }
                }
            }
            Action::Crash { client } => {
                s.crashes_left -= 1;
                s.clients[client] = Phase::Done;
            }
            Action::Cancel { client } => {
                s.cancels_left -= 1;
                let (Phase::Waiting { req, .. } | Phase::Acquiring { req, .. }) = s.clients[client]
                else {
                    return None;
                };
                s.clients[client] = Phase::GivingBack { req };
            }
            Action::Send { client, lost } => {
                if lost {
                    s.lost_left -= 1;
                }
                match s.clients[client].clone() {
                    Phase::Idle => {
                        let req = mint(&mut s);
                        self.acquire(&mut s, client, req, now, lost);
                    }
                    Phase::Waiting { req, .. } if s.waits_left[client] > 0 => {
                        s.waits_left[client] -= 1;
                        self.acquire(&mut s, client, req, now, lost);
                    }
                    // Its wait is over: it gives back what its acquire may have got.
                    Phase::Waiting { req, .. } => {
                        self.give_back(&mut s, client, req, lost);
                        if lost {
                            s.clients[client] = Phase::GivingBack { req };
                        }
                    }
                    Phase::Acquiring { req, since } if now < since + RESEND_MS => {
                        self.acquire(&mut s, client, req, since, lost)
                    }
                    // Past the resend window the outcome is unknown: the acquire gives back
                    // what a send may have got.
                    Phase::Acquiring { req, .. } | Phase::GivingBack { req } => {
                        self.give_back(&mut s, client, req, lost);
                        if lost {
                            s.clients[client] = Phase::GivingBack { req };
                        }
                    }
                    Phase::Holding { req } => {
                        let rel = mint(&mut s);
                        self.release(&mut s, client, req, rel, now, lost);
                    }
                    Phase::Releasing { req, rel, since } if now < since + RESEND_MS => {
                        self.release(&mut s, client, req, rel, since, lost)
                    }
                    // Past the window: the release's outcome is unknown; the caller is told.
                    Phase::Releasing { .. } => end_cycle(&mut s, client),
                    Phase::Done => return None,
                }
            }
        }
        counts::settle(&mut s.ks);
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("count conserved", |m: &SemaphoreModel, s: &State| {
                let taken = s.taken.iter().filter(|t| **t).count() as i64;
                counts::count(&s.ks, KEY.as_bytes()) + taken == m.permits as i64
            }),
            Property::always(
                "never more than the permits granted",
                |m: &SemaphoreModel, s: &State| {
                    let holding = s
                        .clients
                        .iter()
                        .enumerate()
                        .filter(|(_, c)| matches!(c, Phase::Holding { .. }))
                        .map(|(i, _)| i)
                        .collect::<Vec<_>>();
                    holding.len() as u64 <= m.permits
                        && holding.iter().all(|i| s.taken[*i])
                        && counts::count(&s.ks, KEY.as_bytes()) >= 0
                },
            ),
            // Every permit taken is held, or on its way back, by a client that will give
            // it back or by its release's send still on its way: none is taken for a request
            // its client gave up (a crashed holder's permits are gone for good, by design).
            Property::always("no permit lost", |_, s: &State| {
                s.clients
                    .iter()
                    .zip(&s.taken)
                    .enumerate()
                    .all(|(i, (c, taken))| {
                        let returning = matches!(
                            s.stalled,
                            Some((client, HeldUp::Release { .. }, _)) if client == i
                        );
                        !taken || *c != Phase::Idle || returning
                    })
            }),
            Property::always("scripts run", |_, s: &State| s.error.is_none()),
            Property::always("no leak", |_, s: &State| {
                let grant = keys::semaphore_grant_latch(KEY, "");
                let release = keys::semaphore_release_latch(KEY, "");
                // A record set lives to its epoch's end (one latch TTL at most), then its
                // records' lifetime and a latch TTL.
                counts::no_leak(&s.ks, &[KEY.as_bytes()], |k| {
                    if k.starts_with(grant.as_bytes()) {
                        Some(GRANT_MS + 2 * LATCH_MS)
                    } else if k.starts_with(release.as_bytes()) {
                        Some(3 * LATCH_MS)
                    } else {
                        None
                    }
                })
            }),
            Property::sometimes("every cycle done", |_, s: &State| {
                s.left.iter().all(|l| *l == 0)
            }),
        ]
    }

    fn within_boundary(&self, s: &State) -> bool {
        // A held-up send arrives within a latch lifetime (a grant record, or its tombstone,
        // lives ten at least; a release record one, from the release's first send).
        s.stalled
            .is_none_or(|(_, _, at)| s.ks.now_ms() < at + LATCH_MS)
            && s.ks.now_us <= START_US + (GRANT_MS + LATCH_MS) * 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two clients, one permit (with `DISTLOCK_MODEL_DEEP` set: three clients, two
    /// permits): every interleaving of their acquires and releases, with
    /// lost replies, a held-up send (an acquire's or a release's), a give-up, a crash and
    /// time passing.
    #[test]
    fn the_semaphore_keeps_its_properties_in_every_interleaving() {
        let deep = counts::deep();
        counts::check(
            if deep {
                "semaphore, 3 clients, 2 permits (deep)"
            } else {
                "semaphore, 2 clients, 1 permit"
            },
            SemaphoreModel {
                clients: if deep { 3 } else { 2 },
                permits: if deep { 2 } else { 1 },
                cycles: 1,
                lost: 1,
                crashes: 1,
                cancels: 1,
                waits: 1,
                stalls: 1,
            },
        );
    }
}
