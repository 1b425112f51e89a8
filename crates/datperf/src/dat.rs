//! The DAT side of every measurement: a client that connects one endpoint per measurement,
//! carrying the test in the connect private data, and a server that accepts those connections
//! one at a time and plays the other half.
//!
//! Wire contract (little endian). Connect private data, 48 bytes: magic `DPF1`, op (0 send,
//! 1 write, 2 read), kind (0 latency, 1 bandwidth, 2 message rate), flags (bit 0: poll), a
//! reserved byte (0), size u64, total iterations u64 (warm-up included), window u32, then the
//! client's buffer: rmr context u32, virtual address u64, data length u64.
//! Accept private data, 24 bytes: magic, the server's rmr context u32, virtual address u64,
//! data length u64.
//!
//! Buffer layout on both sides (one LMR): `src` = `[0, size)`, `dst` = `[D, D + size)`,
//! `ctrl` = `[2D, 2D + 4096)`, where `D` (the data length) is `size` rounded up to a page.
//! Peers write into `dst`, read from `src`; `ctrl` holds the closing messages.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dapl::{
    CloseFlags, CompletionFlags, ConnectionEventKind, ConnectionRequest, DtoCompletion, DtoOp,
    DtoStatus, EpAttr, ErrorType, EvdFlags, Event, InterfaceAdapter, Lmr, LmrTriplet, MemPriv,
    PspFlags, Pz, RmrTriplet, ServicePoint,
};

use crate::args::{MemKind, Op, MAX_SIZE};
use crate::cpu::{self, Cpu};
use crate::pin;
use crate::suite::{Kind, Measurement};
use anyhow::{bail, Context, Result};

/// What one run of a measurement produced on the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Sample {
    /// Latency samples in microseconds (half round trips for send and write, full round trips
    /// for read), warm-up excluded.
    Lat(Vec<f64>),
    /// Bytes and messages moved in `secs`.
    Bw {
        /// Payload bytes.
        bytes: u64,
        /// Messages (operations).
        msgs: u64,
        /// Elapsed seconds.
        secs: f64,
    },
}

/// A sample with the CPU time of its timed loop (`cpu::metered`).
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// What the loop measured.
    pub sample: Sample,
    /// The CPU time the process used during the loop.
    pub cpu: Cpu,
}

const MAGIC: [u8; 4] = *b"DPF1";
const REQ_LEN: usize = 48;
const REPLY_LEN: usize = 24;
const PAGE: u64 = 4096;
/// Outstanding operations in bandwidth runs (perftest's default TX depth is 128).
pub const WINDOW: u32 = 64;
/// Completions a receiving server takes from its EVD at a time (`Evd::dequeue_into`). On
/// the shm link a poll stops at this many (the rest stays in the ring): 128 against 32 was
/// 3-5% more 8-byte messages per second (two sets of 8 alternating runs, 2026-11-28), tcp
/// the same.
const BATCH: usize = 128;
/// Receives the server keeps posted in send bandwidth runs.
const RECV_DEPTH: usize = 256;
/// Receives each side keeps posted in the send ping-pong (one spare, so a reply that arrives
/// before the repost never finds the queue empty).
const PINGPONG_RECVS: u64 = 2;
/// RDMA reads in flight (ORD/IRD asked for).
const READ_DEPTH: usize = 64;
/// How long a wait may see nothing before the run is declared stuck.
const STALL: Duration = Duration::from_secs(30);
/// How long the end of a connection may take to arrive (a server waits this long for a client
/// that stopped sending but did not disconnect).
const END_TIMEOUT: Duration = Duration::from_secs(600);
/// How long connection setup may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Busy-poll loops check the connection and the stall clock every this many empty polls.
/// Between polls they may call `sched_yield` (`dapl::pace`) and use no PAUSE instruction
/// (`spin_loop`): in a VM it can exit to the hypervisor, and measured here it made polling
/// slower than waiting.
const CHECK_EVERY: u32 = 1 << 16;
/// Cookie of the closing operation of a bandwidth run.
const FINAL_COOKIE: u64 = u64::MAX;

/// The busy-poll loop of every polling wait: DAT completions, memory polled for an RDMA write,
/// and the raw TCP baseline when it polls (`raw.rs`), so that both sides of a measurement poll
/// alike. Calls `poll` until it yields a value, with `sched_yield` between empty polls as the
/// thread's pacer says (`dapl::pace`; no PAUSE, see `CHECK_EVERY`), and every `CHECK_EVERY`
/// empty polls `check` with the time the wait began, which ends the wait by returning an error
/// (connection gone, stalled).
pub(crate) fn busy_poll<T, E>(
    mut poll: impl FnMut() -> std::result::Result<Option<T>, E>,
    mut check: impl FnMut(Instant) -> std::result::Result<(), E>,
) -> std::result::Result<T, E> {
    let start = Instant::now();
    let mut spin = dapl::pace::Spin::new(start);
    loop {
        if let Some(v) = poll()? {
            return Ok(v);
        }
        spin.after_empty_poll();
        if spin.spins() % CHECK_EVERY == 0 {
            check(start)?;
        }
    }
}

