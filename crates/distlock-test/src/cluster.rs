//! A Redis Cluster on loopback, for cluster tests: three masters, each with one replica
//! ([`ClusterSet`]).
//!
//! Every node is a [`RedisServer`] started with `--cluster-enabled yes`, its own
//! `nodes.conf` in its private [directory](RedisServer::dir), a node timeout of
//! [`NODE_TIMEOUT`] (1 s), no AOF, and an explicit cluster bus port (`--cluster-port`) picked
//! with [`free_port`]. The default bus port, the data port + 10000, does not work for the
//! free ports [`free_port`] hands out: they lie in the kernel's ephemeral range (32768–60999
//! on Linux), so the default bus port may be above 65535 (Redis refuses to start) or on a
//! port another process holds. The set picks a bus port that is free and is neither its own
//! data port nor any other node's port, and starts the node again on new ports when either
//! was taken in the meantime.
//!
//! The set builds the cluster itself, with no `redis-cli`: `CLUSTER ADDSLOTSRANGE` on the
//! masters (0–5460, 5461–10922, 10923–16383), `CLUSTER MEET` from every node to the first,
//! `CLUSTER REPLICATE` on each replica once every node knows the six, then it waits until
//! every node says `cluster_state:ok` with all 16384 slots served and every replica's
//! replication link is up. This takes about 2–3 s, mostly the 2 s a master waits after its
//! start before it declares the cluster ok.
//!
//! A killed master is replaced by its replica after the node timeout plus a failure report
//! round and the replica's election delay (0.5–1 s), usually 2–3 s in all.
//!
//! Needs redis-server 7.0 or newer (`cluster-port`, `CLUSTER ADDSLOTSRANGE`). The nodes have
//! no password and no TLS.

use std::fmt::Write as _;
use std::io;
use std::time::{Duration, Instant};

use crate::testing::POLL_INTERVAL;
use crate::{free_port, RedisServer};

/// What to tell a person whose `redis-server` cannot run a cluster node.
pub const CLUSTER_INSTALL_HINT: &str = "a Redis Cluster node could not be started: the \
harness needs redis-server 7.0 or newer with cluster support (for `--cluster-port` and \
`CLUSTER ADDSLOTSRANGE`); install it with `sudo apt-get install redis-server` on a recent \
Debian/Ubuntu, or point DISTLOCK_REDIS_SERVER at such a redis-server (or valkey-server) binary";

/// The number of hash slots of a Redis Cluster.
pub const SLOT_COUNT: u16 = 16384;

/// The slot ranges (inclusive) of the three masters at start, in start order.
pub const MASTER_SLOTS: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

/// `cluster-node-timeout`: how long a node may fail to answer before the others suspect it
/// (and, once a majority of masters agree, its replica takes over).
pub const NODE_TIMEOUT: Duration = Duration::from_millis(1000);

/// How long [`ClusterSet::start`] waits for the cluster to form and be ok.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long [`ClusterSet::failover_replica`] and [`ClusterSet::migrate_slot`] wait for every
/// running node to agree on the new slot owner.
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);

/// The number of keys [`ClusterSet::migrate_slot`] moves with one `MIGRATE`.
pub const MIGRATE_BATCH: usize = 100;

/// The `timeout` argument of every `MIGRATE` (how long the source waits for the target).
const MIGRATE_TIMEOUT: Duration = Duration::from_secs(5);

/// Connect and read timeout of every query the set sends: a paused or killed node must not
/// hang a poll.
const QUERY_TIMEOUT: Duration = Duration::from_millis(1000);

/// How often [`ClusterSet::start`] checks whether the cluster is ready.
const READY_POLL: Duration = Duration::from_millis(50);

/// How many times a node is started on fresh ports before giving up.
const START_ATTEMPTS: usize = 5;

/// Three masters and three replicas (one per master) forming a Redis Cluster on free ports
/// of 127.0.0.1, all killed (SIGKILL) when the set drops.
///
/// Which node is a master changes with failovers, and which master serves a slot changes
/// with [`migrate_slot`](Self::migrate_slot) too: ask [`node_for_key`](Self::node_for_key),
/// [`masters`](Self::masters) or [`replica_of`](Self::replica_of), not
/// [`nodes`](Self::nodes)`()[0]`.
#[derive(Debug)]
pub struct ClusterSet {
    /// The three first masters, then their replicas (of the first, second, third master),
    /// in start order.
    nodes: Vec<RedisServer>,
    /// Each node's cluster bus port, in the order of `nodes`.
    bus_ports: Vec<u16>,
    /// The slot ranges a master served when [`kill_master_of_key`](Self::kill_master_of_key)
    /// killed it, by port: what [`wait_for_failover`](Self::wait_for_failover) waits for.
    killed_slots: Vec<(u16, Vec<(u16, u16)>)>,
}

