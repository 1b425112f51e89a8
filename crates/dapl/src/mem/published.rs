//! The published table: which remote accesses to mappable library memory (regions made by
//! [`RegionMemory::allocate_shared`]) the memory table allows, in a sealed memfd that peers of
//! the shm link map read-only, so that their library can check an RDMA Write or Read before it
//! copies into or out of a mapping of the region itself (docs/architecture.md, "The shm link",
//! "Mapped library memory").
//!
//! [`SLOTS`] slots of 64 bytes (8 words, little-endian as the host is: peers are processes of
//! one host); an STag goes in slot `index % SLOTS` (its 24-bit index), if that slot is free:
//! an entry that finds its slot taken is simply not published (peers take the ring path for
//! it). A slot is a seqlock written only by the memory table, under its write lock:
//!
//! | word | content |
//! |---|---|
//! | 0 | generation: odd while the slot changes; +2 on every publish and withdrawal |
//! | 1 | STag (low 32 bits; 0: empty), remote rights (`MemPriv` bits, high 32) |
//! | 2 | protection zone id |
//! | 3 | region id ([`RegionMemory::shared_file`]) |
//! | 4 | offset of the entry's first byte in the region's file |
//! | 5 | base virtual address (the TO of the entry's first byte) |
//! | 6 | length |
//! | 7 | reserved (0) |
//!
//! A reader ([`lookup`]) loads the generation with Acquire, the words, then the generation
//! again after an Acquire fence, and takes the entry only if both loads are the same even
//! value; [`still_valid`] re-reads the generation after a copy.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

use crate::mem::RegionMemory;
use crate::types::MemPriv;

/// Slots of the table.
pub const SLOTS: usize = 4096;
/// Bytes of a slot.
const SLOT: usize = 64;
/// Bytes of the table's file and mapping.
pub const TABLE_LEN: usize = SLOTS * SLOT;

/// One published entry, as a peer reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PubEntry {
    /// The STag.
    pub stag: u32,
    /// Its remote rights (`REMOTE_READ`, `REMOTE_WRITE`).
    pub rights: MemPriv,
    /// The protection zone it belongs to.
    pub pz: u64,
    /// The region's id (the file a peer maps).
    pub region: u64,
    /// Offset of the entry's first byte in the region's file.
    pub file_offset: u64,
    /// The TO of its first byte.
    pub base_va: u64,
    /// Its length.
    pub len: u64,
}

impl PubEntry {
    /// The offset in the region's file of `len` bytes at `to`, if the entry grants `right`
    /// for them to an endpoint of protection zone `pz` (checked arithmetic).
    pub fn check(&self, pz: u64, right: MemPriv, to: u64, len: u64) -> Option<u64> {
        if self.pz != pz || !self.rights.contains(right) {
            return None;
        }
        let off = to.checked_sub(self.base_va)?;
        if off.checked_add(len)? > self.len {
            return None;
        }
        self.file_offset.checked_add(off)
    }
}

/// The owner's side: the file and its writable mapping.
pub struct Published {
    fd: OwnedFd,
    mem: RegionMemory,
}

fn slot_of(stag: u32) -> usize {
    ((stag >> 8) as usize % SLOTS) * SLOT
}

impl Published {
    /// A fresh, empty table (a memfd sealed against resizing).
    pub fn new() -> io::Result<Published> {
        let fd = crate::mem::region::sealed_memfd("dapl-rs-published", TABLE_LEN)?;
        // The memory table's own: nothing revokes it.
        let mem = RegionMemory::map_shared(fd.as_fd(), TABLE_LEN)?.never_revoked();
        Ok(Published { fd, mem })
    }

    /// The table's file (peers get a read-only descriptor of it).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn word(&self, at: usize) -> &std::sync::atomic::AtomicU64 {
        self.mem.word(at).expect("slots lie inside the table")
    }

    /// Writes the slot at `at` (the memory table's write lock held: one writer).
    fn write(&self, at: usize, words: [u64; 7]) {
        let gen = self.word(at);
        let g = gen.load(Ordering::Relaxed);
        gen.store(g | 1, Ordering::Relaxed);
        // The odd generation is seen before any changed word.
        fence(Ordering::Release);
        for (k, w) in words.iter().enumerate() {
            self.word(at + 8 * (k + 1)).store(*w, Ordering::Relaxed);
        }
        gen.store((g | 1) + 1, Ordering::Release);
    }

    /// Publishes `e` in its STag's slot, if that slot is free. True if published.
    pub fn publish(&self, e: &PubEntry) -> bool {
        let at = slot_of(e.stag);
        if self.word(at + 8).load(Ordering::Relaxed) as u32 != 0 {
            return false; // another live STag has this slot
        }
        self.write(
            at,
            [
                u64::from(e.stag) | (u64::from(e.rights.bits()) << 32),
                e.pz,
                e.region,
                e.file_offset,
                e.base_va,
                e.len,
                0,
            ],
        );
        true
    }

    /// The entries published now (the owner's view, in slot order).
    pub fn entries(&self) -> impl Iterator<Item = PubEntry> + '_ {
        entries(&self.mem)
    }

    /// Withdraws `stag` (its entry left the memory table): the slot is emptied and its
    /// generation moves on, so that a peer's copy that checked it before sees the change.
    pub fn withdraw(&self, stag: u32) {
        let at = slot_of(stag);
        if self.word(at + 8).load(Ordering::Relaxed) as u32 == stag {
            self.write(at, [0; 7]);
        }
    }
}

