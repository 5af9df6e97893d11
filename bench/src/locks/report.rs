//! The lock comparison's output: two markdown tables (speed, safety under faults), the JSON
//! document, and an SVG chart (acquisitions/s and handoff p99 per system and contenders).

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use super::contend::Measured;
use super::faults::pause_bound;
use crate::stats::fmt_us;

fn errors_cell(m: &Measured) -> String {
    match m.error_count() {
        0 => "0".into(),
        n => format!("{n}"),
    }
}

/// The speed table: runs without a fault.
pub fn speed_markdown(runs: &[Measured]) -> String {
    let mut s = String::from(
        "| system | token | contenders | acquisitions/s | handoff p50 | handoff p99 | overlaps | errors |\n\
         |---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for m in runs.iter().filter(|m| m.fault == "none") {
        s.push_str(&format!(
            "| {} | {} | {} | {:.0} | {} | {} | {} | {} |\n",
            m.system,
            m.token,
            m.contenders,
            m.acquisitions_per_s,
            fmt_us(m.tally.handoff.p50_us),
            fmt_us(m.tally.handoff.p99_us),
            m.tally.overlaps,
            errors_cell(m),
        ));
    }
    s
}

/// The safety table: runs with a fault.
pub fn safety_markdown(runs: &[Measured], monotonic: impl Fn(&str) -> bool) -> String {
    let mut s = String::from(
        "| system | fault | resource checks the token | entries | overlaps | stale writes accepted | stale writes refused | longest handoff |\n\
         |---|---|---|---:|---:|---:|---:|---:|\n",
    );
    for m in runs.iter().filter(|m| m.fault != "none") {
        let check = match (m.check_tokens, monotonic(&m.system)) {
            (true, _) => "yes",
            (false, true) => "no",
            (false, false) => "impossible (no ordered token)",
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            m.system,
            m.fault,
            check,
            m.tally.entries,
            m.tally.overlaps,
            m.tally.stale_accepted,
            m.tally.stale_rejected,
            fmt_us(m.tally.handoff.max_us),
        ));
    }
    s
}

/// The notes each faulted run left (what was paused or killed, and what followed).
pub fn notes_markdown(runs: &[Measured]) -> String {
    let mut s = String::new();
    for m in runs {
        if m.notes.is_empty() && m.errors.is_empty() {
            continue;
        }
        s.push_str(&format!(
            "- **{}**, {} contenders, fault: {}{}:\n",
            m.system,
            m.contenders,
            m.fault,
            if m.check_tokens {
                ", token checked"
            } else {
                ""
            }
        ));
        for n in &m.notes {
            s.push_str(&format!("  - {n}\n"));
        }
        for (e, c) in &m.errors {
            s.push_str(&format!("  - {c} × {e}\n"));
        }
    }
    s
}

/// The whole text report.
pub fn markdown(runs: &[Measured], monotonic: impl Fn(&str) -> bool, ttl_s: f64) -> String {
    let mut s = String::from("## Locks compared: speed (no fault)\n\n");
    s.push_str(&speed_markdown(runs));
    if runs.iter().any(|m| m.fault != "none") {
        s.push_str(&format!(
            "\n## Locks compared: safety under faults (TTL / session timeout / lease {ttl_s:.1} s; \
             a paused holder waits at most {:.0} s)\n\n",
            pause_bound(std::time::Duration::from_secs_f64(ttl_s)).as_secs_f64()
        ));
        s.push_str(&safety_markdown(runs, monotonic));
    }
    let notes = notes_markdown(runs);
    if !notes.is_empty() {
        s.push_str("\nNotes (pauses are simulated in-process: the holder stops heartbeats and renewals and sleeps):\n\n");
        s.push_str(&notes);
    }
    s
}

const COLORS: [RGBColor; 6] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

/// Writes `locks-compared.svg` into `dir`: grouped bars of acquisitions/s (left) and handoff p99
/// in ms (right), one group per system, one bar per contender level.
pub fn chart(dir: &Path, runs: &[Measured]) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("locks-compared.svg");
    draw(&path, runs).map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))?;
    Ok(path)
}

fn draw(path: &Path, runs: &[Measured]) -> Result<(), Box<dyn std::error::Error>> {
    let speed: Vec<&Measured> = runs.iter().filter(|m| m.fault == "none").collect();
    let mut systems: Vec<String> = Vec::new();
    let mut levels: Vec<usize> = Vec::new();
    for m in &speed {
        if !systems.contains(&m.system) {
            systems.push(m.system.clone());
        }
        if !levels.contains(&m.contenders) {
            levels.push(m.contenders);
        }
    }
    let n = systems.len().max(1);
    let root = SVGBackend::new(path, (1200, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(600);
    type Metric<'a> = (&'a str, &'a str, fn(&Measured) -> f64);
    let panels: [(DrawingArea<SVGBackend, plotters::coord::Shift>, Metric); 2] = [
        (
            left,
            ("Acquisitions per second", "acquisitions/s", |m| {
                m.acquisitions_per_s
            }),
        ),
        (
            right,
            ("Handoff p99 (release to next entry)", "ms", |m| {
                m.tally.handoff.p99_us as f64 / 1000.0
            }),
        ),
    ];
    for (area, (title, unit, value)) in panels {
        let ymax = speed.iter().map(|m| value(m)).fold(1.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(&area)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(60)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..ymax)?;
        let names = systems.clone();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n * 2 + 1)
            .x_label_formatter(&|x: &f64| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names.len() {
                    names[i as usize].clone()
                } else {
                    String::new()
                }
            })
            .x_label_style(("sans-serif", 11))
            .y_desc(unit)
            .draw()?;
        let width = 0.8 / levels.len().max(1) as f64;
        for (li, level) in levels.iter().enumerate() {
            let c = COLORS[li % COLORS.len()];
            let bars: Vec<(f64, f64)> = speed
                .iter()
                .filter(|m| m.contenders == *level)
                .filter_map(|m| {
                    let i = systems.iter().position(|s| *s == m.system)?;
                    Some((i as f64 - 0.4 + width * li as f64, value(m)))
                })
                .collect();
            chart
                .draw_series(bars.into_iter().map(move |(x, v)| {
                    Rectangle::new([(x + 0.01, 0.0), (x + width - 0.01, v)], c.filled())
                }))?
                .label(format!("{level} contenders"))
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
