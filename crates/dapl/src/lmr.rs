//! Local Memory Regions (`DAT_LMR`): memory registered with the IA.
//!
//! An LMR is allocated by the library ([`Lmr`] via `Pz::lmr_allocate`, page aligned, zeroed,
//! freed with the LMR), an owned buffer given to it (`Pz::register`, handed back by
//! `Lmr::deregister`), or lent by the caller (`Pz::lmr_register`, `unsafe`, the caller
//! promises to keep it valid). Memory that a peer may write is never exposed as a Rust slice:
//! use [`Lmr::write`] / [`Lmr::read`] to copy in and out.

use std::ops::{Bound, RangeBounds};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{err, ErrorType, Object, Result, Subtype};
use crate::mem::EntryKind;
use crate::mem::RegionMemory;
use crate::pz::Pz;
use crate::types::{LmrContext, LmrTriplet, MemPriv, RmrContext, RmrTriplet, VAddr};

pub(crate) struct LmrInner {
    pub(crate) id: u64,
    pub(crate) pz: Pz,
    pub(crate) region: Arc<RegionMemory>,
    pub(crate) context: u32,
    pub(crate) privs: MemPriv,
    /// RMRs bound to this LMR. Shared with each binding's memory-table entry owner, which
    /// gives its use back when a peer invalidates the binding (so that owner, which the link's
    /// thread may drop, never holds the LMR itself).
    pub(crate) users: Arc<AtomicU32>,
    pub(crate) freed: AtomicBool,
    /// Held by `free` from its check of `users` to the release, and by `Rmr::bind` from its
    /// check of `freed` to counting itself in `users`: a bind racing a free either counts
    /// before the free looks (the free is refused) or finds the LMR freed.
    pub(crate) bind_or_free: Mutex<()>,
}

/// A Local Memory Region (`DAT_LMR_HANDLE`). Cloning gives another handle; dropping the last
/// one frees the LMR as [`free`](Self::free) does (an RMR bound to it holds a handle), so
/// work that still names the memory (a posted DTO, a peer's RDMA) finds it deregistered.
#[derive(Clone)]
pub struct Lmr(pub(crate) Arc<LmrInner>);

impl std::fmt::Debug for Lmr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lmr({} ctx {:#x})", self.0.id, self.0.context)
    }
}

/// `DAT_LMR_PARAM`: what `Lmr::query` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LmrParam {
    /// The registered start address.
    pub registered_address: VAddr,
    /// The registered length.
    pub registered_size: u64,
    /// Privileges.
    pub privileges: MemPriv,
    /// Local key.
    pub lmr_context: LmrContext,
    /// Remote key (also valid for RDMA when remote privileges are set).
    pub rmr_context: RmrContext,
    /// The PZ id.
    pub pz_id: u64,
}

impl Pz {
    fn lmr_insert(&self, op: &'static str, region: RegionMemory, privs: MemPriv) -> Result<Lmr> {
        let ia = &self.0.ia;
        let region = Arc::new(region);
        let va = region.addr();
        let len = region.len() as u64;
        let Some(context) = ia.memtable.insert(
            EntryKind::Lmr,
            region.clone(),
            0,
            va,
            len,
            self.0.id,
            privs,
            ia.attr.max_lmrs,
        ) else {
            return err(
                ErrorType::InsufficientResources,
                Subtype::ResourceMemoryRegion,
                op,
                self.object(),
                format!("the IA already has {} LMRs", ia.attr.max_lmrs),
            );
        };
        let lmr = Lmr(Arc::new(LmrInner {
            id: ia.next_id(),
            pz: self.internal(),
            region,
            context,
            privs,
            users: Arc::new(AtomicU32::new(0)),
            freed: AtomicBool::new(false),
            bind_or_free: Mutex::new(()),
        }));
        self.0.users.fetch_add(1, Ordering::SeqCst);
        ia.objects().lmrs.insert(lmr.0.id, Arc::downgrade(&lmr.0));
        Ok(lmr)
    }

    fn lmr_checks(&self, op: &'static str, len: usize) -> Result<()> {
        self.check(op)?;
        self.0.ia.check_open(op)?;
        if len == 0 {
            return err(
                ErrorType::LengthError,
                Subtype::NoSubtype,
                op,
                self.object(),
                "an LMR cannot be empty",
            );
        }
        if len as u64 > self.0.ia.attr.max_lmr_block_size {
            return err(
                ErrorType::LengthError,
                Subtype::NoSubtype,
                op,
                self.object(),
                format!("{len} bytes is more than max_lmr_block_size"),
            );
        }
        Ok(())
    }

