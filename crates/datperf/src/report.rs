//! Turning samples into figures, and figures into the table or the JSON array (serde_json).

use std::io;

use serde::Serialize;

use crate::dat::Sample;
use crate::suite::{Kind, Measurement};
use anyhow::{bail, Result};

/// One figure: the value in the measurement's unit, and the 99th percentile for latencies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figure {
    /// Median latency (us), bandwidth (GB/s) or rate (Mmsg/s).
    pub value: f64,
    /// 99th percentile latency (us).
    pub p99: Option<f64>,
}

/// A measurement with its DAT figure and its raw TCP baseline.
#[derive(Debug, Clone)]
pub struct Row {
    /// The link of the DAT side ("tcp", "shm", "loopback").
    pub link: &'static str,
    /// What was measured.
    pub m: Measurement,
    /// The dapl-rs figure.
    pub dat: Figure,
    /// The raw TCP figure of the same run.
    pub base: Figure,
}

impl Row {
    /// `dat / base`, from the values as reported.
    pub fn ratio(&self) -> f64 {
        round_sig(self.dat.value) / round_sig(self.base.value)
    }
}

/// The `q`-quantile (0..=1) of sorted samples, nearest rank.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
    sorted[rank - 1]
}

/// The median of sorted samples.
fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// The figure of a sample.
pub fn figure(m: &Measurement, s: &Sample) -> Result<Figure> {
    let f = match (m.kind, s) {
        (Kind::Lat, Sample::Lat(v)) => {
            if v.is_empty() {
                bail!("{}: no latency samples", m.name());
            }
            let mut v = v.clone();
            v.sort_by(f64::total_cmp);
            Figure {
                value: median(&v),
                p99: Some(quantile(&v, 0.99)),
            }
        }
        (Kind::Bw, Sample::Bw { bytes, secs, .. }) => Figure {
            value: *bytes as f64 / secs / 1e9,
            p99: None,
        },
        (Kind::Rate, Sample::Bw { msgs, secs, .. }) => Figure {
            value: *msgs as f64 / secs / 1e6,
            p99: None,
        },
        _ => bail!("{}: sample of the wrong kind", m.name()),
    };
    if !(f.value.is_finite() && f.value > 0.0) {
        bail!(
            "{}: the run produced no usable figure ({})",
            m.name(),
            f.value
        );
    }
    Ok(f)
}

/// The figure of a measurement run in rounds: latency samples are pooled; for bandwidth and
/// rate the median round counts.
pub fn combine(m: &Measurement, samples: &[Sample]) -> Result<Figure> {
    if m.kind == Kind::Lat {
        let all: Vec<f64> = samples
            .iter()
            .flat_map(|s| match s {
                Sample::Lat(v) => v.clone(),
                Sample::Bw { .. } => Vec::new(),
            })
            .collect();
        return figure(m, &Sample::Lat(all));
    }
    let mut v = samples
        .iter()
        .map(|s| figure(m, s).map(|f| f.value))
        .collect::<Result<Vec<f64>>>()?;
    if v.is_empty() {
        bail!("{}: no rounds", m.name());
    }
    v.sort_by(f64::total_cmp);
    Ok(Figure {
        value: median(&v),
        p99: None,
    })
}

/// Rounds to 6 significant digits (what the JSON carries).
pub fn round_sig(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let digits = 6 - 1 - x.abs().log10().floor() as i32;
    let p = 10f64.powi(digits);
    (x * p).round() / p
}

/// A number with 4 significant digits for the table.
fn num(x: f64) -> String {
    let a = x.abs();
    if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 10.0 {
        format!("{x:.2}")
    } else if a >= 1.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.4}")
    }
}

fn cell(f: &Figure, unit: &str) -> String {
    match f.p99 {
        Some(p) => format!("{} {unit} (p99 {})", num(f.value), num(p)),
        None => format!("{} {unit}", num(f.value)),
    }
}

