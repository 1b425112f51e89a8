//! Endpoints (`DAT_EP`): attributes, the DAT endpoint state machine, posting, and the software
//! RNIC engine of one queue pair (send queue, receive queue or SRQ, outstanding RDMA reads,
//! inbound read queue, ordering, fencing and flushing).
//!
//! Locking: each endpoint has one `core` mutex, held only for short bookkeeping and for data
//! placement into local memory; it is never held while calling into another endpoint. The
//! transmit side is serialized by an atomic `tx_busy` flag (see [`EpInner::pump`]), never a
//! blocking lock, so two endpoints that feed each other cannot deadlock. EVD locks are leaves.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use smallvec::SmallVec;

use crate::error::{err, DatError, ErrorType, Object, Result, Subtype};
use crate::evd::Evd;
use crate::event::{
    AsyncEvent, AsyncKind, AsyncSubject, ConnectionEvent, ConnectionEventKind, DtoCompletion, Event,
};
use crate::ia::{IaInner, InterfaceAdapter, MAX_IOV};
use crate::link::{Connection, OutMsg, Payload, TxOutcome};
use crate::mem::{seg_span, LocalFault, RemoteFault, Seg};
use crate::pz::Pz;
use crate::srq::Srq;
use crate::types::{
    CloseFlags, CompletionFlags, ConnQual, Cookie, DtoOp, DtoStatus, EpState, EvdFlags, IaAddress,
    LmrTriplet, MemPriv, RmrTriplet,
};

/// `DAT_EP_ATTR`: the per-endpoint limits and completion behaviour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpAttr {
    /// Largest send.
    pub max_message_size: u64,
    /// Largest RDMA read or write.
    pub max_rdma_size: u64,
    /// How receives complete: DEFAULT (0), UNSIGNALLED (posts may ask for no notification),
    /// SOLICITED_WAIT (receives notify only for solicited sends) or EVD_THRESHOLD.
    pub recv_completion_flags: CompletionFlags,
    /// How requests complete: DEFAULT, UNSIGNALLED or EVD_THRESHOLD.
    pub request_completion_flags: CompletionFlags,
    /// Receive queue depth.
    pub max_recv_dtos: usize,
    /// Request (send/write/read) queue depth.
    pub max_request_dtos: usize,
    /// Most segments in a receive's iov.
    pub max_recv_iov: usize,
    /// Most segments in a request's iov.
    pub max_request_iov: usize,
    /// Most inbound RDMA reads queued (IRD offered).
    pub max_rdma_read_in: usize,
    /// Most outbound RDMA reads in flight (ORD wanted).
    pub max_rdma_read_out: usize,
}

impl Default for EpAttr {
    fn default() -> Self {
        EpAttr {
            max_message_size: 1 << 31,
            max_rdma_size: 1 << 31,
            recv_completion_flags: CompletionFlags::EVD_THRESHOLD,
            request_completion_flags: CompletionFlags::EVD_THRESHOLD,
            max_recv_dtos: 64,
            max_request_dtos: 64,
            max_recv_iov: MAX_IOV,
            max_request_iov: MAX_IOV,
            max_rdma_read_in: 8,
            max_rdma_read_out: 8,
        }
    }
}

/// `DAT_EP_PARAM`, the parts this API has.
#[derive(Debug, Clone)]
pub struct EpParam {
    /// State.
    pub state: EpState,
    /// Attributes.
    pub attr: EpAttr,
    /// Peer address while connected (or connecting).
    pub remote_address: Option<IaAddress>,
    /// Connection qualifier connected to (active side) or accepted on (passive side).
    pub remote_port_qual: Option<ConnQual>,
    /// The PZ id.
    pub pz_id: u64,
    /// Negotiated outbound read depth (ORD) of the current connection.
    pub ord: usize,
    /// Negotiated inbound read depth (IRD) of the current connection.
    pub ird: usize,
}

/// The segments of a work request: most have one or two, kept inline (a request is moved a few
/// times between post and completion; a full `MAX_IOV` array would be copied each time).
pub(crate) type Segs = SmallVec<[Seg; 2]>;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ReqOp {
    Send,
    Write,
    /// RDMA Write with Immediate Data (the DAT IB extension's write_immed): the 32-bit value
    /// for the peer's receive completion.
    WriteImmed(u32),
    Read,
}

struct SendWr {
    cookie: Cookie,
    op: ReqOp,
    flags: CompletionFlags,
    segs: Segs,
    total: u64,
    remote: RmrTriplet,
    sink_stag: u32,
    /// Reads: the sink tagged offset sent in the request, and response bytes placed so far.
    sink_to: u64,
    resp_got: u64,
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

pub(crate) struct EpCore {
    state: EpState,
    attr: EpAttr,
    conn: Option<Arc<dyn Connection>>,
    /// True once DISCONNECTED/BROKEN/... was reported for the current connection attempt.
    end_reported: bool,
    /// Bumped on every connect/accept attempt, so stale timers and requests do nothing.
    attempt: u64,
    sq: VecDeque<SendWr>,
    orq: VecDeque<SendWr>,
    rq: VecDeque<RecvWr>,
    irq: VecDeque<ReadWork>,
    ord: usize,
    ird: usize,
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
    /// The link's connection of a connect attempt that is not established yet: closed at once
    /// if the attempt fails (timeout, free), so the peer cannot accept a dead request.
    pending_conn: Option<Arc<dyn Connection>>,
    remote_addr: Option<IaAddress>,
    remote_qual: Option<ConnQual>,
    /// Reserved by this RSP id.
    pub(crate) reserved_by: Option<u64>,
    soft_high_watermark: Option<usize>,
}

pub(crate) struct EpInner {
    pub(crate) id: u64,
    pub(crate) ia: Arc<IaInner>,
    pub(crate) pz: Pz,
    pub(crate) recv_evd: Option<Evd>,
    pub(crate) request_evd: Option<Evd>,
    pub(crate) connect_evd: Option<Evd>,
    pub(crate) srq: Option<Srq>,
    core: Mutex<EpCore>,
    tx_busy: AtomicBool,
    tx_pending: AtomicBool,
    rnr_blocked: AtomicBool,
    rnr_wakes: AtomicU64,
    pub(crate) freed: AtomicBool,
    me: Weak<EpInner>,
}

/// An Endpoint (`DAT_EP_HANDLE`). Cloning gives another handle to the same endpoint.
#[derive(Clone)]
pub struct Endpoint(pub(crate) Arc<EpInner>);

handle_identity!(Endpoint);

fn check_completion_flags(f: CompletionFlags, recv: bool) -> bool {
    let allowed: &[CompletionFlags] = if recv {
        &[
            CompletionFlags::empty(),
            CompletionFlags::UNSIGNALLED,
            CompletionFlags::SOLICITED_WAIT,
            CompletionFlags::EVD_THRESHOLD,
        ]
    } else {
        &[
            CompletionFlags::empty(),
            CompletionFlags::UNSIGNALLED,
            CompletionFlags::EVD_THRESHOLD,
        ]
    };
    allowed.contains(&f)
}

impl InterfaceAdapter {
    /// Creates an endpoint (`dat_ep_create`). Each EVD must take the right stream: DTO for
    /// `recv_evd`/`request_evd`, CONNECTION for `connect_evd`. `attr` of `None` takes the
    /// defaults.
    pub fn ep_create(
        &self,
        pz: &Pz,
        recv_evd: Option<&Evd>,
        request_evd: Option<&Evd>,
        connect_evd: Option<&Evd>,
        attr: Option<&EpAttr>,
    ) -> Result<Endpoint> {
        self.ep_create_inner(
            "ep_create",
            pz,
            recv_evd,
            request_evd,
            connect_evd,
            None,
            attr,
        )
    }

