//! The timeline of a run as an SVG: holds per process as bars, faults as shaded spans,
//! violations marked.
//!
//! The picture, top to bottom: the title and a line of counts; notes (lanes left out, holds
//! merged, violations without a time); a band of fault labels; the `violations` lane (red
//! marks, the detail in a tooltip); one lane per worker process and task that held anything
//! (`w0/3`, sorted by process number, then task); the time axis in seconds since the first
//! event; a legend. Every mark has a `<title>` (the viewer's tooltip) saying what it is.
//!
//! The rules, read from the history (in time order, ties in the history's order):
//!
//! - **Holds.** A hold starts at the `ok` of an `acquire` and ends at the `invoke` of the
//!   next `release` of the same process and task (of the same key when both name one), or at
//!   a `lost` event of that process and task (the hold is then drawn with a red outline and
//!   a red ✕ at its end), or at the end of the run when it was never released. Exclusive
//!   holds are blue, shared ones (`mode: shared`) green. A `fail` of an `acquire` is a short
//!   grey tick on its lane, an `info` (unknown outcome) a black one.
//! - **Faults.** The `fault` events (of the nemesis). An `invoke` opens a fault; an `ok`
//!   (healed) or a `fail` (not injected) closes the earliest open fault with the same
//!   `detail`, else the earliest with the same `key`, else the earliest open one. A closed
//!   fault is a translucent orange span across all lanes, drawn over the holds (the pointer
//!   goes through it to their tooltips), with a solid strip of the same extent above the
//!   `violations` lane that carries the fault's tooltip, and a label above that (a `fail`ed
//!   fault is grey); one never closed runs to the end of the run. An `info` fault (an
//!   instant fault), and an `ok` with no open fault, is a thin purple line. Labels that fit
//!   in none of the rows of the band are left out (their tooltips stay).
//! - **Violations.** Red marks on the `violations` lane from `t_us` to `until_us` (at least
//!   3 px wide), with a faint red band over the lanes below. Violations with `t_us == 0`
//!   have no time: they are listed in a note.
//!
//! Large histories stay small: holds on the same lane, of the same mode, less than a pixel
//! apart are drawn as one bar when either is narrower than a pixel (its tooltip gives the
//! count; lost holds are never merged); ticks, instant faults and violations are merged per
//! pixel; at most [`MAX_LANES`] lanes are drawn (a note says how many were left out).

use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Display, Write as _};
use std::path::Path;

use anyhow::Context as _;

use crate::history::{self, Event, Mode, Op, Type, Violation};

/// The most lanes drawn; the others are counted in a note.
pub const MAX_LANES: usize = 64;

const WIDTH: f64 = 1200.0;
/// Room for the lane labels.
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const PLOT_W: f64 = WIDTH - LEFT - RIGHT;
const LANE_H: f64 = 18.0;
const BAR_H: f64 = 12.0;
const TICK_H: f64 = 6.0;
/// Rows of fault labels above the lanes (labels that fit in none are left out; the span's
/// tooltip still has the text).
const LABEL_ROWS: usize = 3;
const LABEL_ROW_H: f64 = 12.0;
/// About the width of a character at font-size 10.
const CHAR_W: f64 = 5.6;
/// The longest fault label, in characters.
const LABEL_CHARS: usize = 32;
/// Violation marks are at least this wide.
const VIOLATION_MIN_W: f64 = 3.0;
/// At most this many details in one tooltip of merged marks.
const TOOLTIP_DETAILS: usize = 5;

const EXCLUSIVE: &str = "#4e79a7";
const SHARED: &str = "#59a14f";
const RED: &str = "#d62728";
const FAULT: &str = "#f28e2b";
const FAULT_FAILED: &str = "#9d9d9d";
const INSTANT: &str = "#9467bd";
const FAIL_TICK: &str = "#8c8c8c";
const INFO_TICK: &str = "#222222";

/// Draw the timeline of a run as an SVG file at `path` (see the module's documentation for
/// what is drawn and how the events are matched).
pub fn draw(
    title: &str,
    events: &[Event],
    violations: &[Violation],
    path: &Path,
) -> anyhow::Result<()> {
    let svg = render(title, events, violations).context("formatting the timeline")?;
    std::fs::write(path, svg).with_context(|| format!("writing the timeline to {}", path.display()))
}

/// A lane: one task of one process. Sorts `w2` before `w10`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Lane {
    prefix: String,
    number: Option<u64>,
    process: String,
    task: u32,
}

impl Lane {
    fn new(process: &str, task: u32) -> Lane {
        let digits = process.len() - process.bytes().rev().take_while(u8::is_ascii_digit).count();
        Lane {
            prefix: process[..digits].to_owned(),
            number: process[digits..].parse().ok(),
            process: process.to_owned(),
            task,
        }
    }

    fn label(&self) -> String {
        format!("{}/{}", self.process, self.task)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Released,
    Lost,
    /// Never released: drawn to the end of the run.
    Open,
}

#[derive(Clone, Debug)]
struct Hold {
    start: u64,
    end: u64,
    how: End,
    mode: Mode,
    key: Option<String>,
    token: Option<String>,
}

/// A failed (`fail`) or unknown (`info`) acquire.
#[derive(Clone, Debug)]
struct Tick {
    t: u64,
    unknown: bool,
    key: Option<String>,
    detail: Option<String>,
}

#[derive(Default)]
struct LaneData {
    holds: Vec<Hold>,
    ticks: Vec<Tick>,
}

/// The holds and ticks of every lane that held anything.
fn lanes(order: &[&Event], t_end: u64) -> BTreeMap<Lane, LaneData> {
    let mut lanes: BTreeMap<Lane, LaneData> = BTreeMap::new();
    let mut open: HashMap<(&str, u32), Vec<Hold>> = HashMap::new();
    for e in order {
        match (e.f, e.ty) {
            (Op::Acquire, Type::Ok) => open.entry((&e.process, e.task)).or_default().push(Hold {
                start: e.t_us,
                end: t_end,
                how: End::Open,
                mode: e.mode,
                key: e.key.clone(),
                token: e.token.clone(),
            }),
            (Op::Acquire, Type::Fail | Type::Info) => lanes
                .entry(Lane::new(&e.process, e.task))
                .or_default()
                .ticks
                .push(Tick {
                    t: e.t_us,
                    unknown: e.ty == Type::Info,
                    key: e.key.clone(),
                    detail: e.detail.clone(),
                }),
            (Op::Release, Type::Invoke) | (Op::Lost, _) => {
                let Some(held) = open.get_mut(&(e.process.as_str(), e.task)) else {
                    continue;
                };
                // The latest hold of the same key (any, when either names none).
                let same_key = |h: &Hold| match (&h.key, &e.key) {
                    (Some(a), Some(b)) => a == b,
                    _ => true,
                };
                let Some(i) = held.iter().rposition(same_key) else {
                    continue;
                };
                let mut hold = held.remove(i);
                hold.end = e.t_us;
                hold.how = if e.f == Op::Lost {
                    End::Lost
                } else {
                    End::Released
                };
                lanes
                    .entry(Lane::new(&e.process, e.task))
                    .or_default()
                    .holds
                    .push(hold);
            }
            _ => {}
        }
    }
    for ((process, task), held) in open {
        lanes
            .entry(Lane::new(process, task))
            .or_default()
            .holds
            .extend(held);
    }
    lanes.retain(|_, d| !d.holds.is_empty());
    for d in lanes.values_mut() {
        d.holds.sort_by_key(|h| h.start);
    }
    lanes
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Healed {
    /// Closed by an `ok`.
    Yes,
    /// Closed by a `fail`: the fault was not injected.
    Failed,
    /// Never closed: runs to the end of the run.
    Never,
}

struct FaultSpan {
    start: u64,
    end: u64,
    healed: Healed,
    label: String,
    /// What the closing event said, when it differs from the label.
    closing: Option<String>,
}

struct Instant {
    t: u64,
    text: String,
}

/// What a fault event says: its detail, else its key.
fn fault_text(e: &Event) -> String {
    e.detail
        .clone()
        .or_else(|| e.key.clone())
        .unwrap_or_else(|| "fault".to_owned())
}

/// The fault spans and the instant faults (paired as [`history::fault_spans`] does).
fn faults(order: &[&Event], t_end: u64) -> (Vec<FaultSpan>, Vec<Instant>) {
    let (paired, instant_events) = history::fault_spans(order.iter().copied());
    let spans = paired
        .into_iter()
        .map(|f| {
            let label = fault_text(f.opened);
            let closing = f.closed.map(fault_text);
            FaultSpan {
                start: f.start(),
                end: f.end().unwrap_or(t_end),
                healed: match f.closed {
                    None => Healed::Never,
                    Some(_) if f.healed() => Healed::Yes,
                    Some(_) => Healed::Failed,
                },
                closing: closing.filter(|c| *c != label && c != "fault"),
                label,
            }
        })
        .collect();
    let instants = instant_events
        .into_iter()
        .map(|e| Instant {
            t: e.t_us,
            text: if e.ty == Type::Info {
                fault_text(e)
            } else {
                format!("end of a fault that never started: {}", fault_text(e))
            },
        })
        .collect();
    (spans, instants)
}

/// Times to x positions, and to text.
struct Scale {
    t0: u64,
    span_us: f64,
    /// Decimals of seconds in tooltips.
    decimals: usize,
}

impl Scale {
    fn x(&self, t: u64) -> f64 {
        let d = t.saturating_sub(self.t0) as f64;
        LEFT + (d / self.span_us * PLOT_W).min(PLOT_W)
    }

    /// `t` as seconds since the first event.
    fn secs(&self, t: u64) -> String {
        format!(
            "{:.*}s",
            self.decimals,
            t.saturating_sub(self.t0) as f64 / 1e6
        )
    }

    /// `from–to (duration)`.
    fn range(&self, from: u64, to: u64) -> String {
        format!(
            "{}–{} ({})",
            self.secs(from),
            self.secs(to),
            duration(to.saturating_sub(from))
        )
    }
}

fn duration(us: u64) -> String {
    if us < 1_000 {
        format!("{us}µs")
    } else if us < 1_000_000 {
        format!("{:.1}ms", us as f64 / 1e3)
    } else {
        format!("{:.3}s", us as f64 / 1e6)
    }
}

/// A coordinate: one decimal, without a trailing `.0`.
struct P(f64);

impl Display for P {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tenths = (self.0 * 10.0).round() as i64;
        if tenths % 10 == 0 {
            write!(f, "{}", tenths / 10)
        } else {
            write!(f, "{:.1}", tenths as f64 / 10.0)
        }
    }
}

/// Text escaped for XML (characters XML cannot hold become U+FFFD).
struct Esc<'a>(&'a str);

