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
//! The server is one that keeps its data, one that restarts from an older snapshot, or a
//! Sentinel master with a replica that a failover promotes, the client confirming its writes
//! with `WAIT` or not ([`super::deploy`]).
//!
//! Abstracted: the async driver's scheduling (an attempt is one step, a `WAIT` another),
//! pub/sub delivery (a message only makes a waiter attempt, which a waiter may do at any step
//! anyway: delivered, delayed and lost messages are all among the interleavings explored),
//! clock drift (the client's local deadline is the server's, less the library's drift
//! margin).
//!
//! Properties, in every state: see [`super::props`] — mutual exclusion (or, where writes can
//! be lost, its expected counterexample), tokens increase, no renewal extends a hold that is
//! gone, released locks are free, no helper key outlives its TTL, a fair lock's arrival
//! order, no stuck state (bounded), scripts run; and, as a sanity check of the model itself,
//! some path gets every client through its cycles.

mod props;
mod steps;

use std::time::Duration;

use stateright::{Checker, Model, Property};

use super::counts::{send, strings, START_US};
use super::deploy::{self, Deployment};
use super::keyspace::{Keyspace, Reply};
use super::state::{Action, Phase, State};
use super::take::Take;
use super::trace;
use crate::keys;
use crate::lock::raw::{parse_attempt, AcquireCall, Attempt, Mode, Names, RawLock, ReleaseCall};
use crate::lock::Owner;
use crate::scripts::Invocation;
use steps::next_deadline;

/// The lease of every grant (ms of virtual time).
pub(super) const LEASE_MS: u64 = 3_000;
/// The waiters' liveness timeout (ms).
pub(super) const LIVENESS_MS: u64 = 1_500;
/// The unlock latch's TTL (ms): how long a release's resend finds it applied.
pub(super) const LATCH_MS: u64 = 13_000;
/// `WAIT`'s timeout (`replica_ack_timeout`, ms): past it, WAIT answers with the replicas
/// that acknowledged.
const WAIT_TIMEOUT_MS: u64 = 1_000;

/// A lock's model: one client per entry of `takes` (what it takes of the lock named by the
/// same entry of `locks`), each doing `cycles` acquire-release cycles.
pub(crate) struct LockModel {
    pub(crate) takes: Vec<Take>,
    /// The lock name each client takes (`m` throughout, or two names of one slot, which
    /// share its fencing counter).
    pub(crate) locks: Vec<&'static str>,
    pub(crate) cycles: u8,
    pub(crate) bounds: Bounds,
    /// One server, a restart from a snapshot, or a master with a replica.
    pub(crate) deploy: Deployment,
    /// Whether to check "no stuck state" (a search from every state where it applies).
    pub(crate) stuck: bool,
    /// Whether an operator force-unlocks the lock once.
    pub(crate) force_unlock: bool,
}

/// How far the exploration goes: lost replies and crashes in a whole run, and per client the
/// renewals and the attempts while waiting (each also bounded by virtual time, four leases).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    pub(crate) lost: u8,
    pub(crate) crashes: u8,
    pub(crate) renewals: u8,
    pub(crate) waits: u8,
    /// Waiters that give up (a dropped or timed-out acquire), in the whole run.
    pub(crate) cancels: u8,
}

impl LockModel {
    pub(super) fn raw(&self, client: usize) -> Box<dyn RawLock> {
        self.takes[client].raw(Duration::from_millis(LIVENESS_MS))
    }

    /// Client `client`'s field in its lock's hash for owner `o` (the kind's: `<owner>:write`
    /// for a write hold).
    pub(super) fn field(&self, client: usize, o: u32) -> Vec<u8> {
        self.raw(client)
            .field(&owner(client, o))
            .as_bytes()
            .to_vec()
    }

    pub(super) fn names(&self, client: usize) -> Names {
        Names::new(&*self.raw(client), "", self.locks[client].to_string())
    }

    /// The index of client `client`'s lock name: the first client that takes that name (no
    /// allocation: it runs for every grant of every explored state).
    pub(super) fn lock_index(&self, client: usize) -> usize {
        let name = self.locks[client];
        self.locks
            .iter()
            .position(|n| *n == name)
            .expect("a client's name")
    }

