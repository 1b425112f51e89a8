//! Shared Receive Queues (`DAT_SRQ`): receive buffers any endpoint on the SRQ may take.
//!
//! The queue itself is the engine's `SharedRq`: only endpoints in CONNECTED or
//! DISCONNECT_PENDING take buffers. A taken buffer completes on the recv EVD of the endpoint
//! that took it, signalled according to that endpoint's recv completion flags. When the posted
//! count falls below the low watermark, one asynchronous event (`AsyncKind::SrqLowWatermark`)
//! is raised; `set_lw` arms it again.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use crate::engine::qp::RecvWr;
use crate::engine::srq::{SharedRq, SrqUpcalls};
use crate::ep::{post_in_chunks, BatchError, EpInner, RecvRequest};
use crate::error::{err, DatError, ErrorType, Object, Result, Subtype};
use crate::event::{AsyncEvent, AsyncKind, AsyncSubject};
use crate::handle::{Handle, Owned};
use crate::ia::{InterfaceAdapter, MAX_IOV};
use crate::pz::Pz;
use crate::types::{CompletionFlags, Cookie, LmrTriplet, MemPriv};

/// `DAT_SRQ_ATTR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrqAttr {
    /// Most receives posted at once.
    pub max_recv_dtos: usize,
    /// Most segments per receive.
    pub max_recv_iov: usize,
    /// Raise an event when fewer than this many receives remain (`None`: never).
    pub low_watermark: Option<usize>,
}

impl Default for SrqAttr {
    fn default() -> Self {
        SrqAttr {
            max_recv_dtos: 256,
            max_recv_iov: MAX_IOV,
            low_watermark: None,
        }
    }
}

/// `DAT_SRQ_PARAM`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrqParam {
    /// Attributes.
    pub attr: SrqAttr,
    /// Receives posted and not yet taken.
    pub available_dto_count: usize,
    /// Endpoints using the SRQ.
    pub ep_count: usize,
    /// The PZ id.
    pub pz_id: u64,
}

pub(crate) struct SrqInner {
    pub(crate) id: u64,
    pub(crate) pz: Pz,
    /// The engine's queue.
    pub(crate) rq: Arc<SharedRq>,
    max_recv_iov: usize,
    pub(crate) freed: AtomicBool,
    me: Weak<SrqInner>,
    /// The consumer's handles (`handle.rs`).
    handles: AtomicUsize,
}

/// A Shared Receive Queue (`DAT_SRQ_HANDLE`).
///
/// Dropping the last handle frees the SRQ as [`free`](Self::free) does; while endpoints still
/// use it, when the last of them is freed.
#[derive(Clone)]
pub struct Srq(pub(crate) Handle<SrqInner>);

handle_identity!(Srq);
handle_identity!(@counted Srq);

impl Owned for SrqInner {
    fn handle_count(&self) -> &AtomicUsize {
        &self.handles
    }

    fn last_handle_dropped(self: &Arc<Self>) {
        // The queue's lock orders this against `detach` (see there).
        if self.rq.qp_count() == 0 {
            self.release();
        }
    }
}

