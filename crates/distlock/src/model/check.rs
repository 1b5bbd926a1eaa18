//! The model check: every interleaving of a few clients of one lock, over the real scripts
//! (run by [`super::lua`] on [`super::keyspace`]), explored by stateright with the
//! properties users rely on checked in every state.
//!
//! Modelled: clients that follow the library's protocol — requests built by the raw kinds as
//! the engine builds them (the fast path on a request's first send, then the full script when
//! it answers nil), replies parsed by the engine's own parser (`parse_attempt`) — and the
//! server running each request atomically. Any request's reply may be lost, and is then
//! resent to the full script with the same owner (a fresh owner's acquire) or the same latch
//! (a release). A waiter attempts again at any time (a wake-up, a hand-off message — which
//! the client only ever confirms with an attempt —, its re-check); a holder renews, releases,
//! crashes (nothing released) or pauses past its lease; virtual time jumps to the next
//! deadline (a key's TTL, a holder's local validity); an operator force-unlocks once.
//!
//! Abstracted: the async driver's scheduling (an attempt is one step), pub/sub delivery (a
//! message only makes a waiter attempt, which a waiter may do at any step anyway), clock
//! drift (the client's local deadline is the server's, less the library's drift margin).
//!
//! Properties, in every state: at most one client believes it holds the lock with a valid
//! lease ("mutual exclusion"); every grant's fencing token is above every earlier grant's
//! ("tokens increase"); no script run errs or loops past its bound ("scripts run"); and,
//! as a sanity check of the model itself, some path gets every client through its cycles.

use std::time::Duration;

use stateright::{Checker, Model, Property};

use super::keyspace::{Keyspace, Reply};
use super::lua;
use crate::keys;
use crate::lock::raw::{
    parse_attempt, AcquireCall, Attempt, Mode, Names, Plain, RawLock, ReleaseCall,
};
use crate::lock::{Handoff, Owner};
use crate::scripts::{self, Invocation, Publish};

/// The lease of every grant (ms of virtual time).
const LEASE_MS: u64 = 3_000;
/// The waiters' liveness timeout (ms).
const LIVENESS_MS: u64 = 1_500;
/// Virtual time starts here (µs since the epoch).
const START_US: u64 = 1_800_000_000_000_000;

/// Where one client is in its protocol.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Phase {
    /// Between cycles (how many are left: [`State::left`]).
    Idle,
    /// An acquire of a fresh owner in flight: its next send tries the fast path (`fast`,
    /// the request's first send) or goes to the full script (a resend, or after a nil).
    Acquiring { owner: u32, fast: bool },
    /// Refused and queued: attempts again on a wake-up, a hand-off message or its re-check.
    Waiting { owner: u32 },
    /// Granted: the token, and the local validity (server ms) it counts on. `revoked`: an
    /// operator's force unlock deleted the hold, and its notice is on the way.
    Holding {
        owner: u32,
        token: u128,
        valid_until: u64,
        revoked: bool,
    },
    /// A release in flight (`fast`: its first send).
    Releasing { owner: u32, fast: bool, latch: u32 },
    /// Crashed, or all cycles done.
    Done,
}

/// The whole system: the server's keyspace and every client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct State {
    pub(crate) ks: Keyspace,
    pub(crate) clients: Vec<Phase>,
    /// Acquire-release cycles each client has left (a cycle ends with the release, or with
    /// the hold found lost).
    left: Vec<u8>,
    /// Owners minted so far (each acquire mints one).
    minted: u32,
    /// The highest token granted so far, and whether a grant came in at or below it.
    max_token: Option<u128>,
    regressed: bool,
    /// A script run that erred (not a refusal the protocol expects).
    script_error: Option<String>,
    /// Whether the operator's one force unlock is still to come.
    force_unlock_left: bool,
    /// A renewal that extended a hold an operator had force-unlocked.
    revived: bool,
}

/// One step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Action {
    /// Client `i` sends its next request; the server runs it; the reply arrives, or is lost
    /// (`lost`).
    Send { client: usize, lost: bool },
    /// Client `i`, holding, renews (the watchdog).
    Renew { client: usize },
    /// Client `i` crashes: nothing is released.
    Crash { client: usize },
    /// Virtual time jumps to the next deadline.
    Tick,
    /// An operator force-unlocks the lock.
    ForceUnlock,
    /// The force unlock's notice reaches client `i`, which checks the hold with the server.
    Notice { client: usize },
}

