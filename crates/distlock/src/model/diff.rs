//! The proof that the in-memory Redis is honest: generated sequences of the lock family's
//! script calls — built by the raw kinds exactly as the engine builds them (fast paths
//! first, where the engine tries them) — and of plain commands that put other data under
//! the same names, run step by step against the model ([`super::lua`] over
//! [`super::keyspace`]) and against a real `redis-server` (Redis 7.0 from `PATH`, or the
//! server `DISTLOCK_REDIS_SERVER` names: CI runs Valkey 8.1 and Redis 6.2 too). After every
//! step the replies and the whole keyspace (types, values, TTLs) must agree.
//!
//! The model's clock is set to the real server's `TIME` before each step, so values made from
//! the clock (fencing tokens in µs, deadlines and scores in ms, the holder field's seconds,
//! PTTLs) agree within the time one step takes: numbers of 1,000 and more are compared
//! within [`TOLERANCE_MS`] of their unit; smaller ones (hold counts, codes, counts) exactly.
//! Errors are compared by their code (`WRONGTYPE`, `ERR`, …), since servers word them
//! differently.

use std::time::Duration;

use proptest::prelude::*;

use super::compare::{model_snapshot, same_reply, Real, TOLERANCE_MS};
use super::keyspace::{Keyspace, Reply};
use super::lua;
use super::take::Take;
use crate::keys;
use crate::lock::raw::{inspect_call, renew_call, AcquireCall, Mode, Names, ReleaseCall};
use crate::lock::Owner;
use crate::scripts::{Invocation, Publish};

/// How long the sequences' queued waiters live.
const LIVENESS: Duration = Duration::from_secs(5);

const NAMES: [&str; 2] = ["a", "{t}b"];
const OWNERS: [&str; 3] = ["c0:1", "c0:2", "c1:1"];

/// One step of a generated sequence.
#[derive(Debug, Clone)]
enum Step {
    Acquire {
        kind: Take,
        name: usize,
        owner: usize,
        mode: Mode,
        wait: bool,
        fast: bool,
        /// Reuse the previous request id (a resend).
        resend: bool,
    },
    Release {
        kind: Take,
        name: usize,
        owner: usize,
        fast: bool,
    },
    Renew {
        kind: Take,
        name: usize,
        owner: usize,
    },
    Leave {
        kind: Take,
        name: usize,
        owner: usize,
        give_back: bool,
    },
    ForceUnlock {
        kind: Take,
        name: usize,
    },
    Inspect {
        kind: Take,
        name: usize,
        owner: usize,
    },
    /// A plain command under one of the names (another kind's data, a user's key).
    Command(Vec<String>),
}

fn kind() -> impl Strategy<Value = Take> {
    prop_oneof![
        Just(Take::Plain),
        Just(Take::PlainOff),
        Just(Take::Fair),
        Just(Take::Read),
        Just(Take::Write)
    ]
}

/// A sequence: mostly steps of one kind (so that queues, hand-offs and re-entries build
/// up), with other kinds' calls and plain commands on the same names among them.
fn sequence() -> impl Strategy<Value = Vec<Step>> {
    kind().prop_flat_map(|main| {
        let kind = prop_oneof![6 => Just(main), 1 => kind()];
        prop::collection::vec(step(kind.boxed()), 1..40)
    })
}

