//! RDMAP messages as typed DDP segments (RFC 5040, and RFC 7306 Immediate Data).
//!
//! Owns: the RDMAP control byte (RV=1, opcode), the 28-byte RDMA Read Request header,
//! the 8-byte Immediate Data, and [`Segment`], the typed view of one ULPDU with a
//! borrowed payload, with `parse` and `emit_header`. Parsing performs every check that
//! needs no connection state, in siw's order: DDP version, RDMAP version, opcode, header
//! length, QN, shape. RFC 5040 §4.1 "RDMAP Control and Invalidate STag Field", §4.4
//! "RDMA Read Request Header", §4.8 "Terminate Header", §7 "RDMAP Error Management";
//! RFC 7306 "Immediate Data".
//!
//! Must not: track MSN/MO/TO continuity across segments ([`crate::segment`]), look up
//! STags or buffers (the caller's memory registry), or frame bytes ([`crate::fpdu`]).
//!
//! | Op | Message | T | QN |
//! |---|---|---|---|
//! | 0 | RDMA Write | 1 | - |
//! | 1 | RDMA Read Request | 0 | 1 |
//! | 2 | RDMA Read Response | 1 | - |
//! | 3..6 | Send, Send+Inv, Send+SE, Send+SE+Inv | 0 | 0 |
//! | 7 | Terminate | 0 | 2 |
//! | 8, 9 | Immediate Data, Immediate Data with SE (RFC 7306) | 0 | 0 |
//!
//! Immediate Data travels on the Send queue (QN 0): it takes the next MSN there, as a Send
//! does, and uses up the peer's next posted receive buffer. Its DDP payload is exactly
//! [`IMMEDIATE_DATA_LEN`] bytes, opaque to RDMAP (the ULP gives them their meaning), and this
//! crate sends and accepts it as one segment (L=1, MO 0), like a Read Request: the 8 bytes
//! are modelled as an RDMAP header ([`Segment::header_len`]) and the payload is empty. The
//! Atomic opcodes 0xA/0xB are not supported (they parse as an unexpected opcode).

use crate::ddp::{
    self, be32, be64, DdpHeader, Queue, TaggedHeader, UntaggedHeader, TAGGED_HEADER_LEN,
    UNTAGGED_HEADER_LEN,
};
use crate::error::Error;
use crate::terminate::TerminateMessage;

/// RDMAP version carried in RV.
pub const RDMAP_VERSION: u8 = 1;
/// Length of the RDMA Read Request header that follows the untagged DDP header.
pub const READ_REQUEST_HEADER_LEN: usize = 28;
/// Length of the Immediate Data (RFC 7306) that follows the untagged DDP header.
pub const IMMEDIATE_DATA_LEN: usize = 8;
/// Largest header [`Segment::emit_header`] writes: a Terminate with every part.
pub const MAX_SEGMENT_HEADER_LEN: usize =
    UNTAGGED_HEADER_LEN + crate::terminate::MAX_TERMINATE_BODY_LEN;
/// STag used for zero-length RTR frames. Never put STag 0 on the wire: Chelsio fails
/// tagged segments with STag 0 even when they are empty (iwarp-wire.md 2.3).
pub const RTR_STAG: u32 = 1;

/// RDMAP opcodes defined by RFC 5040, and the Immediate Data opcodes of RFC 7306.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// 0x0 RDMA Write.
    Write = 0,
    /// 0x1 RDMA Read Request.
    ReadRequest = 1,
    /// 0x2 RDMA Read Response.
    ReadResponse = 2,
    /// 0x3 Send.
    Send = 3,
    /// 0x4 Send with Invalidate.
    SendInvalidate = 4,
    /// 0x5 Send with Solicited Event.
    SendSolicited = 5,
    /// 0x6 Send with Solicited Event and Invalidate.
    SendSolicitedInvalidate = 6,
    /// 0x7 Terminate.
    Terminate = 7,
    /// 0x8 Immediate Data (RFC 7306).
    ImmediateData = 8,
    /// 0x9 Immediate Data with Solicited Event (RFC 7306).
    ImmediateDataSolicited = 9,
}

