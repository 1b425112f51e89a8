//! One tcp connection: the MPA exchange, the transmit side (FPDUs gathered straight from
//! registered memory into `sendmsg`), and the receive side (FPDUs parsed from a staging buffer
//! and handed to the engine segment by segment).
//!
//! Locks: `rx` is taken only by the progress thread and by accept/reject; `tx` by whoever
//! transmits. The receive path may call into the engine, which may transmit (`tx`) or close
//! (`tx` only), so the order is always rx -> engine -> tx, never the reverse.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Instant;

use arrayvec::ArrayVec;
use iwarp::ddp::{TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN};
use iwarp::fpdu::{fpdu_len, pad_len, split_fpdu, MAX_ULPDU_LEN};
use iwarp::mpa::{
    InitiatorConfig, InitiatorEvent, MpaInitiator, MpaResponder, ResponderConfig, ResponderEvent,
    Rtr, RtrSet,
};
use iwarp::rdmap::{ReadRequest, IMMEDIATE_DATA_LEN, MAX_SEGMENT_HEADER_LEN, RTR_STAG};
use iwarp::segment::{mulpdu_for_emss, TaggedReassembly, UntaggedReassembly};
use iwarp::terminate::{
    DdpTaggedErrorCode, DdpUntaggedErrorCode, LlpErrorCode, RdmapErrorCode, TerminateCause,
    TerminateMessage,
};
use iwarp::{crc, FpduEncoder, Segment};
use rustix::event::epoll::EventFlags;
use socket2::{Domain, Socket, Type};

use super::{lock, Shared, LINGER, REQUEST_TIMEOUT, RNR_GRACE};
use crate::engine::port::{
    Connection, CrArrivalInfo, Listener, OutMsg, Payload, PendingRequest, TxOutcome,
};
use crate::engine::qp::{
    place_at, Qp, RecvWr, RxReadFault, RxResponse, RxTake, RxWriteFault, Segs,
};
use crate::mem::region::{recv_scatter, send_gather, IoPiece, RecvPiece, MAX_GATHER};
use crate::mem::{seg_span, RemoteFault, Seg};
use crate::types::{ConnectionEventKind, DtoStatus, EpState, IaAddress, MAX_IOV};

/// Staging buffer for inbound bytes: holds several full-size FPDUs.
const RX_BUF: usize = 256 * 1024;
/// Most FPDUs framed into one gathered write.
const BATCH_FPDUS: usize = 20;
/// Tagged payloads at least this long that are not all buffered yet are read from the socket
/// straight into their destination (cut-through) instead of through the staging buffer.
const CUT_MIN: usize = 8192;

enum Phase {
    /// Active side: TCP connect in progress.
    Connecting {
        init: MpaInitiator,
        attempt: u64,
        dial: super::Dial,
    },
    /// Active side: Request sent, waiting for the Reply.
    AwaitReply { init: MpaInitiator, attempt: u64 },
    /// Passive side: waiting for the Request.
    AwaitRequest {
        resp: MpaResponder,
        sp: Weak<dyn Listener>,
        deadline: Instant,
    },
    /// Passive side: the request is a CR, waiting for accept or reject.
    AwaitAccept { resp: MpaResponder },
    /// FPDUs flow.
    Established,
    /// Done with the stream: waiting for the peer's FIN (or the deadline), then dropped.
    Closing { deadline: Instant },
    /// Deregistered.
    Dead,
}

struct Rx {
    phase: Phase,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    crc: bool,
    untagged: UntaggedReassembly,
    tagged: TaggedReassembly,
    /// The receive buffer of the Send being reassembled, and its SE flag.
    recv: Option<(RecvWr, bool)>,
    /// The first FPDU from the peer arrived (the responder may transmit).
    got_first: bool,
    /// A Send found no receive buffer: its ULPDU waits here until one is posted or `rnr_until`.
    stalled: Option<Vec<u8>>,
    rnr_until: Option<Instant>,
    /// We sent a Read RTR: its zero-length response is not the engine's.
    rtr_read_pending: bool,
    peer_gone: bool,
    /// A tagged segment whose payload is being read straight into its destination.
    cut: Option<Cut>,
    /// Stream bytes to drop before the next FPDU (the pad after a cut-through payload).
    skip: usize,
}

/// A large RDMA Write or Read Response segment read from the socket straight into registered
/// memory (only without CRC, which would have to be checked before placement). Its header
/// passed every check of an ordinary segment, and each remaining range is checked again by
/// the engine before the bytes for it are read.
struct Cut {
    read_resp: bool,
    last: bool,
    stag: u32,
    /// TO of the next payload byte.
    to: u64,
    /// Payload bytes still to come.
    left: usize,
    /// The segment's DDP/RDMAP header, for a Terminate.
    header: [u8; TAGGED_HEADER_LEN],
}

/// Where the bytes of a cut-through placement come from.
#[derive(Clone, Copy)]
enum CutSrc<'a> {
    /// Already in the staging buffer.
    Staged(&'a [u8]),
    /// The socket (as much as it has, up to the segment's end).
    Socket,
}

/// How a cut-through step ended.
enum CutStep {
    /// Bytes were placed (or the segment finished): go on.
    Progress,
    /// The socket has nothing more now.
    Blocked,
    /// The peer closed (true: with an error).
    Eof(bool),
    /// The connection ended (Terminate sent, or the endpoint moved on).
    Stop,
}

