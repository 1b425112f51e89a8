//! One tcp connection: the [`TcpConn`] struct, its two locks (`rx`, `tx`) and the phases of its
//! stream, and what manages it as a whole: its epoll interest, its deadlines (`on_tick`: MPA
//! timeout, RNR grace, linger), the end of the stream (`shut`, `kill`, the linger for the peer's
//! FIN) and the engine's [`Connection`] interface. The rest is in one submodule per concern:
//!
//! - [`mpa`]: dial and accept, the MPA exchange (Request/Reply, RTR, the responder's hold), and
//!   the hand-over of an established connection to the engine;
//! - [`rx`]: the receive side (FPDUs parsed from a staging buffer and handed to the engine
//!   segment by segment), Terminates, and Sends parked until a receive buffer is posted;
//! - [`cut_through`]: large tagged segments read from the socket straight into their
//!   destination;
//! - [`tx`]: the transmit side (FPDUs gathered straight from registered memory into `sendmsg`)
//!   and its backlog.
//!
//! Locks: `rx` is taken only by the progress thread and by accept/reject; `tx` by whoever
//! transmits. The receive path may call into the engine, which may transmit (`tx`) or close
//! (`tx` only), so the order is always rx -> engine -> tx, never the reverse.

mod cut_through;
mod mpa;
mod rx;
mod tx;

use std::collections::VecDeque;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Instant;

use iwarp::fpdu::MAX_ULPDU_LEN;
use iwarp::mpa::{MpaInitiator, MpaResponder};
use iwarp::segment::{mulpdu_for_emss, TaggedReassembly, UntaggedReassembly};
use iwarp::terminate::{DdpUntaggedErrorCode, TerminateCause};
use iwarp::FpduEncoder;
use rustix::event::epoll::EventFlags;
use socket2::Socket;

use self::cut_through::Cut;
use self::tx::{Piece, TxJob, BATCH_FPDUS};
use super::{lock, Shared, LINGER};
use crate::engine::port::{Connection, InlineOutcome, Inlines, Listener, OutMsg, TxOutcome};
use crate::engine::qp::{Qp, RecvWr};
use crate::types::{DtoStatus, EpState, IaAddress};

/// Staging buffer for inbound bytes, at most: holds several full-size FPDUs.
const RX_BUF: usize = 256 * 1024;
/// The staging buffer a connection starts with: it grows (to [`RX_BUF`]) only when a read
/// fills it, so ten thousand quiet connections do not each hold 256 KiB (glibc serves a
/// 256 KiB calloc from its heap, zeroed by hand, once its mmap threshold has risen).
const RX_BUF_START: usize = 4 * 1024;

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

impl Phase {
    /// The phase's name, for diagnostics.
    fn name(&self) -> &'static str {
        match self {
            Phase::Connecting { .. } => "connecting",
            Phase::AwaitReply { .. } => "await_reply",
            Phase::AwaitRequest { .. } => "await_request",
            Phase::AwaitAccept { .. } => "await_accept",
            Phase::Established => "established",
            Phase::Closing { .. } => "closing",
            Phase::Dead => "dead",
        }
    }
}

