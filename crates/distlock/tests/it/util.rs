//! Helpers of the library's integration tests.
//!
//! The server-side ones — run a command on a server, list its keys and subscribers, poll
//! until a condition holds — are `distlock_test::testing`'s, re-exported here so that a
//! test's `use crate::util::*` brings everything. What is distlock's own stays here: clients,
//! the filter of distlock's bookkeeping keys, the example binaries, and the topologies a
//! conformance test runs on.

use std::time::Duration;

use distlock::Client;
pub use distlock_test::testing::{
    acl_user, cmd, eventually, keys, numsub, responds_within, server_time_ms,
};
pub use distlock_test::RedisServer;

/// A fresh server and a client on it.
pub async fn setup() -> (RedisServer, Client) {
    let server = RedisServer::start();
    let client = client_for(&server).await;
    (server, client)
}

/// A client of `server` that calls its scripts by `EVALSHA`, not as Redis Functions
/// (`ClientBuilder::redis_functions(false)`): the server's script cache then shows which
/// scripts were sent.
pub async fn evalsha_client(server: &RedisServer) -> Client {
    Client::builder()
        .url(server.url())
        .redis_functions(false)
        .build()
        .await
        .unwrap()
}

/// A client on `server` with the default settings.
pub async fn client_for(server: &RedisServer) -> Client {
    Client::builder()
        .url(server.url())
        .build()
        .await
        .expect("connect to test server")
}

/// Command timeout of [`quick_client`]: a 300 ms timeout gives a 2.2 s latch window and a
/// 1.4 s resend window (latch − timeout − 500 ms).
pub const TIMEOUT: Duration = Duration::from_millis(300);

/// A client with a short command timeout ([`TIMEOUT`]), so that a pause of the server (a
/// `CLIENT PAUSE` of a second or so) makes its requests resent.
pub async fn quick_client(server: &RedisServer) -> Client {
    Client::builder()
        .url(server.url())
        .command_timeout(TIMEOUT)
        .build()
        .await
        .expect("connect to test server")
}

/// A client whose watchdog lease is short, so renewal can be observed in a test.
pub async fn client_with_watchdog(server: &RedisServer, lease: Duration) -> Client {
    Client::builder()
        .url(server.url())
        .watchdog_lease(lease)
        .build()
        .await
        .expect("connect to test server")
}

/// Keys other than the fencing counters (one per hash slot, shared by the names in it) and
/// the short-lived release latches (each of which must carry a TTL of at most the 13 s resend
/// window: 4 × the 3 s command timeout + 1 s).
pub fn lock_keys(server: &RedisServer) -> Vec<String> {
    keys(server)
        .into_iter()
        .filter(|k| !k.starts_with("distlock:fencing-counter:{"))
        .filter(|k| {
            if k.starts_with("redisson_unlock_latch:") {
                // -2: it expired between KEYS and PTTL.
                let pttl: i64 = cmd(server, &["PTTL", k]);
                assert!(
                    pttl == -2 || (pttl > 0 && pttl <= 13_000),
                    "latch {k} has PTTL {pttl}"
                );
                false
            } else {
                true
            }
        })
        .collect()
}

