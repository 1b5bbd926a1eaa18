//! `distlock run NAME [-w|--wait|--timeout 10s] [-n] [-E 75] [--verbose] [--lease 30s] [--on-lost term|ignore] [--kill-after 10s] -- CMD ARGS…`
//! `distlock run NAME [...] -c 'STRING'` (`sh -c`), or without a command: hold until signalled
//! `distlock run NAME --at-most 10m [--at-least 30s] [--env prod] [--keep-alive] -- CMD ARGS…`
//!
//! Lock mode (plain, `--fair`, `--read`, `--write`): acquire the lock (watchdog on unless
//! `--lease`), run CMD with the lock's name and the grant's fencing token in its environment
//! (`DISTLOCK_LOCK`, `DISTLOCK_FENCING_TOKEN`), forward SIGINT, SIGTERM and SIGHUP to it,
//! release when it exits and exit with its code. Not acquired in time: exit 75, silently as
//! `flock -E 75` is (one line on stderr with `--verbose`); errors always print. A lost lease
//! sends CMD SIGTERM (`--on-lost term`), and SIGKILL if it still runs `--kill-after` (10 s)
//! later, as coreutils' `timeout --kill-after` escalates.
//!
//! RedLock mode (`--redlock URL,URL,…`): the Redlock algorithm over independent masters,
//! TTL `--lease` (30 s), extended every third of it while CMD runs; no quorum within `--wait`
//! → exit 75.
//!
//! Job mode (`--at-most`, cron on many hosts): take the job lock `job-lock:<env>:NAME` if
//! free, without waiting (else exit 75 at once), run CMD, release with the ownership-checked
//! script (kept until `--at-least` has passed). As in ShedLock, `--at-most` passing does not
//! stop CMD unless `--on-lost term` is given.
//!
//! `DISTLOCK_FENCING_TOKEN` is set only where the guard has a token (`LockGuard`, which the
//! fair and read-write guards also give): not for job locks (ShedLock's have none), semaphore
//! permits (Redisson's `RPermitExpirableSemaphore` has none) or RedLocks (each node counts
//! its own tokens, not comparable across nodes). There it is removed from CMD's environment,
//! so that a value distlock inherited (a nested `distlock run`) is not taken for this lock's.
//!
//! The whole command (Linux): CMD runs in a process group of its own, and every process it
//! starts is in it unless it leaves (`setsid`, `setpgid`: daemons, `setsid -f`, the jobs of
//! an interactive shell). Every signal `run` sends — a forwarded SIGINT, SIGTERM or SIGHUP,
//! the SIGTERM of a lost lease, the SIGKILL of `--kill-after` — goes to that group, as
//! `kill -- -PGID` does, so `-c 'a; b'` and `-- sh -c 'x & y'` stop as a whole, not only
//! their shell (dash forks even for `-c 'single command'`: no `exec` is needed). When the
//! wrapper dies, however it dies (`kill -9`, the OOM killer, a crash), a guardian process
//! forked before CMD (in a session of its own, holding only the read end of a pipe whose
//! write end only the wrapper holds) sees the pipe's end and kills the group with SIGKILL;
//! CMD itself, the direct child, also has `PR_SET_PDEATHSIG` (SIGKILL, set before `exec`,
//! with a check that the wrapper had not already died). So nothing of CMD runs on without
//! the lock. When CMD exits, whatever it left running in its group (a forgotten `&`) is
//! killed with SIGKILL before the lock is released, as the lock would no longer protect
//! it; a process meant to outlive CMD leaves the group (`setsid -f server`). In a terminal,
//! CMD's group is the foreground job while it runs, as a shell would make it (see
//! `run/job.rs`): CMD reads the terminal, Ctrl-C and Ctrl-Z reach it, and the shell sees
//! the job stop and continue. On other platforms CMD is a plain child, signalled alone, and
//! there is no such guarantee: a killed wrapper leaves CMD running (the lock then expires
//! after its lease while CMD may still run).
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not the process.
//! CMD is spawned from the thread that polls [`run`]: the `block_on` thread (the main
//! thread) or a runtime worker, both of which live until the run is over. Never spawn it
//! from `spawn_blocking`: blocking-pool threads exit after 10 s idle, which would kill CMD.

