//! Protection Zones (`DAT_PZ`): the scope inside which endpoints, SRQs and memory may meet.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::error::{err, ErrorType, Object, Result, Subtype};
use crate::handle::{Handle, Owned};
use crate::ia::{IaInner, InterfaceAdapter};

pub(crate) struct PzInner {
    pub(crate) id: u64,
    pub(crate) ia: Arc<IaInner>,
    /// LMRs, RMRs, EPs and SRQs in the PZ (`free` is refused while any is).
    pub(crate) users: AtomicU32,
    pub(crate) freed: AtomicBool,
    /// The consumer's handles (`handle.rs`).
    handles: AtomicUsize,
}

impl PzInner {
    pub(crate) fn new(id: u64, ia: Arc<IaInner>) -> Self {
        PzInner {
            id,
            ia,
            users: AtomicU32::new(0),
            freed: AtomicBool::new(false),
            handles: AtomicUsize::new(0),
        }
    }

    /// An object of the PZ was freed: frees the PZ if the consumer's handles are gone too
    /// (SeqCst with the handle count's, as `EvdInner::unuse`).
    pub(crate) fn unuse(&self) {
        if self.users.fetch_sub(1, Ordering::SeqCst) == 1
            && self.handles.load(Ordering::SeqCst) == 0
        {
            self.release();
        }
    }
}

impl Owned for PzInner {
    fn handle_count(&self) -> &AtomicUsize {
        &self.handles
    }

    fn last_handle_dropped(self: &Arc<Self>) {
        if self.users.load(Ordering::SeqCst) == 0 {
            self.release();
        }
    }
}

/// A Protection Zone (`DAT_PZ_HANDLE`). Dropping the last handle frees it; while LMRs, RMRs,
/// EPs or SRQs are in it, when the last of them is freed.
#[derive(Clone)]
pub struct Pz(pub(crate) Handle<PzInner>);

handle_identity!(Pz);
handle_identity!(@counted Pz);

impl Pz {
    pub(crate) fn object(&self) -> Object {
        Object::new("pz", self.0.id)
    }

    pub(crate) fn check(&self, op: &'static str) -> Result<()> {
        if self.0.freed.load(Ordering::Acquire) {
            return err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandlePz,
                op,
                self.object(),
                "the PZ was freed",
            );
        }
        Ok(())
    }

    /// The PZ's id: unique in the process across every object kind.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// The IA the PZ belongs to (`dat_pz_query`).
    pub fn query(&self) -> Result<InterfaceAdapter> {
        const OP: &str = "pz_query";
        self.check(OP)?;
        match self.0.ia.handle() {
            Some(ia) => Ok(ia),
            // Not reached: the IA's last handle closes it, which frees the PZ.
            None => err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandleIa,
                OP,
                self.object(),
                "the IA was closed",
            ),
        }
    }

    /// Frees the PZ (`dat_pz_free`); `DAT_INVALID_STATE` while an EP, SRQ, LMR or RMR uses it.
    pub fn free(&self) -> Result<()> {
        const OP: &str = "pz_free";
        self.check(OP)?;
        let users = self.0.users.load(Ordering::Acquire);
        if users > 0 {
            return err(
                ErrorType::InvalidState,
                Subtype::InvalidStatePzInUse,
                OP,
                self.object(),
                format!("{users} objects still use this PZ"),
            );
        }
        self.0.release();
        Ok(())
    }
}

impl PzInner {
    fn release(&self) {
        if !self.freed.swap(true, Ordering::AcqRel) {
            self.ia.objects().pzs.remove(&self.id);
        }
    }
}
