//! The nemesis: injects one kind of fault on a schedule and records each in the history —
//! `invoke` when it starts, `ok` when it is healed (a killed server restarted or replaced by
//! its replica, a paused process resumed), `info` for an instant fault.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::history::{Op, Recorder, Type};
use crate::topology::{query_connection, Deployment};

/// A kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// Nothing.
    None,
    /// SIGSTOP the process holding the lock for this long (past its lease), then SIGCONT.
    PauseHolder,
    /// SIGSTOP a process that holds nothing (its tasks are queued waiters) for the pause,
    /// then SIGCONT.
    PauseWaiter,
    /// SIGKILL the server and restart it empty.
    RestartEmpty,
    /// SIGKILL the server and restart it from a snapshot taken early in the run.
    RestartOldSnapshot,
    /// SIGKILL the Sentinel master; healed when the sentinels agree on a new one.
    SentinelKill,
    /// `SENTINEL FAILOVER`.
    SentinelFailover,
    /// SIGSTOP every replica of the Sentinel master for the pause, then SIGCONT.
    ReplicaPause,
    /// Cut the Sentinel master off from its replicas and sentinels for the pause while the
    /// clients still reach it: the sentinels promote a replica and the old master serves its
    /// clients on its own (a split brain). Healed when the peers reach it again; the next
    /// fault waits until the sentinels have made it a replica.
    SentinelPartition,
    /// SIGKILL the Cluster master of the lock's slot; healed when its replica took over.
    ClusterKill,
    /// `CLUSTER FAILOVER` on the replica of the lock's slot's master.
    ClusterFailover,
    /// Move the lock's slot to another master.
    SlotMigration,
    /// `CLIENT KILL TYPE pubsub` on every master.
    PubsubKill,
    /// `DEBUG SLEEP` and `CLIENT PAUSE … ALL` in turn, for the pause.
    ServerStall,
    /// Pause or kill every subset of one or two of RedLock's masters in turn.
    RedlockNodes,
    /// Blackhole the first proxy (its workers' connections to the server, both ways) for
    /// the pause, or delay it by 300 ms each way, in turn; then heal it and cut its
    /// connections: those workers lose their leases while they still reach the fenced
    /// resource.
    PartitionClients,
}

/// When and how hard.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// The fault.
    pub fault: Fault,
    /// The first one after this.
    pub first_after: Duration,
    /// Then one every this (from the start of the previous one).
    pub every: Duration,
    /// How long a pause lasts.
    pub pause: Duration,
    /// The lock's name (and key).
    pub key: String,
}

/// The workers, as the nemesis needs them: name, pid, client id.
pub struct Worker {
    /// `w0`, …
    pub process: String,
    /// Its pid.
    pub pid: i32,
    /// Its client's id (the first part of an owner).
    pub client: String,
}

/// Run `schedule` on `d` until `stop` is set; heal everything before returning. Returns the
/// nemesis's own errors (a fault that could not be injected or healed).
pub fn run(
    d: &mut Deployment,
    schedule: &Schedule,
    workers: &[Worker],
    history: PathBuf,
    stop: &AtomicBool,
) -> Vec<String> {
    let rec = Recorder::create(&history, "nemesis").expect("the run directory is writable");
    let mut errors = Vec::new();
    if schedule.fault == Fault::None {
        return errors;
    }
    let mut n = Nemesis {
        d,
        s: schedule,
        workers,
        rec,
        snapshot: None,
        round: 0,
        conn: None,
        peer_user_ready: false,
    };
    let mut next = Instant::now() + schedule.first_after;
    while !stop.load(Ordering::Relaxed) {
        if Instant::now() < next {
            std::thread::sleep(Duration::from_millis(10).min(next - Instant::now()));
            continue;
        }
        next += schedule.every;
        let result = catch_unwind(AssertUnwindSafe(|| n.inject(stop)));
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => errors.push(e),
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                errors.push(format!("the nemesis failed: {msg}"));
                break;
            }
        }
        n.round += 1;
    }
    let _ = n.rec.flush();
    errors
}

