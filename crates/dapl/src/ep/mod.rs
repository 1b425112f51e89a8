//! Endpoints (`DAT_EP`): creation, attributes, the DAT rules of posting (validation, flags and
//! their EP-level permission, iov against the memory table), connect and disconnect. The queue
//! pair behind each endpoint is the engine's `Qp`; the endpoint turns its upcalls into events
//! on its EVDs.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

mod builder;
mod post;

pub use builder::EndpointBuilder;
pub(crate) use post::post_in_chunks;
pub use post::{BatchError, RecvRequest, RECV_BATCH_CHUNK};

use crate::engine::qp::{
    Completion, CompletionQueue, ModifyError, PostError, Qp, QpEvent, QpQueues, QpUpcalls,
};
use crate::error::{err, DatError, ErrorType, Object, Result, Subtype};
use crate::evd::Evd;
use crate::event::{
    AsyncEvent, AsyncKind, AsyncSubject, ConnectionEvent, ConnectionEventKind, DtoCompletion, Event,
};
use crate::handle::{Handle, Owned};
use crate::ia::{IaInner, InterfaceAdapter, MAX_IOV};
use crate::pz::Pz;
use crate::srq::Srq;
use crate::types::{
    CloseFlags, CompletionFlags, ConnQual, EpState, EvdFlags, IaAddress, RmrContext,
};

pub use crate::types::EpAttr;

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

pub(crate) struct EpInner {
    pub(crate) id: u64,
    pub(crate) ia: Arc<IaInner>,
    pub(crate) pz: Pz,
    pub(crate) recv_evd: Option<Evd>,
    pub(crate) request_evd: Option<Evd>,
    pub(crate) connect_evd: Option<Evd>,
    pub(crate) srq: Option<Srq>,
    /// The engine's queue pair.
    pub(crate) qp: Arc<Qp>,
    /// Reserved by this RSP id.
    reserved_by: Mutex<Option<u64>>,
    /// `dat_ep_set_watermark`'s soft high watermark (the QP raises its event).
    soft_high_watermark: Mutex<Option<usize>>,
    pub(crate) freed: AtomicBool,
    me: Weak<EpInner>,
    /// The consumer's handles (`handle.rs`).
    handles: AtomicUsize,
}

/// An Endpoint (`DAT_EP_HANDLE`). Cloning gives another handle to the same endpoint.
///
/// Dropping the last handle frees the endpoint as [`free`](Self::free) does (an abrupt
/// disconnect, outstanding DTOs flushed to its EVDs). Events already queued that name it
/// still arrive, naming a freed endpoint. An endpoint reserved by an RSP goes when the RSP
/// does, if its handles went first.
#[derive(Clone)]
pub struct Endpoint(pub(crate) Handle<EpInner>);

handle_identity!(Endpoint);
handle_identity!(@counted Endpoint);

impl Owned for EpInner {
    fn handle_count(&self) -> &AtomicUsize {
        &self.handles
    }

