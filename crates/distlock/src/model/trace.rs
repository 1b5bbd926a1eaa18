//! Counterexamples people can read, and replay: what the model sent, step by step.
//!
//! The model's `send` reports every script run (and the notice's plain command) here
//! ([`sent`], [`exec`]); nothing is kept unless a thread records ([`recording`]), so the
//! exploration pays one thread-local read per send. A counterexample is rendered by walking
//! stateright's path (the shortest, breadth-first) and running each step again while
//! recording: the model is deterministic, so the steps give the same states, and states need
//! no field for what was sent (they still deduplicate as before).
//!
//! [`Trace::timeline`] prints, per step: the virtual time, the client, the action, each command
//! sent (EVALSHA of which script file, fast path or full, KEYS, ARGV), its reply, and the
//! keyspace change (keys added, changed, removed or expired, with type, value and TTL).
//! [`Trace::replayable`] prints the same sends as JSON lines that [`Trace::parse`] reads back:
//! pasted into `model/traces/NAME.trace`, [`super::replay`] runs them against a real server.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt::Write as _;

use serde_json::{json, Value as Json};
use stateright::{Checker, Expectation, Model, Path};

use super::keyspace::{Keyspace, Reply, Val};
use super::state::State;
use crate::scripts::{self, Publish, Script};

/// One command the model sent: a script run (`EVALSHA` of the script `file`, its fast path
/// or the full script) or a plain command.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Call {
    Script {
        file: String,
        fast: bool,
        keys: Vec<Vec<u8>>,
        args: Vec<Vec<u8>>,
    },
    Command(Vec<Vec<u8>>),
}

/// A command sent at one step, and the server's reply (the client may never have read it: a
/// lost reply).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sent {
    /// The step of the path (1 = the first action).
    pub(crate) step: usize,
    /// The step's action, as the model prints it (`Send { client: 0, lost: true }`).
    pub(crate) action: String,
    /// Virtual time of the send, ms after the trace's start.
    pub(crate) at_ms: u64,
    pub(crate) call: Call,
    pub(crate) reply: Reply,
}

/// A counterexample's sends, in order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Trace {
    /// The property it violates.
    pub(crate) property: String,
    /// Virtual time of the path's first state (µs since the epoch): the origin of `at_ms`, and
    /// of the clock values in the replies (tokens, deadlines).
    pub(crate) start_us: u64,
    pub(crate) sends: Vec<Sent>,
}

/// What one script run or command left in the thread's record: the call, its reply, the
/// virtual time (µs), and the SHA of the text run.
type Record = (Call, Reply, u64, String);

thread_local! {
    static RECORD: RefCell<Option<Vec<Record>>> = const { RefCell::new(None) };
}

