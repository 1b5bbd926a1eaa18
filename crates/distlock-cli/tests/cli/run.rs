//! `distlock run` runs CMD as a job (Linux): every process CMD starts stops when distlock
//! dies, loses the lock or sees CMD exit, and an interactive CMD has the terminal.

#![cfg(target_os = "linux")]

use std::process::Stdio;
use std::time::{Duration, Instant};

use distlock_test::testing::{cmd, wait_until};
use distlock_test::RedisServer;

use super::distlock;
use super::faults::{is_dead, proc_state, read_pid};
use super::tmux::Tmux;

/// The processes whose parent is `pid`, and theirs, …: (pid, command name).
fn descendants(pid: i32) -> Vec<(i32, String)> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // "pid (comm) S ppid …"
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let ppid = stat[close + 1..].split_whitespace().nth(1);
        if let Some(ppid) = ppid.and_then(|s| s.parse::<i32>().ok()) {
            all.push((p, ppid, comm));
        }
    }
    let mut found: Vec<(i32, String)> = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for (p, ppid, comm) in &all {
            if *ppid == parent && !is_dead(*p) {
                found.push((*p, comm.clone()));
                parents.push(*p);
            }
        }
    }
    found
}

/// Kill what a failed test left running, and say what that was.
fn still_running(procs: &[(i32, String)]) -> Vec<String> {
    procs
        .iter()
        .filter(|(p, _)| !is_dead(*p))
        .map(|(p, comm)| {
            let state = proc_state(*p);
            unsafe {
                libc::kill(*p, libc::SIGKILL);
            }
            format!("{p} {comm} ({state:?})")
        })
        .collect()
}

