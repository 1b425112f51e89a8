//! One tcp-link connection on 127.0.0.1 with a varied iWARP session, for capturing and decoding
//! with tshark (`scripts/tshark-check.sh`): MPA Request/Reply with private data; Sends (a
//! gathered one, 10,000 bytes, one with Solicited Event, a zero-length one, 200,000 bytes); RDMA
//! Writes (100 bytes, 64 KiB), RDMA Reads (64 bytes, 256 KiB); the server's own Write, Read and
//! Send back; then a graceful disconnect. Every byte moved is checked; any failure exits 1.
//!
//! Run: `cargo run -p dapl --example wire_session -- [--crc] [--port N]`
//!
//! `--crc` opens both IAs as `"tcp:127.0.0.1,crc"` (the initiator asks for MPA CRC32c, the
//! responder requires it); without it both are `"tcp"` and CRC is off. `--port N` is the
//! server's connection qualifier, which is its TCP port (default 19471).
//!
//! Besides what it does, it prints two `expect <dir>:` lines (`c2s`: client to server, `s2c`:
//! the reverse) with the number of messages per RDMAP opcode and their payload bytes, which the
//! capture check compares with the decoded frames. They leave out the zero-length RTR (RFC 6581)
//! that the tcp link's initiator sends first.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use dapl::*;

const T: Option<Duration> = Some(Duration::from_secs(10));

type Res<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const REQ_TEXT: &[u8] = b"wire_session: MPA request private data";
const REP_TEXT: &[u8] = b"wire_session: MPA reply private data";
const SMALL_A: &[u8] = b"wire_session small send, ";
const SMALL_B: &[u8] = b"gathered from two segments";
const SE_TEXT: &[u8] = b"wire_session send with solicited event";
const NOTIFY_TEXT: &[u8] = b"wire_session: writes done";
const DONE_TEXT: &[u8] = b"wire_session: server done";

const MID_SEND: usize = 10_000;
const BIG_SEND: usize = 200_000;
const SMALL_WRITE: (usize, usize) = (1_000, 100); // (offset in the server window, length)
const BIG_WRITE: (usize, usize) = (8_192, 64 << 10);
const SMALL_READ: (usize, usize) = (1_050, 64);
const BIG_READ: (usize, usize) = (4_096, 256 << 10);
const S_WRITE: (usize, usize) = (0, 5_000); // server -> client window
const S_READ: (usize, usize) = (10_000, 3_000); // client window -> server
const WINDOW: usize = 512 << 10;
const C_WINDOW: usize = 64 << 10;

/// Deterministic bytes for `seed`.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn ensure(ok: bool, what: impl Into<String>) -> Res<()> {
    if ok {
        Ok(())
    } else {
        Err(what.into().into())
    }
}

/// Messages per RDMAP opcode in one direction, and their payload bytes.
#[derive(Default)]
struct Tally {
    send: u32,
    send_se: u32,
    write: u32,
    read_request: u32,
    read_response: u32,
    send_bytes: usize,
    write_bytes: usize,
    read_bytes: usize,
}

impl Tally {
    fn line(&self, dir: &str) -> String {
        let mut s = format!("expect {dir}:");
        let _ = write!(
            s,
            " send={} send_se={} write={} read_request={} read_response={} \
             send_bytes={} write_bytes={} read_response_bytes={}",
            self.send,
            self.send_se,
            self.write,
            self.read_request,
            self.read_response,
            self.send_bytes,
            self.write_bytes,
            self.read_bytes
        );
        s
    }
}

struct Side {
    ia: InterfaceAdapter,
    pz: Pz,
    recv: Evd,
    req: Evd,
    conn: Evd,
    ep: Endpoint,
}

fn side(ia_name: &str) -> Res<Side> {
    let (ia, _) = InterfaceAdapter::open(ia_name, 16)?;
    let pz = ia.pz_create()?;
    let recv = ia.evd_create(32, None, EvdFlags::DTO)?;
    let req = ia.evd_create(32, None, EvdFlags::DTO)?;
    let conn = ia.evd_create(8, None, EvdFlags::CONNECTION)?;
    let ep = (ia.endpoint(&pz).recv_evd(&recv).request_evd(&req))
        .connect_evd(&conn)
        .build()?;
    Ok(Side {
        ia,
        pz,
        recv,
        req,
        conn,
        ep,
    })
}

