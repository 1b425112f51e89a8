//! The harness's memory: every pointer the harness passes to the provider points in here.
//!
//! ```text
//! | G | buffer 0 | G | buffer 1 | G | buffer 2 | G | buffer 3 | G | inputs | G | outputs | G |
//! ```
//! `G` are guard zones. LMRs are only ever created over (parts of) the four buffers; the input
//! area holds what the harness passes by pointer for the provider to read (iovs, attributes,
//! addresses, private data, events), and the output area the storage for output arguments,
//! handed out per call, each a window of exactly `size_of::<T>()` bytes followed by a gap.
//!
//! After every call, [`Arena::check`] compares every byte that is neither inside a live LMR
//! nor inside one of that call's output windows with the snapshot taken after the previous
//! call: guard zones, the gaps after output windows, the inputs, and buffer bytes no live LMR
//! covers (never registered, or registered by an LMR since freed) must not have changed.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::c_void;
use std::ptr::NonNull;

use crate::ffi::*;

/// Size of each LMR buffer.
pub(crate) const BUF_LEN: usize = 4096;
/// How many LMR buffers.
pub(crate) const BUFS: usize = 4;
/// Guard bytes between areas.
const GUARD: usize = 256;
const IN_LEN: usize = 2048;
const OUT_LEN: usize = 4096;
/// Gap left after each output window (a write past the window's end lands in it).
const OUT_GAP: usize = 32;

/// Where the areas start.
const fn buf_off(i: usize) -> usize {
    GUARD + i * (BUF_LEN + GUARD)
}
const IN_OFF: usize = buf_off(BUFS);
const OUT_OFF: usize = IN_OFF + IN_LEN + GUARD;
const TOTAL: usize = OUT_OFF + OUT_LEN + GUARD;

/// Offsets of the input slots (inside the input area).
pub(crate) const MAX_SEGS: usize = 64;
pub(crate) const IN_SEGS: usize = IN_OFF;
pub(crate) const IN_RMR_TRIPLET: usize = IN_SEGS + MAX_SEGS * 16;
pub(crate) const IN_EVENT: usize = IN_RMR_TRIPLET + 16;
pub(crate) const IN_EP_ATTR: usize = IN_EVENT + 128;
pub(crate) const IN_EP_PARAM: usize = IN_EP_ATTR + 96;
pub(crate) const IN_SRQ_ATTR: usize = IN_EP_PARAM + 192;
pub(crate) const IN_ADDR: usize = IN_SRQ_ATTR + 16;
pub(crate) const IN_PDATA: usize = IN_ADDR + 32;
pub(crate) const PDATA_LEN: usize = 256;
const _: () = assert!(IN_PDATA + PDATA_LEN <= IN_OFF + IN_LEN);
const _: () = assert!(std::mem::size_of::<DAT_EVENT>() <= 128);
const _: () = assert!(std::mem::size_of::<DAT_EP_ATTR>() <= 96);
const _: () = assert!(std::mem::size_of::<DAT_EP_PARAM>() <= 192);
const _: () = assert!(std::mem::size_of::<DAT_LMR_TRIPLET>() == 16);

/// Types the harness reads back from, or writes into, the arena: any bit pattern is a value.
///
/// # Safety
/// Implement only for integers, raw pointers, and `repr(C)` structs, unions and arrays of
/// them (no references, no function pointers, no enums, no `bool`).
pub(crate) unsafe trait Plain: Copy {
    /// All-zero bytes.
    fn zeroed() -> Self {
        // SAFETY: the trait's promise: all-zero bytes are a value of Self.
        unsafe { std::mem::zeroed() }
    }
}

macro_rules! plain {
    ($($t:ty),* $(,)?) => {
        // SAFETY: integers, raw pointers, and the `repr(C)` structs and unions of ffi.rs made
        // of those (checked against the C headers by tests/layout.rs): no function pointers.
        $(unsafe impl Plain for $t {})*
    };
}

