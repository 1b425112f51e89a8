//! DDP segmentation (send side) and reassembly order checks (receive side).
//!
//! Owns:
//! - [`mulpdu_for_emss`]: the largest DDP segment for a TCP connection (RFC 5044,
//!   "FPDU Size Considerations": `MULPDU = EMSS - (6 + EMSS mod 4)` without markers),
//!   so that every FPDU fits in one TCP segment.
//! - [`Segmenter`]: splits one Send / RDMA Write / Read Response into segments of at
//!   most MULPDU bytes (RFC 5041 §5.2 "Segmentation and Reassembly of a DDP Message"):
//!   untagged segments share the MSN and advance MO, tagged segments share the STag and
//!   advance TO, L is set on the last one only, and a zero-length message is one segment.
//! - [`MsnSequence`]: outbound MSNs per queue, starting at 1 (RFC 5041 §4.3, MSN field).
//! - [`UntaggedReassembly`] and [`TaggedReassembly`]: receive-side checks that segments
//!   arrive in the order the sender must produce them (QN valid, MSN strictly the next
//!   one per queue, MO = bytes already received, STag/TO continuous), reporting
//!   violations as the DDP Terminate codes of RFC 5041 §7.
//!
//! Must not: copy payload, own receive buffers, look up STags, or frame bytes. Whether a
//! receive buffer exists or is large enough is the caller's check
//! ([`Error::NoReceiveBuffer`], [`Error::MessageTooLong`]).

use crate::ddp::{Queue, TAGGED_HEADER_LEN, UNTAGGED_HEADER_LEN};
use crate::error::Error;
use crate::fpdu::FRAMING_OVERHEAD;
use crate::rdmap::{Opcode, Segment, IMMEDIATE_DATA_LEN};

/// MULPDU for an effective MSS without markers: `EMSS - (6 + EMSS mod 4)`.
///
/// The 6 is the length field and the CRC; the mod-4 term keeps the FPDU a multiple of 4,
/// so a full-size segment needs no pad and `fpdu_len(MULPDU) <= EMSS`. Returns 0 when
/// EMSS is too small to carry any FPDU.
pub const fn mulpdu_for_emss(emss: usize) -> usize {
    emss.saturating_sub(FRAMING_OVERHEAD + emss % 4)
}

/// One outbound message to segment, without its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutboundMessage {
    /// A Send (QN 0).
    Send {
        /// MSN for the message (from [`MsnSequence`]).
        msn: u32,
        /// Solicited event.
        solicited: bool,
        /// STag to invalidate at the peer.
        invalidate_stag: Option<u32>,
    },
    /// An RDMA Write to the peer's STag at TO.
    Write {
        /// Data sink STag.
        stag: u32,
        /// Tagged offset of the first byte.
        to: u64,
    },
    /// An RDMA Read Response to the requester's sink STag/TO.
    ReadResponse {
        /// Data sink STag from the Read Request.
        stag: u32,
        /// Data sink TO from the Read Request.
        to: u64,
    },
}

impl OutboundMessage {
    /// DDP header length of each segment.
    pub const fn header_len(&self) -> usize {
        match self {
            OutboundMessage::Send { .. } => UNTAGGED_HEADER_LEN,
            OutboundMessage::Write { .. } | OutboundMessage::ReadResponse { .. } => {
                TAGGED_HEADER_LEN
            }
        }
    }
}

/// Iterator over the DDP segments of one message, each at most MULPDU bytes
/// (header + payload). Segments borrow the payload; nothing is copied.
#[derive(Clone, Debug)]
pub struct Segmenter<'a> {
    message: OutboundMessage,
    payload: &'a [u8],
    max_payload: usize,
    offset: usize,
    done: bool,
}