use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use nix::sys::signal::Signal;
use tokio::signal::unix::{signal, SignalKind};

use crate::connect::Options;
use crate::exit;
use crate::out::errln;
use distlock::{Fenced, Lease, Release};

/// The sections of `distlock run --help` after the options: CMD's environment, exit status.
pub const AFTER_HELP: &str = "\
Environment of CMD:
  DISTLOCK_LOCK           the lock name
  DISTLOCK_FENCING_TOKEN  the fencing token of this grant, with a plain lock, --fair, --read
                          or --write: a number that grows with every grant of the lock, for
                          the resource to refuse writes from an older holder (Kleppmann, \"How
                          to do distributed locking\"). Not set with --at-most (ShedLock's job
                          locks have no token), --semaphore (permits of Redisson's
                          RPermitExpirableSemaphore have none) or --redlock (each node counts
                          its own tokens, not comparable across nodes); a value in distlock's
                          own environment is not passed on then.
  DISTLOCK_FENCING_TOKEN_I64
                          the same token as a signed 64-bit integer, ordered alike, for a
                          bigint column (on one server the same number; see the README's
                          Fencing tokens); where the other is set and the token fits.

Exit status:
  CMD's code  CMD ran and exited (the lock was released, or the release failed: a warning)
  75          the lock was not acquired within --wait (RedLock: no quorum), or the job lock
              is held elsewhere (like flock -E 75; -E N sets another); silent, as flock
              is, unless --verbose is given
  0           without a command: the lock was held until SIGINT, SIGTERM or SIGHUP and
              released (125 if it was lost meanwhile)
  125         distlock itself failed: a usage error, an unreachable server, a wrong password,
              bad input, a key of another type, a semaphore with another number of permits
              than --semaphore N without --set-permits (CMD did not run)
  126         CMD was found but could not be executed
  127         CMD was not found
  128+N       CMD died of signal N (143: SIGTERM, as after a lost lease; 137: SIGKILL,
              as when it outlived --kill-after)

125, 126 and 127 follow coreutils' timeout, env, nice and chroot, so that distlock's own
failures are not mistaken for CMD's exit 1 or 2.";

