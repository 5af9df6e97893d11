//! SVG charts of a comparison, written beside its JSON: throughput per workload, latency
//! CDFs, and from `scale` memory and restart time against the znode count.
//!
//! Drawn with plotters' SVG backend only: no bitmap backend and no system fonts (plotters
//! lays text out with its own estimate; the viewer renders the SVG text with its fonts).

use std::error::Error;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::report::{Outcome, Row};
use crate::scenario::{ScalePoint, ScenarioResult};
use crate::server::ServerKind;

type Drawn = Result<(), Box<dyn Error>>;

const ZK_COLOR: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const ZR_COLOR: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const SIZE: (u32, u32) = (960, 540);

fn color(kind: ServerKind) -> RGBColor {
    match kind {
        ServerKind::Apache => ZK_COLOR,
        ServerKind::Zooraft => ZR_COLOR,
    }
}

fn label(kind: ServerKind) -> &'static str {
    match kind {
        ServerKind::Apache => "Apache ZooKeeper 3.8",
        ServerKind::Zooraft => "zooraft",
    }
}

fn outcome(row: &Row, kind: ServerKind) -> Option<&crate::load::WorkloadResult> {
    match kind {
        ServerKind::Apache => row.zookeeper.as_ref(),
        ServerKind::Zooraft => row.zooraft.as_ref(),
    }
    .and_then(Outcome::measured)
}

/// A row's name on a chart: `get`, `get 32×8`, `get (TLS)`.
fn row_name(row: &Row, several_levels: bool) -> String {
    let mut name = row.workload.name().to_string();
    if several_levels {
        name.push_str(&format!(" {}×{}", row.connections, row.depth));
    }
    if let Some(v) = &row.variant {
        name.push_str(&format!(" ({v})"));
    }
    name
}

/// Writes every chart that has data into `dir`, file names starting with `stem`; returns
/// the files written.
pub fn write_all(
    dir: &Path,
    stem: &str,
    rows: &[Row],
    scenarios: &[ScenarioResult],
) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    let mut draw = |name: String, f: &dyn Fn(&Path) -> Drawn| -> anyhow::Result<()> {
        let path = dir.join(name);
        f(&path).map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))?;
        written.push(path);
        Ok(())
    };
    if !rows.is_empty() {
        let names = row_names(rows);
        draw(format!("{stem}-throughput.svg"), &|p| {
            throughput(p, rows, &names)
        })?;
        for (row, name) in rows.iter().zip(&names) {
            let slug: String = name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            let slug = slug
                .split('-')
                .filter(|p| !p.is_empty())
                .collect::<Vec<_>>()
                .join("-");
            draw(format!("{stem}-latency-{slug}.svg"), &|p| {
                latency_cdf(p, row, name)
            })?;
        }
    }
    let curves: Vec<(ServerKind, &[ScalePoint])> = scenarios
        .iter()
        .flat_map(|s| {
            [
                (ServerKind::Apache, s.zookeeper.as_ref()),
                (ServerKind::Zooraft, s.zooraft.as_ref()),
            ]
        })
        .filter_map(|(k, o)| o.filter(|o| !o.scale.is_empty()).map(|o| (k, &o.scale[..])))
        .collect();
    if !curves.is_empty() {
        draw(format!("{stem}-memory-vs-znodes.svg"), &|p| {
            scale_chart(
                p,
                &curves,
                "Memory vs znodes (zooraft RSS, ZooKeeper live heap after GC)",
                "MiB",
                |pt| pt.memory as f64 / (1 << 20) as f64,
            )
        })?;
        draw(format!("{stem}-restart-vs-znodes.svg"), &|p| {
            scale_chart(
                p,
                &curves,
                "Restart to serving vs znodes",
                "seconds",
                |pt| pt.restart_s,
            )
        })?;
    }
    Ok(written)
}

/// Every row's name, with its concurrency when a workload was measured at several.
fn row_names(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            let several = rows
                .iter()
                .filter(|o| o.workload == r.workload && o.variant == r.variant)
                .count()
                > 1;
            row_name(r, several)
        })
        .collect()
}

