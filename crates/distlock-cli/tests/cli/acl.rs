//! The README's minimal ACL lines for the CLI's inspection and unlock commands, tested with
//! users that have exactly those rules: every command succeeds and reads every key.

use std::process::Command;

use distlock_test::testing::{acl_user, cmd, wait_until};
use distlock_test::RedisServer;

use super::{hold, output};

/// What every distlock client needs (the README's first paragraph on ACLs).
const COMMON: &[&str] = &[
    "~*",
    "&*",
    "+ping",
    "+evalsha",
    "+eval",
    "+script|load",
    "+subscribe",
    "+unsubscribe",
];
/// `distlock list` and `distlock top`.
const LIST: &str = "+scan +type +pttl +object|encoding +hlen +get +exists +zcount +zcard \
                    +lrange +hgetall +pubsub|numsub";
/// `distlock status`: as `list`, plus these.
const STATUS: &str = "+zrange +time +zremrangebyscore +incrby +publish";
/// `distlock unlock --force`.
const UNLOCK: &str = "+type +hgetall +del +publish";

/// `distlock` as the ACL user `user` with `rules` besides [`COMMON`].
fn as_user(server: &RedisServer, user: &str, rules: &[&str]) -> Command {
    acl_user(server, user, &[COMMON, rules].concat());
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
    c.env(
        "DISTLOCK_URL",
        format!("redis://{user}:pw@127.0.0.1:{}/", server.port()),
    )
    .env_remove("DISTLOCK_LOG");
    c
}

#[test]
fn the_documented_acl_lines_suffice_for_list_top_status_and_unlock() {
    let server = RedisServer::start();
    let mut holder = hold(&server, &["held"]);
    assert!(wait_until(
        std::time::Duration::from_secs(5),
        || cmd::<bool>(&server, &["EXISTS", "held"])
    ));
    // One of every kind besides the held lock: a reader, a semaphore, a leased semaphore.
    let _: () = cmd(&server, &["HSET", "rw", "mode", "read", "java:1", "1"]);
    let _: () = cmd(&server, &["SET", "sem", "3"]);
    let _: () = cmd(&server, &["SET", "leased", "1"]);
    let _: () = cmd(
        &server,
        &["ZADD", "{leased}:timeout", "99999999999999", "a"],
    );

    let list: Vec<&str> = LIST.split_whitespace().collect();
    let mut status = list.clone();
    status.extend(STATUS.split_whitespace());
    let unlock: Vec<&str> = UNLOCK.split_whitespace().collect();
    let runs: Vec<(&str, &[&str], Vec<&str>)> = vec![
        ("list", &list, vec!["list"]),
        ("top", &list, vec!["top", "--once"]),
        ("status", &status, vec!["status", "held"]),
        ("status", &status, vec!["status", "rw"]),
        ("status", &status, vec!["status", "sem"]),
        ("status", &status, vec!["status", "leased"]),
        ("unlock", &unlock, vec!["unlock", "--force", "rw"]),
        ("unlock", &unlock, vec!["unlock", "--force", "held"]),
    ];
    for (user, rules, args) in runs {
        let mut c = as_user(&server, user, rules);
        c.args(&args);
        let out = output(c);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?} as {user}: {out:?}");
        assert!(
            !stderr.contains("unreadable") && !stderr.contains("ACL") && !stderr.contains("NoPerm"),
            "{args:?} as {user}: {stderr}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !stdout.contains("unreadable"),
            "{args:?} as {user}: {stdout}"
        );
    }
    let _ = holder.kill();
    let _ = holder.wait();
}
