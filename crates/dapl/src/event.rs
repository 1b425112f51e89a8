//! Events delivered through Event Dispatchers (`DAT_EVENT` in Rust form).

use crate::cr::ConnectionRequest;
use crate::ep::Endpoint;
use crate::handle::Owned;
use crate::rmr::Rmr;
use crate::sp::ServicePoint;
pub use crate::types::ConnectionEventKind;
use crate::types::{ConnQual, Cookie, DtoOp, DtoStatus, RmrContext};

/// `DAT_EVENT_NUMBER` values.
pub mod number {
    /// `DAT_DTO_COMPLETION_EVENT`
    pub const DTO_COMPLETION: u32 = 0x00001;
    /// `DAT_RMR_BIND_COMPLETION_EVENT`
    pub const RMR_BIND_COMPLETION: u32 = 0x01001;
    /// `DAT_CONNECTION_REQUEST_EVENT`
    pub const CONNECTION_REQUEST: u32 = 0x02001;
    /// `DAT_CONNECTION_EVENT_ESTABLISHED`
    pub const ESTABLISHED: u32 = 0x04001;
    /// `DAT_CONNECTION_EVENT_PEER_REJECTED`
    pub const PEER_REJECTED: u32 = 0x04002;
    /// `DAT_CONNECTION_EVENT_NON_PEER_REJECTED`
    pub const NON_PEER_REJECTED: u32 = 0x04003;
    /// `DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR`
    pub const ACCEPT_COMPLETION_ERROR: u32 = 0x04004;
    /// `DAT_CONNECTION_EVENT_DISCONNECTED`
    pub const DISCONNECTED: u32 = 0x04005;
    /// `DAT_CONNECTION_EVENT_BROKEN`
    pub const BROKEN: u32 = 0x04006;
    /// `DAT_CONNECTION_EVENT_TIMED_OUT`
    pub const TIMED_OUT: u32 = 0x04007;
    /// `DAT_CONNECTION_EVENT_UNREACHABLE`
    pub const UNREACHABLE: u32 = 0x04008;
    /// `DAT_ASYNC_ERROR_EVD_OVERFLOW`
    pub const ASYNC_EVD_OVERFLOW: u32 = 0x08001;
    /// `DAT_ASYNC_ERROR_IA_CATASTROPHIC`
    pub const ASYNC_IA_CATASTROPHIC: u32 = 0x08002;
    /// `DAT_ASYNC_ERROR_EP_BROKEN`
    pub const ASYNC_EP_BROKEN: u32 = 0x08003;
    /// `DAT_ASYNC_ERROR_TIMED_OUT`
    pub const ASYNC_TIMED_OUT: u32 = 0x08004;
    /// `DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR`
    pub const ASYNC_PROVIDER_INTERNAL_ERROR: u32 = 0x08005;
    /// `DAT_SOFTWARE_EVENT`
    pub const SOFTWARE: u32 = 0x10001;
}

impl ConnectionEventKind {
    /// The DAT event number.
    pub fn number(self) -> u32 {
        match self {
            Self::Established => number::ESTABLISHED,
            Self::PeerRejected => number::PEER_REJECTED,
            Self::NonPeerRejected => number::NON_PEER_REJECTED,
            Self::AcceptCompletionError => number::ACCEPT_COMPLETION_ERROR,
            Self::Disconnected => number::DISCONNECTED,
            Self::Broken => number::BROKEN,
            Self::TimedOut => number::TIMED_OUT,
            Self::Unreachable => number::UNREACHABLE,
        }
    }
}