    /// Creates an endpoint whose receives come from `srq` (`dat_ep_create_with_srq`).
    pub fn ep_create_with_srq(
        &self,
        pz: &Pz,
        recv_evd: Option<&Evd>,
        request_evd: Option<&Evd>,
        connect_evd: Option<&Evd>,
        srq: &Srq,
        attr: Option<&EpAttr>,
    ) -> Result<Endpoint> {
        self.ep_create_inner(
            "ep_create_with_srq",
            pz,
            recv_evd,
            request_evd,
            connect_evd,
            Some(srq),
            attr,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn ep_create_inner(
        &self,
        op: &'static str,
        pz: &Pz,
        recv_evd: Option<&Evd>,
        request_evd: Option<&Evd>,
        connect_evd: Option<&Evd>,
        srq: Option<&Srq>,
        attr: Option<&EpAttr>,
    ) -> Result<Endpoint> {
        let ia = &self.0;
        ia.check_open(op)?;
        pz.check(op)?;
        let obj = ia.object();
        if !Arc::ptr_eq(&pz.0.ia, ia) {
            return err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandlePz,
                op,
                obj,
                "the PZ belongs to another IA",
            );
        }
        let evd_checks = [
            (recv_evd, EvdFlags::DTO, Subtype::InvalidHandleEvdRecv),
            (request_evd, EvdFlags::DTO, Subtype::InvalidHandleEvdRequest),
            (
                connect_evd,
                EvdFlags::CONNECTION,
                Subtype::InvalidHandleEvdConn,
            ),
        ];
        for (evd, need, sub) in evd_checks {
            if let Some(e) = evd {
                // An EVD of another IA of the process is allowed, as the reference provider
                // allows it (dapltest's limit tests share one connect EVD across IAs).
                if e.0.freed.load(Ordering::Acquire) || !e.0.flags.contains(need) {
                    return err(
                        ErrorType::InvalidHandle,
                        sub,
                        op,
                        obj,
                        format!("EVD {} is freed or lacks the {:?} stream", e.0.id, need),
                    );
                }
            }
        }
        if let Some(s) = srq {
            s.check(op)?;
            if s.0.pz != *pz {
                return err(
                    ErrorType::ProtectionViolation,
                    Subtype::NoSubtype,
                    op,
                    obj,
                    "the SRQ is in another PZ",
                );
            }
        }
        let attr = attr.cloned().unwrap_or_default();
        validate_attr(ia, &attr, op, obj)?;
        let mut o = ia.objects();
        if o.eps.len() >= ia.attr.max_eps {
            return err(
                ErrorType::InsufficientResources,
                Subtype::ResourceTep,
                op,
                obj,
                format!("the IA already has {} endpoints", o.eps.len()),
            );
        }
        let id = ia.next_id();
        let inner = Arc::new_cyclic(|me| EpInner {
            id,
            ia: ia.clone(),
            pz: pz.clone(),
            recv_evd: recv_evd.cloned(),
            request_evd: request_evd.cloned(),
            connect_evd: connect_evd.cloned(),
            srq: srq.cloned(),
            core: Mutex::new(EpCore {
                state: EpState::Unconnected,
                sq: VecDeque::with_capacity(attr.max_request_dtos),
                orq: VecDeque::with_capacity(attr.max_rdma_read_out),
                rq: VecDeque::with_capacity(if srq.is_some() { 0 } else { attr.max_recv_dtos }),
                irq: VecDeque::with_capacity(attr.max_rdma_read_in),
                attr,
                conn: None,
                end_reported: true,
                attempt: 0,
                ord: 0,
                ird: 0,
                peer_waiting: false,
                tx_stalled: false,
                tx_inflight: None,
                tx_drained_early: false,
                pending_conn: None,
                remote_addr: None,
                remote_qual: None,
                reserved_by: None,
                soft_high_watermark: None,
            }),
            tx_busy: AtomicBool::new(false),
            tx_pending: AtomicBool::new(false),
            rnr_blocked: AtomicBool::new(false),
            rnr_wakes: AtomicU64::new(0),
            freed: AtomicBool::new(false),
            me: me.clone(),
        });
        pz.0.users.fetch_add(1, Ordering::AcqRel);
        for e in [recv_evd, request_evd, connect_evd].into_iter().flatten() {
            e.0.users.fetch_add(1, Ordering::AcqRel);
        }
        if let Some(e) = recv_evd {
            e.0.receives.store(true, Ordering::Relaxed);
        }
        if let Some(s) = srq {
            s.attach(&inner);
        }
        let ep = Endpoint(inner);
        o.eps.insert(id, ep.clone());
        Ok(ep)
    }
}

fn validate_attr(ia: &IaInner, a: &EpAttr, op: &'static str, obj: Object) -> Result<()> {
    let max = &ia.attr;
    let bad = |what: String| {
        err(
            ErrorType::InvalidParameter,
            Subtype::InvalidArg6,
            op,
            obj,
            what,
        )
    };
    if !check_completion_flags(a.recv_completion_flags, true) {
        return bad(format!("recv_completion_flags {:?} is not one of DEFAULT, UNSIGNALLED, SOLICITED_WAIT, EVD_THRESHOLD", a.recv_completion_flags));
    }
    if !check_completion_flags(a.request_completion_flags, false) {
        return bad(format!(
            "request_completion_flags {:?} is not one of DEFAULT, UNSIGNALLED, EVD_THRESHOLD",
            a.request_completion_flags
        ));
    }
    if a.max_recv_dtos > max.max_dto_per_ep
        || a.max_request_dtos == 0
        || a.max_request_dtos > max.max_dto_per_ep
    {
        return bad(format!(
            "queue depths must be in 1..={} (recv may be 0)",
            max.max_dto_per_ep
        ));
    }
    if a.max_recv_iov > MAX_IOV || a.max_request_iov > MAX_IOV {
        return bad(format!("iov lengths must be at most {MAX_IOV}"));
    }
    if a.max_rdma_read_in > max.max_rdma_read_per_ep
        || a.max_rdma_read_out > max.max_rdma_read_per_ep
    {
        return bad(format!(
            "RDMA read depths must be at most {}",
            max.max_rdma_read_per_ep
        ));
    }
    Ok(())
}

fn state_subtype(s: EpState) -> Subtype {
    match s {
        EpState::Unconnected => Subtype::InvalidStateEpUnconnected,
        EpState::Reserved => Subtype::InvalidStateEpReserved,
        EpState::PassiveConnectionPending => Subtype::InvalidStateEpPassconnpending,
        EpState::ActiveConnectionPending => Subtype::InvalidStateEpActconnpending,
        EpState::TentativeConnectionPending => Subtype::InvalidStateEpTentconnpending,
        EpState::Connected => Subtype::InvalidStateEpConnected,
        EpState::DisconnectPending => Subtype::InvalidStateEpDiscpending,
        EpState::Disconnected => Subtype::InvalidStateEpDisconnected,
        EpState::CompletionPending => Subtype::InvalidStateEpComplpending,
    }
}

/// What a post resolved and how it must complete.
pub(crate) struct Resolved {
    pub(crate) segs: Segs,
    pub(crate) total: u64,
}

impl EpInner {
    pub(crate) fn lock(&self) -> MutexGuard<'_, EpCore> {
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn object(&self) -> Object {
        Object::new("ep", self.id)
    }

    fn handle(&self) -> Endpoint {
        Endpoint(self.me.upgrade().expect("an endpoint in use is alive"))
    }

    /// Resolves a local iov against the memory table.
    pub(crate) fn resolve_iov(
        ia: &IaInner,
        pz_id: u64,
        iov: &[LmrTriplet],
        max: usize,
        need: MemPriv,
        op: &'static str,
        obj: Object,
    ) -> Result<Resolved> {
        if iov.len() > max {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg2,
                op,
                obj,
                format!("{} iov segments, at most {max} allowed", iov.len()),
            );
        }
        let mut segs = Segs::new();
        let mut total: u64 = 0;
        for (i, t) in iov.iter().enumerate() {
            let seg = ia
                .memtable
                .resolve_local(
                    t.lmr_context,
                    t.virtual_address,
                    t.segment_length,
                    pz_id,
                    need,
                )
                .map_err(|f| {
                    let (kind, sub, what) = match f {
                        LocalFault::InvalidContext => (
                            ErrorType::PrivilegesViolation,
                            Subtype::NoSubtype,
                            "names no live LMR",
                        ),
                        LocalFault::PzMismatch => (
                            ErrorType::ProtectionViolation,
                            Subtype::NoSubtype,
                            "is in an LMR of another PZ",
                        ),
                        LocalFault::Privileges => (
                            ErrorType::PrivilegesViolation,
                            if need == MemPriv::LOCAL_WRITE {
                                Subtype::PrivilegesWrite
                            } else {
                                Subtype::PrivilegesRead
                            },
                            "is in an LMR without the needed local privilege",
                        ),
                        LocalFault::OutOfBounds => (
                            ErrorType::InvalidParameter,
                            Subtype::InvalidArg3,
                            "lies outside its LMR",
                        ),
                    };
                    DatError::new(
                        kind,
                        sub,
                        op,
                        obj,
                        format!(
                            "iov segment {i} (lmr_context {:#x}, va {:#x}, len {}) {what}",
                            t.lmr_context, t.virtual_address, t.segment_length
                        ),
                    )
                })?;
            total = total.saturating_add(seg.len as u64);
            segs.push(seg);
        }
        Ok(Resolved { segs, total })
    }

    /// Queues a DTO completion on `evd`. `suppress_ok`: SUPPRESS was asked (successes vanish);
    /// `signalled`: whether it notifies; `immediate`: a RECV_IMMED completion's value.
    #[allow(clippy::too_many_arguments)]
    fn complete(
        &self,
        evd: Option<&Evd>,
        cookie: Cookie,
        status: DtoStatus,
        len: u64,
        op: DtoOp,
        immediate: Option<u32>,
        suppress_ok: bool,
        signalled: bool,
    ) {
        if status == DtoStatus::Success && suppress_ok {
            return;
        }
        if let Some(evd) = evd {
            let signalled = signalled || status != DtoStatus::Success;
            evd.0.push(
                Event::Dto(DtoCompletion {
                    ep: self.handle(),
                    cookie,
                    status,
                    transferred_length: len,
                    operation: op,
                    immediate,
                }),
                signalled,
            );
        }
    }

    fn complete_send(&self, wr: &SendWr, status: DtoStatus, len: u64) {
        let op = match wr.op {
            ReqOp::Send => DtoOp::Send,
            ReqOp::Write => DtoOp::RdmaWrite,
            ReqOp::WriteImmed(_) => DtoOp::RdmaWriteImmed,
            ReqOp::Read => DtoOp::RdmaRead,
        };
        let signalled = !wr.flags.contains(CompletionFlags::UNSIGNALLED);
        self.complete(
            self.request_evd.as_ref(),
            wr.cookie,
            status,
            len,
            op,
            None,
            wr.flags.contains(CompletionFlags::SUPPRESS),
            signalled,
        );
    }