plain!(
    u8,
    u32,
    i32,
    u64,
    *mut c_void,
    DAT_EVENT,
    DAT_IA_ATTR,
    DAT_PROVIDER_ATTR,
    DAT_EP_ATTR,
    DAT_EP_PARAM,
    DAT_LMR_PARAM,
    DAT_RMR_PARAM,
    DAT_CR_PARAM,
    DAT_EVD_PARAM,
    DAT_PZ_PARAM,
    DAT_PSP_PARAM,
    DAT_RSP_PARAM,
    DAT_SRQ_PARAM,
    DAT_SRQ_ATTR,
    DAT_LMR_TRIPLET,
    DAT_RMR_TRIPLET,
    DAT_CONTEXT,
    DAT_SOCK_ADDR,
    DAT_DTO_COMPLETION_EVENT_DATA,
    DAT_RMR_BIND_COMPLETION_EVENT_DATA,
    DAT_CONNECTION_EVENT_DATA,
    DAT_ASYNCH_ERROR_EVENT_DATA,
    DAT_SOFTWARE_EVENT_DATA,
);

/// An output argument: NULL, or a window in the output area.
pub(crate) struct Out<T> {
    pub(crate) ptr: *mut T,
    off: Option<usize>,
}

pub(crate) struct Arena {
    base: NonNull<u8>,
    /// What every byte held after the last check.
    snap: Vec<u8>,
    /// Next free byte of the output area.
    out_next: usize,
    /// This call's output windows (offset, length).
    windows: Vec<(usize, usize)>,
}

fn layout() -> Layout {
    Layout::from_size_align(TOTAL, 4096).expect("arena layout")
}