/// The next DTO completion on `evd`; it must be `cookie`, successful, `len` bytes.
fn dto(evd: &Evd, who: &str, cookie: u64, len: usize) -> Res<()> {
    let (ev, _) = evd.wait(T, 1)?.ok_or("no event in time")?;
    let d = ev
        .as_dto()
        .ok_or_else(|| format!("{who}: expected a DTO completion, got {ev:?}"))?;
    ensure(
        d.cookie == cookie && d.status == DtoStatus::Success && d.transferred_length == len as u64,
        format!(
            "{who}: completion cookie {} status {:?} {} bytes, expected cookie {cookie} \
             SUCCESS {len} bytes",
            d.cookie, d.status, d.transferred_length
        ),
    )
}

/// The next `want.len()` DTO completions on `evd`, in any order (an RDMA Read completes when
/// its data is placed, so a later Send may complete first): each `(cookie, length)` once.
fn dtos_any_order(evd: &Evd, who: &str, want: &[(u64, usize)]) -> Res<()> {
    let mut left = want.to_vec();
    while !left.is_empty() {
        let (ev, _) = evd.wait(T, 1)?.ok_or("no event in time")?;
        let d = ev
            .as_dto()
            .ok_or_else(|| format!("{who}: expected a DTO completion, got {ev:?}"))?;
        let i = left
            .iter()
            .position(|&(c, _)| d.cookie == c)
            .ok_or_else(|| format!("{who}: unexpected completion cookie {}", d.cookie))?;
        let (cookie, len) = left.remove(i);
        ensure(
            d.status == DtoStatus::Success && d.transferred_length == len as u64,
            format!(
                "{who}: cookie {cookie}: status {:?}, {} bytes; expected SUCCESS, {len} bytes",
                d.status, d.transferred_length
            ),
        )?;
    }
    Ok(())
}

fn conn_event(evd: &Evd, who: &str, kind: ConnectionEventKind) -> Res<ConnectionEvent> {
    let (ev, _) = evd.wait(T, 1)?.ok_or("no event in time")?;
    let c = ev
        .as_connection()
        .ok_or_else(|| format!("{who}: expected a connection event, got {ev:?}"))?
        .clone();
    ensure(
        c.kind == kind,
        format!("{who}: connection event {:?}, expected {kind:?}", c.kind),
    )?;
    Ok(c)
}

/// 12 bytes of RMR context and address, then `text`.
fn pd_with_window(t: &RmrTriplet, text: &[u8]) -> Vec<u8> {
    let mut pd = Vec::new();
    pd.extend_from_slice(&t.rmr_context.0.to_be_bytes());
    pd.extend_from_slice(&t.virtual_address.to_be_bytes());
    pd.extend_from_slice(text);
    pd
}

fn window_from_pd(pd: &[u8], text: &[u8], who: &str) -> Res<(u32, u64)> {
    ensure(
        pd.len() == 12 + text.len() && &pd[12..] == text,
        format!(
            "{who}: private data {:?} is not 12 bytes of RMR then {:?}",
            String::from_utf8_lossy(pd),
            String::from_utf8_lossy(text)
        ),
    )?;
    let ctx = u32::from_be_bytes(pd[0..4].try_into()?);
    let va = u64::from_be_bytes(pd[4..12].try_into()?);
    Ok((ctx, va))
}

