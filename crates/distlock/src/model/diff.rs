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

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;

use super::keyspace::{Keyspace, Reply, Val};
use super::lua;
use crate::keys;
use crate::lock::raw::{
    AcquireCall, Fair, Mode, Names, Plain, RawLock, Read, ReleaseCall, Renewal, Write,
};
use crate::lock::{Handoff, Owner};
use crate::scripts::{self, Invocation, Publish};

/// How far apart two readings of the clock may be, in ms (one step, on a loaded machine).
const TOLERANCE_MS: u64 = 200;

/// A lock kind with the settings the model uses.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Plain,
    PlainOff,
    Fair,
    Read,
    Write,
}

impl Kind {
    fn raw(self) -> Box<dyn RawLock> {
        let liveness = Duration::from_secs(5);
        match self {
            Kind::Plain => Box::new(Plain {
                handoff: Handoff::Fifo,
                liveness,
            }),
            Kind::PlainOff => Box::new(Plain {
                handoff: Handoff::Off,
                liveness,
            }),
            Kind::Fair => Box::new(Fair {
                liveness,
                handoff: true,
            }),
            Kind::Read => Box::new(Read),
            Kind::Write => Box::new(Write {
                liveness,
                handoff: true,
            }),
        }
    }

    fn queues(self) -> bool {
        !matches!(self, Kind::PlainOff | Kind::Read)
    }
}

const NAMES: [&str; 2] = ["a", "{t}b"];
const OWNERS: [&str; 3] = ["c0:1", "c0:2", "c1:1"];

/// One step of a generated sequence.
#[derive(Debug, Clone)]
enum Step {
    Acquire {
        kind: Kind,
        name: usize,
        owner: usize,
        mode: Mode,
        wait: bool,
        fast: bool,
        /// Reuse the previous request id (a resend).
        resend: bool,
    },
    Release {
        kind: Kind,
        name: usize,
        owner: usize,
        fast: bool,
    },
    Renew {
        kind: Kind,
        name: usize,
        owner: usize,
    },
    Leave {
        kind: Kind,
        name: usize,
        owner: usize,
        give_back: bool,
    },
    ForceUnlock {
        kind: Kind,
        name: usize,
    },
    Inspect {
        kind: Kind,
        name: usize,
        owner: usize,
    },
    /// A plain command under one of the names (another kind's data, a user's key).
    Command(Vec<String>),
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        Just(Kind::Plain),
        Just(Kind::PlainOff),
        Just(Kind::Fair),
        Just(Kind::Read),
        Just(Kind::Write)
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

fn step(kind: BoxedStrategy<Kind>) -> impl Strategy<Value = Step> {
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
                Just(vec!["SADD", "N", "m"]),
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

fn names(kind: Kind, name: usize) -> Names {
    let raw = kind.raw();
    let key = NAMES[name].to_string();
    Names {
        name: key.clone(),
        channel: raw.channel(&key),
        counter: keys::fencing_counter("", &key),
        key,
    }
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
            let raw = kind.raw();
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
            let raw = kind.raw();
            let names = names(*kind, *name);
            let owner = owner(*o);
            let latch = keys::unlock_latch(&names.key, &format!("u{n}"));
            let call = ReleaseCall {
                owner: &owner,
                lease_ms: 30_000,
                latch: &latch,
                latch_ms: 13_000,
                floor: "0",
                context: "model".into(),
                fast: *fast,
            };
            let full = raw.release(&names, &call).invocation();
            let inv = super::with_fast(full, raw.release_fast(&names, &call));
            vec![Call::Script { inv }]
        }
        Step::Renew {
            kind,
            name,
            owner: o,
        } => {
            let raw = kind.raw();
            let names = names(*kind, *name);
            let owner = owner(*o);
            let renewal = raw.renewal(&names, &owner);
            let inv = match renewal.hash_mode() {
                Some(mode) => {
                    let mut inv = scripts::LOCK_RENEW.prepare_invoke();
                    inv.key(&names.key)
                        .arg(30_000u64)
                        .arg(mode)
                        .arg(raw.field(&owner));
                    inv
                }
                None => {
                    let Renewal::Read { prefix } = renewal else {
                        unreachable!()
                    };
                    let mut inv = scripts::RW_READ_RENEW.prepare_invoke();
                    inv.key(&names.key)
                        .arg(30_000u64)
                        .arg(owner.as_str())
                        .arg(prefix);
                    inv
                }
            };
            vec![Call::Script { inv }]
        }
        Step::Leave {
            kind,
            name,
            owner: o,
            give_back,
        } => {
            let raw = kind.raw();
            let names = names(*kind, *name);
            raw.leave(&names, OWNERS[*o], 5_000, *give_back, "0")
                .map(|inv| vec![Call::Script { inv }])
                .unwrap_or_default()
        }
        Step::ForceUnlock { kind, name } => {
            let raw = kind.raw();
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
            let raw = kind.raw();
            let names = names(*kind, *name);
            let mut inv = scripts::LOCK_INSPECT.prepare_invoke();
            inv.key(&names.key)
                .arg(raw.field(&owner(*o)))
                .arg(crate::layout::TOKEN_FIELD);
            vec![Call::Script { inv }]
        }
        Step::Command(args) => vec![Call::Command(
            args.iter().map(|a| a.as_bytes().to_vec()).collect(),
        )],
    }
}