    /// Allocates `len` bytes of page-aligned, zeroed memory and registers it in this PZ with
    /// `privs` (`dat_lmr_create` with memory the provider owns). The pages are not touched, so
    /// large LMRs cost nothing until used.
    ///
    /// On an IA that maps library memory ([`IaAttr::map_library_memory`](crate::IaAttr)):
    /// the memory is a file of its own that connected shm peers map (read-only unless the
    /// LMR or an RMR bound to it grants REMOTE_WRITE), so that their RDMA Writes and Reads
    /// are copies in their process; if no file can be had (out of descriptors), it is
    /// ordinary memory and peers use the ring path. [`Lmr::is_mappable`] tells which.
    pub fn lmr_allocate(&self, len: usize, privs: MemPriv) -> Result<Lmr> {
        self.allocate_lmr(len, privs, self.0.ia.attr.map_library_memory)
    }

    /// [`lmr_allocate`](Self::lmr_allocate), but never mapped by peers, whatever the IA
    /// does: their RDMA to it goes through the link (ring or cross-memory attach).
    pub fn lmr_allocate_unmapped(&self, len: usize, privs: MemPriv) -> Result<Lmr> {
        self.allocate_lmr(len, privs, false)
    }

    fn allocate_lmr(&self, len: usize, privs: MemPriv, mappable: bool) -> Result<Lmr> {
        const OP: &str = "lmr_create";
        self.lmr_checks(OP, len)?;
        let shared = mappable
            .then(|| RegionMemory::allocate_shared(len).ok())
            .flatten();
        let Some(region) = shared.or_else(|| RegionMemory::allocate(len)) else {
            return err(
                ErrorType::InsufficientResources,
                Subtype::ResourceMemory,
                OP,
                self.object(),
                format!("cannot allocate {len} bytes"),
            );
        };
        self.lmr_insert(OP, region, privs)
    }

    /// Registers an owned buffer (a `Vec<u8>`, or a `Box<[u8]>`) in this PZ with `privs`:
    /// the safe way to register memory of the caller's choosing. The LMR owns the buffer until
    /// [`Lmr::deregister`] hands it back (after which the provider never touches it again); a
    /// buffer never handed back is freed with the LMR (its free, or the IA's close, and the
    /// last handle). An empty buffer is `DAT_LENGTH_ERROR`; on an error the buffer is dropped.
    pub fn register(&self, buf: impl Into<Vec<u8>>, privs: MemPriv) -> Result<Lmr> {
        const OP: &str = "lmr_create";
        let buf = buf.into();
        self.lmr_checks(OP, buf.len())?;
        let Some(region) = RegionMemory::from_vec(buf) else {
            unreachable!("lmr_checks refuses an empty buffer")
        };
        self.lmr_insert(OP, region, privs)
    }

    /// Registers caller-owned memory (`dat_lmr_create` with `DAT_MEM_TYPE_VIRTUAL`).
    ///
    /// # Safety
    /// `ptr..ptr+len` must be valid for reads and writes and stay valid (not freed, unmapped or
    /// reused) until [`Lmr::free`] has returned or the IA's close has; after that the provider
    /// never touches it again, whatever DTOs or peer operations still named it. Until then the
    /// caller must not hold Rust references to the memory: the provider, and peers with
    /// REMOTE_WRITE, may write it at any time.
    #[allow(unsafe_code)] // the one caller-memory entry point; contract above
    pub unsafe fn lmr_register(&self, ptr: NonNull<u8>, len: usize, privs: MemPriv) -> Result<Lmr> {
        const OP: &str = "lmr_create";
        self.lmr_checks(OP, len)?;
        // SAFETY: the caller's contract above is exactly `RegionMemory::from_raw`'s.
        let region = unsafe { RegionMemory::from_raw(ptr, len) };
        self.lmr_insert(OP, region, privs)
    }
}

impl Lmr {
    /// True if connected shm peers may map this LMR's memory (library memory of an IA that
    /// maps it: [`Pz::lmr_allocate`]); their RDMA to it is then a copy in their process.
    pub fn is_mappable(&self) -> bool {
        self.0.region.shared_file().is_some()
    }

    pub(crate) fn object(&self) -> Object {
        Object::new("lmr", self.0.id)
    }

