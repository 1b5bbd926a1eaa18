//! Shell completions, the manual page, and plain logs when stderr is not a terminal.

use std::process::Command;

use distlock_test::RedisServer;

use super::{distlock, output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_distlock"))
}

#[test]
fn completions_cover_every_subcommand_and_bash_parses_them() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = output({
            let mut c = bin();
            c.args(["completions", shell]);
            c
        });
        assert!(out.status.success(), "{shell}: {out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        for sub in ["run", "status", "unlock", "completions", "man"] {
            assert!(text.contains(sub), "{shell} completions lack {sub}");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("distlock.bash");
    let out = output({
        let mut c = bin();
        c.args(["completions", "bash"]);
        c
    });
    std::fs::write(&script, out.stdout).unwrap();
    let syntax = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(syntax.status.success(), "bash -n: {syntax:?}");
    let bad = output({
        let mut c = bin();
        c.args(["completions", "tcsh"]);
        c
    });
    assert_eq!(
        bad.status.code(),
        Some(2),
        "an unknown shell is a usage error"
    );
}

#[test]
fn the_manual_page_documents_the_commands() {
    let out = output({
        let mut c = bin();
        c.arg("man");
        c
    });
    assert!(out.status.success(), "{out:?}");
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains(".TH distlock 1"), "{page}");
    assert!(page.contains(".SH SUBCOMMANDS"), "{page}");
    for needle in ["distlock\\-run(1)", "distlock\\-status(1)", "DISTLOCK_URL"] {
        assert!(page.contains(needle), "man page lacks {needle}");
    }
    assert!(page.contains(".SH \"EXIT STATUS\""), "{page}");
    // Every page distlock(1) points to can be generated, with its exit status.
    let mut listed: Vec<String> = page
        .split("distlock\\-")
        .skip(1)
        .filter_map(|rest| rest.split_once("(1)").map(|(name, _)| name.to_string()))
        .filter(|name| name.chars().all(|c| c.is_ascii_lowercase()))
        .collect();
    listed.sort();
    listed.dedup();
    assert_eq!(
        listed,
        [
            "completions",
            "list",
            "man",
            "run",
            "status",
            "top",
            "unlock"
        ],
        "the operators' commands, and no others"
    );
    for name in &listed {
        let out = output({
            let mut c = bin();
            c.args(["man", name]);
            c
        });
        assert!(out.status.success(), "distlock man {name}: {out:?}");
        let sub = String::from_utf8(out.stdout).unwrap();
        assert!(
            sub.contains(&format!(".TH distlock-{name} 1")),
            "{name}: {sub}"
        );
        assert!(sub.contains(".SH \"EXIT STATUS\""), "{name}: {sub}");
        assert!(
            sub.contains("DISTLOCK_URL"),
            "{name}: the connection options"
        );
    }
    let run = output({
        let mut c = bin();
        c.args(["man", "run"]);
        c
    });
    let run = String::from_utf8(run.stdout).unwrap();
    assert!(run.contains("125"), "run's exit codes: {run}");
    assert!(run.contains(".SH \"ENVIRONMENT\""), "{run}");
    let bad = output({
        let mut c = bin();
        c.args(["man", "nope"]);
        c
    });
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
}

/// The installed command is the operators' tool only: the demo and the benchmark are
/// `distlock-bench`'s (a crate that is not published), so `distlock` refuses them as unknown.
#[test]
fn the_demo_and_the_benchmark_are_not_distlock_commands() {
    for sub in ["demo", "bench"] {
        let out = output({
            let mut c = bin();
            c.arg(sub);
            c.env_remove("DISTLOCK_URL");
            c
        });
        assert_eq!(out.status.code(), Some(2), "{sub}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("unrecognized subcommand"),
            "{sub}: {stderr}"
        );
    }
}

/// A command's `--help` lists its own options first and the connection options under their
/// own heading, and no environment variable is shown with a stray `=`.
#[test]
fn help_puts_a_commands_own_options_before_the_connection_options() {
    for sub in ["run", "status", "list", "top", "unlock"] {
        let out = output({
            let mut c = bin();
            c.args([sub, "--help"]);
            c.env_remove("DISTLOCK_URL");
            c
        });
        assert!(out.status.success(), "{sub}: {out:?}");
        let help = String::from_utf8(out.stdout).unwrap();
        let own = help.find("Options:").expect("an Options heading");
        let connection = help.find("Connection:").expect("a Connection heading");
        assert!(own < connection, "{sub}: {help}");
        assert!(
            help[connection..].contains("  --url <URL>"),
            "{sub}: {help}"
        );
        assert!(
            !help[..connection].contains("  --url <URL>"),
            "{sub}: {help}"
        );
        assert!(!help.contains("=]"), "{sub}: a stray '=' in {help}");
    }
}

/// A command's manual page lists its own options first in its SYNOPSIS, and the connection
/// options after them (OPTIONS and CONNECTION are sections of their own).
#[test]
fn man_pages_put_a_commands_own_options_before_the_connection_options() {
    for sub in ["run", "status", "list", "top", "unlock"] {
        let out = output({
            let mut c = bin();
            c.args(["man", sub]);
            c
        });
        assert!(out.status.success(), "{sub}: {out:?}");
        let page = String::from_utf8(out.stdout).unwrap();
        let synopsis = page
            .split(".SH SYNOPSIS")
            .nth(1)
            .and_then(|rest| rest.split(".SH").next())
            .expect("a SYNOPSIS");
        let help = synopsis.find("\\-\\-help").expect("--help");
        let url = synopsis.find("\\-\\-url").expect("--url");
        assert!(help < url, "{sub}: {synopsis}");
        if sub == "run" {
            for own in ["\\-\\-wait", "\\-\\-verbose", "\\-\\-semaphore"] {
                let at = synopsis.find(own).expect(own);
                assert!(at < url, "{sub}: {own} after --url in {synopsis}");
            }
        }
        let options = page.find(".SH OPTIONS").expect("OPTIONS");
        let connection = page.find(".SH CONNECTION").expect("CONNECTION");
        assert!(options < connection, "{sub}: {page}");
    }
}

/// An option set by its environment variable (`DISTLOCK_URL`) is not shown in a usage
/// error's usage line, as if it were required.
#[test]
fn a_usage_error_does_not_show_options_set_by_the_environment() {
    for args in [
        &["run"][..],
        &["status"][..],
        &["run", "x", "--read", "--write"][..],
    ] {
        let out = output({
            let mut c = bin();
            c.args(args)
                .env("DISTLOCK_URL", "redis://127.0.0.1:1/")
                .env("DISTLOCK_KEY_PREFIX", "app:");
            c
        });
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("Usage: distlock"), "{args:?}: {stderr}");
        assert!(!stderr.contains("--url"), "{args:?}: {stderr}");
        assert!(!stderr.contains("--key-prefix"), "{args:?}: {stderr}");
    }
}

#[test]
fn logs_have_no_colours_when_stderr_is_not_a_terminal() {
    // A server that may evict lock keys: the client warns at connect.
    let server = RedisServer::options()
        .arg("--maxmemory")
        .arg("100mb")
        .arg("--maxmemory-policy")
        .arg("allkeys-lru")
        .start();
    let mut c = distlock(&server);
    c.args(["status", "plain-logs"]);
    let out = output(c);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("WARN"), "a warning expected: {stderr}");
    assert!(
        !stderr.contains('\u{1b}'),
        "ANSI escape in piped logs: {stderr:?}"
    );
}
