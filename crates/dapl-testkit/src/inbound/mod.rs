//! The `engine_inbound` harness: the tcp link's inbound path, shared by the `engine_inbound`
//! target of `crates/dapl/fuzz` (cargo-fuzz; `scripts/fuzz.sh`, see `docs/fuzzing.md`) and by
//! the tests that run it over pseudo-random inputs on stable
//! (`cargo test -p dapl-testkit --test engine_inbound`).
//!
//! This file holds the setup (the IA, its regions, one run's endpoint and connection), the
//! local actions and the driving loop; `wire` decodes the operations of an input into the
//! peer's FPDUs, `check` reads what the connection sent and checks the invariants.
//!
//! One input is what a peer sends after MPA. The harness builds a tcp connection in the
//! Established phase over an `AF_UNIX` socketpair, with no epoll set and no progress thread
//! behind it (`dapl::fuzz_api::FuzzConn::establish`), and plays the progress thread itself: it
//! writes the peer's bytes into the socketpair and calls `FuzzConn::on_ready` / `on_wake` /
//! `on_tick`, the functions the progress thread calls, so everything runs synchronously on the
//! calling thread and nothing sleeps (time passing is an `on_tick` with a later instant). The
//! IA (with the tcp link), its protection zones and memory regions live as long as the
//! harness; each input gets a fresh endpoint, EVDs, SRQ, socketpair and connection.
//!
//! Memory: every region is the middle of a larger allocation, with [`GUARD`] bytes on each
//! side, entered in the IA's memory table directly (`dapl::fuzz_api::enter_lmr`: the same
//! table LMRs use, at fixed registered addresses so that inputs replay the same in any
//! process). Regions: one the peer
//! may read and write (16 KiB, so that Writes large enough for cut-through placement fit), one
//! it may only write, one it may only read, a local-only one, one in another PZ, one holding the
//! posted receive buffers, one holding the RDMA read sinks (small ones and one of 12 KiB), and a
//! stale STag; and a window (a bound RMR's entry, `dapl::fuzz_api::enter_rmr`) over 1 KiB of the
//! rw region, the one STag a peer's Send with Invalidate can invalidate (it is entered again
//! before the next input once an input invalidated it). Before each input every byte is set to
//! a known pattern.
//!
//! Invariants checked on every input (a failed one panics):
//! - no panic in the link or the engine;
//! - no byte outside the registered ranges changes; the read-only, local-only and other-PZ
//!   regions do not change at all; in the receive region only the buffers of receives that took
//!   a Send may change (a successful receive of `n` bytes only in its first `n`; one completed
//!   by RFC 7306 Immediate Data, the end of an RDMA Write with Immediate Data, not at all), and
//!   in the sink region only the sinks of reads that got a response (and none past the read
//!   length);
//! - a receive taken by a Send with Invalidate (the STag of its first segment) completes
//!   RECEIVE_WITH_INVALIDATE naming that STag, which must be the window's (the only one that can
//!   be invalidated), at most once per input; one that could not be invalidated completes
//!   REMOTE_RESPONDER (the receive cut short) and the connection breaks;
//! - receives and reads complete in posting order: successes first, then at most one that may
//!   have been cut short, then flushes;
//! - what the connection sends parses (FPDU framing, CRC when negotiated, segments): our Read
//!   Requests exactly as posted, Read Responses answering the peer's Read Requests in order
//!   with the requested STag, offset and length (and the region's bytes for the read-only
//!   region), at most one Terminate and nothing after it;
//! - after the input the endpoint is CONNECTED with the connection Established, or
//!   DISCONNECTED with its queues empty and the connection Closing or Dead; the connection
//!   EVD holds ESTABLISHED and then at most one terminal event (exactly one once torn down);
//! - every posted DTO completes at most once, and, after the endpoint is freed, exactly once
//!   (receives still queued on the SRQ excepted); the connection ends Dead and unreferenced.
//!
//! Input layout: byte 0 (control), byte 1 (connection), byte 2 (initial receives), then either
//! the raw stream (modes 0 and 1) or a list of operations (modes 2 and 3), see [`Op`]:
//! - byte 0: bits 0-1 mode (0 raw without CRC, 1 raw with CRC whose trailers the harness fixes
//!   up, 2 operations without CRC, 3 operations with CRC); bit 2 receives come from an SRQ;
//!   bit 3 responder (FPDUs held until the peer's first); bit 4 small socket send buffer (the
//!   link queues and resumes on `EPOLLOUT`); bits 5-6 how the connection ends (abrupt
//!   disconnect, peer FIN, endpoint freed, graceful disconnect); bit 7 time passes before that
//!   (RNR grace and linger expire);
//! - byte 1: bits 0-1 IRD (4, 1, 2, 0), bits 2-3 ORD (4, 1, 2, 0), bits 4-6 how many bytes are
//!   written between two reads of the connection (values 0-3 all; then 1024, 100, 29, 7, but
//!   at least a 16th of what is pending),
//!   bit 7 post one RDMA read (64 bytes) before the input;
//! - byte 2: bits 0-2 receives posted before the input, bits 3-7 their shapes.