impl Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '&' => f.write_str("&amp;")?,
                '<' => f.write_str("&lt;")?,
                '>' => f.write_str("&gt;")?,
                '"' => f.write_str("&quot;")?,
                '\'' => f.write_str("&apos;")?,
                '\t' | '\n' | '\r' => f.write_char(c)?,
                c if c < ' ' || c == '\u{FFFE}' || c == '\u{FFFF}' => f.write_char('\u{FFFD}')?,
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// `n thing` or `n things`.
fn count(n: usize, thing: &str) -> String {
    if n == 1 {
        format!("1 {thing}")
    } else {
        format!("{n} {thing}s")
    }
}

/// `s` cut to `max` characters (with an ellipsis).
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// A hold's tooltip.
fn hold_tooltip(lane: &str, h: &Hold, scale: &Scale) -> String {
    let mut t = lane.to_owned();
    if let Some(key) = &h.key {
        let _ = write!(t, " · {key}");
    }
    if let Some(token) = &h.token {
        let _ = write!(t, " · token {token}");
    }
    if h.mode == Mode::Shared {
        t.push_str(" · shared");
    }
    let _ = write!(t, " · {}", scale.range(h.start, h.end));
    match h.how {
        End::Released => {}
        End::Lost => {
            let _ = write!(t, " · LOST at {}", scale.secs(h.end));
        }
        End::Open => t.push_str(" · never released"),
    }
    t
}

/// A bar standing for holds less than a pixel apart.
struct Bar {
    x0: f64,
    x1: f64,
    /// The drawn right edge (at least a pixel from `x0`).
    x1_drawn: f64,
    first: usize,
    last: usize,
}

/// The bars of `holds` (all of one mode, none lost, sorted by start), merging holds less
/// than a pixel apart when either is narrower than a pixel.
fn bars(holds: &[&Hold], scale: &Scale) -> Vec<Bar> {
    let mut out: Vec<Bar> = Vec::new();
    for (i, h) in holds.iter().enumerate() {
        let (x0, x1) = (scale.x(h.start), scale.x(h.end));
        if let Some(bar) = out.last_mut() {
            let narrow = x1 - x0 < 1.0 || bar.x1 - bar.x0 < 1.0;
            if narrow && x0 - bar.x1 < 1.0 {
                bar.x1 = bar.x1.max(x1);
                bar.x1_drawn = bar.x1_drawn.max(x1).max(bar.x0 + 1.0);
                bar.last = i;
                continue;
            }
        }
        out.push(Bar {
            x0,
            x1,
            x1_drawn: x1.max(x0 + 1.0),
            first: i,
            last: i,
        });
    }
    out
}

/// Marks at pixel positions, merged when they touch: `(x0, x1, members)`.
fn merge_marks<T>(items: Vec<(f64, f64, T)>) -> Vec<(f64, f64, Vec<T>)> {
    let mut out: Vec<(f64, f64, Vec<T>)> = Vec::new();
    for (x0, x1, item) in items {
        match out.last_mut() {
            Some(last) if x0 <= last.1 + 1.0 => {
                last.1 = last.1.max(x1);
                last.2.push(item);
            }
            _ => out.push((x0, x1, vec![item])),
        }
    }
    out
}

/// A tooltip for merged marks: the one text, or a count and the first few.
fn merged_tooltip(what: &str, texts: &[String]) -> String {
    if let [one] = texts {
        return one.clone();
    }
    let mut t = format!("{} {what}:", texts.len());
    for text in texts.iter().take(TOOLTIP_DETAILS) {
        let _ = write!(t, "\n- {text}");
    }
    if texts.len() > TOOLTIP_DETAILS {
        let _ = write!(t, "\n… and {} more", texts.len() - TOOLTIP_DETAILS);
    }
    t
}

/// A grid step of about a tenth of `span_s`: 1, 2 or 5 times a power of ten.
fn grid_step(span_s: f64) -> f64 {
    let raw = span_s / 10.0;
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

/// The times of the grid lines: the multiples of `step` up to `span_s`.
fn grid_times(span_s: f64, step: f64) -> Vec<f64> {
    let mut times = Vec::new();
    let mut k = 0u32;
    loop {
        let t = step * k as f64;
        if t > span_s * (1.0 + 1e-9) {
            break;
        }
        times.push(t);
        k += 1;
    }
    times
}

/// The name and colour of a hold's mode.
fn mode_style(mode: Mode) -> (&'static str, &'static str) {
    match mode {
        Mode::Exclusive => ("exclusive", EXCLUSIVE),
        Mode::Shared => ("shared", SHARED),
    }
}

/// A note: its text, and a tooltip when the text says less than there is.
type Note = (String, Option<String>);

/// Marks merged per pixel: `(x0, x1, texts)`.
type Marks = Vec<(f64, f64, Vec<String>)>;

/// The SVG text of the timeline.
fn render(title: &str, events: &[Event], violations: &[Violation]) -> Result<String, fmt::Error> {
    let timeline = Timeline::read(events, violations);
    let lane_bars = timeline.lane_bars();
    let notes = timeline.notes(&lane_bars);
    let fault_marks = timeline.fault_marks();
    let instant_marks = timeline.instant_marks();
    let violation_marks = timeline.violation_marks();
    let n_bars = lane_bars.iter().map(LaneBars::n_bars).sum();
    let layout = Layout::new(notes.len(), lane_bars.len());
    let mut canvas = Canvas::new(&timeline.scale, layout, n_bars);
    canvas.header(title, &timeline)?;
    canvas.notes(&notes)?;
    canvas.lanes(&lane_bars)?;
    canvas.axis()?;
    canvas.fault_caps(&fault_marks)?;
    canvas.fault_labels(&timeline, &fault_marks)?;
    canvas.holds(&lane_bars)?;
    canvas.acquire_ticks(&lane_bars)?;
    canvas.fault_spans(&fault_marks)?;
    canvas.violation_bands(&violation_marks)?;
    canvas.instant_faults(&instant_marks)?;
    canvas.violations(&violation_marks)?;
    canvas.legend()?;
    canvas.finish()
}

/// What the timeline shows, read from the history: the scale, the lanes, the faults and the
/// violations.
struct Timeline<'a> {
    scale: Scale,
    t_end: u64,
    lanes: BTreeMap<Lane, LaneData>,
    spans: Vec<FaultSpan>,
    instants: Vec<Instant>,
    timed: Vec<&'a Violation>,
    untimed: Vec<&'a Violation>,
    n_events: usize,
    n_violations: usize,
    n_holds: usize,
}

