//! The charts of `distlock-bench bench --plot DIR`, drawn with plotters as SVG (text is laid out
//! by whatever shows the SVG, so no font is needed) and, with `--png`, rendered to PNG with
//! resvg and a font found among the system's fonts.
//!
//! | file | what |
//! |---|---|
//! | `acquire-cdf.svg` | acquire latency, cumulative, one panel per workload: `uncontended`, `distinct`, `contended` (there: how long each acquire waited, call → return) |
//! | `handoff.svg` | hand-off latency (previous holder's release returned → next holder's acquire returned), cumulative: `handoff`, and `contended` (hand-offs between different clients) |
//! | `contended-per-client.svg` | acquisitions of each client in `contended`, with the fair share |
//! | `throughput.svg` | with `--compare` only: ops/s of every implementation in `uncontended`, `distinct`, `contended` |
//!
//! Latency axes are logarithmic, in µs/ms/s; a 0 µs sample (a release race) is drawn at
//! the axis' left end. distlock's curves go through every recorded sample (its HdrHistogram,
//! 3 significant figures, thinned to at most [`CDF_POINTS`] points per curve); compared
//! implementations publish only percentiles, drawn as markers at p50, p90, p99 and max
//! joined by thin steps.

use anyhow::{anyhow, Context, Result};
use hdrhistogram::Histogram;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::data::{Own, Peer};

/// Stem of the acquire-latency chart.
pub const ACQUIRE_CDF: &str = "acquire-cdf";
/// Stem of the hand-off latency chart.
pub const HANDOFF: &str = "handoff";
/// Stem of the per-client chart of `contended`.
pub const PER_CLIENT: &str = "contended-per-client";
/// Stem of the throughput chart (`--compare` only).
pub const THROUGHPUT: &str = "throughput";

/// Points of one of distlock's CDF curves at most (the last sample of each of this many
/// log-spaced latency bins), so that an SVG stays small whatever the sample count.
pub const CDF_POINTS: usize = 300;

/// One chart: its file stem and its SVG text.
pub struct Chart {
    /// File name without extension (`acquire-cdf`, …).
    pub name: &'static str,
    /// The SVG document.
    pub svg: String,
}

/// distlock's colour.
const OWN: RGBColor = RGBColor(214, 39, 40);
/// Compared implementations' colours (distlock's red left out), with [`SHAPES`] markers.
const PALETTE: [RGBColor; 9] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
/// Marker shapes: circle, triangle, square, cross.
const SHAPES: usize = 4;
const GRID: RGBColor = RGBColor(225, 225, 225);
const GRID_LIGHT: RGBColor = RGBColor(242, 242, 242);
const MUTED: RGBColor = RGBColor(90, 90, 90);

const FONT: &str = "sans-serif";

/// A text style of `px` pixels (plotters writes `font-size` = size / 1.24 into the SVG).
fn font(px: f64) -> TextStyle<'static> {
    (FONT, px * 1.24).into_font().color(&BLACK)
}

fn bold(px: f64) -> TextStyle<'static> {
    (FONT, px * 1.24, FontStyle::Bold).into_font().color(&BLACK)
}

/// A generous estimate of a text's width in pixels (DejaVu Sans is among the widest).
fn text_w(s: &str, px: f64) -> i32 {
    (s.chars().count() as f64 * px * 0.6).ceil() as i32
}

/// Words of `text` in lines of at most `width` pixels.
fn wrap(text: &str, px: f64, width: i32) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        let next = if cur.is_empty() {
            word.to_string()
        } else {
            format!("{cur} {word}")
        };
        if !cur.is_empty() && text_w(&next, px) > width {
            lines.push(std::mem::replace(&mut cur, word.to_string()));
        } else {
            cur = next;
        }
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