/// A real server and a connection to it.
struct Real {
    _server: distlock_test::RedisServer,
    con: redis::Connection,
}

impl Real {
    fn start() -> Real {
        let server = distlock_test::RedisServer::start();
        let con = server.connection();
        Real {
            _server: server,
            con,
        }
    }

    fn query(&mut self, cmd: &redis::Cmd) -> Reply {
        match cmd.query::<redis::Value>(&mut self.con) {
            Ok(v) => Reply::from_value(v),
            Err(e) => {
                let text = format!(
                    "{} {}",
                    e.code().unwrap_or("ERR"),
                    e.detail().unwrap_or_default()
                );
                // Redis 6.2 wraps an error raised by redis.call: `ERR Error running script
                // (call to f_…): @user_script:N: WRONGTYPE …`; 7.0 passes it through.
                let inner = text
                    .strip_prefix("ERR Error running script")
                    .and_then(|rest| rest.split_once("@user_script:"))
                    .and_then(|(_, rest)| rest.split_once(": "))
                    .map(|(_, inner)| inner.to_string());
                Reply::Error(inner.unwrap_or(text))
            }
        }
    }

    fn exec(&mut self, args: &[Vec<u8>]) -> Reply {
        let mut cmd = redis::cmd(std::str::from_utf8(&args[0]).expect("command name"));
        for a in &args[1..] {
            cmd.arg(a.as_slice());
        }
        self.query(&cmd)
    }

    fn eval(&mut self, text: &str, keys: &[Vec<u8>], args: &[Vec<u8>]) -> Reply {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(text).arg(keys.len());
        for k in keys {
            cmd.arg(k.as_slice());
        }
        for a in args {
            cmd.arg(a.as_slice());
        }
        self.query(&cmd)
    }

    fn time_us(&mut self) -> u64 {
        let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut self.con).expect("TIME");
        s * 1_000_000 + us
    }

    /// Every key: its type, value and PTTL.
    fn snapshot(&mut self) -> BTreeMap<Vec<u8>, (String, Reply, i64)> {
        let keys: Vec<Vec<u8>> = redis::cmd("KEYS")
            .arg("*")
            .query(&mut self.con)
            .expect("KEYS");
        let mut out = BTreeMap::new();
        for k in keys {
            let t: String = redis::cmd("TYPE")
                .arg(&k)
                .query(&mut self.con)
                .expect("TYPE");
            let cmd = match t.as_str() {
                "string" => vec!["GET"],
                "hash" => vec!["HGETALL"],
                "list" => vec!["LRANGE", "0", "-1"],
                "zset" => vec!["ZRANGE", "0", "-1", "WITHSCORES"],
                "set" => vec!["SMEMBERS"],
                _ => continue,
            };
            let mut c = redis::cmd(cmd[0]);
            c.arg(&k);
            for a in &cmd[1..] {
                c.arg(*a);
            }
            let mut v = self.query(&c);
            if t == "set" {
                sort_array(&mut v);
            }
            let pttl: i64 = redis::cmd("PTTL")
                .arg(&k)
                .query(&mut self.con)
                .expect("PTTL");
            out.insert(k, (t, v, pttl));
        }
        out
    }
}