    /// Whether the clients take more than one name.
    pub(super) fn several_names(&self) -> bool {
        self.locks.iter().any(|n| *n != self.locks[0])
    }
}

/// The owner `c<client>:<n>` of a client's `n`th hold (unique across the model's names).
pub(super) fn owner(client: usize, n: u32) -> Owner {
    Owner::parse(&format!("c{client}:{n}")).expect("owner")
}

impl LockModel {
    fn acquire_call(
        &self,
        s: &State,
        client: usize,
        owner_n: u32,
        fast: bool,
    ) -> Invocation<'static> {
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
            latch_ms: LATCH_MS,
            floor: &s.servers.floor(),
            holder: "model;host;1",
            client_id: &client_id,
            // Where replicas confirm grants, nothing is handed off (`Lock::hands_off`).
            handoff: !self.deploy.waits(),
            fast,
            // The engine's estimate of the server's clock at its best: the clock itself (a
            // reading no later than it; see `ServerClock`), on one server only.
            clock: (!s.servers.floor().contains(':')).then_some(s.ks.now_us),
        };
        let full = raw.acquire(&names, &call);
        super::with_fast(full, raw.acquire_fast(&names, &call))
    }

    pub(super) fn release_call(
        &self,
        s: &State,
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
            latch_ms: LATCH_MS,
            floor: &s.servers.floor(),
            fast,
        };
        let full = raw.release(&names, &call);
        super::with_fast(full, raw.release_fast(&names, &call))
    }

    /// Client `client`'s acquire attempt for `owner` (its fast path when `fast`): granted,
    /// refused (it waits, queued), or — with `lost` — run by the server with the reply lost
    /// (the client resends to the full script).
    pub(super) fn attempt(
        &self,
        s: &mut State,
        client: usize,
        (owner, fast, since): (u32, bool, Option<u64>),
        lost: bool,
    ) {
        let now_ms = s.ks.now_ms();
        // A grant's lease counts from the earliest attempt not answered since.
        let started = since.unwrap_or(now_ms);
        let inv = self.acquire_call(s, client, owner, fast);
        s.last_try[client] = now_ms;
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
            s.clients[client] = Phase::Acquiring {
                owner,
                fast: false,
                since: Some(started),
            };
            return;
        }
        match strings(&r).map(|v| parse_attempt(&v)) {
            Some(Ok(Attempt::Granted { token, .. })) if self.deploy.waits() => {
                s.clients[client] = Phase::Confirming {
                    owner,
                    token,
                    since_ms: started,
                    epoch: s.servers.epoch,
                }
            }
            Some(Ok(Attempt::Granted { token, .. })) => {
                self.granted(s, client, owner, token, started)
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
                self.attempt(&mut s, client, (owner, true, None), lost);
            }
            Phase::Acquiring { owner, fast, since } => {
                self.attempt(&mut s, client, (owner, fast, since), lost)
            }
            Phase::Waiting { owner } => self.attempt(&mut s, client, (owner, false, None), lost),
            Phase::Holding { owner, .. } => {
                s.minted += 1;
                let latch = s.minted;
                self.release(&mut s, client, owner, true, latch, lost);
            }
            Phase::Releasing { owner, fast, latch } => {
                self.release(&mut s, client, owner, fast, latch, lost)
            }
            Phase::Confirming {
                owner,
                token,
                since_ms,
                epoch,
            } => {
                let timely = s.ks.now_ms() <= since_ms + WAIT_TIMEOUT_MS;
                if !lost && timely && epoch == s.servers.epoch {
                    // WAIT: the replica acknowledges the grant; the client counts on it (and
                    // on its token: a grant given back unconfirmed was never used, and a
                    // failover may bring it back to the same owner's retry).
                    s.servers.replicate(&s.ks);
                    self.granted(&mut s, client, owner, token, since_ms);
                } else {
                    // Too few acknowledgements (`lost`, or the WAIT's timeout passed), or the master
                    // failed over (the connection broke): the grant is given back, over the
                    // client's own connection (to the master now), and the client attempts
                    // again (`confirm_grant`).
                    s.minted += 1;
                    let latch = s.minted;
                    let inv = self.release_call(&s, client, owner, latch, false);
                    match send(&mut s.ks, &inv, false) {
                        r if r.error_code().is_none() || r.error_code() == Some("WRONGTYPE") => {}
                        other => s.script_error = Some(format!("give back: {other:?}")),
                    }
                    s.clients[client] = Phase::Acquiring {
                        owner,
                        fast: false,
                        since: None,
                    };
                }
            }
            Phase::Done => return None,
        }
        Some(s)
    }

    /// Record a grant of `token` on lock name `name` (its [`Self::lock_index`]): above every earlier grant's on that name (tokens increase).
    fn record_token(state: &mut State, name: usize, token: u128) {
        let max = &mut state.max_token[name];
        if max.is_some_and(|max| token <= max) {
            state.regressed = true;
        }
        *max = Some(max.map_or(token, |m| m.max(token)));
    }

    /// Record a grant of `token` (tokens increase), and put the client in `Holding` of
    /// `owner`'s hold, granted by an attempt at `since_ms`.
    fn granted(&self, state: &mut State, client: usize, owner: u32, token: u128, since_ms: u64) {
        Self::record_token(state, self.lock_index(client), token);
        state.clients[client] = Phase::Holding {
            owner,
            token,
            valid_until: super::counts::valid_until(since_ms, LEASE_MS),
            revoked: false,
        };
    }
}

