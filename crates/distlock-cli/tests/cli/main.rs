//! End-to-end tests of the `distlock` binary against real redis-server processes.

mod acl;
mod family;
mod faults;
mod flock;
mod hints;
mod list;
mod run;
mod shell;
mod status;
mod tmux;
mod top;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use distlock_test::testing::{cmd, wait_until};
use distlock_test::RedisServer;

fn distlock(server: &RedisServer) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
    c.env("DISTLOCK_URL", server.url())
        .env_remove("DISTLOCK_LOG");
    c
}

fn output(mut c: Command) -> Output {
    c.output().expect("run distlock")
}

/// Start `distlock run ARGS -- sleep 30` (a holder that keeps its lock until stopped).
fn hold(server: &RedisServer, run_args: &[&str]) -> Child {
    let mut c = distlock(server);
    c.arg("run")
        .args(run_args)
        .args(["--", "sleep", "30"])
        .stdout(Stdio::null());
    c.spawn().expect("spawn distlock run")
}

/// [`hold`], then wait until the lock's `key` exists (at most 5 s).
fn hold_until_key(server: &RedisServer, run_args: &[&str], key: &str) -> Child {
    let holder = hold(server, run_args);
    assert!(
        wait_until(Duration::from_secs(5), || cmd::<bool>(
            server,
            &["EXISTS", key]
        )),
        "{key} was not taken by `distlock run {run_args:?}`"
    );
    holder
}

