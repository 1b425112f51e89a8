//! Shared Receive Queues (`DAT_SRQ`): receive buffers any endpoint on the SRQ may take.
//!
//! Only endpoints in CONNECTED or DISCONNECT_PENDING take buffers (the engine only delivers
//! Sends to those). A taken buffer completes on the recv EVD of the endpoint that took it,
//! signalled according to that endpoint's recv completion flags. When the posted count falls
//! below the low watermark, one asynchronous event (`AsyncKind::SrqLowWatermark`) is raised;
//! `set_lw` arms it again.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::ep::{EpInner, RecvWr};
use crate::error::{err, ErrorType, Object, Result, Subtype};
use crate::event::{AsyncEvent, AsyncKind, AsyncSubject};
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

pub(crate) struct SrqCore {
    queue: VecDeque<RecvWr>,
    attr: SrqAttr,
    lw_armed: bool,
    eps: Vec<(u64, Weak<EpInner>)>,
}

pub(crate) struct SrqInner {
    pub(crate) id: u64,
    pub(crate) pz: Pz,
    core: Mutex<SrqCore>,
    pub(crate) freed: AtomicBool,
}

/// A Shared Receive Queue (`DAT_SRQ_HANDLE`).
#[derive(Clone)]
pub struct Srq(pub(crate) Arc<SrqInner>);

handle_identity!(Srq);

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
        let srq = Srq(Arc::new(SrqInner {
            id: self.0.next_id(),
            pz: pz.clone(),
            core: Mutex::new(SrqCore {
                queue: VecDeque::with_capacity(attr.max_recv_dtos),
                attr: *attr,
                lw_armed: attr.low_watermark.is_some(),
                eps: Vec::new(),
            }),
            freed: AtomicBool::new(false),
        }));
        pz.0.users.fetch_add(1, Ordering::AcqRel);
        o.srqs.insert(srq.0.id, srq.clone());
        Ok(srq)
    }
}

impl SrqInner {
    fn lock(&self) -> MutexGuard<'_, SrqCore> {
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn release(&self) {
        if self.freed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.lock().queue.clear();
        self.pz.0.users.fetch_sub(1, Ordering::AcqRel);
        self.pz.0.ia.objects().srqs.remove(&self.id);
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

    pub(crate) fn attach(&self, ep: &Arc<EpInner>) {
        self.0.lock().eps.push((ep.id, Arc::downgrade(ep)));
    }

    pub(crate) fn detach(&self, ep_id: u64) {
        self.0.lock().eps.retain(|(id, _)| *id != ep_id);
    }

    /// Takes the oldest posted receive for an endpoint's inbound Send.
    pub(crate) fn take(&self) -> Option<RecvWr> {
        let (wr, low) = {
            let mut c = self.0.lock();
            let wr = c.queue.pop_front()?;
            let low = match c.attr.low_watermark {
                Some(lw) if c.lw_armed && c.queue.len() < lw => {
                    c.lw_armed = false;
                    true
                }
                _ => false,
            };
            (wr, low)
        };
        if low {
            self.0.pz.0.ia.post_async(AsyncEvent {
                kind: AsyncKind::SrqLowWatermark,
                subject: AsyncSubject::Srq(self.clone()),
                reason: 2,
            });
        }
        Some(wr)
    }

    /// The SRQ's id: unique in the process across every object kind.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// Posts a receive buffer any endpoint on the SRQ may take (`dat_srq_post_recv`). Valid in
    /// every state; never blocks or allocates; `DAT_INSUFFICIENT_RESOURCES` when full.
    pub fn post_recv(&self, iov: &[LmrTriplet], cookie: Cookie) -> Result<()> {
        const OP: &str = "srq_post_recv";
        self.check(OP)?;
        let ia = &self.0.pz.0.ia;
        let max_iov = self.0.lock().attr.max_recv_iov;
        let r = EpInner::resolve_iov(
            ia,
            self.0.pz.0.id,
            iov,
            max_iov,
            MemPriv::LOCAL_WRITE,
            OP,
            self.object(),
        )?;
        let wr = RecvWr {
            cookie,
            flags: CompletionFlags::empty(),
            segs: r.segs,
            total: r.total,
        };
        let waiting: Vec<Weak<EpInner>> = {
            let mut c = self.0.lock();
            if c.queue.len() >= c.attr.max_recv_dtos {
                return err(
                    ErrorType::InsufficientResources,
                    Subtype::ResourceSrq,
                    OP,
                    self.object(),
                    format!("the SRQ holds its maximum of {}", c.attr.max_recv_dtos),
                );
            }
            c.queue.push_back(wr);
            if c.queue.len() == 1 {
                c.eps.iter().map(|(_, w)| w.clone()).collect()
            } else {
                Vec::new()
            }
        };
        // The queue was empty: endpoints whose peers wait for a buffer may go on.
        for ep in waiting.iter().filter_map(Weak::upgrade) {
            if let Some(conn) = ep.take_peer_waiting() {
                conn.wake_peer();
            }
        }
        Ok(())
    }

    /// `dat_srq_query`.
    pub fn query(&self) -> Result<SrqParam> {
        self.check("srq_query")?;
        let c = self.0.lock();
        Ok(SrqParam {
            attr: c.attr,
            available_dto_count: c.queue.len(),
            ep_count: c.eps.len(),
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
        let mut c = self.0.lock();
        if c.queue.len() > max_recv_dtos {
            return err(
                ErrorType::InvalidState,
                Subtype::NoSubtype,
                OP,
                self.object(),
                format!(
                    "{} receives are posted, more than {max_recv_dtos}",
                    c.queue.len()
                ),
            );
        }
        c.attr.max_recv_dtos = max_recv_dtos;
        let extra = max_recv_dtos.saturating_sub(c.queue.capacity());
        c.queue.reserve(extra);
        Ok(())
    }

    /// Sets the low watermark and arms its event (`dat_srq_set_lw`); `None` disables it. If
    /// fewer receives than `lw` are posted already, the event is raised at once.
    pub fn set_lw(&self, lw: Option<usize>) -> Result<()> {
        const OP: &str = "srq_set_lw";
        self.check(OP)?;
        let fire = {
            let mut c = self.0.lock();
            c.attr.low_watermark = lw;
            c.lw_armed = lw.is_some();
            match lw {
                Some(l) if c.queue.len() < l => {
                    c.lw_armed = false;
                    true
                }
                _ => false,
            }
        };
        if fire {
            self.0.pz.0.ia.post_async(AsyncEvent {
                kind: AsyncKind::SrqLowWatermark,
                subject: AsyncSubject::Srq(self.clone()),
                reason: 2,
            });
        }
        Ok(())
    }

    /// Frees the SRQ (`dat_srq_free`); `DAT_INVALID_STATE` while an endpoint uses it.
    pub fn free(&self) -> Result<()> {
        const OP: &str = "srq_free";
        self.check(OP)?;
        let n = self.0.lock().eps.len();
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