    /// Completes a receive. `solicited`: the matching send asked for notification.
    pub(crate) fn complete_recv(
        &self,
        wr: &RecvWr,
        status: DtoStatus,
        len: u64,
        solicited: bool,
        recv_flags: CompletionFlags,
    ) {
        self.complete_recv_as(wr, status, len, solicited, recv_flags, None);
    }

    /// [`EpInner::complete_recv`] with `immediate`: `Some` for a receive consumed by the peer's
    /// RDMA Write with Immediate Data, which completes as RECV_IMMED carrying the value (`len` is
    /// then the write's length, not bytes placed in the receive buffer).
    fn complete_recv_as(
        &self,
        wr: &RecvWr,
        status: DtoStatus,
        len: u64,
        solicited: bool,
        recv_flags: CompletionFlags,
        immediate: Option<u32>,
    ) {
        let signalled = if recv_flags.contains(CompletionFlags::SOLICITED_WAIT) {
            solicited
        } else {
            !wr.flags.contains(CompletionFlags::UNSIGNALLED)
        };
        let op = if immediate.is_some() {
            DtoOp::RecvImmed
        } else {
            DtoOp::Receive
        };
        self.complete(
            self.recv_evd.as_ref(),
            wr.cookie,
            status,
            len,
            op,
            immediate,
            false,
            signalled,
        );
    }

    fn conn_event(&self, kind: ConnectionEventKind, private_data: Vec<u8>) {
        if let Some(evd) = &self.connect_evd {
            evd.0.push(
                Event::Connection(ConnectionEvent {
                    kind,
                    ep: self.handle(),
                    private_data,
                }),
                true,
            );
        }
    }

    // --------------------------------------------------------------------------------------------
    // Transmit side

    /// Drives the send side: transmits queued work while the link takes it. Never blocks: if
    /// another thread is already transmitting for this EP, it is told to go round once more.
    pub(crate) fn pump(&self) {
        loop {
            self.tx_pending.store(true, Ordering::SeqCst);
            if self
                .tx_busy
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
            {
                return; // the transmitting thread will see tx_pending
            }
            while self.tx_pending.swap(false, Ordering::SeqCst) {
                self.drain_tx();
            }
            self.tx_busy.store(false, Ordering::SeqCst);
            if !self.tx_pending.load(Ordering::SeqCst) {
                return;
            }
        }
    }

    fn drain_tx(&self) {
        #[allow(clippy::large_enum_variant)] // lives on the stack for one iteration
        enum Work {
            Resp(ReadWork),
            Wr(SendWr),
            ReadReq {
                sink_stag: u32,
                sink_to: u64,
                len: u64,
                remote: RmrTriplet,
            },
        }
        loop {
            let (work, conn) = {
                let mut c = self.lock();
                if !matches!(c.state, EpState::Connected | EpState::DisconnectPending) {
                    return;
                }
                let Some(conn) = c.conn.clone() else { return };
                if c.tx_stalled {
                    return; // the link calls tx_drained when it has written its message
                }
                if let Some(r) = c.irq.pop_front() {
                    (Work::Resp(r), conn)
                } else if let Some(head) = c.sq.front() {
                    if self.rnr_blocked.load(Ordering::SeqCst) {
                        return;
                    }
                    if head.flags.contains(CompletionFlags::BARRIER_FENCE) && !c.orq.is_empty() {
                        return; // resumes when the last outstanding read completes
                    }
                    if head.op == ReqOp::Read && c.orq.len() >= c.ord {
                        return; // ORD reached: the read waits in the send queue
                    }
                    let mut wr = c.sq.pop_front().expect("head exists");
                    if wr.op == ReqOp::Read {
                        // Into the ORQ before the request leaves: the response may come back
                        // before transmit returns.
                        wr.sink_to = wr
                            .segs
                            .first()
                            .map(|s| s.region.addr() + s.offset as u64)
                            .unwrap_or(0);
                        let w = Work::ReadReq {
                            sink_stag: wr.sink_stag,
                            sink_to: wr.sink_to,
                            len: wr.remote.segment_length,
                            remote: wr.remote,
                        };
                        c.orq.push_back(wr);
                        (w, conn)
                    } else {
                        (Work::Wr(wr), conn)
                    }
                } else {
                    let graceful_done = c.state == EpState::DisconnectPending && c.orq.is_empty();
                    drop(c);
                    if graceful_done {
                        self.end_connection_of(conn.id(), ConnectionEventKind::Disconnected, true);
                    }
                    return;
                }
            };
            match work {
                Work::Resp(r) => {
                    let segs = [r.seg];
                    let out = conn.transmit(OutMsg::ReadResponse {
                        sink_stag: r.sink_stag,
                        sink_to: r.sink_to,
                        payload: Payload::Segs(&segs),
                    });
                    match out {
                        TxOutcome::Sent => {}
                        TxOutcome::Queued => {
                            if self.stall_tx(None, &conn) {
                                return;
                            }
                        }
                        TxOutcome::PeerClosed => {
                            self.end_connection_of(
                                conn.id(),
                                ConnectionEventKind::Disconnected,
                                true,
                            );
                            return;
                        }
                        _ => {
                            self.end_connection_of(conn.id(), ConnectionEventKind::Broken, true);
                            return;
                        }
                    }
                }
                Work::ReadReq {
                    sink_stag,
                    sink_to,
                    len,
                    remote,
                } => {
                    let out = conn.transmit(OutMsg::ReadRequest {
                        sink_stag,
                        sink_to,
                        len,
                        src_stag: remote.rmr_context,
                        src_to: remote.virtual_address,
                    });
                    match out {
                        TxOutcome::Sent => {}
                        TxOutcome::Queued => {
                            if self.stall_tx(None, &conn) {
                                return;
                            }
                        }
                        TxOutcome::Failed(status) => {
                            // The peer refused the read: complete it (it is the ORQ's newest)
                            // with the peer's reason, then break.
                            let wr = self.lock().orq.pop_back();
                            if let Some(wr) = wr {
                                self.complete_send(&wr, status, 0);
                            }
                            self.end_connection_of(conn.id(), ConnectionEventKind::Broken, true);
                            return;
                        }
                        TxOutcome::NotReady | TxOutcome::Broken => {
                            self.end_connection_of(conn.id(), ConnectionEventKind::Broken, true);
                            return;
                        }
                        TxOutcome::PeerClosed => {
                            // The read is in the ORQ: the end flushes it.
                            self.end_connection_of(
                                conn.id(),
                                ConnectionEventKind::Disconnected,
                                true,
                            );
                            return;
                        }
                    }
                }
                Work::Wr(wr) => {
                    let wakes = self.rnr_wakes.load(Ordering::SeqCst);
                    let out = match wr.op {
                        ReqOp::Send => conn.transmit(OutMsg::Send {
                            solicited: wr.flags.contains(CompletionFlags::SOLICITED_WAIT),
                            payload: Payload::Segs(&wr.segs),
                        }),
                        ReqOp::WriteImmed(immediate) => conn.transmit(OutMsg::WriteImmed {
                            stag: wr.remote.rmr_context,
                            to: wr.remote.virtual_address,
                            payload: Payload::Segs(&wr.segs),
                            immediate,
                            solicited: wr.flags.contains(CompletionFlags::SOLICITED_WAIT),
                        }),
                        _ => conn.transmit(OutMsg::Write {
                            stag: wr.remote.rmr_context,
                            to: wr.remote.virtual_address,
                            payload: Payload::Segs(&wr.segs),
                        }),
                    };
                    match out {
                        TxOutcome::Sent => self.complete_send(&wr, DtoStatus::Success, wr.total),
                        TxOutcome::Queued => {
                            if self.stall_tx(Some(wr), &conn) {
                                return;
                            }
                        }
                        TxOutcome::NotReady => {
                            if !self.requeue_head(wr, &conn) {
                                return;
                            }
                            // Block, unless a wake came in meanwhile (checked after setting, so
                            // no wake is lost; see wake_from_peer).
                            self.rnr_blocked.store(true, Ordering::SeqCst);
                            if self.rnr_wakes.load(Ordering::SeqCst) != wakes {
                                self.rnr_blocked.store(false, Ordering::SeqCst);
                                continue;
                            }
                            return;
                        }
                        TxOutcome::Failed(status) => {
                            self.complete_send(&wr, status, 0);
                            self.end_connection_of(conn.id(), ConnectionEventKind::Broken, true);
                            return;
                        }
                        TxOutcome::Broken => {
                            self.requeue_head(wr, &conn);
                            self.end_connection_of(conn.id(), ConnectionEventKind::Broken, true);
                            return;
                        }
                        TxOutcome::PeerClosed => {
                            self.requeue_head(wr, &conn);
                            self.end_connection_of(
                                conn.id(),
                                ConnectionEventKind::Disconnected,
                                true,
                            );
                            return;
                        }
                    }
                }
            }
        }
    }