/// `DAT_DTO_COMPLETION_EVENT_DATA`.
#[derive(Debug, Clone)]
pub struct DtoCompletion {
    /// The endpoint the DTO was posted on (for SRQ receives: the EP that dequeued the buffer).
    pub ep: Endpoint,
    /// The consumer's cookie from the post.
    pub cookie: Cookie,
    /// Outcome.
    pub status: DtoStatus,
    /// Bytes moved (`transfered_length`); undefined unless `status` is `Success`.
    pub transferred_length: u64,
    /// Which operation completed.
    pub operation: DtoOp,
    /// The immediate data of a peer's RDMA write with immediate: `Some` exactly for a
    /// successful [`DtoOp::RecvImmed`] completion (`DAT_IB_EXTENSION_EVENT_DATA`'s
    /// `val.immed.data`).
    pub immediate: Option<u32>,
    /// The RMR context the peer's Send with Invalidate invalidated here: `Some` exactly for a
    /// successful [`DtoOp::ReceiveWithInvalidate`] completion (`rmr_context` of
    /// `DAT_DTO_COMPLETION_EVENT_DATA`). That RMR is unbound from then on.
    pub rmr_context: Option<RmrContext>,
}

/// `DAT_RMR_BIND_COMPLETION_EVENT_DATA`.
#[derive(Debug, Clone)]
pub struct RmrBindCompletion {
    /// The RMR that was bound or unbound.
    pub rmr: Rmr,
    /// The consumer's cookie from the bind.
    pub cookie: Cookie,
    /// Outcome.
    pub status: DtoStatus,
}

/// `DAT_CR_ARRIVAL_EVENT_DATA`.
#[derive(Debug, Clone)]
pub struct CrArrival {
    /// The PSP or RSP the request arrived at.
    pub sp: ServicePoint,
    /// The consumer's connection qualifier of that service point.
    pub conn_qual: ConnQual,
    /// The request, to query, accept or reject.
    pub cr: ConnectionRequest,
}

/// `DAT_CONNECTION_EVENT_DATA`.
#[derive(Debug, Clone)]
pub struct ConnectionEvent {
    /// What happened.
    pub kind: ConnectionEventKind,
    /// The endpoint it happened to.
    pub ep: Endpoint,
    /// Private data from the peer (the accept's on ESTABLISHED, the reject's on PEER_REJECTED).
    pub private_data: Vec<u8>,
}

/// Kinds of asynchronous errors and notices (`DAT_ASYNC_ERROR_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AsyncKind {
    /// An EVD was full and lost an event (`DAT_ASYNC_ERROR_EVD_OVERFLOW`).
    EvdOverflow,
    /// An endpoint's connection broke (`DAT_ASYNC_ERROR_EP_BROKEN`).
    EpBroken,
    /// An SRQ's posted count fell below its low watermark (`DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR`
    /// with reason `DAT_SRQ_LOW_WATERMARK_EVENT`, as DAT has no event number of its own for it).
    SrqLowWatermark,
    /// An endpoint on an SRQ holds more of its buffers than its soft high watermark
    /// (`DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR` with reason `DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT`,
    /// 2, as DAT has no event number of its own for it).
    EpSoftHighWatermark,
    /// The IA failed (`DAT_ASYNC_ERROR_IA_CATASTROPHIC`).
    IaCatastrophic,
}

/// The object an asynchronous event is about.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AsyncSubject {
    /// An Event Dispatcher.
    Evd(crate::evd::Evd),
    /// An endpoint.
    Ep(Endpoint),
    /// A shared receive queue.
    Srq(crate::srq::Srq),
    /// The IA itself.
    Ia,
}

/// `DAT_ASYNCH_ERROR_EVENT_DATA`.
#[derive(Debug, Clone)]
pub struct AsyncEvent {
    /// What happened.
    pub kind: AsyncKind,
    /// To which object.
    pub subject: AsyncSubject,
    /// DAT's object-specific reason code (e.g. `DAT_SRQ_LOW_WATERMARK_EVENT` = 2).
    pub reason: i32,
}

impl AsyncKind {
    /// The DAT event number.
    pub fn number(self) -> u32 {
        match self {
            Self::EvdOverflow => number::ASYNC_EVD_OVERFLOW,
            Self::EpBroken => number::ASYNC_EP_BROKEN,
            Self::SrqLowWatermark | Self::EpSoftHighWatermark => {
                number::ASYNC_PROVIDER_INTERNAL_ERROR
            }
            Self::IaCatastrophic => number::ASYNC_IA_CATASTROPHIC,
        }
    }
}

