//! The transmit side: a message from the engine (`Connection::transmit`, `start_job`) is framed
//! into FPDUs of at most MULPDU and written in batches of up to `BATCH_FPDUS` with one gathered
//! `sendmsg` whose iovecs point straight into registered memory (headers, pads and CRCs from a
//! small frame buffer; with CRC the payload is copied there too). What the socket does not take
//! stays as the backlog (`Tx::job`, `Tx::ctl`) that `on_writable` finishes once epoll reports
//! the socket writable, then telling the engine (`tx_drained`) if it waits for that. Control
//! FPDUs (an RTR, a Read RTR's response, a Terminate) and MPA frames are queued ahead of the
//! job; FPDUs wait while the responder holds them until the initiator's first one
//! (`release_hold`). `on_writable` also ends a non-blocking connect and sends the MPA Request
//! ([`mpa`](super::mpa)).
//!
//! All of it runs under the `tx` lock, last in the order rx -> engine -> tx: the engine is told
//! of a drained backlog only once `tx` is let go.

use std::io::{self, ErrorKind};
use std::net::Shutdown;
use std::os::fd::AsFd;
use std::sync::Arc;

use arrayvec::ArrayVec;
use iwarp::ddp::{TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN};
use iwarp::fpdu::{fpdu_len, pad_len, MAX_ULPDU_LEN};
use iwarp::rdmap::{ReadRequest, IMMEDIATE_DATA_LEN, MAX_SEGMENT_HEADER_LEN};
use iwarp::terminate::{RdmapErrorCode, TerminateCause, TerminateMessage};
use iwarp::{crc, Segment};

use super::{Phase, TcpConn, Tx};
use crate::engine::port::{OutMsg, Payload, TxOutcome};
use crate::engine::qp::Segs;
use crate::link::looks::{LOOKS_BITS, LOOKS_MASK};
use crate::link::tcp::{self, lock};
use crate::mem::region::{is_revoked_error, send_gather, IoPiece, MAX_GATHER};
use crate::mem::seg_span;
use crate::mem::Seg;
use crate::types::ConnectionEventKind;
use crate::types::{DtoStatus, MAX_IOV};

/// Most FPDUs framed into one gathered write.
pub(super) const BATCH_FPDUS: usize = 20;
/// Largest message copied into a held batch (the engine's
/// [`crate::engine::port::Connection::hold`], or a burst of posts: `Burst`); larger ones are
/// written from registered memory, as always.
const HOLD_COPY_MAX: u64 = 16 * 1024;
/// Messages up to this many bytes are copied into their frame when nothing waits before them
/// (`Tx::idle`): one buffer to write, and no job holding the segments (their `Arc`s) until it
/// is written, as a NIC copies a small send inline into its work request.
const INLINE_MAX: u64 = 512;
/// A held batch is written once it holds this many bytes.
pub(super) const HOLD_MAX: usize = 64 * 1024;
/// Posts of one thread at most this far apart (from the return of one `transmit` to the
/// start of the next), with no look for completions between them, form a burst. A message
/// whose sender then waits for an answer cannot be in one: the answer takes a round trip,
/// far longer than this, and a look for completions ends a burst at once.
const BURST_GAP_NS: u64 = 2_000;
/// The messages of a burst after this many go into a held batch (`Tx::corked`): two posts in
/// a row (data, then a flag the peer watches) are always written at once.
const BURST_HOLD_AFTER: u32 = 2;

/// The posts of one connection in quick succession: which of them are held back
/// (`Tx::note_post`).
#[derive(Default)]
pub(super) struct Burst {
    /// The posting thread's `looks()` at the last message.
    mark: u64,
    /// When the last message's `transmit` returned (ns on `mono_ns`; for a held message, when
    /// it began, as it returns at once); 0 if the clock was not read for it: it was the first
    /// of its poster's run (posted after a look for completions, or by another thread), as a
    /// ping-pong's every message is. Two clock reads per message were about 80 ns of an 8-byte
    /// post here; the clock is read only for a post that continues a run (`post_ns`).
    end_ns: u64,
    /// The clock at the current post, if it continues its poster's run.
    post_ns: Option<u64>,
    /// Messages of the burst before the last one.
    len: u32,
    /// The progress thread had to write what a burst held (its poster had stopped posting
    /// and did not look for completions, as one that spins on memory for the answer does not):
    /// nothing is held until that poster, whose `looks()` was `off_mark`, has looked `off_for`
    /// times. `late` counts such bursts in a row (none written at a look between): each
    /// doubles `off_for`, so a poster that looks only after its answer came rarely waits.
    off: bool,
    off_mark: u64,
    off_for: u64,
    late: u32,
}

impl Burst {
    /// Whether a message posted by a thread whose `looks()` is `mark` is held back: it
    /// continues a burst (same thread, no look for completions since the last message, within
    /// `BURST_GAP_NS` of its end) already `BURST_HOLD_AFTER` messages long, it is `small`, and
    /// holding is not off for this poster (`unlooked`). `clock` is read only for a post that
    /// continues its poster's run; one that follows a message whose end was not timed (the
    /// run's first) counts as quick.
    pub(super) fn holds(&mut self, clock: impl FnOnce() -> u64, mark: u64, small: bool) -> bool {
        self.post_ns = (mark == self.mark).then(clock);
        let quick = self
            .post_ns
            .is_some_and(|now| self.end_ns == 0 || now.saturating_sub(self.end_ns) < BURST_GAP_NS);
        self.mark = mark;
        self.len = if quick { self.len.saturating_add(1) } else { 0 };
        if self.off
            && (mark >> LOOKS_BITS != self.off_mark >> LOOKS_BITS
                || mark.wrapping_sub(self.off_mark) & LOOKS_MASK >= self.off_for)
        {
            self.off = false; // another thread, or this one looked often enough
        }
        small && !self.off && self.len >= BURST_HOLD_AFTER
    }

    /// Whether a post by a thread whose `looks()` is `mark` continues the run of the last one
    /// (same thread, no look for completions between).
    pub(super) fn continues(&self, mark: u64) -> bool {
        mark == self.mark
    }

