//! `distlock list [PATTERN] [--json]`: every lock-family key on the server (every master of
//! a Cluster) — plain, fair and read-write locks, semaphores, latches, job locks — with its
//! kind, state, holder (application, host, process id), how long it has been held, TTL and
//! waiting clients; sorted, with a count. Bounded: `SCAN` looks at `--examine` keys per
//! master at most and `--limit` keys are read, so it is safe on a production server.

use anyhow::Result;
use clap::Args;
use comfy_table::{CellAlignment, Table};

use super::inventory::{self, Entry, Inventory, Query};
use crate::connect::Options;
use crate::out::{errln, outln};

/// Arguments of `distlock list`.
#[derive(Args, Debug)]
pub struct ListArgs {
    /// Only names matching this glob (`*`, `?`, `[abc]`, `\` escapes, as Redis's `SCAN
    /// MATCH`): lock names, or job names of job locks. Default: every name.
    pub pattern: Option<String>,
    /// Print one JSON object (`entries`, counts) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Order of the rows.
    #[arg(long, value_enum, default_value_t = Sort::Name)]
    pub sort: Sort,
    /// Keys the scan looks at per master, at most (`SCAN` calls of `COUNT 1000`; about 1 ms
    /// of server time per call).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub examine: u64,
    /// Entries listed at most: keys are read in name order (a few round trips each) until
    /// this many locks, semaphores, latches and job locks are found.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: u64,
    /// Also list integer keys that nothing marks as a semaphore or latch (no waiters on
    /// their channels, no leases): they may be the application's counters. A PATTERN that
    /// names one key lists it whatever it is.
    #[arg(long)]
    pub all: bool,
}

/// Row order of `list` (and the initial order of `top`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Sort {
    /// By name.
    #[default]
    Name,
    /// Longest held first.
    Age,
    /// Shortest TTL first (leases about to run out).
    Ttl,
    /// Most waiting clients first.
    Waiting,
}

impl Sort {
    /// How `a` and `b` compare in this order (`Equal` for `Name`: a stable sort keeps the
    /// name order the entries come in).
    pub fn compare(self, a: &Entry, b: &Entry) -> std::cmp::Ordering {
        let held_for = |e: &Entry| e.holder.as_ref().map_or(0, |h| h.held_for_ms);
        let ttl = |e: &Entry| e.ttl_ms.unwrap_or(u64::MAX);
        match self {
            Sort::Name => std::cmp::Ordering::Equal,
            Sort::Age => held_for(b).cmp(&held_for(a)),
            Sort::Ttl => ttl(a).cmp(&ttl(b)),
            Sort::Waiting => b.waiting.cmp(&a.waiting),
        }
    }

    /// Sort `entries`, which come sorted by name, in this order (ties stay by name).
    pub fn apply(self, entries: &mut [Entry]) {
        entries.sort_by(|a, b| self.compare(a, b));
    }
}

pub async fn run(opts: &Options, args: ListArgs) -> Result<u8> {
    let client = opts.client().await?;
    let query = Query {
        key_prefix: opts.key_prefix.clone(),
        pattern: args.pattern.clone(),
        examine: args.examine as usize,
        limit: args.limit as usize,
        all: args.all,
    };
    let mut found = inventory::scan(&client, &query).await?;
    args.sort.apply(&mut found.entries);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&found)?)?;
    } else {
        outln!("{}{}", table(&found.entries), summary(&found))?;
    }
    for e in &found.errors {
        errln!("distlock: {}: {}", e.key, e.error);
    }
    Ok(if found.errors.is_empty() {
        0
    } else {
        crate::exit::ERROR
    })
}

/// The rows as a table with a header, or nothing when there are none.
pub fn table(entries: &[Entry]) -> String {
    if entries.is_empty() {
        return String::new();
    }
    let mut table = Table::new();
    table.load_style(comfy_table::presets::NOTHING).set_header([
        "NAME", "KIND", "STATE", "HOLDER", "HELD FOR", "TTL", "WAITING",
    ]);
    for e in entries {
        table.add_row(e.cells());
    }
    if let Some(c) = table.column_mut(6) {
        c.set_cell_alignment(CellAlignment::Right);
    }
    table.trim_fmt();
    format!("{table}\n")
}

/// `3 locks (2 held), 1 job lock (1 held), 2 semaphores; 40 other keys not shown`.
pub fn summary(found: &Inventory) -> String {
    let mut counts: Vec<(inventory::Kind, usize, usize)> = Vec::new();
    for e in &found.entries {
        match counts.iter_mut().find(|(k, _, _)| *k == e.kind) {
            Some((_, n, held)) => {
                *n += 1;
                *held += usize::from(e.held);
            }
            None => counts.push((e.kind, 1, usize::from(e.held))),
        }
    }
    counts.sort();
    let mut parts: Vec<String> = counts
        .iter()
        .map(|&(kind, n, held)| {
            if kind.is_lock() {
                format!("{} ({held} held)", inventory::count(kind, n))
            } else {
                inventory::count(kind, n)
            }
        })
        .collect();
    if parts.is_empty() {
        parts.push("no locks".into());
    }
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let mut line = parts.join(", ");
    line.push_str(&format!(
        "; {} other key{} not shown",
        found.other_keys,
        plural(found.other_keys)
    ));
    if found.unmarked_integers > 0 {
        line.push_str(&format!(
            " ({} integer key{} with no sign of a semaphore or latch: --all lists them)",
            found.unmarked_integers,
            plural(found.unmarked_integers)
        ));
    }
    if found.unread_keys > 0 {
        line.push_str(&format!(
            "; {} more key{} not read (--limit)",
            found.unread_keys,
            plural(found.unread_keys)
        ));
    }
    if !found.complete {
        line.push_str("; the scan stopped at --examine keys per master: more may exist");
    }
    if !found.errors.is_empty() {
        line.push_str(&format!("; {} unreadable (see stderr)", found.errors.len()));
    }
    line
}
