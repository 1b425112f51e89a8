//! The baseline: the same measurements over plain kernel TCP (`std::net::TcpStream`,
//! `TCP_NODELAY`), with the same thread structure as the DAT side (the client in the calling
//! thread, the server in one thread of its own).
//!
//! Each measurement is one connection. The client sends a 24-byte header (little endian):
//! magic `DPR2`, op (0 send, 1 write, 2 read), kind (0 latency, 1 bandwidth, 2 message rate),
//! flags (bit 0: busy polling, as `dat::Spec::polls`; bit 1: chunked writes, see below; a server
//! of an earlier version refuses bit 1 as an unknown flag), a reserved byte (0), size u64, total
//! iterations u64 (warm-up included); the fields of the DAT side's connect private data
//! (`dat.rs`) without its window and buffer. The magic
//! names the layout: `DPR1` (no flags) is refused, as a header with unknown flags is. Then:
//! - latency: `total` rounds of request/response (send and write: `size` bytes each way; read:
//!   8 bytes out, `size` bytes back);
//! - send/write bandwidth and message rate: the client writes `total` messages of `size` bytes
//!   (one `write` each), the server reads them in chunks of up to 256 KiB (the tcp link's
//!   staging buffer size) and answers with 8 bytes when it has them all;
//! - read bandwidth: the client sends an 8-byte request, the server writes `total` messages of
//!   `size` bytes, the client reads them in chunks of up to 256 KiB.
//!
//! Bandwidth of messages larger than 128 KiB (not latency, not message rate, not smaller
//! messages) has two ways of writing each message ([`Writes`]): one `write`, or writes of
//! 128 KiB pieces (flag bit 1). One large blocking `write` per message handicaps plain TCP (in
//! one `bench/compare.sh` run it moved 4.27 GB/s in 64 KiB writes but 2.33 GB/s in 1 MiB ones);
//! the baseline is the best a plain TCP program sending such messages gets, the faster of the
//! two, measured in the same rounds (`main.rs`, `report::best`), and the report names the
//! winner. Smaller messages are never joined into larger writes: that would measure a stream,
//! not a program sending messages of that size (iperf3 `-l SIZE` writes SIZE bytes at a time
//! too). Buffers
//! are made before the timed loop and filled with a non-zero byte (a large zeroed allocation
//! never written reads as the kernel's one zero page, always in cache), and start on a page
//! boundary as the DAT side's do (`pagebuf`; the shm floors' copies ran many times slower
//! from malloc's alignment; the socket's did not: four alternating `datperf --link tcp -k bw`
//! runs, 2026-12-07, raw TCP 0.36-0.55 GB/s at 4 KiB and 1.9-4.4 at 64 KiB either way).
//!
//! CPU time: the client meters its timed loop (`cpu::metered`, the whole process: in a
//! self-contained run the server thread is in it too).
//!
//! Completion mode: the baseline finds its data the way the DAT side of the same measurement
//! finds its completions (`dat::Spec::polls`). Blocking: blocking reads and writes. Polling
//! (flag bit 0, on both sides of the connection, after the header): a non-blocking socket whose
//! reads and writes retry `WouldBlock` in the DAT side's busy-poll loop (`dat::busy_poll`:
//! `sched_yield` between empty polls as its `Pacer` says, a stall check every `CHECK_EVERY` of
//! them). Otherwise a
//! latency ratio would compare a polling wait with a blocking wakeup, whose cost depends on CPU
//! idle states and load rather than on either stack.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::args::{Op, MAX_SIZE};
use crate::cpu;
use crate::dat::{busy_poll, Measured, Sample};
use crate::pagebuf::PageBuf;
use crate::pin;
use crate::suite::{Kind, Measurement};
use anyhow::{bail, Context, Error, Result};

/// The header's magic, which is also its version (`DPR1` had no flags byte).
const MAGIC: [u8; 4] = *b"DPR2";
/// Header flag: both sides busy-poll.
const FLAG_POLL: u8 = 1;
/// Header flag: the writer writes the stream in `WRITE_CHUNK` pieces.
const FLAG_CHUNKED: u8 = 2;
/// The write size of the chunked variant.
pub const WRITE_CHUNK: usize = 128 * 1024;
/// The byte written buffers are filled with.
const FILL: u8 = 0x5a;

/// How the bandwidth baseline's writer writes its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// One `write` per message (latency and message rate always write this way).
    Message,
    /// Each message in writes of at most `WRITE_CHUNK` (only for messages larger than that).
    Chunked,
}

