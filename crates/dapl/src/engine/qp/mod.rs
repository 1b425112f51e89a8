//! One queue pair of the software RNIC: its connection state, send queue (SQ), outstanding
//! RDMA reads (ORQ), receive queue (RQ, or a shared one), inbound read queue (IRQ), and the
//! rules that order them (ORD, BARRIER_FENCE, RNR wait, flush on disconnect and break).
//!
//! The QP knows no DAT object: it reports completions and connection events through
//! [`QpUpcalls`], which the DAT layer implements (the endpoint puts them on its EVDs). Links
//! call into it through the `rx_*` entry points and the connection-management functions of
//! [`cm`]; the DAT layer posts through [`Qp::post_recv`] and [`Qp::post_send`].
//!
//! Locking: one `core` mutex, held only for short bookkeeping and for data placement into local
//! memory; never while calling into another QP or a link's transmit. The transmit side is
//! serialized by an atomic counter of turns (see [`Qp::pump`], [`crate::engine::turn`]), never a
//! blocking lock, so two QPs that feed each other cannot deadlock. Upcalls run with no QP lock held.

mod cm;
mod rx;
#[cfg(test)]
mod tests;
mod tx;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use smallvec::SmallVec;

use crate::engine::port::{Connection, Inlines};
use crate::engine::srq::SharedRq;
use crate::engine::turn::Turns;
use crate::mem::{MemTable, Seg};
use crate::types::{
    CompletionFlags, ConnQual, ConnectionEventKind, Cookie, DtoOp, DtoStatus, EpAttr, EpState,
    IaAddress, RmrTriplet,
};

pub(crate) use rx::{
    place_at, place_from, PlaceFault, RxReadFault, RxResponse, RxSend, RxTake, RxWriteFault,
    RxWriteImmed,
};
use tx::Inline;
#[cfg(feature = "testing")]
pub(crate) use tx::{INLINE_POSTS, INLINE_RESPONSES};

/// The segments of a work request: most have one or two, kept inline (a request is moved a few
/// times between post and completion; a full `MAX_IOV` array would be copied each time).
pub(crate) type Segs = SmallVec<[Seg; 2]>;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ReqOp {
    Send,
    /// Send with Invalidate (RFC 5040): the peer invalidates this STag of its own (an RMR
    /// context) before its receive completes.
    SendInvalidate(u32),
    Write,
    /// RDMA Write with Immediate Data (the DAT IB extension's write_immed): the 32-bit value
    /// for the peer's receive completion.
    WriteImmed(u32),
    Read,
}

pub(crate) struct SendWr {
    pub(crate) cookie: Cookie,
    pub(crate) op: ReqOp,
    pub(crate) flags: CompletionFlags,
    pub(crate) segs: Segs,
    pub(crate) total: u64,
    pub(crate) remote: RmrTriplet,
    /// Reads: the STag the response is addressed to (never 0).
    pub(crate) sink_stag: u32,
    /// Reads: the sink tagged offset sent in the request, and response bytes placed so far.
    pub(crate) sink_to: u64,
    pub(crate) resp_got: u64,
}

pub(crate) struct RecvWr {
    pub(crate) cookie: Cookie,
    pub(crate) flags: CompletionFlags,
    pub(crate) segs: Segs,
    pub(crate) total: u64,
}

struct ReadWork {
    sink_stag: u32,
    sink_to: u64,
    seg: Seg,
}

