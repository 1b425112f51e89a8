//! The crate's one error type.
//!
//! Owns: every way parsing, emitting or negotiating can fail, with enough context for a
//! log line, and the mapping from a protocol error to the Terminate a receiver must send
//! ([`Error::terminate_cause`]).
//!
//! Must not: decide what the caller does next. Errors that describe local misuse
//! (a too-small output buffer, an argument out of range, a call in the wrong state)
//! map to no Terminate cause: nothing went wrong on the wire.

use crate::mpa::{FrameKind, RtrSet};
use crate::rdmap::Opcode;
use crate::terminate::{
    DdpTaggedErrorCode, DdpUntaggedErrorCode, LlpErrorCode, RdmapErrorCode, TerminateCause,
};

/// Everything that can go wrong in this crate.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ----- local misuse: no Terminate -----
    /// An output buffer is too small for what is being emitted.
    #[error("emit {what}: output buffer holds {available} bytes, {needed} needed")]
    BufferTooSmall {
        /// What was being emitted.
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// An argument is out of range for the wire format.
    #[error("{operation}: {reason}")]
    InvalidArgument {
        /// The operation that refused it.
        operation: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// A state machine was driven in a state that does not allow the operation.
    #[error("{operation}: not allowed in state {state}")]
    WrongState {
        /// The operation attempted.
        operation: &'static str,
        /// The state the machine was in.
        state: &'static str,
    },
    /// Private data handed to an MPA emit is longer than this crate sends (252 ULP bytes).
    #[error("emit MPA frame: {len} bytes of private data, at most {max} are sent")]
    PrivateDataTooLong {
        /// Length given.
        len: usize,
        /// Largest allowed.
        max: usize,
    },
    /// A ULPDU longer than the 16-bit ULPDU_Length field can carry.
    #[error("encode FPDU: ULPDU of {len} bytes exceeds the 16-bit ULPDU_Length")]
    UlpduTooLong {
        /// Length given.
        len: usize,
    },

    // ----- MPA negotiation: LLP / EType 0 -----
    /// An MPA frame ended before its 20-byte header or its private data.
    #[error("parse MPA frame: {available} bytes, frame needs {needed}")]
    MpaTruncated {
        /// Bytes the frame needs.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// The 16-byte key is not the one expected.
    #[error("parse MPA frame: key is not the {expected:?} key")]
    MpaBadKey {
        /// The frame kind that was expected.
        expected: FrameKind,
    },
    /// Rev is not 1 (RFC 5044) or 2 (RFC 6581).
    #[error("parse MPA frame: unsupported Rev {revision}")]
    MpaUnsupportedRevision {
        /// The Rev field received.
        revision: u8,
    },
    /// PD_Length above the RFC 5044 limit of 512.
    #[error("parse MPA frame: PD_Length {len} exceeds the RFC 5044 limit of 512")]
    MpaPrivateDataLengthInvalid {
        /// PD_Length received.
        len: usize,
    },
    /// The peer asked for markers, which this stack does not implement (as siw).
    #[error("MPA negotiation: {kind:?} asks for markers (M=1), which are not supported")]
    MpaMarkersNotSupported {
        /// Which frame asked for them.
        kind: FrameKind,
    },
    /// Rev 2 with the enhanced flag but fewer than 4 bytes of private data.
    #[error(
        "parse MPA frame: enhanced rev 2 frame with PD_Length {pd_len} < 4 (no IRD/ORD block)"
    )]
    MpaIrdOrdMissing {
        /// PD_Length received.
        pd_len: usize,
    },
    /// The Initiator asked for CRC and the Reply has C=0 (RFC 5044: CRC MUST be used if requested).
    #[error("MPA negotiation: Reply has C=0 although the Request asked for CRC")]
    MpaCrcNotHonoured,
    /// The Reply's revision is higher than the Request's, or rev 2 answers a rev 1 Request.
    #[error("MPA negotiation: Reply Rev {replied} does not fit Request Rev {requested}")]
    MpaRevisionMismatch {
        /// Rev sent in the Request.
        requested: u8,
        /// Rev received in the Reply.
        replied: u8,
    },
    /// Bytes arrived behind the MPA Request before the Reply was sent (siw fails with -EPROTO).
    #[error("MPA negotiation: {extra} bytes arrived behind the MPA Request before the Reply")]
    MpaDataAfterRequest {
        /// How many extra bytes.
        extra: usize,
    },
    /// The peer wants more inbound reads than the local IRD, or a Read RTR with no IRD/ORD slot.
    #[error("MPA negotiation: insufficient IRD: {needed} needed, {available} available")]
    MpaInsufficientIrd {
        /// Depth needed.
        needed: u16,
        /// Depth available.
        available: u16,
    },
    /// Peer-to-peer mode was requested but no offered RTR type can be used.
    #[error("MPA negotiation: no matching RTR (offered {offered:?}, replied {replied:?})")]
    MpaNoMatchingRtr {
        /// RTR types offered by the Initiator.
        offered: RtrSet,
        /// RTR types set in the Reply (empty on the Responder side).
        replied: RtrSet,
    },

    // ----- FPDU framing: LLP / EType 0 -----
    /// The received CRC32c does not match the one computed over the FPDU.
    #[error("decode FPDU: CRC32c mismatch: computed {computed:#010x}, received {received:#010x}")]
    CrcMismatch {
        /// CRC computed locally.
        computed: u32,
        /// CRC received (decoded little-endian).
        received: u32,
    },

    // ----- DDP / RDMAP parse: Terminate per RFC 5040 / 5041 -----
    /// A ULPDU is shorter than the header its control bytes announce.
    #[error("parse DDP segment: {what} needs {needed} bytes, {available} present")]
    SegmentTooShort {
        /// The part that did not fit.
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// The DDP version (DV) is not 1.
    #[error("parse DDP segment: DDP version {version} (tagged={tagged}), expected 1")]
    DdpVersion {
        /// T flag of the segment.
        tagged: bool,
        /// DV received.
        version: u8,
    },
    /// The RDMAP version (RV) is not 1.
    #[error("parse DDP segment: RDMAP version {version}, expected 1")]
    RdmapVersion {
        /// RV received.
        version: u8,
    },
    /// An opcode this stack does not handle (10..15: RFC 7306 atomics and reserved), or
    /// one whose T flag is wrong.
    #[error("parse DDP segment: unexpected RDMAP opcode {opcode:#x} (tagged={tagged})")]
    UnexpectedOpcode {
        /// Raw opcode.
        opcode: u8,
        /// T flag of the segment.
        tagged: bool,
    },
    /// A known opcode with a shape RFC 5040 forbids (e.g. a Read Request with L=0 or payload).
    #[error("parse {opcode:?} segment: {reason}")]
    MalformedMessage {
        /// The opcode.
        opcode: Opcode,
        /// What was wrong.
        reason: &'static str,
    },
    /// An untagged segment on a queue that is invalid for it.
    #[error("untagged {}segment: invalid QN {qn}", OpcodeWord(*opcode))]
    InvalidQn {
        /// QN received.
        qn: u32,
        /// The opcode, when known.
        opcode: Option<Opcode>,
    },
    /// MSN is not the next expected one for the queue.
    #[error("untagged segment on QN {qn}: MSN {received}, expected {expected}")]
    MsnOutOfRange {
        /// Queue number.
        qn: u32,
        /// MSN expected.
        expected: u32,
        /// MSN received.
        received: u32,
    },
    /// MO does not continue the message.
    #[error("untagged segment on QN {qn} MSN {msn}: MO {received}, expected {expected}")]
    InvalidMo {
        /// Queue number.
        qn: u32,
        /// MSN of the message.
        msn: u32,
        /// MO expected.
        expected: u32,
        /// MO received.
        received: u32,
    },
    /// An untagged message arrived with no receive buffer posted.
    #[error("untagged message on QN {qn} MSN {msn}: no receive buffer posted")]
    NoReceiveBuffer {
        /// Queue number.
        qn: u32,
        /// MSN of the message.
        msn: u32,
    },
    /// An untagged message is longer than the receive buffer posted for it.
    #[error("untagged message of at least {len} bytes exceeds its {capacity}-byte buffer")]
    MessageTooLong {
        /// Bytes the message needs so far.
        len: u64,
        /// Buffer capacity.
        capacity: u64,
    },
    /// A tagged segment continues a message with a different STag.
    #[error(
        "tagged segment: STag {received:#010x} does not continue message on STag {expected:#010x}"
    )]
    TaggedStagMismatch {
        /// STag of the message in progress.
        expected: u32,
        /// STag received.
        received: u32,
    },
    /// A tagged segment's TO does not continue the message.
    #[error("tagged segment on STag {stag:#010x}: TO {received:#x}, expected {expected:#x}")]
    TaggedOffsetMismatch {
        /// STag.
        stag: u32,
        /// TO expected.
        expected: u64,
        /// TO received.
        received: u64,
    },
    /// TO + length wraps the 64-bit tagged offset space.
    #[error("tagged segment on STag {stag:#010x}: TO {to:#x} + {len} bytes wraps")]
    TaggedOffsetWrap {
        /// STag.
        stag: u32,
        /// TO received.
        to: u64,
        /// Payload length.
        len: usize,
    },
    /// A segment of a different message arrived while a message of the same kind was incomplete.
    #[error("{received:?} segment arrived while a {in_progress:?} message was incomplete")]
    MessageInterleaved {
        /// Opcode of the message in progress.
        in_progress: Opcode,
        /// Opcode received.
        received: Opcode,
    },
}

