//! Raw registered memory: the one place in `dapl` (besides nothing else) that touches memory
//! through pointers.
//!
//! Memory a peer may write is never handed out as `&[u8]`/`&mut [u8]`: every access is a
//! bounds-checked copy (`copy_in`, `copy_out`, `copy_to`, `fill`, `load_acquire`). All bounds
//! checks use checked arithmetic and happen here, so no caller can make these functions touch a
//! byte outside the region, whatever offsets a peer sends.
//!
//! Memory model: region memory is written concurrently by the engine's threads (a placement in
//! the progress thread, a polling consumer placing for another connection, the loopback
//! poster), by the consumer (`Lmr::write`), by the kernel (`recvmsg`) and by C code, so every
//! access made from Rust is *atomic*, never a plain copy (a plain copy racing any other access is
//! undefined behaviour in Rust's model, whatever the hardware does). The granularity is fixed
//! per address, so that two accesses to one byte always have the same size (Rust's model
//! forbids racing atomic writes of different sizes): a byte whose aligned 8-byte word lies
//! wholly inside the region is always accessed through that word (an `AtomicU64`; a copy that
//! covers only part of the word updates its bytes with a compare-exchange, leaving the others
//! as they are, so two placements into neighbouring bytes never undo each other); the few bytes
//! at either end whose word sticks out of the region are accessed one by one (`AtomicU8`).
//! Copies are relaxed, except the unit that holds a copy's last byte, which is stored with
//! Release: a consumer that sees that byte with [`RegionMemory::load_acquire`] sees the whole
//! copy (and C consumers polling the last byte, as dtest -W does, see it stored last on x86-64,
//! where stores are not reordered with each other). Kernel copies (`sendmsg`, `recvmsg`,
//! `process_vm_readv`) are outside the Rust model and stay as they are, but one that places
//! a message into registered memory leaves its last byte (`pull_from`: the unit holding it)
//! to a Release store afterwards, so a poller sees it last there too. The one case left: two registrations of
//! overlapping memory with different ends can reach one byte as a word through one and as a
//! byte through the other (both atomic; coherent on every target Linux runs on).
//!
//! Revocation: every access (a copy, or a `sendmsg`/`recvmsg` that names the region) runs as
//! one *access* counted in the region's state, and [`RegionMemory::revoke`] (LMR free, IA
//! close) marks the region revoked, then waits until the accesses in flight have ended. An
//! access that starts after the mark is refused without touching a byte. So once `revoke`
//! returns, nothing in the process reads or writes the region again, however long work that
//! resolved it before (a queued Read Response, a placement in another thread, a transmit
//! backlog) lives on: caller memory may then be freed. Memory that nothing revokes (the shm
//! link's rings, which only the link holds: [`RegionMemory::never_revoked`]) skips the count.
#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Page size used for library-allocated regions.
pub const PAGE_SIZE: usize = 4096;

/// A block of memory registered with the library: allocated by it (page aligned, zeroed,
/// freed on drop), an owned buffer given to it (handed back once revoked, or freed on drop), or
/// lent by the caller (never freed here).
pub struct RegionMemory {
    ptr: NonNull<u8>,
    len: usize,
    owner: Owner,
    /// [`REVOKED`] once revoked; below it, the number of accesses in flight.
    state: AtomicU64,
    /// A mapping without PROT_WRITE ([`RegionMemory::map_shared_read_only`]): every write
    /// entry point refuses it, so nothing stores into it (a store would fault).
    read_only: bool,
    /// Accesses are counted in `state` (false only for [`RegionMemory::never_revoked`]
    /// memory, which nothing revokes).
    counted: bool,
    /// The span of whole aligned words, offsets `lo..hi` ([`RegionMemory::word_span`]): fixed
    /// by the address and length, so worked out once, not on every copy.
    span: (usize, usize),
}

/// Who frees a region's memory.
enum Owner {
    /// Allocated by [`RegionMemory::allocate`] with this layout; freed on drop.
    Alloc(Layout),
    /// The buffer of a `Vec<u8>` of this capacity ([`RegionMemory::from_vec`]): handed back
    /// by [`RegionMemory::take_vec`] once revoked (`taken`), else freed on drop.
    Vec { cap: usize, taken: AtomicBool },
    /// Lent by the caller ([`RegionMemory::from_raw`]); never freed here.
    Lent,
    /// A shared mapping of a file ([`RegionMemory::map_shared`]); unmapped on drop.
    Mapped,
    /// Library memory backed by a memfd of its own ([`RegionMemory::allocate_shared`]) that
    /// peers of the shm link may map: the file (sealed against resizing), the region's
    /// process-unique id, and the mapping's length (whole pages). Unmapped on drop; the pages
    /// live on while a peer maps them, and belong to this region alone.
    Memfd {
        fd: OwnedFd,
        id: u64,
        map_len: usize,
    },
}

/// Ids of [`RegionMemory::allocate_shared`] regions: never reused in a process.
static NEXT_SHARED_ID: AtomicU64 = AtomicU64::new(1);

/// A memfd of `len` bytes named `name`, sealed against shrinking, growing and further seals:
/// a peer that maps it can rely on its size (a shrunk file would fault under the mapping).
pub(crate) fn sealed_memfd(name: &str, len: usize) -> io::Result<OwnedFd> {
    use rustix::fs::{MemfdFlags, SealFlags};
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    rustix::fs::ftruncate(&fd, len as u64)?;
    rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
    Ok(fd)
}

/// `mmap` of the first `len` bytes of `fd`, shared, readable and (if `writable`) writable;
/// with `populate`, every page is mapped now (MAP_POPULATE), not at its first touch.
fn mmap_shared(
    fd: BorrowedFd<'_>,
    len: usize,
    writable: bool,
    populate: bool,
) -> io::Result<NonNull<u8>> {
    if len == 0 || len > isize::MAX as usize {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    let prot = if writable {
        libc::PROT_READ | libc::PROT_WRITE
    } else {
        libc::PROT_READ
    };
    // SAFETY: a fresh mapping chosen by the kernel (no address hint, so nothing existing is
    // replaced); the result is checked before use.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            prot,
            libc::MAP_SHARED | if populate { libc::MAP_POPULATE } else { 0 },
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(p.cast::<u8>()).ok_or_else(|| io::ErrorKind::Other.into())
}

/// The bit of [`RegionMemory::state`] that marks a revoked region.
const REVOKED: u64 = 1 << 63;

/// One access in flight (see the module doc); ends when dropped. None: an access to memory
/// that is never revoked, not counted.
struct Access<'a>(Option<&'a RegionMemory>);

impl Drop for Access<'_> {
    fn drop(&mut self) {
        if let Some(mem) = self.0 {
            // Release: the access's reads and writes happen before a `revoke` that sees it
            // ended.
            mem.state.fetch_sub(1, Ordering::Release);
        }
    }
}

/// The error of a gathered send or scattered receive that names a revoked region.
#[derive(Debug)]
struct Revoked;

impl std::fmt::Display for Revoked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the registered memory was deregistered")
    }
}

impl std::error::Error for Revoked {}

/// The error [`send_gather`] and [`recv_scatter`] return for a revoked region (and that a
/// caller reports for one it found revoked itself).
pub fn revoked_error() -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, Revoked)
}

/// True if `e` is the error of [`send_gather`] or [`recv_scatter`] for a revoked region
/// (nothing was sent or received).
pub fn is_revoked_error(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|r| r.is::<Revoked>())
}

// SAFETY: RegionMemory is a pointer and a length to memory that is either owned by this value or
// guaranteed valid by the caller of `from_raw` for the region's lifetime. Every access from Rust
// is atomic (module doc), so concurrent accesses from several threads are not data races, and
// the only references to the memory ever created are to atomics (`UnsafeCell`), which allow
// concurrent mutation.
unsafe impl Send for RegionMemory {}
// SAFETY: as for Send: `&RegionMemory` only permits bounds-checked atomic copies.
unsafe impl Sync for RegionMemory {}

impl RegionMemory {
    /// A region of `len` bytes at `ptr`, its accesses counted.
    fn with_parts(ptr: NonNull<u8>, len: usize, owner: Owner, read_only: bool) -> Self {
        let a = ptr.as_ptr() as usize;
        let lo = a.next_multiple_of(WORD) - a;
        // Saturating: a region too small to hold a word boundary (1 byte at an address ending
        // in 5) has its last boundary below its start.
        let hi = ((a + len) / WORD * WORD).saturating_sub(a);
        RegionMemory {
            ptr,
            len,
            owner,
            state: AtomicU64::new(0),
            counted: true,
            read_only,
            span: if lo < hi { (lo, hi) } else { (len, len) },
        }
    }

    /// Allocates `len` zeroed bytes, page aligned. `len` must be > 0. Large allocations are
    /// served by the kernel lazily (the pages are not touched here).
    pub fn allocate(len: usize) -> Option<Self> {
        if len == 0 || len > isize::MAX as usize - PAGE_SIZE {
            return None;
        }
        let layout = Layout::from_size_align(len, PAGE_SIZE).ok()?;
        // SAFETY: layout has a non-zero size (checked above).
        let p = unsafe { alloc::alloc_zeroed(layout) };
        NonNull::new(p).map(|ptr| RegionMemory::with_parts(ptr, len, Owner::Alloc(layout), false))
    }

    /// Takes an owned buffer as a region (None if it is empty). The buffer comes back with
    /// [`take_vec`](Self::take_vec) once the region is revoked, or is freed with the region.
    pub fn from_vec(v: Vec<u8>) -> Option<Self> {
        if v.is_empty() {
            return None;
        }
        let mut v = ManuallyDrop::new(v);
        Some(RegionMemory::with_parts(
            NonNull::new(v.as_mut_ptr())?,
            v.len(),
            Owner::Vec {
                cap: v.capacity(),
                taken: AtomicBool::new(false),
            },
            false,
        ))
    }