pub(crate) struct QpCore {
    pub(crate) state: EpState,
    pub(crate) attr: EpAttr,
    conn: Option<Arc<dyn Connection>>,
    /// What `conn` may take inline (`Connection::takes_inline`, asked once when it is set):
    /// posts it never takes that way skip `Qp::transmit_inline`'s checks.
    conn_inlines: Inlines,
    /// True once DISCONNECTED/BROKEN/... was reported for the current connection attempt.
    end_reported: bool,
    /// Bumped on every connect/accept attempt, so stale timers and requests do nothing.
    attempt: u64,
    pub(crate) sq: VecDeque<SendWr>,
    pub(crate) orq: VecDeque<SendWr>,
    /// Reads taken off the ORQ whose completion is being reported (outside the lock).
    reads_completing: usize,
    pub(crate) rq: VecDeque<RecvWr>,
    irq: VecDeque<ReadWork>,
    pub(crate) ord: usize,
    pub(crate) ird: usize,
    /// A peer's Send is waiting for a receive buffer here.
    peer_waiting: bool,
    /// The link holds a message it has not finished writing (`TxOutcome::Queued`): nothing
    /// more is transmitted until it calls [`EpInner::tx_drained`].
    tx_stalled: bool,
    /// The Send or Write the link is still writing; it completes when the link has handed its
    /// last byte to the transport.
    tx_inflight: Option<SendWr>,
    /// The link's `tx_drained` came before the engine recorded the stall it ends.
    tx_drained_early: bool,
    /// A Send or Write is inside `transmit`: its outcome (its completion, for one the link
    /// took) is not recorded yet.
    in_transmit: bool,
    /// The connection ended (on another thread: the peer's answer, a Terminate) while a WR was
    /// inside `transmit`: the end waits for that WR's outcome, so that its completion comes
    /// before what the end flushes (the peer's answer never overtakes the completion of what
    /// it answers). Run by the transmitting thread (`Qp::finish_transmit`).
    end_deferred: Option<DeferredEnd>,
    /// Messages out on the link whose source memory the peer still copies from
    /// (`TxOutcome::Lent`), in the order lent, and the Sends and Writes transmitted after one
    /// of them: each completes in this order once the link has returned every lent message
    /// up to it ([`Qp::tx_returned`]).
    pub(crate) lent: VecDeque<Lent>,
    /// Returns the link made before the engine recorded the lent message (the peer was
    /// quicker than `transmit`'s return): the next lent messages of that connection (its id)
    /// count as returned. Kept when the connection ends: a message the peer copied out
    /// before it closed completes successfully when its `transmit` returns.
    pub(crate) lent_returned_early: (u64, usize),
    /// The link's connection of a connect attempt that is not established yet: closed at once
    /// if the attempt fails (timeout, free), so the peer cannot accept a dead request.
    pending_conn: Option<Arc<dyn Connection>>,
    /// The connect timeout of the current attempt (a timer id), cancelled when it resolves.
    attempt_timer: Option<u64>,
    /// `ep_set_watermark`'s soft high watermark, and whether its event is armed (once per
    /// setting).
    soft_high: Option<usize>,
    soft_high_armed: bool,
    pub(crate) remote_addr: Option<IaAddress>,
    pub(crate) remote_qual: Option<ConnQual>,
}

/// Which queue a completion belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompletionQueue {
    /// Send, RDMA write (with immediate), RDMA read: the request EVD.
    Request,
    /// Receive (also one consumed by a write with immediate data): the receive EVD.
    Recv,
}

/// A work request completed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Completion {
    pub(crate) queue: CompletionQueue,
    pub(crate) cookie: Cookie,
    pub(crate) status: DtoStatus,
    pub(crate) len: u64,
    pub(crate) op: DtoOp,
    /// A RECV_IMMED completion's value.
    pub(crate) immediate: Option<u32>,
    /// A successful RECEIVE_WITH_INVALIDATE completion's invalidated STag.
    pub(crate) rmr_context: Option<u32>,
    /// Whether it notifies a waiter (errors always do).
    pub(crate) signalled: bool,
}

/// Which message completed a receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvOp {
    /// A Send (or a flush, or an error before the message was known).
    Receive,
    /// The Immediate Data of a peer's RDMA Write with Immediate Data, with its value.
    Immed(u32),
    /// A Send with Invalidate: Some(STag) once the STag was invalidated, None when the
    /// invalidation was refused (the receive completes in error).
    Invalidated(Option<u32>),
}

/// A connection event of the QP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum QpEvent {
    /// The connection is up, with the peer's private data (active side) or none.
    Established(Vec<u8>),
    /// An attempt ended before it was established (rejected, timed out, aborted), with the
    /// peer's private data if it sent any.
    AttemptFailed(ConnectionEventKind, Vec<u8>),
    /// An established connection ended: DISCONNECTED or BROKEN, reported once per connection.
    Ended(ConnectionEventKind),
}