/// A compared implementation's colour and marker, by its index among all compared labels.
fn peer_color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// Draw a marker of compared implementation `$i`'s shape for every point of `$points`
/// with `$draw` (a `draw_series` or `draw` of the elements): circle, triangle, square or
/// cross ([`SHAPES`]).
macro_rules! markers {
    ($i:expr, $color:expr, $points:expr, |$elems:ident| $draw:expr) => {{
        let (s, c): (i32, RGBColor) = (4, $color);
        match $i % SHAPES {
            0 => {
                let $elems = $points
                    .into_iter()
                    .map(|p| EmptyElement::at(p) + Circle::new((0, 0), s, c.filled()));
                $draw
            }
            1 => {
                let $elems = $points
                    .into_iter()
                    .map(|p| EmptyElement::at(p) + TriangleMarker::new((0, 0), s + 1, c.filled()));
                $draw
            }
            2 => {
                let $elems = $points
                    .into_iter()
                    .map(|p| EmptyElement::at(p) + Rectangle::new([(-s, -s), (s, s)], c.filled()));
                $draw
            }
            _ => {
                let $elems = $points
                    .into_iter()
                    .map(|p| EmptyElement::at(p) + Cross::new((0, 0), s, c.stroke_width(2)));
                $draw
            }
        }
    }};
}

/// `x` with thousands separators, no decimals.
pub fn thousands(x: f64) -> String {
    let n = x.round().abs() as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if x < -0.5 {
        out.insert(0, '-');
    }
    out
}

/// A number with at most 2 decimals, trailing zeros dropped.
fn short(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A latency tick label: `us` µs as `50 µs`, `2 ms`, `1 s`.
pub fn latency_label(us: f64) -> String {
    if us >= 1e6 {
        format!("{} s", short(us / 1e6))
    } else if us >= 1e3 {
        format!("{} ms", short(us / 1e3))
    } else if us >= 1.0 {
        format!("{} µs", short(us))
    } else {
        format!("{} ns", short(us * 1e3))
    }
}

/// The CDF of a nanosecond histogram as (µs, % of samples ≤ it), thinned to at most
/// `max_points` + 1 points: the last point of each log-spaced latency bin, plus the first
/// point, after a (first, 0 %) start.
pub fn cdf_points(h: &Histogram<u64>, max_points: usize) -> Vec<(f64, f64)> {
    let total = h.len() as f64;
    let mut cum = 0u64;
    let pts: Vec<(f64, f64)> = h
        .iter_recorded()
        .map(|v| {
            cum += v.count_at_value();
            (
                v.value_iterated_to() as f64 / 1000.0,
                100.0 * cum as f64 / total,
            )
        })
        .collect();
    let Some(&first) = pts.first() else {
        return pts;
    };
    let mut out = vec![(first.0, 0.0), first];
    if pts.len() <= max_points {
        out.extend_from_slice(&pts[1..]);
        return out;
    }
    let lo = pts.iter().map(|p| p.0).find(|x| *x > 0.0).unwrap_or(1e-3);
    let hi = pts[pts.len() - 1].0.max(lo * 1.000_001);
    let span = (hi / lo).ln();
    let bins = max_points.max(2) - 1;
    let bin = |x: f64| -> usize {
        if x <= lo {
            0
        } else {
            ((x / lo).ln() / span * bins as f64) as usize
        }
    };
    for &p in &pts[1..] {
        let last = out[out.len() - 1];
        if out.len() > 2 && bin(last.0) == bin(p.0) {
            *out.last_mut().expect("not empty") = p;
        } else {
            out.push(p);
        }
    }
    out
}

/// A curve of a CDF panel.
enum Curve {
    /// distlock's: every sample, (µs, %).
    Full(Vec<(f64, f64)>),
    /// A compared implementation's known percentiles, (µs, %), by its style index.
    Steps(usize, Vec<(f64, f64)>),
}

/// One panel: a header of three lines and its curves.
struct Panel {
    title: String,
    detail: String,
    samples: String,
    curves: Vec<Curve>,
}

/// A legend entry.
struct Entry {
    label: String,
    /// `None`: distlock's own; `Some(i)`: compared implementation i.
    style: Option<usize>,
}

/// The labels of every compared implementation, in order of first appearance: their
/// index picks their colour and marker in every chart.
fn peer_labels(peers: &[Peer]) -> Vec<&str> {
    let mut labels: Vec<&str> = Vec::new();
    for p in peers {
        if !labels.contains(&p.label.as_str()) {
            labels.push(&p.label);
        }
    }
    labels
}

fn style_of(labels: &[&str], label: &str) -> usize {
    labels.iter().position(|l| *l == label).unwrap_or(0)
}

/// The clients of a workload: distlock's line, else the first compared line.
fn clients(own: Option<&Own>, peers: &[&Peer]) -> Option<u64> {
    own.and_then(|o| o.figure("clients").map(|c| c as u64))
        .or_else(|| peers.iter().find_map(|p| p.clients))
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!(
        "{} {}",
        thousands(n as f64),
        if n == 1 { one } else { many }
    )
}

/// The step curve through known percentiles: `keys` are (figure, %) pairs.
fn steps(p: &Peer, keys: &[(&str, f64)]) -> Vec<(f64, f64)> {
    keys.iter()
        .filter_map(|(k, q)| p.figure(k).map(|v| (v, *q)))
        .collect()
}

/// What a CDF chart shows of one workload.
struct CdfSpec {
    workload: &'static str,
    detail: &'static str,
    /// The histogram of distlock's line to draw.
    own: fn(&Own) -> Option<&Histogram<u64>>,
    /// The compared figures, with their cumulative %.
    keys: &'static [(&'static str, f64)],
    /// What one sample is called.
    sample: (&'static str, &'static str),
}

