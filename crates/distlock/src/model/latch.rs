//! The model of the count-down latch: every interleaving of a few clients counting one latch
//! down and one waiting for it to open, over the real scripts, with the calls built by the
//! engine's own builders (`latch::count_down_call`, `latch::set_count_call`).
//!
//! Modelled: each counter sends one count-down under a fresh request record; its reply is
//! delivered or lost, and a lost one is resent with the same request record within the resend
//! window (past it the outcome is unknown and the caller is told); a first send held up on
//! its way and run later (after its resends, or before them); a waiter reads the count
//! (`GET`, as `CountDownLatch::wait_for` does) at any step, as a wake-up or its re-check would
//! make it; a client crashes; time jumps to the next deadline (a record set's TTL, a resend
//! window's end).
//!
//! Properties, in every state: the count is never below what the count-downs the server ran
//! leave ("counted once": a resend counted twice breaks it), and the latch is open exactly when
//! every count has been counted; a waiter sees it open only then ("opens once counted"); no
//! script errs; every record set has a TTL no longer than its documented one ("no leak");
//! and some path gets every client through.

use stateright::{Model, Property};

use super::counts::{self, LATCH_MS, RESEND_MS, START_US};
use super::keyspace::{Keyspace, Reply};
use crate::keys;
use crate::latch::{count_down_call, set_count_call};

/// The latch's key.
const KEY: &str = "l";

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Phase {
    /// A counter that has not counted down yet.
    Counter,
    /// A count-down whose reply was lost, first sent at `since` (ms).
    CountingDown { since: u64 },
    /// A waiter, not seen the latch open yet.
    Waiter,
    /// Done: counted down, saw the latch open, gave up, or crashed.
    Done,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct State {
    ks: Keyspace,
    clients: Vec<Phase>,
    /// Per client, whether the server ran its count-down (whether or not its reply arrived).
    counted: Vec<bool>,
    /// A waiter saw the latch open.
    opened: bool,
    /// A waiter saw it open before every count was counted.
    opened_early: bool,
    lost_left: u8,
    crashes_left: u8,
    reads_left: u8,
    /// A count-down's first send held up on its way (client, sent at ms), run later; and how
    /// many more may be.
    stalled: Option<(usize, u64)>,
    stalls_left: u8,
    error: Option<String>,
}

crate::model::trace::traced!(State);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Action {
    Send {
        client: usize,
        lost: bool,
    },
    /// Counter `client`'s count-down is held up on its way (the client sees no reply).
    Stall {
        client: usize,
    },
    /// The held-up count-down reaches the server, its reply to no one.
    Deliver,
    Crash {
        client: usize,
    },
    Tick,
}

/// A latch of `count`, `count` counters and `waiters` waiters.
pub(super) struct LatchModel {
    pub(super) count: u64,
    pub(super) waiters: usize,
    pub(super) lost: u8,
    pub(super) crashes: u8,
    pub(super) reads: u8,
    pub(super) stalls: u8,
}

/// Counter `client`'s count-down (one per counter, under one request record), first sent at
/// `since` (ms).
fn call(client: usize, since: u64) -> crate::scripts::Invocation<'static> {
    let record = keys::Record::new(
        keys::RecordKind::CountDown,
        KEY,
        &format!("c{client}"),
        1,
        since,
        LATCH_MS,
        LATCH_MS,
    );
    count_down_call(KEY, &record, since)
}

impl LatchModel {
    fn count_down(&self, s: &mut State, client: usize, since: u64, lost: bool) {
        match counts::send(&mut s.ks, &call(client, since), false) {
            Reply::Int(v) if v >= 0 => {
                s.counted[client] = true;
                s.clients[client] = if lost {
                    Phase::CountingDown { since }
                } else {
                    Phase::Done
                };
            }
            other => s.error = Some(format!("count down: {other:?}")),
        }
    }

    fn expected(&self, s: &State) -> i64 {
        self.count as i64 - s.counted.iter().filter(|c| **c).count() as i64
    }
}

