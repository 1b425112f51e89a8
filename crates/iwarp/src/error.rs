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
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    // ----- local misuse: no Terminate -----
    /// An output buffer is too small for what is being emitted.
    BufferTooSmall {
        /// What was being emitted.
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// An argument is out of range for the wire format.
    InvalidArgument {
        /// The operation that refused it.
        operation: &'static str,
        /// Why.
        reason: &'static str,
    },
    /// A state machine was driven in a state that does not allow the operation.
    WrongState {
        /// The operation attempted.
        operation: &'static str,
        /// The state the machine was in.
        state: &'static str,
    },
    /// Private data handed to an MPA emit is longer than this crate sends (252 ULP bytes).
    PrivateDataTooLong {
        /// Length given.
        len: usize,
        /// Largest allowed.
        max: usize,
    },
    /// A ULPDU longer than the 16-bit ULPDU_Length field can carry.
    UlpduTooLong {
        /// Length given.
        len: usize,
    },

    // ----- MPA negotiation: LLP / EType 0 -----
    /// An MPA frame ended before its 20-byte header or its private data.
    MpaTruncated {
        /// Bytes the frame needs.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// The 16-byte key is not the one expected.
    MpaBadKey {
        /// The frame kind that was expected.
        expected: FrameKind,
    },
    /// Rev is not 1 (RFC 5044) or 2 (RFC 6581).
    MpaUnsupportedRevision {
        /// The Rev field received.
        revision: u8,
    },
    /// PD_Length above the RFC 5044 limit of 512.
    MpaPrivateDataLengthInvalid {
        /// PD_Length received.
        len: usize,
    },
    /// The peer asked for markers, which this stack does not implement (as siw).
    MpaMarkersNotSupported {
        /// Which frame asked for them.
        kind: FrameKind,
    },
    /// Rev 2 with the enhanced flag but fewer than 4 bytes of private data.
    MpaIrdOrdMissing {
        /// PD_Length received.
        pd_len: usize,
    },
    /// The Initiator asked for CRC and the Reply has C=0 (RFC 5044: CRC MUST be used if requested).
    MpaCrcNotHonoured,
    /// The Reply's revision is higher than the Request's, or rev 2 answers a rev 1 Request.
    MpaRevisionMismatch {
        /// Rev sent in the Request.
        requested: u8,
        /// Rev received in the Reply.
        replied: u8,
    },
    /// Bytes arrived behind the MPA Request before the Reply was sent (siw fails with -EPROTO).
    MpaDataAfterRequest {
        /// How many extra bytes.
        extra: usize,
    },
    /// The peer wants more inbound reads than the local IRD, or a Read RTR with no IRD/ORD slot.
    MpaInsufficientIrd {
        /// Depth needed.
        needed: u16,
        /// Depth available.
        available: u16,
    },
    /// Peer-to-peer mode was requested but no offered RTR type can be used.
    MpaNoMatchingRtr {
        /// RTR types offered by the Initiator.
        offered: RtrSet,
        /// RTR types set in the Reply (empty on the Responder side).
        replied: RtrSet,
    },

    // ----- FPDU framing: LLP / EType 0 -----
    /// The received CRC32c does not match the one computed over the FPDU.
    CrcMismatch {
        /// CRC computed locally.
        computed: u32,
        /// CRC received (decoded little-endian).
        received: u32,
    },

    // ----- DDP / RDMAP parse: Terminate per RFC 5040 / 5041 -----
    /// A ULPDU is shorter than the header its control bytes announce.
    SegmentTooShort {
        /// The part that did not fit.
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// The DDP version (DV) is not 1.
    DdpVersion {
        /// T flag of the segment.
        tagged: bool,
        /// DV received.
        version: u8,
    },
    /// The RDMAP version (RV) is not 1.
    RdmapVersion {
        /// RV received.
        version: u8,
    },
    /// An opcode this stack does not handle (10..15: RFC 7306 atomics and reserved), or
    /// one whose T flag is wrong.
    UnexpectedOpcode {
        /// Raw opcode.
        opcode: u8,
        /// T flag of the segment.
        tagged: bool,
    },
    /// A known opcode with a shape RFC 5040 forbids (e.g. a Read Request with L=0 or payload).
    MalformedMessage {
        /// The opcode.
        opcode: Opcode,
        /// What was wrong.
        reason: &'static str,
    },
    /// An untagged segment on a queue that is invalid for it.
    InvalidQn {
        /// QN received.
        qn: u32,
        /// The opcode, when known.
        opcode: Option<Opcode>,
    },
    /// MSN is not the next expected one for the queue.
    MsnOutOfRange {
        /// Queue number.
        qn: u32,
        /// MSN expected.
        expected: u32,
        /// MSN received.
        received: u32,
    },
    /// MO does not continue the message.
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
    NoReceiveBuffer {
        /// Queue number.
        qn: u32,
        /// MSN of the message.
        msn: u32,
    },
    /// An untagged message is longer than the receive buffer posted for it.
    MessageTooLong {
        /// Bytes the message needs so far.
        len: u64,
        /// Buffer capacity.
        capacity: u64,
    },
    /// A tagged segment continues a message with a different STag.
    TaggedStagMismatch {
        /// STag of the message in progress.
        expected: u32,
        /// STag received.
        received: u32,
    },
    /// A tagged segment's TO does not continue the message.
    TaggedOffsetMismatch {
        /// STag.
        stag: u32,
        /// TO expected.
        expected: u64,
        /// TO received.
        received: u64,
    },
    /// TO + length wraps the 64-bit tagged offset space.
    TaggedOffsetWrap {
        /// STag.
        stag: u32,
        /// TO received.
        to: u64,
        /// Payload length.
        len: usize,
    },
    /// A segment of a different message arrived while a message of the same kind was incomplete.
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

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        use Error::*;
        match self {
            BufferTooSmall {
                what,
                needed,
                available,
            } => write!(
                f,
                "emit {what}: output buffer holds {available} bytes, {needed} needed"
            ),
            InvalidArgument { operation, reason } => write!(f, "{operation}: {reason}"),
            WrongState { operation, state } => {
                write!(f, "{operation}: not allowed in state {state}")
            }
            PrivateDataTooLong { len, max } => write!(
                f,
                "emit MPA frame: {len} bytes of private data, at most {max} are sent"
            ),
            UlpduTooLong { len } => write!(
                f,
                "encode FPDU: ULPDU of {len} bytes exceeds the 16-bit ULPDU_Length"
            ),
            MpaTruncated { needed, available } => write!(
                f,
                "parse MPA frame: {available} bytes, frame needs {needed}"
            ),
            MpaBadKey { expected } => {
                write!(f, "parse MPA frame: key is not the {expected:?} key")
            }
            MpaUnsupportedRevision { revision } => {
                write!(f, "parse MPA frame: unsupported Rev {revision}")
            }
            MpaPrivateDataLengthInvalid { len } => write!(
                f,
                "parse MPA frame: PD_Length {len} exceeds the RFC 5044 limit of 512"
            ),
            MpaMarkersNotSupported { kind } => write!(
                f,
                "MPA negotiation: {kind:?} asks for markers (M=1), which are not supported"
            ),
            MpaIrdOrdMissing { pd_len } => write!(
                f,
                "parse MPA frame: enhanced rev 2 frame with PD_Length {pd_len} < 4 (no IRD/ORD block)"
            ),
            MpaCrcNotHonoured => write!(
                f,
                "MPA negotiation: Reply has C=0 although the Request asked for CRC"
            ),
            MpaRevisionMismatch { requested, replied } => write!(
                f,
                "MPA negotiation: Reply Rev {replied} does not fit Request Rev {requested}"
            ),
            MpaDataAfterRequest { extra } => write!(
                f,
                "MPA negotiation: {extra} bytes arrived behind the MPA Request before the Reply"
            ),
            MpaInsufficientIrd { needed, available } => write!(
                f,
                "MPA negotiation: insufficient IRD: {needed} needed, {available} available"
            ),
            MpaNoMatchingRtr { offered, replied } => write!(
                f,
                "MPA negotiation: no matching RTR (offered {offered:?}, replied {replied:?})"
            ),
            CrcMismatch { computed, received } => write!(
                f,
                "decode FPDU: CRC32c mismatch: computed {computed:#010x}, received {received:#010x}"
            ),
            SegmentTooShort {
                what,
                needed,
                available,
            } => write!(
                f,
                "parse DDP segment: {what} needs {needed} bytes, {available} present"
            ),
            DdpVersion { tagged, version } => write!(
                f,
                "parse DDP segment: DDP version {version} (tagged={tagged}), expected 1"
            ),
            RdmapVersion { version } => {
                write!(f, "parse DDP segment: RDMAP version {version}, expected 1")
            }
            UnexpectedOpcode { opcode, tagged } => write!(
                f,
                "parse DDP segment: unexpected RDMAP opcode {opcode:#x} (tagged={tagged})"
            ),
            MalformedMessage { opcode, reason } => {
                write!(f, "parse {opcode:?} segment: {reason}")
            }
            InvalidQn { qn, opcode } => match opcode {
                Some(op) => write!(f, "untagged {op:?} segment: invalid QN {qn}"),
                None => write!(f, "untagged segment: invalid QN {qn}"),
            },
            MsnOutOfRange {
                qn,
                expected,
                received,
            } => write!(
                f,
                "untagged segment on QN {qn}: MSN {received}, expected {expected}"
            ),
            InvalidMo {
                qn,
                msn,
                expected,
                received,
            } => write!(
                f,
                "untagged segment on QN {qn} MSN {msn}: MO {received}, expected {expected}"
            ),
            NoReceiveBuffer { qn, msn } => write!(
                f,
                "untagged message on QN {qn} MSN {msn}: no receive buffer posted"
            ),
            MessageTooLong { len, capacity } => write!(
                f,
                "untagged message of at least {len} bytes exceeds its {capacity}-byte buffer"
            ),
            TaggedStagMismatch { expected, received } => write!(
                f,
                "tagged segment: STag {received:#010x} does not continue message on STag {expected:#010x}"
            ),
            TaggedOffsetMismatch {
                stag,
                expected,
                received,
            } => write!(
                f,
                "tagged segment on STag {stag:#010x}: TO {received:#x}, expected {expected:#x}"
            ),
            TaggedOffsetWrap { stag, to, len } => write!(
                f,
                "tagged segment on STag {stag:#010x}: TO {to:#x} + {len} bytes wraps"
            ),
            MessageInterleaved {
                in_progress,
                received,
            } => write!(
                f,
                "{received:?} segment arrived while a {in_progress:?} message was incomplete"
            ),
        }
    }
}

impl std::error::Error for Error {}