impl<'a> Timeline<'a> {
    /// The events in time order, matched into lanes and faults, and the scale of the run.
    fn read(events: &[Event], violations: &'a [Violation]) -> Timeline<'a> {
        let mut order: Vec<&Event> = events.iter().collect();
        order.sort_by_key(|e| e.t_us);
        let (timed, untimed): (Vec<&Violation>, Vec<&Violation>) =
            violations.iter().partition(|v| v.t_us != 0);
        let t0 = order
            .first()
            .map(|e| e.t_us)
            .or_else(|| timed.iter().map(|v| v.t_us).min())
            .unwrap_or(0);
        let t_end = order
            .iter()
            .map(|e| e.t_us)
            .chain(timed.iter().map(|v| v.until_us.max(v.t_us)))
            .max()
            .unwrap_or(t0)
            .max(t0);
        let span_us = ((t_end - t0) as f64).max(1_000.0);
        let scale = Scale {
            t0,
            span_us,
            decimals: if span_us >= 10e6 { 3 } else { 6 },
        };
        let all_lanes = lanes(&order, t_end);
        let (spans, instants) = faults(&order, t_end);
        let n_holds = all_lanes.values().map(|d| d.holds.len()).sum();
        Timeline {
            scale,
            t_end,
            lanes: all_lanes,
            spans,
            instants,
            timed,
            untimed,
            n_events: events.len(),
            n_violations: violations.len(),
            n_holds,
        }
    }

    /// The bars of each shown lane (the first [`MAX_LANES`]).
    fn lane_bars(&self) -> Vec<LaneBars<'_>> {
        self.lanes
            .iter()
            .take(MAX_LANES)
            .map(|(lane, data)| LaneBars::new(lane, data, &self.scale))
            .collect()
    }

    /// The notes: lanes left out, holds merged, violations without a time, nothing held.
    fn notes(&self, lane_bars: &[LaneBars]) -> Vec<Note> {
        let shown = lane_bars.len();
        let shown_holds: usize = lane_bars.iter().map(|l| l.n_holds).sum();
        let n_bars: usize = lane_bars.iter().map(LaneBars::n_bars).sum();
        let mut notes: Vec<Note> = Vec::new();
        if self.lanes.len() > shown {
            notes.push((
                format!(
                    "Only the first {} of {} lanes are drawn: {} holds on the other {} lanes are not shown.",
                    shown,
                    self.lanes.len(),
                    self.n_holds - shown_holds,
                    self.lanes.len() - shown
                ),
                None,
            ));
        }
        if n_bars < shown_holds {
            notes.push((
                format!(
                    "{shown_holds} holds drawn as {n_bars} bars: holds less than a pixel apart are merged (the tooltip gives the count)."
                ),
                None,
            ));
        }
        if !self.untimed.is_empty() {
            let texts: Vec<String> = self
                .untimed
                .iter()
                .map(|v| format!("{:?}: {}", v.property, v.detail))
                .collect();
            notes.push((
                clip(
                    &format!(
                        "{} without a time: {}",
                        count(self.untimed.len(), "violation"),
                        texts.join("; ")
                    ),
                    180,
                ),
                Some(merged_tooltip("violations without a time", &texts)),
            ));
        }
        if self.lanes.is_empty() {
            notes.push(("No process held anything.".to_owned(), None));
        }
        notes
    }

    /// The fault spans as drawn: their extent, class, colour and tooltip.
    fn fault_marks(&self) -> Vec<FaultMark> {
        let scale = &self.scale;
        self.spans
            .iter()
            .map(|f| {
                let (x0, x1) = (scale.x(f.start), scale.x(f.end));
                let mut tooltip = format!("fault: {} · {}", f.label, scale.range(f.start, f.end));
                match (f.healed, &f.closing) {
                    (Healed::Yes, Some(c)) => {
                        let _ = write!(tooltip, " · healed: {c}");
                    }
                    (Healed::Yes, None) => {}
                    (Healed::Failed, c) => {
                        let _ = write!(
                            tooltip,
                            " · NOT INJECTED: {}",
                            c.as_deref().unwrap_or("failed")
                        );
                    }
                    (Healed::Never, _) => tooltip.push_str(" · not healed by the end of the run"),
                }
                let (class, fill) = match f.healed {
                    Healed::Failed => ("failed", FAULT_FAILED),
                    Healed::Yes => ("healed", FAULT),
                    Healed::Never => ("open", FAULT),
                };
                FaultMark {
                    x: x0,
                    w: (x1 - x0).max(1.0),
                    class,
                    fill,
                    tooltip,
                }
            })
            .collect()
    }

    /// The instant faults, merged per pixel.
    fn instant_marks(&self) -> Marks {
        merge_marks(
            self.instants
                .iter()
                .map(|i| {
                    let x = self.scale.x(i.t);
                    (x, x, format!("{} at {}", i.text, self.scale.secs(i.t)))
                })
                .collect(),
        )
    }

    /// The violations with a time, merged per pixel.
    fn violation_marks(&self) -> Marks {
        let scale = &self.scale;
        let mut timed_sorted = self.timed.clone();
        timed_sorted.sort_by_key(|v| v.t_us);
        merge_marks(
            timed_sorted
                .iter()
                .map(|v| {
                    let x0 = scale.x(v.t_us);
                    let x1 = scale.x(v.until_us.max(v.t_us)).max(x0 + VIOLATION_MIN_W);
                    let text = format!(
                        "{:?}: {} ({})",
                        v.property,
                        v.detail,
                        if v.until_us > v.t_us {
                            scale.range(v.t_us, v.until_us)
                        } else {
                            format!("at {}", scale.secs(v.t_us))
                        }
                    );
                    (x0, x1, text)
                })
                .collect(),
        )
    }
}

/// The bars of the holds of one mode on a lane.
struct ModeBars<'a> {
    mode: Mode,
    holds: Vec<&'a Hold>,
    bars: Vec<Bar>,
}

/// A shown lane: its bars by mode, its lost holds apart, and its ticks.
struct LaneBars<'a> {
    label: String,
    modes: Vec<ModeBars<'a>>,
    lost: Vec<&'a Hold>,
    ticks: &'a [Tick],
    n_holds: usize,
}