    /// The last message's `transmit` returns (`clock`, read only if its post was timed).
    pub(super) fn ended(&mut self, clock: impl FnOnce() -> u64) {
        self.end_ns = if self.post_ns.is_some() { clock() } else { 0 };
    }

    /// The last message was held: its `transmit` returns at once, so it ends when it began.
    pub(super) fn ended_held(&mut self) {
        self.end_ns = self.post_ns.unwrap_or(0);
    }

    /// Whether the burst has ended at `now`: its last message is longer ago than the gap (or
    /// was not timed), so the next would not continue it.
    pub(super) fn ended_by(&self, now: u64) -> bool {
        now.saturating_sub(self.end_ns) >= BURST_GAP_NS
    }

    /// What an ended burst held was written by the progress thread, not at a look of its
    /// poster's: hold nothing more for this poster until it has looked `off_for` times.
    pub(super) fn unlooked(&mut self) {
        self.late = self.late.saturating_add(1);
        self.off = true;
        self.off_mark = self.mark;
        self.off_for = 1 << (self.late - 1).min(LATE_DOUBLINGS);
    }

    /// What the burst held was written at a look for completions: its poster looks in time.
    pub(super) fn looked(&mut self) {
        self.late = 0;
    }
}

/// Bursts written late in a row double the looks before holding again this many times at most
/// (1, 2, 4, 8, 16 looks): a poster held up in the middle of its bursts (preempted, its queue
/// full) loses little, one that spins on memory after each burst waits once in 16 turns.
const LATE_DOUBLINGS: u32 = 4;

/// A message small enough to be held back as part of a burst (as for the engine's batches:
/// Read Requests, and messages up to `HOLD_COPY_MAX`, copied).
pub(super) fn coalescible(msg: &OutMsg<'_>) -> bool {
    match msg {
        OutMsg::ReadRequest { .. } => true,
        OutMsg::Send { payload, .. }
        | OutMsg::Write { payload, .. }
        | OutMsg::WriteImmed { payload, .. }
        | OutMsg::ReadResponse { payload, .. } => payload.len() <= HOLD_COPY_MAX,
    }
}

/// Where a piece of a batched write comes from.
#[derive(Clone, Copy)]
pub(super) enum Piece {
    /// `frames[a..b]`.
    Frame(usize, usize),
    /// `len` bytes of the job's segment `seg` at `offset`.
    Mem {
        seg: usize,
        offset: usize,
        len: usize,
    },
}

#[derive(Clone, Copy)]
enum JobKind {
    /// A Send; with `invalidate`, a Send with Invalidate (opcode 4, or 6 when solicited),
    /// the STag in every segment's RsvdULP\[8:39\] (ULPDU bytes 2-5), where siw reads it.
    Send {
        msn: u32,
        solicited: bool,
        invalidate: Option<u32>,
    },
    Write {
        stag: u32,
        to: u64,
    },
    /// An RDMA Write whose last segment is followed by an RFC 7306 Immediate Data message on
    /// QN 0 with `msn` (see [`write_immed_data`]).
    WriteImmed {
        stag: u32,
        to: u64,
        msn: u32,
        solicited: bool,
        immediate: u32,
    },
    ReadResp {
        stag: u32,
        to: u64,
    },
}

impl JobKind {
    /// The segment at payload offset `off` of the message (`last`: it ends the message).
    fn segment<'p>(&self, off: u64, last: bool, payload: &'p [u8]) -> Segment<'p> {
        match *self {
            JobKind::Send {
                msn,
                solicited,
                invalidate,
            } => Segment::Send {
                last,
                msn,
                mo: off as u32,
                solicited,
                invalidate_stag: invalidate,
                payload,
            },
            JobKind::Write { stag, to } | JobKind::WriteImmed { stag, to, .. } => Segment::Write {
                last,
                stag,
                to: to.wrapping_add(off),
                payload,
            },
            JobKind::ReadResp { stag, to } => Segment::ReadResponse {
                last,
                stag,
                to: to.wrapping_add(off),
                payload,
            },
        }
    }

    /// The RFC 7306 Immediate Data segment that follows the last Write segment of an RDMA
    /// Write with Immediate Data of `total` bytes (start_job checked that it fits 32 bits).
    fn immediate(&self, total: u64) -> Option<Segment<'static>> {
        match *self {
            JobKind::WriteImmed {
                msn,
                solicited,
                immediate,
                ..
            } => Some(Segment::ImmediateData {
                msn,
                solicited,
                data: write_immed_data(immediate, total as u32),
            }),
            _ => None,
        }
    }
}

/// The 8 bytes of RFC 7306 Immediate Data that end an RDMA Write with Immediate Data between
/// dapl-rs peers: the 32-bit immediate value, then the write's length in bytes, both
/// big-endian (docs/architecture.md). RFC 7306 leaves their meaning to the ULP.
fn write_immed_data(immediate: u32, len: u32) -> [u8; IMMEDIATE_DATA_LEN] {
    let mut d = [0u8; IMMEDIATE_DATA_LEN];
    d[..4].copy_from_slice(&immediate.to_be_bytes());
    d[4..].copy_from_slice(&len.to_be_bytes());
    d
}

/// (immediate value, write length) from Immediate Data built by [`write_immed_data`].
pub(super) fn parse_write_immed_data(d: [u8; IMMEDIATE_DATA_LEN]) -> (u32, u32) {
    (
        u32::from_be_bytes([d[0], d[1], d[2], d[3]]),
        u32::from_be_bytes([d[4], d[5], d[6], d[7]]),
    )
}

pub(super) struct TxJob {
    cur: Cursor,
    segs: Segs,
}

/// How far a message is framed.
#[derive(Clone, Copy)]
struct Cursor {
    kind: JobKind,
    total: u64,
    /// Payload bytes already framed.
    off: u64,
    framed_last: bool,
}