/// Where a piece of a batched write comes from.
#[derive(Clone, Copy)]
enum Piece {
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
    Send {
        msn: u32,
        solicited: bool,
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
fn parse_write_immed_data(d: [u8; IMMEDIATE_DATA_LEN]) -> (u32, u32) {
    (
        u32::from_be_bytes([d[0], d[1], d[2], d[3]]),
        u32::from_be_bytes([d[4], d[5], d[6], d[7]]),
    )
}

struct TxJob {
    kind: JobKind,
    segs: Segs,
    total: u64,
    /// Payload bytes already framed.
    off: u64,
    framed_last: bool,
}

struct Tx {
    /// Responder before the initiator's first FPDU: FPDUs wait (RFC 5044).
    hold: bool,
    job: Option<TxJob>,
    /// Drop the job once the current batch is written (a Terminate or an abort cut it off).
    abandon: bool,
    /// Control bytes to send after the current batch: (bytes, is an FPDU).
    ctl: VecDeque<(Vec<u8>, bool)>,
    frames: Vec<u8>,
    pieces: Vec<Piece>,
    at: usize,
    skip: usize,
    /// The engine waits for `tx_drained`.
    notify: bool,
    msn_send: u32,
    msn_read: u32,
    mulpdu: usize,
    enc: FpduEncoder,
    /// Shut the socket down once everything is written.
    shut_after: bool,
    shut: bool,
    failed: bool,
    want_out: bool,
}

/// A connection's epoll registration (`Shared::register`, `modify`, `deregister`).
#[derive(Default)]
pub(crate) struct Interest {
    pub(crate) flags: EventFlags,
    /// The socket is in the connections' set (`Shared` takes it out while consumers read it
    /// directly).
    pub(crate) attached: bool,
    /// Deregistered: never added again.
    pub(crate) gone: bool,
}

/// One connection.
pub(crate) struct TcpConn {
    pub(crate) id: u64,
    sock: Socket,
    shared: Weak<Shared>,
    remote: SocketAddr,
    ep: Mutex<Weak<Qp>>,
    rx: Mutex<Rx>,
    tx: Mutex<Tx>,
    rx_paused: AtomicBool,
    /// Its epoll interest includes writability (a connect or a transmit backlog in progress):
    /// a consumer's poll then asks epoll too (`Shared::poll_direct`).
    pub(crate) wants_out: AtomicBool,
    /// Its epoll interest and whether the socket is in the connections' set.
    pub(crate) interest: Mutex<Interest>,
    peer_fin: AtomicBool,
    /// `shut` found `rx` locked (by the receive path, which may be the caller itself): the
    /// receive side moves to Closing when it lets go (`apply_pending_shut`).
    shut_pending: AtomicBool,
}

impl TcpConn {
    fn new(id: u64, shared: Weak<Shared>, sock: Socket, remote: SocketAddr, phase: Phase) -> Self {
        TcpConn {
            id,
            sock,
            shared,
            remote,
            ep: Mutex::new(Weak::new()),
            rx: Mutex::new(Rx {
                phase,
                buf: vec![0u8; RX_BUF].into_boxed_slice(),
                start: 0,
                end: 0,
                crc: false,
                untagged: UntaggedReassembly::new(),
                tagged: TaggedReassembly::new(),
                recv: None,
                got_first: false,
                stalled: None,
                rnr_until: None,
                rtr_read_pending: false,
                peer_gone: false,
                cut: None,
                skip: 0,
            }),
            tx: Mutex::new(Tx {
                hold: false,
                job: None,
                abandon: false,
                ctl: VecDeque::new(),
                frames: Vec::with_capacity(BATCH_FPDUS * 32),
                pieces: Vec::with_capacity(BATCH_FPDUS * 4),
                at: 0,
                skip: 0,
                notify: false,
                msn_send: 1,
                msn_read: 1,
                mulpdu: mulpdu_for_emss(1460),
                enc: FpduEncoder::new(false),
                shut_after: false,
                shut: false,
                failed: false,
                want_out: false,
            }),
            rx_paused: AtomicBool::new(false),
            wants_out: AtomicBool::new(false),
            interest: Mutex::new(Interest::default()),
            peer_fin: AtomicBool::new(false),
            shut_pending: AtomicBool::new(false),
        }
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }

    fn shared(&self) -> Option<Arc<Shared>> {
        self.shared.upgrade()
    }

    fn ep(&self) -> Option<Arc<Qp>> {
        lock(&self.ep).upgrade()
    }

    fn interest(&self, want_out: bool) -> EventFlags {
        let mut f = EventFlags::empty();
        if !self.rx_paused.load(Ordering::SeqCst) {
            f |= EventFlags::IN | EventFlags::RDHUP;
        }
        if want_out {
            f |= EventFlags::OUT;
        }
        f
    }

    /// Sets the socket's epoll interest from the current state (`tx.want_out`, `rx_paused`),
    /// read and applied under the `tx` lock: callers that race (a posting thread whose write
    /// would block, a poller whose flush finished) then cannot apply their views out of order
    /// and leave a transmit backlog without `EPOLLOUT`.
    fn update_interest(&self) {
        if let Some(s) = self.shared() {
            let tx = lock(&self.tx);
            s.modify(self, self.interest(tx.want_out));
        }
    }

    /// Active side: starts a non-blocking connect from the IA's address.
    pub(crate) fn connect(
        id: u64,
        shared: &Arc<Shared>,
        ep: &Arc<Qp>,
        attempt: u64,
        dial: super::Dial,
    ) -> Result<(), (io::Error, super::Dial)> {
        let (sock, init) = match Self::try_connect(shared, ep, &dial) {
            Ok(x) => x,
            Err(e) => return Err((e, dial)),
        };
        let target = dial.target;
        let conn = Arc::new(TcpConn::new(
            id,
            Arc::downgrade(shared),
            sock,
            target,
            Phase::Connecting {
                init,
                attempt,
                dial,
            },
        ));
        *lock(&conn.ep) = Arc::downgrade(ep);
        // Writability ends the connect (`on_writable`).
        lock(&conn.tx).want_out = true;
        // The endpoint learns its connection before epoll may drive it: once registered, the
        // handshake can finish on another thread (progress thread or a polling consumer), and
        // an endpoint that is no longer pending would then close the connection it just got.
        ep.set_pending_conn(attempt, conn.clone());
        shared.set_timed(id, true);
        shared
            .register(&conn, EventFlags::OUT | EventFlags::RDHUP)
            .map_err(|e| {
                let dial = super::Dial {
                    target,
                    private_data: Vec::new(),
                    refused_until: std::time::Instant::now(),
                };
                (e, dial)
            })
    }

    /// The socket of an active connect, connect(2) started, and the MPA initiator.
    fn try_connect(
        shared: &Arc<Shared>,
        ep: &Arc<Qp>,
        dial: &super::Dial,
    ) -> io::Result<(Socket, MpaInitiator)> {
        let target = dial.target;
        let private_data = &dial.private_data[..];
        let (ird, ord) = ep.read_depths();
        let config = InitiatorConfig {
            crc: shared.opts.crc,
            enhanced: true,
            ird: ird.min(iwarp::mpa::IRD_ORD_MAX as usize) as u16,
            ord: ord.min(iwarp::mpa::IRD_ORD_MAX as usize) as u16,
            // A Read RTR is a read from us: offered only when our ORD allows one.
            peer_to_peer: Some(if ord > 0 {
                RtrSet::WRITE.union(RtrSet::READ)
            } else {
                RtrSet::WRITE
            }),
        };
        let init = MpaInitiator::new(config, private_data)
            .map_err(|_| io::Error::from(ErrorKind::InvalidInput))?;
        let sock = Socket::new(Domain::IPV4, Type::STREAM.cloexec(), None)?;
        sock.set_nonblocking(true)?;
        sock.set_nodelay(true)?;
        sock.bind(&SocketAddr::new(IpAddr::V4(shared.local_ip), 0).into())?;
        match sock.connect(&target.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        Ok((sock, init))
    }

    /// Passive side: a connection arrived at a listener.
    pub(crate) fn accepted(
        id: u64,
        shared: &Arc<Shared>,
        stream: TcpStream,
        peer: SocketAddr,
        sp: Weak<dyn Listener>,
    ) {
        let sock = Socket::from(stream);
        if sock.set_nonblocking(true).is_err() || sock.set_nodelay(true).is_err() {
            return;
        }
        let resp = MpaResponder::new(ResponderConfig {
            crc_required: shared.opts.crc,
        });
        let conn = Arc::new(TcpConn::new(
            id,
            Arc::downgrade(shared),
            sock,
            peer,
            Phase::AwaitRequest {
                resp,
                sp,
                deadline: Instant::now() + REQUEST_TIMEOUT,
            },
        ));
        shared.set_timed(id, true);
        if shared
            .register(&conn, EventFlags::IN | EventFlags::RDHUP)
            .is_err()
        {
            shared.deregister(&conn);
        }
    }

    fn mss_mulpdu(&self) -> usize {
        let mss = self.sock.mss().unwrap_or(1460) as usize;
        mulpdu_for_emss(mss.clamp(64, 65535)).min(MAX_ULPDU_LEN)
    }

    // --------------------------------------------------------------------------------------------
    // Events from the progress thread

    pub(crate) fn on_event(self: &Arc<Self>, flags: EventFlags) {
        if flags.intersects(EventFlags::OUT | EventFlags::ERR | EventFlags::HUP) {
            self.on_writable();
        }
        if flags.intersects(EventFlags::IN | EventFlags::RDHUP | EventFlags::ERR | EventFlags::HUP)
        {
            self.read_and_process(flags.intersects(EventFlags::ERR | EventFlags::HUP));
        }
    }

    fn on_writable(self: &Arc<Self>) {
        // A finished connect?
        {
            let mut rx = lock(&self.rx);
            if let Phase::Connecting { .. } = rx.phase {
                let res = match self.sock.take_error() {
                    Ok(None) => self.sock.peer_addr().map(|_| ()),
                    Ok(Some(e)) | Err(e) => Err(e),
                };
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
                            super::connect_failed(shared, &ep, attempt, dial, e.kind());
                        }
                        return;
                    }
                }
            }
        }
        let notify = {
            let mut tx = lock(&self.tx);
            let done = self.flush_locked(&mut tx);
            done && std::mem::take(&mut tx.notify)
        };
        self.update_interest();
        if notify {
            if let Some(ep) = self.ep() {
                ep.tx_drained(self.id);
            }
        }
    }

