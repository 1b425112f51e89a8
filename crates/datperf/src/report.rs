//! Turning samples into figures, and figures into the table or the JSON array (serde_json).

use std::io;

use serde::Serialize;

use crate::cpu::{Cpu, Scope};
use crate::dat::{Measured, Sample};
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

/// A measurement with its DAT figure and its baseline (raw TCP, or the shm floors).
#[derive(Debug, Clone)]
pub struct Row {
    /// The link of the DAT side ("tcp", "shm", "loopback").
    pub link: &'static str,
    /// What was measured.
    pub m: Measurement,
    /// The dapl-rs figure.
    pub dat: Figure,
    /// The baseline's figure of the same run.
    pub base: Figure,
    /// The CPU time of the DAT side's timed loops, every round pooled.
    pub dat_cpu: Cpu,
    /// The CPU time of the baseline's timed loops (of the variant reported), rounds pooled.
    pub base_cpu: Cpu,
    /// The variant of the baseline reported, when it had several (raw TCP bandwidth:
    /// `raw::Writes::name`, the faster one).
    pub base_variant: Option<&'static str>,
    /// Whose CPU time both CPU figures count.
    pub cpu_scope: Scope,
}

impl Row {
    /// `dat / base`, from the values as reported.
    pub fn ratio(&self) -> f64 {
        round_sig(self.dat.value) / round_sig(self.base.value)
    }