    /// The link took a message it could not write at once: remember the WR (completed by
    /// [`EpInner::tx_drained`]) and stop transmitting. Returns true if the caller must stop
    /// (false: the link already drained it meanwhile, go on).
    fn stall_tx(&self, wr: Option<SendWr>, conn: &Arc<dyn Connection>) -> bool {
        let mut c = self.lock();
        if c.conn.as_ref().is_none_or(|cur| cur.id() != conn.id()) {
            // The connection ended while the message was being written: it is flushed here.
            drop(c);
            if let Some(wr) = wr {
                self.complete_send(&wr, DtoStatus::Flushed, 0);
            }
            return true;
        }
        if std::mem::take(&mut c.tx_drained_early) {
            drop(c);
            if let Some(wr) = wr {
                self.complete_send(&wr, DtoStatus::Success, wr.total);
            }
            return false;
        }
        c.tx_stalled = true;
        c.tx_inflight = wr;
        true
    }

    /// The link has handed the whole of its queued message to the transport: the message
    /// completes and transmission resumes.
    pub(crate) fn tx_drained(&self, conn_id: u64) {
        let wr = {
            let mut c = self.lock();
            if c.conn.as_ref().is_none_or(|cur| cur.id() != conn_id) {
                return;
            }
            if !c.tx_stalled {
                // Raced ahead of stall_tx, which completes the message itself.
                c.tx_drained_early = true;
                return;
            }
            c.tx_stalled = false;
            c.tx_inflight.take()
        };
        if let Some(wr) = wr {
            self.complete_send(&wr, DtoStatus::Success, wr.total);
        }
        self.pump();
    }

    /// Puts `wr`, taken off the send queue to go out on `conn`, back at the head if `conn` is
    /// still the endpoint's connection. Otherwise the connection ended while `wr` was in flight
    /// and its flush did not see it: `wr` completes as flushed here, so that it is neither lost
    /// nor sent on a later connection. Returns whether it was requeued.
    fn requeue_head(&self, wr: SendWr, conn: &Arc<dyn Connection>) -> bool {
        let mut c = self.lock();
        if c.conn.as_ref().is_some_and(|cur| cur.id() == conn.id()) {
            c.sq.push_front(wr);
            return true;
        }
        drop(c);
        self.complete_send(&wr, DtoStatus::Flushed, 0);
        false
    }

    /// The peer posted a receive buffer: a Send blocked on it may go.
    pub(crate) fn wake_from_peer(&self) {
        self.rnr_wakes.fetch_add(1, Ordering::SeqCst);
        self.rnr_blocked.store(false, Ordering::SeqCst);
        self.pump();
    }

    // --------------------------------------------------------------------------------------------
    // Receive side (called by links with the peer's messages)

    fn rx_connected(c: &EpCore) -> bool {
        matches!(c.state, EpState::Connected | EpState::DisconnectPending)
    }

    /// Inbound Send: takes the next receive buffer (own queue or SRQ) and places the message.
    pub(crate) fn rx_send(&self, solicited: bool, payload: Payload<'_>) -> RxSend {
        let mut c = self.lock();
        let Some(wr) = self.take_recv_connected(&mut c) else {
            return RxSend::NoBuffer;
        };
        let recv_flags = c.attr.recv_completion_flags;
        let len = payload.len();
        if len > wr.total {
            drop(c);
            self.complete_recv(&wr, DtoStatus::LocalLength, 0, true, recv_flags);
            return RxSend::TooLong;
        }
        scatter(payload, &wr.segs);
        drop(c);
        self.complete_recv(&wr, DtoStatus::Success, len, solicited, recv_flags);
        RxSend::Placed
    }

    /// Inbound RDMA Write: checked against the memory table, then placed.
    pub(crate) fn rx_write(
        &self,
        stag: u32,
        to: u64,
        payload: Payload<'_>,
    ) -> std::result::Result<(), RxWriteFault> {
        self.rx_write_with(stag, to, payload.len(), |seg| {
            scatter(payload, std::slice::from_ref(seg));
        })
    }

    /// [`EpInner::rx_write`] for a link that places the payload itself (e.g. reads it from its
    /// socket straight into the region): the whole range `to..to+len` is checked (STag, PZ,
    /// REMOTE_WRITE, bounds) and the connection too, then `fill` gets the destination. A link
    /// that places part of it calls again for the rest, which is checked again.
    pub(crate) fn rx_write_with(
        &self,
        stag: u32,
        to: u64,
        len: u64,
        fill: impl FnOnce(&Seg),
    ) -> std::result::Result<(), RxWriteFault> {
        let seg = self
            .ia
            .memtable
            .resolve_remote(stag, to, len, self.pz.0.id, MemPriv::REMOTE_WRITE)
            .map_err(RxWriteFault::Access)?;
        {
            let c = self.lock();
            if !Self::rx_connected(&c) {
                // The connection ended under the write: a flush, not a protection error.
                return Err(RxWriteFault::NotConnected);
            }
        }
        fill(&seg);
        Ok(())
    }

    /// Inbound RDMA Write with Immediate Data, whole (links that deliver whole messages): the
    /// write is checked against the memory table (a zero-length one is not: nothing is placed,
    /// as a byte-stream link skips an empty Write), then, as for an inbound Send, it takes the
    /// next receive buffer (own queue or SRQ); only then is the data placed, and the receive
    /// completes as RECV_IMMED with `immediate` and the write's length. With no buffer nothing
    /// is placed and the sender waits (RNR), exactly as for a Send.
    pub(crate) fn rx_write_immed(
        &self,
        stag: u32,
        to: u64,
        payload: Payload<'_>,
        immediate: u32,
        solicited: bool,
    ) -> RxWriteImmed {
        let len = payload.len();
        let seg = if len == 0 {
            None
        } else {
            match self.ia.memtable.resolve_remote(
                stag,
                to,
                len,
                self.pz.0.id,
                MemPriv::REMOTE_WRITE,
            ) {
                Ok(seg) => Some(seg),
                Err(f) => return RxWriteImmed::Access(f),
            }
        };
        let mut c = self.lock();
        let Some(wr) = self.take_recv_connected(&mut c) else {
            return RxWriteImmed::NoBuffer;
        };
        let recv_flags = c.attr.recv_completion_flags;
        if let Some(seg) = &seg {
            scatter(payload, std::slice::from_ref(seg));
        }
        drop(c);
        self.complete_recv_as(
            &wr,
            DtoStatus::Success,
            len,
            solicited,
            recv_flags,
            Some(immediate),
        );
        RxWriteImmed::Placed
    }

    /// Inbound RDMA Read Request: checked (IRD, STag, PZ, REMOTE_READ, bounds), then queued for
    /// the transmit side, which sends the response in request order.
    pub(crate) fn rx_read_request(
        &self,
        sink_stag: u32,
        sink_to: u64,
        len: u64,
        src_stag: u32,
        src_to: u64,
    ) -> std::result::Result<(), RxReadFault> {
        let seg = self
            .ia
            .memtable
            .resolve_remote(src_stag, src_to, len, self.pz.0.id, MemPriv::REMOTE_READ)
            .map_err(RxReadFault::Access)?;
        {
            let mut c = self.lock();
            if !Self::rx_connected(&c) {
                return Err(RxReadFault::NotConnected);
            }
            if c.irq.len() >= c.ird {
                return Err(RxReadFault::IrdExceeded);
            }
            c.irq.push_back(ReadWork {
                sink_stag,
                sink_to,
                seg,
            });
        }
        self.pump();
        Ok(())
    }

    /// Inbound RDMA Read Response: matched to the oldest outstanding read and placed into its
    /// local iov. Returns false on a protocol error (no read outstanding, or wrong length).
    pub(crate) fn rx_read_response(&self, payload: Payload<'_>) -> RxResponse {
        let wr = {
            let mut c = self.lock();
            if !Self::rx_connected(&c) {
                // The connection ended under the response (the read was flushed).
                return RxResponse::NotConnected;
            }
            let Some(head) = c.orq.front() else {
                return RxResponse::Unexpected;
            };
            let len = payload.len();
            if len != head.remote.segment_length || len > head.total {
                return RxResponse::Unexpected;
            }
            scatter(payload, &head.segs);
            c.orq.pop_front().expect("head exists")
        };
        self.complete_send(&wr, DtoStatus::Success, wr.remote.segment_length);
        self.pump();
        RxResponse::Placed
    }

    // Streamed receive side: byte-stream links deliver a message segment by segment.

    /// First segment of an inbound Send: takes the receive buffer (own queue or SRQ) that the
    /// whole message goes into. On `NoBuffer` the peer is marked waiting, so a post wakes the
    /// link through [`Connection::wake_peer`].
    pub(crate) fn rx_send_take(&self) -> RxTake {
        let mut c = self.lock();
        if !Self::rx_connected(&c) {
            return RxTake::NotConnected;
        }
        match self.take_recv(&mut c) {
            Some(wr) => RxTake::Buffer(wr),
            None => RxTake::NoBuffer,
        }
    }

    /// The next receive buffer (own queue or SRQ); with none, the peer is marked waiting.
    /// [`take_recv`](Self::take_recv) for a message placed at once (loopback): also `None`,
    /// with the peer waiting, while not connected yet (the accept is still settling).
    fn take_recv_connected(&self, c: &mut EpCore) -> Option<RecvWr> {
        if !Self::rx_connected(c) {
            c.peer_waiting = true;
            return None;
        }
        self.take_recv(c)
    }

