//! `distlock top [PATTERN]`: a live view of the locks that matter now — held locks with
//! holder, how long held and a TTL bar, queue lengths and waiting clients, grants per second,
//! leases that ran out — refreshed every `--interval`, on any topology (the scan of `distlock
//! list` each time). Keys: `q` or Esc quit, `s` next sort order, `/` filter by name, `+`/`-` refresh
//! slower/faster, arrows scroll. For scripts: `--once` (one text table) or `--json` (one JSON
//! object per refresh).
//!
//! Two figures come from comparing consecutive refreshes (`top` samples the server; it
//! needs no configuration and no access to the clients):
//! - **grants**: refreshes at which a lock was held by another holder (fencing token, owner
//!   or job-lock value) than at the refresh before. A lower bound: several grants between two
//!   refreshes count as one, and a lock taken and freed between them is not seen. Exact
//!   counts live in the clients (the `metrics` feature's acquisition counters). A lock freed
//!   meanwhile (its key deleted) stays in view as `free` for a minute.
//! - **leases lost**: a lock held at one refresh whose TTL then ran out before the next, and
//!   which is free or held by someone else at it: its holder did not renew it in time (a
//!   stalled or killed process, a watchdog cut off from the server). Job locks are not
//!   counted: they end by expiry by design.

use std::collections::{HashMap, VecDeque};
use std::io::IsTerminal;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result};
use clap::Args;
use ratatui::crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Style, Stylize};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row as TableRow, Table, TableState};
use serde::Serialize;

use super::inventory::{self, Entry, Kind, Query};
use super::list::Sort;
use crate::connect::Options;
use crate::out::outln;

/// How long a lock that was seen stays in view once its key is gone.
const KEEP_FREED: Duration = Duration::from_secs(60);

/// Leases lost kept for the view.
const RECENT_LOST: usize = 5;

/// Width of the TTL bar, in cells.
const BAR: usize = 10;

/// Arguments of `distlock top`.
#[derive(Args, Debug)]
pub struct TopArgs {
    /// Only names matching this glob (as `distlock list`).
    pub pattern: Option<String>,
    /// Time between refreshes.
    #[arg(long, default_value = "2s", value_parser = crate::args::parse_duration)]
    pub interval: Duration,
    /// Print one text table (two scans one --interval apart, for the rates) and exit.
    #[arg(long)]
    pub once: bool,
    /// Print one JSON object per refresh instead of the live view (with --once: one).
    #[arg(long)]
    pub json: bool,
    /// Initial row order (`s` cycles through them).
    #[arg(long, value_enum, default_value_t = TopSort::Hot)]
    pub sort: TopSort,
    /// Keys the scan looks at per master, at most, each refresh.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub examine: u64,
    /// Entries listed at most: keys are read in name order (a few round trips each) until
    /// this many locks, semaphores, latches and job locks are found.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: u64,
    /// Also show integer keys that nothing marks as a semaphore or latch (as `distlock list
    /// --all`).
    #[arg(long)]
    pub all: bool,
}

/// Row order of `top`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TopSort {
    /// Held first, then most waiting clients, then most new grants seen.
    #[default]
    Hot,
    /// By name.
    Name,
    /// Longest held first.
    Age,
    /// Shortest TTL first.
    Ttl,
    /// Most waiting clients first.
    Waiting,
    /// Most new grants seen first.
    Rate,
}

impl TopSort {
    const ALL: [TopSort; 6] = [
        TopSort::Hot,
        TopSort::Name,
        TopSort::Age,
        TopSort::Ttl,
        TopSort::Waiting,
        TopSort::Rate,
    ];

    fn next(self) -> TopSort {
        let i = Self::ALL.iter().position(|s| *s == self).unwrap_or(0);
        Self::ALL[(i + 1) % Self::ALL.len()]
    }

    fn label(self) -> &'static str {
        match self {
            TopSort::Hot => "hot",
            TopSort::Name => "name",
            TopSort::Age => "age",
            TopSort::Ttl => "ttl",
            TopSort::Waiting => "waiting",
            TopSort::Rate => "grants",
        }
    }

    fn apply(self, rows: &mut [Row]) {
        rows.sort_by(|a, b| a.entry.name.cmp(&b.entry.name));
        let by = match self {
            TopSort::Hot => {
                return rows.sort_by(|a, b| {
                    (b.entry.held, b.entry.waiting, b.grants_seen).cmp(&(
                        a.entry.held,
                        a.entry.waiting,
                        a.grants_seen,
                    ))
                })
            }
            TopSort::Rate => return rows.sort_by_key(|r| std::cmp::Reverse(r.grants_seen)),
            TopSort::Name => Sort::Name,
            TopSort::Age => Sort::Age,
            TopSort::Ttl => Sort::Ttl,
            TopSort::Waiting => Sort::Waiting,
        };
        rows.sort_by(|a, b| by.compare(&a.entry, &b.entry));
    }
}