const PCT_KEYS: &[(&str, f64)] = &[
    ("p50_us", 50.0),
    ("p90_us", 90.0),
    ("p99_us", 99.0),
    ("max_us", 100.0),
];
const WAIT_KEYS: &[(&str, f64)] = &[
    ("wait_p50_us", 50.0),
    ("wait_p99_us", 99.0),
    ("wait_max_us", 100.0),
];

/// Everything a chart needs to know about the inputs.
pub struct Inputs<'a> {
    /// distlock's workloads.
    pub own: &'a [Own],
    /// What distlock's curves are called in the legends (`rust/distlock (this run)`).
    pub own_label: String,
    /// Compared implementations (empty without `--compare`).
    pub peers: &'a [Peer],
}

impl Inputs<'_> {
    fn own(&self, workload: &str) -> Option<&Own> {
        self.own.iter().find(|o| o.workload() == workload)
    }

    fn peers(&self, workload: &str) -> Vec<&Peer> {
        self.peers
            .iter()
            .filter(|p| p.workload == workload)
            .collect()
    }
}

/// Every chart there is data for: acquire-cdf, handoff, contended-per-client, and with
/// compared implementations throughput.
pub fn charts(inputs: &Inputs) -> Result<Vec<Chart>> {
    let mut out = Vec::new();
    let acquire = [
        CdfSpec {
            workload: "uncontended",
            detail: "acquire latency (call → return), one lock free each time",
            own: |o| o.latency.as_ref(),
            keys: PCT_KEYS,
            sample: ("acquire", "acquires"),
        },
        CdfSpec {
            workload: "distinct",
            detail: "acquire latency, each client on its own lock names",
            own: |o| o.latency.as_ref(),
            keys: PCT_KEYS,
            sample: ("acquire", "acquires"),
        },
        CdfSpec {
            workload: "contended",
            detail: "acquire latency = wait for the one lock (call → return)",
            own: |o| o.wait.as_ref(),
            keys: WAIT_KEYS,
            sample: ("acquire", "acquires"),
        },
    ];
    if let Some(svg) = cdf_chart(
        inputs,
        "Acquire latency: cumulative share of acquires that took at most x",
        ("acquire latency (log scale)", "acquires ≤ x (%)"),
        &acquire,
        false,
    )? {
        out.push(Chart {
            name: ACQUIRE_CDF,
            svg,
        });
    }
    let handoff = [
        CdfSpec {
            workload: "handoff",
            detail: "B waits while A holds 10–210 ms; B acquired − A released",
            own: |o| o.latency.as_ref(),
            keys: PCT_KEYS,
            sample: ("hand-off", "hand-offs"),
        },
        CdfSpec {
            workload: "contended",
            detail: "next holder acquired − previous released, between different clients",
            own: |o| o.latency.as_ref(),
            keys: PCT_KEYS,
            sample: ("hand-off", "hand-offs"),
        },
    ];
    if let Some(svg) = cdf_chart(
        inputs,
        "Hand-off latency: from the holder's release to the next holder's acquire, cumulative",
        ("hand-off latency (log scale)", "hand-offs ≤ x (%)"),
        &handoff,
        true,
    )? {
        out.push(Chart { name: HANDOFF, svg });
    }
    if let Some(svg) = per_client_chart(inputs)? {
        out.push(Chart {
            name: PER_CLIENT,
            svg,
        });
    }
    if !inputs.peers.is_empty() {
        if let Some(svg) = throughput_chart(inputs)? {
            out.push(Chart {
                name: THROUGHPUT,
                svg,
            });
        }
    }
    Ok(out)
}

