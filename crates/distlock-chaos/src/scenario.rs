//! The scenarios: a deployment, a workload, a fault schedule and what must hold.

use std::time::Duration;

use crate::check::Limits;
use crate::nemesis::Fault;
use crate::topology::Topology;
use crate::worker::{Workload, RENEWED_KINDS};

/// W's bound in the fault-free scenarios of one lock: the median time from a release to the
/// next grant while someone waited. About 1 ms when waiters are woken by the release's
/// message (0.9–1.1 ms in `contention` and `counter`, short and full runs on a loaded 2-core
/// machine); about 270–300 ms when no message reaches them and each waits out its nap.
pub const WAKE_MEDIAN: Duration = Duration::from_millis(50);

/// How long and how hard a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    /// The figures of the docs: each scenario at its own length (minutes for some).
    Full,
    /// CI's: a few seconds each, a fault or a few.
    Short,
}

/// One scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Its name.
    pub name: &'static str,
    /// Where its files go under `--out`: its name, and its topology's where the name is
    /// run on several.
    pub dir: &'static str,
    /// What it does, for `--list` and the docs.
    pub about: &'static str,
    /// The deployment.
    pub topology: Topology,
    /// The workload.
    pub workload: Workload,
    /// The fault.
    pub fault: Fault,
    /// Worker processes.
    pub processes: u32,
    /// Tasks per process.
    pub tasks: u32,
    /// Stop after this many grants in all (0: the duration only).
    pub grants: u64,
    /// How long the workload runs.
    pub duration: Duration,
    /// The watchdog lease.
    pub lease: Duration,
    /// First fault after.
    pub first_after: Duration,
    /// A fault every.
    pub every: Duration,
    /// A pause's length.
    pub pause: Duration,
    /// `WAIT` for this many replicas (0: off).
    pub replica_acks: u32,
    /// Longest sleep within a hold.
    pub hold_max: Duration,
    /// Semaphore permits.
    pub permits: u32,
    /// Whether the server keeps snapshots.
    pub persistent: bool,
    /// What the checkers allow.
    pub limits: Limits,
    /// A limit of Redis, not of distlock: its violations are recorded and explained, and do
    /// not fail the suite.
    pub known_limit: bool,
}

const S: fn(u64) -> Duration = Duration::from_secs;
const MS: fn(u64) -> Duration = Duration::from_millis;

fn base(name: &'static str, about: &'static str, topology: Topology, fault: Fault) -> Scenario {
    Scenario {
        name,
        dir: name,
        about,
        topology,
        workload: Workload::LockSet,
        fault,
        processes: 4,
        tasks: 4,
        grants: 0,
        duration: S(30),
        lease: S(2),
        first_after: S(2),
        every: S(10),
        pause: MS(1500),
        replica_acks: 0,
        hold_max: MS(50),
        permits: 0,
        persistent: false,
        limits: Limits {
            heal_allowance: S(5),
            ..Limits::default()
        },
        known_limit: false,
    }
}