impl Opcode {
    /// Decode the 4-bit opcode; 10..15 (RFC 7306 atomics, reserved) are not supported.
    pub const fn from_u8(op: u8) -> Option<Opcode> {
        Some(match op {
            0 => Opcode::Write,
            1 => Opcode::ReadRequest,
            2 => Opcode::ReadResponse,
            3 => Opcode::Send,
            4 => Opcode::SendInvalidate,
            5 => Opcode::SendSolicited,
            6 => Opcode::SendSolicitedInvalidate,
            7 => Opcode::Terminate,
            8 => Opcode::ImmediateData,
            9 => Opcode::ImmediateDataSolicited,
            _ => return None,
        })
    }

    /// The opcode for a Send with the given options.
    pub const fn send(solicited: bool, invalidate: bool) -> Opcode {
        match (solicited, invalidate) {
            (false, false) => Opcode::Send,
            (false, true) => Opcode::SendInvalidate,
            (true, false) => Opcode::SendSolicited,
            (true, true) => Opcode::SendSolicitedInvalidate,
        }
    }

    /// The opcode for Immediate Data with or without Solicited Event.
    pub const fn immediate(solicited: bool) -> Opcode {
        if solicited {
            Opcode::ImmediateDataSolicited
        } else {
            Opcode::ImmediateData
        }
    }

    /// Whether the message uses the tagged buffer model (T=1).
    pub const fn is_tagged(self) -> bool {
        matches!(self, Opcode::Write | Opcode::ReadResponse)
    }

    /// The untagged queue the message travels on, or `None` for tagged messages.
    pub const fn queue(self) -> Option<Queue> {
        match self {
            Opcode::Write | Opcode::ReadResponse => None,
            Opcode::ReadRequest => Some(Queue::ReadRequest),
            Opcode::Terminate => Some(Queue::Terminate),
            Opcode::Send
            | Opcode::SendInvalidate
            | Opcode::SendSolicited
            | Opcode::SendSolicitedInvalidate
            | Opcode::ImmediateData
            | Opcode::ImmediateDataSolicited => Some(Queue::Send),
        }
    }

    /// The RDMAP control byte: RV=1 in the top two bits, reserved bits 0, opcode.
    pub const fn control_byte(self) -> u8 {
        (RDMAP_VERSION << 6) | self as u8
    }
}

/// Check an RDMAP control byte (RV, then opcode, then its T bit). RFC 5040 §7:
/// a bad RV is RDMAP/2/0x05 and an unknown opcode RDMAP/2/0x06.
pub fn check_control(ddp_ctrl: u8, rdmap_ctrl: u8) -> Result<Opcode, Error> {
    let version = rdmap_ctrl >> 6;
    if version != RDMAP_VERSION {
        return Err(Error::RdmapVersion { version });
    }
    let tagged = ddp_ctrl & ddp::FLAG_TAGGED != 0;
    let raw = rdmap_ctrl & 0x0F;
    match Opcode::from_u8(raw) {
        Some(op) if op.is_tagged() == tagged => Ok(op),
        _ => Err(Error::UnexpectedOpcode {
            opcode: raw,
            tagged,
        }),
    }
}

/// The RDMA Read Request header (RFC 5040 §4.4), after the untagged DDP header on QN 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReadRequest {
    /// Data sink STag: the requester's buffer.
    pub sink_stag: u32,
    /// Data sink tagged offset.
    pub sink_to: u64,
    /// RDMA Read Message Size in bytes.
    pub size: u32,
    /// Data source STag: the responder's memory.
    pub source_stag: u32,
    /// Data source tagged offset.
    pub source_to: u64,
}

