//! Fuzz harness body for the tcp link's inbound path, shared by the `engine_inbound` target of
//! `crates/dapl/fuzz` (cargo-fuzz; `scripts/fuzz.sh`, see `docs/fuzzing.md`) and by unit tests
//! that run it over pseudo-random inputs on stable (`cargo test -p dapl fuzzing`). Compiled
//! only for tests and with the `fuzzing` feature; not part of the API.
//!
//! One input is what a peer sends after MPA. The harness builds a tcp connection in the
//! Established phase over an `AF_UNIX` socketpair, with no epoll set and no progress thread
//! behind it (`TcpConn::fuzz_established`), and plays the progress thread itself: it writes the
//! peer's bytes into the socketpair and calls `TcpConn::on_event` / `on_wake` / `on_tick`, the
//! functions the progress thread calls, so everything runs synchronously on the calling thread
//! and nothing sleeps (time passing is an `on_tick` with a later instant). The IA (with the tcp
//! link), its protection zones and memory regions live as long as the harness; each input gets
//! a fresh endpoint, EVDs, SRQ, socketpair and connection.
//!
//! Memory: every region is the middle of a larger allocation, with [`GUARD`] bytes on each
//! side, entered in the IA's memory table directly (the same table LMRs use, at fixed
//! registered addresses so that inputs replay the same in any process). Regions: one the peer
//! may read and write (16 KiB, so that Writes large enough for cut-through placement fit), one
//! it may only write, one it may only read, a local-only one, one in another PZ, one holding the
//! posted receive buffers, one holding the RDMA read sinks (small ones and one of 12 KiB), and a
//! stale STag. Before each input every byte is set to a known pattern.
//!
//! Invariants checked on every input (a failed one panics):
//! - no panic in the link or the engine;
//! - no byte outside the registered ranges changes; the read-only, local-only and other-PZ
//!   regions do not change at all; in the receive region only the buffers of receives that took
//!   a Send may change (a successful receive of `n` bytes only in its first `n`; one completed
//!   by RFC 7306 Immediate Data, the end of an RDMA Write with Immediate Data, not at all), and
//!   in the sink region only the sinks of reads that got a response (and none past the read
//!   length);
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

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{ErrorKind, Read};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iwarp::fpdu::{fpdu_len, split_fpdu};
use iwarp::rdmap::ReadRequest;
use iwarp::terminate::{TerminateCause, TerminateMessage};
use iwarp::{crc, FpduDecoder, FpduEncoder, Segment};
use rustix::event::epoll::EventFlags;
use socket2::{Domain, Socket, Type};

use crate::ep::{Endpoint, EpAttr};
use crate::evd::Evd;
use crate::event::{AsyncKind, ConnectionEventKind, Event};
use crate::ia::InterfaceAdapter;
use crate::link::tcp::{FuzzProbe, TcpConn};
use crate::mem::EntryKind;
use crate::mem::RegionMemory;
use crate::pz::Pz;
use crate::srq::{Srq, SrqAttr};
use crate::types::{
    CloseFlags, CompletionFlags, DtoOp, DtoStatus, EpState, EvdFlags, LmrTriplet, MemPriv,
    RmrTriplet,
};

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
    mem: Arc<RegionMemory>,
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
        let table = &ia.0.memtable;
        let max = ia.0.attr.max_lmrs;
        let mut regions = Vec::new();
        for (i, spec) in REGIONS.iter().enumerate() {
            let total = spec.len + 2 * GUARD;
            let mem = Arc::new(RegionMemory::allocate(total).expect("allocate a region"));
            let pz_id = if spec.other_pz {
                pz_other.0.id
            } else {
                pz.0.id
            };
            let stag = table
                .insert(
                    EntryKind::Lmr,
                    mem.clone(),
                    GUARD,
                    region_va(i),
                    spec.len as u64,
                    pz_id,
                    spec.privs,
                    max,
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
        let dead = Arc::new(RegionMemory::allocate(64).expect("allocate"));
        let stale_stag = table
            .insert(
                EntryKind::Lmr,
                dead,
                0,
                region_va(STALE),
                64,
                pz.0.id,
                MemPriv::ALL,
                max,
            )
            .expect("memory table entry");
        assert!(table.remove(stale_stag));
        EngineInbound {
            ia,
            async_evd,
            pz,
            _pz_other: pz_other,
            regions,
            stale_stag,
        }
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
        run.finish(control)
    }
}