/// The `family` example running one primitive in a process of its own (`args`: the
/// primitive, then its arguments), its stdout piped for [`first_line`].
pub fn family(args: &[&str]) -> KilledOnDrop {
    KilledOnDrop(
        std::process::Command::new(example_bin("family"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the family example"),
    )
}

/// A child process killed (`SIGKILL`, which also ends a stopped one) when dropped: a test
/// that fails part-way leaves no process behind waiting for a server that is gone (and
/// holding the test run's output open).
pub struct KilledOnDrop(pub std::process::Child);

impl std::ops::Deref for KilledOnDrop {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for KilledOnDrop {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The first line `child` printed (with its newline), or "" when it printed none before its
/// stdout closed (it exited, or was killed).
pub fn first_line(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().expect("stdout piped"))
        .read_line(&mut line)
        .expect("read the child's stdout");
    line
}

/// A built example binary of this crate (cargo test builds examples; build it if missing).
///
/// A binary left from an earlier build is used as it is, with the library as it was then:
/// after changing the library, run the whole suite (`cargo test --workspace` builds the
/// examples) or `cargo build -p distlock --features blocking --examples` before `--test it`
/// alone. Building here on every call is not an option: several callers start a timed
/// scenario (a lease running out) before they spawn the example.
pub fn example_bin(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let profile_dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let path = profile_dir.join("examples").join(name);
    if !path.is_file() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args([
                "build",
                "-p",
                "distlock",
                "--features",
                "blocking",
                "--example",
                name,
            ])
            .status()
            .expect("run cargo build --example");
        assert!(status.success(), "building example {name} failed");
    }
    assert!(path.is_file(), "example binary {} missing", path.display());
    path
}

/// A multiplexed connection for a test's own commands on `url`.
pub async fn data_connection(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("connect to test server")
}

/// Add one to `key` with two separate commands (GET, then SET), so that callers without
/// mutual exclusion lose updates: the critical section of every counter fuzz test.
pub async fn unguarded_increment(con: &mut redis::aio::MultiplexedConnection, key: &str) {
    let v: Option<u64> = redis::cmd("GET").arg(key).query_async(con).await.unwrap();
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(v.unwrap_or(0) + 1)
        .query_async(con)
        .await
        .unwrap();
}

/// Run `copies` processes of the example binary `bin` with `args` side by side, and assert
/// that every one exits successfully.
pub async fn run_examples(bin: &std::path::Path, args: &[&str], copies: usize) {
    let children: Vec<_> = (0..copies)
        .map(|_| {
            std::process::Command::new(bin)
                .args(args)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()))
        })
        .collect();
    wait_all_succeed(children, &format!("{} {args:?}", bin.display())).await;
}

/// Wait for every child process (without blocking the runtime) and assert that each exited
/// successfully; `what` names them in the failure message.
pub async fn wait_all_succeed(children: Vec<std::process::Child>, what: &str) {
    for mut c in children {
        let status = tokio::task::spawn_blocking(move || c.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "{what}: {status}");
    }
}

/// A server layout a conformance test runs on. Only a single server exists today; to run
/// the conformance tests on Sentinel or Cluster too, add a variant here and to
/// [`Topology::ALL`], and the match arms the compiler then asks for in [`Deployment`]
/// (start its servers, connect a client, find the node that holds a key). The tests, which
/// loop over [`topologies`] and set up with [`setup_on`], stay as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// One redis-server, no replicas.
    Standalone,
    /// A master with two replicas and three sentinels; the client connects through the
    /// sentinels (`redis-sentinel://`).
    Sentinel,
    /// Three masters with a replica each (`redis-cluster://`).
    Cluster,
}

impl Topology {
    /// Every topology, in the order the conformance tests run on them.
    pub const ALL: &'static [Topology] =
        &[Topology::Standalone, Topology::Sentinel, Topology::Cluster];
}

/// Every topology a conformance test runs on:
///
/// ```ignore
/// for topology in topologies() {
///     let (deployment, client) = setup_on(topology).await;
///     // … the test, asserting on `deployment.node_for(key)` …
/// }
/// ```
pub fn topologies() -> impl Iterator<Item = Topology> {
    Topology::ALL.iter().copied()
}

/// The servers of one [`Topology`], running while the value lives.
pub enum Deployment {
    /// One server.
    Standalone(RedisServer),
    /// A Sentinel set.
    Sentinel(distlock_test::SentinelSet),
    /// A cluster.
    Cluster(distlock_test::ClusterSet),
}

impl Deployment {
    /// Start the servers of `topology` on free loopback ports.
    pub fn start(topology: Topology) -> Deployment {
        match topology {
            Topology::Standalone => Deployment::Standalone(RedisServer::start()),
            Topology::Sentinel => Deployment::Sentinel(distlock_test::SentinelSet::start()),
            Topology::Cluster => Deployment::Cluster(distlock_test::ClusterSet::start()),
        }
    }

    /// A new client connected to the deployment (a second client is another process's
    /// view of the same locks).
    pub async fn client(&self) -> Client {
        Client::builder()
            .url(self.url())
            .build()
            .await
            .expect("connect to the test deployment")
    }