/// What to do when the lease is lost while the command runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum OnLost {
    /// Send the command SIGTERM (default): it no longer has the lock. SIGKILL follows if it
    /// still runs after --kill-after.
    Term,
    /// Let it run; only print a warning.
    Ignore,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Lock name.
    pub name: String,
    /// How long to wait for the lock (0: one attempt): a duration (`10s`, `1m 30s`) or a
    /// number of seconds (`10`, `0.5`), as flock's -w and --timeout.
    #[arg(
        short = 'w',
        long,
        visible_alias = "timeout",
        default_value = "10s",
        value_parser = crate::args::parse_wait
    )]
    pub wait: Duration,
    /// Do not wait: one attempt (--wait 0), as flock's -n.
    #[arg(short = 'n', long, visible_alias = "nb", conflicts_with = "wait")]
    pub nonblock: bool,
    /// Exit with N when the lock is not acquired (or the job lock is held elsewhere), as
    /// flock's -E. That exit is silent, as flock's, unless --verbose is given.
    #[arg(short = 'E', long, value_name = "N", default_value_t = exit::NOT_ACQUIRED)]
    pub conflict_exit_code: u8,
    /// Fixed lease: the lock expires after it and is not renewed. Without it the watchdog
    /// renews the lock while the command runs.
    #[arg(long, value_parser = crate::args::parse_duration)]
    pub lease: Option<Duration>,
    /// What to do if the lease is lost while the command runs [default: term; with
    /// --at-most: ignore].
    #[arg(long, value_enum)]
    pub on_lost: Option<OnLost>,
    /// With --on-lost term: send the command SIGKILL if it still runs this long after the
    /// SIGTERM of a lost lease [default: 10s]. Signals sent to distlock are forwarded as
    /// they are, without escalation.
    #[arg(long, value_name = "DURATION", value_parser = crate::args::parse_duration)]
    pub kill_after: Option<Duration>,
    /// Job mode: the lock lives at most this long (ShedLock's lockAtMostFor: `10m`, or
    /// ISO-8601 as ShedLock writes it, `PT10M`); never waits.
    #[arg(long, value_parser = crate::args::parse_duration, conflicts_with_all = ["lease", "wait"])]
    pub at_most: Option<Duration>,
    /// Job mode: keep the lock at least this long from the start (lockAtLeastFor).
    #[arg(long, value_parser = crate::args::parse_wait, requires = "at_most")]
    pub at_least: Option<Duration>,
    /// Job mode: the environment part of the key job-lock:<env>:NAME.
    #[arg(long, default_value = "default", requires = "at_most")]
    pub env: String,
    /// Job mode: extend the lock to --at-most every half of it while CMD runs.
    #[arg(long, requires = "at_most")]
    pub keep_alive: bool,
    /// RedLock mode: independent masters, comma-separated URLs.
    #[arg(long, value_delimiter = ',', conflicts_with = "at_most")]
    pub redlock: Vec<String>,
    /// Take a fair (FIFO) lock: waiters are served in arrival order.
    #[arg(long, conflicts_with_all = ["at_most", "redlock", "read", "write", "semaphore"])]
    pub fair: bool,
    /// Take the read side of a read-write lock (many readers at once), as flock's -s.
    #[arg(
        short = 's',
        long,
        visible_alias = "shared",
        conflicts_with_all = ["at_most", "redlock", "write", "semaphore"]
    )]
    pub read: bool,
    /// Take the write side of a read-write lock (one writer, no readers), as flock's -x
    /// beside -s. (Without --read or --write anywhere, a plain lock is the simpler choice.)
    #[arg(
        short = 'x',
        long,
        visible_alias = "exclusive",
        short_alias = 'e',
        conflicts_with_all = ["at_most", "redlock", "semaphore"]
    )]
    pub write: bool,
    /// Hold one leased permit of a semaphore with N permits: at most N of these commands at
    /// once across all hosts. The permit's lease (--lease, 30 s) is extended while CMD runs
    /// and returns by itself if this host dies. A semaphore that exists with another number
    /// of permits is refused (exit 125) unless --set-permits is given.
    #[arg(long, value_name = "N", conflicts_with_all = ["at_most", "redlock"])]
    pub semaphore: Option<u64>,
    /// With --semaphore N: make the semaphore's number of permits N even if it exists with
    /// another, as Redisson's RPermitExpirableSemaphore.setPermits does. Permits held now
    /// stay valid: a smaller number takes effect as they are given back.
    #[arg(long, requires = "semaphore")]
    pub set_permits: bool,
    /// Run STRING with `sh -c` instead of a command after `--`, as flock's -c. On Linux every
    /// process it starts (not only the shell) is stopped with it; no `exec` is needed.
    #[arg(
        short = 'c',
        long = "command",
        value_name = "STRING",
        conflicts_with = "command"
    )]
    pub shell: Option<String>,
    /// Say on stderr when the lock was not acquired (or the job ran elsewhere), as flock's
    /// --verbose. Without it that is told by the exit code alone (75, or -E N), so a cron
    /// job's losing hosts mail nothing; errors are always printed.
    #[arg(long)]
    pub verbose: bool,
    /// The command and its arguments (after `--`). Without one (and without -c), hold the
    /// lock until SIGINT, SIGTERM or SIGHUP, printing `<name> <fencing token>` when it is
    /// taken (as `etcdctl lock` does without a command).
    #[arg(last = true)]
    pub command: Vec<String>,
}

