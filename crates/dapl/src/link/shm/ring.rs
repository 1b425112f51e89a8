//! One direction of a shm connection: a single-producer, single-consumer ring of records in
//! memory both processes map (a sealed memfd). No locks in shared memory: the producer owns
//! the records and the tail, the consumer the head, each published with Release and read with
//! Acquire.
//!
//! Layout (offsets in the mapping; each control word on a cache line of its own):
//! - `TAIL` (u64): bytes the producer has published in total. Only the doorbell protocol
//!   reads it ([`stop_polling`]): the consumer finds records by their own first word (below),
//!   so a message moves one cache line between the processes, not two.
//! - `HEAD` (u64): bytes the consumer has consumed in total.
//! - `WAITING` (u64): set by a producer that found the ring full; the consumer that frees
//!   space clears it and rings the producer's doorbell.
//! - `POLLING` (u64): not 0 while a consumer polls the ring itself (the consumer's IA has a
//!   polling window open, and whoever ends it clears the word): the producer need not ring
//!   its doorbell meanwhile.
//! - `DATA`..: the records, `cap` bytes (a power of two), positions taken modulo `cap`.
//!
//! Who rings whom after reading or writing these words is decided in [`wake`](super::wake)
//! (checked there under loom).
//!
//! A record is a multiple of [`ALIGN`] (64) bytes and never wraps: a producer that reaches the
//! end writes a `PAD` record to it and goes on at the start. It begins with a 40-byte header
//! (little-endian): record length u32, kind u8, flags u8, 2 zero bytes, payload length u32,
//! `stag` u32, then three u64 (`a`, `b`, `c`: what each kind needs); the payload follows. An
//! 8-byte Send is one cache line.
//!
//! Finding records without the tail: the header's first word (length, kind, flags) is never 0
//! for a record, and the word at the position after the last record published is always 0
//! until the next record is published there. The producer keeps this by writing a record's
//! other bytes first, then its first word with Release, the word after it having been set to
//! 0 before (room for that word is reserved with the record). It zeroes ahead: after a
//! publish, the first word of every line of the free space up to [`ZERO_AHEAD`] bytes past
//! the tail (a record may start at any line; what a line held a lap ago is payload, or an
//! older record), so that the word after a small record is almost always 0 already; only
//! when it is not is it stored before the record's first word. So the line after a record,
//! which the consumer may still hold from the last lap, is taken over by the producer away
//! from the message's path, not between its bytes and their publication (x86 makes stores
//! visible in order: a store to that line delayed the record by a cache-line transfer when
//! the two processes ran on different cores). And the first word of the first record pushed
//! since the last [`Producer::publish`] is stored only by that publish (so nothing pushed is
//! seen before it, and records pushed after it are reached only through it). The consumer
//! loads the word at its head with Acquire: 0 means nothing yet, anything else is a record
//! whose bytes are all written.
//!
//! Everything the peer wrote is data to check, not trust: a record length that is 0, not
//! aligned, or runs past the end of the data area, an unknown kind, a flag the kind does not
//! have, a Send naming an STag without INVALIDATE, or a pad that does not run from past the
//! start of the data area to its end, is [`Garbage`]: the connection breaks. Reads and writes
//! of the mapping are the atomic copies of [`RegionMemory`], so the peer's writes are never a
//! data race here.
//! A peer that leaves records all around the ring is a peer sending without end, which
//! `process` bounds to a ring's worth of bytes per call.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::wake;
use crate::mem::RegionMemory;

/// Offset of the producer's tail.
const TAIL: usize = 0;
/// Offset of the consumer's head.
const HEAD: usize = 64;
/// Offset of the producer's "ring full, wake me" flag.
const WAITING: usize = 128;
/// Offset of the consumer's "polling until" word.
const POLLING: usize = 192;
/// Offset of the records.
pub(crate) const DATA: usize = 4096;
/// Records are multiples of this.
pub(crate) const ALIGN: usize = 64;
/// Bytes of a record header.
pub(crate) const HDR: usize = 40;
/// Records of at most this many bytes (header and payload) are written with one copy
/// ([`Producer::push_small`]).
pub(crate) const SMALL_RECORD: usize = 128;
/// Bytes kept free after the last record: its guard word, 0 until the next record.
const GUARD: usize = 8;

/// How far past the tail the producer keeps the free space's lines zeroed (module doc); it
/// zeroes again when less than half of that is left, so that one publish in many takes over
/// a run of lines at once.
const ZERO_AHEAD: u64 = 4096;