/// The parameters both sides need, as carried in the connect private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// Which DTO.
    pub op: Op,
    /// Latency, bandwidth or rate.
    pub kind: Kind,
    /// Message size.
    pub size: u64,
    /// Iterations including warm-up.
    pub total: u64,
    /// Outstanding operations (bandwidth).
    pub window: u32,
    /// Busy polling.
    pub poll: bool,
    /// Whose memory both sides' buffers are.
    pub mem: MemKind,
}

impl Spec {
    /// The spec of a measurement; `poll` `None` polls for latency and waits otherwise.
    pub fn of(m: &Measurement, poll: Option<bool>) -> Spec {
        Spec {
            op: m.op,
            kind: m.kind,
            size: m.size,
            total: m.warmup + m.iters,
            window: WINDOW,
            poll: poll.unwrap_or(m.kind == Kind::Lat),
            mem: MemKind::Library,
        }
    }

    /// Whether the DAT side finds its completions by busy polling: in polling mode, and in
    /// RDMA write latency whatever the mode (both sides poll memory; nothing waits for an
    /// event). The raw TCP baseline of the measurement uses the same mode.
    pub fn polls(&self) -> bool {
        self.poll || (self.op == Op::Write && self.kind == Kind::Lat)
    }

    fn measurement(&self) -> Measurement {
        Measurement {
            op: self.op,
            kind: self.kind,
            size: self.size,
            iters: self.total,
            warmup: 0,
        }
    }

    fn data_len(&self) -> u64 {
        self.size.max(8).div_ceil(PAGE) * PAGE
    }
}

/// Where a peer's buffer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PeerBuf {
    ctx: u32,
    va: u64,
    data_len: u64,
}

fn op_code(op: Op) -> u8 {
    match op {
        Op::Send => 0,
        Op::Write => 1,
        Op::Read => 2,
    }
}