    fn last_handle_dropped(self: &Arc<Self>) {
        let reserved = self
            .reserved_by
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        if self.freed.load(Ordering::Acquire) || reserved {
            return;
        }
        self.qp.abort_for_close();
        self.release();
    }
}

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
                format!(
                    "the IA already has {} endpoints, its max_eps (open it with \
                     \",max_eps=<n>\" after its address to allow more)",
                    o.eps.len()
                ),
            );
        }
        let queues = match QpQueues::new(&attr, srq.is_some()) {
            Ok(q) => q,
            Err(e) => {
                return err(
                    ErrorType::InsufficientResources,
                    Subtype::ResourceMemory,
                    op,
                    obj,
                    format!("the endpoint's work queues: {e}"),
                )
            }
        };
        let id = ia.next_id();
        let inner = Arc::new_cyclic(|me: &Weak<EpInner>| {
            let upcalls: Weak<dyn QpUpcalls> = me.clone();
            EpInner {
                id,
                ia: ia.clone(),
                pz: pz.internal(),
                // Internal handles: the endpoint does not keep its EVDs and SRQ from the
                // consumer's drop; they stay until it stops using them (`EvdInner::unuse`).
                recv_evd: recv_evd.map(Evd::internal),
                request_evd: request_evd.map(Evd::internal),
                connect_evd: connect_evd.map(Evd::internal),
                srq: srq.map(Srq::internal),
                qp: Arc::new(Qp::new(
                    id,
                    ia.attr.ia_address,
                    pz.0.id,
                    ia.memtable.clone(),
                    srq.map(|s| s.0.rq.clone()),
                    attr,
                    upcalls,
                    queues,
                )),
                reserved_by: Mutex::new(None),
                soft_high_watermark: Mutex::new(None),
                freed: AtomicBool::new(false),
                me: me.clone(),
                handles: AtomicUsize::new(0),
            }
        });
        pz.0.users.fetch_add(1, Ordering::SeqCst);
        for e in [recv_evd, request_evd, connect_evd].into_iter().flatten() {
            e.0.users.fetch_add(1, Ordering::SeqCst);
        }
        if let Some(e) = recv_evd {
            e.0.await_inbound();
        }
        if let Some(s) = srq {
            s.0.rq.attach(&inner.qp);
        }
        o.eps.insert(id, Endpoint(Handle::internal(inner.clone())));
        tracing::debug!(
            ia = ia.id,
            ep = id,
            pz = pz.0.id,
            srq = ?srq.map(|s| s.0.id),
            "EP created"
        );
        Ok(Endpoint(Handle::new(inner)))
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

impl EpInner {
    pub(crate) fn object(&self) -> Object {
        Object::new("ep", self.id)
    }

    /// An internal handle, for events.
    fn handle(&self) -> Endpoint {
        Endpoint(Handle::internal(
            self.me.upgrade().expect("an endpoint in use is alive"),
        ))
    }

    /// Frees the endpoint's resources and drops it from its IA.
    pub(crate) fn release(&self) {
        if self.freed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.pz.0.unuse();
        for e in [&self.recv_evd, &self.request_evd, &self.connect_evd]
            .into_iter()
            .flatten()
        {
            e.0.unuse();
        }
        if let Some(s) = &self.srq {
            s.0.detach(self.id);
        }
        self.ia.objects().eps.remove(&self.id);
    }

    pub(crate) fn set_reserved(&self, rsp: Option<u64>) -> Result<()> {
        let mut r = self.reserved_by.lock().unwrap_or_else(|p| p.into_inner());
        match rsp {
            Some(id) => {
                let was = self.qp.transition(EpState::Unconnected, EpState::Reserved);
                if was != EpState::Unconnected {
                    return err(
                        ErrorType::InvalidState,
                        state_subtype(was),
                        "rsp_create",
                        self.object(),
                        format!("the endpoint is {was:?}, not UNCONNECTED"),
                    );
                }
                *r = Some(id);
            }
            None => {
                self.qp.transition(EpState::Reserved, EpState::Unconnected);
                *r = None;
            }
        }
        Ok(())
    }

    /// Ends the reservation by the RSP `rsp`, if it holds one (another RSP's stays).
    pub(crate) fn unreserve(&self, rsp: u64) {
        let mut r = self.reserved_by.lock().unwrap_or_else(|p| p.into_inner());
        if *r == Some(rsp) {
            self.qp.transition(EpState::Reserved, EpState::Unconnected);
            *r = None;
        }
    }

    /// The current state.
    pub(crate) fn state(&self) -> EpState {
        self.qp.state()
    }
}

impl QpUpcalls for EpInner {
    fn completed(&self, c: Completion) {
        let evd = match c.queue {
            CompletionQueue::Request => self.request_evd.as_ref(),
            CompletionQueue::Recv => self.recv_evd.as_ref(),
        };
        if let Some(evd) = evd {
            evd.0.push(
                Event::Dto(DtoCompletion {
                    ep: self.handle(),
                    cookie: c.cookie,
                    status: c.status,
                    transferred_length: c.len,
                    operation: c.op,
                    immediate: c.immediate,
                    rmr_context: c.rmr_context.map(RmrContext),
                }),
                c.signalled,
            );
        }
    }