    /// CPU time per operation (the same as per byte), `dat / base`, from the values as
    /// reported: lower is better.
    pub fn cpu_ratio(&self) -> f64 {
        round_sig(self.dat_cpu.us_per_op()) / round_sig(self.base_cpu.us_per_op())
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

/// The figure of rounds with their CPU time pooled (`combine`, `Cpu::sum`).
pub fn combine_measured(m: &Measurement, rounds: &[Measured]) -> Result<(Figure, Cpu)> {
    let samples: Vec<Sample> = rounds.iter().map(|r| r.sample.clone()).collect();
    let f = combine(m, &samples)?;
    Ok((f, Cpu::sum(rounds.iter().map(|r| &r.cpu))))
}

/// Whether figure `a` of `m` is better than `b`: lower latency, higher bandwidth or rate.
fn better(m: &Measurement, a: &Figure, b: &Figure) -> bool {
    match m.kind {
        Kind::Lat => a.value < b.value,
        Kind::Bw | Kind::Rate => a.value > b.value,
    }
}

/// The baseline of `m` measured in several ways, each with its rounds: the figure and CPU
/// time of the best way (the first of equals), and its name if there was more than one.
pub fn best(
    m: &Measurement,
    variants: &[(&'static str, Vec<Measured>)],
) -> Result<(Figure, Cpu, Option<&'static str>)> {
    let mut won: Option<(Figure, Cpu, &'static str)> = None;
    for (name, rounds) in variants {
        let (f, c) = combine_measured(m, rounds)?;
        if won.as_ref().is_none_or(|w| better(m, &f, &w.0)) {
            won = Some((f, c, name));
        }
    }
    let Some((f, c, name)) = won else {
        bail!("{}: no baseline measured", m.name());
    };
    Ok((f, c, (variants.len() > 1).then_some(name)))
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

/// `name value unit`: one variant's figure, for the progress line.
pub fn labelled(name: &str, f: &Figure, m: &Measurement) -> String {
    format!("{name} {} {}", num(f.value), m.unit())
}

/// The baseline's cell: its figure, and the variant reported when there was a choice (its
/// name's first word: `[message]`, `[128KiB]`).
fn base_cell(r: &Row) -> String {
    let c = cell(&r.base, r.m.unit());
    match r.base_variant {
        Some(v) => format!("{c} [{}]", v.split(' ').next().unwrap_or(v)),
        None => c,
    }
}

/// CPU time per operation (`us/op`: latency and rate) or per byte (`ns/B`, which is also
/// seconds per GB: bandwidth).
fn cpu_cell(m: &Measurement, c: &Cpu) -> String {
    match m.kind {
        Kind::Bw => format!("{} ns/B", num(c.ns_per_byte())),
        Kind::Lat | Kind::Rate => format!("{} us/op", num(c.us_per_op())),
    }
}

/// The progress line of a finished measurement (stderr); `base` names the baseline.
pub fn progress_line(r: &Row, base: &str) -> String {
    format!(
        "datperf {}   {base} {}   ratio {:.2}   CPU {} / {}, ratio {:.2}",
        cell(&r.dat, r.m.unit()),
        base_cell(r),
        r.ratio(),
        cpu_cell(&r.m, &r.dat_cpu),
        cpu_cell(&r.m, &r.base_cpu),
        r.cpu_ratio()
    )
}

/// The table: one row per measurement, its figures and CPU times; `base` names the baseline
/// columns.
pub fn table(title: &str, rows: &[Row], base: &str) -> String {
    const N: usize = 7;
    let cpu_base = format!("CPU {base}");
    let head = [
        "measurement",
        "datperf",
        base,
        "ratio",
        "CPU datperf",
        &cpu_base,
        "CPU ratio",
    ];
    let body: Vec<[String; N]> = rows
        .iter()
        .map(|r| {
            [
                r.m.name(),
                cell(&r.dat, r.m.unit()),
                base_cell(r),
                format!("{:.2}", r.ratio()),
                cpu_cell(&r.m, &r.dat_cpu),
                cpu_cell(&r.m, &r.base_cpu),
                format!("{:.2}", r.cpu_ratio()),
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
    let line = |c: [&str; N]| {
        let mut l = format!("{:<w$}", c[0], w = w[0]);
        for i in 1..N {
            l.push_str(&format!("  {:>w$}", c[i], w = w[i]));
        }
        l.push('\n');
        l
    };
    out.push_str(&line(head));
    let rules = w.map(|n| "-".repeat(n));
    out.push_str(&line(rules.each_ref().map(String::as_str)));
    for b in &body {
        out.push_str(&line(b.each_ref().map(String::as_str)));
    }
    out.push_str(&format!(
        "ratio = datperf / {base} of the same run: lower is better for latency (us), \
         higher for bandwidth (GB/s = 10^9 B/s) and rate\n"
    ));
    if let Some(r) = rows.first() {
        out.push_str(&format!(
            "CPU = user + system time of {} during the timed loops (warm-up included), per \
             operation (us/op; latency: one iteration, request and reply; rate: one message) or \
             per payload byte (ns/B = CPU seconds per GB); CPU ratio = datperf / {base}: lower is \
             better\n",
            r.cpu_scope.describe()
        ));
    }
    if rows.iter().any(|r| r.base_variant.is_some()) {
        out.push_str(&format!(
            "[message] / [128KiB]: for messages above 128 KiB the {base} bandwidth figure is \
             the faster of one write per message and each message in 128 KiB writes, measured \
             in the same rounds; the tag says which it was\n"
        ));
    }
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
    p99: Option<f64>,
    baseline_p99: Option<f64>,
    baseline_variant: Option<&'a str>,
    cpu_scope: &'a str,
    cpu_us_per_op: f64,
    cpu_ns_per_byte: f64,
    baseline_cpu_us_per_op: f64,
    baseline_cpu_ns_per_byte: f64,
    cpu_ratio: f64,
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

/// The JSON array, one object per measurement and line, keys in this order: `link`, `name`,
/// `unit`, `value`, `baseline`, `ratio`; `p99`, `baseline_p99` (latency: the 99th percentiles of
/// the same samples; null for bandwidth and rate); `baseline_variant` (which variant the baseline figure
/// is: `"message writes"` or `"128KiB writes"` for raw TCP bandwidth, else null); `cpu_scope`
/// (`"both"` sides or the `"client"` only); `cpu_us_per_op`, `cpu_ns_per_byte`,
/// `baseline_cpu_us_per_op`, `baseline_cpu_ns_per_byte` (CPU time of the timed loops per
/// operation and per payload byte, every row), `cpu_ratio` (datperf / baseline).
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
            p99: r.dat.p99.map(round_sig),
            baseline_p99: r.base.p99.map(round_sig),
            baseline_variant: r.base_variant,
            cpu_scope: r.cpu_scope.name(),
            cpu_us_per_op: round_sig(r.dat_cpu.us_per_op()),
            cpu_ns_per_byte: round_sig(r.dat_cpu.ns_per_byte()),
            baseline_cpu_us_per_op: round_sig(r.base_cpu.us_per_op()),
            baseline_cpu_ns_per_byte: round_sig(r.base_cpu.ns_per_byte()),
            cpu_ratio: round_sig(r.cpu_ratio()),
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

    fn measured(kind: Kind, secs: f64, cpu_secs: f64) -> Measured {
        Measured {
            sample: match kind {
                Kind::Lat => Sample::Lat(vec![secs * 1e6]),
                _ => Sample::Bw {
                    bytes: 1_000_000_000,
                    msgs: 1_000,
                    secs,
                },
            },
            cpu: Cpu {
                secs: cpu_secs,
                ops: 1_000,
                bytes: 1_000_000_000,
            },
        }
    }

    /// The baseline is its best variant, by the median of its rounds, with that variant's
    /// CPU time; one variant is not named.
    #[test]
    fn the_baseline_is_the_faster_variant() {
        let bw = m(Kind::Bw);
        let slow = vec![
            measured(Kind::Bw, 1.0, 1.0),
            measured(Kind::Bw, 0.9, 1.0),
            measured(Kind::Bw, 0.1, 1.0),
        ];
        // Faster in two rounds of three (the median), slower in one.
        let fast = vec![
            measured(Kind::Bw, 0.5, 0.2),
            measured(Kind::Bw, 2.0, 0.2),
            measured(Kind::Bw, 0.5, 0.2),
        ];
        let v = [
            ("message writes", slow.clone()),
            ("128KiB writes", fast.clone()),
        ];
        let (f, c, name) = best(&bw, &v).unwrap();
        assert_eq!(name, Some("128KiB writes"));
        assert_eq!(f.value, 2.0);
        assert!((c.secs - 0.6).abs() < 1e-12 && c.ops == 3000, "{c:?}");
        let v = [
            ("128KiB writes", fast.clone()),
            ("message writes", slow.clone()),
        ];
        assert_eq!(best(&bw, &v).unwrap().2, Some("128KiB writes"));
        // Latency: lower is better.
        let lat = m(Kind::Lat);
        let v = [
            ("a", vec![measured(Kind::Lat, 3e-6, 1.0)]),
            ("b", vec![measured(Kind::Lat, 2e-6, 1.0)]),
        ];
        assert_eq!(best(&lat, &v).unwrap().2, Some("b"));
        // One variant: not named.
        let (f, _, name) = best(&bw, &[("message writes", slow)]).unwrap();
        assert_eq!((f.value, name), (1.0 / 0.9, None));
        assert!(best(&bw, &[]).is_err());
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
            dat_cpu: Cpu {
                secs: 0.03,
                ops: 1000,
                bytes: 8000,
            },
            base_cpu: Cpu {
                secs: 0.02,
                ops: 1000,
                bytes: 8000,
            },
            base_variant: None,
            cpu_scope: Scope::Both,
        };
        assert_eq!(r.ratio(), 1.2);
        assert_eq!(r.cpu_ratio(), 1.5);
        let t = table("title", std::slice::from_ref(&r), "raw TCP");
        assert!(
            t.contains("send_lat_8B") && t.contains("12.00 us (p99 20.00)") && t.contains("1.20")
        );
        assert!(
            t.contains("CPU raw TCP") && t.contains("30.00 us/op") && t.contains("20.00 us/op"),
            "{t}"
        );
        assert!(t.contains("1.50") && t.contains("both sides"), "{t}");
        assert!(!t.contains("[128KiB]"), "{t}");
        // A bandwidth row: CPU per byte, and the baseline's variant.
        let bw = Row {
            m: Measurement {
                kind: Kind::Bw,
                size: 1 << 20,
                ..m(Kind::Bw)
            },
            dat: Figure {
                value: 5.0,
                p99: None,
            },
            base: Figure {
                value: 4.0,
                p99: None,
            },
            dat_cpu: Cpu {
                secs: 0.5,
                ops: 1000,
                bytes: 1000 << 20,
            },
            base_variant: Some("128KiB writes"),
            cpu_scope: Scope::Client,
            ..r.clone()
        };
        let t = table("title", std::slice::from_ref(&bw), "raw TCP");
        assert!(t.contains("4.000 GB/s [128KiB]"), "{t}");
        assert!(
            t.contains("0.4768 ns/B") && t.contains("client process only"),
            "{t}"
        );
        assert!(t.contains("faster of one write per message"), "{t}");
        let j = json(&[r.clone(), r, bw]);
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(v[0]["name"], "send_lat_8B");
        assert_eq!(v[0]["unit"], "us");
        assert_eq!(v[0]["value"], 12.0);
        assert_eq!(v[1]["ratio"], 1.2);
        assert_eq!(v[0]["baseline_variant"], serde_json::Value::Null);
        assert_eq!(
            (v[0]["p99"].as_f64(), v[0]["baseline_p99"].as_f64()),
            (Some(20.0), Some(15.0))
        );
        assert_eq!(v[2]["p99"], serde_json::Value::Null);
        assert_eq!(v[2]["baseline_p99"], serde_json::Value::Null);
        assert_eq!(v[0]["cpu_scope"], "both");
        assert_eq!(v[0]["cpu_us_per_op"], 30.0);
        assert_eq!(v[0]["cpu_ns_per_byte"], 3750.0);
        assert_eq!(v[0]["baseline_cpu_us_per_op"], 20.0);
        assert_eq!(v[0]["baseline_cpu_ns_per_byte"], 2500.0);
        assert_eq!(v[0]["cpu_ratio"], 1.5);
        assert_eq!(v[2]["baseline_variant"], "128KiB writes");
        assert_eq!(v[2]["cpu_scope"], "client");
        assert_eq!(v[2]["cpu_ns_per_byte"], 0.476837);
        assert!(
            j.find("\"name\"") < j.find("\"unit\"") && j.find("\"value\"") < j.find("\"baseline\"")
        );
        assert!(j.find("\"ratio\"") < j.find("\"cpu_ratio\""));
        assert_eq!(json(&[]), "[]");
        // One element per line, with `": "` and `", "` inside it.
        assert_eq!(j.lines().count(), 5, "{j}");
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