impl TcpConn {
    pub(super) fn on_writable(self: &Arc<Self>) {
        // A finished connect?
        {
            let mut rx = lock(&self.rx);
            if let Phase::Connecting { .. } = rx.phase {
                let res = connect_outcome(
                    || self.sock.take_error(),
                    || self.sock.peer_addr().map(|_| ()),
                );
                let Phase::Connecting {
                    init,
                    attempt,
                    dial,
                } = std::mem::replace(&mut rx.phase, Phase::Dead)
                else {
                    unreachable!()
                };
                match res {
                    Ok(()) => {
                        let request = init.request().to_vec();
                        rx.phase = Phase::AwaitReply { init, attempt };
                        drop(rx);
                        let mut tx = lock(&self.tx);
                        tx.ctl.push_back((request, false));
                        self.flush_locked(&mut tx);
                        drop(tx);
                        self.update_interest();
                        return;
                    }
                    Err(e) => {
                        drop(rx);
                        self.kill();
                        if let Some(ep) = self.ep() {
                            let shared = self.shared.clone();
                            tcp::connect_failed(shared, &ep, attempt, dial, e.kind());
                        }
                        return;
                    }
                }
            }
        }
        let drained = {
            let mut tx = lock(&self.tx);
            let done = self.flush_locked(&mut tx);
            Drained::of(&mut tx, done)
        };
        self.update_interest();
        self.tell_engine(drained);
    }

    pub(super) fn release_hold(&self) {
        let drained = {
            let mut tx = lock(&self.tx);
            if !tx.hold {
                return;
            }
            tx.hold = false;
            let done = self.flush_locked(&mut tx);
            Drained::of(&mut tx, done)
        };
        self.update_interest();
        self.tell_engine(drained);
    }

    pub(super) fn send_ctl_segment(&self, seg: &Segment<'_>) {
        let drained = {
            let mut tx = lock(&self.tx);
            if !tx.push_segment(seg) {
                return;
            }
            let done = self.flush_locked(&mut tx);
            // A queued job this flush finished is reported by `on_writable`, as before; only
            // a revoked one is reported here.
            if !done {
                self.update_interest();
            }
            if std::mem::take(&mut tx.revoked) {
                Drained::Revoked
            } else {
                Drained::No
            }
        };
        self.tell_engine(drained);
    }

    /// A burst of posts began to be held back (`Tx::note_post`): the link writes it when a
    /// consumer looks for completions or its progress thread runs.
    pub(super) fn start_cork(&self) {
        if let Some(s) = self.shared() {
            if let Some(me) = s.conn(self.id) {
                s.cork(me);
                return;
            }
        }
        // No link to write it later (the connection is being taken down): write it now. The
        // engine learns of the end from the teardown, not from here (this runs in `transmit`).
        let mut tx = lock(&self.tx);
        tx.corked = false;
        self.flush_locked(&mut tx);
    }

    /// The burst held back ends (`Shared::flush_corked`): what it held goes out, unless the
    /// engine holds a batch right now (whose `flush` writes it). `late`: the progress thread
    /// writes it, not a look for completions (`Burst::unlooked`). True if that made it a
    /// burst written late.
    pub(crate) fn flush_corked(&self, late: bool) -> bool {
        let (done, drained, unlooked) = {
            let mut tx = lock(&self.tx);
            if !std::mem::take(&mut tx.corked) || tx.held {
                return false;
            }
            // Written late only if the burst had ended: a tick between two of its posts is not
            // its poster's fault.
            let held = tx.at < tx.pieces.len();
            let unlooked = late && held && tx.burst.ended_by(super::super::mono_ns());
            if unlooked {
                tx.burst.unlooked();
            } else if held && !late {
                tx.burst.looked();
            }
            let done = self.flush_locked(&mut tx);
            (done, Drained::of(&mut tx, done), unlooked)
        };
        if !done {
            self.update_interest();
        }
        self.tell_engine(drained);
        unlooked
    }

    /// The engine's batch ended (`Connection::flush`): what it held goes out.
    pub(super) fn flush_held(&self) {
        let (done, drained) = {
            let mut tx = lock(&self.tx);
            tx.held = false;
            let done = self.flush_locked(&mut tx);
            (done, Drained::of(&mut tx, done))
        };
        if !done {
            self.update_interest();
        }
        self.tell_engine(drained);
    }

    /// Tells the engine what a flush outside `transmit` found (with `tx` let go).
    fn tell_engine(&self, d: Drained) {
        let Some(ep) = self.ep() else {
            return;
        };
        match d {
            Drained::No => {}
            Drained::Done => ep.tx_drained(self.id),
            Drained::Revoked => {
                ep.end_connection_of(self.id, ConnectionEventKind::Broken, true);
            }
        }
    }

