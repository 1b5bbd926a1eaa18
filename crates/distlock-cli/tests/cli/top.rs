//! `distlock top`: the live view in a real terminal (tmux), and `--once --json` for scripts.

use std::time::Duration;

use distlock_test::testing::{cmd, wait_until};
use distlock_test::RedisServer;
use serde_json::Value;

use super::tmux::Tmux;
use super::{distlock, hold, hold_until_key, output};

#[test]
fn top_shows_holders_sorts_filters_and_sees_a_lost_lease_in_a_terminal() {
    let server = RedisServer::start();
    let mut alpha = hold_until_key(&server, &["alpha"], "alpha");
    let mut beta = hold_until_key(&server, &["beta"], "beta");
    let tmux = Tmux::start(
        "top",
        &format!(
            "env DISTLOCK_URL={} {} top --interval 300ms",
            server.url(),
            env!("CARGO_BIN_EXE_distlock")
        ),
    );
    let pid = format!("pid {}", alpha.id());
    let screen = tmux.wait_for("alpha's holder", |s| {
        s.contains("alpha") && s.contains(&pid)
    });
    assert!(screen.contains("distlock top"), "{screen}");
    assert!(screen.contains("sort: hot"), "{screen}");
    // The key line names every way out, Esc included.
    assert!(screen.contains("q/Esc quit"), "{screen}");
    assert!(
        screen.contains("HOLDER") && screen.contains("TTL"),
        "{screen}"
    );
    let row = screen.lines().find(|l| l.contains("alpha")).unwrap();
    assert!(row.contains('█'), "a TTL bar: {row}");

    // A lock whose lease (1 s, no watchdog) runs out while its holder still runs. The
    // holder ignores the loss (no release racing the expiry: a release just before it, at a
    // refresh that saw more TTL left than the next refresh came after, is not a lapse).
    let mut gamma = hold(&server, &["--lease", "1s", "--on-lost", "ignore", "gamma"]);
    tmux.wait_for("the lost lease", |s| s.contains("lease lost: gamma"));

    tmux.keys(&["s"]);
    tmux.wait_for("the next sort order", |s| s.contains("sort: name"));
    tmux.keys(&["/", "b", "e", "t", "a", "Enter"]);
    let screen = tmux.wait_for("the filter", |s| {
        s.contains("filter: beta") && !s.lines().any(|l| l.contains("alpha"))
    });
    assert!(
        screen
            .lines()
            .any(|l| l.contains("beta") && l.contains("held")),
        "{screen}"
    );
    // The header counts the rows the filter keeps (of alpha, beta and gamma), not all.
    assert!(screen.contains("1 shown of 3, 1 held, "), "{screen}");

    tmux.keys(&["q"]);
    assert!(
        wait_until(Duration::from_secs(5), || !tmux.alive()),
        "q did not quit: {}",
        tmux.screen()
    );
    for c in [&mut alpha, &mut beta, &mut gamma] {
        let _ = c.kill();
        let _ = c.wait();
    }
}

#[test]
fn top_once_json_counts_a_lost_lease_and_the_next_holder() {
    let server = RedisServer::start();
    // The first holder's lease (3 s) runs out; the waiter takes the lock after it.
    let mut first = hold_until_key(&server, &["--lease", "3s", "contended"], "contended");
    let mut next = hold(&server, &["--wait", "30s", "contended"]);
    let mut c = distlock(&server);
    c.args(["top", "--once", "--json", "--interval", "4s"]);
    let out = output(c);
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["leases_lost"], 1, "{v:#}");
    assert_eq!(v["lost"][0]["name"], "contended");
    assert!(
        v["lost"][0]["holder"]
            .as_str()
            .unwrap()
            .contains(&format!("pid {}", first.id())),
        "{v:#}"
    );
    let row = &v["rows"][0];
    assert_eq!(row["name"], "contended");
    assert_eq!(row["holder"]["pid"], next.id(), "{v:#}");
    assert_eq!(row["grants_seen"], 1);
    assert!(cmd::<bool>(&server, &["EXISTS", "contended"]));
    for c in [&mut first, &mut next] {
        let _ = c.kill();
        let _ = c.wait();
    }
}

#[test]
fn top_without_a_terminal_asks_for_once_or_json() {
    let server = RedisServer::start();
    let mut c = distlock(&server);
    c.arg("top");
    let out = output(c);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--once") && stderr.contains("--json"),
        "{stderr}"
    );
}