#[cfg(target_os = "linux")]
mod job;
/// Outside Linux: CMD is a plain child, signalled alone; nothing kills it if distlock dies.
#[cfg(not(target_os = "linux"))]
#[path = "plain.rs"]
mod job;

/// What [`job::Job::state`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    /// CMD stopped, by this signal (reported once per stop; Linux only).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Stopped(i32),
    /// CMD exited or died; not reaped yet ([`job::Job::finish`] does).
    Exited,
}

/// Why [`job::Job::spawn`] failed.
enum SpawnError {
    /// distlock could not set the job up (the guardian's pipe or fork): CMD did not start.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Setup(std::io::Error),
    /// CMD could not be spawned (not found, not executable).
    Command(std::io::Error),
}

/// `--redlock`: the RedLock over the given nodes, kept alive while CMD runs; `None` without a
/// quorum within `--wait` (said on stderr with `--verbose`, or when nodes failed).
async fn take_redlock(args: &RunArgs) -> Result<Option<distlock::RedLockGuard>> {
    {
        let ttl = args.lease.unwrap_or(Duration::from_secs(30));
        for url in &args.redlock {
            crate::connect::check_url(url)?;
        }
        let nodes = distlock::RedLockNodes::builder_from_urls(args.redlock.iter().cloned())
            .ttl(ttl)
            .build()
            .await
            .context("RedLock nodes")?;
        let redlock = nodes.lock(args.name.as_str());
        // No quorum, by contention or because nodes failed: exit 75 either way, naming each
        // failing node in the latter case.
        let (guard, why) = match redlock.try_acquire_for(args.wait).await {
            Ok(guard) => (guard, String::new()),
            Err(e) if e.kind() == distlock::ErrorKind::QuorumNotReached => {
                (None, format!(": {e:#}"))
            }
            Err(e) => return Err(anyhow::Error::new(e).context(format!("RedLock {:?}", args.name))),
        };
        // Contention is said with --verbose only; failing nodes always.
        if guard.is_none() && (args.verbose || !why.is_empty()) {
            errln!(
                "distlock: RedLock {:?} got no quorum of {} nodes within {}{why}",
                args.name,
                nodes.node_count(),
                humantime::format_duration(args.wait)
            );
        }
        let Some(mut guard) = guard else {
            return Ok(None);
        };
        // A watchdog extends it every third of the TTL while CMD runs.
        guard
            .keep_alive(ttl)
            .with_context(|| format!("RedLock {:?}", args.name))?;
        Ok(Some(guard))
    }
}

/// `--semaphore N`: a permit of the leased semaphore, kept alive while CMD runs; `None`
/// when none came within `--wait` (said on stderr with `--verbose`).
async fn take_permit(
    client: &distlock::Client,
    args: &RunArgs,
    permits: u64,
) -> Result<Option<distlock::LeasedPermit>> {
    {
        let lease = args.lease.unwrap_or(Duration::from_secs(30));
        let sem = client.leased_semaphore(args.name.as_str());
        let what = || format!("semaphore {:?}", args.name);
        if args.set_permits {
            let before = sem.set_permits(permits).await.with_context(what)?;
            if before != 0 && before != permits {
                errln!(
                    "distlock: semaphore {:?} resized from {before} to {permits} permits",
                    args.name
                );
            }
        } else if !sem.try_set_permits(permits).await.with_context(what)? {
            // It existed: its number of permits (available plus leased) must be N.
            let size = sem.total_permits().await.with_context(what)?;
            if size != permits {
                anyhow::bail!(
                    "semaphore {:?} has {size} permits, not {permits}: run with --semaphore \
                     {size}, or add --set-permits to make it {permits} (permits held now stay \
                     valid); nothing was changed",
                    args.name
                );
            }
        }
        let permit = sem
            .lease(lease)
            .try_acquire_for(args.wait)
            .await
            .with_context(|| format!("semaphore {:?}", args.name))?;
        if permit.is_none() && args.verbose {
            errln!(
                "distlock: no permit of semaphore {:?} within {}",
                args.name,
                humantime::format_duration(args.wait)
            );
        }
        let Some(mut permit) = permit else {
            return Ok(None);
        };
        // The client's watchdog extends the permit while CMD runs.
        permit
            .keep_alive(lease)
            .with_context(|| format!("semaphore {:?}", args.name))?;
        Ok(Some(permit))
    }
}