impl Writes {
    /// The name the table and `--json` carry.
    pub fn name(self) -> &'static str {
        match self {
            Writes::Message => "message writes",
            Writes::Chunked => "128KiB writes",
        }
    }
}

/// The ways of writing the baseline of `m` is measured in: both for bandwidth of messages
/// larger than `WRITE_CHUNK`, else one.
pub fn variants(m: &Measurement) -> &'static [Writes] {
    match m.kind {
        Kind::Bw if m.size > WRITE_CHUNK as u64 => &[Writes::Message, Writes::Chunked],
        _ => &[Writes::Message],
    }
}
const HEADER_LEN: usize = 24;
const CHUNK: usize = 256 * 1024;
const QUIT: u8 = 255;
/// How long a blocking read or write, or a polling one seeing nothing, may wait (as the DAT
/// side's stall limit).
const IO_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    op: u8,
    kind: u8,
    /// Busy polling on both sides (else blocking).
    poll: bool,
    /// Chunked writes (bandwidth only).
    chunked: bool,
    size: u64,
    total: u64,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..4].copy_from_slice(&MAGIC);
        b[4] = self.op;
        b[5] = self.kind;
        b[6] = if self.poll { FLAG_POLL } else { 0 } | if self.chunked { FLAG_CHUNKED } else { 0 };
        b[8..16].copy_from_slice(&self.size.to_le_bytes());
        b[16..24].copy_from_slice(&self.total.to_le_bytes());
        b
    }

    fn decode(b: &[u8; HEADER_LEN]) -> io::Result<Header> {
        let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_string());
        if b[..4] != MAGIC {
            return Err(bad(
                "not a datperf baseline header (or one of another datperf version)",
            ));
        }
        if b[6] & !(FLAG_POLL | FLAG_CHUNKED) != 0 || b[7] != 0 {
            return Err(bad(
                "unknown flags in the baseline header (another datperf version?)",
            ));
        }
        let mut u = [0u8; 8];
        u.copy_from_slice(&b[8..16]);
        let size = u64::from_le_bytes(u);
        u.copy_from_slice(&b[16..24]);
        let total = u64::from_le_bytes(u);
        let h = Header {
            op: b[4],
            kind: b[5],
            poll: b[6] & FLAG_POLL != 0,
            chunked: b[6] & FLAG_CHUNKED != 0,
            size,
            total,
        };
        if h.kind != QUIT && (h.op > 2 || h.kind > 2 || size == 0 || size > MAX_SIZE || total == 0)
        {
            return Err(bad("baseline parameters out of range"));
        }
        if h.chunked && h.kind != 1 {
            return Err(bad("chunked writes are for bandwidth only"));
        }
        Ok(h)
    }

    fn of(m: &Measurement, poll: bool, writes: Writes) -> Header {
        Header {
            op: match m.op {
                Op::Send => 0,
                Op::Write => 1,
                Op::Read => 2,
            },
            kind: match m.kind {
                Kind::Lat => 0,
                Kind::Bw => 1,
                Kind::Rate => 2,
            },
            poll,
            chunked: writes == Writes::Chunked,
            size: m.size,
            total: m.warmup + m.iters,
        }
    }

    /// Request and response lengths of a latency round.
    fn round(&self) -> (usize, usize) {
        let size = self.size as usize;
        if self.op == 2 {
            (8, size)
        } else {
            (size, size)
        }
    }
}

/// The baseline server.
pub struct RawServer {
    listener: TcpListener,
}

impl RawServer {
    /// Listens on `addr` (port 0: any free port).
    pub fn bind(addr: SocketAddr) -> Result<RawServer> {
        let listener = TcpListener::bind(addr)
            .with_context(|| format!("listening for the raw TCP baseline on {addr}"))?;
        Ok(RawServer { listener })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.listener.local_addr()?)
    }

    /// Serves baseline connections one at a time, until a client sends the quit header if
    /// `allow_quit`. A failed measurement is reported on stderr and serving goes on.
    pub fn serve(&self, allow_quit: bool) -> Result<()> {
        loop {
            let (s, peer) = match self.listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).with_context(|| "accepting a baseline connection"),
            };
            match serve_one(s) {
                Ok(true) if allow_quit => return Ok(()),
                Ok(_) => {}
                Err(e) => eprintln!(
                    "datperf server: a raw TCP baseline for {} failed: {e:#}",
                    peer.ip()
                ),
            }
        }
    }
}

