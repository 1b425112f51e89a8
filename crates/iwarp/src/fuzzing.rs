//! Fuzz harness bodies, shared by `fuzz/fuzz_targets/*` (cargo-fuzz; `scripts/fuzz.sh`,
//! see `docs/fuzzing.md`) and by a plain `#[test]` that runs them over pseudo-random
//! inputs on stable.
//!
//! Owns: the invariants checked on arbitrary input. Each body must never panic except
//! through a failed invariant:
//! - [`frame_parser`]: the FPDU decoder gives the same ULPDUs whatever the feed
//!   segmentation; every ULPDU either parses into a [`Segment`] that re-emits to the
//!   same length and parses back equal (also through an FPDU round trip, or, for a raw
//!   input longer than the 16-bit ULPDU_Length allows, a refusal by the encoder), or fails with
//!   an error that maps to a Terminate cause, and that Terminate can be built, emitted
//!   and parsed back.
//! - [`mpa_negotiation`]: both roles fed arbitrary bytes end in an event or in an error
//!   with an MPA Terminate cause; replies produced parse as Replies; and an in-memory
//!   handshake with input-derived parameters ends with both sides agreeing.
//!
//! Must not: do I/O or depend on a clock or global state (fuzzers need determinism).

use crate::error::Error;
use crate::fpdu::{FpduDecoder, FpduEncoder, MAX_ULPDU_LEN};
use crate::mpa::{
    FrameKind, InitiatorConfig, InitiatorEvent, MpaFrame, MpaInitiator, MpaResponder,
    ResponderConfig, ResponderEvent, RtrSet, IRD_ORD_MAX, MAX_ULP_PRIVATE_DATA_LEN,
};
use crate::rdmap::Segment;
use crate::segment::{TaggedReassembly, UntaggedReassembly};
use crate::terminate::TerminateMessage;

#[derive(Debug, PartialEq, Eq)]
struct Decoded {
    ulpdus: Vec<Vec<u8>>,
    error: Option<Error>,
}

fn decode_stream(crc: bool, stream: &[u8], chunk: usize) -> Decoded {
    let mut decoder = FpduDecoder::new(crc);
    let mut ulpdus = Vec::new();
    for piece in stream.chunks(chunk.max(1)) {
        decoder.feed(piece);
        loop {
            match decoder.next_ulpdu() {
                Ok(Some(u)) => ulpdus.push(u.to_vec()),
                Ok(None) => break,
                Err(e) => {
                    return Decoded {
                        ulpdus,
                        error: Some(e),
                    }
                }
            }
        }
    }
    Decoded {
        ulpdus,
        error: None,
    }
}

/// Treat `data` as a list of `len(1 byte) | bytes` records and frame each as a ULPDU,
/// so that CRC-valid FPDUs with arbitrary contents reach the segment parser.
fn reframe(crc: bool, data: &[u8]) -> Vec<u8> {
    let encoder = FpduEncoder::new(crc);
    let mut wire = Vec::new();
    let mut rest = data;
    while let Some((&len, tail)) = rest.split_first() {
        let take = usize::from(len).min(tail.len());
        encoder
            .encode(&tail[..take], &[], &mut wire)
            .expect("a ULPDU of at most 255 bytes always frames");
        rest = &tail[take..];
    }
    wire
}