/// `--at-most`: the job lock, or `None` when another host runs the job (said on stderr with
/// `--verbose`).
async fn take_job(
    client: &distlock::Client,
    args: &RunArgs,
    at_most: Duration,
) -> Result<Option<distlock::JobGuard>> {
    {
        let mut job = client
            .job_lock(args.name.as_str())
            .environment(args.env.as_str())
            .at_most_for(at_most)
            .at_least_for(args.at_least.unwrap_or_default());
        if args.keep_alive {
            job = job.keep_alive();
        }
        let guard = job
            .try_acquire()
            .await
            .with_context(|| format!("job lock {:?}", args.name))?;
        if guard.is_none() && args.verbose {
            errln!(
                "distlock: job {:?} (env {}) is running elsewhere; skipped",
                args.name,
                args.env
            );
        }
        Ok(guard)
    }
}

/// A plain, fair, read or write lock's attempt within `--wait`: the guard, or `None` when it
/// was not acquired (said on stderr with `--verbose`).
fn acquired<G>(attempt: distlock::Result<Option<G>>, args: &RunArgs) -> Result<Option<G>> {
    let name = args.name.as_str();
    let guard = attempt.with_context(|| format!("lock {name:?}"))?;
    if guard.is_none() && args.verbose {
        errln!(
            "distlock: lock {name:?} not acquired within {}",
            humantime::format_duration(args.wait)
        );
    }
    Ok(guard)
}

/// How long CMD may outlive the SIGTERM of a lost lease before SIGKILL, by default.
const DEFAULT_KILL_AFTER: Duration = Duration::from_secs(10);

pub async fn run(opts: &Options, args: RunArgs) -> Result<u8> {
    let on_lost = args.on_lost.unwrap_or(if args.at_most.is_some() {
        OnLost::Ignore
    } else {
        OnLost::Term
    });
    if on_lost == OnLost::Ignore && args.kill_after.is_some() {
        anyhow::bail!(
            "--kill-after needs --on-lost term: with --on-lost ignore (the default with \
             --at-most) the command is not stopped when the lease is lost"
        );
    }
    let kill_after = args.kill_after.unwrap_or(DEFAULT_KILL_AFTER);
    let mut args = args;
    if args.nonblock {
        args.wait = Duration::ZERO;
    }
    if let Some(script) = args.shell.take() {
        args.command = vec!["sh".into(), "-c".into(), script];
    }
    // Handlers first: a signal arriving while the command starts is forwarded to it once it
    // runs, rather than killing the wrapper (the default action) and orphaning the command.
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;
    let signals = (&mut sigint, &mut sigterm, &mut sighup);
    if !args.redlock.is_empty() {
        let held = take_redlock(&args).await?;
        return under(&args, held, None, on_lost, kill_after, signals).await;
    }
    // Connecting counts against --wait too: a Sentinel deployment in the middle of a
    // failover is followed until its new master is named, for up to the longer of the two.
    let mut opts = opts.clone();
    opts.connect_timeout = opts.connect_timeout.max(args.wait);
    let client = opts.client().await?;
    if let Some(permits) = args.semaphore {
        let held = take_permit(&client, &args, permits).await?;
        return under(&args, held, None, on_lost, kill_after, signals).await;
    }
    if let Some(at_most) = args.at_most {
        let held = take_job(&client, &args, at_most).await?;
        return under(&args, held, None, on_lost, kill_after, signals).await;
    }
    // A plain, fair, read or write lock, each with its own guard type and fencing token.
    let name = args.name.as_str();
    if args.fair {
        let mut lock = client.fair_lock(name);
        if let Some(lease) = args.lease {
            lock = lock.lease(lease);
        }
        return locked(
            &args,
            lock.try_acquire_for(args.wait).await,
            on_lost,
            kill_after,
            signals,
        )
        .await;
    }
    if args.read || args.write {
        let mut rw = client.rw_lock(name);
        if let Some(lease) = args.lease {
            rw = rw.lease(lease);
        }
        if args.read {
            return locked(
                &args,
                rw.try_read_for(args.wait).await,
                on_lost,
                kill_after,
                signals,
            )
            .await;
        }
        return locked(
            &args,
            rw.try_write_for(args.wait).await,
            on_lost,
            kill_after,
            signals,
        )
        .await;
    }
    let mut lock = client.lock(name);
    if let Some(lease) = args.lease {
        lock = lock.lease(lease);
    }
    locked(
        &args,
        lock.try_acquire_for(args.wait).await,
        on_lost,
        kill_after,
        signals,
    )
    .await
}