    fn soft_high_watermark(&self) {
        if let Some(me) = self.me.upgrade() {
            self.ia.post_async(AsyncEvent {
                kind: AsyncKind::EpSoftHighWatermark,
                subject: AsyncSubject::Ep(Endpoint(Handle::internal(me))),
                reason: 2,
            });
        }
    }

    fn connection_event(&self, ev: QpEvent) {
        let (kind, private_data) = match ev {
            QpEvent::Established(pd) => (ConnectionEventKind::Established, pd),
            QpEvent::AttemptFailed(kind, pd) => (kind, pd),
            QpEvent::Ended(kind) => {
                // Both events of this end go out before another endpoint's (ends are handled
                // in several threads at once): the connection and async streams keep one
                // order of endpoints.
                let _order = self.ia.end_events.lock().unwrap_or_else(|p| p.into_inner());
                self.conn_event(kind, Vec::new());
                // An endpoint on an SRQ learns of every end asynchronously too (its SRQ
                // buffers may be held); any endpoint of a broken connection does.
                if self.srq.is_some() || kind == ConnectionEventKind::Broken {
                    self.ia.post_async(AsyncEvent {
                        kind: AsyncKind::EpBroken,
                        subject: AsyncSubject::Ep(self.handle()),
                        reason: 0,
                    });
                }
                return;
            }
        };
        self.conn_event(kind, private_data);
    }
}

impl EpInner {
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
}