    fn check(&self, op: &'static str) -> Result<()> {
        if self.0.freed.load(Ordering::Acquire) {
            return err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandleLmr,
                op,
                self.object(),
                "the LMR was freed",
            );
        }
        Ok(())
    }

    /// After a refused copy: the LMR was freed meanwhile (by another thread), rather than the
    /// range being wrong.
    fn check_not_revoked(&self, op: &'static str) -> Result<()> {
        if self.0.region.is_revoked() {
            return err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandleLmr,
                op,
                self.object(),
                "the LMR was freed",
            );
        }
        Ok(())
    }

    /// The LMR's id: unique in the process across every object kind.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// Local key (`lmr_context`).
    pub fn lmr_context(&self) -> LmrContext {
        LmrContext(self.0.context)
    }

    /// Remote key (`rmr_context`) for the whole LMR.
    pub fn rmr_context(&self) -> RmrContext {
        RmrContext(self.0.context)
    }

    /// First registered address.
    pub fn address(&self) -> VAddr {
        self.0.region.addr()
    }

    /// Registered length.
    pub fn len(&self) -> usize {
        self.0.region.len()
    }

    /// Always false (LMRs are never empty).
    pub fn is_empty(&self) -> bool {
        self.0.region.is_empty()
    }

    /// A local iov segment of `len` bytes at `offset` in this LMR (no check here; posts check).
    pub fn triplet(&self, offset: u64, len: u64) -> LmrTriplet {
        LmrTriplet::new(self.0.context, self.address().wrapping_add(offset), len)
    }

    /// The remote buffer description of `len` bytes at `offset` for a peer (whole-LMR key).
    pub fn rmr_triplet(&self, offset: u64, len: u64) -> RmrTriplet {
        RmrTriplet::new(self.0.context, self.address().wrapping_add(offset), len)
    }

    /// The local buffer of `range` (bytes of this LMR) for a DTO's I/O vector, checked:
    /// `DAT_INVALID_PARAMETER` unless the range lies inside the LMR. (`triplet` is unchecked:
    /// a DTO naming bytes outside the LMR fails when posted.)
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<LmrTriplet> {
        let (at, len) = self.range("lmr_slice", range)?;
        Ok(self.triplet(at, len))
    }

    /// The remote buffer of `range` (bytes of this LMR) to give a peer, checked as
    /// [`slice`](Self::slice). [`RmrTriplet::to_wire`] is its form for the wire.
    pub fn remote(&self, range: impl RangeBounds<usize>) -> Result<RmrTriplet> {
        let (at, len) = self.range("lmr_remote", range)?;
        Ok(self.rmr_triplet(at, len))
    }

    /// `range` as an offset and a length inside the LMR.
    fn range(&self, op: &'static str, range: impl RangeBounds<usize>) -> Result<(u64, u64)> {
        self.check(op)?;
        let start = match range.start_bound() {
            Bound::Included(&s) => Some(s),
            Bound::Excluded(&s) => s.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.checked_add(1),
            Bound::Excluded(&e) => Some(e),
            Bound::Unbounded => Some(self.len()),
        };
        match (start, end) {
            (Some(s), Some(e)) if s <= e && e <= self.len() => Ok((s as u64, (e - s) as u64)),
            _ => err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg2,
                op,
                self.object(),
                format!(
                    "{:?}..{:?} is not a range inside {} bytes",
                    range.start_bound(),
                    range.end_bound(),
                    self.len()
                ),
            ),
        }
    }

    /// Copies `data` into the LMR at `offset` (atomic stores, the last byte's last and with
    /// Release). `DAT_INVALID_PARAMETER` if it does not fit.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        const OP: &str = "lmr_write";
        self.check(OP)?;
        if !self.0.region.copy_in(offset, data) {
            self.check_not_revoked(OP)?;
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg2,
                OP,
                self.object(),
                format!(
                    "{} bytes at offset {offset} do not fit in {} bytes",
                    data.len(),
                    self.len()
                ),
            );
        }
        Ok(())
    }

    /// Copies from the LMR at `offset` into `out` (atomic loads, relaxed: see
    /// [`load_acquire`](Self::load_acquire) for polling). `DAT_INVALID_PARAMETER` if out of
    /// range.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        const OP: &str = "lmr_read";
        self.check(OP)?;
        if !self.0.region.copy_out(offset, out) {
            self.check_not_revoked(OP)?;
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg2,
                OP,
                self.object(),
                format!(
                    "{} bytes at offset {offset} are not inside {} bytes",
                    out.len(),
                    self.len()
                ),
            );
        }
        Ok(())
    }

    /// The byte at `offset`, loaded with Acquire: the way to poll memory for a peer's RDMA
    /// Write. The provider stores a placement's last byte last and with Release, so once this
    /// returns a message's last byte, [`read`](Self::read) sees all of the message. (`read`
    /// itself makes relaxed loads: polling with it alone orders nothing.)
    /// `DAT_INVALID_PARAMETER` if `offset` is not inside the LMR.
    pub fn load_acquire(&self, offset: usize) -> Result<u8> {
        const OP: &str = "lmr_load_acquire";
        self.check(OP)?;
        match self.0.region.load_acquire(offset) {
            Some(b) => Ok(b),
            None => {
                self.check_not_revoked(OP)?;
                err(
                    ErrorType::InvalidParameter,
                    Subtype::InvalidArg2,
                    OP,
                    self.object(),
                    format!("offset {offset} is not inside {} bytes", self.len()),
                )
            }
        }
    }

    /// Reads `len` bytes at `offset` into a new vector.
    pub fn to_vec(&self, offset: usize, len: usize) -> Result<Vec<u8>> {
        let mut v = vec![0; len];
        self.read(offset, &mut v)?;
        Ok(v)
    }

    /// Sets `len` bytes at `offset` to `byte`.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<()> {
        const OP: &str = "lmr_fill";
        self.check(OP)?;
        if !self.0.region.fill(offset, len, byte) {
            self.check_not_revoked(OP)?;
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg2,
                OP,
                self.object(),
                format!(
                    "{len} bytes at offset {offset} are not inside {} bytes",
                    self.len()
                ),
            );
        }
        Ok(())
    }

    /// `dat_lmr_query`.
    pub fn query(&self) -> Result<LmrParam> {
        self.check("lmr_query")?;
        Ok(LmrParam {
            registered_address: self.address(),
            registered_size: self.len() as u64,
            privileges: self.0.privs,
            lmr_context: LmrContext(self.0.context),
            rmr_context: RmrContext(self.0.context),
            pz_id: self.0.pz.0.id,
        })
    }

    /// Frees the LMR (`dat_lmr_free`); `DAT_INVALID_STATE` while an RMR is bound to it.
    /// Once it returns, the provider never reads or writes the memory again (as
    /// `ibv_dereg_mr`): work that still names it (a DTO outstanding on it, a peer's queued RDMA
    /// Read, a Write being placed) finds it revoked and breaks its connection instead.
    pub fn free(&self) -> Result<()> {
        const OP: &str = "lmr_free";
        let _no_bind = self
            .0
            .bind_or_free
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        self.check(OP)?;
        let users = self.0.users.load(Ordering::Acquire);
        if users > 0 {
            return err(
                ErrorType::InvalidState,
                Subtype::InvalidStateLmrInUse,
                OP,
                self.object(),
                format!("{users} RMRs are bound to this LMR"),
            );
        }
        self.0.release();
        Ok(())
    }
}

