//! A terminal for tests of interactive use: tmux, with its screen read and keys sent.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A tmux server of one test's own (its own socket), stopped when dropped.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// Start `command` in a detached 160×30 session, on a server named after `test` (one
    /// per test: tests run at once in one process).
    pub fn start(test: &str, command: &str) -> Tmux {
        let socket = format!("distlock-{test}-{}", std::process::id());
        let tmux = Tmux { socket };
        let out = tmux.run(&[
            "new-session",
            "-d",
            "-s",
            "main",
            "-x",
            "160",
            "-y",
            "30",
            command,
        ]);
        assert!(out.status.success(), "tmux new-session: {out:?}");
        tmux
    }

    pub fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run tmux ({e}): install it (Debian: apt-get install tmux)")
            })
    }

    /// What the pane shows now.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "main"]).stdout)
            .into_owned()
    }

    /// Wait (at most 20 s) until the screen satisfies `ok`; the last screen.
    pub fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if ok(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "{what} not seen; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "main"];
        args.extend_from_slice(keys);
        assert!(self.run(&args).status.success());
    }

    pub fn alive(&self) -> bool {
        self.run(&["has-session", "-t", "main"]).status.success()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}