impl InterfaceAdapter {
    /// Creates an SRQ in `pz` (`dat_srq_create`).
    pub fn srq_create(&self, pz: &Pz, attr: &SrqAttr) -> Result<Srq> {
        const OP: &str = "srq_create";
        self.0.check_open(OP)?;
        pz.check(OP)?;
        let obj = self.0.object();
        if attr.max_recv_dtos == 0
            || attr.max_recv_dtos > self.0.attr.max_recv_per_srq
            || attr.max_recv_iov > MAX_IOV
        {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg3,
                OP,
                obj,
                format!(
                    "SRQ depth must be in 1..={} and iov at most {MAX_IOV}",
                    self.0.attr.max_recv_per_srq
                ),
            );
        }
        let mut o = self.0.objects();
        if o.srqs.len() >= self.0.attr.max_srqs {
            return err(
                ErrorType::InsufficientResources,
                Subtype::ResourceSrq,
                OP,
                obj,
                "too many SRQs",
            );
        }
        let mut no_memory = None;
        let srq = Arc::new_cyclic(|me: &Weak<SrqInner>| {
            let upcalls: Weak<dyn SrqUpcalls> = me.clone();
            let rq = SharedRq::new(attr.max_recv_dtos, attr.low_watermark, upcalls.clone())
                .unwrap_or_else(|e| {
                    no_memory = Some(e);
                    SharedRq::new(0, None, upcalls).expect("an empty queue allocates nothing")
                });
            SrqInner {
                id: self.0.next_id(),
                pz: pz.internal(),
                rq: Arc::new(rq),
                max_recv_iov: attr.max_recv_iov,
                freed: AtomicBool::new(false),
                me: me.clone(),
                handles: AtomicUsize::new(0),
            }
        });
        if let Some(e) = no_memory {
            drop(srq); // counted nowhere yet
            return err(
                ErrorType::InsufficientResources,
                Subtype::ResourceMemory,
                OP,
                obj,
                format!("the SRQ's queue: {e}"),
            );
        }
        pz.0.users.fetch_add(1, Ordering::SeqCst);
        o.srqs.insert(srq.id, Srq(Handle::internal(srq.clone())));
        Ok(Srq(Handle::new(srq)))
    }
}

impl SrqInner {
    /// An endpoint stopped using the SRQ: frees it if the consumer's handles are gone too.
    /// (The count falls before the queue's lock is taken in a last handle drop, and the
    /// endpoint leaves under that lock: one of the two sees both at zero.)
    pub(crate) fn detach(&self, ep: u64) {
        self.rq.detach(ep);
        if self.handles.load(Ordering::SeqCst) == 0 && self.rq.qp_count() == 0 {
            self.release();
        }
    }

    pub(crate) fn release(&self) {
        if self.freed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.rq.clear();
        self.pz.0.unuse();
        self.pz.0.ia.objects().srqs.remove(&self.id);
    }
}

impl SrqUpcalls for SrqInner {
    fn low_watermark(&self) {
        if let Some(me) = self.me.upgrade() {
            self.pz.0.ia.post_async(AsyncEvent {
                kind: AsyncKind::SrqLowWatermark,
                subject: AsyncSubject::Srq(Srq(Handle::internal(me))),
                reason: 2,
            });
        }
    }
}

impl Srq {
    fn object(&self) -> Object {
        Object::new("srq", self.0.id)
    }