/// How a QP reports to its owner (the DAT endpoint). Called with no QP lock held, from
/// whatever thread made the progress (poster, link thread, polling consumer).
pub(crate) trait QpUpcalls: Send + Sync {
    /// A work request completed.
    fn completed(&self, c: Completion);
    /// A connection event.
    fn connection_event(&self, ev: QpEvent);
    /// More SRQ buffers are held than the soft high watermark allows.
    fn soft_high_watermark(&self) {}
}

/// Why a post was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PostError {
    /// The QP is not in a state that takes this post.
    InvalidState(EpState),
    /// The queue holds its maximum of this many.
    QueueFull(usize),
}

/// A queue pair.
pub(crate) struct Qp {
    id: u64,
    local_addr: IaAddress,
    pz_id: u64,
    memtable: Arc<MemTable>,
    srq: Option<Arc<SharedRq>>,
    core: Mutex<QpCore>,
    tx_turns: Turns,
    /// What a post reads without the lock (stored under it whenever it changes).
    view: PostView,
    rnr_blocked: AtomicBool,
    rnr_wakes: AtomicU64,
    /// The soft high watermark event is due (set under the lock, raised after it).
    soft_high_due: AtomicBool,
    /// SRQ buffers this QP took and has not completed yet, and their bytes (taken under the
    /// QP lock; given back by the completion, which takes no lock for it).
    srq_held: AtomicUsize,
    srq_held_bytes: AtomicU64,
    upcalls: Weak<dyn QpUpcalls>,
}

/// The state and the attributes a post checks, mirrored out of the QP lock so that posting
/// does not take it for them: stored under the lock whenever they change ([`Qp::set_state`],
/// [`Qp::modify`]), loaded by posts (which the engine checks again under the lock).
struct PostView {
    state: AtomicU8,
    max_recv_iov: AtomicUsize,
    max_request_iov: AtomicUsize,
    recv_flags: AtomicU32,
    request_flags: AtomicU32,
}

impl PostView {
    fn new(attr: &EpAttr) -> PostView {
        let v = PostView {
            state: AtomicU8::new(EpState::Unconnected as u8),
            max_recv_iov: AtomicUsize::new(0),
            max_request_iov: AtomicUsize::new(0),
            recv_flags: AtomicU32::new(0),
            request_flags: AtomicU32::new(0),
        };
        v.set_attr(attr);
        v
    }

    fn set_attr(&self, attr: &EpAttr) {
        self.max_recv_iov
            .store(attr.max_recv_iov, Ordering::Relaxed);
        self.max_request_iov
            .store(attr.max_request_iov, Ordering::Relaxed);
        self.recv_flags
            .store(attr.recv_completion_flags.bits(), Ordering::Relaxed);
        self.request_flags
            .store(attr.request_completion_flags.bits(), Ordering::Relaxed);
    }
}

/// What [`Qp::post_view`] returns.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PostAttrs {
    pub(crate) state: EpState,
    pub(crate) max_recv_iov: usize,
    pub(crate) max_request_iov: usize,
    pub(crate) recv_flags: CompletionFlags,
    pub(crate) request_flags: CompletionFlags,
}

/// The work queues of a QP, allocated up front for the lengths of its attributes (the fast
/// path then never allocates); made before the QP so that a lack of memory is an error of the
/// endpoint's creation, not an abort.
pub(crate) struct QpQueues {
    sq: VecDeque<SendWr>,
    orq: VecDeque<SendWr>,
    rq: VecDeque<RecvWr>,
    irq: VecDeque<ReadWork>,
}

impl QpQueues {
    /// Queues for `attr` (no receive queue of its own with an SRQ).
    pub(crate) fn new(attr: &EpAttr, with_srq: bool) -> Result<QpQueues, crate::engine::NoMemory> {
        use crate::engine::deque;
        Ok(QpQueues {
            sq: deque(attr.max_request_dtos)?,
            orq: deque(attr.max_rdma_read_out)?,
            rq: deque(if with_srq { 0 } else { attr.max_recv_dtos })?,
            irq: deque(attr.max_rdma_read_in)?,
        })
    }
}