/// `kill -9` of distlock takes every process of the command with it, whatever the shell
/// makes of the string (dash forks even for a single simple command) and however deep:
/// nothing runs on while the lock is left to expire.
#[test]
fn a_killed_wrapper_takes_every_process_of_the_command_with_it() {
    let server = RedisServer::start();
    let forms: [(&[&str], usize); 4] = [
        (&["-c", "sleep 20"], 1),
        (&["-c", "sleep 20; true"], 1),
        (&["-c", "sleep 20 & wait"], 1),
        (&["--", "sh", "-c", "sleep 20 & sleep 20"], 2),
    ];
    let mut failures = Vec::new();
    for (i, (form, sleeps)) in forms.into_iter().enumerate() {
        let name = format!("killed-{i}");
        let mut c = distlock(&server);
        c.args(["--watchdog-lease", "3s", "run", &name])
            .args(form)
            .stdout(Stdio::null());
        let mut wrapper = c.spawn().expect("spawn distlock run");
        let wrapper_pid = wrapper.id() as i32;
        // Held, with every process of the command started (the guardian is among them).
        let mut procs = Vec::new();
        assert!(
            wait_until(Duration::from_secs(5), || {
                procs = descendants(wrapper_pid);
                procs.iter().filter(|(_, comm)| comm == "sleep").count() == sleeps
                    && cmd::<bool>(&server, &["EXISTS", &name])
            }),
            "{form:?}: not held with {sleeps} sleep(s) running: {procs:?}"
        );
        let killed = Instant::now();
        wrapper.kill().unwrap(); // SIGKILL: no cleanup in distlock
        wrapper.wait().unwrap();
        // Nobody released the lock: it is left to expire.
        assert!(cmd::<bool>(&server, &["EXISTS", &name]), "{form:?}");
        let gone = wait_until(Duration::from_secs(2), || {
            procs.iter().all(|(p, _)| is_dead(*p))
        });
        let left = still_running(&procs);
        if !gone {
            failures.push(format!(
                "{form:?}: {left:?} still ran {:?} after distlock was killed (of {procs:?})",
                killed.elapsed()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A lost lease stops the command's children too, at once: the SIGTERM goes to its whole
/// process group, not only to a direct child that ignores it.
#[test]
fn a_lost_lease_stops_the_commands_children_at_once() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let mut c = distlock(&server);
    c.args([
        "--watchdog-lease",
        "600ms",
        "run",
        "lost-tree",
        "--kill-after",
        "4s",
        "-c",
    ])
    // The grandchild keeps SIGTERM's default action; the shell then ignores it. Neither
    // holds distlock's stderr open.
    .arg(format!(
        "exec 2>/dev/null; sleep 20 & echo $! > '{}'; trap '' TERM; while :; do sleep 1; done",
        pidfile.display()
    ))
    .stderr(Stdio::piped());
    let mut wrapper = c.spawn().unwrap();
    let wrapper_pid = wrapper.id() as i32;
    let grandchild = read_pid(&pidfile);
    let procs = descendants(wrapper_pid);
    let deleted: i64 = cmd(&server, &["DEL", "lost-tree"]);
    assert_eq!(deleted, 1, "the lock key was not there");
    let lost = Instant::now();
    // Lost within a renewal (200 ms), then the group's SIGTERM.
    let stopped = wait_until(Duration::from_secs(2), || is_dead(grandchild));
    let took = lost.elapsed();
    // Past SIGKILL's --kill-after (4 s), never.
    let exited = wait_until(Duration::from_secs(10), || {
        wrapper.try_wait().unwrap().is_some()
    });
    if !exited {
        let _ = wrapper.kill();
    }
    let out = wrapper.wait_with_output().unwrap();
    // Every process of the command, and the guardian (told to exit), within a moment.
    let _ = wait_until(Duration::from_secs(1), || {
        procs.iter().all(|(p, _)| is_dead(*p))
    });
    let left = still_running(&procs);
    assert!(
        exited,
        "distlock still ran 10 s after the lease was lost: {out:?}"
    );
    assert!(
        stopped,
        "the grandchild {grandchild} still ran {took:?} after the lease was lost"
    );
    // The shell ignored SIGTERM: SIGKILL --kill-after later, to the whole group.
    assert_eq!(out.status.code(), Some(128 + libc::SIGKILL), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("lost"),
        "{out:?}"
    );
    assert!(left.is_empty(), "{left:?} still run after distlock exited");
}

/// What a command leaves running when it exits (a forgotten `&`) is killed before the lock
/// is released: released, the lock no longer protects it. The command's code stands.
#[test]
fn leftovers_of_a_command_that_exited_are_killed() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let mut c = distlock(&server);
    c.args(["run", "leftover", "-c"])
        .arg(format!(
            "sleep 20 & echo $! > '{}'; exit 3",
            pidfile.display()
        ))
        // Not pipes, which the leftover would hold open.
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let status = c.status().unwrap();
    assert_eq!(status.code(), Some(3), "{status:?}");
    let leftover = read_pid(&pidfile);
    let gone = wait_until(Duration::from_secs(1), || is_dead(leftover));
    let left = still_running(&[(leftover, "sleep".into())]);
    assert!(gone, "{left:?} still runs after distlock exited");
    assert!(!cmd::<bool>(&server, &["EXISTS", "leftover"]), "released");
}

/// In a terminal, under an interactive shell: the command reads the terminal (it is the
/// foreground job), Ctrl-Z stops it and the shell sees the job stopped, `fg` continues it,
/// Ctrl-C stops it and its background children (exit 130), and the terminal comes back to
/// distlock's process group after the command, for a script that goes on reading it.
#[test]
fn an_interactive_command_has_the_terminal_and_job_control() {
    let server = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let bin = env!("CARGO_BIN_EXE_distlock");
    let tmux = Tmux::start(
        "run",
        &format!(
            "env -u DISTLOCK_LOG DISTLOCK_URL={} PS1='$ ' bash --norc --noprofile",
            server.url()
        ),
    );
    let held = |name: &str| {
        assert!(
            wait_until(Duration::from_secs(5), || cmd::<bool>(
                &server,
                &["EXISTS", name]
            )),
            "{name} not taken; the screen:\n{}",
            tmux.screen()
        );
        // The command is past its start and waits in `read`.
        std::thread::sleep(Duration::from_millis(300));
    };

    // It reads the terminal: it is the foreground group.
    tmux.keys(&[
        &format!("{bin} run tty-read -- sh -c 'read line; echo \"got $line\"'; echo \"code1 $?\""),
        "Enter",
    ]);
    held("tty-read");
    tmux.keys(&["hello", "Enter"]);
    tmux.wait_for("the line read", |s| {
        s.contains("got hello") && s.contains("code1 0")
    });

    // Ctrl-Z stops the job (the shell says so); `fg` continues it, with the terminal.
    tmux.keys(&[
        &format!("{bin} run tty-stop -- sh -c 'read line; echo \"again $line\"'"),
        "Enter",
    ]);
    held("tty-stop");
    tmux.keys(&["C-z"]);
    tmux.wait_for("the job stopped", |s| s.contains("Stopped"));
    tmux.keys(&["fg", "Enter"]);
    std::thread::sleep(Duration::from_millis(300));
    tmux.keys(&["there", "Enter"]);
    tmux.wait_for("the line read after fg", |s| s.contains("again there"));
    tmux.keys(&["echo \"code2 $?\"", "Enter"]);
    tmux.wait_for("exit 0 after fg", |s| s.contains("code2 0"));

    // Ctrl-C: the command and what it started in the background.
    tmux.keys(&[
        &format!(
            "{bin} run tty-int -c 'sleep 30 & echo $! > {}; sleep 30'; echo \"code3 $?\"",
            pidfile.display()
        ),
        "Enter",
    ]);
    held("tty-int");
    let background = read_pid(&pidfile);
    tmux.keys(&["C-c"]);
    tmux.wait_for("exit 130", |s| s.contains("code3 130"));
    let gone = wait_until(Duration::from_secs(1), || is_dead(background));
    let left = still_running(&[(background, "sleep".into())]);
    assert!(gone, "{left:?} still runs after Ctrl-C");
    assert!(!cmd::<bool>(&server, &["EXISTS", "tty-int"]), "released");

    // A script that reads the terminal after `distlock run` has it back.
    tmux.keys(&[
        &format!("sh -c '{bin} run tty-back -- true; read y; echo \"then $y\"'"),
        "Enter",
    ]);
    std::thread::sleep(Duration::from_millis(500));
    tmux.keys(&["world", "Enter"]);
    tmux.wait_for("the script's read", |s| s.contains("then world"));
}