/// Asks the baseline server at `addr` to stop serving.
pub fn quit(addr: SocketAddr) -> Result<()> {
    let mut s = TcpStream::connect(addr)?;
    let h = Header {
        op: 0,
        kind: QUIT,
        poll: false,
        chunked: false,
        size: 0,
        total: 0,
    };
    s.write_all(&h.encode())?;
    Ok(())
}

/// One baseline connection, blocking or busy-polling.
struct Link {
    s: TcpStream,
    poll: bool,
}

impl Link {
    /// `TCP_NODELAY`, the blocking timeouts, and the completion mode.
    fn new(s: TcpStream, poll: bool) -> io::Result<Link> {
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(IO_TIMEOUT))?;
        s.set_write_timeout(Some(IO_TIMEOUT))?;
        let mut l = Link { s, poll: false };
        l.set_poll(poll)?;
        Ok(l)
    }

    /// Busy polling (a non-blocking socket) or blocking reads and writes.
    fn set_poll(&mut self, poll: bool) -> io::Result<()> {
        self.s.set_nonblocking(poll)?;
        self.poll = poll;
        Ok(())
    }

    /// Runs one `read` or `write`. Polling, `WouldBlock` is retried as the DAT side retries an
    /// empty `evd_dequeue` (`Conn::next_dto`): one more try at once, then `busy_poll`, failing
    /// after `IO_TIMEOUT` without progress.
    fn io<T>(&mut self, mut op: impl FnMut(&mut TcpStream) -> io::Result<T>) -> io::Result<T> {
        let would_block = |e: &io::Error| e.kind() == io::ErrorKind::WouldBlock;
        match op(&mut self.s) {
            Err(e) if self.poll && would_block(&e) => {}
            r => return r,
        }
        let s = &mut self.s;
        busy_poll(
            || match op(s) {
                Ok(v) => Ok(Some(v)),
                Err(e) if would_block(&e) => Ok(None),
                Err(e) => Err(e),
            },
            |start| {
                if start.elapsed() > IO_TIMEOUT {
                    Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "the raw TCP connection made no progress for {} s",
                            IO_TIMEOUT.as_secs()
                        ),
                    ))
                } else {
                    Ok(())
                }
            },
        )
    }
}

impl Read for Link {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.io(|s| s.read(buf))
    }
}

impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.io(|s| s.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.s.flush()
    }
}

/// Reads exactly `n` bytes in chunks into `buf` (contents discarded).
fn drain(s: &mut Link, mut n: u64, buf: &mut [u8]) -> io::Result<()> {
    while n > 0 {
        let want = buf.len().min(usize::try_from(n).unwrap_or(usize::MAX));
        let got = s.read(&mut buf[..want])?;
        if got == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        n -= got as u64;
    }
    Ok(())
}

/// The buffer `write_stream` writes from (made before the timed loop): one message.
fn stream_buf(h: &Header) -> PageBuf {
    PageBuf::new(h.size as usize, FILL)
}

/// Writes the `total` messages of `h` (size `h.size`) from `buf` (`stream_buf`): one
/// `write_all` each, or each in pieces of at most `WRITE_CHUNK`.
fn write_stream(s: &mut Link, h: &Header, buf: &[u8]) -> io::Result<()> {
    let piece = if h.chunked { WRITE_CHUNK } else { buf.len() };
    for _ in 0..h.total {
        for p in buf.chunks(piece.max(1)) {
            s.write_all(p)?;
        }
    }
    Ok(())
}

/// Serves one connection; `Ok(true)` for the quit header.
fn serve_one(s: TcpStream) -> io::Result<bool> {
    // The header is read blocking: it says how to go on.
    let mut s = Link::new(s, false)?;
    let mut hb = [0u8; HEADER_LEN];
    s.read_exact(&mut hb)?;
    let h = Header::decode(&hb)?;
    if h.kind == QUIT {
        return Ok(true);
    }
    s.set_poll(h.poll)?;
    let pinned = pin::pin(pin::Side::Server);
    match (h.kind, h.op) {
        (0, _) => {
            let (req, resp) = h.round();
            let mut inb = PageBuf::new(req, 0);
            let out = PageBuf::new(resp, FILL);
            for _ in 0..h.total {
                s.read_exact(&mut inb)?;
                s.write_all(&out)?;
            }
        }
        (_, 2) => {
            let out = stream_buf(&h);
            let mut go = [0u8; 8];
            s.read_exact(&mut go)?;
            write_stream(&mut s, &h, &out)?;
        }
        _ => {
            let mut buf = PageBuf::new(CHUNK, 0);
            drain(&mut s, h.total * h.size, &mut buf)?;
            s.write_all(&[0u8; 8])?;
        }
    }
    drop(pinned);
    // Wait for the client to close, so its connection ends before the next one starts (blocking:
    // this is not timed).
    s.set_poll(false)?;
    let mut b = [0u8; 1];
    let _ = s.read(&mut b);
    Ok(false)
}