impl ClusterSet {
    /// Start six nodes, build the cluster and wait until it is ok.
    ///
    /// Starts three masters and three replicas, gives the masters the slots of
    /// [`MASTER_SLOTS`] (`CLUSTER ADDSLOTSRANGE`), introduces every node to the first
    /// (`CLUSTER MEET`), waits until every node knows all six, makes the fourth, fifth and
    /// sixth node replicas of the first, second and third (`CLUSTER REPLICATE`), and waits
    /// until every node says `cluster_state:ok` and `cluster_slots_ok:16384`, sees each
    /// replica attached to its master, and each replica's `ROLE` is `slave` with
    /// `master_link_status:up`. Takes about 2–3 s.
    ///
    /// # Panics
    /// Panics with [`INSTALL_HINT`](crate::INSTALL_HINT) when `redis-server` is missing; with
    /// [`CLUSTER_INSTALL_HINT`] when a node does not start (an old or cluster-less server);
    /// and, with what it saw last and every node's log, when a cluster command fails or the
    /// cluster is not ready within [`READY_TIMEOUT`] (30 s).
    pub fn start() -> ClusterSet {
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut set = ClusterSet {
            nodes: Vec::new(),
            bus_ports: Vec::new(),
            killed_slots: Vec::new(),
        };
        for _ in 0..6 {
            let (node, bus_port) = set.start_node();
            set.nodes.push(node);
            set.bus_ports.push(bus_port);
        }
        let ids: Vec<String> = set
            .nodes
            .iter()
            .map(|n| set.must(n, &["CLUSTER", "MYID"]))
            .collect();
        for (master, (first, last)) in set.nodes.iter().zip(MASTER_SLOTS) {
            let args = crate::testing::add_slots_command(first, last);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            set.must::<()>(master, &args);
        }
        let (first_port, first_bus) = (set.nodes[0].port().to_string(), set.bus_ports[0]);
        let first_bus = first_bus.to_string();
        for node in &set.nodes[1..] {
            // Redis 6.2's MEET takes no bus port: it is the data port + 10000 there.
            let mut meet = vec!["CLUSTER", "MEET", "127.0.0.1", &first_port];
            if crate::server_major_version() >= 7 {
                meet.push(&first_bus);
            }
            set.must::<()>(node, &meet);
        }
        set.wait_ready(deadline, "every node to know the 6 nodes", |set| {
            set.all_known(&ids)
        });
        for (replica, master_id) in set.nodes[3..].iter().zip(&ids) {
            set.must::<()>(replica, &["CLUSTER", "REPLICATE", master_id]);
        }
        set.wait_ready(
            deadline,
            "cluster_state:ok and 16384 slots ok on every node, and each replica linked to \
             its master",
            |set| set.formed(&ids),
        );
        set
    }

    /// Start one node on a free port with a free cluster bus port that no node of the set
    /// uses; (node, bus port).
    fn start_node(&self) -> (RedisServer, u16) {
        let taken: Vec<u16> = self
            .nodes
            .iter()
            .map(RedisServer::port)
            .chain(self.bus_ports.iter().copied())
            .collect();
        let mut last_err = None;
        let modern = crate::server_major_version() >= 7;
        for _ in 0..START_ATTEMPTS {
            let bus_port = loop {
                let port = free_port();
                if !taken.contains(&port) {
                    break port;
                }
            };
            let mut options = RedisServer::options()
                .arg("--cluster-enabled")
                .arg("yes")
                .arg("--cluster-config-file")
                .arg("nodes.conf")
                .arg("--cluster-node-timeout")
                .arg(NODE_TIMEOUT.as_millis().to_string())
                .arg("--appendonly")
                .arg("no")
                // Replicas sync in milliseconds instead of after the default 5 s delay.
                .arg("--repl-diskless-sync")
                .arg("yes")
                .arg("--repl-diskless-sync-delay")
                .arg("0");
            options = if modern {
                options.arg("--cluster-port").arg(bus_port.to_string())
            } else {
                // Before 7.0 the bus port is the data port + 10000, chosen free with it.
                options.bus_above()
            };
            // When the data port or the bus port was taken between `free_port` and the
            // bind, the server exits and `start_with` tries another data port; when the bus
            // port itself is gone every such try fails, and this loop picks another one.
            match RedisServer::start_with(options) {
                Ok(node) if !modern => {
                    let bus = node.port() + 10_000;
                    if !taken.contains(&bus) {
                        return (node, bus);
                    }
                }
                Ok(node) if node.port() != bus_port => return (node, bus_port),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => panic!("{e}"),
                Err(e) => last_err = Some(e),
            }
        }
        let err = last_err.map_or_else(|| "no error".to_owned(), |e| e.to_string());
        panic!(
            "cluster node did not start in {START_ATTEMPTS} tries: {err}\n{CLUSTER_INSTALL_HINT}\n{}",
            self.logs()
        )
    }