/// One row of the view.
#[derive(Clone, Debug, Serialize)]
struct Row {
    #[serde(flatten)]
    entry: Entry,
    /// New grants seen since `top` started: refreshes at which it was held by someone other
    /// than at the refresh before (a lower bound: grants between two refreshes are one).
    grants_seen: u64,
    /// The longest TTL seen for this key, ms (the lease it is renewed to): the TTL bar's
    /// full length.
    #[serde(skip)]
    lease_ms: Option<u64>,
}

/// A lease that ran out between two refreshes.
#[derive(Clone, Debug, Serialize)]
struct Lost {
    name: String,
    #[serde(serialize_with = "inventory::kind_name")]
    kind: Kind,
    /// Who held it.
    holder: String,
    /// When it was seen lost (RFC 3339, this machine's clock).
    at: String,
}

/// One refresh.
#[derive(Clone, Debug, Serialize)]
struct Snapshot {
    /// RFC 3339, this machine's clock.
    time: String,
    /// The server, password masked.
    server: String,
    rows: Vec<Row>,
    held: usize,
    waiting: u64,
    /// New grants seen at this refresh per second since the last one (`None` on the first
    /// refresh): a lower bound, see `grants_seen`.
    grants_per_s: Option<f64>,
    /// Leases seen lost since `top` started.
    leases_lost: u64,
    /// The latest of them, newest first.
    lost: Vec<Lost>,
    /// Keys matched but not listed (helper keys, other data).
    other_keys: usize,
    /// Whether the scan reached the end of every master.
    complete: bool,
    /// Keys that could not be read, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    errors: Vec<inventory::KeyError>,
}

/// A row as last shown, and when its key was last found by a scan.
struct Seen {
    row: Row,
    at: Instant,
}

/// What one refresh needs from the ones before.
struct Tracker {
    query: Query,
    /// The last refresh's rows by key (with the grants seen and the longest TTL so far), and
    /// freed locks for [`KEEP_FREED`] after their key was last found.
    seen: HashMap<String, Seen>,
    last: Option<Instant>,
    lost_total: u64,
    lost: VecDeque<Lost>,
}

impl Tracker {
    fn new(query: Query) -> Tracker {
        Tracker {
            query,
            seen: HashMap::new(),
            last: None,
            lost_total: 0,
            lost: VecDeque::new(),
        }
    }