/// Runs the baseline of `m` against the server at `addr`, busy-polling on both sides if `poll`
/// (pass what the DAT side of `m` does, `dat::Client::polls`), else blocking, writing as
/// `writes` says (one of `variants(m)`); with the CPU time of its timed loop (warm-up included).
pub fn measure(addr: SocketAddr, m: &Measurement, poll: bool, writes: Writes) -> Result<Measured> {
    if !variants(m).contains(&writes) {
        bail!(
            "{}: the raw TCP baseline has no {}",
            m.name(),
            writes.name()
        );
    }
    let s = TcpStream::connect(addr)
        .with_context(|| format!("connecting to the raw TCP baseline at {addr}"))?;
    let mut s = Link::new(s, poll)?;
    let h = Header::of(m, poll, writes);
    // The buffers are made before the timed loop, as the DAT side's are.
    let (out, mut inb) = match m.kind {
        Kind::Lat => {
            let (req, resp) = h.round();
            (PageBuf::new(req, FILL), PageBuf::new(resp, 0))
        }
        _ if m.op == Op::Read => (PageBuf::new(0, 0), PageBuf::new(CHUNK, 0)),
        _ => (stream_buf(&h), PageBuf::new(0, 0)),
    };
    let r = s.write_all(&h.encode()).and_then(|()| {
        let _pinned = pin::pin(pin::Side::Client);
        cpu::metered(h.total, h.size, || {
            run_client(&mut s, &h, m, &out, &mut inb)
        })
    });
    let (sample, cpu) = r.map_err(|e| match e.kind() {
        // A server that refuses the header (another datperf version) just closes.
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::BrokenPipe => Error::msg(format!(
            "the baseline server closed the connection ({e}; is it a datperf server of this \
             version?)"
        )),
        _ => e.into(),
    })?;
    if let Sample::Lat(v) = &sample {
        if v.is_empty() {
            bail!("no latency samples");
        }
    }
    Ok(Measured { sample, cpu })
}