#![allow(clippy::new_without_default)]

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::io::ErrorKind;
use std::time::{Duration, Instant};

use dapl::fuzz_api::{enter_lmr, enter_rmr, remove_lmr, FuzzConn, FuzzMemory, FuzzProbe};
use dapl::{
    CloseFlags, CompletionFlags, ConnectionEventKind, DtoStatus, Endpoint, EpAttr, EpState, Evd,
    EvdFlags, InterfaceAdapter, LmrTriplet, MemPriv, Pz, RmrTriplet, Srq, SrqAttr,
};
use iwarp::rdmap::ReadRequest;
use iwarp::terminate::TerminateCause;
use iwarp::FpduDecoder;
use socket2::{Domain, Socket, Type};

mod check;
mod wire;

use wire::PeerState;
pub use wire::{fix_crcs, Op};

/// Bytes before and after every registered range.
pub const GUARD: usize = 64;
/// Receive buffers and read sinks each get a slot of this many bytes in their region; the last
/// 8 bytes of a slot are never part of a buffer.
const SLOT: usize = 128;
const RECV_SLOTS: usize = 8;
const READ_SLOTS: usize = 4;
/// Size of the rw region, and of the sink of one large read (after the small read slots): large
/// enough for tagged segments that the link places straight from the socket (cut-through,
/// 8 KiB payload and up, CRC off).
const RW_LEN: usize = 16 * 1024;
const BIG_SINK: usize = 12 * 1024;
/// The window: bytes `WINDOW_OFF..WINDOW_OFF + WINDOW_LEN` of the rw region, at the same
/// registered addresses as through the rw region's own STag.
const WINDOW_OFF: usize = 4096;
const WINDOW_LEN: usize = 1024;
/// "Later": past the RNR grace (500 ms) and the linger time (2 s).
const LATER: Duration = Duration::from_secs(3);
/// Drive rounds without quiescence before the harness calls it a livelock.
const MAX_ROUNDS: usize = 200_000;

/// What a region is for, which decides which of its bytes may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Use {
    /// The peer may write it (REMOTE_WRITE): its registered range may change.
    PeerWritable,
    /// Nothing may change it.
    Untouchable,
    /// Receive buffers: only those that took a Send may change.
    Recv,
    /// RDMA read sinks: only those of reads that got a response may change.
    Sink,
}

/// Region indexes (for [`EngineInbound::stag`] and [`region_va`], and the `sel` fields of
/// [`Op`]): the peer may read and write it.
pub const RW: usize = 0;
/// The peer may only write it.
pub const WO: usize = 1;
/// The peer may only read it.
pub const RO: usize = 2;
/// No remote rights.
pub const LOCAL: usize = 3;
/// All rights, but in another protection zone than the endpoint.
pub const OTHER_PZ: usize = 4;
/// The posted receive buffers (local write only).
pub const RECV: usize = 5;
/// The RDMA read sinks (local write only).
pub const SINK: usize = 6;
/// Not a region: a removed STag.
pub const STALE: usize = 7;

struct RegionSpec {
    name: &'static str,
    len: usize,
    privs: MemPriv,
    other_pz: bool,
    usage: Use,
}