impl<'a> LaneBars<'a> {
    /// The bars of `lane`, by mode; lost holds apart.
    fn new(lane: &Lane, data: &'a LaneData, scale: &Scale) -> LaneBars<'a> {
        let modes = [Mode::Exclusive, Mode::Shared]
            .into_iter()
            .map(|mode| {
                let holds: Vec<&Hold> = data
                    .holds
                    .iter()
                    .filter(|h| h.mode == mode && h.how != End::Lost)
                    .collect();
                let bars = bars(&holds, scale);
                ModeBars { mode, holds, bars }
            })
            .collect();
        LaneBars {
            label: lane.label(),
            modes,
            lost: data.holds.iter().filter(|h| h.how == End::Lost).collect(),
            ticks: &data.ticks,
            n_holds: data.holds.len(),
        }
    }

    /// The bars drawn for the lane, lost holds included.
    fn n_bars(&self) -> usize {
        self.modes.iter().map(|m| m.bars.len()).sum::<usize>() + self.lost.len()
    }
}

/// A fault span as drawn: a strip above the violations lane and a span across the lanes.
struct FaultMark {
    x: f64,
    w: f64,
    class: &'static str,
    fill: &'static str,
    tooltip: String,
}

/// The vertical layout: where each band of the picture starts.
struct Layout {
    notes_top: f64,
    band_top: f64,
    viol_top: f64,
    lanes_top: f64,
    lanes_bottom: f64,
    height: f64,
}

impl Layout {
    /// The layout for `n_notes` notes and `n_lanes` lanes.
    fn new(n_notes: usize, n_lanes: usize) -> Layout {
        let notes_top = 58.0;
        let band_top = notes_top + 14.0 * n_notes as f64;
        let viol_top = band_top + LABEL_ROWS as f64 * LABEL_ROW_H + 6.0;
        let lanes_top = viol_top + LANE_H + 4.0;
        let lanes_bottom = lanes_top + LANE_H * n_lanes.max(1) as f64;
        Layout {
            notes_top,
            band_top,
            viol_top,
            lanes_top,
            lanes_bottom,
            height: lanes_bottom + 62.0,
        }
    }

    /// The top of the `i`th lane.
    fn lane_y(&self, i: usize) -> f64 {
        self.lanes_top + LANE_H * i as f64
    }
}

/// The SVG being written, with the scale and the layout every section draws by.
struct Canvas<'a> {
    svg: String,
    scale: &'a Scale,
    layout: Layout,
}

impl<'a> Canvas<'a> {
    fn new(scale: &'a Scale, layout: Layout, n_bars: usize) -> Canvas<'a> {
        Canvas {
            svg: String::with_capacity(64 * 1024 + 200 * n_bars),
            scale,
            layout,
        }
    }

    /// The `<svg>` element, its background, the title and the line of counts.
    fn header(&mut self, title: &str, t: &Timeline) -> fmt::Result {
        let s = &mut self.svg;
        let height = self.layout.height;
        writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="10">"#,
            w = P(WIDTH),
            h = P(height)
        )?;
        writeln!(s, "<title>{}</title>", Esc(title))?;
        writeln!(
            s,
            r#"<rect width="{}" height="{}" fill="white"/>"#,
            P(WIDTH),
            P(height)
        )?;
        writeln!(
            s,
            r#"<text class="title" x="10" y="22" font-size="16" font-weight="bold">{}</text>"#,
            Esc(title)
        )?;
        writeln!(
            s,
            r##"<text class="counts" x="10" y="40" font-size="11" fill="#444">{} · {} on {} · {} · {} · {} · {} long</text>"##,
            count(t.n_events, "event"),
            count(t.n_holds, "hold"),
            count(t.lanes.len(), "lane"),
            count(t.spans.len(), "fault"),
            count(t.instants.len(), "instant fault"),
            count(t.n_violations, "violation"),
            duration(t.t_end - t.scale.t0)
        )
    }

    /// The notes, one line each under the counts.
    fn notes(&mut self, notes: &[Note]) -> fmt::Result {
        for (i, (text, tooltip)) in notes.iter().enumerate() {
            write!(
                self.svg,
                r##"<text class="note" x="10" y="{}" font-size="11" fill="#a0522d">{}"##,
                P(self.layout.notes_top + 14.0 * i as f64),
                Esc(text)
            )?;
            if let Some(t) = tooltip {
                write!(self.svg, "<title>{}</title>", Esc(t))?;
            }
            writeln!(self.svg, "</text>")?;
        }
        Ok(())
    }

    /// Lanes: the violations lane, then one per process and task, striped.
    fn lanes(&mut self, lane_bars: &[LaneBars]) -> fmt::Result {
        let viol_top = self.layout.viol_top;
        writeln!(
            self.svg,
            r##"<rect class="violations-lane" x="{}" y="{}" width="{}" height="{}" fill="#fdecec"/>"##,
            P(LEFT),
            P(viol_top),
            P(PLOT_W),
            P(LANE_H)
        )?;
        writeln!(
            self.svg,
            r##"<text class="lane-label" x="{}" y="{}" text-anchor="end" fill="{RED}">violations</text>"##,
            P(LEFT - 6.0),
            P(viol_top + LANE_H / 2.0 + 3.5)
        )?;
        for (i, lane) in lane_bars.iter().enumerate() {
            let y = self.layout.lane_y(i);
            if i % 2 == 0 {
                writeln!(
                    self.svg,
                    r##"<rect x="{}" y="{}" width="{}" height="{}" fill="#f3f3f3"/>"##,
                    P(LEFT),
                    P(y),
                    P(PLOT_W),
                    P(LANE_H)
                )?;
            }
            writeln!(
                self.svg,
                r#"<text class="lane-label" x="{}" y="{}" text-anchor="end">{}</text>"#,
                P(LEFT - 6.0),
                P(y + LANE_H / 2.0 + 3.5),
                Esc(&lane.label)
            )?;
        }
        Ok(())
    }

