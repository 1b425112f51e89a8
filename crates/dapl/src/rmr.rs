//! Remote Memory Regions (`DAT_RMR`): a window onto part of an LMR that a peer may access
//! with its own key. Binding and unbinding complete through the endpoint's request EVD.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::ep::Endpoint;
use crate::error::{err, ErrorType, Object, Result, Subtype};
use crate::event::{Event, RmrBindCompletion};
use crate::handle::{Handle, Owned};
use crate::lmr::Lmr;
use crate::mem::{EntryKind, EntryOwner};
use crate::pz::Pz;
use crate::types::{
    CompletionFlags, Cookie, DtoStatus, LmrTriplet, MemPriv, RmrContext, RmrTriplet,
};

pub(crate) struct Binding {
    /// A bound RMR holds its LMR (dropped with the binding: when it is replaced, freed, or
    /// found invalidated by a peer).
    _lmr: Lmr,
    /// Owns the memory-table entry.
    owner: Arc<BindingOwner>,
    context: u32,
    triplet: LmrTriplet,
    privs: MemPriv,
}

/// The owner of a binding's memory-table entry: told once when the entry leaves the table,
/// whoever removed it (this RMR's rebind, unbind or free, or a peer's Send with Invalidate, in
/// a link's thread). It gives back the binding's use of the LMR then, so the LMR's `users`
/// count drops exactly once per binding and `lmr_free` works after a remote invalidation. It
/// holds the count, not the LMR: the table (and so a link's thread) may drop the last
/// reference to it, which must never free an LMR there.
pub(crate) struct BindingOwner {
    lmr_users: Arc<AtomicU32>,
    gone: AtomicBool,
}

impl EntryOwner for BindingOwner {
    fn removed(&self) {
        if !self.gone.swap(true, Ordering::AcqRel) {
            self.lmr_users.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Binding {
    /// False once the entry left the table (a peer invalidated it): the RMR is unbound.
    fn live(&self) -> bool {
        !self.owner.gone.load(Ordering::Acquire)
    }

    /// Removes the entry if it is still this binding's (its owner is told, once).
    fn remove(&self, memtable: &crate::mem::MemTable) {
        let owner: Arc<dyn EntryOwner> = self.owner.clone();
        memtable.remove_owned(self.context, &owner);
    }
}

/// The binding, if still live; a binding a peer invalidated is dropped here (with its LMR
/// handle: the LMR is no longer this RMR's).
fn live_binding(b: &mut Option<Binding>) -> Option<&Binding> {
    if b.as_ref().is_some_and(|b| !b.live()) {
        *b = None;
    }
    b.as_ref()
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
        let new = if triplet.segment_length == 0 {
            None
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
            let owner = Arc::new(BindingOwner {
                lmr_users: lmr.0.users.clone(),
                gone: AtomicBool::new(false),
            });
            // Counted before the entry exists: a peer may invalidate it (its owner gives the
            // use back) as soon as it is in the table.
            lmr.0.users.fetch_add(1, Ordering::AcqRel);
            let as_dyn: Arc<dyn EntryOwner> = owner.clone();
            let Some(ctx) = ia.memtable.insert_owned(
                EntryKind::Rmr,
                seg.region,
                seg.offset,
                triplet.virtual_address,
                triplet.segment_length,
                self.0.pz.0.id,
                privs,
                ia.attr.max_rmrs,
                Some(as_dyn),
            ) else {
                lmr.0.users.fetch_sub(1, Ordering::AcqRel);
                return err(
                    ErrorType::InsufficientResources,
                    Subtype::ResourceMemoryRegion,
                    OP,
                    self.object(),
                    "the memory table is full",
                );
            };
            Some(Binding {
                _lmr: lmr.clone(),
                owner,
                context: ctx,
                triplet,
                privs,
            })
        };
        // The old binding's entry goes (unless a peer invalidated it already: its use of the
        // LMR was given back then).
        if let Some(old) = b.take() {
            old.remove(&ia.memtable);
        }
        let context = new.as_ref().map_or(0, |n| n.context);
        *b = new;
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
        let mut b = self.0.binding.lock().unwrap_or_else(|p| p.into_inner());
        live_binding(&mut b).map(|b| {
            RmrTriplet::new(
                b.context,
                b.triplet.virtual_address,
                b.triplet.segment_length,
            )
        })
    }

    /// `dat_rmr_query`. An RMR a peer's Send with Invalidate invalidated is unbound (context
    /// 0, no triplet).
    pub fn query(&self) -> Result<RmrParam> {
        self.check("rmr_query")?;
        let mut b = self.0.binding.lock().unwrap_or_else(|p| p.into_inner());
        let b = live_binding(&mut b);
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
            old.remove(&ia.memtable);
        }
        self.pz.0.unuse();
        ia.objects().rmrs.remove(&self.id);
    }
}