impl Qp {
    /// A QP in state UNCONNECTED. `id` names it to peers (a loopback request's port
    /// qualifier) and in diagnostics; `pz_id` is the protection zone every remote access
    /// must match; `srq` replaces its own receive queue.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: u64,
        local_addr: IaAddress,
        pz_id: u64,
        memtable: Arc<MemTable>,
        srq: Option<Arc<SharedRq>>,
        attr: EpAttr,
        upcalls: Weak<dyn QpUpcalls>,
        queues: QpQueues,
    ) -> Qp {
        let view = PostView::new(&attr);
        Qp {
            id,
            local_addr,
            pz_id,
            memtable,
            core: Mutex::new(QpCore {
                state: EpState::Unconnected,
                sq: queues.sq,
                orq: queues.orq,
                reads_completing: 0,
                rq: queues.rq,
                irq: queues.irq,
                attr,
                conn: None,
                conn_inlines: Inlines::NONE,
                end_reported: true,
                attempt: 0,
                ord: 0,
                ird: 0,
                peer_waiting: false,
                tx_stalled: false,
                tx_inflight: None,
                lent: VecDeque::new(),
                lent_returned_early: (0, 0),
                tx_drained_early: false,
                in_transmit: false,
                end_deferred: None,
                pending_conn: None,
                attempt_timer: None,
                soft_high: None,
                soft_high_armed: false,
                remote_addr: None,
                remote_qual: None,
            }),
            srq,
            tx_turns: Turns::default(),
            view,
            rnr_blocked: AtomicBool::new(false),
            rnr_wakes: AtomicU64::new(0),
            soft_high_due: AtomicBool::new(false),
            srq_held: AtomicUsize::new(0),
            srq_held_bytes: AtomicU64::new(0),
            upcalls,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, QpCore> {
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The QP's id (its endpoint's).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The protection zone every remote access to this QP is checked against.
    pub(crate) fn pz_id(&self) -> u64 {
        self.pz_id
    }

    /// The memory table of its IA.
    pub(crate) fn memtable(&self) -> &Arc<MemTable> {
        &self.memtable
    }

    /// RDMA Reads of this QP that wait for their response (in the ORQ).
    pub(crate) fn reads_outstanding(&self) -> usize {
        self.lock().orq.len()
    }

    /// The local address of the link it runs over.
    pub(crate) fn local_addr(&self) -> IaAddress {
        self.local_addr
    }

    /// The current state.
    pub(crate) fn state(&self) -> EpState {
        self.lock().state
    }

    fn upcall(&self, f: impl FnOnce(&dyn QpUpcalls)) {
        if let Some(u) = self.upcalls.upgrade() {
            f(&*u);
        }
    }

    /// Reports a completion. `suppress_ok`: SUPPRESS was asked (successes vanish); errors
    /// always notify, whatever `c.signalled` says.
    fn complete(&self, c: Completion, suppress_ok: bool) {
        if c.status == DtoStatus::Success && suppress_ok {
            return;
        }
        let c = Completion {
            signalled: c.signalled || c.status != DtoStatus::Success,
            ..c
        };
        self.upcall(|u| u.completed(c));
    }

    fn complete_send(&self, wr: &SendWr, status: DtoStatus, len: u64) {
        let op = match wr.op {
            ReqOp::Send | ReqOp::SendInvalidate(_) => DtoOp::Send,
            ReqOp::Write => DtoOp::RdmaWrite,
            ReqOp::WriteImmed(_) => DtoOp::RdmaWriteImmed,
            ReqOp::Read => DtoOp::RdmaRead,
        };
        self.complete(
            Completion {
                queue: CompletionQueue::Request,
                cookie: wr.cookie,
                status,
                len,
                op,
                immediate: None,
                rmr_context: None,
                signalled: !wr.flags.contains(CompletionFlags::UNSIGNALLED),
            },
            wr.flags.contains(CompletionFlags::SUPPRESS),
        );
    }

    /// Completes a receive. `solicited`: the matching send asked for notification.
    fn complete_recv(
        &self,
        wr: &RecvWr,
        status: DtoStatus,
        len: u64,
        solicited: bool,
        recv_flags: CompletionFlags,
    ) {
        self.complete_recv_as(wr, status, len, solicited, recv_flags, RecvOp::Receive);
    }

    /// [`Qp::complete_recv`] for the message `how` names: a plain Send, the peer's RDMA Write
    /// with Immediate Data (RECV_IMMED carrying the value; `len` is then the write's length,
    /// not bytes placed in the receive buffer) or a Send with Invalidate
    /// (RECEIVE_WITH_INVALIDATE, carrying the invalidated STag when it succeeded).
    fn complete_recv_as(
        &self,
        wr: &RecvWr,
        status: DtoStatus,
        len: u64,
        solicited: bool,
        recv_flags: CompletionFlags,
        how: RecvOp,
    ) {
        self.raise_soft_high();
        if self.srq.is_some() {
            // Saturating, as before: a receive this QP did not take changes nothing.
            let _ = self
                .srq_held
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1));
            let _ = self
                .srq_held_bytes
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                    Some(v.saturating_sub(wr.total))
                });
        }
        let signalled = if recv_flags.contains(CompletionFlags::SOLICITED_WAIT) {
            solicited
        } else {
            !wr.flags.contains(CompletionFlags::UNSIGNALLED)
        };
        let (op, immediate, rmr_context) = match how {
            RecvOp::Receive => (DtoOp::Receive, None, None),
            RecvOp::Immed(v) => (DtoOp::RecvImmed, Some(v), None),
            RecvOp::Invalidated(stag) => (DtoOp::ReceiveWithInvalidate, None, stag),
        };
        self.complete(
            Completion {
                queue: CompletionQueue::Recv,
                cookie: wr.cookie,
                status,
                len,
                op,
                immediate,
                rmr_context,
                signalled,
            },
            false,
        );
    }

    fn event(&self, ev: QpEvent) {
        self.upcall(|u| u.connection_event(ev));
    }

    /// Sets the soft high watermark of SRQ buffers this QP may hold (`None`: infinite) and arms
    /// its event, raised once when the count goes above it (at once if it already is).
    pub(crate) fn set_soft_high_watermark(&self, w: Option<usize>) {
        {
            let mut c = self.lock();
            c.soft_high = w;
            c.soft_high_armed = w.is_some();
            self.check_soft_high(&mut c);
        }
        self.raise_soft_high();
    }

    /// Marks the soft high watermark event due if the held count is above the watermark and
    /// the event is armed (`c` is the locked core: [`raise_soft_high`](Self::raise_soft_high)
    /// raises it once the lock is released).
    pub(super) fn check_soft_high(&self, c: &mut QpCore) {
        let held = self.srq_held.load(Ordering::Relaxed);
        if c.soft_high_armed && c.soft_high.is_some_and(|w| held > w) {
            c.soft_high_armed = false;
            self.soft_high_due.store(true, Ordering::SeqCst);
        }
    }

    /// Raises the soft high watermark event if it is due (no QP lock held).
    pub(super) fn raise_soft_high(&self) {
        // A load first: this runs on every receive completion and is almost never due.
        if self.soft_high_due.load(Ordering::Relaxed)
            && self.soft_high_due.swap(false, Ordering::SeqCst)
        {
            self.upcall(|u| u.soft_high_watermark());
        }
    }

    // --------------------------------------------------------------------------------------------
    // Posting (the DAT layer has validated the request and resolved its segments)

    /// Posts a receive. On a DISCONNECTED QP it is flushed at once. A peer whose Send waits for
    /// a buffer is woken.
    pub(crate) fn post_recv(&self, wr: RecvWr) -> Result<(), PostError> {
        // Not `post_recvs` of one: the single post is the ping-pong's, and the batch's loop
        // cost it about 40 instructions (`per_message shm N suppress`).
        let mut c = self.lock();
        if c.state == EpState::Disconnected {
            let recv_flags = c.attr.recv_completion_flags;
            drop(c);
            self.complete_recv(&wr, DtoStatus::Flushed, 0, true, recv_flags);
            return Ok(());
        }
        if c.rq.len() >= c.attr.max_recv_dtos {
            return Err(PostError::QueueFull(c.attr.max_recv_dtos));
        }
        c.rq.push_back(wr);
        let wake = c.take_peer_waiting();
        drop(c);
        if let Some(conn) = wake {
            conn.wake_peer();
        }
        Ok(())
    }

    /// Posts receives in order under one hold of the QP lock, as [`Qp::post_recv`] posts one:
    /// how many were taken (every one on a DISCONNECTED QP, flushed at once), and the queue's
    /// maximum if it filled before the last (the rest are dropped: never posted).
    pub(crate) fn post_recvs(
        &self,
        wrs: impl ExactSizeIterator<Item = RecvWr>,
    ) -> (usize, Option<PostError>) {
        let mut c = self.lock();
        if c.state == EpState::Disconnected {
            let recv_flags = c.attr.recv_completion_flags;
            drop(c);
            let n = wrs.len();
            for wr in wrs {
                self.complete_recv(&wr, DtoStatus::Flushed, 0, true, recv_flags);
            }
            return (n, None);
        }
        let max = c.attr.max_recv_dtos;
        let (mut taken, mut full) = (0, None);
        for wr in wrs {
            if c.rq.len() >= max {
                full = Some(PostError::QueueFull(max));
                break;
            }
            c.rq.push_back(wr);
            taken += 1;
        }
        let wake = if taken > 0 {
            c.take_peer_waiting()
        } else {
            None
        };
        drop(c);
        if let Some(conn) = wake {
            conn.wake_peer();
        }
        (taken, full)
    }

    /// Posts a send, RDMA write (with immediate) or RDMA read: CONNECTED queues and transmits
    /// it, DISCONNECTED flushes it at once, any other state refuses it.
    pub(crate) fn post_send(&self, mut wr: SendWr) -> Result<(), PostError> {
        let mut c = self.lock();
        match c.state {
            EpState::Connected => {}
            EpState::Disconnected => {
                drop(c);
                self.complete_send(&wr, DtoStatus::Flushed, 0);
                return Ok(());
            }
            s => return Err(PostError::InvalidState(s)),
        }
        if c.sq.len() + c.orq.len() >= c.attr.max_request_dtos {
            return Err(PostError::QueueFull(c.attr.max_request_dtos));
        }
        match self.transmit_inline(&c, &mut wr) {
            Inline::Declined => {}
            Inline::Sent => {
                drop(c); // before the WR (its regions) goes
                return Ok(());
            }
            Inline::Read => {
                c.orq.push_back(wr);
                return Ok(());
            }
            Inline::Failed(status, conn_id) => {
                // As a refusal from `transmit`: reported (errors always are), then the break.
                drop(c);
                self.complete_send(&wr, status, 0);
                self.end_connection_of(conn_id, ConnectionEventKind::Broken, true);
                return Ok(());
            }
        }
        c.sq.push_back(wr);
        self.pump_locked(c);
        Ok(())
    }

    /// Whether a peer Send is waiting for a receive buffer here; clears the flag.
    pub(crate) fn take_peer_waiting(&self) -> Option<Arc<dyn Connection>> {
        self.lock().take_peer_waiting()
    }
}