/// What a record carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// Filler to the end of the data area.
    Pad = 0,
    /// A Send segment: `a` = offset in the message, flags LAST, SOLICITED; with flag
    /// INVALIDATE a Send with Invalidate, `stag` = the STag to invalidate (in every segment of
    /// the message; `stag` is 0 without the flag).
    Send = 1,
    /// An RDMA Write segment: `stag`, `a` = tagged offset.
    Write = 2,
    /// The end of an RDMA Write with Immediate Data: `stag` = the immediate value, `a` = the
    /// write's length, flag SOLICITED.
    Immed = 3,
    /// An RDMA Read Request: `stag` = sink STag, `a` = sink offset, `b` = source offset,
    /// `c` = source STag | length << 32.
    ReadRequest = 4,
    /// An RDMA Read Response segment: `stag` = sink STag, `a` = sink offset, flag LAST.
    ReadResponse = 5,
    /// The producer left the connection: flag BROKEN if abruptly.
    Close = 6,
    /// What the producer can do, sent once as its first record by the requester: flag PULL if
    /// it can read the consumer's memory by cross-memory attach.
    Caps = 7,
}

impl Kind {
    fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            0 => Kind::Pad,
            1 => Kind::Send,
            2 => Kind::Write,
            3 => Kind::Immed,
            4 => Kind::ReadRequest,
            5 => Kind::ReadResponse,
            6 => Kind::Close,
            7 => Kind::Caps,
            _ => return None,
        })
    }
}

/// Record flags.
pub(crate) const LAST: u8 = 1;
/// Record flags: the message is solicited.
pub(crate) const SOLICITED: u8 = 2;
/// Record flags: a Close that breaks the connection.
pub(crate) const BROKEN: u8 = 4;
/// Record flags of a Close: the peer refused our oldest RDMA Read Request.
pub(crate) const READ_REFUSED: u8 = 8;
/// Record flags of a Send: a Send with Invalidate (RFC 5040), the STag to invalidate in the
/// header's `stag`.
pub(crate) const INVALIDATE: u8 = 32;
/// Record flags: the payload of a Send, Write or Read Response is not its data but a
/// descriptor of it, (address u64, length u64) pairs in the producer's memory, which the
/// consumer copies out by cross-memory attach before it consumes the record (the producer's
/// message is complete once the consumer's head has passed it). On a Caps record: the producer
/// can read the consumer's memory.
pub(crate) const PULL: u8 = 16;

/// The flags a record of `kind` may carry; any other is garbage (a record this consumer does
/// not understand must break the connection, not be half understood).
fn allowed_flags(kind: Kind) -> u8 {
    match kind {
        Kind::Pad | Kind::ReadRequest => 0,
        Kind::Send => LAST | SOLICITED | PULL | INVALIDATE,
        Kind::Write | Kind::Caps => PULL,
        Kind::Immed => SOLICITED,
        Kind::ReadResponse => LAST | PULL,
        Kind::Close => BROKEN | READ_REFUSED,
    }
}

/// A record's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) kind: Kind,
    pub(crate) flags: u8,
    pub(crate) payload_len: u32,
    pub(crate) stag: u32,
    pub(crate) a: u64,
    pub(crate) b: u64,
    pub(crate) c: u64,
}

impl Header {
    pub(crate) fn new(kind: Kind) -> Header {
        Header {
            kind,
            flags: 0,
            payload_len: 0,
            stag: 0,
            a: 0,
            b: 0,
            c: 0,
        }
    }

    fn encode(&self, rec_len: usize) -> [u8; HDR] {
        let mut h = [0u8; HDR];
        h[0..4].copy_from_slice(&(rec_len as u32).to_le_bytes());
        h[4] = self.kind as u8;
        h[5] = self.flags;
        h[8..12].copy_from_slice(&self.payload_len.to_le_bytes());
        h[12..16].copy_from_slice(&self.stag.to_le_bytes());
        h[16..24].copy_from_slice(&self.a.to_le_bytes());
        h[24..32].copy_from_slice(&self.b.to_le_bytes());
        h[32..40].copy_from_slice(&self.c.to_le_bytes());
        h
    }
}

/// The offset in the data area of ring position `pos` (`cap` a power of two: a mask, not a
/// division, which costs tens of cycles on the path of every record).
fn wrap(pos: u64, cap: usize) -> usize {
    debug_assert!(cap.is_power_of_two());
    (pos & (cap as u64 - 1)) as usize
}

/// The bytes a record of `payload` bytes takes.
pub(crate) fn record_len(payload: usize) -> usize {
    (HDR + payload).next_multiple_of(ALIGN)
}

/// The peer broke the ring's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Garbage(pub(crate) &'static str);

/// The bytes of the mapping a ring of `cap` data bytes needs.
pub(crate) fn mapping_len(cap: usize) -> usize {
    DATA + cap
}

fn word(mem: &RegionMemory, off: usize) -> &std::sync::atomic::AtomicU64 {
    mem.word(off)
        .expect("ring control words are aligned words of the mapping")
}

