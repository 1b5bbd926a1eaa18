//! `distlock status NAME… [--json]`: holders with hold counts, TTL, fencing token, waiting
//! clients.

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use crate::connect::Options;

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Lock names.
    #[arg(required = true)]
    pub names: Vec<String>,
    /// Print one JSON array instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Holder {
    owner: String,
    hold_count: u64,
}

#[derive(Serialize)]
struct Row {
    name: String,
    key: String,
    held: bool,
    holders: Vec<Holder>,
    ttl_ms: Option<u64>,
    fencing_token: Option<u64>,
    fencing_counter: u64,
    waiting_clients: u64,
}

pub async fn run(opts: &Options, args: StatusArgs) -> Result<u8> {
    let client = opts.client().await?;
    let mut rows = Vec::new();
    for name in &args.names {
        let s = client
            .lock(name.as_str())
            .status()
            .await
            .with_context(|| format!("status of {name:?}"))?;
        rows.push(Row {
            held: !s.holders.is_empty(),
            holders: s
                .holders
                .into_iter()
                .map(|(owner, hold_count)| Holder { owner, hold_count })
                .collect(),
            ttl_ms: s.ttl.map(|t| t.as_millis() as u64),
            fencing_token: s.fencing_token.map(|t| t.get()),
            fencing_counter: s.fencing_counter,
            waiting_clients: s.subscribers,
            name: s.name,
            key: s.key,
        });
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(0);
    }
    for r in rows {
        if !r.held {
            println!("{}: free (fencing counter {})", r.name, r.fencing_counter);
            continue;
        }
        let ttl = r
            .ttl_ms
            .map(|ms| format!("{ms} ms"))
            .unwrap_or_else(|| "no TTL".into());
        println!("{}: held, TTL {ttl}", r.name);
        for h in &r.holders {
            println!("  owner {}  hold count {}", h.owner, h.hold_count);
        }
        match r.fencing_token {
            Some(t) => println!("  fencing token {t}"),
            None => println!("  fencing token: none (holder is not a distlock client)"),
        }
        println!("  waiting clients {}", r.waiting_clients);
    }
    Ok(0)
}