/// `ACL SETUSER` of the Sentinel set's peer user with `rules`.
fn acl_setuser(conn: &mut redis::Connection, rules: &[&str]) -> Result<(), String> {
    redis::cmd("ACL")
        .arg("SETUSER")
        .arg(Nemesis::PEER_USER)
        .arg(rules)
        .query::<()>(conn)
        .map_err(|e| {
            // The password rule (`>…`) stays out of the message.
            let shown: Vec<&str> = rules
                .iter()
                .map(|r| if r.starts_with('>') { ">***" } else { r })
                .collect();
            format!("ACL SETUSER {}: {e}", shown.join(" "))
        })
}

/// Record a fault event.
fn note(rec: &Recorder, ty: Type, what: &str) {
    rec.record(&rec.event(0, ty, Op::Fault).detail(what));
}

struct Nemesis<'a> {
    d: &'a mut Deployment,
    s: &'a Schedule,
    workers: &'a [Worker],
    rec: Recorder,
    snapshot: Option<PathBuf>,
    round: usize,
    /// The connection [`holder`](Nemesis::holder) reads the lock hash on (kept between
    /// its polls).
    conn: Option<redis::Connection>,
    /// Whether the Sentinel set's peers log in as [`PEER_USER`](Nemesis::PEER_USER) yet.
    peer_user_ready: bool,
}

impl<'a> Nemesis<'a> {
    fn start(&self, what: &str) {
        note(&self.rec, Type::Invoke, what);
    }

    fn healed(&self, what: &str) {
        note(&self.rec, Type::Ok, what);
    }

    fn instant(&self, what: &str) {
        note(&self.rec, Type::Info, what);
    }