/// True if the ring in `mem` (`cap` data bytes) has a record at the consumer's head: two
/// loads, no lock (a poll that finds nothing costs no more). The head is the consumer's own
/// line and the word at it the line it reads next anyway, so a poll does not pull the
/// producer's tail across. A head the peer scribbled over gives a wrong answer, never a read
/// outside the ring.
pub(crate) fn pending(mem: &RegionMemory, cap: usize) -> bool {
    let head = word(mem, HEAD).load(Ordering::Relaxed);
    let at = DATA + (wrap(head, cap) & !(ALIGN - 1));
    word(mem, at).load(Ordering::Relaxed) != 0
}

/// Tells the producer of the ring in `mem` that its consumer polls it (the producer need not
/// ring until [`stop_polling`]). Only under the IA's polling window ([`wake::poll_window`]).
pub(crate) fn mark_polled(mem: &RegionMemory) {
    wake::mark_polled(word(mem, POLLING));
}

/// True while the ring in `mem` is marked polled ([`mark_polled`]): its consumer's next poll,
/// or the end of its window ([`stop_polling`]), looks at what waits in it.
pub(crate) fn is_polled(mem: &RegionMemory) -> bool {
    word(mem, POLLING).load(Ordering::Relaxed) != 0
}

/// The consumer of the ring in `mem` stops polling it: its producer rings again. True if
/// records arrived that no doorbell announced (the caller has them handled). Fenced against
/// [`Producer::needs_bell`] ([`wake::stop_polling`]).
pub(crate) fn stop_polling(mem: &RegionMemory) -> bool {
    wake::stop_polling(word(mem, POLLING), word(mem, TAIL), word(mem, HEAD))
}

/// The producing end of a ring.
pub(crate) struct Producer {
    mem: Arc<RegionMemory>,
    cap: usize,
    /// What this end has published (the shared tail is only written, never read back).
    tail: u64,
    /// The consumer's head as this end last read it: room is judged by it first, and the
    /// head (a cache line the consumer writes on every record) is read again only when that
    /// shows too little. Behind the real head, never ahead: the room it shows is there.
    seen_head: u64,
    /// The first record pushed since the last publish (its offset in the mapping and its
    /// first word): that word is stored by the publish, so no record pushed meanwhile is
    /// seen before it.
    unpublished: Option<(usize, u64)>,
    /// Every line of positions `tail..zeroed` is free and its first word was last stored by
    /// this end, with 0 (module doc).
    zeroed: u64,
}

impl Producer {
    /// The producing end of the ring in `mem` (`cap` data bytes, a power of two).
    pub(crate) fn new(mem: Arc<RegionMemory>, cap: usize) -> Producer {
        assert!(cap.is_power_of_two() && mem.len() >= mapping_len(cap));
        // The peer made the ring: a tail off the line grid would put records (and this end's
        // word stores) off it.
        let tail = word(&mem, TAIL).load(Ordering::Acquire) & !(ALIGN as u64 - 1);
        let seen_head = word(&mem, HEAD).load(Ordering::Acquire);
        Producer {
            mem,
            cap,
            tail,
            seen_head,
            unpublished: None,
            zeroed: tail,
        }
    }

    /// Bytes free, or garbage if the consumer's head is impossible.
    fn free(&self) -> Result<usize, Garbage> {
        self.free_at(word(&self.mem, HEAD).load(Ordering::Acquire))
    }

    /// Bytes free with the consumer's head at `head`, or garbage if that is impossible.
    fn free_at(&self, head: u64) -> Result<usize, Garbage> {
        let used = self.tail.wrapping_sub(head);
        if used > self.cap as u64 {
            return Err(Garbage("the consumer's head is ahead of the tail"));
        }
        Ok(self.cap - used as usize)
    }

    /// [`wake::look_or_wait`] on this ring's head and waiting flag.
    fn look_or_wait(
        &self,
        enough: impl FnMut(u64) -> Result<bool, Garbage>,
    ) -> Result<bool, Garbage> {
        wake::look_or_wait(word(&self.mem, HEAD), word(&self.mem, WAITING), enough)
    }

    /// The largest payload one record can carry in this ring.
    pub(crate) fn max_payload(&self) -> usize {
        (self.cap / 4).min(64 << 10) - HDR
    }

    /// Room for a record of `len` bytes (and the guard word after it), after a pad to the end
    /// of the data area if it would wrap: the record's offset in the mapping. None if the ring
    /// has no room now (the producer is marked waiting: the consumer will ring).
    fn reserve(&mut self, len: usize) -> Result<Option<usize>, Garbage> {
        let pos = wrap(self.tail, self.cap);
        let to_end = self.cap - pos;
        let pad = if len > to_end { to_end } else { 0 };
        let need = pad + len + GUARD;
        // Room by the head seen last (Acquire then: the consumer was done with those bytes);
        // else a fresh look, marked waiting if there is none (the consumer rings when it
        // frees space).
        if self.free_at(self.seen_head)? < need {
            let mut seen = self.seen_head;
            let room = self.look_or_wait(|head| {
                seen = head;
                Ok(self.free_at(head)? >= need)
            })?;
            self.seen_head = seen;
            if !room {
                return Ok(None);
            }
        }
        if pad > 0 {
            let p = Header::new(Kind::Pad).encode(pad);
            self.mem.copy_in(DATA + pos + 8, &p[8..]);
            self.seal(DATA + pos, pad, &p);
        }
        Ok(Some(DATA + wrap(self.tail, self.cap)))
    }