    pub(crate) fn on_readable(self: &Arc<Self>) {
        self.read_and_process(false);
    }

    /// A consumer's poll reads the socket directly (no epoll): true if bytes arrived. Nothing
    /// to do while the receive side is paused (its data waits for the progress thread).
    pub(crate) fn poll_read(self: &Arc<Self>) -> bool {
        if self.rx_paused.load(Ordering::Relaxed) {
            return false;
        }
        let got = self.read_and_process_locked(false);
        self.apply_pending_shut();
        got
    }

    fn read_and_process(self: &Arc<Self>, hangup: bool) {
        self.read_and_process_locked(hangup);
        self.apply_pending_shut();
    }

    /// Reads and handles what the socket holds; true if it held something (bytes or its end).
    fn read_and_process_locked(self: &Arc<Self>, hangup: bool) -> bool {
        let mut rx = lock(&self.rx);
        // The last read found less than it had room for: the socket was empty then, and what
        // arrives later is reported by epoll again (level-triggered), so no read to see EAGAIN.
        let mut drained = false;
        let mut got = false;
        loop {
            if matches!(rx.phase, Phase::Dead | Phase::Connecting { .. }) {
                return got;
            }
            if rx.stalled.is_some() {
                if hangup {
                    // Waiting for a receive buffer, and the socket failed or fully closed.
                    self.on_eof(rx, true);
                }
                return got;
            }
            if rx.cut.is_some() {
                match self.cut_place(&mut rx, CutSrc::Socket) {
                    // The engine shut the stream meanwhile (as for staged segments).
                    CutStep::Progress if self.shut_pending.swap(false, Ordering::SeqCst) => {
                        rx.cut = None;
                        self.close_rx(&mut rx);
                        continue;
                    }
                    CutStep::Progress => {
                        got = true;
                        continue;
                    }
                    CutStep::Blocked | CutStep::Stop => return got,
                    CutStep::Eof(error) => {
                        if !error {
                            self.peer_fin.store(true, Ordering::SeqCst);
                        }
                        self.on_eof(rx, error);
                        return true;
                    }
                }
            }
            if rx.start < rx.end {
                rx = match self.process(rx) {
                    Some(g) => g,
                    None => return true,
                };
                if rx.cut.is_some() {
                    continue; // the rest of that segment goes straight to its destination
                }
            }
            // Make room.
            if rx.start > 0 && (rx.end == rx.buf.len() || rx.start == rx.end) {
                let (s, e) = (rx.start, rx.end);
                rx.buf.copy_within(s..e, 0);
                rx.end = e - s;
                rx.start = 0;
            }
            if drained {
                return got;
            }
            let end = rx.end;
            let room = rx.buf.len() - end;
            let n = match (&self.sock).read(&mut rx.buf[end..]) {
                Ok(0) => {
                    self.peer_fin.store(true, Ordering::SeqCst);
                    self.on_eof(rx, false);
                    return true;
                }
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return got,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.on_eof(rx, true);
                    return true;
                }
            };
            got = true;
            rx.end += n;
            drained = n < room;
        }
    }

    /// The peer closed (or the socket failed).
    fn on_eof(self: &Arc<Self>, mut rx: MutexGuard<'_, Rx>, error: bool) {
        rx.peer_gone = true;
        let phase = std::mem::replace(&mut rx.phase, Phase::Dead);
        let held = rx.recv.take();
        drop(rx);
        match phase {
            Phase::AwaitReply { attempt, .. } | Phase::Connecting { attempt, .. } => {
                self.kill();
                if let Some(ep) = self.ep() {
                    ep.attempt_failed(attempt, ConnectionEventKind::NonPeerRejected, Vec::new());
                }
            }
            Phase::Established => {
                let ep = self.ep();
                if let (Some(ep), Some((wr, _))) = (&ep, held) {
                    ep.rx_send_done(&wr, DtoStatus::Flushed, 0, true);
                }
                self.kill();
                if let Some(ep) = ep {
                    ep.peer_closed(self.id, error);
                }
            }
            Phase::AwaitAccept { resp } => {
                // The CR stays; accept finds the requester gone.
                lock(&self.rx).phase = Phase::AwaitAccept { resp };
                self.pause_rx();
            }
            _ => self.kill(),
        }
    }

    fn pause_rx(&self) {
        self.rx_paused.store(true, Ordering::SeqCst);
        self.update_interest();
    }

    fn resume_rx(&self) {
        self.rx_paused.store(false, Ordering::SeqCst);
        self.update_interest();
    }

    /// Deregisters and shuts the socket down; the connection is gone.
    fn kill(&self) {
        {
            let mut rx = lock(&self.rx);
            rx.phase = Phase::Dead;
        }
        {
            let mut tx = lock(&self.tx);
            tx.failed = true;
            tx.job = None;
            tx.ctl.clear();
            tx.pieces.clear();
            tx.at = 0;
        }
        let _ = self.sock.shutdown(Shutdown::Both);
        if let Some(s) = self.shared() {
            s.deregister(self);
        }
    }

    /// The IA is going away.
    pub(crate) fn abort(&self) {
        self.kill();
    }

    pub(crate) fn on_wake(self: &Arc<Self>) {
        self.on_wake_locked();
        self.apply_pending_shut();
    }

    fn on_wake_locked(self: &Arc<Self>) {
        let rx = lock(&self.rx);
        let Some(ulpdu) = rx.stalled.as_ref().cloned() else {
            return;
        };
        let mut rx = rx;
        rx.stalled = None;
        rx.rnr_until = None;
        match self.handle_ulpdu(&mut rx, &ulpdu) {
            Step::Go => {}
            Step::Stall => {
                // Still no buffer: keep waiting (the deadline stays as first set).
                return;
            }
            Step::Stop => return,
        }
        drop(rx);
        self.resume_rx();
        self.on_readable();
    }

    pub(crate) fn on_tick(self: &Arc<Self>, now: Instant) {
        self.apply_pending_shut();
        let mut rx = lock(&self.rx);
        match &rx.phase {
            Phase::AwaitRequest { deadline, .. } | Phase::Closing { deadline } => {
                if now >= *deadline {
                    drop(rx);
                    self.kill();
                }
            }
            Phase::Connecting { attempt, .. } | Phase::AwaitReply { attempt, .. } => {
                let attempt = *attempt;
                drop(rx);
                // The DAT layer gave up (timeout, free, close): drop the socket.
                let stale = self.ep().is_none_or(|ep| {
                    !ep.attempt_pending(attempt, EpState::ActiveConnectionPending)
                });
                if stale {
                    self.kill();
                }
            }
            Phase::Established => {
                if rx.rnr_until.is_some_and(|t| now >= t) {
                    let ulpdu = rx.stalled.take().unwrap_or_default();
                    rx.rnr_until = None;
                    self.fail(
                        rx,
                        TerminateCause::DdpUntagged(DdpUntaggedErrorCode::NoBuffer),
                        &ulpdu,
                    );
                } else if rx.stalled.is_none() {
                    if let Some(s) = self.shared() {
                        s.set_timed(self.id, false);
                    }
                }
            }
            _ => {
                if let Some(s) = self.shared() {
                    s.set_timed(self.id, false);
                }
            }
        }
    }

    // --------------------------------------------------------------------------------------------
    // Receive processing

    /// Processes whatever the staging buffer holds. Returns the guard to go on reading, or None
    /// when reading must stop (stalled, dead, or the lock had to be released).
    fn process<'a>(self: &'a Arc<Self>, mut rx: MutexGuard<'a, Rx>) -> Option<MutexGuard<'a, Rx>> {
        loop {
            match &mut rx.phase {
                Phase::AwaitReply { .. } => {
                    let (s, e) = (rx.start, rx.end);
                    let bytes = rx.buf[s..e].to_vec();
                    rx.start = e;
                    let Phase::AwaitReply { init, attempt } = &mut rx.phase else {
                        unreachable!()
                    };
                    let attempt = *attempt;
                    match init.feed(&bytes) {
                        Ok(None) => return Some(rx),
                        Ok(Some(InitiatorEvent::Accepted(acc))) => {
                            rx.phase = Phase::Established;
                            rx.crc = acc.negotiated.crc;
                            // The stream after the Reply is FPDUs.
                            rx.start = 0;
                            rx.end = acc.leftover.len();
                            rx.buf[..acc.leftover.len()].copy_from_slice(&acc.leftover);
                            if !self.active_established(&mut rx, attempt, acc) {
                                drop(rx);
                                self.kill();
                                return None;
                            }
                            continue;
                        }
                        Ok(Some(InitiatorEvent::Rejected { private_data })) => {
                            rx.phase = Phase::Closing {
                                deadline: Instant::now() + LINGER,
                            };
                            drop(rx);
                            self.kill();
                            if let Some(ep) = self.ep() {
                                ep.attempt_failed(
                                    attempt,
                                    ConnectionEventKind::PeerRejected,
                                    private_data,
                                );
                            }
                            return None;
                        }
                        Err(_) => {
                            drop(rx);
                            self.kill();
                            if let Some(ep) = self.ep() {
                                ep.attempt_failed(
                                    attempt,
                                    ConnectionEventKind::NonPeerRejected,
                                    Vec::new(),
                                );
                            }
                            return None;
                        }
                    }
                }
                Phase::AwaitRequest { .. } => {
                    let (s, e) = (rx.start, rx.end);
                    let bytes = rx.buf[s..e].to_vec();
                    rx.start = e;
                    let Phase::AwaitRequest { resp, sp, .. } = &mut rx.phase else {
                        unreachable!()
                    };
                    match resp.feed(&bytes) {
                        Ok(None) => return Some(rx),
                        Ok(Some(ResponderEvent::Request(req))) => {
                            let sp = sp.clone();
                            let Phase::AwaitRequest { resp, .. } =
                                std::mem::replace(&mut rx.phase, Phase::Dead)
                            else {
                                unreachable!()
                            };
                            rx.phase = Phase::AwaitAccept { resp };
                            drop(rx);
                            if let Some(s) = self.shared() {
                                s.set_timed(self.id, false);
                            }
                            self.deliver_request(sp, req.private_data);
                            return None;
                        }
                        Ok(Some(ResponderEvent::Refused { reply, .. })) => {
                            rx.phase = Phase::Closing {
                                deadline: Instant::now() + LINGER,
                            };
                            drop(rx);
                            self.send_and_close(reply);
                            return None;
                        }
                        Err(_) => {
                            drop(rx);
                            self.kill();
                            return None;
                        }
                    }
                }
                Phase::AwaitAccept { .. } => {
                    // The initiator sends nothing before the Reply; keep what came.
                    if rx.end == rx.buf.len() {
                        drop(rx);
                        self.kill();
                        return None;
                    }
                    return Some(rx);
                }
                Phase::Closing { .. } => {
                    rx.start = rx.end; // discard
                    return Some(rx);
                }
                Phase::Dead | Phase::Connecting { .. } => return None,
                Phase::Established => {}
            }
            // FPDUs.
            loop {
                if rx.skip > 0 {
                    let k = rx.skip.min(rx.end - rx.start);
                    rx.start += k;
                    rx.skip -= k;
                    if rx.skip > 0 {
                        return Some(rx);
                    }
                }
                let (s, e) = (rx.start, rx.end);
                let found = split_fpdu(&rx.buf[s..e], rx.crc);
                match found {
                    Ok(None) => {
                        // A frame longer than the buffer cannot happen (ULPDU <= 65535). A
                        // large tagged segment may go on straight into its destination.
                        return match self.start_cut(&mut rx) {
                            Some(CutStep::Stop) => None,
                            _ => Some(rx),
                        };
                    }
                    Ok(Some((range, total))) => {
                        let ulpdu_at = s + range.start..s + range.end;
                        rx.start = s + total;
                        // The ULPDU is borrowed from the buffer while the engine runs; the
                        // handler never touches `buf`.
                        let buf = std::mem::take(&mut rx.buf);
                        let step = self.handle_ulpdu(&mut rx, &buf[ulpdu_at]);
                        rx.buf = buf;
                        match step {
                            // The engine shut the stream meanwhile (a graceful disconnect that
                            // this segment completed): the rest is discarded.
                            Step::Go if self.shut_pending.swap(false, Ordering::SeqCst) => {
                                self.close_rx(&mut rx);
                                break;
                            }
                            Step::Go => {}
                            Step::Stall | Step::Stop => return None,
                        }
                    }
                    Err(err) => {
                        let cause = err
                            .terminate_cause()
                            .unwrap_or(TerminateCause::Llp(LlpErrorCode::CrcError));
                        self.fail(rx, cause, &[]);
                        return None;
                    }
                }
            }
        }
    }

    /// At an incomplete FPDU: if it is a large RDMA Write or Read Response (and CRC is off),
    /// checks its header as `handle_ulpdu` would, places the payload bytes already buffered,
    /// and leaves the rest to `cut_place` reading from the socket. None: not such a segment
    /// (it is handled whole once it has arrived).
    fn start_cut(self: &Arc<Self>, rx: &mut MutexGuard<'_, Rx>) -> Option<CutStep> {
        const AT: usize = 2; // the MPA length field
        let (s, e) = (rx.start, rx.end);
        let head = &rx.buf[s..e];
        if rx.crc || rx.cut.is_some() || head.len() < AT + TAGGED_HEADER_LEN {
            return None;
        }
        let ulpdu_len = usize::from(u16::from_be_bytes([head[0], head[1]]));
        let payload_len = ulpdu_len.checked_sub(TAGGED_HEADER_LEN)?;
        if payload_len < CUT_MIN {
            return None;
        }
        let mut header = [0u8; TAGGED_HEADER_LEN];
        header.copy_from_slice(&head[AT..AT + TAGGED_HEADER_LEN]);
        let (read_resp, last, stag, to) = match Segment::parse(&header) {
            Ok(Segment::Write { last, stag, to, .. }) => (false, last, stag, to),
            Ok(Segment::ReadResponse { last, stag, to, .. }) => (true, last, stag, to),
            _ => return None, // refused (or handled) whole, as usual
        };
        if !rx.got_first {
            rx.got_first = true;
            self.release_hold();
        }
        let opcode = if read_resp {
            iwarp::Opcode::ReadResponse
        } else {
            iwarp::Opcode::Write
        };
        if let Err(err) = rx.tagged.on_segment(opcode, stag, to, last, payload_len) {
            let cause = err
                .terminate_cause()
                .unwrap_or(TerminateCause::rdmap_local_catastrophic());
            self.fail_in(rx, cause, &header);
            return Some(CutStep::Stop);
        }
        let buffered = e - s - AT - TAGGED_HEADER_LEN;
        let staged = buffered.min(payload_len);
        // After the payload: pad and the (unchecked, zero) CRC field. The FPDU is incomplete,
        // so fewer of those bytes are buffered than there are.
        let trailer = fpdu_len(ulpdu_len) - AT - ulpdu_len;
        rx.skip = trailer - (buffered - staged);
        rx.start = e;
        rx.cut = Some(Cut {
            read_resp,
            last,
            stag,
            to,
            left: payload_len,
            header,
        });
        let from = s + AT + TAGGED_HEADER_LEN;
        let buf = std::mem::take(&mut rx.buf);
        let step = self.cut_place(rx, CutSrc::Staged(&buf[from..from + staged]));
        rx.buf = buf;
        Some(step)
    }

    /// Places the next bytes of the cut-through segment from `src` (the engine checks the
    /// remaining range first), and ends the segment when its last byte is in.
    fn cut_place(self: &Arc<Self>, rx: &mut MutexGuard<'_, Rx>, src: CutSrc<'_>) -> CutStep {
        let Some(cut) = rx.cut.as_ref() else {
            return CutStep::Progress;
        };
        let (read_resp, last, stag, to, left, header) = (
            cut.read_resp,
            cut.last,
            cut.stag,
            cut.to,
            cut.left,
            cut.header,
        );
        let Some(ep) = self.ep() else {
            rx.cut = None;
            return CutStep::Stop;
        };
        let mut got: io::Result<usize> = Ok(0);
        let mut fill = |segs: &[Seg], at: u64| -> usize {
            got = match src {
                CutSrc::Staged(b) => Ok(if place_at(b, segs, at) { b.len() } else { 0 }),
                // The message's last byte is stored after the rest, as `copy_in` does for
                // staged bytes (a consumer may poll it, then read the rest): the socket read
                // stops one short, and that byte comes with a read of its own.
                CutSrc::Socket if last && left == 1 => {
                    let mut b = [0u8; 1];
                    (&self.sock).read(&mut b).map(|n| {
                        if n == 1 && !place_at(&b, segs, at) {
                            return 0; // cannot happen: the engine checked the range
                        }
                        n
                    })
                }
                CutSrc::Socket if last => recv_into(self.fd(), segs, at, left - 1),
                CutSrc::Socket => recv_into(self.fd(), segs, at, left),
            };
            *got.as_ref().unwrap_or(&0)
        };
        let fault = if read_resp {
            match ep.rx_read_response_with(stag, to, left as u64, last, |segs, at| {
                fill(segs, at) as u64
            }) {
                RxResponse::Placed => None,
                RxResponse::NotConnected => Some(None),
                RxResponse::Unexpected => Some(Some(TerminateCause::rdmap_operation(
                    RdmapErrorCode::UnexpectedOpcode,
                ))),
            }
        } else {
            match ep.rx_write_with(stag, to, left as u64, |seg| {
                fill(std::slice::from_ref(seg), 0);
            }) {
                Ok(()) => None,
                Err(RxWriteFault::Access(f)) => Some(Some(tagged_cause(f))),
                Err(RxWriteFault::NotConnected) => Some(None),
            }
        };
        match fault {
            None => {}
            Some(None) => {
                rx.cut = None;
                return CutStep::Stop;
            }
            Some(Some(cause)) => {
                rx.cut = None;
                self.fail_in(rx, cause, &header);
                return CutStep::Stop;
            }
        }
        match got {
            Ok(0) if matches!(src, CutSrc::Socket) => CutStep::Eof(false),
            Ok(n) => {
                let cut = rx.cut.as_mut().expect("checked above");
                cut.left -= n;
                cut.to += n as u64;
                if cut.left == 0 {
                    rx.cut = None;
                }
                CutStep::Progress
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => CutStep::Blocked,
            Err(e) if e.kind() == ErrorKind::Interrupted => CutStep::Progress,
            Err(_) => CutStep::Eof(true),
        }
    }

    /// One inbound ULPDU of an established connection.
    fn handle_ulpdu(self: &Arc<Self>, rx: &mut MutexGuard<'_, Rx>, ulpdu: &[u8]) -> Step {
        let seg = match Segment::parse(ulpdu) {
            Ok(s) => s,
            Err(e) => {
                let cause = e
                    .terminate_cause()
                    .unwrap_or(TerminateCause::rdmap_local_catastrophic());
                return self.fail_in(rx, cause, ulpdu);
            }
        };
        let first = !rx.got_first;
        if first {
            rx.got_first = true;
            self.release_hold();
        }
        let Some(ep) = self.ep() else {
            return Step::Stop;
        };
        // RFC 7306 Immediate Data is a message of QN 0 of its own: it cannot arrive while a
        // Send is half received (whose buffer is held).
        if matches!(seg, Segment::ImmediateData { .. }) && rx.recv.is_some() {
            return self.fail_in(
                rx,
                TerminateCause::DdpUntagged(DdpUntaggedErrorCode::MsnRange),
                ulpdu,
            );
        }
        // A Send's first segment (or Immediate Data, which uses up a receive buffer just the
        // same) takes a receive buffer before anything else is checked, so that a message that
        // must wait leaves the order state untouched.
        if let Segment::Send { mo: 0, .. } | Segment::ImmediateData { .. } = seg {
            if rx.recv.is_none() {
                match ep.rx_send_take() {
                    RxTake::Buffer(wr) => rx.recv = Some((wr, false)),
                    RxTake::NoBuffer => {
                        rx.stalled = Some(ulpdu.to_vec());
                        if rx.rnr_until.is_none() {
                            rx.rnr_until = Some(Instant::now() + RNR_GRACE);
                        }
                        self.pause_rx();
                        if let Some(s) = self.shared() {
                            s.set_timed(self.id, true);
                        }
                        return Step::Stall;
                    }
                    RxTake::NotConnected => return Step::Stop,
                }
            }
        }
        if let Err(e) = rx.untagged.check(&seg).and_then(|_| rx.tagged.check(&seg)) {
            let cause = e
                .terminate_cause()
                .unwrap_or(TerminateCause::rdmap_local_catastrophic());
            return self.fail_in(rx, cause, ulpdu);
        }
        match seg {
            Segment::Send {
                last,
                mo,
                solicited,
                payload,
                ..
            } => {
                let Some((wr, _)) = rx.recv.take() else {
                    return self.fail_in(
                        rx,
                        TerminateCause::DdpUntagged(DdpUntaggedErrorCode::InvalidMo),
                        ulpdu,
                    );
                };
                if !place_at(payload, &wr.segs, mo as u64) {
                    ep.rx_send_done(&wr, DtoStatus::LocalLength, 0, true);
                    return self.fail_in(
                        rx,
                        TerminateCause::DdpUntagged(DdpUntaggedErrorCode::MessageTooLong),
                        ulpdu,
                    );
                }
                if last {
                    let len = mo as u64 + payload.len() as u64;
                    ep.rx_send_done(&wr, DtoStatus::Success, len, solicited);
                } else {
                    rx.recv = Some((wr, solicited));
                }
                Step::Go
            }
            Segment::ImmediateData {
                solicited, data, ..
            } => {
                // The end of an RDMA Write with Immediate Data: the Write before it on this
                // stream is placed; its receive completes with the value and the write length.
                let Some((wr, _)) = rx.recv.take() else {
                    return self.fail_in(
                        rx,
                        TerminateCause::DdpUntagged(DdpUntaggedErrorCode::NoBuffer),
                        ulpdu,
                    );
                };
                let (immediate, len) = parse_write_immed_data(data);
                ep.rx_immed_done(&wr, immediate, u64::from(len), solicited);
                Step::Go
            }
            Segment::Write {
                stag, to, payload, ..
            } => {
                if payload.is_empty() {
                    return Step::Go; // nothing to place (the Write RTR is one of these)
                }
                match ep.rx_write(stag, to, Payload::Bytes(payload)) {
                    Ok(()) => Step::Go,
                    Err(RxWriteFault::Access(f)) => self.fail_in(rx, tagged_cause(f), ulpdu),
                    Err(RxWriteFault::NotConnected) => Step::Stop,
                }
            }
            Segment::ReadRequest { request, .. } => {
                if first && request.size == 0 && request.source_stag == RTR_STAG {
                    // The Read RTR: answer with a zero-length response, no engine involved.
                    let resp = Segment::ReadResponse {
                        last: true,
                        stag: request.sink_stag,
                        to: request.sink_to,
                        payload: &[],
                    };
                    self.send_ctl_segment(&resp);
                    return Step::Go;
                }
                match ep.rx_read_request(
                    request.sink_stag,
                    request.sink_to,
                    request.size as u64,
                    request.source_stag,
                    request.source_to,
                ) {
                    Ok(()) => Step::Go,
                    Err(RxReadFault::Access(f)) => self.fail_in(rx, rdmap_cause(f), ulpdu),
                    Err(RxReadFault::IrdExceeded) => self.fail_in(
                        rx,
                        TerminateCause::DdpUntagged(DdpUntaggedErrorCode::MsnRange),
                        ulpdu,
                    ),
                    Err(RxReadFault::NotConnected) => Step::Stop,
                }
            }
            Segment::ReadResponse {
                last,
                stag,
                to,
                payload,
            } => {
                if rx.rtr_read_pending && payload.is_empty() && last {
                    rx.rtr_read_pending = false;
                    return Step::Go;
                }
                match ep.rx_read_response_segment(stag, to, payload, last) {
                    RxResponse::Placed => Step::Go,
                    RxResponse::NotConnected => Step::Stop,
                    RxResponse::Unexpected => self.fail_in(
                        rx,
                        TerminateCause::rdmap_operation(RdmapErrorCode::UnexpectedOpcode),
                        ulpdu,
                    ),
                }
            }
            Segment::Terminate { message, .. } => {
                // The peer ends the stream. A refused Read Request is reported on the read.
                let read_refused = message.rdmap_header.is_some()
                    || message.ddp.is_some_and(|d| {
                        d.header.first().is_some_and(|c| c & 0x80 == 0)
                            && d.header.get(1).map(|b| b & 0x0f)
                                == Some(iwarp::Opcode::ReadRequest as u8)
                    });
                let held = rx.recv.take();
                rx.phase = Phase::Closing {
                    deadline: Instant::now() + LINGER,
                };
                if let Some((wr, _)) = held {
                    ep.rx_send_done(&wr, DtoStatus::Flushed, 0, true);
                }
                if read_refused {
                    ep.fail_oldest_read(DtoStatus::RemoteAccess);
                }
                ep.peer_closed(self.id, true);
                self.shut(true);
                Step::Stop
            }
        }
    }

    /// Sends a Terminate for `ulpdu` with `cause`, breaks the endpoint and closes the stream.
    fn fail(self: &Arc<Self>, mut rx: MutexGuard<'_, Rx>, cause: TerminateCause, ulpdu: &[u8]) {
        let _ = self.fail_in(&mut rx, cause, ulpdu);
    }

    fn fail_in(
        self: &Arc<Self>,
        rx: &mut MutexGuard<'_, Rx>,
        cause: TerminateCause,
        ulpdu: &[u8],
    ) -> Step {
        let held = rx.recv.take();
        rx.stalled = None;
        rx.rnr_until = None;
        rx.phase = Phase::Closing {
            deadline: Instant::now() + LINGER,
        };
        if let Some(s) = self.shared() {
            s.set_timed(self.id, true);
        }
        let term = Segment::Terminate {
            msn: 1,
            message: TerminateMessage::for_failed_segment(cause, ulpdu),
        };
        {
            let mut tx = lock(&self.tx);
            tx.hold = false; // the Terminate goes out even before the initiator's first FPDU
            if tx.push_segment(&term) {
                tx.abandon = true;
            }
        }
        let ep = self.ep();
        if let (Some(ep), Some((wr, _))) = (&ep, held) {
            ep.rx_send_done(&wr, DtoStatus::Flushed, 0, true);
        }
        if let Some(ep) = ep {
            // Flushes everything; its close (below, or through the engine) sends the Terminate
            // and shuts the stream down.
            ep.end_connection_of(self.id, ConnectionEventKind::Broken, false);
        }
        self.shut(true);
        Step::Stop
    }

    fn deliver_request(self: &Arc<Self>, sp: Weak<dyn Listener>, private_data: Vec<u8>) {
        let req = Box::new(TcpRequest {
            conn: self.clone(),
            info: CrArrivalInfo {
                remote_addr: SocketAddr::new(self.remote.ip(), 0),
                remote_port_qual: self.remote.port() as u64,
                private_data,
            },
        });
        match sp.upgrade().filter(|s| s.is_open()) {
            Some(sp) => sp.request_arrived(req),
            None => req.reject(&[]),
        }
    }

    /// The active side got the Reply: set up framing, send the RTR, report ESTABLISHED.
    fn active_established(
        self: &Arc<Self>,
        rx: &mut MutexGuard<'_, Rx>,
        attempt: u64,
        acc: iwarp::mpa::Accepted,
    ) -> bool {
        let neg = acc.negotiated;
        {
            let mut tx = lock(&self.tx);
            tx.enc = FpduEncoder::new(neg.crc);
            tx.mulpdu = self.mss_mulpdu();
            if let Some(rtr) = neg.rtr {
                let msn = if rtr == Rtr::Read {
                    let m = tx.msn_read;
                    tx.msn_read += 1;
                    rx.rtr_read_pending = true;
                    m
                } else {
                    1
                };
                tx.push_segment(&rtr.segment(msn));
            }
        }
        if let Some(s) = self.shared() {
            s.set_timed(self.id, false);
        }
        let Some(ep) = self.ep() else {
            return false;
        };
        let remote = self.remote;
        let conn: Arc<dyn Connection> = self.clone();
        if !ep.established(
            attempt,
            conn,
            neg.ird as usize,
            neg.ord as usize,
            SocketAddr::new(remote.ip(), 0),
        ) {
            return false;
        }
        // The RTR goes first.
        {
            let mut tx = lock(&self.tx);
            self.flush_locked(&mut tx);
        }
        self.update_interest();
        ep.report_established(acc.private_data);
        true
    }

    // --------------------------------------------------------------------------------------------
    // Transmit

    fn release_hold(&self) {
        let notify = {
            let mut tx = lock(&self.tx);
            if !tx.hold {
                return;
            }
            tx.hold = false;
            let done = self.flush_locked(&mut tx);
            done && std::mem::take(&mut tx.notify)
        };
        self.update_interest();
        if notify {
            if let Some(ep) = self.ep() {
                ep.tx_drained(self.id);
            }
        }
    }

    fn send_ctl_segment(&self, seg: &Segment<'_>) {
        let done = {
            let mut tx = lock(&self.tx);
            if !tx.push_segment(seg) {
                return;
            }
            self.flush_locked(&mut tx)
        };
        if !done {
            self.update_interest();
        }
    }

    /// Sends `bytes` (an MPA frame), then shuts the stream down and lingers for the FIN.
    fn send_and_close(self: &Arc<Self>, bytes: Vec<u8>) {
        {
            let mut tx = lock(&self.tx);
            tx.ctl.push_back((bytes, false));
        }
        self.shut(false);
    }

    /// Ends the stream from our side: the FIN follows what is queued, and the socket lingers for
    /// the peer's FIN. `abandon` drops the rest of the message being written. FPDUs still held
    /// for the initiator's first FPDU are dropped too (the engine flushes their DTOs). Called
    /// from the receive path too, under our own `rx` lock: the receive side then closes when
    /// that lock is let go (`shut_pending`).
    fn shut(&self, abandon: bool) {
        {
            let mut tx = lock(&self.tx);
            tx.shut_after = true;
            if tx.hold {
                tx.hold = false;
                tx.abandon = true;
                tx.ctl.retain(|(_, fpdu)| !fpdu);
            }
            if abandon {
                tx.abandon = true;
            }
            self.flush_locked(&mut tx);
        }
        if let Some(s) = self.shared() {
            s.set_timed(self.id, true);
        }
        match lock_try(&self.rx) {
            Some(mut rx) => self.close_rx(&mut rx),
            None => self.shut_pending.store(true, Ordering::SeqCst),
        }
        self.update_interest();
    }

    /// The receive side of `shut`: Established (or AwaitAccept) becomes Closing, and a receive
    /// buffer that a half-received Send holds completes as flushed (the engine's flush does not
    /// see it; nothing else would complete it).
    fn close_rx(&self, rx: &mut Rx) {
        if matches!(rx.phase, Phase::Established | Phase::AwaitAccept { .. }) {
            rx.phase = Phase::Closing {
                deadline: Instant::now() + LINGER,
            };
        }
        if let Some((wr, _)) = rx.recv.take() {
            if let Some(ep) = self.ep() {
                ep.rx_send_done(&wr, DtoStatus::Flushed, 0, true);
            }
        }
    }

    /// Completes a `shut` that found `rx` locked, once the receive path has let go of it.
    fn apply_pending_shut(&self) {
        if self.shut_pending.swap(false, Ordering::SeqCst) {
            self.close_rx(&mut lock(&self.rx));
        }
    }

    /// Writes as much as the socket takes. True when nothing is left.
    fn flush_locked(&self, tx: &mut Tx) -> bool {
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
                Err(_) => {
                    tx.failed = true;
                    tx.want_out = false;
                    return true;
                }
            }
        }
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
        if tx.job.as_ref().is_some_and(|j| j.framed_last) {
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
        let crc_on = tx.enc.crc_enabled();
        for _ in 0..BATCH_FPDUS {
            let hdr_len = match job.kind {
                JobKind::Send { .. } => UNTAGGED_HEADER_LEN,
                _ => TAGGED_HEADER_LEN,
            };
            let max_pay = tx.mulpdu.saturating_sub(hdr_len).max(1) as u64;
            let pay = (job.total - job.off).min(max_pay);
            let last = job.off + pay == job.total;
            let seg = match job.kind {
                JobKind::Send { msn, solicited } => Segment::Send {
                    last,
                    msn,
                    mo: job.off as u32,
                    solicited,
                    invalidate_stag: None,
                    payload: &[],
                },
                JobKind::Write { stag, to } | JobKind::WriteImmed { stag, to, .. } => {
                    Segment::Write {
                        last,
                        stag,
                        to: to.wrapping_add(job.off),
                        payload: &[],
                    }
                }
                JobKind::ReadResp { stag, to } => Segment::ReadResponse {
                    last,
                    stag,
                    to: to.wrapping_add(job.off),
                    payload: &[],
                },
            };
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
            tx.pieces.push(Piece::Frame(a, b));
            let mut crc = crc_on.then(crc::Crc32c::new);
            if let Some(c) = crc.as_mut() {
                c.update(&tx.frames[a..b]);
            }
            // Payload pieces: [off, off+pay) over the gather list.
            for (i, at, k) in seg_span(&job.segs, job.off, pay as usize) {
                let s = &job.segs[i];
                match crc.as_mut() {
                    // With CRC the payload is copied into the frame: the bytes that go out must
                    // be the bytes the CRC covers, and registered memory may change (a peer's
                    // Write into what it reads) while the batch waits for the socket.
                    Some(c) => {
                        let a = tx.frames.len();
                        tx.frames.resize(a + k, 0);
                        s.region.copy_out(s.offset + at, &mut tx.frames[a..]);
                        c.update(&tx.frames[a..]);
                        tx.pieces.push(Piece::Frame(a, a + k));
                    }
                    None => tx.pieces.push(Piece::Mem {
                        seg: i,
                        offset: s.offset + at,
                        len: k,
                    }),
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
            tx.pieces.push(Piece::Frame(a, b));
            debug_assert_eq!(fpdu_len(ulpdu_len), 2 + ulpdu_len + pad + 4, "FPDU framing");
            job.off += pay;
            if last {
                if let JobKind::WriteImmed {
                    msn,
                    solicited,
                    immediate,
                    ..
                } = job.kind
                {
                    // The Immediate Data goes right behind the Write's last segment, in the same
                    // job: the WR completes once both are written, and the peer's receive
                    // completes only after the Write is placed (TCP keeps the order).
                    let imm = Segment::ImmediateData {
                        msn,
                        solicited,
                        // start_job checked that the length fits 32 bits.
                        data: write_immed_data(immediate, job.total as u32),
                    };
                    let a = tx.frames.len();
                    let framed = tx.enc.encode_segment(&imm, &mut tx.frames);
                    debug_assert!(framed.is_ok(), "a 26-byte ULPDU always frames");
                    let b = tx.frames.len();
                    tx.pieces.push(Piece::Frame(a, b));
                }
                job.framed_last = true;
                break;
            }
        }
        tx.job = Some(job);
        true
    }

    fn start_job(&self, tx: &mut Tx, msg: OutMsg<'_>) -> Result<(), TxOutcome> {
        let (kind, payload) = match msg {
            OutMsg::Send { solicited, payload } => {
                let msn = tx.msn_send;
                tx.msn_send = tx.msn_send.wrapping_add(1);
                (JobKind::Send { msn, solicited }, payload)
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
                let seg = Segment::ReadRequest {
                    msn,
                    request: ReadRequest {
                        sink_stag: sink_stag.max(1),
                        sink_to,
                        size: read_size,
                        source_stag: src_stag,
                        source_to: src_to,
                    },
                };
                return if tx.push_segment(&seg) {
                    Ok(())
                } else {
                    Err(TxOutcome::Broken)
                };
            }
        };
        // The engine sends from registered memory, at most MAX_IOV segments.
        let segs: Segs = match payload {
            Payload::Segs(s) if s.len() <= MAX_IOV => s.iter().cloned().collect(),
            _ => return Err(TxOutcome::Broken),
        };
        if matches!(kind, JobKind::Send { .. }) && u32::try_from(payload.len()).is_err() {
            return Err(TxOutcome::Failed(DtoStatus::LocalLength));
        }
        tx.job = Some(TxJob {
            kind,
            total: payload.len(),
            segs,
            off: 0,
            framed_last: false,
        });
        tx.abandon = false;
        Ok(())
    }
}

impl Tx {
    /// Frames `seg` as one FPDU and queues it after the current batch. False if it cannot be
    /// framed.
    fn push_segment(&mut self, seg: &Segment<'_>) -> bool {
        let mut out = Vec::new();
        let ok = self.enc.encode_segment(seg, &mut out).is_ok();
        if ok {
            self.ctl.push_back((out, true));
        }
        ok
    }
}

/// Reads up to `max` bytes from `fd` into the scatter list `segs` from byte `at` on.
fn recv_into(fd: BorrowedFd<'_>, segs: &[Seg], at: u64, max: usize) -> io::Result<usize> {
    let pieces: ArrayVec<RecvPiece<'_>, MAX_IOV> = seg_span(segs, at, max)
        .map(|(i, off, len)| RecvPiece {
            mem: &segs[i].region,
            offset: segs[i].offset + off,
            len,
        })
        .collect();
    if pieces.is_empty() {
        return Ok(0);
    }
    recv_scatter(fd, &pieces)
}

fn lock_try<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    Go,
    Stall,
    Stop,
}

