use std::time::Duration;

use distlock::Client;
pub use distlock_harness::RedisServer;

/// A fresh server and a client on it.
pub async fn setup() -> (RedisServer, Client) {
    let server = RedisServer::start();
    let client = client_for(&server).await;
    (server, client)
}

pub async fn client_for(server: &RedisServer) -> Client {
    Client::builder()
        .url(server.url())
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

/// Synchronous command helper for assertions.
pub fn cmd<T: redis::FromRedisValue>(server: &RedisServer, args: &[&str]) -> T {
    let mut con = server.connection();
    let mut c = redis::cmd(args[0]);
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(&mut con)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// All keys on the server, sorted.
pub fn keys(server: &RedisServer) -> Vec<String> {
    let mut k: Vec<String> = cmd(server, &["KEYS", "*"]);
    k.sort();
    k
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
                let pttl: i64 = cmd(server, &["PTTL", k]);
                assert!(pttl > 0 && pttl <= 13_000, "latch {k} has PTTL {pttl}");
                false
            } else {
                true
            }
        })
        .collect()
}

/// Poll `f` every 10 ms until it returns true or `limit` passes.
pub async fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A built example binary of this crate (cargo test builds examples; build it if missing).
pub fn example_bin(name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let profile_dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let path = profile_dir.join("examples").join(name);
    if !path.is_file() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "-p", "distlock", "--example", name])
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
    for mut c in children {
        let status = tokio::task::spawn_blocking(move || c.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "{} {args:?}: {status}", bin.display());
    }
}