    /// Writes as much as the socket takes. True when nothing is left.
    pub(super) fn flush_locked(&self, tx: &mut Tx) -> bool {
        if tx.failed {
            return true;
        }
        loop {
            if tx.at == tx.pieces.len() && !self.fill(tx) {
                tx.want_out = false;
                if tx.job.is_some() || !tx.ctl.is_empty() {
                    return false; // held until the initiator's first FPDU
                }
                if tx.shut_after && !tx.shut {
                    tx.shut = true;
                    let _ = self.sock.shutdown(Shutdown::Write);
                }
                return true;
            }
            let mut io: ArrayVec<IoPiece<'_>, MAX_GATHER> = ArrayVec::new();
            let mut skip = tx.skip;
            for p in &tx.pieces[tx.at..] {
                if io.is_full() {
                    break;
                }
                let piece = match *p {
                    Piece::Frame(a, b) => IoPiece::Bytes(&tx.frames[a + skip..b]),
                    Piece::Mem { seg, offset, len } => {
                        let Some(s) = tx.job.as_ref().and_then(|j| j.segs.get(seg)) else {
                            break;
                        };
                        IoPiece::Region {
                            mem: &s.region,
                            offset: offset + skip,
                            len: len - skip,
                        }
                    }
                };
                skip = 0;
                io.push(piece);
            }
            if io.is_empty() {
                tx.pieces.clear();
                tx.at = 0;
                tx.skip = 0;
                continue;
            }
            let r = send_gather(self.sock.as_fd(), &io);
            drop(io);
            match r {
                Ok(mut n) => {
                    while n > 0 && tx.at < tx.pieces.len() {
                        let plen = match tx.pieces[tx.at] {
                            Piece::Frame(a, b) => b - a,
                            Piece::Mem { len, .. } => len,
                        } - tx.skip;
                        if n >= plen {
                            n -= plen;
                            tx.at += 1;
                            tx.skip = 0;
                        } else {
                            tx.skip += n;
                            n = 0;
                        }
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    tx.want_out = true;
                    return false;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if is_revoked_error(&e) => {
                    if !self.revoked(tx) {
                        return true;
                    }
                }
                Err(_) => {
                    tx.failed = true;
                    tx.want_out = false;
                    return true;
                }
            }
        }
    }

    /// A region of the job was revoked: nothing more of it is sent, and the engine is to end
    /// the connection (`tx.revoked`). At an FPDU boundary (nothing of the batch written yet) a
    /// Terminate (RDMAP remote protection, invalid STag: the memory is no longer registered)
    /// goes out, then the stream is shut; true: go on writing it. In the middle of an FPDU no
    /// valid frame can follow, so the stream is shut down at once; false.
    fn revoked(&self, tx: &mut Tx) -> bool {
        tx.revoked = true;
        tx.job = None;
        tx.abandon = true;
        tx.shut_after = true;
        if tx.at == 0 && tx.skip == 0 {
            tx.pieces.clear();
            tx.frames.clear();
            let cause = TerminateCause::rdmap_protection(RdmapErrorCode::InvalidStag);
            tracing::warn!(
                conn = self.id,
                %cause,
                detail = ?cause,
                "Terminate sent: memory of the message being sent was deregistered"
            );
            let term = Segment::Terminate {
                msn: 1,
                message: TerminateMessage::header_less(cause),
            };
            if tx.push_segment(&term) {
                return true;
            }
        }
        tracing::warn!(
            conn = self.id,
            "stream shut down in the middle of an FPDU: memory of the message being sent was \
             deregistered"
        );
        tx.failed = true;
        tx.want_out = false;
        let _ = self.sock.shutdown(Shutdown::Both);
        false
    }

    /// Frames the next batch: queued control frames first, then FPDUs of the job. False if
    /// there is nothing to send.
    fn fill(&self, tx: &mut Tx) -> bool {
        tx.frames.clear();
        tx.pieces.clear();
        tx.at = 0;
        tx.skip = 0;
        if tx.abandon {
            tx.job = None;
        }
        if tx.job.as_ref().is_some_and(|j| j.cur.framed_last) {
            tx.job = None;
        }
        // Control frames: MPA frames always; FPDUs only when not held.
        while let Some((bytes, is_fpdu)) = tx.ctl.front() {
            if *is_fpdu && tx.hold {
                break;
            }
            let a = tx.frames.len();
            tx.frames.extend_from_slice(bytes);
            let b = tx.frames.len();
            tx.pieces.push(Piece::Frame(a, b));
            tx.ctl.pop_front();
        }
        if !tx.pieces.is_empty() || tx.hold || tx.abandon {
            return !tx.pieces.is_empty();
        }
        let Some(mut job) = tx.job.take() else {
            return false;
        };
        let copy = tx.enc.crc_enabled();
        if frame_job(tx, &mut job.cur, &job.segs, copy, BATCH_FPDUS).is_err() {
            // Revoked (the range is inside the segment): nothing of this batch has gone out
            // (`at` and `skip` are 0), so the stream is at an FPDU boundary. The job is dropped.
            return self.revoked(tx);
        }
        tx.job = Some(job);
        true
    }

    /// Takes `msg` for writing: as the job (written from registered memory by `flush_locked`),
    /// or, while the engine holds a batch (`Tx::held`) and the message is small, framed whole
    /// into the batch with its payload copied (Ok(true): nothing more to do until the flush),
    /// or, if it is smaller still ([`INLINE_MAX`]) and nothing waits to be written, framed
    /// whole with its payload copied as the batch to write now (Ok(false), as for a job).
    pub(super) fn start_job(&self, tx: &mut Tx, msg: OutMsg<'_>) -> Result<bool, TxOutcome> {
        let (kind, payload) = match msg {
            OutMsg::Send {
                solicited,
                invalidate,
                payload,
            } => {
                let msn = tx.msn_send;
                tx.msn_send = tx.msn_send.wrapping_add(1);
                (
                    JobKind::Send {
                        msn,
                        solicited,
                        invalidate,
                    },
                    payload,
                )
            }
            OutMsg::Write { stag, to, payload } => (JobKind::Write { stag, to }, payload),
            OutMsg::WriteImmed {
                stag,
                to,
                payload,
                immediate,
                solicited,
            } => {
                if u32::try_from(payload.len()).is_err() {
                    return Err(TxOutcome::Failed(DtoStatus::LocalLength));
                }
                // RFC 7306: Immediate Data is a message of the Send queue and takes its MSN.
                let msn = tx.msn_send;
                tx.msn_send = tx.msn_send.wrapping_add(1);
                (
                    JobKind::WriteImmed {
                        stag,
                        to,
                        msn,
                        solicited,
                        immediate,
                    },
                    payload,
                )
            }
            OutMsg::ReadResponse {
                sink_stag,
                sink_to,
                payload,
            } => (
                JobKind::ReadResp {
                    stag: sink_stag,
                    to: sink_to,
                },
                payload,
            ),
            OutMsg::ReadRequest {
                sink_stag,
                sink_to,
                len,
                src_stag,
                src_to,
            } => {
                let msn = tx.msn_read;
                tx.msn_read = tx.msn_read.wrapping_add(1);
                let Ok(read_size) = u32::try_from(len) else {
                    return Err(TxOutcome::Failed(DtoStatus::LocalLength));
                };
                let seg = read_request(msn, sink_stag, sink_to, read_size, src_stag, src_to);
                // Into the held batch, or, with nothing waiting before it, framed as the batch
                // to write now (Ok(false)); else queued behind what waits.
                let held = tx.can_hold();
                if (held || tx.idle()) && tx.frame_segment(&seg) {
                    return Ok(held);
                }
                return if tx.push_segment(&seg) {
                    Ok(false)
                } else {
                    Err(TxOutcome::Broken)
                };
            }
        };
        // The engine sends from registered memory, at most MAX_IOV segments.
        let segs = match payload {
            Payload::Segs(s) if s.len() <= MAX_IOV => s,
            _ => return Err(TxOutcome::Broken),
        };
        if matches!(kind, JobKind::Send { .. }) && u32::try_from(payload.len()).is_err() {
            return Err(TxOutcome::Failed(DtoStatus::LocalLength));
        }
        let mut cur = Cursor {
            kind,
            total: payload.len(),
            off: 0,
            framed_last: false,
        };
        let held = cur.total <= HOLD_COPY_MAX && tx.can_hold();
        if held || (cur.total <= INLINE_MAX && tx.idle()) {
            // One FPDU (the common small message): framed at once. Not a write with immediate
            // data, whose second segment `frame_job` adds.
            let one = !matches!(cur.kind, JobKind::WriteImmed { .. });
            if one && frame_one(tx, cur.kind, segs, cur.total as usize) {
                return Ok(held);
            }
            tx.start_held();
            let (f, p) = (tx.frames.len(), tx.pieces.len());
            if frame_job(tx, &mut cur, segs, true, usize::MAX).is_ok() && cur.framed_last {
                return Ok(held);
            }
            // A region was revoked: the ordinary path below reports it as ever.
            tx.cut_to(f, p);
            cur.off = 0;
            cur.framed_last = false;
        }
        tx.job = Some(TxJob {
            cur,
            segs: segs.iter().cloned().collect(),
        });
        tx.abandon = false;
        Ok(false)
    }
}

impl TcpConn {
    /// `Connection::transmit_inline`: a small Send or a Read Request that begins its poster's
    /// run (a look for completions since that thread's last post here, as a ping-pong's every
    /// post follows) and finds nothing waiting is framed (a Send's payload copied) and written
    /// at once. What the socket does not take yet is the link's own backlog, written on
    /// `EPOLLOUT` or by the next transmit, in order: the message no longer depends on
    /// registered memory, and nothing of the engine's waits for it. A post that continues its
    /// run takes `transmit`, where the burst rules decide whether it is held. False (nothing
    /// sent) when the message is not taken this way or the stream has failed (the ordinary
    /// path reports it).
    pub(super) fn send_inline(&self, msg: &OutMsg<'_>) -> bool {
        // A Read Response is no post: its handler's thread is no poster, so the burst rules,
        // which follow posters, neither decide nor record it.
        let posted = !matches!(msg, OutMsg::ReadResponse { .. });
        let done = {
            let mut tx = lock(&self.tx);
            let mark = crate::link::looks::looks();
            if tx.failed
                || tx.shut
                || (posted && self.coalesce && tx.burst.continues(mark))
                || !frame_inline(&mut tx, msg)
            {
                return false;
            }
            let timed = posted && self.coalesce;
            if timed {
                // The run's first post: recorded as `transmit` records it, never held.
                let corks = tx.note_post(crate::link::mono_ns, mark, true);
                debug_assert!(!corks, "a run's first post is never held");
            }
            let done = self.flush_locked(&mut tx);
            if timed {
                tx.burst.ended(crate::link::mono_ns);
            }
            if tx.failed {
                return false; // the queued WR finds the stream failed and is flushed
            }
            done
        };
        if !done {
            self.update_interest();
        }
        true
    }
}

/// `Connection::transmit_inline`: a Send of at most [`INLINE_MAX`] bytes or a Read Request,
/// posted while nothing waits to be written, framed whole (a Send's payload copied) as the
/// batch to write now, as `start_job` frames such a message. False, with the batch and the
/// MSNs as they were, for any other message or when a region of it was revoked (the ordinary
/// path then reports that).
pub(super) fn frame_inline(tx: &mut Tx, msg: &OutMsg<'_>) -> bool {
    if !tx.idle() || tx.held || tx.corked {
        return false;
    }
    let (solicited, invalidate, segs, total) = match *msg {
        OutMsg::Send {
            solicited,
            invalidate,
            payload: payload @ Payload::Segs(segs),
        } if segs.len() <= MAX_IOV && payload.len() <= INLINE_MAX => {
            (solicited, invalidate, segs, payload.len())
        }
        OutMsg::ReadRequest {
            sink_stag,
            sink_to,
            len,
            src_stag,
            src_to,
        } => {
            let Ok(size) = u32::try_from(len) else {
                return false;
            };
            let seg = read_request(tx.msn_read, sink_stag, sink_to, size, src_stag, src_to);
            if !tx.frame_segment(&seg) {
                return false;
            }
            tx.msn_read = tx.msn_read.wrapping_add(1);
            return true;
        }
        OutMsg::ReadResponse {
            sink_stag,
            sink_to,
            payload: payload @ Payload::Segs(segs),
        } if segs.len() <= MAX_IOV && payload.len() <= INLINE_MAX => {
            let kind = JobKind::ReadResp {
                stag: sink_stag,
                to: sink_to,
            };
            return frame_one(tx, kind, segs, payload.len() as usize);
        }
        _ => return false,
    };
    let kind = JobKind::Send {
        msn: tx.msn_send,
        solicited,
        invalidate,
    };
    if !frame_one(tx, kind, segs, total as usize) {
        return false;
    }
    tx.msn_send = tx.msn_send.wrapping_add(1);
    true
}

/// Frames a whole message of `len` bytes from `segs` as one FPDU behind the batch, its payload
/// copied: what `frame_job` makes of a message that fits one FPDU, with one growth of the
/// frame buffer and one piece (an inline post's framing of 8 bytes: 576 -> 412 instructions).
/// False, and the batch as it was, if it does not fit one FPDU or a region was revoked.
fn frame_one(tx: &mut Tx, kind: JobKind, segs: &[Seg], len: usize) -> bool {
    let seg = kind.segment(0, true, &[]);
    let mut hdr = [0u8; MAX_SEGMENT_HEADER_LEN];
    let Ok(n) = seg.emit_header(&mut hdr) else {
        return false;
    };
    if n + len > tx.mulpdu.max(n + 1) {
        return false; // more than one FPDU: `frame_job`
    }
    frame_ulpdu(tx, &hdr[..n], len, |mut out| {
        for s in segs {
            let (to, rest) = out.split_at_mut(s.len);
            if !s.region.copy_out(s.offset, to) {
                return false;
            }
            out = rest;
        }
        true
    })
}

/// Frames the ULPDU `hdr` then `len` bytes that `fill` writes (false: it could not, and the
/// batch is as it was) as one FPDU at the end of the batch: one resize of the frame buffer and
/// plain copies, the CRC (if on) over the whole frame at the end.
fn frame_ulpdu(tx: &mut Tx, hdr: &[u8], len: usize, fill: impl FnOnce(&mut [u8]) -> bool) -> bool {
    let ulpdu_len = hdr.len() + len;
    tx.start_held();
    let a = tx.frames.len();
    let fpdu = fpdu_len(ulpdu_len);
    tx.frames.resize(a + fpdu, 0);
    let f = &mut tx.frames[a..];
    f[..2].copy_from_slice(&(ulpdu_len as u16).to_be_bytes());
    let (h, rest) = f[2..].split_at_mut(hdr.len());
    h.copy_from_slice(hdr);
    if !fill(&mut rest[..len]) {
        tx.frames.truncate(a);
        return false;
    }
    if tx.enc.crc_enabled() {
        let mut crc = crc::Crc32c::new();
        crc.update(&f[..fpdu - crc::CRC_LEN]);
        f[fpdu - crc::CRC_LEN..].copy_from_slice(&crc.wire_bytes());
    }
    tx.push_frame(a, a + fpdu);
    true
}

/// The Read Request segment of read `msn` (a sink STag of 0 goes out as 1: STag 0 is refused).
fn read_request(
    msn: u32,
    sink_stag: u32,
    sink_to: u64,
    size: u32,
    source_stag: u32,
    source_to: u64,
) -> Segment<'static> {
    Segment::ReadRequest {
        msn,
        request: ReadRequest {
            sink_stag: sink_stag.max(1),
            sink_to,
            size,
            source_stag,
            source_to,
        },
    }
}

/// A region a message is sent from was revoked while it was being framed.
struct Revoked;

/// Frames up to `max` FPDUs of `job` behind what the batch holds (`tx.frames`, `tx.pieces`).
/// `copy`: the payload is copied into the frames (always with CRC; a held message, which must
/// not depend on registered memory once `transmit` returned); otherwise the pieces point into
/// the job's registered memory. Err when a region of the job was revoked: the batch then
/// holds a partial FPDU (the caller drops or cuts it).
fn frame_job(
    tx: &mut Tx,
    job: &mut Cursor,
    segs: &[Seg],
    copy: bool,
    max: usize,
) -> Result<(), Revoked> {
    let crc_on = tx.enc.crc_enabled();
    for _ in 0..max {
        let hdr_len = match job.kind {
            JobKind::Send { .. } => UNTAGGED_HEADER_LEN,
            _ => TAGGED_HEADER_LEN,
        };
        let max_pay = tx.mulpdu.saturating_sub(hdr_len).max(1) as u64;
        let pay = (job.total - job.off).min(max_pay);
        let last = job.off + pay == job.total;
        let seg = job.kind.segment(job.off, last, &[]);
        let mut hdr = [0u8; MAX_SEGMENT_HEADER_LEN];
        let Ok(n) = seg.emit_header(&mut hdr) else {
            break;
        };
        let ulpdu_len = n + pay as usize;
        let a = tx.frames.len();
        tx.frames
            .extend_from_slice(&(ulpdu_len as u16).to_be_bytes());
        tx.frames.extend_from_slice(&hdr[..n]);
        let b = tx.frames.len();
        tx.push_frame(a, b);
        let mut crc = crc_on.then(crc::Crc32c::new);
        if let Some(c) = crc.as_mut() {
            c.update(&tx.frames[a..b]);
        }
        // Payload pieces: [off, off+pay) over the gather list.
        for (i, at, k) in seg_span(segs, job.off, pay as usize) {
            let s = &segs[i];
            if copy {
                // Copied into the frame: with CRC the bytes that go out must be the bytes
                // the CRC covers, and registered memory may change (a peer's Write into
                // what it reads) while the batch waits for the socket.
                let a = tx.frames.len();
                tx.frames.resize(a + k, 0);
                if !s.region.copy_out(s.offset + at, &mut tx.frames[a..]) {
                    return Err(Revoked);
                }
                if let Some(c) = crc.as_mut() {
                    c.update(&tx.frames[a..]);
                }
                tx.push_frame(a, a + k);
            } else {
                tx.pieces.push(Piece::Mem {
                    seg: i,
                    offset: s.offset + at,
                    len: k,
                });
            }
        }
        let a = tx.frames.len();
        let pad = pad_len(ulpdu_len);
        tx.frames.extend_from_slice(&[0u8; 3][..pad]);
        if let Some(c) = crc.as_mut() {
            c.update(&tx.frames[a..]);
        }
        let crc_bytes = crc.map(|c| c.wire_bytes()).unwrap_or([0; 4]);
        tx.frames.extend_from_slice(&crc_bytes);
        let b = tx.frames.len();
        tx.push_frame(a, b);
        debug_assert_eq!(fpdu_len(ulpdu_len), 2 + ulpdu_len + pad + 4, "FPDU framing");
        job.off += pay;
        if last {
            if let Some(imm) = job.kind.immediate(job.total) {
                // The Immediate Data goes right behind the Write's last segment, in the same
                // job: the WR completes once both are written, and the peer's receive
                // completes only after the Write is placed (TCP keeps the order).
                let a = tx.frames.len();
                let framed = tx.enc.encode_segment(&imm, &mut tx.frames);
                debug_assert!(framed.is_ok(), "a 26-byte ULPDU always frames");
                let b = tx.frames.len();
                tx.push_frame(a, b);
            }
            job.framed_last = true;
            break;
        }
    }
    Ok(())
}

impl Tx {
    /// A message may be framed into the current batch now and written later: the engine holds
    /// a batch, nothing is queued that must go first (control frames, a job not fully framed,
    /// FPDUs held for the initiator), and the batch is not full.
    fn can_hold(&self) -> bool {
        (self.held || self.corked)
            && self.nothing_before()
            && self.frames.len() < HOLD_MAX
            && (self.job.is_none() || self.at == self.pieces.len())
    }