/// One event (`DAT_EVENT`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Event {
    /// A DTO completed.
    Dto(DtoCompletion),
    /// An RMR bind completed.
    RmrBind(RmrBindCompletion),
    /// A connection request arrived at a service point.
    ConnectionRequest(CrArrival),
    /// A connection changed state.
    Connection(ConnectionEvent),
    /// An asynchronous error.
    Async(AsyncEvent),
    /// A software event posted with `post_se`.
    Software(u64),
}

impl Event {
    /// The event as the consumer gets it: its handles counted (`handle.rs`; events wait in
    /// queues with the library's internal handles).
    pub(crate) fn into_user(self) -> Event {
        match self {
            Event::Dto(d) => Event::Dto(DtoCompletion {
                ep: d.ep.into_user(),
                ..d
            }),
            Event::RmrBind(b) => Event::RmrBind(RmrBindCompletion {
                rmr: b.rmr.into_user(),
                ..b
            }),
            Event::ConnectionRequest(c) => Event::ConnectionRequest(CrArrival {
                sp: c.sp.into_user(),
                cr: c.cr.into_user(),
                ..c
            }),
            Event::Connection(c) => Event::Connection(ConnectionEvent {
                ep: c.ep.into_user(),
                ..c
            }),
            Event::Async(a) => Event::Async(AsyncEvent {
                subject: match a.subject {
                    AsyncSubject::Evd(e) => AsyncSubject::Evd(e.into_user()),
                    AsyncSubject::Ep(e) => AsyncSubject::Ep(e.into_user()),
                    AsyncSubject::Srq(s) => AsyncSubject::Srq(s.into_user()),
                    AsyncSubject::Ia => AsyncSubject::Ia,
                },
                ..a
            }),
            Event::Software(v) => Event::Software(v),
        }
    }

    /// Drops an event that never reached the consumer (its EVD was freed with it queued). A
    /// connection request in it was never seen, so nobody can answer it: it is rejected, as
    /// dropping the last handle to an unanswered request is, or the requester would wait for
    /// an answer forever (and the IA's graceful close would be refused over a request the
    /// consumer never had). (A request that comes after the free is not queued at all, and
    /// `ServicePoint::request_arrived` rejects it.)
    pub(crate) fn drop_unread(self) {
        if let Event::ConnectionRequest(c) = &self {
            let cr = c.cr.0.arc();
            if cr.handle_count().load(std::sync::atomic::Ordering::SeqCst) == 0 {
                cr.last_handle_dropped();
            }
        }
    }

    /// True for the streams a consumer paces by what it posts (DTO and RMR bind completions,
    /// software events): a full EVD drops these (with an overflow error); the others
    /// (connection events and requests, asynchronous errors) it never drops.
    pub(crate) fn consumer_paced(&self) -> bool {
        matches!(self, Event::Dto(_) | Event::RmrBind(_) | Event::Software(_))
    }

    /// The DAT event number (`DAT_EVENT.event_number`).
    pub fn number(&self) -> u32 {
        match self {
            Event::Dto(_) => number::DTO_COMPLETION,
            Event::RmrBind(_) => number::RMR_BIND_COMPLETION,
            Event::ConnectionRequest(_) => number::CONNECTION_REQUEST,
            Event::Connection(c) => c.kind.number(),
            Event::Async(a) => a.kind.number(),
            Event::Software(_) => number::SOFTWARE,
        }
    }

    /// The DTO completion, if this is one.
    pub fn as_dto(&self) -> Option<&DtoCompletion> {
        match self {
            Event::Dto(d) => Some(d),
            _ => None,
        }
    }

    /// The connection event, if this is one.
    pub fn as_connection(&self) -> Option<&ConnectionEvent> {
        match self {
            Event::Connection(c) => Some(c),
            _ => None,
        }
    }

    /// The connection request arrival, if this is one.
    pub fn as_cr_arrival(&self) -> Option<&CrArrival> {
        match self {
            Event::ConnectionRequest(c) => Some(c),
            _ => None,
        }
    }

    /// The asynchronous event, if this is one.
    pub fn as_async(&self) -> Option<&AsyncEvent> {
        match self {
            Event::Async(a) => Some(a),
            _ => None,
        }
    }
}
