//! `rping` (rdma-core's librdmacm example) written against the dapl-rs API, over the tcp link:
//! the check that a dapl-rs program interoperates with the Linux kernel's Soft-iWARP (siw).
//! `docs/interop-siw.md` describes rping's protocol; `scripts/siw-interop.sh` runs this program
//! against `rping -s` and `rping -c` in the siw VM (`../shared/siw-vm`).
//!
//! ```text
//! rping [--crc] [-C COUNT] [-S SIZE] [-t SECS] [-v] HOST:PORT     client (like rping -c -V)
//! rping --server PORT [--crc] [-C COUNT] [-S SIZE] [-t SECS] [-v] server (like rping -s)
//! ```
//!
//! Client, per iteration: fill `start_buf` with rping's pattern, Send `{buf, rkey, size}` of
//! it (16 bytes, big-endian), wait for the server's go-ahead Send (after it RDMA-read
//! `start_buf`), Send `{buf, rkey, size}` of `rdma_buf`, wait for the go-ahead (after it
//! RDMA-wrote `rdma_buf`), compare the two buffers. Server, per iteration: receive the
//! source's info, RDMA Read it into its own buffer, Send the go-ahead (16 zero bytes), receive
//! the sink's info, RDMA Write `strlen + 1` bytes there, Send the go-ahead; until the client
//! disconnects. The last line is `PROBE PASS ...` or `PROBE FAIL ...` (the same shape as the
//! codec-level probe `crates/iwarp/examples/siw_rping_probe.rs`, so the script can run either).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use dapl::*;

/// `struct rping_rdma_info { __be64 buf; __be32 rkey; __be32 size; }`
const INFO_LEN: usize = 16;
/// rping's smallest and largest `-S`.
const MIN_SIZE: usize = 23;
const MAX_SIZE: usize = 64 * 1024 - 1;

type Res<T> = std::result::Result<T, String>;

struct Opts {
    server_port: Option<u16>,
    target: Option<SocketAddr>,
    crc: bool,
    count: u32,
    size: usize,
    timeout: Duration,
    verbose: bool,
}

fn usage() -> String {
    "usage: rping [--crc] [-C COUNT] [-S SIZE] [-t SECS] [-v] HOST:PORT\n       \
     rping --server PORT [--crc] [-C COUNT] [-S SIZE] [-t SECS] [-v]"
        .into()
}

fn parse_opts() -> Res<Opts> {
    parse_args().map_err(|e| e.to_string())
}