impl Error {
    /// The Terminate (layer, etype, code) a receiver sends for this error, or `None`
    /// when the error is local misuse and nothing should go on the wire.
    pub fn terminate_cause(&self) -> Option<TerminateCause> {
        use Error::*;
        let llp = |c| Some(TerminateCause::Llp(c));
        let ut = |c| Some(TerminateCause::DdpUntagged(c));
        let tg = |c| Some(TerminateCause::DdpTagged(c));
        let op = |c| Some(TerminateCause::rdmap_operation(c));
        match self {
            BufferTooSmall { .. }
            | InvalidArgument { .. }
            | WrongState { .. }
            | PrivateDataTooLong { .. }
            | UlpduTooLong { .. } => None,
            MpaTruncated { .. }
            | MpaBadKey { .. }
            | MpaUnsupportedRevision { .. }
            | MpaPrivateDataLengthInvalid { .. }
            | MpaMarkersNotSupported { .. }
            | MpaIrdOrdMissing { .. }
            | MpaCrcNotHonoured
            | MpaRevisionMismatch { .. }
            | MpaDataAfterRequest { .. } => llp(LlpErrorCode::InvalidMpaFrame),
            MpaInsufficientIrd { .. } => llp(LlpErrorCode::InsufficientIrd),
            MpaNoMatchingRtr { .. } => llp(LlpErrorCode::NoMatchingRtr),
            CrcMismatch { .. } => llp(LlpErrorCode::CrcError),
            // RFC 5040/5041 have no "segment too short" code; the stream is unusable.
            SegmentTooShort { .. } | MalformedMessage { .. } => {
                op(RdmapErrorCode::CatastrophicStream)
            }
            DdpVersion { tagged: true, .. } => tg(DdpTaggedErrorCode::InvalidVersion),
            DdpVersion { tagged: false, .. } => ut(DdpUntaggedErrorCode::InvalidVersion),
            RdmapVersion { .. } => op(RdmapErrorCode::InvalidVersion),
            UnexpectedOpcode { .. } | MessageInterleaved { .. } => {
                op(RdmapErrorCode::UnexpectedOpcode)
            }
            InvalidQn { .. } => ut(DdpUntaggedErrorCode::InvalidQn),
            MsnOutOfRange { .. } => ut(DdpUntaggedErrorCode::MsnRange),
            InvalidMo { .. } => ut(DdpUntaggedErrorCode::InvalidMo),
            NoReceiveBuffer { .. } => ut(DdpUntaggedErrorCode::NoBuffer),
            MessageTooLong { .. } => ut(DdpUntaggedErrorCode::MessageTooLong),
            TaggedStagMismatch { .. } => tg(DdpTaggedErrorCode::InvalidStag),
            TaggedOffsetMismatch { .. } => tg(DdpTaggedErrorCode::BaseOrBounds),
            TaggedOffsetWrap { .. } => tg(DdpTaggedErrorCode::ToWrap),
        }
    }
}