    /// Scan, then compare with the previous refresh (no other reads: a lock whose key is
    /// gone is free).
    async fn refresh(&mut self, client: &distlock::Client) -> Result<Snapshot> {
        let started = Instant::now();
        let inv = inventory::scan(client, &self.query).await?;
        let now = Instant::now();
        let elapsed = self.last.map(|l| started.duration_since(l));
        let found: HashMap<&str, &Entry> =
            inv.entries.iter().map(|e| (e.key.as_str(), e)).collect();
        // Lost leases: held at the last refresh with a TTL that has run out since, and free
        // or held by another owner now.
        if let (Some(elapsed), Some(last)) = (elapsed, self.last) {
            // The TTLs are read during the scans, not at their starts: this scan took `slack`.
            let slack = now.duration_since(started);
            for (key, Seen { row, at }) in &self.seen {
                let prev = &row.entry;
                let ran_out = prev.held
                    && prev.kind != Kind::JobLock
                    && prev.kind.is_lock()
                    && *at >= last
                    && prev
                        .ttl_ms
                        .is_some_and(|t| Duration::from_millis(t) <= elapsed + slack);
                if !ran_out {
                    continue;
                }
                let same_holder = found.get(key.as_str()).is_some_and(|e| {
                    e.held
                        && e.owners
                            .iter()
                            .map(|o| &o.owner)
                            .eq(prev.owners.iter().map(|o| &o.owner))
                });
                if !same_holder {
                    self.lost_total += 1;
                    self.lost.push_front(Lost {
                        name: prev.name.clone(),
                        kind: prev.kind,
                        holder: prev.who(),
                        at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
                    });
                    self.lost.truncate(RECENT_LOST);
                }
            }
        }
        // New grants: a held entry whose holder differs from the last refresh's.
        let mut new_grants = 0u64;
        let mut seen = HashMap::with_capacity(inv.entries.len());
        for e in inv.entries {
            let prev = self.seen.remove(&e.key).map(|s| s.row);
            let grant = e.grant();
            let changed = self.last.is_some()
                && grant.is_some()
                && grant != prev.as_ref().and_then(|p| p.entry.grant());
            new_grants += u64::from(changed);
            let row = Row {
                grants_seen: prev.as_ref().map_or(0, |p| p.grants_seen) + u64::from(changed),
                lease_ms: prev.and_then(|p| p.lease_ms).max(e.ttl_ms),
                entry: e,
            };
            seen.insert(row.entry.key.clone(), Seen { row, at: now });
        }
        // Locks seen lately whose key is gone: free now, kept in view for their grants.
        let freed = self
            .seen
            .drain()
            .filter(|(_, s)| {
                s.at.elapsed() < KEEP_FREED
                    && (s.row.entry.kind.is_lock() && s.row.entry.kind != Kind::JobLock)
            })
            .take(self.query.limit);
        for (key, mut s) in freed {
            let e = &mut s.row.entry;
            e.held = false;
            e.owners.clear();
            e.holder = None;
            e.ttl_ms = None;
            e.mode = None;
            e.fencing_token = None;
            e.queue = None;
            e.waiting = 0;
            seen.insert(key, s);
        }
        self.seen = seen;
        let rows: Vec<Row> = self.seen.values().map(|s| s.row.clone()).collect();
        let grants_per_s = elapsed.map(|dt| new_grants as f64 / dt.as_secs_f64());
        self.last = Some(started);
        Ok(Snapshot {
            time: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            server: client.redacted_url().to_string(),
            held: rows.iter().filter(|r| r.entry.held).count(),
            waiting: rows.iter().map(|r| r.entry.waiting).sum(),
            rows,
            grants_per_s,
            leases_lost: self.lost_total,
            lost: self.lost.iter().cloned().collect(),
            other_keys: inv.other_keys,
            complete: inv.complete,
            errors: inv.errors,
        })
    }
}

pub async fn run(opts: &Options, args: TopArgs) -> Result<u8> {
    if !args.once && !args.json && !std::io::stdout().is_terminal() {
        anyhow::bail!("stdout is not a terminal: use --once (a text table) or --json");
    }
    let client = opts.client().await?;
    let mut tracker = Tracker::new(Query {
        key_prefix: opts.key_prefix.clone(),
        pattern: args.pattern.clone(),
        examine: args.examine as usize,
        limit: args.limit as usize,
        all: args.all,
    });
    if args.once {
        tracker.refresh(&client).await?;
        tokio::time::sleep(args.interval).await;
        let mut snap = tracker.refresh(&client).await?;
        args.sort.apply(&mut snap.rows);
        if args.json {
            outln!("{}", serde_json::to_string(&snap)?)?;
        } else {
            outln!("{}", text(&snap, args.sort).trim_end())?;
        }
        return Ok(0);
    }
    if args.json {
        loop {
            let mut snap = tracker.refresh(&client).await?;
            args.sort.apply(&mut snap.rows);
            outln!("{}", serde_json::to_string(&snap)?)?;
            tokio::select! {
                _ = tokio::time::sleep(args.interval) => {}
                _ = tokio::signal::ctrl_c() => return Ok(0),
            }
        }
    }
    live(&client, tracker, &args).await
}

/// The header lines: server, time, totals.
/// The two header lines: the server and time, then the counts of the rows `shown` (all of
/// the snapshot's, or those a filter keeps: `2 shown of 7`), the grant rate and the leases
/// lost.
fn header(snap: &Snapshot, shown: &[&Row]) -> [String; 2] {
    let rate = snap.grants_per_s.map_or("-".into(), |r| format!("{r:.1}"));
    let scan = if snap.complete {
        String::new()
    } else {
        "  (scan stopped at --examine)".into()
    };
    let of = if shown.len() == snap.rows.len() {
        String::new()
    } else {
        format!(" of {}", snap.rows.len())
    };
    [
        format!("distlock top  {}  {}", snap.server, snap.time),
        format!(
            "{} shown{of}, {} held, {} waiting, {rate} new grants/s seen, {} lease{} lost{scan}",
            shown.len(),
            shown.iter().filter(|r| r.entry.held).count(),
            shown.iter().map(|r| r.entry.waiting).sum::<u64>(),
            snap.leases_lost,
            if snap.leases_lost == 1 { "" } else { "s" }
        ),
    ]
}

