//! Remote Memory Regions (`DAT_RMR`): a window onto part of an LMR that a peer may access
//! with its own key. Binding and unbinding complete through the endpoint's request EVD.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::ep::Endpoint;
use crate::error::{err, ErrorType, Object, Result, Subtype};
use crate::event::{Event, RmrBindCompletion};
use crate::handle::{Handle, Owned};
use crate::lmr::Lmr;
use crate::mem::EntryKind;
use crate::pz::Pz;
use crate::types::{
    CompletionFlags, Cookie, DtoStatus, LmrTriplet, MemPriv, RmrContext, RmrTriplet,
};

pub(crate) struct Binding {
    lmr: Lmr,
    context: u32,
    triplet: LmrTriplet,
    privs: MemPriv,
}

pub(crate) struct RmrInner {
    pub(crate) id: u64,
    pub(crate) pz: Pz,
    binding: Mutex<Option<Binding>>,
    pub(crate) freed: AtomicBool,
    /// The consumer's handles (`handle.rs`).
    handles: AtomicUsize,
}

impl Owned for RmrInner {
    fn handle_count(&self) -> &AtomicUsize {
        &self.handles
    }

    fn last_handle_dropped(self: &Arc<Self>) {
        self.release();
    }
}

/// A Remote Memory Region (`DAT_RMR_HANDLE`).
///
/// Dropping the last handle frees the RMR as [`free`](Self::free) does (unbinding it).
#[derive(Clone)]
pub struct Rmr(pub(crate) Handle<RmrInner>);

handle_identity!(Rmr);
handle_identity!(@counted Rmr);

/// `DAT_RMR_PARAM`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RmrParam {
    /// The PZ id.
    pub pz_id: u64,
    /// The bound range, if bound.
    pub lmr_triplet: Option<LmrTriplet>,
    /// The bound privileges.
    pub privileges: MemPriv,
    /// The current remote key (0 when unbound).
    pub rmr_context: RmrContext,
}

impl Pz {
    /// Creates an unbound RMR in this PZ (`dat_rmr_create`).
    pub fn rmr_create(&self) -> Result<Rmr> {
        const OP: &str = "rmr_create";
        self.check(OP)?;
        let ia = &self.0.ia;
        ia.check_open(OP)?;
        let mut o = ia.objects();
        if o.rmrs.len() >= ia.attr.max_rmrs {
            return err(
                ErrorType::InsufficientResources,
                Subtype::ResourceMemoryRegion,
                OP,
                self.object(),
                "too many RMRs",
            );
        }
        let rmr = Arc::new(RmrInner {
            id: ia.next_id(),
            pz: self.internal(),
            binding: Mutex::new(None),
            freed: AtomicBool::new(false),
            handles: AtomicUsize::new(0),
        });
        self.0.users.fetch_add(1, Ordering::SeqCst);
        o.rmrs.insert(rmr.id, Rmr(Handle::internal(rmr.clone())));
        Ok(Rmr(Handle::new(rmr)))
    }
}

impl Rmr {
    fn object(&self) -> Object {
        Object::new("rmr", self.0.id)
    }