/// The plain lock's model: `clients` clients, each doing `cycles` acquire-release cycles.
pub(crate) struct PlainLock {
    pub(crate) clients: usize,
    pub(crate) cycles: u8,
}

fn raw() -> Plain {
    Plain {
        handoff: Handoff::Fifo,
        liveness: Duration::from_millis(LIVENESS_MS),
    }
}

fn names() -> Names {
    let key = "m".to_string();
    Names {
        name: key.clone(),
        channel: raw().channel(&key),
        counter: keys::fencing_counter("", &key),
        key,
    }
}

fn owner(client: usize, n: u32) -> Owner {
    Owner::parse(&format!("c{client}:{n}")).expect("owner")
}

/// Run `inv` as the connection layer sends it: the fast path on a first send (`fast`), and
/// the full script when there is none or it answered nil. The reply in the full script's
/// shape.
fn send(ks: &mut Keyspace, inv: &Invocation<'_>, fast: bool) -> Reply {
    if fast {
        if let Some((script, keys, args)) = inv.fast_parts() {
            let r = lua::eval(ks, script.text(Publish::Classic), &keys, &args);
            if r != Reply::Nil {
                return Reply::from_value(inv.fast_shape(r.to_value()));
            }
        }
    }
    let (script, keys, args) = inv.parts();
    lua::eval(ks, script.text(Publish::Classic), &keys, &args)
}

/// A reply as the engine reads an acquire's: strings.
fn strings(r: &Reply) -> Option<Vec<String>> {
    match r {
        Reply::Array(a) => a
            .iter()
            .map(|x| match x {
                Reply::Int(i) => Some(i.to_string()),
                Reply::Bulk(b) => String::from_utf8(b.clone()).ok(),
                Reply::Nil => Some(String::new()),
                _ => None,
            })
            .collect(),
        Reply::Int(i) => Some(vec![i.to_string()]),
        _ => None,
    }
}

impl PlainLock {
    fn acquire_call(&self, client: usize, owner_n: u32, fast: bool) -> Invocation<'static> {
        let raw = raw();
        let names = names();
        let owner = owner(client, owner_n);
        let client_id = format!("c{client}");
        let call = AcquireCall {
            owner: &owner,
            mode: Mode::New,
            lease_ms: LEASE_MS,
            request_id: "",
            wait_ms: 5_000,
            latch_ms: 13_000,
            floor: "0",
            holder: "model;host;1",
            client_id: &client_id,
            handoff: true,
            fast,
        };
        let full = raw.acquire(&names, &call);
        match raw.acquire_fast(&names, &call) {
            Some(fast) => {
                let full = std::sync::Arc::new(full);
                Invocation::later(std::sync::Arc::new(move || (*full).clone()), fast)
            }
            None => full,
        }
    }

    fn release_call(
        &self,
        client: usize,
        owner_n: u32,
        latch: u32,
        fast: bool,
    ) -> Invocation<'static> {
        let raw = raw();
        let names = names();
        let owner = owner(client, owner_n);
        let latch = keys::unlock_latch(&names.key, &format!("u{latch}"));
        let call = ReleaseCall {
            owner: &owner,
            lease_ms: LEASE_MS,
            latch: &latch,
            latch_ms: 13_000,
            floor: "0",
            context: "model".into(),
            fast,
        };
        let full = raw.release(&names, &call).invocation();
        match raw.release_fast(&names, &call) {
            Some(fast) => {
                let full = std::sync::Arc::new(full);
                Invocation::later(std::sync::Arc::new(move || (*full).clone()), fast)
            }
            None => full,
        }
    }

    /// Client `client`'s acquire attempt for `owner` (its fast path when `fast`): granted,
    /// refused (it waits, queued), or — with `lost` — run by the server with the reply lost
    /// (the client resends to the full script).
    fn attempt(&self, s: &mut State, client: usize, owner: u32, fast: bool, lost: bool) {
        let now_ms = s.ks.now_ms();
        let inv = self.acquire_call(client, owner, fast);
        let r = send(&mut s.ks, &inv, fast);
        if let Reply::Error(e) = &r {
            s.script_error = Some(format!("acquire: {e}"));
            return;
        }
        if lost {
            s.clients[client] = Phase::Acquiring { owner, fast: false };
            return;
        }
        match strings(&r).map(|v| parse_attempt(&v)) {
            Some(Ok(Attempt::Granted { token, .. })) => {
                Self::granted(s, client, owner, token, now_ms)
            }
            Some(Ok(Attempt::Held { .. })) => s.clients[client] = Phase::Waiting { owner },
            _ => s.script_error = Some(format!("acquire: {r:?}")),
        }
    }

    /// Record a grant of `token` (tokens increase), and put the client in `Holding`.
    fn granted(state: &mut State, client: usize, owner: u32, token: u128, since_ms: u64) {
        if state.max_token.is_some_and(|max| token <= max) {
            state.regressed = true;
        }
        state.max_token = Some(state.max_token.map_or(token, |m| m.max(token)));
        let lease = Duration::from_millis(LEASE_MS);
        let valid = lease.saturating_sub(keys::drift(lease)).as_millis() as u64;
        state.clients[client] = Phase::Holding {
            owner,
            token,
            valid_until: since_ms + valid,
            revoked: false,
        };
    }
}