/// The progress line of a finished measurement (stderr); `base` names the baseline.
pub fn progress_line(r: &Row, base: &str) -> String {
    let unit = r.m.unit();
    format!(
        "datperf {}   {base} {}   ratio {:.2}",
        cell(&r.dat, unit),
        cell(&r.base, unit),
        r.ratio()
    )
}

/// The table: one row per measurement; `base` names the baseline column.
pub fn table(title: &str, rows: &[Row], base: &str) -> String {
    let head = ["measurement", "datperf", base, "ratio"];
    let body: Vec<[String; 4]> = rows
        .iter()
        .map(|r| {
            let unit = r.m.unit();
            [
                r.m.name(),
                cell(&r.dat, unit),
                cell(&r.base, unit),
                format!("{:.2}", r.ratio()),
            ]
        })
        .collect();
    let mut w = head.map(str::len);
    for b in &body {
        for (i, c) in b.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    let mut out = format!("{title}\n");
    let line = |c: [&str; 4]| {
        format!(
            "{:<w0$}  {:>w1$}  {:>w2$}  {:>w3$}\n",
            c[0],
            c[1],
            c[2],
            c[3],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3]
        )
    };
    out.push_str(&line(head));
    out.push_str(&line([
        &"-".repeat(w[0]),
        &"-".repeat(w[1]),
        &"-".repeat(w[2]),
        &"-".repeat(w[3]),
    ]));
    for b in &body {
        out.push_str(&line([&b[0], &b[1], &b[2], &b[3]]));
    }
    out.push_str(&format!(
        "ratio = datperf / {base} of the same run: lower is better for latency (us), \
         higher for bandwidth (GB/s = 10^9 B/s) and rate\n"
    ));
    out
}

/// One measurement as `--json` prints it (the key order is the field order).
#[derive(Serialize)]
struct JsonRow<'a> {
    link: &'a str,
    name: String,
    unit: &'a str,
    value: f64,
    baseline: f64,
    ratio: f64,
}

/// serde_json's layout for datperf: a top-level array holds one element per line, and
/// within a line keys and values are set apart as in `{"name": "x", "value": 1.0}` (scripts
/// such as `bench/compare.sh` read the array line by line).
#[derive(Default)]
struct LineFormatter {
    /// Containers open around the current position.
    depth: usize,
    /// The outermost array has had an element.
    outer_has_value: bool,
}

impl serde_json::ser::Formatter for LineFormatter {
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        if self.depth == 1 {
            self.outer_has_value = false;
        }
        w.write_all(b"[")
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth -= 1;
        if self.depth == 0 && self.outer_has_value {
            w.write_all(b"\n")?;
        }
        w.write_all(b"]")
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        if self.depth == 1 {
            self.outer_has_value = true;
            w.write_all(b"\n  ")
        } else if first {
            Ok(())
        } else {
            w.write_all(b" ")
        }
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth += 1;
        w.write_all(b"{")
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.depth -= 1;
        w.write_all(b"}")
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
}

/// `v` as JSON in datperf's layout (`LineFormatter`). Non-finite numbers are `null`.
pub fn to_json<T: Serialize + ?Sized>(v: &T) -> String {
    let mut buf = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, LineFormatter::default());
    // Serializing plain structs of strings and numbers into a Vec cannot fail.
    if v.serialize(&mut ser).is_err() {
        return "null".into();
    }
    String::from_utf8(buf).unwrap_or_default()
}