    /// Makes the record at `at` (`len` bytes, at the tail; all but its first word written by
    /// the caller) the next one: the word after it 0 (zeroed ahead, or stored now), then its
    /// first word (from `hdr`) stored, or left to the next publish if it is the first record
    /// since the last one.
    fn seal(&mut self, at: usize, len: usize, hdr: &[u8; HDR]) {
        let end = self.tail + len as u64;
        if end >= self.zeroed {
            // Not zeroed ahead (a large record, a full ring): now, before the first word.
            word(&self.mem, DATA + wrap(end, self.cap)).store(0, Ordering::Relaxed);
            self.zeroed = end + ALIGN as u64;
        }
        let first = u64::from_le_bytes(hdr[..8].try_into().expect("8 bytes"));
        if self.unpublished.is_none() {
            self.unpublished = Some((at, first));
        } else {
            // Release: its bytes before it (reached only through the unpublished first).
            word(&self.mem, at).store(first, Ordering::Release);
        }
        self.tail += len as u64;
    }

    /// Appends a record of `hdr` with `payload_len` bytes written by `fill(mem, offset)` (the
    /// payload's place in the mapping), unpublished until [`publish`](Self::publish). Ok(false)
    /// if the ring has no room now (the producer is marked waiting: the consumer will ring).
    pub(crate) fn push(
        &mut self,
        mut hdr: Header,
        payload_len: usize,
        fill: impl FnOnce(&RegionMemory, usize) -> bool,
    ) -> Result<bool, Garbage> {
        debug_assert!(payload_len <= self.max_payload());
        let len = record_len(payload_len);
        let Some(at) = self.reserve(len)? else {
            return Ok(false);
        };
        hdr.payload_len = payload_len as u32;
        if payload_len > 0 && !fill(&self.mem, at + HDR) {
            return Err(Garbage("the payload could not be copied into the ring"));
        }
        let h = hdr.encode(len);
        self.mem.copy_in(at + 8, &h[8..]);
        self.seal(at, len, &h);
        Ok(true)
    }

    /// [`push`](Self::push) of a small record (header and payload at most [`SMALL_RECORD`]
    /// bytes), written into the ring with one copy: `fill` writes the payload into a buffer.
    pub(crate) fn push_small(
        &mut self,
        mut hdr: Header,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> bool,
    ) -> Result<bool, Garbage> {
        debug_assert!(HDR + payload_len <= SMALL_RECORD);
        let len = record_len(payload_len);
        let Some(at) = self.reserve(len)? else {
            return Ok(false);
        };
        hdr.payload_len = payload_len as u32;
        let mut rec = [0u8; SMALL_RECORD];
        let h = hdr.encode(len);
        rec[..HDR].copy_from_slice(&h);
        if payload_len > 0 && !fill(&mut rec[HDR..HDR + payload_len]) {
            return Err(Garbage("the payload could not be copied into the ring"));
        }
        // Whole words (the record is longer still) after the first: one word-by-word copy.
        let n = (HDR + payload_len).next_multiple_of(8);
        self.mem.copy_in(at + 8, &rec[8..n]);
        self.seal(at, len, &h);
        Ok(true)
    }

    /// True if records with these payload lengths fit in the ring now, one after the other
    /// (pads to the end of the data area included). False also for garbage.
    pub(crate) fn fits(&self, payloads: &[usize]) -> bool {
        let Ok(free) = self.free() else {
            return false;
        };
        let mut pos = self.tail;
        for &p in payloads {
            let len = record_len(p) as u64;
            let to_end = (self.cap - wrap(pos, self.cap)) as u64;
            if len > to_end {
                pos += to_end;
            }
            pos += len;
        }
        pos - self.tail + GUARD as u64 <= free as u64
    }

    /// The position after the last record pushed.
    pub(crate) fn position(&self) -> u64 {
        self.tail
    }

    /// True once the consumer has consumed everything before `pos` (a position this producer
    /// reached). Otherwise the producer is marked waiting, so the consumer rings when it moves
    /// on. Garbage if the consumer's head is impossible.
    pub(crate) fn consumed(&self, pos: u64) -> Result<bool, Garbage> {
        self.look_or_wait(|head| {
            self.free_at(head)?;
            Ok((head.wrapping_sub(pos) as i64) >= 0)
        })
    }