impl Model for PlainLock {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            ks: Keyspace::new(START_US),
            clients: vec![Phase::Idle; self.clients],
            left: vec![self.cycles; self.clients],
            minted: 0,
            max_token: None,
            regressed: false,
            script_error: None,
            force_unlock_left: true,
            revived: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.regressed || state.revived || state.script_error.is_some() {
            return;
        }
        for (client, phase) in state.clients.iter().enumerate() {
            match phase {
                Phase::Done => {}
                Phase::Idle if state.left[client] == 0 => {}
                Phase::Idle => actions.push(Action::Send {
                    client,
                    lost: false,
                }),
                Phase::Acquiring { .. } | Phase::Waiting { .. } | Phase::Releasing { .. } => {
                    actions.push(Action::Send {
                        client,
                        lost: false,
                    });
                    actions.push(Action::Send { client, lost: true });
                    if matches!(phase, Phase::Waiting { .. }) {
                        actions.push(Action::Crash { client });
                    }
                }
                Phase::Holding { revoked, .. } => {
                    actions.push(Action::Send {
                        client,
                        lost: false,
                    });
                    actions.push(Action::Renew { client });
                    actions.push(Action::Crash { client });
                    if *revoked {
                        actions.push(Action::Notice { client });
                    }
                }
            }
        }
        actions.push(Action::Tick);
        if state.force_unlock_left {
            actions.push(Action::ForceUnlock);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        let now_ms = s.ks.now_ms();
        match action {
            Action::Tick => {
                // The next deadline after now: a key's TTL, or a holder's local validity.
                let next =
                    s.ks.keys
                        .values()
                        .filter_map(|e| e.expires_at)
                        .chain(s.clients.iter().filter_map(|c| match c {
                            Phase::Holding { valid_until, .. } => Some(*valid_until),
                            _ => None,
                        }))
                        .filter(|at| *at > now_ms)
                        .min()?;
                s.ks.now_us = next * 1000;
            }
            Action::ForceUnlock => {
                s.force_unlock_left = false;
                let inv = raw().force_unlock(&names(), "0");
                match send(&mut s.ks, &inv, false) {
                    Reply::Array(fields) => {
                        // The owner fields it deleted: their holders are told.
                        for (client, phase) in s.clients.iter_mut().enumerate() {
                            if let Phase::Holding {
                                owner: o, revoked, ..
                            } = phase
                            {
                                let field =
                                    Reply::Bulk(raw().field(&owner(client, *o)).into_bytes());
                                if fields.contains(&field) {
                                    *revoked = true;
                                }
                            }
                        }
                    }
                    other => s.script_error = Some(format!("force unlock: {other:?}")),
                }
            }
            Action::Notice { client } => {
                let Phase::Holding { owner: o, .. } = s.clients[client].clone() else {
                    return None;
                };
                // The holder asks the server (the notice is only a claim).
                let field = raw().field(&owner(client, o)).into_bytes();
                let held =
                    s.ks.exec(&[b"hexists".to_vec(), names().key.into_bytes(), field]);
                if held == Reply::Int(0) {
                    end_cycle(&mut s, client);
                } else if let Phase::Holding { revoked, .. } = &mut s.clients[client] {
                    *revoked = false;
                }
            }
            Action::Crash { client } => s.clients[client] = Phase::Done,
            Action::Renew { client } => {
                let Phase::Holding {
                    owner: o, revoked, ..
                } = s.clients[client].clone()
                else {
                    return None;
                };
                let raw = raw();
                let mut inv = scripts::LOCK_RENEW.prepare_invoke();
                inv.key(&names().key)
                    .arg(LEASE_MS)
                    .arg(
                        raw.renewal(&names(), &owner(client, o))
                            .hash_mode()
                            .unwrap_or_default(),
                    )
                    .arg(raw.field(&owner(client, o)));
                match send(&mut s.ks, &inv, false) {
                    Reply::Array(r) if r.first() == Some(&Reply::Int(1)) => {
                        if revoked {
                            s.revived = true;
                        }
                        let lease = Duration::from_millis(LEASE_MS);
                        let valid = lease.saturating_sub(keys::drift(lease)).as_millis() as u64;
                        if let Phase::Holding { valid_until, .. } = &mut s.clients[client] {
                            *valid_until = (*valid_until).max(now_ms + valid);
                        }
                    }
                    Reply::Array(_) => {
                        // Found gone or taken: lost() fires; the client gives up this hold.
                        end_cycle(&mut s, client);
                    }
                    other => s.script_error = Some(format!("renewal: {other:?}")),
                }
            }
            Action::Send { client, lost } => match s.clients[client].clone() {
                Phase::Idle => {
                    s.minted += 1;
                    let owner = s.minted;
                    s.clients[client] = Phase::Acquiring { owner, fast: true };
                    return self.next_state(&s, Action::Send { client, lost });
                }
                Phase::Acquiring { owner, fast } => self.attempt(&mut s, client, owner, fast, lost),
                Phase::Waiting { owner } => self.attempt(&mut s, client, owner, false, lost),
                Phase::Holding { owner, .. } => {
                    s.minted += 1;
                    let latch = s.minted;
                    s.clients[client] = Phase::Releasing {
                        owner,
                        fast: true,
                        latch,
                    };
                    return self.next_state(&s, Action::Send { client, lost });
                }
                Phase::Releasing { owner, fast, latch } => {
                    let inv = self.release_call(client, owner, latch, fast);
                    match send(&mut s.ks, &inv, fast) {
                        Reply::Int(_) if lost => {
                            s.clients[client] = Phase::Releasing {
                                owner,
                                fast: false,
                                latch,
                            };
                        }
                        Reply::Int(_) => end_cycle(&mut s, client),
                        other => s.script_error = Some(format!("release: {other:?}")),
                    }
                }
                Phase::Done => return None,
            },
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            // A force unlock breaks exclusion on purpose (an operator clears a stuck lock):
            // its holder counts from the notice's check on, and its renewals must fail.
            Property::always("mutual exclusion", |_, s: &State| {
                let now = s.ks.now_ms();
                s.clients
                    .iter()
                    .filter(|c| {
                        matches!(c, Phase::Holding { valid_until, revoked: false, .. } if *valid_until > now)
                    })
                    .count()
                    <= 1
            }),
            Property::always(
                "no renewal revives a force-unlocked hold",
                |_, s: &State| !s.revived,
            ),
            Property::always("tokens increase", |_, s: &State| !s.regressed),
            Property::always("scripts run", |_, s: &State| s.script_error.is_none()),
            Property::sometimes("every cycle done", |_, s: &State| {
                s.left.iter().all(|l| *l == 0)
            }),
        ]
    }

    fn within_boundary(&self, s: &State) -> bool {
        // Virtual time bounded: past a few leases every lease has ended.
        s.ks.now_us <= START_US + 4 * LEASE_MS * 1000
    }
}

/// The end of client `client`'s cycle: idle, one cycle fewer to go.
fn end_cycle(s: &mut State, client: usize) {
    s.clients[client] = Phase::Idle;
    s.left[client] = s.left[client].saturating_sub(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every interleaving of two clients, each taking and giving back the plain lock once,
    /// with lost replies, renewals, crashes, time jumps and a force unlock: the properties
    /// hold in every state.
    #[test]
    fn the_plain_lock_keeps_its_properties_in_every_interleaving() {
        let checker = PlainLock {
            clients: 2,
            cycles: 1,
        }
        .checker()
        .spawn_bfs()
        .join();
        eprintln!(
            "plain lock, 2 clients, 1 cycle each: {} states ({} unique), depth {}",
            checker.state_count(),
            checker.unique_state_count(),
            checker.max_depth()
        );
        checker.assert_properties();
    }
}
