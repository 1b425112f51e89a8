//! Buffers that start on a page boundary, for the baselines.
//!
//! Where a buffer starts changes what a copy costs on this machine: with `malloc`'s alignment
//! (16 bytes; a large allocation is an `mmap` with a 16-byte header) the destination of a
//! copy may be off a cache line by another amount than its source, and then glibc's `memcpy`
//! (`rep movsb` at these sizes: 38.6 GB/s with `glibc.cpu.x86_rep_movsb_threshold` raised)
//! ran a 64 KiB copy at 2.4 GB/s instead of 39-48, and the kernel's copy for
//! `process_vm_readv` at 1.9-2.3 instead of 8-10 (2026-12-07, AMD EPYC, glibc 2.36). The DAT
//! side's buffers start on a page (`lmr_allocate`), so the baselines' do too. Over-allocated by
//! a page and sliced, with no `unsafe`.

use std::ops::{Deref, DerefMut};

/// Page alignment of the baselines' buffers.
pub const PAGE: usize = 4096;

/// `len` bytes starting on a page boundary.
pub struct PageBuf {
    v: Vec<u8>,
    at: usize,
    len: usize,
}

impl PageBuf {
    /// `len` bytes of `fill`, the first on a page boundary.
    pub fn new(len: usize, fill: u8) -> PageBuf {
        let v = vec![fill; len + PAGE];
        let at = v.as_ptr().align_offset(PAGE);
        PageBuf { v, at, len }
    }
}

impl Deref for PageBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.v[self.at..self.at + self.len]
    }
}

impl DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.v[self.at..self.at + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_buffer_starts_on_a_page_boundary_and_holds_its_fill() {
        for size in [0, 1, 4096, 65536, 1 << 20] {
            let mut b = PageBuf::new(size, 0x5a);
            assert_eq!(b.len(), size);
            assert_eq!(b.as_ptr() as usize % PAGE, 0, "{size} bytes");
            assert!(b.iter().all(|&x| x == 0x5a));
            if size > 0 {
                b[size - 1] = 1;
                assert_eq!(b[size - 1], 1);
            }
        }
    }
}