    /// True for a region made by [`from_vec`](Self::from_vec).
    pub fn holds_vec(&self) -> bool {
        matches!(self.owner, Owner::Vec { .. })
    }

    /// Revokes a [`from_vec`](Self::from_vec) region ([`revoke`](Self::revoke): waits for the
    /// accesses in flight) and hands its buffer back, once; None for other regions or when
    /// the buffer was handed back already.
    pub fn take_vec(&self) -> Option<Vec<u8>> {
        let Owner::Vec { cap, taken } = &self.owner else {
            return None;
        };
        self.revoke();
        if taken.swap(true, Ordering::AcqRel) {
            return None;
        }
        // SAFETY: ptr, len and cap are those of the `Vec<u8>` `from_vec` forgot; `taken` makes
        // this the one place that rebuilds it (drop then leaves it alone); `revoke` returned,
        // so no access reads or writes the buffer again (module doc).
        Some(unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), self.len, *cap) })
    }

    /// Wraps memory the caller owns.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be valid for reads and writes, and stay valid (not freed, unmapped
    /// or reused) until [`revoke`](Self::revoke) has returned or this value is dropped,
    /// whichever comes first; until then the caller must not create Rust references to it
    /// (the library and peers may write it at any time).
    pub unsafe fn from_raw(ptr: NonNull<u8>, len: usize) -> Self {
        RegionMemory::with_parts(ptr, len, Owner::Lent, false)
    }

    /// Maps the first `len` bytes of the file `fd` shared, for reading and writing: memory
    /// another process maps too (the shm link's rings). Unmapped when the region is dropped.
    /// Every access from this process is atomic (module doc), so the other process's writes
    /// are never a data race here; what it writes is data to validate, never trusted.
    pub fn map_shared(fd: BorrowedFd<'_>, len: usize) -> io::Result<Self> {
        Self::map_shared_rw(fd, len, false)
    }

    /// [`map_shared`](Self::map_shared) with every page mapped at once, for memory that is
    /// used all over at once and where a first touch must not cost a page fault on the data
    /// path (a ring: each of its pages faulted in both processes on the first lap, a pair of
    /// 8-byte round trips in every 64 took 2-4 us instead of 0.6).
    pub fn map_shared_populated(fd: BorrowedFd<'_>, len: usize) -> io::Result<Self> {
        Self::map_shared_rw(fd, len, true)
    }

    fn map_shared_rw(fd: BorrowedFd<'_>, len: usize, populate: bool) -> io::Result<Self> {
        Ok(RegionMemory::with_parts(
            mmap_shared(fd, len, true, populate)?,
            len,
            Owner::Mapped,
            false,
        ))
    }

    /// Maps the first `len` bytes of the file `fd` shared and read-only (no PROT_WRITE: a
    /// peer's memory it may only read, or a table it publishes). Every write entry point
    /// (`copy_in`, `fill`, a copy into it, receives and pulls into it, `word`) refuses it.
    pub fn map_shared_read_only(fd: BorrowedFd<'_>, len: usize) -> io::Result<Self> {
        Ok(RegionMemory::with_parts(
            mmap_shared(fd, len, false, false)?,
            len,
            Owner::Mapped,
            true,
        ))
    }

    /// This region for memory that nothing ever revokes, because nobody but its owner (a link)
    /// holds it and it lives as long as the owner does (the shm link's rings): accesses are
    /// not counted, which saves two atomic read-modify-writes per copy. `revoke` must not
    /// be called on it (it would not wait for the accesses in flight).
    pub fn never_revoked(mut self) -> Self {
        self.counted = false;
        self
    }

    /// Allocates `len` zeroed bytes as [`allocate`](Self::allocate) does, but backed by a
    /// memfd of their own (whole pages, sealed against shrinking, growing and further seals)
    /// mapped shared, so that a peer process of the shm link can map the same pages
    /// ([`shared_file`](Self::shared_file)). One file per region, never reused: pages a peer
    /// still maps after this region is dropped hold nothing but this region's data.
    pub fn allocate_shared(len: usize) -> io::Result<Self> {
        if len == 0 || len > isize::MAX as usize - PAGE_SIZE {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        let map_len = len.next_multiple_of(PAGE_SIZE);
        let fd = sealed_memfd("dapl-rs-lmr", map_len)?;
        let ptr = mmap_shared(fd.as_fd(), map_len, true, false)?;
        Ok(RegionMemory::with_parts(
            ptr,
            len,
            Owner::Memfd {
                fd,
                id: NEXT_SHARED_ID.fetch_add(1, Ordering::Relaxed),
                map_len,
            },
            false,
        ))
    }

    /// The file behind an [`allocate_shared`](Self::allocate_shared) region and its id
    /// (unique in the process, never reused); None for other regions.
    pub fn shared_file(&self) -> Option<(u64, BorrowedFd<'_>)> {
        match &self.owner {
            Owner::Memfd { fd, id, .. } => Some((*id, fd.as_fd())),
            _ => None,
        }
    }

    /// True for a read-only mapping ([`map_shared_read_only`](Self::map_shared_read_only)).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Loads the 8-byte word at `offset` with `order`, also from a read-only mapping (the
    /// shm link reads a peer's published table so). None unless the word is 8-aligned inside
    /// the word span. Not counted as an access: for regions that are never revoked.
    pub fn load_word(&self, offset: usize, order: Ordering) -> Option<u64> {
        let (lo, hi) = self.word_span();
        if offset < lo || offset.checked_add(WORD)? > hi || (offset - lo) % WORD != 0 {
            return None;
        }
        Some(self.word_at(offset).load(order))
    }

    /// The 8-byte word at `offset` as an atomic, for the control words of memory shared with
    /// another process. None unless `offset` is 8-aligned (by address) and the word lies
    /// inside the region's word span (where every access is by that word). Not counted as an
    /// access: for regions that are never revoked (the shm link's rings).
    pub fn word(&self, offset: usize) -> Option<&AtomicU64> {
        if self.read_only {
            return None;
        }
        let (lo, hi) = self.word_span();
        if offset < lo || offset.checked_add(WORD)? > hi || (offset - lo) % WORD != 0 {
            return None;
        }
        Some(self.word_at(offset))
    }

    /// Starts an access, or None if the region is revoked (then nothing may touch it).
    fn enter(&self) -> Option<Access<'_>> {
        if !self.counted {
            // Nothing revokes it (`never_revoked`): no count, and no read-modify-write (two per
            // access, each dearer than a small copy).
            return Some(Access(None));
        }
        // Acquire pairs with `revoke`'s mark: an access that starts after it sees it. The
        // increment and the mark are read-modify-writes of one atomic, so one comes first:
        // either `revoke` then counts this access and waits for it, or this access sees
        // REVOKED and backs out.
        let prev = self.state.fetch_add(1, Ordering::Acquire);
        let access = Access(Some(self));
        if prev & REVOKED != 0 {
            return None; // `access` is dropped: the count goes back
        }
        Some(access)
    }

    /// Revokes the region: no access starts after this is called, and it returns once every
    /// access in flight has ended, after which nothing in the process reads or writes the
    /// memory through this region again. Accesses are short (a copy, or one non-blocking
    /// socket call), so the wait is too, except for a [`Lease`], which its holder bounds (the
    /// shm link: docs/architecture.md, "The shm link"). Idempotent.
    pub fn revoke(&self) {
        debug_assert!(self.counted, "a never_revoked region is revoked");
        self.state.fetch_or(REVOKED, Ordering::AcqRel);
        let mut spins = 0u32;
        // Acquire: the ended accesses' memory operations happen before this returns.
        while self.state.load(Ordering::Acquire) & !REVOKED != 0 {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else if spins < 1024 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// True once [`revoke`](Self::revoke) has been called.
    pub fn is_revoked(&self) -> bool {
        self.state.load(Ordering::Acquire) & REVOKED != 0
    }

    /// The address of the first byte (the virtual address DAT reports for the region).
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as usize as u64
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty region (never the case for a registered one).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn range_ok(&self, offset: usize, len: usize) -> bool {
        offset.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// Copies `src` into the region at `offset`, the unit holding the last byte last and with
    /// Release (module doc). Returns false (and copies nothing) if the range does not lie
    /// inside the region or the region is revoked.
    pub fn copy_in(&self, offset: usize, src: &[u8]) -> bool {
        if self.read_only || !self.range_ok(offset, src.len()) {
            return false;
        }
        let Some(_access) = self.enter() else {
            return false;
        };
        self.store_release_last(offset, src);
        true
    }

    /// Copies from the region at `offset` into `dst` (relaxed atomic loads). Returns false (and
    /// copies nothing) if the range does not lie inside the region or the region is revoked.
    pub fn copy_out(&self, offset: usize, dst: &mut [u8]) -> bool {
        if !self.range_ok(offset, dst.len()) {
            return false;
        }
        let Some(_access) = self.enter() else {
            return false;
        };
        self.load(offset, dst);
        true
    }

    /// The byte at `offset`, loaded with Acquire: once it shows the last byte of a copy into
    /// the region (a placement, [`copy_in`](Self::copy_in)), every byte of that copy is
    /// visible to this thread. None if out of bounds or revoked.
    pub fn load_acquire(&self, offset: usize) -> Option<u8> {
        if !self.range_ok(offset, 1) {
            return None;
        }
        let _access = self.enter()?;
        let mut b = [0u8; 1];
        self.load_units(offset, &mut b, Ordering::Acquire);
        Some(b[0])
    }

    /// Copies `len` bytes from this region at `offset` to `dst` at `dst_offset` (the two may be
    /// the same region and may overlap), through a buffer on the stack, the destination's last
    /// unit last and with Release. Returns false (and copies nothing) if either range is out of
    /// bounds or either region is revoked.
    pub fn copy_to(
        &self,
        offset: usize,
        dst: &RegionMemory,
        dst_offset: usize,
        len: usize,
    ) -> bool {
        if dst.read_only || !self.range_ok(offset, len) || !dst.range_ok(dst_offset, len) {
            return false;
        }
        let (Some(_from), Some(_to)) = (self.enter(), dst.enter()) else {
            return false;
        };
        // By address: two registrations may cover the same memory.
        let (from, to) = (
            self.addr() as usize + offset,
            dst.addr() as usize + dst_offset,
        );
        if to > from && to < from + len {
            let mut buf = [0u8; COPY_CHUNK];
            // Copying forward would overwrite source bytes before reading them: chunks from the
            // end (each chunk's source lies below everything written before it), the very last
            // byte held back and stored last.
            let mut last = [0u8; 1];
            self.load(offset + len - 1, &mut last);
            let mut end = len - 1;
            while end > 0 {
                let k = end.min(COPY_CHUNK);
                self.load(offset + end - k, &mut buf[..k]);
                dst.store_units(dst_offset + end - k, &buf[..k], Ordering::Relaxed);
                end -= k;
            }
            dst.store_release_last(dst_offset + len - 1, &last);
            return true;
        }
        if from % WORD == to % WORD && len >= COPY_CHUNK {
            // Same alignment: word to word, no stack buffer (the shm link's copies into and
            // out of a peer's mapping run here at about twice the speed).
            self.copy_words_to(offset, dst, dst_offset, len);
            return true;
        }
        dst.store_chunked(dst_offset, len, |at, chunk| self.load(offset + at, chunk));
        true
    }

    /// `copy_to` of a range whose first byte has the same alignment in both regions and that
    /// does not overlap: the edge bytes through a buffer, the aligned words between them loaded
    /// and stored one by one, the unit that holds the last byte last and with Release.
    /// Callers have checked bounds and hold an access to both regions.
    fn copy_words_to(&self, offset: usize, dst: &RegionMemory, dst_offset: usize, len: usize) {
        let head = (WORD - (self.addr() as usize + offset) % WORD) % WORD;
        let mut buf = [0u8; 2 * WORD];
        self.load(offset, &mut buf[..head]);
        dst.store_units(dst_offset, &buf[..head], Ordering::Relaxed);
        // Keep the last word (or the tail after it) for the final, Release store.
        let words = (len - head).saturating_sub(1) / WORD;
        let (at, dst_at) = (offset + head, dst_offset + head);
        // SAFETY: `at` and `dst_at` are 8-aligned by address (same alignment, `head` bytes
        // skipped), and the `words` words from each lie inside the copy's range, which is
        // inside each region (checked by `copy_to`): wholly inside the region, so inside its
        // word span, where every access is by that word.
        unsafe { self.copy_words(at, dst, dst_at, words) };
        let done = head + words * WORD;
        let rest = len - done;
        self.load(offset + done, &mut buf[..rest]);
        dst.store_release_last(dst_offset + done, &buf[..rest]);
    }

    /// Copies `n` whole words from offset `at` of this region to offset `dst_at` of `dst`,
    /// each a relaxed atomic load and store.
    ///
    /// # Safety
    /// Both offsets are 8-aligned by address, the `n` words from each lie inside the word span
    /// of their region, and the caller holds an access to both regions.
    #[inline(always)]
    unsafe fn copy_words(&self, at: usize, dst: &RegionMemory, dst_at: usize, n: usize) {
        // SAFETY: the caller's contract: every word is aligned, inside its region (valid while
        // the caller holds the accesses) and only ever accessed atomically from Rust.
        unsafe {
            if move_words(self.ptr.as_ptr().add(at), dst.ptr.as_ptr().add(dst_at), n) {
                return;
            }
            let from = self.ptr.as_ptr().add(at).cast::<AtomicU64>();
            let to = dst.ptr.as_ptr().add(dst_at).cast::<AtomicU64>();
            // Eight loads, then eight stores (about 10% faster than a word at a time here).
            let mut k = 0;
            while k + 8 <= n {
                let mut v = [0u64; 8];
                for (j, w) in v.iter_mut().enumerate() {
                    *w = (*from.add(k + j)).load(Ordering::Relaxed);
                }
                for (j, w) in v.iter().enumerate() {
                    (*to.add(k + j)).store(*w, Ordering::Relaxed);
                }
                k += 8;
            }
            while k < n {
                (*to.add(k)).store((*from.add(k)).load(Ordering::Relaxed), Ordering::Relaxed);
                k += 1;
            }
        }
    }

    /// Sets `len` bytes at `offset` to `byte` (the last unit last, with Release). Returns false
    /// if out of bounds or revoked.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> bool {
        if self.read_only || !self.range_ok(offset, len) {
            return false;
        }
        let Some(_access) = self.enter() else {
            return false;
        };
        self.store_chunked(offset, len, |_, chunk| chunk.fill(byte));
        true
    }
}

/// Bytes of the word unit of region access (module doc).
const WORD: usize = 8;

/// A step of an atomic copy (`RegionMemory::units`); offsets are into the region.
#[derive(Debug, Clone, Copy)]
enum Unit {
    /// `n` edge bytes from `at`, accessed one by one.
    Bytes { at: usize, n: usize },
    /// Bytes `a..b` of the word at `w`.
    Part { w: usize, a: usize, b: usize },
    /// `n` whole words from `at`.
    Words { at: usize, n: usize },
}

/// Bytes a region-to-region copy or a fill moves through its stack buffer at a time.
const COPY_CHUNK: usize = 2048;

/// Copies up to this many bytes go through a buffer of this size instead of a chunk's.
const SMALL_COPY: usize = 128;

/// Runs of words from this many on go to [`move_words`]' string instruction (below it the
/// word loop is as fast: the instruction's start-up cost; measured on the Xeon of
/// docs/architecture.md, equal at 256 bytes, 1.4x at 512, 3x at 2 KiB and up).
const STRING_MOVE_MIN_WORDS: usize = 64;

/// Moves `n` 8-byte words from `src` to `dst` with one `rep movsq`, which runs at `memcpy`'s
/// speed where the relaxed word loop reaches about 0.65x of it on large copies (the loop's
/// atomics cannot be vectorised). Returns false, moving nothing, for short runs, under Miri,
/// with `--cfg dapl_atomic_loops` (the sanitizer runs, so that ThreadSanitizer and
/// AddressSanitizer see every access, which they cannot inside `asm!`) and on targets other
/// than x86-64; the caller then copies word by word.
///
/// Why this is the same access as the word loop: Rust's model lets an `asm!` block do what
/// Rust code could do at that point, and this one does exactly what the relaxed loop does —
/// each element of `movsq` is one 8-byte load and one 8-byte store, atomic where 8-aligned
/// (Intel SDM vol. 3A, "Guaranteed Atomic Operations"); the stores of one fast-string
/// operation may become visible out of order among themselves, as relaxed stores may, and
/// the SDM's rule for ordered data ("Fast-String Operation and Out-of-Order Stores": write a
/// discrete flag after the string operation) is what copies already do: the unit that holds a
/// copy's last byte is a separate Release store after it. The block is not `nomem`, so the
/// compiler keeps it in program order with the accesses around it.
///
/// # Safety
/// `src` is valid for reads and `dst` for writes of `n * 8` bytes; the region side(s) are
/// 8-aligned words that are only ever accessed whole (the region's word span) while the
/// caller holds an access; a buffer side is not region memory.
#[inline(always)]
unsafe fn move_words(src: *const u8, dst: *mut u8, n: usize) -> bool {
    #[cfg(all(target_arch = "x86_64", not(miri), not(dapl_atomic_loops)))]
    if n >= STRING_MOVE_MIN_WORDS {
        // SAFETY: the caller's contract (valid ranges; see above for why the accesses are
        // those of the relaxed word loop). The direction flag is clear on entry to an `asm!`
        // block (Rust's inline assembly rules), so the move runs upwards; rcx, rsi and rdi are
        // declared clobbered, no stack is used and the flags are left alone.
        unsafe {
            std::arch::asm!(
                "rep movsq",
                inout("rcx") n => _,
                inout("rsi") src => _,
                inout("rdi") dst => _,
                options(nostack, preserves_flags),
            );
        }
        return true;
    }
    let _ = (src, dst, n);
    false
}

/// The bytes `a..b` of a word as a mask over its native-endian value.
fn word_mask(a: usize, b: usize) -> u64 {
    let mut m = [0u8; WORD];
    m[a..b].fill(0xff);
    u64::from_ne_bytes(m)
}

/// Atomic access by units (module doc). Callers have checked bounds and hold an access.
impl RegionMemory {
    /// The offsets `lo..hi` of the region's aligned words that lie wholly inside it (`lo` is
    /// the first offset whose address is a multiple of [`WORD`]); below `lo` and from `hi` on,
    /// bytes are accessed one by one. `lo == hi` when no word fits.
    fn word_span(&self) -> (usize, usize) {
        self.span
    }

    /// The byte at `off` as an atomic.
    fn byte_at(&self, off: usize) -> &AtomicU8 {
        debug_assert!(off < self.len);
        // SAFETY: callers pass an in-bounds offset (bounds checked by the public entry point);
        // the byte is valid for reads and writes while `self` lives and is not revoked (type
        // invariant; callers hold an access), and is only ever accessed atomically from Rust.
        unsafe { AtomicU8::from_ptr(self.ptr.as_ptr().add(off)) }
    }

    /// The word at `off` (`word_span`'s `lo` plus a multiple of [`WORD`], below its `hi`).
    fn word_at(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off + WORD <= self.len);
        // SAFETY: as `byte_at`; `off` is inside the word span, so the address is 8-aligned and
        // all 8 bytes are inside the region.
        unsafe { AtomicU64::from_ptr(self.ptr.as_ptr().add(off).cast()) }
    }

    /// Loads `dst.len()` bytes at `offset` with relaxed atomic loads.
    fn load(&self, offset: usize, dst: &mut [u8]) {
        self.load_units(offset, dst, Ordering::Relaxed);
    }

    /// The units that cover `offset..offset + len`, in address order: the edge bytes below
    /// the word span, part of a word, a run of whole words, part of a word, the edge bytes
    /// above it (each only where the range has some).
    fn units(&self, offset: usize, len: usize) -> arrayvec::ArrayVec<Unit, 5> {
        let end = offset + len;
        let (lo, hi) = self.word_span();
        let mut units = arrayvec::ArrayVec::new();
        let mut i = offset;
        if i < end.min(lo) {
            units.push(Unit::Bytes {
                at: i,
                n: end.min(lo) - i,
            });
            i = end.min(lo);
        }
        let wend = end.min(hi);
        if i < wend {
            let r = (i - lo) % WORD;
            if r != 0 {
                // The tail of a word (or less: `wend` may cut it).
                let w = i - r;
                let b = (wend - w).min(WORD);
                units.push(Unit::Part { w, a: r, b });
                i = w + b;
            }
            let n = wend.saturating_sub(i) / WORD;
            if n > 0 {
                units.push(Unit::Words { at: i, n });
                i += n * WORD;
            }
            if i < wend {
                units.push(Unit::Part {
                    w: i,
                    a: 0,
                    b: wend - i,
                });
                i = wend;
            }
        }
        if i < end {
            units.push(Unit::Bytes { at: i, n: end - i });
        }
        units
    }

    /// The number of words in `offset..offset + len` if that range is whole words of the word
    /// span (a ring record, a word-aligned message): the common case, which needs no
    /// [`units`](Self::units).
    #[inline]
    fn whole_words(&self, offset: usize, len: usize) -> Option<usize> {
        let (lo, hi) = self.word_span();
        let inside = lo <= offset && offset <= hi && len <= hi - offset;
        (inside && (offset - lo) % WORD == 0 && len % WORD == 0).then_some(len / WORD)
    }

    /// Loads `dst.len()` bytes at `offset`, each unit with `order`.
    #[inline]
    fn load_units(&self, offset: usize, dst: &mut [u8], order: Ordering) {
        if let Some(n) = self.whole_words(offset, dst.len()) {
            // SAFETY: `n` whole words of the span from `offset`; `dst` holds `n` words.
            unsafe { self.load_words(offset, dst.as_mut_ptr(), n, order) };
            return;
        }
        self.load_units_by_list(offset, dst, order);
    }

    /// [`load_units`](Self::load_units) of a range that is not whole words: unit by unit (out
    /// of line, so that the whole-word case carries none of its stack frame).
    #[inline(never)]
    fn load_units_by_list(&self, offset: usize, dst: &mut [u8], order: Ordering) {
        for unit in self.units(offset, dst.len()) {
            match unit {
                Unit::Bytes { at, n } => {
                    for k in at..at + n {
                        dst[k - offset] = self.byte_at(k).load(order);
                    }
                }
                Unit::Part { w, a, b } => {
                    let v = self.word_at(w).load(order).to_ne_bytes();
                    dst[w + a - offset..][..b - a].copy_from_slice(&v[a..b]);
                }
                Unit::Words { at, n } => {
                    let out = &mut dst[at - offset..][..n * WORD];
                    // SAFETY: `units` gives `n` whole words of the span from `at`; `out`
                    // holds `n` words.
                    unsafe { self.load_words(at, out.as_mut_ptr(), n, order) };
                }
            }
        }
    }

    /// Loads `n` whole words from offset `at` into `out` (the hot loop of large copies:
    /// plain pointer steps, so that it stays fast in unoptimised builds too).
    ///
    /// # Safety
    /// `at` is `lo` of the word span plus a multiple of [`WORD`], `at + n * WORD <= hi`, and
    /// `out` is valid for writes of `n * WORD` bytes and not region memory.
    #[inline(always)]
    unsafe fn load_words(&self, at: usize, out: *mut u8, n: usize, order: Ordering) {
        // SAFETY: the caller's contract: every word is aligned, inside the region (valid while
        // the caller holds an access), and only ever accessed atomically from Rust; `out` is
        // writable for all the words.
        unsafe {
            if order == Ordering::Relaxed && move_words(self.ptr.as_ptr().add(at), out, n) {
                return;
            }
            let words = self.ptr.as_ptr().add(at).cast::<AtomicU64>();
            for k in 0..n {
                let v = (*words.add(k)).load(order);
                out.add(k * WORD).cast::<u64>().write_unaligned(v);
            }
        }
    }

    /// Stores `n` whole words from `src` at offset `at` (the hot loop of large copies).
    ///
    /// # Safety
    /// As [`load_words`](Self::load_words), with `src` valid for reads of `n * WORD` bytes.
    #[inline(always)]
    unsafe fn store_words(&self, at: usize, src: *const u8, n: usize, order: Ordering) {
        // SAFETY: as in `load_words`, `src` readable for all the words.
        unsafe {
            if order == Ordering::Relaxed && move_words(src, self.ptr.as_ptr().add(at), n) {
                return;
            }
            let words = self.ptr.as_ptr().add(at).cast::<AtomicU64>();
            for k in 0..n {
                let v = src.add(k * WORD).cast::<u64>().read_unaligned();
                (*words.add(k)).store(v, order);
            }
        }
    }

    /// Stores `len` bytes at `offset` through a buffer on the stack, [`COPY_CHUNK`] at a time:
    /// `source(at, chunk)` fills `chunk` with the bytes for `offset + at`. The last chunk goes
    /// with [`store_release_last`](Self::store_release_last).
    fn store_chunked(&self, offset: usize, len: usize, mut source: impl FnMut(usize, &mut [u8])) {
        if len <= SMALL_COPY {
            // A small copy (a ring record's payload, a short message) in one step, without
            // clearing a whole chunk's buffer first.
            let mut buf = [0u8; SMALL_COPY];
            source(0, &mut buf[..len]);
            self.store_release_last(offset, &buf[..len]);
            return;
        }
        let mut buf = [0u8; COPY_CHUNK];
        let mut done = 0;
        while done < len {
            let k = (len - done).min(COPY_CHUNK);
            source(done, &mut buf[..k]);
            if done + k == len {
                self.store_release_last(offset + done, &buf[..k]);
            } else {
                self.store_units(offset + done, &buf[..k], Ordering::Relaxed);
            }
            done += k;
        }
    }

    /// Where the unit that holds byte `last` starts: its aligned word, or the byte itself at
    /// the region's edges.
    fn last_unit(&self, last: usize) -> usize {
        let (lo, hi) = self.word_span();
        if (lo..hi).contains(&last) {
            last - (last - lo) % WORD
        } else {
            last
        }
    }

    /// Stores `src` at `offset`, every unit relaxed but the one holding the last byte, which
    /// is stored last and with Release.
    fn store_release_last(&self, offset: usize, src: &[u8]) {
        if src.is_empty() {
            return;
        }
        if let Some(n) = self.whole_words(offset, src.len()) {
            // Whole words (a ring record, an aligned message): all but the last relaxed.
            let last = (n - 1) * WORD;
            // SAFETY: the first `n - 1` of the `n` whole words of the span from `offset`;
            // `src` holds them.
            unsafe { self.store_words(offset, src.as_ptr(), n - 1, Ordering::Relaxed) };
            let v = u64::from_ne_bytes(src[last..].try_into().expect("one word"));
            self.word_at(offset + last).store(v, Ordering::Release);
            return;
        }
        let unit = self.last_unit(offset + src.len() - 1);
        let split = unit.max(offset) - offset;
        self.store_units(offset, &src[..split], Ordering::Relaxed);
        self.store_units(offset + split, &src[split..], Ordering::Release);
    }

    /// Stores `src` at `offset`, each unit with `order`; part of a word with a compare-exchange
    /// that leaves its other bytes as they are.
    #[inline]
    fn store_units(&self, offset: usize, src: &[u8], order: Ordering) {
        if let Some(n) = self.whole_words(offset, src.len()) {
            // SAFETY: as in `load_units`.
            unsafe { self.store_words(offset, src.as_ptr(), n, order) };
            return;
        }
        self.store_units_by_list(offset, src, order);
    }

    /// [`store_units`](Self::store_units) of a range that is not whole words, unit by unit.
    #[inline(never)]
    fn store_units_by_list(&self, offset: usize, src: &[u8], order: Ordering) {
        for unit in self.units(offset, src.len()) {
            match unit {
                Unit::Bytes { at, n } => {
                    for k in at..at + n {
                        self.byte_at(k).store(src[k - offset], order);
                    }
                }
                Unit::Part { w, a, b } => {
                    self.store_part(w, a, b, &src[w + a - offset..][..b - a], order);
                }
                Unit::Words { at, n } => {
                    let from = &src[at - offset..][..n * WORD];
                    // SAFETY: as in `load_units`.
                    unsafe { self.store_words(at, from.as_ptr(), n, order) };
                }
            }
        }
    }

    /// Stores `bytes` as bytes `a..b` of the word at `w`, atomically with respect to the
    /// word's other bytes (which another thread may be storing meanwhile).
    fn store_part(&self, w: usize, a: usize, b: usize, bytes: &[u8], order: Ordering) {
        let mask = word_mask(a, b);
        let mut v = [0u8; WORD];
        v[a..b].copy_from_slice(bytes);
        let v = u64::from_ne_bytes(v) & mask;
        let _ = self
            .word_at(w)
            .fetch_update(order, Ordering::Relaxed, |cur| Some((cur & !mask) | v));
    }
}

