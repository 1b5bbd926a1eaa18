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

use super::inventory::glob_escape;
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
          value_parser = crate::parse_duration, conflicts_with = "redlock")]
    pub watch: Option<std::time::Duration>,
}

#[derive(Serialize)]
struct NodeView {
    node: String,
    #[serde(flatten)]
    view: Option<Row>,
    error: Option<String>,
}

/// One line of output, in the order the names were given.
#[derive(Serialize)]
#[serde(untagged)]
enum Item {
    /// A name whose status could not be read (the others are still shown).
    Failed {
        name: String,
        error: String,
    },
    Lock(Row),
    Job(JobRow),
    Semaphore(SemaphoreRow),
    RedLock {
        kind: &'static str,
        name: String,
        nodes: Vec<NodeView>,
    },
}

fn row(s: distlock::LockStatus) -> Row {
    Row {
        kind: "lock",
        held: !s.holders.is_empty(),
        holder: s
            .holder
            .map(|h| holder_info(h, std::time::SystemTime::now())),
        holders: s
            .holders
            .into_iter()
            .map(|(owner, hold_count)| Holder { owner, hold_count })
            .collect(),
        ttl_ms: s.ttl.map(|t| t.as_millis() as u64),
        fencing_token: s.fencing_token.map(|t| t.get()),
        fencing_counter: s.fencing_counter,
        waiting_clients: s.subscribers,
        mode: s.mode,
        queue: s.queue,
        waiting_writers: None,
        name: s.name,
        key: s.key,
    }
}

/// Status of any lock-family name: a plain, fair or read-write lock (hash), or a semaphore
/// (string of permits).
async fn lock_item(client: &distlock::Client, name: &str) -> Result<Item> {
    match client.lock(name).status().await {
        Ok(s) if s.mode.is_some() => {
            let rw = client.rw_lock(name).status().await?;
            let waiting = rw.waiting_writers;
            let mut r = row(rw);
            r.kind = "rwlock";
            r.waiting_writers = Some(waiting);
            Ok(Item::Lock(r))
        }
        Ok(s) => {
            let fair = client.fair_lock(name).status().await?;
            if fair.queue.is_empty() {
                return Ok(Item::Lock(row(s)));
            }
            let mut r = row(fair);
            r.kind = "fair";
            Ok(Item::Lock(r))
        }
        Err(e) if e.kind() == distlock::ErrorKind::WrongType => {
            let permits = client.leased_semaphore(name).permits().await;
            let (available, leased) = match permits {
                Ok(p) => p,
                Err(e) if e.kind() == distlock::ErrorKind::WrongType => {
                    let mut con = client.redis_connection();
                    let kind: String = redis::cmd("TYPE")
                        .arg(client.lock(name).key())
                        .query_async(&mut con)
                        .await
                        .unwrap_or_else(|_| "value of another type".into());
                    anyhow::bail!("the key holds a {kind}, not a lock or a semaphore");
                }
                Err(e) => return Err(anyhow::Error::from(e).context("not a lock or a semaphore")),
            };
            Ok(Item::Semaphore(SemaphoreRow {
                kind: "semaphore",
                name: name.to_string(),
                available_permits: available,
                leased_permits: leased,
            }))
        }
        Err(e) => Err(e.into()),
    }
}

#[derive(Serialize)]
struct JobRow {
    kind: &'static str,
    name: String,
    key: String,
    held: bool,
    host: Option<String>,
    locked_at: Option<String>,
    id: Option<String>,
    ttl_ms: Option<u64>,
}

/// `(env, job)` when `name` is a job-lock key or `--env` was given.
pub fn job_name<'a>(env: Option<&'a str>, name: &'a str) -> Option<(&'a str, &'a str)> {
    if let Some(env) = env {
        return Some((env, name));
    }
    name.strip_prefix("job-lock:")?.split_once(':')
}

#[derive(Serialize)]
struct Holder {
    owner: String,
    hold_count: u64,
}

/// Who was granted a plain or fair lock, as the grant recorded it.
#[derive(Serialize)]
struct HolderInfo {
    owner: String,
    app: String,
    host: String,
    pid: u32,
    /// When it was granted: ms since the Unix epoch, by the server's clock (recorded in whole
    /// seconds).
    since_ms: u64,
    /// How long it has been held: now by this machine's clock − since, in ms.
    held_for_ms: u64,
}

/// `h` as shown, its age taken at `now` (0 when the server's clock is ahead of ours).
fn holder_info(h: distlock::HolderInfo, now: std::time::SystemTime) -> HolderInfo {
    let since_ms = h
        .since
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let held_for = now.duration_since(h.since).unwrap_or_default().as_millis() as u64;
    HolderInfo {
        owner: h.owner,
        app: h.app,
        host: h.host,
        pid: h.pid,
        since_ms,
        held_for_ms: held_for,
    }
}

/// `holder: app <app> on <host> pid <pid>, held for <age>` (age in whole seconds).
fn holder_line(h: &HolderInfo) -> String {
    let age = std::time::Duration::from_secs(h.held_for_ms / 1000);
    format!(
        "holder: app {} on {} pid {}, held for {}",
        h.app,
        h.host,
        h.pid,
        humantime::format_duration(age)
    )
}

#[derive(Serialize)]
struct Row {
    kind: &'static str,
    name: String,
    key: String,
    held: bool,
    holders: Vec<Holder>,
    /// Plain and fair locks held by a distlock client: who was granted it.
    #[serde(skip_serializing_if = "Option::is_none")]
    holder: Option<HolderInfo>,
    ttl_ms: Option<u64>,
    fencing_token: Option<u128>,
    fencing_counter: u128,
    waiting_clients: u64,
    /// Read-write locks: "read" or "write".
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<String>,
    /// Fair locks: waiting owners, first in line first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    queue: Vec<String>,
    /// Read-write locks: writers waiting.
    #[serde(skip_serializing_if = "Option::is_none")]
    waiting_writers: Option<u64>,
}