impl ReadRequest {
    /// Parse the 28 bytes at the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, Error> {
        let b = buf
            .get(..READ_REQUEST_HEADER_LEN)
            .ok_or(Error::SegmentTooShort {
                what: "RDMA Read Request header",
                needed: READ_REQUEST_HEADER_LEN,
                available: buf.len(),
            })?;
        Ok(ReadRequest {
            sink_stag: be32(&b[0..4]),
            sink_to: be64(&b[4..12]),
            size: be32(&b[12..16]),
            source_stag: be32(&b[16..20]),
            source_to: be64(&b[20..28]),
        })
    }

    /// Write the 28 bytes to the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let available = buf.len();
        let b = buf
            .get_mut(..READ_REQUEST_HEADER_LEN)
            .ok_or(Error::BufferTooSmall {
                what: "RDMA Read Request header",
                needed: READ_REQUEST_HEADER_LEN,
                available,
            })?;
        b[0..4].copy_from_slice(&self.sink_stag.to_be_bytes());
        b[4..12].copy_from_slice(&self.sink_to.to_be_bytes());
        b[12..16].copy_from_slice(&self.size.to_be_bytes());
        b[16..20].copy_from_slice(&self.source_stag.to_be_bytes());
        b[20..28].copy_from_slice(&self.source_to.to_be_bytes());
        Ok(READ_REQUEST_HEADER_LEN)
    }
}

/// One DDP segment (one ULPDU), typed by its RDMAP opcode, with a borrowed payload.
///
/// Fields that RFC 5040 fixes for a message type are implied, not stored: a Read
/// Request and a Terminate are always a single segment (L=1) with MO 0 on QN 1 / QN 2,
/// Sends travel on QN 0, and so does Immediate Data (one segment, MO 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment<'a> {
    /// RDMA Write (tagged): data for the sink STag at TO.
    Write {
        /// L flag.
        last: bool,
        /// Data sink STag.
        stag: u32,
        /// Tagged offset of the first payload byte.
        to: u64,
        /// Payload.
        payload: &'a [u8],
    },
    /// RDMA Read Request (untagged, QN 1, one segment).
    ReadRequest {
        /// MSN on QN 1.
        msn: u32,
        /// The Read Request header.
        request: ReadRequest,
    },
    /// RDMA Read Response (tagged): data for the requester's sink STag at TO.
    ReadResponse {
        /// L flag.
        last: bool,
        /// Data sink STag from the Read Request.
        stag: u32,
        /// Tagged offset of the first payload byte.
        to: u64,
        /// Payload.
        payload: &'a [u8],
    },
    /// Send, with SE and/or Invalidate (untagged, QN 0).
    Send {
        /// L flag.
        last: bool,
        /// MSN on QN 0.
        msn: u32,
        /// Message offset of the first payload byte.
        mo: u32,
        /// Solicited event (opcodes 5 and 6).
        solicited: bool,
        /// STag to invalidate (opcodes 4 and 6), carried in RsvdULP\[8:39\].
        invalidate_stag: Option<u32>,
        /// Payload.
        payload: &'a [u8],
    },
    /// Immediate Data, with or without SE (RFC 7306; untagged, QN 0, one segment). It takes
    /// the next MSN of the Send queue and uses up a receive buffer at the peer.
    ImmediateData {
        /// MSN on QN 0 (shared with Sends).
        msn: u32,
        /// Solicited event (opcode 9).
        solicited: bool,
        /// The 8 bytes of Immediate Data, opaque to RDMAP.
        data: [u8; IMMEDIATE_DATA_LEN],
    },
    /// Terminate (untagged, QN 2, one segment).
    Terminate {
        /// MSN on QN 2 (1: a stream carries at most one Terminate).
        msn: u32,
        /// The Terminate body.
        message: TerminateMessage<'a>,
    },
}

impl<'a> Segment<'a> {
    /// Parse one ULPDU (as yielded by [`crate::fpdu::FpduDecoder`]).
    ///
    /// Errors carry the Terminate cause a receiver must send
    /// ([`Error::terminate_cause`]).
    pub fn parse(ulpdu: &'a [u8]) -> Result<Self, Error> {
        if ulpdu.len() < 2 {
            return Err(Error::SegmentTooShort {
                what: "DDP and RDMAP control bytes",
                needed: 2,
                available: ulpdu.len(),
            });
        }
        ddp::check_version(ulpdu[0])?;
        let opcode = check_control(ulpdu[0], ulpdu[1])?;
        let (header, body) = DdpHeader::parse(ulpdu)?;
        match header {
            DdpHeader::Tagged(h) => Ok(match opcode {
                Opcode::Write => Segment::Write {
                    last: h.last,
                    stag: h.stag,
                    to: h.to,
                    payload: body,
                },
                _ => Segment::ReadResponse {
                    last: h.last,
                    stag: h.stag,
                    to: h.to,
                    payload: body,
                },
            }),
            DdpHeader::Untagged(h) => Self::parse_untagged(opcode, h, body),
        }
    }

