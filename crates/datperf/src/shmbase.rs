//! The baselines of the shm link: for each figure, the best raw same-host mechanism, measured
//! in the same run as the DAT figure (alternating rounds, as the raw TCP baseline is):
//! - latency: two threads ping-ponging on one cache line (a spin on an atomic: the floor of any
//!   shared-memory transport; the spin yields the CPU every 1024 turns (the DAT side's busy
//!   poll, every 16 empty polls once its yields show nobody else wants its CPU), so that a
//!   busy machine does not leave it waiting out time slices, and the best of three runs is
//!   kept); half round trips for send and write, round trips for read;
//! - bandwidth: `process_vm_readv` of the same size (cross-memory attach: the one copy between
//!   processes that the link's large transfers make), from a buffer of this process (the
//!   kernel's copy path is the same for another process); for RDMA Writes and Reads on
//!   library memory (`--mem library`, which the peer maps: the transfer is one copy by the
//!   initiator), `memcpy` of the same size;
//! - message rate: a single-producer, single-consumer ring of 8-byte messages between two
//!   threads, 64 slots (the window the DAT side keeps in flight).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::args::{MemKind, Op};
use crate::cpu::{self, Cpu};
use crate::dat::{Measured, Sample, WINDOW};
use crate::pagebuf::PageBuf;
use crate::pin::{self, Side};
use crate::suite::{Kind, Measurement};

/// One cache line of its own.
#[repr(align(64))]
#[derive(Default)]
struct Line(AtomicU64);