struct Rx {
    phase: Phase,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    crc: bool,
    untagged: UntaggedReassembly,
    tagged: TaggedReassembly,
    /// The receive buffer of the Send being reassembled, and the STag its first segment asks
    /// to invalidate (a Send with Invalidate: read from the first segment, as siw does).
    recv: Option<(RecvWr, Option<u32>)>,
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

struct Tx {
    /// Responder before the initiator's first FPDU: FPDUs wait (RFC 5044).
    hold: bool,
    /// The engine has more messages at once (`Connection::hold`): small ones are framed into
    /// the batch and written together at its `flush`.
    held: bool,
    /// Small messages of a burst of posts are framed into the batch too, written when a
    /// consumer looks for completions or the progress thread runs (`Shared::cork`).
    corked: bool,
    burst: tx::Burst,
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
    /// A region the job sends from was revoked (its LMR freed while the message was being
    /// written): the job was dropped and the engine must end the connection BROKEN (taken by
    /// whoever flushed: `transmit` returns `Broken`, the others call the engine).
    revoked: bool,
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
    ep: OnceLock<Weak<Qp>>,
    rx: Mutex<Rx>,
    tx: Mutex<Tx>,
    /// Bursts of small posts are written together (`TcpOptions::coalesce`).
    coalesce: bool,
    rx_paused: AtomicBool,
    /// Its epoll interest includes writability (a connect or a transmit backlog in progress):
    /// a consumer's poll then asks epoll too (`Shared::poll_direct`).
    pub(crate) wants_out: AtomicBool,
    /// Its epoll interest and whether the socket is in the connections' set.
    pub(crate) interest: Mutex<Interest>,
    peer_fin: AtomicBool,
    /// Read Requests were handled whose responses are not transmitted yet (`answer_reads`).
    reads_queued: AtomicBool,
    /// `shut` found `rx` locked (by the receive path, which may be the caller itself): the
    /// receive side moves to Closing when it lets go (`apply_pending_shut`).
    shut_pending: AtomicBool,
}

impl TcpConn {
    fn new(id: u64, shared: Weak<Shared>, sock: Socket, remote: SocketAddr, phase: Phase) -> Self {
        let coalesce = shared.upgrade().is_some_and(|s| s.opts.coalesce);
        TcpConn {
            id,
            coalesce,
            sock,
            shared,
            remote,
            ep: OnceLock::new(),
            rx: Mutex::new(Rx {
                phase,
                buf: vec![0u8; RX_BUF_START].into_boxed_slice(),
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
                held: false,
                corked: false,
                burst: tx::Burst::default(),
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
                revoked: false,
            }),
            rx_paused: AtomicBool::new(false),
            wants_out: AtomicBool::new(false),
            interest: Mutex::new(Interest::default()),
            peer_fin: AtomicBool::new(false),
            reads_queued: AtomicBool::new(false),
            shut_pending: AtomicBool::new(false),
        }
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }

    fn shared(&self) -> Option<Arc<Shared>> {
        self.shared.upgrade()
    }

    /// The endpoint, once it has one (set once, so reading it takes no lock).
    fn ep(&self) -> Option<Arc<Qp>> {
        self.ep.get()?.upgrade()
    }