    fn parse_untagged(opcode: Opcode, h: UntaggedHeader, body: &'a [u8]) -> Result<Self, Error> {
        let queue = opcode.queue().ok_or(Error::UnexpectedOpcode {
            opcode: opcode as u8,
            tagged: false,
        })?;
        if h.qn != queue.qn() {
            return Err(Error::InvalidQn {
                qn: h.qn,
                opcode: Some(opcode),
            });
        }
        let single_segment = |what: &'static str| -> Result<(), Error> {
            if !h.last {
                return Err(Error::MalformedMessage {
                    opcode,
                    reason: what,
                });
            }
            if h.mo != 0 {
                return Err(Error::InvalidMo {
                    qn: h.qn,
                    msn: h.msn,
                    expected: 0,
                    received: h.mo,
                });
            }
            Ok(())
        };
        match opcode {
            Opcode::ReadRequest => {
                single_segment("a Read Request must be a single segment (L=1)")?;
                let request = ReadRequest::parse(body)?;
                if body.len() > READ_REQUEST_HEADER_LEN {
                    return Err(Error::MalformedMessage {
                        opcode,
                        reason: "a Read Request carries no payload",
                    });
                }
                Ok(Segment::ReadRequest {
                    msn: h.msn,
                    request,
                })
            }
            Opcode::Terminate => {
                single_segment("a Terminate must be a single segment (L=1)")?;
                Ok(Segment::Terminate {
                    msn: h.msn,
                    message: TerminateMessage::parse(body)?,
                })
            }
            Opcode::ImmediateData | Opcode::ImmediateDataSolicited => {
                single_segment("Immediate Data must be a single segment (L=1)")?;
                let data = body
                    .get(..IMMEDIATE_DATA_LEN)
                    .ok_or(Error::SegmentTooShort {
                        what: "Immediate Data",
                        needed: IMMEDIATE_DATA_LEN,
                        available: body.len(),
                    })?;
                if body.len() > IMMEDIATE_DATA_LEN {
                    return Err(Error::MalformedMessage {
                        opcode,
                        reason: "Immediate Data carries exactly 8 bytes",
                    });
                }
                let mut bytes = [0u8; IMMEDIATE_DATA_LEN];
                bytes.copy_from_slice(data);
                Ok(Segment::ImmediateData {
                    msn: h.msn,
                    solicited: opcode == Opcode::ImmediateDataSolicited,
                    data: bytes,
                })
            }
            _ => {
                let invalidate = matches!(
                    opcode,
                    Opcode::SendInvalidate | Opcode::SendSolicitedInvalidate
                );
                Ok(Segment::Send {
                    last: h.last,
                    msn: h.msn,
                    mo: h.mo,
                    solicited: matches!(
                        opcode,
                        Opcode::SendSolicited | Opcode::SendSolicitedInvalidate
                    ),
                    invalidate_stag: invalidate.then_some(h.ulp_word),
                    payload: body,
                })
            }
        }
    }

    /// Zero-length RDMA Write RTR: tagged, L=1, STag [`RTR_STAG`], TO 0 (RFC 6581).
    pub const fn write_rtr() -> Segment<'static> {
        Segment::Write {
            last: true,
            stag: RTR_STAG,
            to: 0,
            payload: &[],
        }
    }

    /// Zero-length RDMA Read RTR: a Read Request of size 0 with non-zero STags.
    pub const fn read_rtr(msn: u32) -> Segment<'static> {
        Segment::ReadRequest {
            msn,
            request: ReadRequest {
                sink_stag: RTR_STAG,
                sink_to: 0,
                size: 0,
                source_stag: RTR_STAG,
                source_to: 0,
            },
        }
    }

    /// Zero-length Send RTR (uses up a receive buffer and an MSN at the peer).
    pub const fn send_rtr(msn: u32) -> Segment<'static> {
        Segment::Send {
            last: true,
            msn,
            mo: 0,
            solicited: false,
            invalidate_stag: None,
            payload: &[],
        }
    }

    /// The RDMAP opcode.
    pub const fn opcode(&self) -> Opcode {
        match self {
            Segment::Write { .. } => Opcode::Write,
            Segment::ReadRequest { .. } => Opcode::ReadRequest,
            Segment::ReadResponse { .. } => Opcode::ReadResponse,
            Segment::Send {
                solicited,
                invalidate_stag,
                ..
            } => Opcode::send(*solicited, invalidate_stag.is_some()),
            Segment::ImmediateData { solicited, .. } => Opcode::immediate(*solicited),
            Segment::Terminate { .. } => Opcode::Terminate,
        }
    }

    /// The L flag.
    pub const fn last(&self) -> bool {
        match self {
            Segment::Write { last, .. }
            | Segment::ReadResponse { last, .. }
            | Segment::Send { last, .. } => *last,
            Segment::ReadRequest { .. }
            | Segment::ImmediateData { .. }
            | Segment::Terminate { .. } => true,
        }
    }

    /// The data payload (empty for Read Request, Immediate Data and Terminate, whose
    /// bodies are part of [`emit_header`](Self::emit_header)).
    pub const fn payload(&self) -> &'a [u8] {
        match self {
            Segment::Write { payload, .. }
            | Segment::ReadResponse { payload, .. }
            | Segment::Send { payload, .. } => payload,
            Segment::ReadRequest { .. }
            | Segment::ImmediateData { .. }
            | Segment::Terminate { .. } => &[],
        }
    }

    /// The DDP header this segment carries.
    pub fn ddp_header(&self) -> DdpHeader {
        let ulp_control = self.opcode().control_byte();
        match *self {
            Segment::Write { last, stag, to, .. }
            | Segment::ReadResponse { last, stag, to, .. } => DdpHeader::Tagged(TaggedHeader {
                last,
                ulp_control,
                stag,
                to,
            }),
            Segment::Send {
                last,
                msn,
                mo,
                invalidate_stag,
                ..
            } => DdpHeader::Untagged(UntaggedHeader {
                last,
                ulp_control,
                ulp_word: invalidate_stag.unwrap_or(0),
                qn: Queue::Send.qn(),
                msn,
                mo,
            }),
            Segment::ReadRequest { msn, .. } => DdpHeader::Untagged(UntaggedHeader {
                last: true,
                ulp_control,
                ulp_word: 0,
                qn: Queue::ReadRequest.qn(),
                msn,
                mo: 0,
            }),
            Segment::ImmediateData { msn, .. } => DdpHeader::Untagged(UntaggedHeader {
                last: true,
                ulp_control,
                ulp_word: 0,
                qn: Queue::Send.qn(),
                msn,
                mo: 0,
            }),
            Segment::Terminate { msn, .. } => DdpHeader::Untagged(UntaggedHeader {
                last: true,
                ulp_control,
                ulp_word: 0,
                qn: Queue::Terminate.qn(),
                msn,
                mo: 0,
            }),
        }
    }

    /// Bytes [`emit_header`](Self::emit_header) writes: DDP header plus RDMAP header
    /// fields (Read Request header, Immediate Data, Terminate body).
    pub fn header_len(&self) -> usize {
        match self {
            Segment::Write { .. } | Segment::ReadResponse { .. } => TAGGED_HEADER_LEN,
            Segment::Send { .. } => UNTAGGED_HEADER_LEN,
            Segment::ReadRequest { .. } => UNTAGGED_HEADER_LEN + READ_REQUEST_HEADER_LEN,
            Segment::ImmediateData { .. } => UNTAGGED_HEADER_LEN + IMMEDIATE_DATA_LEN,
            Segment::Terminate { message, .. } => UNTAGGED_HEADER_LEN + message.wire_len(),
        }
    }

    /// ULPDU length: header plus payload.
    pub fn ulpdu_len(&self) -> usize {
        self.header_len() + self.payload().len()
    }

    /// Write everything but the payload (at most [`MAX_SEGMENT_HEADER_LEN`] bytes).
    pub fn emit_header(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let needed = self.header_len();
        if buf.len() < needed {
            return Err(Error::BufferTooSmall {
                what: "DDP segment header",
                needed,
                available: buf.len(),
            });
        }
        let mut at = self.ddp_header().emit(buf)?;
        match self {
            Segment::ReadRequest { request, .. } => at += request.emit(&mut buf[at..])?,
            Segment::ImmediateData { data, .. } => {
                buf[at..at + IMMEDIATE_DATA_LEN].copy_from_slice(data);
                at += IMMEDIATE_DATA_LEN;
            }
            Segment::Terminate { message, .. } => at += message.emit(&mut buf[at..])?,
            _ => {}
        }
        debug_assert_eq!(at, needed);
        Ok(at)
    }

    /// The whole ULPDU as a new vector (convenience for tests and tools; the fast path
    /// is [`crate::fpdu::FpduEncoder::encode_segment`], which does not allocate).
    pub fn to_ulpdu(&self) -> Result<Vec<u8>, Error> {
        let mut hdr = [0u8; MAX_SEGMENT_HEADER_LEN];
        let n = self.emit_header(&mut hdr)?;
        let mut v = Vec::with_capacity(n + self.payload().len());
        v.extend_from_slice(&hdr[..n]);
        v.extend_from_slice(self.payload());
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminate::{DdpUntaggedErrorCode, LlpErrorCode, RdmapErrorCode, TerminateCause};

    fn round_trip(seg: Segment<'_>) {
        let bytes = seg.to_ulpdu().unwrap();
        assert_eq!(bytes.len(), seg.ulpdu_len());
        assert_eq!(Segment::parse(&bytes).unwrap(), seg);
    }

    #[test]
    fn every_opcode_round_trips() {
        round_trip(Segment::Write {
            last: false,
            stag: 7,
            to: u64::MAX - 3,
            payload: b"abc",
        });
        round_trip(Segment::ReadResponse {
            last: true,
            stag: 9,
            to: 0,
            payload: &[],
        });
        for solicited in [false, true] {
            for invalidate_stag in [None, Some(0x55aa)] {
                round_trip(Segment::Send {
                    last: true,
                    msn: 3,
                    mo: 8,
                    solicited,
                    invalidate_stag,
                    payload: b"x",
                });
            }
        }
        round_trip(Segment::read_rtr(1));
        for solicited in [false, true] {
            round_trip(Segment::ImmediateData {
                msn: 9,
                solicited,
                data: [1, 2, 3, 4, 5, 6, 7, 8],
            });
        }
        round_trip(Segment::Terminate {
            msn: 1,
            message: TerminateMessage::header_less(TerminateCause::Llp(LlpErrorCode::CrcError)),
        });
    }

    #[test]
    fn control_bytes_match_the_wire_table() {
        // iwarp-wire.md section 1: byte0/byte1 per message with L=1.
        let cases: [(Segment<'_>, [u8; 2], usize); 5] = [
            (Segment::write_rtr(), [0xC1, 0x40], 14),
            (Segment::read_rtr(1), [0x41, 0x41], 46),
            (
                Segment::ReadResponse {
                    last: true,
                    stag: 1,
                    to: 0,
                    payload: &[],
                },
                [0xC1, 0x42],
                14,
            ),
            (Segment::send_rtr(1), [0x41, 0x43], 18),
            (
                Segment::Terminate {
                    msn: 1,
                    message: TerminateMessage::header_less(TerminateCause::DdpLocalCatastrophic),
                },
                [0x41, 0x47],
                22,
            ),
        ];
        for (seg, ctrl, len) in cases {
            let b = seg.to_ulpdu().unwrap();
            assert_eq!([b[0], b[1]], ctrl, "{seg:?}");
            assert_eq!(b.len(), len, "{seg:?}");
        }
        let send_se_inv = Segment::Send {
            last: false,
            msn: 1,
            mo: 0,
            solicited: true,
            invalidate_stag: Some(1),
            payload: &[],
        };
        let b = send_se_inv.to_ulpdu().unwrap();
        assert_eq!([b[0], b[1]], [0x01, 0x46], "non-last untagged clears L");
    }

    #[test]
    fn unknown_opcode_maps_to_rdmap_2_06() {
        // 0xA/0xB (RFC 7306 atomics) and the reserved 0xC..0xF are not supported.
        for op in 0x0A..=0x0F {
            let mut b = Segment::send_rtr(1).to_ulpdu().unwrap();
            b[1] = 0x40 | op;
            let e = Segment::parse(&b).unwrap_err();
            assert_eq!(
                e.terminate_cause(),
                Some(TerminateCause::rdmap_operation(
                    RdmapErrorCode::UnexpectedOpcode
                )),
                "opcode {op:#x}"
            );
            assert_eq!(e.terminate_cause().unwrap().to_wire(), (0, 2, 0x06));
        }
    }

    /// RFC 7306 Immediate Data: untagged, QN 0, L=1, MO 0, the 8 bytes right after the
    /// 18-byte DDP header (26-byte ULPDU).
    #[test]
    fn rfc7306_immediate_data_is_opcode_8_on_qn_0_with_8_bytes() {
        let seg = Segment::ImmediateData {
            msn: 0x0102_0304,
            solicited: false,
            data: [0xDE, 0xAD, 0xBE, 0xEF, 0x00, 0x00, 0x10, 0x00],
        };
        let b = seg.to_ulpdu().unwrap();
        assert_eq!(
            b,
            [
                0x41, 0x48, // DDP: T=0 L=1 DV=1; RDMAP: RV=1, opcode 8
                0, 0, 0, 0, // RsvdULP[8:39]
                0, 0, 0, 0, // QN 0
                1, 2, 3, 4, // MSN
                0, 0, 0, 0, // MO 0
                0xDE, 0xAD, 0xBE, 0xEF, 0x00, 0x00, 0x10, 0x00, // Immediate Data
            ]
        );
        assert_eq!(seg.header_len(), 26);
        assert!(seg.payload().is_empty());
        assert!(seg.last());
        assert_eq!(seg.opcode(), Opcode::ImmediateData);
        assert_eq!(Opcode::ImmediateData.queue(), Some(Queue::Send));
        assert!(!Opcode::ImmediateData.is_tagged());
        assert_eq!(Segment::parse(&b).unwrap(), seg);

        let se = Segment::ImmediateData {
            msn: 1,
            solicited: true,
            data: [0; IMMEDIATE_DATA_LEN],
        };
        let b = se.to_ulpdu().unwrap();
        assert_eq!([b[0], b[1]], [0x41, 0x49], "opcode 9: with Solicited Event");
        assert_eq!(Segment::parse(&b).unwrap(), se);
        assert_eq!(Opcode::from_u8(9), Some(Opcode::ImmediateDataSolicited));
        assert_eq!(Opcode::immediate(true), Opcode::ImmediateDataSolicited);
    }

    #[test]
    fn immediate_data_must_be_one_segment_of_exactly_8_bytes_on_qn_0() {
        let good = Segment::ImmediateData {
            msn: 1,
            solicited: false,
            data: [7; IMMEDIATE_DATA_LEN],
        }
        .to_ulpdu()
        .unwrap();
        // Shorter: too short; longer: malformed; both are stream-fatal (RDMAP/2/0x07).
        let e = Segment::parse(&good[..25]).unwrap_err();
        assert!(matches!(e, Error::SegmentTooShort { .. }), "{e:?}");
        assert_eq!(e.terminate_cause().unwrap().to_wire(), (0, 2, 0x07));
        let mut long = good.clone();
        long.push(0);
        assert!(matches!(
            Segment::parse(&long),
            Err(Error::MalformedMessage {
                opcode: Opcode::ImmediateData,
                ..
            })
        ));
        let mut not_last = good.clone();
        not_last[0] = 0x01;
        assert!(matches!(
            Segment::parse(&not_last),
            Err(Error::MalformedMessage { .. })
        ));
        let mut mo = good.clone();
        mo[17] = 8;
        assert!(matches!(Segment::parse(&mo), Err(Error::InvalidMo { .. })));
        let mut qn = good.clone();
        qn[9] = 1;
        let e = Segment::parse(&qn).unwrap_err();
        assert_eq!(
            e,
            Error::InvalidQn {
                qn: 1,
                opcode: Some(Opcode::ImmediateData)
            }
        );
        let mut tagged = good.clone();
        tagged[0] = 0xC1;
        assert!(matches!(
            Segment::parse(&tagged),
            Err(Error::UnexpectedOpcode {
                opcode: 8,
                tagged: true
            })
        ));
    }

    #[test]
    fn opcode_with_wrong_t_flag_is_unexpected() {
        let mut b = Segment::write_rtr().to_ulpdu().unwrap();
        b[1] = 0x43; // Send opcode in a tagged segment
        assert!(matches!(
            Segment::parse(&b),
            Err(Error::UnexpectedOpcode {
                opcode: 3,
                tagged: true
            })
        ));
    }

    #[test]
    fn bad_rdmap_version_maps_to_rdmap_2_05() {
        let mut b = Segment::send_rtr(1).to_ulpdu().unwrap();
        b[1] = 0x83; // RV = 2
        let e = Segment::parse(&b).unwrap_err();
        assert_eq!(e, Error::RdmapVersion { version: 2 });
        assert_eq!(e.terminate_cause().unwrap().to_wire(), (0, 2, 0x05));
    }

    #[test]
    fn ddp_version_is_checked_before_rdmap_version() {
        let mut b = Segment::write_rtr().to_ulpdu().unwrap();
        b[0] = 0xC2; // DV = 2
        b[1] = 0x80; // RV = 2 as well
        let e = Segment::parse(&b).unwrap_err();
        assert_eq!(e.terminate_cause().unwrap().to_wire(), (1, 1, 0x04));
        let mut b = Segment::send_rtr(1).to_ulpdu().unwrap();
        b[0] = 0x40; // DV = 0, untagged
        assert_eq!(
            Segment::parse(&b)
                .unwrap_err()
                .terminate_cause()
                .unwrap()
                .to_wire(),
            (1, 2, 0x06)
        );
    }

    #[test]
    fn send_on_wrong_queue_is_invalid_qn() {
        let mut b = Segment::send_rtr(1).to_ulpdu().unwrap();
        b[9] = 5; // QN 5
        let e = Segment::parse(&b).unwrap_err();
        assert_eq!(
            e,
            Error::InvalidQn {
                qn: 5,
                opcode: Some(Opcode::Send)
            }
        );
        assert_eq!(
            e.terminate_cause(),
            Some(TerminateCause::DdpUntagged(DdpUntaggedErrorCode::InvalidQn))
        );
        // A Read Request on QN 0 is just as wrong.
        let mut b = Segment::read_rtr(1).to_ulpdu().unwrap();
        b[9] = 0;
        assert!(matches!(
            Segment::parse(&b),
            Err(Error::InvalidQn { qn: 0, .. })
        ));
    }

    #[test]
    fn read_request_must_be_one_segment_without_payload() {
        let good = Segment::read_rtr(1).to_ulpdu().unwrap();
        let mut not_last = good.clone();
        not_last[0] = 0x01;
        assert!(matches!(
            Segment::parse(&not_last),
            Err(Error::MalformedMessage { .. })
        ));
        let mut with_payload = good.clone();
        with_payload.push(0);
        assert!(matches!(
            Segment::parse(&with_payload),
            Err(Error::MalformedMessage { .. })
        ));
        let mut mo = good.clone();
        mo[17] = 4;
        assert!(matches!(Segment::parse(&mo), Err(Error::InvalidMo { .. })));
        assert!(matches!(
            Segment::parse(&good[..40]),
            Err(Error::SegmentTooShort { .. })
        ));
    }

    #[test]
    fn short_ulpdus_are_refused_without_panicking() {
        for len in 0..18 {
            let b = Segment::send_rtr(1).to_ulpdu().unwrap();
            assert!(Segment::parse(&b[..len]).is_err());
        }
    }
}