/// The series' legend in a framed box at `position`.
fn legend<'a, 'b: 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'b>, CT>,
    position: SeriesLabelPosition,
) -> Drawn {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Grouped bars: ops/s per row, one bar per server.
fn throughput(path: &Path, rows: &[Row], names: &[String]) -> Drawn {
    let ymax = rows
        .iter()
        .flat_map(|r| [ServerKind::Apache, ServerKind::Zooraft].map(|k| outcome(r, k)))
        .flatten()
        .map(|w| w.ops_per_sec)
        .fold(1.0, f64::max)
        * 1.15;
    let n = rows.len();
    let root = SVGBackend::new(path, (SIZE.0.max(180 * n as u32), SIZE.1)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Throughput per workload (median round)", ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..ymax)?;
    let label_of = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
            names[i as usize].clone()
        } else {
            String::new()
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n.max(2) * 2 + 1)
        .x_label_formatter(&label_of)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .y_desc("ops/s")
        .draw()?;
    for (side, kind) in [(-1.0, ServerKind::Apache), (1.0, ServerKind::Zooraft)] {
        let c = color(kind);
        let bars: Vec<(f64, f64)> = rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| outcome(r, kind).map(|w| (i as f64, w.ops_per_sec)))
            .collect();
        chart
            .draw_series(bars.into_iter().map(move |(x, v)| {
                let (a, b) = if side < 0.0 {
                    (x - 0.38, x - 0.02)
                } else {
                    (x + 0.02, x + 0.38)
                };
                Rectangle::new([(a, 0.0), (b, v)], c.filled())
            }))?
            .label(label(kind))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present()?;
    Ok(())
}

/// Latency CDF of one row: quantile against latency (log scale), one line per server.
fn latency_cdf(path: &Path, row: &Row, name: &str) -> Drawn {
    let xmax = [ServerKind::Apache, ServerKind::Zooraft]
        .iter()
        .filter_map(|&k| outcome(row, k))
        .flat_map(|w| w.cdf.iter().map(|&(_, us)| us as f64))
        .fold(10.0, f64::max)
        * 1.2;
    let xmin = [ServerKind::Apache, ServerKind::Zooraft]
        .iter()
        .filter_map(|&k| outcome(row, k))
        .flat_map(|w| w.cdf.iter().map(|&(_, us)| us as f64))
        .fold(xmax, f64::min)
        .max(2.0)
        / 2.0;
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Latency CDF: {name}, {}×{}", row.connections, row.depth),
            ("sans-serif", 22),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((xmin..xmax).log_scale(), 0f64..1.0)?;
    chart
        .configure_mesh()
        .x_label_formatter(&|v| format!("{v:.0}"))
        .x_desc("latency (µs, log scale)")
        .y_desc("fraction of ops at or below")
        .draw()?;
    for kind in [ServerKind::Apache, ServerKind::Zooraft] {
        let Some(w) = outcome(row, kind) else {
            continue;
        };
        let c = color(kind);
        let pts: Vec<(f64, f64)> = w
            .cdf
            .iter()
            .map(|&(q, us)| ((us as f64).max(1.0), q))
            .collect();
        chart
            .draw_series(LineSeries::new(pts, c.stroke_width(2)))?
            .label(label(kind))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    root.present()?;
    Ok(())
}

/// A figure against the znode count, one line (with points) per server.
fn scale_chart(
    path: &Path,
    curves: &[(ServerKind, &[ScalePoint])],
    title: &str,
    unit: &str,
    value: fn(&ScalePoint) -> f64,
) -> Drawn {
    let xmax = curves
        .iter()
        .flat_map(|(_, pts)| pts.iter().map(|p| p.znodes as f64))
        .fold(1.0, f64::max)
        * 1.05;
    let ymax = curves
        .iter()
        .flat_map(|(_, pts)| pts.iter().map(value))
        .fold(1e-3, f64::max)
        * 1.15;
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
    chart
        .configure_mesh()
        .x_desc("znodes (100 B each)")
        .y_desc(unit)
        .x_label_formatter(&|x| format!("{:.0}k", x / 1e3))
        .draw()?;
    for &(kind, pts) in curves {
        let c = color(kind);
        let xy: Vec<(f64, f64)> = pts.iter().map(|p| (p.znodes as f64, value(p))).collect();
        chart
            .draw_series(LineSeries::new(xy.clone(), c.stroke_width(2)))?
            .label(label(kind))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart.draw_series(xy.into_iter().map(move |p| Circle::new(p, 4, c.filled())))?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present()?;
    Ok(())
}
