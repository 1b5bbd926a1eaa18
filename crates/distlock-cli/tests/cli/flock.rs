//! `distlock run` from cron and for flock(1) users: a conflict is told by the exit code
//! alone (as `flock -n` tells it) unless `--verbose`, while errors still print; flock's
//! `--timeout` and `-s`/`--shared` mean what they mean there.

use std::process::Command;
use std::time::{Duration, Instant};

use distlock_test::RedisServer;

use super::{distlock, hold_until_key, output};

/// Exit 75 and nothing on stderr (the lock held, the job run elsewhere, no permit), so a
/// crontab line on many hosts mails nothing from the hosts that lose; `--verbose` says it in
/// one line. An error (the server unreachable) still prints and exits 125.
#[test]
fn a_conflict_is_silent_unless_verbose_and_errors_still_print() {
    let server = RedisServer::start();
    let modes: [(&[&str], &str, &str); 3] = [
        (&["plain"], "plain", "not acquired"),
        (
            &["nightly", "--at-most", "1m", "--env", "prod"],
            "job-lock:prod:nightly",
            "running elsewhere",
        ),
        (&["pool", "--semaphore", "1"], "{pool}:timeout", "no permit"),
    ];
    for (args, key, said) in modes {
        let mut holder = hold_until_key(&server, args, key);
        for verbose in [false, true] {
            let mut c = distlock(&server);
            c.arg("run").args(args).arg("-n");
            if verbose {
                c.arg("--verbose");
            }
            c.args(["--", "true"]);
            let out = output(c);
            assert_eq!(out.status.code(), Some(75), "{args:?}: {out:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            if verbose {
                assert!(stderr.contains(said), "{args:?} --verbose: {stderr}");
                assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
            } else {
                assert_eq!(stderr, "", "{args:?}: silent on a conflict");
            }
        }
        holder.kill().unwrap();
        holder.wait().unwrap();
    }
    // A real failure is not a conflict: it prints, whether or not --verbose is given.
    let closed = format!("redis://127.0.0.1:{}/", distlock_test::free_port());
    let mut c = distlock(&server);
    c.env("DISTLOCK_URL", &closed)
        .args(["run", "plain", "-n", "--", "true"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot reach the server"), "{stderr}");
}

/// flock's `--timeout` is its `-w`: after `run` it bounds the wait for the lock (seconds or a
/// duration), not a Redis command.
#[test]
fn timeout_after_run_is_flocks_wait() {
    let server = RedisServer::start();
    let mut holder = hold_until_key(&server, &["waited"], "waited");
    let mut c = distlock(&server);
    c.args(["run", "waited", "--timeout", "0.3", "--", "true"]);
    let started = Instant::now();
    let out = output(c);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(75), "{out:?}");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(
        took < Duration::from_secs(5),
        "waited {took:?}, not the 0.3 s asked (10 s is the default wait)"
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
}

/// The retired global `--timeout` is refused (before or after the command) with a pointer to
/// `--command-timeout`, which `DISTLOCK_TIMEOUT` still sets.
#[test]
fn the_former_global_timeout_points_to_command_timeout() {
    for args in [
        &["--timeout", "3s", "status", "x"][..],
        &["status", "x", "--timeout", "3s"][..],
    ] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
        c.env_remove("DISTLOCK_TIMEOUT").args(args);
        let out = output(c);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--command-timeout"), "{args:?}: {stderr}");
    }
}

/// flock's `-s`/`--shared` is `--read`, its `-x`/`--exclusive` `--write`: two shared holders
/// at once, the exclusive side refused while they hold.
#[test]
fn shared_and_exclusive_are_the_read_and_write_sides() {
    let server = RedisServer::start();
    let mut first = hold_until_key(&server, &["files", "-s"], "files");
    let mut c = distlock(&server);
    c.args(["run", "files", "--shared", "-n", "--", "true"]);
    assert_eq!(output(c).status.code(), Some(0), "a second reader");
    for exclusive in ["-x", "--exclusive", "-e"] {
        let mut c = distlock(&server);
        c.args(["run", "files", exclusive, "-n", "--", "true"]);
        assert_eq!(
            output(c).status.code(),
            Some(75),
            "{exclusive} beside a reader"
        );
    }
    first.kill().unwrap();
    first.wait().unwrap();
}