/// Run CMD under a lock of the lock family (`attempt`: its acquire's outcome), with the
/// grant's fencing token.
async fn locked<G: Lease + Release<Released = ()> + Fenced>(
    args: &RunArgs,
    attempt: distlock::Result<Option<G>>,
    on_lost: OnLost,
    kill_after: Duration,
    signals: Signals<'_>,
) -> Result<u8> {
    let held = acquired(attempt, args)?;
    let token = held.as_ref().map(|g| g.fencing_token());
    under(args, held, token, on_lost, kill_after, signals).await
}

/// The signals `run` forwards to CMD: SIGINT, SIGTERM, SIGHUP.
type Signals<'a> = (
    &'a mut tokio::signal::unix::Signal,
    &'a mut tokio::signal::unix::Signal,
    &'a mut tokio::signal::unix::Signal,
);

/// Run CMD under `held` (any [`distlock::Lease`]; `None`: not acquired, exit with the
/// conflict code), with the lock's fencing `token` where its kind has one (see the module
/// docs), or hold it until signalled when there is no command.
async fn under<L: Lease + Release<Released = ()>>(
    args: &RunArgs,
    held: Option<L>,
    token: Option<distlock::FencingToken>,
    on_lost: OnLost,
    kill_after: Duration,
    (sigint, sigterm, sighup): Signals<'_>,
) -> Result<u8> {
    let Some(held) = held else {
        return Ok(args.conflict_exit_code);
    };
    if args.command.is_empty() {
        return hold(&args.name, held, token, (sigint, sigterm, sighup)).await;
    }
    let mut command = std::process::Command::new(&args.command[0]);
    command
        .args(&args.command[1..])
        .env("DISTLOCK_LOCK", &args.name);
    match token {
        Some(token) => {
            command.env("DISTLOCK_FENCING_TOKEN", token.to_string());
            match token.as_i64() {
                Some(t) => command.env("DISTLOCK_FENCING_TOKEN_I64", t.to_string()),
                None => command.env_remove("DISTLOCK_FENCING_TOKEN_I64"),
            };
        }
        // No token (see the module docs): none inherited either.
        None => {
            command.env_remove("DISTLOCK_FENCING_TOKEN");
            command.env_remove("DISTLOCK_FENCING_TOKEN_I64");
        }
    }
    // Registered before CMD exists: none of its state changes is missed.
    let mut sigchld = signal(SignalKind::child())?;
    // Spawned from this task's thread (see the module docs): not from spawn_blocking.
    let mut job = match job::Job::spawn(command) {
        Ok(job) => job,
        Err(SpawnError::Command(e)) => {
            errln!("distlock: cannot run {:?}: {e}", args.command[0]);
            held.release().await.ok();
            return Ok(if e.kind() == std::io::ErrorKind::NotFound {
                exit::NOT_FOUND
            } else {
                exit::CANNOT_EXEC
            });
        }
        Err(SpawnError::Setup(e)) => {
            held.release().await.ok();
            return Err(anyhow::Error::new(e).context("cannot start the command's guardian"));
        }
    };
    let mut lost_seen = false;
    // When CMD gets SIGKILL for outliving the SIGTERM of a lost lease.
    let mut kill_at: Option<tokio::time::Instant> = None;
    let status = loop {
        match job.state()? {
            State::Exited => break job.finish()?,
            State::Stopped(sig) => {
                job.follow_stop(sig);
                continue;
            }
            State::Running => {}
        }
        let kill_sleep =
            tokio::time::sleep_until(kill_at.unwrap_or_else(tokio::time::Instant::now));
        tokio::select! {
            _ = sigchld.recv() => {}
            _ = kill_sleep, if kill_at.is_some() => {
                kill_at = None;
                errln!(
                    "distlock: the command still ran {} after SIGTERM: killed it (SIGKILL)",
                    humantime::format_duration(kill_after)
                );
                job.signal(Signal::SIGKILL);
            }
            _ = sigint.recv() => job.signal(Signal::SIGINT),
            _ = sigterm.recv() => job.signal(Signal::SIGTERM),
            _ = sighup.recv() => job.signal(Signal::SIGHUP),
            _ = held.lost(), if !lost_seen => {
                lost_seen = true;
                errln!("distlock: the lease on {:?} was lost while the command ran", args.name);
                if on_lost == OnLost::Term {
                    job.signal(Signal::SIGTERM);
                    // `None` (never) for a --kill-after past the clock's range.
                    kill_at = tokio::time::Instant::now().checked_add(kill_after);
                }
            }
        }
    };
    match held.release().await {
        // A lost lease was said above: its release finding the lock gone is no news (one
        // finding another holder's lock, left alone, still is).
        Err(e) if lost_seen && e.not_held_reason() == Some(distlock::NotHeldReason::Gone) => {}
        // The command's result stands; the lock was lost or already gone, and another
        // holder's lock was left alone.
        Err(e) => errln!("distlock: release of {:?}: {e:#}", args.name),
        Ok(()) => {}
    }
    Ok(exit_code(status))
}

/// Without a command: print `<name> <token>` (`<name>` where the kind has no token), then
/// hold the lock until SIGINT, SIGTERM or SIGHUP (release, exit 0) or until it is lost (exit
/// 125, as distlock could not keep it).
async fn hold<L: Lease + Release<Released = ()>>(
    name: &str,
    held: L,
    token: Option<distlock::FencingToken>,
    (sigint, sigterm, sighup): Signals<'_>,
) -> Result<u8> {
    match token {
        Some(token) => crate::out::outln!("{name} {token}")?,
        None => crate::out::outln!("{name}")?,
    }
    let lost = tokio::select! {
        _ = sigint.recv() => false,
        _ = sigterm.recv() => false,
        _ = sighup.recv() => false,
        _ = held.lost() => true,
    };
    if lost {
        errln!("distlock: the lease on {name:?} was lost");
        return Ok(exit::RUN_FAILED);
    }
    if let Err(e) = held.release().await {
        errln!("distlock: release of {name:?}: {e:#}");
        return Ok(exit::RUN_FAILED);
    }
    Ok(0)
}

fn exit_code(status: std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(sig)) => exit::SIGNAL_BASE.saturating_add(sig as u8),
        (None, None) => exit::RUN_FAILED,
    }
}
