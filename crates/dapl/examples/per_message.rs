//! The engine's cost per message, without a second thread: two endpoints of one IA, and one
//! thread that posts a receive on one, an 8-byte Send on the other, and dequeues both
//! completions, over and over. No thread switch and no waiting, so what it prints is the CPU
//! work of a message on both sides (post, link, placement, completions), and under
//! `valgrind --tool=callgrind` the instructions of each function, the same from run to run.
//! docs/architecture.md ("Where the time goes") says what it found.
//!
//! Run: `cargo run --release -p dapl --example per_message [-- IA [N [MODE [SIZE]]]]`
//! (IA: default `loopback`, or `tcp`, `shm`; N messages, default 100000; MODE `plain`,
//! `suppress`, `empty`, `stream`, `read`; SIZE: the Sends' size in bytes for `plain` and
//! `suppress`, 8 to 65536, default 8). It checks every message's cookies, length and first
//! and last eight bytes.
//! `suppress` posts the Sends with `SUPPRESS` and dequeues only the receive, as the
//! ping-pong of `datperf` does: what is left is the work on a half round trip's path.
//! `empty` only dequeues an EVD with nothing to come, `MESSAGES` times: the cost of one look
//! of a consumer spinning for its next completion.
//! `stream` posts Sends in bursts and takes the receive completions with `dequeue_into`, as
//! the message rate does.
//! `read` posts an 8-byte RDMA Read on one endpoint and dequeues its completion: the request,
//! the responder's answer (made by the same thread's polls) and the response.

mod common;

use common::*;
use dapl::*;

fn main() -> Res<()> {
    let n: u64 = match std::env::args().nth(2) {
        Some(s) => s.parse()?,
        None => 100_000,
    };
    let size: usize = match std::env::args().nth(4) {
        Some(s) => s.parse()?,
        None => 8,
    };
    if !(8..=65536).contains(&size) {
        return Err(format!("SIZE {size}: 8 to 65536 bytes").into());
    }
    let (ia, _async_evd) = InterfaceAdapter::open(&ia_name(), 16)?;
    let pz = ia.pz_create()?;
    let (a, b) = (Side::new(&ia, &pz, None)?, Side::new(&ia, &pz, None)?);
    let mem_len = size.max(4096);
    let a_mem = pz.lmr_allocate(mem_len, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)?;
    let b_mem = pz.lmr_allocate(
        mem_len,
        MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE | MemPriv::REMOTE_READ,
    )?;
    let (_, _psp) = connect(&a, &ia, &b, b"", b"")?;
    let recv = [b_mem.slice(0..size.max(64))?];
    let send = [a_mem.slice(0..size)?];
    let mode = std::env::args().nth(3);
    if let Some(m) = mode.as_deref() {
        if !["plain", "suppress", "empty", "stream", "read"].contains(&m) {
            return Err(format!("MODE {m}: plain, suppress, empty, stream or read").into());
        }
    }
    if mode.as_deref() == Some("empty") {
        return empty_polls(&b, n);
    }
    if mode.as_deref() == Some("read") {
        return reads(&a, &a_mem, &b_mem, n);
    }
    if mode.as_deref() == Some("stream") {
        return stream(&a, &b, &a_mem, &b_mem, n);
    }
    let suppress = mode.as_deref() == Some("suppress");
    let send_flags = if suppress {
        CompletionFlags::SUPPRESS
    } else {
        CompletionFlags::empty()
    };
    let mut placed = [0u8; 8];
    let last = size - 8;
    let start = std::time::Instant::now();
    for i in 0..n {
        a_mem.write(0, &i.to_le_bytes())?;
        if last > 0 {
            a_mem.write(last, &(!i).to_le_bytes())?;
        }
        b.ep.post_recv(&recv, i, CompletionFlags::empty())?;
        a.ep.post_send(&send, i, send_flags)?;
        let got = loop {
            if let Some(ev) = b.recv_evd.dequeue()? {
                break ev;
            }
        };
        let sent_cookie = if suppress {
            Cookie(i)
        } else {
            let sent = loop {
                if let Some(ev) = a.req_evd.dequeue()? {
                    break ev;
                }
            };
            sent.as_dto().ok_or("not a DTO completion")?.cookie
        };
        let got = got.as_dto().ok_or("not a DTO completion")?;
        if (got.cookie, sent_cookie) != (Cookie(i), Cookie(i))
            || got.transferred_length != size as u64
        {
            return Err(format!("message {i}: {got:?} / {sent_cookie:?}").into());
        }
        b_mem.read(0, &mut placed)?;
        if placed != i.to_le_bytes() {
            return Err(format!("message {i}: wrong bytes").into());
        }
        if last > 0 {
            b_mem.read(last, &mut placed)?;
            if placed != (!i).to_le_bytes() {
                return Err(format!("message {i}: wrong last bytes").into());
            }
        }
    }
    let per = start.elapsed().as_nanos() / u128::from(n.max(1));
    println!("{per} ns per message ({n} messages, both sides in this thread)");
    ia.close(CloseFlags::Abrupt)?;
    Ok(())
}