fn step(kind: BoxedStrategy<Take>) -> impl Strategy<Value = Step> {
    let kind = move || kind.clone();
    let name = prop_oneof![4 => Just(0usize), 1 => Just(1usize)];
    let owner = 0..OWNERS.len();
    let mode = prop_oneof![Just(Mode::New), Just(Mode::As), Just(Mode::Nested)];
    prop_oneof![
        6 => (kind(), name.clone(), owner.clone(), mode, any::<bool>(), any::<bool>(), prop::bool::weighted(0.2))
            .prop_map(|(kind, name, owner, mode, wait, fast, resend)| Step::Acquire {
                kind, name, owner, mode, wait, fast, resend
            }),
        4 => (kind(), name.clone(), owner.clone(), any::<bool>())
            .prop_map(|(kind, name, owner, fast)| Step::Release { kind, name, owner, fast }),
        2 => (kind(), name.clone(), owner.clone())
            .prop_map(|(kind, name, owner)| Step::Renew { kind, name, owner }),
        2 => (kind(), name.clone(), owner.clone(), any::<bool>())
            .prop_map(|(kind, name, owner, give_back)| Step::Leave { kind, name, owner, give_back }),
        1 => (kind(), name.clone()).prop_map(|(kind, name)| Step::ForceUnlock { kind, name }),
        1 => (kind(), name.clone(), owner.clone())
            .prop_map(|(kind, name, owner)| Step::Inspect { kind, name, owner }),
        1 => (name, prop_oneof![
                Just(vec!["HSET", "N", "name", "bob"]),
                Just(vec!["SET", "N", "12"]),
                Just(vec!["DEL", "N"]),
                Just(vec!["RPUSH", "N", "x"]),
                Just(vec!["ZADD", "N", "1", "m"]),
                Just(vec!["ZADD", "N", "NX", "2", "m"]),
                Just(vec!["SADD", "N", "m"]),
                Just(vec!["SADD", "N", "t", "m", "-65"]),
                Just(vec!["SREM", "N", "m"]),
                Just(vec!["SREM", "N", "t", "m", "-65"]),
                Just(vec!["SISMEMBER", "N", "m"]),
                Just(vec!["HSET", "N", "mode", "write", "c0:1:write", "1"]),
            ])
            .prop_map(|(name, cmd)| Step::Command(
                cmd.iter().map(|a| if *a == "N" { NAMES[name].to_string() } else { a.to_string() }).collect()
            )),
    ]
}