/// A connection end that waits for the WR inside `transmit` ([`QpCore::end_deferred`]): the
/// connection it is for (None: whichever), its kind, whether the peer is told.
pub(crate) type DeferredEnd = (Option<u64>, ConnectionEventKind, bool);

impl QpCore {
    /// The connection to wake if a peer Send waits for a receive buffer here; clears the flag.
    fn take_peer_waiting(&mut self) -> Option<Arc<dyn Connection>> {
        if std::mem::take(&mut self.peer_waiting) {
            self.conn.clone()
        } else {
            None
        }
    }

    /// The WR that was inside `transmit` has its outcome recorded (its completion queued): the
    /// end that came meanwhile, if any, which the caller runs once it has dropped the lock
    /// ([`Qp::run_deferred_end`]).
    fn finish_transmit(&mut self) -> Option<DeferredEnd> {
        self.in_transmit = false;
        self.end_deferred.take()
    }

    /// Reads are outstanding, or one has finished but its completion is not queued yet.
    fn reads_pending(&self) -> bool {
        !self.orq.is_empty() || self.reads_completing > 0
    }

    /// Everything in flight that must end before a graceful disconnect completes.
    fn outstanding(&self) -> bool {
        self.reads_pending() || !self.lent.is_empty()
    }

    /// The lent messages and the WRs completing after them, flushed in order (the connection
    /// ended): their WRs.
    fn take_lent(&mut self) -> impl Iterator<Item = SendWr> + use<> {
        std::mem::take(&mut self.lent)
            .into_iter()
            .filter_map(|l| l.wr)
    }
}

