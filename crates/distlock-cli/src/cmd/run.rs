//! `distlock run NAME [--wait 10s] [--lease 30s] [--on-lost term|ignore] -- CMD ARGS…`
//!
//! Acquire the lock (watchdog on unless `--lease`), run CMD with the lock's name and fencing
//! token in its environment (`DISTLOCK_LOCK`, `DISTLOCK_FENCING_TOKEN`), forward SIGINT,
//! SIGTERM and SIGHUP to it, release when it exits and exit with its code. Not acquired in
//! time: exit 75 with one line on stderr, like `flock -E 75`.

use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use tokio::signal::unix::{signal, SignalKind};

use crate::connect::Options;
use crate::exit;

/// What to do when the lease is lost while the command runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnLost {
    /// Send the command SIGTERM (default): it no longer has the lock.
    Term,
    /// Let it run; only print a warning.
    Ignore,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Lock name.
    pub name: String,
    /// How long to wait for the lock (0: one attempt).
    #[arg(long, default_value = "10s", value_parser = crate::parse_wait)]
    pub wait: Duration,
    /// Fixed lease: the lock expires after it and is not renewed. Without it the watchdog
    /// renews the lock while the command runs.
    #[arg(long, value_parser = crate::parse_duration)]
    pub lease: Option<Duration>,
    /// What to do if the lease is lost while the command runs.
    #[arg(long, value_enum, default_value = "term")]
    pub on_lost: OnLost,
    /// The command and its arguments (after `--`).
    #[arg(required = true, last = true)]
    pub command: Vec<String>,
}

fn send_signal(pid: Option<u32>, sig: libc::c_int) {
    if let Some(pid) = pid {
        // SAFETY: kill(2) has no memory-safety preconditions; the pid is our own child's.
        unsafe {
            libc::kill(pid as libc::pid_t, sig);
        }
    }
}

pub async fn run(opts: &Options, args: RunArgs) -> Result<u8> {
    let client = opts.client().await?;
    let mut lock = client.lock(args.name.as_str());
    if let Some(lease) = args.lease {
        lock = lock.lease(lease);
    }
    let Some(guard) = lock
        .try_acquire_for(args.wait)
        .await
        .with_context(|| format!("lock {:?}", args.name))?
    else {
        eprintln!(
            "distlock: lock {:?} not acquired within {}",
            args.name,
            humantime::format_duration(args.wait)
        );
        return Ok(exit::NOT_ACQUIRED);
    };

    let mut child = match tokio::process::Command::new(&args.command[0])
        .args(&args.command[1..])
        .env("DISTLOCK_LOCK", &args.name)
        .env("DISTLOCK_FENCING_TOKEN", guard.fencing_token().to_string())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("distlock: cannot run {:?}: {e}", args.command[0]);
            guard.release().await.ok();
            return Ok(exit::CANNOT_EXEC);
        }
    };
    let pid = child.id();
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    let mut lost_seen = false;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status?,
            _ = sigint.recv() => send_signal(pid, libc::SIGINT),
            _ = sigterm.recv() => send_signal(pid, libc::SIGTERM),
            _ = sighup.recv() => send_signal(pid, libc::SIGHUP),
            _ = guard.lost(), if !lost_seen => {
                lost_seen = true;
                eprintln!("distlock: the lease on {:?} was lost while the command ran", args.name);
                if args.on_lost == OnLost::Term {
                    send_signal(pid, libc::SIGTERM);
                }
            }
        }
    };
    if let Err(e) = guard.release().await {
        // The command's result stands; the lock was lost or already gone.
        eprintln!("distlock: release of {:?}: {e}", args.name);
    }
    Ok(exit_code(status))
}

fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(sig)) => exit::SIGNAL_BASE.saturating_add(sig as u8),
        (None, None) => exit::ERROR,
    }
}