/// `█████░░░░░ 15s`: the TTL against the longest TTL seen (the lease it is renewed to).
fn ttl_bar(r: &Row) -> String {
    let Some(ttl) = r.entry.ttl_ms else {
        return String::new();
    };
    let full = r.lease_ms.unwrap_or(ttl).max(1);
    let filled = ((ttl as f64 / full as f64) * BAR as f64).round() as usize;
    let filled = filled.min(BAR);
    format!(
        "{}{} {}",
        "█".repeat(filled),
        "░".repeat(BAR - filled),
        inventory::human(Duration::from_millis(ttl))
    )
}

/// The cells of one row: `list`'s, with a TTL bar, and the grants seen.
fn cells(r: &Row) -> [String; 8] {
    let [name, kind, state, who, held_for, _, waiting] = r.entry.cells();
    [
        name,
        kind,
        state,
        who,
        held_for,
        ttl_bar(r),
        waiting,
        r.grants_seen.to_string(),
    ]
}

const COLUMNS: [&str; 8] = [
    "NAME", "KIND", "STATE", "HOLDER", "HELD FOR", "TTL", "WAITING", "GRANTS",
];

/// `--once`: header, table, lost leases.
fn text(snap: &Snapshot, sort: TopSort) -> String {
    let [a, b] = header(snap, &snap.rows.iter().collect::<Vec<_>>());
    let mut out = format!("{a}\n{b}  sort: {}\n", sort.label());
    if !snap.rows.is_empty() {
        let mut table = comfy_table::Table::new();
        table
            .load_style(comfy_table::presets::NOTHING)
            .set_header(COLUMNS);
        for r in &snap.rows {
            table.add_row(cells(r));
        }
        table.trim_fmt();
        out.push_str(&format!("{table}\n"));
    }
    for l in &snap.lost {
        out.push_str(&format!(
            "lease lost: {} ({}) held by {} — seen at {}\n",
            l.name,
            l.kind.as_str(),
            l.holder,
            l.at
        ));
    }
    for e in &snap.errors {
        out.push_str(&format!("unreadable: {}: {}\n", e.key, e.error));
    }
    out
}

/// The state of the live view between refreshes.
struct View {
    sort: TopSort,
    interval: Duration,
    filter: String,
    editing: bool,
    table: TableState,
    /// The last refresh's error, shown until one succeeds.
    error: Option<String>,
}

impl View {
    fn rows<'a>(&self, snap: &'a Snapshot) -> Vec<&'a Row> {
        let needle = self.filter.to_lowercase();
        snap.rows
            .iter()
            .filter(|r| needle.is_empty() || r.entry.name.to_lowercase().contains(&needle))
            .collect()
    }
}

async fn live(client: &distlock::Client, mut tracker: Tracker, args: &TopArgs) -> Result<u8> {
    let mut snap = tracker.refresh(client).await?;
    let mut terminal = ratatui::try_init().context("cannot set up the terminal")?;
    // Keys come from a thread of their own: reading the terminal blocks.
    let (tx, mut keys) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        while let Ok(event) = ratatui::crossterm::event::read() {
            if tx.send(event).is_err() {
                break;
            }
        }
    });
    let mut view = View {
        sort: args.sort,
        interval: args.interval,
        filter: String::new(),
        editing: false,
        table: TableState::default().with_selected(Some(0)),
        error: None,
    };
    view.sort.apply(&mut snap.rows);
    let mut next = tokio::time::Instant::now() + view.interval;
    let result = loop {
        if let Err(e) = terminal.draw(|f| draw(f, &snap, &mut view)) {
            break Err(anyhow::Error::from(e).context("cannot draw"));
        }
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {
                match tracker.refresh(client).await {
                    Ok(s) => {
                        snap = s;
                        view.error = None;
                    }
                    Err(e) => view.error = Some(format!("{e:#}")),
                }
                view.sort.apply(&mut snap.rows);
                next = tokio::time::Instant::now() + view.interval;
            }
            event = keys.recv() => {
                let Some(event) = event else { break Ok(0) };
                if key(&mut view, &mut snap, &event) {
                    break Ok(0);
                }
                next = next.min(tokio::time::Instant::now() + view.interval);
            }
        }
    };
    ratatui::restore();
    result
}