fn tagged_cause(f: RemoteFault) -> TerminateCause {
    TerminateCause::DdpTagged(match f {
        RemoteFault::InvalidStag => DdpTaggedErrorCode::InvalidStag,
        RemoteFault::BaseBounds => DdpTaggedErrorCode::BaseOrBounds,
        RemoteFault::PzMismatch => DdpTaggedErrorCode::StagNotAssociated,
        RemoteFault::AccessRights => {
            return TerminateCause::rdmap_protection(RdmapErrorCode::AccessRights)
        }
    })
}

fn rdmap_cause(f: RemoteFault) -> TerminateCause {
    TerminateCause::rdmap_protection(match f {
        RemoteFault::InvalidStag => RdmapErrorCode::InvalidStag,
        RemoteFault::BaseBounds => RdmapErrorCode::BaseOrBounds,
        RemoteFault::PzMismatch => RdmapErrorCode::StagNotAssociated,
        RemoteFault::AccessRights => RdmapErrorCode::AccessRights,
    })
}

impl Connection for TcpConn {
    fn transmit(&self, msg: OutMsg<'_>) -> TxOutcome {
        let (out, want_out) = {
            let mut tx = lock(&self.tx);
            if tx.failed || tx.shut {
                return if self.peer_fin.load(Ordering::SeqCst) {
                    TxOutcome::PeerClosed
                } else {
                    TxOutcome::Broken
                };
            }
            if let Err(o) = self.start_job(&mut tx, msg) {
                return o;
            }
            if self.flush_locked(&mut tx) {
                if tx.failed {
                    (
                        if self.peer_fin.load(Ordering::SeqCst) {
                            TxOutcome::PeerClosed
                        } else {
                            TxOutcome::Broken
                        },
                        false,
                    )
                } else {
                    (TxOutcome::Sent, false)
                }
            } else {
                tx.notify = true;
                (TxOutcome::Queued, tx.want_out)
            }
        };
        if want_out {
            self.update_interest();
        }
        out
    }