    /// Gives the connection its endpoint (once).
    fn set_ep(&self, ep: &Arc<Qp>) {
        let first = self.ep.set(Arc::downgrade(ep)).is_ok();
        debug_assert!(first, "a connection's endpoint is set once");
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

    fn mss_mulpdu(&self) -> usize {
        let mss = self.sock.mss().unwrap_or(1460) as usize;
        mulpdu_for_emss(mss.clamp(64, 65535)).min(MAX_ULPDU_LEN)
    }

    pub(crate) fn on_event(self: &Arc<Self>, flags: EventFlags) {
        if flags.intersects(EventFlags::IN | EventFlags::RDHUP)
            && self.rx_paused.load(Ordering::SeqCst)
        {
            // Input while the receive side waits for a buffer: stop watching it now (`pause_rx`
            // left the interest as it was).
            self.update_interest();
        }
        if flags.intersects(EventFlags::OUT | EventFlags::ERR | EventFlags::HUP) {
            self.on_writable();
        }
        if flags.intersects(EventFlags::IN | EventFlags::RDHUP | EventFlags::ERR | EventFlags::HUP)
        {
            self.read_and_process(flags.intersects(EventFlags::ERR | EventFlags::HUP));
        }
    }

    /// The receive side waits for a buffer. The socket's epoll interest is left as it is
    /// until the socket reports input meanwhile (`on_event` drops it then): a stall that the
    /// consumer ends at once by posting a buffer, the common case at high message rates, then
    /// costs no `epoll_ctl` (two per stall before).
    fn pause_rx(&self) {
        self.rx_paused.store(true, Ordering::SeqCst);
    }

    fn resume_rx(&self) {
        self.rx_paused.store(false, Ordering::SeqCst);
        self.update_interest(); // no system call unless the pause was applied
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

    pub(crate) fn on_tick(self: &Arc<Self>, now: Instant) {
        self.apply_pending_shut();
        let mut rx = lock(&self.rx);
        match &rx.phase {
            Phase::AwaitRequest { deadline, .. } => {
                if now >= *deadline {
                    // Dead before `rx` is let go: a Request read by another thread meanwhile
                    // must not become a CR on a connection about to be killed.
                    rx.phase = Phase::Dead;
                    drop(rx);
                    self.kill();
                }
            }
            Phase::Closing { deadline } => {
                if now >= *deadline {
                    drop(rx);
                    self.kill();
                }
            }
            Phase::Connecting { attempt, .. } | Phase::AwaitReply { attempt, .. } => {
                let attempt = *attempt;
                // The DAT layer gave up (timeout, free, close): drop the socket. Asked with `rx`
                // held: once it is let go, another thread may take the Reply and establish the
                // endpoint on this connection, which is then no longer pending but not stale.
                // A stale connection is dead before `rx` is let go, as above.
                let stale = self.ep().is_none_or(|ep| {
                    !ep.attempt_pending(attempt, EpState::ActiveConnectionPending)
                });
                if stale {
                    rx.phase = Phase::Dead;
                }
                drop(rx);
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
        if take_flag(&self.shut_pending) {
            self.close_rx(&mut lock(&self.rx));
        }
    }

    /// `transmit` after the message was taken as the job (or into a full batch): writes what
    /// the socket takes now and says what became of the message, and whether the epoll
    /// interest must change (a backlog left for `EPOLLOUT`).
    fn write_taken(&self, tx: &mut Tx) -> (TxOutcome, bool) {
        let flushed = self.flush_locked(tx);
        if self.coalesce {
            tx.burst.ended(super::mono_ns);
        }
        if !(flushed || tx.revoked) {
            tx.notify = true;
            return (TxOutcome::Queued, tx.want_out);
        }
        let out = if std::mem::take(&mut tx.revoked) {
            TxOutcome::Broken
        } else if !tx.failed {
            TxOutcome::Sent
        } else if self.peer_fin.load(Ordering::SeqCst) {
            TxOutcome::PeerClosed
        } else {
            TxOutcome::Broken
        };
        (out, false)
    }
}

/// Clears `flag` and says whether it was set: a load first, and the swap (an atomic
/// read-modify-write, which the receive path would otherwise pay on every message) only when
/// it is set. A flag set after the load is taken at the next look, as one set after the swap.
fn take_flag(flag: &AtomicBool) -> bool {
    flag.load(Ordering::SeqCst) && flag.swap(false, Ordering::SeqCst)
}

fn lock_try<T>(m: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

impl Connection for TcpConn {
    fn transmit(&self, msg: OutMsg<'_>) -> TxOutcome {
        let mut corks = false;
        let (out, want_out) = {
            let mut tx = lock(&self.tx);
            if tx.failed || tx.shut {
                return if self.peer_fin.load(Ordering::SeqCst) {
                    TxOutcome::PeerClosed
                } else {
                    TxOutcome::Broken
                };
            }
            if self.coalesce {
                corks = tx.note_post(
                    super::mono_ns,
                    crate::link::looks::looks(),
                    tx::coalescible(&msg),
                );
            }
            match self.start_job(&mut tx, msg) {
                // Not taken: a burst this post began to hold is still told to the link below
                // (the connection is marked as holding, and only the link writes its bursts).
                Err(o) => (o, false),
                // In the held batch: written by `flush` (or once the batch is full).
                Ok(true) if tx.frames.len() < tx::HOLD_MAX => {
                    tx.burst.ended_held();
                    (TxOutcome::Sent, false)
                }
                Ok(_) => self.write_taken(&mut tx),
            }
        };
        if want_out {
            self.update_interest();
        }
        if corks {
            self.start_cork();
        }
        out
    }

    fn transmit_inline(&self, msg: &OutMsg<'_>) -> InlineOutcome {
        if self.send_inline(msg) {
            InlineOutcome::Taken
        } else {
            InlineOutcome::Declined
        }
    }

    fn takes_inline(&self) -> Inlines {
        Inlines {
            sends: true,
            writes: false,
            reads: true,
            responses: true,
        }
    }

    fn hold(&self) {
        lock(&self.tx).held = true;
    }

    fn flush(&self) {
        self.flush_held();
    }

    fn wake_peer(&self) {
        let Some(s) = self.shared() else {
            return;
        };
        // The thread that posted the buffer places the waiting Send itself and reads on, as a
        // polling consumer does: handing it to the progress thread cost an eventfd write, a
        // wake-up and two context switches per refill (at 8-byte message rates, one refill
        // every few messages). If another thread is in the receive path right now, the
        // progress thread retries as before.
        if self.rx.try_lock().is_ok() {
            if let Some(me) = s.conn(self.id) {
                me.on_wake();
                return;
            }
        }
        s.wake_conn(self.id);
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

/// What the fuzz harness (crate `dapl-testkit`, through `dapl::fuzz_api`) sees of a connection.
#[cfg(feature = "fuzzing")]
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

#[cfg(feature = "fuzzing")]
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
        conn.set_ep(ep);
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
