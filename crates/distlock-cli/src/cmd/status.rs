//! `distlock status NAME… [--json] [--env ENV] [--watch [INTERVAL]]`: holders with hold
//! counts, TTL, fencing token, waiting clients, and for a plain or fair lock held by a
//! distlock client who holds it (application, host, process id, for how long); for job locks
//! (`--env`, a name `job-lock:<env>:<job>`, or a name with no key of its own found as
//! `job-lock:*:<name>` by a bounded `SCAN`) the holder's host and the time it took the lock.
//! A name that cannot be read is reported on stderr and the others are still shown (exit
//! code 1).

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;

use super::inventory::{self, glob_escape, Entry, Holder, Kind};
use crate::connect::Options;
use crate::out::{errln, outln};

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// Lock names.
    #[arg(required = true)]
    pub names: Vec<String>,
    /// Print one JSON array instead of text.
    #[arg(long)]
    pub json: bool,
    /// The names are job locks (`distlock run --at-most`) in this environment.
    #[arg(long)]
    pub env: Option<String>,
    /// The names are RedLocks over these independent masters (comma-separated URLs): show
    /// each node's view.
    #[arg(long, value_delimiter = ',', conflicts_with = "env")]
    pub redlock: Vec<String>,
    /// Show the status again every INTERVAL (default 1s) until interrupted.
    #[arg(long, value_name = "INTERVAL", num_args = 0..=1, default_missing_value = "1s",
          value_parser = crate::args::parse_duration, conflicts_with = "redlock")]
    pub watch: Option<std::time::Duration>,
}

#[derive(Serialize)]
struct NodeView {
    node: String,
    #[serde(flatten)]
    view: Option<Entry>,
    error: Option<String>,
}

/// One item of output, in the order the names were given. A lock, semaphore, latch or job
/// lock is an [`Entry`]: the schema `list` and `top` print (doc/cli-json.md).
#[derive(Serialize)]
#[serde(untagged)]
enum Item {
    /// A name whose status could not be read (the others are still shown).
    Failed {
        name: String,
        error: String,
    },
    Entry(Box<Entry>),
    RedLock {
        kind: &'static str,
        name: String,
        nodes: Vec<NodeView>,
    },
}

/// `(env, job)` when `name` is a job-lock key or `--env` was given.
pub fn job_name<'a>(env: Option<&'a str>, name: &'a str) -> Option<(&'a str, &'a str)> {
    if let Some(env) = env {
        return Some((env, name));
    }
    name.strip_prefix("job-lock:")?.split_once(':')
}

/// `holder: app <app> on <host> pid <pid>, held for <age>` (age in whole seconds); `None` for
/// a holder that recorded no app and pid (a job lock's host).
fn holder_line(h: &Holder) -> Option<String> {
    let (Some(app), Some(pid)) = (&h.app, h.pid) else {
        return None;
    };
    let age = std::time::Duration::from_secs(h.held_for_ms / 1000);
    Some(format!(
        "holder: app {app} on {} pid {pid}, held for {}",
        h.host,
        humantime::format_duration(age)
    ))
}

/// How many keys the job-lock lookup of a name looks at per master (`SCAN`, bounded).
/// 20 calls of `COUNT 1000`: a few ms of server time, even under `--watch`.
const JOB_LOOKUP_EXAMINE: usize = 20_000;

pub async fn run(opts: &Options, args: StatusArgs) -> Result<u8> {
    if !args.redlock.is_empty() {
        return redlock_status(args).await;
    }
    let client = opts.client().await?;
    let Some(interval) = args.watch else {
        return show(opts, &client, &args).await;
    };
    loop {
        outln!(
            "--- {}",
            humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        )?;
        show(opts, &client, &args).await?;
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = tokio::signal::ctrl_c() => return Ok(0),
        }
    }
}

/// One round of `status`: every name, in order; a name that fails is reported and the
/// others are still shown (exit code 1 then).
async fn show(opts: &Options, client: &distlock::Client, args: &StatusArgs) -> Result<u8> {
    let mut items = Vec::new();
    let mut hints = Vec::new();
    for name in &args.names {
        match name_items(opts, client, args, name, &mut hints).await {
            Ok(found) => items.extend(found),
            Err(e) => items.push(Item::Failed {
                name: name.clone(),
                error: format!("{e:#}"),
            }),
        }
    }
    let failed = items.iter().any(|i| matches!(i, Item::Failed { .. }));
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&items)?)?;
    } else {
        print_items(items)?;
        for hint in hints {
            outln!("{hint}")?;
        }
        // How this client called the server's scripts: Redis Functions or EVALSHA, and why.
        outln!("scripts: {}", client.script_calls())?;
        if let Some(policy) = client.eviction_policy().filter(|p| *p != "noeviction") {
            // Lock keys carry TTLs: any eviction policy may drop a held lock.
            outln!(
                "server maxmemory-policy {policy}: held locks can be evicted under memory \
                 pressure (use noeviction on lock servers)"
            )?;
        }
    }
    Ok(if failed { crate::exit::ERROR } else { 0 })
}