/// An entry of [`QpCore::lent`].
pub(crate) struct Lent {
    /// The WR that completes (None: a Read Response, which completes nothing).
    pub(crate) wr: Option<SendWr>,
    /// False while the link has not returned the message (true for a WR transmitted normally
    /// behind a lent one: it only waits for its turn).
    pub(crate) returned: bool,
}

/// What the DAT layer's queries report about a QP.
pub(crate) struct QpInfo {
    pub(crate) state: EpState,
    pub(crate) attr: EpAttr,
    pub(crate) remote_addr: Option<IaAddress>,
    pub(crate) remote_qual: Option<ConnQual>,
    pub(crate) ord: usize,
    pub(crate) ird: usize,
    /// Receives posted to its own queue, and their total size.
    pub(crate) recv_posted: usize,
    pub(crate) recv_bytes: u64,
    /// Requests queued or outstanding.
    pub(crate) requests: usize,
}

/// Why new attributes were refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ModifyError {
    /// Attributes cannot change in this state.
    InvalidState(EpState),
    /// The new depths are smaller than what is queued.
    TooSmall,
}

impl Qp {
    /// A snapshot of the state, attributes and queue levels.
    pub(crate) fn info(&self) -> QpInfo {
        let c = self.lock();
        QpInfo {
            state: c.state,
            attr: c.attr.clone(),
            remote_addr: c.remote_addr,
            remote_qual: c.remote_qual,
            ord: c.ord,
            ird: c.ird,
            // On an SRQ: the buffers it took and holds (DAT's ep_recv_query).
            recv_posted: if self.srq.is_some() {
                self.srq_held.load(Ordering::Relaxed)
            } else {
                c.rq.len()
            },
            recv_bytes: if self.srq.is_some() {
                self.srq_held_bytes.load(Ordering::Relaxed)
            } else {
                c.rq.iter().map(|w| w.total).sum()
            },
            requests: c.sq.len() + c.orq.len(),
        }
    }