fn check_segment(
    ulpdu: &[u8],
    crc: bool,
    untagged: &mut UntaggedReassembly,
    tagged: &mut TaggedReassembly,
) {
    match Segment::parse(ulpdu) {
        Ok(segment) => {
            let again = segment.to_ulpdu().expect("a parsed segment re-emits");
            assert_eq!(again.len(), ulpdu.len(), "re-emit keeps the length");
            assert_eq!(Segment::parse(&again).as_ref(), Ok(&segment));
            let mut wire = Vec::new();
            let framed = FpduEncoder::new(crc).encode_segment(&segment, &mut wire);
            if again.len() > MAX_ULPDU_LEN {
                // Only the raw input taken whole can be this long (the decoder never yields
                // more than the 16-bit ULPDU_Length describes): the encoder must refuse it.
                assert_eq!(framed, Err(Error::UlpduTooLong { len: again.len() }));
                assert!(wire.is_empty(), "a refused segment writes nothing");
            } else {
                framed.expect("a parsed segment of at most 65535 bytes frames");
                let decoded = decode_stream(crc, &wire, wire.len());
                assert_eq!(decoded.error, None);
                assert_eq!(decoded.ulpdus, vec![again]);
            }
            // The trackers may refuse the sequence, but only with a Terminate cause.
            if let Err(e) = untagged.check(&segment) {
                assert!(e.terminate_cause().is_some(), "{e}");
            }
            if let Err(e) = tagged.check(&segment) {
                assert!(e.terminate_cause().is_some(), "{e}");
            }
        }
        Err(e) => {
            let cause = e
                .terminate_cause()
                .unwrap_or_else(|| panic!("parse error without Terminate cause: {e}"));
            let terminate = Segment::Terminate {
                msn: 1,
                message: TerminateMessage::for_failed_segment(cause, ulpdu),
            };
            let bytes = terminate.to_ulpdu().expect("Terminate emits");
            assert_eq!(Segment::parse(&bytes), Ok(terminate));
        }
    }
}

/// Body of the `frame_parser` fuzz target: FPDU decoding (CRC on and off) and segment
/// parsing over arbitrary bytes. Byte 0 selects CRC, feed chunk size and whether the
/// rest is a raw stream or a list of ULPDUs to frame first.
pub fn frame_parser(data: &[u8]) {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let crc = control & 0x01 != 0;
    let chunk = usize::from(control >> 3) + 1;
    let stream = if control & 0x02 != 0 {
        reframe(crc, rest)
    } else {
        rest.to_vec()
    };
    let whole = decode_stream(crc, &stream, stream.len());
    let pieces = decode_stream(crc, &stream, chunk);
    let bytes = decode_stream(crc, &stream, 1);
    assert_eq!(whole, pieces, "segmentation must not change decoding");
    assert_eq!(whole, bytes, "byte-at-a-time must not change decoding");
    if control & 0x02 != 0 {
        assert_eq!(whole.error, None, "self-framed stream decodes cleanly");
    }
    if let Some(e) = &whole.error {
        assert!(e.terminate_cause().is_some());
    }
    let mut untagged = UntaggedReassembly::new();
    let mut tagged = TaggedReassembly::new();
    for ulpdu in &whole.ulpdus {
        check_segment(ulpdu, crc, &mut untagged, &mut tagged);
    }
    // The raw input as one ULPDU, too.
    check_segment(rest, crc, &mut untagged, &mut tagged);
}

fn read_u16(bytes: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([
        bytes.get(at).copied().unwrap_or(0),
        bytes.get(at + 1).copied().unwrap_or(0),
    ])
}

fn check_reply(reply: &[u8], expect_reject: bool) {
    let (frame, len) = MpaFrame::parse(reply).expect("produced Reply parses");
    assert_eq!(len, reply.len());
    assert_eq!(frame.kind, FrameKind::Reply);
    assert_eq!(frame.reject, expect_reject);
    assert!(!frame.markers);
}