/// A semaphore (plain or leased): a string key of permits.
#[derive(Serialize)]
struct SemaphoreRow {
    kind: &'static str,
    name: String,
    available_permits: u64,
    leased_permits: u64,
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
    if let Some((env, job)) = job_name(args.env.as_deref(), name) {
        return Ok(vec![job_item(client, env, job).await?]);
    }
    let item = lock_item(client, name)
        .await
        .with_context(|| format!("status of {name:?}"))?;
    let Item::Lock(row) = &item else {
        return Ok(vec![item]);
    };
    if row.held {
        return Ok(vec![item]);
    }
    let mut found = Vec::new();
    for env in job_environments(opts, client, name).await? {
        found.push(job_item(client, &env, name).await?);
    }
    if !found.is_empty() {
        return Ok(found);
    }
    if !opts.key_prefix.is_empty() && exists(client, name).await {
        hints.push(format!(
            "hint: nothing at {:?} (key prefix {:?}), but a key {name:?} exists: \
             without --key-prefix?",
            row.key, opts.key_prefix
        ));
    }
    Ok(vec![item])
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

async fn job_item(client: &distlock::Client, env: &str, job: &str) -> Result<Item> {
    let lock = client.job_lock(job).environment(env);
    let holder = lock
        .status()
        .await
        .with_context(|| format!("status of job {job:?}"))?;
    Ok(Item::Job(JobRow {
        kind: "job",
        name: job.to_string(),
        key: lock.key(),
        held: holder.is_some(),
        ttl_ms: holder
            .as_ref()
            .and_then(|h| h.ttl)
            .map(|t| t.as_millis() as u64),
        host: holder.as_ref().map(|h| h.host.clone()),
        locked_at: holder.as_ref().map(|h| h.locked_at.clone()),
        id: holder.and_then(|h| h.id),
    }))
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
            Item::Job(j) => print_job(&j)?,
            Item::Lock(r) => print_lock(&r)?,
            Item::Semaphore(s) => outln!(
                "{} (semaphore): {} permits available, {} leased",
                s.name,
                s.available_permits,
                s.leased_permits
            )?,
            Item::RedLock { name, nodes, .. } => {
                outln!("{name} (RedLock over {} nodes):", nodes.len())?;
                for n in nodes {
                    match (n.view, n.error) {
                        (Some(r), _) if r.held => outln!(
                            "  {}: held by {} (TTL {})",
                            n.node,
                            r.holders.first().map(|h| h.owner.as_str()).unwrap_or("?"),
                            human_ttl(r.ttl_ms)
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
    let redlock = distlock::RedLock::builder_from_urls(args.redlock.iter().cloned())
        .build()
        .await
        .context("RedLock nodes")?;
    let mut items = Vec::new();
    for name in &args.names {
        let views = redlock
            .status(name)
            .await
            .with_context(|| format!("status of {name:?}"))?;
        let nodes = views
            .into_iter()
            .map(|(node, r)| match r {
                Ok(s) => NodeView {
                    node,
                    view: Some(row(s)),
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
            kind: "redlock",
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

fn print_job(j: &JobRow) -> Result<()> {
    match (&j.host, &j.locked_at) {
        (Some(host), Some(at)) => outln!(
            "{} (job, {}): held by {host} since {at}, TTL {}",
            j.name,
            j.key,
            human_ttl(j.ttl_ms)
        ),
        _ => outln!("{} (job, {}): free", j.name, j.key),
    }
}

fn print_lock(r: &Row) -> Result<()> {
    if !r.held {
        return outln!("{}: free (fencing counter {})", r.name, r.fencing_counter);
    }
    outln!("{}: held, TTL {}", r.name, human_ttl(r.ttl_ms))?;
    for h in &r.holders {
        outln!("  owner {}  hold count {}", h.owner, h.hold_count)?;
    }
    if let Some(h) = &r.holder {
        outln!("  {}", holder_line(h))?;
    }
    match (r.fencing_token, &r.mode) {
        (Some(t), _) => outln!("  fencing token {t}")?,
        // A read-write lock's grants each draw a token the holder keeps; the hash has none.
        (None, Some(_)) => outln!("  fencing tokens: one per hold, kept by each holder")?,
        (None, None) => outln!("  fencing token: none (holder is not a distlock client)")?,
    }
    outln!("  waiting clients {}", r.waiting_clients)?;
    if let Some(mode) = &r.mode {
        outln!("  mode {mode}")?;
    }
    if let Some(w) = r.waiting_writers {
        outln!("  waiting writers {w}")?;
    }
    if !r.queue.is_empty() {
        outln!(
            "  queue ({} waiting): {}",
            r.queue.len(),
            r.queue.join(", ")
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::{holder_info, holder_line};

    #[test]
    fn the_holder_line_shows_app_host_pid_and_whole_seconds() {
        let since = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let h = distlock::HolderInfo::parse("u:1", "billing;web-1;4242;1700000000").unwrap();
        let shown = holder_info(h.clone(), since + Duration::from_millis(3_723_900));
        assert_eq!(shown.since_ms, 1_700_000_000_000);
        assert_eq!(shown.held_for_ms, 3_723_900);
        assert_eq!(
            holder_line(&shown),
            "holder: app billing on web-1 pid 4242, held for 1h 2m 3s"
        );
        // A server clock ahead of ours: held for 0s, not an error.
        let ahead = holder_info(h, since - Duration::from_secs(5));
        assert_eq!(ahead.held_for_ms, 0);
        assert!(holder_line(&ahead).ends_with("held for 0s"));
    }
}