const REGIONS: [RegionSpec; 7] = [
    RegionSpec {
        name: "rw (REMOTE_READ|REMOTE_WRITE)",
        len: RW_LEN,
        privs: MemPriv::ALL,
        other_pz: false,
        usage: Use::PeerWritable,
    },
    RegionSpec {
        name: "wo (REMOTE_WRITE only)",
        len: 256,
        privs: MemPriv::LOCAL_READ.union(MemPriv::REMOTE_WRITE),
        other_pz: false,
        usage: Use::PeerWritable,
    },
    RegionSpec {
        name: "ro (REMOTE_READ only)",
        len: 512,
        privs: MemPriv::LOCAL_READ.union(MemPriv::REMOTE_READ),
        other_pz: false,
        usage: Use::Untouchable,
    },
    RegionSpec {
        name: "local (no remote rights)",
        len: 256,
        privs: MemPriv::LOCAL_READ.union(MemPriv::LOCAL_WRITE),
        other_pz: false,
        usage: Use::Untouchable,
    },
    RegionSpec {
        name: "other-pz (all rights, another PZ)",
        len: 256,
        privs: MemPriv::ALL,
        other_pz: true,
        usage: Use::Untouchable,
    },
    RegionSpec {
        name: "recv (receive buffers)",
        len: SLOT * RECV_SLOTS,
        privs: MemPriv::LOCAL_READ.union(MemPriv::LOCAL_WRITE),
        other_pz: false,
        usage: Use::Recv,
    },
    RegionSpec {
        name: "sink (RDMA read sinks)",
        len: SLOT * READ_SLOTS + BIG_SINK,
        privs: MemPriv::LOCAL_READ.union(MemPriv::LOCAL_WRITE),
        other_pz: false,
        usage: Use::Sink,
    },
];

/// Registered address of region `i`'s first byte (fixed, so inputs replay in any process).
pub fn region_va(i: usize) -> u64 {
    (i as u64 + 1) << 32
}

struct Region {
    spec: &'static RegionSpec,
    mem: FuzzMemory,
    stag: u32,
    /// The pattern every byte of `mem` (guards included) holds before an input.
    pattern: Vec<u8>,
}

impl Region {
    /// The address the engine puts on the wire for byte `off` of the registered range (a read
    /// sink's tagged offset is the real address of its first byte).
    fn real_addr(&self, off: usize) -> u64 {
        self.mem.addr() + (GUARD + off) as u64
    }
}

/// Receive buffer shapes: (offset in the slot, length) pieces.
const RECV_SHAPES: [&[(usize, usize)]; 6] = [
    &[(0, 64)],
    &[(0, 16), (32, 40)],
    &[],
    &[(0, 8)],
    &[(0, 120)],
    &[(0, 10), (16, 10), (40, 80)],
];
/// Read sink shapes.
const SINK_SHAPES: [&[(usize, usize)]; 3] = [&[(0, 120)], &[(0, 50), (64, 56)], &[(8, 16)]];

fn shape_len(shape: &[(usize, usize)]) -> usize {
    shape.iter().map(|p| p.1).sum()
}

/// The state that lives as long as the harness: an IA with the tcp link, two PZs, the regions.
pub struct EngineInbound {
    ia: InterfaceAdapter,
    async_evd: Evd,
    pz: Pz,
    _pz_other: Pz,
    regions: Vec<Region>,
    stale_stag: u32,
    /// The window's STag; None once an input invalidated it (entered again before the next).
    window: Cell<Option<u32>>,
}

/// One posted receive or read: its cookie and where its buffer lies in its region.
struct Posted {
    cookie: u64,
    /// (offset in the region's registered range, length).
    pieces: Vec<(usize, usize)>,
    /// Reads: the size asked for.
    size: u64,
    remote: RmrTriplet,
}