#[test]
fn run_exits_0_and_gives_the_command_its_token() {
    let server = RedisServer::start();
    let mut c = distlock(&server);
    c.args([
        "run",
        "job",
        "--",
        "sh",
        "-c",
        "echo token=$DISTLOCK_FENCING_TOKEN lock=$DISTLOCK_LOCK",
    ]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let token: u64 = stdout
        .trim()
        .strip_prefix("token=")
        .and_then(|s| s.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no token in {stdout:?}"));
    assert!(token > 0);
    assert!(stdout.contains("lock=job"));
    let exists: bool = cmd(&server, &["EXISTS", "job"]);
    assert!(!exists, "released after the command");
}

#[test]
fn run_passes_the_command_exit_code_through() {
    let server = RedisServer::start();
    let mut c = distlock(&server);
    c.args(["run", "job", "--", "sh", "-c", "exit 7"]);
    assert_eq!(output(c).status.code(), Some(7));
    let mut c = distlock(&server);
    c.args(["run", "job", "--", "/nonexistent/command"]);
    assert_eq!(output(c).status.code(), Some(127));
    let exists: bool = cmd(&server, &["EXISTS", "job"]);
    assert!(!exists);
}

/// `run`'s own failures exit 125 — a server that cannot be reached, a key of another type, a
/// usage error — while CMD's codes 1 and 2 pass through; 126 for a CMD that cannot be
/// executed, 127 for one that does not exist (coreutils' `timeout` convention).
#[test]
fn run_own_failures_exit_125_and_cmd_codes_pass_through() {
    let server = RedisServer::start();
    let closed = format!("redis://127.0.0.1:{}/", distlock_test::free_port());
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let not_executable = dir.path().join("script.sh");
    std::fs::write(&not_executable, "#!/bin/sh\nexit 0\n").unwrap();
    let _: () = cmd(&server, &["SET", "a-string", "x"]);
    let touch = ["--", "touch", marker.to_str().unwrap()];
    let cases: Vec<(Vec<&str>, Option<&str>, i32)> = vec![
        (vec!["run", "x", "--wait", "1s"], Some(closed.as_str()), 125),
        (vec!["run", "a-string", "--wait", "1s"], None, 125),
        (vec!["run", "x", "--wait", "soon"], None, 125),
        (vec!["--command-timeout", "0s", "run", "x"], None, 125),
        // The global option's name before it was --command-timeout.
        (vec!["--timeout", "1s", "run", "x"], None, 125),
        (vec!["run", "x", "--read", "--write"], None, 125),
    ];
    for (args, url, code) in cases {
        let mut c = distlock(&server);
        if let Some(url) = url {
            c.env("DISTLOCK_URL", url);
        }
        c.args(&args).args(touch);
        let out = output(c);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {out:?}");
        assert!(!marker.exists(), "{args:?}: the command ran");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    for (script, code) in [("exit 1", 1), ("exit 2", 2), ("exit 125", 125)] {
        let mut c = distlock(&server);
        c.args(["run", "x", "--", "sh", "-c", script]);
        assert_eq!(output(c).status.code(), Some(code), "{script}");
    }
    let mut c = distlock(&server);
    c.args(["run", "x", "--"]).arg(&not_executable);
    let out = output(c);
    assert_eq!(out.status.code(), Some(126), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot run"));
    // Other commands keep 1 for errors and 2 for usage errors.
    let mut c = distlock(&server);
    c.env("DISTLOCK_URL", &closed).args(["status", "x"]);
    assert_eq!(output(c).status.code(), Some(1));
    let mut c = distlock(&server);
    c.args(["status", "--wait", "1s", "x"]);
    assert_eq!(output(c).status.code(), Some(2));
    // `run --help` documents the codes and exits 0.
    let mut c = distlock(&server);
    c.args(["run", "--help"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in ["Exit status:", "125", "126", "127", "128+N"] {
        assert!(help.contains(needle), "run --help lacks {needle}: {help}");
    }
}

/// A lock held elsewhere: exit 75 after `--wait`, without running CMD, and (`--verbose`) one
/// line on stderr.
#[test]
fn run_exits_75_when_the_lock_is_held() {
    let server = RedisServer::start();
    let mut holder = hold_until_key(&server, &["cron"], "cron");
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let mut c = distlock(&server);
    c.args(["run", "cron", "--wait", "200ms", "--verbose", "--", "touch"])
        .arg(&marker);
    let started = Instant::now();
    let out = output(c);
    assert_eq!(out.status.code(), Some(75), "{out:?}");
    assert!(started.elapsed() >= Duration::from_millis(200));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not acquired"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(!marker.exists(), "the command ran without the lock");
    holder.kill().unwrap();
    holder.wait().unwrap();
}

#[test]
fn run_forwards_sigterm_and_releases() {
    let server = RedisServer::start();
    let mut c = distlock(&server);
    c.args([
        "run",
        "svc",
        "--",
        "sh",
        "-c",
        "echo started; exec sleep 30",
    ])
    .stdout(Stdio::piped());
    let mut child = c.spawn().expect("spawn distlock run");
    // The command runs (it printed its line) before it is signalled.
    // (The reader stays open until the end: the wrapper's stdout is never a broken pipe.)
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "started");
    let held: bool = cmd(&server, &["EXISTS", "svc"]);
    assert!(held, "the lock is held while the command runs");
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let status = child.wait().unwrap();
    drop(stdout);
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    let exists: bool = cmd(&server, &["EXISTS", "svc"]);
    assert!(!exists, "the lock was released after the child died");
}

#[test]
fn run_terminates_the_command_when_the_lease_is_lost() {
    let server = RedisServer::start();
    let mut c = distlock(&server);
    c.args([
        "--watchdog-lease",
        "600ms",
        "run",
        "fragile",
        "--",
        "sleep",
        "30",
    ])
    .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    assert!(wait_until(Duration::from_secs(5), || cmd::<bool>(
        &server,
        &["EXISTS", "fragile"]
    )));
    let deleted: i64 = cmd(&server, &["DEL", "fragile"]);
    assert_eq!(deleted, 1, "the lock key was not there");
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("lost"));
}

/// `--on-lost term` escalates: a command that ignores the SIGTERM of a lost lease gets
/// SIGKILL `--kill-after` later (it is the wrapper's direct child: `exec` keeps the ignored
/// SIGTERM), and `run` exits 137 saying so.
#[test]
fn run_kills_a_command_that_outlives_the_sigterm_of_a_lost_lease() {
    let server = RedisServer::start();
    let mut c = distlock(&server);
    c.args([
        "--watchdog-lease",
        "600ms",
        "run",
        "stubborn",
        "--kill-after",
        "1500ms",
        "--",
        "sh",
        "-c",
        "trap '' TERM; echo $$; exec sleep 60",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let pid: i32 = line.trim().parse().expect("the command's pid");
    let deleted: i64 = cmd(&server, &["DEL", "stubborn"]);
    assert_eq!(deleted, 1, "the lock key was not there");
    let started = Instant::now();
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGKILL), "{out:?}");
    assert!(stderr.contains("lost"), "{stderr}");
    // One line says so: not the library's event as well.
    assert_eq!(
        stderr.lines().filter(|l| l.contains("lost")).count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("SIGKILL"), "{stderr}");
    // Lost within a renewal (200 ms), then --kill-after.
    assert!(took >= Duration::from_millis(1500), "{took:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    // Reaped by the wrapper: no such process any more.
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the command {pid} still exists"
    );

    // Zero is refused, and so is --kill-after where nothing is stopped.
    for args in [
        &["run", "x", "--kill-after", "0s", "--", "true"][..],
        &[
            "run",
            "x",
            "--on-lost",
            "ignore",
            "--kill-after",
            "1s",
            "--",
            "true",
        ],
        &[
            "run",
            "x",
            "--at-most",
            "1m",
            "--kill-after",
            "1s",
            "--",
            "true",
        ],
    ] {
        let mut c = distlock(&server);
        c.args(args);
        let out = output(c);
        assert_eq!(out.status.code(), Some(125), "{args:?}: {out:?}");
    }
    let exists: bool = cmd(&server, &["EXISTS", "x"]);
    assert!(!exists, "a refused run took the lock");
}

#[test]
fn wrong_password_never_appears_in_output() {
    let server = RedisServer::options().password("s3cr3t-correct").start();
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
    c.env(
        "DISTLOCK_URL",
        format!("redis://:s3cr3t-wrong@127.0.0.1:{}/", server.port()),
    )
    .args(["status", "x"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(1));
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The cause first, and the fix in the CLI's terms.
    assert!(
        all.contains("refused the user name or password") && all.contains("--password"),
        "{all}"
    );
    assert!(!all.contains("s3cr3t"), "{all}");
}

/// A password with URL-reserved characters: `--password` and `DISTLOCK_PASSWORD` take it as
/// it is; raw in the URL it fails with a hint naming both, never showing it.
#[test]
fn a_password_apart_from_the_url_needs_no_encoding() {
    let password = "p@ss:w/rd#?";
    let server = RedisServer::options().password(password).start();
    let bare = format!("redis://127.0.0.1:{}/", server.port());
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
    c.env("DISTLOCK_URL", &bare)
        .args(["status", "x", "--password", password]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
    c.env("DISTLOCK_URL", &bare)
        .env("DISTLOCK_PASSWORD", password)
        .args(["status", "x"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
    c.env(
        "DISTLOCK_URL",
        format!("redis://:{password}@127.0.0.1:{}/", server.port()),
    )
    .args(["status", "x"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("percent-encode") && err.contains("--password"),
        "{err}"
    );
    assert!(!err.contains("rd#?"), "{err}");
}

/// An unreachable server: exit 1 (`run`: 125) with one stderr line that names the OS cause exactly once
/// (the library's message and its source chain do not repeat it) and never the password.
#[test]
fn unreachable_server_shows_the_cause_once() {
    let port = distlock_test::free_port();
    for args in [&["status", "x"][..], &["run", "x", "--", "true"][..]] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
        c.env_remove("DISTLOCK_LOG")
            .env_remove("DISTLOCK_CONNECT_TIMEOUT")
            .env_remove("DISTLOCK_TIMEOUT")
            .env(
                "DISTLOCK_URL",
                format!("redis://:s3cr3t-pw@127.0.0.1:{port}/"),
            )
            .args(args);
        let out = output(c);
        // `run`'s own failures exit 125, the other commands' 1.
        let code = if args[0] == "run" { 125 } else { 1 };
        assert_eq!(out.status.code(), Some(code), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
        assert_eq!(
            stderr.matches("Connection refused").count(),
            1,
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains("cannot reach the server"),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains("redis://:***@127.0.0.1"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("s3cr3t"), "{args:?}: {stderr}");
    }
}

/// A URL without a scheme, or with `http://`, is refused with a hint naming the URL to use,
/// never showing its password: `run` exits 125 without running CMD, `status` exits 1.
#[test]
fn url_mistakes_get_a_hint_without_the_password() {
    let cases = [
        ("localhost:6379", "use redis://localhost:6379"),
        ("127.0.0.1:6379", "use redis://127.0.0.1:6379"),
        (
            "app:s3cr3t-pw@127.0.0.1:6379",
            "use redis://app:***@127.0.0.1:6379",
        ),
        (
            "http://:s3cr3t-pw@127.0.0.1:6379",
            "use redis://:***@127.0.0.1:6379",
        ),
    ];
    for (url, hint) in cases {
        for (args, code) in [
            (&["run", "x", "--", "true"][..], 125),
            (&["status", "x"], 1),
        ] {
            let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
            c.env_remove("DISTLOCK_LOG")
                .env("DISTLOCK_URL", url)
                .args(args);
            let out = output(c);
            assert_eq!(out.status.code(), Some(code), "{url} {args:?}: {out:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains(hint), "{url} {args:?}: {stderr}");
            assert!(!stderr.contains("s3cr3t"), "{url} {args:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{url} {args:?}: {stderr}");
        }
    }
}

/// Without --url or DISTLOCK_URL, a default server that cannot be reached is named, with
/// how to name another.
#[test]
fn an_unreachable_default_server_says_to_set_the_url() {
    if std::net::TcpStream::connect("127.0.0.1:6379").is_ok() {
        eprintln!("skipped: a server listens on the default port 6379 here");
        return;
    }
    for (args, code) in [
        (&["run", "x", "--", "true"][..], 125),
        (&["status", "x"], 1),
    ] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
        c.env_remove("DISTLOCK_LOG")
            .env_remove("DISTLOCK_URL")
            .env_remove("DISTLOCK_CONNECT_TIMEOUT")
            .args(args);
        let out = output(c);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("set --url or DISTLOCK_URL"),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains("redis://127.0.0.1:6379/"),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("Connection refused"), "{args:?}: {stderr}");
    }
}

/// flock(1) and etcdctl habits: `-n` makes one attempt, `-w` takes a number of seconds,
/// `-E N` sets the conflict exit code, `-c STRING` runs a shell command, and without a
/// command `run` holds the lock until signalled, printing its name and fencing token.
#[test]
fn run_takes_flock_and_etcdctl_habits() {
    let server = RedisServer::start();
    // Held for about 2 s: a waiting run gets it then, a run that does not wait exits at once.
    let mut holder = distlock(&server);
    holder.args(["run", "habits", "--", "sleep", "2"]);
    let mut holder = holder.spawn().unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || cmd::<bool>(
            &server,
            &["EXISTS", "habits"]
        )),
        "the holder did not take the lock"
    );
    let mut c = distlock(&server);
    c.args(["run", "-n", "habits", "--", "true"]);
    assert_eq!(output(c).status.code(), Some(75), "-n: one attempt");
    let mut c = distlock(&server);
    c.args(["run", "--nb", "-E", "3", "habits", "--", "true"]);
    assert_eq!(output(c).status.code(), Some(3), "-E 3");
    let mut c = distlock(&server);
    c.args(["run", "-w", "0.2", "habits", "--", "true"]);
    assert_eq!(
        output(c).status.code(),
        Some(75),
        "-w 0.2: a fifth of a second"
    );
    let mut c = distlock(&server);
    c.args([
        "run",
        "-w",
        "20",
        "-c",
        "echo \"$DISTLOCK_LOCK\"; exit 7",
        "habits",
    ]);
    let out = output(c);
    assert_eq!(
        out.status.code(),
        Some(7),
        "-w 20 waits for the holder, -c runs: {out:?}"
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "habits");
    holder.wait().unwrap();
    let mut c = distlock(&server);
    c.args(["run", "-n", "-w", "5", "habits", "--", "true"]);
    assert_eq!(
        output(c).status.code(),
        Some(125),
        "-n with -w is a usage error"
    );

    // No command: hold until SIGTERM, printing the name and the token.
    let mut hold = distlock(&server);
    hold.args(["run", "held-open"]).stdout(Stdio::piped());
    let mut hold = hold.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(hold.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let (name, token) = line.trim().split_once(' ').expect("<name> <token>");
    assert_eq!(name, "held-open");
    let stored: String = cmd(&server, &["HGET", "held-open", "distlock:fencing-token"]);
    assert_eq!(token, stored);
    let pid = nix::unistd::Pid::from_raw(hold.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = hold.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert!(!cmd::<bool>(&server, &["EXISTS", "held-open"]), "released");
}

/// Cron on many hosts: the second `run --at-most` exits 75 at once, without waiting.
#[test]
fn job_mode_skips_at_once_when_another_host_runs_it() {
    let server = RedisServer::start();
    let mut first = hold_until_key(
        &server,
        &["nightly", "--at-most", "1m", "--env", "prod"],
        "job-lock:prod:nightly",
    );
    let mut second = distlock(&server);
    second.args([
        "run",
        "nightly",
        "--at-most",
        "1m",
        "--env",
        "prod",
        "--",
        "true",
    ]);
    let started = Instant::now();
    let out = output(second);
    assert_eq!(out.status.code(), Some(75), "{out:?}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "job mode must not wait"
    );

    // status recognizes the job lock, by --env or by key.
    let mut status = distlock(&server);
    status.args(["status", "--env", "prod", "nightly", "--json"]);
    let out = output(status);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["kind"], "job_lock");
    assert_eq!(v[0]["held"], true);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(v[0]["holder"]["host"], host.trim());
    assert!(
        v[0]["holder"]["since_ms"].as_u64().unwrap() > 1_700_000_000_000,
        "{v}"
    );
    let mut status = distlock(&server);
    status.args(["status", "job-lock:prod:nightly"]);
    let out = output(status);
    assert!(String::from_utf8_lossy(&out.stdout).contains("held by"));

    first.kill().unwrap();
    first.wait().unwrap();
}

#[test]
fn job_mode_runs_and_keeps_the_lock_for_at_least() {
    let server = RedisServer::start();
    let mut c = distlock(&server);
    c.args([
        "run",
        "report",
        "--at-most",
        "10s",
        "--at-least",
        "2s",
        "--",
        "sh",
        "-c",
        "exit 4",
    ]);
    assert_eq!(output(c).status.code(), Some(4));
    let pttl: i64 = cmd(&server, &["PTTL", "job-lock:default:report"]);
    assert!(
        pttl > 0 && pttl <= 2000,
        "kept for the rest of --at-least: {pttl}"
    );
    let mut again = distlock(&server);
    again.args(["run", "report", "--at-most", "10s", "--", "true"]);
    assert_eq!(output(again).status.code(), Some(75));
}

/// At-most passing does not stop the command (ShedLock semantics) and the release afterwards
/// leaves the next holder's lock alone.
#[test]
fn job_mode_overrun_leaves_the_next_holders_lock_alone() {
    let server = RedisServer::start();
    let key = "job-lock:default:overrun";
    let mut slow = distlock(&server);
    slow.args(["run", "overrun", "--at-most", "300ms", "--", "sleep", "1"])
        .stderr(Stdio::piped());
    let slow = slow.spawn().unwrap();
    let mut first_value = None;
    assert!(
        wait_until(Duration::from_secs(5), || {
            first_value = cmd::<Option<String>>(&server, &["GET", key]);
            first_value.is_some()
        }),
        "the first run did not take the lock"
    );
    // The scenario: its 300 ms --at-most passes while its command (1 s) still runs.
    assert!(
        wait_until(Duration::from_secs(2), || !cmd::<bool>(
            &server,
            &["EXISTS", key]
        )),
        "--at-most did not end the first run's lock"
    );
    let mut next = distlock(&server);
    next.args(["run", "overrun", "--at-most", "1m", "--", "sleep", "30"])
        .stdout(Stdio::null());
    let mut next = next.spawn().unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || {
            cmd::<i64>(&server, &["PTTL", key]) > 30_000
        }),
        "the next run did not take the lock"
    );
    let value: String = cmd(&server, &["GET", key]);
    assert_ne!(Some(&value), first_value.as_ref(), "the next run's value");
    let out = slow.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "the command was not stopped: {out:?}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("not held"));
    let after: String = cmd(&server, &["GET", key]);
    assert_eq!(value, after);
    next.kill().unwrap();
    next.wait().unwrap();
}

/// ShedLock's ISO-8601 durations (`lockAtMostFor = "PT10M"`) are taken as they are written
/// there; a month, which has no fixed length, is refused with a hint.
#[test]
fn job_mode_takes_shedlocks_iso_durations() {
    let server = RedisServer::start();
    let mut c = distlock(&server);
    c.args([
        "run",
        "iso",
        "--at-most",
        "PT10M",
        "--at-least",
        "PT2S",
        "--",
        "true",
    ]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let pttl: i64 = cmd(&server, &["PTTL", "job-lock:default:iso"]);
    assert!(pttl > 1_000 && pttl <= 2_000, "kept for PT2S: {pttl}");
    let mut c = distlock(&server);
    c.args(["run", "iso2", "--at-most", "P1M", "--", "true"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("months are not a fixed duration"),
        "{out:?}"
    );
}

#[test]
fn job_mode_rejects_bad_durations() {
    let server = RedisServer::start();
    let mut c = distlock(&server);
    c.args(["run", "j", "--at-most", "0s", "--", "true"]);
    assert_eq!(output(c).status.code(), Some(125));
    let mut c = distlock(&server);
    c.args([
        "run",
        "j",
        "--at-most",
        "1s",
        "--at-least",
        "5s",
        "--",
        "true",
    ]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at_least_for"));
}

#[test]
fn redlock_mode_runs_under_a_quorum_and_exits_75_without_one() {
    let nodes: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let urls = nodes.iter().map(|n| n.url()).collect::<Vec<_>>().join(",");
    let mut holder = Command::new(env!("CARGO_BIN_EXE_distlock"));
    holder
        .args([
            "run",
            "rl",
            "--redlock",
            &urls,
            "--lease",
            "900ms",
            "--",
            "sleep",
            "30",
        ])
        .stdout(Stdio::null());
    let mut holder = holder.spawn().unwrap();
    assert!(wait_until(Duration::from_secs(5), || nodes
        .iter()
        .filter(|n| cmd::<bool>(n, &["EXISTS", "rl"]))
        .count()
        >= 2));
    // The scenario: held past its 900 ms TTL, which only the extension loop survives.
    std::thread::sleep(Duration::from_millis(1500));
    let held = nodes
        .iter()
        .filter(|n| cmd::<bool>(n, &["EXISTS", "rl"]))
        .count();
    assert!(held >= 2, "the RedLock was not extended: {held} nodes");

    let mut second = Command::new(env!("CARGO_BIN_EXE_distlock"));
    second.args([
        "run",
        "rl",
        "--redlock",
        &urls,
        "--wait",
        "300ms",
        "--verbose",
        "--",
        "true",
    ]);
    let out = output(second);
    assert_eq!(out.status.code(), Some(75), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("quorum"));

    let mut status = Command::new(env!("CARGO_BIN_EXE_distlock"));
    status.args(["status", "rl", "--redlock", &urls, "--json"]);
    let out = output(status);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["kind"], "redlock");
    let held_views = v[0]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["held"] == true)
        .count();
    assert!(held_views >= 2, "{v}");

    unsafe {
        libc::kill(holder.id() as libc::pid_t, libc::SIGTERM);
    }
    holder.wait().unwrap();
    for n in &nodes {
        let exists: bool = cmd(n, &["EXISTS", "rl"]);
        assert!(!exists, "released on every node");
    }
    let mut third = Command::new(env!("CARGO_BIN_EXE_distlock"));
    third.args(["run", "rl", "--redlock", &urls, "--", "true"]);
    assert_eq!(output(third).status.code(), Some(0));
}

/// `run`, `status` and `unlock --force` work on a Redis Cluster (`redis-cluster://` seed
/// nodes): the lock is on the master of its slot, with a token whose generation is that
/// node's config epoch.
#[test]
fn run_status_and_unlock_on_a_cluster() {
    let set = distlock_test::ClusterSet::start();
    let distlock = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
        c.env("DISTLOCK_URL", set.url())
            .env_remove("DISTLOCK_LOG")
            .args(args);
        c
    };
    let mut c = distlock(&["run", "on-cluster", "--", "sh", "-c"]);
    c.arg("echo token=$DISTLOCK_FENCING_TOKEN");
    let out = output(c);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let token: u128 = stdout
        .trim()
        .strip_prefix("token=")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no token: {stdout}"));
    assert!(token > 0);

    let mut held = distlock(&["run", "held-cluster", "--", "sleep", "30"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    assert!(wait_until(Duration::from_secs(5), || cmd::<bool>(
        set.node_for_key("held-cluster"),
        &["EXISTS", "held-cluster"]
    )));
    let status = output(distlock(&["status", "held-cluster"]));
    let forced = output(distlock(&["unlock", "--force", "held-cluster"]));
    let _ = held.kill();
    let _ = held.wait();
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{status:?}");
    assert!(stdout.contains("held"), "{stdout}");
    assert!(forced.status.success(), "{forced:?}");
    assert!(!cmd::<bool>(
        set.node_for_key("held-cluster"),
        &["EXISTS", "held-cluster"]
    ));
}

/// `run` started right after the master was killed waits, within `--wait`, for the sentinels
/// to promote a replica instead of failing on the first refused connection; a master name no
/// sentinel knows fails at once, without the connect-timeout wording.
#[test]
fn run_through_sentinel_follows_a_failover_under_way() {
    let mut set = distlock_test::SentinelSet::start();
    set.kill_master();
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
    c.env("DISTLOCK_URL", set.url())
        .env_remove("DISTLOCK_LOG")
        .args([
            "run",
            "during-failover",
            "--wait",
            "30s",
            "--",
            "echo",
            "GRANTED",
        ]);
    let out = output(c);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("GRANTED"), "{stdout}");

    let wrong = set
        .url()
        .replace(&format!("#{}", set.master_name()), "#nosuchmaster");
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
    c.env("DISTLOCK_URL", wrong)
        .env_remove("DISTLOCK_LOG")
        .args(["run", "x", "--wait", "30s", "--", "true"]);
    let started = std::time::Instant::now();
    let out = output(c);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(stderr.contains("nosuchmaster"), "{stderr}");
    assert!(!stderr.contains("connect timeout"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// `run` and `status` work through Redis Sentinel (`redis-sentinel://…#name`): the command
/// gets a fencing token, the lock is on the master the sentinels name, and `status` finds it.
#[test]
fn run_and_status_through_sentinel() {
    let set = distlock_test::SentinelSet::start();
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
    c.env("DISTLOCK_URL", set.url())
        .env_remove("DISTLOCK_LOG")
        .args(["run", "via-sentinel", "--", "sh", "-c"])
        .arg(
            "echo token=$DISTLOCK_FENCING_TOKEN; echo i64=$DISTLOCK_FENCING_TOKEN_I64; \
             redis-cli -p \"$0\" HLEN via-sentinel",
        )
        .arg(set.master_port().to_string());
    let out = output(c);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("token="), "{stdout}");
    assert!(!stdout.contains("token=\n"), "no token: {stdout}");
    // The 64-bit form fits a bigint: generation × 2^52 + sequence.
    let token: u128 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("token="))
        .unwrap()
        .parse()
        .unwrap();
    let i64_form: i64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("i64="))
        .unwrap()
        .parse()
        .unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(
        i64_form as u128,
        ((token >> 64) << 52) | (token & ((1 << 64) - 1)),
        "{stdout}"
    );
    // Owner field, token and holder metadata, on the master, while the command ran.
    assert!(stdout.lines().any(|l| l.trim() == "3"), "{stdout}");

    let held = {
        let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
        c.env("DISTLOCK_URL", set.url())
            .env_remove("DISTLOCK_LOG")
            .args(["run", "held-sentinel", "--", "sleep", "30"])
            .stdout(Stdio::null());
        c.spawn().unwrap()
    };
    let mut held = held;
    assert!(wait_until(Duration::from_secs(5), || cmd::<bool>(
        set.master(),
        &["EXISTS", "held-sentinel"]
    )));
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
    c.env("DISTLOCK_URL", set.url())
        .env_remove("DISTLOCK_LOG")
        .args(["status", "held-sentinel"]);
    let out = output(c);
    let _ = held.kill();
    let _ = held.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("held"), "{stdout}");
}

/// `--tls-ca-cert FILE` (or `$SSL_CERT_FILE`) checks a `rediss://` server against a private
/// CA; without it the server's certificate, signed by no public root, is refused.
#[test]
fn tls_ca_cert_trusts_a_private_ca() {
    let server = RedisServer::options().tls().start();
    let url = server.url().replace("#insecure", "");
    let ca = server.tls_ca_cert().unwrap();
    let run = |extra: &[&std::ffi::OsStr], env_ca: Option<&std::path::Path>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
        c.env("DISTLOCK_URL", &url)
            .env_remove("DISTLOCK_LOG")
            .env_remove("DISTLOCK_TLS_CA_CERT")
            .env_remove("SSL_CERT_FILE");
        if let Some(path) = env_ca {
            c.env("SSL_CERT_FILE", path);
        }
        c.args(extra).args(["run", "tls-ca", "--", "true"]);
        output(c)
    };
    let out = run(&["--tls-ca-cert".as_ref(), ca.as_os_str()], None);
    assert!(out.status.success(), "{out:?}");
    let out = run(&[], Some(&ca));
    assert!(out.status.success(), "SSL_CERT_FILE: {out:?}");
    let out = run(&[], None);
    assert!(!out.status.success(), "no CA: {out:?}");
}
