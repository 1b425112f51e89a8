//! Which measurements a run makes, with their names, units and iteration counts.

use crate::args::{size_label, sweep_sizes, KindArg, Op, Options};

/// What is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Latency (microseconds).
    Lat,
    /// Bandwidth (GB/s).
    Bw,
    /// Message rate (Mmsg/s): a send bandwidth run reported per message.
    Rate,
}

/// One measurement: the DAT figure and its raw TCP baseline are both taken with these values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measurement {
    /// Which DTO.
    pub op: Op,
    /// Latency, bandwidth or rate.
    pub kind: Kind,
    /// Message size in bytes.
    pub size: u64,
    /// Timed iterations.
    pub iters: u64,
    /// Untimed iterations before them (latency only).
    pub warmup: u64,
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// Latency iterations (normal, quick).
const LAT_ITERS: (u64, u64) = (10_000, 300);
/// Latency warm-up iterations (normal, quick).
const LAT_WARMUP: (u64, u64) = (500, 30);
/// Bytes moved per bandwidth measurement (normal, quick).
const BW_BYTES: (u64, u64) = (512 * MIB, 8 * MIB);
/// Fewest bandwidth iterations (normal, quick).
const BW_MIN_ITERS: (u64, u64) = (256, 8);
/// Most bandwidth iterations (normal, quick): small sizes are bounded by count, not bytes.
const BW_MAX_ITERS: (u64, u64) = (300_000, 5_000);
/// Bandwidth and rate measurements run in this many rounds (alternating with their raw TCP
/// baseline) and report the median round: a burst of load from elsewhere then spoils one
/// round, not the figure.
pub const ROUNDS: u64 = 3;
/// Latency measurements run in this many rounds, alternating with their raw TCP baseline, and
/// pool the samples: the machine's speed drifts over seconds (on this project's 2-core VM the
/// raw TCP half round trip moves between about 4.5 and 7.5 us), and a ratio of two figures
/// taken one after the other would carry that drift.
pub const LAT_ROUNDS: u64 = 5;
/// Message-rate iterations (normal, quick).
const RATE_ITERS: (u64, u64) = (300_000, 5_000);

/// A sweep (`-a`) makes 23 sizes of each measurement, so it scales them down to about a
/// second per size at most: latency moves this many bytes each way (normal, quick)...
const SWEEP_LAT_BYTES: (u64, u64) = (16 * MIB, MIB);
/// ... in at least this many iterations (normal, quick)...
const SWEEP_LAT_MIN_ITERS: (u64, u64) = (20, 4);
/// ... and at most this many (normal, quick).
const SWEEP_LAT_MAX_ITERS: (u64, u64) = (1000, 50);
/// Bytes moved per bandwidth measurement of a sweep (normal, quick).
const SWEEP_BW_BYTES: (u64, u64) = (64 * MIB, MIB);
/// Fewest bandwidth iterations of a sweep (normal, quick).
const SWEEP_BW_MIN_ITERS: (u64, u64) = (8, 2);
/// Most bandwidth iterations of a sweep (normal, quick).
const SWEEP_BW_MAX_ITERS: (u64, u64) = (20_000, 200);

impl Measurement {
    /// The name: `send_lat_8B`, `write_bw_64KiB`, `msg_rate_8B`.
    pub fn name(&self) -> String {
        let size = size_label(self.size);
        match self.kind {
            Kind::Lat => format!("{}_lat_{size}", self.op.name()),
            Kind::Bw => format!("{}_bw_{size}", self.op.name()),
            Kind::Rate => format!("msg_rate_{size}"),
        }
    }

    /// The unit of the value: `us`, `GB/s` or `Mmsg/s`.
    pub fn unit(&self) -> &'static str {
        match self.kind {
            Kind::Lat => "us",
            Kind::Bw => "GB/s",
            Kind::Rate => "Mmsg/s",
        }
    }
}

/// The rounds a measurement runs in, sharing its iterations: one in quick mode, else
/// `LAT_ROUNDS` for latency (their samples are pooled; each round has the full warm-up) and
/// `ROUNDS` for bandwidth and rate.
pub fn rounds(m: &Measurement, quick: bool) -> Vec<Measurement> {
    let r = if quick {
        1
    } else if m.kind == Kind::Lat {
        LAT_ROUNDS.min(m.iters)
    } else {
        ROUNDS.min(m.iters)
    };
    (0..r)
        .map(|i| Measurement {
            iters: m.iters / r + u64::from(i < m.iters % r),
            ..*m
        })
        .collect()
}

