//! Codec-level interop probe against Linux siw's `rping` (librdmacm examples/rping.c).
//!
//! Uses only the `iwarp` crate and `std` (blocking sockets). Two roles:
//!
//! * client (default): connect to a guest `rping -s` (default `127.0.0.1:17000`), send an
//!   MPA rev 2 Request (IRD = ORD = 1, no private data, like rping over rdma_cm), then run
//!   rping's client loop: Send our source buffer info, serve the server's RDMA Read
//!   Request with Read Response segments, Send our sink buffer info, take the server's
//!   RDMA Write, wait for its "go ahead" Send, compare the buffers.
//! * `--server PORT`: listen on `127.0.0.1:PORT` for a guest `rping -c` (through the VM's
//!   guest->host forward), answer its MPA Request and run rping's server loop: RDMA Read
//!   the client's buffer, Send "go ahead", RDMA Write it back, Send "go ahead", until the
//!   client closes the connection.
//!
//! The last line is `PROBE PASS ...` or `PROBE FAIL ...` (exit status 0 / 1).
//! Message layout and sequence: `docs/interop-siw.md`.
//!
//! ```text
//! cargo run -p iwarp --example siw_rping_probe -- [--crc] [-C N] [-S SIZE] [-v] [HOST:PORT]
//! cargo run -p iwarp --example siw_rping_probe -- --server PORT [--crc] [-C N] [-S SIZE] [-v]
//! ```

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use iwarp::ddp::Queue;
use iwarp::mpa::{
    InitiatorConfig, InitiatorEvent, IrdOrd, Negotiated, ResponderConfig, ResponderEvent, Rtr,
    RtrSet,
};
use iwarp::rdmap::ReadRequest;
use iwarp::segment::{
    mulpdu_for_emss, MsnSequence, OutboundMessage, Segmenter, TaggedReassembly, UntaggedReassembly,
};
use iwarp::terminate::RdmapErrorCode;
use iwarp::{FpduDecoder, FpduEncoder, MpaInitiator, MpaResponder, Segment, TerminateCause};

/// `struct rping_rdma_info { __be64 buf; __be32 rkey; __be32 size; }`
const INFO_LEN: usize = 16;
/// rping's `RPING_MIN_BUFSIZE`: `sizeof(stringify(INT_MAX)) + sizeof("rdma-ping-%d: ")`.
/// INT_MAX is not defined there, so it is sizeof("INT_MAX") + 15 = 23.
const MIN_SIZE: usize = 23;
/// rping's `RPING_BUFSIZE - 1`.
const MAX_SIZE: usize = 64 * 1024 - 1;
/// IRD and ORD rping asks for (`responder_resources = initiator_depth = 1`).
const RPING_DEPTH: u16 = 1;
/// siw's device limit for IRD/ORD.
const SIW_MAX_DEPTH: u16 = 128;

type Res<T> = Result<T, String>;

fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

// ------------------------------------------------------------------ options

struct Opts {
    server_port: Option<u16>,
    target: String,
    crc: bool,
    count: u32,
    size: usize,
    emss: usize,
    verbose: bool,
    timeout: Duration,
    /// Client: RFC 6581 peer-to-peer mode offering these RTR types.
    p2p: Option<RtrSet>,
    /// Client: bytes of ULP private data in the MPA Request (rping sends none).
    pd_len: usize,
    /// Client: IRD / ORD in the MPA Request (rping: 1 / 1).
    ird: u16,
    ord: u16,
    /// Client: instead of pinging, RDMA Read an invalid STag and expect siw's Terminate.
    provoke_terminate: bool,
}

fn usage() -> String {
    "usage: siw_rping_probe [--crc] [--p2p write|read|write,read] [--pd N]\n\
     \x20                      [--provoke-terminate] [--ird N] [--ord N] [-C COUNT] [-S SIZE] [--emss N]\n\
     \x20                      [-t SECS] [-v] [HOST:PORT]\n\
     \x20      siw_rping_probe --server PORT [--crc] [-C COUNT] [-S SIZE] [--emss N] [-t SECS] [-v]\n\
     client: act as `rping -c` against HOST:PORT (default 127.0.0.1:17000)\n\
     --server PORT: act as `rping -s` on 127.0.0.1:PORT; pass when COUNT iterations ran\n\
     --crc: ask for MPA CRC (client) / require it (server); otherwise follow the peer\n\
     --p2p: client offers RFC 6581 peer-to-peer mode with these RTRs and sends the chosen\n\
     one first (the server side always honours the RTR the guest negotiates)\n\
     --ird N, --ord N: client's IRD / ORD in the Request (default 1 / 1, as rping)\n\
     --pd N: client puts N bytes (0x01, 0x02, ...) of private data in the Request (max 252)\n\
     --provoke-terminate: client sends an RDMA Read Request for an invalid STag instead of\n\
     pinging; passes if siw answers with Terminate RDMAP/1/0x00 (remote protection, invalid STag)\n\
     -C COUNT (default 3), -S SIZE ping bytes (default 64, 23..65535; a guest rping -s\n\
     must have -S >= SIZE), --emss N (default 1420 = 1460 - 40: MULPDU = N - 6 - N%4),\n\
     -t SECS receive / accept timeout (default 30)"
        .to_string()
}

