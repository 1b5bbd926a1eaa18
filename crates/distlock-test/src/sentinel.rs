//! A Redis Sentinel deployment on loopback, for failover tests: one master, two replicas and
//! three sentinels watching them ([`SentinelSet`]).
//!
//! Every process is a [`RedisServer`]: the sentinels run `redis-server <conf> --sentinel`
//! (the binary of [`redis_server_binary`](crate::redis_server_binary); no separate
//! `redis-sentinel` binary is needed), and all of them die with the set.
//!
//! The sentinels use a quorum of 2, mark the master down after [`DOWN_AFTER`] (1 s) and give
//! a failover [`FAILOVER_TIMEOUT`] (3 s), so a killed master is usually replaced within a few
//! seconds. Sentinel itself adds some randomness: a failover starts up to 1 s late (to
//! spread the sentinels' elections), a split vote retries only after twice the failover
//! timeout (6 s), and sentinels that did not lead the failover learn the new master from
//! hello messages sent every 2 s.
//!
//! The servers have no password and no TLS.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::testing::POLL_INTERVAL;
use crate::{RedisServer, ServerOptions};

/// What to tell a person whose `redis-server` cannot run as a sentinel.
pub const SENTINEL_INSTALL_HINT: &str = "Redis Sentinel could not be started: the harness runs \
`redis-server <conf> --sentinel` (DISTLOCK_REDIS_SERVER, else redis-server on PATH); install \
Sentinel support with `sudo apt-get install redis-server redis-sentinel` (Debian/Ubuntu), or \
point DISTLOCK_REDIS_SERVER at a redis-server (or valkey-server) build with Sentinel mode";

/// The master name [`SentinelSet::start`] gives the sentinels (`sentinel monitor distlock …`).
pub const DEFAULT_MASTER_NAME: &str = "distlock";

/// How many sentinels must agree that the master is down before a failover starts.
pub const QUORUM: u32 = 2;

/// How long the master must fail to answer before a sentinel thinks it down
/// (`sentinel down-after-milliseconds`).
pub const DOWN_AFTER: Duration = Duration::from_millis(1000);

/// `sentinel failover-timeout`: after this a stuck failover is abandoned, and a failover
/// whose election failed is retried after twice this.
pub const FAILOVER_TIMEOUT: Duration = Duration::from_millis(3000);

/// How long [`SentinelSet::start`] waits for the replicas to sync and the sentinels to find
/// one another.
pub const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// Connect and read timeout of every query the set sends: a paused or killed process must
/// not hang a poll.
const QUERY_TIMEOUT: Duration = Duration::from_millis(500);

/// How often [`SentinelSet::start`] checks whether the deployment is ready.
const READY_POLL: Duration = Duration::from_millis(50);

/// A master, two replicas and three sentinels on free ports of 127.0.0.1, all killed
/// (SIGKILL) when the set drops.
///
/// Which server is the master changes with failovers: ask [`master_port`](Self::master_port)
/// (the sentinels' view), not [`servers`](Self::servers)`()[0]`.
#[derive(Debug)]
pub struct SentinelSet {
    // Declared first so the sentinels die first and do not fail over while the set drops.
    sentinels: Vec<RedisServer>,
    /// The first master, then the replicas, in start order.
    servers: Vec<RedisServer>,
    name: String,
}

impl SentinelSet {
    /// Start a set whose sentinels monitor the master as [`DEFAULT_MASTER_NAME`]
    /// (`distlock`), and wait until it is ready (see [`start_with`](Self::start_with)).
    ///
    /// # Panics
    /// As [`start_with`](Self::start_with).
    pub fn start() -> SentinelSet {
        SentinelSet::start_with(DEFAULT_MASTER_NAME)
    }