    fn check(&self, op: &'static str) -> Result<()> {
        if self.0.freed.load(Ordering::Acquire) {
            return err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandleRmr,
                op,
                self.object(),
                "the RMR was freed",
            );
        }
        Ok(())
    }

    /// The RMR's id: unique in the process across every object kind.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// Binds the RMR to `triplet` (inside `lmr`) with remote `privs` (`dat_rmr_bind`); the
    /// completion (with `cookie`) goes to `ep`'s request EVD unless `flags` has SUPPRESS.
    /// Returns the new `rmr_context`, which replaces any earlier one. A triplet of length 0
    /// unbinds (the returned context is then 0).
    pub fn bind(
        &self,
        lmr: &Lmr,
        triplet: LmrTriplet,
        privs: MemPriv,
        ep: &Endpoint,
        cookie: impl Into<Cookie>,
        flags: CompletionFlags,
    ) -> Result<RmrContext> {
        const OP: &str = "rmr_bind";
        let cookie: Cookie = cookie.into();
        self.check(OP)?;
        if lmr.0.freed.load(Ordering::Acquire) {
            return err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandleLmr,
                OP,
                self.object(),
                "the LMR was freed",
            );
        }
        ep.check_handle(OP)?;
        if privs.intersects(MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)
            || (privs & !MemPriv::ALL) != MemPriv::empty()
        {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg4,
                OP,
                self.object(),
                "an RMR carries remote privileges only",
            );
        }
        if lmr.0.pz != self.0.pz || ep.0.pz != self.0.pz {
            return err(
                ErrorType::ProtectionViolation,
                Subtype::NoSubtype,
                OP,
                self.object(),
                "the RMR, LMR and EP are not in one PZ",
            );
        }
        if triplet.lmr_context != lmr.lmr_context() {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg3,
                OP,
                self.object(),
                "the triplet's lmr_context is not the LMR's",
            );
        }
        let ia = &self.0.pz.0.ia;
        // Until this bind counts itself in the LMR's users, a free of the LMR waits (and is
        // then refused); a free that came first is seen here.
        let _no_free = lmr.0.bind_or_free.lock().unwrap_or_else(|p| p.into_inner());
        if lmr.0.freed.load(Ordering::Acquire) {
            return err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandleLmr,
                OP,
                self.object(),
                "the LMR was freed",
            );
        }
        let mut b = self.0.binding.lock().unwrap_or_else(|p| p.into_inner());
        let context = if triplet.segment_length == 0 {
            0
        } else {
            let seg = ia
                .memtable
                .resolve_local(
                    triplet.lmr_context.0,
                    triplet.virtual_address,
                    triplet.segment_length,
                    self.0.pz.0.id,
                    MemPriv::empty(),
                )
                .or_else(|_| {
                    err(
                        ErrorType::InvalidParameter,
                        Subtype::InvalidArg3,
                        OP,
                        self.object(),
                        "the triplet does not lie inside the LMR",
                    )
                })?;
            let Some(ctx) = ia.memtable.insert(
                EntryKind::Rmr,
                seg.region,
                seg.offset,
                triplet.virtual_address,
                triplet.segment_length,
                self.0.pz.0.id,
                privs,
                ia.attr.max_rmrs,
            ) else {
                return err(
                    ErrorType::InsufficientResources,
                    Subtype::ResourceMemoryRegion,
                    OP,
                    self.object(),
                    "the memory table is full",
                );
            };
            ctx
        };
        if let Some(old) = b.take() {
            ia.memtable.remove(old.context);
            old.lmr.0.users.fetch_sub(1, Ordering::AcqRel);
        }
        if context != 0 {
            lmr.0.users.fetch_add(1, Ordering::AcqRel);
            *b = Some(Binding {
                lmr: lmr.clone(),
                context,
                triplet,
                privs,
            });
        }
        drop(b);
        if !flags.contains(CompletionFlags::SUPPRESS) {
            if let Some(evd) = ep.0.request_evd.as_ref() {
                evd.0.push(
                    Event::RmrBind(RmrBindCompletion {
                        rmr: self.internal(),
                        cookie,
                        status: DtoStatus::Success,
                    }),
                    !flags.contains(CompletionFlags::UNSIGNALLED),
                );
            }
        }
        Ok(RmrContext(context))
    }

    /// The remote buffer a peer uses for this binding (`None` when unbound).
    pub fn rmr_triplet(&self) -> Option<RmrTriplet> {
        let b = self.0.binding.lock().unwrap_or_else(|p| p.into_inner());
        b.as_ref().map(|b| {
            RmrTriplet::new(
                b.context,
                b.triplet.virtual_address,
                b.triplet.segment_length,
            )
        })
    }

    /// `dat_rmr_query`.
    pub fn query(&self) -> Result<RmrParam> {
        self.check("rmr_query")?;
        let b = self.0.binding.lock().unwrap_or_else(|p| p.into_inner());
        Ok(RmrParam {
            pz_id: self.0.pz.0.id,
            lmr_triplet: b.as_ref().map(|b| b.triplet),
            privileges: b.as_ref().map(|b| b.privs).unwrap_or(MemPriv::empty()),
            rmr_context: RmrContext(b.as_ref().map_or(0, |b| b.context)),
        })
    }

    /// Frees the RMR, unbinding it (`dat_rmr_free`).
    pub fn free(&self) -> Result<()> {
        self.check("rmr_free")?;
        self.0.release();
        Ok(())
    }
}

impl RmrInner {
    pub(crate) fn release(&self) {
        if self.freed.swap(true, Ordering::AcqRel) {
            return;
        }
        let ia = &self.pz.0.ia;
        if let Some(old) = self
            .binding
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            ia.memtable.remove(old.context);
            old.lmr.0.users.fetch_sub(1, Ordering::AcqRel);
        }
        self.pz.0.unuse();
        ia.objects().rmrs.remove(&self.id);
    }
}