fn parse_opts() -> Res<Opts> {
    parse_args().map_err(|e| e.to_string())
}

fn parse_args() -> Result<Opts, lexopt::Error> {
    use lexopt::prelude::*;
    let mut o = Opts {
        server_port: None,
        target: "127.0.0.1:17000".into(),
        crc: false,
        count: 3,
        size: 64,
        emss: 1460 - 40,
        verbose: false,
        timeout: Duration::from_secs(30),
        p2p: None,
        pd_len: 0,
        provoke_terminate: false,
        ird: RPING_DEPTH,
        ord: RPING_DEPTH,
    };
    let mut args = lexopt::Parser::from_env();
    while let Some(arg) = args.next()? {
        match arg {
            Long("server") => o.server_port = Some(args.value()?.parse()?),
            Long("crc") => o.crc = true,
            Short('C') => o.count = args.value()?.parse()?,
            Short('S') => o.size = args.value()?.parse()?,
            Long("emss") => o.emss = args.value()?.parse()?,
            Short('t') => o.timeout = Duration::from_secs(args.value()?.parse()?),
            Short('v') => o.verbose = true,
            Long("provoke-terminate") => o.provoke_terminate = true,
            Long("ird") => o.ird = args.value()?.parse()?,
            Long("ord") => o.ord = args.value()?.parse()?,
            Long("pd") => o.pd_len = args.value()?.parse()?,
            Long("p2p") => {
                let mut set = RtrSet::NONE;
                for t in args.value()?.string()?.split(',') {
                    set |= match t {
                        "write" => RtrSet::WRITE,
                        "read" => RtrSet::READ,
                        "send" => RtrSet::SEND,
                        _ => return Err(format!("--p2p: unknown RTR type {t}").into()),
                    };
                }
                o.p2p = Some(set);
            }
            Short('h') | Long("help") => return Err(usage().into()),
            Value(t) => o.target = t.string()?,
            _ => return Err(format!("{}\n{}", arg.unexpected(), usage()).into()),
        }
    }
    if !(MIN_SIZE..=MAX_SIZE).contains(&o.size) {
        return Err(format!("-S must be {MIN_SIZE}..={MAX_SIZE}").into());
    }
    if o.count == 0 {
        return Err("-C must be at least 1".into());
    }
    Ok(o)
}

// ------------------------------------------------------------------ memory

/// A registered buffer: what rping's `ibv_reg_mr` gives (an STag and a virtual address).
struct Region {
    name: &'static str,
    stag: u32,
    base: u64,
    buf: Vec<u8>,
}

impl Region {
    fn new(name: &'static str, stag: u32, base: u64, len: usize) -> Self {
        Region {
            name,
            stag,
            base,
            buf: vec![0; len],
        }
    }

    /// The byte range `[to, to + len)` of this region, checked like an RNIC would.
    fn range(&self, stag: u32, to: u64, len: usize) -> Res<std::ops::Range<usize>> {
        if stag != self.stag {
            return Err(format!(
                "{}: STag {stag:#010x}, expected {:#010x}",
                self.name, self.stag
            ));
        }
        let start = to
            .checked_sub(self.base)
            .and_then(|o| usize::try_from(o).ok())
            .filter(|&o| o.checked_add(len).is_some_and(|e| e <= self.buf.len()))
            .ok_or(format!(
                "{}: TO {to:#x} + {len} outside [{:#x}, +{})",
                self.name,
                self.base,
                self.buf.len()
            ))?;
        Ok(start..start + len)
    }

    fn info(&self, size: usize) -> [u8; INFO_LEN] {
        encode_info(self.base, self.stag, size as u32)
    }
}

