//! A model trace run against a real server: every command the model sent, in order, with
//! the same script files (EVAL of the text `scripts/mod.rs` joins, classic `PUBLISH`), keys
//! and arguments, each reply compared with the one the model got.
//!
//! Time: the model's clock is virtual (a trace starts at [`Trace::start_us`]); the server's is
//! real. A replay waits until each send's virtual offset (`at_ms`, plus how late the server has run
//! so far and [`MARGIN`], after a jump: a key the model saw expire has expired), and compares replies modulo the clocks' offset:
//! numbers in the model's reply that read as its clock (µs, ms or s within a few hours of the
//! trace's start: tokens, deadlines, the holder's seconds) are moved by the offset between the
//! server's `TIME` at the replay's start and the trace's start, then compared as the
//! differential test compares (within [`super::compare::TOLERANCE_MS`] of their unit;
//! everything below 1,000 exactly; errors by their code).
//!
//! A model finding becomes a regression test by pasting its printed replayable trace into
//! `model/traces/NAME.trace` and replaying it: with the planted bug ([`Patch`]) the real
//! server must answer as the model did (the finding is real), without it the property must
//! hold on the server. [`replay_on_model`] runs a trace on the model's own Redis, on its
//! virtual clock, and compares replies exactly: a pasted trace stays a behaviour of the model.

use std::time::{Duration, Instant};

use super::compare::{same_reply, Real};
use super::keyspace::{Keyspace, Reply};
use super::lua;
use super::mutant::Patch;
use super::trace::{show_reply, Call, Trace};
use crate::scripts;

/// How long past a send's virtual offset (and the lateness so far) the replay sends it after
/// the clock moved (ms).
const MARGIN: u64 = 5;

/// A replay's outcome: the server's replies, where they differ from the model's, and the
/// server (still running) for the test to look at.
pub(crate) struct Replayed {
    pub(crate) replies: Vec<Reply>,
    pub(crate) mismatches: Vec<String>,
    pub(crate) server: Real,
}

impl Replayed {
    /// Fail, listing each send whose reply differs from the model's.
    pub(crate) fn assert_matches(&self) {
        assert!(
            self.mismatches.is_empty(),
            "the real server answered otherwise than the model:\n{}",
            self.mismatches.join("\n")
        );
    }

    /// Whether `key` exists on the server now.
    pub(crate) fn exists(&mut self, key: &str) -> bool {
        self.server
            .exec(&[b"exists".to_vec(), key.as_bytes().to_vec()])
            == Reply::Int(1)
    }
}

/// Run `trace` against a fresh real server (the harness's `redis-server`, or the one
/// `DISTLOCK_REDIS_SERVER` names), the scripts patched by `patch` when given.
pub(crate) fn replay(trace: &Trace, patch: Option<&Patch>) -> Replayed {
    let mut server = Real::start();
    let origin = Instant::now();
    let offset_us = server.time_us() as i128 - trace.start_us as i128;
    let (mut replies, mut mismatches) = (Vec::new(), Vec::new());
    // How late the server has run behind the virtual clock so far: a send after a jump waits
    // for its offset plus this (and the margin), so a key the model saw expire at that instant
    // (set by a send that ran late) has expired on the server too.
    let (mut late, mut last_at) = (Duration::ZERO, 0);
    for (n, sent) in trace.sends.iter().enumerate() {
        if sent.at_ms > last_at {
            let due = Duration::from_millis(sent.at_ms + MARGIN) + late;
            std::thread::sleep(due.saturating_sub(origin.elapsed()));
        }
        last_at = sent.at_ms;
        let real = match &sent.call {
            Call::Script {
                file, keys, args, ..
            } => server.eval(&script_text(file, patch), keys, args),
            Call::Command(args) => server.exec(args),
        };
        let expected = shift(&sent.reply, trace.start_us, offset_us);
        if !same_reply(&expected, &real) {
            mismatches.push(format!(
                "send {} (step {}, {}, {}): the model got {}, the server answered {}",
                n + 1,
                sent.step,
                sent.action,
                match &sent.call {
                    Call::Script { file, fast, .. } =>
                        format!("{file}{}", if *fast { ", fast path" } else { "" }),
                    Call::Command(a) => String::from_utf8_lossy(&a[0]).into_owned(),
                },
                show_reply(&sent.reply),
                show_reply(&real)
            ));
        }
        replies.push(real);
        late = late.max(
            origin
                .elapsed()
                .saturating_sub(Duration::from_millis(sent.at_ms)),
        );
    }
    Replayed {
        replies,
        mismatches,
        server,
    }
}