/// What `name` stands for: a job lock (by `--env` or a `job-lock:` key), a lock of the lock
/// family or a semaphore; for a name with no key, its job locks in any environment
/// (`job-lock:*:NAME`) if there are, else the free lock — with a hint in `hints` when the
/// name exists without the key prefix.
async fn name_items(
    opts: &Options,
    client: &distlock::Client,
    args: &StatusArgs,
    name: &str,
    hints: &mut Vec<String>,
) -> Result<Vec<Item>> {
    let now = std::time::SystemTime::now();
    if let Some((env, job)) = job_name(args.env.as_deref(), name) {
        let e = inventory::read_job(client, env, job, now)
            .await
            .with_context(|| format!("status of job {job:?}"))?;
        return Ok(vec![Item::Entry(Box::new(e))]);
    }
    let e = inventory::read_name(client, name, now)
        .await
        .with_context(|| format!("status of {name:?}"))?;
    if e.held || e.kind != Kind::Lock {
        return Ok(vec![Item::Entry(Box::new(e))]);
    }
    let mut found = Vec::new();
    for env in job_environments(opts, client, name).await? {
        found.push(Item::Entry(Box::new(
            inventory::read_job(client, &env, name, now).await?,
        )));
    }
    if !found.is_empty() {
        return Ok(found);
    }
    if !opts.key_prefix.is_empty() && exists(client, name).await {
        hints.push(format!(
            "hint: nothing at {:?} (key prefix {:?}), but a key {name:?} exists: \
             without --key-prefix?",
            e.key, opts.key_prefix
        ));
    }
    Ok(vec![Item::Entry(Box::new(e))])
}

/// The environments that have a job lock called `name` (`job-lock:*:NAME`, found by a
/// bounded `SCAN`: [`JOB_LOOKUP_EXAMINE`] keys per master).
pub async fn job_environments(
    opts: &Options,
    client: &distlock::Client,
    name: &str,
) -> Result<Vec<String>> {
    let pattern = format!(
        "{}job-lock:*:{}",
        glob_escape(&opts.key_prefix),
        glob_escape(name)
    );
    let jobs = client
        .scan(&pattern, JOB_LOOKUP_EXAMINE)
        .await
        .with_context(|| format!("looking for job locks named {name:?}"))?;
    let mut envs: Vec<String> = jobs
        .keys
        .iter()
        .filter_map(|key| {
            let unprefixed = key.strip_prefix(&opts.key_prefix).unwrap_or(key);
            let (env, job) = unprefixed.strip_prefix("job-lock:")?.rsplit_once(':')?;
            (job == name).then(|| env.to_string())
        })
        .collect();
    envs.sort();
    envs.dedup();
    Ok(envs)
}

/// Whether the raw key `key` exists (no prefix added); `false` when it cannot be read.
pub async fn exists(client: &distlock::Client, key: &str) -> bool {
    let mut con = client.redis_connection();
    redis::cmd("EXISTS")
        .arg(key)
        .query_async::<bool>(&mut con)
        .await
        .unwrap_or(false)
}

/// A TTL in ms as people read it: `27s 19ms`, `1h 2m 3s`; `no TTL` for none.
fn human_ttl(ttl_ms: Option<u64>) -> String {
    match ttl_ms {
        Some(ms) => humantime::format_duration(std::time::Duration::from_millis(ms)).to_string(),
        None => "no TTL".into(),
    }
}

