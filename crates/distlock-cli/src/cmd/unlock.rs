//! `distlock unlock --force NAME`: delete a lock whoever holds it and wake its waiters
//! (Redisson's `forceUnlock`). The holder loses the lock without being asked.

use anyhow::{Context, Result};
use clap::Args;

use crate::connect::Options;

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
    let held = client
        .lock(args.name.as_str())
        .force_unlock()
        .await
        .with_context(|| format!("unlock {:?}", args.name))?;
    if held {
        println!("{}: unlocked", args.name);
    } else {
        println!("{}: was not locked", args.name);
    }
    Ok(0)
}