    fn inject(&mut self, stop: &AtomicBool) -> Result<(), String> {
        match self.s.fault {
            Fault::None => Ok(()),
            Fault::PauseHolder => self.pause_holder(stop),
            Fault::PauseWaiter => self.pause_waiter(stop),
            Fault::SentinelPartition => self.sentinel_partition(),
            Fault::RestartEmpty | Fault::RestartOldSnapshot => self.restart(),
            Fault::SentinelKill => {
                let rec = self.rec.clone();
                let set = self.d.sentinel.as_mut().expect("a Sentinel deployment");
                let what = format!("kill -9 Sentinel master {}", set.master_port());
                note(&rec, Type::Invoke, &what);
                let old = set.kill_master();
                set.wait_for_failover(old, Duration::from_secs(30));
                note(&rec, Type::Ok, &what);
                set.server_mut(old).expect("a server of the set").restart();
                Ok(())
            }
            Fault::SentinelFailover => {
                let set = self.d.sentinel.as_ref().expect("a Sentinel deployment");
                let old = set.master_port();
                let what = format!("SENTINEL FAILOVER (master {old})");
                self.start(&what);
                let mut conn = query_connection(&set.sentinels()[0]).map_err(|e| e.to_string())?;
                redis::cmd("SENTINEL")
                    .arg("FAILOVER")
                    .arg(set.master_name())
                    .query::<()>(&mut conn)
                    .map_err(|e| format!("SENTINEL FAILOVER: {e}"))?;
                set.wait_for_failover(old, Duration::from_secs(30));
                self.healed(&what);
                Ok(())
            }
            Fault::ReplicaPause => {
                let set = self.d.sentinel.as_ref().expect("a Sentinel deployment");
                let master = set.master_port();
                let replicas: Vec<_> = set
                    .servers()
                    .iter()
                    .filter(|s| s.port() != master)
                    .collect();
                let what = format!("SIGSTOP both replicas of {master}");
                self.start(&what);
                for r in &replicas {
                    r.pause();
                }
                std::thread::sleep(self.s.pause);
                // Stamped before the SIGCONT: no replica acknowledged anything before the
                // span's end (check A counts grants up to it).
                let healed = self.rec.event(0, Type::Ok, Op::Fault).detail(&what);
                for r in &replicas {
                    r.resume();
                }
                self.rec.record(&healed);
                Ok(())
            }
            Fault::ClusterKill => {
                let rec = self.rec.clone();
                let set = self.d.cluster.as_mut().expect("a Cluster deployment");
                let old = set.node_for_key(&self.s.key).port();
                let what = format!("kill -9 Cluster master {old} of the lock's slot");
                note(&rec, Type::Invoke, &what);
                set.kill_master_of_key(&self.s.key);
                set.wait_for_failover(old, Duration::from_secs(30));
                note(&rec, Type::Ok, &what);
                set.node_mut(old).expect("a node of the set").restart();
                Ok(())
            }
            Fault::ClusterFailover => {
                let set = self.d.cluster.as_ref().expect("a Cluster deployment");
                let master = set.node_for_key(&self.s.key).port();
                let replica = set
                    .replica_of(master)
                    .ok_or_else(|| format!("no replica of {master} to fail over to"))?
                    .port();
                let what = format!("CLUSTER FAILOVER to {replica} (master {master})");
                self.start(&what);
                set.failover_replica(replica);
                self.healed(&what);
                Ok(())
            }
            Fault::SlotMigration => {
                let set = self.d.cluster.as_ref().expect("a Cluster deployment");
                let slot = set.key_slot(&self.s.key);
                let from = set.node_for_slot(slot).port();
                let to = set
                    .masters()
                    .iter()
                    .map(|m| m.port())
                    .find(|&p| p != from)
                    .expect("three masters");
                let what = format!("migrate slot {slot} from {from} to {to}");
                self.start(&what);
                set.migrate_slot(slot, to);
                self.healed(&what);
                Ok(())
            }
            Fault::PubsubKill => {
                for m in self.d.masters() {
                    if let Ok(mut conn) = query_connection(m) {
                        let _: redis::RedisResult<i64> = redis::cmd("CLIENT")
                            .arg("KILL")
                            .arg("TYPE")
                            .arg("pubsub")
                            .query(&mut conn);
                    }
                }
                self.instant("CLIENT KILL TYPE pubsub");
                Ok(())
            }
            Fault::ServerStall => {
                let server = self.d.masters()[0];
                let mut conn = query_connection(server).map_err(|e| e.to_string())?;
                let secs = self.s.pause.as_secs_f64();
                if self.round.is_multiple_of(2) {
                    let what = format!("DEBUG SLEEP {secs}");
                    self.start(&what);
                    redis::cmd("DEBUG")
                        .arg("SLEEP")
                        .arg(secs)
                        .query::<()>(&mut conn)
                        .map_err(|e| format!("DEBUG SLEEP: {e}"))?;
                    self.healed(&what);
                } else {
                    let ms = self.s.pause.as_millis() as u64;
                    let what = format!("CLIENT PAUSE {ms} ALL");
                    self.start(&what);
                    redis::cmd("CLIENT")
                        .arg("PAUSE")
                        .arg(ms)
                        .arg("ALL")
                        .query::<()>(&mut conn)
                        .map_err(|e| format!("CLIENT PAUSE: {e}"))?;
                    std::thread::sleep(self.s.pause);
                    self.healed(&what);
                }
                Ok(())
            }
            Fault::RedlockNodes => self.redlock_nodes(),
            Fault::PartitionClients => {
                use crate::proxy::{Direction, Fault as Net};
                // Strike while a worker behind the first proxy (w0, w2, …) holds the lock.
                let deadline = Instant::now() + Duration::from_secs(3);
                while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
                    let behind_first = self
                        .holder()
                        .is_some_and(|w| w.process[1..].parse::<usize>().is_ok_and(|i| i % 2 == 0));
                    if behind_first {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                let proxy = self.d.proxies.first().expect("a deployment with proxies");
                // Blackhole and 300 ms of delay each way in turn.
                let (what, fault) = if self.round.is_multiple_of(2) {
                    let what = format!("blackhole proxy {} (half the workers)", proxy.port());
                    (what, Net::Blackhole(Direction::Both))
                } else {
                    let what = format!("delay proxy {} by 300 ms each way", proxy.port());
                    (
                        what,
                        Net::Delay(Direction::Both, Duration::from_millis(300)),
                    )
                };
                self.start(&what);
                proxy.set(fault);
                std::thread::sleep(self.s.pause);
                proxy.heal_and_cut();
                self.healed(&what);
                Ok(())
            }
        }
    }

    /// The process holding the lock now, from the lock hash's owner field.
    fn holder(&mut self) -> Option<&'a Worker> {
        if self.conn.is_none() {
            self.conn = query_connection(self.d.masters()[0]).ok();
        }
        let conn = self.conn.as_mut()?;
        let fields: Vec<String> = match redis::cmd("HKEYS").arg(&self.s.key).query(conn) {
            Ok(f) => f,
            Err(_) => {
                // Connect again at the next look.
                self.conn = None;
                return None;
            }
        };
        let workers = self.workers;
        fields.iter().find_map(|f| {
            let client = f.split(':').next()?;
            workers.iter().find(|w| w.client == client)
        })
    }