/// What one input did, for tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The endpoint's state after the input (before the harness ended the connection).
    pub state_after_input: Option<EpState>,
    /// The terminal connection event.
    pub end: Option<ConnectionEventKind>,
    /// The cause of the Terminate the connection sent, if it sent one.
    pub terminate_sent: Option<TerminateCause>,
    /// (cookie, status, length) of every completion, in order.
    pub completions: Vec<(u64, DtoStatus, u64)>,
    /// (cookie, immediate value) of every RECV_IMMED completion, in order.
    pub immediates: Vec<(u64, u32)>,
    /// (cookie, STag) of every successful RECEIVE_WITH_INVALIDATE completion, in order.
    pub invalidated: Vec<(u64, u32)>,
    /// Read Responses the connection sent (complete messages).
    pub responses_sent: usize,
    /// Some byte of the peer-writable regions changed.
    pub peer_wrote: bool,
}

impl EngineInbound {
    /// Opens the IA and registers the regions.
    pub fn new() -> Self {
        let (ia, async_evd) =
            InterfaceAdapter::open("tcp:127.0.0.1", 1024).expect("open a tcp IA on 127.0.0.1");
        let pz = ia.pz_create().expect("pz");
        let pz_other = ia.pz_create().expect("pz");
        let mut regions = Vec::new();
        for (i, spec) in REGIONS.iter().enumerate() {
            let total = spec.len + 2 * GUARD;
            let mem = FuzzMemory::allocate(total).expect("allocate a region");
            let region_pz = if spec.other_pz { &pz_other } else { &pz };
            let stag = enter_lmr(
                &ia,
                region_pz,
                &mem,
                GUARD,
                region_va(i),
                spec.len as u64,
                spec.privs,
            )
            .expect("memory table entry");
            let pattern = (0..total)
                .map(|b| {
                    (b as u32)
                        .wrapping_mul(167)
                        .wrapping_add(i as u32 * 59 + 13) as u8
                })
                .map(|b| b ^ 0xA5)
                .collect();
            regions.push(Region {
                spec,
                mem,
                stag,
                pattern,
            });
        }
        // A STag that was valid once: entered and removed again.
        let dead = FuzzMemory::allocate(64).expect("allocate");
        let stale_stag = enter_lmr(&ia, &pz, &dead, 0, region_va(STALE), 64, MemPriv::ALL)
            .expect("memory table entry");
        assert!(remove_lmr(&ia, stale_stag));
        let h = EngineInbound {
            ia,
            async_evd,
            pz,
            _pz_other: pz_other,
            regions,
            stale_stag,
            window: Cell::new(None),
        };
        // Entered last, so that in a fresh process it has STag 9 << 8 | 1.
        h.window_stag();
        h
    }

    /// The window's STag (entering it if an input invalidated it).
    pub fn window_stag(&self) -> u32 {
        if let Some(w) = self.window.get() {
            return w;
        }
        let rw = &self.regions[RW];
        let w = enter_rmr(
            &self.ia,
            &self.pz,
            &rw.mem,
            GUARD + WINDOW_OFF,
            region_va(RW) + WINDOW_OFF as u64,
            WINDOW_LEN as u64,
            MemPriv::REMOTE_READ | MemPriv::REMOTE_WRITE,
        )
        .expect("memory table entry");
        self.window.set(Some(w));
        w
    }

    /// STag of region `i` (0 rw, 1 wo, 2 ro, 3 local, 4 other PZ, 5 receives, 6 sinks), or, for
    /// 7, a removed one.
    pub fn stag(&self, i: usize) -> u32 {
        self.regions.get(i).map_or(self.stale_stag, |r| r.stag)
    }

    /// Runs one input and checks every invariant (panics on a violation).
    pub fn run(&self, data: &[u8]) -> Outcome {
        let control = data.first().copied().unwrap_or(0);
        let setup = data.get(1).copied().unwrap_or(0);
        let initial = data.get(2).copied().unwrap_or(0);
        let rest = data.get(3..).unwrap_or(&[]);
        for r in &self.regions {
            r.mem.copy_in(0, &r.pattern);
        }
        let mut run = Run::new(self, control, setup);
        for k in 0..usize::from(initial & 7) {
            run.post_recv(usize::from(initial >> 3).wrapping_add(k));
        }
        if setup & 0x80 != 0 {
            run.post_read(64, 0x1234_5601, 0x9000, 0);
        }
        run.drive();
        match control & 3 {
            0 => run.wire.extend_from_slice(rest),
            1 => {
                run.wire.extend_from_slice(rest);
                fix_crcs(&mut run.wire);
            }
            _ => run.play_ops(rest),
        }
        run.drive();
        run.check_mid();
        let window = run.window;
        let out = run.finish(control);
        if out.invalidated.iter().any(|&(_, s)| s == window) {
            self.window.set(None); // gone from the table: entered again for the next input
        }
        out
    }
}