impl Model for LatchModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let mut ks = Keyspace::new(START_US);
        let set = set_count_call(KEY, &keys::latch_channel(KEY), self.count);
        let _ = counts::send(&mut ks, &set, false);
        counts::settle(&mut ks);
        let n = self.count as usize;
        let mut clients = vec![Phase::Counter; n];
        clients.extend(vec![Phase::Waiter; self.waiters]);
        vec![State {
            ks,
            counted: vec![false; clients.len()],
            clients,
            opened: false,
            opened_early: false,
            lost_left: self.lost,
            crashes_left: self.crashes,
            reads_left: self.reads,
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
            match phase {
                Phase::Done => continue,
                Phase::Waiter if s.reads_left == 0 => {}
                Phase::Waiter => actions.push(Action::Send {
                    client,
                    lost: false,
                }),
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
            // The counters are alike: the first one's send is the one held up.
            if client == 0 && *phase == Phase::Counter && s.stalls_left > 0 {
                actions.push(Action::Stall { client });
            }
            if s.crashes_left > 0 {
                actions.push(Action::Crash { client });
            }
        }
        if s.stalled.is_some() {
            actions.push(Action::Deliver);
        }
        actions.push(Action::Tick);
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        let now = s.ks.now_ms();
        match action {
            Action::Tick => {
                let windows: Vec<u64> = s
                    .clients
                    .iter()
                    .filter_map(|c| match c {
                        Phase::CountingDown { since } => Some(since + RESEND_MS),
                        _ => None,
                    })
                    .collect();
                counts::tick(&mut s.ks, windows)?;
                return Some(s);
            }
            Action::Stall { client } => {
                s.stalls_left -= 1;
                s.stalled = Some((client, now));
                s.clients[client] = Phase::CountingDown { since: now };
            }
            Action::Deliver => {
                let (client, at) = s.stalled.take()?;
                // Its reply reaches no one; the server ran it (or answered it from the
                // request record, having run it before).
                match counts::send(&mut s.ks, &call(client, at), false) {
                    Reply::Int(v) if v >= 0 => s.counted[client] = true,
                    other => s.error = Some(format!("count down: {other:?}")),
                }
            }
            Action::Crash { client } => {
                s.crashes_left -= 1;
                s.clients[client] = Phase::Done;
            }
            Action::Send { client, lost } => {
                if lost {
                    s.lost_left -= 1;
                }
                match s.clients[client].clone() {
                    Phase::Counter => self.count_down(&mut s, client, now, lost),
                    Phase::CountingDown { since } if now < since + RESEND_MS => {
                        self.count_down(&mut s, client, since, lost)
                    }
                    // Past the window the outcome is unknown: the caller is told.
                    Phase::CountingDown { .. } => s.clients[client] = Phase::Done,
                    Phase::Waiter => {
                        s.reads_left -= 1;
                        // CountDownLatch::wait_for's attempt: the count, 0 when open.
                        let get = redis::cmd("GET").arg(KEY).clone();
                        match counts::command(&mut s.ks, &get) {
                            Reply::Nil => {
                                s.opened = true;
                                if self.expected(&s) > 0 {
                                    s.opened_early = true;
                                }
                                s.clients[client] = Phase::Done;
                            }
                            Reply::Bulk(_) => {}
                            other => s.error = Some(format!("count: {other:?}")),
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
            Property::always("counted once", |m: &LatchModel, s: &State| {
                let expected = m.expected(s);
                let open = s.ks.entry(KEY.as_bytes()).is_none();
                counts::count(&s.ks, KEY.as_bytes()) >= expected && open == (expected <= 0)
            }),
            Property::always("opens once counted", |_, s: &State| !s.opened_early),
            Property::always("scripts run", |_, s: &State| s.error.is_none()),
            Property::always("no leak", |_, s: &State| {
                let latch = keys::latch_count_down_latch(KEY, "");
                counts::no_leak(&s.ks, &[KEY.as_bytes()], |k| {
                    // A record set lives to its epoch's end (one latch TTL at most), then the
                    // records' lifetime and a latch TTL.
                    k.starts_with(latch.as_bytes()).then_some(3 * LATCH_MS)
                })
            }),
            Property::sometimes("every client done", |_, s: &State| {
                s.opened && s.clients.iter().all(|c| *c == Phase::Done)
            }),
        ]
    }

    fn within_boundary(&self, s: &State) -> bool {
        // A held-up send arrives within a latch lifetime.
        s.stalled
            .is_none_or(|(_, at)| s.ks.now_ms() < at + LATCH_MS)
            && s.ks.now_us <= START_US + 2 * LATCH_MS * 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A latch of three, three counters and a waiter (with `DISTLOCK_MODEL_DEEP` set: of
    /// four, four counters): every interleaving of the count-downs, lost replies and
    /// their resends, a held-up send, a crash, the waiter's reads and time passing.
    #[test]
    fn the_latch_keeps_its_properties_in_every_interleaving() {
        let deep = counts::deep();
        counts::check(
            if deep {
                "latch of 4, 4 counters and a waiter (deep)"
            } else {
                "latch of 3, 3 counters and a waiter"
            },
            LatchModel {
                count: if deep { 4 } else { 3 },
                waiters: 1,
                lost: 2,
                crashes: 1,
                reads: 3,
                stalls: 1,
            },
        );
    }
}