fn kind_code(k: Kind) -> u8 {
    match k {
        Kind::Lat => 0,
        Kind::Bw => 1,
        Kind::Rate => 2,
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn encode_request(s: &Spec, me: PeerBuf) -> Vec<u8> {
    let mut v = Vec::with_capacity(REQ_LEN);
    v.extend_from_slice(&MAGIC);
    let mem = u8::from(s.mem == MemKind::Caller);
    v.extend_from_slice(&[op_code(s.op), kind_code(s.kind), u8::from(s.poll), mem]);
    v.extend_from_slice(&s.size.to_le_bytes());
    v.extend_from_slice(&s.total.to_le_bytes());
    v.extend_from_slice(&s.window.to_le_bytes());
    v.extend_from_slice(&me.ctx.to_le_bytes());
    v.extend_from_slice(&me.va.to_le_bytes());
    v.extend_from_slice(&me.data_len.to_le_bytes());
    v
}

fn decode_request(b: &[u8]) -> std::result::Result<(Spec, PeerBuf), String> {
    if b.len() != REQ_LEN || b[..4] != MAGIC {
        return Err("not a datperf request (or another datperf version)".into());
    }
    let op = match b[4] {
        0 => Op::Send,
        1 => Op::Write,
        2 => Op::Read,
        x => return Err(format!("unknown operation {x}")),
    };
    let kind = match b[5] {
        0 => Kind::Lat,
        1 => Kind::Bw,
        2 => Kind::Rate,
        x => return Err(format!("unknown measurement kind {x}")),
    };
    let s = Spec {
        op,
        kind,
        size: u64_at(b, 8),
        total: u64_at(b, 16),
        window: u32_at(b, 24),
        poll: b[6] & 1 != 0,
        mem: match b[7] {
            0 => MemKind::Library,
            1 => MemKind::Caller,
            x => return Err(format!("unknown memory kind {x}")),
        },
    };
    if s.size == 0 || s.size > MAX_SIZE || s.total == 0 || s.window == 0 || s.window > 4096 {
        return Err(format!("parameters out of range: {s:?}"));
    }
    let peer = PeerBuf {
        ctx: u32_at(b, 28),
        va: u64_at(b, 32),
        data_len: u64_at(b, 40),
    };
    if peer.data_len < s.size {
        return Err("the client's buffer is smaller than the message size".into());
    }
    Ok((s, peer))
}

fn encode_reply(me: PeerBuf) -> Vec<u8> {
    let mut v = Vec::with_capacity(REPLY_LEN);
    v.extend_from_slice(&MAGIC);
    v.extend_from_slice(&me.ctx.to_le_bytes());
    v.extend_from_slice(&me.va.to_le_bytes());
    v.extend_from_slice(&me.data_len.to_le_bytes());
    v
}

fn decode_reply(b: &[u8]) -> Result<PeerBuf> {
    if b.len() != REPLY_LEN || b[..4] != MAGIC {
        bail!("the server's accept carried no datperf reply (is it a datperf server of this version?)");
    }
    Ok(PeerBuf {
        ctx: u32_at(b, 4),
        va: u64_at(b, 8),
        data_len: u64_at(b, 16),
    })
}

fn dto_of(ev: Event, what: &str) -> Result<DtoCompletion> {
    // By value: a clone would copy the event's endpoint handle (two read-modify-writes) and
    // drop the original (two more), per message.
    let d = match ev {
        Event::Dto(d) => d,
        other => bail!(
            "expected a DTO completion while waiting for {what}, got event {:#x}",
            other.number()
        ),
    };
    if d.status != DtoStatus::Success {
        bail!(
            "{:?} (cookie {}) completed with {:?} while waiting for {what}",
            d.operation,
            d.cookie,
            d.status
        );
    }
    Ok(d)
}

/// One endpoint with its EVDs and buffer, on either side.
struct Conn {
    ep: dapl::Endpoint,
    dto: dapl::Evd,
    cevd: dapl::Evd,
    lmr: Lmr,
    data_len: u64,
    peer: PeerBuf,
    spec: Spec,
}

/// Creates the objects of one side of a measurement (not connected yet).
fn side(
    ia: &InterfaceAdapter,
    pz: &Pz,
    spec: &Spec,
    recv_depth: usize,
) -> Result<(dapl::Endpoint, dapl::Evd, dapl::Evd, Lmr)> {
    let data_len = spec.data_len();
    let len = (2 * data_len + PAGE) as usize;
    let lmr = match spec.mem {
        MemKind::Library => pz.lmr_allocate(len, MemPriv::ALL),
        MemKind::Caller => pz.register(vec![0u8; len], MemPriv::ALL),
    }
    .with_context(|| "registering the buffer")?;
    // Touch every page now so page faults stay out of the timing.
    lmr.fill(0, lmr.len(), 0)?;
    let window = spec.window as usize;
    let dto = ia.evd_create(window.max(recv_depth) + 64, None, EvdFlags::DTO)?;
    let cevd = ia.evd_create(8, None, EvdFlags::CONNECTION)?;
    let attr = EpAttr {
        max_recv_dtos: recv_depth,
        max_request_dtos: window + 8,
        max_rdma_read_in: READ_DEPTH,
        max_rdma_read_out: READ_DEPTH,
        ..EpAttr::default()
    };
    let ep = ia
        .endpoint(pz)
        .dto_evd(&dto)
        .connect_evd(&cevd)
        .attr(attr)
        .build()
        .with_context(|| "creating the endpoint")?;
    Ok((ep, dto, cevd, lmr))
}

impl Conn {
    fn size(&self) -> u64 {
        self.spec.size
    }

    fn src(&self) -> LmrTriplet {
        self.lmr.triplet(0, self.size())
    }

    fn dst(&self) -> LmrTriplet {
        self.lmr.triplet(self.data_len, self.size())
    }

    fn ctrl(&self, off: u64, len: u64) -> LmrTriplet {
        self.lmr.triplet(2 * self.data_len + off, len)
    }

    fn remote_src(&self, len: u64) -> RmrTriplet {
        RmrTriplet::new(self.peer.ctx, self.peer.va, len)
    }

    fn remote_dst(&self) -> RmrTriplet {
        RmrTriplet::new(
            self.peer.ctx,
            self.peer.va + self.peer.data_len,
            self.size(),
        )
    }

    /// Fails if the connection ended or nothing happened for `STALL`.
    fn check_alive(&self, start: Instant, what: &str) -> Result<()> {
        if let Some(ev) = self.cevd.dequeue()? {
            match ev.as_connection() {
                Some(c) => bail!(
                    "the connection ended ({:?}) while waiting for {what}",
                    c.kind
                ),
                None => bail!("unexpected event {:#x} on the connect EVD", ev.number()),
            }
        }
        if start.elapsed() > STALL {
            bail!(
                "nothing happened for {} s while waiting for {what}",
                STALL.as_secs()
            );
        }
        Ok(())
    }

    /// The next successful DTO completion, by busy polling or by `evd_wait`.
    fn next_dto(&self, what: &str) -> Result<DtoCompletion> {
        if let Some(ev) = self.dto.dequeue()? {
            return dto_of(ev, what);
        }
        if self.spec.poll {
            let ev = busy_poll(
                || Ok(self.dto.dequeue()?),
                |start| self.check_alive(start, what),
            )?;
            dto_of(ev, what)
        } else {
            let start = Instant::now();
            loop {
                match self.dto.wait(Some(Duration::from_secs(1)), 1) {
                    Ok(Some((ev, _))) => return dto_of(ev, what),
                    Ok(None) => self.check_alive(start, what)?,
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }

    /// Appends the next completions of the DTO EVD to `out` (at least one, at most
    /// [`BATCH`]), found as [`next_dto`](Self::next_dto) finds one: as `ibv_poll_cq` takes
    /// several, one look at the link and one hold of the queue for the lot
    /// (`Evd::dequeue_into`).
    fn next_dtos(&self, out: &mut Vec<Event>, what: &str) -> Result<()> {
        if self.dto.dequeue_into(out, BATCH)? > 0 {
            return Ok(());
        }
        if self.spec.poll {
            return busy_poll(
                || Ok((self.dto.dequeue_into(out, BATCH)? > 0).then_some(())),
                |start| self.check_alive(start, what),
            );
        }
        let start = Instant::now();
        loop {
            match self.dto.wait(Some(Duration::from_secs(1)), 1) {
                Ok(Some((ev, _))) => {
                    out.push(ev);
                    self.dto.dequeue_into(out, BATCH - 1)?;
                    return Ok(());
                }
                Ok(None) => self.check_alive(start, what)?,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Spins until the byte at `off` of the local buffer is `v` (the peer's RDMA write landed).
    fn poll_byte(&self, off: usize, v: u8) -> Result<()> {
        busy_poll(
            || Ok((self.lmr.load_acquire(off)? == v).then_some(())),
            |start| self.check_alive(start, "the peer's RDMA write"),
        )
    }

    /// Waits for the connection to end (the client disconnects when it is done; on the client
    /// this follows its own graceful disconnect).
    fn wait_end(&self) -> Result<()> {
        let deadline = Instant::now() + END_TIMEOUT;
        loop {
            match self.cevd.wait(Some(Duration::from_secs(1)), 1) {
                Ok(Some((ev, _))) => match ev.as_connection().map(|c| c.kind) {
                    Some(ConnectionEventKind::Disconnected | ConnectionEventKind::Broken) => {
                        return Ok(())
                    }
                    other => bail!("unexpected connection event {other:?}"),
                },
                Ok(None) => {
                    if Instant::now() > deadline {
                        bail!(
                            "the connection did not end within {} s",
                            END_TIMEOUT.as_secs()
                        );
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Best-effort release of everything (errors ignored: this runs on failure paths too).
    fn teardown(&self) {
        let _ = self.ep.disconnect(CloseFlags::Abrupt);
        let _ = self.ep.free();
        let _ = self.lmr.free();
        let _ = self.dto.free();
        let _ = self.cevd.free();
    }

    fn post_until_taken(&self, post: impl Fn() -> dapl::Result<()>) -> Result<()> {
        // The clock only once the queue is full: a read per post was 5% of the client's time in
        // the shm message rate.
        let mut start = None;
        loop {
            match post() {
                Ok(()) => return Ok(()),
                // The request queue is full (suppressed completions free slots as TCP takes
                // the bytes): let the transmitter catch up.
                Err(e) if e.kind() == ErrorType::InsufficientResources => {
                    std::thread::yield_now();
                    let start = *start.get_or_insert_with(Instant::now);
                    self.check_alive(start, "room in the request queue")?;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

// ------------------------------------------------------------------------------------------------
// Client

/// The client: one IA, connecting an endpoint per measurement to the server.
pub struct Client {
    ia: InterfaceAdapter,
    pz: Pz,
    remote: SocketAddr,
    qual: u64,
    poll: Option<bool>,
    mem: MemKind,
}

impl Client {
    /// Opens the IA `ia_name` for a server at `remote` listening on `qual`.
    pub fn open(
        ia_name: &str,
        remote: SocketAddr,
        qual: u64,
        poll: Option<bool>,
    ) -> Result<Client> {
        let (ia, _async) = InterfaceAdapter::open(ia_name, 64)
            .with_context(|| format!("opening IA {ia_name:?}"))?;
        let pz = ia.pz_create()?;
        Ok(Client {
            ia,
            pz,
            remote,
            qual,
            poll,
            mem: MemKind::Library,
        })
    }

    /// Whose memory the buffers of both sides are (library memory unless set).
    pub fn with_mem(mut self, mem: MemKind) -> Client {
        self.mem = mem;
        self
    }

    /// Whether this client's DAT side of `m` busy-polls (`Spec::polls`): its raw TCP baseline
    /// must find its data the same way.
    pub fn polls(&self, m: &Measurement) -> bool {
        Spec::of(m, self.poll).polls()
    }

    /// Runs one measurement against the server, with the CPU time of its timed loop (warm-up
    /// included; connecting and tearing down are not).
    pub fn measure(&self, m: &Measurement) -> Result<Measured> {
        let spec = Spec {
            mem: self.mem,
            ..Spec::of(m, self.poll)
        };
        let conn = self.connect(&spec)?;
        let pinned = pin::pin(pin::Side::Client);
        let r = cpu::metered(spec.total, spec.size, || run_client(&conn, m));
        drop(pinned);
        let r = r.and_then(|s| {
            // Graceful: everything queued goes first; the server ends when it sees it.
            conn.ep.disconnect(CloseFlags::Graceful)?;
            conn.wait_end()?;
            Ok(Measured {
                sample: s.0,
                cpu: s.1,
            })
        });
        conn.teardown();
        r
    }

    /// Connects an endpoint for `spec`.
    fn connect(&self, spec: &Spec) -> Result<Conn> {
        let recvs = match (spec.op, spec.kind) {
            (Op::Send, Kind::Lat) => PINGPONG_RECVS as usize,
            (Op::Send, _) => 1,
            _ => 0,
        };
        let (ep, dto, cevd, lmr) = side(&self.ia, &self.pz, spec, recvs)?;
        let mut conn = Conn {
            ep,
            dto,
            cevd,
            lmr,
            data_len: spec.data_len(),
            peer: PeerBuf {
                ctx: 0,
                va: 0,
                data_len: 0,
            },
            spec: *spec,
        };
        match self.establish(&mut conn) {
            Ok(()) => Ok(conn),
            Err(e) => {
                conn.teardown();
                Err(e)
            }
        }
    }

    fn establish(&self, c: &mut Conn) -> Result<()> {
        let spec = c.spec;
        match (spec.op, spec.kind) {
            (Op::Send, Kind::Lat) => {
                for i in 0..PINGPONG_RECVS {
                    c.ep.post_recv(&[c.dst()], i, CompletionFlags::empty())?;
                }
            }
            (Op::Send, _) => {
                c.ep.post_recv(&[c.ctrl(0, 8)], FINAL_COOKIE, CompletionFlags::empty())?
            }
            _ => {}
        }
        let me = PeerBuf {
            ctx: c.lmr.rmr_context().0,
            va: c.lmr.address(),
            data_len: c.data_len,
        };
        let (ip, qual) = (self.remote.ip(), self.qual);
        c.ep.connect(
            self.remote.ip(),
            qual,
            Some(CONNECT_TIMEOUT),
            &encode_request(&spec, me),
        )
        .with_context(|| format!("connecting to {ip} qualifier {qual}"))?;
        let what = format!("waiting for the connection to {ip} qualifier {qual}");
        let Some((ev, _)) = c
            .cevd
            .wait(Some(CONNECT_TIMEOUT + Duration::from_secs(1)), 1)
            .with_context(|| what.clone())?
        else {
            bail!("{what}: no connection event in time");
        };
        let Some(ce) = ev.as_connection() else {
            bail!("unexpected event {:#x} on the connect EVD", ev.number());
        };
        match ce.kind {
            ConnectionEventKind::Established => {}
            ConnectionEventKind::PeerRejected => bail!(
                "the server at {ip} qualifier {qual} rejected the test: {}",
                String::from_utf8_lossy(&ce.private_data)
            ),
            ConnectionEventKind::NonPeerRejected => bail!(
                "nobody accepts connections at {ip} qualifier {qual} (is `datperf --server` \
                 running there?)"
            ),
            k => bail!("connecting to {ip} qualifier {qual} failed: {k:?}"),
        }
        c.peer = decode_reply(&ce.private_data)?;
        if c.peer.data_len < spec.size {
            bail!("the server's buffer is smaller than the message size");
        }
        Ok(())
    }

    /// Closes the IA.
    pub fn close(self) -> Result<()> {
        self.ia.close(CloseFlags::Abrupt)?;
        Ok(())
    }
}

fn run_client(c: &Conn, m: &Measurement) -> Result<Sample> {
    match (m.op, m.kind) {
        (Op::Send, Kind::Lat) => client_send_lat(c, m),
        (Op::Write, Kind::Lat) => client_write_lat(c, m),
        (Op::Read, Kind::Lat) => client_read_lat(c, m),
        _ => client_bw(c),
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn client_send_lat(c: &Conn, m: &Measurement) -> Result<Sample> {
    let mut out = Vec::with_capacity(m.iters as usize);
    let src = [c.src()];
    let dst = [c.dst()];
    for i in 0..c.spec.total {
        let t0 = Instant::now();
        c.ep.post_send(&src, i, CompletionFlags::SUPPRESS)?;
        let d = c.next_dto("the ping-pong reply")?;
        let t = t0.elapsed();
        if d.operation != DtoOp::Receive {
            bail!("expected a receive, got {:?}", d.operation);
        }
        c.ep.post_recv(&dst, i, CompletionFlags::empty())?;
        if i >= m.warmup {
            out.push(us(t) / 2.0);
        }
    }
    Ok(Sample::Lat(out))
}

fn client_write_lat(c: &Conn, m: &Measurement) -> Result<Sample> {
    let mut out = Vec::with_capacity(m.iters as usize);
    let last = (c.size() - 1) as usize;
    let src = [c.src()];
    let remote = c.remote_dst();
    for i in 0..c.spec.total {
        let v = (i % 250 + 1) as u8;
        c.lmr.write(last, &[v])?;
        let t0 = Instant::now();
        c.post_until_taken(|| {
            c.ep.post_rdma_write(&src, i, &remote, CompletionFlags::SUPPRESS)
        })?;
        c.poll_byte(c.data_len as usize + last, v)?;
        let t = t0.elapsed();
        if i >= m.warmup {
            out.push(us(t) / 2.0);
        }
    }
    Ok(Sample::Lat(out))
}

fn client_read_lat(c: &Conn, m: &Measurement) -> Result<Sample> {
    let mut out = Vec::with_capacity(m.iters as usize);
    let dst = [c.dst()];
    let remote = c.remote_src(c.size());
    for i in 0..c.spec.total {
        let t0 = Instant::now();
        c.ep.post_rdma_read(&dst, i, &remote, CompletionFlags::empty())?;
        c.next_dto("the RDMA read")?;
        let t = t0.elapsed();
        if i >= m.warmup {
            out.push(us(t));
        }
    }
    Ok(Sample::Lat(out))
}

/// Bandwidth and message rate: keep `window` operations outstanding, signal every
/// `window / 4`-th (completions are in order, so one signalled completion accounts for the
/// suppressed ones before it), and end with proof that the peer has everything: for writes an
/// RDMA read behind them, for sends the server's reply after its last receive.
fn client_bw(c: &Conn) -> Result<Sample> {
    let total = c.spec.total;
    let window = u64::from(c.spec.window);
    let every = (window / 4).max(1);
    let src = [c.src()];
    let dst = [c.dst()];
    let remote_dst = c.remote_dst();
    let remote_src = c.remote_src(c.size());
    let closing = [c.ctrl(64, 8)];
    let needs_final = c.spec.op != Op::Read;
    let (mut posted, mut completed, mut final_done) = (0u64, 0u64, false);
    let t0 = Instant::now();
    loop {
        while posted < total && posted - completed < window {
            posted += 1;
            let flags = if posted % every == 0 || posted == total {
                CompletionFlags::empty()
            } else {
                CompletionFlags::SUPPRESS
            };
            match c.spec.op {
                Op::Send => c.post_until_taken(|| c.ep.post_send(&src, posted, flags))?,
                Op::Write => {
                    c.post_until_taken(|| c.ep.post_rdma_write(&src, posted, &remote_dst, flags))?
                }
                Op::Read => {
                    c.post_until_taken(|| c.ep.post_rdma_read(&dst, posted, &remote_src, flags))?
                }
            }
            if posted == total && c.spec.op == Op::Write {
                // Behind every write on the stream: its response means all were placed.
                c.post_until_taken(|| {
                    c.ep.post_rdma_read(
                        &closing,
                        FINAL_COOKIE,
                        &c.remote_src(8),
                        CompletionFlags::empty(),
                    )
                })?;
            }
        }
        if completed == total && (final_done || !needs_final) {
            break;
        }
        let d = c.next_dto("bandwidth completions")?;
        if d.cookie == FINAL_COOKIE {
            final_done = true;
        } else if d.operation == DtoOp::Receive {
            bail!("unexpected receive (cookie {})", d.cookie);
        } else {
            completed = completed.max(d.cookie.0);
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    Ok(Sample::Bw {
        bytes: total * c.size(),
        msgs: total,
        secs,
    })
}

// ------------------------------------------------------------------------------------------------
// Server

/// What became of a connection request.
enum Served {
    /// The measurement ran.
    Done(Measurement),
    /// Not a datperf request of this version.
    Rejected(String),
}

/// The server: a PSP taking one connection (one measurement) at a time.
pub struct Server {
    ia: InterfaceAdapter,
    pz: Pz,
    cr_evd: dapl::Evd,
    psp: ServicePoint,
    qual: u64,
}

impl Server {
    /// Opens `ia_name` and listens on `qual` (`None`: a free qualifier the provider picks).
    pub fn start(ia_name: &str, qual: Option<u64>) -> Result<Server> {
        let (ia, _async) = InterfaceAdapter::open(ia_name, 64)
            .with_context(|| format!("opening IA {ia_name:?}"))?;
        let pz = ia.pz_create()?;
        let cr_evd = ia.evd_create(16, None, EvdFlags::CR)?;
        let (psp, qual) = match qual {
            Some(q) => (
                ia.psp_create(q, &cr_evd, PspFlags::Consumer)
                    .with_context(|| format!("listening on connection qualifier {q}"))?,
                q,
            ),
            None => ia
                .psp_create_any(&cr_evd, PspFlags::Consumer)
                .with_context(|| "listening on a free connection qualifier")?,
        };
        Ok(Server {
            ia,
            pz,
            cr_evd,
            psp,
            qual,
        })
    }

    /// The connection qualifier the server listens on.
    pub fn qual(&self) -> u64 {
        self.qual
    }

    /// The IA's address.
    pub fn address(&self) -> Result<SocketAddr> {
        Ok(self.ia.query()?.ia_address)
    }

    /// Serves connection requests until `stop` is set. A failed measurement is reported on
    /// stderr and serving goes on; `verbose` also reports each served one.
    pub fn serve(&self, stop: &AtomicBool, verbose: bool) -> Result<()> {
        while !stop.load(Ordering::Acquire) {
            let ev = match self.cr_evd.wait(Some(Duration::from_millis(100)), 1) {
                Ok(Some((ev, _))) => ev,
                Ok(None) => continue,
                Err(e) => return Err(e.into()),
            };
            let Some(arrival) = ev.as_cr_arrival() else {
                continue;
            };
            let cr = arrival.cr.clone();
            let from = cr.query().map(|p| p.remote.remote_addr.ip().to_string());
            let from = from.unwrap_or_else(|_| "?".into());
            match self.serve_one(&cr) {
                Ok(Served::Done(m)) if verbose => eprintln!(
                    "datperf server: served {} ({} iterations) for {from}",
                    m.name(),
                    m.iters
                ),
                Ok(Served::Rejected(why)) => {
                    eprintln!("datperf server: rejected a request from {from}: {why}")
                }
                Ok(Served::Done(_)) => {}
                Err(e) => eprintln!("datperf server: a measurement for {from} failed: {e:#}"),
            }
        }
        Ok(())
    }

    /// Serves one request.
    fn serve_one(&self, cr: &ConnectionRequest) -> Result<Served> {
        let (spec, peer) = match decode_request(cr.private_data()) {
            Ok(x) => x,
            Err(why) => {
                let mut msg = format!("datperf: {why}").into_bytes();
                msg.truncate(200);
                cr.reject(&msg)?;
                return Ok(Served::Rejected(why));
            }
        };
        let recvs = match (spec.op, spec.kind) {
            (Op::Send, Kind::Lat) => PINGPONG_RECVS as usize,
            (Op::Send, _) => RECV_DEPTH,
            _ => 0,
        };
        let (ep, dto, cevd, lmr) = match side(&self.ia, &self.pz, &spec, recvs) {
            Ok(x) => x,
            Err(e) => {
                let mut msg = format!("datperf server: {e:#}").into_bytes();
                msg.truncate(200);
                let _ = cr.reject(&msg);
                return Err(e);
            }
        };
        let c = Conn {
            ep,
            dto,
            cevd,
            lmr,
            data_len: spec.data_len(),
            peer,
            spec,
        };
        let r = serve_conn(&c, cr);
        c.teardown();
        r.map(|()| Served::Done(spec.measurement()))
    }

    /// Stops listening and closes the IA.
    pub fn close(self) -> Result<()> {
        let _ = self.psp.free();
        self.ia.close(CloseFlags::Abrupt)?;
        Ok(())
    }
}

fn serve_conn(c: &Conn, cr: &ConnectionRequest) -> Result<()> {
    let spec = c.spec;
    // Receives go up before the accept so the first message finds a buffer.
    let first_recvs = match (spec.op, spec.kind) {
        (Op::Send, Kind::Lat) => PINGPONG_RECVS.min(spec.total),
        (Op::Send, _) => (RECV_DEPTH as u64).min(spec.total),
        _ => 0,
    };
    for i in 0..first_recvs {
        c.ep.post_recv(&[c.dst()], i, CompletionFlags::empty())?;
    }
    let me = PeerBuf {
        ctx: c.lmr.rmr_context().0,
        va: c.lmr.address(),
        data_len: c.data_len,
    };
    cr.accept(Some(&c.ep), &encode_reply(me))
        .with_context(|| "accepting")?;
    let Some((ev, _)) = c
        .cevd
        .wait(Some(CONNECT_TIMEOUT), 1)
        .with_context(|| "waiting for the connection")?
    else {
        bail!("waiting for the connection: no connection event in time");
    };
    match ev.as_connection().map(|e| e.kind) {
        Some(ConnectionEventKind::Established) => {}
        k => bail!("the connection did not come up: {k:?}"),
    }
    let _pinned = pin::pin(pin::Side::Server);
    match (spec.op, spec.kind) {
        (Op::Send, Kind::Lat) => {
            let src = [c.src()];
            let dst = [c.dst()];
            for i in 0..spec.total {
                let d = c.next_dto("the ping-pong message")?;
                if d.operation != DtoOp::Receive {
                    bail!("expected a receive, got {:?}", d.operation);
                }
                c.ep.post_send(&src, i, CompletionFlags::SUPPRESS)?;
                c.ep.post_recv(&dst, i, CompletionFlags::empty())?;
            }
        }
        (Op::Write, Kind::Lat) => {
            let last = (spec.size - 1) as usize;
            let src = [c.src()];
            let remote = c.remote_dst();
            for i in 0..spec.total {
                let v = (i % 250 + 1) as u8;
                c.poll_byte(c.data_len as usize + last, v)?;
                c.lmr.write(last, &[v])?;
                c.post_until_taken(|| {
                    c.ep.post_rdma_write(&src, i, &remote, CompletionFlags::SUPPRESS)
                })?;
            }
        }
        (Op::Send, _) => {
            const WHAT: &str = "the client's sends";
            let dst = [c.dst()];
            let (mut got, mut posted) = (0u64, first_recvs);
            let mut batch = Vec::with_capacity(BATCH);
            while got < spec.total {
                c.next_dtos(&mut batch, WHAT)?;
                for ev in batch.drain(..) {
                    if dto_of(ev, WHAT)?.operation == DtoOp::Receive {
                        got += 1;
                        if posted < spec.total {
                            c.ep.post_recv(&dst, posted, CompletionFlags::empty())?;
                            posted += 1;
                        }
                    }
                }
            }
            // Everything arrived: tell the client.
            c.post_until_taken(|| {
                c.ep.post_send(&[c.ctrl(0, 8)], FINAL_COOKIE, CompletionFlags::SUPPRESS)
            })?;
        }
        // RDMA read (latency and bandwidth) and RDMA write bandwidth: the server's
        // progress thread does all the work.
        _ => {}
    }
    c.wait_end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_round_trips() {
        let s = Spec {
            op: Op::Write,
            kind: Kind::Bw,
            size: 65536,
            total: 1234,
            window: 64,
            poll: true,
            mem: MemKind::Caller,
        };
        let me = PeerBuf {
            ctx: 0xdead_beef,
            va: 0x1234_5678_9abc,
            data_len: 65536,
        };
        let b = encode_request(&s, me);
        assert_eq!(b.len(), REQ_LEN);
        assert_eq!(decode_request(&b), Ok((s, me)));
        let r = encode_reply(me);
        assert_eq!(decode_reply(&r).unwrap(), me);
    }

    #[test]
    fn bad_requests_are_refused() {
        assert!(decode_request(b"hello").is_err());
        let s = Spec {
            op: Op::Send,
            kind: Kind::Lat,
            size: 8,
            total: 10,
            window: 64,
            poll: false,
            mem: MemKind::Library,
        };
        let me = PeerBuf {
            ctx: 1,
            va: 2,
            data_len: 4096,
        };
        let mut b = encode_request(&s, me);
        b[4] = 9;
        assert!(decode_request(&b).is_err());
        let mut b = encode_request(&s, me);
        b[8..16].copy_from_slice(&0u64.to_le_bytes());
        assert!(decode_request(&b).is_err());
        assert!(decode_reply(b"DPF1").is_err());
    }

    #[test]
    fn write_latency_always_polls() {
        let m = |op, kind| Measurement {
            op,
            kind,
            size: 8,
            iters: 10,
            warmup: 1,
        };
        for (op, kind, poll, want) in [
            (Op::Send, Kind::Lat, None, true),
            (Op::Read, Kind::Lat, None, true),
            (Op::Write, Kind::Lat, None, true),
            (Op::Send, Kind::Lat, Some(false), false),
            (Op::Read, Kind::Lat, Some(false), false),
            (Op::Write, Kind::Lat, Some(false), true),
            (Op::Write, Kind::Bw, None, false),
            (Op::Send, Kind::Rate, None, false),
            (Op::Write, Kind::Bw, Some(true), true),
        ] {
            assert_eq!(
                Spec::of(&m(op, kind), poll).polls(),
                want,
                "{op:?} {kind:?} {poll:?}"
            );
        }
    }

    #[test]
    fn busy_poll_yields_and_checks() {
        let mut n = 0;
        let r: std::result::Result<u32, ()> = busy_poll(
            || {
                n += 1;
                Ok((n == 5).then_some(n))
            },
            |_| Ok(()),
        );
        assert_eq!(r, Ok(5));
        let mut checks = 0;
        let r: std::result::Result<(), u32> = busy_poll(
            || Ok(None),
            |_| {
                checks += 1;
                Err(checks)
            },
        );
        assert_eq!(r, Err(1));
    }

    #[test]
    fn data_len_is_page_rounded() {
        let mut s = Spec {
            op: Op::Send,
            kind: Kind::Lat,
            size: 8,
            total: 1,
            window: 1,
            poll: false,
            mem: MemKind::Library,
        };
        assert_eq!(s.data_len(), 4096);
        s.size = 4097;
        assert_eq!(s.data_len(), 8192);
        s.size = 1 << 20;
        assert_eq!(s.data_len(), 1 << 20);
    }
}