    /// Poll `ready` every [`READY_POLL`] until it returns `Ok`; it returns `Err` with what it
    /// saw. Panics with that and every log at `deadline`.
    fn wait_ready(
        &self,
        deadline: Instant,
        what: &str,
        mut ready: impl FnMut(&Self) -> Result<(), String>,
    ) {
        crate::poll_until(
            READY_POLL,
            deadline,
            || ready(self),
            |seen| {
                format!(
                    "cluster set not ready within {READY_TIMEOUT:?}: waited for {what}; last \
                 seen: {seen}\n{}",
                    self.logs()
                )
            },
        )
    }

    /// `Ok` when every node's `CLUSTER NODES` lists exactly the nodes `ids`, none of them
    /// still in handshake.
    fn all_known(&self, ids: &[String]) -> Result<(), String> {
        for node in &self.nodes {
            let text: String = query(node, &["CLUSTER", "NODES"])?;
            let entries = parse_nodes(&text);
            let complete = entries.len() == ids.len()
                && ids.iter().all(|id| entries.iter().any(|e| &e.id == id))
                && entries
                    .iter()
                    .all(|e| !e.has_flag("handshake") && !e.has_flag("noaddr"));
            if !complete {
                return Err(format!("port {}: CLUSTER NODES:\n{text}", node.port()));
            }
        }
        Ok(())
    }

    /// `Ok` when the cluster is formed: every node is ok with all slots served and sees
    /// each replica attached to its master; each master's `ROLE` is `master`, each
    /// replica's is `slave` of its master, with the link up.
    fn formed(&self, ids: &[String]) -> Result<(), String> {
        for (i, node) in self.nodes.iter().enumerate() {
            let port = node.port();
            cluster_ok(node)?;
            let text: String = query(node, &["CLUSTER", "NODES"])?;
            let entries = parse_nodes(&text);
            for (replica_id, master_id) in ids[3..].iter().zip(ids) {
                let attached = entries.iter().any(|e| {
                    &e.id == replica_id
                        && e.has_flag("slave")
                        && e.master.as_deref() == Some(master_id.as_str())
                });
                if !attached {
                    return Err(format!(
                        "port {port} does not see {replica_id} as a replica of {master_id}: \
                         CLUSTER NODES:\n{text}"
                    ));
                }
            }
            let role = role_of(node)?;
            if i < 3 {
                if role != Role::Master {
                    return Err(format!("port {port}: ROLE {role:?}, expected master"));
                }
            } else {
                let master_port = self.nodes[i - 3].port();
                if role != (Role::Replica { master_port }) {
                    return Err(format!(
                        "port {port}: ROLE {role:?}, expected a replica of {master_port}"
                    ));
                }
                link_up(node)?;
            }
        }
        Ok(())
    }

