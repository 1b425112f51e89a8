//! The memory table: STag (LMR/RMR context) -> registered range, protection zone, privileges.
//!
//! It is the single place that decides whether local or remote access to registered memory is
//! allowed. Every local iov segment is resolved here at post time, and every inbound tagged
//! placement and RDMA read request is checked here before a byte moves: STag valid (index and
//! key), PZ equal to the endpoint's, rights, and bounds with checked arithmetic.
//!
//! An STag is `index << 8 | key`; the 8-bit key changes each time an index is reused, and freed
//! indexes are reused oldest first, only once [`REUSE_AFTER`] of them are free: an index comes
//! back at most once per `REUSE_AFTER` registrations, so a stale STag (a peer's, of a freed
//! region) matches a new one only after 256 reuses of its index, that is after more than
//! 255 x `REUSE_AFTER` (261,120) registrations. STag 0 is never issued.
//!
//! An entry may have an owner ([`EntryOwner`]): it learns once that the entry left the table,
//! whoever removed it (its own unbind or free, or a peer's Send with Invalidate,
//! [`MemTable::invalidate`]). That is how a DAT RMR learns of a remote invalidation without the
//! engine knowing DAT objects.
//!
//! Local resolutions are cached per thread ([`LocalCache`]): a post resolves its segments
//! without the table's lock (two read-modify-writes of a shared word per segment, on every
//! post of every link), and the cache is good as long as no entry has left the table since it
//! was filled (`removals`, bumped under the write lock by every removal; an insertion changes
//! no entry already there).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Weak;
use std::sync::{Arc, RwLock};

use crate::mem::published::{PubEntry, Published};
use crate::mem::RegionMemory;
use crate::types::MemPriv;

/// One resolved piece of registered memory: where bytes go or come from.
#[derive(Clone, Debug)]
pub struct Seg {
    /// The memory (kept alive while the DTO that uses it is outstanding).
    pub region: Arc<RegionMemory>,
    /// Offset of the first byte inside `region`.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
}

/// The pieces of the segment list `segs` that hold its bytes `at..at + len` (fewer if the list
/// ends first), in order, as (segment index, offset inside the segment, length).
pub fn seg_span(
    segs: &[Seg],
    at: u64,
    len: usize,
) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
    let (mut skip, mut want) = (at, len);
    segs.iter().enumerate().filter_map(move |(i, s)| {
        if want == 0 {
            return None;
        }
        if skip >= s.len as u64 {
            skip -= s.len as u64;
            return None;
        }
        let off = skip as usize;
        let k = (s.len - off).min(want);
        skip = 0;
        want -= k;
        Some((i, off, k))
    })
}

/// What an entry is: an LMR's own registration or an RMR bound to part of one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// An LMR (its context serves as both lmr_context and rmr_context).
    Lmr,
    /// A bound RMR (remote access only).
    Rmr,
}

/// Who learns that a memory-table entry left the table (a bound RMR: its binding). Its
/// [`removed`](EntryOwner::removed) runs exactly once per entry, after the entry is gone and the
/// table's lock is released, whoever removed it: [`MemTable::remove`],
/// [`MemTable::remove_owned`] or a remote invalidation ([`MemTable::invalidate`]). It runs in
/// the remover's thread (a link's receive path for an invalidation), with no table lock held,
/// so it may not block on anything a link's thread waits for; it must not call back into the
/// table for the same entry.
pub trait EntryOwner: Send + Sync {
    /// The entry is gone: no access resolves its STag any more.
    fn removed(&self);
}

#[derive(Clone)]
struct Entry {
    key: u8,
    kind: EntryKind,
    region: Arc<RegionMemory>,
    /// Registered virtual address of `region` byte `region_offset`.
    base_va: u64,
    region_offset: usize,
    len: u64,
    pz: u64,
    privs: MemPriv,
    /// Told when the entry leaves the table.
    owner: Option<Arc<dyn EntryOwner>>,
}

/// Why a local segment was refused (mapped to DAT return codes by the caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalFault {
    /// No live LMR with that context.
    InvalidContext,
    /// The LMR is in another protection zone.
    PzMismatch,
    /// The LMR lacks the needed local privilege.
    Privileges,
    /// The segment lies (partly) outside the LMR.
    OutOfBounds,
}