/// Body of the `mpa_negotiation` fuzz target: the Responder and the Initiator each fed
/// arbitrary bytes, then a handshake between the two with input-derived parameters.
pub fn mpa_negotiation(data: &[u8]) {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(control & 0x1F) + 1;

    // 1. Responder fed arbitrary bytes.
    let mut responder = MpaResponder::new(ResponderConfig {
        crc_required: control & 0x20 != 0,
    });
    for piece in rest.chunks(chunk) {
        match responder.feed(piece) {
            Ok(None) => {}
            Ok(Some(ResponderEvent::Request(request))) => {
                let pd_len = request.private_data.len().min(MAX_ULP_PRIVATE_DATA_LEN);
                let pd = &request.private_data[..pd_len];
                if control & 0x40 != 0 {
                    let reply = responder.reject(pd).expect("reject of a pending Request");
                    check_reply(&reply, true);
                } else {
                    let ird = read_u16(rest, 0) & IRD_ORD_MAX;
                    let ord = read_u16(rest, 2) & IRD_ORD_MAX;
                    match responder.accept(pd, ird, ord) {
                        Ok(reply) => {
                            check_reply(&reply, false);
                            let n = responder.negotiated().expect("negotiated after accept");
                            assert!(n.crc || !request.crc, "CRC MUST be used if requested");
                            assert_eq!(n.revision, request.revision.number());
                        }
                        Err(e) => {
                            assert!(e.terminate_cause().is_some(), "{e}");
                            check_reply(
                                &responder.reject(&[]).expect("reject after failed accept"),
                                true,
                            );
                        }
                    }
                }
                break;
            }
            Ok(Some(ResponderEvent::Refused { reason, reply })) => {
                assert!(reason.terminate_cause().is_some());
                check_reply(&reply, true);
                break;
            }
            Err(e) => {
                assert!(e.terminate_cause().is_some(), "{e}");
                break;
            }
        }
    }

    // 2. Initiator fed arbitrary bytes.
    let config = config_from(control, read_u16(rest, 0), read_u16(rest, 2));
    if let Ok(mut initiator) = MpaInitiator::new(config, &rest[..rest.len().min(16)]) {
        let mut fed = 0;
        for piece in rest.chunks(chunk) {
            fed += piece.len();
            match initiator.feed(piece) {
                Ok(None) => {}
                Ok(Some(InitiatorEvent::Accepted(accepted))) => {
                    let frame_len = MpaFrame::frame_len(rest)
                        .expect("header was valid")
                        .expect("header was complete");
                    assert_eq!(accepted.leftover, &rest[frame_len..fed]);
                    assert!(accepted.negotiated.crc || !config.crc);
                    break;
                }
                Ok(Some(InitiatorEvent::Rejected { .. })) => break,
                Err(e) => {
                    assert!(e.terminate_cause().is_some(), "{e}");
                    break;
                }
            }
        }
    }

    // 3. A full handshake with parameters taken from the input.
    handshake(control, rest);
}

fn config_from(control: u8, a: u16, b: u16) -> InitiatorConfig {
    let mut config = InitiatorConfig::new(a & IRD_ORD_MAX, b & IRD_ORD_MAX);
    config.crc = control & 0x80 != 0;
    config.enhanced = control & 0x01 == 0;
    let offer = RtrSet::NONE
        | if control & 0x02 != 0 {
            RtrSet::WRITE
        } else {
            RtrSet::NONE
        }
        | if control & 0x04 != 0 {
            RtrSet::READ
        } else {
            RtrSet::NONE
        }
        | if control & 0x08 != 0 {
            RtrSet::SEND
        } else {
            RtrSet::NONE
        };
    if control & 0x10 != 0 {
        config.peer_to_peer = Some(offer);
    }
    config
}