    fn take_recv(&self, c: &mut EpCore) -> Option<RecvWr> {
        let wr = match &self.srq {
            None => c.rq.pop_front(),
            Some(srq) => srq.take(),
        };
        if wr.is_none() {
            c.peer_waiting = true;
        }
        wr
    }

    /// Completes a receive taken by [`EpInner::rx_send_take`].
    pub(crate) fn rx_send_done(&self, wr: &RecvWr, status: DtoStatus, len: u64, solicited: bool) {
        let recv_flags = self.lock().attr.recv_completion_flags;
        self.complete_recv(wr, status, len, solicited, recv_flags);
    }

    /// Completes a receive taken by [`EpInner::rx_send_take`] for an inbound RFC 7306 Immediate
    /// Data message that ends an RDMA Write with Immediate Data (its data was placed before, in
    /// stream order): RECV_IMMED with `immediate` and the write's length `len`.
    pub(crate) fn rx_immed_done(&self, wr: &RecvWr, immediate: u32, len: u64, solicited: bool) {
        let recv_flags = self.lock().attr.recv_completion_flags;
        self.complete_recv_as(
            wr,
            DtoStatus::Success,
            len,
            solicited,
            recv_flags,
            Some(immediate),
        );
    }

    /// One segment of an inbound RDMA Read Response: placed into the oldest outstanding read
    /// at the offset its tagged offset names. Segments must continue the read in order, carry
    /// the read's sink STag and not run past its length; `last` must end it exactly.
    pub(crate) fn rx_read_response_segment(
        &self,
        stag: u32,
        to: u64,
        bytes: &[u8],
        last: bool,
    ) -> RxResponse {
        self.rx_read_response_with(stag, to, bytes.len() as u64, last, |segs, at| {
            place_at(bytes, segs, at);
            bytes.len() as u64
        })
    }

    /// [`EpInner::rx_read_response_segment`] for a link that places the `len` payload bytes
    /// itself: the segment is checked against the oldest outstanding read (STag, TO, length,
    /// `last` ending it exactly), then `fill(sink, offset)` places a prefix of it into the
    /// read's scatter list `sink` from byte `offset` on, under the endpoint's lock (a flush
    /// cannot complete the read meanwhile), and returns how many bytes it placed. The read
    /// completes once a `last` segment is placed whole; a link that placed part of it calls
    /// again for the rest.
    pub(crate) fn rx_read_response_with(
        &self,
        stag: u32,
        to: u64,
        len: u64,
        last: bool,
        fill: impl FnOnce(&[Seg], u64) -> u64,
    ) -> RxResponse {
        let wr = {
            let mut c = self.lock();
            if !Self::rx_connected(&c) {
                return RxResponse::NotConnected;
            }
            let Some(head) = c.orq.front_mut() else {
                return RxResponse::Unexpected;
            };
            let want = head.remote.segment_length;
            let got = head.resp_got;
            let end = got.checked_add(len);
            if stag != head.sink_stag
                || head.sink_to.checked_add(got) != Some(to)
                || end.is_none_or(|e| e > want || e > head.total)
                || (last && end != Some(want))
            {
                return RxResponse::Unexpected;
            }
            let placed = fill(&head.segs, got).min(len);
            head.resp_got = got + placed;
            if !last || placed < len {
                return RxResponse::Placed;
            }
            c.orq.pop_front().expect("head exists")
        };
        self.complete_send(&wr, DtoStatus::Success, wr.remote.segment_length);
        self.pump();
        RxResponse::Placed
    }

    /// The peer refused the oldest outstanding read (its Terminate names a Read Request): it
    /// completes with `status` before the connection's end flushes the rest.
    pub(crate) fn fail_oldest_read(&self, status: DtoStatus) {
        let wr = self.lock().orq.pop_front();
        if let Some(wr) = wr {
            self.complete_send(&wr, status, 0);
        }
    }

    // --------------------------------------------------------------------------------------------
    // Connection lifecycle (called by the DAT layer and by links)

    /// Moves to DISCONNECTED, flushes everything outstanding, reports `kind` once for this
    /// connection, and (if `notify_peer`) tells the peer.
    pub(crate) fn end_connection(&self, kind: ConnectionEventKind, notify_peer: bool) {
        self.end_connection_if(None, kind, notify_peer);
    }

    /// [`EpInner::end_connection`] for the connection `conn_id` only: a no-op once the endpoint
    /// has moved on (that connection already ended, and maybe a new attempt began). Whoever
    /// acts on a connection it looked at earlier must use this form.
    pub(crate) fn end_connection_of(
        &self,
        conn_id: u64,
        kind: ConnectionEventKind,
        notify_peer: bool,
    ) {
        self.end_connection_if(Some(conn_id), kind, notify_peer);
    }

    fn end_connection_if(&self, only: Option<u64>, kind: ConnectionEventKind, notify_peer: bool) {
        let (conn, report, flushed_sq, flushed_rq) = {
            let mut c = self.lock();
            if let Some(id) = only {
                if c.conn.as_ref().is_none_or(|cur| cur.id() != id) {
                    return;
                }
            }
            match c.state {
                EpState::Connected
                | EpState::DisconnectPending
                | EpState::ActiveConnectionPending
                | EpState::PassiveConnectionPending
                | EpState::TentativeConnectionPending => {}
                _ => return,
            }
            c.state = EpState::Disconnected;
            let report = !c.end_reported;
            c.end_reported = true;
            c.irq.clear();
            c.peer_waiting = false;
            c.tx_stalled = false;
            let mut sq: Vec<SendWr> = c.tx_inflight.take().into_iter().collect();
            sq.extend(c.orq.drain(..));
            sq.extend(c.sq.drain(..));
            let rq: Vec<RecvWr> = c.rq.drain(..).collect();
            (c.conn.take(), report, sq, rq)
        };
        self.rnr_blocked.store(false, Ordering::SeqCst);
        let recv_flags = self.lock().attr.recv_completion_flags;
        for wr in &flushed_sq {
            self.complete_send(wr, DtoStatus::Flushed, 0);
        }
        for wr in &flushed_rq {
            self.complete_recv(wr, DtoStatus::Flushed, 0, true, recv_flags);
        }
        if report {
            self.conn_event(kind, Vec::new());
            if self.srq.is_some() || kind == ConnectionEventKind::Broken {
                self.ia.post_async(AsyncEvent {
                    kind: AsyncKind::EpBroken,
                    subject: AsyncSubject::Ep(self.handle()),
                    reason: 0,
                });
            }
        }
        if notify_peer {
            if let Some(conn) = conn {
                conn.close(kind == ConnectionEventKind::Broken);
            }
        }
    }

    /// The link reports the connection is over from the peer's side.
    pub(crate) fn peer_closed(&self, conn_id: u64, broken: bool) {
        let kind = if broken {
            ConnectionEventKind::Broken
        } else {
            ConnectionEventKind::Disconnected
        };
        self.end_connection_of(conn_id, kind, false);
    }

    /// Starts an attempt (connect or accept); returns its number.
    pub(crate) fn begin_attempt(
        &self,
        state: EpState,
        remote: Option<IaAddress>,
        qual: Option<ConnQual>,
    ) -> u64 {
        let mut c = self.lock();
        c.state = state;
        c.attempt += 1;
        c.end_reported = false;
        c.remote_addr = remote;
        c.remote_qual = qual;
        c.attempt
    }

    /// Records the link connection carrying connect attempt `attempt` (see `pending_conn`).
    pub(crate) fn set_pending_conn(&self, attempt: u64, conn: Arc<dyn Connection>) {
        let mut c = self.lock();
        if c.attempt == attempt && c.state == EpState::ActiveConnectionPending {
            c.pending_conn = Some(conn);
        } else {
            drop(c);
            conn.close(true);
        }
    }

    /// The number of the current attempt.
    pub(crate) fn current_attempt(&self) -> u64 {
        self.lock().attempt
    }

    /// True if `attempt` is the current one and still pending in `state`.
    pub(crate) fn attempt_pending(&self, attempt: u64, state: EpState) -> bool {
        let c = self.lock();
        c.attempt == attempt && c.state == state
    }

    /// The IRD and ORD this endpoint offers.
    pub(crate) fn read_depths(&self) -> (usize, usize) {
        let c = self.lock();
        (c.attr.max_rdma_read_in, c.attr.max_rdma_read_out)
    }

    /// The connection is up: data may move. `ird`/`ord` are the negotiated depths. The link
    /// then calls [`EpInner::report_established`] (once both ends are up).
    pub(crate) fn established(
        &self,
        attempt: u64,
        conn: Arc<dyn Connection>,
        ird: usize,
        ord: usize,
        remote: IaAddress,
    ) -> bool {
        {
            let mut c = self.lock();
            if c.attempt != attempt
                || !matches!(
                    c.state,
                    EpState::ActiveConnectionPending | EpState::PassiveConnectionPending
                )
            {
                return false;
            }
            c.state = EpState::Connected;
            c.conn = Some(conn);
            c.pending_conn = None;
            c.tx_stalled = false;
            c.tx_drained_early = false;
            // A Send blocked on the previous connection's peer must not block this one.
            self.rnr_blocked.store(false, Ordering::SeqCst);
            c.ird = ird;
            c.ord = ord;
            c.remote_addr = Some(remote);
            c.irq.reserve(ird);
            c.orq.reserve(ord);
        }
        true
    }