/// Why a remote access was refused (mapped to iWARP Terminate codes by the link).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteFault {
    /// No live region with that STag.
    InvalidStag,
    /// The region is in another protection zone than the endpoint (STag not associated).
    PzMismatch,
    /// The region lacks REMOTE_READ / REMOTE_WRITE.
    AccessRights,
    /// Offset and length reach outside the region (or overflow).
    BaseBounds,
}

/// Why a remote invalidation (an inbound RFC 5040 Send with Invalidate) was refused (mapped to
/// a Terminate by the link).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidateFault {
    /// No live entry with that STag.
    InvalidStag,
    /// The entry is in another protection zone than the endpoint.
    PzMismatch,
    /// The STag is an LMR's: a registration, not a window, cannot be invalidated by a peer
    /// (as in verbs, where only memory windows and fast-registered regions can).
    NotInvalidatable,
}

/// True if `a` and `b` are the same owner (by address: the vtables of one type may differ
/// between codegen units).
fn same_owner(a: &Arc<dyn EntryOwner>, b: &Arc<dyn EntryOwner>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// The table. One per Interface Adapter.
pub struct MemTable {
    inner: RwLock<Slots>,
    /// Where remote access to mappable library memory is published for peers of the shm
    /// link (an IA that maps library memory): written under `inner`'s write lock.
    published: Option<Published>,
    /// Unique in the process: the key of this table's resolutions in [`LocalCache`].
    id: u64,
    /// How many entries have left the table (written under `inner`'s write lock, after the
    /// removal): a cached resolution made at another count may be stale.
    removals: AtomicU64,
}

/// Ids of [`MemTable`]s: never reused in a process.
static NEXT_TABLE: AtomicU64 = AtomicU64::new(1);

impl Default for MemTable {
    fn default() -> MemTable {
        MemTable {
            inner: RwLock::default(),
            published: None,
            id: NEXT_TABLE.fetch_add(1, Ordering::Relaxed),
            removals: AtomicU64::new(0),
        }
    }
}

/// What a local resolution reads of an LMR's entry.
#[derive(Clone, Copy)]
struct LocalView {
    base_va: u64,
    region_offset: usize,
    len: u64,
    pz: u64,
    privs: MemPriv,
}

impl LocalView {
    fn of(e: &Entry) -> LocalView {
        LocalView {
            base_va: e.base_va,
            region_offset: e.region_offset,
            len: e.len,
            pz: e.pz,
            privs: e.privs,
        }
    }

    /// The checks of [`MemTable::resolve_local`], in its order; the range inside the LMR.
    fn check(
        &self,
        va: u64,
        len: u64,
        pz: u64,
        need: MemPriv,
    ) -> Result<(usize, usize), LocalFault> {
        if self.pz != pz {
            return Err(LocalFault::PzMismatch);
        }
        if !self.privs.contains(need) {
            return Err(LocalFault::Privileges);
        }
        bounds(self.base_va, self.region_offset, self.len, va, len).ok_or(LocalFault::OutOfBounds)
    }
}

/// Where `len` bytes at virtual address `va` lie in the region of an entry registered at
/// `base_va` for `entry_len` bytes from `region_offset`: (offset in the region, length), or
/// None if outside (or overflowing).
fn bounds(
    base_va: u64,
    region_offset: usize,
    entry_len: u64,
    va: u64,
    len: u64,
) -> Option<(usize, usize)> {
    let off = va.checked_sub(base_va)?;
    let end = off.checked_add(len)?;
    if end > entry_len {
        return None;
    }
    let offset = region_offset.checked_add(usize::try_from(off).ok()?)?;
    Some((offset, usize::try_from(len).ok()?))
}

/// One thread's last local resolutions: (table id, removal count when filled, LMR context,
/// the entry). The region is held weakly, so a cached entry keeps no memory alive: a freed
/// LMR's region is gone once its last segment is, and its entry fails to upgrade.
struct LocalCache {
    ways: [Option<Way>; LOCAL_WAYS],
    next: usize,
}

/// One cached resolution: the table's id, its removal count when filled, the LMR context and
/// the entry (its region held weakly).
struct Way {
    table: u64,
    removals: u64,
    stag: u32,
    region: Weak<RegionMemory>,
    view: LocalView,
}

/// Entries per thread: a sink and a source of a few endpoints.
const LOCAL_WAYS: usize = 4;

thread_local! {
    static LOCAL: RefCell<LocalCache> = const {
        RefCell::new(LocalCache {
            ways: [None, None, None, None],
            next: 0,
        })
    };
}

impl LocalCache {
    /// The cached entry of `stag` in table `table` if it was filled at `removals`, its region
    /// still alive.
    fn get(table: u64, removals: u64, stag: u32) -> Option<(Arc<RegionMemory>, LocalView)> {
        LOCAL
            .try_with(|c| {
                let c = c.try_borrow().ok()?;
                let w = c
                    .ways
                    .iter()
                    .flatten()
                    .find(|w| (w.table, w.removals, w.stag) == (table, removals, stag))?;
                Some((w.region.upgrade()?, w.view))
            })
            .ok()
            .flatten()
    }

    fn put(table: u64, removals: u64, stag: u32, region: Weak<RegionMemory>, view: LocalView) {
        let _ = LOCAL.try_with(|c| {
            if let Ok(mut c) = c.try_borrow_mut() {
                let same = c.ways.iter().position(|w| {
                    w.as_ref()
                        .is_some_and(|w| (w.table, w.stag) == (table, stag))
                });
                let i = same.unwrap_or(c.next);
                if same.is_none() {
                    c.next = (c.next + 1) % LOCAL_WAYS;
                }
                c.ways[i] = Some(Way {
                    table,
                    removals,
                    stag,
                    region,
                    view,
                });
            }
        });
    }
}

#[derive(Default)]
struct Slots {
    slots: Vec<(u8, Option<Entry>)>,
    /// Freed indexes, oldest first.
    free: VecDeque<u32>,
    live: usize,
}

/// The largest index an STag can hold.
const MAX_INDEX: u32 = (1 << 24) - 1;

/// Freed indexes are reused (oldest first) only once this many are free, or when no fresh
/// index is left: a table that registers and frees one region over and over cycles through
/// this many indexes (a slot each, about 80 bytes) instead of wrapping one index's key.
pub(crate) const REUSE_AFTER: usize = 1024;

impl MemTable {
    /// A table that publishes remote access to mappable library memory in `published`.
    pub fn with_published(published: Published) -> MemTable {
        MemTable {
            published: Some(published),
            ..MemTable::default()
        }
    }

    /// The published table, if this table has one.
    pub fn published(&self) -> Option<&Published> {
        self.published.as_ref()
    }

    /// What a peer endpoint in `pz` may map of `stag`'s region: the region, if it is mappable
    /// library memory and the entry grants that PZ a remote right, and whether the mapping may
    /// be writable (`want_write` and REMOTE_WRITE).
    pub fn map_grant(
        &self,
        stag: u32,
        pz: u64,
        want_write: bool,
    ) -> Option<(Arc<RegionMemory>, bool)> {
        self.with_entry(stag, |e| {
            let e = e.filter(|e| e.pz == pz && e.region.shared_file().is_some())?;
            if !e
                .privs
                .intersects(MemPriv::REMOTE_READ | MemPriv::REMOTE_WRITE)
            {
                return None;
            }
            let writable = want_write && e.privs.contains(MemPriv::REMOTE_WRITE);
            Some((e.region.clone(), writable))
        })
    }

    /// Registers `len` bytes of `region` starting at `region_offset`, seen at virtual address
    /// `base_va`. Returns the STag, or None when the table is full (`max` entries).
    #[allow(clippy::too_many_arguments)]
    pub fn insert(
        &self,
        kind: EntryKind,
        region: Arc<RegionMemory>,
        region_offset: usize,
        base_va: u64,
        len: u64,
        pz: u64,
        privs: MemPriv,
        max: usize,
    ) -> Option<u32> {
        self.insert_owned(
            kind,
            region,
            region_offset,
            base_va,
            len,
            pz,
            privs,
            max,
            None,
        )
    }

    /// [`insert`](Self::insert) with an owner, told once when the entry leaves the table.
    #[allow(clippy::too_many_arguments)]
    pub fn insert_owned(
        &self,
        kind: EntryKind,
        region: Arc<RegionMemory>,
        region_offset: usize,
        base_va: u64,
        len: u64,
        pz: u64,
        privs: MemPriv,
        max: usize,
        owner: Option<Arc<dyn EntryOwner>>,
    ) -> Option<u32> {
        let mut t = self.inner.write().unwrap_or_else(|p| p.into_inner());
        if t.live >= max {
            return None;
        }
        // Index 0 is skipped so that no STag is 0.
        if t.slots.is_empty() {
            t.slots.push((0, None));
        }
        let fresh_left = t.slots.len() as u32 <= MAX_INDEX;
        let index = if t.free.len() >= REUSE_AFTER || !fresh_left {
            t.free.pop_front()?
        } else {
            let i = t.slots.len() as u32;
            t.slots.push((0, None));
            i
        };
        let slot = &mut t.slots[index as usize];
        slot.0 = slot.0.wrapping_add(1);
        let key = slot.0;
        slot.1 = Some(Entry {
            key,
            kind,
            region,
            base_va,
            region_offset,
            len,
            pz,
            privs,
            owner,
        });
        t.live += 1;
        let stag = index << 8 | key as u32;
        if let Some(p) = &self.published {
            let e = t.slots[index as usize].1.as_ref().expect("just filled");
            let rights = e.privs & (MemPriv::REMOTE_READ | MemPriv::REMOTE_WRITE);
            if let (Some((region, _)), false) = (e.region.shared_file(), rights.is_empty()) {
                p.publish(&PubEntry {
                    stag,
                    rights,
                    pz: e.pz,
                    region,
                    file_offset: e.region_offset as u64,
                    base_va: e.base_va,
                    len: e.len,
                });
            }
        }
        Some(stag)
    }

    /// Removes the entry for `stag`; true if it was there. Its owner, if any, is told.
    pub fn remove(&self, stag: u32) -> bool {
        self.remove_if(stag, |_| true).is_some()
    }

    /// Removes the entry for `stag` only if `owner` owns it (a stale STag whose index now
    /// names another entry is left alone); true if it was there. `owner` is told.
    pub fn remove_owned(&self, stag: u32, owner: &Arc<dyn EntryOwner>) -> bool {
        self.remove_if(stag, |e| {
            e.owner.as_ref().is_some_and(|o| same_owner(o, owner))
        })
        .is_some()
    }

    /// A peer's Send with Invalidate (RFC 5040) names `stag` for an endpoint in `pz`: only a
    /// bound RMR (a window) of that PZ can be invalidated. It leaves the table at once (every
    /// later access with the STag is refused as an invalid STag) and its owner is told.
    pub fn invalidate(&self, stag: u32, pz: u64) -> Result<(), InvalidateFault> {
        let mut fault = InvalidateFault::InvalidStag;
        let removed = self.remove_if(stag, |e| {
            fault = if e.pz != pz {
                InvalidateFault::PzMismatch
            } else if e.kind != EntryKind::Rmr {
                InvalidateFault::NotInvalidatable
            } else {
                return true;
            };
            false
        });
        removed.map(|_| ()).ok_or(fault)
    }

    /// Removes the live entry for `stag` if `pred` accepts it, then (the lock released) tells
    /// its owner. Returns the removed entry.
    fn remove_if(&self, stag: u32, pred: impl FnOnce(&Entry) -> bool) -> Option<Entry> {
        let removed = {
            let mut t = self.inner.write().unwrap_or_else(|p| p.into_inner());
            let index = (stag >> 8) as usize;
            let key = stag as u8;
            let slot = match t.slots.get_mut(index) {
                Some((_, slot)) if slot.as_ref().is_some_and(|e| e.key == key) => slot,
                _ => return None,
            };
            if !pred(slot.as_ref().expect("checked above")) {
                return None;
            }
            let e = slot.take();
            t.free.push_back(index as u32);
            t.live -= 1;
            if let Some(p) = &self.published {
                // Before the lock goes: no access resolves the STag here, and no peer
                // library's check passes, once the removal is done.
                p.withdraw(stag);
            }
            // Release, before the lock goes: a thread that sees the new count (a post that
            // happens after this removal) resolves through the table, not its cache.
            self.removals.fetch_add(1, Ordering::Release);
            e
        };
        if let Some(o) = removed.as_ref().and_then(|e| e.owner.as_ref()) {
            o.removed();
        }
        removed
    }

    /// Number of live entries.
    #[allow(dead_code)]
    pub fn len(&self) -> usize {
        self.inner.read().unwrap_or_else(|p| p.into_inner()).live
    }

    /// True when nothing is registered.
    #[allow(dead_code)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn with_entry<R>(&self, stag: u32, f: impl FnOnce(Option<&Entry>) -> R) -> R {
        let t = self.inner.read().unwrap_or_else(|p| p.into_inner());
        let index = (stag >> 8) as usize;
        let e = t
            .slots
            .get(index)
            .and_then(|(_, e)| e.as_ref())
            .filter(|e| e.key == stag as u8);
        f(e)
    }

    /// Resolves a range inside an entry to a segment, checking bounds without overflow.
    fn slice(e: &Entry, va: u64, len: u64) -> Option<Seg> {
        let (offset, len) = bounds(e.base_va, e.region_offset, e.len, va, len)?;
        Some(Seg {
            region: e.region.clone(),
            offset,
            len,
        })
    }

    /// Resolves one local iov segment of an LMR for a DTO on an endpoint or SRQ in `pz` that
    /// needs `need` (LOCAL_READ for a source, LOCAL_WRITE for a sink). From this thread's
    /// cache when nothing left the table since this LMR was last resolved here (Acquire: pairs
    /// with a removal's count), else under the lock.
    pub fn resolve_local(
        &self,
        lmr_context: u32,
        va: u64,
        len: u64,
        pz: u64,
        need: MemPriv,
    ) -> Result<Seg, LocalFault> {
        let seg = |region, v: LocalView| {
            let (offset, len) = v.check(va, len, pz, need)?;
            Ok(Seg {
                region,
                offset,
                len,
            })
        };
        let removals = self.removals.load(Ordering::Acquire);
        if let Some((region, v)) = LocalCache::get(self.id, removals, lmr_context) {
            return seg(region, v);
        }
        let found = self.with_entry(lmr_context, |e| {
            let e = e.filter(|e| e.kind == EntryKind::Lmr)?;
            // The count read under the lock: that of the table the entry was read from.
            let removals = self.removals.load(Ordering::Relaxed);
            Some((e.region.clone(), LocalView::of(e), removals))
        });
        let Some((region, v, removals)) = found else {
            return Err(LocalFault::InvalidContext);
        };
        LocalCache::put(self.id, removals, lmr_context, Arc::downgrade(&region), v);
        seg(region, v)
    }

    /// Checks an inbound remote access of `len` bytes at tagged offset `to` under `stag`, for an
    /// endpoint in `pz`, needing `need` (REMOTE_READ or REMOTE_WRITE).
    pub fn resolve_remote(
        &self,
        stag: u32,
        to: u64,
        len: u64,
        pz: u64,
        need: MemPriv,
    ) -> Result<Seg, RemoteFault> {
        self.with_entry(stag, |e| {
            let e = e.ok_or(RemoteFault::InvalidStag)?;
            if e.pz != pz {
                return Err(RemoteFault::PzMismatch);
            }
            if !e.privs.contains(need) {
                return Err(RemoteFault::AccessRights);
            }
            Self::slice(e, to, len).ok_or(RemoteFault::BaseBounds)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_with_region(privs: MemPriv) -> (MemTable, u32, u64) {
        let t = MemTable::default();
        let r = Arc::new(RegionMemory::allocate(4096).unwrap());
        let va = r.addr();
        let stag = t
            .insert(EntryKind::Lmr, r, 0, va, 4096, 7, privs, 16)
            .unwrap();
        (t, stag, va)
    }

    #[test]
    fn seg_span_names_the_pieces_of_a_byte_range() {
        let r = Arc::new(RegionMemory::allocate(64).unwrap());
        let seg = |offset, len| Seg {
            region: r.clone(),
            offset,
            len,
        };
        let segs = [seg(0, 4), seg(10, 6), seg(20, 5)]; // 15 bytes
        let span = |at, len| seg_span(&segs, at, len).collect::<Vec<_>>();
        assert_eq!(span(0, 15), [(0, 0, 4), (1, 0, 6), (2, 0, 5)]);
        assert_eq!(span(3, 3), [(0, 3, 1), (1, 0, 2)]);
        assert_eq!(span(4, 6), [(1, 0, 6)]);
        assert_eq!(span(12, 100), [(2, 2, 3)]); // the list ends first
        assert_eq!(span(15, 1), []);
        assert_eq!(span(2, 0), []);
    }

    #[test]
    fn stag_zero_is_never_issued() {
        let (_t, stag, _) = table_with_region(MemPriv::ALL);
        assert_ne!(stag, 0);
        assert_ne!(stag >> 8, 0);
    }

    #[test]
    fn remote_access_checks_stag_pz_rights_and_bounds() {
        let (t, stag, va) = table_with_region(MemPriv::LOCAL_READ | MemPriv::REMOTE_WRITE);
        assert!(t
            .resolve_remote(stag, va, 4096, 7, MemPriv::REMOTE_WRITE)
            .is_ok());
        assert_eq!(
            t.resolve_remote(stag ^ 1, va, 1, 7, MemPriv::REMOTE_WRITE)
                .unwrap_err(),
            RemoteFault::InvalidStag
        );
        assert_eq!(
            t.resolve_remote(stag, va, 1, 8, MemPriv::REMOTE_WRITE)
                .unwrap_err(),
            RemoteFault::PzMismatch
        );
        assert_eq!(
            t.resolve_remote(stag, va, 1, 7, MemPriv::REMOTE_READ)
                .unwrap_err(),
            RemoteFault::AccessRights
        );
        assert_eq!(
            t.resolve_remote(stag, va + 1, 4096, 7, MemPriv::REMOTE_WRITE)
                .unwrap_err(),
            RemoteFault::BaseBounds
        );
        assert_eq!(
            t.resolve_remote(stag, va - 1, 1, 7, MemPriv::REMOTE_WRITE)
                .unwrap_err(),
            RemoteFault::BaseBounds
        );
        assert_eq!(
            t.resolve_remote(stag, u64::MAX, 2, 7, MemPriv::REMOTE_WRITE)
                .unwrap_err(),
            RemoteFault::BaseBounds
        );
        assert_eq!(
            t.resolve_remote(stag, va + 8, u64::MAX, 7, MemPriv::REMOTE_WRITE)
                .unwrap_err(),
            RemoteFault::BaseBounds
        );
    }

    #[test]
    fn local_resolution_checks_context_pz_privileges_and_bounds_from_the_cache_as_from_the_table() {
        let (t, stag, va) = table_with_region(MemPriv::LOCAL_READ);
        let rw = MemPriv::LOCAL_READ;
        // Twice each: the first fills this thread's cache, the second is answered from it.
        for _ in 0..2 {
            let seg = t.resolve_local(stag, va + 8, 16, 7, rw).unwrap();
            assert_eq!((seg.offset, seg.len), (8, 16));
            assert_eq!(
                t.resolve_local(stag ^ 1, va, 1, 7, rw).unwrap_err(),
                LocalFault::InvalidContext
            );
            assert_eq!(
                t.resolve_local(stag, va, 1, 8, rw).unwrap_err(),
                LocalFault::PzMismatch
            );
            assert_eq!(
                t.resolve_local(stag, va, 1, 7, MemPriv::LOCAL_WRITE)
                    .unwrap_err(),
                LocalFault::Privileges
            );
            for (at, len) in [
                (va + 1, 4096),
                (va - 1, 1),
                (u64::MAX, 2),
                (va + 8, u64::MAX),
            ] {
                assert_eq!(
                    t.resolve_local(stag, at, len, 7, rw).unwrap_err(),
                    LocalFault::OutOfBounds
                );
            }
        }
    }

    #[test]
    fn a_cached_local_resolution_is_refused_once_its_lmr_left_the_table_in_any_thread() {
        let t = Arc::new(MemTable::default());
        let r = Arc::new(RegionMemory::allocate(4096).unwrap());
        let va = r.addr();
        let stag = t
            .insert(EntryKind::Lmr, r.clone(), 0, va, 4096, 7, MemPriv::ALL, 16)
            .unwrap();
        // Resolved (and cached) here and in another thread; `r` stays alive, as an
        // outstanding DTO's segment keeps it.
        t.resolve_local(stag, va, 8, 7, MemPriv::LOCAL_READ)
            .unwrap();
        let (to_main, from_worker) = std::sync::mpsc::channel();
        let (to_worker, from_main) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn({
            let t = t.clone();
            move || {
                let first = t.resolve_local(stag, va, 8, 7, MemPriv::LOCAL_READ).is_ok();
                to_main.send(()).unwrap();
                from_main.recv().unwrap();
                (first, t.resolve_local(stag, va, 8, 7, MemPriv::LOCAL_READ))
            }
        });
        from_worker.recv().unwrap();
        assert!(t.remove(stag));
        to_worker.send(()).unwrap();
        let (first, after) = worker.join().unwrap();
        assert!(first);
        assert_eq!(after.unwrap_err(), LocalFault::InvalidContext);
        assert_eq!(
            t.resolve_local(stag, va, 8, 7, MemPriv::LOCAL_READ)
                .unwrap_err(),
            LocalFault::InvalidContext
        );
        drop(r);
    }

    #[test]
    fn a_repeated_local_resolution_takes_no_table_lock() {
        let (t, stag, va) = table_with_region(MemPriv::LOCAL_READ);
        let t = Arc::new(t);
        let (to_main, from_worker) = std::sync::mpsc::channel();
        let (to_worker, from_main) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn({
            let t = t.clone();
            move || {
                t.resolve_local(stag, va, 8, 7, MemPriv::LOCAL_READ)
                    .unwrap();
                to_main.send(false).unwrap();
                from_main.recv().unwrap();
                // The table is write-locked by the main thread now.
                let again = t.resolve_local(stag, va, 8, 7, MemPriv::LOCAL_READ).is_ok();
                to_main.send(again).unwrap();
            }
        });
        assert!(!from_worker.recv().unwrap());
        let held = t.inner.write().unwrap();
        to_worker.send(()).unwrap();
        let answered = from_worker.recv_timeout(std::time::Duration::from_secs(10));
        drop(held);
        assert_eq!(
            answered,
            Ok(true),
            "the second resolution waited for the lock"
        );
        worker.join().unwrap();
    }

    #[test]
    fn a_reused_index_gets_a_new_key() {
        let (t, stag, va) = table_with_region(MemPriv::ALL);
        assert!(t.remove(stag));
        assert!(!t.remove(stag));
        let r = Arc::new(RegionMemory::allocate(4096).unwrap());
        // The index comes back once REUSE_AFTER indexes are free, with another key.
        let mut reused = None;
        for _ in 0..=REUSE_AFTER {
            let s = t
                .insert(EntryKind::Lmr, r.clone(), 0, va, 4096, 7, MemPriv::ALL, 16)
                .unwrap();
            if s >> 8 == stag >> 8 {
                reused = Some(s);
                break;
            }
            assert!(t.remove(s));
        }
        let stag2 = reused.expect("the index is reused after REUSE_AFTER frees");
        assert_ne!(stag, stag2);
        assert_eq!(
            t.resolve_remote(stag, va, 1, 7, MemPriv::REMOTE_READ)
                .unwrap_err(),
            RemoteFault::InvalidStag
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "261,120 registrations take too long under Miri")]
    fn a_freed_stag_matches_no_new_region_for_255_times_reuse_after_registrations() {
        // Register and free one region over and over (as a program that registers a buffer
        // per message does): the first STag must not be issued again, or a peer that kept it
        // would reach the new region.
        let (t, first, va) = table_with_region(MemPriv::ALL);
        assert!(t.remove(first));
        let r = Arc::new(RegionMemory::allocate(4096).unwrap());
        for n in 0..255 * REUSE_AFTER {
            let s = t
                .insert(EntryKind::Lmr, r.clone(), 0, va, 4096, 7, MemPriv::ALL, 16)
                .unwrap();
            assert_ne!(s, first, "registration {n} got the freed STag again");
            assert!(t.remove(s));
        }
    }

    /// Counts the calls of its `removed`.
    #[derive(Default)]
    struct Counter(std::sync::atomic::AtomicUsize);

    impl EntryOwner for Counter {
        fn removed(&self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    impl Counter {
        fn calls(&self) -> usize {
            self.0.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    fn owned_window(t: &MemTable, r: &Arc<RegionMemory>, pz: u64) -> (u32, Arc<Counter>) {
        let c = Arc::new(Counter::default());
        let owner: Arc<dyn EntryOwner> = c.clone();
        let stag = t
            .insert_owned(
                EntryKind::Rmr,
                r.clone(),
                0,
                r.addr(),
                64,
                pz,
                MemPriv::REMOTE_WRITE,
                1 << 12,
                Some(owner),
            )
            .unwrap();
        (stag, c)
    }

    #[test]
    fn invalidate_removes_only_a_window_of_the_endpoints_pz_and_tells_its_owner_once() {
        let (t, lmr, va) = table_with_region(MemPriv::ALL);
        let r = Arc::new(RegionMemory::allocate(64).unwrap());
        let (win, owner) = owned_window(&t, &r, 7);
        // An LMR's STag is not invalidatable; a window of another PZ is protected; nothing
        // changes either way.
        assert_eq!(t.invalidate(lmr, 7), Err(InvalidateFault::NotInvalidatable));
        assert_eq!(t.invalidate(win, 8), Err(InvalidateFault::PzMismatch));
        assert_eq!(t.invalidate(lmr, 8), Err(InvalidateFault::PzMismatch));
        assert_eq!(t.invalidate(win ^ 1, 7), Err(InvalidateFault::InvalidStag));
        assert_eq!(t.invalidate(0, 7), Err(InvalidateFault::InvalidStag));
        assert_eq!(owner.calls(), 0);
        assert!(t
            .resolve_remote(lmr, va, 1, 7, MemPriv::REMOTE_WRITE)
            .is_ok());
        assert!(t
            .resolve_remote(win, r.addr(), 64, 7, MemPriv::REMOTE_WRITE)
            .is_ok());
        // The window goes, once.
        assert_eq!(t.invalidate(win, 7), Ok(()));
        assert_eq!(owner.calls(), 1);
        assert_eq!(
            t.resolve_remote(win, r.addr(), 1, 7, MemPriv::REMOTE_WRITE)
                .unwrap_err(),
            RemoteFault::InvalidStag
        );
        assert_eq!(t.invalidate(win, 7), Err(InvalidateFault::InvalidStag));
        let as_dyn: Arc<dyn EntryOwner> = owner.clone();
        assert!(!t.remove_owned(win, &as_dyn), "already gone");
        assert!(!t.remove(win));
        assert_eq!(owner.calls(), 1, "told exactly once");
    }

    #[test]
    fn remove_owned_leaves_an_entry_of_another_owner_alone() {
        let t = MemTable::default();
        let r = Arc::new(RegionMemory::allocate(64).unwrap());
        let (a, owner_a) = owned_window(&t, &r, 7);
        let (b, owner_b) = owned_window(&t, &r, 7);
        let dyn_a: Arc<dyn EntryOwner> = owner_a.clone();
        let dyn_b: Arc<dyn EntryOwner> = owner_b.clone();
        // A's owner cannot remove B's entry, even by B's STag.
        assert!(!t.remove_owned(b, &dyn_a));
        assert!(t
            .resolve_remote(b, r.addr(), 1, 7, MemPriv::REMOTE_WRITE)
            .is_ok());
        assert!(t.remove_owned(a, &dyn_a));
        assert_eq!((owner_a.calls(), owner_b.calls()), (1, 0));
        // A stale context whose index was reused: the new entry stays. Free indexes come back
        // once REUSE_AFTER are free.
        let mut reused = None;
        for _ in 0..=REUSE_AFTER {
            let (s, o) = owned_window(&t, &r, 7);
            if s >> 8 == a >> 8 {
                reused = Some((s, o));
                break;
            }
            let d: Arc<dyn EntryOwner> = o.clone();
            assert!(t.remove_owned(s, &d));
        }
        let (s, o) = reused.expect("the index is reused");
        assert!(!t.remove_owned(a, &dyn_a));
        assert!(
            !t.remove_owned(s, &dyn_a),
            "another owner's entry at the same STag"
        );
        assert_eq!(o.calls(), 0);
        assert!(t.remove_owned(b, &dyn_b));
        // A plain remove tells the owner too.
        assert!(t.remove(s));
        assert_eq!((owner_a.calls(), owner_b.calls(), o.calls()), (1, 1, 1));
    }

    #[test]
    fn table_refuses_entries_beyond_its_limit() {
        let t = MemTable::default();
        let r = Arc::new(RegionMemory::allocate(64).unwrap());
        assert!(t
            .insert(EntryKind::Lmr, r.clone(), 0, 0, 64, 1, MemPriv::ALL, 1)
            .is_some());
        assert!(t
            .insert(EntryKind::Lmr, r, 0, 0, 64, 1, MemPriv::ALL, 1)
            .is_none());
    }
}