impl Arena {
    pub(crate) fn new() -> Arena {
        // SAFETY: a non-zero size.
        let p = unsafe { alloc_zeroed(layout()) };
        let base = NonNull::new(p).expect("arena allocation");
        let mut a = Arena {
            base,
            snap: vec![0; TOTAL],
            out_next: OUT_OFF,
            windows: Vec::new(),
        };
        // Guards and buffers get a recognisable pattern, so a stray write of zeros shows too.
        let mut fill = vec![0u8; TOTAL];
        for (i, b) in fill.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(31) ^ 0xa5;
        }
        a.write_bytes(0, &fill);
        a
    }

    /// The address of byte `off`.
    pub(crate) fn addr(&self, off: usize) -> u64 {
        self.base.as_ptr() as usize as u64 + off as u64
    }

    /// A pointer to byte `off`, typed.
    pub(crate) fn ptr<T>(&self, off: usize) -> *mut T {
        self.base.as_ptr().wrapping_add(off).cast()
    }

    /// Where LMR buffer `i` starts.
    pub(crate) fn buf(i: usize) -> usize {
        buf_off(i % BUFS)
    }

    /// Writes `v` at `off` (an input slot), and takes it into the snapshot.
    pub(crate) fn put<T: Plain>(&mut self, off: usize, v: T) {
        assert!(off % std::mem::align_of::<T>() == 0 && off + std::mem::size_of::<T>() <= TOTAL);
        // SAFETY: in bounds and aligned (asserted); no provider call runs now, and nothing
        // else holds a reference into the arena.
        unsafe { self.ptr::<T>(off).write(v) };
        self.resnap(off, std::mem::size_of::<T>());
    }

    /// Writes bytes at `off`, and takes them into the snapshot.
    pub(crate) fn write_bytes(&mut self, off: usize, b: &[u8]) {
        assert!(off + b.len() <= TOTAL);
        // SAFETY: in bounds (asserted); `b` is harness memory, not the arena.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), self.ptr::<u8>(off), b.len()) };
        self.resnap(off, b.len());
    }

    /// Reads a `T` at `off`.
    pub(crate) fn get<T: Plain>(&self, off: usize) -> T {
        assert!(off % std::mem::align_of::<T>() == 0 && off + std::mem::size_of::<T>() <= TOTAL);
        // SAFETY: in bounds and aligned (asserted); any bits are a T (`Plain`).
        unsafe { self.ptr::<T>(off).read() }
    }

    /// The whole arena, read now (no provider call runs while the slice lives).
    fn bytes(&self) -> &[u8] {
        // SAFETY: TOTAL bytes allocated at base; the provider touches the arena only inside
        // vtable calls, all made by this thread (the loopback link moves data inline), so
        // nothing writes it while this borrow of `self` lives.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), TOTAL) }
    }

    fn resnap(&mut self, off: usize, len: usize) {
        assert!(off + len <= TOTAL);
        // SAFETY: in bounds (asserted), otherwise as in `bytes`; `snap` is a separate
        // allocation, so the two do not overlap.
        let now = unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(off), len) };
        self.snap[off..off + len].copy_from_slice(now);
    }

    /// Starts a call: no output windows yet.
    pub(crate) fn begin(&mut self) {
        self.out_next = OUT_OFF;
        self.windows.clear();
    }

    /// Storage for an output `T` of this call (NULL if `null`), filled with a pattern first.
    pub(crate) fn out<T>(&mut self, null: bool) -> Out<T> {
        if null {
            return Out {
                ptr: std::ptr::null_mut(),
                off: None,
            };
        }
        let size = std::mem::size_of::<T>();
        let off = (self.out_next + 7) & !7;
        assert!(
            off + size + OUT_GAP <= OUT_OFF + OUT_LEN,
            "output area full"
        );
        self.out_next = off + size + OUT_GAP;
        let pattern: Vec<u8> = (0..size).map(|i| 0xc0 ^ i as u8).collect();
        self.write_bytes(off, &pattern);
        self.windows.push((off, size));
        Out {
            ptr: self.ptr(off),
            off: Some(off),
        }
    }

    /// The value the provider stored in an output (None for a NULL one).
    pub(crate) fn read<T: Plain>(&self, o: &Out<T>) -> Option<T> {
        o.off.map(|off| self.get(off))
    }

    /// A `U` at byte `field` of a non-NULL output `o` (a field of the `T` there).
    pub(crate) fn at<T, U: Plain>(&self, o: &Out<T>, field: usize) -> U {
        assert!(field + std::mem::size_of::<U>() <= std::mem::size_of::<T>());
        self.get(o.off.expect("not NULL") + field)
    }

    /// Compares every byte outside `live` (arena ranges of live LMRs) and this call's output
    /// windows with the snapshot, then takes those ranges as they are now into the snapshot
    /// (the rest is equal to it, or the check failed). `Err` names the first byte that changed.
    pub(crate) fn check(&mut self, live: &[(usize, usize)]) -> Result<(), String> {
        let mut allowed: Vec<(usize, usize)> = live
            .iter()
            .chain(self.windows.iter())
            .map(|&(o, l)| (o, (o + l).min(TOTAL)))
            .collect();
        allowed.sort_unstable();
        let mut first = None;
        {
            let now = self.bytes();
            let mut compare = |from: usize, to: usize| {
                if first.is_none() && from < to && now[from..to] != self.snap[from..to] {
                    first = (from..to).find(|&i| now[i] != self.snap[i]);
                }
            };
            let mut at = 0;
            for &(s, e) in &allowed {
                compare(at, s.max(at));
                at = at.max(e);
            }
            compare(at, TOTAL);
        }
        if let Some(i) = first {
            let now = self.bytes()[i];
            let was = self.snap[i];
            self.resnap(0, TOTAL);
            return Err(format!(
                "byte {i} of the arena ({}) changed from {was:#04x} to {now:#04x}",
                describe(i)
            ));
        }
        for (s, e) in allowed {
            self.resnap(s, e - s);
        }
        Ok(())
    }
}

/// Which area byte `i` is in.
fn describe(i: usize) -> String {
    for b in 0..BUFS {
        let s = buf_off(b);
        if (s..s + BUF_LEN).contains(&i) {
            return format!("buffer {b} byte {}, not in a live LMR", i - s);
        }
    }
    if (IN_OFF..IN_OFF + IN_LEN).contains(&i) {
        return format!("input area byte {}", i - IN_OFF);
    }
    if (OUT_OFF..OUT_OFF + OUT_LEN).contains(&i) {
        return format!(
            "output area byte {}, outside this call's windows",
            i - OUT_OFF
        );
    }
    "a guard zone".into()
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once. Only dropped with no IA open
        // (every LMR over it is gone: the harness closes its IA at the end of every input).
        unsafe { dealloc(self.base.as_ptr(), layout()) };
    }
}