fn post_error(e: PostError, op: &'static str, obj: Object, queue: &str) -> DatError {
    match e {
        PostError::InvalidState(s) => DatError::new(
            ErrorType::InvalidState,
            state_subtype(s),
            op,
            obj,
            format!("{op} needs a CONNECTED or DISCONNECTED endpoint, not {s:?}"),
        ),
        PostError::QueueFull(max) => DatError::new(
            ErrorType::InsufficientResources,
            Subtype::ResourceTep,
            op,
            obj,
            format!("the {queue} queue holds its maximum of {max}"),
        ),
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
        let i = self.0.qp.info();
        Ok((i.state, i.recv_posted > 0, i.requests > 0))
    }

    /// `dat_ep_query`.
    pub fn query(&self) -> Result<EpParam> {
        self.check_handle("ep_query")?;
        let i = self.0.qp.info();
        Ok(EpParam {
            state: i.state,
            attr: i.attr,
            remote_address: i.remote_addr,
            remote_port_qual: i.remote_qual,
            pz_id: self.0.pz.0.id,
            ord: i.ord,
            ird: i.ird,
        })
    }

    /// Changes the attributes (`dat_ep_modify`); only while not connected or connecting.
    pub fn modify(&self, attr: &EpAttr) -> Result<()> {
        const OP: &str = "ep_modify";
        self.check_handle(OP)?;
        validate_attr(&self.0.ia, attr, OP, self.0.object())?;
        match self.0.qp.modify(attr) {
            Ok(()) => Ok(()),
            Err(ModifyError::InvalidState(s)) => err(
                ErrorType::InvalidState,
                state_subtype(s),
                OP,
                self.0.object(),
                format!("attributes cannot change in state {s:?}"),
            ),
            Err(ModifyError::TooSmall) => err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg3,
                OP,
                self.0.object(),
                "the new depths are smaller than what is queued",
            ),
        }
    }

    /// Connects to the PSP/RSP `qual` at the IA address `remote` (an IP address: the
    /// connection qualifier says where on it) with `private_data` (`dat_ep_connect`).
    /// Returns at once; ESTABLISHED, PEER_REJECTED, NON_PEER_REJECTED, TIMED_OUT or
    /// UNREACHABLE arrives on the connect EVD. `timeout` of `None` waits forever.
    pub fn connect(
        &self,
        remote: impl Into<IpAddr>,
        qual: ConnQual,
        timeout: Option<Duration>,
        private_data: &[u8],
    ) -> Result<()> {
        const OP: &str = "ep_connect";
        let remote: IaAddress = SocketAddr::new(remote.into(), 0);
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
        let attempt = match self.0.qp.begin_connect(remote, qual) {
            Ok(a) => a,
            Err(s) => {
                return err(
                    ErrorType::InvalidState,
                    state_subtype(s),
                    OP,
                    self.0.object(),
                    format!("the endpoint is {s:?}, not UNCONNECTED"),
                )
            }
        };
        tracing::debug!(
            ia = ia.id,
            ep = self.0.id,
            attempt,
            %remote,
            qual,
            ?timeout,
            "connecting"
        );
        if let Some(t) = timeout {
            let weak = Arc::downgrade(&self.0.qp);
            let timer = crate::engine::timer::at(std::time::Instant::now() + t, move || {
                if let Some(qp) = weak.upgrade() {
                    qp.attempt_failed(attempt, ConnectionEventKind::TimedOut, Vec::new());
                }
            });
            // Cancelled when the attempt resolves: a long timeout would otherwise keep the
            // QP's memory (its weak reference) until it fires.
            self.0.qp.set_attempt_timer(attempt, timer);
        }
        if let Err(e) = ia
            .link
            .clone()
            .connect(&self.0.qp, remote, qual, private_data)
        {
            self.0.qp.abandon_attempt(attempt);
            let what = match e.raw_os_error() {
                Some(libc::EMFILE) => {
                    "this process is out of file descriptors (raise RLIMIT_NOFILE, `ulimit -n`, \
                     or free endpoints)"
                }
                Some(libc::ENFILE) => "the system is out of file descriptors",
                _ => "this process is out of memory or buffers",
            };
            return err(
                ErrorType::InsufficientResources,
                Subtype::NoSubtype,
                OP,
                self.0.object(),
                format!("{what}: {e}; the endpoint stays UNCONNECTED"),
            );
        }
        Ok(())
    }

    /// Disconnects (`dat_ep_disconnect`). Abrupt: now, flushing outstanding DTOs. Graceful:
    /// queued requests go first (DISCONNECT_PENDING), then the connection closes. Either way one
    /// DISCONNECTED event arrives on the connect EVD. On an endpoint that is already
    /// disconnected (or unconnected) this is a successful no-op; while connecting it aborts.
    pub fn disconnect(&self, flags: CloseFlags) -> Result<()> {
        const OP: &str = "ep_disconnect";
        self.check_handle(OP)?;
        let qp = &self.0.qp;
        let (state, attempt) = qp.state_and_attempt();
        tracing::debug!(
            ia = self.0.ia.id,
            ep = self.0.id,
            ?flags,
            ?state,
            "disconnect"
        );
        match state {
            EpState::Connected if flags == CloseFlags::Graceful => qp.disconnect_graceful(),
            EpState::Connected | EpState::DisconnectPending => {
                qp.end_connection(ConnectionEventKind::Disconnected, true)
            }
            EpState::ActiveConnectionPending
            | EpState::PassiveConnectionPending
            | EpState::TentativeConnectionPending => {
                qp.attempt_failed(attempt, ConnectionEventKind::Disconnected, Vec::new())
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
        match self.0.qp.reset() {
            EpState::Disconnected => Ok(()),
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
        if self
            .0
            .reserved_by
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
        {
            return err(
                ErrorType::InvalidState,
                Subtype::InvalidStateEpReserved,
                OP,
                self.0.object(),
                "the endpoint is reserved by an RSP; free the RSP first",
            );
        }
        tracing::debug!(ia = self.0.ia.id, ep = self.0.id, "EP freed");
        self.0.qp.abort_for_close();
        self.0.release();
        Ok(())
    }

    /// `dat_ep_recv_query`: how many receive buffers this endpoint holds (posted ones, or SRQ
    /// buffers it dequeued and has not completed) and their total size in bytes.
    pub fn recv_query(&self) -> Result<(usize, u64)> {
        self.check_handle("ep_recv_query")?;
        let i = self.0.qp.info();
        Ok((i.recv_posted, i.recv_bytes))
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
        *self
            .0
            .soft_high_watermark
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = soft_high;
        self.0.qp.set_soft_high_watermark(soft_high);
        Ok(())
    }

    /// The endpoint's PZ.
    pub fn pz(&self) -> Pz {
        self.0.pz.user()
    }
}