    /// Nothing queued must go before a new message: no control frame, no job left to frame,
    /// no FPDUs held for the initiator, nothing being abandoned. (Pieces framed but not
    /// written yet may wait: the message goes behind them.)
    fn nothing_before(&self) -> bool {
        !self.hold
            && !self.abandon
            && self.ctl.is_empty()
            && self.job.as_ref().is_none_or(|j| j.cur.framed_last)
    }

    /// Queues `frames[a..b]` behind the batch: as more of the last piece if that piece ends at
    /// `a` and is not all written yet, so a run of copied frames is one iovec.
    fn push_frame(&mut self, a: usize, b: usize) {
        if self.pieces.len() > self.at {
            if let Some(Piece::Frame(_, end)) = self.pieces.last_mut() {
                if *end == a {
                    *end = b;
                    return;
                }
            }
        }
        self.pieces.push(Piece::Frame(a, b));
    }

    /// Cuts the batch back to its first `f` frame bytes and `p` pieces (the last of which may
    /// have grown past `f` since).
    fn cut_to(&mut self, f: usize, p: usize) {
        self.frames.truncate(f);
        self.pieces.truncate(p);
        if let Some(Piece::Frame(_, end)) = self.pieces.last_mut() {
            *end = (*end).min(f);
        }
    }

