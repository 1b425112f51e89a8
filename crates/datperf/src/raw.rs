//! The baseline: the same measurements over plain kernel TCP (`std::net::TcpStream`,
//! `TCP_NODELAY`), with the same thread structure as the DAT side (the client in the calling
//! thread, the server in one thread of its own).
//!
//! Each measurement is one connection. The client sends a 24-byte header (magic `DPR1`, op,
//! kind, two reserved bytes, size u64, total iterations u64; little endian), then:
//! - latency: `total` rounds of request/response (send and write: `size` bytes each way; read:
//!   8 bytes out, `size` bytes back);
//! - send/write bandwidth and message rate: the client writes `total` messages of `size` bytes
//!   (one `write` each), the server reads them in chunks of up to 256 KiB (the tcp link's
//!   staging buffer size) and answers with 8 bytes when it has them all;
//! - read bandwidth: the client sends an 8-byte request, the server writes `total` messages of
//!   `size` bytes, the client reads them in chunks of up to 256 KiB.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::args::{Op, MAX_SIZE};
use crate::dat::Sample;
use crate::error::{bail, Context, Result};
use crate::suite::{Kind, Measurement};

const MAGIC: [u8; 4] = *b"DPR1";
const HEADER_LEN: usize = 24;
const CHUNK: usize = 256 * 1024;
const QUIT: u8 = 255;
const IO_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    op: u8,
    kind: u8,
    size: u64,
    total: u64,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..4].copy_from_slice(&MAGIC);
        b[4] = self.op;
        b[5] = self.kind;
        b[8..16].copy_from_slice(&self.size.to_le_bytes());
        b[16..24].copy_from_slice(&self.total.to_le_bytes());
        b
    }

    fn decode(b: &[u8; HEADER_LEN]) -> io::Result<Header> {
        let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, m.to_string());
        if b[..4] != MAGIC {
            return Err(bad("not a datperf baseline header"));
        }
        let mut u = [0u8; 8];
        u.copy_from_slice(&b[8..16]);
        let size = u64::from_le_bytes(u);
        u.copy_from_slice(&b[16..24]);
        let total = u64::from_le_bytes(u);
        let h = Header {
            op: b[4],
            kind: b[5],
            size,
            total,
        };
        if h.kind != QUIT && (h.op > 2 || h.kind > 2 || size == 0 || size > MAX_SIZE || total == 0)
        {
            return Err(bad("baseline parameters out of range"));
        }
        Ok(h)
    }

    fn of(m: &Measurement) -> Header {
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
        let listener =
            TcpListener::bind(addr).ctx(format!("listening for the raw TCP baseline on {addr}"))?;
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
                Err(e) => return Err(e).ctx("accepting a baseline connection"),
            };
            match serve_one(s) {
                Ok(true) if allow_quit => return Ok(()),
                Ok(_) => {}
                Err(e) => eprintln!(
                    "datperf server: a raw TCP baseline for {} failed: {e}",
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
        size: 0,
        total: 0,
    };
    s.write_all(&h.encode())?;
    Ok(())
}

fn tune(s: &TcpStream) -> io::Result<()> {
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(IO_TIMEOUT))?;
    s.set_write_timeout(Some(IO_TIMEOUT))
}

/// Reads exactly `n` bytes in chunks into `buf` (contents discarded).
fn drain(s: &mut TcpStream, mut n: u64, buf: &mut [u8]) -> io::Result<()> {
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
fn serve_one(mut s: TcpStream) -> io::Result<bool> {
    tune(&s)?;
    let mut hb = [0u8; HEADER_LEN];
    s.read_exact(&mut hb)?;
    let h = Header::decode(&hb)?;
    if h.kind == QUIT {
        return Ok(true);
    }
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
    // Wait for the client to close, so its connection ends before the next one starts.
    let mut b = [0u8; 1];
    let _ = s.read(&mut b);
    Ok(false)
}

/// Runs the baseline of `m` against the server at `addr`.
pub fn measure(addr: SocketAddr, m: &Measurement) -> Result<Sample> {
    let mut s =
        TcpStream::connect(addr).ctx(format!("connecting to the raw TCP baseline at {addr}"))?;
    tune(&s)?;
    let h = Header::of(m);
    s.write_all(&h.encode())?;
    let size = m.size as usize;
    let sample = match m.kind {
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
            drain(&mut s, h.total * h.size, &mut buf)?;
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
    };
    if let Sample::Lat(v) = &sample {
        if v.is_empty() {
            bail!("no latency samples");
        }
    }
    Ok(sample)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_checks() {
        let h = Header {
            op: 1,
            kind: 1,
            size: 4096,
            total: 99,
        };
        assert_eq!(Header::decode(&h.encode()).unwrap(), h);
        let mut b = h.encode();
        b[0] = b'X';
        assert!(Header::decode(&b).is_err());
        let mut b = h.encode();
        b[8..16].copy_from_slice(&0u64.to_le_bytes());
        assert!(Header::decode(&b).is_err());
    }

    #[test]
    fn baseline_runs_over_loopback() {
        let srv = RawServer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = srv.local_addr().unwrap();
        let t = std::thread::spawn(move || srv.serve(true));
        for (op, kind, size) in [
            (Op::Send, Kind::Lat, 8),
            (Op::Read, Kind::Lat, 8),
            (Op::Write, Kind::Bw, 4096),
            (Op::Read, Kind::Bw, 65536),
            (Op::Send, Kind::Rate, 8),
        ] {
            let m = Measurement {
                op,
                kind,
                size,
                iters: 20,
                warmup: if kind == Kind::Lat { 2 } else { 0 },
            };
            match measure(addr, &m).unwrap() {
                Sample::Lat(v) => assert_eq!(v.len(), 20),
                Sample::Bw { bytes, msgs, secs } => {
                    assert_eq!((bytes, msgs), (20 * size, 20));
                    assert!(secs > 0.0);
                }
            }
        }
        quit(addr).unwrap();
        t.join().unwrap().unwrap();
    }
}