    /// Reports ESTABLISHED (with the peer's private data) and starts transmitting.
    pub(crate) fn report_established(&self, private_data: Vec<u8>) {
        self.conn_event(ConnectionEventKind::Established, private_data);
        self.pump();
    }

    /// A connection attempt failed before it was established.
    pub(crate) fn attempt_failed(
        &self,
        attempt: u64,
        kind: ConnectionEventKind,
        private_data: Vec<u8>,
    ) {
        {
            let mut c = self.lock();
            if c.attempt != attempt
                || c.end_reported
                || !matches!(
                    c.state,
                    EpState::ActiveConnectionPending
                        | EpState::PassiveConnectionPending
                        | EpState::TentativeConnectionPending
                )
            {
                return;
            }
            c.end_reported = true;
            c.state = EpState::Disconnected;
            if let Some(conn) = c.pending_conn.take() {
                drop(c);
                conn.close(true);
            }
        }
        // Receives posted before the attempt are flushed like any on a DISCONNECTED EP.
        self.end_flush_only();
        self.conn_event(kind, private_data);
    }

    fn end_flush_only(&self) {
        let (sq, rq, recv_flags) = {
            let mut c = self.lock();
            c.tx_stalled = false;
            let mut sq: Vec<SendWr> = c.tx_inflight.take().into_iter().collect();
            sq.extend(c.orq.drain(..));
            sq.extend(c.sq.drain(..));
            (
                sq,
                c.rq.drain(..).collect::<Vec<_>>(),
                c.attr.recv_completion_flags,
            )
        };
        for wr in &sq {
            self.complete_send(wr, DtoStatus::Flushed, 0);
        }
        for wr in &rq {
            self.complete_recv(wr, DtoStatus::Flushed, 0, true, recv_flags);
        }
    }

    /// Abrupt teardown for IA close or EP free.
    pub(crate) fn abort_for_close(&self) {
        let state = self.lock().state;
        match state {
            EpState::Connected | EpState::DisconnectPending => {
                self.end_connection(ConnectionEventKind::Disconnected, true)
            }
            EpState::ActiveConnectionPending
            | EpState::PassiveConnectionPending
            | EpState::TentativeConnectionPending => {
                let attempt = self.lock().attempt;
                self.attempt_failed(attempt, ConnectionEventKind::Disconnected, Vec::new());
            }
            _ => self.end_flush_only(),
        }
    }

    /// Frees the endpoint's resources and drops it from its IA.
    pub(crate) fn release(&self) {
        if self.freed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.pz.0.users.fetch_sub(1, Ordering::AcqRel);
        for e in [&self.recv_evd, &self.request_evd, &self.connect_evd]
            .into_iter()
            .flatten()
        {
            e.0.users.fetch_sub(1, Ordering::AcqRel);
        }
        if let Some(s) = &self.srq {
            s.detach(self.id);
        }
        self.ia.objects().eps.remove(&self.id);
    }

    pub(crate) fn set_reserved(&self, rsp: Option<u64>) -> Result<()> {
        let mut c = self.lock();
        match rsp {
            Some(id) => {
                if c.state != EpState::Unconnected {
                    return err(
                        ErrorType::InvalidState,
                        state_subtype(c.state),
                        "rsp_create",
                        self.object(),
                        format!("the endpoint is {:?}, not UNCONNECTED", c.state),
                    );
                }
                c.state = EpState::Reserved;
                c.reserved_by = Some(id);
            }
            None => {
                if c.state == EpState::Reserved {
                    c.state = EpState::Unconnected;
                }
                c.reserved_by = None;
            }
        }
        Ok(())
    }

    pub(crate) fn state(&self) -> EpState {
        self.lock().state
    }

    /// Whether a peer Send is waiting for a receive buffer here; clears the flag.
    pub(crate) fn take_peer_waiting(&self) -> Option<Arc<dyn Connection>> {
        let mut c = self.lock();
        if c.peer_waiting {
            c.peer_waiting = false;
            c.conn.clone()
        } else {
            None
        }
    }
}

/// What an inbound Send found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxSend {
    /// Placed and completed.
    Placed,
    /// No receive buffer was posted (RNR): the sender waits for a wake.
    NoBuffer,
    /// The message was longer than the receive buffer: completed with LENGTH_ERROR.
    TooLong,
}

/// What an inbound RDMA Write with Immediate Data found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxWriteImmed {
    /// Placed, and a receive buffer completed with the immediate data.
    Placed,
    /// No receive buffer was posted (RNR): nothing was placed; the sender waits for a wake.
    NoBuffer,
    /// The memory table refused the sink.
    Access(RemoteFault),
}

/// What the first segment of an inbound Send found.
#[allow(clippy::large_enum_variant)] // returned once per message, moved straight out
pub(crate) enum RxTake {
    /// This receive buffer takes the message.
    Buffer(RecvWr),
    /// No receive buffer is posted: the peer is marked waiting.
    NoBuffer,
    /// The endpoint is not connected (any more).
    NotConnected,
}

/// What an inbound RDMA Read Response found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxResponse {
    /// Placed into the oldest outstanding read (which completed if it was its end).
    Placed,
    /// The endpoint is not connected (any more).
    NotConnected,
    /// No read was outstanding, or the length is wrong: a protocol error.
    Unexpected,
}

/// Why an inbound RDMA Write was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxWriteFault {
    /// The memory table refused the sink.
    Access(RemoteFault),
    /// The endpoint is not connected (any more).
    NotConnected,
}

/// Why an inbound RDMA Read Request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxReadFault {
    /// The memory table refused the source.
    Access(RemoteFault),
    /// More reads outstanding than the negotiated IRD.
    IrdExceeded,
    /// The endpoint is not connected.
    NotConnected,
}

/// Copies `bytes` into the scatter list `dst` starting `offset` bytes into it. Returns false
/// (copying nothing) if they do not fit.
pub(crate) fn place_at(bytes: &[u8], dst: &[Seg], offset: u64) -> bool {
    let total: u64 = dst.iter().map(|s| s.len as u64).sum();
    if offset
        .checked_add(bytes.len() as u64)
        .is_none_or(|end| end > total)
    {
        return false;
    }
    let mut src = bytes;
    for (i, at, k) in seg_span(dst, offset, bytes.len()) {
        let d = &dst[i];
        d.region.copy_in(d.offset + at, &src[..k]);
        src = &src[k..];
    }
    true
}

/// Copies `src` into the scatter list `dst` in order: front segments full, at most one partial,
/// the rest untouched. The caller has checked that `src` fits.
fn scatter(src: Payload<'_>, dst: &[Seg]) {
    let mut di = 0usize; // destination segment
    let mut doff = 0usize; // offset inside it
    let mut put = |mut copy: &mut dyn FnMut(&Seg, usize, usize, usize), mut n: usize| {
        let mut soff = 0usize;
        while n > 0 && di < dst.len() {
            let d = &dst[di];
            let room = d.len - doff;
            let k = room.min(n);
            copy(d, d.offset + doff, soff, k);
            doff += k;
            soff += k;
            n -= k;
            if doff == d.len {
                di += 1;
                doff = 0;
            }
        }
        let _ = &mut copy;
    };
    match src {
        Payload::Bytes(b) => {
            place_at(b, dst, 0);
        }
        Payload::Segs(ss) => {
            for s in ss {
                put(
                    &mut |d, at, so, k| {
                        s.region.copy_to(s.offset + so, &d.region, at, k);
                    },
                    s.len,
                );
            }
        }
    }
}

// ------------------------------------------------------------------------------------------------
// The public endpoint API