    /// The holder, looked up every 5 ms for up to 2 s (`None`: nobody held the lock then, or
    /// the run is stopping).
    fn wait_for_holder(&mut self, stop: &AtomicBool) -> Option<&'a Worker> {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            if let Some(w) = self.holder() {
                return Some(w);
            }
            if Instant::now() >= deadline || stop.load(Ordering::Relaxed) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn pause_holder(&mut self, stop: &AtomicBool) -> Result<(), String> {
        if let Some(worker) = self.wait_for_holder(stop) {
            self.pause_process(worker, "holder");
        }
        Ok(())
    }

    /// Pause a worker that holds nothing now (the next after the holder, in turn), so its
    /// tasks stop renewing their places in the queue.
    fn pause_waiter(&mut self, stop: &AtomicBool) -> Result<(), String> {
        let Some(holder) = self.wait_for_holder(stop) else {
            return Ok(());
        };
        let others: Vec<&Worker> = self
            .workers
            .iter()
            .filter(|w| w.process != holder.process)
            .collect();
        let Some(&worker) = others.get(self.round % others.len().max(1)) else {
            return Ok(());
        };
        self.pause_process(worker, "waiter");
        Ok(())
    }

    /// SIGSTOP `worker` for the pause, then SIGCONT; a span `SIGSTOP <role> <process>`.
    fn pause_process(&self, worker: &Worker, role: &str) {
        let pid = nix::unistd::Pid::from_raw(worker.pid);
        let what = format!("SIGSTOP {role} {}", worker.process);
        self.start(&what);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP);
        std::thread::sleep(self.s.pause);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT);
        self.healed(&what);
    }

    /// The ACL user the Sentinel set's replicas and sentinels log in as, so that a partition
    /// can refuse them alone: the clients keep the default user.
    const PEER_USER: &'static str = "distlock-chaos-peer";
    const PEER_PASSWORD: &'static str = "distlock-chaos-peer-password";

    /// Make the replicas and sentinels log in as [`PEER_USER`](Self::PEER_USER) from now
    /// on: the user on every server, `masteruser`/`masterauth` for the replicas (every server
    /// may become one), `SENTINEL SET … auth-user/auth-pass` for the sentinels.
    fn set_up_peer_user(&self) -> Result<(), String> {
        let set = self.d.sentinel.as_ref().expect("a Sentinel deployment");
        let (user, password) = (Self::PEER_USER, Self::PEER_PASSWORD);
        for server in set.servers() {
            let mut conn = query_connection(server).map_err(|e| e.to_string())?;
            acl_setuser(
                &mut conn,
                &["on", &format!(">{password}"), "~*", "&*", "+@all"],
            )?;
            for (k, v) in [("masteruser", user), ("masterauth", password)] {
                redis::cmd("CONFIG")
                    .arg("SET")
                    .arg(k)
                    .arg(v)
                    .query::<()>(&mut conn)
                    .map_err(|e| format!("CONFIG SET {k}: {e}"))?;
            }
        }
        for sentinel in set.sentinels() {
            let mut conn = query_connection(sentinel).map_err(|e| e.to_string())?;
            redis::cmd("SENTINEL")
                .arg("SET")
                .arg(set.master_name())
                .arg("auth-user")
                .arg(user)
                .arg("auth-pass")
                .arg(password)
                .query::<()>(&mut conn)
                .map_err(|e| format!("SENTINEL SET auth-user: {e}"))?;
        }
        Ok(())
    }

    /// Cut the master off from its peers: they log in as [`PEER_USER`](Self::PEER_USER)
    /// (set up at the first partition), whose commands the master now refuses (`-NOPERM`: a
    /// sentinel takes that for no reply, a replica cannot sync), and their connections are
    /// closed. The clients' default user is untouched, so they still reach it. Neither `tc
    /// netem` nor iptables is on every machine this runs on; to Redis, refused commands from
    /// the peers are a partition.
    fn sentinel_partition(&mut self) -> Result<(), String> {
        if !self.peer_user_ready {
            self.set_up_peer_user()?;
            self.peer_user_ready = true;
        }
        let set = self.d.sentinel.as_ref().expect("a Sentinel deployment");
        let user = Self::PEER_USER;
        let master = set.master();
        let port = master.port();
        let mut conn = query_connection(master).map_err(|e| e.to_string())?;
        let what = format!("partition Sentinel master {port} from its replicas and sentinels");
        self.start(&what);
        acl_setuser(&mut conn, &["-@all"])?;
        // Close the peers' connections: those made before the peer user existed are the
        // default user's, so they are found by type and by the sentinels' names.
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut conn)
            .map_err(|e| format!("CLIENT LIST: {e}"))?;
        let peers = list.lines().filter_map(|line| {
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
            };
            let sentinel = field("name").is_some_and(|n| n.starts_with("sentinel-"));
            let replica = field("flags").is_some_and(|f| f.contains('S'));
            let peer = field("user") == Some(user);
            (sentinel || replica || peer).then(|| field("id")).flatten()
        });
        for id in peers.map(str::to_owned).collect::<Vec<_>>() {
            let _: redis::RedisResult<()> = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(id)
                .query(&mut conn);
        }
        std::thread::sleep(self.s.pause);
        acl_setuser(&mut conn, &["+@all"])?;
        self.healed(&what);
        // The sentinels turn the old master into a replica of the new one about 10 s after
        // they reach it again; until then it is a second master nobody is sent to.
        let deadline = Instant::now() + Duration::from_secs(40);
        while Instant::now() < deadline {
            if distlock_test::sentinel::role(master).as_deref() == Some("slave") {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!(
            "the sentinels did not make the old master {port} a replica within 40 s"
        ))
    }

    fn restart(&mut self) -> Result<(), String> {
        let rec = self.rec.clone();
        let server = self.d.standalone.as_mut().expect("a standalone deployment");
        let dump = server.dir().join("dump.rdb");
        let old = self
            .snapshot
            .get_or_insert_with(|| server.dir().join("old.rdb"))
            .clone();
        if self.s.fault == Fault::RestartOldSnapshot && !old.exists() {
            // The old snapshot: taken at the first fault, restored at every later one.
            let mut conn = query_connection(server).map_err(|e| e.to_string())?;
            redis::cmd("SAVE")
                .query::<()>(&mut conn)
                .map_err(|e| format!("SAVE: {e}"))?;
            std::fs::copy(&dump, &old).map_err(|e| format!("copy the snapshot: {e}"))?;
            return Ok(());
        }
        let what = match self.s.fault {
            Fault::RestartEmpty => "kill -9 and restart empty",
            _ => "kill -9 and restart from the old snapshot",
        };
        note(&rec, Type::Invoke, what);
        server.kill();
        if self.s.fault == Fault::RestartEmpty {
            let _ = std::fs::remove_file(&dump);
        } else {
            std::fs::copy(&old, &dump).map_err(|e| format!("restore the snapshot: {e}"))?;
        }
        server.restart();
        note(&rec, Type::Ok, what);
        Ok(())
    }

    /// Every subset of one or two of the five masters, in turn, paused or killed.
    fn redlock_nodes(&mut self) -> Result<(), String> {
        let n = self.d.masters.len();
        let mut subsets: Vec<Vec<usize>> = (0..n).map(|i| vec![i]).collect();
        for i in 0..n {
            for j in i + 1..n {
                subsets.push(vec![i, j]);
            }
        }
        let subset = subsets[self.round % subsets.len()].clone();
        let kill = (self.round / subsets.len()) % 2 == 1;
        let ports: Vec<String> = subset
            .iter()
            .map(|&i| self.d.masters[i].port().to_string())
            .collect();
        let what = format!(
            "{} RedLock master(s) {}",
            if kill { "kill -9" } else { "SIGSTOP" },
            ports.join(",")
        );
        self.start(&what);
        for &i in &subset {
            if kill {
                self.d.masters[i].kill();
            } else {
                self.d.masters[i].pause();
            }
        }
        std::thread::sleep(self.s.pause);
        for &i in &subset {
            if kill {
                self.d.masters[i].restart();
            } else {
                self.d.masters[i].resume();
            }
        }
        self.healed(&what);
        Ok(())
    }
}