/// Handle one terminal event; `true` to quit.
fn key(view: &mut View, snap: &mut Snapshot, event: &Event) -> bool {
    let Event::Key(k) = event else {
        return false;
    };
    if k.kind != KeyEventKind::Press {
        return false;
    }
    if k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL) {
        return true;
    }
    if view.editing {
        match k.code {
            KeyCode::Enter => view.editing = false,
            KeyCode::Esc => {
                view.editing = false;
                view.filter.clear();
            }
            KeyCode::Backspace => {
                view.filter.pop();
            }
            KeyCode::Char(c) => view.filter.push(c),
            _ => {}
        }
        view.table.select(Some(0));
        return false;
    }
    match k.code {
        KeyCode::Char('q') | KeyCode::Esc => return true,
        KeyCode::Char('s') => {
            view.sort = view.sort.next();
            view.sort.apply(&mut snap.rows);
        }
        KeyCode::Char('/') => {
            view.editing = true;
            view.filter.clear();
        }
        KeyCode::Char('+') => view.interval = (view.interval * 2).min(Duration::from_secs(60)),
        KeyCode::Char('-') => {
            view.interval = (view.interval / 2).max(Duration::from_millis(100));
        }
        KeyCode::Down => view.table.select_next(),
        KeyCode::Up => view.table.select_previous(),
        KeyCode::PageDown => view.table.scroll_down_by(10),
        KeyCode::PageUp => view.table.scroll_up_by(10),
        _ => {}
    }
    false
}

fn draw(frame: &mut ratatui::Frame, snap: &Snapshot, view: &mut View) {
    let lost_lines = snap.lost.len().min(RECENT_LOST) as u16;
    let [top, table_area, lost_area, help_area] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(3),
        Constraint::Length(lost_lines),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let shown_rows = view.rows(snap);
    let [a, b] = header(snap, &shown_rows);
    let status = match &view.error {
        Some(e) => Line::from(format!("refresh failed: {e}")).red(),
        None => Line::from(format!(
            "{b}  sort: {}  every {}",
            view.sort.label(),
            humantime::format_duration(view.interval)
        )),
    };
    frame.render_widget(Paragraph::new(vec![Line::from(a).bold(), status]), top);
    let shown: Vec<(bool, [String; 8])> = shown_rows
        .into_iter()
        .map(|r| (r.entry.held, cells(r)))
        .collect();
    // Each column as wide as its widest cell (names and holders at most 40).
    let widths = std::array::from_fn::<_, 8, _>(|i| {
        let widest = shown
            .iter()
            .map(|(_, c)| c[i].chars().count())
            .chain([COLUMNS[i].len()])
            .max()
            .unwrap_or(0);
        Constraint::Length(widest.min(40) as u16)
    });
    let rows: Vec<TableRow> = shown
        .into_iter()
        .map(|(held, cells)| {
            let style = if held {
                Style::new()
            } else {
                Style::new().dim()
            };
            TableRow::new(cells.map(Cell::from)).style(style)
        })
        .collect();
    let table = Table::new(rows, widths)
        .header(TableRow::new(COLUMNS.map(Cell::from)).reversed())
        .row_highlight_style(Style::new().bold())
        .highlight_symbol("> ");
    frame.render_stateful_widget(table, table_area, &mut view.table);
    let lost: Vec<Line> = snap
        .lost
        .iter()
        .map(|l| {
            Line::from(format!(
                "lease lost: {} ({}) held by {}, seen at {}",
                l.name,
                l.kind.as_str(),
                l.holder,
                l.at
            ))
            .yellow()
        })
        .collect();
    frame.render_widget(Paragraph::new(lost), lost_area);
    let help = if view.editing {
        format!("filter: {}_  (Enter apply, Esc clear)", view.filter)
    } else if view.filter.is_empty() {
        "q/Esc quit  s sort  / filter  +/- slower/faster  ↑↓ scroll".to_string()
    } else {
        format!(
            "filter: {}  q/Esc quit  s sort  / new filter  +/- slower/faster  ↑↓ scroll",
            view.filter
        )
    };
    frame.render_widget(Paragraph::new(Line::from(help).reversed()), help_area);
}