    /// `redis-cluster://127.0.0.1:<p1>,127.0.0.1:<p2>,127.0.0.1:<p3>`: the three masters the
    /// set started with, as seed nodes in lettuce's URL form (no password). After a failover
    /// a seed may be a replica or dead; cluster clients find the topology from any seed
    /// that answers.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self.nodes[..3]
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        format!("redis-cluster://{}", hosts.join(","))
    }

    /// All six nodes in start order: the three first masters, then the replicas of the
    /// first, second and third. Roles change with failovers; [`masters`](Self::masters) and
    /// [`replica_of`](Self::replica_of) say what they are now.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The running nodes whose `ROLE` says `master` now, in start order. A killed or paused
    /// node (no answer within 1 s) is left out. A killed master that is
    /// [restarted](RedisServer::restart) after its replica took over is listed until the
    /// cluster turns it into a replica of its successor (it serves no slots meanwhile).
    pub fn masters(&self) -> Vec<&RedisServer> {
        self.nodes
            .iter()
            .filter(|n| role_of(n) == Ok(Role::Master))
            .collect()
    }

    /// The node on `port`, mutably (to [kill](RedisServer::kill),
    /// [pause](RedisServer::pause) or [restart](RedisServer::restart) it; a restarted node
    /// keeps its ports and its `nodes.conf`, and rejoins the cluster).
    pub fn node_mut(&mut self, port: u16) -> Option<&mut RedisServer> {
        self.nodes.iter_mut().find(|n| n.port() == port)
    }

    /// The cluster bus port (`--cluster-port`) of the node on `port`.
    pub fn bus_port(&self, port: u16) -> Option<u16> {
        let i = self.nodes.iter().position(|n| n.port() == port)?;
        Some(self.bus_ports[i])
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT` on the first node that answers).
    ///
    /// # Panics
    /// Panics, with every node's log, when no node answers.
    pub fn key_slot(&self, key: &str) -> u16 {
        let mut errors = Vec::new();
        for node in &self.nodes {
            match query::<u16>(node, &["CLUSTER", "KEYSLOT", key]) {
                Ok(slot) => return slot,
                Err(e) => errors.push(e),
            }
        }
        panic!(
            "no node answered CLUSTER KEYSLOT {key:?}: {errors:?}\n{}",
            self.logs()
        )
    }

    /// The master serving `slot` now, as the first node that answers `CLUSTER SLOTS` sees
    /// it. During a failover or a slot migration the nodes may disagree for a moment;
    /// [`wait_for_failover`](Self::wait_for_failover),
    /// [`failover_replica`](Self::failover_replica) and
    /// [`migrate_slot`](Self::migrate_slot) return only once all running nodes agree.
    ///
    /// # Panics
    /// Panics, with every node's log, when `slot` is 16384 or more, no node answers, the
    /// slot is unassigned, or its owner is no node of the set.
    pub fn node_for_slot(&self, slot: u16) -> &RedisServer {
        assert!(slot < SLOT_COUNT, "slot {slot} is not below {SLOT_COUNT}");
        let owner = self.slot_table()[usize::from(slot)];
        if owner == 0 {
            panic!("slot {slot} is served by no master\n{}", self.logs());
        }
        self.node(owner)
    }

    /// The master serving `key`'s slot now: [`key_slot`](Self::key_slot), then
    /// [`node_for_slot`](Self::node_for_slot). Commands on `key` sent anywhere else get a
    /// `MOVED` error.
    ///
    /// # Panics
    /// As [`key_slot`](Self::key_slot) and [`node_for_slot`](Self::node_for_slot).
    pub fn node_for_key(&self, key: &str) -> &RedisServer {
        self.node_for_slot(self.key_slot(key))
    }

    /// The first running node (in start order) whose `ROLE` says it replicates the master
    /// on `master_port` — the replica's own view, which holds even while that master is
    /// down.
    pub fn replica_of(&self, master_port: u16) -> Option<&RedisServer> {
        self.nodes
            .iter()
            .find(|n| role_of(n) == Ok(Role::Replica { master_port }))
    }

    /// Kill (SIGKILL, as a crash would) the master serving `key`'s slot and return its port:
    /// pass it to [`wait_for_failover`](Self::wait_for_failover). Remembers the slots that
    /// master served, for that wait.
    ///
    /// # Panics
    /// As [`node_for_key`](Self::node_for_key).
    pub fn kill_master_of_key(&mut self, key: &str) -> u16 {
        let port = self.node_for_key(key).port();
        let slots = ranges_of(&self.slot_table(), port);
        self.killed_slots.retain(|(p, _)| *p != port);
        self.killed_slots.push((port, slots));
        self.node_mut(port).expect("the owner is a node").kill();
        port
    }

    /// Wait until the slots the master on `old_port` served are all served by one other
    /// node, as every running node sees it, that node's `ROLE` says `master`, and every
    /// running node says `cluster_state:ok` with 16384 slots ok; return the new master's
    /// port. After a crash this usually takes 2–3 s (see the [module](self) docs). A
    /// [paused](RedisServer::pause) node never answers, so it never agrees: the wait then
    /// runs into `limit`.
    ///
    /// The slots are those [`kill_master_of_key`](Self::kill_master_of_key) remembered;
    /// for a master killed another way (through [`node_mut`](Self::node_mut)) they are read
    /// from the nodes' views, so call this before the failover has ended.
    ///
    /// # Panics
    /// Panics, with what it saw last and every node's log, when `old_port` served no slots,
    /// or when the failover has not happened within `limit`.
    pub fn wait_for_failover(&self, old_port: u16, limit: Duration) -> u16 {
        let deadline = Instant::now() + limit;
        let slots = match self.killed_slots.iter().find(|(p, _)| *p == old_port) {
            Some((_, slots)) => slots.clone(),
            None => ranges_of(&self.slot_table(), old_port),
        };
        if slots.is_empty() {
            panic!(
                "the node on port {old_port} serves no slots: nothing to fail over\n{}",
                self.logs()
            );
        }
        crate::poll_until(
            POLL_INTERVAL,
            deadline,
            || self.taken_over(old_port, &slots),
            |seen| {
                format!(
                    "no failover of slots {slots:?} away from port {old_port} within \
                     {limit:?}; last seen: {seen}\n{}",
                    self.logs()
                )
            },
        )
    }

    /// `Ok(new master)` when the running nodes agree that one node other than `old_port`,
    /// whose `ROLE` is `master`, serves all of `slots`, and the cluster is ok.
    fn taken_over(&self, old_port: u16, slots: &[(u16, u16)]) -> Result<u16, String> {
        let table = self.agreed_table()?;
        let new = table[usize::from(slots[0].0)];
        let all_new = slots
            .iter()
            .all(|&(a, b)| (a..=b).all(|s| table[usize::from(s)] == new));
        if new == old_port || new == 0 || !all_new {
            return Err(format!(
                "slots {slots:?} are served by {:?}",
                ranges_by_owner(&table, slots)
            ));
        }
        match role_of(self.node(new))? {
            Role::Master => Ok(new),
            role => Err(format!("the new owner {new} has ROLE {role:?}")),
        }
    }

    /// Make the replica on `replica_port` take over its master's slots with a manual
    /// failover (`CLUSTER FAILOVER` on the replica), and wait until every running node sees
    /// it serving them, its `ROLE` is `master`, and the old master's `ROLE` is `slave` of it
    /// with the link up. Usually well under 1 s.
    ///
    /// # Panics
    /// Panics, with what it saw last and every node's log, when `replica_port` is not a
    /// node of the set or not a replica, when its master serves no slots or is not running,
    /// when `CLUSTER FAILOVER` fails, or when the roles have not swapped within
    /// [`SETTLE_TIMEOUT`] (10 s).
    pub fn failover_replica(&self, replica_port: u16) {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        let replica = self.node(replica_port);
        let master_port = match role_of(replica) {
            Ok(Role::Replica { master_port }) => master_port,
            other => panic!(
                "the node on port {replica_port} is no replica (ROLE {other:?})\n{}",
                self.logs()
            ),
        };
        let master = self.node(master_port);
        let slots = ranges_of(&self.slot_table(), master_port);
        if slots.is_empty() || master.pid().is_none() {
            panic!(
                "the master {master_port} of {replica_port} serves no slots or is not running \
                 (a manual failover needs both)\n{}",
                self.logs()
            );
        }
        self.must::<()>(replica, &["CLUSTER", "FAILOVER"]);
        self.wait_settled(
            deadline,
            &format!("{replica_port} to take over from {master_port}"),
            |set| {
                set.taken_over(master_port, &slots).and_then(|new| {
                    if new != replica_port {
                        return Err(format!("{new} took over, not {replica_port}"));
                    }
                    match role_of(master)? {
                        Role::Replica { master_port: p } if p == replica_port => link_up(master),
                        role => Err(format!("the old master {master_port} has ROLE {role:?}")),
                    }
                })
            },
        );
    }

    /// Move `slot`, with its keys, from the master serving it to the master on `to_port`, as
    /// `redis-cli --cluster reshard` does: `CLUSTER SETSLOT <slot> IMPORTING` on the target,
    /// `MIGRATING` on the source, `MIGRATE` of the keys in batches of [`MIGRATE_BATCH`]
    /// (listed with `CLUSTER GETKEYSINSLOT`), then `CLUSTER SETSLOT <slot> NODE` on the
    /// target, the source and the other running masters; and wait until every running node
    /// sees the target serving the slot and the cluster is ok. Does nothing when the target
    /// already serves the slot.
    ///
    /// While the keys move, the source answers `ASK` for keys of the slot it no longer
    /// holds. Keys written to the source during the move are moved too, as long as they
    /// arrive before its last batch.
    ///
    /// # Panics
    /// Panics, with what it saw last and every node's log, when `slot` is 16384 or more,
    /// `to_port` is not a master of the set, a command fails (a key that exists on both
    /// sides makes `MIGRATE` fail with `BUSYKEY`), or the nodes do not agree within
    /// [`SETTLE_TIMEOUT`] (10 s).
    pub fn migrate_slot(&self, slot: u16, to_port: u16) {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        let source = self.node_for_slot(slot);
        if source.port() == to_port {
            return;
        }
        let target = self.node(to_port);
        if role_of(target) != Ok(Role::Master) {
            panic!(
                "migrate_slot: the node on port {to_port} is not a master\n{}",
                self.logs()
            );
        }
        let source_id: String = self.must(source, &["CLUSTER", "MYID"]);
        let target_id: String = self.must(target, &["CLUSTER", "MYID"]);
        let slot_arg = slot.to_string();
        self.must::<()>(
            target,
            &["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", &source_id],
        );
        self.must::<()>(
            source,
            &["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", &target_id],
        );
        let batch = MIGRATE_BATCH.to_string();
        loop {
            let keys: Vec<Vec<u8>> =
                self.must(source, &["CLUSTER", "GETKEYSINSLOT", &slot_arg, &batch]);
            if keys.is_empty() {
                break;
            }
            let mut migrate = redis::cmd("MIGRATE");
            migrate
                .arg("127.0.0.1")
                .arg(to_port)
                .arg("")
                .arg(0)
                .arg(MIGRATE_TIMEOUT.as_millis() as u64)
                .arg("KEYS");
            for key in &keys {
                migrate.arg(key.as_slice());
            }
            let what = format!("MIGRATE of {} keys of slot {slot} to {to_port}", keys.len());
            // The source waits up to MIGRATE_TIMEOUT for the target: so must this read.
            crate::query_with_timeout::<redis::Value>(
                source,
                &what,
                &migrate,
                QUERY_TIMEOUT + MIGRATE_TIMEOUT,
            )
            .unwrap_or_else(|e| panic!("{e}\n{}", self.logs()));
        }
        let assign = ["CLUSTER", "SETSLOT", &slot_arg, "NODE", &target_id];
        self.must::<()>(target, &assign);
        self.must::<()>(source, &assign);
        for other in self.masters() {
            if other.port() != to_port && other.port() != source.port() {
                self.must::<()>(other, &assign);
            }
        }
        self.wait_settled(
            deadline,
            &format!("every node to see slot {slot} on {to_port}"),
            |set| {
                let table = set.agreed_table()?;
                match table[usize::from(slot)] {
                    owner if owner == to_port => Ok(()),
                    owner => Err(format!("slot {slot} is on {owner}")),
                }
            },
        );
    }

    /// Poll `settled` every [`POLL_INTERVAL`] until it returns `Ok`; it returns `Err` with
    /// what it saw. Panics with that and every log at `deadline`.
    fn wait_settled<T>(
        &self,
        deadline: Instant,
        what: &str,
        mut settled: impl FnMut(&Self) -> Result<T, String>,
    ) -> T {
        crate::poll_until(
            POLL_INTERVAL,
            deadline,
            || settled(self),
            |seen| {
                format!(
                    "cluster did not settle within {SETTLE_TIMEOUT:?}: waited for {what}; last \
                 seen: {seen}\n{}",
                    self.logs()
                )
            },
        )
    }

    /// The node on `port`.
    ///
    /// # Panics
    /// Panics, with every node's log, when no node of the set has that port.
    fn node(&self, port: u16) -> &RedisServer {
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("port {port} is no node of the cluster\n{}", self.logs()))
    }

    /// Run a command that must succeed; panics with the error and every node's log.
    fn must<T: redis::FromRedisValue>(&self, node: &RedisServer, args: &[&str]) -> T {
        query(node, args).unwrap_or_else(|e| panic!("{e}\n{}", self.logs()))
    }

    /// The slot → master port table (0: unassigned) of the first running node that answers
    /// `CLUSTER SLOTS`.
    ///
    /// # Panics
    /// Panics, with every node's log, when no node answers.
    fn slot_table(&self) -> Vec<u16> {
        let mut errors = Vec::new();
        for node in &self.nodes {
            match query(node, &["CLUSTER", "SLOTS"]) {
                Ok(reply) => match slot_table(&reply) {
                    Ok(table) => return table,
                    Err(e) => errors.push(format!("port {}: {e}", node.port())),
                },
                Err(e) => errors.push(e),
            }
        }
        panic!(
            "no node answered CLUSTER SLOTS: {errors:?}\n{}",
            self.logs()
        )
    }

    /// The slot table every running node agrees on, when each also says `cluster_state:ok`
    /// with 16384 slots ok; otherwise what differs.
    fn agreed_table(&self) -> Result<Vec<u16>, String> {
        let mut agreed: Option<(u16, Vec<u16>)> = None;
        for node in self.nodes.iter().filter(|n| n.pid().is_some()) {
            cluster_ok(node)?;
            let table = slot_table(&query(node, &["CLUSTER", "SLOTS"])?)?;
            match &agreed {
                None => agreed = Some((node.port(), table)),
                Some((first, seen)) if *seen != table => {
                    return Err(format!(
                        "ports {first} and {} disagree on the slots",
                        node.port()
                    ));
                }
                Some(_) => {}
            }
        }
        agreed
            .map(|(_, table)| table)
            .ok_or_else(|| "no node is running".to_owned())
    }

    /// Every node's log, each under a heading with its role at start and its ports: for
    /// failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let what = if i < 3 {
                format!("master {}", i + 1)
            } else {
                format!("replica of master {}", i - 2)
            };
            let _ = writeln!(
                out,
                "--- {what} on port {} (bus {}) ---",
                node.port(),
                self.bus_ports[i]
            );
            out.push_str(&node.log());
        }
        out
    }
}

/// A node's `ROLE`, reduced to what the set needs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    Master,
    Replica { master_port: u16 },
    Other(String),
}

/// `server`'s `ROLE`, or what went wrong.
fn role_of(server: &RedisServer) -> Result<Role, String> {
    let reply: Vec<redis::Value> = query(server, &["ROLE"])?;
    let text = |v: &redis::Value| redis::from_redis_value_ref::<String>(v).ok();
    match reply.first().and_then(text).as_deref() {
        Some("master") => Ok(Role::Master),
        Some("slave") => reply
            .get(2)
            .and_then(|v| redis::from_redis_value_ref::<u16>(v).ok())
            .map(|master_port| Role::Replica { master_port })
            .ok_or_else(|| format!("port {}: odd ROLE reply {reply:?}", server.port())),
        Some(other) => Ok(Role::Other(other.to_owned())),
        None => Err(format!("port {}: odd ROLE reply {reply:?}", server.port())),
    }
}

/// `Ok` when `node`'s `CLUSTER INFO` says `cluster_state:ok` and `cluster_slots_ok:16384`.
fn cluster_ok(node: &RedisServer) -> Result<(), String> {
    let info: String = query(node, &["CLUSTER", "INFO"])?;
    let slots_ok = SLOT_COUNT.to_string();
    if info_field(&info, "cluster_state") == Some("ok")
        && info_field(&info, "cluster_slots_ok") == Some(slots_ok.as_str())
    {
        Ok(())
    } else {
        Err(format!("port {}: CLUSTER INFO:\n{info}", node.port()))
    }
}

/// `Ok` when `node`'s `INFO replication` says `master_link_status:up`.
fn link_up(node: &RedisServer) -> Result<(), String> {
    let info: String = query(node, &["INFO", "replication"])?;
    if info_field(&info, "master_link_status") == Some("up") {
        Ok(())
    } else {
        Err(format!("port {}: INFO replication:\n{info}", node.port()))
    }
}

/// The value of `field` in an `INFO`-style `field:value` text.
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k == field).then(|| v.trim())
    })
}

/// One line of `CLUSTER NODES`, reduced to what the set needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NodeEntry {
    id: String,
    port: u16,
    flags: Vec<String>,
    /// The master's id, for a replica.
    master: Option<String>,
}

impl NodeEntry {
    fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
}

/// The lines of a `CLUSTER NODES` reply (`<id> <ip:port@bus[,host]> <flags> <master|-> …`);
/// malformed lines are skipped.
fn parse_nodes(text: &str) -> Vec<NodeEntry> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let id = fields.next()?.to_owned();
            let addr = fields.next()?;
            let port = addr.split('@').next()?.rsplit(':').next()?.parse().ok()?;
            let flags = fields.next()?.split(',').map(str::to_owned).collect();
            let master = fields.next().filter(|m| *m != "-").map(str::to_owned);
            Some(NodeEntry {
                id,
                port,
                flags,
                master,
            })
        })
        .collect()
}

/// A `CLUSTER SLOTS` reply (`[[first, last, [ip, port, id, …], replicas…], …]`) as a
/// table of [`SLOT_COUNT`] master ports, 0 for an unassigned slot.
fn slot_table(reply: &redis::Value) -> Result<Vec<u16>, String> {
    let odd = || format!("odd CLUSTER SLOTS reply: {reply:?}");
    let redis::Value::Array(ranges) = reply else {
        return Err(odd());
    };
    let mut table = vec![0u16; usize::from(SLOT_COUNT)];
    for range in ranges {
        let redis::Value::Array(parts) = range else {
            return Err(odd());
        };
        let int =
            |v: Option<&redis::Value>| v.and_then(|v| redis::from_redis_value_ref::<u16>(v).ok());
        let (Some(first), Some(last)) = (int(parts.first()), int(parts.get(1))) else {
            return Err(odd());
        };
        let port = match parts.get(2) {
            Some(redis::Value::Array(master)) => int(master.get(1)),
            _ => None,
        };
        let Some(port) = port.filter(|_| first <= last && last < SLOT_COUNT) else {
            return Err(odd());
        };
        for slot in first..=last {
            table[usize::from(slot)] = port;
        }
    }
    Ok(table)
}

/// The inclusive slot ranges `port` serves in `table`.
fn ranges_of(table: &[u16], port: u16) -> Vec<(u16, u16)> {
    let mut ranges: Vec<(u16, u16)> = Vec::new();
    for (slot, _) in (0u16..).zip(table).filter(|(_, owner)| **owner == port) {
        match ranges.last_mut() {
            Some((_, last)) if *last + 1 == slot => *last = slot,
            _ => ranges.push((slot, slot)),
        }
    }
    ranges
}

/// Who serves the slots of `ranges` in `table`: (owner port, how many slots), for failure
/// messages.
fn ranges_by_owner(table: &[u16], ranges: &[(u16, u16)]) -> Vec<(u16, usize)> {
    let mut owners: Vec<(u16, usize)> = Vec::new();
    for &(a, b) in ranges {
        for slot in a..=b {
            let owner = table[usize::from(slot)];
            match owners.iter_mut().find(|(p, _)| *p == owner) {
                Some((_, n)) => *n += 1,
                None => owners.push((owner, 1)),
            }
        }
    }
    owners
}

/// Run one command on `server` with [`QUERY_TIMEOUT`] for connecting and reading; any
/// failure is returned as text.
fn query<T: redis::FromRedisValue>(server: &RedisServer, args: &[&str]) -> Result<T, String> {
    crate::query_with_timeout(
        server,
        &format!("{args:?}"),
        &crate::command(args),
        QUERY_TIMEOUT,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn parse_nodes_reads_ids_ports_flags_and_masters() {
        let text = "\
a1 127.0.0.1:40001@50001 myself,master - 0 0 1 connected 0-5460
b2 127.0.0.1:40002@50002,host slave a1 0 1700000000000 1 connected
c3 127.0.0.1:40003@50003 handshake - 0 0 0 disconnected
garbage
";
        let entries = parse_nodes(text);
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].id, "a1");
        assert_eq!(entries[0].port, 40001);
        assert!(entries[0].has_flag("master") && entries[0].has_flag("myself"));
        assert_eq!(entries[0].master, None);
        assert_eq!(entries[1].port, 40002);
        assert_eq!(entries[1].master.as_deref(), Some("a1"));
        assert!(entries[2].has_flag("handshake"));
    }

    #[test]
    fn slot_table_maps_ranges_to_master_ports() {
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(2),
                Value::Array(vec![
                    bulk("127.0.0.1"),
                    Value::Int(40001),
                    bulk("a1"),
                    Value::Array(vec![]),
                ]),
                Value::Array(vec![bulk("127.0.0.1"), Value::Int(40004), bulk("d4")]),
            ]),
            Value::Array(vec![
                Value::Int(5),
                Value::Int(5),
                Value::Array(vec![bulk("127.0.0.1"), Value::Int(40002), bulk("b2")]),
            ]),
        ]);
        let table = slot_table(&reply).unwrap();
        assert_eq!(&table[..7], &[40001, 40001, 40001, 0, 0, 40002, 0]);
        assert_eq!(ranges_of(&table, 40001), [(0, 2)]);
        assert_eq!(ranges_of(&table, 40002), [(5, 5)]);
        assert_eq!(
            ranges_by_owner(&table, &[(1, 5)]),
            [(40001, 2), (0, 2), (40002, 1)]
        );
        assert!(slot_table(&Value::Array(vec![Value::Int(1)])).is_err());
    }

    #[test]
    fn ranges_of_splits_gaps() {
        let mut table = vec![0u16; usize::from(SLOT_COUNT)];
        for slot in [1, 2, 3, 7, 16383] {
            table[slot] = 9;
        }
        assert_eq!(ranges_of(&table, 9), [(1, 3), (7, 7), (16383, 16383)]);
    }

    #[test]
    fn info_field_finds_a_value() {
        let info = "# Cluster\r\ncluster_state:ok\r\ncluster_slots_ok:16384\r\n";
        assert_eq!(info_field(info, "cluster_state"), Some("ok"));
        assert_eq!(info_field(info, "cluster_slots_ok"), Some("16384"));
        assert_eq!(info_field(info, "cluster_size"), None);
    }
}