const TITLE_H: u32 = 40;
const PANEL_W: u32 = 500;
const PANEL_H: u32 = 460;
const HEADER_H: i32 = 58;

/// Draw the chart title at the top left.
fn draw_title<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, title: &str) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.draw_text(title, &bold(17.0), (14, 12))
        .map_err(|e| anyhow!("{e}"))
}

/// A panel's three-line header.
fn draw_header<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    detail: &str,
    samples: &str,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let e = |e| anyhow!("{e:?}");
    area.draw_text(title, &bold(15.0), (64, 4)).map_err(e)?;
    area.draw_text(detail, &font(12.0).color(&MUTED), (64, 24))
        .map_err(e)?;
    area.draw_text(samples, &font(12.0).color(&MUTED), (64, 40))
        .map_err(e)
}

/// Legend layout: the note's lines, then entries in columns.
struct LegendLayout {
    note: Vec<String>,
    cols: usize,
    col_w: i32,
    rows: usize,
}

const LEGEND_PX: f64 = 13.0;
const NOTE_PX: f64 = 12.0;
const SWATCH: i32 = 40;

fn legend_layout(width: u32, note: &str, entries: &[Entry]) -> LegendLayout {
    let usable = width as i32 - 28;
    let col_w = entries
        .iter()
        .map(|e| SWATCH + 10 + text_w(&e.label, LEGEND_PX) + 24)
        .max()
        .unwrap_or(100)
        .min(usable);
    let cols = ((usable / col_w.max(1)) as usize).clamp(1, entries.len().max(1));
    LegendLayout {
        note: wrap(note, NOTE_PX, usable),
        cols,
        col_w,
        rows: entries.len().div_ceil(cols),
    }
}

fn legend_height(l: &LegendLayout) -> u32 {
    (12 + l.note.len() * 18 + 6 + l.rows * 22 + 8) as u32
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    l: &LegendLayout,
    entries: &[Entry],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let e = |e| anyhow!("{e:?}");
    let mut y = 12;
    for line in &l.note {
        area.draw_text(line, &font(NOTE_PX).color(&MUTED), (14, y))
            .map_err(e)?;
        y += 18;
    }
    y += 6;
    for (i, entry) in entries.iter().enumerate() {
        let (row, col) = (i / l.cols, i % l.cols);
        let x = 14 + col as i32 * l.col_w;
        let cy = y + row as i32 * 22 + 8;
        match entry.style {
            None => {
                area.draw(&PathElement::new(
                    vec![(x, cy), (x + SWATCH, cy)],
                    OWN.stroke_width(3),
                ))
                .map_err(e)?;
            }
            Some(s) => {
                let c = peer_color(s);
                area.draw(&PathElement::new(
                    vec![(x, cy), (x + SWATCH, cy)],
                    c.stroke_width(1),
                ))
                .map_err(e)?;
                markers!(s, c, [(x + SWATCH / 2, cy)], |m| {
                    m.into_iter().try_for_each(|m| area.draw(&m))
                })
                .map_err(e)?;
            }
        }
        area.draw_text(
            &entry.label,
            &font(LEGEND_PX).pos(Pos::new(HPos::Left, VPos::Center)),
            (x + SWATCH + 10, cy),
        )
        .map_err(e)?;
    }
    Ok(())
}

/// The decades that hold every x of `curves` (> 0): 10^floor(log10 min) .. 10^ceil(log10 max).
fn log_range(curves: &[Curve]) -> (f64, f64) {
    let xs = curves.iter().flat_map(|c| match c {
        Curve::Full(p) | Curve::Steps(_, p) => p.iter().map(|p| p.0),
    });
    let (mut lo, mut hi) = (f64::INFINITY, 0f64);
    for x in xs {
        if x > 0.0 {
            lo = lo.min(x);
        }
        hi = hi.max(x);
    }
    if !lo.is_finite() {
        return (1.0, 10.0);
    }
    let lo = 10f64.powf(lo.log10().floor());
    let hi = 10f64.powf(hi.max(lo).log10().ceil()).max(lo * 10.0);
    (lo, hi)
}