/// A peer's side: the entry for `stag` in the table mapped as `table` and the generation it
/// was read at, if the slot holds `stag` and was stable while read.
pub fn lookup(table: &RegionMemory, stag: u32) -> Option<(PubEntry, u64)> {
    let at = slot_of(stag);
    let w = |k: usize| table.load_word(at + 8 * k, Ordering::Relaxed);
    let g1 = table.load_word(at, Ordering::Acquire)?;
    if g1 & 1 != 0 {
        return None;
    }
    let words = [w(1)?, w(2)?, w(3)?, w(4)?, w(5)?, w(6)?];
    fence(Ordering::Acquire);
    if w(0)? != g1 || words[0] as u32 != stag || stag == 0 {
        return None;
    }
    Some((
        PubEntry {
            stag,
            rights: MemPriv::from_bits_truncate((words[0] >> 32) as u32)
                & (MemPriv::REMOTE_READ | MemPriv::REMOTE_WRITE),
            pz: words[1],
            region: words[2],
            file_offset: words[3],
            base_va: words[4],
            len: words[5],
        },
        g1,
    ))
}

/// After a copy checked against `stag`'s slot at generation `gen`: true if the slot is still
/// at that generation (the entry was neither withdrawn nor replaced meanwhile).
pub fn still_valid(table: &RegionMemory, stag: u32, gen: u64) -> bool {
    // The copy's accesses come before this load (SeqCst fence: also its stores).
    fence(Ordering::SeqCst);
    table.load_word(slot_of(stag), Ordering::Acquire) == Some(gen)
}

/// The entries a peer's table (mapped as `table`) holds now, in slot order (a slot that is
/// changing is skipped).
pub fn entries(table: &RegionMemory) -> impl Iterator<Item = PubEntry> + '_ {
    (0..SLOTS).filter_map(move |i| {
        let stag = table.load_word(i * SLOT + 8, Ordering::Relaxed)? as u32;
        lookup(table, stag).map(|(e, _)| e)
    })
}

/// The region ids a peer's table (mapped as `table`) names now (to drop mappings of regions
/// it freed).
pub fn live_regions(table: &RegionMemory) -> std::collections::HashSet<u64> {
    (0..SLOTS)
        .filter_map(|i| {
            let at = i * SLOT;
            let stag = table.load_word(at + 8, Ordering::Relaxed)? as u32;
            (stag != 0).then(|| table.load_word(at + 24, Ordering::Relaxed))?
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(stag: u32) -> PubEntry {
        PubEntry {
            stag,
            rights: MemPriv::REMOTE_WRITE,
            pz: 7,
            region: 3,
            file_offset: 4096,
            base_va: 0x1000,
            len: 100,
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "memfd and mmap are foreign functions")]
    fn a_published_entry_reads_back_and_withdrawal_moves_its_generation_on() {
        let p = Published::new().expect("memfd");
        let peer = RegionMemory::map_shared_read_only(p.fd(), TABLE_LEN).expect("map");
        assert_eq!(lookup(&peer, 0x105), None);
        assert!(p.publish(&entry(0x105)));
        let (e, g) = lookup(&peer, 0x105).expect("published");
        assert_eq!(e, entry(0x105));
        assert_eq!(g % 2, 0);
        assert_eq!(entries(&peer).collect::<Vec<_>>(), [entry(0x105)]);
        // Another key of the same index, and another index of the same slot, find nothing.
        assert_eq!(lookup(&peer, 0x106), None);
        assert!(!p.publish(&entry(0x105 + ((SLOTS as u32) << 8))));
        assert!(still_valid(&peer, 0x105, g));
        p.withdraw(0x105);
        assert!(!still_valid(&peer, 0x105, g));
        assert_eq!(lookup(&peer, 0x105), None);
    }

    #[test]
    fn check_grants_only_the_right_pz_and_bounds() {
        let e = entry(0x105);
        assert_eq!(e.check(7, MemPriv::REMOTE_WRITE, 0x1000, 100), Some(4096));
        assert_eq!(
            e.check(7, MemPriv::REMOTE_WRITE, 0x1010, 10),
            Some(4096 + 16)
        );
        assert_eq!(e.check(8, MemPriv::REMOTE_WRITE, 0x1000, 1), None);
        assert_eq!(e.check(7, MemPriv::REMOTE_READ, 0x1000, 1), None);
        assert_eq!(e.check(7, MemPriv::REMOTE_WRITE, 0x1000, 101), None);
        assert_eq!(e.check(7, MemPriv::REMOTE_WRITE, 0xfff, 1), None);
        assert_eq!(e.check(7, MemPriv::REMOTE_WRITE, u64::MAX, 2), None);
    }

    #[test]
    #[cfg_attr(miri, ignore = "memfd and mmap are foreign functions")]
    fn a_read_only_mapping_refuses_every_write() {
        let p = Published::new().expect("memfd");
        let peer = RegionMemory::map_shared_read_only(p.fd(), TABLE_LEN).expect("map");
        assert!(peer.is_read_only());
        assert!(!peer.copy_in(0, &[1]));
        assert!(!peer.fill(0, 8, 1));
        assert!(peer.word(0).is_none());
        let src = RegionMemory::allocate(64).expect("alloc");
        assert!(!src.copy_to(0, &peer, 0, 8));
        assert!(peer.copy_to(0, &src, 0, 8));
    }
}