/// The opcode word of [`Error::InvalidQn`]'s message ("Send " or nothing).
struct OpcodeWord(Option<Opcode>);

impl core::fmt::Display for OpcodeWord {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            Some(op) => write!(f, "{op:?} "),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Error::{self, *};
    use crate::mpa::{FrameKind, RtrSet};
    use crate::rdmap::Opcode;

    /// Every variant's message, as log lines and callers see it.
    #[test]
    fn display_texts() {
        let cases: &[(Error, &str)] = &[
            (
                BufferTooSmall { what: "FPDU", needed: 30, available: 20 },
                "emit FPDU: output buffer holds 20 bytes, 30 needed",
            ),
            (
                InvalidArgument { operation: "encode", reason: "STag is zero" },
                "encode: STag is zero",
            ),
            (
                WrongState { operation: "accept", state: "Closed" },
                "accept: not allowed in state Closed",
            ),
            (
                PrivateDataTooLong { len: 300, max: 252 },
                "emit MPA frame: 300 bytes of private data, at most 252 are sent",
            ),
            (
                UlpduTooLong { len: 70000 },
                "encode FPDU: ULPDU of 70000 bytes exceeds the 16-bit ULPDU_Length",
            ),
            (
                MpaTruncated { needed: 20, available: 7 },
                "parse MPA frame: 7 bytes, frame needs 20",
            ),
            (
                MpaBadKey { expected: FrameKind::Reply },
                "parse MPA frame: key is not the Reply key",
            ),
            (
                MpaUnsupportedRevision { revision: 3 },
                "parse MPA frame: unsupported Rev 3",
            ),
            (
                MpaPrivateDataLengthInvalid { len: 513 },
                "parse MPA frame: PD_Length 513 exceeds the RFC 5044 limit of 512",
            ),
            (
                MpaMarkersNotSupported { kind: FrameKind::Request },
                "MPA negotiation: Request asks for markers (M=1), which are not supported",
            ),
            (
                MpaIrdOrdMissing { pd_len: 2 },
                "parse MPA frame: enhanced rev 2 frame with PD_Length 2 < 4 (no IRD/ORD block)",
            ),
            (
                MpaCrcNotHonoured,
                "MPA negotiation: Reply has C=0 although the Request asked for CRC",
            ),
            (
                MpaRevisionMismatch { requested: 1, replied: 2 },
                "MPA negotiation: Reply Rev 2 does not fit Request Rev 1",
            ),
            (
                MpaDataAfterRequest { extra: 5 },
                "MPA negotiation: 5 bytes arrived behind the MPA Request before the Reply",
            ),
            (
                MpaInsufficientIrd { needed: 4, available: 1 },
                "MPA negotiation: insufficient IRD: 4 needed, 1 available",
            ),
            (
                MpaNoMatchingRtr {
                    offered: RtrSet::WRITE | RtrSet::READ,
                    replied: RtrSet::NONE,
                },
                "MPA negotiation: no matching RTR (offered RtrSet(WRITE | READ), replied RtrSet(0x0))",
            ),
            (
                CrcMismatch { computed: 0xdead_beef, received: 0x12 },
                "decode FPDU: CRC32c mismatch: computed 0xdeadbeef, received 0x00000012",
            ),
            (
                SegmentTooShort { what: "tagged header", needed: 14, available: 9 },
                "parse DDP segment: tagged header needs 14 bytes, 9 present",
            ),
            (
                DdpVersion { tagged: true, version: 0 },
                "parse DDP segment: DDP version 0 (tagged=true), expected 1",
            ),
            (
                RdmapVersion { version: 2 },
                "parse DDP segment: RDMAP version 2, expected 1",
            ),
            (
                UnexpectedOpcode { opcode: 0xc, tagged: false },
                "parse DDP segment: unexpected RDMAP opcode 0xc (tagged=false)",
            ),
            (
                MalformedMessage { opcode: Opcode::ReadRequest, reason: "L=0" },
                "parse ReadRequest segment: L=0",
            ),
            (
                InvalidQn { qn: 7, opcode: Some(Opcode::Send) },
                "untagged Send segment: invalid QN 7",
            ),
            (
                InvalidQn { qn: 7, opcode: None },
                "untagged segment: invalid QN 7",
            ),
            (
                MsnOutOfRange { qn: 0, expected: 3, received: 9 },
                "untagged segment on QN 0: MSN 9, expected 3",
            ),
            (
                InvalidMo { qn: 1, msn: 2, expected: 100, received: 50 },
                "untagged segment on QN 1 MSN 2: MO 50, expected 100",
            ),
            (
                NoReceiveBuffer { qn: 0, msn: 4 },
                "untagged message on QN 0 MSN 4: no receive buffer posted",
            ),
            (
                MessageTooLong { len: 5000, capacity: 4096 },
                "untagged message of at least 5000 bytes exceeds its 4096-byte buffer",
            ),
            (
                TaggedStagMismatch { expected: 0x100, received: 0x2_0001 },
                "tagged segment: STag 0x00020001 does not continue message on STag 0x00000100",
            ),
            (
                TaggedOffsetMismatch { stag: 0xab, expected: 0x1000, received: 0x800 },
                "tagged segment on STag 0x000000ab: TO 0x800, expected 0x1000",
            ),
            (
                TaggedOffsetWrap { stag: 1, to: u64::MAX, len: 2 },
                "tagged segment on STag 0x00000001: TO 0xffffffffffffffff + 2 bytes wraps",
            ),
            (
                MessageInterleaved {
                    in_progress: Opcode::Send,
                    received: Opcode::SendInvalidate,
                },
                "SendInvalidate segment arrived while a Send message was incomplete",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), *text, "{error:?}");
        }
    }
}