fn cdf_chart(
    inputs: &Inputs,
    title: &str,
    (x_desc, y_desc): (&str, &str),
    specs: &[CdfSpec],
    zero_note: bool,
) -> Result<Option<String>> {
    let labels = peer_labels(inputs.peers);
    let mut panels = Vec::new();
    let mut entries = Vec::new();
    let mut has_own = false;
    let mut has_wait_keys = false;
    for spec in specs {
        let own = inputs.own(spec.workload);
        let hist = own.and_then(|o| (spec.own)(o));
        let peers = inputs.peers(spec.workload);
        let mut curves = Vec::new();
        if let Some(h) = hist {
            curves.push(Curve::Full(cdf_points(h, CDF_POINTS)));
            has_own = true;
        }
        for p in &peers {
            let pts = steps(p, spec.keys);
            if pts.is_empty() {
                continue;
            }
            let s = style_of(&labels, &p.label);
            if !entries.iter().any(|e: &Entry| e.style == Some(s)) {
                entries.push(Entry {
                    label: p.label.clone(),
                    style: Some(s),
                });
            }
            has_wait_keys |= spec.keys == WAIT_KEYS;
            curves.push(Curve::Steps(s, pts));
        }
        if curves.is_empty() {
            continue;
        }
        let clients = clients(own, &peers)
            .map(|c| plural(c, "client", "clients"))
            .unwrap_or_default();
        let samples = match hist {
            Some(h) => format!(
                "{clients}; distlock: {}",
                plural(h.len(), spec.sample.0, spec.sample.1)
            ),
            None => clients,
        };
        panels.push(Panel {
            title: spec.workload.to_string(),
            detail: spec.detail.to_string(),
            samples,
            curves,
        });
    }
    if panels.is_empty() {
        return Ok(None);
    }
    entries.sort_by_key(|e| e.style);
    if has_own {
        entries.insert(
            0,
            Entry {
                label: inputs.own_label.clone(),
                style: None,
            },
        );
    }
    let mut note = String::from(
        "Thick line: every sample distlock recorded (HdrHistogram, 3 significant digits).",
    );
    if entries.iter().any(|e| e.style.is_some()) {
        note.push_str(
            " Markers joined by thin steps: the other runs publish only percentiles, so only \
             p50, p90, p99 and max are drawn",
        );
        if has_wait_keys {
            note.push_str(" (contended acquire: p50, p99 and max)");
        }
        note.push_str("; several runs of one implementation: the median of each.");
    }
    if zero_note {
        note.push_str(
            " A 0 µs hand-off (the next holder's acquire returned before the release call \
             did) is drawn at the left edge.",
        );
    }
    let width = (panels.len() as u32 * PANEL_W).max(760);
    let legend = legend_layout(width, &note, &entries);
    let height = TITLE_H + PANEL_H + legend_height(&legend);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        draw_title(&root, title)?;
        let (_, rest) = root.split_vertically(TITLE_H);
        let (row, legend_area) = rest.split_vertically(PANEL_H);
        let row = row.margin(0, 0, 0, width.saturating_sub(panels.len() as u32 * PANEL_W));
        for (area, panel) in row.split_evenly((1, panels.len())).iter().zip(&panels) {
            draw_cdf_panel(area, panel, x_desc, y_desc)?;
        }
        draw_legend(&legend_area, &legend, &entries)?;
        root.present()?;
    }
    Ok(Some(svg))
}

fn draw_cdf_panel(
    area: &DrawingArea<SVGBackend, Shift>,
    p: &Panel,
    x_desc: &str,
    y_desc: &str,
) -> Result<()> {
    draw_header(area, &p.title, &p.detail, &p.samples)?;
    let plot = area.margin(HEADER_H, 0, 0, 0);
    let (lo, hi) = log_range(&p.curves);
    let mut chart = ChartBuilder::on(&plot)
        .margin_left(6)
        .margin_right(22)
        .margin_top(6)
        .margin_bottom(4)
        .x_label_area_size(52)
        .y_label_area_size(58)
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..101f64)?;
    chart
        .configure_mesh()
        .x_labels(12)
        .y_labels(11)
        .y_max_light_lines(1)
        .x_label_formatter(&|v| latency_label(*v))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .x_desc(x_desc)
        .y_desc(y_desc)
        .label_style(font(12.0))
        .axis_desc_style(font(13.0))
        .bold_line_style(GRID)
        .light_line_style(GRID_LIGHT)
        .draw()?;
    let clamp = |(x, y): (f64, f64)| (x.max(lo), y);
    // Compared steps below, distlock's curve on top.
    for c in &p.curves {
        if let Curve::Steps(s, pts) = c {
            let color = peer_color(*s);
            chart.draw_series(LineSeries::new(
                step_path(pts).into_iter().map(clamp),
                color.stroke_width(1),
            ))?;
            markers!(*s, color, pts.iter().map(|&pt| clamp(pt)), |m| {
                chart.draw_series(m).map(|_| ())
            })?;
        }
    }
    for c in &p.curves {
        if let Curve::Full(pts) = c {
            // A step at each point: the share rises at the latency it was reached.
            chart.draw_series(LineSeries::new(
                step_path(pts).into_iter().map(clamp),
                OWN.stroke_width(3),
            ))?;
        }
    }
    Ok(())
}