impl Model for LockModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let n = self.takes.len();
        vec![State {
            ks: Keyspace::new(START_US),
            clients: vec![Phase::Idle; n],
            left: vec![self.cycles; n],
            minted: 0,
            max_token: vec![None; self.locks.len()],
            crossed: false,
            regressed: false,
            script_error: None,
            force_unlock_left: self.force_unlock,
            revived: false,
            servers: self.deploy.servers(),
            last_try: vec![0; n],
            arrival: vec![None; n],
            arrivals: 0,
            out_of_order: false,
            orphan_until: 0,
            dead_waiter_until: vec![0; n],
            lost_left: self.bounds.lost,
            crashes_left: self.bounds.crashes,
            cancels_left: self.bounds.cancels,
            renewals_left: vec![self.bounds.renewals; n],
            waits_left: vec![self.bounds.waits; n],
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        if state.regressed
            || state.revived
            || state.out_of_order
            || state.crossed
            || state.script_error.is_some()
        {
            return;
        }
        for (client, phase) in state.clients.iter().enumerate() {
            match phase {
                Phase::Done => {}
                Phase::Idle if state.left[client] == 0 => {}
                Phase::Idle => {
                    // A fresh acquire's first send (the fast path): its reply may be lost too.
                    actions.push(Action::Send {
                        client,
                        lost: false,
                    });
                    if state.lost_left > 0 {
                        actions.push(Action::Send { client, lost: true });
                    }
                }
                Phase::Acquiring { .. }
                | Phase::Waiting { .. }
                | Phase::Releasing { .. }
                | Phase::Confirming { .. } => {
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
                    if matches!(phase, Phase::Waiting { .. } | Phase::Acquiring { .. })
                        && state.cancels_left > 0
                    {
                        actions.push(Action::Cancel { client });
                    }
                }
                Phase::Holding { revoked, .. } => {
                    // The release's first send; its reply may be lost.
                    actions.push(Action::Send {
                        client,
                        lost: false,
                    });
                    if state.lost_left > 0 {
                        actions.push(Action::Send { client, lost: true });
                    }
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
        let servers = &state.servers;
        if servers.snapshots_left > 0 {
            actions.push(Action::Snapshot);
        }
        if servers.restarts_left > 0 {
            actions.push(Action::Restart);
        }
        // Asynchronous replication, before the failover (after it, the replica only
        // matters for WAIT, which copies it). With WAIT the replica catches up at the WAITs
        // alone: an asynchronous copy in between only repeats what the next WAIT does, but
        // for a grant whose WAIT then fails (left out to keep the run short).
        if servers.failovers_left > 0 && !self.deploy.waits() && servers.behind(&state.ks) {
            actions.push(Action::Replicate);
        }
        if servers.failovers_left > 0 {
            actions.push(Action::Failover);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        let now_ms = s.ks.now_ms();
        let last_action = action.clone();
        match action {
            Action::Tick => {
                s.ks.now_us = next_deadline(&s)? * 1000;
            }
            Action::Snapshot => s.servers.snapshot(&s.ks),
            Action::Restart => s.servers.restart(&mut s.ks),
            Action::Replicate => s.servers.replicate(&s.ks),
            Action::Failover => s.servers.failover(&mut s.ks),
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
                                let field = Reply::Bulk(self.field(client, *o));
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
                // The holder asks the server (the notice is only a claim): HEXISTS, as
                // `notice` sends it (recorded for the timeline).
                let key = self.names(client).key.as_bytes().to_vec();
                let held = trace::exec(
                    &mut s.ks,
                    &[b"hexists".to_vec(), key, self.field(client, o)],
                );
                if held == Reply::Int(0) {
                    end_cycle(&mut s, client);
                } else if let Phase::Holding { revoked, .. } = &mut s.clients[client] {
                    *revoked = false;
                }
            }
            Action::Cancel { client } => {
                s.cancels_left -= 1;
                let (Phase::Waiting { owner: o } | Phase::Acquiring { owner: o, .. }) =
                    s.clients[client]
                else {
                    return None;
                };
                self.give_up(&mut s, client, o);
            }
            Action::Crash { client } => {
                s.crashes_left -= 1;
                if matches!(s.clients[client], Phase::Waiting { .. }) {
                    // Its entry's deadline: its last attempt plus the liveness timeout.
                    s.dead_waiter_until[client] = s.last_try[client] + LIVENESS_MS;
                }
                if let Phase::Holding { owner: o, .. } = s.clients[client] {
                    if self.held(&s, client, o) {
                        let key = self.locks[client].as_bytes();
                        let until = s.ks.entry(key).and_then(|e| e.expires_at).unwrap_or(0);
                        s.orphan_until = s.orphan_until.max(until);
                    }
                }
                s.clients[client] = Phase::Done;
            }
            Action::Renew { client } => {
                s.renewals_left[client] -= 1;
                self.renew(&mut s, client, now_ms)?;
            }
            Action::Send { client, lost } => {
                if lost {
                    s.lost_left -= 1;
                }
                if matches!(s.clients[client], Phase::Waiting { .. }) {
                    s.waits_left[client] -= 1;
                }
                s = self.send_step(s, client, lost)?;
            }
        }
        self.observe_queue(last, &mut s);
        let name = match &last_action {
            Action::Send { client, .. }
            | Action::Renew { client }
            | Action::Cancel { client }
            | Action::Notice { client }
            | Action::Crash { client } => Some(self.locks[*client]),
            Action::ForceUnlock => Some(self.locks[0]),
            _ => None,
        };
        if let Some(name) = name {
            if self.changed_another_name(last, &s, name) {
                s.crossed = true;
            }
        }
        if s.orphan_until <= s.ks.now_ms() {
            s.orphan_until = 0;
        }
        // Liveness matters only while a client waits: one state for the rest.
        for (c, phase) in s.clients.iter().enumerate() {
            if !matches!(phase, Phase::Waiting { .. } | Phase::Acquiring { .. }) {
                s.last_try[c] = 0;
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        props::properties(self)
    }

    fn within_boundary(&self, s: &State) -> bool {
        // Virtual time bounded: past a few leases every lease has ended.
        s.ks.now_us <= START_US + 4 * LEASE_MS * 1000 + deploy::RESTART_MS * 1000
    }
}

/// The end of client `client`'s cycle: idle, one cycle fewer to go.
pub(super) fn end_cycle(s: &mut State, client: usize) {
    s.clients[client] = Phase::Idle;
    s.left[client] = s.left[client].saturating_sub(1);
}

#[cfg(test)]
mod tests;