/// Every scenario at `profile`.
pub fn all(profile: Profile) -> Vec<Scenario> {
    let short = profile == Profile::Short;
    let pick = |full: Duration, s: Duration| if short { s } else { full };
    let mut v = Vec::new();

    let mut s = base(
        "contention",
        "4 processes x 8 tasks on one lock, no faults: every grant a fenced read, a 0-50 ms sleep and a fenced write of value + 1",
        Topology::Standalone,
        Fault::None,
    );
    s.tasks = 8;
    s.grants = if short { 300 } else { 10_000 };
    s.duration = S(300);
    s.limits.wake_median = Some(WAKE_MEDIAN);
    v.push(s);

    let mut s = base(
        "counter",
        "4 x 8 tasks increment an unguarded counter (GET, sleep, SET) under the lock, no faults",
        Topology::Standalone,
        Fault::None,
    );
    s.workload = Workload::Counter;
    s.tasks = 8;
    s.hold_max = MS(5);
    s.grants = if short { 500 } else { 5_000 };
    s.duration = S(300);
    s.limits.wake_median = Some(WAKE_MEDIAN);
    v.push(s);

    let mut s = base(
        "pause-holder",
        "SIGSTOP the process holding the lock for 1.5 x its 600 ms lease, then SIGCONT; it keeps writing (as a paused holder would)",
        Topology::Standalone,
        Fault::PauseHolder,
    );
    s.lease = MS(600);
    s.pause = MS(900);
    s.every = MS(1300);
    s.first_after = MS(500);
    // One task per process: with direct hand-off, a second task of the paused process,
    // queued and still live, would be handed the lock when the lease ran out and could not
    // write before the resume either, so the late write would meet no newer token and the
    // run would show no refusal (it did: 0 of 8 in a short run).
    s.tasks = 1;
    s.hold_max = MS(200);
    s.duration = pick(MS(500 + 200 * 1300), S(8));
    s.limits.heal_allowance = S(2);
    v.push(s);

    let mut s = base(
        "restart-snapshot",
        "SIGKILL the server every 2 s and restart it from a snapshot taken at the start (an old RDB)",
        Topology::Standalone,
        Fault::RestartOldSnapshot,
    );
    s.persistent = true;
    s.lease = S(1);
    s.every = S(2);
    s.first_after = S(1);
    s.duration = pick(S(1 + 2 * 51), S(9));
    v.push(s);

    let mut s = base(
        "restart-empty",
        "SIGKILL the server every 2 s and restart it empty",
        Topology::Standalone,
        Fault::RestartEmpty,
    );
    s.lease = S(1);
    s.every = S(2);
    s.first_after = S(1);
    s.duration = pick(S(40), S(7));
    v.push(s);

    let mut s = base(
        "pubsub-kill",
        "CLIENT KILL TYPE pubsub every 200 ms: every wake-up subscription is cut while 32 waiters wait",
        Topology::Standalone,
        Fault::PubsubKill,
    );
    s.tasks = 8;
    s.every = MS(200);
    s.first_after = MS(200);
    s.duration = pick(S(60), S(6));
    // No fault window excuses a waiter: the kills never stop.
    s.limits.heal_allowance = Duration::ZERO;
    v.push(s);

    let mut s = base(
        "server-stall",
        "DEBUG SLEEP and CLIENT PAUSE ALL in turn for 1.5 s (past the 1 s lease) every 4 s",
        Topology::Standalone,
        Fault::ServerStall,
    );
    s.lease = S(1);
    s.every = S(4);
    s.first_after = S(1);
    s.duration = pick(S(40), S(10));
    v.push(s);

    let mut s = base(
        "fair",
        "the fair (FIFO) lock under the lock-set workload while its holder is paused past its lease",
        Topology::Standalone,
        Fault::PauseHolder,
    );
    s.workload = Workload::FairSet;
    s.lease = S(1);
    s.pause = MS(1500);
    s.every = S(4);
    s.first_after = S(1);
    s.duration = pick(S(40), S(9));
    s.limits.fifo = true;
    v.push(s);

    for (topology, dir) in [
        (Topology::Standalone, "watchdog"),
        (Topology::Sentinel, "watchdog-sentinel"),
        (Topology::Cluster, "watchdog-cluster"),
    ] {
        let mut s = base(
            "watchdog",
            "every kind the watchdog renews (plain, fair, read, write, re-entered write, MultiLock, leased permit and job lock with keep-alive), each held for 2-3 x its 600 ms lease in turn, no faults: no lease may be lost, and each kind must have been held that long",
            topology,
            Fault::None,
        );
        s.dir = dir;
        s.workload = Workload::Watchdog;
        s.processes = 2;
        s.tasks = 4;
        s.lease = MS(600);
        // Renewals confirmed by a replica where there are replicas (the client's default).
        s.replica_acks = u32::from(topology != Topology::Standalone);
        s.duration = pick(S(60), S(8));
        s.limits.no_loss = true;
        s.limits.renewed_kinds = RENEWED_KINDS;
        v.push(s);
    }

    let mut s = base(
        "pause-waiter",
        "the fair lock while a process whose 4 tasks wait in its queue is paused for 9 s (past the 5 s waiter liveness) every 13 s: the others are stalled at most until its waiters are skipped",
        Topology::Standalone,
        Fault::PauseWaiter,
    );
    s.workload = Workload::FairSet;
    s.pause = S(9);
    s.every = S(13);
    s.first_after = S(1);
    s.duration = pick(S(1 + 13 * 5), S(11));
    // A paused waiter's place lasts up to the liveness from its last renewal; the others'
    // next attempt (every third of it) skips it.
    let liveness = distlock::DEFAULT_FAIR_LIVENESS;
    s.limits.waiter_stall = Some(liveness + liveness / 3 + MS(500));
    s.limits.fifo = true;
    v.push(s);

    let mut s = base(
        "rwlock",
        "the read-write lock: 3 in 4 grants are read holds, writers run the lock-set workload; the holder is paused past its lease",
        Topology::Standalone,
        Fault::PauseHolder,
    );
    s.workload = Workload::RwLock;
    s.lease = S(1);
    s.pause = MS(1500);
    s.every = S(4);
    s.first_after = S(1);
    s.duration = pick(S(40), S(9));
    v.push(s);

    let mut s = base(
        "semaphore",
        "a semaphore of 3 permits, 16 tasks, while pub/sub connections are killed every 200 ms: holders never exceed the permits, none is lost",
        Topology::Standalone,
        Fault::PubsubKill,
    );
    s.workload = Workload::Semaphore;
    s.permits = 3;
    s.every = MS(200);
    s.duration = pick(S(30), S(6));
    s.limits.shared_capacity = Some(3);
    s.limits.liveness = false;
    v.push(s);

    let mut s = base(
        "leased-semaphore",
        "a leased semaphore of 2 permits handed off to queued waiters, 16 tasks, while pub/sub connections (and so grant messages) are killed every 200 ms: holders never exceed the permits, none is lost",
        Topology::Standalone,
        Fault::PubsubKill,
    );
    s.workload = Workload::LeasedSemaphore;
    s.permits = 2;
    s.lease = S(5);
    s.every = MS(200);
    s.duration = pick(S(30), S(6));
    s.limits.shared_capacity = Some(2);
    s.limits.liveness = false;
    v.push(s);

    let mut s = base(
        "job",
        "a job lock every 500 ms on 16 tasks, runs that overrun their at-most-for, outlast the next tick, or are kept by at-least-for, with DEBUG SLEEP / CLIENT PAUSE stalls: at most one run per tick, none while another holds the lock",
        Topology::Standalone,
        Fault::ServerStall,
    );
    s.workload = Workload::Job;
    s.pause = MS(700);
    s.every = S(3);
    s.duration = pick(S(40), S(8));
    s.limits.liveness = false;
    v.push(s);

    let mut s = base(
        "client-partition",
        "half the workers reach the server through a proxy that blackholes them for 2 x the 1 s lease (or delays them 300 ms each way) every 4 s, then cuts their connections; they still reach the resource and keep writing",
        Topology::Standalone,
        Fault::PartitionClients,
    );
    s.lease = S(1);
    s.every = S(4);
    s.first_after = S(1);
    // Holds longer than the lease: the watchdog carries them, except through the partition.
    s.hold_max = MS(1500);
    s.pause = S(2);
    s.duration = pick(S(40), S(13));
    v.push(s);

    let mut s = base(
        "sentinel-kill",
        "SIGKILL the Sentinel master every 10 s, WAIT 1 on: grants must survive the failover",
        Topology::Sentinel,
        Fault::SentinelKill,
    );
    s.replica_acks = 1;
    s.duration = pick(S(120), S(12));
    v.push(s);

    let mut s = base(
        "sentinel-kill-nowait",
        "as sentinel-kill with WAIT off: a grant the master had not yet replicated can be granted again by the promoted replica",
        Topology::Sentinel,
        Fault::SentinelKill,
    );
    s.duration = pick(S(60), S(12));
    s.known_limit = true;
    v.push(s);

    let mut s = base(
        "sentinel-failover",
        "SENTINEL FAILOVER every 10 s, WAIT 1 on",
        Topology::Sentinel,
        Fault::SentinelFailover,
    );
    s.replica_acks = 1;
    s.duration = pick(S(60), S(12));
    v.push(s);

    let mut s = base(
        "sentinel-partition",
        "cut the Sentinel master off from its replicas and sentinels for 6 s every 20 s while the clients still reach it (a split brain), WAIT 1 on",
        Topology::Sentinel,
        Fault::SentinelPartition,
    );
    s.replica_acks = 1;
    s.pause = S(6);
    s.every = S(20);
    s.duration = pick(S(2 + 20 * 6), S(14));
    v.push(s);

    let mut s = base(
        "sentinel-partition-nowait",
        "as sentinel-partition with WAIT off: the old master grants to its clients while the sentinels promote a replica that grants to the others",
        Topology::Sentinel,
        Fault::SentinelPartition,
    );
    s.pause = S(6);
    s.every = S(20);
    s.duration = pick(S(2 + 20 * 3), S(14));
    s.known_limit = true;
    v.push(s);

    let mut s = base(
        "replica-pause",
        "SIGSTOP both replicas for 1.5 s every 4 s with WAIT 1 on: grants are refused or delayed, never made unreplicated",
        Topology::Sentinel,
        Fault::ReplicaPause,
    );
    s.replica_acks = 1;
    s.every = S(4);
    s.first_after = S(1);
    s.duration = pick(S(40), S(10));
    v.push(s);

    let mut s = base(
        "cluster-kill",
        "SIGKILL the Cluster master of the lock's slot every 10 s (its replica takes over); waiters resubscribe",
        Topology::Cluster,
        Fault::ClusterKill,
    );
    s.duration = pick(S(120), S(12));
    v.push(s);

    let mut s = base(
        "cluster-failover",
        "CLUSTER FAILOVER of the lock's slot every 5 s",
        Topology::Cluster,
        Fault::ClusterFailover,
    );
    s.every = S(5);
    s.duration = pick(S(40), S(10));
    v.push(s);

    let mut s = base(
        "slot-migration",
        "move the lock's slot to another master every 4 s",
        Topology::Cluster,
        Fault::SlotMigration,
    );
    s.every = S(4);
    s.duration = pick(S(40), S(10));
    v.push(s);

    let mut s = base(
        "redlock",
        "RedLock over 5 masters, an unguarded counter: every subset of 1 or 2 masters paused, then killed and restarted after the TTL",
        Topology::Redlock,
        Fault::RedlockNodes,
    );
    s.workload = Workload::RedLock;
    s.lease = S(1);
    s.pause = MS(1200);
    s.every = MS(1700);
    s.first_after = S(1);
    s.hold_max = MS(5);
    s.duration = pick(S(1 + 30 * 17 / 10 + 2), S(12));
    v.push(s);
    v
}