impl Drop for EngineInbound {
    fn drop(&mut self) {
        for r in &self.regions {
            remove_lmr(&self.ia, r.stag);
        }
        if let Some(w) = self.window.get() {
            remove_lmr(&self.ia, w);
        }
        let _ = self.ia.close(CloseFlags::Abrupt);
    }
}

thread_local! {
    static HARNESS: RefCell<Option<EngineInbound>> = const { RefCell::new(None) };
}

/// Body of the `engine_inbound` fuzz target (one harness per thread, kept between inputs).
pub fn engine_inbound(data: &[u8]) {
    HARNESS.with(|h| {
        h.borrow_mut()
            .get_or_insert_with(EngineInbound::new)
            .run(data);
    });
}

struct Run<'h> {
    h: &'h EngineInbound,
    /// The window's STag during this input.
    window: u32,
    crc: bool,
    ep: Endpoint,
    srq: Option<Srq>,
    recv_evd: Evd,
    req_evd: Evd,
    conn_evd: Evd,
    conn: FuzzConn,
    peer: Socket,
    chunk: usize,
    srq_mode: bool,
    // Peer -> connection.
    wire: Vec<u8>,
    sent: usize,
    /// How far the stream was fed to `in_dec` (`sent` may jump past it when the connection
    /// shuts its socket: the rest is never read).
    fed: usize,
    peer_fin: bool,
    in_dec: FpduDecoder,
    in_dec_failed: bool,
    /// The peer's Read Requests, in order (the responses must answer a prefix).
    peer_reads: Vec<ReadRequest>,
    /// The peer's RDMA Writes into the writable regions: (STag, TO, payload).
    peer_writes: Vec<(u32, u64, Vec<u8>)>,
    /// The peer's whole Send messages and Read Responses, in order, and the ones in progress:
    /// the n-th successful receive (read) must hold the n-th message (response).
    send_msgs: Vec<Vec<u8>>,
    /// Per entry of `send_msgs`: `Some((immediate, write length))` if that message of QN 0 was
    /// Immediate Data (its entry in `send_msgs` is empty), whose receive completes RECV_IMMED.
    send_immed: Vec<Option<(u32, u32)>>,
    /// Per entry of `send_msgs`: the STag its first segment asked to invalidate (a Send with
    /// Invalidate), as the link reads it.
    send_inv: Vec<Option<u32>>,
    cur_send: Vec<u8>,
    /// The first segment of the Send in progress has been seen, with this STag to invalidate.
    cur_send_inv: Option<Option<u32>>,
    resp_msgs: Vec<Vec<u8>>,
    cur_resp: Vec<u8>,
    gen: PeerState,
    // Connection -> peer.
    /// What the connection sent and was not parsed yet (an incomplete FPDU).
    out_acc: Vec<u8>,
    out_buf: Vec<u8>,
    out_eof: bool,
    terminate: Option<TerminateCause>,
    our_reads_seen: usize,
    resp_idx: usize,
    resp_off: u64,
    // DTOs and events.
    recvs: Vec<Posted>,
    reads: Vec<Posted>,
    done: HashMap<u64, (DtoStatus, u64)>,
    /// Receives that completed RECV_IMMED, with their immediate value.
    immed_done: HashMap<u64, u32>,
    /// Receives that completed RECEIVE_WITH_INVALIDATE successfully, with the STag.
    inval_done: HashMap<u64, u32>,
    outcome: Outcome,
    conn_events: Vec<ConnectionEventKind>,
    freed: bool,
}

const IRD_TABLE: [usize; 4] = [4, 1, 2, 0];
const ORD_TABLE: [usize; 4] = [4, 1, 2, 0];
const CHUNK_TABLE: [usize; 8] = [
    usize::MAX,
    usize::MAX,
    usize::MAX,
    usize::MAX,
    1024,
    100,
    29,
    7,
];