/// The calls one step sends, in order: each a script call (the fast path first where the
/// engine would try it, then — if it answered nil — the full call) or a command.
enum Call {
    Script { inv: Invocation<'static> },
    Command(Vec<Vec<u8>>),
}

fn names(kind: Take, name: usize) -> Names {
    Names::new(&*kind.raw(LIVENESS), "", NAMES[name].to_string())
}

/// The calls of `step` (`n`: the step's index, for request ids; `last_id`: the previous
/// acquire's request id, for resends).
fn calls(step: &Step, n: usize, last_id: &mut String) -> Vec<Call> {
    let owner = |i: usize| Owner::parse(OWNERS[i]).expect("owner");
    match step {
        Step::Acquire {
            kind,
            name,
            owner: o,
            mode,
            wait,
            fast,
            resend,
        } => {
            let raw = kind.raw(LIVENESS);
            let names = names(*kind, *name);
            let owner = owner(*o);
            if !*resend || last_id.is_empty() {
                *last_id = format!("r{n}");
            }
            let request_id = last_id.clone();
            let (client_id, _) = OWNERS[*o].split_once(':').expect("client id");
            let call = AcquireCall {
                owner: &owner,
                mode: *mode,
                lease_ms: 30_000,
                request_id: &request_id,
                wait_ms: if *wait { 5_000 } else { 0 },
                latch_ms: 13_000,
                floor: "0",
                holder: "model;host;1",
                client_id,
                handoff: kind.queues(),
                fast: *fast,
                clock: None,
            };
            let full = raw.acquire(&names, &call);
            let inv = super::with_fast(full, raw.acquire_fast(&names, &call));
            vec![Call::Script { inv }]
        }
        Step::Release {
            kind,
            name,
            owner: o,
            fast,
        } => {
            let raw = kind.raw(LIVENESS);
            let names = names(*kind, *name);
            let owner = owner(*o);
            let latch = keys::unlock_latch(&names.key, &format!("u{n}"));
            let call = ReleaseCall {
                owner: &owner,
                lease_ms: 30_000,
                latch: &latch,
                latch_ms: 13_000,
                floor: "0",
                fast: *fast,
            };
            let full = raw.release(&names, &call);
            let inv = super::with_fast(full, raw.release_fast(&names, &call));
            vec![Call::Script { inv }]
        }
        Step::Renew {
            kind,
            name,
            owner: o,
        } => {
            let raw = kind.raw(LIVENESS);
            let names = names(*kind, *name);
            let owner = owner(*o);
            vec![Call::Script {
                inv: renew_call(&*raw, &names, &owner, 30_000),
            }]
        }
        Step::Leave {
            kind,
            name,
            owner: o,
            give_back,
        } => {
            let raw = kind.raw(LIVENESS);
            let names = names(*kind, *name);
            raw.leave(&names, OWNERS[*o], 5_000, *give_back, "0")
                .map(|inv| vec![Call::Script { inv }])
                .unwrap_or_default()
        }
        Step::ForceUnlock { kind, name } => {
            let raw = kind.raw(LIVENESS);
            let names = names(*kind, *name);
            vec![Call::Script {
                inv: raw.force_unlock(&names, "0"),
            }]
        }
        Step::Inspect {
            kind,
            name,
            owner: o,
        } => {
            let raw = kind.raw(LIVENESS);
            let names = names(*kind, *name);
            vec![Call::Script {
                inv: inspect_call(&*raw, &names.key, &owner(*o)),
            }]
        }
        Step::Command(args) => vec![Call::Command(
            args.iter().map(|a| a.as_bytes().to_vec()).collect(),
        )],
    }
}

/// Run `steps` against the model and the real server; the first divergence, as text.
fn diverge(real: &mut Real, steps: &[Step]) -> Result<(), String> {
    let _: () = redis::cmd("FLUSHALL")
        .query(&mut real.con)
        .expect("FLUSHALL");
    let mut ks = Keyspace::new(real.time_us());
    let mut last_id = String::new();
    for (n, step) in steps.iter().enumerate() {
        for call in calls(step, n, &mut last_id) {
            ks.now_us = real.time_us();
            let (model, server) = match call {
                Call::Command(args) => (ks.exec(&args), real.exec(&args)),
                Call::Script { inv } => {
                    let mut pair = None;
                    if let Some((script, keys, args)) = inv.fast_parts() {
                        let text = script.text(Publish::Classic);
                        let (m, r) = (
                            lua::eval(&mut ks, text, &keys, &args),
                            real.eval(text, &keys, &args),
                        );
                        if !same_reply(&m, &r) {
                            return Err(format!("step {n} {step:?}: fast path replies differ:\n  model {m:?}\n  real  {r:?}"));
                        }
                        if m != Reply::Nil {
                            pair = Some((m, r));
                        }
                    }
                    match pair {
                        Some(p) => p,
                        None => {
                            ks.now_us = real.time_us();
                            let (script, keys, args) = inv.parts();
                            let text = script.text(Publish::Classic);
                            (
                                lua::eval(&mut ks, text, &keys, &args),
                                real.eval(text, &keys, &args),
                            )
                        }
                    }
                }
            };
            if !same_reply(&model, &server) {
                return Err(format!(
                    "step {n} {step:?}: replies differ:\n  model {model:?}\n  real  {server:?}"
                ));
            }
        }
        ks.now_us = real.time_us();
        let (m, r) = (model_snapshot(&ks), real.snapshot());
        let agree = m.len() == r.len()
            && m.iter()
                .zip(&r)
                .all(|((km, (tm, vm, pm)), (kr, (tr, vr, pr)))| {
                    km == kr
                        && tm == tr
                        && same_reply(vm, vr)
                        && ((*pm < 0 && pm == pr)
                            || (*pm >= 0 && *pr >= 0 && pm.abs_diff(*pr) <= TOLERANCE_MS))
                });
        if !agree {
            return Err(format!(
                "step {n} {step:?}: keyspaces differ:\n  model {m:?}\n  real  {r:?}"
            ));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        max_shrink_iters: 200,
        failure_persistence: None,
        .. ProptestConfig::default()
    })]

    /// Generated sequences of lock-family script calls and plain commands agree, reply by
    /// reply and key by key, between the model and a real server.
    #[test]
    fn the_model_redis_answers_as_a_real_server(steps in sequence()) {
        thread_local!(static REAL: std::cell::RefCell<Option<Real>> = const { std::cell::RefCell::new(None) });
        REAL.with(|r| {
            let mut r = r.borrow_mut();
            let real = r.get_or_insert_with(Real::start);
            if let Err(e) = diverge(real, &steps) {
                panic!("{e}");
            }
        });
    }
}