/// The staircase through (x, %) points: before each point, a horizontal run at the previous
/// share (no repeated point).
fn step_path(pts: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut path: Vec<(f64, f64)> = Vec::with_capacity(pts.len() * 2);
    for (i, &(x, q)) in pts.iter().enumerate() {
        if i > 0 {
            path.push((x, pts[i - 1].1));
        }
        path.push((x, q));
    }
    path.dedup();
    path
}

/// Acquisitions per client in `contended`, with the fair share as a dashed line.
fn per_client_chart(inputs: &Inputs) -> Result<Option<String>> {
    let Some(own) = inputs.own("contended").filter(|o| !o.per_client.is_empty()) else {
        return Ok(None);
    };
    let counts = &own.per_client;
    let n = counts.len();
    let total: u64 = counts.iter().sum();
    let fair = total as f64 / n as f64;
    let top = counts.iter().copied().max().unwrap_or(0) as f64;
    let mut detail = format!(
        "{} on one lock, {}",
        plural(n as u64, "client", "clients"),
        plural(total, "acquisition", "acquisitions")
    );
    if let Some(same) = own.figure("same_client_pct") {
        detail.push_str(&format!(
            "; the releasing client took the lock again {} % of the time",
            short(same)
        ));
    }
    let served = counts.iter().filter(|c| **c > 0).count();
    let samples = format!(
        "served: {served} of {n}; busiest client {} % of all; dashed: the fair share ({})",
        short(100.0 * top / total.max(1) as f64),
        short(fair)
    );
    let width = (n as u32 * 40 + 160).clamp(760, 1400);
    let height = TITLE_H + PANEL_H;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        draw_title(&root, "Contended: acquisitions each client got")?;
        let (_, area) = root.split_vertically(TITLE_H);
        draw_header(&area, "contended", &detail, &samples)?;
        let plot = area.margin(HEADER_H, 0, 0, 0);
        let mut chart = ChartBuilder::on(&plot)
            .margin_left(6)
            .margin_right(22)
            .margin_top(6)
            .margin_bottom(4)
            .x_label_area_size(52)
            .y_label_area_size(58)
            .build_cartesian_2d(
                -0.5f64..n as f64 - 0.5,
                0f64..(top.max(fair) * 1.15).max(1.0),
            )?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n.min(20))
            .y_labels(8)
            .y_max_light_lines(1)
            .x_label_formatter(&|v| {
                if v.fract() == 0.0 {
                    format!("{v:.0}")
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|v| thousands(*v))
            .x_desc("client (task index)")
            .y_desc("acquisitions (count)")
            .label_style(font(12.0))
            .axis_desc_style(font(13.0))
            .bold_line_style(GRID)
            .light_line_style(GRID_LIGHT)
            .draw()?;
        chart.draw_series(DashedLineSeries::new(
            [(-0.5, fair), (n as f64 - 0.5, fair)],
            8,
            5,
            BLACK.stroke_width(1),
        ))?;
        chart.draw_series(counts.iter().enumerate().map(|(i, &c)| {
            let x = i as f64;
            Rectangle::new(
                [(x - 0.4, 0.0), (x + 0.4, c as f64)],
                OWN.mix(0.85).filled(),
            )
        }))?;
        if n <= 32 {
            chart.draw_series(counts.iter().enumerate().map(|(i, &c)| {
                EmptyElement::at((i as f64, c as f64))
                    + Text::new(
                        thousands(c as f64),
                        (0, -4),
                        font(11.0).pos(Pos::new(HPos::Center, VPos::Bottom)),
                    )
            }))?;
        }
        root.present()?;
    }
    Ok(Some(svg))
}