impl<'a> Segmenter<'a> {
    /// Segment `payload` as `message` for a connection whose MULPDU is `mulpdu`.
    ///
    /// Fails if MULPDU cannot hold the header plus one byte, if an untagged message is
    /// longer than MO can address (4 GiB), or if a tagged message would wrap TO.
    pub fn new(message: OutboundMessage, payload: &'a [u8], mulpdu: usize) -> Result<Self, Error> {
        let header = message.header_len();
        if mulpdu <= header {
            return Err(Error::InvalidArgument {
                operation: "segment message",
                reason: "MULPDU does not leave room for payload after the DDP header",
            });
        }
        let max_payload = (mulpdu - header).min(crate::fpdu::MAX_ULPDU_LEN - header);
        match message {
            OutboundMessage::Send { .. } if u32::try_from(payload.len()).is_err() => {
                return Err(Error::InvalidArgument {
                    operation: "segment Send",
                    reason: "untagged messages are limited to 2^32 bytes by MO",
                });
            }
            OutboundMessage::Write { to, .. } | OutboundMessage::ReadResponse { to, .. }
                if to.checked_add(payload.len() as u64).is_none() =>
            {
                return Err(Error::InvalidArgument {
                    operation: "segment tagged message",
                    reason: "TO + length wraps",
                });
            }
            _ => {}
        }
        Ok(Segmenter {
            message,
            payload,
            max_payload,
            offset: 0,
            done: false,
        })
    }

    /// Number of segments the message takes (1 for an empty message).
    pub fn segment_count(&self) -> usize {
        self.payload.len().div_ceil(self.max_payload).max(1)
    }
}

impl<'a> Iterator for Segmenter<'a> {
    type Item = Segment<'a>;

    fn next(&mut self) -> Option<Segment<'a>> {
        if self.done {
            return None;
        }
        let start = self.offset;
        let end = (start + self.max_payload).min(self.payload.len());
        let payload = &self.payload[start..end];
        let last = end == self.payload.len();
        self.offset = end;
        self.done = last;
        Some(match self.message {
            OutboundMessage::Send {
                msn,
                solicited,
                invalidate_stag,
            } => Segment::Send {
                last,
                msn,
                // Checked in `new`: the payload length fits in u32.
                mo: start as u32,
                solicited,
                invalidate_stag,
                payload,
            },
            OutboundMessage::Write { stag, to } => Segment::Write {
                last,
                stag,
                to: to + start as u64,
                payload,
            },
            OutboundMessage::ReadResponse { stag, to } => Segment::ReadResponse {
                last,
                stag,
                to: to + start as u64,
                payload,
            },
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            return (0, Some(0));
        }
        let left = (self.payload.len() - self.offset)
            .div_ceil(self.max_payload)
            .max(1);
        (left, Some(left))
    }
}

impl ExactSizeIterator for Segmenter<'_> {}

/// Outbound MSN counters, one per untagged queue, each starting at 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsnSequence {
    next: [u32; 3],
}

impl Default for MsnSequence {
    fn default() -> Self {
        Self::new()
    }
}

impl MsnSequence {
    /// Counters for a fresh stream: the first message on each queue gets MSN 1.
    pub const fn new() -> Self {
        MsnSequence { next: [1; 3] }
    }

    /// Take the MSN for the next message on `queue` (wraps mod 2^32).
    pub fn next(&mut self, queue: Queue) -> u32 {
        let slot = &mut self.next[queue as usize];
        let msn = *slot;
        *slot = slot.wrapping_add(1);
        msn
    }

    /// The MSN the next message on `queue` will get.
    pub const fn peek(&self, queue: Queue) -> u32 {
        self.next[queue as usize]
    }
}

/// Where an accepted untagged segment belongs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UntaggedProgress {
    /// The queue.
    pub queue: Queue,
    /// MSN of the message.
    pub msn: u32,
    /// MO of this segment's first payload byte.
    pub offset: u32,
    /// Message bytes received so far, this segment included.
    pub received: u32,
    /// This segment had L=1: the message is complete.
    pub complete: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct QueueState {
    expected_msn: u32,
    received: u32,
}

/// Receive-side order checks for untagged messages (QN 0, 1, 2).
///
/// For each queue: the MSN must be exactly the next one (siw is strict; TCP keeps order),
/// and MO must equal the bytes already received for that message. Checks run in siw's
/// order: QN, MSN, MO. A violation leaves the state unchanged; the connection is
/// terminated anyway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UntaggedReassembly {
    queues: [QueueState; 3],
}

impl Default for UntaggedReassembly {
    fn default() -> Self {
        Self::new()
    }
}

impl UntaggedReassembly {
    /// State for a fresh stream: MSN 1 expected on every queue.
    pub const fn new() -> Self {
        UntaggedReassembly {
            queues: [QueueState {
                expected_msn: 1,
                received: 0,
            }; 3],
        }
    }