/// Spins until `done`, yielding the CPU after a while: on a machine with more runnable
/// threads than cores, the two ends of a ping-pong may share one core, and a pure spin would
/// hold it for a whole time slice (milliseconds) before the peer runs.
fn spin_until(mut done: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !done() {
        spins += 1;
        if spins % 1024 == 0 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Runs `m`'s baseline here, for buffers of `mem`, with the CPU time of its timed loop (the
/// latency floor: of the try that was kept).
pub fn measure(m: &Measurement, mem: MemKind) -> std::io::Result<Measured> {
    let (sample, cpu) = match m.kind {
        Kind::Lat => ping_pong(m)?,
        Kind::Bw if mem == MemKind::Library && m.op != Op::Send => {
            cpu::metered(m.iters, m.size, || Ok::<_, std::io::Error>(memcpy(m)))?
        }
        Kind::Bw => cpu::metered(m.iters, m.size, || Ok::<_, std::io::Error>(copy(m)))?,
        Kind::Rate => cpu::metered(m.iters, m.size, || Ok::<_, std::io::Error>(ring(m)))?,
    };
    Ok(Measured { sample, cpu })
}

/// A copy floor's source (filled) and destination, page-aligned as the DAT side's buffers are
/// (`pagebuf`: with malloc's alignment these copies ran many times slower here).
fn copy_buffers(size: usize) -> (PageBuf, PageBuf) {
    (PageBuf::new(size, 0x5a), PageBuf::new(size, 0))
}

/// `memcpy` of `m.size` bytes between two page-aligned buffers of this process, `m.iters`
/// times.
fn memcpy(m: &Measurement) -> Sample {
    let size = m.size as usize;
    let (src, mut dst) = copy_buffers(size);
    let (src, dst) = (&src[..], &mut dst[..]);
    let _pinned = pin::pin(Side::Client);
    let t = Instant::now();
    for _ in 0..m.iters {
        dst.copy_from_slice(black_box(src));
        black_box(&mut *dst);
    }
    Sample::Bw {
        bytes: m.size * m.iters,
        msgs: m.iters,
        secs: t.elapsed().as_secs_f64(),
    }
}

/// Runs the ping-pong [`PING_PONG_TRIES`] times, each with a fresh pair of threads, and keeps
/// the run with the lowest median: the floor is the best the mechanism does, and a pair the
/// scheduler put on one CPU (beside the link's own threads, still spinning from the last
/// measurement) measures time slices instead.
fn ping_pong(m: &Measurement) -> std::io::Result<(Sample, Cpu)> {
    let median = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        s.get(s.len() / 2).copied().unwrap_or(f64::INFINITY)
    };
    let total = m.warmup + m.iters;
    let mut tries = Vec::with_capacity(PING_PONG_TRIES);
    for _ in 0..PING_PONG_TRIES {
        tries.push(cpu::metered(total, m.size, || {
            Ok::<_, std::io::Error>(ping_pong_once(m))
        })?);
    }
    let (v, cpu) = tries
        .into_iter()
        .min_by(|a, b| median(&a.0).total_cmp(&median(&b.0)))
        .expect("at least one try");
    Ok((Sample::Lat(v), cpu))
}

/// How many times the latency floor is measured (the best is kept).
const PING_PONG_TRIES: usize = 3;

fn ping_pong_once(m: &Measurement) -> Vec<f64> {
    let flag = Arc::new(Line::default());
    let n = m.warmup + m.iters;
    let peer = {
        let flag = flag.clone();
        std::thread::spawn(move || {
            let _pinned = pin::pin(Side::Server);
            for k in 0..n {
                spin_until(|| flag.0.load(Ordering::Acquire) == 2 * k + 1);
                flag.0.store(2 * k + 2, Ordering::Release);
            }
        })
    };
    let half = m.op != Op::Read;
    let mut v = Vec::with_capacity(m.iters as usize);
    let _pinned = pin::pin(Side::Client);
    for k in 0..n {
        let t = Instant::now();
        flag.0.store(2 * k + 1, Ordering::Release);
        spin_until(|| flag.0.load(Ordering::Acquire) == 2 * k + 2);
        let us = t.elapsed().as_secs_f64() * 1e6;
        if k >= m.warmup {
            v.push(if half { us / 2.0 } else { us });
        }
    }
    peer.join().expect("the ping-pong peer");
    v
}

fn copy(m: &Measurement) -> Sample {
    use nix::sys::uio::{process_vm_readv, RemoteIoVec};
    let size = m.size as usize;
    let (src, mut dst) = copy_buffers(size);
    let (src, dst) = (&src[..], &mut dst[..]);
    let me = nix::unistd::getpid();
    let remote = [RemoteIoVec {
        base: src.as_ptr() as usize,
        len: size,
    }];
    let _pinned = pin::pin(Side::Client);
    let t = Instant::now();
    for _ in 0..m.iters {
        let mut done = 0;
        while done < size {
            let rest = [RemoteIoVec {
                base: remote[0].base + done,
                len: size - done,
            }];
            let mut local = [std::io::IoSliceMut::new(&mut dst[done..])];
            done += process_vm_readv(me, &mut local, &rest)
                .expect("process_vm_readv of our own memory");
        }
        black_box(&mut *dst);
    }
    Sample::Bw {
        bytes: m.size * m.iters,
        msgs: m.iters,
        secs: t.elapsed().as_secs_f64(),
    }
}

fn ring(m: &Measurement) -> Sample {
    const SLOTS: u64 = WINDOW as u64;
    let slots: Arc<Vec<AtomicU64>> = Arc::new((0..SLOTS).map(|_| AtomicU64::new(0)).collect());
    let (head, tail) = (Arc::new(Line::default()), Arc::new(Line::default()));
    let n = m.iters;
    let t = Instant::now();
    let consumer = {
        let (slots, head, tail) = (slots.clone(), head.clone(), tail.clone());
        std::thread::spawn(move || {
            let _pinned = pin::pin(Side::Server);
            let mut sum = 0u64;
            for k in 0..n {
                spin_until(|| tail.0.load(Ordering::Acquire) != k);
                sum = sum.wrapping_add(slots[(k % SLOTS) as usize].load(Ordering::Relaxed));
                head.0.store(k + 1, Ordering::Release);
            }
            black_box(sum);
        })
    };
    let _pinned = pin::pin(Side::Client);
    for k in 0..n {
        spin_until(|| k - head.0.load(Ordering::Acquire) < SLOTS);
        slots[(k % SLOTS) as usize].store(k, Ordering::Relaxed);
        tail.0.store(k + 1, Ordering::Release);
    }
    consumer.join().expect("the ring's consumer");
    Sample::Bw {
        bytes: m.size * n,
        msgs: n,
        secs: t.elapsed().as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(op: Op, kind: Kind, size: u64, iters: u64) -> Measurement {
        Measurement {
            op,
            kind,
            size,
            iters,
            warmup: 3,
        }
    }

    #[test]
    fn each_baseline_reports_what_it_moved() {
        let r = measure(&m(Op::Send, Kind::Lat, 8, 50), MemKind::Library).unwrap();
        let Sample::Lat(v) = r.sample else {
            panic!("latency");
        };
        assert_eq!(v.len(), 50);
        assert!(v.iter().all(|&us| us > 0.0));
        // Warm-up included.
        assert_eq!((r.cpu.ops, r.cpu.bytes), (53, 53 * 8));
        for mem in [MemKind::Library, MemKind::Caller] {
            let r = measure(&m(Op::Write, Kind::Bw, 4096, 20), mem).unwrap();
            let Sample::Bw { bytes, msgs, secs } = r.sample else {
                panic!("bandwidth");
            };
            assert_eq!((bytes, msgs), (4096 * 20, 20));
            assert!(secs > 0.0);
            assert_eq!((r.cpu.ops, r.cpu.bytes), (20, 20 * 4096));
        }
        let r = measure(&m(Op::Send, Kind::Rate, 8, 1000), MemKind::Library).unwrap();
        let Sample::Bw { msgs, .. } = r.sample else {
            panic!("rate");
        };
        assert_eq!(msgs, 1000);
    }
}