    /// The time axis and its grid.
    fn axis(&mut self) -> fmt::Result {
        let span_s = self.scale.span_us / 1e6;
        let step = grid_step(span_s);
        let decimals = (-step.log10().floor()).max(0.0) as usize;
        let times = grid_times(span_s, step);
        self.grid(&times, span_s)?;
        let s = &mut self.svg;
        let lanes_bottom = self.layout.lanes_bottom;
        writeln!(
            s,
            r##"<line x1="{}" y1="{y}" x2="{}" y2="{y}" stroke="#888888"/>"##,
            P(LEFT),
            P(LEFT + PLOT_W),
            y = P(lanes_bottom)
        )?;
        writeln!(s, r##"<g class="axis" text-anchor="middle" fill="#444">"##)?;
        for t in &times {
            writeln!(
                s,
                r#"<text x="{}" y="{}">{:.*}s</text>"#,
                P(LEFT + t / span_s * PLOT_W),
                P(lanes_bottom + 15.0),
                decimals,
                t
            )?;
        }
        writeln!(
            s,
            r#"<text x="{}" y="{}" font-size="11">seconds since the first event</text>"#,
            P(LEFT + PLOT_W / 2.0),
            P(lanes_bottom + 30.0)
        )?;
        writeln!(s, "</g>")
    }

    /// The grid: a vertical line at each of `times` (seconds), across the lanes.
    fn grid(&mut self, times: &[f64], span_s: f64) -> fmt::Result {
        writeln!(
            self.svg,
            r##"<g class="grid" stroke="#dddddd" stroke-width="1">"##
        )?;
        for t in times {
            let x = LEFT + t / span_s * PLOT_W;
            writeln!(
                self.svg,
                r#"<line x1="{x}" y1="{}" x2="{x}" y2="{}"/>"#,
                P(self.layout.viol_top),
                P(self.layout.lanes_bottom + 4.0),
                x = P(x)
            )?;
        }
        writeln!(self.svg, "</g>")
    }

    /// Faults: a strip above the violations lane carrying each one's tooltip (the
    /// translucent spans across the lanes are drawn over the holds, by [`Canvas::fault_spans`]).
    fn fault_caps(&mut self, marks: &[FaultMark]) -> fmt::Result {
        writeln!(self.svg, r#"<g class="fault-caps">"#)?;
        for m in marks {
            writeln!(
                self.svg,
                r#"<rect class="fault-cap {}" x="{}" y="{}" width="{}" height="3" fill="{}"><title>{}</title></rect>"#,
                m.class,
                P(m.x),
                P(self.layout.viol_top - 5.0),
                P(m.w),
                m.fill,
                Esc(&m.tooltip)
            )?;
        }
        writeln!(self.svg, "</g>")
    }

    /// The labels of fault spans and instant faults by position, each in the first of the
    /// rows where it does not overlap the one before (those that fit in none are left out).
    fn fault_labels(&mut self, t: &Timeline, marks: &[FaultMark]) -> fmt::Result {
        let scale = self.scale;
        let mut labels: Vec<(f64, &str, &str, String)> = t
            .spans
            .iter()
            .zip(marks)
            .map(|(f, m)| (m.x, f.label.as_str(), "fault-label", m.tooltip.clone()))
            .chain(t.instants.iter().map(|i| {
                (
                    scale.x(i.t),
                    i.text.as_str(),
                    "fault-label instant",
                    format!("instant fault: {} at {}", i.text, scale.secs(i.t)),
                )
            }))
            .collect();
        labels.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut label_ends = [f64::NEG_INFINITY; LABEL_ROWS];
        writeln!(self.svg, r##"<g class="fault-labels" fill="#8a4b08">"##)?;
        for (x, text, class, tooltip) in labels {
            let text = clip(text, LABEL_CHARS);
            let Some(row) = label_ends.iter().position(|end| *end + 4.0 <= x) else {
                continue;
            };
            label_ends[row] = x + text.chars().count() as f64 * CHAR_W;
            writeln!(
                self.svg,
                r#"<text class="{class}" x="{}" y="{}">{}<title>{}</title></text>"#,
                P(x + 1.0),
                P(self.layout.band_top + LABEL_ROW_H * (row + 1) as f64 - 2.5),
                Esc(&text),
                Esc(&tooltip)
            )?;
        }
        writeln!(self.svg, "</g>")
    }

    /// Holds, one group per lane (its translation gives the y), by mode; lost ones on top
    /// with a red outline and a ✕ at the end.
    fn holds(&mut self, lane_bars: &[LaneBars]) -> fmt::Result {
        for (i, lane) in lane_bars.iter().enumerate() {
            writeln!(
                self.svg,
                r#"<g class="lane" data-lane="{}" transform="translate(0,{})">"#,
                Esc(&lane.label),
                P(self.layout.lane_y(i) + (LANE_H - BAR_H) / 2.0)
            )?;
            for mode in &lane.modes {
                self.mode_bars(&lane.label, mode)?;
            }
            self.lost_holds(lane)?;
            writeln!(self.svg, "</g>")?;
        }
        Ok(())
    }

    /// The bars of the holds of one mode on a lane, in that mode's colour.
    fn mode_bars(&mut self, lane: &str, mode: &ModeBars) -> fmt::Result {
        if mode.bars.is_empty() {
            return Ok(());
        }
        let (name, fill) = mode_style(mode.mode);
        writeln!(self.svg, r#"<g class="{name}" fill="{fill}">"#)?;
        for bar in &mode.bars {
            self.hold_bar(lane, name, &mode.holds, bar)?;
        }
        writeln!(self.svg, "</g>")
    }

    /// One bar: a hold, or holds less than a pixel apart (the tooltip gives the count).
    fn hold_bar(&mut self, lane: &str, name: &str, holds: &[&Hold], bar: &Bar) -> fmt::Result {
        let n = bar.last - bar.first + 1;
        let (x, w) = (P(bar.x0), P(bar.x1_drawn - bar.x0));
        if n == 1 {
            let h = holds[bar.first];
            let class = if h.how == End::Open {
                "hold open"
            } else {
                "hold"
            };
            writeln!(
                self.svg,
                r#"<rect class="{class}" x="{x}" width="{w}" height="{}"><title>{}</title></rect>"#,
                P(BAR_H),
                Esc(&hold_tooltip(lane, h, self.scale))
            )
        } else {
            let first = holds[bar.first];
            let end = holds[bar.first..=bar.last]
                .iter()
                .map(|h| h.end)
                .max()
                .unwrap_or(first.end);
            writeln!(
                self.svg,
                r#"<rect class="hold merged" data-holds="{n}" x="{x}" width="{w}" height="{}"><title>{} · {n} {name} holds less than a pixel apart · {}</title></rect>"#,
                P(BAR_H),
                Esc(lane),
                self.scale.range(first.start, end)
            )
        }
    }

    /// The lost holds of a lane: a red outline and a red ✕ at the end.
    fn lost_holds(&mut self, lane: &LaneBars) -> fmt::Result {
        if lane.lost.is_empty() {
            return Ok(());
        }
        let s = &mut self.svg;
        writeln!(s, r#"<g class="lost" stroke="{RED}" stroke-width="1.5">"#)?;
        for h in &lane.lost {
            let (x0, x1) = (self.scale.x(h.start), self.scale.x(h.end));
            let (name, fill) = mode_style(h.mode);
            let tooltip = hold_tooltip(&lane.label, h, self.scale);
            writeln!(
                s,
                r#"<rect class="hold {name} lost" x="{}" width="{}" height="{}" fill="{fill}"><title>{}</title></rect>"#,
                P(x0),
                P((x1 - x0).max(1.0)),
                P(BAR_H),
                Esc(&tooltip)
            )?;
            let (cx, cy, r) = (x1.max(x0 + 1.0), BAR_H / 2.0, 4.0);
            writeln!(
                s,
                r#"<path class="lost-mark" d="M{} {}L{} {}M{} {}L{} {}" stroke-width="2"><title>{}</title></path>"#,
                P(cx - r),
                P(cy - r),
                P(cx + r),
                P(cy + r),
                P(cx - r),
                P(cy + r),
                P(cx + r),
                P(cy - r),
                Esc(&tooltip)
            )?;
        }
        writeln!(s, "</g>")
    }

    /// Failed and unknown acquires: ticks, merged per pixel.
    fn acquire_ticks(&mut self, lane_bars: &[LaneBars]) -> fmt::Result {
        writeln!(self.svg, r#"<g class="acquire-ticks">"#)?;
        for (i, lane) in lane_bars.iter().enumerate() {
            for (unknown, colour, class, what) in [
                (false, FAIL_TICK, "acquire-fail", "failed acquires"),
                (
                    true,
                    INFO_TICK,
                    "acquire-info",
                    "acquires of unknown outcome",
                ),
            ] {
                let marks = tick_marks(&lane.label, lane.ticks, unknown, self.scale);
                let y = self.layout.lane_y(i) + if unknown { LANE_H - TICK_H - 1.0 } else { 1.0 };
                for (x0, x1, texts) in marks {
                    writeln!(
                        self.svg,
                        r#"<rect class="{class}" x="{}" y="{}" width="{}" height="{}" fill="{colour}"><title>{}</title></rect>"#,
                        P(x0),
                        P(y),
                        P((x1 - x0).max(1.5)),
                        P(TICK_H),
                        Esc(&merged_tooltip(what, &texts))
                    )?;
                }
            }
        }
        writeln!(self.svg, "</g>")
    }

    /// Over the holds, letting the pointer through to them: the faults, translucent, across
    /// the lanes.
    fn fault_spans(&mut self, marks: &[FaultMark]) -> fmt::Result {
        writeln!(
            self.svg,
            r#"<g class="faults" fill-opacity="0.18" pointer-events="none">"#
        )?;
        for m in marks {
            writeln!(
                self.svg,
                r#"<rect class="fault {}" x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{}</title></rect>"#,
                m.class,
                P(m.x),
                P(self.layout.viol_top),
                P(m.w),
                P(self.layout.lanes_bottom - self.layout.viol_top),
                m.fill,
                Esc(&m.tooltip)
            )?;
        }
        writeln!(self.svg, "</g>")
    }

    /// Over the holds, letting the pointer through to them: a faint band under each violation.
    fn violation_bands(&mut self, marks: &Marks) -> fmt::Result {
        writeln!(
            self.svg,
            r#"<g class="violation-bands" fill="{RED}" fill-opacity="0.12" pointer-events="none">"#
        )?;
        for (x0, x1, _) in marks {
            writeln!(
                self.svg,
                r#"<rect x="{}" y="{}" width="{}" height="{}"/>"#,
                P(*x0),
                P(self.layout.lanes_top),
                P(x1 - x0),
                P(self.layout.lanes_bottom - self.layout.lanes_top)
            )?;
        }
        writeln!(self.svg, "</g>")
    }

    /// Instant faults: thin lines across every lane.
    fn instant_faults(&mut self, marks: &Marks) -> fmt::Result {
        writeln!(
            self.svg,
            r#"<g class="instant-faults" stroke="{INSTANT}" stroke-width="1.2">"#
        )?;
        for (x0, x1, texts) in marks {
            let x = (x0 + x1) / 2.0;
            writeln!(
                self.svg,
                r#"<line class="fault-instant" x1="{x}" y1="{}" x2="{x}" y2="{}"><title>{}</title></line>"#,
                P(self.layout.band_top),
                P(self.layout.lanes_bottom),
                Esc(&merged_tooltip("instant faults", texts)),
                x = P(x)
            )?;
        }
        writeln!(self.svg, "</g>")
    }

    /// Violation marks on their lane.
    fn violations(&mut self, marks: &Marks) -> fmt::Result {
        writeln!(self.svg, r#"<g class="violations" fill="{RED}">"#)?;
        for (x0, x1, texts) in marks {
            writeln!(
                self.svg,
                r#"<rect class="violation" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>"#,
                P(*x0),
                P(self.layout.viol_top + 2.0),
                P(x1 - x0),
                P(LANE_H - 4.0),
                Esc(&merged_tooltip("violations", texts))
            )?;
        }
        writeln!(self.svg, "</g>")
    }

    /// The legend: a swatch and a name for each kind of mark.
    fn legend(&mut self) -> fmt::Result {
        let s = &mut self.svg;
        let legend_y = self.layout.lanes_bottom + 46.0;
        let mut x = LEFT;
        writeln!(s, r#"<g class="legend" font-size="11">"#)?;
        for (swatch, text) in [
            (format!(r#"fill="{EXCLUSIVE}""#), "exclusive hold"),
            (format!(r#"fill="{SHARED}""#), "shared hold"),
            (
                format!(r#"fill="{EXCLUSIVE}" stroke="{RED}" stroke-width="1.5""#),
                "lost lease",
            ),
            (format!(r#"fill="{FAIL_TICK}""#), "acquire failed"),
            (format!(r#"fill="{INFO_TICK}""#), "acquire unknown"),
            (format!(r#"fill="{FAULT}" fill-opacity="0.25""#), "fault"),
            (format!(r#"fill="{INSTANT}""#), "instant fault"),
            (format!(r#"fill="{RED}""#), "violation"),
        ] {
            let w = if text == "instant fault" { 2.0 } else { 14.0 };
            writeln!(
                s,
                r#"<rect x="{}" y="{}" width="{}" height="10" {swatch}/>"#,
                P(x),
                P(legend_y - 9.0),
                P(w),
            )?;
            // The lost lease's swatch ends in its ✕.
            let w = if text == "lost lease" {
                writeln!(
                    s,
                    r#"<path d="M{} {}l8 8m0 -8l-8 8" stroke="{RED}" stroke-width="2"/>"#,
                    P(x + w - 4.0),
                    P(legend_y - 8.0)
                )?;
                w + 4.0
            } else {
                w
            };
            writeln!(
                s,
                r#"<text x="{}" y="{}">{}</text>"#,
                P(x + w + 4.0),
                P(legend_y),
                Esc(text)
            )?;
            x += w + 4.0 + text.chars().count() as f64 * 6.2 + 16.0;
        }
        writeln!(s, "</g>")
    }

    /// The closing `</svg>`: the finished picture.
    fn finish(mut self) -> Result<String, fmt::Error> {
        writeln!(self.svg, "</svg>")?;
        Ok(self.svg)
    }
}

/// The ticks of a lane's failed (or, with `unknown`, unknown) acquires, merged per pixel.
fn tick_marks(lane: &str, ticks: &[Tick], unknown: bool, scale: &Scale) -> Marks {
    merge_marks(
        ticks
            .iter()
            .filter(|t| t.unknown == unknown)
            .map(|t| {
                let x = scale.x(t.t);
                let mut text = format!(
                    "{lane} · {} · at {}",
                    if unknown {
                        "acquire: unknown outcome"
                    } else {
                        "acquire failed"
                    },
                    scale.secs(t.t)
                );
                if let Some(key) = &t.key {
                    let _ = write!(text, " · {key}");
                }
                if let Some(detail) = &t.detail {
                    let _ = write!(text, " · {detail}");
                }
                (x, x, text)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Property;

    /// `t` seconds after the start, in µs (the history's clock starts at 1000 s).
    fn at(t: f64) -> u64 {
        1_000_000_000 + (t * 1e6) as u64
    }

    fn classes<'a>(n: &roxmltree::Node<'a, '_>) -> Vec<&'a str> {
        n.attribute("class")
            .map(|c| c.split_whitespace().collect())
            .unwrap_or_default()
    }

    fn has_class(n: &roxmltree::Node, class: &str) -> bool {
        classes(n).contains(&class)
    }

    /// `n` or a group it is in has `class`.
    fn in_class(n: &roxmltree::Node, class: &str) -> bool {
        n.ancestors().any(|a| has_class(&a, class))
    }

    /// The middle of a bar, in the SVG's coordinates: its lane group is translated.
    fn bar_middle(n: &roxmltree::Node) -> f64 {
        let lane = n.ancestors().find(|a| has_class(a, "lane")).unwrap();
        let t = lane.attribute("transform").unwrap();
        let y: f64 = t
            .strip_prefix("translate(0,")
            .and_then(|t| t.strip_suffix(')'))
            .unwrap()
            .parse()
            .unwrap();
        y + n.attribute("y").map_or(0.0, |y| y.parse().unwrap()) + BAR_H / 2.0
    }

    fn tooltip(n: &roxmltree::Node) -> String {
        n.children()
            .find(|c| c.has_tag_name("title"))
            .and_then(|t| t.text())
            .unwrap_or_default()
            .to_owned()
    }

    fn num(n: &roxmltree::Node, attr: &str) -> f64 {
        n.attribute(attr)
            .unwrap_or_else(|| panic!("no {attr} on {n:?}"))
            .parse()
            .unwrap()
    }

    /// The x of `t` seconds after the first event, for a run `span` seconds long.
    fn x_of(t: f64, span: f64) -> f64 {
        LEFT + t / span * PLOT_W
    }

    /// With `TIMELINE_KEEP=<dir>`, a copy of the picture there, to look at.
    fn keep(path: &Path) {
        if let Some(dir) = std::env::var_os("TIMELINE_KEEP") {
            let to = Path::new(&dir).join(path.file_name().unwrap());
            std::fs::copy(path, &to).unwrap();
            eprintln!("kept {}", to.display());
        }
    }

    fn small_history() -> (Vec<Event>, Vec<Violation>) {
        use Op::*;
        use Type::*;
        let events = vec![
            // w0/0 holds k from 1 s to 4 s.
            Event::at(at(0.0), "w0", 0, Invoke, Acquire).key("k"),
            Event::at(at(1.0), "w0", 0, Ok, Acquire).key("k").token(5),
            // The nemesis pauses the server from 2 s to 5 s.
            Event::at(at(2.0), "nemesis", 0, Invoke, Fault)
                .key("redis-0")
                .detail("pause redis-0"),
            Event::at(at(2.5), "w1", 0, Invoke, Acquire).key("k"),
            // w1/0 gets k at 3 s while w0/0 still holds it: the overlap.
            Event::at(at(3.0), "w1", 0, Ok, Acquire).key("k").token(6),
            Event::at(at(4.0), "w0", 0, Invoke, Release).key("k"),
            Event::at(at(4.1), "w0", 0, Ok, Release).key("k"),
            Event::at(at(5.0), "nemesis", 0, Ok, Fault)
                .key("redis-0")
                .detail("resume redis-0"),
            // w1/0's lease is lost at 6 s; it releases later (no second bar).
            Event::at(at(6.0), "w1", 0, Info, Lost).key("k"),
            Event::at(at(6.5), "w1", 0, Invoke, Release).key("k"),
            Event::at(at(6.6), "w1", 0, Fail, Release).key("k"),
            // An instant fault.
            Event::at(at(7.0), "nemesis", 0, Info, Fault).detail("client kill <all> & co"),
            // w1/2: a shared hold from 7.5 s, never released; a failed acquire on w0/0.
            Event::at(at(7.5), "w1", 2, Ok, Acquire)
                .key("sem")
                .token(7)
                .mode(Mode::Shared),
            Event::at(at(8.0), "w0", 0, Invoke, Acquire).key("k"),
            Event::at(at(9.0), "w0", 0, Fail, Acquire)
                .key("k")
                .detail("timed out"),
            // w2/0 only ever fails: no lane.
            Event::at(at(9.5), "w2", 0, Fail, Acquire).key("k"),
            Event::at(at(10.0), "w0", 0, Invoke, Read).key("k"),
        ];
        let violations = vec![Violation {
            t_us: at(3.0),
            until_us: at(4.0),
            property: Property::Exclusion,
            detail: "w0/0 (token 5) and w1/0 (token 6) both held k".to_owned(),
        }];
        (events, violations)
    }

    #[test]
    fn draws_holds_faults_lost_leases_and_violations() {
        let (events, violations) = small_history();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("timeline.svg");
        draw("scenario <pause> & \"kill\"", &events, &violations, &path).unwrap();
        keep(&path);
        let text = std::fs::read_to_string(&path).unwrap();
        let doc = roxmltree::Document::parse(&text).expect("valid XML");
        let root = doc.root_element();
        assert!(root.has_tag_name("svg"));
        assert_eq!(root.attribute("width"), Some("1200"));
        let span = 10.0;

        // The title, escaped and read back.
        let title = root.descendants().find(|n| has_class(n, "title")).unwrap();
        assert_eq!(title.text(), Some("scenario <pause> & \"kill\""));

        // Lanes: w0/0, w1/0, w1/2 in order (w2/0 never held anything), under "violations".
        let labels: Vec<(&str, f64)> = root
            .descendants()
            .filter(|n| has_class(n, "lane-label"))
            .map(|n| (n.text().unwrap(), num(&n, "y")))
            .collect();
        let names: Vec<&str> = labels.iter().map(|l| l.0).collect();
        assert_eq!(names, ["violations", "w0/0", "w1/0", "w1/2"]);
        let lane_y = |name: &str| labels.iter().find(|l| l.0 == name).unwrap().1;

        // One bar per hold: w0/0's, w1/0's (lost), w1/2's (shared, open).
        let holds: Vec<roxmltree::Node> = root
            .descendants()
            .filter(|n| has_class(n, "hold"))
            .collect();
        assert_eq!(holds.len(), 3, "{text}");
        assert!(!holds.iter().any(|h| has_class(h, "merged")));
        let hold = |lane: &str| {
            holds
                .iter()
                .find(|h| tooltip(h).starts_with(&format!("{lane} ")))
                .unwrap_or_else(|| panic!("no hold on {lane}"))
        };
        let (h0, h1, h2) = (hold("w0/0"), hold("w1/0"), hold("w1/2"));
        // Each on its own lane, placed by time.
        for (h, lane) in [(h0, "w0/0"), (h1, "w1/0"), (h2, "w1/2")] {
            let y = bar_middle(h);
            assert!((y - (lane_y(lane) - 3.5)).abs() < 1.0, "{lane}: {y}");
        }
        let close = |a: f64, b: f64| (a - b).abs() < 0.11;
        assert!(close(num(h0, "x"), x_of(1.0, span)));
        assert!(close(num(h0, "width"), x_of(4.0, span) - x_of(1.0, span)));
        assert!(tooltip(h0).contains("token 5"), "{}", tooltip(h0));
        // The overlap: w1/0's bar starts before w0/0's ends.
        assert!(num(h1, "x") < num(h0, "x") + num(h0, "width"));
        assert!(close(num(h1, "x"), x_of(3.0, span)));
        // Colours: exclusive and shared differ.
        assert!(in_class(h0, "exclusive") && in_class(h2, "shared"));
        let fill = |h: &roxmltree::Node| {
            h.ancestors()
                .find_map(|a| a.attribute("fill"))
                .unwrap()
                .to_owned()
        };
        assert_ne!(fill(h0), fill(h2));
        // The never-released hold runs to the end.
        assert!(has_class(h2, "open"));
        assert!(close(num(h2, "x") + num(h2, "width"), x_of(10.0, span)));

        // The lost hold: ends at the lost event, red outline, a ✕ there.
        assert!(has_class(h1, "lost") && !has_class(h0, "lost") && !has_class(h2, "lost"));
        assert!(close(num(h1, "x") + num(h1, "width"), x_of(6.0, span)));
        assert_eq!(
            h1.ancestors().find_map(|a| a.attribute("stroke")),
            Some(RED)
        );
        assert!(tooltip(h1).contains("LOST at 6.000s"), "{}", tooltip(h1));
        let marks: Vec<_> = root
            .descendants()
            .filter(|n| has_class(n, "lost-mark"))
            .collect();
        assert_eq!(marks.len(), 1);

        // The fault span: 2 s to 5 s, across the lanes, labelled.
        let faults: Vec<_> = root
            .descendants()
            .filter(|n| n.has_tag_name("rect") && has_class(n, "fault"))
            .collect();
        assert_eq!(faults.len(), 1);
        let f = faults[0];
        assert!(close(num(&f, "x"), x_of(2.0, span)));
        assert!(close(num(&f, "width"), x_of(5.0, span) - x_of(2.0, span)));
        assert!(num(&f, "y") < lane_y("violations"));
        assert!(num(&f, "y") + num(&f, "height") > lane_y("w1/2"));
        assert!(tooltip(&f).contains("pause redis-0"));
        assert!(
            tooltip(&f).contains("healed: resume redis-0"),
            "{}",
            tooltip(&f)
        );
        let label = root
            .descendants()
            .find(|n| has_class(n, "fault-label") && !has_class(n, "instant"))
            .expect("a fault label");
        assert_eq!(label.text(), Some("pause redis-0"));
        assert!(num(&label, "y") < lane_y("violations"));

        // The instant fault: a line at 7 s, its text escaped and read back.
        let instants: Vec<_> = root
            .descendants()
            .filter(|n| has_class(n, "fault-instant"))
            .collect();
        assert_eq!(instants.len(), 1);
        assert!(close(num(&instants[0], "x1"), x_of(7.0, span)));
        assert!(tooltip(&instants[0]).contains("client kill <all> & co"));

        // The violation: on its lane, 3 s to 4 s, the detail in the tooltip.
        let violations: Vec<_> = root
            .descendants()
            .filter(|n| has_class(n, "violation"))
            .collect();
        assert_eq!(violations.len(), 1);
        let v = violations[0];
        assert!(close(num(&v, "x"), x_of(3.0, span)));
        assert!(close(num(&v, "width"), x_of(4.0, span) - x_of(3.0, span)));
        let vy = num(&v, "y") + num(&v, "height") / 2.0;
        assert!((vy - (lane_y("violations") - 3.5)).abs() < 1.0);
        assert!(tooltip(&v).contains("Exclusion: w0/0 (token 5) and w1/0 (token 6) both held k"));

        // The failed acquire of w0/0, as a tick; none for w2/0.
        let fails: Vec<_> = root
            .descendants()
            .filter(|n| has_class(n, "acquire-fail"))
            .collect();
        assert_eq!(fails.len(), 1);
        assert!(tooltip(&fails[0]).contains("timed out"));
        assert!(close(num(&fails[0], "x"), x_of(9.0, span)));

        // No notes: nothing left out, nothing merged.
        assert!(!root.descendants().any(|n| has_class(&n, "note")), "{text}");
    }

    #[test]
    fn bars_merge_only_what_a_pixel_hides() {
        // A pixel is 1 ms.
        let scale = Scale {
            t0: 0,
            span_us: PLOT_W * 1_000.0,
            decimals: 3,
        };
        let hold = |start: u64, end: u64| Hold {
            start,
            end,
            how: End::Released,
            mode: Mode::Exclusive,
            key: None,
            token: None,
        };
        let holds = [
            hold(0, 300),         // narrow
            hold(500, 800),       // narrow, 0.2 px after: merged
            hold(900, 5_000),     // wide, after a narrow bar: merged
            hold(5_200, 9_000),   // wide after a wide bar: apart, though 0.2 px away
            hold(9_100, 9_200),   // narrow, 0.1 px after: merged
            hold(11_000, 11_100), // narrow, 1.8 px after: apart, drawn a pixel wide
        ];
        let refs: Vec<&Hold> = holds.iter().collect();
        let got: Vec<(usize, usize, f64, f64, f64)> = bars(&refs, &scale)
            .iter()
            .map(|b| (b.first, b.last, b.x0 - LEFT, b.x1 - LEFT, b.x1_drawn - LEFT))
            .collect();
        let want = [
            (0, 2, 0.0, 5.0, 5.0),
            (3, 4, 5.2, 9.2, 9.2),
            (5, 5, 11.0, 11.1, 12.0),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!((g.0, g.1), (w.0, w.1), "{got:?}");
            for (a, b) in [(g.2, w.2), (g.3, w.3), (g.4, w.4)] {
                assert!((a - b).abs() < 1e-6, "{got:?}");
            }
        }
    }

    #[test]
    fn fault_matching_by_detail_then_key_then_order() {
        use Op::Fault;
        use Type::*;
        let events = vec![
            Event::at(10, "nemesis", 0, Invoke, Fault).detail("a"),
            Event::at(20, "nemesis", 0, Invoke, Fault)
                .key("r1")
                .detail("kill r1"),
            Event::at(30, "nemesis", 0, Invoke, Fault).detail("b"),
            // Same detail: closes "b" (not the earliest).
            Event::at(40, "nemesis", 0, Ok, Fault).detail("b"),
            // Same key: closes "kill r1".
            Event::at(50, "nemesis", 0, Fail, Fault)
                .key("r1")
                .detail("restart failed"),
            // Neither: the earliest open, "a".
            Event::at(60, "nemesis", 0, Ok, Fault).detail("healed"),
            // Nothing open: an instant.
            Event::at(70, "nemesis", 0, Ok, Fault).detail("stray"),
            // Never healed.
            Event::at(80, "nemesis", 0, Invoke, Fault).detail("c"),
            Event::at(90, "w0", 0, Invoke, Op::Read),
        ];
        let order: Vec<&Event> = events.iter().collect();
        let (spans, instants) = faults(&order, 90);
        let got: Vec<(&str, u64, u64, Healed)> = spans
            .iter()
            .map(|s| (s.label.as_str(), s.start, s.end, s.healed))
            .collect();
        assert_eq!(
            got,
            [
                ("a", 10, 60, Healed::Yes),
                ("kill r1", 20, 50, Healed::Failed),
                ("b", 30, 40, Healed::Yes),
                ("c", 80, 90, Healed::Never),
            ]
        );
        assert_eq!(instants.len(), 1);
        assert!(instants[0].text.contains("stray"));
    }

    #[test]
    fn untimed_violations_and_empty_histories_still_draw() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.svg");
        let v = Violation {
            t_us: 0,
            until_us: 0,
            property: Property::Orphans,
            detail: "key k left behind \u{1}".to_owned(),
        };
        draw("empty", &[], &[v], &path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let doc = roxmltree::Document::parse(&text).expect("valid XML");
        let notes: Vec<String> = doc
            .descendants()
            .filter(|n| has_class(n, "note"))
            .map(|n| n.text().unwrap_or_default().to_owned())
            .collect();
        assert!(
            notes
                .iter()
                .any(|n| n.contains("Orphans: key k left behind")),
            "{notes:?}"
        );
        assert!(notes.iter().any(|n| n.contains("No process held anything")));
        // The control character XML cannot hold was replaced.
        assert!(
            notes.iter().any(|n| n.contains("behind \u{FFFD}")),
            "{notes:?}"
        );
        assert!(!doc.descendants().any(|n| has_class(&n, "hold")));
    }

    /// A deterministic generator (no seed file needed).
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    #[test]
    fn a_large_history_gives_a_small_svg() {
        use Op::*;
        use Type::*;
        let mut rng = Lcg(7);
        let mut events = Vec::new();
        // 20 workers × 4 tasks = 80 lanes (16 over the cap), about 100k events over 120 s.
        let mut holds_per_lane: BTreeMap<Lane, usize> = BTreeMap::new();
        for w in 0..20 {
            let process = format!("w{w}");
            for task in 0..4 {
                let mut t = at(0.0) + rng.next(10_000);
                let mut token = 0u128;
                while t < at(120.0) {
                    let key = format!("k{}", rng.next(3));
                    events.push(Event::at(t, &process, task, Invoke, Acquire).key(&key));
                    t += 100 + rng.next(2_000);
                    if rng.next(10) == 0 {
                        events.push(Event::at(t, &process, task, Fail, Acquire).key(&key));
                        t += 100 + rng.next(10_000);
                        continue;
                    }
                    token += 1;
                    let mode = if rng.next(3) == 0 {
                        Mode::Shared
                    } else {
                        Mode::Exclusive
                    };
                    events.push(
                        Event::at(t, &process, task, Ok, Acquire)
                            .key(&key)
                            .token(token)
                            .mode(mode),
                    );
                    *holds_per_lane.entry(Lane::new(&process, task)).or_default() += 1;
                    t += 1_000 + {
                        let long = rng.next(50) == 0;
                        rng.next(if long { 3_000_000 } else { 600_000 })
                    };
                    if rng.next(100) == 0 {
                        events.push(Event::at(t, &process, task, Info, Lost).key(&key));
                        t += 500;
                    }
                    events.push(Event::at(t, &process, task, Invoke, Release).key(&key));
                    t += 100 + rng.next(1_000);
                    events.push(Event::at(t, &process, task, Ok, Release).key(&key));
                    t += rng.next(20_000);
                }
            }
        }
        let mut violations = Vec::new();
        for i in 0..60u64 {
            let s = at(1.0) + i * 2_000_000;
            events.push(Event::at(s, "nemesis", 0, Invoke, Fault).detail(format!("partition {i}")));
            events.push(
                Event::at(s + 700_000, "nemesis", 0, Ok, Fault).detail(format!("partition {i}")),
            );
            events.push(Event::at(s + 1_500_000, "nemesis", 0, Info, Fault).detail("client kill"));
            violations.push(Violation {
                t_us: s + 100_000 * (i % 7),
                until_us: s + 100_000 * (i % 7) + 50_000,
                property: Property::Exclusion,
                detail: format!("overlap {i}"),
            });
        }
        let events = crate::history::merge([events]);
        assert!(events.len() > 95_000, "{} events", events.len());

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("large.svg");
        let started = std::time::Instant::now();
        draw("large", &events, &violations, &path).unwrap();
        let took = started.elapsed();
        keep(&path);
        let size = std::fs::metadata(&path).unwrap().len();
        eprintln!("{} events: {size} bytes in {took:?}", events.len());
        assert!(size < 5_000_000, "{size} bytes");

        let text = std::fs::read_to_string(&path).unwrap();
        let doc = roxmltree::Document::parse(&text).expect("valid XML");
        let lanes: Vec<&str> = doc
            .descendants()
            .filter(|n| has_class(n, "lane-label"))
            .filter_map(|n| n.text())
            .filter(|l| *l != "violations")
            .collect();
        assert_eq!(lanes.len(), MAX_LANES);
        assert_eq!(lanes[..5], ["w0/0", "w0/1", "w0/2", "w0/3", "w1/0"]);
        // w2 sorts before w10.
        assert_eq!(lanes[8], "w2/0");
        assert!(doc.descendants().any(|n| has_class(&n, "note")
            && n.text()
                .unwrap()
                .contains(&format!("first {MAX_LANES} of 80 lanes"))));

        // Every hold of the drawn lanes is in exactly one bar, merged or not.
        let expected: usize = holds_per_lane.values().take(MAX_LANES).sum();
        let bars: Vec<_> = doc.descendants().filter(|n| has_class(n, "hold")).collect();
        let drawn: usize = bars
            .iter()
            .map(|b| b.attribute("data-holds").map_or(1, |n| n.parse().unwrap()))
            .sum();
        assert_eq!(drawn, expected);
        assert!(bars.len() < expected, "nothing merged: {} bars", bars.len());
        assert!(bars.iter().any(|b| has_class(b, "lost")));
        assert_eq!(
            doc.descendants()
                .filter(|n| n.has_tag_name("rect") && has_class(n, "fault"))
                .count(),
            60
        );
        assert_eq!(
            doc.descendants()
                .filter(|n| has_class(n, "violation"))
                .count(),
            60
        );
    }
}