fn run(crc: bool, port: u16) -> Res<(Tally, Tally)> {
    let ia_name = if crc { "tcp:127.0.0.1,crc" } else { "tcp" };
    let qual = ConnQual::from(port);
    let (mut c2s, mut s2c) = (Tally::default(), Tally::default());
    let s = side(ia_name)?;
    let c = side(ia_name)?;
    println!(
        "opened two IAs {ia_name:?} (server, client); CRC {}",
        if crc { "requested" } else { "off" }
    );

    // Server memory: a window the client writes and reads (pre-filled), receive buffers, and
    // a source for its own Write and Send.
    let s_window = s.pz.lmr_allocate(WINDOW, MemPriv::ALL)?;
    let mut window_expect = pattern(10, WINDOW);
    s_window.write(0, &window_expect)?;
    let s_inbox = s.pz.lmr_allocate(512 << 10, MemPriv::ALL)?;
    let s_src = s.pz.lmr_allocate(64 << 10, MemPriv::ALL)?;
    let s_sink = s.pz.lmr_allocate(64 << 10, MemPriv::ALL)?;
    // Client memory: send/write source, read sink, a window for the server, an inbox.
    let c_src = c.pz.lmr_allocate(512 << 10, MemPriv::ALL)?;
    let c_sink = c.pz.lmr_allocate(512 << 10, MemPriv::ALL)?;
    let c_window = c.pz.lmr_allocate(C_WINDOW, MemPriv::ALL)?;
    let mut c_window_expect = pattern(20, C_WINDOW);
    c_window.write(0, &c_window_expect)?;
    let c_inbox = c.pz.lmr_allocate(4096, MemPriv::ALL)?;

    // Server receive buffers, in the order the client's Sends use them (cookie = MSN): the
    // first one scattered over two pieces, then (cookie, offset in s_inbox, length).
    let s_recvs: [(u64, u64, u64); 5] = [
        (2, 4096, 16 << 10),
        (3, 32 << 10, 256),
        (4, 33 << 10, 64),
        (5, 64 << 10, 256 << 10),
        (6, 34 << 10, 256),
    ];
    s.ep.post_recv(
        &[s_inbox.triplet(0, 8), s_inbox.triplet(100, 100)],
        1,
        CompletionFlags::empty(),
    )?;
    for &(cookie, off, len) in &s_recvs {
        s.ep.post_recv(
            &[s_inbox.triplet(off, len)],
            cookie,
            CompletionFlags::empty(),
        )?;
    }
    c.ep.post_recv(&[c_inbox.triplet(0, 256)], 1, CompletionFlags::empty())?;

    // Connect: request and reply each carry a window (RMR context + address) and text.
    let cr_evd = s.ia.evd_create(4, None, EvdFlags::CR)?;
    let psp = s.ia.psp_create(qual, &cr_evd, PspFlags::Consumer)?;
    let req_pd = pd_with_window(&c_window.rmr_triplet(0, C_WINDOW as u64), REQ_TEXT);
    let server_addr: IaAddress = "127.0.0.1:0".parse()?;
    c.ep.connect(server_addr.ip(), qual, T, &req_pd)?;
    let (ev, _) = cr_evd.wait(T, 1)?.ok_or("no event in time")?;
    let cr = ev
        .as_cr_arrival()
        .ok_or("server: expected a connection request")?
        .cr
        .clone();
    let (cw_ctx, cw_va) = window_from_pd(cr.private_data(), REQ_TEXT, "server")?;
    let rep_pd = pd_with_window(&s_window.rmr_triplet(0, WINDOW as u64), REP_TEXT);
    cr.accept(Some(&s.ep), &rep_pd)?;
    let est = conn_event(&c.conn, "client", ConnectionEventKind::Established)?;
    conn_event(&s.conn, "server", ConnectionEventKind::Established)?;
    let (sw_ctx, sw_va) = window_from_pd(&est.private_data, REP_TEXT, "client")?;
    println!(
        "connected on port {port}: MPA request private data {} bytes, reply {} bytes",
        req_pd.len(),
        rep_pd.len()
    );
    let s_rmr =
        |(off, len): (usize, usize)| RmrTriplet::new(sw_ctx, sw_va + off as u64, len as u64);
    let c_rmr =
        |(off, len): (usize, usize)| RmrTriplet::new(cw_ctx, cw_va + off as u64, len as u64);

    // Sends, client -> server.
    let mid = pattern(1, MID_SEND);
    let big = pattern(2, BIG_SEND);
    c_src.write(0, SMALL_A)?;
    c_src.write(1000, SMALL_B)?;
    c_src.write(4096, SE_TEXT)?;
    c_src.write(8192, &mid)?;
    c_src.write(32 << 10, &big)?;
    let small_len = SMALL_A.len() + SMALL_B.len();
    c.ep.post_send(
        &[
            c_src.triplet(0, SMALL_A.len() as u64),
            c_src.triplet(1000, SMALL_B.len() as u64),
        ],
        1,
        CompletionFlags::empty(),
    )?;
    c.ep.post_send(
        &[c_src.triplet(8192, MID_SEND as u64)],
        2,
        CompletionFlags::empty(),
    )?;
    c.ep.post_send(
        &[c_src.triplet(4096, SE_TEXT.len() as u64)],
        3,
        CompletionFlags::SOLICITED_WAIT,
    )?;
    c.ep.post_send(&[], 4, CompletionFlags::empty())?;
    c.ep.post_send(
        &[c_src.triplet(32 << 10, BIG_SEND as u64)],
        5,
        CompletionFlags::empty(),
    )?;
    for (cookie, len) in [
        (1, small_len),
        (2, MID_SEND),
        (3, SE_TEXT.len()),
        (4, 0),
        (5, BIG_SEND),
    ] {
        dto(&c.req, "client send", cookie, len)?;
    }
    c2s.send += 4;
    c2s.send_se += 1;
    c2s.send_bytes += small_len + MID_SEND + SE_TEXT.len() + BIG_SEND;
    dto(&s.recv, "server recv (gathered send)", 1, small_len)?;
    let mut small = s_inbox.to_vec(0, 8)?;
    small.extend(s_inbox.to_vec(100, small_len - 8)?);
    ensure(
        small == [SMALL_A, SMALL_B].concat(),
        "the gathered send arrived changed",
    )?;
    dto(&s.recv, "server recv (10,000-byte send)", 2, MID_SEND)?;
    ensure(
        s_inbox.to_vec(4096, MID_SEND)? == mid,
        "the 10,000-byte send arrived changed",
    )?;
    dto(&s.recv, "server recv (send with SE)", 3, SE_TEXT.len())?;
    ensure(
        s_inbox.to_vec(32 << 10, SE_TEXT.len())? == SE_TEXT,
        "the solicited send arrived changed",
    )?;
    dto(&s.recv, "server recv (zero-length send)", 4, 0)?;
    dto(&s.recv, "server recv (200,000-byte send)", 5, BIG_SEND)?;
    ensure(
        s_inbox.to_vec(64 << 10, BIG_SEND)? == big,
        "the 200,000-byte send arrived changed",
    )?;
    println!(
        "client -> server sends: {small_len} bytes gathered from 2 segments into 2, \
         {MID_SEND} bytes, {} bytes with solicited event, 0 bytes, {BIG_SEND} bytes: all verified",
        SE_TEXT.len()
    );

    // RDMA Writes, client -> server window, then a Send so the server knows they landed.
    let w_small = pattern(3, SMALL_WRITE.1);
    let w_big = pattern(4, BIG_WRITE.1);
    c_src.write(0, &w_small)?;
    c_src.write(256 << 10, &w_big)?;
    c.ep.post_rdma_write(
        &[c_src.triplet(0, SMALL_WRITE.1 as u64)],
        6,
        &s_rmr(SMALL_WRITE),
        CompletionFlags::empty(),
    )?;
    c.ep.post_rdma_write(
        &[c_src.triplet(256 << 10, BIG_WRITE.1 as u64)],
        7,
        &s_rmr(BIG_WRITE),
        CompletionFlags::empty(),
    )?;
    c_src.write(4096, NOTIFY_TEXT)?;
    c.ep.post_send(
        &[c_src.triplet(4096, NOTIFY_TEXT.len() as u64)],
        8,
        CompletionFlags::empty(),
    )?;
    dto(&c.req, "client write (small)", 6, SMALL_WRITE.1)?;
    dto(&c.req, "client write (64 KiB)", 7, BIG_WRITE.1)?;
    dto(&c.req, "client send (notify)", 8, NOTIFY_TEXT.len())?;
    c2s.write += 2;
    c2s.write_bytes += SMALL_WRITE.1 + BIG_WRITE.1;
    c2s.send += 1;
    c2s.send_bytes += NOTIFY_TEXT.len();
    dto(&s.recv, "server recv (notify)", 6, NOTIFY_TEXT.len())?;
    ensure(
        s_inbox.to_vec(34 << 10, NOTIFY_TEXT.len())? == NOTIFY_TEXT,
        "the notify send arrived changed",
    )?;
    window_expect[SMALL_WRITE.0..SMALL_WRITE.0 + SMALL_WRITE.1].copy_from_slice(&w_small);
    window_expect[BIG_WRITE.0..BIG_WRITE.0 + BIG_WRITE.1].copy_from_slice(&w_big);
    ensure(
        s_window.to_vec(0, WINDOW)? == window_expect,
        "the server window differs from what the writes should have made it",
    )?;
    println!(
        "client -> server RDMA writes: {} bytes at +{}, {} bytes at +{}: verified in the server's window",
        SMALL_WRITE.1, SMALL_WRITE.0, BIG_WRITE.1, BIG_WRITE.0
    );

    // RDMA Reads by the client from the server window.
    c.ep.post_rdma_read(
        &[c_sink.triplet(0, SMALL_READ.1 as u64)],
        9,
        &s_rmr(SMALL_READ),
        CompletionFlags::empty(),
    )?;
    c.ep.post_rdma_read(
        &[c_sink.triplet(4096, BIG_READ.1 as u64)],
        10,
        &s_rmr(BIG_READ),
        CompletionFlags::empty(),
    )?;
    dto(&c.req, "client read (small)", 9, SMALL_READ.1)?;
    dto(&c.req, "client read (256 KiB)", 10, BIG_READ.1)?;
    c2s.read_request += 2;
    s2c.read_response += 2;
    s2c.read_bytes += SMALL_READ.1 + BIG_READ.1;
    ensure(
        c_sink.to_vec(0, SMALL_READ.1)? == window_expect[SMALL_READ.0..SMALL_READ.0 + SMALL_READ.1],
        "the small RDMA read returned other bytes",
    )?;
    ensure(
        c_sink.to_vec(4096, BIG_READ.1)? == window_expect[BIG_READ.0..BIG_READ.0 + BIG_READ.1],
        "the 256 KiB RDMA read returned other bytes",
    )?;
    println!(
        "client <- server RDMA reads: {} bytes at +{}, {} bytes at +{}: verified",
        SMALL_READ.1, SMALL_READ.0, BIG_READ.1, BIG_READ.0
    );

    // The server's turn: a Write and a Read on the client's window, then a Send.
    let sw = pattern(5, S_WRITE.1);
    s_src.write(0, &sw)?;
    s.ep.post_rdma_write(
        &[s_src.triplet(0, S_WRITE.1 as u64)],
        11,
        &c_rmr(S_WRITE),
        CompletionFlags::empty(),
    )?;
    s.ep.post_rdma_read(
        &[s_sink.triplet(0, S_READ.1 as u64)],
        12,
        &c_rmr(S_READ),
        CompletionFlags::empty(),
    )?;
    s_src.write(8192, DONE_TEXT)?;
    s.ep.post_send(
        &[s_src.triplet(8192, DONE_TEXT.len() as u64)],
        13,
        CompletionFlags::empty(),
    )?;
    dtos_any_order(
        &s.req,
        "server write, read, send",
        &[(11, S_WRITE.1), (12, S_READ.1), (13, DONE_TEXT.len())],
    )?;
    s2c.write += 1;
    s2c.write_bytes += S_WRITE.1;
    s2c.read_request += 1;
    c2s.read_response += 1;
    c2s.read_bytes += S_READ.1;
    s2c.send += 1;
    s2c.send_bytes += DONE_TEXT.len();
    ensure(
        s_sink.to_vec(0, S_READ.1)? == c_window_expect[S_READ.0..S_READ.0 + S_READ.1],
        "the server's RDMA read returned other bytes",
    )?;
    dto(&c.recv, "client recv (done)", 1, DONE_TEXT.len())?;
    ensure(
        c_inbox.to_vec(0, DONE_TEXT.len())? == DONE_TEXT,
        "the server's send arrived changed",
    )?;
    c_window_expect[S_WRITE.0..S_WRITE.0 + S_WRITE.1].copy_from_slice(&sw);
    ensure(
        c_window.to_vec(0, C_WINDOW)? == c_window_expect,
        "the client window differs from what the server's write should have made it",
    )?;
    println!(
        "server -> client: RDMA write {} bytes, RDMA read {} bytes, send {} bytes: verified",
        S_WRITE.1,
        S_READ.1,
        DONE_TEXT.len()
    );

    // Graceful disconnect from the client.
    c.ep.disconnect(CloseFlags::Graceful)?;
    conn_event(&c.conn, "client", ConnectionEventKind::Disconnected)?;
    conn_event(&s.conn, "server", ConnectionEventKind::Disconnected)?;
    println!("graceful disconnect: both sides DISCONNECTED");
    psp.free()?;
    c.ia.close(CloseFlags::Abrupt)?;
    s.ia.close(CloseFlags::Abrupt)?;
    Ok((c2s, s2c))
}

fn usage() -> ExitCode {
    eprintln!("usage: wire_session [--crc] [--port N]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut crc = false;
    let mut port: u16 = 19471;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--crc" => crc = true,
            "--port" => match args.next().and_then(|p| p.parse().ok()) {
                Some(p) if p > 0 => port = p,
                _ => return usage(),
            },
            _ => return usage(),
        }
    }
    match run(crc, port) {
        Ok((c2s, s2c)) => {
            println!("{}", c2s.line("c2s"));
            println!("{}", s2c.line("s2c"));
            println!(
                "wire_session: OK (crc {}, port {port})",
                if crc { "on" } else { "off" }
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("wire_session: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
