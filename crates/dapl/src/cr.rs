//! Connection Requests (`DAT_CR`): a request that arrived at a service point, to query, accept
//! or reject. Each is consumed by exactly one accept or reject.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub use crate::engine::port::CrArrivalInfo;
use crate::engine::port::PendingRequest;
use crate::ep::Endpoint;
use crate::error::{err, ErrorType, Object, Result, Subtype};
use crate::event::ConnectionEventKind;
use crate::handle::{Handle, Owned};
use crate::sp::{ServicePoint, SpKind};
use crate::types::EpState;

pub(crate) struct CrInner {
    pub(crate) id: u64,
    sp: ServicePoint,
    pending: Mutex<Option<Box<dyn PendingRequest>>>,
    info: CrArrivalInfo,
    freed: AtomicBool,
    /// The consumer's handles (`handle.rs`): counted from the arrival event's dequeue on.
    handles: AtomicUsize,
}

impl Owned for CrInner {
    fn handle_count(&self) -> &AtomicUsize {
        &self.handles
    }

    /// A request the consumer let go of unanswered is rejected, so the requester is not left
    /// waiting.
    fn last_handle_dropped(self: &Arc<Self>) {
        let answered = self.freed.load(Ordering::Acquire)
            || self
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_none();
        if !answered {
            let _ = ConnectionRequest(Handle::internal(self.clone())).reject(&[]);
        }
    }
}

impl CrInner {
    pub(crate) fn new(id: u64, sp: ServicePoint, pending: Box<dyn PendingRequest>) -> Self {
        let info = pending.info().clone();
        CrInner {
            id,
            sp,
            pending: Mutex::new(Some(pending)),
            info,
            freed: AtomicBool::new(false),
            handles: AtomicUsize::new(0),
        }
    }
}

/// A Connection Request (`DAT_CR_HANDLE`).
///
/// Dropping the last handle to a request not yet accepted or rejected rejects it (with no
/// private data), as `reject(&[])` does.
#[derive(Clone)]
pub struct ConnectionRequest(pub(crate) Handle<CrInner>);

handle_identity!(ConnectionRequest);
handle_identity!(@counted ConnectionRequest);

/// `DAT_CR_PARAM`.
#[derive(Debug, Clone)]
pub struct CrParam {
    /// Requester's address, port qualifier and private data.
    pub remote: CrArrivalInfo,
    /// The service point it arrived at.
    pub sp: ServicePoint,
    /// The reserved endpoint (RSP requests only).
    pub local_ep: Option<Endpoint>,
}

impl ConnectionRequest {
    fn object(&self) -> Object {
        Object::new("cr", self.0.id)
    }

    fn take(&self, op: &'static str) -> Result<Box<dyn PendingRequest>> {
        let p = self
            .0
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match p {
            Some(p) if !self.0.freed.load(Ordering::Acquire) => Ok(p),
            _ => err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandleCr,
                op,
                self.object(),
                "the connection request was already accepted, rejected or freed",
            ),
        }
    }

    fn consume(&self) {
        self.0.freed.store(true, Ordering::Release);
        self.0.sp.0.ia.objects().crs.remove(&self.0.id);
    }

    /// `dat_cr_query`.
    pub fn query(&self) -> Result<CrParam> {
        if self.0.freed.load(Ordering::Acquire) {
            return err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandleCr,
                "cr_query",
                self.object(),
                "the connection request was consumed",
            );
        }
        let local_ep = match &self.0.sp.0.kind {
            SpKind::Rsp(ep) => Some(ep.user()),
            SpKind::Psp(_) => None,
        };
        Ok(CrParam {
            remote: self.0.info.clone(),
            sp: self.0.sp.user(),
            local_ep,
        })
    }

    /// The requester's private data.
    pub fn private_data(&self) -> &[u8] {
        &self.0.info.private_data
    }

    /// Accepts the request on `ep` (`dat_cr_accept`), sending `private_data`. For an RSP request
    /// `ep` may be `None` (the reserved endpoint is used). ESTABLISHED (or
    /// ACCEPT_COMPLETION_ERROR, if the requester went away) arrives on the endpoint's connect EVD.
    pub fn accept(&self, ep: Option<&Endpoint>, private_data: &[u8]) -> Result<()> {
        const OP: &str = "cr_accept";
        let ep = match (ep, &self.0.sp.0.kind) {
            (Some(ep), _) => ep.clone(),
            (None, SpKind::Rsp(ep)) => ep.clone(),
            (None, SpKind::Psp(_)) => {
                return err(
                    ErrorType::InvalidParameter,
                    Subtype::InvalidArg2,
                    OP,
                    self.object(),
                    "a PSP request needs an endpoint to accept on",
                )
            }
        };
        ep.check_handle(OP)?;
        let ia = &ep.0.ia;
        if private_data.len() > ia.attr.max_private_data_size {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg4,
                OP,
                self.object(),
                format!(
                    "{} bytes of private data, at most {}",
                    private_data.len(),
                    ia.attr.max_private_data_size
                ),
            );
        }
        if ep.0.connect_evd.is_none() || ep.0.recv_evd.is_none() || ep.0.request_evd.is_none() {
            return err(
                ErrorType::InvalidState,
                Subtype::InvalidStateEpUnconfigured,
                OP,
                ep.0.object(),
                "an endpoint needs recv, request and connect EVDs to accept",
            );
        }
        let state = ep.0.state();
        let reserved_here = matches!(&self.0.sp.0.kind, SpKind::Rsp(r) if *r == ep);
        let ok = state == EpState::Unconnected
            || (reserved_here && state == EpState::TentativeConnectionPending);
        if !ok {
            return err(
                ErrorType::InvalidState,
                Subtype::InvalidStateEpNotready,
                OP,
                ep.0.object(),
                format!("the endpoint is {state:?}; accept needs an UNCONNECTED one"),
            );
        }
        let pending = self.take(OP)?;
        self.consume();
        if reserved_here {
            let _ = ep.0.set_reserved(None);
        }
        let attempt = ep.0.qp.begin_attempt(
            EpState::PassiveConnectionPending,
            Some(self.0.info.remote_addr),
            Some(self.0.sp.0.qual),
        );
        tracing::debug!(
            ia = ia.id,
            cr = self.0.id,
            ep = ep.0.id,
            attempt,
            remote = %self.0.info.remote_addr,
            "accepting"
        );
        if !pending.accept(&ep.0.qp, private_data) {
            ep.0.qp.attempt_failed(
                attempt,
                ConnectionEventKind::AcceptCompletionError,
                Vec::new(),
            );
        }
        Ok(())
    }

    /// Rejects the request with `private_data` (`dat_cr_reject`); the requester gets
    /// PEER_REJECTED carrying it.
    pub fn reject(&self, private_data: &[u8]) -> Result<()> {
        const OP: &str = "cr_reject";
        let max = self.0.sp.0.ia.attr.max_private_data_size;
        if private_data.len() > max {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg2,
                OP,
                self.object(),
                format!(
                    "{} bytes of private data, at most {max}",
                    private_data.len()
                ),
            );
        }
        let pending = self.take(OP)?;
        self.consume();
        if let SpKind::Rsp(ep) = &self.0.sp.0.kind {
            ep.0.qp
                .transition(EpState::TentativeConnectionPending, EpState::Reserved);
        }
        tracing::debug!(cr = self.0.id, "rejecting");
        pending.reject(private_data);
        Ok(())
    }
}
