//! `--plot FILE.svg`: bandwidth and latency against message size, one panel per operation and
//! kind, in each panel a line for dapl-rs and a dashed one for its baseline, per link
//! (plotters, SVG backend).

use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::args::{size_label, Op};
use crate::report::Row;
use crate::suite::Kind;
use anyhow::{bail, Result};

/// Width and height of one panel in pixels.
const PANEL: (u32, u32) = (520, 380);

/// One link's rows and what its baseline is called ("raw TCP", "shm floor").
pub struct LinkRows<'a> {
    /// The rows of the link's run.
    pub rows: &'a [Row],
    /// The baseline's name.
    pub baseline: &'a str,
}

/// The colour of a link's lines.
fn colour(link: &str) -> RGBColor {
    match link {
        "tcp" => RGBColor(31, 119, 180),
        "shm" => RGBColor(214, 39, 40),
        _ => RGBColor(44, 160, 44),
    }
}

/// One line of a panel: its label, colour, dashed or not, and its points (log2 of the size,
/// value).
struct Series {
    label: String,
    colour: RGBColor,
    dashed: bool,
    points: Vec<(f64, f64)>,
}

/// The panels to draw: (kind, op) for each latency and bandwidth pair the rows have, in the
/// order bandwidth then latency, send, write, read.
fn panels(links: &[LinkRows<'_>]) -> Vec<(Kind, Op)> {
    let mut v = Vec::new();
    for kind in [Kind::Bw, Kind::Lat] {
        for op in [Op::Send, Op::Write, Op::Read] {
            let has = links
                .iter()
                .any(|l| l.rows.iter().any(|r| r.m.kind == kind && r.m.op == op));
            if has {
                v.push((kind, op));
            }
        }
    }
    v
}

/// The series of one panel: per link, dapl-rs and its baseline, sorted by size.
fn series(links: &[LinkRows<'_>], kind: Kind, op: Op) -> Vec<Series> {
    let mut out = Vec::new();
    for l in links {
        let mut rows: Vec<&Row> = l
            .rows
            .iter()
            .filter(|r| r.m.kind == kind && r.m.op == op)
            .collect();
        if rows.is_empty() {
            continue;
        }
        rows.sort_by_key(|r| r.m.size);
        let link = rows[0].link;
        let x = |r: &Row| (r.m.size as f64).log2();
        out.push(Series {
            label: format!("{link}: dapl-rs"),
            colour: colour(link),
            dashed: false,
            points: rows.iter().map(|r| (x(r), r.dat.value)).collect(),
        });
        out.push(Series {
            label: format!("{link}: {}", l.baseline),
            colour: colour(link),
            dashed: true,
            points: rows.iter().map(|r| (x(r), r.base.value)).collect(),
        });
    }
    out
}

/// A value on an axis, short.
fn tick(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 0.01 {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{v:.0e}")
    }
}

/// Draws the SVG into `path`; `title` heads it.
pub fn draw(path: &Path, title: &str, links: &[LinkRows<'_>]) -> Result<()> {
    let panels = panels(links);
    if panels.is_empty() {
        bail!("--plot draws latency and bandwidth, and this run measured neither");
    }
    // A row per kind and a column per operation; one operation's two kinds side by side.
    let ops = panels.iter().filter(|p| p.0 == panels[0].0).count().max(1);
    let (rows, cols) = if ops == 1 {
        (1, panels.len() as u32)
    } else {
        (panels.len().div_ceil(ops) as u32, ops as u32)
    };
    let size = (PANEL.0 * cols, PANEL.1 * rows + 44);
    let r = (|| -> std::result::Result<(), Box<dyn std::error::Error>> {
        let root = SVGBackend::new(path, size).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(title, ("sans-serif", 22))?;
        let areas = root.split_evenly((rows as usize, cols as usize));
        for (area, &(kind, op)) in areas.iter().zip(&panels) {
            panel(area, kind, op, &series(links, kind, op))?;
        }
        root.present()?;
        Ok(())
    })();
    match r {
        Ok(()) => Ok(()),
        Err(e) => bail!("writing the plot to {}: {e}", path.display()),
    }
}

fn panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    kind: Kind,
    op: Op,
    series: &[Series],
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let pts = || series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1) = (f64::MAX, f64::MIN);
    let (mut y0, mut y1) = (f64::MAX, f64::MIN);
    for &(x, y) in pts() {
        x0 = x0.min(x);
        x1 = x1.max(x);
        if y > 0.0 && y.is_finite() {
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
    }
    if x0 > x1 || y0 > y1 {
        return Ok(());
    }
    if x1 - x0 < 1.0 {
        (x0, x1) = (x0 - 1.0, x1 + 1.0);
    }
    let (what, unit) = match kind {
        Kind::Bw => ("bandwidth", "GB/s"),
        Kind::Lat if op == Op::Read => ("latency (round trip)", "us"),
        Kind::Lat => ("latency (half round trip)", "us"),
        Kind::Rate => ("message rate", "Mmsg/s"),
    };
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{} {what}", op.name()), ("sans-serif", 20))
        .margin(8)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d::<RangedCoordf64, _>(
            (x0 - 0.3..x1 + 0.3).into(),
            (y0 / 1.5..y1 * 1.5).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_labels(((x1 - x0) / 2.0).ceil() as usize + 1)
        .x_label_formatter(&|x| size_label(2f64.powf(x.round()) as u64))
        .y_label_formatter(&|y| tick(*y))
        .x_desc("message size")
        .y_desc(unit)
        .light_line_style(WHITE.mix(0.0))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .draw()?;
    for s in series {
        let c = s.colour;
        let style = c.stroke_width(2);
        if s.dashed {
            chart.draw_series(DashedLineSeries::new(
                s.points.iter().copied(),
                6,
                4,
                c.mix(0.8).stroke_width(2),
            ))?;
            chart.draw_series(
                s.points
                    .iter()
                    .map(|&p| Circle::new(p, 2, c.mix(0.8).stroke_width(1))),
            )?;
        } else {
            chart.draw_series(LineSeries::new(s.points.iter().copied(), style).point_size(2))?;
        }
        let dashed = s.dashed;
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())?
            .label(s.label.as_str())
            .legend(move |(x, y)| {
                if dashed {
                    PathElement::new(vec![(x, y), (x + 6, y)], c.stroke_width(2))
                } else {
                    PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                }
            });
    }
    chart
        .configure_series_labels()
        .position(match kind {
            Kind::Lat => SeriesLabelPosition::UpperLeft,
            _ => SeriesLabelPosition::LowerRight,
        })
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font(("sans-serif", 14))
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Figure;
    use crate::suite::Measurement;

    fn row(link: &'static str, op: Op, kind: Kind, size: u64, dat: f64, base: f64) -> Row {
        let f = |value| Figure { value, p99: None };
        Row {
            link,
            m: Measurement {
                op,
                kind,
                size,
                iters: 1,
                warmup: 0,
            },
            dat: f(dat),
            base: f(base),
            dat_cpu: crate::cpu::Cpu::default(),
            base_cpu: crate::cpu::Cpu::default(),
            base_variant: None,
            cpu_scope: crate::cpu::Scope::Both,
        }
    }

    #[test]
    fn draws_every_series_with_its_label() {
        let mut tcp = Vec::new();
        let mut shm = Vec::new();
        for (i, size) in [2u64, 4, 8, 16].into_iter().enumerate() {
            let v = (i + 1) as f64;
            tcp.push(row("tcp", Op::Write, Kind::Bw, size, v, 2.0 * v));
            tcp.push(row("tcp", Op::Write, Kind::Lat, size, 10.0 * v, 5.0 * v));
            shm.push(row("shm", Op::Write, Kind::Bw, size, 3.0 * v, v));
        }
        let links = [
            LinkRows {
                rows: &tcp,
                baseline: "raw TCP",
            },
            LinkRows {
                rows: &shm,
                baseline: "shm floor",
            },
        ];
        assert_eq!(
            panels(&links),
            [(Kind::Bw, Op::Write), (Kind::Lat, Op::Write)]
        );
        let s = series(&links, Kind::Bw, Op::Write);
        let labels: Vec<&str> = s.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "tcp: dapl-rs",
                "tcp: raw TCP",
                "shm: dapl-rs",
                "shm: shm floor"
            ]
        );
        assert_eq!(s[0].points[0], (1.0, 1.0));
        assert_eq!(s[1].points[3], (4.0, 8.0));
        let dir = std::env::temp_dir().join(format!("datperf-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.svg");
        draw(&path, "test", &links).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(svg.starts_with("<svg"), "{svg}");
        for l in labels {
            assert!(svg.contains(&format!(">\n{l}\n<")), "{l}");
        }
        assert!(svg.contains("write bandwidth") && svg.contains("write latency"));
        // Sizes on the x axis as measurement names spell them.
        assert!(
            svg.contains("\n4B\n") && svg.contains("\n16B\n"),
            "size labels"
        );
        // No panel for what was not measured.
        assert!(!svg.contains("send bandwidth"));
    }

    #[test]
    fn nothing_to_draw_is_an_error() {
        let rows = [row("tcp", Op::Send, Kind::Rate, 8, 1.0, 1.0)];
        let links = [LinkRows {
            rows: &rows,
            baseline: "raw TCP",
        }];
        assert!(draw(Path::new("/nonexistent/x.svg"), "t", &links).is_err());
    }

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(1500.0), "1500");
        assert_eq!(tick(2.0), "2");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(0.1), "0.1");
        assert_eq!(tick(10.0), "10");
        assert_eq!(tick(0.001), "1e-3");
    }
}