/// The client's timed loop (the header is sent), writing from `out` and reading into `inb`.
fn run_client(
    s: &mut Link,
    h: &Header,
    m: &Measurement,
    out: &[u8],
    inb: &mut [u8],
) -> io::Result<Sample> {
    Ok(match m.kind {
        Kind::Lat => {
            let mut v = Vec::with_capacity(m.iters as usize);
            for i in 0..h.total {
                let t0 = Instant::now();
                s.write_all(out)?;
                s.read_exact(inb)?;
                let t = t0.elapsed().as_secs_f64() * 1e6;
                if i >= m.warmup {
                    // Read latency is a full round trip; send and write report half of one.
                    v.push(if m.op == Op::Read { t } else { t / 2.0 });
                }
            }
            Sample::Lat(v)
        }
        Kind::Bw | Kind::Rate if m.op == Op::Read => {
            let t0 = Instant::now();
            s.write_all(&[0u8; 8])?;
            drain(s, h.total * h.size, inb)?;
            Sample::Bw {
                bytes: h.total * h.size,
                msgs: h.total,
                secs: t0.elapsed().as_secs_f64(),
            }
        }
        Kind::Bw | Kind::Rate => {
            let t0 = Instant::now();
            write_stream(s, h, out)?;
            let mut ack = [0u8; 8];
            s.read_exact(&mut ack)?;
            Sample::Bw {
                bytes: h.total * h.size,
                msgs: h.total,
                secs: t0.elapsed().as_secs_f64(),
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_checks() {
        for (poll, chunked) in [(false, false), (true, false), (false, true), (true, true)] {
            let h = Header {
                op: 1,
                kind: 1,
                poll,
                chunked,
                size: 4096,
                total: 99,
            };
            let b = h.encode();
            assert_eq!(&b[..4], b"DPR2");
            assert_eq!((b[6], b[7]), (u8::from(poll) | (2 * u8::from(chunked)), 0));
            assert_eq!(Header::decode(&b).unwrap(), h);
        }
        let h = Header {
            op: 0,
            kind: 0,
            poll: true,
            chunked: false,
            size: 8,
            total: 10,
        };
        let mut b = h.encode();
        b[0] = b'X';
        assert!(Header::decode(&b).is_err());
        // The previous layout (no flags byte) is another version.
        let mut b = h.encode();
        b[..4].copy_from_slice(b"DPR1");
        assert!(Header::decode(&b).is_err());
        let mut b = h.encode();
        b[8..16].copy_from_slice(&0u64.to_le_bytes());
        assert!(Header::decode(&b).is_err());
        // Chunked writes are for bandwidth only.
        let mut b = h.encode();
        b[6] |= FLAG_CHUNKED;
        assert!(Header::decode(&b).is_err());
        for (at, v) in [(6, 4), (6, 0x81), (7, 1)] {
            let mut b = h.encode();
            b[at] = v;
            assert!(Header::decode(&b).is_err(), "byte {at} = {v:#x}");
        }
    }

    #[test]
    fn baseline_runs_over_loopback_in_both_modes() {
        let srv = RawServer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = srv.local_addr().unwrap();
        let t = std::thread::spawn(move || srv.serve(true));
        for poll in [false, true] {
            for (op, kind, size) in [
                (Op::Send, Kind::Lat, 8),
                (Op::Read, Kind::Lat, 8),
                (Op::Write, Kind::Lat, 65536),
                (Op::Write, Kind::Bw, 4096),
                // Enough to fill the socket buffers: polling writes see WouldBlock.
                (Op::Send, Kind::Bw, 1 << 20),
                (Op::Read, Kind::Bw, 1 << 20),
                (Op::Send, Kind::Rate, 8),
            ] {
                let m = Measurement {
                    op,
                    kind,
                    size,
                    iters: 20,
                    warmup: if kind == Kind::Lat { 2 } else { 0 },
                };
                for &w in variants(&m) {
                    let r = measure(addr, &m, poll, w).unwrap();
                    match &r.sample {
                        Sample::Lat(v) => assert_eq!(v.len(), 20),
                        Sample::Bw { bytes, msgs, secs } => {
                            assert_eq!((*bytes, *msgs), (20 * size, 20));
                            assert!(*secs > 0.0);
                        }
                    }
                    let total = m.warmup + m.iters;
                    assert_eq!((r.cpu.ops, r.cpu.bytes), (total, total * size));
                    assert!(r.cpu.secs >= 0.0, "{r:?}");
                }
            }
        }
        quit(addr).unwrap();
        t.join().unwrap().unwrap();
    }

    /// Both ways of writing move exactly the stream's bytes, for messages smaller than a chunk,
    /// of one, and larger (written in pieces).
    #[test]
    fn chunked_writes_move_the_same_bytes() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        for (size, total) in [
            (3000u64, 100u64),
            (WRITE_CHUNK as u64, 3),
            (1 << 20, 3),
            (8, 1000),
        ] {
            for chunked in [false, true] {
                let reader = std::thread::spawn({
                    let l = l.try_clone().unwrap();
                    move || {
                        let (mut s, _) = l.accept().unwrap();
                        let mut v = Vec::new();
                        s.read_to_end(&mut v).unwrap();
                        v
                    }
                });
                let h = Header {
                    op: 0,
                    kind: 1,
                    poll: false,
                    chunked,
                    size,
                    total,
                };
                let mut s = Link::new(TcpStream::connect(addr).unwrap(), false).unwrap();
                let buf = stream_buf(&h);
                assert_eq!(buf.len(), size as usize);
                write_stream(&mut s, &h, &buf).unwrap();
                drop(s);
                let got = reader.join().unwrap();
                assert_eq!(
                    got.len() as u64,
                    size * total,
                    "{size} x {total}, {chunked}"
                );
                assert!(got.iter().all(|&b| b == FILL));
            }
        }
    }

    /// The server learns the mode from the header; a server that refuses the header is
    /// reported as possibly another version.
    #[test]
    fn the_header_carries_the_mode() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let mut flags = Vec::new();
            for _ in 0..2 {
                let (mut s, _) = l.accept().unwrap();
                let mut hb = [0u8; HEADER_LEN];
                s.read_exact(&mut hb).unwrap();
                flags.push(Header::decode(&hb).unwrap().poll);
                // Close without serving, as a server of another version would.
            }
            flags
        });
        let m = Measurement {
            op: Op::Send,
            kind: Kind::Lat,
            size: 8,
            iters: 5,
            warmup: 0,
        };
        assert!(measure(addr, &m, false, Writes::Chunked).is_err());
        for poll in [true, false] {
            let e = measure(addr, &m, poll, Writes::Message)
                .unwrap_err()
                .to_string();
            assert!(e.contains("datperf server of this version"), "{e}");
        }
        assert_eq!(t.join().unwrap(), [true, false]);
    }
}