    /// True if the consumer has consumed every record before `pos` (a position this producer
    /// reached), with Acquire: what it did handling them happens before what this thread does
    /// next. Unlike [`consumed`](Self::consumed), nothing is marked, and a head the consumer
    /// moved somewhere impossible reads as not passed.
    pub(crate) fn passed(&self, pos: u64) -> bool {
        let head = word(&self.mem, HEAD).load(Ordering::Acquire);
        let ahead = head.wrapping_sub(pos) as i64;
        ahead >= 0 && head.wrapping_sub(self.tail) as i64 <= 0
    }

    /// Publishes what was pushed: the first record's first word, then the tail (both Release:
    /// a consumer that sees either sees the records).
    pub(crate) fn publish(&mut self) {
        if let Some((at, first)) = self.unpublished.take() {
            word(&self.mem, at).store(first, Ordering::Release);
        }
        wake::publish(word(&self.mem, TAIL), self.tail);
        if self.zeroed < self.tail + ZERO_AHEAD / 2 {
            self.zero_ahead();
        }
    }

    /// Stores 0 to the first word of every line from `zeroed` (or the tail) up to
    /// [`ZERO_AHEAD`] past the tail, within the free space as last seen (the consumer is done
    /// with those bytes: its head was read with Acquire).
    fn zero_ahead(&mut self) {
        let from = self.zeroed.max(self.tail);
        let to = (self.tail + ZERO_AHEAD).min(self.seen_head + self.cap as u64);
        let mut p = from;
        while p < to {
            word(&self.mem, DATA + wrap(p, self.cap)).store(0, Ordering::Relaxed);
            p += ALIGN as u64;
        }
        self.zeroed = p.max(self.zeroed);
    }

    /// After a publish: true if the consumer must be woken (its doorbell rung), false while
    /// it polls the ring itself. Fenced against the consumer's [`stop_polling`]: of a publish
    /// and a consumer going to sleep, one sees the other ([`wake::needs_bell`]).
    pub(crate) fn needs_bell(&self) -> bool {
        wake::needs_bell(word(&self.mem, POLLING))
    }
}

/// A record as the consumer sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Record {
    pub(crate) hdr: Header,
    /// Offset of the payload in the mapping.
    pub(crate) payload_at: usize,
    len: usize,
}

impl Record {
    /// The ring bytes the record takes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// The consuming end of a ring.
pub(crate) struct Consumer {
    mem: Arc<RegionMemory>,
    cap: usize,
    head: u64,
}

impl Consumer {
    /// The consuming end of the ring in `mem` (`cap` data bytes, a power of two).
    pub(crate) fn new(mem: Arc<RegionMemory>, cap: usize) -> Consumer {
        assert!(cap.is_power_of_two() && mem.len() >= mapping_len(cap));
        let head = word(&mem, HEAD).load(Ordering::Acquire);
        Consumer { mem, cap, head }
    }

    /// The mapping (payloads are read from it).
    pub(crate) fn mem(&self) -> &Arc<RegionMemory> {
        &self.mem
    }

    /// The ring's data bytes.
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// The oldest record not consumed yet, checked against the ring's rules; `Pad` records
    /// are skipped (consumed) here.
    pub(crate) fn peek(&mut self) -> Result<Option<Record>, Garbage> {
        loop {
            let pos = wrap(self.head, self.cap);
            if pos % ALIGN != 0 {
                return Err(Garbage("a record starts unaligned"));
            }
            // Acquire: pairs with the producer's store of this word (module docs); 0 is the
            // guard after the last record published.
            let first = word(&self.mem, DATA + pos).load(Ordering::Acquire);
            if first == 0 {
                return Ok(None);
            }
            let mut h = [0u8; HDR];
            h[..8].copy_from_slice(&first.to_le_bytes());
            if !self.mem.copy_out(DATA + pos + 8, &mut h[8..]) {
                return Err(Garbage("a record header lies outside the ring"));
            }
            let len = u32::from_le_bytes(h[0..4].try_into().expect("4 bytes")) as usize;
            if len == 0 || len % ALIGN != 0 || len > self.cap - pos {
                return Err(Garbage("a record's length is not one of the ring's"));
            }
            let kind = Kind::from_u8(h[4]).ok_or(Garbage("a record of unknown kind"))?;
            let u64_at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().expect("8 bytes"));
            let hdr = Header {
                kind,
                flags: h[5],
                payload_len: u32::from_le_bytes(h[8..12].try_into().expect("4 bytes")),
                stag: u32::from_le_bytes(h[12..16].try_into().expect("4 bytes")),
                a: u64_at(16),
                b: u64_at(24),
                c: u64_at(32),
            };
            if kind == Kind::Pad {
                // A pad fills the end of the data area when a record did not fit there: it
                // runs to the end, and never starts at the start (so pads cannot keep this loop
                // going round the ring).
                if pos == 0 || len != self.cap - pos {
                    return Err(Garbage("a pad that does not fill the end of the data area"));
                }
                self.consume_len(len);
                continue;
            }
            if HDR + hdr.payload_len as usize > len {
                return Err(Garbage("a record's payload is longer than the record"));
            }
            if hdr.flags & !allowed_flags(kind) != 0 {
                return Err(Garbage("a record carries a flag its kind does not have"));
            }
            if kind == Kind::Send && hdr.flags & INVALIDATE == 0 && hdr.stag != 0 {
                return Err(Garbage(
                    "a Send record names an STag but does not invalidate",
                ));
            }
            return Ok(Some(Record {
                hdr,
                payload_at: DATA + pos + HDR,
                len,
            }));
        }
    }

