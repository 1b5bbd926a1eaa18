//! Helpers for tests that run against a [`RedisServer`]: send a command and get its reply,
//! list keys and subscribers, and wait for a condition instead of sleeping for a guessed
//! time.
//!
//! Everything here talks to the server over a fresh synchronous connection and panics on any
//! error, naming the command and the server's port: a test helper that fails quietly makes a
//! test that cannot fail. None of it knows anything about distlock's data layout.
//!
//! With the `tokio` feature, `eventually` is the same poll for `async` tests: it sleeps
//! with `tokio::time::sleep`, so the runtime's other tasks (the code under test) keep running
//! while the test waits.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::RedisServer;

/// How often [`wait_until`] and `eventually` check their condition.
pub const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Run one command (`args[0]` with the arguments `args[1..]`) on `server` and convert the
/// reply to `T` (`()`, `bool`, `i64`, `String`, `Option<_>`, `Vec<_>`, tuples, …).
///
/// # Panics
/// Panics when `args` is empty, when the server cannot be reached, when it answers with an
/// error, or when the reply does not convert to `T`; the message names the command.
pub fn cmd<T: redis::FromRedisValue>(server: &RedisServer, args: &[&str]) -> T {
    let (name, rest) = args.split_first().expect("cmd: no command given");
    let mut con = server.connection();
    let mut c = redis::cmd(name);
    for a in rest {
        c.arg(*a);
    }
    c.query(&mut con)
        .unwrap_or_else(|e| panic!("{args:?} on port {}: {e}", server.port()))
}

/// Make `user` an ACL user of `server` with the password `pw` and exactly `rules` (`ACL
/// SETUSER user reset resetchannels on >pw rules…`): `resetchannels` because Redis 6.2's
/// `reset` leaves a user every channel (`acl-pubsub-default allchannels`) and then refuses a
/// channel pattern.
///
/// # Panics
/// As [`cmd`], when the server refuses a rule.
pub fn acl_user(server: &RedisServer, user: &str, rules: &[&str]) {
    let mut args = vec![
        "ACL",
        "SETUSER",
        user,
        "reset",
        "resetchannels",
        "on",
        ">pw",
    ];
    args.extend_from_slice(rules);
    let _: () = cmd(server, &args);
}

/// Every key of the server's database 0, sorted (`KEYS *`; for small test data sets only).
pub fn keys(server: &RedisServer) -> Vec<String> {
    let mut k: Vec<String> = cmd(server, &["KEYS", "*"]);
    k.sort();
    k
}

/// The number of clients subscribed to `channel` on `server`, classic (`PUBSUB NUMSUB`) and
/// sharded (`PUBSUB SHARDNUMSUB`, Redis 7 Cluster; a server before 7.0 has classic pub/sub
/// only), e.g. to wait until a waiter is really waiting for a message on it.
pub fn numsub(server: &RedisServer, channel: &str) -> u64 {
    let (_, classic): (String, u64) = cmd(server, &["PUBSUB", "NUMSUB", channel]);
    if crate::server_major_version() < 7 {
        return classic;
    }
    let (_, sharded): (String, u64) = cmd(server, &["PUBSUB", "SHARDNUMSUB", channel]);
    classic + sharded
}

/// The command that assigns the hash slots `first..=last` to a Cluster node:
/// `CLUSTER ADDSLOTSRANGE first last` on Redis 7 and later, `CLUSTER ADDSLOTS` naming every
/// slot of the range before (Redis 6.2 has no `ADDSLOTSRANGE`). Run it with [`cmd`].
pub fn add_slots_command(first: u16, last: u16) -> Vec<String> {
    let mut args = vec!["CLUSTER".to_string()];
    if crate::server_major_version() >= 7 {
        args.extend([
            "ADDSLOTSRANGE".to_string(),
            first.to_string(),
            last.to_string(),
        ]);
    } else {
        args.push("ADDSLOTS".to_string());
        args.extend((first..=last).map(|s| s.to_string()));
    }
    args
}

/// The server's clock (`TIME`) in milliseconds since the Unix epoch: compare it with
/// expiry times that scripts computed from the same clock.
pub fn server_time_ms(server: &RedisServer) -> u64 {
    let (secs, micros): (u64, u64) = cmd(server, &["TIME"]);
    secs * 1000 + micros / 1000
}