    /// Every data server of the deployment (not the sentinels).
    pub fn nodes(&self) -> Vec<&RedisServer> {
        match self {
            Deployment::Standalone(server) => vec![server],
            Deployment::Sentinel(set) => set.servers().iter().collect(),
            Deployment::Cluster(set) => set.nodes().iter().collect(),
        }
    }

    /// The servers that take writes: the server, the current master, the cluster's masters.
    pub fn masters(&self) -> Vec<&RedisServer> {
        match self {
            Deployment::Standalone(server) => vec![server],
            Deployment::Sentinel(set) => vec![set.master()],
            Deployment::Cluster(set) => set.masters(),
        }
    }

    /// The replicas of the master that holds `key` (none on a standalone server).
    pub fn replicas_of(&self, key: &str) -> Vec<&RedisServer> {
        match self {
            Deployment::Standalone(_) => Vec::new(),
            Deployment::Sentinel(set) => {
                let master = set.master().port();
                set.servers()
                    .iter()
                    .filter(|s| s.port() != master)
                    .collect()
            }
            Deployment::Cluster(set) => set
                .replica_of(set.node_for_key(key).port())
                .into_iter()
                .collect(),
        }
    }

    /// `kill -9` the master that holds `key` and wait (at most `limit`) until its replica
    /// took over; returns the new master's port. Panics on a standalone server.
    pub fn fail_over(&mut self, key: &str, limit: Duration) -> u16 {
        match self {
            Deployment::Standalone(_) => panic!("a standalone server has no failover"),
            Deployment::Sentinel(set) => {
                let old = set.kill_master();
                set.wait_for_failover(old, limit)
            }
            Deployment::Cluster(set) => {
                let old = set.kill_master_of_key(key);
                set.wait_for_failover(old, limit)
            }
        }
    }

    /// The URL clients connect with.
    pub fn url(&self) -> String {
        match self {
            Deployment::Standalone(server) => server.url(),
            Deployment::Sentinel(set) => set.url(),
            Deployment::Cluster(set) => set.url(),
        }
    }

    /// The server that holds `key`, for assertions with [`cmd`] (on Cluster: the node
    /// serving the key's slot; on Sentinel: the current master).
    pub fn node_for(&self, key: &str) -> &RedisServer {
        match self {
            Deployment::Standalone(server) => server,
            Deployment::Sentinel(set) => set.master(),
            Deployment::Cluster(set) => set.node_for_key(key),
        }
    }
}

/// A fresh deployment of `topology` and a client on it; the topology is printed first, so
/// a failing test's output says which one failed.
pub async fn setup_on(topology: Topology) -> (Deployment, Client) {
    eprintln!("--- topology: {topology:?}");
    let deployment = Deployment::start(topology);
    let client = deployment.client().await;
    (deployment, client)
}

/// The liveness deadline (server ms) at the head of a hand-off queue entry
/// (`<deadline ms>;…`, as the lock, leased-semaphore and rw waiters hashes keep them).
pub fn entry_deadline(entry: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(entry);
    text.split(';')
        .next()
        .and_then(|d| d.parse().ok())
        .unwrap_or_else(|| panic!("no deadline in the queue entry {text:?}"))
}

/// `deadline` (server ms) and the server's clock now: asserts that the deadline is more than
/// half a second ahead (a dead waiter's place, before its liveness ran out), and returns
/// `(deadline, now)`.
pub fn deadline_ahead(server: &RedisServer, deadline: u64) -> (u64, u64) {
    let now = server_time_ms(server);
    assert!(
        deadline > now + 500,
        "the victim's deadline is only {} ms ahead",
        deadline as i64 - now as i64
    );
    (deadline, now)
}