    /// The MSN expected next on `queue`.
    pub const fn expected_msn(&self, queue: Queue) -> u32 {
        self.queues[queue as usize].expected_msn
    }

    /// True if a multi-segment message is partly received on `queue`.
    pub const fn in_progress(&self, queue: Queue) -> bool {
        self.queues[queue as usize].received != 0
    }

    /// Check one untagged segment given its QN, MSN, MO, L flag and payload length.
    pub fn on_segment(
        &mut self,
        qn: u32,
        msn: u32,
        mo: u32,
        last: bool,
        payload_len: usize,
    ) -> Result<UntaggedProgress, Error> {
        let queue = Queue::from_qn(qn).ok_or(Error::InvalidQn { qn, opcode: None })?;
        let state = &mut self.queues[queue as usize];
        if msn != state.expected_msn {
            return Err(Error::MsnOutOfRange {
                qn,
                expected: state.expected_msn,
                received: msn,
            });
        }
        if mo != state.received {
            return Err(Error::InvalidMo {
                qn,
                msn,
                expected: state.received,
                received: mo,
            });
        }
        let received = u32::try_from(payload_len)
            .ok()
            .and_then(|n| mo.checked_add(n))
            .ok_or(Error::InvalidMo {
                qn,
                msn,
                expected: state.received,
                received: mo,
            })?;
        if last {
            state.expected_msn = state.expected_msn.wrapping_add(1);
            state.received = 0;
        } else {
            state.received = received;
        }
        Ok(UntaggedProgress {
            queue,
            msn,
            offset: mo,
            received,
            complete: last,
        })
    }

    /// Check a parsed segment; tagged segments are not this tracker's business (`Ok(None)`).
    pub fn check(&mut self, segment: &Segment<'_>) -> Result<Option<UntaggedProgress>, Error> {
        match *segment {
            Segment::Send {
                last,
                msn,
                mo,
                payload,
                ..
            } => self
                .on_segment(Queue::Send.qn(), msn, mo, last, payload.len())
                .map(Some),
            // RFC 7306: Immediate Data is a message of the Send queue and takes its MSN.
            Segment::ImmediateData { msn, .. } => self
                .on_segment(Queue::Send.qn(), msn, 0, true, IMMEDIATE_DATA_LEN)
                .map(Some),
            Segment::ReadRequest { msn, .. } => self
                .on_segment(Queue::ReadRequest.qn(), msn, 0, true, 0)
                .map(Some),
            Segment::Terminate { msn, .. } => self
                .on_segment(Queue::Terminate.qn(), msn, 0, true, 0)
                .map(Some),
            Segment::Write { .. } | Segment::ReadResponse { .. } => Ok(None),
        }
    }
}

/// Receive-side continuity checks for tagged messages (RDMA Write, Read Response).
///
/// As in siw, one tagged message may be in progress at a time; its segments must keep
/// the opcode and STag and continue the TO. Whether the STag is valid and the range is
/// inside its region is the caller's memory check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaggedReassembly {
    in_progress: Option<(Opcode, u32, u64)>,
}

impl TaggedReassembly {
    /// No tagged message in progress.
    pub const fn new() -> Self {
        TaggedReassembly { in_progress: None }
    }

    /// True if a tagged message has segments received but not its last one.
    pub const fn in_progress(&self) -> bool {
        self.in_progress.is_some()
    }

    /// Check one tagged segment. Returns `true` when it completes the message.
    pub fn on_segment(
        &mut self,
        opcode: Opcode,
        stag: u32,
        to: u64,
        last: bool,
        payload_len: usize,
    ) -> Result<bool, Error> {
        if let Some((op, expected_stag, expected_to)) = self.in_progress {
            if op != opcode {
                return Err(Error::MessageInterleaved {
                    in_progress: op,
                    received: opcode,
                });
            }
            if stag != expected_stag {
                return Err(Error::TaggedStagMismatch {
                    expected: expected_stag,
                    received: stag,
                });
            }
            if to != expected_to {
                return Err(Error::TaggedOffsetMismatch {
                    stag,
                    expected: expected_to,
                    received: to,
                });
            }
        }
        let next_to = to
            .checked_add(payload_len as u64)
            .ok_or(Error::TaggedOffsetWrap {
                stag,
                to,
                len: payload_len,
            })?;
        self.in_progress = if last {
            None
        } else {
            Some((opcode, stag, next_to))
        };
        Ok(last)
    }