/// The text of the script `file` as the model and the engine run it (classic `PUBLISH`),
/// patched by `patch` when given.
fn script_text(file: &str, patch: Option<&Patch>) -> String {
    let text = scripts::RUNNABLE
        .iter()
        .find(|(f, _)| *f == file)
        .unwrap_or_else(|| panic!("no script {file}"))
        .1;
    match patch {
        Some(p) => p.apply(text).into_owned(),
        None => text.to_string(),
    }
}

/// Run `trace` on the model's own Redis, its clock at each send's virtual time: the sends whose
/// reply differs from the trace's (exactly). A pasted trace stays a behaviour of the model
/// (with `patch`, of the model over that mutant) while this is empty.
pub(crate) fn replay_on_model(trace: &Trace, patch: Option<&Patch>) -> Vec<String> {
    let mut ks = Keyspace::new(trace.start_us);
    let mut out = Vec::new();
    for (n, sent) in trace.sends.iter().enumerate() {
        ks.now_us = trace.start_us + sent.at_ms * 1000;
        let reply = match &sent.call {
            Call::Script {
                file, keys, args, ..
            } => lua::eval(&mut ks, &script_text(file, patch), keys, args),
            Call::Command(args) => ks.exec(args),
        };
        if reply != sent.reply {
            out.push(format!(
                "send {} (step {}): the trace says {}, the model answers {}",
                n + 1,
                sent.step,
                show_reply(&sent.reply),
                show_reply(&reply)
            ));
        }
    }
    out
}