fn encode_info(addr: u64, rkey: u32, size: u32) -> [u8; INFO_LEN] {
    let mut b = [0u8; INFO_LEN];
    b[0..8].copy_from_slice(&addr.to_be_bytes());
    b[8..12].copy_from_slice(&rkey.to_be_bytes());
    b[12..16].copy_from_slice(&size.to_be_bytes());
    b
}

fn decode_info(b: &[u8]) -> (u64, u32, u32) {
    let addr = u64::from_be_bytes(b[0..8].try_into().expect("8 bytes"));
    let rkey = u32::from_be_bytes(b[8..12].try_into().expect("4 bytes"));
    let size = u32::from_be_bytes(b[12..16].try_into().expect("4 bytes"));
    (addr, rkey, size)
}

/// rping_test_client's ping data: "rdma-ping-N: " then letters 'A'..='z' cycling from
/// `start`, NUL in the last byte.
fn fill_ping(buf: &mut [u8], ping: u32, start: u8) {
    let head = format!("rdma-ping-{ping}: ");
    let n = head.len().min(buf.len() - 1);
    buf[..n].copy_from_slice(&head.as_bytes()[..n]);
    let mut c = start;
    for b in &mut buf[n..] {
        *b = c;
        c = if c >= 122 { 65 } else { c + 1 };
    }
    let last = buf.len() - 1;
    buf[last] = 0;
}

fn c_str(buf: &[u8]) -> &str {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    std::str::from_utf8(&buf[..end]).unwrap_or("<not utf-8>")
}

// ------------------------------------------------------------------ connection

/// What the receive path hands up: whole Sends, single tagged segments, Read Requests.
enum Rx {
    Send(Vec<u8>),
    ReadRequest(ReadRequest),
    Write {
        stag: u32,
        to: u64,
        last: bool,
        payload: Vec<u8>,
    },
    ReadResponse {
        stag: u32,
        to: u64,
        last: bool,
        payload: Vec<u8>,
    },
    Eof,
}

#[derive(Default)]
struct Stats {
    fpdus_tx: usize,
    fpdus_rx: usize,
    max_ulpdu_rx: usize,
    /// Payload sizes of the tagged segments of the last inbound tagged message.
    last_tagged_segments: Vec<usize>,
}

struct Conn {
    sock: TcpStream,
    enc: FpduEncoder,
    dec: FpduDecoder,
    untagged: UntaggedReassembly,
    tagged: TaggedReassembly,
    msn: MsnSequence,
    mulpdu: usize,
    /// Bytes of the Send being reassembled (MO order is checked by `untagged`).
    send_acc: Vec<u8>,
    /// Size of the one posted receive buffer (rping posts `sizeof(struct rping_rdma_info)`).
    recv_len: usize,
    tagged_open: bool,
    stats: Stats,
    verbose: bool,
}

impl Conn {
    fn new(sock: TcpStream, crc: bool, leftover: &[u8], mulpdu: usize, verbose: bool) -> Self {
        let mut dec = FpduDecoder::new(crc);
        dec.feed(leftover);
        Conn {
            sock,
            enc: FpduEncoder::new(crc),
            dec,
            untagged: UntaggedReassembly::new(),
            tagged: TaggedReassembly::new(),
            msn: MsnSequence::new(),
            mulpdu,
            send_acc: Vec::new(),
            recv_len: INFO_LEN,
            tagged_open: false,
            stats: Stats::default(),
            verbose,
        }
    }

    fn write_segment(&mut self, seg: &Segment<'_>) -> Res<()> {
        let mut fpdu = Vec::with_capacity(seg.ulpdu_len() + 12);
        self.enc
            .encode_segment(seg, &mut fpdu)
            .map_err(err("encode FPDU"))?;
        // One write per FPDU (TCP_NODELAY is on), as siw does.
        self.sock.write_all(&fpdu).map_err(err("TCP write"))?;
        self.stats.fpdus_tx += 1;
        Ok(())
    }

    fn send_message(&mut self, message: OutboundMessage, payload: &[u8]) -> Res<()> {
        let segs = Segmenter::new(message, payload, self.mulpdu).map_err(err("segment"))?;
        for seg in segs {
            self.write_segment(&seg)?;
        }
        Ok(())
    }

    fn send(&mut self, payload: &[u8]) -> Res<()> {
        let msn = self.msn.next(Queue::Send);
        self.send_message(
            OutboundMessage::Send {
                msn,
                solicited: false,
                invalidate_stag: None,
            },
            payload,
        )
    }