/// The file a script runs, by the name `scripts/mod.rs` gives it.
fn file_of(script: &'static Script) -> &'static str {
    scripts::ALL
        .iter()
        .position(|s| std::ptr::eq::<Script>(&***s, script))
        .map_or("?", |i| scripts::RUNNABLE[i].0)
}

/// The text `script` runs as (classic `PUBLISH`): patched when this thread runs a mutant
/// ([`super::mutant::Mutated`]).
pub(crate) fn text(script: &'static Script) -> Cow<'static, str> {
    super::mutant::patched(script.text(Publish::Classic))
}

/// Report a script run of the model (`fast`: the fast path): kept while recording.
pub(crate) fn sent(
    script: &'static Script,
    fast: bool,
    keys: &[Vec<u8>],
    args: &[Vec<u8>],
    reply: &Reply,
    ks: &Keyspace,
) {
    RECORD.with(|r| {
        if let Some(log) = r.borrow_mut().as_mut() {
            let call = Call::Script {
                file: file_of(script).to_string(),
                fast,
                keys: keys.to_vec(),
                args: args.to_vec(),
            };
            let sha = redis::Script::new(&text(script)).get_hash().to_string();
            log.push((call, reply.clone(), ks.now_us, sha));
        }
    })
}

/// Run a plain command on the model's keyspace, reported as [`sent`] reports a script run.
pub(crate) fn exec(ks: &mut Keyspace, args: &[Vec<u8>]) -> Reply {
    let reply = ks.exec(args);
    RECORD.with(|r| {
        if let Some(log) = r.borrow_mut().as_mut() {
            log.push((
                Call::Command(args.to_vec()),
                reply.clone(),
                ks.now_us,
                String::new(),
            ));
        }
    });
    reply
}

/// Run `f`, recording what the model sends meanwhile on this thread.
fn recording<T>(f: impl FnOnce() -> T) -> (T, Vec<Record>) {
    RECORD.with(|r| *r.borrow_mut() = Some(Vec::new()));
    let out = f();
    let log = RECORD.with(|r| r.borrow_mut().take()).unwrap_or_default();
    (out, log)
}

/// A model's state as a counterexample shows it: the server's keyspace and each client's
/// phase.
pub(crate) trait Traced: Clone + PartialEq + std::fmt::Debug {
    fn keyspace(&self) -> &Keyspace;
    /// Each client's phase, as the model prints it (`Holding { .. }`).
    fn phases(&self) -> Vec<String>;
}

impl Traced for State {
    fn keyspace(&self) -> &Keyspace {
        &self.ks
    }
    fn phases(&self) -> Vec<String> {
        self.clients.iter().map(|c| format!("{c:?}")).collect()
    }
}

/// [`Traced`] for a model state with fields `ks` and `clients` (a `Vec` of `Debug` phases).
macro_rules! traced {
    ($state:ty) => {
        impl $crate::model::trace::Traced for $state {
            fn keyspace(&self) -> &$crate::model::keyspace::Keyspace {
                &self.ks
            }
            fn phases(&self) -> Vec<String> {
                self.clients.iter().map(|c| format!("{c:?}")).collect()
            }
        }
    };
}
pub(crate) use traced;

/// Print every violated property's shortest path as a timeline and in replayable form (the
/// model check's report hook, before it asserts the properties).
pub(crate) fn report<M, C>(checker: &C)
where
    M: Model,
    M::State: Traced,
    M::Action: std::fmt::Debug + Clone + PartialEq,
    C: Checker<M>,
{
    let model = checker.model();
    for property in model.properties() {
        if property.expectation == Expectation::Sometimes {
            continue;
        }
        if let Some(path) = checker.discovery(property.name) {
            let trace = Trace::of(model, property.name, &path);
            eprintln!("{}", trace.timeline(model, &path));
            eprintln!(
                "replayable (paste into crates/distlock/src/model/traces/NAME.trace; \
                 model::replay runs it against a real server):\n{}",
                trace.replayable()
            );
        }
    }
}

/// The keys a model starts with (a semaphore's permits, a latch's count), as the `SET`s that
/// make them on a fresh server: step 0 of a trace, action `Init`. Only strings without a TTL
/// are made so (what the models start with).
fn initial_sets(ks: &Keyspace) -> Vec<Sent> {
    let mut fresh = Keyspace::new(ks.now_us);
    ks.keys
        .iter()
        .map(|(key, entry)| {
            let (Val::Str(value), None) = (&entry.val, entry.expires_at) else {
                panic!("an initial key other than a string without a TTL: {entry:?}");
            };
            let args = vec![b"SET".to_vec(), key.clone(), value.clone()];
            Sent {
                step: 0,
                action: "Init".to_string(),
                at_ms: 0,
                reply: fresh.exec(&args),
                call: Call::Command(args),
            }
        })
        .collect()
}

/// The client an action is of (`c0`), from its printed form; `-` for the clock or operator.
fn who(action: &str) -> String {
    action
        .split_once("client: ")
        .and_then(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next())
        .map_or_else(|| "-".to_string(), |n| format!("c{n}"))
}

/// Each step of `path` run again while recording: (the step's action, the state before and
/// after, what it sent).
#[allow(clippy::type_complexity)]
fn steps<M: Model>(
    model: &M,
    path: &Path<M::State, M::Action>,
) -> Vec<(M::Action, M::State, M::State, Vec<Record>)>
where
    M::State: Clone,
    M::Action: Clone,
{
    let mut out = Vec::new();
    for pair in path.clone().into_vec().windows(2) {
        let (before, Some(action)) = &pair[0] else {
            continue;
        };
        let (next, log) = recording(|| model.next_state(before, action.clone()));
        let after = next.unwrap_or_else(|| pair[1].0.clone());
        out.push((action.clone(), before.clone(), after, log));
    }
    out
}

impl Trace {
    /// The sends along `path` (a counterexample to `property`).
    pub(crate) fn of<M: Model>(model: &M, property: &str, path: &Path<M::State, M::Action>) -> Trace
    where
        M::State: Traced,
        M::Action: std::fmt::Debug + Clone + PartialEq,
    {
        let first = path.clone().into_states().swap_remove(0);
        let start_us = first.keyspace().now_us;
        let mut sends = initial_sets(first.keyspace());
        for (i, (action, _, _, log)) in steps(model, path).into_iter().enumerate() {
            for (call, reply, now_us, _) in log {
                sends.push(Sent {
                    step: i + 1,
                    action: format!("{action:?}"),
                    at_ms: (now_us - start_us) / 1000,
                    call,
                    reply,
                });
            }
        }
        Trace {
            property: property.to_string(),
            start_us,
            sends,
        }
    }

    /// The path as a timeline: per step, its time, client and action, each command sent with
    /// its reply, and the keyspace change; then the last state's clients.
    pub(crate) fn timeline<M: Model>(&self, model: &M, path: &Path<M::State, M::Action>) -> String
    where
        M::State: Traced,
        M::Action: std::fmt::Debug + Clone + PartialEq,
    {
        let steps = steps(model, path);
        let mut out = format!(
            "counterexample to {:?}: {} steps (the shortest path, found breadth-first)\n",
            self.property,
            steps.len()
        );
        for (i, (action, before, after, log)) in steps.iter().enumerate() {
            let action = format!("{action:?}");
            let (before_ks, after_ks) = (before.keyspace(), after.keyspace());
            let at = (before_ks.now_us - self.start_us) / 1000;
            let _ = writeln!(
                out,
                "step {:>2}  t+{at} ms  {}  {action}",
                i + 1,
                who(&action)
            );
            if after_ks.now_us != before_ks.now_us {
                let _ = writeln!(
                    out,
                    "         clock: t+{} ms",
                    (after_ks.now_us - self.start_us) / 1000
                );
            }
            for (call, reply, _, sha) in log {
                let _ = writeln!(out, "         {}", show_call(call, sha));
                let lost = if action.contains("lost: true") && is_last_script(log, call) {
                    "   (reply lost: the client never reads it)"
                } else {
                    ""
                };
                let _ = writeln!(out, "           -> {}{lost}", show_reply(reply));
            }
            for line in keyspace_change(before_ks, after_ks) {
                let _ = writeln!(out, "         keyspace: {line}");
            }
            for (c, (was, is)) in before.phases().iter().zip(after.phases()).enumerate() {
                if *was != is {
                    let _ = writeln!(out, "         c{c}: {is}");
                }
            }
        }
        if let Some((_, _, last, _)) = steps.last() {
            let _ = writeln!(out, "then: clients [{}]", last.phases().join(", "));
        }
        out
    }

    /// The trace as lines [`Trace::parse`] reads: a header, then one JSON object per send.
    pub(crate) fn replayable(&self) -> String {
        let mut out = json!({"property": self.property, "start_us": self.start_us}).to_string();
        for s in &self.sends {
            let mut line = json!({
                "step": s.step,
                "action": s.action,
                "at_ms": s.at_ms,
                "reply": reply_json(&s.reply),
            });
            match &s.call {
                Call::Script {
                    file,
                    fast,
                    keys,
                    args,
                } => {
                    line["script"] = json!(file);
                    line["path"] = json!(if *fast { "fast" } else { "full" });
                    line["keys"] = json!(keys.iter().map(|k| text_json(k)).collect::<Vec<_>>());
                    line["args"] = json!(args.iter().map(|a| text_json(a)).collect::<Vec<_>>());
                }
                Call::Command(args) => {
                    line["command"] = json!(args.iter().map(|a| text_json(a)).collect::<Vec<_>>());
                }
            }
            out.push('\n');
            out.push_str(&line.to_string());
        }
        out
    }

    /// A trace in [`Trace::replayable`]'s form (lines starting with `#` are comments).
    pub(crate) fn parse(text: &str) -> Trace {
        let mut lines = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| serde_json::from_str::<Json>(l).expect("a trace line is JSON"));
        let head = lines.next().expect("a trace's header line");
        let bytes = |v: &Json| -> Vec<Vec<u8>> {
            v.as_array()
                .expect("a list")
                .iter()
                .map(json_bytes)
                .collect()
        };
        let sends = lines
            .map(|l| {
                let call = match l.get("command") {
                    Some(args) => Call::Command(bytes(args)),
                    None => Call::Script {
                        file: l["script"].as_str().expect("script").to_string(),
                        fast: l["path"] == "fast",
                        keys: bytes(&l["keys"]),
                        args: bytes(&l["args"]),
                    },
                };
                Sent {
                    step: l["step"].as_u64().expect("step") as usize,
                    action: l["action"].as_str().unwrap_or_default().to_string(),
                    at_ms: l["at_ms"].as_u64().expect("at_ms"),
                    call,
                    reply: json_reply(&l["reply"]),
                }
            })
            .collect();
        Trace {
            property: head["property"].as_str().unwrap_or_default().to_string(),
            start_us: head["start_us"].as_u64().expect("start_us"),
            sends,
        }
    }
}

/// Whether `call` is the last script run of its step (the one whose reply a lost send loses).
fn is_last_script(log: &[Record], call: &Call) -> bool {
    log.iter()
        .rev()
        .find(|(c, ..)| matches!(c, Call::Script { .. }))
        .is_some_and(|(c, ..)| std::ptr::eq(c, call))
}

fn show_call(call: &Call, sha: &str) -> String {
    let list = |items: &[Vec<u8>]| {
        items
            .iter()
            .map(|b| format!("{:?}", String::from_utf8_lossy(b)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    match call {
        Call::Script {
            file,
            fast,
            keys,
            args,
        } => format!(
            "EVALSHA {} ({file}, {}) KEYS [{}] ARGV [{}]",
            &sha[..sha.len().min(8)],
            if *fast { "fast path" } else { "full script" },
            list(keys),
            list(args)
        ),
        Call::Command(args) => list(args).to_uppercase(),
    }
}

/// A reply as text: `nil`, `7`, `"text"`, `[…]`, `+OK`, `-ERR …`.
pub(crate) fn show_reply(r: &Reply) -> String {
    match r {
        Reply::Nil => "nil".into(),
        Reply::Int(i) => i.to_string(),
        Reply::Bulk(b) => format!("{:?}", String::from_utf8_lossy(b)),
        Reply::Array(a) => format!(
            "[{}]",
            a.iter().map(show_reply).collect::<Vec<_>>().join(", ")
        ),
        Reply::Status(s) => format!("+{s}"),
        Reply::Error(e) => format!("-{e}"),
    }
}

/// A value in a line: a string quoted, a hash's fields, a list's items, a sorted set's
/// members with their scores.
fn show_val(v: &Val) -> String {
    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match v {
        Val::Str(b) => format!("{:?}", s(b)),
        Val::Hash(h) => format!(
            "{{{}}}",
            h.iter()
                .map(|(f, v)| format!("{}: {}", s(f), s(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Val::List(l) => format!(
            "[{}]",
            l.iter().map(|i| s(i)).collect::<Vec<_>>().join(", ")
        ),
        Val::ZSet(z) => format!(
            "{{{}}}",
            z.iter()
                .map(|(m, sc)| format!("{}: {sc}", s(m)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Val::Set(m) => format!(
            "{{{}}}",
            m.iter().map(|i| s(i)).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The keys a step added (`+`), changed (`~`), deleted (`-`) or saw expire, with type, value
/// and TTL (ms, at the step's end).
fn keyspace_change(before: &Keyspace, after: &Keyspace) -> Vec<String> {
    let live = |ks: &Keyspace| {
        let now = ks.now_ms();
        ks.keys
            .iter()
            .filter(move |(_, e)| e.expires_at.is_none_or(|at| at > now))
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let (b, a) = (live(before), live(after));
    let now = after.now_ms();
    let show = |k: &[u8], e: &super::keyspace::Entry| {
        let ttl = e
            .expires_at
            .map_or("no TTL".to_string(), |at| format!("TTL {} ms", at - now));
        format!(
            "{} {} {} ({ttl})",
            String::from_utf8_lossy(k),
            e.val.type_name(),
            show_val(&e.val)
        )
    };
    let mut out = Vec::new();
    for (k, e) in &a {
        match b.get(k) {
            None => out.push(format!("+ {}", show(k, e))),
            Some(old) if old != e => out.push(format!("~ {}", show(k, e))),
            _ => {}
        }
    }
    for (k, e) in &b {
        if !a.contains_key(k) {
            let why = match after.keys.get(k) {
                Some(x) if x == e => "expired",
                _ => "deleted",
            };
            out.push(format!("- {} ({why})", String::from_utf8_lossy(k)));
        }
    }
    out
}

/// A byte string in JSON: a string when it is UTF-8, else `{"bytes": […]}`.
fn text_json(b: &[u8]) -> Json {
    match std::str::from_utf8(b) {
        Ok(s) => json!(s),
        Err(_) => json!({ "bytes": b }),
    }
}

fn json_bytes(v: &Json) -> Vec<u8> {
    match v {
        Json::String(s) => s.clone().into_bytes(),
        other => other["bytes"]
            .as_array()
            .expect("a string or bytes")
            .iter()
            .map(|b| b.as_u64().expect("a byte") as u8)
            .collect(),
    }
}

/// A reply in JSON: `null`, an integer, a string, a list, `{"ok": …}` or `{"err": …}`.
fn reply_json(r: &Reply) -> Json {
    match r {
        Reply::Nil => Json::Null,
        Reply::Int(i) => json!(i),
        Reply::Bulk(b) => text_json(b),
        Reply::Array(a) => Json::Array(a.iter().map(reply_json).collect()),
        Reply::Status(s) => json!({ "ok": s }),
        Reply::Error(e) => json!({ "err": e }),
    }
}

fn json_reply(v: &Json) -> Reply {
    match v {
        Json::Null => Reply::Nil,
        Json::Number(n) => Reply::Int(n.as_i64().expect("an integer reply")),
        Json::String(s) => Reply::Bulk(s.clone().into_bytes()),
        Json::Array(a) => Reply::Array(a.iter().map(json_reply).collect()),
        Json::Object(o) => match (o.get("ok"), o.get("err")) {
            (Some(s), _) => Reply::Status(s.as_str().unwrap_or_default().to_string()),
            (_, Some(e)) => Reply::Error(e.as_str().unwrap_or_default().to_string()),
            _ => Reply::Bulk(json_bytes(v)),
        },
        Json::Bool(b) => Reply::Int(*b as i64),
    }
}