/// Waits (up to 5 s) until `server` has run at least two more script calls than `before` and
/// then no more for 250 ms: a waiter's attempt before its subscriptions (preceded by its fast
/// path's, which answers nil, when its lock handle had met no contention) and the one after
/// they were confirmed, after which it waits for a message (or its recheck, seconds away in
/// the tests that use this). A count taken after a `CONFIG RESETSTAT` that follows holds only
/// what comes next. Panics if the attempts do not come or do not stop.
pub async fn waiter_settled(server: &RedisServer, before: u64) {
    const QUIET: Duration = Duration::from_millis(250);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let (mut last, mut since) = (script_calls(server), tokio::time::Instant::now());
    loop {
        let now = tokio::time::Instant::now();
        let calls = script_calls(server);
        if calls != last {
            (last, since) = (calls, now);
        } else if calls >= before + 2 && now - since >= QUIET {
            return;
        }
        assert!(
            now < deadline,
            "the waiter did not make its two attempts and settle ({} scripts ran)",
            calls - before
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The number of script calls `server` counted — `FCALL`s (Redis Functions) and `EVALSHA`s
/// (`INFO commandstats`; 0 when none since start or `CONFIG RESETSTAT`).
pub fn script_calls(server: &RedisServer) -> u64 {
    command_calls(server, "fcall") + command_calls(server, "evalsha")
}

/// How many times `server` ran `command` (`INFO commandstats`, which counts the commands
/// scripts run too; a subcommand as `cluster|info`) since its start or `CONFIG RESETSTAT`.
pub fn command_calls(server: &RedisServer, command: &str) -> u64 {
    let info: String = cmd(server, &["INFO", "commandstats"]);
    // Redis 6.2 counts a command's subcommands together (`cmdstat_cluster`).
    let command = match command.split_once('|') {
        Some((parent, _)) if distlock_test::server_major_version() < 7 => parent,
        _ => command,
    };
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Whether `key` exists on `server`.
pub fn exists(server: &RedisServer, key: &str) -> bool {
    cmd::<i64>(server, &["EXISTS", key]) == 1
}

/// Cancel `waiter` up to 2 ms before (even rounds) or after (odd rounds) `release` starts,
/// the pause depending on `round`; returns the release's task. Before, a waiter's leave must
/// take it out of a hand-off queue (or give back a hand-off that overtook it); after, it gives
/// back what was handed to it. (tokio sleeps last at least 1 ms, and a release takes about
/// 0.1 ms, so cancelling only after the release started would never test the first case.)
pub async fn cancel_around_release<T, F>(
    round: u64,
    waiter: &tokio::task::JoinHandle<T>,
    release: F,
) -> tokio::task::JoinHandle<()>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let pause = Duration::from_micros((round * 37) % 2000);
    if round.is_multiple_of(2) {
        waiter.abort();
        tokio::time::sleep(pause).await;
        tokio::spawn(release)
    } else {
        let release = tokio::spawn(release);
        tokio::time::sleep(pause).await;
        waiter.abort();
        release
    }
}

/// The script `file` as the library runs it (helpers joined).
pub fn source(file: &str) -> &'static str {
    distlock::SCRIPT_SOURCES
        .iter()
        .find(|(f, _)| *f == file)
        .map(|(_, s)| *s)
        .expect("script")
}

/// The channels `server` has subscribers on (`PUBSUB CHANNELS`), sorted, without the
/// clients' own notice channels (`distlock_client:{<client-id>}`, subscribed for each
/// client's life): the wake and grant channels of waiters.
pub fn waiter_channels(server: &RedisServer) -> Vec<String> {
    let mut channels: Vec<String> = cmd(server, &["PUBSUB", "CHANNELS"]);
    channels.retain(|c| !c.starts_with("distlock_client:"));
    channels.sort();
    channels
}

/// Which of the scripts `files` (as run) `server` has cached (`SCRIPT EXISTS`: 1 or 0 each),
/// in any of the variants a client runs (publishing by `PUBLISH`, `SPUBLISH` or both).
pub fn cached(server: &RedisServer, files: &[&str]) -> Vec<i64> {
    files
        .iter()
        .map(|f| {
            let mut args = vec!["SCRIPT".to_string(), "EXISTS".to_string()];
            args.extend(distlock::__script_hashes(f).expect("a script of the library"));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            cmd::<Vec<i64>>(server, &args)
                .into_iter()
                .max()
                .unwrap_or(0)
        })
        .collect()
}