/// The JSON array: `{"link", "name", "unit", "value", "baseline", "ratio"}` per measurement,
/// in that key order, one per line.
pub fn json(rows: &[Row]) -> String {
    let items: Vec<JsonRow<'_>> = rows
        .iter()
        .map(|r| JsonRow {
            link: r.link,
            name: r.m.name(),
            unit: r.m.unit(),
            value: round_sig(r.dat.value),
            baseline: round_sig(r.base.value),
            ratio: round_sig(r.ratio()),
        })
        .collect();
    to_json(&items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Op;

    fn m(kind: Kind) -> Measurement {
        Measurement {
            op: Op::Send,
            kind,
            size: 8,
            iters: 4,
            warmup: 0,
        }
    }

    #[test]
    fn latency_median_and_p99() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let f = figure(&m(Kind::Lat), &Sample::Lat(v)).unwrap();
        assert_eq!(f.value, 50.5);
        assert_eq!(f.p99, Some(99.0));
        let f = figure(&m(Kind::Lat), &Sample::Lat(vec![3.0, 1.0, 2.0])).unwrap();
        assert_eq!((f.value, f.p99), (2.0, Some(3.0)));
        assert!(figure(&m(Kind::Lat), &Sample::Lat(vec![])).is_err());
    }

    #[test]
    fn bandwidth_and_rate_units() {
        let s = Sample::Bw {
            bytes: 2_000_000_000,
            msgs: 4_000_000,
            secs: 2.0,
        };
        assert_eq!(figure(&m(Kind::Bw), &s).unwrap().value, 1.0);
        assert_eq!(figure(&m(Kind::Rate), &s).unwrap().value, 2.0);
        let zero = Sample::Bw {
            bytes: 1,
            msgs: 1,
            secs: 0.0,
        };
        assert!(figure(&m(Kind::Bw), &zero).is_err());
    }

    #[test]
    fn rounds_combine() {
        let bw = |secs: f64| Sample::Bw {
            bytes: 1_000_000_000,
            msgs: 1,
            secs,
        };
        let f = combine(&m(Kind::Bw), &[bw(1.0), bw(0.5), bw(10.0)]).unwrap();
        assert_eq!(f.value, 1.0);
        let f = combine(
            &m(Kind::Lat),
            &[Sample::Lat(vec![1.0, 2.0]), Sample::Lat(vec![3.0])],
        )
        .unwrap();
        assert_eq!(f.value, 2.0);
        assert!(combine(&m(Kind::Bw), &[]).is_err());
    }

    #[test]
    fn rounding_and_output() {
        assert_eq!(round_sig(12.345678), 12.3457);
        assert_eq!(round_sig(0.000123456789), 0.000123457);
        assert_eq!(round_sig(1234567.0), 1234570.0);
        let r = Row {
            link: "tcp",
            m: m(Kind::Lat),
            dat: Figure {
                value: 12.0,
                p99: Some(20.0),
            },
            base: Figure {
                value: 10.0,
                p99: Some(15.0),
            },
        };
        assert_eq!(r.ratio(), 1.2);
        let t = table("title", std::slice::from_ref(&r), "raw TCP");
        assert!(
            t.contains("send_lat_8B") && t.contains("12.00 us (p99 20.00)") && t.contains("1.20")
        );
        let j = json(&[r.clone(), r]);
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v[0]["name"], "send_lat_8B");
        assert_eq!(v[0]["unit"], "us");
        assert_eq!(v[0]["value"], 12.0);
        assert_eq!(v[1]["ratio"], 1.2);
        assert!(
            j.find("\"name\"") < j.find("\"unit\"") && j.find("\"value\"") < j.find("\"baseline\"")
        );
        assert_eq!(json(&[]), "[]");
        // One element per line, with `": "` and `", "` inside it.
        assert_eq!(j.lines().count(), 4, "{j}");
        assert!(
            j.starts_with("[\n  {\"link\": \"tcp\", \"name\": \"send_lat_8B\", "),
            "{j}"
        );
        assert!(j.ends_with("}\n]"), "{j}");
        #[derive(Serialize)]
        struct Nested {
            a: Vec<u8>,
            b: f64,
        }
        let n = Nested {
            a: vec![1, 2],
            b: f64::NAN,
        };
        assert_eq!(to_json(&n), "{\"a\": [1, 2], \"b\": null}");
        assert_eq!(to_json(&[n]), "[\n  {\"a\": [1, 2], \"b\": null}\n]");
    }
}