    pub(crate) fn check(&self, op: &'static str) -> Result<()> {
        if self.0.freed.load(Ordering::Acquire) {
            return err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandleSrq,
                op,
                self.object(),
                "the SRQ was freed",
            );
        }
        Ok(())
    }

    /// The SRQ's id: unique in the process across every object kind.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// Posts a receive buffer any endpoint on the SRQ may take (`dat_srq_post_recv`). Valid in
    /// every state; never blocks or allocates; `DAT_INSUFFICIENT_RESOURCES` when full.
    pub fn post_recv(&self, iov: &[LmrTriplet], cookie: impl Into<Cookie>) -> Result<()> {
        const OP: &str = "srq_post_recv";
        self.check(OP)?;
        let wr = self.recv_wr(OP, iov, cookie.into(), CompletionFlags::empty())?;
        self.0.rq.post(wr).map_err(|max| self.full(OP, max))
    }

    /// A receive's work request: its iov resolved (flags: none, as `dat_srq_post_recv` takes).
    fn recv_wr(
        &self,
        op: &'static str,
        iov: &[LmrTriplet],
        cookie: Cookie,
        flags: CompletionFlags,
    ) -> Result<RecvWr> {
        if !flags.is_empty() {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg4,
                op,
                self.object(),
                format!("an SRQ receive takes no completion flags (got {flags:?})"),
            );
        }
        let r = EpInner::resolve_iov(
            &self.0.pz.0.ia,
            self.0.pz.0.id,
            iov,
            self.0.max_recv_iov,
            MemPriv::LOCAL_WRITE,
            op,
            self.object(),
        )?;
        Ok(RecvWr {
            cookie,
            flags,
            segs: r.segs,
            total: r.total,
        })
    }

    fn full(&self, op: &'static str, max: usize) -> DatError {
        DatError::new(
            ErrorType::InsufficientResources,
            Subtype::ResourceSrq,
            op,
            self.object(),
            format!("the SRQ holds its maximum of {max}"),
        )
    }

    /// Posts a batch of receive buffers in order, as [`post_recv`](Self::post_recv) posts
    /// each, resolving and queueing [`RECV_BATCH_CHUNK`](crate::RECV_BATCH_CHUNK) of them under
    /// one hold of the SRQ's lock (the Rust API's form of `ibv_post_srq_recv` with a list). A
    /// request's `flags` must be empty (`dat_srq_post_recv` takes none). The batch stops at the
    /// first refused request: those before it are posted, it and those after it are not
    /// ([`BatchError::posted`]). Never blocks.
    pub fn post_recvs(&self, recvs: &[RecvRequest<'_>]) -> std::result::Result<(), BatchError> {
        const OP: &str = "srq_post_recv";
        self.check(OP)
            .map_err(|error| BatchError { posted: 0, error })?;
        post_in_chunks(
            recvs,
            |r| self.recv_wr(OP, r.iov, r.cookie, r.flags),
            |wrs| {
                let (taken, full) = self.0.rq.post_many(wrs);
                (taken, full.map(|max| self.full(OP, max)))
            },
        )
    }

    /// `dat_srq_query`.
    pub fn query(&self) -> Result<SrqParam> {
        self.check("srq_query")?;
        let rq = &self.0.rq;
        Ok(SrqParam {
            attr: SrqAttr {
                max_recv_dtos: rq.max(),
                max_recv_iov: self.0.max_recv_iov,
                low_watermark: rq.low_watermark(),
            },
            available_dto_count: rq.len(),
            ep_count: rq.qp_count(),
            pz_id: self.0.pz.0.id,
        })
    }

    /// Changes the depth (`dat_srq_resize`); `DAT_INVALID_STATE` if more are posted than fit.
    pub fn resize(&self, max_recv_dtos: usize) -> Result<()> {
        const OP: &str = "srq_resize";
        self.check(OP)?;
        let max = self.0.pz.0.ia.attr.max_recv_per_srq;
        if max_recv_dtos == 0 || max_recv_dtos > max {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg2,
                OP,
                self.object(),
                format!("depth must be in 1..={max}"),
            );
        }
        self.0.rq.resize(max_recv_dtos).map_err(|posted| {
            DatError::new(
                ErrorType::InvalidState,
                Subtype::NoSubtype,
                OP,
                self.object(),
                format!("{posted} receives are posted, more than {max_recv_dtos}"),
            )
        })
    }

    /// Sets the low watermark and arms its event (`dat_srq_set_lw`); `None` disables it. If
    /// fewer receives than `lw` are posted already, the event is raised at once.
    pub fn set_lw(&self, lw: Option<usize>) -> Result<()> {
        const OP: &str = "srq_set_lw";
        self.check(OP)?;
        self.0.rq.set_low_watermark(lw);
        Ok(())
    }

    /// Frees the SRQ (`dat_srq_free`); `DAT_INVALID_STATE` while an endpoint uses it.
    pub fn free(&self) -> Result<()> {
        const OP: &str = "srq_free";
        self.check(OP)?;
        let n = self.0.rq.qp_count();
        if n > 0 {
            return err(
                ErrorType::InvalidState,
                Subtype::InvalidStateSrqInUse,
                OP,
                self.object(),
                format!("{n} endpoints use this SRQ"),
            );
        }
        self.0.release();
        Ok(())
    }
}
