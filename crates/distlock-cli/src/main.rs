//! `distlock`: run a command under a distributed lock, inspect and break locks. A thin layer over the `distlock` library: errors are `anyhow` here and
//! typed there; exit codes are documented in [`exit`].

// Doc comments of the arguments are also their `--help` text, written for a terminal
// (`[user][:password@]` is not a link, `<env>` not a tag).
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

// The connection arguments, exit codes and output helpers are also built into the
// unpublished `distlock-bench` (which includes these files by path): no library target of
// this crate is published for it.
mod args;
mod cmd;
mod connect;
mod exit;
mod out;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Distributed locks on Redis: run commands once at a time across hosts.
#[derive(Parser, Debug)]
#[command(name = "distlock", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    connection: args::ConnectionArgs,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a command while holding a lock; exit with the command's code (75 when the lock
    /// was not acquired in time, 125 when distlock itself failed).
    ///
    /// On Linux the command runs in a process group of its own, and every signal distlock
    /// sends it (forwarded SIGINT, SIGTERM, SIGHUP; a lost lease's SIGTERM and SIGKILL) goes
    /// to the whole group, so every process it starts stops with it (not those that leave
    /// the group: setsid, daemons). If distlock itself dies while the command runs (kill -9, the OOM
    /// killer, a crash), the whole group is killed with SIGKILL at once, so nothing of it runs
    /// on without the lock. What the command leaves running when it exits is killed (SIGKILL)
    /// before the lock is released; start a process meant to outlive it with `setsid -f`. In
    /// a terminal the command is the foreground job: it reads the terminal, and Ctrl-C and
    /// Ctrl-Z reach it. On other platforms only the command itself is signalled, and nothing
    /// stops it if distlock dies: it keeps running and the lock expires after its lease.
    #[command(after_help = cmd::run::AFTER_HELP)]
    Run(cmd::run::RunArgs),
    /// Show who holds locks, hold counts, TTLs and fencing tokens.
    Status(cmd::status::StatusArgs),
    /// List the locks, semaphores, latches and job locks on the server (bounded SCAN): kind,
    /// state, holder, how long held, TTL, waiting clients.
    List(cmd::list::ListArgs),
    /// A live view of the locks that matter now: held locks with holder, age and a TTL bar,
    /// waiting clients, new grants seen, leases lost. Keys: q or Esc quit, s sort, / filter.
    Top(cmd::top::TopArgs),
    /// Delete a lock whoever holds it, and wake its waiters.
    Unlock(cmd::unlock::UnlockArgs),
    /// Print a shell completion script: `distlock completions bash > /etc/bash_completion.d/distlock`
    /// (zsh: into a directory of `$fpath` as `_distlock`; fish: `~/.config/fish/completions/distlock.fish`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): `distlock man > distlock.1; man ./distlock.1`, or one
    /// command's: `distlock man run > distlock-run.1`.
    Man {
        /// The command whose page to print (distlock-COMMAND(1)); none: distlock(1).
        command: Option<String>,
    },
}

/// Whether the subcommand in `args` (the process's arguments, program name first) is `run`:
/// the first argument that is neither an option nor the value of a global option.
fn subcommand_is_run(args: impl IntoIterator<Item = std::ffi::OsString>) -> bool {
    use clap::CommandFactory;
    let mut takes_value: Vec<String> = Cli::command()
        .get_arguments()
        .filter(|a| a.get_action().takes_values())
        .filter_map(|a| a.get_long())
        .map(|long| format!("--{long}"))
        .collect();
    // The retired global `--timeout` (now `--command-timeout`) still had a value.
    takes_value.push("--timeout".into());
    let mut args = args.into_iter().skip(1);
    while let Some(arg) = args.next() {
        let Some(arg) = arg.to_str() else {
            return false;
        };
        if takes_value.iter().any(|t| t == arg) {
            args.next();
        } else if !arg.starts_with('-') {
            return arg == "run";
        }
    }
    false
}

