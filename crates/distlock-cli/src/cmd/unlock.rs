//! `distlock unlock --force NAME`: delete a lock whoever holds it and wake its waiters
//! (Redisson's `forceUnlock`). The holder loses the lock without being asked; a distlock
//! holder's lost signal fires at once.
//!
//! Only lock hashes are deleted (plain, fair and read-write locks, distlock's or Redisson's),
//! and job locks (`--env ENV`, or the key `job-lock:<env>:<name>`; ShedLock's values): a key
//! of another type, or a hash with fields no lock has (a user's data), is refused with exit 1
//! and left unchanged, so a mistyped name cannot delete data. Semaphores and latches are not
//! locks in this sense and are refused too.
//!
//! "was not locked" (exit 0) means that nothing of that name is held: a name with no lock
//! but job locks in some environment, or a key outside the key prefix, exits 1 with a hint.

use anyhow::{Context, Result};
use clap::Args;

use crate::cmd::status::{exists, job_environments, job_name};
use crate::connect::Options;
use crate::out::outln;

#[derive(Args, Debug)]
pub struct UnlockArgs {
    /// Lock name; with --env a job lock's name (or give the job lock's key,
    /// job-lock:<env>:<name>).
    pub name: String,
    /// Required: breaking another holder's lock is never done by accident.
    #[arg(long, required = true)]
    pub force: bool,
    /// The name is a job lock (`distlock run --at-most`) in this environment.
    #[arg(long)]
    pub env: Option<String>,
}

pub async fn run(opts: &Options, args: UnlockArgs) -> Result<u8> {
    let client = opts.client().await?;
    if let Some((env, job)) = job_name(args.env.as_deref(), &args.name) {
        return unlock_job(opts, &client, env, job).await;
    }
    // A plain or fair lock, else a read-write lock: each kind's force-unlock refuses the
    // other's hash.
    let mut result = client.lock(args.name.as_str()).force_unlock().await;
    if matches!(&result, Err(e) if e.kind() == distlock::ErrorKind::WrongType) {
        result = client.rw_lock(args.name.as_str()).force_unlock().await;
    }
    let held = match result {
        Ok(held) => held,
        Err(e) if e.kind() == distlock::ErrorKind::WrongType => {
            // The library's message (and its driver source) adds nothing here.
            anyhow::bail!(
                "{:?} is not a lock: the key holds another type (or a hash that is not a \
                 lock); nothing was deleted",
                args.name
            );
        }
        Err(e) => return Err(e).with_context(|| format!("unlock {:?}", args.name)),
    };
    if held {
        outln!("{}: unlocked", args.name)?;
        return Ok(0);
    }
    let envs = job_environments(opts, &client, &args.name).await?;
    if !envs.is_empty() {
        anyhow::bail!(
            "{:?} is no lock, but a job lock of that name exists in {}: nothing was deleted \
             (unlock it with --env {})",
            args.name,
            envs.iter()
                .map(|e| format!("environment {e:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            envs[0]
        );
    }
    if !opts.key_prefix.is_empty() && exists(&client, &args.name).await {
        anyhow::bail!(
            "nothing at {:?} (key prefix {:?}), but a key {:?} exists: nothing was deleted \
             (without --key-prefix?)",
            format!("{}{}", opts.key_prefix, args.name),
            opts.key_prefix,
            args.name
        );
    }
    outln!("{}: was not locked", args.name)?;
    Ok(0)
}

/// Force-unlock the job lock `job` of `env`; a free one whose name is held in another
/// environment exits 1.
async fn unlock_job(opts: &Options, client: &distlock::Client, env: &str, job: &str) -> Result<u8> {
    let lock = client.job_lock(job).environment(env);
    match lock.force_unlock().await {
        Ok(true) => {
            outln!("{job} ({}, {env}): unlocked", distlock::kind::JOB_LOCK)?;
            Ok(0)
        }
        Ok(false) => {
            let elsewhere: Vec<String> = job_environments(opts, client, job)
                .await?
                .into_iter()
                .filter(|e| e != env)
                .collect();
            if !elsewhere.is_empty() {
                anyhow::bail!(
                    "{job} (job, {env}) is not locked, but the job is locked in environment \
                     {}: nothing was deleted (use --env {})",
                    elsewhere.join(", "),
                    elsewhere[0]
                );
            }
            outln!(
                "{job} ({}, {env}): was not locked",
                distlock::kind::JOB_LOCK
            )?;
            Ok(0)
        }
        Err(e) if e.kind() == distlock::ErrorKind::WrongType => anyhow::bail!(
            "{:?} is not a job lock: the key holds another type or value; nothing was deleted",
            lock.key()
        ),
        Err(e) => Err(e).with_context(|| format!("unlock job {job:?} ({env})")),
    }
}