/// `r` with the numbers that read as the model's clock (µs, ms or s, from the trace's start to
/// a few hours after it) moved by `offset_us`.
fn shift(r: &Reply, start_us: u64, offset_us: i128) -> Reply {
    let move_number = |x: i128| -> i128 {
        let start = start_us as i128;
        let hours = 10_000_000_000i128; // µs: about 2.8 hours
        for unit in [1, 1_000, 1_000_000] {
            if (start / unit..(start + hours) / unit).contains(&x) {
                return x + offset_us / unit;
            }
        }
        x
    };
    match r {
        Reply::Int(i) => Reply::Int(move_number(*i as i128) as i64),
        Reply::Bulk(b) => {
            let mut out = Vec::new();
            let mut digits = Vec::new();
            for &c in b.iter().chain(std::iter::once(&b'.')) {
                if c.is_ascii_digit() {
                    digits.push(c);
                    continue;
                }
                if !digits.is_empty() {
                    let text = std::str::from_utf8(&digits).expect("digits");
                    match text.parse::<i128>() {
                        Ok(x) if digits.len() < 30 => {
                            out.extend(move_number(x).to_string().into_bytes())
                        }
                        _ => out.extend(&digits),
                    }
                    digits.clear();
                }
                out.push(c);
            }
            out.pop();
            Reply::Bulk(out)
        }
        Reply::Array(a) => Reply::Array(a.iter().map(|x| shift(x, start_us, offset_us)).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use stateright::{Checker, HasDiscoveries, Model};

    use super::*;
    use crate::model::check::{Bounds, LockModel};
    use crate::model::deploy::Deployment;
    use crate::model::mutant::Mutated;
    use crate::model::take::Take;
    use crate::model::trace::Sent;

    /// The model's finding of the mutant `resend-applied-twice` (tools/mutants/mutants.txt):
    /// a waiter's attempt whose reply is lost, then the holder's release hands the lock to it,
    /// and its next attempt (the resend, which confirms the hand-off) counts a second hold, so
    /// its one release leaves the lock held. Printed by the model check, pasted as it was.
    const RESEND_APPLIED_TWICE: &str = include_str!("traces/resend_applied_twice.trace");

    /// The same mutant's finding by the default model check of the plain lock (the clock moves
    /// to t+11,904 ms): a grant after the waiter's queue entry and the holder's lease ran out,
    /// its reply lost, resent.
    const RESEND_APPLIED_TWICE_AFTER_EXPIRY: &str =
        include_str!("traces/resend_applied_twice_after_expiry.trace");

    /// Two clients, one cycle each, one lost reply: a small model that finds the mutant (a
    /// fresh acquire's reply is lost only on a waiter's attempt: its first send's is not).
    fn two_clients() -> LockModel {
        LockModel {
            takes: vec![Take::Plain, Take::Plain],
            locks: vec!["m"; 2],
            cycles: 1,
            bounds: Bounds {
                lost: 1,
                crashes: 0,
                renewals: 0,
                waits: 2,
                cancels: 0,
            },
            deploy: Deployment::Single,
            stuck: false,
            force_unlock: true,
        }
    }

    /// The last acquire the trace sends: the resent attempt the mutant counts twice.
    fn last_acquire(trace: &Trace) -> usize {
        trace
            .sends
            .iter()
            .rposition(
                |s| matches!(&s.call, Call::Script { file, .. } if file == "lock_acquire.lua"),
            )
            .expect("an acquire")
    }

    /// The model over the mutant finds "released locks are free" violated, and prints the
    /// shortest path as a timeline of the commands sent (fast path then resend to the full
    /// script, the release), their replies and the keyspace changes; its replayable form reads
    /// back to the same trace; and the traces pasted here replay on the model over the mutant
    /// reply for reply (and not without it).
    #[test]
    fn a_model_finding_prints_as_a_timeline_and_a_replayable_trace() {
        let model = Mutated::new(two_clients(), Patch::mutant("resend-applied-twice"));
        let checker = model
            .checker()
            .finish_when(HasDiscoveries::AnyFailures)
            .spawn_bfs()
            .join();
        let path = checker
            .discovery("released locks are free")
            .expect("the model finds the mutant");
        let trace = Trace::of(checker.model(), "released locks are free", &path);
        let timeline = trace.timeline(checker.model(), &path);
        eprintln!("{timeline}\n{}", trace.replayable());
        for expected in [
            "counterexample to \"released locks are free\": ",
            "steps (the shortest path, found breadth-first)",
            "step  1  t+0 ms  c",
            "(lock_acquire_fast.lua, fast path) KEYS [\"m\" \"distlock:fencing-counter:{m}\"]",
            "keyspace: + m hash {c",
            ": Waiting { owner: ",
            "(lock_release_fast.lua, fast path) KEYS [\"m\"] ARGV [\"c",
            "-> nil",
            // The attempt that finds its own hold (a resend, or the confirmation of a
            // hand-off) counts a second hold, and the release leaves one.
            "(lock_acquire.lua, full script)",
            "-> [1, 2, \"18000000",
            ": 2, distlock:fencing-token: 18000000",
            "(lock_release.lua, full script)",
            "then: clients [Idle, Idle]",
        ] {
            assert!(
                timeline.contains(expected),
                "the timeline lacks {expected:?}:\n{timeline}"
            );
        }
        assert_eq!(Trace::parse(&trace.replayable()), trace);
        // The pasted traces are behaviours of the model over the mutant, reply for reply.
        let patch = Patch::mutant("resend-applied-twice");
        for text in [RESEND_APPLIED_TWICE, RESEND_APPLIED_TWICE_AFTER_EXPIRY] {
            let pasted = Trace::parse(text);
            assert_eq!(replay_on_model(&pasted, Some(&patch)), Vec::<String>::new());
            assert!(!replay_on_model(&pasted, None).is_empty());
        }
    }

    /// The replayable form carries every kind of call and reply: plain commands, bytes that are
    /// not UTF-8, status and error replies, nil and nested arrays.
    #[test]
    fn every_call_and_reply_reads_back_from_the_replayable_form() {
        let sent = |step, call, reply| Sent {
            step,
            action: "Notice { client: 0 }".into(),
            at_ms: 1_500,
            call,
            reply,
        };
        let trace = Trace {
            property: "p".into(),
            start_us: 1_800_000_000_000_000,
            sends: vec![
                sent(
                    1,
                    Call::Command(vec![b"hexists".to_vec(), b"m".to_vec(), vec![0xff, 0]]),
                    Reply::Int(0),
                ),
                sent(
                    2,
                    Call::Script {
                        file: "lock_renew.lua".into(),
                        fast: false,
                        keys: vec![b"m".to_vec()],
                        args: vec![b"3000".to_vec(), Vec::new()],
                    },
                    Reply::Array(vec![
                        Reply::Nil,
                        Reply::Status("OK".into()),
                        Reply::Error("WRONGTYPE x".into()),
                        Reply::Array(vec![Reply::Bulk(vec![0xfe])]),
                    ]),
                ),
            ],
        };
        assert_eq!(Trace::parse(&trace.replayable()), trace);
        // On the model: HEXISTS of a missing key is 0; the renewal of a missing lock is not
        // what the trace says.
        let mismatches = replay_on_model(&trace, None);
        assert_eq!(mismatches.len(), 1, "{mismatches:?}");
        assert!(mismatches[0].starts_with("send 2 (step 2)"));
    }

    /// The finding is real: with the mutant planted in the scripts, a real server answers
    /// every command of the trace as the model did, and the released lock stays held.
    #[test]
    fn the_pasted_findings_replay_on_a_real_server_as_the_model_ran_them() {
        for text in [RESEND_APPLIED_TWICE, RESEND_APPLIED_TWICE_AFTER_EXPIRY] {
            let trace = Trace::parse(text);
            let mut replayed = replay(&trace, Some(&Patch::mutant("resend-applied-twice")));
            replayed.assert_matches();
            assert!(replayed.exists("m"), "the mutant leaves the lock held");
        }
    }

    /// The regression test of the findings: the same commands against a real server with the
    /// scripts as they are — the resent attempt (after a hand-off, or after a grant whose reply
    /// was lost) answers the hold already granted (hold count 1), and one release frees the
    /// lock.
    #[test]
    fn a_resent_acquire_after_a_lost_reply_is_applied_once_and_one_release_frees_the_lock() {
        for text in [RESEND_APPLIED_TWICE, RESEND_APPLIED_TWICE_AFTER_EXPIRY] {
            let trace = Trace::parse(text);
            let mut replayed = replay(&trace, None);
            let resend = last_acquire(&trace);
            match &replayed.replies[resend] {
                Reply::Array(a) => assert_eq!(a[..2], [Reply::Int(1), Reply::Int(1)], "{a:?}"),
                other => panic!("the resent attempt's reply: {other:?}"),
            }
            assert!(!replayed.exists("m"), "one release frees the lock");
        }
    }

    /// The semaphore model's finding: an acquire whose reply was lost takes the permit, its
    /// client gives up past the resend window and gives back what the acquire may have got, but
    /// the grant's record set has expired by then (it was given a TTL of one second, not its
    /// epoch and the records' lifetime): the give-back finds no record and gives nothing back,
    /// and the permit is taken for nobody. Printed by the model check over the mutant that
    /// brings the bug back, pasted as it was.
    const SEMAPHORE_GIVE_BACK_AFTER_ITS_RECORD_EXPIRED: &str =
        include_str!("traces/semaphore_give_back_after_its_record_expired.trace");

    /// An acquire held up until after its client gave up and gave back what it might have got
    /// (no tombstone read): the permit is taken for nobody.
    const SEMAPHORE_ACQUIRE_AFTER_ITS_GIVE_BACK: &str =
        include_str!("traces/semaphore_acquire_after_its_give_back.trace");

    /// The semaphore's pasted findings with the mutant each was found over.
    fn semaphore_findings() -> [(&'static str, &'static str); 2] {
        [
            (
                SEMAPHORE_GIVE_BACK_AFTER_ITS_RECORD_EXPIRED,
                "semaphore-grant-record-set-expires-early",
            ),
            (
                SEMAPHORE_ACQUIRE_AFTER_ITS_GIVE_BACK,
                "semaphore-acquire-over-a-tombstone",
            ),
        ]
    }

    /// The permits the semaphore `s` has on the replay's server.
    fn permits(replayed: &mut Replayed) -> Reply {
        replayed.server.exec(&[b"get".to_vec(), b"s".to_vec()])
    }

    /// The semaphore findings are real: with the mutant, the model and a real server answer
    /// every command as the trace says, and the one permit is taken for nobody.
    #[test]
    fn the_semaphore_findings_replay_on_a_real_server_as_the_model_ran_them() {
        for (text, mutant) in semaphore_findings() {
            let trace = Trace::parse(text);
            let patch = Patch::mutant(mutant);
            assert_eq!(replay_on_model(&trace, Some(&patch)), Vec::<String>::new());
            let mut replayed = replay(&trace, Some(&patch));
            replayed.assert_matches();
            assert_eq!(
                permits(&mut replayed),
                Reply::Bulk(b"0".to_vec()),
                "{mutant}"
            );
        }
    }

    /// The regression test of the semaphore findings: the same commands against a real server
    /// with the scripts as they are — the give-back finds the grant recorded and gives it back,
    /// and the held-up acquire takes nothing (its record says it was given back): the permit is
    /// there for the next client.
    #[test]
    fn a_semaphore_give_back_finds_its_grant_and_a_held_up_acquire_takes_nothing() {
        for (text, _) in semaphore_findings() {
            let trace = Trace::parse(text);
            let mut replayed = replay(&trace, None);
            // (It may answer its grant again, as a resend's answer: nobody reads it.)
            assert_eq!(
                permits(&mut replayed),
                Reply::Bulk(b"1".to_vec()),
                "the held-up acquire took the permit: {:?}",
                replayed.replies
            );
        }
    }

    /// A replay fails when the server does not answer as the trace says: here a trace whose
    /// grant says a hold count of 5: that send, and only it, is reported, and the assertion
    /// fails.
    #[test]
    fn a_replay_with_a_wrong_expected_reply_fails() {
        let mut trace = Trace::parse(RESEND_APPLIED_TWICE);
        let confirm = last_acquire(&trace);
        let Reply::Array(grant) = &mut trace.sends[confirm].reply else {
            panic!("the confirming attempt is a grant");
        };
        grant[1] = Reply::Int(5);
        let replayed = replay(&trace, Some(&Patch::mutant("resend-applied-twice")));
        assert_eq!(replayed.mismatches.len(), 1, "{:?}", replayed.mismatches);
        assert!(
            replayed.mismatches[0].starts_with(&format!("send {} (step 6", confirm + 1)),
            "{:?}",
            replayed.mismatches
        );
        let failed =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| replayed.assert_matches()));
        assert!(failed.is_err());
    }
}
