//! The baseline: the same measurements over plain kernel TCP (`std::net::TcpStream`,
//! `TCP_NODELAY`), with the same thread structure as the DAT side (the client in the calling
//! thread, the server in one thread of its own).
//!
//! Each measurement is one connection. The client sends a 24-byte header (little endian):
//! magic `DPR2`, op (0 send, 1 write, 2 read), kind (0 latency, 1 bandwidth, 2 message rate),
//! flags (bit 0: busy polling, as `dat::Spec::polls`), a reserved byte (0), size u64, total
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
//! Completion mode: the baseline finds its data the way the DAT side of the same measurement
//! finds its completions (`dat::Spec::polls`). Blocking: blocking reads and writes. Polling
//! (flag bit 0, on both sides of the connection, after the header): a non-blocking socket whose
//! reads and writes retry `WouldBlock` in the DAT side's busy-poll loop (`dat::busy_poll`:
//! `sched_yield` between empty polls, a stall check every `CHECK_EVERY` of them). Otherwise a
//! latency ratio would compare a polling wait with a blocking wakeup, whose cost depends on CPU
//! idle states and load rather than on either stack.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::args::{Op, MAX_SIZE};
use crate::dat::{busy_poll, Sample};
use crate::suite::{Kind, Measurement};
use anyhow::{bail, Context, Error, Result};

/// The header's magic, which is also its version (`DPR1` had no flags byte).
const MAGIC: [u8; 4] = *b"DPR2";
/// Header flag: both sides busy-poll.
const FLAG_POLL: u8 = 1;
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
    size: u64,
    total: u64,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..4].copy_from_slice(&MAGIC);
        b[4] = self.op;
        b[5] = self.kind;
        b[6] = if self.poll { FLAG_POLL } else { 0 };
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
        if b[6] & !FLAG_POLL != 0 || b[7] != 0 {
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
            size,
            total,
        };
        if h.kind != QUIT && (h.op > 2 || h.kind > 2 || size == 0 || size > MAX_SIZE || total == 0)
        {
            return Err(bad("baseline parameters out of range"));
        }
        Ok(h)
    }

    fn of(m: &Measurement, poll: bool) -> Header {
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
    let size = h.size as usize;
    match (h.kind, h.op) {
        (0, _) => {
            let (req, resp) = h.round();
            let mut inb = vec![0u8; req];
            let out = vec![0u8; resp];
            for _ in 0..h.total {
                s.read_exact(&mut inb)?;
                s.write_all(&out)?;
            }
        }
        (_, 2) => {
            let mut go = [0u8; 8];
            s.read_exact(&mut go)?;
            let out = vec![0u8; size];
            for _ in 0..h.total {
                s.write_all(&out)?;
            }
        }
        _ => {
            let mut buf = vec![0u8; CHUNK];
            drain(&mut s, h.total * h.size, &mut buf)?;
            s.write_all(&[0u8; 8])?;
        }
    }
    // Wait for the client to close, so its connection ends before the next one starts (blocking:
    // this is not timed).
    s.set_poll(false)?;
    let mut b = [0u8; 1];
    let _ = s.read(&mut b);
    Ok(false)
}

/// Runs the baseline of `m` against the server at `addr`, busy-polling on both sides if `poll`
/// (pass what the DAT side of `m` does, `dat::Client::polls`), else blocking.
pub fn measure(addr: SocketAddr, m: &Measurement, poll: bool) -> Result<Sample> {
    let s = TcpStream::connect(addr)
        .with_context(|| format!("connecting to the raw TCP baseline at {addr}"))?;
    let mut s = Link::new(s, poll)?;
    let h = Header::of(m, poll);
    let sample = run_client(&mut s, &h, m).map_err(|e| match e.kind() {
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
    Ok(sample)
}

fn run_client(s: &mut Link, h: &Header, m: &Measurement) -> io::Result<Sample> {
    s.write_all(&h.encode())?;
    let size = m.size as usize;
    Ok(match m.kind {
        Kind::Lat => {
            let (req, resp) = h.round();
            let out = vec![0u8; req];
            let mut inb = vec![0u8; resp];
            let mut v = Vec::with_capacity(m.iters as usize);
            for i in 0..h.total {
                let t0 = Instant::now();
                s.write_all(&out)?;
                s.read_exact(&mut inb)?;
                let t = t0.elapsed().as_secs_f64() * 1e6;
                if i >= m.warmup {
                    // Read latency is a full round trip; send and write report half of one.
                    v.push(if m.op == Op::Read { t } else { t / 2.0 });
                }
            }
            Sample::Lat(v)
        }
        Kind::Bw | Kind::Rate if m.op == Op::Read => {
            let mut buf = vec![0u8; CHUNK];
            let t0 = Instant::now();
            s.write_all(&[0u8; 8])?;
            drain(s, h.total * h.size, &mut buf)?;
            Sample::Bw {
                bytes: h.total * h.size,
                msgs: h.total,
                secs: t0.elapsed().as_secs_f64(),
            }
        }
        Kind::Bw | Kind::Rate => {
            let out = vec![0u8; size];
            let t0 = Instant::now();
            for _ in 0..h.total {
                s.write_all(&out)?;
            }
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
        for poll in [false, true] {
            let h = Header {
                op: 1,
                kind: 1,
                poll,
                size: 4096,
                total: 99,
            };
            let b = h.encode();
            assert_eq!(&b[..4], b"DPR2");
            assert_eq!((b[6], b[7]), (u8::from(poll), 0));
            assert_eq!(Header::decode(&b).unwrap(), h);
        }
        let h = Header {
            op: 0,
            kind: 0,
            poll: true,
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
        for (at, v) in [(6, 2), (6, 0x81), (7, 1)] {
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
                match measure(addr, &m, poll).unwrap() {
                    Sample::Lat(v) => assert_eq!(v.len(), 20),
                    Sample::Bw { bytes, msgs, secs } => {
                        assert_eq!((bytes, msgs), (20 * size, 20));
                        assert!(secs > 0.0);
                    }
                }
            }
        }
        quit(addr).unwrap();
        t.join().unwrap().unwrap();
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
        for poll in [true, false] {
            let e = measure(addr, &m, poll).unwrap_err().to_string();
            assert!(e.contains("datperf server of this version"), "{e}");
        }
        assert_eq!(t.join().unwrap(), [true, false]);
    }
}