fn sort_array(v: &mut Reply) {
    if let Reply::Array(a) = v {
        a.sort_by(|x, y| format!("{x:?}").cmp(&format!("{y:?}")));
    }
}

/// The model's keyspace as [`Real::snapshot`] gives the real one.
fn model_snapshot(ks: &Keyspace) -> BTreeMap<Vec<u8>, (String, Reply, i64)> {
    let now = ks.now_ms();
    let mut out = BTreeMap::new();
    for (k, e) in &ks.keys {
        if e.expires_at.is_some_and(|at| at <= now) {
            continue;
        }
        let bulk = |b: &Vec<u8>| Reply::Bulk(b.clone());
        let mut v = match &e.val {
            Val::Str(s) => bulk(s),
            Val::Hash(h) => Reply::Array(h.iter().flat_map(|(f, v)| [bulk(f), bulk(v)]).collect()),
            Val::List(l) => Reply::Array(l.iter().map(bulk).collect()),
            Val::ZSet(_) | Val::Set(_) => {
                let mut copy = ks.clone();
                let cmd = if matches!(e.val, Val::ZSet(_)) {
                    vec![
                        b"zrange".to_vec(),
                        k.clone(),
                        b"0".to_vec(),
                        b"-1".to_vec(),
                        b"withscores".to_vec(),
                    ]
                } else {
                    vec![b"smembers".to_vec(), k.clone()]
                };
                match &e.val {
                    Val::Set(s) => Reply::Array(s.iter().map(bulk).collect()),
                    _ => copy.exec(&cmd),
                }
            }
        };
        if matches!(e.val, Val::Set(_)) {
            sort_array(&mut v);
        }
        let pttl = e.expires_at.map_or(-1, |at| (at - now) as i64);
        out.insert(k.clone(), (e.val.type_name().to_string(), v, pttl));
    }
    out
}

/// Whether two numbers agree: exactly below 1,000; else within the tolerance of their unit
/// (µs from 10^15, s from 10^9 to 10^12, ms otherwise).
fn close(a: i128, b: i128) -> bool {
    if a == b {
        return true;
    }
    let m = a.abs().max(b.abs());
    let tolerance = TOLERANCE_MS as i128;
    let allowed = if m < 1_000 {
        0
    } else if m >= 1_000_000_000_000_000 {
        tolerance * 1_000
    } else if (1_000_000_000..1_000_000_000_000).contains(&m) {
        tolerance / 1_000 + 1
    } else {
        tolerance
    };
    (a - b).abs() <= allowed
}

/// Whether two byte strings agree: the same text, with runs of digits compared by [`close`].
fn same_text(a: &[u8], b: &[u8]) -> bool {
    fn runs(s: &[u8]) -> Vec<(bool, &[u8])> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < s.len() {
            let digit = s[i].is_ascii_digit();
            let start = i;
            while i < s.len() && s[i].is_ascii_digit() == digit {
                i += 1;
            }
            out.push((digit, &s[start..i]));
        }
        out
    }
    let (ra, rb) = (runs(a), runs(b));
    ra.len() == rb.len()
        && ra.iter().zip(&rb).all(|((da, a), (db, b))| {
            da == db
                && if *da && a.len() < 30 && b.len() < 30 {
                    let parse = |s: &[u8]| std::str::from_utf8(s).ok()?.parse::<i128>().ok();
                    match (parse(a), parse(b)) {
                        (Some(x), Some(y)) => close(x, y),
                        _ => a == b,
                    }
                } else {
                    a == b
                }
        })
}

fn same_reply(a: &Reply, b: &Reply) -> bool {
    match (a, b) {
        (Reply::Int(x), Reply::Int(y)) => close(*x as i128, *y as i128),
        (Reply::Bulk(x), Reply::Bulk(y)) => same_text(x, y),
        (Reply::Array(x), Reply::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_reply(x, y))
        }
        (Reply::Error(_), Reply::Error(_)) => a.error_code() == b.error_code(),
        _ => a == b,
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