fn print_items(items: Vec<Item>) -> Result<()> {
    for item in items {
        match item {
            Item::Failed { name, error } => errln!("distlock: {name}: {error}"),
            Item::Entry(e) => print_entry(&e)?,
            Item::RedLock { name, nodes, .. } => {
                outln!("{name} (RedLock over {} nodes):", nodes.len())?;
                for n in nodes {
                    match (n.view, n.error) {
                        (Some(e), _) if e.held => outln!(
                            "  {}: held by {} (TTL {})",
                            n.node,
                            e.owners.first().map(|o| o.owner.as_str()).unwrap_or("?"),
                            human_ttl(e.ttl_ms)
                        )?,
                        (Some(_), _) => outln!("  {}: free", n.node)?,
                        (None, e) => {
                            outln!("  {}: unreachable ({})", n.node, e.unwrap_or_default())?
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

async fn redlock_status(args: StatusArgs) -> Result<u8> {
    for url in &args.redlock {
        crate::connect::check_url(url)?;
    }
    let nodes = distlock::RedLockNodes::builder_from_urls(args.redlock.iter().cloned())
        .build()
        .await
        .context("RedLock nodes")?;
    let mut items = Vec::new();
    for name in &args.names {
        let views = nodes
            .lock(name.as_str())
            .status()
            .await
            .with_context(|| format!("status of {name:?}"))?;
        let nodes = views
            .into_iter()
            .map(|(node, r)| match r {
                Ok(s) => NodeView {
                    node,
                    view: Some(inventory::lock_entry(s, name, std::time::SystemTime::now())),
                    error: None,
                },
                Err(e) => NodeView {
                    node,
                    view: None,
                    error: Some(format!("{e:#}")),
                },
            })
            .collect();
        items.push(Item::RedLock {
            kind: distlock::kind::REDLOCK,
            name: name.clone(),
            nodes,
        });
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&items)?)?;
    } else {
        print_items(items)?;
    }
    Ok(0)
}

fn print_entry(e: &Entry) -> Result<()> {
    match e.kind {
        Kind::JobLock => print_job(e),
        Kind::Lock | Kind::FairLock | Kind::ReadLock | Kind::WriteLock => print_lock(e),
        Kind::LeasedSemaphore | Kind::Semaphore => outln!(
            "{} ({}): {} permits available, {} leased",
            e.name,
            e.kind.as_str(),
            e.value.unwrap_or(0),
            e.leased.unwrap_or(0)
        ),
        Kind::Latch => outln!(
            "{} ({}): count {}",
            e.name,
            e.kind.as_str(),
            e.value.unwrap_or(0)
        ),
        Kind::SemaphoreOrLatch => outln!(
            "{} ({}, no waiters): value {}",
            e.name,
            e.kind.as_str(),
            e.value.unwrap_or(0)
        ),
        // A RedLock spans independent masters: no scan of one server lists it.
        _ => outln!("{} ({})", e.name, e.kind.as_str()),
    }
}

fn print_job(e: &Entry) -> Result<()> {
    match &e.holder {
        Some(h) if e.held => {
            let since = std::time::UNIX_EPOCH + std::time::Duration::from_millis(h.since_ms);
            outln!(
                "{} ({}, {}): held by {} since {}, TTL {}",
                e.name,
                e.kind.as_str(),
                e.key,
                h.host,
                humantime::format_rfc3339_millis(since),
                human_ttl(e.ttl_ms)
            )
        }
        _ => outln!("{} ({}, {}): free", e.name, e.kind.as_str(), e.key),
    }
}

fn print_lock(e: &Entry) -> Result<()> {
    if !e.held {
        return outln!(
            "{}: free (fencing counter {})",
            e.name,
            e.fencing_counter.unwrap_or(0)
        );
    }
    outln!("{}: held, TTL {}", e.name, human_ttl(e.ttl_ms))?;
    for o in &e.owners {
        outln!("  owner {}  hold count {}", o.owner, o.hold_count)?;
    }
    if let Some(line) = e.holder.as_ref().and_then(holder_line) {
        outln!("  {line}")?;
    }
    match (e.fencing_token, &e.mode) {
        (Some(t), _) => outln!("  fencing token {t}")?,
        // A read-write lock's grants each draw a token the holder keeps; the hash has none.
        (None, Some(_)) => outln!("  fencing tokens: one per hold, kept by each holder")?,
        (None, None) => outln!("  fencing token: none (holder is not a distlock client)")?,
    }
    outln!("  waiting clients {}", e.waiting)?;
    if let Some(mode) = &e.mode {
        outln!("  mode {mode}")?;
    }
    if let Some(w) = e.waiting_writers {
        outln!("  waiting writers {w}")?;
    }
    if !e.queue_owners.is_empty() {
        outln!(
            "  queue ({} waiting): {}",
            e.queue_owners.len(),
            e.queue_owners.join(", ")
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::holder_line;
    use crate::cmd::inventory::Holder;

    #[test]
    fn the_holder_line_shows_app_host_pid_and_whole_seconds() {
        let h = Holder {
            app: Some("billing".into()),
            host: "web-1".into(),
            pid: Some(4242),
            since_ms: 1_700_000_000_000,
            held_for_ms: 3_723_900,
        };
        assert_eq!(
            holder_line(&h).unwrap(),
            "holder: app billing on web-1 pid 4242, held for 1h 2m 3s"
        );
        // A job lock's holder records only its host: no such line.
        let job = Holder {
            app: None,
            pid: None,
            ..h
        };
        assert_eq!(holder_line(&job), None);
    }
}
