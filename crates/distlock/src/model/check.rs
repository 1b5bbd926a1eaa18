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
use super::state::{Action, Phase, State};
use super::take::Take;
use super::trace;
use crate::keys;
use crate::lock::raw::{
    parse_attempt, AcquireCall, Attempt, Mode, Names, RawLock, ReleaseCall, Renewal,
};
use crate::lock::Owner;
use crate::scripts::{self, Invocation};

/// The lease of every grant (ms of virtual time).
const LEASE_MS: u64 = 3_000;
/// The waiters' liveness timeout (ms).
const LIVENESS_MS: u64 = 1_500;
/// Virtual time starts here (µs since the epoch).
const START_US: u64 = 1_800_000_000_000_000;

/// A lock's model: one client per entry of `takes` (what it takes of the one lock `m`), each
/// doing `cycles` acquire-release cycles.
pub(crate) struct LockModel {
    pub(crate) takes: Vec<Take>,
    pub(crate) cycles: u8,
    pub(crate) bounds: Bounds,
}

/// How far the exploration goes: lost replies and crashes in a whole run, and per client the
/// renewals and the attempts while waiting (each also bounded by virtual time, four leases).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    pub(crate) lost: u8,
    pub(crate) crashes: u8,
    pub(crate) renewals: u8,
    pub(crate) waits: u8,
}

impl LockModel {
    fn raw(&self, client: usize) -> Box<dyn RawLock> {
        self.takes[client].raw(Duration::from_millis(LIVENESS_MS))
    }

    fn names(&self, client: usize) -> Names {
        let key = "m".to_string();
        Names {
            name: key.clone(),
            channel: self.raw(client).channel(&key),
            counter: keys::fencing_counter("", &key),
            key,
        }
    }
}

fn owner(client: usize, n: u32) -> Owner {
    Owner::parse(&format!("c{client}:{n}")).expect("owner")
}

/// Run `inv` as the connection layer sends it: the fast path on a first send (`fast`), and
/// the full script when there is none or it answered nil. The reply in the full script's
/// shape.
pub(super) fn send(ks: &mut Keyspace, inv: &Invocation<'_>, fast: bool) -> Reply {
    if fast {
        if let Some((script, keys, args)) = inv.fast_parts() {
            let r = lua::eval(ks, &trace::text(script), &keys, &args);
            trace::sent(script, true, &keys, &args, &r, ks);
            if r != Reply::Nil {
                return Reply::from_value(inv.fast_shape(r.to_value()));
            }
        }
    }
    let (script, keys, args) = inv.parts();
    let r = lua::eval(ks, &trace::text(script), &keys, &args);
    trace::sent(script, false, &keys, &args, &r, ks);
    r
}