fn handshake(control: u8, rest: &[u8]) {
    let config = config_from(control, read_u16(rest, 0), read_u16(rest, 2));
    let pd_len = usize::from(rest.get(4).copied().unwrap_or(0)).min(rest.len());
    let Ok(mut initiator) = MpaInitiator::new(config, &rest[..pd_len]) else {
        return;
    };
    let mut responder = MpaResponder::new(ResponderConfig {
        crc_required: control & 0x20 != 0,
    });
    let request = match responder.feed(initiator.request()) {
        Ok(Some(ResponderEvent::Request(r))) => r,
        other => panic!("own Request refused: {other:?}"),
    };
    assert_eq!(request.private_data, &rest[..pd_len]);
    let ird = read_u16(rest, 5) & IRD_ORD_MAX;
    let ord = read_u16(rest, 7) & IRD_ORD_MAX;
    let (mut stream, accepted) = match responder.accept(&[], ird, ord) {
        Ok(reply) => (reply, true),
        Err(e) => {
            assert!(e.terminate_cause().is_some(), "{e}");
            (
                responder.reject(b"no").expect("reject after failed accept"),
                false,
            )
        }
    };
    let reply_len = stream.len();
    stream.extend_from_slice(&rest[..rest.len().min(9)]);
    let mut event = None;
    for piece in stream.chunks(usize::from(control & 0x0F) + 1) {
        match initiator.feed(piece) {
            Ok(None) => {}
            Ok(Some(ev)) => {
                event = Some(ev);
                break;
            }
            Err(e) => {
                // Only possible when the Initiator cannot live with the Reply.
                assert!(
                    matches!(
                        e,
                        Error::MpaInsufficientIrd { .. } | Error::MpaNoMatchingRtr { .. }
                    ),
                    "{e}"
                );
                return;
            }
        }
    }
    match event.expect("the Reply is complete") {
        InitiatorEvent::Accepted(a) => {
            assert!(accepted);
            let theirs = *responder.negotiated().expect("responder negotiated");
            let ours = a.negotiated;
            assert_eq!(ours.crc, theirs.crc);
            assert_eq!(ours.crc, config.crc || control & 0x20 != 0);
            assert_eq!(ours.rtr, theirs.rtr);
            assert_eq!(ours.revision, theirs.revision);
            if ours.peer.is_some() {
                assert!(ours.ord <= theirs.ird);
                assert!(theirs.ord <= ours.ird);
            }
            if let Some(rtr) = ours.rtr {
                assert!(config.peer_to_peer.is_some_and(|o| o.contains(rtr.into())));
            }
            // Whatever followed the Reply comes back exactly, at most what was fed.
            assert!(stream[reply_len..].starts_with(&a.leftover));
        }
        InitiatorEvent::Rejected { private_data } => {
            assert!(!accepted);
            assert_eq!(private_data, b"no");
        }
    }
}

/// Marsaglia xorshift64: a deterministic, dependency-free generator of pseudo-random test
/// inputs, for the harness bodies' stable tests (here, and dapl-testkit's `engine_inbound`).
#[derive(Clone, Debug)]
pub struct XorShift(pub u64);

