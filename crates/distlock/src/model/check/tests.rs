use super::*;
use crate::model::counts::{self, deep};

/// The default bounds: one lost reply and one crash in a run, one renewal and two attempts
/// while waiting per client; deeper: two lost replies and three attempts.
fn bounds() -> Bounds {
    if deep() {
        Bounds {
            lost: 2,
            crashes: 1,
            renewals: 1,
            waits: 3,
            cancels: 1,
        }
    } else {
        Bounds {
            lost: 1,
            crashes: 1,
            renewals: 1,
            waits: 2,
            cancels: 1,
        }
    }
}

/// Check `takes` on `deploy` (one client each, one cycle each) and report the states
/// explored; the properties hold (and the expected counterexamples are found).
fn check_with(what: &str, takes: Vec<Take>, deploy: Deployment, stuck: bool, bounds: Bounds) {
    let locks = vec!["m"; takes.len()];
    check_on(what, takes, locks, deploy, stuck, bounds);
}

/// [`check_with`], client `i` taking lock name `locks[i]`.
fn check_on(
    what: &str,
    takes: Vec<Take>,
    locks: Vec<&'static str>,
    deploy: Deployment,
    stuck: bool,
    bounds: Bounds,
) {
    let takes_len = takes.len();
    let model = LockModel {
        takes,
        locks,
        cycles: 1,
        bounds,
        deploy,
        stuck,
        // The force unlock is checked with two clients on one server; elsewhere it would
        // only multiply the states.
        force_unlock: deploy == Deployment::Single && takes_len < 3,
    };
    let checker = counts::explore(what, model);
    crate::model::trace::report(&checker);
    checker.assert_properties();
}

/// The bounds of the deployments' models (no crash: the restart or failover is the fault).
fn deploy_bounds() -> Bounds {
    Bounds {
        lost: 1,
        crashes: 0,
        renewals: 1,
        waits: if deep() { 2 } else { 1 },
        cancels: 0,
    }
}

fn check(what: &str, takes: Vec<Take>) {
    check_with(what, takes, Deployment::Single, true, bounds());
}

/// Every interleaving of two clients, each taking and giving back the plain lock once,
/// with lost replies, renewals, crashes, time jumps and a force unlock: the properties
/// hold in every state.
#[test]
fn the_plain_lock_keeps_its_properties_in_every_interleaving() {
    check("plain lock, 2 clients", vec![Take::Plain, Take::Plain]);
}

/// Three plain clients on one name, so that a hand-off can leave a waiter queued and a
/// grant can go past a queued waiter: the lock stays marked for the full release while
/// waiters queue (no lost reply, crash or renewal: the two-client check has those).
#[test]
fn three_plain_clients_keep_a_queued_lock_marked() {
    let bounds = Bounds {
        lost: 0,
        crashes: 0,
        renewals: 0,
        waits: 1,
        cancels: 0,
    };
    check_on(
        "plain lock, 3 clients on one name",
        vec![Take::Plain; 3],
        vec!["m"; 3],
        Deployment::Single,
        false,
        bounds,
    );
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

/// A plain lock and a read lock on one name: the read acquire refuses the plain lock's hash
/// (no mode field), the plain acquire the read-write lock's.
#[test]
fn a_plain_lock_and_a_read_lock_on_one_name_exclude_each_other() {
    check(
        "a plain and a read lock on one name",
        vec![Take::Plain, Take::Read],
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

/// A server that restarts from an older snapshot, with an empty script cache, under two
/// clients of the plain lock: tokens still increase (the clock goes on past the counter
/// that came back older), no renewal extends a lost hold, scripts run; two clients then
/// believe they hold it (expected: the grant was lost with the writes after the snapshot).
#[test]
fn across_a_restart_from_an_older_snapshot_tokens_still_increase() {
    check_with(
        "plain lock, restart from a snapshot",
        vec![Take::Plain, Take::Plain],
        Deployment::Restart,
        false,
        deploy_bounds(),
    );
}

/// The same for the fair lock.
#[test]
fn across_a_restart_the_fair_lock_keeps_tokens_increasing() {
    check_with(
        "fair lock, restart from a snapshot",
        vec![Take::Fair, Take::Fair],
        Deployment::Restart,
        false,
        deploy_bounds(),
    );
}

/// A Sentinel master with a replica and a failover, the client waiting for one replica's
/// acknowledgement of every grant, renewal and release: mutual exclusion holds across the
/// failover, tokens increase (the new master's epoch is their generation).
#[test]
fn with_wait_a_failover_keeps_mutual_exclusion() {
    // No renewal by default (each is a WAIT round of its own, as the grants').
    let bounds = Bounds {
        renewals: if deep() { 1 } else { 0 },
        ..deploy_bounds()
    };
    check_with(
        "plain lock, failover with WAIT",
        vec![Take::Plain, Take::Plain],
        Deployment::Replica { wait: true },
        false,
        bounds,
    );
}

/// The same without WAIT: a failover that loses a grant lets a second client take the lock
/// while the first still believes it holds it (the expected counterexample, which the
/// checker must find), and tokens still increase.
#[test]
fn without_wait_a_failover_breaks_mutual_exclusion_as_expected() {
    check_with(
        "plain lock, failover without WAIT",
        vec![Take::Plain, Take::Plain],
        Deployment::Replica { wait: false },
        false,
        deploy_bounds(),
    );
}

/// Three clients of the fair lock: a fair lock grants live waiters in arrival order (and
/// the other properties hold, no stuck state included).
#[test]
fn the_fair_lock_grants_three_clients_in_arrival_order() {
    let bounds = Bounds {
        lost: 0,
        crashes: 1,
        renewals: 0,
        waits: if deep() { 2 } else { 1 },
        cancels: 0,
    };
    check_with(
        "fair lock, 3 clients",
        vec![Take::Fair, Take::Fair, Take::Fair],
        Deployment::Single,
        true,
        bounds,
    );
}

/// Two names of one slot (`{m}a`, `{m}b`, which share the slot's fencing counter): two
/// clients of the plain lock on one, a third on the other. Each name's holds exclude each
/// other, each name's tokens increase although a grant on the other draws from the same
/// counter, and no step on one name changes a key of the other.
#[test]
fn two_names_of_one_slot_keep_their_properties_apart() {
    let bounds = Bounds {
        lost: 1,
        crashes: if deep() { 1 } else { 0 },
        renewals: 0,
        waits: 1,
        cancels: 0,
    };
    check_on(
        "plain lock, two names of one slot, 3 clients",
        vec![Take::Plain, Take::Plain, Take::Plain],
        vec!["{m}a", "{m}a", "{m}b"],
        Deployment::Single,
        true,
        bounds,
    );
}