impl Endpoint {
    pub(crate) fn check_handle(&self, op: &'static str) -> Result<()> {
        if self.0.freed.load(Ordering::Acquire) {
            return err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandleEp,
                op,
                self.0.object(),
                "the endpoint was freed",
            );
        }
        Ok(())
    }

    /// The endpoint's id: unique in the process across every object kind.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// The current state (`dat_ep_get_status`'s state).
    pub fn state(&self) -> EpState {
        self.0.state()
    }

    /// `dat_ep_get_status`: the state and whether receives and requests are queued.
    pub fn get_status(&self) -> Result<(EpState, bool, bool)> {
        self.check_handle("ep_get_status")?;
        let c = self.0.lock();
        Ok((
            c.state,
            !c.rq.is_empty(),
            !(c.sq.is_empty() && c.orq.is_empty()),
        ))
    }

    /// `dat_ep_query`.
    pub fn query(&self) -> Result<EpParam> {
        self.check_handle("ep_query")?;
        let c = self.0.lock();
        Ok(EpParam {
            state: c.state,
            attr: c.attr.clone(),
            remote_address: c.remote_addr,
            remote_port_qual: c.remote_qual,
            pz_id: self.0.pz.0.id,
            ord: c.ord,
            ird: c.ird,
        })
    }

    /// Changes the attributes (`dat_ep_modify`); only while not connected or connecting.
    pub fn modify(&self, attr: &EpAttr) -> Result<()> {
        const OP: &str = "ep_modify";
        self.check_handle(OP)?;
        validate_attr(&self.0.ia, attr, OP, self.0.object())?;
        let mut c = self.0.lock();
        if !matches!(
            c.state,
            EpState::Unconnected | EpState::Reserved | EpState::TentativeConnectionPending
        ) {
            return err(
                ErrorType::InvalidState,
                state_subtype(c.state),
                OP,
                self.0.object(),
                format!("attributes cannot change in state {:?}", c.state),
            );
        }
        if attr.max_recv_dtos < c.rq.len() || attr.max_request_dtos < c.sq.len() {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg3,
                OP,
                self.0.object(),
                "the new depths are smaller than what is queued",
            );
        }
        c.attr = attr.clone();
        let (r, s) = (
            attr.max_recv_dtos.saturating_sub(c.rq.len()),
            attr.max_request_dtos.saturating_sub(c.sq.len()),
        );
        c.rq.reserve(r);
        c.sq.reserve(s);
        Ok(())
    }

    /// Connects to the PSP/RSP `qual` at `remote` with `private_data` (`dat_ep_connect`).
    /// Returns at once; ESTABLISHED, PEER_REJECTED, NON_PEER_REJECTED, TIMED_OUT or
    /// UNREACHABLE arrives on the connect EVD. `timeout` of `None` waits forever.
    pub fn connect(
        &self,
        remote: IaAddress,
        qual: ConnQual,
        timeout: Option<Duration>,
        private_data: &[u8],
    ) -> Result<()> {
        const OP: &str = "ep_connect";
        self.check_handle(OP)?;
        let ia = &self.0.ia;
        if private_data.len() > ia.attr.max_private_data_size {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg5,
                OP,
                self.0.object(),
                format!(
                    "{} bytes of private data, at most {}",
                    private_data.len(),
                    ia.attr.max_private_data_size
                ),
            );
        }
        if self.0.connect_evd.is_none() || self.0.request_evd.is_none() || self.0.recv_evd.is_none()
        {
            return err(
                ErrorType::InvalidState,
                Subtype::InvalidStateEpUnconfigured,
                OP,
                self.0.object(),
                "an endpoint needs recv, request and connect EVDs to connect",
            );
        }
        let attempt = {
            let c = self.0.lock();
            if c.state != EpState::Unconnected {
                return err(
                    ErrorType::InvalidState,
                    state_subtype(c.state),
                    OP,
                    self.0.object(),
                    format!("the endpoint is {:?}, not UNCONNECTED", c.state),
                );
            }
            drop(c);
            self.0
                .begin_attempt(EpState::ActiveConnectionPending, Some(remote), Some(qual))
        };
        if let Some(t) = timeout {
            let weak = Arc::downgrade(&self.0);
            crate::timer::at(std::time::Instant::now() + t, move || {
                if let Some(ep) = weak.upgrade() {
                    ep.attempt_failed(attempt, ConnectionEventKind::TimedOut, Vec::new());
                }
            });
        }
        ia.link.clone().connect(&self.0, remote, qual, private_data);
        Ok(())
    }

    /// Disconnects (`dat_ep_disconnect`). Abrupt: now, flushing outstanding DTOs. Graceful:
    /// queued requests go first (DISCONNECT_PENDING), then the connection closes. Either way one
    /// DISCONNECTED event arrives on the connect EVD. On an endpoint that is already
    /// disconnected (or unconnected) this is a successful no-op; while connecting it aborts.
    pub fn disconnect(&self, flags: CloseFlags) -> Result<()> {
        const OP: &str = "ep_disconnect";
        self.check_handle(OP)?;
        let (state, attempt) = {
            let c = self.0.lock();
            (c.state, c.attempt)
        };
        match state {
            EpState::Connected if flags == CloseFlags::Graceful => {
                {
                    let mut c = self.0.lock();
                    if c.state != EpState::Connected {
                        return Ok(()); // broke or ended meanwhile: already reported
                    }
                    c.state = EpState::DisconnectPending;
                }
                self.0.pump();
                // pump ends the connection once the queues are empty; if a transmitter is busy
                // elsewhere it will do so.
                let done = {
                    let c = self.0.lock();
                    c.state == EpState::DisconnectPending && c.sq.is_empty() && c.orq.is_empty()
                };
                if done {
                    self.0
                        .end_connection(ConnectionEventKind::Disconnected, true);
                }
            }
            EpState::Connected | EpState::DisconnectPending => self
                .0
                .end_connection(ConnectionEventKind::Disconnected, true),
            EpState::ActiveConnectionPending
            | EpState::PassiveConnectionPending
            | EpState::TentativeConnectionPending => {
                self.0
                    .attempt_failed(attempt, ConnectionEventKind::Disconnected, Vec::new())
            }
            _ => {}
        }
        Ok(())
    }

    /// Returns a DISCONNECTED endpoint to UNCONNECTED for reuse (`dat_ep_reset`); a no-op on an
    /// UNCONNECTED one; `DAT_INVALID_STATE` otherwise.
    pub fn reset(&self) -> Result<()> {
        const OP: &str = "ep_reset";
        self.check_handle(OP)?;
        let mut c = self.0.lock();
        match c.state {
            EpState::Disconnected => {
                c.state = EpState::Unconnected;
                c.remote_addr = None;
                c.remote_qual = None;
                c.ord = 0;
                c.ird = 0;
                Ok(())
            }
            EpState::Unconnected => Ok(()),
            s => err(
                ErrorType::InvalidState,
                state_subtype(s),
                OP,
                self.0.object(),
                format!("reset needs a DISCONNECTED endpoint, not {s:?}"),
            ),
        }
    }

    /// Frees the endpoint (`dat_ep_free`), disconnecting abruptly and flushing whatever is
    /// outstanding to its EVDs first.
    pub fn free(&self) -> Result<()> {
        const OP: &str = "ep_free";
        self.check_handle(OP)?;
        if self.0.lock().reserved_by.is_some() {
            return err(
                ErrorType::InvalidState,
                Subtype::InvalidStateEpReserved,
                OP,
                self.0.object(),
                "the endpoint is reserved by an RSP; free the RSP first",
            );
        }
        self.0.abort_for_close();
        self.0.release();
        Ok(())
    }

    fn check_post_flags(
        &self,
        op: &'static str,
        flags: CompletionFlags,
        allowed: CompletionFlags,
        ep_flags: CompletionFlags,
    ) -> Result<()> {
        if !allowed.contains(flags) {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg6,
                op,
                self.0.object(),
                format!("completion flags {flags:?} are not valid here (allowed: {allowed:?})"),
            );
        }
        if flags.contains(CompletionFlags::UNSIGNALLED)
            && !ep_flags.contains(CompletionFlags::UNSIGNALLED)
        {
            return err(ErrorType::InvalidParameter, Subtype::InvalidArg6, op, self.0.object(), "DAT_COMPLETION_UNSIGNALLED_FLAG needs an endpoint created with it in its completion flags");
        }
        Ok(())
    }

    /// Posts a receive (`dat_ep_post_recv`): `iov` is filled in order; 0 segments receive a
    /// zero-length message. Valid in every state; on a DISCONNECTED endpoint the receive is
    /// flushed at once. Never blocks or allocates; `DAT_INSUFFICIENT_RESOURCES` when the
    /// receive queue is full.
    pub fn post_recv(
        &self,
        iov: &[LmrTriplet],
        cookie: Cookie,
        flags: CompletionFlags,
    ) -> Result<()> {
        const OP: &str = "ep_post_recv";
        self.check_handle(OP)?;
        let ep = &self.0;
        if ep.srq.is_some() {
            return err(
                ErrorType::InvalidState,
                Subtype::NoSubtype,
                OP,
                ep.object(),
                "the endpoint takes its receives from an SRQ",
            );
        }
        let (max_iov, ep_flags) = {
            let c = ep.lock();
            (c.attr.max_recv_iov, c.attr.recv_completion_flags)
        };
        self.check_post_flags(OP, flags, CompletionFlags::UNSIGNALLED, ep_flags)?;
        let r = EpInner::resolve_iov(
            &ep.ia,
            ep.pz.0.id,
            iov,
            max_iov,
            MemPriv::LOCAL_WRITE,
            OP,
            ep.object(),
        )?;
        let wr = RecvWr {
            cookie,
            flags,
            segs: r.segs,
            total: r.total,
        };
        let mut c = ep.lock();
        if c.state == EpState::Disconnected {
            let recv_flags = c.attr.recv_completion_flags;
            drop(c);
            ep.complete_recv(&wr, DtoStatus::Flushed, 0, true, recv_flags);
            return Ok(());
        }
        if c.rq.len() >= c.attr.max_recv_dtos {
            return err(
                ErrorType::InsufficientResources,
                Subtype::ResourceTep,
                OP,
                ep.object(),
                format!(
                    "the receive queue holds its maximum of {}",
                    c.attr.max_recv_dtos
                ),
            );
        }
        c.rq.push_back(wr);
        let wake = if c.peer_waiting {
            c.peer_waiting = false;
            c.conn.clone()
        } else {
            None
        };
        drop(c);
        if let Some(conn) = wake {
            conn.wake_peer();
        }
        Ok(())
    }

    fn post_request(
        &self,
        op: &'static str,
        rop: ReqOp,
        iov: &[LmrTriplet],
        cookie: Cookie,
        remote: RmrTriplet,
        flags: CompletionFlags,
    ) -> Result<()> {
        self.check_handle(op)?;
        let ep = &self.0;
        let (max_iov, ep_flags, state) = {
            let c = ep.lock();
            (
                c.attr.max_request_iov,
                c.attr.request_completion_flags,
                c.state,
            )
        };
        let allowed = match rop {
            // A write with immediate data consumes a receive at the peer, as a Send does: the
            // sender may ask for a solicited event there (RFC 7306 opcode 9).
            ReqOp::Send | ReqOp::WriteImmed(_) => {
                CompletionFlags::SUPPRESS
                    | CompletionFlags::SOLICITED_WAIT
                    | CompletionFlags::UNSIGNALLED
                    | CompletionFlags::BARRIER_FENCE
            }
            _ => {
                CompletionFlags::SUPPRESS
                    | CompletionFlags::UNSIGNALLED
                    | CompletionFlags::BARRIER_FENCE
            }
        };
        self.check_post_flags(op, flags, allowed, ep_flags)?;
        if !matches!(state, EpState::Connected | EpState::Disconnected) {
            return err(
                ErrorType::InvalidState,
                state_subtype(state),
                op,
                ep.object(),
                format!("{op} needs a CONNECTED or DISCONNECTED endpoint, not {state:?}"),
            );
        }
        let need = if rop == ReqOp::Read {
            MemPriv::LOCAL_WRITE
        } else {
            MemPriv::LOCAL_READ
        };
        let r = EpInner::resolve_iov(&ep.ia, ep.pz.0.id, iov, max_iov, need, op, ep.object())?;
        let max = match rop {
            ReqOp::Send => ep.ia.attr.max_message_size,
            _ => ep.ia.attr.max_rdma_size,
        };
        let size = if rop == ReqOp::Read {
            remote.segment_length
        } else {
            r.total
        };
        if size > max {
            return err(
                ErrorType::LengthError,
                Subtype::NoSubtype,
                op,
                ep.object(),
                format!("{size} bytes is more than the IA's limit of {max}"),
            );
        }
        match rop {
            ReqOp::Read if r.total < remote.segment_length => {
                return err(
                    ErrorType::LengthError,
                    Subtype::NoSubtype,
                    op,
                    ep.object(),
                    format!(
                        "the local iov holds {} bytes, less than the {} bytes of the remote buffer",
                        r.total, remote.segment_length
                    ),
                );
            }
            ReqOp::Write | ReqOp::WriteImmed(_) if r.total > remote.segment_length => {
                return err(
                    ErrorType::LengthError,
                    Subtype::NoSubtype,
                    op,
                    ep.object(),
                    format!(
                        "{} bytes do not fit the remote buffer of {} bytes",
                        r.total, remote.segment_length
                    ),
                );
            }
            ReqOp::WriteImmed(_) if u32::try_from(r.total).is_err() => {
                return err(
                    ErrorType::LengthError,
                    Subtype::NoSubtype,
                    op,
                    ep.object(),
                    format!(
                        "{} bytes: the length of a write with immediate data is sent in 32 bits",
                        r.total
                    ),
                );
            }
            _ => {}
        }
        // Never 0: a byte-stream link puts it on the wire, where STag 0 is refused.
        let sink_stag = iov.first().map(|t| t.lmr_context).unwrap_or(1).max(1);
        let wr = SendWr {
            cookie,
            op: rop,
            flags,
            segs: r.segs,
            total: r.total,
            remote,
            sink_stag,
            sink_to: 0,
            resp_got: 0,
        };
        let mut c = ep.lock();
        match c.state {
            EpState::Connected => {}
            EpState::Disconnected => {
                drop(c);
                ep.complete_send(&wr, DtoStatus::Flushed, 0);
                return Ok(());
            }
            s => {
                return err(
                    ErrorType::InvalidState,
                    state_subtype(s),
                    op,
                    ep.object(),
                    format!("{op} needs a CONNECTED or DISCONNECTED endpoint, not {s:?}"),
                )
            }
        }
        if c.sq.len() + c.orq.len() >= c.attr.max_request_dtos {
            return err(
                ErrorType::InsufficientResources,
                Subtype::ResourceTep,
                op,
                ep.object(),
                format!(
                    "the request queue holds its maximum of {}",
                    c.attr.max_request_dtos
                ),
            );
        }
        c.sq.push_back(wr);
        drop(c);
        ep.pump();
        Ok(())
    }

    /// Posts a send of the gather list `iov` (`dat_ep_post_send`). Flags: SUPPRESS,
    /// SOLICITED_WAIT (the peer's receive notifies), UNSIGNALLED (if the EP allows it),
    /// BARRIER_FENCE. On a DISCONNECTED endpoint it is flushed at once.
    pub fn post_send(
        &self,
        iov: &[LmrTriplet],
        cookie: Cookie,
        flags: CompletionFlags,
    ) -> Result<()> {
        self.post_request(
            "ep_post_send",
            ReqOp::Send,
            iov,
            cookie,
            RmrTriplet::default(),
            flags,
        )
    }

    /// Posts an RDMA write of the gather list `iov` to the remote buffer `remote`
    /// (`dat_ep_post_rdma_write`).
    pub fn post_rdma_write(
        &self,
        iov: &[LmrTriplet],
        cookie: Cookie,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> Result<()> {
        self.post_request(
            "ep_post_rdma_write",
            ReqOp::Write,
            iov,
            cookie,
            *remote,
            flags,
        )
    }

    /// Posts an RDMA write with immediate data (the DAT IB extension's
    /// `dat_ib_post_rdma_write_immed`): the gather list `iov` is written to `remote` as by
    /// [`Endpoint::post_rdma_write`] (same checks and errors), then the peer's next posted receive
    /// (its endpoint's queue or SRQ) completes as [`DtoOp::RecvImmed`] with `immediate` and
    /// `transferred_length` = the bytes written; its buffer receives no data, so a zero-length
    /// receive will do. That completion implies the data is placed. With no receive posted at
    /// the peer, the operation waits as a Send does. This side completes as
    /// [`DtoOp::RdmaWriteImmed`] with the bytes written. Flags: those of a write (SUPPRESS,
    /// UNSIGNALLED if the EP allows it, BARRIER_FENCE), and SOLICITED_WAIT, which makes the
    /// peer's receive completion solicited, as for a Send.
    ///
    /// Over tcp this is an RDMA Write followed by an RFC 7306 Immediate Data message (RDMAP
    /// opcode 8, or 9 when solicited); only dapl-rs peers understand it.
    pub fn post_rdma_write_immed(
        &self,
        iov: &[LmrTriplet],
        cookie: Cookie,
        remote: &RmrTriplet,
        immediate: u32,
        flags: CompletionFlags,
    ) -> Result<()> {
        self.post_request(
            "ep_post_rdma_write_immed",
            ReqOp::WriteImmed(immediate),
            iov,
            cookie,
            *remote,
            flags,
        )
    }

    /// Posts an RDMA read of the whole remote buffer `remote` into the scatter list `iov`
    /// (`dat_ep_post_rdma_read`). Valid when CONNECTED or DISCONNECTED (flushed at once);
    /// `DAT_LENGTH_ERROR` if `iov` is smaller than the remote buffer. Reads beyond the
    /// negotiated ORD wait in the send queue.
    pub fn post_rdma_read(
        &self,
        iov: &[LmrTriplet],
        cookie: Cookie,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> Result<()> {
        self.post_request(
            "ep_post_rdma_read",
            ReqOp::Read,
            iov,
            cookie,
            *remote,
            flags,
        )
    }

    /// `dat_ep_recv_query`: how many receive buffers this endpoint holds (posted ones, or SRQ
    /// buffers it dequeued and has not completed) and their total size in bytes.
    pub fn recv_query(&self) -> Result<(usize, u64)> {
        self.check_handle("ep_recv_query")?;
        let c = self.0.lock();
        Ok((c.rq.len(), c.rq.iter().map(|w| w.total).sum()))
    }

    /// `dat_ep_set_watermark`: the soft high watermark of SRQ buffers this endpoint may hold
    /// before an asynchronous event (`None` = infinite). Only for endpoints on an SRQ.
    pub fn set_watermark(&self, soft_high: Option<usize>) -> Result<()> {
        const OP: &str = "ep_set_watermark";
        self.check_handle(OP)?;
        if self.0.srq.is_none() {
            return err(
                ErrorType::InvalidState,
                Subtype::NoSubtype,
                OP,
                self.0.object(),
                "watermarks apply to endpoints on an SRQ",
            );
        }
        self.0.lock().soft_high_watermark = soft_high;
        Ok(())
    }

    /// The endpoint's PZ.
    pub fn pz(&self) -> Pz {
        self.0.pz.clone()
    }
}

impl EpCore {
    pub(crate) fn state_now(&self) -> EpState {
        self.state
    }

    pub(crate) fn set_state(&mut self, s: EpState) {
        self.state = s;
    }
}