    /// Check a parsed segment; untagged segments are not this tracker's business (`Ok(None)`).
    pub fn check(&mut self, segment: &Segment<'_>) -> Result<Option<bool>, Error> {
        match *segment {
            Segment::Write {
                last,
                stag,
                to,
                payload,
            }
            | Segment::ReadResponse {
                last,
                stag,
                to,
                payload,
            } => self
                .on_segment(segment.opcode(), stag, to, last, payload.len())
                .map(Some),
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fpdu::{fpdu_len, FpduDecoder, FpduEncoder};
    use crate::terminate::{DdpTaggedErrorCode, DdpUntaggedErrorCode, TerminateCause};

    #[test]
    fn mulpdu_formula_keeps_fpdus_within_emss() {
        assert_eq!(mulpdu_for_emss(1460), 1454);
        assert_eq!(mulpdu_for_emss(1448), 1442);
        assert_eq!(mulpdu_for_emss(1447), 1438);
        assert_eq!(mulpdu_for_emss(5), 0);
        for emss in 24..9000 {
            let m = mulpdu_for_emss(emss);
            assert!(fpdu_len(m) <= emss, "emss {emss}");
            assert_eq!((2 + m) % 4, 0, "full segments need no pad (emss {emss})");
        }
    }

    fn collect(msg: OutboundMessage, payload: &[u8], mulpdu: usize) -> Vec<Segment<'_>> {
        let s = Segmenter::new(msg, payload, mulpdu).unwrap();
        let count = s.segment_count();
        assert_eq!(s.len(), count);
        let v: Vec<_> = s.collect();
        assert_eq!(v.len(), count);
        v
    }

    #[test]
    fn segmentation_respects_mulpdu_for_several_sizes() {
        let payload: Vec<u8> = (0..150_000u32).map(|i| i as u8).collect();
        let messages = [
            OutboundMessage::Send {
                msn: 7,
                solicited: true,
                invalidate_stag: Some(0x99),
            },
            OutboundMessage::Write {
                stag: 0x1111,
                to: 0x10_0000,
            },
            OutboundMessage::ReadResponse {
                stag: 0x2222,
                to: 5,
            },
        ];
        for emss in [64, 536, 1460, 8960, 65_535 + 200] {
            let mulpdu = mulpdu_for_emss(emss);
            for msg in messages {
                for len in [0, 1, mulpdu - msg.header_len(), mulpdu, 4097, payload.len()] {
                    let segs = collect(msg, &payload[..len], mulpdu);
                    let mut reassembled = Vec::new();
                    for (i, s) in segs.iter().enumerate() {
                        assert!(s.ulpdu_len() <= mulpdu, "{msg:?} emss {emss}");
                        assert_eq!(s.last(), i == segs.len() - 1, "L only on the last");
                        let mut out = Vec::new();
                        FpduEncoder::new(true).encode_segment(s, &mut out).unwrap();
                        assert!(out.len() <= emss);
                        reassembled.extend_from_slice(s.payload());
                    }
                    assert_eq!(reassembled, &payload[..len]);
                }
            }
        }
    }

    #[test]
    fn untagged_segments_share_msn_and_advance_mo() {
        let payload = [0xA5u8; 100];
        let segs = collect(
            OutboundMessage::Send {
                msn: 3,
                solicited: false,
                invalidate_stag: None,
            },
            &payload,
            UNTAGGED_HEADER_LEN + 32,
        );
        assert_eq!(segs.len(), 4);
        let mut expect_mo = 0;
        for s in &segs {
            match *s {
                Segment::Send {
                    msn, mo, payload, ..
                } => {
                    assert_eq!(msn, 3);
                    assert_eq!(mo, expect_mo);
                    expect_mo += payload.len() as u32;
                }
                _ => unreachable!(),
            }
        }
    }

    #[test]
    fn tagged_segments_share_stag_and_advance_to() {
        let payload = [1u8; 70];
        let segs = collect(
            OutboundMessage::Write { stag: 42, to: 1000 },
            &payload,
            TAGGED_HEADER_LEN + 30,
        );
        let tos: Vec<u64> = segs
            .iter()
            .map(|s| match *s {
                Segment::Write { stag, to, .. } => {
                    assert_eq!(stag, 42);
                    to
                }
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(tos, [1000, 1030, 1060]);
    }

    #[test]
    fn zero_length_message_is_one_last_segment() {
        for msg in [
            OutboundMessage::Send {
                msn: 1,
                solicited: false,
                invalidate_stag: None,
            },
            OutboundMessage::Write { stag: 1, to: 0 },
            OutboundMessage::ReadResponse { stag: 1, to: 0 },
        ] {
            let segs = collect(msg, &[], 100);
            assert_eq!(segs.len(), 1);
            assert!(segs[0].last());
            assert!(segs[0].payload().is_empty());
        }
        let rtr = collect(OutboundMessage::Write { stag: 1, to: 0 }, &[], 100);
        assert_eq!(rtr[0], Segment::write_rtr());
    }

    #[test]
    fn segmenter_refuses_tiny_mulpdu_and_to_wrap() {
        assert!(Segmenter::new(OutboundMessage::Write { stag: 1, to: 0 }, &[], 14).is_err());
        assert!(Segmenter::new(
            OutboundMessage::Write {
                stag: 1,
                to: u64::MAX
            },
            &[0; 2],
            100
        )
        .is_err());
    }

    #[test]
    fn msn_sequence_starts_at_one_per_queue() {
        let mut s = MsnSequence::new();
        assert_eq!(s.next(Queue::Send), 1);
        assert_eq!(s.next(Queue::Send), 2);
        assert_eq!(s.next(Queue::ReadRequest), 1);
        assert_eq!(s.peek(Queue::Terminate), 1);
    }

    #[test]
    fn reassembly_accepts_what_the_segmenter_produces_across_the_wire() {
        let payload: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
        let mulpdu = mulpdu_for_emss(536);
        let mut msns = MsnSequence::new();
        let enc = FpduEncoder::new(true);
        let mut wire = Vec::new();
        for len in [0, 10, 3000] {
            let msg = OutboundMessage::Send {
                msn: msns.next(Queue::Send),
                solicited: false,
                invalidate_stag: None,
            };
            for s in Segmenter::new(msg, &payload[..len], mulpdu).unwrap() {
                enc.encode_segment(&s, &mut wire).unwrap();
            }
            for s in Segmenter::new(
                OutboundMessage::Write { stag: 5, to: 64 },
                &payload[..len],
                mulpdu,
            )
            .unwrap()
            {
                enc.encode_segment(&s, &mut wire).unwrap();
            }
        }
        enc.encode_segment(&Segment::read_rtr(msns.next(Queue::ReadRequest)), &mut wire)
            .unwrap();
        let mut dec = FpduDecoder::new(true);
        let mut untagged = UntaggedReassembly::new();
        let mut tagged = TaggedReassembly::new();
        let mut completed = 0;
        for chunk in wire.chunks(97) {
            dec.feed(chunk);
            while let Some(u) = dec.next_ulpdu().unwrap() {
                let s = Segment::parse(u).unwrap();
                if let Some(p) = untagged.check(&s).unwrap() {
                    completed += usize::from(p.complete);
                }
                if let Some(done) = tagged.check(&s).unwrap() {
                    completed += usize::from(done);
                }
            }
        }
        assert_eq!(completed, 7);
        assert_eq!(untagged.expected_msn(Queue::Send), 4);
        assert_eq!(untagged.expected_msn(Queue::ReadRequest), 2);
        assert!(!tagged.in_progress());
    }

    #[test]
    fn msn_must_start_at_one_and_be_strictly_next() {
        let mut r = UntaggedReassembly::new();
        let e = r.on_segment(0, 0, 0, true, 0).unwrap_err();
        assert_eq!(
            e,
            Error::MsnOutOfRange {
                qn: 0,
                expected: 1,
                received: 0
            }
        );
        assert_eq!(
            e.terminate_cause(),
            Some(TerminateCause::DdpUntagged(DdpUntaggedErrorCode::MsnRange))
        );
        r.on_segment(0, 1, 0, true, 5).unwrap();
        assert!(r.on_segment(0, 3, 0, true, 5).is_err(), "MSN 2 skipped");
        assert!(r.on_segment(0, 1, 0, true, 5).is_err(), "MSN 1 repeated");
        r.on_segment(0, 2, 0, true, 5).unwrap();
        // Queues count independently.
        r.on_segment(1, 1, 0, true, 0).unwrap();
        r.on_segment(2, 1, 0, true, 0).unwrap();
    }

    #[test]
    fn immediate_data_takes_the_next_msn_of_the_send_queue() {
        let imm = |msn| Segment::ImmediateData {
            msn,
            solicited: false,
            data: [0; IMMEDIATE_DATA_LEN],
        };
        let mut r = UntaggedReassembly::new();
        let p = r.check(&imm(1)).unwrap().unwrap();
        assert_eq!((p.queue, p.msn, p.complete), (Queue::Send, 1, true));
        r.check(&Segment::send_rtr(2)).unwrap();
        r.check(&imm(3)).unwrap();
        assert_eq!(r.expected_msn(Queue::Send), 4);
        assert!(matches!(
            r.check(&imm(3)),
            Err(Error::MsnOutOfRange {
                qn: 0,
                expected: 4,
                received: 3
            })
        ));
        // In the middle of a Send: the Send's MO is due, not a new message.
        r.on_segment(0, 4, 0, false, 10).unwrap();
        assert!(r.check(&imm(5)).is_err());
        assert!(matches!(r.check(&imm(4)), Err(Error::InvalidMo { .. })));
        // The other queues are not affected.
        assert_eq!(r.expected_msn(Queue::ReadRequest), 1);
    }

    #[test]
    fn msn_wraps_mod_2_pow_32() {
        let mut r = UntaggedReassembly::new();
        r.queues[0].expected_msn = u32::MAX;
        r.on_segment(0, u32::MAX, 0, true, 1).unwrap();
        assert_eq!(r.expected_msn(Queue::Send), 0);
        r.on_segment(0, 0, 0, true, 1).unwrap();
    }

    #[test]
    fn mo_must_continue_the_message() {
        let mut r = UntaggedReassembly::new();
        let p = r.on_segment(0, 1, 0, false, 100).unwrap();
        assert_eq!((p.received, p.complete), (100, false));
        assert!(r.in_progress(Queue::Send));
        let e = r.on_segment(0, 1, 99, false, 100).unwrap_err();
        assert_eq!(
            e,
            Error::InvalidMo {
                qn: 0,
                msn: 1,
                expected: 100,
                received: 99
            }
        );
        assert_eq!(
            e.terminate_cause(),
            Some(TerminateCause::DdpUntagged(DdpUntaggedErrorCode::InvalidMo))
        );
        // A new message (MSN 2) before the last segment of MSN 1 is an MSN error.
        assert!(matches!(
            r.on_segment(0, 2, 0, true, 1),
            Err(Error::MsnOutOfRange { .. })
        ));
        let p = r.on_segment(0, 1, 100, true, 1).unwrap();
        assert_eq!((p.received, p.complete), (101, true));
        // The next message starts at MO 0 again.
        assert!(r.on_segment(0, 2, 101, true, 1).is_err());
        r.on_segment(0, 2, 0, true, 1).unwrap();
    }

    #[test]
    fn invalid_qn_maps_to_ddp_untagged_01() {
        let mut r = UntaggedReassembly::new();
        let e = r.on_segment(3, 1, 0, true, 0).unwrap_err();
        assert_eq!(e.terminate_cause().unwrap().to_wire(), (1, 2, 0x01));
    }

    #[test]
    fn tagged_segments_must_continue_stag_and_to() {
        let mut t = TaggedReassembly::new();
        assert!(!t.on_segment(Opcode::Write, 7, 100, false, 10).unwrap());
        let e = t.on_segment(Opcode::Write, 8, 110, true, 1).unwrap_err();
        assert_eq!(
            e.terminate_cause(),
            Some(TerminateCause::DdpTagged(DdpTaggedErrorCode::InvalidStag))
        );
        let e = t.on_segment(Opcode::Write, 7, 111, true, 1).unwrap_err();
        assert_eq!(
            e.terminate_cause(),
            Some(TerminateCause::DdpTagged(DdpTaggedErrorCode::BaseOrBounds))
        );
        assert!(matches!(
            t.on_segment(Opcode::ReadResponse, 7, 110, true, 1),
            Err(Error::MessageInterleaved { .. })
        ));
        assert!(t.on_segment(Opcode::Write, 7, 110, true, 1).unwrap());
        assert!(matches!(
            t.on_segment(Opcode::Write, 7, u64::MAX, true, 2),
            Err(Error::TaggedOffsetWrap { .. })
        ));
    }
}