impl Drop for EngineInbound {
    fn drop(&mut self) {
        for r in &self.regions {
            self.ia.0.memtable.remove(r.stag);
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

/// Rewrites the CRC trailer of every whole FPDU in `wire`, so that raw inputs get past the CRC
/// check; stops at the first incomplete frame.
pub fn fix_crcs(wire: &mut [u8]) {
    let mut at = 0;
    while at + 2 <= wire.len() {
        let total = fpdu_len(usize::from(u16::from_be_bytes([wire[at], wire[at + 1]])));
        let Some(frame) = wire.get_mut(at..at + total) else {
            return;
        };
        let covered = total - crc::CRC_LEN;
        let c = crc::to_wire(crc::crc32c(&frame[..covered]));
        frame[covered..].copy_from_slice(&c);
        at += total;
    }
}

/// Bytes of an input, read as fields; zeros once it runs out.
struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn op(&mut self) -> Option<u8> {
        let (&b, rest) = self.data.split_first()?;
        self.data = rest;
        Some(b)
    }

    fn u8(&mut self) -> u8 {
        self.op().unwrap_or(0)
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }
}

/// The operations of modes 2 and 3: one byte, low nibble the kind, high nibble flags, then
/// the kind's fields. Peer operations append FPDUs (framed with the negotiated CRC) to the
/// stream; local operations first deliver what the stream holds, then act.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    /// `len(1) payload`: one Send segment continuing the peer's current message. Flags: 1 not
    /// last, 2 solicited, 4 with Invalidate (STag from the payload), 8 perturb (`d(1)`: MSN or MO
    /// off by `d/2 + 1`).
    Send = 0,
    /// `sel(1) off(2) len(1) payload`: one RDMA Write segment into region `sel % 9` (7: a stale
    /// STag, 8: the STag `u32` that follows) at `off`. Flags: 1 not last, 2 start a new message
    /// even if one is open, 4 `to(8)` follows and replaces the offset, 8 zero-length.
    Write = 1,
    /// `sel(1) off(2) size(2) sink(1)`: RDMA Read Request of region `sel % 9`. Flags: 1 the Read
    /// RTR form instead, 2 perturb the MSN, 4 `to(8)` follows.
    ReadRequest = 2,
    /// `len(1)`: one Read Response segment for our oldest unanswered read, with pattern bytes
    /// (`len` * 64 bytes for the large read). Flags: 1 not last (or, with 8, "last"), 2 wrong
    /// STag, 4 wrong offset, 8 length not clipped to the read.
    ReadResponse = 3,
    /// `layer(1) type(1) code(1)`: a Terminate. Flags: 1 it names a Read Request (carries its
    /// headers), 2 wrong MSN, 4 it carries a Send's DDP header.
    Terminate = 4,
    /// `len(1) bytes`: one FPDU around arbitrary ULPDU bytes.
    RawUlpdu = 5,
    /// `len(1) bytes`: bytes appended as they are.
    RawBytes = 6,
    /// Flips bit `flags & 7` of the last byte written (a CRC trailer, or the pad).
    Corrupt = 7,
    /// `total(2) seg(1) fill(1)`: a whole Send of `total % 2048` bytes in segments of `seg`
    /// bytes (at least a 64th of the total). Flags: 1 solicited, 2 an RFC 7306 Immediate Data
    /// message instead (the end of an RDMA Write with Immediate Data: immediate value
    /// `total << 16 | seg << 8 | fill`, write length `total`), 4 with 2: a 7-byte body.
    SendMessage = 8,
    /// `shape(1)`: post a receive (to the SRQ in SRQ mode).
    PostRecv = 9,
    /// `size(1) stag(4) to(2)`: post an RDMA read of `size` bytes. Flags: sink shape (3: the
    /// large sink, 8 KiB + `size` * 16 bytes, once per input).
    PostRead = 10,
    /// Time passes: RNR grace and linger expire.
    Tick = 11,
    /// Disconnect the endpoint. Flags: 1 graceful.
    Disconnect = 12,
    /// The peer sends its FIN.
    PeerFin = 13,
    /// Deliver what the stream holds now (a read boundary).
    Deliver = 14,
    /// `sel(1) off(2) total(2) seg(1)`: a whole RDMA Write of `total % 2048` pattern bytes in
    /// segments of `seg` bytes (at least a 64th of the total). Flags: 1 large: 8 KiB +
    /// `total % 8192` bytes in segments of `seg` * 64 bytes (0: one segment).
    WriteMessage = 15,
}

/// What the harness, playing a well-behaved peer, would send next.
#[derive(Default)]
struct PeerState {
    send_msn: u32,
    send_mo: u32,
    read_msn: u32,
    /// An open tagged message: (is a Read Response, STag, next TO).
    tagged: Option<(bool, u32, u64)>,
    /// Our reads the peer answered completely, and bytes of the next.
    answered: usize,
    answer_got: u64,
}

struct Run<'h> {
    h: &'h EngineInbound,
    crc: bool,
    ep: Endpoint,
    srq: Option<Srq>,
    recv_evd: Evd,
    req_evd: Evd,
    conn_evd: Evd,
    conn: Arc<TcpConn>,
    peer: Socket,
    chunk: usize,
    srq_mode: bool,
    // Peer -> connection.
    wire: Vec<u8>,
    sent: usize,
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
    cur_send: Vec<u8>,
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
        let ep = match &srq {
            Some(s) => ia.ep_create_with_srq(
                &h.pz,
                Some(&recv_evd),
                Some(&req_evd),
                Some(&conn_evd),
                s,
                Some(&attr),
            ),
            None => ia.ep_create(
                &h.pz,
                Some(&recv_evd),
                Some(&req_evd),
                Some(&conn_evd),
                Some(&attr),
            ),
        }
        .expect("ep");
        let (a, b) = Socket::pair(Domain::UNIX, Type::STREAM.cloexec(), None).expect("socketpair");
        a.set_nonblocking(true).expect("nonblocking");
        b.set_nonblocking(true).expect("nonblocking");
        if control & 0x10 != 0 {
            let _ = a.set_send_buffer_size(2048);
        }
        let hold = control & 0x08 != 0;
        let ird = IRD_TABLE[usize::from(setup & 3)];
        let ord = ORD_TABLE[usize::from((setup >> 2) & 3)];
        let conn = TcpConn::fuzz_established(a, crc, hold, &ep.0.qp);
        // What the link does once MPA is through: the endpoint takes the connection.
        let state = if hold {
            EpState::PassiveConnectionPending
        } else {
            EpState::ActiveConnectionPending
        };
        let remote = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let qp = &ep.0.qp;
        let attempt = qp.begin_attempt(state, Some(remote), Some(1));
        let as_dyn: Arc<dyn crate::engine::port::Connection> = conn.clone();
        assert!(qp.established(attempt, as_dyn, ird, ord, remote));
        qp.report_established(Vec::new());
        Run {
            h,
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
            peer_fin: false,
            in_dec: FpduDecoder::new(crc),
            in_dec_failed: false,
            peer_reads: Vec::new(),
            peer_writes: Vec::new(),
            send_msgs: Vec::new(),
            send_immed: Vec::new(),
            cur_send: Vec::new(),
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
            outcome: Outcome::default(),
            conn_events: Vec::new(),
            freed: false,
        }
    }

    fn region(&self, i: usize) -> &'h Region {
        &self.h.regions[i]
    }

    fn probe(&self) -> FuzzProbe {
        self.conn.fuzz_probe()
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
            self.conn.on_event(EventFlags::IN | EventFlags::OUT);
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

    // --------------------------------------------------------------------------------------------
    // Peer operations (modes 2 and 3)

    fn frame(&mut self, seg: &Segment<'_>) {
        FpduEncoder::new(self.crc)
            .encode_segment(seg, &mut self.wire)
            .expect("a generated segment frames");
    }

    fn target(&self, sel: u8, r: &mut Reader<'_>) -> (u32, u64) {
        match usize::from(sel) % 9 {
            i @ 0..=6 => (self.region(i).stag, region_va(i)),
            STALE => (self.h.stale_stag, region_va(STALE)),
            _ => (r.u32(), 0),
        }
    }

    fn play_ops(&mut self, ops: &[u8]) {
        let mut r = Reader { data: ops };
        while let Some(op) = r.op() {
            let flags = op >> 4;
            match op & 0x0F {
                0 => self.op_send(flags, &mut r),
                1 => self.op_write(flags, &mut r),
                2 => self.op_read_request(flags, &mut r),
                3 => self.op_read_response(flags, &mut r),
                4 => self.op_terminate(flags, &mut r),
                5 => {
                    let n = usize::from(r.u8());
                    let bytes = r.bytes(n);
                    FpduEncoder::new(self.crc)
                        .encode(bytes, &[], &mut self.wire)
                        .expect("short ULPDU frames");
                }
                6 => {
                    let n = usize::from(r.u8());
                    self.wire.extend_from_slice(r.bytes(n));
                }
                7 => {
                    if let Some(b) = self.wire.last_mut() {
                        *b ^= 1 << (flags & 7);
                    }
                }
                8 => self.op_send_message(flags, &mut r),
                9 => {
                    let shape = usize::from(r.u8());
                    self.drive();
                    self.post_recv(shape);
                    self.drive();
                }
                10 => {
                    let (size, stag, to) = (r.u8(), r.u32(), u64::from(r.u16()));
                    self.drive();
                    self.post_read(size, stag, to, usize::from(flags));
                    self.drive();
                }
                11 => {
                    self.drive();
                    self.tick();
                }
                12 => {
                    self.drive();
                    if !self.freed {
                        let how = if flags & 1 != 0 {
                            CloseFlags::Graceful
                        } else {
                            CloseFlags::Abrupt
                        };
                        self.ep.disconnect(how).expect("disconnect");
                    }
                    self.drive();
                }
                13 => {
                    self.drive();
                    self.fin();
                }
                14 => self.drive(),
                _ => self.op_write_message(flags, &mut r),
            }
        }
    }

    fn op_send(&mut self, flags: u8, r: &mut Reader<'_>) {
        let n = usize::from(r.u8());
        let payload = r.bytes(n);
        let last = flags & 1 == 0;
        let (mut msn, mut mo) = (self.gen.send_msn, self.gen.send_mo);
        if flags & 8 != 0 {
            let d = r.u8();
            if d & 1 != 0 {
                msn = msn.wrapping_add(u32::from(d >> 1) + 1);
            } else {
                mo = mo.wrapping_add(u32::from(d >> 1) + 1);
            }
        }
        let invalidate_stag = (flags & 4 != 0).then(|| {
            let mut b = [0u8; 4];
            for (d, s) in b.iter_mut().zip(payload) {
                *d = *s;
            }
            u32::from_be_bytes(b)
        });
        self.frame(&Segment::Send {
            last,
            msn,
            mo,
            solicited: flags & 2 != 0,
            invalidate_stag,
            payload,
        });
        if last {
            self.gen.send_msn = self.gen.send_msn.wrapping_add(1);
            self.gen.send_mo = 0;
        } else {
            self.gen.send_mo = self.gen.send_mo.wrapping_add(n as u32);
        }
    }

    fn op_send_message(&mut self, flags: u8, r: &mut Reader<'_>) {
        if flags & 2 != 0 {
            let (total, seg, fill) = (r.u16(), r.u8(), r.u8());
            let mut body = Vec::with_capacity(8);
            body.extend_from_slice(
                &(u32::from(total) << 16 | u32::from(seg) << 8 | u32::from(fill)).to_be_bytes(),
            );
            body.extend_from_slice(&u32::from(total).to_be_bytes());
            if flags & 4 != 0 {
                body.pop(); // malformed: Immediate Data is exactly 8 bytes
            }
            let opcode = if flags & 1 != 0 { 0x49 } else { 0x48 };
            let mut ulpdu = vec![0x41, opcode, 0, 0, 0, 0, 0, 0, 0, 0];
            ulpdu.extend_from_slice(&self.gen.send_msn.to_be_bytes());
            ulpdu.extend_from_slice(&[0; 4]);
            ulpdu.extend_from_slice(&body);
            FpduEncoder::new(self.crc)
                .encode(&ulpdu, &[], &mut self.wire)
                .expect("short ULPDU frames");
            self.gen.send_msn = self.gen.send_msn.wrapping_add(1);
            self.gen.send_mo = 0;
            return;
        }
        let total = usize::from(r.u16() % 2048);
        // At most 64 segments: long runs of tiny FPDUs only cost time.
        let seg = usize::from(r.u8()).max(total / 64).max(1);
        let fill = r.u8();
        let payload: Vec<u8> = (0..total).map(|i| fill.wrapping_add(i as u8)).collect();
        let mut off = 0;
        loop {
            let end = (off + seg).min(total);
            let last = end == total;
            self.frame(&Segment::Send {
                last,
                msn: self.gen.send_msn,
                mo: self.gen.send_mo,
                solicited: flags & 1 != 0,
                invalidate_stag: None,
                payload: &payload[off..end],
            });
            if last {
                self.gen.send_msn = self.gen.send_msn.wrapping_add(1);
                self.gen.send_mo = 0;
                return;
            }
            self.gen.send_mo = self.gen.send_mo.wrapping_add((end - off) as u32);
            off = end;
        }
    }

    fn op_write(&mut self, flags: u8, r: &mut Reader<'_>) {
        let sel = r.u8();
        let (stag, base) = self.target(sel, r);
        let off = u64::from(r.u16());
        let n = usize::from(r.u8());
        let to = if flags & 4 != 0 {
            u64::from(r.u32()) << 32 | u64::from(r.u32())
        } else {
            base.wrapping_add(off)
        };
        let payload = if flags & 8 != 0 { &[][..] } else { r.bytes(n) };
        let (stag, to) = match self.gen.tagged {
            Some((false, s, next)) if flags & 2 == 0 => (s, next),
            _ => (stag, to),
        };
        let last = flags & 1 == 0;
        self.frame(&Segment::Write {
            last,
            stag,
            to,
            payload,
        });
        self.gen.tagged = (!last).then(|| (false, stag, to.wrapping_add(payload.len() as u64)));
    }

    fn op_write_message(&mut self, flags: u8, r: &mut Reader<'_>) {
        let sel = r.u8();
        let (stag, base) = self.target(sel, r);
        let to = base.wrapping_add(u64::from(r.u16()));
        let (total, seg) = (r.u16(), r.u8());
        let (total, seg) = if flags & 1 != 0 {
            // Large: 8-16 KiB, in segments of `seg` * 64 bytes (0: one segment).
            let total = 8192 + usize::from(total % 8192);
            let seg = if seg == 0 {
                total
            } else {
                usize::from(seg) * 64
            };
            (total, seg)
        } else {
            (usize::from(total % 2048), usize::from(seg))
        };
        let seg = seg.max(total / 64).max(1);
        let payload: Vec<u8> = (0..total).map(|i| (i as u8) ^ 0x3C).collect();
        let mut off = 0;
        loop {
            let end = (off + seg).min(total);
            let last = end == total;
            self.frame(&Segment::Write {
                last,
                stag,
                to: to.wrapping_add(off as u64),
                payload: &payload[off..end],
            });
            if last {
                break;
            }
            off = end;
        }
        self.gen.tagged = None;
    }

    fn op_read_request(&mut self, flags: u8, r: &mut Reader<'_>) {
        let sel = r.u8();
        let (stag, base) = self.target(sel, r);
        let off = u64::from(r.u16());
        let size = u32::from(r.u16());
        let sink = 0x5100 | u32::from(r.u8());
        let to = if flags & 4 != 0 {
            u64::from(r.u32()) << 32 | u64::from(r.u32())
        } else {
            base.wrapping_add(off)
        };
        let mut msn = self.gen.read_msn;
        if flags & 2 != 0 {
            msn = msn.wrapping_add(1 + u32::from(r.u8()));
        }
        let seg = if flags & 1 != 0 {
            Segment::read_rtr(msn)
        } else {
            Segment::ReadRequest {
                msn,
                request: ReadRequest {
                    sink_stag: sink,
                    sink_to: u64::from(sink) << 20,
                    size,
                    source_stag: stag,
                    source_to: to,
                },
            }
        };
        self.frame(&seg);
        self.gen.read_msn = self.gen.read_msn.wrapping_add(1);
    }

    fn op_read_response(&mut self, flags: u8, r: &mut Reader<'_>) {
        let (stag, to0, size) = match self.reads.get(self.gen.answered) {
            Some(p) => (
                self.region(SINK).stag,
                self.region(SINK).real_addr(p.pieces[0].0),
                p.size,
            ),
            None => (self.region(SINK).stag, self.region(SINK).real_addr(0), 0),
        };
        // For the large read, lengths count in 64-byte units.
        let n = u64::from(r.u8()) * if size > 255 { 64 } else { 1 };
        let got = self.gen.answer_got;
        let len = if flags & 8 != 0 {
            n
        } else {
            n.min(size.saturating_sub(got))
        };
        let last = if flags & 8 != 0 {
            flags & 1 != 0
        } else {
            flags & 1 == 0 || got + len == size
        };
        let stag = if flags & 2 != 0 { stag ^ 0x100 } else { stag };
        let to = to0.wrapping_add(got) ^ u64::from(flags & 4);
        let payload: Vec<u8> = (0..len).map(|i| (got + i) as u8 ^ 0x5A).collect();
        self.frame(&Segment::ReadResponse {
            last,
            stag,
            to,
            payload: &payload,
        });
        if last {
            self.gen.answered += 1;
            self.gen.answer_got = 0;
        } else {
            self.gen.answer_got += len;
        }
    }

    fn op_terminate(&mut self, flags: u8, r: &mut Reader<'_>) {
        let cause = TerminateCause::from_wire(r.u8(), r.u8(), r.u8());
        let msn = if flags & 2 != 0 { 2 } else { 1 };
        let failed = if flags & 1 != 0 {
            Segment::ReadRequest {
                msn: 1,
                request: ReadRequest {
                    sink_stag: 0x0101,
                    sink_to: 0,
                    size: 8,
                    source_stag: 0x0202,
                    source_to: 0,
                },
            }
            .to_ulpdu()
        } else {
            Segment::send_rtr(1).to_ulpdu()
        }
        .expect("emit");
        let message = if flags & 5 != 0 {
            TerminateMessage::for_failed_segment(cause, &failed)
        } else {
            TerminateMessage::header_less(cause)
        };
        self.frame(&Segment::Terminate { msn, message });
    }

    fn fin(&mut self) {
        if !self.peer_fin {
            self.peer_fin = true;
            let _ = self.peer.shutdown(std::net::Shutdown::Write);
        }
        self.drive();
    }

    // --------------------------------------------------------------------------------------------
    // Checks

    /// Bytes `a..b` of the stream reached the connection: note the peer's Read Requests.
    fn note_delivered(&mut self, a: usize, b: usize) {
        if self.in_dec_failed {
            return;
        }
        self.in_dec.feed(&self.wire[a..b]);
        loop {
            match self.in_dec.next_ulpdu() {
                Ok(Some(u)) => match Segment::parse(u) {
                    Ok(Segment::ReadRequest { request, .. }) => self.peer_reads.push(request),
                    Ok(Segment::Write {
                        stag, to, payload, ..
                    }) if !payload.is_empty()
                        && [RW, WO].iter().any(|&i| self.h.regions[i].stag == stag) =>
                    {
                        self.peer_writes.push((stag, to, payload.to_vec()));
                    }
                    Ok(Segment::Send { last, payload, .. }) => {
                        self.cur_send.extend_from_slice(payload);
                        if last {
                            self.send_msgs.push(std::mem::take(&mut self.cur_send));
                            self.send_immed.push(None);
                        }
                    }
                    Ok(Segment::ImmediateData { data, .. }) => {
                        let word = |i: usize| {
                            u32::from_be_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]])
                        };
                        self.send_msgs.push(Vec::new());
                        self.send_immed.push(Some((word(0), word(4))));
                    }
                    Ok(Segment::ReadResponse { last, payload, .. }) => {
                        self.cur_resp.extend_from_slice(payload);
                        if last {
                            self.resp_msgs.push(std::mem::take(&mut self.cur_resp));
                        }
                    }
                    _ => {}
                },
                Ok(None) => return,
                Err(_) => {
                    self.in_dec_failed = true;
                    return;
                }
            }
        }
    }

    /// Reads what the connection sent and checks it. True if anything came.
    fn read_output(&mut self) -> bool {
        let mut buf = std::mem::take(&mut self.out_buf);
        let moved = self.read_output_into(&mut buf);
        self.out_buf = buf;
        moved
    }

    fn read_output_into(&mut self, buf: &mut [u8]) -> bool {
        let mut moved = false;
        loop {
            match (&self.peer).read(buf) {
                Ok(0) => {
                    if !self.out_eof {
                        self.out_eof = true;
                        moved = true;
                    }
                    return moved;
                }
                Ok(n) => {
                    assert!(!self.out_eof, "bytes after EOF");
                    moved = true;
                    self.out_acc.extend_from_slice(&buf[..n]);
                    self.parse_output();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return moved,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // Reset by a kill with data unread: nothing more will come.
                Err(_) => {
                    self.out_eof = true;
                    return true;
                }
            }
        }
    }

    /// Splits and checks the complete FPDUs the connection sent.
    fn parse_output(&mut self) {
        let mut at = 0;
        while let Some((range, total)) =
            split_fpdu(&self.out_acc[at..], false).expect("framing without CRC cannot fail")
        {
            let frame = &self.out_acc[at..at + total];
            let ulpdu = frame[range].to_vec();
            let crc_ok = !self.crc || split_fpdu(frame, true).is_ok();
            assert!(crc_ok, "the connection sent an FPDU with a bad CRC");
            self.check_sent(&ulpdu);
            at += total;
        }
        self.out_acc.drain(..at);
    }

    fn check_sent(&mut self, ulpdu: &[u8]) {
        let seg = Segment::parse(ulpdu)
            .unwrap_or_else(|e| panic!("the connection sent a segment that does not parse: {e}"));
        assert!(
            self.terminate.is_none(),
            "the connection sent {seg:?} after its Terminate"
        );
        match seg {
            Segment::ReadRequest { msn, request } => {
                let i = self.our_reads_seen;
                let p = self
                    .reads
                    .get(i)
                    .unwrap_or_else(|| panic!("Read Request {request:?} that nobody posted"));
                assert_eq!(msn, i as u32 + 1, "Read Request MSN");
                let sink = self.region(SINK);
                assert_eq!(
                    request,
                    ReadRequest {
                        sink_stag: sink.stag,
                        sink_to: sink.real_addr(p.pieces[0].0),
                        size: p.size as u32,
                        source_stag: p.remote.rmr_context,
                        source_to: p.remote.virtual_address,
                    },
                    "Read Request {i} differs from the posted read"
                );
                self.our_reads_seen += 1;
            }
            Segment::ReadResponse {
                last,
                stag,
                to,
                payload,
            } => {
                let req = *self.peer_reads.get(self.resp_idx).unwrap_or_else(|| {
                    panic!(
                        "Read Response {} with no Read Request for it",
                        self.resp_idx
                    )
                });
                assert_eq!(stag, req.sink_stag, "Read Response STag");
                assert_eq!(
                    Some(to),
                    req.sink_to.checked_add(self.resp_off),
                    "Read Response TO"
                );
                let end = self.resp_off + payload.len() as u64;
                assert!(
                    end <= u64::from(req.size),
                    "Read Response longer than asked"
                );
                assert!(
                    !last || end == u64::from(req.size),
                    "last Read Response segment ends at {end} of {}",
                    req.size
                );
                // The read-only region never changes: its bytes must come back exactly.
                let ro = self.region(RO);
                if req.source_stag == ro.stag && !payload.is_empty() {
                    let at = req.source_to - region_va(RO) + self.resp_off;
                    let at = GUARD + at as usize;
                    assert_eq!(
                        payload,
                        &ro.pattern[at..at + payload.len()],
                        "Read Response bytes differ from the region"
                    );
                }
                if last {
                    self.resp_idx += 1;
                    self.resp_off = 0;
                    self.outcome.responses_sent += 1;
                } else {
                    self.resp_off = end;
                }
            }
            Segment::Terminate { message, .. } => {
                self.terminate = Some(message.cause);
                self.outcome.terminate_sent = Some(message.cause);
            }
            other => panic!("the connection sent {other:?}, which nobody posted"),
        }
    }

    fn drain_events(&mut self) {
        for (evd, recv) in [(&self.recv_evd, true), (&self.req_evd, false)] {
            while let Some(ev) = evd.dequeue().expect("dequeue") {
                let Event::Dto(d) = ev else {
                    panic!("a DTO EVD got {ev:?}")
                };
                assert!(d.ep == self.ep, "completion for another endpoint");
                if recv && d.operation == DtoOp::RecvImmed {
                    assert_eq!(d.status, DtoStatus::Success, "RECV_IMMED is a success");
                    let imm = d.immediate.expect("RECV_IMMED carries the immediate data");
                    self.immed_done.insert(d.cookie, imm);
                    self.outcome.immediates.push((d.cookie, imm));
                } else {
                    assert_eq!(
                        d.operation,
                        if recv {
                            DtoOp::Receive
                        } else {
                            DtoOp::RdmaRead
                        }
                    );
                    assert_eq!(d.immediate, None, "immediate data on a {:?}", d.operation);
                }
                let posted = if recv { &self.recvs } else { &self.reads };
                assert!(
                    posted.iter().any(|p| p.cookie == d.cookie),
                    "completion of DTO {} that was never posted",
                    d.cookie
                );
                let prev = self.done.insert(d.cookie, (d.status, d.transferred_length));
                assert!(
                    prev.is_none(),
                    "DTO {} completed twice: {prev:?}, then {:?}",
                    d.cookie,
                    d.status
                );
                self.outcome
                    .completions
                    .push((d.cookie, d.status, d.transferred_length));
            }
        }
        while let Some(ev) = self.conn_evd.dequeue().expect("dequeue") {
            let Event::Connection(c) = ev else {
                panic!("the connection EVD got {ev:?}")
            };
            self.conn_events.push(c.kind);
            match self.conn_events.as_slice() {
                [ConnectionEventKind::Established] => {}
                [ConnectionEventKind::Established, end] => {
                    assert!(
                        matches!(
                            end,
                            ConnectionEventKind::Broken | ConnectionEventKind::Disconnected
                        ),
                        "connection ended with {end:?}"
                    );
                    self.outcome.end = Some(*end);
                }
                events => panic!("connection events {events:?}"),
            }
        }
        while let Some(ev) = self.h.async_evd.dequeue().expect("dequeue") {
            let Event::Async(a) = ev else {
                panic!("the async EVD got {ev:?}")
            };
            assert!(
                matches!(a.kind, AsyncKind::EpBroken | AsyncKind::SrqLowWatermark),
                "async event {:?}",
                a.kind
            );
        }
    }

    /// After the input: the endpoint and the connection agree.
    fn check_mid(&mut self) {
        let state = self.ep.state();
        let probe = self.probe();
        self.outcome.state_after_input = Some(state);
        match state {
            EpState::Connected | EpState::DisconnectPending => {
                assert_eq!(
                    probe.phase, "Established",
                    "endpoint {state:?}, connection {probe:?}"
                );
                assert!(!probe.tx_failed && !probe.tx_shut, "{probe:?}");
                assert!(
                    self.terminate.is_none(),
                    "CONNECTED after sending a Terminate"
                );
                assert_eq!(self.conn_events, [ConnectionEventKind::Established]);
            }
            EpState::Disconnected => {
                assert_ne!(
                    probe.phase, "Established",
                    "endpoint DISCONNECTED, connection {probe:?}"
                );
                let (_, recvs, reqs) = self.ep.get_status().expect("status");
                assert!(!recvs && !reqs, "DISCONNECTED with DTOs still queued");
                assert_eq!(self.conn_events.len(), 2, "{:?}", self.conn_events);
            }
            s => panic!("endpoint in state {s:?} after the input"),
        }
        if self.terminate.is_some() {
            assert_eq!(self.outcome.end, Some(ConnectionEventKind::Broken));
        }
    }

    /// Ends the connection the way `control` says, frees everything, checks the rest.
    fn finish(mut self, control: u8) -> Outcome {
        if control & 0x80 != 0 {
            self.tick();
        }
        match (control >> 5) & 3 {
            0 => {
                self.ep.disconnect(CloseFlags::Abrupt).expect("disconnect");
            }
            1 => self.fin(),
            2 => self.free_ep(),
            _ => {
                self.ep
                    .disconnect(CloseFlags::Graceful)
                    .expect("disconnect");
            }
        }
        self.drive();
        self.tick();
        self.free_ep();
        self.tick();
        self.drive();
        let srq_left = match self.srq.take() {
            Some(s) => {
                let left = s.query().expect("srq query").available_dto_count;
                s.free().expect("free the SRQ");
                left
            }
            None => 0,
        };
        self.drain_events();
        let probe = self.probe();
        assert_eq!(probe.phase, "Dead", "connection after teardown: {probe:?}");
        assert_eq!(
            self.conn_events.len(),
            2,
            "events after teardown: {:?}",
            self.conn_events
        );
        self.check_dtos(srq_left);
        self.check_memory();
        for evd in [&self.recv_evd, &self.req_evd, &self.conn_evd] {
            evd.free().expect("free an EVD");
        }
        assert_eq!(
            Arc::strong_count(&self.conn),
            1,
            "the connection is still referenced after teardown"
        );
        std::mem::take(&mut self.outcome)
    }

    fn free_ep(&mut self) {
        if !self.freed {
            self.freed = true;
            self.ep.free().expect("free the endpoint");
            self.drive();
        }
    }

    /// Completion rules over the posted receives and reads. In posting order, statuses must
    /// read `Success* X? Flushed* none*`: successes first (FIFO consumption), then at most one
    /// that was cut short (a receive too short for its Send, a read the peer refused, or the
    /// buffer held when the connection ended), then flushes, then (SRQ only) receives never
    /// taken, which stay on the SRQ.
    fn check_dtos(&self, srq_left: usize) {
        let mut never = 0;
        for (what, list) in [("receive", &self.recvs), ("read", &self.reads)] {
            // 0: successes so far; 1: past the first failure; 2: past the first never-completed.
            let mut stage = 0;
            for p in list {
                let c = p.cookie;
                match self.done.get(&c).copied() {
                    Some((DtoStatus::Success, len)) => {
                        assert_eq!(
                            stage, 0,
                            "{what} {c} succeeded after an earlier one did not"
                        );
                        if what == "read" {
                            assert_eq!(len, p.size, "read {c}: transferred length");
                        } else if self.immed_done.contains_key(&c) {
                            // The write's length: nothing was placed in the receive buffer.
                        } else {
                            assert!(len as usize <= shape_total(&p.pieces), "receive {c}: {len}");
                        }
                    }
                    Some((s, _)) => {
                        let cut_short = match what {
                            "receive" => s == DtoStatus::LocalLength,
                            _ => s == DtoStatus::RemoteAccess,
                        };
                        assert!(
                            s == DtoStatus::Flushed || cut_short,
                            "{what} {c} completed with {s:?}"
                        );
                        assert!(
                            stage == 0 || (stage == 1 && s == DtoStatus::Flushed),
                            "{what} {c} completed {s:?} out of order"
                        );
                        stage = 1;
                    }
                    None => {
                        assert!(
                            what == "receive" && self.srq_mode,
                            "{what} {c} never completed"
                        );
                        stage = 2;
                        never += 1;
                    }
                }
            }
        }
        assert_eq!(
            never, srq_left,
            "receives that never completed vs. receives left on the SRQ"
        );
    }

    /// Which bytes of a receive or sink list may have changed: the successes' first `len`
    /// bytes, and all of the first one that completed otherwise (it may have been cut short;
    /// for a read, only up to the read length).
    fn allowed_ranges(&self, list: &[Posted], is_read: bool) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut partial_left = true;
        for p in list {
            let limit = match self.done.get(&p.cookie) {
                Some((DtoStatus::Success, _)) if self.immed_done.contains_key(&p.cookie) => 0,
                Some((DtoStatus::Success, len)) => *len as usize,
                Some(_) if partial_left => {
                    partial_left = false;
                    if is_read {
                        p.size as usize
                    } else {
                        usize::MAX
                    }
                }
                _ => 0,
            };
            let mut left = limit;
            for &(o, l) in &p.pieces {
                let k = l.min(left);
                if k > 0 {
                    out.push((o, k));
                }
                left -= k;
            }
        }
        out
    }

    /// The bytes of region `i` at `pieces`, up to `len` of them.
    fn gather(&self, i: usize, pieces: &[(usize, usize)], len: usize) -> Vec<u8> {
        let mem = &self.region(i).mem;
        let mut out = Vec::with_capacity(len);
        for &(o, l) in pieces {
            let k = l.min(len - out.len());
            let at = out.len();
            out.resize(at + k, 0);
            mem.copy_out(GUARD + o, &mut out[at..]);
        }
        out
    }

    /// Successful receives and reads hold exactly the peer's messages, in order (a receive
    /// taken by Immediate Data reports its value and write length instead).
    fn check_contents(&self) {
        for (what, list, msgs, immed, region) in [
            (
                "receive",
                &self.recvs,
                &self.send_msgs,
                &self.send_immed[..],
                RECV,
            ),
            ("read", &self.reads, &self.resp_msgs, &[][..], SINK),
        ] {
            for (n, p) in list.iter().enumerate() {
                let Some(&(DtoStatus::Success, len)) = self.done.get(&p.cookie) else {
                    break; // successes are a prefix (check_dtos)
                };
                let msg = msgs.get(n).unwrap_or_else(|| {
                    panic!(
                        "{what} {} succeeded, but the peer sent only {} messages",
                        p.cookie,
                        msgs.len()
                    )
                });
                let got_immed = self.immed_done.get(&p.cookie).copied();
                if let Some(&Some((imm, write_len))) = immed.get(n) {
                    assert_eq!(
                        (got_immed, len),
                        (Some(imm), u64::from(write_len)),
                        "{what} {}: message {n} was Immediate Data",
                        p.cookie
                    );
                    continue; // its buffer must not change (check_memory)
                }
                assert_eq!(
                    got_immed, None,
                    "{what} {}: RECV_IMMED for a Send",
                    p.cookie
                );
                assert_eq!(len, msg.len() as u64, "{what} {}: length", p.cookie);
                assert!(
                    self.gather(region, &p.pieces, msg.len()) == *msg,
                    "{what} {}: the buffer does not hold message {n}",
                    p.cookie
                );
            }
        }
    }

    /// The RDMA Write whose FPDU the peer had started but not finished when the input ended:
    /// (STag, TO, the payload bytes sent). Without CRC the link places such a segment's bytes as
    /// they arrive (cut-through), so they may be in memory already.
    fn partial_write(&self) -> Option<(u32, u64, &[u8])> {
        if self.in_dec_failed {
            return None;
        }
        let tail = &self.wire[self.sent - self.in_dec.buffered_len()..self.sent];
        let ulpdu_len = usize::from(u16::from_be_bytes([*tail.first()?, *tail.get(1)?]));
        let header = tail.get(2..2 + iwarp::ddp::TAGGED_HEADER_LEN)?;
        let Ok(Segment::Write { stag, to, .. }) = Segment::parse(header) else {
            return None;
        };
        let end = tail.len().min(2 + ulpdu_len);
        Some((stag, to, &tail[2 + header.len()..end]))
    }

    fn check_memory(&mut self) {
        self.check_contents();
        let partial = self.partial_write().map(|(s, t, p)| (s, t, p.to_vec()));
        let recv_ok = self.allowed_ranges(&self.recvs, false);
        let sink_ok = self.allowed_ranges(&self.reads, true);
        let mut actual = Vec::new();
        for (i, r) in self.h.regions.iter().enumerate() {
            actual.resize(r.pattern.len(), 0);
            r.mem.copy_out(0, &mut actual);
            if actual == r.pattern {
                continue;
            }
            let may: &[(usize, usize)] = match r.spec.usage {
                Use::PeerWritable => &[(0, r.spec.len)],
                Use::Untouchable => &[],
                Use::Recv => &recv_ok,
                Use::Sink => &sink_ok,
            };
            for (at, (a, p)) in actual.iter().zip(&r.pattern).enumerate() {
                if a == p {
                    continue;
                }
                let inside = at
                    .checked_sub(GUARD)
                    .filter(|&o| o < r.spec.len)
                    .is_some_and(|o| may.iter().any(|&(s, l)| o >= s && o < s + l));
                assert!(
                    inside,
                    "byte {at} of region {i} {} changed ({p:#04x} -> {a:#04x}); {}",
                    r.spec.name,
                    if at < GUARD || at >= GUARD + r.spec.len {
                        "it is a guard byte outside the registered range"
                    } else {
                        "the peer had no right to it"
                    }
                );
                if r.spec.usage == Use::PeerWritable {
                    // Some Write into this region put this very byte here.
                    let addr = region_va(i) + (at - GUARD) as u64;
                    let writes = self.peer_writes.iter().map(|(s, t, p)| (*s, *t, &p[..]));
                    let partial = partial.as_ref().map(|(s, t, p)| (*s, *t, &p[..]));
                    let explained = writes.chain(partial).any(|(stag, to, pay)| {
                        stag == r.stag
                            && addr
                                .checked_sub(to)
                                .and_then(|d| pay.get(usize::try_from(d).ok()?))
                                == Some(a)
                    });
                    assert!(
                        explained,
                        "byte {at} of region {i} {} changed to {a:#04x}, which no Write put there",
                        r.spec.name
                    );
                    self.outcome.peer_wrote = true;
                }
            }
        }
    }
}