    /// Start a set whose sentinels monitor the master as `master_name`.
    ///
    /// Starts the master (with diskless replication and no delay where the server accepts
    /// them), two replicas of it, waits until both are `online` on the master, then starts
    /// three sentinels (`sentinel monitor <master_name> 127.0.0.1 <port> 2`, down after 1 s,
    /// failover timeout 3 s, parallel syncs 1) and waits until every sentinel sees the master
    /// up, both replicas with a working link, and the two other sentinels. This takes about
    /// 2 s, mostly the sentinels' 2 s hello period.
    ///
    /// # Panics
    /// Panics when `master_name` is empty or holds whitespace; with
    /// [`INSTALL_HINT`](crate::INSTALL_HINT) when `redis-server` is missing; with
    /// [`SENTINEL_INSTALL_HINT`] when it cannot run as a sentinel; and, with every process's
    /// log, when the set is not ready within [`READY_TIMEOUT`] (20 s).
    pub fn start_with(master_name: &str) -> SentinelSet {
        assert!(
            !master_name.is_empty() && !master_name.contains(char::is_whitespace),
            "sentinel master name {master_name:?} must be a non-empty word"
        );
        let deadline = Instant::now() + READY_TIMEOUT;
        let master = RedisServer::start();
        // Diskless sync with no delay makes the replicas' first sync take milliseconds
        // instead of the default 5 s delay. Older servers lack one or both settings: they
        // just sync more slowly.
        for (key, value) in [
            ("repl-diskless-sync", "yes"),
            ("repl-diskless-sync-delay", "0"),
        ] {
            let _ = query::<()>(&master, &["CONFIG", "SET", key, value]);
        }
        let master_port = master.port().to_string();
        let mut servers = vec![master];
        for _ in 0..2 {
            servers.push(
                RedisServer::options()
                    .arg("--replicaof")
                    .arg("127.0.0.1")
                    .arg(&master_port)
                    .start(),
            );
        }
        let mut set = SentinelSet {
            sentinels: Vec::new(),
            servers,
            name: master_name.to_owned(),
        };
        // The sentinels learn the replicas from the master's INFO, which they ask at once
        // and then only every 10 s: the replicas must be connected before the sentinels
        // start.
        set.wait_ready(deadline, "both replicas online on the master", |set| {
            set.replicas_online()
        });
        let config = format!(
            "sentinel monitor {name} 127.0.0.1 {master_port} {QUORUM}\n\
             sentinel down-after-milliseconds {name} {down}\n\
             sentinel failover-timeout {name} {failover}\n\
             sentinel parallel-syncs {name} 1\n",
            name = set.name,
            down = DOWN_AFTER.as_millis(),
            failover = FAILOVER_TIMEOUT.as_millis(),
        );
        for _ in 0..3 {
            let sentinel = RedisServer::start_with(ServerOptions::default().sentinel(&*config))
                .unwrap_or_else(|e| panic!("{e}\n{SENTINEL_INSTALL_HINT}"));
            if let Err(e) = query::<String>(&sentinel, &["SENTINEL", "MYID"]) {
                panic!(
                    "redis-server on port {} is not a sentinel (SENTINEL MYID: {e}); log:\n{}\n\
                     {SENTINEL_INSTALL_HINT}",
                    sentinel.port(),
                    sentinel.log()
                );
            }
            set.sentinels.push(sentinel);
        }
        set.wait_ready(
            deadline,
            "every sentinel to see the master, 2 replicas and 2 other sentinels",
            |set| set.sentinels_ready(),
        );
        set
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
                    "sentinel set not ready within {READY_TIMEOUT:?}: waited for {what}; last \
                 seen: {seen}\n{}",
                    self.logs()
                )
            },
        )
    }

    /// `Ok` when the first master's `INFO replication` lists both replicas as online.
    fn replicas_online(&self) -> Result<(), String> {
        let info: String = query(&self.servers[0], &["INFO", "replication"])?;
        let connected = info.lines().any(|l| l.trim() == "connected_slaves:2");
        let online = info
            .lines()
            .filter(|l| l.starts_with("slave") && l.contains("state=online"))
            .count();
        if connected && online == 2 {
            Ok(())
        } else {
            Err(format!("INFO replication of the master:\n{info}"))
        }
    }

    /// `Ok` when every sentinel sees the master up with two healthy replicas and two healthy
    /// other sentinels.
    fn sentinels_ready(&self) -> Result<(), String> {
        for sentinel in &self.sentinels {
            let port = sentinel.port();
            let master = fields(query(sentinel, &["SENTINEL", "MASTER", &self.name])?);
            let field = |name: &str| {
                master
                    .iter()
                    .find(|(k, _)| k == name)
                    .map_or("", |(_, v)| v.as_str())
            };
            if field("flags") != "master"
                || field("num-slaves") != "2"
                || field("num-other-sentinels") != "2"
            {
                return Err(format!("sentinel {port}: SENTINEL MASTER: {master:?}"));
            }
            let replicas: Vec<Vec<String>> =
                query(sentinel, &["SENTINEL", "REPLICAS", &self.name])?;
            for replica in replicas.into_iter().map(fields) {
                let healthy = replica.iter().any(|(k, v)| k == "flags" && v == "slave")
                    && replica
                        .iter()
                        .any(|(k, v)| k == "master-link-status" && v == "ok");
                if !healthy {
                    return Err(format!("sentinel {port}: replica {replica:?}"));
                }
            }
            let others: Vec<Vec<String>> = query(sentinel, &["SENTINEL", "SENTINELS", &self.name])?;
            for other in others.into_iter().map(fields) {
                if !other.iter().any(|(k, v)| k == "flags" && v == "sentinel") {
                    return Err(format!("sentinel {port}: other sentinel {other:?}"));
                }
            }
        }
        Ok(())
    }

    /// `redis-sentinel://127.0.0.1:<s1>,127.0.0.1:<s2>,127.0.0.1:<s3>#<master name>`: the
    /// sentinels' addresses and the master name, in lettuce's URL form (no database, no
    /// password).
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port()))
            .collect();
        format!("redis-sentinel://{}#{}", hosts.join(","), self.name)
    }

    /// The name the sentinels monitor the master under (`distlock` unless given to
    /// [`start_with`](Self::start_with)).
    pub fn master_name(&self) -> &str {
        &self.name
    }

    /// The three sentinels.
    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// The three sentinels, to [kill](RedisServer::kill) or
    /// [restart](RedisServer::restart) one.
    pub fn sentinels_mut(&mut self) -> &mut [RedisServer] {
        &mut self.sentinels
    }

    /// The data servers in start order: the first master, then the two replicas. Roles
    /// change with failovers; [`master_port`](Self::master_port) says which is master now.
    pub fn servers(&self) -> &[RedisServer] {
        &self.servers
    }

    /// The data server (master or replica, not a sentinel) on `port`, if any.
    pub fn server_mut(&mut self, port: u16) -> Option<&mut RedisServer> {
        self.servers.iter_mut().find(|s| s.port() == port)
    }

    /// The current master's port as the sentinels see it now (`SENTINEL
    /// GET-MASTER-ADDR-BY-NAME`): the port most of the answering sentinels name, the first
    /// answer's on a tie. Sentinels that do not answer within 500 ms are skipped. During a
    /// failover the sentinels may disagree, or still name the old master: use
    /// [`wait_for_failover`](Self::wait_for_failover) to wait for the new one.
    ///
    /// # Panics
    /// Panics, with the sentinels' logs, when no sentinel names a master.
    pub fn master_port(&self) -> u16 {
        let answers = self.master_addrs();
        let mut counts: Vec<(u16, usize)> = Vec::new();
        for port in answers.iter().filter_map(|(_, a)| a.as_ref().ok().copied()) {
            match counts.iter_mut().find(|(p, _)| *p == port) {
                Some((_, n)) => *n += 1,
                None => counts.push((port, 1)),
            }
        }
        // `max_by_key` keeps the last of equal maxima; reversing keeps the first answer.
        counts
            .into_iter()
            .rev()
            .max_by_key(|&(_, n)| n)
            .map(|(port, _)| port)
            .unwrap_or_else(|| {
                panic!(
                    "no sentinel names a master for {:?}: {answers:?}\n{}",
                    self.name,
                    self.logs()
                )
            })
    }

    /// The current master (the data server on [`master_port`](Self::master_port)).
    ///
    /// # Panics
    /// As [`master_port`](Self::master_port), and when the sentinels name a port that is
    /// none of [`servers`](Self::servers).
    pub fn master(&self) -> &RedisServer {
        let port = self.master_port();
        self.servers
            .iter()
            .find(|s| s.port() == port)
            .unwrap_or_else(|| panic!("the sentinels name {port}, which is no server of the set"))
    }

    /// The current master, mutably (to [kill](RedisServer::kill) or
    /// [pause](RedisServer::pause) it).
    ///
    /// # Panics
    /// As [`master`](Self::master).
    pub fn master_mut(&mut self) -> &mut RedisServer {
        let port = self.master_port();
        self.server_mut(port)
            .unwrap_or_else(|| panic!("the sentinels name {port}, which is no server of the set"))
    }

    /// Kill the current master with SIGKILL, as a crash would, and return its port: pass it
    /// to [`wait_for_failover`](Self::wait_for_failover).
    ///
    /// # Panics
    /// As [`master`](Self::master).
    pub fn kill_master(&mut self) -> u16 {
        let master = self.master_mut();
        master.kill();
        master.port()
    }

    /// Wait until every sentinel still running names the same master, on a port other than
    /// `old_port`, and that server's `ROLE` says `master`; return its port. A sentinel
    /// [killed](RedisServer::kill) through [`sentinels_mut`](Self::sentinels_mut) is left
    /// out; a [paused](RedisServer::pause) one never agrees. After a crash of the master
    /// this usually takes 2–6 s with this set's settings (see the [module](self) docs).
    ///
    /// When this returns, the other replica has been told to follow the new master but may
    /// not have synced with it yet; wait for its `ROLE` or for your data on it if a test
    /// needs that. A [restarted](RedisServer::restart) old master comes back as a master and
    /// is turned into a replica by the sentinels only about 10 s later.
    ///
    /// # Panics
    /// Panics, with what the sentinels said last and every process's log, when this has not
    /// happened within `limit`.
    pub fn wait_for_failover(&self, old_port: u16, limit: Duration) -> u16 {
        let deadline = Instant::now() + limit;
        let agreed = || {
            let answers = self.master_addrs();
            let first = answers.first().and_then(|(_, a)| a.as_ref().ok().copied());
            first
                .filter(|port| {
                    *port != old_port
                        && answers.iter().all(|(_, a)| a.as_ref() == Ok(port))
                        && self
                            .servers
                            .iter()
                            .find(|s| s.port() == *port)
                            .and_then(role)
                            .is_some_and(|r| r == "master")
                })
                .ok_or_else(|| format!("{answers:?}"))
        };
        crate::poll_until(POLL_INTERVAL, deadline, agreed, |answers| {
            format!(
                "no failover away from the master on port {old_port} within {limit:?}; \
                 the sentinels (port, master port) last said {answers}\n{}",
                self.logs()
            )
        })
    }

    /// `SENTINEL GET-MASTER-ADDR-BY-NAME` on every running sentinel: (sentinel port, master
    /// port or what went wrong).
    fn master_addrs(&self) -> Vec<(u16, Result<u16, String>)> {
        self.sentinels
            .iter()
            .filter(|s| s.pid().is_some())
            .map(|s| {
                let answer = query::<Option<(String, u16)>>(
                    s,
                    &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", &self.name],
                )
                .and_then(|a| a.map(|(_, port)| port).ok_or_else(|| "nil".to_owned()));
                (s.port(), answer)
            })
            .collect()
    }

    /// Every process's log, each under a heading with its role at start and port: for
    /// failure messages.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        let named = self.sentinels.iter().map(|s| ("sentinel", s)).chain(
            self.servers.iter().enumerate().map(|(i, s)| {
                let what = if i == 0 { "first master" } else { "replica" };
                (what, s)
            }),
        );
        for (what, server) in named {
            let _ = writeln!(out, "--- {what} on port {} ---", server.port());
            out.push_str(&server.log());
        }
        out
    }
}

/// The first element of `server`'s `ROLE` reply (`master`, `slave` or `sentinel`), or `None`
/// when it is not running or does not answer within 500 ms.
pub fn role(server: &RedisServer) -> Option<String> {
    let reply: redis::Value = query(server, &["ROLE"]).ok()?;
    let redis::Value::Array(items) = reply else {
        return None;
    };
    match items.into_iter().next()? {
        redis::Value::BulkString(bytes) => String::from_utf8(bytes).ok(),
        redis::Value::SimpleString(s) => Some(s),
        _ => None,
    }
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

/// A flat `[field, value, field, value, …]` reply (as `SENTINEL MASTER` sends) as pairs.
fn fields(flat: Vec<String>) -> Vec<(String, String)> {
    let mut it = flat.into_iter();
    let mut out = Vec::new();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_pairs_a_flat_reply() {
        let flat = ["name", "distlock", "flags", "master", "odd"].map(String::from);
        assert_eq!(
            fields(flat.to_vec()),
            [("name", "distlock"), ("flags", "master")].map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
    }
}