impl Lmr {
    /// Deregisters an LMR made by [`Pz::register`] and hands its buffer back, with what the
    /// provider and peers wrote into it. As [`free`](Self::free) (refused while an RMR is
    /// bound), and it returns only once nothing in the process can touch the buffer again.
    /// After an IA close (which freed the LMR) it still hands the buffer back, once.
    /// `DAT_INVALID_PARAMETER` for an LMR made otherwise (it stays registered: use `free`).
    pub fn deregister(&self) -> Result<Vec<u8>> {
        const OP: &str = "lmr_deregister";
        if !self.0.region.holds_vec() {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg1,
                OP,
                self.object(),
                "the LMR does not hold an owned buffer (only Pz::register makes one): use free",
            );
        }
        if let Err(e) = self.free() {
            // Freed already (the IA's close, another handle's free): the buffer is still here.
            if !self.0.freed.load(Ordering::Acquire) {
                return Err(e);
            }
        }
        match self.0.region.take_vec() {
            Some(buf) => Ok(buf),
            None => err(
                ErrorType::InvalidHandle,
                Subtype::InvalidHandleLmr,
                OP,
                self.object(),
                "the buffer was handed back already",
            ),
        }
    }
}

/// Dropping the last handle frees the LMR, as [`Lmr::free`] would (a bound RMR holds a handle,
/// so an LMR with RMRs bound is not dropped). Handles inside queued events count.
impl Drop for LmrInner {
    fn drop(&mut self) {
        self.release();
    }
}

impl LmrInner {
    pub(crate) fn release(&self) {
        if self.freed.swap(true, Ordering::AcqRel) {
            return;
        }
        let ia = &self.pz.0.ia;
        ia.memtable.remove(self.context);
        // No new access resolves the region now; revoking it refuses the accesses of work that
        // resolved it before (queued Read Responses, placements, transmit backlogs) and waits
        // for those in flight, so the caller may free its memory once this returns.
        self.region.revoke();
        self.pz.0.unuse();
        ia.objects().lmrs.remove(&self.id);
    }
}
