//! `distlock unlock --force NAME`: delete a lock whoever holds it and wake its waiters
//! (Redisson's `forceUnlock`). The holder loses the lock without being asked.
//!
//! Only lock hashes are deleted (plain, fair and read-write locks, distlock's or Redisson's):
//! a key of another type, or a hash with fields no lock has (a user's data), is refused with
//! exit 1 and left unchanged, so a mistyped name cannot delete data. Job locks and semaphores
//! are not locks in this sense and are refused too.

use anyhow::{Context, Result};
use clap::Args;

use crate::connect::Options;
use crate::out::outln;

#[derive(Args, Debug)]
pub struct UnlockArgs {
    /// Lock name.
    pub name: String,
    /// Required: breaking another holder's lock is never done by accident.
    #[arg(long, required = true)]
    pub force: bool,
}

pub async fn run(opts: &Options, args: UnlockArgs) -> Result<u8> {
    let client = opts.client().await?;
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
    } else {
        outln!("{}: was not locked", args.name)?;
    }
    Ok(0)
}