    /// The state and the attributes a post checks, without the lock (a snapshot: the engine
    /// checks the state again when it queues).
    pub(crate) fn post_view(&self) -> PostAttrs {
        let v = &self.view;
        PostAttrs {
            state: EpState::from_repr(v.state.load(Ordering::Acquire))
                .expect("only EpState values are stored"),
            max_recv_iov: v.max_recv_iov.load(Ordering::Relaxed),
            max_request_iov: v.max_request_iov.load(Ordering::Relaxed),
            recv_flags: CompletionFlags::from_bits_retain(v.recv_flags.load(Ordering::Relaxed)),
            request_flags: CompletionFlags::from_bits_retain(
                v.request_flags.load(Ordering::Relaxed),
            ),
        }
    }

    /// The receive completion flags of the endpoint's attributes.
    pub(crate) fn recv_flags(&self) -> CompletionFlags {
        CompletionFlags::from_bits_retain(self.view.recv_flags.load(Ordering::Relaxed))
    }

    /// Changes the state (under the lock `c`), and its mirror for posts.
    pub(crate) fn set_state(&self, c: &mut QpCore, state: EpState) {
        c.state = state;
        self.view.state.store(state as u8, Ordering::Release);
    }

    /// Replaces the attributes; only while not connected or connecting, and not below what is
    /// queued.
    pub(crate) fn modify(&self, attr: &EpAttr) -> Result<(), ModifyError> {
        let mut c = self.lock();
        if !matches!(
            c.state,
            EpState::Unconnected | EpState::Reserved | EpState::TentativeConnectionPending
        ) {
            return Err(ModifyError::InvalidState(c.state));
        }
        if attr.max_recv_dtos < c.rq.len() || attr.max_request_dtos < c.sq.len() {
            return Err(ModifyError::TooSmall);
        }
        c.attr = attr.clone();
        self.view.set_attr(attr);
        let (r, s) = (
            attr.max_recv_dtos.saturating_sub(c.rq.len()),
            attr.max_request_dtos.saturating_sub(c.sq.len()),
        );
        c.rq.reserve(r);
        c.sq.reserve(s);
        Ok(())
    }
}