/// What the throughput chart shows of a workload.
const THROUGHPUT_OF: &[(&str, &str)] = &[
    ("uncontended", "acquire + release pairs per second"),
    (
        "distinct",
        "acquire + release pairs per second, all clients together",
    ),
    ("contended", "acquisitions per second of the one lock"),
];

/// ops/s of distlock and every compared implementation, one panel per workload.
fn throughput_chart(inputs: &Inputs) -> Result<Option<String>> {
    let labels = peer_labels(inputs.peers);
    struct Bars {
        workload: &'static str,
        detail: String,
        bars: Vec<(String, f64, RGBColor)>,
    }
    let mut panels = Vec::new();
    for (w, what) in THROUGHPUT_OF {
        let own = inputs.own(w);
        let peers = inputs.peers(w);
        let clients = clients(own, &peers);
        let mut bars = Vec::new();
        if let Some(v) = own.and_then(|o| o.figure("ops_per_s")) {
            bars.push((inputs.own_label.clone(), v, OWN));
        }
        for p in &peers {
            if let Some(v) = p.figure("ops_per_s") {
                let mut label = p.label.clone();
                if p.clients.is_some() && p.clients != clients {
                    label.push_str(&format!(" ({} clients)", p.clients.unwrap_or(0)));
                }
                bars.push((label, v, peer_color(style_of(&labels, &p.label))));
            }
        }
        if bars.is_empty() {
            continue;
        }
        let detail = match clients {
            Some(c) => format!("{what}; {}", plural(c, "client", "clients")),
            None => what.to_string(),
        };
        panels.push(Bars {
            workload: w,
            detail,
            bars,
        });
    }
    if panels.is_empty() {
        return Ok(None);
    }
    let label_w = panels
        .iter()
        .flat_map(|p| p.bars.iter().map(|b| text_w(&b.0, 12.0)))
        .max()
        .unwrap_or(100)
        + 16;
    let panel_h = |p: &Bars| HEADER_H as u32 + 14 + p.bars.len() as u32 * 24 + 56;
    let width = (label_w as u32 + 640).max(760);
    let height = TITLE_H + panels.iter().map(panel_h).sum::<u32>();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE)?;
        draw_title(
            &root,
            "Throughput: operations per second of each implementation (longer is faster)",
        )?;
        let (_, mut rest) = root.split_vertically(TITLE_H);
        for p in &panels {
            let (area, below) = rest.split_vertically(panel_h(p));
            rest = below;
            draw_header(&area, p.workload, &p.detail, "")?;
            let plot = area.margin(HEADER_H - 14, 0, 0, 0);
            let n = p.bars.len();
            let top = p.bars.iter().map(|b| b.1).fold(0.0, f64::max).max(1.0);
            // The first bar at the top: bar i at y = n-1-i.
            let y = |i: usize| (n - 1 - i) as f64;
            let mut chart = ChartBuilder::on(&plot)
                .margin_left(label_w)
                .margin_right(22)
                .margin_top(6)
                .margin_bottom(4)
                .x_label_area_size(44)
                .y_label_area_size(0)
                .build_cartesian_2d(0f64..top * 1.2, -0.5f64..n as f64 - 0.5)?;
            chart
                .configure_mesh()
                .disable_y_mesh()
                .x_labels(8)
                .y_labels(0)
                .x_max_light_lines(1)
                .x_label_formatter(&|v| thousands(*v))
                .x_desc("operations per second (ops/s)")
                .label_style(font(12.0))
                .axis_desc_style(font(13.0))
                .bold_line_style(GRID)
                .light_line_style(GRID_LIGHT)
                .draw()?;
            chart.draw_series(p.bars.iter().enumerate().map(|(i, (_, v, c))| {
                Rectangle::new(
                    [(0.0, y(i) - 0.36), (*v, y(i) + 0.36)],
                    c.mix(0.85).filled(),
                )
            }))?;
            // Names left of the axis, values at the bars' ends.
            chart.draw_series(p.bars.iter().enumerate().map(|(i, (label, _, _))| {
                EmptyElement::at((0.0, y(i)))
                    + Text::new(
                        label.clone(),
                        (-8, 0),
                        font(12.0).pos(Pos::new(HPos::Right, VPos::Center)),
                    )
            }))?;
            chart.draw_series(p.bars.iter().enumerate().map(|(i, (_, v, _))| {
                EmptyElement::at((*v, y(i)))
                    + Text::new(
                        thousands(*v),
                        (5, 0),
                        font(11.0).pos(Pos::new(HPos::Left, VPos::Center)),
                    )
            }))?;
        }
        root.present()?;
    }
    Ok(Some(svg))
}