    fn consume_len(&mut self, len: usize) {
        self.head += len as u64;
        word(&self.mem, HEAD).store(self.head, Ordering::Release);
    }

    /// Consumes `rec` (the one `peek` returned). True if the producer waits for room (it has
    /// to be woken): the flag is cleared.
    pub(crate) fn consume(&mut self, rec: &Record) -> bool {
        self.head += rec.len as u64;
        // Fenced against the producer's flag and its second look at the head.
        wake::consume(word(&self.mem, HEAD), word(&self.mem, WAITING), self.head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: usize = 4096;

    fn ring() -> (Producer, Consumer) {
        let mem = Arc::new(RegionMemory::allocate(mapping_len(CAP)).unwrap());
        (Producer::new(mem.clone(), CAP), Consumer::new(mem, CAP))
    }

    fn push_bytes(p: &mut Producer, kind: Kind, a: u64, bytes: &[u8]) -> bool {
        let mut h = Header::new(kind);
        h.a = a;
        p.push(h, bytes.len(), |m, at| m.copy_in(at, bytes))
            .unwrap()
    }

    fn payload(c: &Consumer, r: &Record) -> Vec<u8> {
        let mut v = vec![0u8; r.hdr.payload_len as usize];
        assert!(c.mem().copy_out(r.payload_at, &mut v));
        v
    }

    #[test]
    fn small_records_written_in_one_copy_read_back_as_records_written_in_two() {
        let (mut p, mut c) = ring();
        for n in 0..=SMALL_RECORD - HDR {
            let bytes: Vec<u8> = (0..n).map(|i| (i * 7 + n) as u8).collect();
            for small in [true, false] {
                let mut h = Header::new(Kind::Write);
                h.stag = n as u32 + 1;
                h.a = 0x0102_0304_0506_0708 ^ n as u64;
                let pushed = if small {
                    p.push_small(h, n, |buf| {
                        buf.copy_from_slice(&bytes);
                        true
                    })
                } else {
                    p.push(h, n, |m, at| m.copy_in(at, &bytes))
                };
                assert!(pushed.unwrap(), "{n} bytes, small {small}");
                p.publish();
                let r = c.peek().unwrap().expect("the record");
                assert_eq!(
                    (r.hdr.kind, r.hdr.stag, r.hdr.a),
                    (Kind::Write, h.stag, h.a)
                );
                assert_eq!(payload(&c, &r), bytes, "{n} bytes, small {small}");
                c.consume(&r);
            }
        }
        // A payload that cannot be had refuses the record, and nothing is published.
        let before = p.position();
        assert!(p.push_small(Header::new(Kind::Send), 8, |_| false).is_err());
        assert_eq!(p.position(), before);
    }

    #[test]
    fn a_producer_learns_when_its_records_are_consumed_and_is_rung_then() {
        let (mut p, mut c) = ring();
        assert!(push_bytes(&mut p, Kind::Send, 0, b"descriptor"));
        let until = p.position();
        p.publish();
        assert!(p.fits(&[16 * 16, 0]), "room for another descriptor");
        assert!(!p.consumed(until).unwrap(), "not consumed yet");
        let r = c.peek().unwrap().unwrap();
        assert!(c.consume(&r), "the waiting producer is to be rung");
        assert!(p.consumed(until).unwrap());
        // A head past the tail is the peer's garbage.
        word(&p.mem, HEAD).store(until + 2 * CAP as u64, Ordering::Release);
        assert!(p.consumed(until).is_err());
        assert!(!p.fits(&[0]));
    }

    #[test]
    fn records_arrive_in_order_across_the_wrap_and_only_once_published() {
        let (mut p, mut c) = ring();
        let mut sent = Vec::new();
        let mut got = Vec::new();
        let n: u64 = if cfg!(miri) { 60 } else { 500 };
        for i in 0..n {
            let bytes: Vec<u8> = (0..(i as usize * 37) % 900)
                .map(|k| (k as u64 + i) as u8)
                .collect();
            while !push_bytes(&mut p, Kind::Send, i, &bytes) {
                // Full: nothing is visible before publishing; drain what was published.
                p.publish();
                while let Some(r) = c.peek().unwrap() {
                    got.push((r.hdr.a, payload(&c, &r)));
                    c.consume(&r);
                }
            }
            sent.push((i, bytes));
            if i % 3 == 0 {
                assert!(c.peek().unwrap().is_none() || got.len() < sent.len());
            }
        }
        p.publish();
        while let Some(r) = c.peek().unwrap() {
            got.push((r.hdr.a, payload(&c, &r)));
            c.consume(&r);
        }
        assert_eq!(got, sent);
    }

    #[test]
    fn records_pushed_are_seen_only_once_published_and_the_tail_is_not_needed_to_find_them() {
        let (mut p, mut c) = ring();
        for i in 0..3 {
            assert!(push_bytes(&mut p, Kind::Send, i, b"x"));
            assert!(!pending(c.mem(), CAP), "record {i} seen before the publish");
            assert!(
                c.peek().unwrap().is_none(),
                "record {i} seen before the publish"
            );
        }
        p.publish();
        assert!(pending(c.mem(), CAP));
        // The consumer never needs the tail: hide it, and every record is still found.
        word(c.mem(), TAIL).store(0, Ordering::Release);
        for i in 0..3 {
            let r = c.peek().unwrap().expect("published");
            assert_eq!(r.hdr.a, i);
            c.consume(&r);
        }
        assert!(
            c.peek().unwrap().is_none(),
            "past the last record: its guard word"
        );
        assert!(!pending(c.mem(), CAP));
    }

    #[test]
    fn a_send_with_invalidate_keeps_its_flag_and_stag() {
        let (mut p, mut c) = ring();
        let mut h = Header::new(Kind::Send);
        h.flags = LAST | SOLICITED | INVALIDATE;
        h.stag = 0xABCD_0102;
        assert!(p.push(h, 3, |m, at| m.copy_in(at, b"inv")).unwrap());
        p.publish();
        let r = c.peek().unwrap().unwrap();
        assert_eq!(
            (r.hdr.kind, r.hdr.flags),
            (Kind::Send, LAST | SOLICITED | INVALIDATE)
        );
        assert_eq!(r.hdr.stag, 0xABCD_0102);
        assert_eq!(payload(&c, &r), b"inv");
    }

    #[test]
    fn a_full_ring_marks_the_producer_waiting_and_the_consumer_says_so_once() {
        let (mut p, mut c) = ring();
        let big = vec![7u8; 900];
        let mut n = 0;
        while push_bytes(&mut p, Kind::Write, n, &big) {
            n += 1;
        }
        assert!(n >= 3, "{n}");
        p.publish();
        let r = c.peek().unwrap().unwrap();
        assert!(c.consume(&r), "the producer waits");
        let r = c.peek().unwrap().unwrap();
        assert!(!c.consume(&r), "told once");
        assert!(push_bytes(&mut p, Kind::Write, n, &big));
    }

    #[test]
    fn garbage_from_the_peer_is_refused_without_reading_outside_the_ring() {
        type Poke = Box<dyn Fn(&RegionMemory)>;
        // Each writes a first record as a peer could (the tail is not read: records are found
        // by their first word).
        let rec = |h: [u8; HDR]| -> Poke {
            Box::new(move |m: &RegionMemory| assert!(m.copy_in(DATA, &h)))
        };
        let with = |f: fn(&mut Header)| {
            let mut h = Header::new(Kind::Send);
            f(&mut h);
            h
        };
        let cases: [(&str, Poke); 9] = [
            ("unaligned length", rec(Header::new(Kind::Send).encode(100))),
            (
                "past the end of the data area",
                rec(Header::new(Kind::Send).encode(CAP + 64)),
            ),
            ("unknown kind", {
                let mut h = Header::new(Kind::Send).encode(64);
                h[4] = 99;
                rec(h)
            }),
            (
                "payload longer than record",
                rec(with(|h| h.payload_len = 1000).encode(64)),
            ),
            ("zero length", {
                let mut h = Header::new(Kind::Send).encode(0);
                h[5] = LAST; // a first word that is not 0
                rec(h)
            }),
            (
                "a flag its kind does not have",
                rec({
                    let mut h = Header::new(Kind::Write);
                    h.flags = INVALIDATE;
                    h.encode(64)
                }),
            ),
            ("an unknown flag", rec(with(|h| h.flags = 64).encode(64))),
            (
                "a Send naming an STag without INVALIDATE",
                rec(with(|h| h.stag = 0x1234).encode(64)),
            ),
            (
                "a pad at the start of the data area",
                rec(Header::new(Kind::Pad).encode(CAP)),
            ),
        ];
        for (what, poke) in cases {
            let (_p, mut c) = ring();
            poke(c.mem());
            assert!(c.peek().is_err(), "{what}");
        }
        // A pad that stops short of the end.
        let (_p, mut c) = ring();
        let h = Header::new(Kind::Send).encode(64);
        assert!(c.mem().copy_in(DATA, &h));
        assert!(c
            .mem()
            .copy_in(DATA + 64, &Header::new(Kind::Pad).encode(64)));
        let r = c.peek().unwrap().unwrap();
        c.consume(&r);
        assert!(c.peek().is_err(), "a pad short of the end");
        // A producer whose consumer's head is impossible refuses too, once it looks at it:
        // when the room it saw last is used up, never writing past it.
        let (mut p, c) = ring();
        word(c.mem(), HEAD).store(1 << 40, Ordering::Release);
        let mut pushed = 0;
        let refused = loop {
            match p.push(Header::new(Kind::Send), 0, |_, _| true) {
                Ok(true) => pushed += 1,
                Ok(false) => break false,
                Err(_) => break true,
            }
            assert!(pushed < CAP / ALIGN, "records pushed past the ring");
        };
        assert!(refused, "an impossible head was taken for room");
        // The room seen before the head moved, but for the guard word after the last record.
        assert_eq!(
            pushed,
            CAP / ALIGN - 1,
            "the room seen before the head moved"
        );
    }

    #[test]
    fn a_line_that_held_a_record_like_word_a_lap_ago_is_never_read_as_a_record() {
        // Every line of a payload starts with a word that reads as a 64-byte Send record:
        // a consumer that reached such a line as a record start would take it for one.
        let lookalike = u64::from_le_bytes(
            Header::new(Kind::Send).encode(ALIGN)[..8]
                .try_into()
                .unwrap(),
        );
        let (mut p, mut c) = ring();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let (mut sent, mut got) = (0u64, 0u64);
        let n: u64 = if cfg!(miri) { 200 } else { 20_000 };
        let drain = |c: &mut Consumer, got: &mut u64| {
            while let Some(r) = c.peek().unwrap() {
                assert_eq!(r.hdr.a, *got, "records in order, none made up");
                let b = payload(c, &r);
                assert_eq!(b.len() % 8, 0);
                assert!(b
                    .chunks(8)
                    .all(|w| u64::from_le_bytes(w.try_into().unwrap()) == lookalike));
                c.consume(&r);
                *got += 1;
            }
        };
        while sent < n {
            // 0 to 12 lines of payload: records start at every line of the ring in turn.
            let words = (next() % 97) as usize;
            let bytes: Vec<u8> = std::iter::repeat_n(lookalike.to_le_bytes(), words)
                .flatten()
                .collect();
            if push_bytes(&mut p, Kind::Send, sent, &bytes) {
                sent += 1;
                if next() % 4 == 0 {
                    p.publish();
                }
            } else {
                p.publish();
            }
            if next() % 3 == 0 {
                p.publish();
                drain(&mut c, &mut got);
                assert_eq!(got, sent);
                assert!(c.peek().unwrap().is_none(), "past the last record: 0");
            }
        }
        p.publish();
        drain(&mut c, &mut got);
        assert_eq!(got, n);
    }

    #[test]
    fn a_tail_the_peer_left_off_the_line_grid_is_taken_on_it() {
        let mem = Arc::new(RegionMemory::allocate(mapping_len(CAP)).unwrap());
        word(&mem, TAIL).store(3, Ordering::Release);
        word(&mem, HEAD).store(0, Ordering::Release);
        let mut p = Producer::new(mem.clone(), CAP);
        let mut c = Consumer::new(mem, CAP);
        assert!(push_bytes(&mut p, Kind::Send, 7, b"aligned"));
        p.publish();
        let r = c
            .peek()
            .unwrap()
            .expect("the record, at the start of the ring");
        assert_eq!(r.hdr.a, 7);
    }

    #[test]
    fn two_threads_move_every_record_once_in_order() {
        let mem = Arc::new(RegionMemory::allocate(mapping_len(CAP)).unwrap());
        let mut p = Producer::new(mem.clone(), CAP);
        let mut c = Consumer::new(mem, CAP);
        let n: u64 = if cfg!(miri) { 100 } else { 20_000 };
        let t = std::thread::spawn(move || {
            for i in 0..n {
                let b = i.to_le_bytes();
                loop {
                    let mut h = Header::new(Kind::Send);
                    h.a = i;
                    if p.push(h, 8, |m, at| m.copy_in(at, &b)).unwrap() {
                        break;
                    }
                    p.publish();
                    std::thread::yield_now();
                }
                p.publish();
            }
        });
        let mut next = 0;
        while next < n {
            match c.peek().unwrap() {
                Some(r) => {
                    let mut b = [0u8; 8];
                    assert!(c.mem().copy_out(r.payload_at, &mut b));
                    assert_eq!((r.hdr.a, u64::from_le_bytes(b)), (next, next));
                    c.consume(&r);
                    next += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        t.join().unwrap();
    }
}
