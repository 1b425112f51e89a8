//! Raw registered memory: the one place in `dapl` (besides nothing else) that touches memory
//! through pointers.
//!
//! Memory a peer may write is never handed out as `&[u8]`/`&mut [u8]`: every access is a
//! bounds-checked raw copy (`copy_in`, `copy_out`, `copy_to`). All bounds checks use checked
//! arithmetic and happen here, so no caller can make these functions touch a byte outside the
//! region, whatever offsets a peer sends.
//!
//! Revocation: every access (a copy, or a `sendmsg`/`recvmsg` that names the region) runs as
//! one *access* counted in the region's state, and [`RegionMemory::revoke`] (LMR free, IA
//! close) marks the region revoked, then waits until the accesses in flight have ended. An
//! access that starts after the mark is refused without touching a byte. So once `revoke`
//! returns, nothing in the process reads or writes the region again, however long work that
//! resolved it before (a queued Read Response, a placement in another thread, a transmit
//! backlog) lives on: caller memory may then be freed.
#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Page size used for library-allocated regions.
pub const PAGE_SIZE: usize = 4096;

/// A block of memory registered with the library: either allocated by it (page aligned, zeroed,
/// freed on drop) or lent by the caller (never freed here).
pub struct RegionMemory {
    ptr: NonNull<u8>,
    len: usize,
    owned: Option<Layout>,
    /// [`REVOKED`] once revoked; below it, the number of accesses in flight.
    state: AtomicU64,
}

/// The bit of [`RegionMemory::state`] that marks a revoked region.
const REVOKED: u64 = 1 << 63;

/// One access in flight (see the module doc); ends when dropped.
struct Access<'a>(&'a RegionMemory);

impl Drop for Access<'_> {
    fn drop(&mut self) {
        // Release: the access's reads and writes happen before a `revoke` that sees it ended.
        self.0.state.fetch_sub(1, Ordering::Release);
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
// guaranteed valid by the caller of `from_raw` for the region's lifetime. All accesses are raw
// copies; concurrent copies into the same bytes are the RDMA model's documented race (the
// consumer must not touch memory while a DTO on it is outstanding), and no Rust reference to the
// memory is ever created, so sharing across threads adds no aliasing.
unsafe impl Send for RegionMemory {}
// SAFETY: as for Send: `&RegionMemory` only permits bounds-checked raw copies.
unsafe impl Sync for RegionMemory {}

/// Stores the last byte of a placement after everything before it.
///
/// Consumers poll the last byte of a buffer to learn that an RDMA write has landed (dtest -W
/// does, then compares the whole buffer), and `memcpy` gives no order: glibc's copies of a few
/// KiB store the tail before the middle. So placements copy all but the last byte, then a
/// release fence, then the last byte (x86-64 keeps stores in program order after that).
///
/// # Safety
/// `at` must be valid for a one-byte write.
unsafe fn last_byte_last(at: *mut u8, byte: u8) {
    std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
    // SAFETY: the caller's contract; a volatile store so the compiler keeps it after the fence.
    unsafe { at.write_volatile(byte) };
}

impl RegionMemory {
    /// Allocates `len` zeroed bytes, page aligned. `len` must be > 0. Large allocations are
    /// served by the kernel lazily (the pages are not touched here).
    pub fn allocate(len: usize) -> Option<Self> {
        if len == 0 || len > isize::MAX as usize - PAGE_SIZE {
            return None;
        }
        let layout = Layout::from_size_align(len, PAGE_SIZE).ok()?;
        // SAFETY: layout has a non-zero size (checked above).
        let p = unsafe { alloc::alloc_zeroed(layout) };
        NonNull::new(p).map(|ptr| RegionMemory {
            ptr,
            len,
            owned: Some(layout),
            state: AtomicU64::new(0),
        })
    }

    /// Wraps memory the caller owns.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be valid for reads and writes, and stay valid (not freed, unmapped
    /// or reused) until [`revoke`](Self::revoke) has returned or this value is dropped,
    /// whichever comes first; until then the caller must not create Rust references to it
    /// (the library and peers may write it at any time).
    pub unsafe fn from_raw(ptr: NonNull<u8>, len: usize) -> Self {
        RegionMemory {
            ptr,
            len,
            owned: None,
            state: AtomicU64::new(0),
        }
    }

    /// Starts an access, or None if the region is revoked (then nothing may touch it).
    fn enter(&self) -> Option<Access<'_>> {
        // Acquire pairs with `revoke`'s mark: an access that starts after it sees it. The
        // increment and the mark are read-modify-writes of one atomic, so one comes first:
        // either `revoke` then counts this access and waits for it, or this access sees
        // REVOKED and backs out.
        let prev = self.state.fetch_add(1, Ordering::Acquire);
        let access = Access(self);
        if prev & REVOKED != 0 {
            return None; // `access` is dropped: the count goes back
        }
        Some(access)
    }

    /// Revokes the region: no access starts after this is called, and it returns once every
    /// access in flight has ended, after which nothing in the process reads or writes the
    /// memory through this region again. Accesses are short (a copy, or one non-blocking
    /// socket call), so the wait is too. Idempotent.
    pub fn revoke(&self) {
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

    /// Copies `src` into the region at `offset`. Returns false (and copies nothing) if the
    /// range does not lie inside the region or the region is revoked.
    pub fn copy_in(&self, offset: usize, src: &[u8]) -> bool {
        if !self.range_ok(offset, src.len()) {
            return false;
        }
        let Some(_access) = self.enter() else {
            return false;
        };
        let Some((&last, head)) = src.split_last() else {
            return true;
        };
        // SAFETY: offset+len <= self.len (checked), the region is valid for writes (type
        // invariant), and `src` is a live Rust slice, which cannot overlap region memory since no
        // reference into the region is ever created.
        unsafe {
            let dst = self.ptr.as_ptr().add(offset);
            std::ptr::copy_nonoverlapping(head.as_ptr(), dst, head.len());
            last_byte_last(dst.add(head.len()), last);
        }
        true
    }

    /// Copies from the region at `offset` into `dst`. Returns false (and copies nothing) if the
    /// range does not lie inside the region or the region is revoked.
    pub fn copy_out(&self, offset: usize, dst: &mut [u8]) -> bool {
        if !self.range_ok(offset, dst.len()) {
            return false;
        }
        let Some(_access) = self.enter() else {
            return false;
        };
        // SAFETY: bounds checked above; region valid for reads; `dst` is a distinct Rust slice.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(offset),
                dst.as_mut_ptr(),
                dst.len(),
            )
        };
        true
    }

    /// Copies `len` bytes from this region at `offset` to `dst` at `dst_offset` (the two may be
    /// the same region and may overlap). Returns false (and copies nothing) if either range
    /// is out of bounds or either region is revoked.
    pub fn copy_to(
        &self,
        offset: usize,
        dst: &RegionMemory,
        dst_offset: usize,
        len: usize,
    ) -> bool {
        if !self.range_ok(offset, len) || !dst.range_ok(dst_offset, len) {
            return false;
        }
        let (Some(_from), Some(_to)) = (self.enter(), dst.enter()) else {
            return false;
        };
        if len == 0 {
            return true;
        }
        // SAFETY: both ranges are inside their regions (checked); `copy` allows overlap, and
        // the source's last byte is read before anything is written.
        unsafe {
            let from = self.ptr.as_ptr().add(offset);
            let to = dst.ptr.as_ptr().add(dst_offset);
            let last = from.add(len - 1).read();
            std::ptr::copy(from, to, len - 1);
            last_byte_last(to.add(len - 1), last);
        }
        true
    }

    /// Sets `len` bytes at `offset` to `byte`. Returns false if out of bounds or revoked.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> bool {
        if !self.range_ok(offset, len) {
            return false;
        }
        let Some(_access) = self.enter() else {
            return false;
        };
        // SAFETY: bounds checked above; region valid for writes.
        unsafe { std::ptr::write_bytes(self.ptr.as_ptr().add(offset), byte, len) };
        true
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