/// `read`: `n` 8-byte RDMA Reads by `a` of `b_mem`, each dequeued before the next.
fn reads(a: &Side, a_mem: &Lmr, b_mem: &Lmr, n: u64) -> Res<()> {
    let sink = [a_mem.slice(0..8)?];
    let remote = RmrTriplet::new(b_mem.rmr_context(), b_mem.address(), 8);
    let mut got = [0u8; 8];
    let start = std::time::Instant::now();
    for i in 0..n {
        b_mem.write(0, &i.to_le_bytes())?;
        a.ep.post_rdma_read(&sink, i, &remote, CompletionFlags::empty())?;
        let done = loop {
            if let Some(ev) = a.req_evd.dequeue()? {
                break ev;
            }
        };
        let done = done.as_dto().ok_or("not a DTO completion")?;
        a_mem.read(0, &mut got)?;
        if done.cookie != Cookie(i) || got != i.to_le_bytes() {
            return Err(format!("read {i}: {done:?}, bytes {got:?}").into());
        }
    }
    let per = start.elapsed().as_nanos() / u128::from(n.max(1));
    println!("{per} ns per read ({n} reads, both sides in this thread)");
    Ok(())
}

/// `stream`: `n` 8-byte Sends with SUPPRESS in bursts of [`BURST`] (each burst's receives
/// posted first), each burst's receive completions taken by `dequeue_into`: the message
/// rate's path (a stream's posts after the first go through the engine's queue; the
/// receiver takes its completions in batches and posts a receive per message).
fn stream(a: &Side, b: &Side, a_mem: &Lmr, b_mem: &Lmr, n: u64) -> Res<()> {
    const BURST: u64 = 16;
    let mut batch = Vec::with_capacity(BURST as usize);
    let start = std::time::Instant::now();
    let mut i = 0;
    while i < n {
        let k = BURST.min(n - i);
        for j in 0..k {
            let at = (8 * j) as usize;
            a_mem.write(at, &(i + j).to_le_bytes())?;
            b.ep.post_recv(&[b_mem.slice(at..at + 8)?], i + j, CompletionFlags::empty())?;
        }
        for j in 0..k {
            let at = (8 * j) as usize;
            a.ep.post_send(
                &[a_mem.slice(at..at + 8)?],
                i + j,
                CompletionFlags::SUPPRESS,
            )?;
        }
        let mut next = i;
        while next < i + k {
            batch.clear();
            b.recv_evd.dequeue_into(&mut batch, BURST as usize)?;
            for ev in &batch {
                let d = ev.as_dto().ok_or("not a DTO completion")?;
                if d.cookie != Cookie(next) || d.transferred_length != 8 {
                    return Err(format!("message {next}: {d:?}").into());
                }
                let mut placed = [0u8; 8];
                b_mem.read((8 * (next - i)) as usize, &mut placed)?;
                if placed != next.to_le_bytes() {
                    return Err(format!("message {next}: wrong bytes").into());
                }
                next += 1;
            }
        }
        i += k;
    }
    let per = start.elapsed().as_nanos() / u128::from(n.max(1));
    println!("{per} ns per message ({n} messages in bursts of {BURST}, both sides in this thread)");
    Ok(())
}

/// `empty`: `n` dequeues of an EVD with nothing to come (what a consumer spinning for its
/// next completion pays per look, with one connection established).
fn empty_polls(b: &Side, n: u64) -> Res<()> {
    let start = std::time::Instant::now();
    for _ in 0..n {
        if let Some(ev) = b.recv_evd.dequeue()? {
            return Err(format!("an event from nowhere: {ev:?}").into());
        }
    }
    let per = start.elapsed().as_nanos() / u128::from(n.max(1));
    println!("{per} ns per empty dequeue ({n} dequeues)");
    Ok(())
}