fn shape_total(pieces: &[(usize, usize)]) -> usize {
    pieces.iter().map(|p| p.1).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use iwarp::fuzzing::XorShift;
    use iwarp::terminate::{DdpTaggedErrorCode, DdpUntaggedErrorCode, RdmapErrorCode};

    /// Control bytes: operations mode (CRC on), own receive queue, abrupt disconnect at the end.
    const OPS_CRC: u8 = 3;

    fn input(control: u8, setup: u8, initial: u8, ops: &[u8]) -> Vec<u8> {
        let mut v = vec![control, setup, initial];
        v.extend_from_slice(ops);
        v
    }

    /// A valid stream of real segments (for the raw modes), with the harness's STags.
    fn valid_stream(h: &EngineInbound, rng: &mut XorShift, crc: bool) -> Vec<u8> {
        let enc = FpduEncoder::new(crc);
        let mut wire = Vec::new();
        let mut send_msn = 1;
        let mut read_msn = 1;
        for _ in 0..1 + rng.below(6) {
            let n = rng.below(80);
            let payload = rng.bytes(n);
            let region = rng.below(8);
            let off = rng.below(1100) as u64;
            let seg = match rng.below(6) {
                0 => {
                    send_msn += 1;
                    Segment::Send {
                        last: true,
                        msn: send_msn - 1,
                        mo: 0,
                        solicited: rng.below(2) == 0,
                        invalidate_stag: None,
                        payload: &payload,
                    }
                }
                1 | 2 => Segment::Write {
                    last: true,
                    stag: h.stag(region),
                    to: region_va(region) + off,
                    payload: &payload,
                },
                3 => {
                    read_msn += 1;
                    Segment::ReadRequest {
                        msn: read_msn - 1,
                        request: ReadRequest {
                            sink_stag: 7,
                            sink_to: 0,
                            size: rng.below(300) as u32,
                            source_stag: h.stag(region),
                            source_to: region_va(region) + off,
                        },
                    }
                }
                4 => {
                    send_msn += 1;
                    Segment::ImmediateData {
                        msn: send_msn - 1,
                        solicited: rng.below(2) == 0,
                        data: rng.next().to_be_bytes(),
                    }
                }
                _ => Segment::Terminate {
                    msn: 1,
                    message: TerminateMessage::header_less(TerminateCause::from_wire(
                        rng.next() as u8,
                        rng.next() as u8,
                        rng.next() as u8,
                    )),
                },
            };
            enc.encode_segment(&seg, &mut wire).unwrap();
        }
        wire
    }

    #[test]
    fn engine_inbound_survives_pseudo_random_inputs() {
        let h = EngineInbound::new();
        let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
        let mut broken = 0;
        for i in 0..480 {
            let mut data = rng.bytes(3);
            match i % 4 {
                // Operations mode over random bytes.
                0 | 1 => {
                    data[0] |= 2;
                    let n = rng.below(120);
                    data.extend(rng.bytes(n));
                }
                // Raw mode: real FPDUs, maybe mutated (CRC trailers fixed up in mode 1).
                2 => {
                    data[0] &= !2;
                    let mut wire = valid_stream(&h, &mut rng, data[0] & 1 != 0);
                    if rng.below(2) == 0 {
                        let edits = 1 + rng.below(3);
                        rng.mutate(&mut wire, edits);
                    }
                    data.extend(wire);
                }
                // Raw mode: random bytes.
                _ => {
                    data[0] &= !2;
                    let n = rng.below(200);
                    data.extend(rng.bytes(n));
                }
            }
            let out = h.run(&data);
            broken += usize::from(out.end == Some(ConnectionEventKind::Broken));
        }
        // The generator reaches both ends: connections that stay up and ones the input breaks.
        assert!(broken > 50 && broken < 470, "{broken} of 480 broken");
    }

    #[test]
    fn harness_accepts_empty_and_tiny_inputs() {
        let h = EngineInbound::new();
        for len in 0..5 {
            for b in (0..=255u8).step_by(7) {
                h.run(&vec![b; len]);
            }
        }
    }

    #[test]
    fn thread_local_entry_point_runs_inputs() {
        engine_inbound(&[]);
        engine_inbound(&input(OPS_CRC, 0, 1, &[0x00, 3, b'a', b'b', b'c']));
    }

    #[test]
    fn send_into_a_posted_receive_completes_it() {
        let h = EngineInbound::new();
        // One receive (shape 0: 64 bytes), then a 3-byte Send.
        let out = h.run(&input(OPS_CRC, 0, 1, &[0x00, 3, b'a', b'b', b'c']));
        assert_eq!(out.state_after_input, Some(EpState::Connected));
        assert_eq!(out.completions[0], (1000, DtoStatus::Success, 3));
        assert_eq!(out.end, Some(ConnectionEventKind::Disconnected));
        assert_eq!(out.terminate_sent, None);
    }

    #[test]
    fn multi_segment_send_reassembles_into_a_multi_piece_receive() {
        let h = EngineInbound::new();
        // Receive shape 1 (16 + 40 bytes); a 50-byte Send in 7-byte segments, written to the
        // connection 13 bytes at a time.
        let out = h.run(&input(2, 6 << 4, 1 << 3 | 1, &[0x08, 0, 50, 7, 0x41]));
        assert_eq!(out.completions, vec![(1000, DtoStatus::Success, 50)]);
    }

    #[test]
    fn send_longer_than_the_receive_is_terminated_too_long() {
        let h = EngineInbound::new();
        // Receive shape 3 (8 bytes); a 9-byte Send.
        let out = h.run(&input(
            OPS_CRC,
            0,
            3 << 3 | 1,
            &[0x00, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9],
        ));
        assert_eq!(out.completions[0], (1000, DtoStatus::LocalLength, 0));
        assert_eq!(
            out.terminate_sent,
            Some(TerminateCause::DdpUntagged(
                DdpUntaggedErrorCode::MessageTooLong
            ))
        );
        assert_eq!(out.end, Some(ConnectionEventKind::Broken));
    }

    #[test]
    fn send_without_a_receive_is_terminated_no_buffer_when_time_passes() {
        let h = EngineInbound::new();
        let out = h.run(&input(OPS_CRC, 0, 0, &[0x00, 1, 7, 0x0B]));
        assert_eq!(
            out.terminate_sent,
            Some(TerminateCause::DdpUntagged(DdpUntaggedErrorCode::NoBuffer))
        );
        // Posted in time instead, the receive takes it.
        let out = h.run(&input(OPS_CRC, 0, 0, &[0x00, 1, 7, 0x09, 0]));
        assert_eq!(out.completions[0], (1000, DtoStatus::Success, 1));
    }

    /// Op 8 with flag 2: RFC 7306 Immediate Data (immediate 0x01020304, write length 0x102).
    const IMMED: [u8; 5] = [0x28, 0x01, 0x02, 0x03, 0x04];

    #[test]
    fn immediate_data_completes_a_posted_receive_without_touching_its_buffer() {
        let h = EngineInbound::new();
        // Receive shape 0 (64 bytes), shape 2 (no iov); the write length may exceed both.
        for initial in [1, 2 << 3 | 1] {
            let out = h.run(&input(OPS_CRC, 0, initial, &IMMED));
            assert_eq!(out.state_after_input, Some(EpState::Connected));
            assert_eq!(out.completions[0], (1000, DtoStatus::Success, 0x102));
            assert_eq!(out.immediates, vec![(1000, 0x0102_0304)]);
            assert_eq!(out.terminate_sent, None);
        }
        // It takes the next MSN of QN 0: a Send after it goes into the next receive.
        let mut ops = IMMED.to_vec();
        ops.extend_from_slice(&[0x00, 2, b'h', b'i']);
        let out = h.run(&input(OPS_CRC, 0, 2, &ops));
        assert_eq!(
            out.completions[..2],
            [
                (1000, DtoStatus::Success, 0x102),
                (1001, DtoStatus::Success, 2)
            ]
        );
        assert_eq!(out.terminate_sent, None);
    }

    #[test]
    fn immediate_data_without_a_receive_is_terminated_no_buffer_when_time_passes() {
        let h = EngineInbound::new();
        let mut ops = IMMED.to_vec();
        ops.push(0x0B);
        let out = h.run(&input(OPS_CRC, 0, 0, &ops));
        assert_eq!(
            out.terminate_sent,
            Some(TerminateCause::DdpUntagged(DdpUntaggedErrorCode::NoBuffer))
        );
        // Posted in time instead, the receive takes it.
        let mut ops = IMMED.to_vec();
        ops.extend_from_slice(&[0x09, 0]);
        let out = h.run(&input(OPS_CRC, 0, 0, &ops));
        assert_eq!(out.completions[0], (1000, DtoStatus::Success, 0x102));
        assert_eq!(out.immediates, vec![(1000, 0x0102_0304)]);
    }

    #[test]
    fn malformed_or_interleaved_immediate_data_is_terminated() {
        let h = EngineInbound::new();
        // 7 bytes instead of 8: the stream is unusable; the receive is flushed, untouched.
        let out = h.run(&input(OPS_CRC, 0, 1, &[0x68, 0, 1, 2, 3]));
        assert_eq!(
            out.terminate_sent,
            Some(TerminateCause::rdmap_operation(
                RdmapErrorCode::CatastrophicStream
            ))
        );
        assert_eq!(out.completions[0], (1000, DtoStatus::Flushed, 0));
        // In the middle of a Send (first segment of 2 bytes, L=0).
        let mut ops = vec![0x10, 2, b'a', b'b'];
        ops.extend_from_slice(&IMMED);
        let out = h.run(&input(OPS_CRC, 0, 2, &ops));
        assert_eq!(
            out.terminate_sent,
            Some(TerminateCause::DdpUntagged(DdpUntaggedErrorCode::MsnRange))
        );
        assert!(out.immediates.is_empty());
    }

    #[test]
    fn write_lands_only_where_the_peer_may_write() {
        let h = EngineInbound::new();
        let out = h.run(&input(
            OPS_CRC,
            0,
            0,
            &[0x01, RW as u8, 0, 16, 2, 0xEE, 0xEE],
        ));
        assert!(out.peer_wrote);
        assert_eq!(out.state_after_input, Some(EpState::Connected));
        for (sel, cause) in [
            (
                RO,
                TerminateCause::rdmap_protection(RdmapErrorCode::AccessRights),
            ),
            (
                LOCAL,
                TerminateCause::rdmap_protection(RdmapErrorCode::AccessRights),
            ),
            (
                OTHER_PZ,
                TerminateCause::DdpTagged(DdpTaggedErrorCode::StagNotAssociated),
            ),
            (
                STALE,
                TerminateCause::DdpTagged(DdpTaggedErrorCode::InvalidStag),
            ),
        ] {
            let out = h.run(&input(
                OPS_CRC,
                0,
                0,
                &[0x01, sel as u8, 0, 16, 2, 0xEE, 0xEE],
            ));
            assert!(!out.peer_wrote, "{sel}");
            assert_eq!(out.terminate_sent, Some(cause), "{sel}");
        }
        // Past the end of the writable region.
        let out = h.run(&input(
            OPS_CRC,
            0,
            0,
            &[0x01, WO as u8, 0, 255, 2, 0xEE, 0xEE],
        ));
        assert_eq!(
            out.terminate_sent,
            Some(TerminateCause::DdpTagged(DdpTaggedErrorCode::BaseOrBounds))
        );
    }

    #[test]
    fn read_request_of_the_read_only_region_is_answered() {
        let h = EngineInbound::new();
        // Read 100 bytes at offset 8 of ro, then of rw; the harness checks the bytes.
        let ops = [
            0x02, RO as u8, 0, 8, 0, 100, 1, 0x02, RW as u8, 0, 0, 0, 10, 2,
        ];
        let out = h.run(&input(OPS_CRC, 0, 0, &ops));
        assert_eq!(out.responses_sent, 2);
        assert_eq!(out.state_after_input, Some(EpState::Connected));
        // With IRD 0 the first one is refused.
        let out = h.run(&input(OPS_CRC, 3, 0, &ops));
        assert_eq!(out.responses_sent, 0);
        assert_eq!(out.end, Some(ConnectionEventKind::Broken));
    }

    #[test]
    fn read_response_completes_our_read_and_a_refusal_fails_it() {
        let h = EngineInbound::new();
        // Our read of 64 bytes (setup bit 7), answered in segments of 40 and 24 bytes.
        let out = h.run(&input(OPS_CRC, 0x80, 0, &[0x13, 40, 0x03, 40]));
        assert_eq!(out.completions, vec![(2000, DtoStatus::Success, 64)]);
        // The peer refuses it: a Terminate that names a Read Request.
        let out = h.run(&input(OPS_CRC, 0x80, 0, &[0x14, 0, 1, 2]));
        assert_eq!(out.completions, vec![(2000, DtoStatus::RemoteAccess, 0)]);
        assert_eq!(out.end, Some(ConnectionEventKind::Broken));
        // A response with the wrong STag.
        let out = h.run(&input(OPS_CRC, 0x80, 0, &[0x23, 64]));
        assert_eq!(
            out.terminate_sent,
            Some(TerminateCause::rdmap_operation(
                RdmapErrorCode::UnexpectedOpcode
            ))
        );
        assert_eq!(out.completions, vec![(2000, DtoStatus::Flushed, 0)]);
    }

    #[test]
    fn raw_mode_fixes_crc_trailers_and_a_bad_crc_is_terminated() {
        let h = EngineInbound::new();
        let mut wire = Vec::new();
        FpduEncoder::new(false)
            .encode_segment(
                &Segment::Write {
                    last: true,
                    stag: h.stag(RW),
                    to: region_va(RW),
                    payload: b"raw!",
                },
                &mut wire,
            )
            .unwrap();
        // Mode 1: CRC on, trailer zero in the input, fixed by the harness.
        let out = h.run(&input(1, 0, 0, &wire));
        assert!(out.peer_wrote);
        assert_eq!(out.terminate_sent, None);
        // Operations mode with the trailer corrupted.
        let out = h.run(&input(
            OPS_CRC,
            0,
            0,
            &[0x01, RW as u8, 0, 0, 1, 0xAB, 0x07],
        ));
        assert!(!out.peer_wrote);
        assert_eq!(
            out.terminate_sent,
            Some(TerminateCause::Llp(
                iwarp::terminate::LlpErrorCode::CrcError
            ))
        );
    }

    /// Regression (found by `engine_inbound` in its first minute, input `[15, 11, 36, 80]`):
    /// a receive buffer that a half-received Send holds in the connection was never completed
    /// when the endpoint disconnected, was freed, or its IA closed: the engine's flush does not
    /// see it, and the link's close only moved to Closing. Now `shut` completes it FLUSHED.
    #[test]
    fn a_receive_held_by_a_half_received_send_is_flushed_when_the_endpoint_disconnects() {
        let h = EngineInbound::new();
        // A first Send segment (not last) takes receive 1000; then the endpoint disconnects
        // (op 12), or the input ends and the endpoint is disconnected or freed (bits 5-6).
        for (control, ops) in [
            (OPS_CRC, &[0x10, 3, 1, 2, 3, 0x0C][..]),
            (OPS_CRC | 0x04, &[0x10, 3, 1, 2, 3, 0x0C][..]), // from an SRQ
            (OPS_CRC, &[0x10, 3, 1, 2, 3][..]),
            (OPS_CRC | 0x40, &[0x10, 3, 1, 2, 3][..]),
            (OPS_CRC | 0x04 | 0x40, &[0x50][..]), // the fuzzer's input: SRQ, empty segment
            (OPS_CRC | 0x60, &[0x10, 3, 1, 2, 3][..]),
        ] {
            let out = h.run(&input(control, 0, 1, ops));
            assert_eq!(
                out.completions.first(),
                Some(&(1000, DtoStatus::Flushed, 0)),
                "control {control:#x} ops {ops:?}: {out:?}"
            );
        }
    }

    /// Regression (found while writing the harness, confirmed by its state invariant): when an
    /// inbound segment completes a graceful disconnect (the last outstanding read's response
    /// arrives while DISCONNECT_PENDING), the engine shuts the stream from inside the receive
    /// path, whose `rx` lock made `shut` skip the move to Closing: the connection stayed
    /// Established under a DISCONNECTED endpoint, never lingered out, and went on processing
    /// the peer's segments. Now the receive side closes as soon as it lets go of the lock.
    #[test]
    fn a_graceful_disconnect_completed_by_an_inbound_read_response_closes_the_receive_side() {
        let h = EngineInbound::new();
        // Our read of 64 bytes (setup bit 7), a graceful disconnect (op 0x1C), the response,
        // then a Send that must not take the receive.
        let mut out = h.run(&input(OPS_CRC, 0x80, 1, &[0x1C, 0x03, 64, 0x00, 2, 7, 7]));
        assert_eq!(out.state_after_input, Some(EpState::Disconnected));
        assert_eq!(out.end, Some(ConnectionEventKind::Disconnected));
        out.completions.sort_by_key(|c| c.0);
        assert_eq!(
            out.completions,
            vec![
                (1000, DtoStatus::Flushed, 0),
                (2000, DtoStatus::Success, 64)
            ]
        );
    }

    #[test]
    fn large_write_arriving_in_pieces_is_placed_or_refused_whole() {
        let h = EngineInbound::new();
        // Operations without CRC, 100-byte writes (at least a 16th of what is pending): one
        // 10 KiB Write segment at offset 16 of rw arrives over several reads.
        let big = |sel: usize, off: u16| {
            let o = off.to_be_bytes();
            input(2, 5 << 4, 0, &[0x1F, sel as u8, o[0], o[1], 0x08, 0x00, 0])
        };
        let out = h.run(&big(RW, 16));
        assert!(out.peer_wrote);
        assert_eq!(out.terminate_sent, None);
        assert_eq!(out.state_after_input, Some(EpState::Connected));
        // Past the end of rw, and into the read-only region: refused, nothing placed.
        let out = h.run(&big(RW, 0x2000));
        assert!(!out.peer_wrote);
        assert_eq!(
            out.terminate_sent,
            Some(TerminateCause::DdpTagged(DdpTaggedErrorCode::BaseOrBounds))
        );
        let out = h.run(&big(RO, 0));
        assert_eq!(
            out.terminate_sent,
            Some(TerminateCause::rdmap_protection(
                RdmapErrorCode::AccessRights
            ))
        );
        // In 1 KiB segments.
        let mut data = big(RW, 0);
        *data.last_mut().unwrap() = 16;
        assert!(h.run(&data).peer_wrote);
    }

    #[test]
    fn large_read_response_arriving_in_pieces_completes_the_read() {
        let h = EngineInbound::new();
        // Post a read into the large sink (8192 + 128 * 16 = 10240 bytes), then answer it with
        // one segment of 160 * 64 bytes, or with two.
        let post = [0x3A, 0x80, 0, 0, 0x33, 0x01, 0, 0];
        for answer in [&[0x03, 160][..], &[0x13, 100, 0x03, 60][..]] {
            let mut ops = post.to_vec();
            ops.extend_from_slice(answer);
            let out = h.run(&input(2, 5 << 4, 0, &ops));
            assert_eq!(out.completions, vec![(2000, DtoStatus::Success, 10240)]);
            assert_eq!(out.terminate_sent, None);
        }
    }

    /// Regression (found by `engine_inbound`, input `crash-92bbc309...` below): with CRC on, a
    /// Read Response that waits in the connection's transmit queue used to be sent from
    /// registered memory with the CRC computed when it was framed, so a Write from the peer into
    /// the memory it reads made it go out with a bad CRC. With CRC the payload is now copied into
    /// the frame; the harness fails on any bad CRC.
    #[test]
    fn read_response_over_memory_the_peer_changes_keeps_a_good_crc() {
        let h = EngineInbound::new();
        // CRC, 2 KiB socket send buffer; a Read Request for 10,000 bytes of rw, then an 8 KiB
        // Write into the same bytes, both in one read of the connection.
        let ops = [
            0x02, RW as u8, 0, 0, 0x27, 0x10, 1, // Read Request
            0x1F, RW as u8, 0, 0, 0, 0, 0, // Write, 8 KiB, one segment
        ];
        let out = h.run(&input(OPS_CRC | 0x10, 0, 0, &ops));
        assert_eq!(out.responses_sent, 1, "{out:?}");
        // The fuzzer's input.
        let crash = [
            0xff, 0x88, 0x29, 0x29, 0x29, 0x29, 0xff, 0x82, 0x00, 0x00, 0x29, 0x29, 0x82, 0x29,
            0xff, 0x00, 0x00, 0x08, 0x01, 0xec, 0x58, 0x08, 0x01, 0xec, 0x58, 0x58, 0x08, 0x58,
            0x02, 0x01,
        ];
        h.run(&crash);
        let out = h.run(&input(OPS_CRC | 0x10, 0, 0, &ops[..7]));
        assert_eq!(out.responses_sent, 1);
    }

    /// Harness rule (the fuzzer's first input after cut-through placement landed, a 15,922-byte
    /// Write of which only the header and one payload byte arrive): without CRC the link places
    /// the bytes of a tagged segment that has not fully arrived, so those bytes count as the
    /// peer's too.
    #[test]
    fn bytes_of_a_write_still_arriving_may_already_be_placed() {
        let h = EngineInbound::new();
        let crash = [
            0xf4, 0x56, 0xf5, 0x3e, 0x40, 0xc1, 0x40, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00,
            0x01, 0x00, 0x00, 0x00, 0x00, 0xa3,
        ];
        h.run(&crash);
        // The same without the payload byte.
        h.run(&crash[..19]);
    }
}