/// Writes `pieces` in order to the stream socket `fd` with one non-blocking `sendmsg` that
/// cannot raise SIGPIPE. Writes at most [`MAX_GATHER`] pieces; returns the byte count written.
/// Nothing is written if a piece is out of bounds (`InvalidInput`) or its region revoked
/// ([`is_revoked_error`]).
pub fn send_gather(fd: BorrowedFd<'_>, pieces: &[IoPiece<'_>]) -> io::Result<usize> {
    let mut iov: [libc::iovec; MAX_GATHER] = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX_GATHER];
    // One access per region piece, held across the system call.
    let mut accesses: arrayvec::ArrayVec<Access<'_>, MAX_GATHER> = arrayvec::ArrayVec::new();
    let mut n = 0;
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
        iov[n] = libc::iovec {
            iov_base: base,
            iov_len: len,
        };
        n += 1;
    }
    let msg = msghdr(&mut iov[..n]);
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
    let mut iov: [libc::iovec; MAX_GATHER] = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX_GATHER];
    let mut accesses: arrayvec::ArrayVec<Access<'_>, MAX_GATHER> = arrayvec::ArrayVec::new();
    let mut n = 0;
    for p in pieces.iter().take(MAX_GATHER) {
        iov[n] = p
            .mem
            .iovec(p.offset, p.len)
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        accesses.push(p.mem.enter().ok_or_else(revoked_error)?);
        n += 1;
    }
    let mut msg = msghdr(&mut iov[..n]);
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

impl Drop for RegionMemory {
    fn drop(&mut self) {
        if let Some(layout) = self.owned {
            // SAFETY: ptr was returned by `alloc_zeroed(layout)` and is freed exactly once.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

impl std::fmt::Debug for RegionMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RegionMemory({:#x}+{})", self.addr(), self.len)
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

    #[test]
    fn zero_length_allocation_is_refused() {
        assert!(RegionMemory::allocate(0).is_none());
    }
}