    /// Nothing waits to be written (no control frame, no unwritten piece, no job left to
    /// frame) and nothing holds FPDUs back: a message may be framed as a batch of its own.
    fn idle(&self) -> bool {
        self.nothing_before() && self.at == self.pieces.len()
    }

    /// A message posted by a thread whose `looks()` is `mark` (`clock`: read only if the post
    /// continues that thread's run, `Burst::holds`): whether it goes into the held batch
    /// (`corked`). True when the burst starts being held (the link must be
    /// told: `TcpConn::start_cork`). A message that is not held (a slow post, a look for
    /// completions between, a large message) uncorks the connection and is written behind
    /// what was held, in order.
    pub(super) fn note_post(
        &mut self,
        clock: impl FnOnce() -> u64,
        mark: u64,
        small: bool,
    ) -> bool {
        if !self.burst.holds(clock, mark, small) {
            self.corked = false;
            return false;
        }
        !std::mem::replace(&mut self.corked, true)
    }

    /// Before framing into the batch: a batch fully written is started afresh (and with it
    /// the job it came from, if any, is done).
    fn start_held(&mut self) {
        if self.at == self.pieces.len() {
            self.frames.clear();
            self.pieces.clear();
            self.at = 0;
            self.skip = 0;
            self.job = None;
        }
    }