fn pick(o: &Options, v: (u64, u64)) -> u64 {
    if o.quick {
        v.1
    } else {
        v.0
    }
}

/// The measurements of a run, in report order: latencies (send, read, write, each at every
/// size), bandwidths (send, write, read, each at every size), message rate.
pub fn build(o: &Options) -> Vec<Measurement> {
    let wanted = |op: Op| o.test.is_none_or(|t| t == op);
    let kind = |k: KindArg| o.kind.is_none_or(|w| w == k);
    let rate_size = o.size.unwrap_or(8);
    let (lat_sizes, bw_sizes): (Vec<u64>, Vec<u64>) = match o.size {
        _ if o.all_sizes => (sweep_sizes(), sweep_sizes()),
        Some(s) => (vec![s], vec![s]),
        None => (vec![8], vec![4 * KIB, 64 * KIB, MIB]),
    };
    let lat = |op: Op, size: u64| {
        let default = if o.all_sizes {
            (pick(o, SWEEP_LAT_BYTES) / size)
                .clamp(pick(o, SWEEP_LAT_MIN_ITERS), pick(o, SWEEP_LAT_MAX_ITERS))
        } else {
            pick(o, LAT_ITERS)
        };
        let iters = o.iters.unwrap_or(default);
        Measurement {
            op,
            kind: Kind::Lat,
            size,
            iters,
            warmup: pick(o, LAT_WARMUP).min(iters.div_ceil(10)),
        }
    };
    let bw = |op: Op, size: u64| {
        let (bytes, min, max) = if o.all_sizes {
            (SWEEP_BW_BYTES, SWEEP_BW_MIN_ITERS, SWEEP_BW_MAX_ITERS)
        } else {
            (BW_BYTES, BW_MIN_ITERS, BW_MAX_ITERS)
        };
        Measurement {
            op,
            kind: Kind::Bw,
            size,
            iters: o
                .iters
                .unwrap_or((pick(o, bytes) / size).clamp(pick(o, min), pick(o, max))),
            warmup: 0,
        }
    };
    let mut v = Vec::new();
    for op in [Op::Send, Op::Read, Op::Write] {
        if wanted(op) && kind(KindArg::Lat) {
            for &s in &lat_sizes {
                v.push(lat(op, s));
            }
        }
    }
    for op in [Op::Send, Op::Write, Op::Read] {
        if wanted(op) && kind(KindArg::Bw) {
            for &s in &bw_sizes {
                v.push(bw(op, s));
            }
        }
    }
    if wanted(Op::Send) && kind(KindArg::Rate) {
        v.push(Measurement {
            op: Op::Send,
            kind: Kind::Rate,
            size: rate_size,
            iters: o.iters.unwrap_or(pick(o, RATE_ITERS)),
            warmup: 0,
        });
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_suite_has_the_required_names_once() {
        let names: Vec<String> = build(&Options::default())
            .iter()
            .map(|m| m.name())
            .collect();
        let want = [
            "send_lat_8B",
            "read_lat_8B",
            "write_lat_8B",
            "send_bw_4KiB",
            "send_bw_64KiB",
            "send_bw_1MiB",
            "write_bw_4KiB",
            "write_bw_64KiB",
            "write_bw_1MiB",
            "read_bw_4KiB",
            "read_bw_64KiB",
            "read_bw_1MiB",
            "msg_rate_8B",
        ];
        assert_eq!(names, want);
    }

    #[test]
    fn test_and_size_select() {
        let o = Options {
            test: Some(Op::Write),
            size: Some(64 * KIB),
            iters: Some(7),
            ..Options::default()
        };
        let m = build(&o);
        let names: Vec<String> = m.iter().map(|m| m.name()).collect();
        assert_eq!(names, ["write_lat_64KiB", "write_bw_64KiB"]);
        assert!(m.iter().all(|m| m.iters == 7));
        assert_eq!(m[0].warmup, 1);
        assert_eq!(m[0].unit(), "us");
        assert_eq!(m[1].unit(), "GB/s");
        let o = Options {
            test: Some(Op::Send),
            ..Options::default()
        };
        let m = build(&o);
        assert_eq!(m.last().unwrap().unit(), "Mmsg/s");
        assert_eq!(m.len(), 5);
    }

    #[test]
    fn small_bandwidth_sizes_are_bounded_by_count() {
        let o = Options {
            size: Some(8),
            ..Options::default()
        };
        for m in build(&o) {
            assert!(m.iters <= RATE_ITERS.0.max(BW_MAX_ITERS.0), "{m:?}");
        }
    }

    #[test]
    fn kind_selects() {
        let o = Options {
            kind: Some(KindArg::Bw),
            ..Options::default()
        };
        let m = build(&o);
        assert_eq!(m.len(), 9);
        assert!(m.iter().all(|m| m.kind == Kind::Bw));
        let o = Options {
            kind: Some(KindArg::Rate),
            test: Some(Op::Read),
            ..Options::default()
        };
        assert!(build(&o).is_empty());
    }

    #[test]
    fn rounds_share_the_iterations() {
        let m = build(&Options::default());
        let lat = rounds(&m[0], false);
        assert_eq!(lat.len() as u64, LAT_ROUNDS);
        assert_eq!(lat.iter().map(|x| x.iters).sum::<u64>(), m[0].iters);
        assert!(lat.iter().all(|x| x.warmup == m[0].warmup));
        assert_eq!(rounds(&m[0], true), vec![m[0]]);
        let bw = m[3];
        let r = rounds(&bw, false);
        assert_eq!(r.len() as u64, ROUNDS);
        assert_eq!(r.iter().map(|x| x.iters).sum::<u64>(), bw.iters);
        assert_eq!(rounds(&bw, true), vec![bw]);
        let two = Measurement { iters: 2, ..bw };
        assert_eq!(rounds(&two, false).len(), 2);
        let seven = Measurement { iters: 7, ..bw };
        let it: Vec<u64> = rounds(&seven, false).iter().map(|x| x.iters).collect();
        assert_eq!(it, [3, 2, 2]);
    }

    #[test]
    fn a_sweep_has_every_size_for_latency_and_bandwidth() {
        let o = Options {
            all_sizes: true,
            ..Options::default()
        };
        let m = build(&o);
        let sizes = sweep_sizes();
        for kind in [Kind::Lat, Kind::Bw] {
            for op in [Op::Send, Op::Write, Op::Read] {
                let got: Vec<u64> = m
                    .iter()
                    .filter(|x| x.kind == kind && x.op == op)
                    .map(|x| x.size)
                    .collect();
                assert_eq!(got, sizes, "{op:?} {kind:?}");
            }
        }
        // Message rate stays at 8 bytes.
        let rate: Vec<&Measurement> = m.iter().filter(|x| x.kind == Kind::Rate).collect();
        assert_eq!(rate.len(), 1);
        assert_eq!(rate[0].size, 8);
        // Fewer iterations as the size grows, never below the floor.
        let lat: Vec<u64> = m
            .iter()
            .filter(|x| x.kind == Kind::Lat && x.op == Op::Send)
            .map(|x| x.iters)
            .collect();
        assert_eq!(lat[0], SWEEP_LAT_MAX_ITERS.0);
        assert_eq!(*lat.last().unwrap(), SWEEP_LAT_MIN_ITERS.0);
        assert!(lat.windows(2).all(|w| w[1] <= w[0]));
        let big = m
            .iter()
            .find(|x| x.kind == Kind::Bw && x.size == 8 << 20)
            .unwrap();
        assert_eq!(big.iters, SWEEP_BW_MIN_ITERS.0);
        // A sweep's bandwidth moves at most 64 MiB (or the count bound) per measurement.
        for x in m.iter().filter(|x| x.kind == Kind::Bw) {
            assert!(
                x.iters * x.size <= SWEEP_BW_BYTES.0.max(x.size * SWEEP_BW_MIN_ITERS.0),
                "{x:?}"
            );
        }
    }

    #[test]
    fn quick_is_smaller() {
        let q = Options {
            quick: true,
            ..Options::default()
        };
        for (a, b) in build(&Options::default()).iter().zip(build(&q).iter()) {
            assert_eq!(a.name(), b.name());
            assert!(b.iters < a.iters && b.iters > 0);
        }
    }
}
