//! Faults: the wrapper of `distlock run` killed with SIGKILL, its runtime's threads going
//! idle, and servers that do not answer (`--connect-timeout`, `--timeout`).

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use distlock_test::testing::{cmd, wait_until};
use distlock_test::RedisServer;

use super::{distlock, output};

/// The state letter of `/proc/<pid>/stat` (`R`, `S`, `Z`, …); `None` when the process is
/// gone.
pub(super) fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ppid …": comm may hold spaces and parentheses; the state follows the
    // last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().next()?.chars().next()
}

/// The parent pid from `/proc/<pid>/stat`.
fn proc_ppid(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Gone, or dead and waiting to be reaped (a zombie whose new parent, pid 1 in a container,
/// may never reap it): it runs no more.
pub(super) fn is_dead(pid: i32) -> bool {
    matches!(proc_state(pid), None | Some('Z') | Some('X'))
}

/// Read the pid the command wrote to `path` (at most 5 s).
pub(super) fn read_pid(path: &std::path::Path) -> i32 {
    let mut pid = None;
    assert!(
        wait_until(Duration::from_secs(5), || {
            pid = std::fs::read_to_string(path)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok());
            pid.is_some()
        }),
        "the command did not write its pid to {}",
        path.display()
    );
    pid.unwrap()
}

/// `kill -9` of the wrapper must not leave CMD running without the lock. On Linux
/// the command (the wrapper's direct child) gets SIGKILL when the wrapper dies.
#[cfg(target_os = "linux")]
#[test]
fn run_command_dies_with_a_killed_wrapper() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let mut c = distlock(&server);
    c.args(["run", "guarded", "--lease", "60s", "--", "sh", "-c"])
        .arg(format!("echo $$ > '{}'; exec sleep 60", pidfile.display()))
        .stdout(Stdio::null());
    let mut wrapper = c.spawn().expect("spawn distlock run");
    let pid = read_pid(&pidfile);
    // `exec sleep`: the pid is the command's, a direct child of the wrapper.
    assert!(
        wait_until(Duration::from_secs(5), || proc_ppid(pid)
            == Some(wrapper.id() as i32)
            && std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "sleep")),
        "pid {pid} is not the wrapper's `sleep` child"
    );
    assert!(!is_dead(pid));
    let exists: bool = cmd(&server, &["EXISTS", "guarded"]);
    assert!(exists, "the lock is held while the command runs");

    let killed = Instant::now();
    wrapper.kill().unwrap(); // SIGKILL: no cleanup in the wrapper
    wrapper.wait().unwrap();
    let gone = wait_until(Duration::from_secs(2), || is_dead(pid));
    let took = killed.elapsed();
    if !gone {
        // Do not leave a 60 s sleep behind when the test fails.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    assert!(
        gone,
        "the command (pid {pid}) still runs {took:?} after its wrapper was killed, without \
         the lock's owner (state {:?})",
        proc_state(pid)
    );
    eprintln!("the command died {took:?} after kill -9 of the wrapper");
    // The lock stays until its lease ends: nobody released it.
    let pttl: i64 = cmd(&server, &["PTTL", "guarded"]);
    assert!(pttl > 50_000, "{pttl}");
}

/// The spawning thread must live as long as the wrapper: PR_SET_PDEATHSIG fires when the
/// thread that forked the child exits. A tokio blocking-pool thread exits after 10 s idle,
/// which would kill a healthy command; it must run past that and exit normally.
#[cfg(target_os = "linux")]
#[test]
fn run_command_outlives_an_idle_runtime_thread() {
    let server = RedisServer::start();
    let mut c = distlock(&server);
    c.args(["run", "long", "--", "sh", "-c", "sleep 12; echo done"]);
    let out = output(c);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "done");
}

/// `--connect-timeout` bounds a connect to a server that accepts TCP and never
/// answers, and the error names the timeout.
#[test]
fn connect_timeout_bounds_a_silent_server() {
    // Accepted by the kernel (backlog), never read or answered; kept open to the end.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let url = format!("redis://127.0.0.1:{port}/");
    for how in ["flag", "env"] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
        c.env_remove("DISTLOCK_LOG")
            .env_remove("DISTLOCK_URL")
            .env_remove("DISTLOCK_CONNECT_TIMEOUT")
            .env_remove("DISTLOCK_TIMEOUT")
            .args(["--url", &url]);
        if how == "flag" {
            c.args(["--connect-timeout", "1s"]);
        } else {
            c.env("DISTLOCK_CONNECT_TIMEOUT", "1s");
        }
        c.args(["status", "x"]);
        let started = Instant::now();
        let out = output(c);
        let took = started.elapsed();
        eprintln!("{how}: a never-answering connect with --connect-timeout 1s took {took:?}");
        assert_eq!(out.status.code(), Some(1), "{how}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("connect timeout"), "{how}: {stderr}");
        assert!(stderr.contains("1s"), "{how}: {stderr}");
        assert!(took >= Duration::from_millis(900), "{how}: {took:?}");
        assert!(took < Duration::from_secs(4), "{how}: {took:?}");
    }
    drop(listener);
}

/// `--command-timeout` bounds each command: a server that stops answering after the lock was taken
/// delays the release by a few command timeouts, not by the 3 s default's.
#[test]
fn command_timeout_bounds_a_release_to_a_paused_server() {
    let server = RedisServer::start();
    let mut c = distlock(&server);
    c.env_remove("DISTLOCK_CONNECT_TIMEOUT")
        .env_remove("DISTLOCK_TIMEOUT")
        .args([
            "--command-timeout",
            "200ms",
            "--connect-timeout",
            "300ms",
            "run",
            "paused",
            "--lease",
            "60s",
            "--",
            "sleep",
            "2",
        ])
        .stderr(Stdio::piped());
    let started = Instant::now();
    let child = c.spawn().unwrap();
    assert!(wait_until(Duration::from_secs(5), || cmd::<bool>(
        &server,
        &["EXISTS", "paused"]
    )));
    server.pause();
    let out = child.wait_with_output().unwrap();
    let took = started.elapsed();
    server.resume();
    eprintln!("run with a paused server and --command-timeout 200ms took {took:?} (command: 2 s)");
    assert_eq!(
        out.status.code(),
        Some(0),
        "the command's code stands: {out:?}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("release"), "{stderr}");
    // The command's 2 s and about a second of resends at 200 ms each; with the 3 s default
    // timeout the release alone would take several times 3 s.
    assert!(took < Duration::from_secs(7), "{took:?}: {stderr}");
}

/// Zero and garbage are usage errors (exit 2), from the flag or the environment.
#[test]
fn timeouts_refuse_zero_and_garbage() {
    for args in [
        &["--connect-timeout", "0s"][..],
        &["--command-timeout", "0ms"][..],
        &["--command-timeout", "soon"][..],
    ] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
        c.env_remove("DISTLOCK_CONNECT_TIMEOUT")
            .env_remove("DISTLOCK_TIMEOUT")
            .args(args)
            .args(["status", "x"]);
        let out = output(c);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
    let mut c = Command::new(env!("CARGO_BIN_EXE_distlock"));
    c.env("DISTLOCK_TIMEOUT", "0s").args(["status", "x"]);
    assert_eq!(output(c).status.code(), Some(2));
}