/// Whether `server` answers a `PING` within `timeout` on a new connection. False while it
/// is busy (`DEBUG SLEEP`, a long script), paused with [`RedisServer::pause`], or gone: use
/// it to wait until a slow-server scenario has really begun. Any reply counts, an error
/// (`NOAUTH`) too. Plain-TCP servers only: a [TLS](crate::ServerOptions::tls) server never
/// answers this.
pub fn responds_within(server: &RedisServer, timeout: Duration) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], server.port()));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, timeout) else {
        return false;
    };
    if stream.set_read_timeout(Some(timeout)).is_err()
        || stream.set_write_timeout(Some(timeout)).is_err()
        || stream.write_all(b"PING\r\n").is_err()
    {
        return false;
    }
    let mut first = [0u8; 1];
    matches!(stream.read(&mut first), Ok(1))
}

/// Call `condition` until it returns true (then return true) or `limit` has passed (then
/// return false), sleeping [`POLL_INTERVAL`] between calls. The condition is always called
/// at least once, and once more at or after the deadline. Blocks the thread: in an `async`
/// test use `eventually` (feature `tokio`).
///
/// The result is meant to be asserted, with a message saying what did not happen:
/// `assert!(wait_until(limit, || …), "the waiter did not queue")`.
#[must_use = "assert the result: a wait that times out is a failure"]
pub fn wait_until(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// [`wait_until`] for `async` tests on a tokio runtime: sleeps with `tokio::time::sleep`
/// between calls, so other tasks keep running. The condition itself is synchronous (it
/// usually runs [`cmd`] on the server).
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
#[must_use = "assert the result: a wait that times out is a failure"]
pub async fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if condition() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// This machine's host name as distlock reports it in connection names and holder records:
/// characters outside `[A-Za-z0-9._-]` replaced by `_` (read from
/// `/proc/sys/kernel/hostname`, so Linux only).
///
/// # Panics
/// When the host name cannot be read.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("read /proc/sys/kernel/hostname")
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmd_keys_numsub_and_time() {
        let server = RedisServer::start();
        assert!(keys(&server).is_empty());
        let _: () = cmd(&server, &["SET", "b", "1"]);
        let _: () = cmd(&server, &["SET", "a", "2"]);
        assert_eq!(keys(&server), ["a", "b"]);
        let v: Option<String> = cmd(&server, &["GET", "missing"]);
        assert_eq!(v, None);
        assert_eq!(numsub(&server, "ch"), 0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        assert!(server_time_ms(&server).abs_diff(now) < 5_000);
    }

    #[test]
    #[should_panic(expected = "INCR")]
    fn cmd_panics_on_an_error_reply() {
        let server = RedisServer::start();
        let _: () = cmd(&server, &["SET", "s", "text"]);
        let _: i64 = cmd(&server, &["INCR", "s"]);
    }

    #[test]
    fn responds_within_tells_a_busy_server() {
        let mut server = RedisServer::start();
        assert!(responds_within(&server, Duration::from_millis(500)));
        server.pause();
        assert!(!responds_within(&server, Duration::from_millis(100)));
        server.resume();
        assert!(responds_within(&server, Duration::from_millis(500)));
        server.kill();
        assert!(!responds_within(&server, Duration::from_millis(100)));
    }

    #[test]
    fn wait_until_polls_until_true_or_the_limit() {
        let mut calls = 0;
        assert!(wait_until(Duration::from_secs(5), || {
            calls += 1;
            calls == 3
        }));
        assert_eq!(calls, 3);
        let start = Instant::now();
        let mut calls = 0;
        assert!(!wait_until(Duration::from_millis(50), || {
            calls += 1;
            false
        }));
        assert!(start.elapsed() >= Duration::from_millis(50));
        assert!(
            calls >= 2,
            "checked at the start and at the deadline: {calls}"
        );
        // A zero limit still checks once.
        assert!(wait_until(Duration::ZERO, || true));
    }

    #[cfg(feature = "tokio")]
    #[tokio::test]
    async fn eventually_polls_without_blocking_the_runtime() {
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let setter = {
            let flag = flag.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(30)).await;
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
            })
        };
        assert!(
            eventually(Duration::from_secs(5), || flag
                .load(std::sync::atomic::Ordering::SeqCst))
            .await
        );
        setter.await.unwrap();
        assert!(!eventually(Duration::from_millis(30), || false).await);
    }
}