/// Print clap's help, version or usage error as clap does. A usage error of `run` exits 125
/// like its other failures (CMD did not run), of the other commands 2.
fn usage_error(e: clap::Error) -> ExitCode {
    let e = if e.use_stderr() {
        retired_timeout_tip(usage_without_env(e))
    } else {
        e
    };
    // Help into a closed pipe (`distlock run --help | head -1`) is not an error.
    let _ = e.print();
    if !e.use_stderr() {
        return ExitCode::SUCCESS;
    }
    if subcommand_is_run(std::env::args_os()) {
        ExitCode::from(exit::RUN_FAILED)
    } else {
        ExitCode::from(exit::USAGE)
    }
}

/// `e` with the usage line clap gives when no environment variable is read: clap counts an
/// option set by its variable (`DISTLOCK_URL`) as given, and its usage line would show
/// `--url <URL>` as if it were required. The same error found again without the variables
/// replaces `e`; one caused by a variable's value (`DISTLOCK_TIMEOUT=0s`) stays as it is.
fn usage_without_env(e: clap::Error) -> clap::Error {
    use clap::CommandFactory;
    let without_env = Cli::command().mut_args(|a| a.env(None));
    match without_env.try_get_matches_from(std::env::args_os()) {
        Err(again) if again.kind() == e.kind() => again,
        _ => e,
    }
}

/// A tip for the retired global `--timeout`, which is `--command-timeout` now, while `run`'s
/// `--timeout` is flock's: how long to wait for the lock.
fn retired_timeout_tip(mut e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let retired = matches!(
        e.get(ContextKind::InvalidArg),
        Some(ContextValue::String(arg)) if arg == "--timeout" || arg.starts_with("--timeout=")
    );
    if e.kind() == ErrorKind::UnknownArgument && retired {
        // Not a guess of clap's (`--connect-timeout` is another bound).
        e.insert(
            ContextKind::SuggestedArg,
            ContextValue::String("--command-timeout".into()),
        );
        e.insert(
            ContextKind::Suggested,
            ContextValue::StyledStrs(vec![
                "--timeout was the timeout of one Redis command, now --command-timeout \
                 (DISTLOCK_TIMEOUT); `run NAME --timeout N` waits up to N for the lock, as \
                 flock's"
                    .into(),
            ]),
        );
    }
    e
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e),
    };
    // `run`'s own failures exit 125, distinct from the codes CMD exits with.
    let failed = if matches!(cli.command, Command::Run(_)) {
        exit::RUN_FAILED
    } else {
        exit::ERROR
    };
    // Completions and the manual page are rendered into memory, then written: a closed pipe
    // (`distlock man | head`) is not an error.
    let generated = match &cli.command {
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut out = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "distlock", &mut out);
            Some(Ok(out))
        }
        Command::Man { command } => {
            use clap::CommandFactory;
            match cmd::man::render(Cli::command(), command.as_deref()) {
                Ok(out) => Some(Ok(out)),
                Err(e) => {
                    eprintln!("distlock man: {e:#}");
                    return ExitCode::from(exit::USAGE);
                }
            }
        }
        _ => None,
    };
    if let Some(generated) = generated {
        use std::io::Write;
        let written = generated.and_then(|out| std::io::stdout().write_all(&out));
        return match written {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("distlock: cannot write the output: {e}");
                ExitCode::from(exit::ERROR)
            }
        };
    }
    out::init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            out::errln!("distlock: cannot start the async runtime: {e}");
            return ExitCode::from(failed);
        }
    };
    let result = runtime.block_on(async move {
        let opts = cli.connection.options()?;
        match cli.command {
            Command::Run(args) => cmd::run::run(&opts, args).await,
            Command::Status(args) => cmd::status::run(&opts, args).await,
            Command::List(args) => cmd::list::run(&opts, args).await,
            Command::Top(args) => cmd::top::run(&opts, args).await,
            Command::Unlock(args) => cmd::unlock::run(&opts, args).await,
            Command::Completions { .. } | Command::Man { .. } => unreachable!("handled before"),
        }
    });
    match result {
        Ok(code) => ExitCode::from(code),
        // A closed stdout ends a command quietly (see `out`).
        Err(e) if out::is_closed(&e) => ExitCode::SUCCESS,
        Err(e) => {
            out::errln!("distlock: {e:#}");
            ExitCode::from(failed)
        }
    }
}