impl<'h> Run<'h> {
    fn new(h: &'h EngineInbound, control: u8, setup: u8) -> Self {
        let crc = control & 1 != 0;
        let ia = &h.ia;
        let recv_evd = ia.evd_create(64, None, EvdFlags::DTO).expect("evd");
        let req_evd = ia.evd_create(64, None, EvdFlags::DTO).expect("evd");
        let conn_evd = ia.evd_create(8, None, EvdFlags::CONNECTION).expect("evd");
        let attr = EpAttr {
            max_recv_dtos: 16,
            max_request_dtos: 16,
            ..EpAttr::default()
        };
        let srq = (control & 0x04 != 0).then(|| {
            ia.srq_create(
                &h.pz,
                &SrqAttr {
                    max_recv_dtos: 16,
                    ..SrqAttr::default()
                },
            )
            .expect("srq")
        });
        let mut ep = ia
            .endpoint(&h.pz)
            .recv_evd(&recv_evd)
            .request_evd(&req_evd)
            .connect_evd(&conn_evd)
            .attr(attr.clone());
        if let Some(s) = &srq {
            ep = ep.srq(s);
        }
        let ep = ep.build().expect("ep");
        let (a, b) = Socket::pair(Domain::UNIX, Type::STREAM.cloexec(), None).expect("socketpair");
        a.set_nonblocking(true).expect("nonblocking");
        b.set_nonblocking(true).expect("nonblocking");
        if control & 0x10 != 0 {
            let _ = a.set_send_buffer_size(2048);
        }
        let hold = control & 0x08 != 0;
        let ird = IRD_TABLE[usize::from(setup & 3)];
        let ord = ORD_TABLE[usize::from((setup >> 2) & 3)];
        // What the link does once MPA is through: the endpoint takes the connection.
        let conn = FuzzConn::establish(&ep, a.into(), crc, hold, ird, ord)
            .expect("the endpoint takes the connection");
        Run {
            h,
            window: h.window_stag(),
            crc,
            ep,
            srq,
            recv_evd,
            req_evd,
            conn_evd,
            conn,
            peer: b,
            chunk: CHUNK_TABLE[usize::from((setup >> 4) & 7)],
            srq_mode: control & 0x04 != 0,
            wire: Vec::new(),
            sent: 0,
            fed: 0,
            peer_fin: false,
            in_dec: FpduDecoder::new(crc),
            in_dec_failed: false,
            peer_reads: Vec::new(),
            peer_writes: Vec::new(),
            send_msgs: Vec::new(),
            send_immed: Vec::new(),
            send_inv: Vec::new(),
            cur_send: Vec::new(),
            cur_send_inv: None,
            resp_msgs: Vec::new(),
            cur_resp: Vec::new(),
            gen: PeerState {
                send_msn: 1,
                read_msn: 1,
                ..PeerState::default()
            },
            out_acc: Vec::new(),
            out_buf: vec![0; 16 * 1024],
            out_eof: false,
            terminate: None,
            our_reads_seen: 0,
            resp_idx: 0,
            resp_off: 0,
            recvs: Vec::new(),
            reads: Vec::new(),
            done: HashMap::new(),
            immed_done: HashMap::new(),
            inval_done: HashMap::new(),
            outcome: Outcome::default(),
            conn_events: Vec::new(),
            freed: false,
        }
    }