    fn read_request(&mut self, request: ReadRequest) -> Res<()> {
        let msn = self.msn.next(Queue::ReadRequest);
        self.write_segment(&Segment::ReadRequest { msn, request })
    }

    /// The next thing from the peer. EOF is only clean at an FPDU boundary with no
    /// message half received.
    fn recv(&mut self) -> Res<Rx> {
        loop {
            let ulpdu = match self.dec.next_ulpdu() {
                Ok(Some(u)) => u,
                Ok(None) => {
                    let mut buf = [0u8; 65536];
                    let n = match self.sock.read(&mut buf) {
                        Ok(n) => n,
                        Err(e)
                            if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                        {
                            return Err("timed out waiting for the peer".into())
                        }
                        Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                            return Err("connection reset by the peer".into())
                        }
                        Err(e) => return Err(format!("TCP read: {e}")),
                    };
                    if n == 0 {
                        if !self.dec.is_at_boundary() {
                            return Err(format!(
                                "EOF inside an FPDU ({} bytes buffered)",
                                self.dec.buffered_len()
                            ));
                        }
                        if !self.send_acc.is_empty() || self.tagged_open {
                            return Err("EOF inside a message".into());
                        }
                        return Ok(Rx::Eof);
                    }
                    self.dec.feed(&buf[..n]);
                    continue;
                }
                Err(e) => return Err(format!("FPDU: {e}")),
            };
            self.stats.fpdus_rx += 1;
            if self.verbose && ulpdu.get(1).is_some_and(|c| c & 0x0F == 7) {
                println!("rx Terminate ULPDU {}", hex(ulpdu));
            }
            self.stats.max_ulpdu_rx = self.stats.max_ulpdu_rx.max(ulpdu.len());
            let seg = Segment::parse(ulpdu).map_err(|e| {
                format!(
                    "segment: {e} (ULPDU {})",
                    hex(&ulpdu[..ulpdu.len().min(48)])
                )
            })?;
            self.untagged
                .check(&seg)
                .map_err(|e| format!("untagged order: {e}"))?;
            let tagged_done = self
                .tagged
                .check(&seg)
                .map_err(|e| format!("tagged order: {e}"))?;
            if let Some(done) = tagged_done {
                if !self.tagged_open {
                    self.stats.last_tagged_segments.clear();
                }
                self.stats.last_tagged_segments.push(seg.payload().len());
                self.tagged_open = !done;
            }
            match seg {
                Segment::Send {
                    last,
                    payload,
                    solicited: _,
                    invalidate_stag,
                    ..
                } => {
                    if invalidate_stag.is_some() {
                        return Err("unexpected Send with Invalidate".into());
                    }
                    if self.send_acc.len() + payload.len() > self.recv_len {
                        return Err(format!(
                            "Send longer than the {}-byte receive buffer",
                            self.recv_len
                        ));
                    }
                    self.send_acc.extend_from_slice(payload);
                    if last {
                        return Ok(Rx::Send(std::mem::take(&mut self.send_acc)));
                    }
                }
                Segment::ReadRequest { request, .. } => return Ok(Rx::ReadRequest(request)),
                Segment::ImmediateData { .. } => {
                    // siw implements no RFC 7306: it never sends this.
                    return Err("unexpected RFC 7306 Immediate Data".into());
                }
                Segment::Write {
                    last,
                    stag,
                    to,
                    payload,
                } => {
                    return Ok(Rx::Write {
                        stag,
                        to,
                        last,
                        payload: payload.to_vec(),
                    })
                }
                Segment::ReadResponse {
                    last,
                    stag,
                    to,
                    payload,
                } => {
                    return Ok(Rx::ReadResponse {
                        stag,
                        to,
                        last,
                        payload: payload.to_vec(),
                    })
                }
                Segment::Terminate { message, .. } => {
                    let copied = message.ddp.map_or(String::new(), |d| {
                        format!(
                            " (segment length {:?}, failed DDP header {})",
                            d.segment_length,
                            hex(d.header)
                        )
                    });
                    let rdmap = message
                        .rdmap_header
                        .map_or(String::new(), |h| format!(", RDMAP header {}", hex(h)));
                    return Err(format!(
                        "peer sent Terminate: {}{copied}{rdmap}",
                        message.cause
                    ));
                }
            }
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn describe(n: &Negotiated) -> String {
    let peer = |p: &IrdOrd| {
        format!(
            "peer IRD={} ORD={} p2p={} rtr={:?}",
            p.ird, p.ord, p.peer_to_peer, p.rtr
        )
    };
    format!(
        "rev={} crc={} IRD={} ORD={} rtr={:?} {}",
        n.revision,
        if n.crc { "on" } else { "off" },
        n.ird,
        n.ord,
        n.rtr,
        n.peer.as_ref().map_or("no IRD/ORD block".into(), peer)
    )
}

fn read_some(sock: &mut TcpStream, what: &str) -> Res<Vec<u8>> {
    let mut buf = [0u8; 4096];
    match sock.read(&mut buf) {
        Ok(0) => Err(format!("EOF while waiting for {what}")),
        Ok(n) => Ok(buf[..n].to_vec()),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            Err(format!("timed out waiting for {what}"))
        }
        Err(e) => Err(format!("TCP read ({what}): {e}")),
    }
}

// ------------------------------------------------------------------ client

fn run_client(o: &Opts) -> Res<String> {
    let mulpdu = mulpdu_for_emss(o.emss);
    let mut sock = TcpStream::connect(&o.target).map_err(err("connect"))?;
    sock.set_nodelay(true).map_err(err("TCP_NODELAY"))?;
    sock.set_read_timeout(Some(o.timeout))
        .map_err(err("SO_RCVTIMEO"))?;
    println!("connected to {} (MULPDU {mulpdu})", o.target);

    let config = InitiatorConfig {
        crc: o.crc,
        enhanced: true,
        ird: o.ird,
        ord: o.ord,
        peer_to_peer: o.p2p,
    };
    let pd: Vec<u8> = (1..=o.pd_len).map(|i| i as u8).collect();
    let mut mpa = MpaInitiator::new(config, &pd).map_err(err("MPA Request"))?;
    if o.verbose {
        println!("MPA Request: {}", hex(mpa.request()));
    }
    sock.write_all(mpa.request())
        .map_err(err("send MPA Request"))?;
    let accepted = loop {
        let data = read_some(&mut sock, "the MPA Reply")?;
        match mpa.feed(&data).map_err(err("MPA Reply"))? {
            None => {}
            Some(InitiatorEvent::Accepted(a)) => break a,
            Some(InitiatorEvent::Rejected { private_data }) => {
                return Err(format!("MPA rejected, private data {}", hex(&private_data)))
            }
        }
    };
    let n = accepted.negotiated;
    println!(
        "MPA Reply: {} pd={} leftover={}",
        describe(&n),
        hex(&accepted.private_data),
        accepted.leftover.len()
    );
    if n.crc != o.crc {
        return Err(format!("negotiated CRC {} but asked {}", n.crc, o.crc));
    }
    let mut conn = Conn::new(sock, n.crc, &accepted.leftover, mulpdu, o.verbose);
    if let Some(rtr) = n.rtr {
        // Peer-to-peer mode: the chosen RTR is our first FPDU.
        let seg = match rtr {
            Rtr::Write => rtr.segment(0),
            Rtr::Read => rtr.segment(conn.msn.next(Queue::ReadRequest)),
            Rtr::Send => rtr.segment(conn.msn.next(Queue::Send)),
        };
        conn.write_segment(&seg)?;
        if rtr == Rtr::Read {
            // The zero-length Read Response comes back to the RTR STag at TO 0.
            match conn.recv()? {
                Rx::ReadResponse {
                    stag,
                    to,
                    last: true,
                    payload,
                } if payload.is_empty() && stag == iwarp::rdmap::RTR_STAG && to == 0 => {}
                _ => return Err("no zero-length Read Response to the Read RTR".into()),
            }
        }
        println!("sent the {rtr:?} RTR");
    }

    if o.provoke_terminate {
        return provoke_terminate(conn, o);
    }

    // rping_setup_buffers: start_buf (read source) and rdma_buf (write sink), both
    // registered for remote read and write. siw-like STags (index << 8 | key).
    let mut start = Region::new("start_buf", 0x0000_4a01, 0x7f3e_a000_1000, o.size);
    let mut sink = Region::new("rdma_buf", 0x0000_4b02, 0x7f3e_b000_2000, o.size);
    let mut letter = 65u8;
    for ping in 0..o.count {
        fill_ping(&mut start.buf, ping, letter);
        letter = if letter >= 122 { 65 } else { letter + 1 };
        sink.buf.fill(0);

        // 1. our source buffer: the server RDMA Reads it, then Sends "go ahead".
        conn.send(&start.info(o.size))?;
        let mut reads = 0;
        loop {
            match conn.recv()? {
                Rx::ReadRequest(rr) => {
                    if o.verbose {
                        println!(
                            "rx Read Request: sink {:#x}/{:#x} size {} source {:#x}/{:#x}",
                            rr.sink_stag, rr.sink_to, rr.size, rr.source_stag, rr.source_to
                        );
                    }
                    if reads > 0 {
                        return Err("more than one Read Request per ping".into());
                    }
                    if rr.sink_stag == 0 {
                        return Err("Read Request with sink STag 0".into());
                    }
                    let r = start.range(rr.source_stag, rr.source_to, rr.size as usize)?;
                    if rr.size as usize != o.size {
                        return Err(format!("Read of {} bytes, advertised {}", rr.size, o.size));
                    }
                    let data = start.buf[r].to_vec();
                    conn.send_message(
                        OutboundMessage::ReadResponse {
                            stag: rr.sink_stag,
                            to: rr.sink_to,
                        },
                        &data,
                    )?;
                    reads += 1;
                }
                Rx::Send(m) if m.len() == INFO_LEN => {
                    if o.verbose {
                        println!("rx Send (go ahead): {}", hex(&m));
                    }
                    break;
                }
                Rx::Send(m) => return Err(format!("bogus Send of {} bytes", m.len())),
                Rx::Eof => return Err(format!("ping {ping}: peer closed (read phase)")),
                _ => {
                    return Err(format!(
                        "ping {ping}: unexpected tagged message (read phase)"
                    ))
                }
            }
        }
        if reads != 1 {
            return Err(format!("ping {ping}: go-ahead Send before the RDMA Read"));
        }

        // 2. our sink buffer: the server RDMA Writes the data back, then Sends "go ahead".
        conn.send(&sink.info(o.size))?;
        let mut written = 0usize;
        let mut write_done = false;
        loop {
            match conn.recv()? {
                Rx::Write {
                    stag,
                    to,
                    last,
                    payload,
                } => {
                    let r = sink.range(stag, to, payload.len())?;
                    sink.buf[r].copy_from_slice(&payload);
                    written += payload.len();
                    write_done = last;
                }
                Rx::Send(m) if m.len() == INFO_LEN => break,
                Rx::Send(m) => return Err(format!("bogus Send of {} bytes", m.len())),
                Rx::Eof => return Err(format!("ping {ping}: peer closed (write phase)")),
                _ => return Err(format!("ping {ping}: unexpected message (write phase)")),
            }
        }
        if !write_done || written != o.size {
            return Err(format!(
                "ping {ping}: RDMA Write of {written} bytes (complete={write_done}), expected {}",
                o.size
            ));
        }
        if sink.buf != start.buf {
            return Err(format!("ping {ping}: data mismatch"));
        }
        if o.verbose {
            println!(
                "ping data: {} (write segments {:?})",
                c_str(&sink.buf),
                conn.stats.last_tagged_segments
            );
        }
    }
    // rdma_disconnect: siw closes its side when it sees our FIN.
    conn.sock
        .shutdown(Shutdown::Write)
        .map_err(err("shutdown"))?;
    let t0 = Instant::now();
    match conn.recv() {
        Ok(Rx::Eof) => println!("peer closed after {:?}", t0.elapsed()),
        Ok(_) => return Err("data from the peer after our disconnect".into()),
        Err(e) => return Err(format!("after disconnect: {e}")),
    }
    let s = &conn.stats;
    Ok(format!(
        "client {} crc={} pings={} size={} mulpdu={mulpdu} fpdus_tx={} fpdus_rx={} max_ulpdu_rx={}",
        o.target,
        if n.crc { "on" } else { "off" },
        o.count,
        o.size,
        s.fpdus_tx,
        s.fpdus_rx,
        s.max_ulpdu_rx
    ))
}

/// RDMA Read from an STag the server never registered: siw must answer with a
/// Terminate, RDMAP layer, remote protection, invalid STag, carrying the Read Request
/// header it rebuilt (M, D, R). Checks that we parse siw's Terminate layout.
fn provoke_terminate(mut conn: Conn, o: &Opts) -> Res<String> {
    let bogus = 0x00de_ad00;
    conn.read_request(ReadRequest {
        sink_stag: 0x0000_4a01,
        sink_to: 0x7f3e_a000_1000,
        size: 16,
        source_stag: bogus,
        source_to: 0x1000,
    })?;
    let e = match conn.recv() {
        Err(e) => e,
        Ok(_) => return Err("siw did not answer the bogus Read Request with a Terminate".into()),
    };
    println!("{e}");
    let want = format!(
        "peer sent Terminate: {}",
        TerminateCause::rdmap_protection(RdmapErrorCode::InvalidStag)
    );
    if !e.starts_with(&want) || !e.contains(&format!("{bogus:08x}")) {
        return Err(format!(
            "expected \"{want}\" naming STag {bogus:#x}, got: {e}"
        ));
    }
    Ok(format!(
        "client {} crc={} got Terminate RDMAP/1/0x00 for an invalid source STag",
        o.target,
        if conn.enc.crc_enabled() { "on" } else { "off" }
    ))
}

// ------------------------------------------------------------------ server

fn accept_one(port: u16, timeout: Duration) -> Res<TcpStream> {
    let listener = TcpListener::bind(("127.0.0.1", port)).map_err(err("bind"))?;
    listener.set_nonblocking(true).map_err(err("nonblocking"))?;
    println!("LISTENING 127.0.0.1:{port}");
    let deadline = Instant::now() + timeout;
    loop {
        match listener.accept() {
            Ok((s, peer)) => {
                println!("connection from {peer}");
                s.set_nonblocking(false).map_err(err("blocking"))?;
                return Ok(s);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if Instant::now() > deadline {
                    return Err("no connection before the timeout".into());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(format!("accept: {e}")),
        }
    }
}

fn run_server(o: &Opts, port: u16) -> Res<String> {
    let mulpdu = mulpdu_for_emss(o.emss);
    // The guest needs a while to boot: the accept timeout is generous.
    let mut sock = accept_one(port, o.timeout.max(Duration::from_secs(120)))?;
    sock.set_nodelay(true).map_err(err("TCP_NODELAY"))?;
    sock.set_read_timeout(Some(o.timeout))
        .map_err(err("SO_RCVTIMEO"))?;

    let mut mpa = MpaResponder::new(ResponderConfig {
        crc_required: o.crc,
    });
    let request = loop {
        let data = read_some(&mut sock, "the MPA Request")?;
        match mpa.feed(&data).map_err(err("MPA Request"))? {
            None => {}
            Some(ResponderEvent::Request(r)) => break r,
            Some(ResponderEvent::Refused { reason, reply }) => {
                let _ = sock.write_all(&reply);
                return Err(format!("refused the MPA Request: {reason}"));
            }
        }
    };
    println!(
        "MPA Request: rev={} crc={} {:?} pd={}",
        request.revision.number(),
        request.crc,
        request.revision.ird_ord(),
        hex(&request.private_data)
    );
    // rping's rdma_accept(NULL): IRD = peer's ORD, ORD = peer's IRD (capped by the
    // device). We need ORD >= 1 to RDMA Read the client's buffer.
    let (ird, ord) = match request.revision.ird_ord() {
        Some(p) => (p.ord.clamp(1, SIW_MAX_DEPTH), p.ird.clamp(1, SIW_MAX_DEPTH)),
        None => (RPING_DEPTH, RPING_DEPTH),
    };
    let reply = mpa.accept(&[], ird, ord).map_err(err("MPA accept"))?;
    if o.verbose {
        println!("MPA Reply: {}", hex(&reply));
    }
    sock.write_all(&reply).map_err(err("send MPA Reply"))?;
    let n = *mpa.negotiated().ok_or("no negotiation result")?;
    println!("negotiated: {}", describe(&n));
    if o.crc && !n.crc {
        return Err("CRC required but not negotiated".into());
    }
    if n.ord < 1 {
        return Err("ORD 0: rping's server must RDMA Read".into());
    }
    let mut conn = Conn::new(sock, n.crc, &[], mulpdu, o.verbose);
    if let Some(rtr) = n.rtr {
        // Peer-to-peer mode: the Initiator's first FPDU must be the chosen RTR.
        match (rtr, conn.recv()?) {
            (
                Rtr::Write,
                Rx::Write {
                    last: true,
                    payload,
                    stag,
                    to,
                },
            ) if payload.is_empty() => println!("got the Write RTR (STag {stag:#x}, TO {to:#x})"),
            (Rtr::Read, Rx::ReadRequest(rr)) if rr.size == 0 => {
                conn.send_message(
                    OutboundMessage::ReadResponse {
                        stag: rr.sink_stag,
                        to: rr.sink_to,
                    },
                    &[],
                )?;
                println!("got the Read RTR, answered with a zero-length Read Response");
            }
            _ => return Err(format!("the first FPDU is not the {rtr:?} RTR")),
        }
    }

    // rping_setup_buffers on the server: only rdma_buf (RDMA Read sink, Write source).
    let mut rdma = Region::new("rdma_buf", 0x0000_5c03, 0x7f3e_c000_3000, o.size);
    let go_ahead = [0u8; INFO_LEN]; // the server's send_buf is never filled in
    let mut pings = 0u32;
    loop {
        // Client's source buffer info (or the end of the test).
        let info = match conn.recv()? {
            Rx::Send(m) if m.len() == INFO_LEN => m,
            Rx::Send(m) => return Err(format!("bogus Send of {} bytes", m.len())),
            Rx::Eof => break,
            _ => return Err("unexpected message while waiting for the source info".into()),
        };
        let (addr, rkey, len) = decode_info(&info);
        if len as usize > rdma.buf.len() {
            return Err(format!(
                "client buffer of {len} bytes is larger than ours ({}): use -S",
                rdma.buf.len()
            ));
        }
        rdma.buf.fill(0);
        conn.read_request(ReadRequest {
            sink_stag: rdma.stag,
            sink_to: rdma.base,
            size: len,
            source_stag: rkey,
            source_to: addr,
        })?;
        let mut got = 0usize;
        loop {
            match conn.recv()? {
                Rx::ReadResponse {
                    stag,
                    to,
                    last,
                    payload,
                } => {
                    let r = rdma.range(stag, to, payload.len())?;
                    rdma.buf[r].copy_from_slice(&payload);
                    got += payload.len();
                    if last {
                        break;
                    }
                }
                Rx::Eof => return Err(format!("ping {pings}: peer closed during the Read")),
                _ => return Err(format!("ping {pings}: unexpected message during the Read")),
            }
        }
        if got != len as usize {
            return Err(format!("Read Response of {got} bytes, asked {len}"));
        }
        if o.verbose {
            println!(
                "rx Send {} -> Read Request sink {:#x}/{:#x}",
                hex(&info),
                rdma.stag,
                rdma.base
            );
            println!(
                "server ping data: {} (read response segments {:?})",
                c_str(&rdma.buf),
                conn.stats.last_tagged_segments
            );
        }
        conn.send(&go_ahead)?;

        // Client's sink buffer info: RDMA Write strlen(rdma_buf) + 1 bytes into it.
        let info = match conn.recv()? {
            Rx::Send(m) if m.len() == INFO_LEN => m,
            Rx::Send(m) => return Err(format!("bogus Send of {} bytes", m.len())),
            Rx::Eof => return Err(format!("ping {pings}: peer closed before the sink info")),
            _ => return Err("unexpected message while waiting for the sink info".into()),
        };
        let (addr, rkey, len) = decode_info(&info);
        let n_write = rdma.buf[..got]
            .iter()
            .position(|&b| b == 0)
            .map(|p| p + 1)
            .ok_or("ping data has no NUL (rping's strlen would overrun)")?;
        if n_write > len as usize {
            return Err(format!("sink of {len} bytes is too small for {n_write}"));
        }
        let data = rdma.buf[..n_write].to_vec();
        conn.send_message(
            OutboundMessage::Write {
                stag: rkey,
                to: addr,
            },
            &data,
        )?;
        conn.send(&go_ahead)?;
        pings += 1;
    }
    if pings < o.count {
        return Err(format!(
            "client closed after {pings} pings, expected {}",
            o.count
        ));
    }
    let s = &conn.stats;
    Ok(format!(
        "server 127.0.0.1:{port} crc={} pings={pings} mulpdu={mulpdu} fpdus_tx={} fpdus_rx={} max_ulpdu_rx={}",
        if n.crc { "on" } else { "off" },
        s.fpdus_tx,
        s.fpdus_rx,
        s.max_ulpdu_rx
    ))
}

fn main() -> ExitCode {
    let o = match parse_opts() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let result = match o.server_port {
        Some(port) => run_server(&o, port),
        None => run_client(&o),
    };
    match result {
        Ok(summary) => {
            println!("PROBE PASS {summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("PROBE FAIL {e}");
            ExitCode::FAILURE
        }
    }
}