impl XorShift {
    /// The next 64 random bits.
    #[allow(clippy::should_implement_trait)] // not an Iterator: it never ends
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }

    /// Between 0 and `max - 1` random bytes.
    pub fn bytes_below(&mut self, max: usize) -> Vec<u8> {
        let len = self.below(max);
        self.bytes(len)
    }

    /// `edits` random edits of `data`: a flipped bit, a replaced byte, a cut, an inserted byte.
    pub fn mutate(&mut self, data: &mut Vec<u8>, edits: usize) {
        for _ in 0..edits {
            if data.is_empty() {
                break;
            }
            let at = self.below(data.len());
            match self.below(4) {
                0 => data[at] ^= 1 << self.below(8),
                1 => data[at] = self.next() as u8,
                2 => data.truncate(at),
                _ => data.insert(at, self.next() as u8),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdmap::ReadRequest;
    use crate::terminate::{LlpErrorCode, TerminateCause};

    fn valid_stream(rng: &mut XorShift, crc: bool) -> Vec<u8> {
        let payload = rng.bytes_below(64);
        let segments = [
            Segment::Send {
                last: rng.below(2) == 0,
                msn: 1,
                mo: 0,
                solicited: rng.below(2) == 0,
                invalidate_stag: (rng.below(2) == 0).then_some(7),
                payload: &payload,
            },
            Segment::Write {
                last: true,
                stag: rng.next() as u32,
                to: rng.next(),
                payload: &payload,
            },
            Segment::read_rtr(1),
            Segment::ImmediateData {
                msn: 2,
                solicited: rng.below(2) == 0,
                data: rng.next().to_be_bytes(),
            },
            Segment::ReadRequest {
                msn: 2,
                request: ReadRequest {
                    sink_stag: 1,
                    sink_to: 2,
                    size: 3,
                    source_stag: 4,
                    source_to: 5,
                },
            },
            Segment::Terminate {
                msn: 1,
                message: TerminateMessage::header_less(TerminateCause::Llp(LlpErrorCode::CrcError)),
            },
        ];
        let encoder = FpduEncoder::new(crc);
        let mut wire = Vec::new();
        for _ in 0..1 + rng.below(4) {
            let s = &segments[rng.below(segments.len())];
            encoder.encode_segment(s, &mut wire).unwrap();
        }
        wire
    }

    #[test]
    fn frame_parser_survives_pseudo_random_inputs() {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        for i in 0..4000 {
            let control = rng.next() as u8;
            let mut input = vec![control];
            if i % 2 == 0 {
                let len = rng.below(300);
                input.extend(rng.bytes(len));
            } else {
                // Structured: real FPDUs (raw-stream mode), lightly mutated.
                input[0] &= !0x02;
                let mut wire = valid_stream(&mut rng, control & 1 != 0);
                if i % 4 == 1 {
                    let edits = rng.below(4);
                    rng.mutate(&mut wire, edits);
                }
                input.extend(wire);
            }
            frame_parser(&input);
        }
    }

    #[test]
    fn mpa_negotiation_survives_pseudo_random_inputs() {
        let mut rng = XorShift(0xD1B5_4A32_D192_ED03);
        for i in 0..4000 {
            let control = rng.next() as u8;
            let mut input = vec![control];
            match i % 3 {
                0 => {
                    let len = rng.below(120);
                    input.extend(rng.bytes(len));
                }
                1 => {
                    // A real Request, maybe mutated, maybe with bytes behind it.
                    let config =
                        config_from(rng.next() as u8, rng.next() as u16, rng.next() as u16);
                    if let Ok(ini) = MpaInitiator::new(config, &rng.bytes_below(40)) {
                        let mut req = ini.request().to_vec();
                        if rng.below(2) == 0 {
                            let edits = rng.below(4);
                            rng.mutate(&mut req, edits);
                        }
                        input.extend(req);
                    }
                }
                _ => {
                    // A real Reply (from a Responder), maybe mutated, with trailing bytes.
                    let config =
                        config_from(rng.next() as u8, rng.next() as u16, rng.next() as u16);
                    if let Ok(ini) = MpaInitiator::new(config, &[]) {
                        let mut res = MpaResponder::new(ResponderConfig::default());
                        if let Ok(Some(ResponderEvent::Request(_))) = res.feed(ini.request()) {
                            let mut reply = res
                                .accept(
                                    &rng.bytes_below(20),
                                    rng.below(64) as u16,
                                    rng.below(64) as u16,
                                )
                                .or_else(|_| res.reject(&[]))
                                .unwrap();
                            if rng.below(2) == 0 {
                                let edits = rng.below(4);
                                rng.mutate(&mut reply, edits);
                            }
                            reply.extend(rng.bytes_below(8));
                            input.extend(reply);
                        }
                    }
                }
            }
            mpa_negotiation(&input);
        }
    }

    /// Regression (found with `-max_len` above 64 KiB): the frame_parser body also parses the
    /// raw input as one ULPDU, which may be longer than an FPDU can carry. Such a segment
    /// parses, but the encoder must refuse it with `UlpduTooLong` instead of framing it.
    #[test]
    fn ulpdu_longer_than_the_16_bit_length_field_is_refused_by_the_encoder() {
        for payload_len in [MAX_ULPDU_LEN - 18, MAX_ULPDU_LEN - 17, 70_000] {
            let segment = Segment::Send {
                last: true,
                msn: 1,
                mo: 0,
                solicited: false,
                invalidate_stag: None,
                payload: &vec![0xA5; payload_len],
            };
            let ulpdu = segment.to_ulpdu().unwrap();
            let mut wire = Vec::new();
            let framed = FpduEncoder::new(true).encode_segment(&segment, &mut wire);
            if ulpdu.len() <= MAX_ULPDU_LEN {
                assert_eq!(framed, Ok(crate::fpdu::fpdu_len(ulpdu.len())));
            } else {
                assert_eq!(framed, Err(Error::UlpduTooLong { len: ulpdu.len() }));
                assert!(wire.is_empty());
            }
            for control in [0x00, 0x01] {
                let mut input = vec![control];
                input.extend_from_slice(&ulpdu);
                frame_parser(&input);
            }
        }
    }

    #[test]
    fn harnesses_accept_empty_and_tiny_inputs() {
        for len in 0..4 {
            for b in 0..=255u8 {
                let input = vec![b; len];
                frame_parser(&input);
                mpa_negotiation(&input);
            }
        }
    }
}