    /// Frames `seg` as one FPDU into the batch (behind what it holds). False, and the batch as
    /// it was, if it cannot be framed.
    fn frame_segment(&mut self, seg: &Segment<'_>) -> bool {
        let mut hdr = [0u8; MAX_SEGMENT_HEADER_LEN];
        let Ok(n) = seg.emit_header(&mut hdr) else {
            return false;
        };
        let payload = seg.payload();
        if n + payload.len() > MAX_ULPDU_LEN {
            return false;
        }
        frame_ulpdu(self, &hdr[..n], payload.len(), |out| {
            out.copy_from_slice(payload);
            true
        })
    }

    /// Frames `seg` as one FPDU and queues it after the current batch. False if it cannot be
    /// framed.
    pub(super) fn push_segment(&mut self, seg: &Segment<'_>) -> bool {
        let mut out = Vec::new();
        let ok = self.enc.encode_segment(seg, &mut out).is_ok();
        if ok {
            self.ctl.push_back((out, true));
        }
        ok
    }
}

/// How a non-blocking connect ended, once its socket is writable: the socket's error, else
/// whether it is connected. A connection reset between those two looks (a listener out of
/// descriptors accepts and closes at once) leaves the socket closed with its error pending,
/// so the second look fails with ENOTCONN: the error is taken again then, so that the
/// requester hears the reset (NON_PEER_REJECTED), not ENOTCONN (UNREACHABLE, as for a host
/// that cannot be reached: about one run in thirty of `fd_limit`'s listener test).
fn connect_outcome(
    mut take_error: impl FnMut() -> io::Result<Option<io::Error>>,
    connected: impl FnOnce() -> io::Result<()>,
) -> io::Result<()> {
    match take_error() {
        Ok(None) => connected().map_err(|e| match take_error() {
            Ok(Some(pending)) => pending,
            _ => e,
        }),
        Ok(Some(e)) | Err(e) => Err(e),
    }
}

/// What a flush outside `transmit` tells the engine once `tx` is let go.
enum Drained {
    /// Nothing.
    No,
    /// The queued message it waited for is written (`tx_drained`).
    Done,
    /// A region of the job was revoked: the connection ends BROKEN.
    Revoked,
}

impl Drained {
    fn of(tx: &mut Tx, done: bool) -> Drained {
        if std::mem::take(&mut tx.revoked) {
            tx.notify = false;
            Drained::Revoked
        } else if done && std::mem::take(&mut tx.notify) {
            Drained::Done
        } else {
            Drained::No
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u64 = 7 << 40;

    /// Posts `n` messages `gap` ns apart (each `transmit` taking no time), by a thread whose
    /// looks are `mark`: which were held.
    fn posts(b: &mut Burst, start: u64, n: usize, gap: u64, mark: u64, small: bool) -> Vec<bool> {
        (0..n)
            .map(|i| {
                let now = start + i as u64 * gap;
                let held = b.holds(|| now, mark, small);
                b.ended(|| now);
                held
            })
            .collect()
    }

    #[test]
    fn the_messages_of_a_quick_burst_after_the_first_two_are_held() {
        let mut b = Burst::default();
        let held = posts(&mut b, 1_000_000, 6, 300, ME, true);
        assert_eq!(held, [false, false, true, true, true, true]);
    }

    #[test]
    fn posts_further_apart_than_the_burst_gap_are_never_held() {
        let mut b = Burst::default();
        let held = posts(&mut b, 1_000_000, 6, BURST_GAP_NS, ME, true);
        assert!(held.iter().all(|h| !h), "{held:?}");
    }

    #[test]
    fn a_look_for_completions_ends_a_burst() {
        let mut b = Burst::default();
        assert_eq!(posts(&mut b, 1_000, 3, 100, ME, true), [false, false, true]);
        // The same thread looked (its mark moved on): the next two go out at once.
        assert_eq!(
            posts(&mut b, 1_300, 3, 100, ME + 1, true),
            [false, false, true]
        );
        // Another thread's post starts a burst of its own.
        assert!(!b.holds(|| 1_600, 9 << 40, true));
    }

    #[test]
    fn after_a_burst_written_late_nothing_is_held_until_the_poster_looks() {
        let mut b = Burst::default();
        assert_eq!(posts(&mut b, 1_000, 3, 100, ME, true), [false, false, true]);
        assert!(b.ended_by(1_200 + BURST_GAP_NS) && !b.ended_by(1_300));
        b.unlooked(); // the progress thread wrote it
        assert_eq!(posts(&mut b, 10_000, 4, 100, ME, true), [false; 4]);
        // Another thread's posts start a burst of their own.
        assert_eq!(
            posts(&mut b, 20_000, 3, 100, 9 << 40, true),
            [false, false, true]
        );
        let mut b = Burst::default();
        assert_eq!(posts(&mut b, 1_000, 3, 100, ME, true), [false, false, true]);
        b.unlooked();
        assert_eq!(
            posts(&mut b, 10_000, 3, 100, ME + 1, true),
            [false, false, true]
        );
    }

    #[test]
    fn bursts_written_late_in_a_row_double_the_looks_before_holding_again() {
        let mut b = Burst::default();
        let mut mark = ME;
        let mut t = 1_000;
        // Returns whether the third post of a burst after one look was held.
        let mut round = |b: &mut Burst| {
            mark += 1;
            t += 100_000;
            posts(b, t, 3, 100, mark, true)[2]
        };
        let mut held = vec![];
        for _ in 0..12 {
            let h = round(&mut b);
            if h {
                b.unlooked(); // each held burst is written late
            }
            held.push(h);
        }
        // Holding resumes after 1, 2, 4, 8 looks after the first, second, third and fourth
        // late burst in a row (the look before a burst counts), then after 16 at most.
        assert_eq!(
            held,
            [true, true, false, true, false, false, false, true, false, false, false, false]
        );
        for _ in 0..6 {
            let n = (1..=20)
                .find(|_| round(&mut b))
                .expect("held again within 20 looks");
            assert!(n <= 16, "{n}");
            b.unlooked();
        }
        // Once a held burst is written at a look, one late burst costs one look again.
        while !round(&mut b) {}
        b.looked();
        assert!(round(&mut b));
        b.unlooked();
        assert!(round(&mut b));
    }

    #[test]
    fn a_large_message_is_never_held_and_the_burst_goes_on_after_it() {
        let mut b = Burst::default();
        assert_eq!(posts(&mut b, 1_000, 3, 100, ME, true), [false, false, true]);
        assert!(!b.holds(|| 1_300, ME, false));
        b.ended(|| 1_300);
        assert!(b.holds(|| 1_400, ME, true));
    }

    #[test]
    fn a_connect_reset_between_its_two_looks_reports_the_reset() {
        use std::io::{Error, ErrorKind};
        let outcome = |errors: Vec<Option<i32>>, connected: Option<i32>| {
            let mut errors = errors.into_iter();
            connect_outcome(
                || Ok(errors.next().flatten().map(Error::from_raw_os_error)),
                || connected.map_or(Ok(()), |e| Err(Error::from_raw_os_error(e))),
            )
            .map_err(|e| e.kind())
        };
        assert_eq!(outcome(vec![None], None), Ok(()));
        assert_eq!(
            outcome(vec![Some(libc::ECONNREFUSED)], None),
            Err(ErrorKind::ConnectionRefused)
        );
        // Reset after the first look: the second finds ENOTCONN, the error is taken again.
        assert_eq!(
            outcome(vec![None, Some(libc::ECONNRESET)], Some(libc::ENOTCONN)),
            Err(ErrorKind::ConnectionReset)
        );
        // Nothing pending: ENOTCONN as it is.
        assert_eq!(
            outcome(vec![None, None], Some(libc::ENOTCONN)),
            Err(ErrorKind::NotConnected)
        );
    }

    #[test]
    fn a_post_that_begins_its_posters_run_reads_no_clock() {
        let mut b = Burst::default();
        let reads = std::cell::Cell::new(0);
        let clock = |t: u64| {
            reads.set(reads.get() + 1);
            t
        };
        // A ping-pong: every post follows a look for completions (the mark moves on).
        for i in 0..4 {
            assert!(!b.holds(|| clock(1_000 * i), ME + i, true));
            b.ended(|| clock(1_000 * i + 100));
        }
        assert_eq!(reads.get(), 0, "a ping-pong's post reads no clock");
        // A run without looks: timed from its second post, whose gap is not known (quick).
        assert_eq!(
            posts(&mut b, 10_000, 3, 100, ME + 9, true),
            [false, false, true]
        );
        let mut b = Burst::default();
        assert!(!b.holds(|| clock(1_000), ME, true));
        b.ended(|| clock(1_100));
        assert!(
            !b.holds(|| clock(50_000), ME, true),
            "second: quick, not yet held"
        );
        b.ended(|| clock(50_100));
        assert_eq!(reads.get(), 2, "timed from the run's second post");
        assert!(
            !b.holds(|| clock(50_100 + BURST_GAP_NS), ME, true),
            "the gap counts again"
        );
    }
}