fn parse_args() -> std::result::Result<Opts, lexopt::Error> {
    use lexopt::prelude::*;
    let mut o = Opts {
        server_port: None,
        target: None,
        crc: false,
        count: 3,
        size: 64,
        timeout: Duration::from_secs(30),
        verbose: false,
    };
    let mut args = lexopt::Parser::from_env();
    while let Some(arg) = args.next()? {
        match arg {
            Long("server") => o.server_port = Some(args.value()?.parse()?),
            Long("crc") => o.crc = true,
            Short('C') => o.count = args.value()?.parse()?,
            Short('S') => o.size = args.value()?.parse()?,
            Short('t') => o.timeout = Duration::from_secs(args.value()?.parse()?),
            Short('v') => o.verbose = true,
            Short('h') | Long("help") => return Err(usage().into()),
            Value(t) if o.target.is_none() => {
                let t = t.string()?;
                o.target = Some(
                    t.parse()
                        .map_err(|e| format!("{t}: {e} (want IPv4:PORT)"))?,
                )
            }
            _ => return Err(format!("{}\n{}", arg.unexpected(), usage()).into()),
        }
    }
    if !(MIN_SIZE..=MAX_SIZE).contains(&o.size) {
        return Err(format!("-S must be {MIN_SIZE}..={MAX_SIZE}").into());
    }
    if o.count == 0 {
        return Err("-C must be at least 1".into());
    }
    match (o.server_port, o.target) {
        (Some(_), None) | (None, Some(_)) => Ok(o),
        _ => Err(usage().into()),
    }
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

fn info_bytes(t: &RmrTriplet) -> [u8; INFO_LEN] {
    let mut b = [0u8; INFO_LEN];
    b[0..8].copy_from_slice(&t.virtual_address.to_be_bytes());
    b[8..12].copy_from_slice(&t.rmr_context.0.to_be_bytes());
    b[12..16].copy_from_slice(&(t.segment_length as u32).to_be_bytes());
    b
}

fn parse_info(b: &[u8]) -> RmrTriplet {
    let va = u64::from_be_bytes(b[0..8].try_into().unwrap());
    let rkey = u32::from_be_bytes(b[8..12].try_into().unwrap());
    let size = u32::from_be_bytes(b[12..16].try_into().unwrap());
    RmrTriplet::new(rkey, va, u64::from(size))
}

/// One side's objects: IA, PZ, the 16-byte send/receive buffers, one DTO EVD for receives and
/// one for requests, a connection EVD and the EP.
struct Side {
    ia: InterfaceAdapter,
    pz: Pz,
    recv_buf: Lmr,
    send_buf: Lmr,
    recv_evd: Evd,
    req_evd: Evd,
    conn_evd: Evd,
    ep: Endpoint,
    timeout: Duration,
}

fn dat(what: &str) -> impl FnOnce(DatError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

impl Side {
    fn open(o: &Opts) -> Res<Side> {
        let name = if o.crc {
            "tcp:127.0.0.1,crc"
        } else {
            "tcp:127.0.0.1"
        };
        let (ia, _async) = InterfaceAdapter::open(name, 16).map_err(dat("ia_open"))?;
        let pz = ia.pz_create().map_err(dat("pz_create"))?;
        let recv_buf = pz
            .lmr_allocate(INFO_LEN, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)
            .map_err(dat("lmr_allocate"))?;
        let send_buf = pz
            .lmr_allocate(INFO_LEN, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)
            .map_err(dat("lmr_allocate"))?;
        let recv_evd = ia
            .evd_create(8, None, EvdFlags::DTO)
            .map_err(dat("evd_create"))?;
        let req_evd = ia
            .evd_create(8, None, EvdFlags::DTO)
            .map_err(dat("evd_create"))?;
        let conn_evd = ia
            .evd_create(4, None, EvdFlags::CONNECTION)
            .map_err(dat("evd_create"))?;
        let ep = ia
            .endpoint(&pz)
            .recv_evd(&recv_evd)
            .request_evd(&req_evd)
            .connect_evd(&conn_evd)
            .build()
            .map_err(dat("ep_create"))?;
        Ok(Side {
            ia,
            pz,
            recv_buf,
            send_buf,
            recv_evd,
            req_evd,
            conn_evd,
            ep,
            timeout: o.timeout,
        })
    }

    fn post_recv(&self) -> Res<()> {
        self.ep
            .post_recv(
                &[self.recv_buf.triplet(0, INFO_LEN as u64)],
                1,
                CompletionFlags::empty(),
            )
            .map_err(dat("post_recv"))
    }

    /// The next receive: its 16 bytes, or None when it was flushed (the peer disconnected).
    /// Re-posts the buffer, as rping does.
    fn recv(&self) -> Res<Option<[u8; INFO_LEN]>> {
        let c = self.dto(&self.recv_evd, "a receive")?;
        match c.status {
            DtoStatus::Success if c.transferred_length == INFO_LEN as u64 => {
                let mut b = [0u8; INFO_LEN];
                self.recv_buf.read(0, &mut b).map_err(dat("lmr_read"))?;
                self.post_recv()?;
                Ok(Some(b))
            }
            DtoStatus::Success => Err(format!(
                "Received bogus data, size {}",
                c.transferred_length
            )),
            DtoStatus::Flushed => Ok(None),
            s => Err(format!("receive completed with {s:?}")),
        }
    }

    fn send(&self, bytes: &[u8; INFO_LEN]) -> Res<()> {
        self.send_buf.write(0, bytes).map_err(dat("lmr_write"))?;
        self.ep
            .post_send(
                &[self.send_buf.triplet(0, INFO_LEN as u64)],
                2,
                CompletionFlags::empty(),
            )
            .map_err(dat("post_send"))?;
        self.expect_req(2, "the send")
    }

    fn expect_req(&self, cookie: u64, what: &str) -> Res<()> {
        let c = self.dto(&self.req_evd, what)?;
        if c.cookie != cookie || c.status != DtoStatus::Success {
            return Err(format!(
                "{what}: completion {:?} for cookie {}",
                c.status, c.cookie
            ));
        }
        Ok(())
    }

    fn dto(&self, evd: &Evd, what: &str) -> Res<DtoCompletion> {
        let (ev, _) = evd
            .wait(Some(self.timeout), 1)
            .map_err(|e| format!("waiting for {what}: {e}"))?
            .ok_or_else(|| format!("waiting for {what}: nothing in time"))?;
        ev.as_dto()
            .cloned()
            .ok_or_else(|| format!("waiting for {what}: not a DTO event: {ev:?}"))
    }

    fn conn_event(&self) -> Res<ConnectionEvent> {
        let (ev, _) = self
            .conn_evd
            .wait(Some(self.timeout), 1)
            .map_err(dat("waiting for a connection event"))?
            .ok_or("waiting for a connection event: nothing in time")?;
        ev.as_connection()
            .cloned()
            .ok_or_else(|| format!("not a connection event: {ev:?}"))
    }
}

fn run_client(o: &Opts, target: SocketAddr) -> Res<String> {
    let s = Side::open(o)?;
    let priv_rw = MemPriv::ALL;
    let start_buf =
        s.pz.lmr_allocate(o.size, priv_rw)
            .map_err(dat("lmr_allocate"))?;
    let rdma_buf =
        s.pz.lmr_allocate(o.size, priv_rw)
            .map_err(dat("lmr_allocate"))?;
    s.post_recv()?;
    let addr = SocketAddr::new(target.ip(), 0);
    s.ep.connect(addr.ip(), u64::from(target.port()), Some(o.timeout), b"")
        .map_err(dat("ep_connect"))?;
    let ev = s.conn_event()?;
    if ev.kind != ConnectionEventKind::Established {
        return Err(format!("connect: {:?}", ev.kind));
    }
    println!(
        "connected to {target} (crc {})",
        if o.crc { "asked" } else { "off" }
    );
    let mut start = 65u8;
    let mut buf = vec![0u8; o.size];
    let mut back = vec![0u8; o.size];
    for ping in 0..o.count {
        fill_ping(&mut buf, ping, start);
        start = if start >= 122 { 65 } else { start + 1 };
        start_buf.write(0, &buf).map_err(dat("lmr_write"))?;
        rdma_buf
            .write(0, &vec![0u8; o.size])
            .map_err(dat("lmr_write"))?;
        s.send(&info_bytes(&start_buf.rmr_triplet(0, o.size as u64)))?;
        // The server RDMA-reads start_buf, then sends the go-ahead.
        s.recv()?.ok_or_else(|| {
            format!("ping {ping}: the server disconnected before its go-ahead (after the read)")
        })?;
        s.send(&info_bytes(&rdma_buf.rmr_triplet(0, o.size as u64)))?;
        // The server RDMA-writes rdma_buf, then sends the go-ahead.
        s.recv()?.ok_or_else(|| {
            format!("ping {ping}: the server disconnected before its go-ahead (after the write)")
        })?;
        rdma_buf.read(0, &mut back).map_err(dat("lmr_read"))?;
        if back != buf {
            let at = back.iter().zip(&buf).position(|(a, b)| a != b).unwrap_or(0);
            return Err(format!(
                "data mismatch! (iteration {ping}, first at byte {at})"
            ));
        }
        if o.verbose {
            println!("ping data: {}", c_str(&back));
        }
    }
    s.ep.disconnect(CloseFlags::Graceful)
        .map_err(dat("ep_disconnect"))?;
    let ev = s.conn_event()?;
    if ev.kind != ConnectionEventKind::Disconnected {
        return Err(format!("after disconnect: {:?}", ev.kind));
    }
    s.ia.close(CloseFlags::Abrupt).map_err(dat("ia_close"))?;
    Ok(format!(
        "client {target} crc={} pings={} size={}",
        if o.crc { "asked" } else { "off" },
        o.count,
        o.size
    ))
}

fn run_server(o: &Opts, port: u16) -> Res<String> {
    let s = Side::open(o)?;
    let rdma_buf =
        s.pz.lmr_allocate(o.size, MemPriv::ALL)
            .map_err(dat("lmr_allocate"))?;
    let cr_evd =
        s.ia.evd_create(4, None, EvdFlags::CR)
            .map_err(dat("evd_create"))?;
    let _psp =
        s.ia.psp_create(u64::from(port), &cr_evd, PspFlags::Consumer)
            .map_err(dat("psp_create"))?;
    println!("LISTENING 127.0.0.1:{port}");
    let (ev, _) = cr_evd
        .wait(Some(o.timeout * 4), 1)
        .map_err(dat("waiting for a connection request"))?
        .ok_or("waiting for a connection request: nothing in time")?;
    let cr = ev
        .as_cr_arrival()
        .ok_or_else(|| format!("not a CR: {ev:?}"))?
        .cr
        .clone();
    println!("connection request from {:?}", cr.query().map(|q| q.remote));
    s.post_recv()?;
    cr.accept(Some(&s.ep), b"").map_err(dat("cr_accept"))?;
    let ev = s.conn_event()?;
    if ev.kind != ConnectionEventKind::Established {
        return Err(format!("accept: {:?}", ev.kind));
    }
    let go_ahead = [0u8; INFO_LEN];
    let mut pings = 0u32;
    let mut buf = vec![0u8; o.size];
    while let Some(src) = s.recv()? {
        let src = parse_info(&src);
        let len = src.segment_length as usize;
        if len == 0 || len > o.size {
            return Err(format!(
                "client advertised {len} bytes; this server has {}",
                o.size
            ));
        }
        s.ep.post_rdma_read(
            &[rdma_buf.triplet(0, len as u64)],
            3,
            &src,
            CompletionFlags::empty(),
        )
        .map_err(dat("post_rdma_read"))?;
        s.expect_req(3, "the RDMA read")?;
        rdma_buf.read(0, &mut buf[..len]).map_err(dat("lmr_read"))?;
        if o.verbose {
            println!("server ping data: {}", c_str(&buf[..len]));
        }
        s.send(&go_ahead)?;
        let Some(sink) = s.recv()? else {
            return Err("the client disconnected before naming its write sink".into());
        };
        let sink = parse_info(&sink);
        let wlen = (c_str(&buf[..len]).len() + 1).min(len);
        if wlen as u64 > sink.segment_length {
            return Err(format!(
                "the client's sink has {} bytes, {wlen} to write",
                sink.segment_length
            ));
        }
        s.ep.post_rdma_write(
            &[rdma_buf.triplet(0, wlen as u64)],
            4,
            &RmrTriplet::new(sink.rmr_context, sink.virtual_address, wlen as u64),
            CompletionFlags::empty(),
        )
        .map_err(dat("post_rdma_write"))?;
        s.expect_req(4, "the RDMA write")?;
        s.send(&go_ahead)?;
        pings += 1;
    }
    let ev = s.conn_event()?;
    if ev.kind != ConnectionEventKind::Disconnected {
        return Err(format!("at the end: {:?}", ev.kind));
    }
    s.ia.close(CloseFlags::Abrupt).map_err(dat("ia_close"))?;
    if pings != o.count {
        return Err(format!(
            "client closed after {pings} pings, expected {}",
            o.count
        ));
    }
    Ok(format!(
        "server 127.0.0.1:{port} crc={} pings={pings}",
        if o.crc { "asked" } else { "off" }
    ))
}

fn main() -> ExitCode {
    // The link's warnings (a Terminate sent or received, and why) go to stderr: when a check
    // against siw fails, its log says which side ended the stream and for what.
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(std::io::stderr)
        .init();
    let o = match parse_opts() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let result = match (o.server_port, o.target) {
        (Some(port), _) => run_server(&o, port),
        (None, Some(t)) => run_client(&o, t),
        (None, None) => unreachable!("parse_opts requires one"),
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