    fn wake_peer(&self) {
        if let Some(s) = self.shared() {
            s.wake_conn(self.id);
        }
    }

    fn close(&self, broken: bool) {
        self.shut(broken);
    }

    fn remote_addr(&self) -> IaAddress {
        SocketAddr::new(self.remote.ip(), 0)
    }

    fn id(&self) -> u64 {
        self.id
    }
}

/// A connection request waiting for accept or reject.
struct TcpRequest {
    conn: Arc<TcpConn>,
    info: CrArrivalInfo,
}

impl PendingRequest for TcpRequest {
    fn accept(&self, ep: &Arc<Qp>, private_data: &[u8]) -> bool {
        let c = &self.conn;
        let mut rx = lock(&c.rx);
        // The requester may have gone (its connect timed out) without us having read its FIN.
        let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        if rx.peer_gone || matches!(c.sock.peek(&mut probe), Ok(0)) {
            return false;
        }
        let Phase::AwaitAccept { resp } = &mut rx.phase else {
            return false;
        };
        let (ird, ord) = ep.read_depths();
        let max = iwarp::mpa::IRD_ORD_MAX as usize;
        let (mut ird, mut ord) = (ird.min(max) as u16, ord.min(max) as u16);
        if let Some(iwarp::mpa::Revision::V2 {
            ird_ord: Some(peer),
        }) = resp.pending_request().map(|r| r.revision)
        {
            // Inbound depth: no more than the initiator will use; outbound: no more than it
            // offers. A Read RTR (chosen only when Write is not offered) needs one inbound slot.
            let read_rtr = peer.peer_to_peer && peer.rtr.preferred() == Some(iwarp::mpa::Rtr::Read);
            ird = ird.min(peer.ord).max(u16::from(read_rtr && ird > 0));
            ord = ord.min(peer.ird);
        }
        let reply = match resp.accept(private_data, ird, ord) {
            Ok(r) => r,
            Err(_) => return false,
        };
        let Some(neg) = resp.negotiated().copied() else {
            return false;
        };
        rx.phase = Phase::Established;
        rx.crc = neg.crc;
        {
            let mut tx = lock(&c.tx);
            tx.enc = FpduEncoder::new(neg.crc);
            tx.mulpdu = c.mss_mulpdu();
            tx.ctl.push_back((reply, false));
            tx.hold = true; // until the initiator's first FPDU
            c.flush_locked(&mut tx);
        }
        *lock(&c.ep) = Arc::downgrade(ep);
        let remote = c.remote;
        let conn: Arc<dyn Connection> = c.clone();
        if !ep.established(
            ep.current_attempt(),
            conn,
            neg.ird as usize,
            neg.ord as usize,
            SocketAddr::new(remote.ip(), 0),
        ) {
            drop(rx);
            c.kill();
            return false;
        }
        let pending = rx.end > rx.start;
        drop(rx);
        ep.report_established(Vec::new());
        c.update_interest();
        if pending {
            c.on_readable();
        }
        true
    }