/// No font to render the PNGs' text with.
#[derive(Debug)]
pub struct NoFont;

impl std::fmt::Display for NoFont {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--png: no font found to draw the charts' text with (looked in fontconfig's font \
             directories, /usr/share/fonts, /usr/local/share/fonts, ~/.fonts and \
             ~/.local/share/fonts); install one, e.g. on Debian or Ubuntu: \
             apt-get install fonts-dejavu-core"
        )
    }
}

impl std::error::Error for NoFont {}

/// Sans-serif families preferred for the PNGs, in order; else the first font found.
const FAMILIES: &[&str] = &[
    "DejaVu Sans",
    "Liberation Sans",
    "Noto Sans",
    "Arial",
    "Helvetica",
    "FreeSans",
];

/// Renders the SVG charts to PNG with a system font.
pub struct Png {
    options: resvg::usvg::Options<'static>,
    /// The font family used.
    pub family: String,
}

impl Png {
    /// Find the system's fonts; [`NoFont`] when there is none.
    pub fn new() -> Result<Png, NoFont> {
        let mut db = resvg::usvg::fontdb::Database::new();
        db.load_system_fonts();
        let family = {
            let names: Vec<&str> = db
                .faces()
                .flat_map(|f| f.families.iter().map(|(n, _)| n.as_str()))
                .collect();
            FAMILIES
                .iter()
                .find(|f| names.contains(f))
                .map(|f| f.to_string())
                .or_else(|| names.first().map(|n| n.to_string()))
                .ok_or(NoFont)?
        };
        db.set_sans_serif_family(family.clone());
        let options = resvg::usvg::Options {
            font_family: family.clone(),
            fontdb: std::sync::Arc::new(db),
            ..resvg::usvg::Options::default()
        };
        Ok(Png { options, family })
    }

    /// The PNG image of an SVG document.
    pub fn render(&self, svg: &str) -> Result<Vec<u8>> {
        let tree = resvg::usvg::Tree::from_str(svg, &self.options).context("read the SVG")?;
        let size = tree.size().to_int_size();
        let mut pixmap =
            resvg::tiny_skia::Pixmap::new(size.width(), size.height()).context("an empty chart")?;
        pixmap.fill(resvg::tiny_skia::Color::WHITE);
        resvg::render(
            &tree,
            resvg::tiny_skia::Transform::identity(),
            &mut pixmap.as_mut(),
        );
        pixmap.encode_png().context("encode the PNG")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::histogram;

    #[test]
    fn labels_and_numbers() {
        assert_eq!(latency_label(10.0), "10 µs");
        assert_eq!(latency_label(1000.0), "1 ms");
        assert_eq!(latency_label(250_000.0), "250 ms");
        assert_eq!(latency_label(1e6), "1 s");
        assert_eq!(latency_label(0.1), "100 ns");
        assert_eq!(thousands(28334.7), "28,335");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1_000_000.0), "1,000,000");
    }

    #[test]
    fn cdf_is_thinned_and_ends_at_100() {
        let samples: Vec<u64> = (1..=20_000u64)
            .map(|i| 20_000 + i * i % 9_000_000)
            .collect();
        let h = histogram(&samples);
        let pts = cdf_points(&h, CDF_POINTS);
        assert!(pts.len() <= CDF_POINTS + 2, "{} points", pts.len());
        assert!(pts.len() > CDF_POINTS / 2, "{} points", pts.len());
        assert_eq!(pts[0].1, 0.0);
        assert_eq!(pts[pts.len() - 1], (h.max() as f64 / 1000.0, 100.0));
        assert!(pts.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        // Few samples: every one kept.
        let pts = cdf_points(&histogram(&[1000, 2000, 3000]), CDF_POINTS);
        assert_eq!(pts.len(), 4);
        assert!((pts[2].1 - 200.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn log_range_spans_whole_decades() {
        assert_eq!(
            log_range(&[Curve::Full(vec![(45.0, 0.0), (3200.0, 100.0)])]),
            (10.0, 10_000.0)
        );
        assert_eq!(
            log_range(&[Curve::Steps(0, vec![(0.0, 50.0), (100.0, 100.0)])]),
            (100.0, 1000.0)
        );
    }
}