    fn region(&self, i: usize) -> &'h Region {
        &self.h.regions[i]
    }

    fn probe(&self) -> FuzzProbe {
        self.conn.probe()
    }

    // --------------------------------------------------------------------------------------------
    // Local actions

    fn post_recv(&mut self, shape: usize) {
        if self.recvs.len() >= RECV_SLOTS || self.freed {
            return;
        }
        let slot = self.recvs.len() * SLOT;
        let pieces: Vec<(usize, usize)> = RECV_SHAPES[shape % RECV_SHAPES.len()]
            .iter()
            .map(|&(o, l)| (slot + o, l))
            .collect();
        let r = self.region(RECV);
        let iov: Vec<LmrTriplet> = pieces
            .iter()
            .map(|&(o, l)| LmrTriplet::new(r.stag, region_va(RECV) + o as u64, l as u64))
            .collect();
        let cookie = 1000 + self.recvs.len() as u64;
        let res = match &self.srq {
            Some(s) => s.post_recv(&iov, cookie),
            None => self.ep.post_recv(&iov, cookie, CompletionFlags::empty()),
        };
        res.expect("post_recv of a valid receive");
        self.recvs.push(Posted {
            cookie,
            pieces,
            size: 0,
            remote: RmrTriplet::default(),
        });
        // A post wakes a connection whose Send waits for a buffer (`wake_peer`, which has no
        // link to go through here).
        self.conn.on_wake();
    }

    /// Posts an RDMA read of `size` bytes into sink shape `shape`; shape 3 is the one large sink
    /// (8 KiB + `size` * 16 bytes), once per input.
    fn post_read(&mut self, size: u8, stag: u32, to: u64, shape: usize) {
        if self.reads.len() >= READ_SLOTS || self.freed {
            return;
        }
        let big = READ_SLOTS * SLOT;
        let (pieces, size) = match shape % 4 {
            3 if !self.reads.iter().any(|p| p.pieces[0].0 == big) => {
                (vec![(big, BIG_SINK)], 8192 + u64::from(size) * 16)
            }
            n => {
                let slot = self.reads.len() * SLOT;
                let shape = SINK_SHAPES[n % SINK_SHAPES.len()];
                let pieces: Vec<(usize, usize)> =
                    shape.iter().map(|&(o, l)| (slot + o, l)).collect();
                (pieces, u64::from(size).min(shape_len(shape) as u64))
            }
        };
        let r = self.region(SINK);
        let iov: Vec<LmrTriplet> = pieces
            .iter()
            .map(|&(o, l)| LmrTriplet::new(r.stag, region_va(SINK) + o as u64, l as u64))
            .collect();
        let cookie = 2000 + self.reads.len() as u64;
        let remote = RmrTriplet::new(stag, to, size);
        match self
            .ep
            .post_rdma_read(&iov, cookie, &remote, CompletionFlags::empty())
        {
            Ok(()) => {}
            // Disconnect pending (graceful) refuses new requests.
            Err(e) => {
                assert_eq!(
                    self.ep.state(),
                    EpState::DisconnectPending,
                    "post_rdma_read: {e}"
                );
                return;
            }
        }
        self.reads.push(Posted {
            cookie,
            pieces,
            size,
            remote,
        });
    }

    /// Writes the stream into the socketpair and lets the connection process it, as the
    /// progress thread would on EPOLLIN/EPOLLOUT, until nothing moves.
    fn drive(&mut self) {
        for _ in 0..MAX_ROUNDS {
            let mut moved = false;
            if self.sent < self.wire.len() && !self.peer_fin {
                // At most ~16 writes for what is pending, so that small pieces stay cheap.
                let step = self.chunk.max((self.wire.len() - self.sent) / 16);
                let end = self.wire.len().min(self.sent.saturating_add(step));
                match self
                    .peer
                    .send_with_flags(&self.wire[self.sent..end], libc::MSG_NOSIGNAL)
                {
                    Ok(n) => {
                        self.note_delivered(self.sent, self.sent + n);
                        self.sent += n;
                        moved |= n > 0;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == ErrorKind::Interrupted => moved = true,
                    // The connection shut its socket: the rest is never read.
                    Err(_) => self.sent = self.wire.len(),
                }
            }
            self.conn.on_ready();
            moved |= self.read_output();
            if !moved {
                self.drain_events();
                return;
            }
        }
        panic!("the connection did not settle after {MAX_ROUNDS} rounds");
    }

    /// Time passes: the RNR grace and the linger time run out.
    fn tick(&mut self) {
        self.conn.on_tick(Instant::now() + LATER);
        self.drive();
    }

    /// The peer sends its FIN.
    fn fin(&mut self) {
        if !self.peer_fin {
            self.peer_fin = true;
            let _ = self.peer.shutdown(std::net::Shutdown::Write);
        }
        self.drive();
    }
}