/// A reply as the engine reads an acquire's: strings.
pub(super) fn strings(r: &Reply) -> Option<Vec<String>> {
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

impl LockModel {
    fn acquire_call(&self, client: usize, owner_n: u32, fast: bool) -> Invocation<'static> {
        let raw = self.raw(client);
        let names = self.names(client);
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
        super::with_fast(full, raw.acquire_fast(&names, &call))
    }

    fn release_call(
        &self,
        client: usize,
        owner_n: u32,
        latch: u32,
        fast: bool,
    ) -> Invocation<'static> {
        let raw = self.raw(client);
        let names = self.names(client);
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
        super::with_fast(full, raw.release_fast(&names, &call))
    }

    /// Client `client`'s acquire attempt for `owner` (its fast path when `fast`): granted,
    /// refused (it waits, queued), or — with `lost` — run by the server with the reply lost
    /// (the client resends to the full script).
    fn attempt(&self, s: &mut State, client: usize, owner: u32, fast: bool, lost: bool) {
        let now_ms = s.ks.now_ms();
        let inv = self.acquire_call(client, owner, fast);
        let r = send(&mut s.ks, &inv, fast);
        if r.error_code() == Some("WRONGTYPE") {
            // The name holds another kind's lock: the caller gets WrongType, and gives up.
            end_cycle(s, client);
            return;
        }
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

    /// Client `client` sends its next request (from `Idle` an acquire of a fresh owner, from
    /// `Holding` a release); with `lost`, the server runs it and the reply is lost.
    fn send_step(&self, mut s: State, client: usize, lost: bool) -> Option<State> {
        match s.clients[client].clone() {
            Phase::Idle => {
                s.minted += 1;
                let owner = s.minted;
                self.attempt(&mut s, client, owner, true, lost);
            }
            Phase::Acquiring { owner, fast } => self.attempt(&mut s, client, owner, fast, lost),
            Phase::Waiting { owner } => self.attempt(&mut s, client, owner, false, lost),
            Phase::Holding { owner, .. } => {
                s.minted += 1;
                let latch = s.minted;
                self.release(&mut s, client, owner, true, latch, lost);
            }
            Phase::Releasing { owner, fast, latch } => {
                self.release(&mut s, client, owner, fast, latch, lost)
            }
            Phase::Done => return None,
        }
        Some(s)
    }

    /// Client `client`'s release of `owner`'s hold (its fast path when `fast`); with `lost`
    /// the reply is lost and the client resends it to the full script, same latch.
    fn release(
        &self,
        s: &mut State,
        client: usize,
        owner: u32,
        fast: bool,
        latch: u32,
        lost: bool,
    ) {
        let inv = self.release_call(client, owner, latch, fast);
        match send(&mut s.ks, &inv, fast) {
            Reply::Int(_) if lost => {
                s.clients[client] = Phase::Releasing {
                    owner,
                    fast: false,
                    latch,
                };
            }
            Reply::Int(_) => end_cycle(s, client),
            // The hold ran out and another kind took the name: the release is refused.
            other if other.error_code() == Some("WRONGTYPE") => end_cycle(s, client),
            other => s.script_error = Some(format!("release: {other:?}")),
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

impl Model for LockModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            ks: Keyspace::new(START_US),
            clients: vec![Phase::Idle; self.takes.len()],
            left: vec![self.cycles; self.takes.len()],
            minted: 0,
            max_token: None,
            regressed: false,
            script_error: None,
            force_unlock_left: true,
            revived: false,
            lost_left: self.bounds.lost,
            crashes_left: self.bounds.crashes,
            renewals_left: vec![self.bounds.renewals; self.takes.len()],
            waits_left: vec![self.bounds.waits; self.takes.len()],
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
                    let waiting = matches!(phase, Phase::Waiting { .. });
                    if !waiting || state.waits_left[client] > 0 {
                        actions.push(Action::Send {
                            client,
                            lost: false,
                        });
                        if state.lost_left > 0 {
                            actions.push(Action::Send { client, lost: true });
                        }
                    }
                    if waiting && state.crashes_left > 0 {
                        actions.push(Action::Crash { client });
                    }
                }
                Phase::Holding { revoked, .. } => {
                    actions.push(Action::Send {
                        client,
                        lost: false,
                    });
                    if state.renewals_left[client] > 0 {
                        actions.push(Action::Renew { client });
                    }
                    if state.crashes_left > 0 {
                        actions.push(Action::Crash { client });
                    }
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
                // The operator force-unlocks the kind the first client takes.
                let inv = self.raw(0).force_unlock(&self.names(0), "0");
                match send(&mut s.ks, &inv, false) {
                    Reply::Array(fields) => {
                        // The owner fields it deleted: their holders are told.
                        for (client, phase) in s.clients.iter_mut().enumerate() {
                            if let Phase::Holding {
                                owner: o, revoked, ..
                            } = phase
                            {
                                let field = Reply::Bulk(
                                    self.takes[client]
                                        .raw(Duration::from_millis(LIVENESS_MS))
                                        .field(&owner(client, *o))
                                        .into_bytes(),
                                );
                                if fields.contains(&field) {
                                    *revoked = true;
                                }
                            }
                        }
                    }
                    // Another kind holds the name: refused, nothing changed.
                    other if other.error_code() == Some("WRONGTYPE") => {}
                    other => s.script_error = Some(format!("force unlock: {other:?}")),
                }
            }
            Action::Notice { client } => {
                let Phase::Holding { owner: o, .. } = s.clients[client].clone() else {
                    return None;
                };
                // The holder asks the server (the notice is only a claim).
                let field = self.raw(client).field(&owner(client, o)).into_bytes();
                let key = self.names(client).key.into_bytes();
                let held = trace::exec(&mut s.ks, &[b"hexists".to_vec(), key, field]);
                if held == Reply::Int(0) {
                    end_cycle(&mut s, client);
                } else if let Phase::Holding { revoked, .. } = &mut s.clients[client] {
                    *revoked = false;
                }
            }
            Action::Crash { client } => {
                s.crashes_left -= 1;
                s.clients[client] = Phase::Done;
            }
            Action::Renew { client } => {
                s.renewals_left[client] -= 1;
                let Phase::Holding {
                    owner: o, revoked, ..
                } = s.clients[client].clone()
                else {
                    return None;
                };
                let raw = self.raw(client);
                let names = self.names(client);
                let holder = owner(client, o);
                let inv = match raw.renewal(&names, &holder) {
                    Renewal::Read { prefix } => {
                        let mut inv = scripts::RW_READ_RENEW.prepare_invoke();
                        inv.key(&names.key)
                            .arg(LEASE_MS)
                            .arg(holder.as_str())
                            .arg(prefix);
                        inv
                    }
                    hash => {
                        let mut inv = scripts::LOCK_RENEW.prepare_invoke();
                        inv.key(&names.key)
                            .arg(LEASE_MS)
                            .arg(hash.hash_mode().unwrap_or_default())
                            .arg(raw.field(&holder));
                        inv
                    }
                };
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
            Action::Send { client, lost } => {
                if lost {
                    s.lost_left -= 1;
                }
                if matches!(s.clients[client], Phase::Waiting { .. }) {
                    s.waits_left[client] -= 1;
                }
                return self.send_step(s, client, lost);
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            // A force unlock breaks exclusion on purpose (an operator clears a stuck lock):
            // its holder counts from the notice's check on, and its renewals must fail.
            Property::always("mutual exclusion", |m: &LockModel, s: &State| {
                let now = s.ks.now_ms();
                let holding = |exclusive: bool| {
                    s.clients
                        .iter()
                        .enumerate()
                        .filter(|(i, c)| {
                            m.takes[*i].exclusive() == exclusive
                                && matches!(c, Phase::Holding { valid_until, revoked: false, .. } if *valid_until > now)
                        })
                        .count()
                };
                let (exclusive, shared) = (holding(true), holding(false));
                exclusive <= 1 && (exclusive == 0 || shared == 0)
            }),
            Property::always(
                "no renewal revives a force-unlocked hold",
                |_, s: &State| !s.revived,
            ),
            Property::always("tokens increase", |_, s: &State| !s.regressed),
            // Every client went through its cycles, nothing crashed and no force unlock
            // came: each hold was released, so the lock is free (a resend applied twice, a
            // hold count off by one, would leave it held until its lease ends).
            Property::always("released locks are free", |m: &LockModel, s: &State| {
                let finished = s.left.iter().all(|l| *l == 0)
                    && s.crashes_left == m.bounds.crashes
                    && s.force_unlock_left;
                !finished || s.ks.entry(b"m").is_none()
            }),
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

    /// Check `takes` (one client each, one cycle each) and report the states explored.
    fn check(what: &str, takes: Vec<Take>) {
        let bounds = Bounds {
            lost: 1,
            crashes: 1,
            renewals: 1,
            waits: 2,
        };
        let checker = LockModel {
            takes,
            cycles: 1,
            bounds,
        }
        .checker()
        .spawn_bfs()
        .join();
        eprintln!(
            "model check, {what}: {} states ({} unique), depth {}",
            checker.state_count(),
            checker.unique_state_count(),
            checker.max_depth()
        );
        trace::report(&checker);
        checker.assert_properties();
    }

    /// Every interleaving of two clients, each taking and giving back the plain lock once,
    /// with lost replies, renewals, crashes, time jumps and a force unlock: the properties
    /// hold in every state.
    #[test]
    fn the_plain_lock_keeps_its_properties_in_every_interleaving() {
        check("plain lock, 2 clients", vec![Take::Plain, Take::Plain]);
    }

    /// The same for the fair lock.
    #[test]
    fn the_fair_lock_keeps_its_properties_in_every_interleaving() {
        check("fair lock, 2 clients", vec![Take::Fair, Take::Fair]);
    }

    /// A plain lock and a write lock on one name: each refuses the other's hash, so their
    /// holds never coexist.
    #[test]
    fn a_plain_lock_and_a_write_lock_on_one_name_exclude_each_other() {
        check(
            "a plain and a write lock on one name",
            vec![Take::Plain, Take::Write],
        );
    }

    /// A writer and a reader of one read-write lock: never both at once, one writer at a time.
    #[test]
    fn the_read_write_lock_keeps_its_properties_in_every_interleaving() {
        check(
            "read-write lock, a writer and a reader",
            vec![Take::Write, Take::Read],
        );
    }
}