impl RegionMemory {
    /// An iovec for `len` bytes at `offset`, or None if that range is not inside the region.
    fn iovec(&self, offset: usize, len: usize) -> Option<libc::iovec> {
        if !self.range_ok(offset, len) {
            return None;
        }
        Some(libc::iovec {
            // SAFETY: offset+len lies inside the region (checked just above).
            iov_base: unsafe { self.ptr.as_ptr().add(offset) }.cast(),
            iov_len: len,
        })
    }
}

/// A message header with `iov` and nothing else (no address, no control data).
fn msghdr(iov: &mut [libc::iovec]) -> libc::msghdr {
    // SAFETY: a zeroed msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = iov.len() as _;
    msg
}

/// One piece of a gathered socket write: plain bytes or a range of registered memory.
#[derive(Clone, Copy, Debug)]
pub enum IoPiece<'a> {
    /// Bytes owned by the caller.
    Bytes(&'a [u8]),
    /// `len` bytes of `mem` at `offset`.
    Region {
        /// The region.
        mem: &'a RegionMemory,
        /// Offset inside it.
        offset: usize,
        /// Length.
        len: usize,
    },
}

/// Most pieces in one gathered write.
pub const MAX_GATHER: usize = 64;

/// Writes `pieces` in order to the stream socket `fd` with one non-blocking `sendmsg` (`send`
/// for one piece of plain bytes) that cannot raise SIGPIPE. Writes at most [`MAX_GATHER`]
/// pieces; returns the byte count written. Nothing is written if a piece is out of bounds
/// (`InvalidInput`) or its region revoked ([`is_revoked_error`]).
pub fn send_gather(fd: BorrowedFd<'_>, pieces: &[IoPiece<'_>]) -> io::Result<usize> {
    // One piece of the caller's bytes (a small message framed whole, as tcp's inline posts
    // are): `send`, raw TCP's own call, through rustix: the kernel skips the message header's
    // copy and the iovec import, and libc's `sendmsg` is a cancellation point whose bookkeeping
    // costs about 90 instructions a call.
    if let [IoPiece::Bytes(b)] = pieces {
        return rustix::net::send(
            fd,
            b,
            rustix::net::SendFlags::NOSIGNAL | rustix::net::SendFlags::DONTWAIT,
        )
        .map_err(io::Error::from);
    }
    // Only the iovecs used are written (a zeroed array of MAX_GATHER cost more than the rest
    // of a small message's framing).
    let mut iov: arrayvec::ArrayVec<libc::iovec, MAX_GATHER> = arrayvec::ArrayVec::new();
    // One access per region piece, held across the system call.
    let mut accesses: arrayvec::ArrayVec<Access<'_>, MAX_GATHER> = arrayvec::ArrayVec::new();
    for p in pieces.iter().take(MAX_GATHER) {
        let (base, len) = match *p {
            IoPiece::Bytes(b) => (b.as_ptr() as *mut libc::c_void, b.len()),
            IoPiece::Region { mem, offset, len } => {
                let Some(v) = mem.iovec(offset, len) else {
                    return Err(io::Error::from(io::ErrorKind::InvalidInput));
                };
                accesses.push(mem.enter().ok_or_else(revoked_error)?);
                (v.iov_base, v.iov_len)
            }
        };
        iov.push(libc::iovec {
            iov_base: base,
            iov_len: len,
        });
    }
    let msg = msghdr(&mut iov);
    // SAFETY: every iovec points at live memory of its stated length: caller slices, or region
    // ranges checked above (regions are kept alive by the caller's borrow, and not revoked
    // while `accesses` are held). The kernel only reads them.
    let r = unsafe {
        libc::sendmsg(
            fd.as_raw_fd(),
            &msg,
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// A destination of a scattered socket read: `len` bytes of `mem` at `offset`.
#[derive(Clone, Copy, Debug)]
pub struct RecvPiece<'a> {
    /// The region.
    pub mem: &'a RegionMemory,
    /// Offset inside it.
    pub offset: usize,
    /// Length.
    pub len: usize,
}

/// Reads from the stream socket `fd` straight into `pieces`, in order, with one non-blocking
/// `recvmsg` (the receive-side mirror of [`send_gather`]). Fills at most [`MAX_GATHER`]
/// pieces; returns the byte count read (0: the peer closed). Every piece is bounds-checked
/// first: nothing outside the pieces' ranges can be written. Nothing is read if a piece is out
/// of bounds (`InvalidInput`) or its region revoked ([`is_revoked_error`]).
pub fn recv_scatter(fd: BorrowedFd<'_>, pieces: &[RecvPiece<'_>]) -> io::Result<usize> {
    let mut iov: arrayvec::ArrayVec<libc::iovec, MAX_GATHER> = arrayvec::ArrayVec::new();
    let mut accesses: arrayvec::ArrayVec<Access<'_>, MAX_GATHER> = arrayvec::ArrayVec::new();
    for p in pieces.iter().take(MAX_GATHER) {
        iov.push(
            p.mem
                .iovec(p.offset, p.len)
                .filter(|_| !p.mem.read_only)
                .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?,
        );
        accesses.push(p.mem.enter().ok_or_else(revoked_error)?);
    }
    #[cfg(feature = "testing")]
    if let Some(p) = pieces.first() {
        hold::point(p.mem.addr());
    }
    let mut msg = msghdr(&mut iov);
    // SAFETY: every iovec points at a checked range of a live region (kept alive by the
    // caller's borrow, not revoked while `accesses` are held), valid for writes (type
    // invariant), which no Rust reference aliases; the kernel writes at most iov_len bytes
    // into each.
    let r = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// An access held for as long as a peer process may copy a range of a region out by
/// cross-memory attach (the shm link lends its source memory to the peer that pulls it): while
/// it lives, [`RegionMemory::revoke`] waits, so the range stays registered memory for as long
/// as the peer may read it. Made by [`RegionMemory::lease`]; ends when dropped.
pub struct Lease {
    mem: Arc<RegionMemory>,
    offset: usize,
    len: usize,
}

impl RegionMemory {
    /// Holds `len` bytes at `offset` against revocation (see [`Lease`]). None if the range is
    /// not inside the region or the region is revoked.
    pub fn lease(self: &Arc<Self>, offset: usize, len: usize) -> Option<Lease> {
        if !self.range_ok(offset, len) {
            return None;
        }
        // The access is counted here and uncounted by the lease's drop.
        std::mem::forget(self.enter()?);
        Some(Lease {
            mem: self.clone(),
            offset,
            len,
        })
    }
}

impl Lease {
    /// The address of the range's first byte in this process.
    pub fn addr(&self) -> u64 {
        self.mem.addr() + self.offset as u64
    }

    /// The range's length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True once the region is being revoked: a `revoke` waits for this lease.
    pub fn revoking(&self) -> bool {
        self.mem.is_revoked()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Release, as an access's end: a `revoke` that sees it gone may free the memory.
        if self.mem.counted {
            self.mem.state.fetch_sub(1, Ordering::Release);
        }
    }
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lease({:#x}+{})", self.addr(), self.len)
    }
}

/// Copies the ranges `remote` (address, length) of process `pid`'s memory into `pieces`, in
/// order, by cross-memory attach (`process_vm_readv`), looping over short counts. The totals
/// must match (`InvalidInput` otherwise); every piece is bounds-checked and held against
/// revocation for the whole copy, so nothing outside the pieces is written, whatever the
/// ranges say. At most [`MAX_GATHER`] pieces and ranges. Errors are the kernel's (`EPERM`:
/// attach denied, `ESRCH`: the process is gone, `EFAULT`: a range is not mapped there) or
/// [`is_revoked_error`] (nothing copied).
pub fn pull_from(pid: i32, remote: &[(u64, usize)], pieces: &[RecvPiece<'_>]) -> io::Result<()> {
    let invalid = || io::Error::from(io::ErrorKind::InvalidInput);
    if pieces.len() > MAX_GATHER || remote.len() > MAX_GATHER {
        return Err(invalid());
    }
    let total: usize = pieces.iter().map(|p| p.len).sum();
    let remote_total = remote
        .iter()
        .try_fold(0usize, |t, r| t.checked_add(r.1))
        .ok_or_else(invalid)?;
    if total != remote_total {
        return Err(invalid());
    }
    let mut local = arrayvec::ArrayVec::<libc::iovec, MAX_GATHER>::new();
    let mut accesses: arrayvec::ArrayVec<Access<'_>, MAX_GATHER> = arrayvec::ArrayVec::new();
    for p in pieces {
        let iov = p.mem.iovec(p.offset, p.len).filter(|_| !p.mem.read_only);
        local.push(iov.ok_or_else(invalid)?);
        accesses.push(p.mem.enter().ok_or_else(revoked_error)?);
    }
    let mut far: arrayvec::ArrayVec<libc::iovec, MAX_GATHER> = remote
        .iter()
        .map(|&(addr, len)| libc::iovec {
            iov_base: addr as usize as *mut libc::c_void,
            iov_len: len,
        })
        .collect();
    // The unit that holds the last byte is not the kernel's to write: it is fetched apart and
    // stored last, with Release (module doc), so a consumer polling it sees the whole copy.
    let held = match pieces.last() {
        Some(p) if p.len > 0 => {
            let unit = p.mem.last_unit(p.offset + p.len - 1);
            p.len - (unit.max(p.offset) - p.offset)
        }
        _ => 0,
    };
    if held > 0 {
        let l = local.last_mut().expect("a piece per iovec");
        l.iov_len -= held;
    }
    let mut ri = 0usize;
    // SAFETY: every local iovec points at a checked range of a live region (kept alive by the
    // caller's borrow, not revoked while `accesses` are held), valid for writes (type
    // invariant), which no Rust reference aliases.
    unsafe { readv_exact(pid, &mut local, &mut far, &mut ri, total - held)? };
    if held > 0 {
        let mut last = [0u8; WORD];
        let mut tmp = [libc::iovec {
            iov_base: last.as_mut_ptr().cast(),
            iov_len: held,
        }];
        // SAFETY: the one local iovec is `held` (at most WORD) bytes of this stack buffer, not
        // otherwise borrowed until the copy returns.
        unsafe { readv_exact(pid, &mut tmp, &mut far, &mut ri, held)? };
        let p = pieces.last().expect("held only with a piece");
        if !p.mem.copy_in(p.offset + p.len - held, &last[..held]) {
            return Err(revoked_error());
        }
    }
    Ok(())
}

/// Copies `n` bytes, the total of `local`, from process `pid`'s ranges `far` (from `*ri` on)
/// into `local`, in order, by `process_vm_readv`, looping over short counts and `EINTR`;
/// moves `*ri` past them. Errors are the kernel's (a copy of 0 bytes is `EFAULT`).
///
/// # Safety
/// Every iovec of `local` points at `iov_len` bytes valid for writes that no Rust reference
/// aliases while this runs.
unsafe fn readv_exact(
    pid: i32,
    local: &mut [libc::iovec],
    far: &mut [libc::iovec],
    ri: &mut usize,
    n: usize,
) -> io::Result<()> {
    let (mut li, mut done) = (0usize, 0usize);
    while done < n {
        // SAFETY: the local iovecs are valid for writes (the caller's contract) and the kernel
        // writes at most iov_len bytes into each; the remote iovecs are only read, in the
        // other process, by the kernel, which checks them against that process's mappings.
        let r = unsafe {
            libc::process_vm_readv(
                pid,
                local[li..].as_ptr(),
                (local.len() - li) as libc::c_ulong,
                far[*ri..].as_ptr(),
                (far.len() - *ri) as libc::c_ulong,
                0,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            return Err(io::Error::from_raw_os_error(libc::EFAULT));
        }
        let k = r as usize;
        done += k;
        advance(local, &mut li, k);
        advance(far, ri, k);
    }
    Ok(())
}

/// Moves the iovec list `v` (from index `*i` on) past `n` bytes.
fn advance(v: &mut [libc::iovec], i: &mut usize, mut n: usize) {
    while n > 0 && *i < v.len() {
        let k = v[*i].iov_len.min(n);
        v[*i].iov_len -= k;
        v[*i].iov_base = (v[*i].iov_base as usize + k) as *mut libc::c_void;
        n -= k;
        if v[*i].iov_len == 0 {
            *i += 1;
        }
    }
    while *i < v.len() && v[*i].iov_len == 0 {
        *i += 1;
    }
}

/// Reads the 8-byte word at `addr` in process `pid` by cross-memory attach: the probe that
/// tells whether attaching to that process works at all (errors as [`pull_from`]'s).
pub fn peek_word(pid: i32, addr: u64) -> io::Result<u64> {
    let mut word = 0u64;
    let local = libc::iovec {
        iov_base: (&mut word as *mut u64).cast(),
        iov_len: 8,
    };
    let far = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: 8,
    };
    // SAFETY: the local iovec is the 8 bytes of `word`, a local the kernel writes at most 8
    // bytes into; the remote one is only read, in the other process, checked by the kernel.
    let r = unsafe { libc::process_vm_readv(pid, &local, 1, &far, 1, 0) };
    match r {
        8 => Ok(word),
        r if r < 0 => Err(io::Error::last_os_error()),
        _ => Err(io::Error::from_raw_os_error(libc::EFAULT)),
    }
}

impl Drop for RegionMemory {
    fn drop(&mut self) {
        match &self.owner {
            // SAFETY: ptr was returned by `alloc_zeroed(layout)` and is freed exactly once.
            Owner::Alloc(layout) => unsafe { alloc::dealloc(self.ptr.as_ptr(), *layout) },
            Owner::Vec { cap, taken } if !taken.load(Ordering::Acquire) => {
                // SAFETY: the parts of the `Vec` `from_vec` forgot, never rebuilt by
                // `take_vec` (`taken` is false), and nothing accesses a region being dropped.
                drop(unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), self.len, *cap) });
            }
            Owner::Mapped => {
                // SAFETY: the mapping `map_shared` made, of `len` bytes, unmapped exactly once;
                // nothing accesses a region being dropped.
                unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
            }
            Owner::Memfd { map_len, .. } => {
                // SAFETY: the mapping `allocate_shared` made, of `map_len` bytes, unmapped
                // exactly once; nothing accesses a region being dropped. The file closes with
                // the `OwnedFd`; a peer's mapping keeps the pages (this region's alone).
                unsafe { libc::munmap(self.ptr.as_ptr().cast(), *map_len) };
            }
            Owner::Vec { .. } | Owner::Lent => {}
        }
    }
}

impl std::fmt::Debug for RegionMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RegionMemory({:#x}+{})", self.addr(), self.len)
    }
}

/// Tests (feature "testing"): holds a scattered receive into one region after it entered the
/// region (its access counted) and before its socket call, so a test can free the region with
/// a receive in flight.
#[cfg(feature = "testing")]
pub(crate) mod hold {
    use std::sync::{Condvar, Mutex, MutexGuard};
    use std::time::{Duration, Instant};

    struct State {
        /// The region's address while armed.
        addr: Option<u64>,
        reached: bool,
    }

    static STATE: Mutex<State> = Mutex::new(State {
        addr: None,
        reached: false,
    });
    static CHANGED: Condvar = Condvar::new();

    fn state() -> MutexGuard<'static, State> {
        STATE.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Holds receives into the region at `addr` until [`release`].
    pub(crate) fn arm(addr: u64) {
        *state() = State {
            addr: Some(addr),
            reached: false,
        };
    }

    /// Waits up to `timeout` until a receive is held; true if one is.
    pub(crate) fn wait_reached(timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut s = state();
        while !s.reached {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            s = CHANGED
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }

    /// Lets the held receive (and later ones) go.
    pub(crate) fn release() {
        state().addr = None;
        CHANGED.notify_all();
    }

    pub(super) fn point(addr: u64) {
        let mut s = state();
        if s.addr != Some(addr) {
            return;
        }
        s.reached = true;
        CHANGED.notify_all();
        while s.addr == Some(addr) {
            s = CHANGED.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_is_page_aligned_and_zeroed() {
        let r = RegionMemory::allocate(10_000).unwrap();
        assert_eq!(r.addr() % PAGE_SIZE as u64, 0);
        let mut out = vec![0xffu8; 10_000];
        assert!(r.copy_out(0, &mut out));
        assert!(out.iter().all(|&b| b == 0));
    }

    #[test]
    fn copies_out_of_bounds_are_refused_without_overflow() {
        let r = RegionMemory::allocate(64).unwrap();
        assert!(!r.copy_in(60, &[1; 8]));
        assert!(!r.copy_in(usize::MAX, &[1]));
        let mut b = [0u8; 4];
        assert!(!r.copy_out(usize::MAX - 1, &mut b));
        assert!(!r.copy_to(0, &r, usize::MAX, 2));
        assert!(r.copy_in(56, &[7; 8]));
        assert!(r.copy_out(60, &mut b));
        assert_eq!(b, [7; 4]);
    }

    #[test]
    #[cfg_attr(miri, ignore = "memfd and mmap are foreign functions")]
    fn two_shared_mappings_of_one_file_see_each_others_writes() {
        use std::os::fd::AsFd;
        let fd = rustix::fs::memfd_create("ring-test", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, 8192).unwrap();
        let a = RegionMemory::map_shared(fd.as_fd(), 8192).unwrap();
        let b = RegionMemory::map_shared(fd.as_fd(), 8192).unwrap();
        assert_ne!(a.addr(), b.addr());
        assert!(a.copy_in(100, b"shared"));
        let mut got = [0u8; 6];
        assert!(b.copy_out(100, &mut got));
        assert_eq!(&got, b"shared");
        a.word(64).unwrap().store(7, Ordering::Release);
        assert_eq!(b.word(64).unwrap().load(Ordering::Acquire), 7);
        assert!(a.word(60).is_none() && a.word(8190).is_none());
        drop(a);
        assert!(b.copy_out(100, &mut got), "b stays mapped");
    }

    #[test]
    #[cfg_attr(miri, ignore = "sockets: recvmsg is a foreign function")]
    fn recv_scatter_fills_pieces_in_order_and_refuses_out_of_bounds() {
        use std::io::Write;
        use std::os::fd::AsFd;
        let (mut a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let r = RegionMemory::allocate(64).unwrap();
        let pieces = [
            RecvPiece {
                mem: &r,
                offset: 10,
                len: 3,
            },
            RecvPiece {
                mem: &r,
                offset: 40,
                len: 4,
            },
        ];
        // Nothing to read yet: WouldBlock, not a hang.
        let e = recv_scatter(b.as_fd(), &pieces).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
        a.write_all(b"abcdefgXYZ").unwrap();
        assert_eq!(recv_scatter(b.as_fd(), &pieces).unwrap(), 7);
        let mut out = [0u8; 64];
        r.copy_out(0, &mut out);
        assert_eq!(&out[10..13], b"abc");
        assert_eq!(&out[40..44], b"defg");
        assert!(out[..10]
            .iter()
            .chain(&out[13..40])
            .chain(&out[44..])
            .all(|&x| x == 0));
        // A piece past the end is refused before anything is read.
        let bad = [RecvPiece {
            mem: &r,
            offset: 62,
            len: 4,
        }];
        let e = recv_scatter(b.as_fd(), &bad).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let mut rest = [0u8; 3];
        assert_eq!(std::io::Read::read(&mut &b, &mut rest).unwrap(), 3);
        assert_eq!(&rest, b"XYZ");
        drop(a);
        assert_eq!(recv_scatter(b.as_fd(), &pieces).unwrap(), 0, "EOF");
    }

    #[test]
    #[cfg_attr(miri, ignore = "sockets: sendmsg is a foreign function")]
    fn a_revoked_region_refuses_every_access_and_touches_nothing() {
        use std::os::fd::AsFd;
        let r = RegionMemory::allocate(64).unwrap();
        let other = RegionMemory::allocate(64).unwrap();
        assert!(r.copy_in(0, &[7; 64]));
        r.revoke();
        assert!(r.is_revoked());
        let mut out = [0u8; 8];
        assert!(!r.copy_in(0, &[1; 8]));
        assert!(!r.copy_out(0, &mut out));
        assert_eq!(out, [0; 8], "nothing copied out");
        assert!(!r.fill(0, 8, 9));
        assert!(!r.copy_to(0, &other, 0, 8), "revoked source");
        assert!(!other.copy_to(0, &r, 0, 8), "revoked destination");
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let piece = IoPiece::Region {
            mem: &r,
            offset: 0,
            len: 8,
        };
        let e = send_gather(a.as_fd(), &[IoPiece::Bytes(b"hdr"), piece]).unwrap_err();
        assert!(is_revoked_error(&e), "{e}");
        std::io::Write::write_all(&mut &a, b"12345678").unwrap();
        let into = RecvPiece {
            mem: &r,
            offset: 0,
            len: 8,
        };
        let e = recv_scatter(b.as_fd(), &[into]).unwrap_err();
        assert!(is_revoked_error(&e), "{e}");
        // Nothing was sent (not even the header) or taken from the socket.
        b.set_nonblocking(true).unwrap();
        let mut got = [0u8; 16];
        assert_eq!(std::io::Read::read(&mut &b, &mut got).unwrap(), 8);
        assert_eq!(&got[..8], b"12345678");
        // The memory kept what it held (read behind the region's back: it refuses reads now).
        // SAFETY: the region is still allocated (revoked only), 64 bytes long.
        let raw = unsafe { std::slice::from_raw_parts(r.ptr.as_ptr(), 64) };
        assert!(raw.iter().all(|&x| x == 7));
        r.revoke(); // idempotent
    }

    #[test]
    fn revoke_waits_for_the_access_in_flight_and_none_starts_after_it() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let r = Arc::new(RegionMemory::allocate(64).unwrap());
        let access = r.enter().expect("not revoked yet");
        let done = Arc::new(AtomicBool::new(false));
        let t = {
            let (r, done) = (r.clone(), done.clone());
            std::thread::spawn(move || {
                r.revoke();
                done.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !done.load(Ordering::SeqCst),
            "revoke returned under an access"
        );
        assert!(
            r.enter().is_none(),
            "an access started after the revocation began"
        );
        drop(access);
        t.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
    }

    /// Miri runs these tests too (`scripts/sanitizers.sh`), much more slowly: smaller sizes.
    const N: usize = if cfg!(miri) { 19 } else { 29 };

    /// `len` bytes at `skew` into `backing`, as a region of their own (as a caller's
    /// registration of part of its memory is).
    fn part_of(backing: &RegionMemory, skew: usize, len: usize) -> RegionMemory {
        assert!(skew + len <= backing.len());
        // SAFETY: the bytes lie inside `backing`, which every test keeps alive (and never
        // revokes) for as long as it uses the part.
        unsafe {
            RegionMemory::from_raw(NonNull::new(backing.ptr.as_ptr().add(skew)).unwrap(), len)
        }
    }

    fn bytes_of(r: &RegionMemory) -> Vec<u8> {
        let mut v = vec![0u8; r.len()];
        assert!(r.copy_out(0, &mut v));
        v
    }

    #[test]
    fn a_region_of_a_few_bytes_between_two_word_boundaries_has_no_words_and_copies_by_bytes() {
        let backing = RegionMemory::allocate(4 * WORD).unwrap();
        for (skew, len) in [(5, 1), (5, 3), (1, 6), (WORD + 7, 1)] {
            let r = part_of(&backing, skew, len);
            assert_eq!(r.word_span(), (len, len), "skew {skew} len {len}");
            assert!(r.word(0).is_none() && r.load_word(0, Ordering::Relaxed).is_none());
            let src: Vec<u8> = (1..=len as u8).collect();
            assert!(r.copy_in(0, &src));
            assert_eq!(bytes_of(&r), src);
            assert_eq!(bytes_of(&backing)[skew..skew + len], src[..]);
        }
    }

    #[test]
    fn atomic_copies_move_exactly_their_bytes_at_every_alignment() {
        for skew in 0..WORD {
            let backing = RegionMemory::allocate(N + 2 * WORD).unwrap();
            let r = part_of(&backing, skew, N);
            for offset in 0..=N {
                for len in 0..=N - offset {
                    let before: Vec<u8> = (0..backing.len()).map(|i| 0x80 | i as u8).collect();
                    assert!(backing.copy_in(0, &before));
                    let src: Vec<u8> = (0..len).map(|i| i as u8 + 1).collect();
                    assert!(r.copy_in(offset, &src));
                    let mut want = before.clone();
                    want[skew + offset..][..len].copy_from_slice(&src);
                    assert_eq!(bytes_of(&backing), want, "skew {skew} at {offset}+{len}");
                    let mut out = vec![0u8; len];
                    assert!(r.copy_out(offset, &mut out));
                    assert_eq!(out, src);
                    if len > 0 {
                        assert_eq!(r.load_acquire(offset + len - 1), Some(len as u8));
                    }
                    assert!(r.fill(offset, len, 0x11));
                    want[skew + offset..][..len].fill(0x11);
                    assert_eq!(
                        bytes_of(&backing),
                        want,
                        "fill: skew {skew} at {offset}+{len}"
                    );
                }
            }
            assert_eq!(r.load_acquire(N), None, "past the end");
        }
    }

    #[test]
    fn copies_of_word_runs_either_side_of_the_string_move_threshold_move_exactly_their_bytes() {
        // Runs of STRING_MOVE_MIN_WORDS words and more go through `rep movsq` on x86-64; one
        // word fewer through the loop. Both must move exactly the range, at every alignment.
        let t = STRING_MOVE_MIN_WORDS * WORD;
        let backing = RegionMemory::allocate(t + 8 * WORD).unwrap();
        let other = RegionMemory::allocate(t + 8 * WORD).unwrap();
        for skew in 0..WORD {
            for len in [t - WORD, t - 1, t, t + 1, t + WORD + 3, t + 2 * WORD] {
                let guard: Vec<u8> = (0..backing.len()).map(|i| 0x80 | i as u8).collect();
                assert!(backing.copy_in(0, &guard));
                let src: Vec<u8> = (0..len).map(|i| (i * 13 + 1) as u8).collect();
                assert!(backing.copy_in(skew, &src));
                let mut want = guard.clone();
                want[skew..][..len].copy_from_slice(&src);
                assert_eq!(
                    bytes_of(&backing),
                    want,
                    "copy_in: skew {skew}, {len} bytes"
                );
                let mut out = vec![0u8; len];
                assert!(backing.copy_out(skew, &mut out));
                assert_eq!(out, src, "copy_out: skew {skew}, {len} bytes");
                assert!(other.fill(0, other.len(), 0x5a));
                assert!(backing.copy_to(skew, &other, skew, len));
                let got = bytes_of(&other);
                assert_eq!(&got[skew..][..len], &src[..], "copy_to: skew {skew}, {len}");
                assert!(got[..skew]
                    .iter()
                    .chain(&got[skew + len..])
                    .all(|&b| b == 0x5a));
            }
        }
    }

    #[test]
    fn copies_between_regions_match_memmove_at_every_alignment() {
        let backing = RegionMemory::allocate(2 * N + 3 * WORD).unwrap();
        // Two registrations over one allocation: the copy may overlap either way.
        let a = part_of(&backing, 3, N + WORD);
        let b = part_of(&backing, 6, N + WORD);
        let step = if cfg!(miri) { 3 } else { 1 };
        for from in (0..N).step_by(step) {
            for to in (0..N).step_by(step) {
                for len in (0..N - from.max(to)).step_by(step) {
                    let init: Vec<u8> = (0..backing.len()).map(|i| i as u8).collect();
                    assert!(backing.copy_in(0, &init));
                    let mut want = init.clone();
                    want.copy_within(3 + from..3 + from + len, 6 + to);
                    assert!(a.copy_to(from, &b, to, len));
                    assert_eq!(bytes_of(&backing), want, "{from} -> {to}, {len} bytes");
                }
            }
        }
        let big = RegionMemory::allocate(3 * COPY_CHUNK + 5).unwrap();
        let src: Vec<u8> = (0..big.len()).map(|i| (i * 7) as u8).collect();
        assert!(big.copy_in(0, &src));
        let dst = RegionMemory::allocate(3 * COPY_CHUNK + 9).unwrap();
        assert!(big.copy_to(0, &dst, 3, big.len()));
        assert_eq!(&bytes_of(&dst)[3..3 + src.len()], &src[..], "chunked copy");
        // Same alignment on both sides, at least a chunk: word to word, every head and tail.
        let wide = RegionMemory::allocate(COPY_CHUNK + 4 * WORD).unwrap();
        for skew in 0..WORD {
            for extra in 0..WORD {
                let len = COPY_CHUNK + extra;
                assert!(wide.fill(0, wide.len(), 0xee));
                assert!(big.copy_to(skew + WORD, &wide, skew, len));
                let got = bytes_of(&wide);
                assert_eq!(&got[skew..skew + len], &src[skew + WORD..skew + WORD + len]);
                assert!(got[..skew].iter().all(|&b| b == 0xee), "below, skew {skew}");
                assert!(
                    got[skew + len..].iter().all(|&b| b == 0xee),
                    "above, {skew} {extra}"
                );
            }
        }
        // Overlapping, over several chunks, both ways (the last two word to word).
        for (from, to) in [(0, 5), (5, 0), (1, COPY_CHUNK + 3), (16, 0), (3, 19)] {
            assert!(big.copy_in(0, &src));
            let len = big.len() - from.max(to);
            let mut want = src.clone();
            want.copy_within(from..from + len, to);
            assert!(big.copy_to(from, &big, to, len));
            assert_eq!(
                bytes_of(&big),
                want,
                "overlapping chunked copy {from} -> {to}"
            );
        }
    }

    #[test]
    fn placements_into_neighbouring_bytes_of_one_word_keep_each_other() {
        use std::sync::{Arc, Barrier};
        // Two writers walk the same words, one storing bytes 0..3 of each, the other bytes
        // 3..8: each update of part of a word must leave the other bytes as the other writer
        // stored them (a plain read-modify-write of the word would undo the other's store).
        let (words, rounds) = if cfg!(miri) { (8, 2) } else { (4096, 100) };
        let r = Arc::new(RegionMemory::allocate(words * WORD).unwrap());
        for k in 1..=rounds as u8 {
            let go = Arc::new(Barrier::new(2));
            let writer = |from: usize, len: usize| {
                let (r, go) = (r.clone(), go.clone());
                std::thread::spawn(move || {
                    go.wait();
                    for w in 0..words {
                        assert!(r.copy_in(w * WORD + from, &vec![k; len]));
                    }
                })
            };
            let (t1, t2) = (writer(0, 3), writer(3, 5));
            t1.join().unwrap();
            t2.join().unwrap();
            let lost = bytes_of(&r).iter().filter(|&&b| b != k).count();
            assert_eq!(lost, 0, "round {k}: bytes lost to the other writer");
        }
    }

    #[test]
    fn a_consumer_that_sees_the_last_byte_with_acquire_sees_the_whole_copy() {
        use std::sync::atomic::AtomicU32;
        use std::sync::Arc;
        let rounds: u8 = if cfg!(miri) { 8 } else { 200 };
        let backing = Arc::new(RegionMemory::allocate(128).unwrap());
        let acked = Arc::new(AtomicU32::new(0));
        let writer = {
            let (backing, acked) = (backing.clone(), acked.clone());
            std::thread::spawn(move || {
                let r = part_of(&backing, 5, 100);
                for k in 1..=rounds {
                    while acked.load(Ordering::Acquire) != u32::from(k) - 1 {
                        std::thread::yield_now();
                    }
                    assert!(r.copy_in(0, &[k; 100]));
                }
            })
        };
        let r = part_of(&backing, 5, 100);
        for k in 1..=rounds {
            while r.load_acquire(99) != Some(k) {
                std::thread::yield_now();
            }
            assert_eq!(bytes_of(&r), vec![k; 100], "round {k}");
            acked.store(u32::from(k), Ordering::Release);
        }
        writer.join().unwrap();
    }

    #[test]
    fn a_vec_region_hands_its_buffer_back_once_and_only_after_revoking() {
        let r = RegionMemory::from_vec(vec![3u8; 40]).unwrap();
        assert!(r.holds_vec());
        assert!(r.copy_in(8, &[9; 8]));
        let v = r.take_vec().expect("the buffer");
        assert!(r.is_revoked(), "handed back only revoked");
        assert!(!r.copy_in(0, &[1]), "and nothing writes it after");
        assert!(r.take_vec().is_none(), "once");
        drop(r); // must leave the buffer handed back alone (Miri sees a double free)
        assert_eq!(&v[..8], &[3; 8]);
        assert_eq!(&v[8..16], &[9; 8]);
        // A buffer never handed back is freed with the region (Miri sees a leak otherwise).
        drop(RegionMemory::from_vec(vec![1u8; 10]).unwrap());
        assert!(RegionMemory::from_vec(Vec::new()).is_none());
        let a = RegionMemory::allocate(8).unwrap();
        assert!(!a.holds_vec());
        assert!(a.take_vec().is_none());
        assert!(!a.is_revoked(), "not a vec region: left alone");
    }

    #[test]
    fn zero_length_allocation_is_refused() {
        assert!(RegionMemory::allocate(0).is_none());
    }

    fn me() -> i32 {
        rustix::process::getpid().as_raw_nonzero().get()
    }

    /// The last unit is fetched apart (and stored with Release): whatever the piece's
    /// alignment and length, inside a word, across words or at the region's unaligned ends,
    /// exactly the piece's bytes are written, from the right remote bytes.
    #[test]
    #[cfg_attr(miri, ignore = "process_vm_readv is a foreign function")]
    fn pull_from_writes_exactly_the_piece_whatever_its_last_unit() {
        let src: Vec<u8> = (1..=200u8).collect();
        let base = src.as_ptr() as u64;
        // An odd length: the region's last bytes are edge bytes, accessed one by one.
        let r = RegionMemory::allocate(45).unwrap();
        for offset in 0..20usize {
            for len in 1..=(45 - offset).min(26) {
                assert!(r.fill(0, 45, 0));
                // Two remote ranges, the split inside the last 8 bytes when it can be.
                let cut = len.saturating_sub(3);
                let remote = [(base + 7, cut), (base + 100, len - cut)];
                let piece = RecvPiece {
                    mem: &r,
                    offset,
                    len,
                };
                pull_from(me(), &remote, &[piece]).unwrap();
                let mut out = [0u8; 45];
                r.copy_out(0, &mut out);
                let want: Vec<u8> = src[7..7 + cut]
                    .iter()
                    .chain(&src[100..100 + len - cut])
                    .copied()
                    .collect();
                assert_eq!(&out[offset..offset + len], &want[..], "{offset}+{len}");
                assert!(
                    out[..offset]
                        .iter()
                        .chain(&out[offset + len..])
                        .all(|&b| b == 0),
                    "{offset}+{len}: nothing else written"
                );
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "process_vm_readv is a foreign function")]
    fn pull_from_gathers_remote_ranges_into_pieces_in_order() {
        let src: Vec<u8> = (0..100u8).collect();
        let base = src.as_ptr() as u64;
        let r = RegionMemory::allocate(64).unwrap();
        let pieces = [
            RecvPiece {
                mem: &r,
                offset: 1,
                len: 5,
            },
            RecvPiece {
                mem: &r,
                offset: 40,
                len: 7,
            },
        ];
        // Three ranges that split across the pieces' boundary.
        let remote = [(base + 10, 3), (base + 50, 4), (base + 90, 5)];
        pull_from(me(), &remote, &pieces).unwrap();
        let mut out = [0u8; 64];
        r.copy_out(0, &mut out);
        assert_eq!(&out[1..6], &[10, 11, 12, 50, 51]);
        assert_eq!(&out[40..47], &[52, 53, 90, 91, 92, 93, 94]);
        assert_eq!(
            out.iter().filter(|&&b| b != 0).count(),
            12,
            "nothing else written"
        );
        assert_eq!(
            peek_word(me(), base + 8).unwrap(),
            u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15])
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "process_vm_readv is a foreign function")]
    fn pull_from_refuses_mismatched_totals_bad_pieces_and_revoked_regions() {
        let src = [7u8; 32];
        let base = src.as_ptr() as u64;
        let r = RegionMemory::allocate(16).unwrap();
        let piece = |offset, len| RecvPiece {
            mem: &r,
            offset,
            len,
        };
        let e = pull_from(me(), &[(base, 9)], &[piece(0, 8)]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = pull_from(me(), &[(base, 8)], &[piece(12, 8)]).unwrap_err();
        assert_eq!(
            e.kind(),
            io::ErrorKind::InvalidInput,
            "piece past the region"
        );
        let e = pull_from(me(), &[(base, usize::MAX), (base, 2)], &[piece(0, 1)]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "overflowing total");
        // An unmapped remote range: the kernel's EFAULT, not a crash.
        let e = pull_from(me(), &[(8, 8)], &[piece(0, 8)]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EFAULT));
        r.revoke();
        let e = pull_from(me(), &[(base, 8)], &[piece(0, 8)]).unwrap_err();
        assert!(is_revoked_error(&e));
        let mut out = [0u8; 16];
        assert!(!r.copy_out(0, &mut out));
    }

    #[test]
    #[cfg_attr(miri, ignore = "threads sleeping on a timer: slow under Miri")]
    fn revoke_waits_for_a_lease_to_end() {
        let r = Arc::new(RegionMemory::allocate(64).unwrap());
        assert!(r.lease(60, 8).is_none(), "range past the end");
        let lease = r.lease(8, 16).unwrap();
        assert_eq!(lease.addr(), r.addr() + 8);
        let done = Arc::new(AtomicBool::new(false));
        let t = {
            let (r, done) = (r.clone(), done.clone());
            std::thread::spawn(move || {
                r.revoke();
                done.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !done.load(Ordering::SeqCst),
            "revoke returned under a lease"
        );
        drop(lease);
        t.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
        assert!(r.lease(0, 8).is_none(), "no lease on a revoked region");
    }
}