    fn reject(&self, private_data: &[u8]) {
        let c = &self.conn;
        let mut rx = lock(&c.rx);
        let Phase::AwaitAccept { resp } = &mut rx.phase else {
            return;
        };
        let reply = resp.reject(private_data).ok();
        rx.phase = Phase::Closing {
            deadline: Instant::now() + LINGER,
        };
        drop(rx);
        match reply {
            Some(r) => c.send_and_close(r),
            None => c.kill(),
        }
    }

    fn info(&self) -> &CrArrivalInfo {
        &self.info
    }
}

/// What the fuzz harness (`crate::fuzzing`) sees of a connection.
#[cfg(any(test, feature = "fuzzing"))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FuzzProbe {
    /// `Established`, `Closing` or `Dead` (the harness never sees the MPA phases).
    pub(crate) phase: &'static str,
    /// A Send waits for a receive buffer.
    pub(crate) stalled: bool,
    /// A Send is being reassembled into a receive buffer.
    pub(crate) recv_held: bool,
    /// Transmitting failed or the connection was killed.
    pub(crate) tx_failed: bool,
    /// Our FIN went out.
    pub(crate) tx_shut: bool,
}

#[cfg(any(test, feature = "fuzzing"))]
impl TcpConn {
    /// Fuzzing hook: an Established connection over `sock` (a connected, non-blocking stream
    /// socket of any family) with no link behind it: no epoll set, no progress thread. What the
    /// connection asks of its link (interest changes, wakes, ticks, deregistration) is then a
    /// no-op, and the harness calls `on_event`, `on_wake` and `on_tick` itself, as the progress
    /// thread would. `hold`: act as the MPA responder, which holds its FPDUs until the peer's
    /// first one. The caller makes `ep` established on the returned connection.
    pub(crate) fn fuzz_established(
        sock: Socket,
        crc: bool,
        hold: bool,
        ep: &Arc<Qp>,
    ) -> Arc<TcpConn> {
        let id = super::NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
        let remote = SocketAddr::from(([127, 0, 0, 1], 0));
        let conn = TcpConn::new(id, Weak::new(), sock, remote, Phase::Established);
        lock(&conn.rx).crc = crc;
        {
            let mut tx = lock(&conn.tx);
            tx.enc = FpduEncoder::new(crc);
            tx.mulpdu = conn.mss_mulpdu();
            tx.hold = hold;
        }
        *lock(&conn.ep) = Arc::downgrade(ep);
        Arc::new(conn)
    }

    pub(crate) fn fuzz_probe(&self) -> FuzzProbe {
        let (phase, stalled, recv_held) = {
            let rx = lock(&self.rx);
            let phase = match rx.phase {
                Phase::Established => "Established",
                Phase::Closing { .. } => "Closing",
                Phase::Dead => "Dead",
                _ => "mpa",
            };
            (phase, rx.stalled.is_some(), rx.recv.is_some())
        };
        let tx = lock(&self.tx);
        FuzzProbe {
            phase,
            stalled,
            recv_held,
            tx_failed: tx.failed,
            tx_shut: tx.shut,
        }
    }
}
