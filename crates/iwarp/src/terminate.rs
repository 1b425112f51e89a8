//! Terminate causes and the RDMAP Terminate message body.
//!
//! Owns: the (Layer, EType, Error Code) triple that every protocol error maps to
//! ([`TerminateCause`], RFC 5040 §4.8 "Terminate Header", RFC 5041 §7 error numbers,
//! RFC 5044 / RFC 6581 MPA error codes), and the repr of the Terminate message body
//! that follows the untagged DDP header of opcode 7 ([`TerminateMessage`]).
//!
//! Must not: decide *when* to terminate, hold connection state, or send anything. A
//! caller turns an [`Error`] into a cause with
//! [`Error::terminate_cause`](crate::Error::terminate_cause), builds the body with
//! [`TerminateMessage::for_failed_segment`] and frames it like any other segment.
//!
//! Wire layout of the body (all big-endian):
//!
//! ```text
//! | Layer:4 | EType:4 | Error Code:8 | M | D | R | Reserved:13 |   Terminate Control
//! [ DDP Segment Length:16 | terminated DDP header (14 or 18) ]   present iff D=1
//! [ terminated RDMAP header (28, the Read Request header) ]       present iff R=1
//! ```
//!
//! `M` says the DDP Segment Length field is valid. Like Wireshark, the length field
//! is taken as present whenever `D=1`; we always send `M` and `D` together, as siw does.
//!
//! Linux siw declares the Terminate Control word as C bit-fields (`struct iwarp_terminate`
//! in `drivers/infiniband/sw/siw/iwarp.h`). On a little-endian host they are laid out low
//! bit first, so siw on x86 sends `EType << 4 | Layer` in byte 0 and M/D/R as
//! `0x01`/`0x02`/`0x04` of byte 2, bits that RFC 5040 reserves. [`TerminateMessage::parse`]
//! recognises that layout by those reserved bits (seen from siw, kernel 6.1: a DDP
//! tagged base-or-bounds Terminate `11 01 03 00 ...`). We always emit the RFC layout;
//! siw only logs what it reads from a Terminate before closing, so it does not mind.
//! A Terminate without any flag cannot be told apart; it is read in the RFC layout.

use crate::ddp;
use crate::error::Error;
use crate::rdmap::READ_REQUEST_HEADER_LEN;

/// Length of the Terminate Control word.
pub const TERMINATE_CONTROL_LEN: usize = 4;
/// Length of the DDP Segment Length field that precedes a copied DDP header.
pub const DDP_SEGMENT_LENGTH_LEN: usize = 2;
/// Largest Terminate body: control + length + untagged header + Read Request header.
pub const MAX_TERMINATE_BODY_LEN: usize = TERMINATE_CONTROL_LEN
    + DDP_SEGMENT_LENGTH_LEN
    + ddp::UNTAGGED_HEADER_LEN
    + READ_REQUEST_HEADER_LEN;

const HDRCT_M: u8 = 0x80;
const HDRCT_D: u8 = 0x40;
const HDRCT_R: u8 = 0x20;
/// siw on a little-endian host: M, D and R are bits 0, 1 and 2 of byte 2 (see module docs).
const SIW_LE_HDRCT_M: u8 = 0x01;
const SIW_LE_HDRCT_D: u8 = 0x02;
const SIW_LE_HDRCT_R: u8 = 0x04;

/// Decode the Terminate Control word into the cause and the M/D/R bits (RFC positions),
/// accepting siw's little-endian bit-field layout (module docs).
fn decode_control(ctl: &[u8]) -> (TerminateCause, u8) {
    let rfc_flags = ctl[2] & (HDRCT_M | HDRCT_D | HDRCT_R);
    let siw_flags = ctl[2] & (SIW_LE_HDRCT_M | SIW_LE_HDRCT_D | SIW_LE_HDRCT_R);
    if rfc_flags == 0 && siw_flags != 0 {
        let mut hdrct = 0;
        for (siw, rfc) in [
            (SIW_LE_HDRCT_M, HDRCT_M),
            (SIW_LE_HDRCT_D, HDRCT_D),
            (SIW_LE_HDRCT_R, HDRCT_R),
        ] {
            if siw_flags & siw != 0 {
                hdrct |= rfc;
            }
        }
        let cause = TerminateCause::from_wire(ctl[0] & 0x0F, ctl[0] >> 4, ctl[1]);
        (cause, hdrct)
    } else {
        let cause = TerminateCause::from_wire(ctl[0] >> 4, ctl[0] & 0x0F, ctl[1]);
        (cause, rfc_flags)
    }
}

/// The protocol layer that detected an error (Terminate Control "Layer").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Layer {
    /// RDMAP (RFC 5040).
    Rdmap = 0,
    /// DDP (RFC 5041).
    Ddp = 1,
    /// The lower layer protocol: MPA over TCP (RFC 5044).
    Llp = 2,
}

/// RDMAP error types (EType for Layer 0), RFC 5040 §4.8.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RdmapErrorType {
    /// Local catastrophic error.
    LocalCatastrophic = 0,
    /// Remote protection error (bad STag, bounds, access rights).
    RemoteProtection = 1,
    /// Remote operation error (version, opcode, stream state).
    RemoteOperation = 2,
}

/// RDMAP error codes, RFC 5040 §4.8.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RdmapErrorCode {
    /// 0x00 Invalid STag.
    InvalidStag = 0x00,
    /// 0x01 Base or bounds violation.
    BaseOrBounds = 0x01,
    /// 0x02 Access rights violation.
    AccessRights = 0x02,
    /// 0x03 STag not associated with RDMAP Stream.
    StagNotAssociated = 0x03,
    /// 0x04 TO wrap.
    ToWrap = 0x04,
    /// 0x05 Invalid RDMAP version.
    InvalidVersion = 0x05,
    /// 0x06 Unexpected OpCode.
    UnexpectedOpcode = 0x06,
    /// 0x07 Catastrophic error, localized to RDMAP Stream.
    CatastrophicStream = 0x07,
    /// 0x08 Catastrophic error, global.
    CatastrophicGlobal = 0x08,
    /// 0x09 STag cannot be invalidated.
    StagCannotBeInvalidated = 0x09,
    /// 0xFF Unspecified error.
    Unspecified = 0xFF,
}

/// DDP tagged buffer error codes (Layer 1, EType 1), RFC 5041 §7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DdpTaggedErrorCode {
    /// 0x00 Invalid STag.
    InvalidStag = 0x00,
    /// 0x01 Base or bounds violation.
    BaseOrBounds = 0x01,
    /// 0x02 STag not associated with DDP Stream.
    StagNotAssociated = 0x02,
    /// 0x03 TO wrap.
    ToWrap = 0x03,
    /// 0x04 Invalid DDP version.
    InvalidVersion = 0x04,
}

/// DDP untagged buffer error codes (Layer 1, EType 2), RFC 5041 §7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DdpUntaggedErrorCode {
    /// 0x01 Invalid QN.
    InvalidQn = 0x01,
    /// 0x02 Invalid MSN - no buffer available.
    NoBuffer = 0x02,
    /// 0x03 Invalid MSN - MSN range is not valid.
    MsnRange = 0x03,
    /// 0x04 Invalid MO.
    InvalidMo = 0x04,
    /// 0x05 DDP Message too long for available buffer.
    MessageTooLong = 0x05,
    /// 0x06 Invalid DDP version.
    InvalidVersion = 0x06,
}

/// MPA (LLP, EType 0) error codes, RFC 5044 "Error Semantics" plus RFC 6581 0x05-0x07.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum LlpErrorCode {
    /// 0x01 TCP connection closed, terminated or lost.
    ConnectionLost = 0x01,
    /// 0x02 MPA CRC error.
    CrcError = 0x02,
    /// 0x03 MPA Marker and ULPDU Length field mismatch.
    MarkerMismatch = 0x03,
    /// 0x04 Invalid MPA Request or Reply frame.
    InvalidMpaFrame = 0x04,
    /// 0x05 Local catastrophic error (RFC 6581).
    LocalCatastrophic = 0x05,
    /// 0x06 Insufficient IRD resources (RFC 6581).
    InsufficientIrd = 0x06,
    /// 0x07 No matching RTR option (RFC 6581).
    NoMatchingRtr = 0x07,
}

/// What a receiver reports in a Terminate: the layer, error type and error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TerminateCause {
    /// Layer 0 (RDMAP) with the given EType and code.
    Rdmap {
        /// EType.
        etype: RdmapErrorType,
        /// Error code.
        code: RdmapErrorCode,
    },
    /// Layer 1, EType 0, code 0: DDP local catastrophic error.
    DdpLocalCatastrophic,
    /// Layer 1, EType 1: tagged buffer error.
    DdpTagged(DdpTaggedErrorCode),
    /// Layer 1, EType 2: untagged buffer error.
    DdpUntagged(DdpUntaggedErrorCode),
    /// Layer 2, EType 0: MPA error.
    Llp(LlpErrorCode),
    /// A combination this crate does not name (only produced by parsing a peer's Terminate).
    Unknown {
        /// Raw layer nibble.
        layer: u8,
        /// Raw EType nibble.
        etype: u8,
        /// Raw error code.
        code: u8,
    },
}

impl TerminateCause {
    /// RDMAP remote operation error (EType 2) with `code`.
    pub const fn rdmap_operation(code: RdmapErrorCode) -> Self {
        TerminateCause::Rdmap {
            etype: RdmapErrorType::RemoteOperation,
            code,
        }
    }

    /// RDMAP remote protection error (EType 1) with `code`.
    pub const fn rdmap_protection(code: RdmapErrorCode) -> Self {
        TerminateCause::Rdmap {
            etype: RdmapErrorType::RemoteProtection,
            code,
        }
    }

    /// RDMAP local catastrophic error with the "unspecified" code, as siw reports local failures.
    pub const fn rdmap_local_catastrophic() -> Self {
        TerminateCause::Rdmap {
            etype: RdmapErrorType::LocalCatastrophic,
            code: RdmapErrorCode::Unspecified,
        }
    }

    /// The layer, if it is one of the three defined ones.
    pub fn layer(&self) -> Option<Layer> {
        match self.to_wire().0 {
            0 => Some(Layer::Rdmap),
            1 => Some(Layer::Ddp),
            2 => Some(Layer::Llp),
            _ => None,
        }
    }

    /// `(layer, etype, code)` as they go on the wire (layer and etype are 4-bit).
    pub fn to_wire(&self) -> (u8, u8, u8) {
        match *self {
            TerminateCause::Rdmap { etype, code } => (0, etype as u8, code as u8),
            TerminateCause::DdpLocalCatastrophic => (1, 0, 0),
            TerminateCause::DdpTagged(code) => (1, 1, code as u8),
            TerminateCause::DdpUntagged(code) => (1, 2, code as u8),
            TerminateCause::Llp(code) => (2, 0, code as u8),
            TerminateCause::Unknown { layer, etype, code } => (layer & 0x0F, etype & 0x0F, code),
        }
    }

    /// Decode a wire triple. Total: combinations without a name become [`TerminateCause::Unknown`].
    pub fn from_wire(layer: u8, etype: u8, code: u8) -> Self {
        let layer = layer & 0x0F;
        let etype = etype & 0x0F;
        let unknown = TerminateCause::Unknown { layer, etype, code };
        match (layer, etype) {
            (0, e) => {
                let etype = match e {
                    0 => RdmapErrorType::LocalCatastrophic,
                    1 => RdmapErrorType::RemoteProtection,
                    2 => RdmapErrorType::RemoteOperation,
                    _ => return unknown,
                };
                let code = match code {
                    0x00 => RdmapErrorCode::InvalidStag,
                    0x01 => RdmapErrorCode::BaseOrBounds,
                    0x02 => RdmapErrorCode::AccessRights,
                    0x03 => RdmapErrorCode::StagNotAssociated,
                    0x04 => RdmapErrorCode::ToWrap,
                    0x05 => RdmapErrorCode::InvalidVersion,
                    0x06 => RdmapErrorCode::UnexpectedOpcode,
                    0x07 => RdmapErrorCode::CatastrophicStream,
                    0x08 => RdmapErrorCode::CatastrophicGlobal,
                    0x09 => RdmapErrorCode::StagCannotBeInvalidated,
                    0xFF => RdmapErrorCode::Unspecified,
                    _ => return unknown,
                };
                TerminateCause::Rdmap { etype, code }
            }
            (1, 0) if code == 0 => TerminateCause::DdpLocalCatastrophic,
            (1, 1) => match code {
                0x00 => TerminateCause::DdpTagged(DdpTaggedErrorCode::InvalidStag),
                0x01 => TerminateCause::DdpTagged(DdpTaggedErrorCode::BaseOrBounds),
                0x02 => TerminateCause::DdpTagged(DdpTaggedErrorCode::StagNotAssociated),
                0x03 => TerminateCause::DdpTagged(DdpTaggedErrorCode::ToWrap),
                0x04 => TerminateCause::DdpTagged(DdpTaggedErrorCode::InvalidVersion),
                _ => unknown,
            },
            (1, 2) => match code {
                0x01 => TerminateCause::DdpUntagged(DdpUntaggedErrorCode::InvalidQn),
                0x02 => TerminateCause::DdpUntagged(DdpUntaggedErrorCode::NoBuffer),
                0x03 => TerminateCause::DdpUntagged(DdpUntaggedErrorCode::MsnRange),
                0x04 => TerminateCause::DdpUntagged(DdpUntaggedErrorCode::InvalidMo),
                0x05 => TerminateCause::DdpUntagged(DdpUntaggedErrorCode::MessageTooLong),
                0x06 => TerminateCause::DdpUntagged(DdpUntaggedErrorCode::InvalidVersion),
                _ => unknown,
            },
            (2, 0) => match code {
                0x01 => TerminateCause::Llp(LlpErrorCode::ConnectionLost),
                0x02 => TerminateCause::Llp(LlpErrorCode::CrcError),
                0x03 => TerminateCause::Llp(LlpErrorCode::MarkerMismatch),
                0x04 => TerminateCause::Llp(LlpErrorCode::InvalidMpaFrame),
                0x05 => TerminateCause::Llp(LlpErrorCode::LocalCatastrophic),
                0x06 => TerminateCause::Llp(LlpErrorCode::InsufficientIrd),
                0x07 => TerminateCause::Llp(LlpErrorCode::NoMatchingRtr),
                _ => unknown,
            },
            _ => unknown,
        }
    }
}

impl core::fmt::Display for TerminateCause {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (layer, etype, code) = self.to_wire();
        let layer_name = match layer {
            0 => "RDMAP",
            1 => "DDP",
            2 => "LLP",
            _ => "layer?",
        };
        write!(f, "{layer_name}/{etype}/{code:#04x}")
    }
}

/// The copied header of the segment that failed (present when `D=1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TerminatedDdp<'a> {
    /// DDP Segment Length of the failed segment; `Some` sets `M` (field valid).
    pub segment_length: Option<u16>,
    /// The failed segment's DDP header bytes: 14 (tagged) or 18 (untagged), by its T bit.
    pub header: &'a [u8],
}

/// The body of an RDMAP Terminate message (after the untagged DDP header with QN 2).
///
/// RFC 5040 §4.8 "Terminate Header".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TerminateMessage<'a> {
    /// Which layer failed and why.
    pub cause: TerminateCause,
    /// `D=1`: the DDP Segment Length field and the failed segment's DDP header.
    pub ddp: Option<TerminatedDdp<'a>>,
    /// `R=1`: the failed message's 28-byte RDMAP header (the Read Request header).
    pub rdmap_header: Option<&'a [u8]>,
}

impl<'a> TerminateMessage<'a> {
    /// A Terminate that carries no copied headers (what Chelsio sends for RTR mismatch).
    pub const fn header_less(cause: TerminateCause) -> Self {
        TerminateMessage {
            cause,
            ddp: None,
            rdmap_header: None,
        }
    }

    /// Build the Terminate a receiver sends for `failed_ulpdu` (the ULPDU that caused
    /// `cause`), including what siw includes: `M` and `D` with the segment length and
    /// the copied DDP header when the ULPDU holds a whole header, and `R` with the
    /// 28-byte Read Request header when the failed segment is a Read Request.
    ///
    /// The DDP Segment Length written is the ULPDU length (the whole DDP segment);
    /// siw writes the payload length instead. Receivers treat the field as informational.
    pub fn for_failed_segment(cause: TerminateCause, failed_ulpdu: &'a [u8]) -> Self {
        let Some(&ctrl) = failed_ulpdu.first() else {
            return Self::header_less(cause);
        };
        let hdr_len = ddp::header_len_for_control(ctrl);
        if failed_ulpdu.len() < hdr_len {
            return Self::header_less(cause);
        }
        let segment_length = u16::try_from(failed_ulpdu.len()).ok();
        let is_read_request = ctrl & ddp::FLAG_TAGGED == 0
            && failed_ulpdu.get(1).map(|b| b & 0x0F)
                == Some(crate::rdmap::Opcode::ReadRequest as u8);
        let rr_end = hdr_len + READ_REQUEST_HEADER_LEN;
        let rdmap_header = if is_read_request && failed_ulpdu.len() >= rr_end {
            Some(&failed_ulpdu[hdr_len..rr_end])
        } else {
            None
        };
        TerminateMessage {
            cause,
            ddp: Some(TerminatedDdp {
                segment_length,
                header: &failed_ulpdu[..hdr_len],
            }),
            rdmap_header,
        }
    }

    /// Number of bytes [`emit`](Self::emit) writes.
    pub fn wire_len(&self) -> usize {
        TERMINATE_CONTROL_LEN
            + self
                .ddp
                .map_or(0, |d| DDP_SEGMENT_LENGTH_LEN + d.header.len())
            + self.rdmap_header.map_or(0, <[u8]>::len)
    }

    /// Parse a Terminate body. Trailing bytes after the announced parts are an error.
    ///
    /// Accepts siw's little-endian bit-field layout of the control word (module docs),
    /// and `R=1` without the 28-byte RDMAP header when the copied DDP header is not a
    /// Read Request's: siw sets M, D and R for a Send with Invalidate whose STag it may
    /// not invalidate (RDMAP remote protection) but copies only the untagged DDP header.
    pub fn parse(body: &'a [u8]) -> Result<Self, Error> {
        let ctl = body
            .get(..TERMINATE_CONTROL_LEN)
            .ok_or(Error::SegmentTooShort {
                what: "Terminate control",
                needed: TERMINATE_CONTROL_LEN,
                available: body.len(),
            })?;
        let (cause, hdrct) = decode_control(ctl);
        let mut rest = &body[TERMINATE_CONTROL_LEN..];
        let ddp = if hdrct & HDRCT_D != 0 {
            if rest.len() < DDP_SEGMENT_LENGTH_LEN + 1 {
                return Err(Error::SegmentTooShort {
                    what: "Terminate DDP segment length and header",
                    needed: DDP_SEGMENT_LENGTH_LEN + 1,
                    available: rest.len(),
                });
            }
            let len = u16::from_be_bytes([rest[0], rest[1]]);
            let hdr_len = ddp::header_len_for_control(rest[2]);
            let needed = DDP_SEGMENT_LENGTH_LEN + hdr_len;
            if rest.len() < needed {
                return Err(Error::SegmentTooShort {
                    what: "Terminate copied DDP header",
                    needed,
                    available: rest.len(),
                });
            }
            let header = &rest[DDP_SEGMENT_LENGTH_LEN..needed];
            rest = &rest[needed..];
            Some(TerminatedDdp {
                segment_length: (hdrct & HDRCT_M != 0).then_some(len),
                header,
            })
        } else {
            None
        };
        // A Read Request's header has T=0 and RDMAP opcode 1 in its second byte.
        let copied_read_request = ddp.is_some_and(|d| {
            d.header[0] & ddp::FLAG_TAGGED == 0
                && d.header[1] & 0x0F == crate::rdmap::Opcode::ReadRequest as u8
        });
        let r_without_header = rest.is_empty() && ddp.is_some() && !copied_read_request;
        let rdmap_header = if hdrct & HDRCT_R != 0 && !r_without_header {
            if rest.len() < READ_REQUEST_HEADER_LEN {
                return Err(Error::SegmentTooShort {
                    what: "Terminate copied RDMAP header",
                    needed: READ_REQUEST_HEADER_LEN,
                    available: rest.len(),
                });
            }
            let h = &rest[..READ_REQUEST_HEADER_LEN];
            rest = &rest[READ_REQUEST_HEADER_LEN..];
            Some(h)
        } else {
            None
        };
        if !rest.is_empty() {
            return Err(Error::MalformedMessage {
                opcode: crate::rdmap::Opcode::Terminate,
                reason: "bytes after the Terminate header parts",
            });
        }
        Ok(TerminateMessage {
            cause,
            ddp,
            rdmap_header,
        })
    }

    /// Write the body into `buf`; returns the bytes written. Reserved bits are sent as 0.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let len = self.wire_len();
        if buf.len() < len {
            return Err(Error::BufferTooSmall {
                what: "Terminate body",
                needed: len,
                available: buf.len(),
            });
        }
        let (layer, etype, code) = self.cause.to_wire();
        let mut hdrct = 0u8;
        if let Some(d) = &self.ddp {
            let expected = d.header.first().map(|&c| ddp::header_len_for_control(c));
            if expected != Some(d.header.len()) {
                return Err(Error::InvalidArgument {
                    operation: "emit Terminate",
                    reason: "copied DDP header must be 14 bytes (T=1) or 18 bytes (T=0)",
                });
            }
            hdrct |= HDRCT_D;
            if d.segment_length.is_some() {
                hdrct |= HDRCT_M;
            }
        }
        if let Some(r) = self.rdmap_header {
            if r.len() != READ_REQUEST_HEADER_LEN {
                return Err(Error::InvalidArgument {
                    operation: "emit Terminate",
                    reason: "copied RDMAP header must be 28 bytes",
                });
            }
            hdrct |= HDRCT_R;
        }
        buf[0] = (layer << 4) | etype;
        buf[1] = code;
        buf[2] = hdrct;
        buf[3] = 0;
        let mut at = TERMINATE_CONTROL_LEN;
        if let Some(d) = &self.ddp {
            let l = d.segment_length.unwrap_or(0).to_be_bytes();
            buf[at..at + 2].copy_from_slice(&l);
            at += 2;
            buf[at..at + d.header.len()].copy_from_slice(d.header);
            at += d.header.len();
        }
        if let Some(r) = self.rdmap_header {
            buf[at..at + r.len()].copy_from_slice(r);
            at += r.len();
        }
        debug_assert_eq!(at, len);
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminate_cause_wire_triples_round_trip() {
        for layer in 0..4u8 {
            for etype in 0..4u8 {
                for code in 0..=255u8 {
                    let c = TerminateCause::from_wire(layer, etype, code);
                    assert_eq!(c.to_wire(), (layer, etype, code));
                }
            }
        }
    }

    #[test]
    fn terminate_codes_match_rfc_tables() {
        assert_eq!(
            TerminateCause::rdmap_operation(RdmapErrorCode::UnexpectedOpcode).to_wire(),
            (0, 2, 0x06)
        );
        assert_eq!(
            TerminateCause::rdmap_operation(RdmapErrorCode::InvalidVersion).to_wire(),
            (0, 2, 0x05)
        );
        assert_eq!(
            TerminateCause::DdpUntagged(DdpUntaggedErrorCode::InvalidQn).to_wire(),
            (1, 2, 0x01)
        );
        assert_eq!(
            TerminateCause::DdpTagged(DdpTaggedErrorCode::InvalidVersion).to_wire(),
            (1, 1, 0x04)
        );
        assert_eq!(
            TerminateCause::Llp(LlpErrorCode::NoMatchingRtr).to_wire(),
            (2, 0, 0x07)
        );
        assert_eq!(
            TerminateCause::rdmap_local_catastrophic().to_wire(),
            (0, 0, 0xFF)
        );
        assert_eq!(
            TerminateCause::DdpLocalCatastrophic.layer(),
            Some(Layer::Ddp)
        );
    }

    #[test]
    fn terminate_body_with_headers_round_trips() {
        // A failed Read Request: 18-byte untagged header + 28-byte RR header.
        let mut rr = [0u8; 46];
        rr[0] = 0x41;
        rr[1] = 0x41;
        rr[9] = 1; // QN 1
        rr[13] = 1; // MSN 1
        rr[18..22].copy_from_slice(&0x1234u32.to_be_bytes());
        let cause = TerminateCause::rdmap_protection(RdmapErrorCode::InvalidStag);
        let t = TerminateMessage::for_failed_segment(cause, &rr);
        assert_eq!(t.wire_len(), 4 + 2 + 18 + 28);
        let mut buf = [0u8; MAX_TERMINATE_BODY_LEN];
        let n = t.emit(&mut buf).unwrap();
        assert_eq!(buf[0], 0x01); // layer 0, etype 1
        assert_eq!(buf[1], 0x00);
        assert_eq!(buf[2], 0xE0); // M, D, R
        assert_eq!(&buf[4..6], &46u16.to_be_bytes());
        assert_eq!(TerminateMessage::parse(&buf[..n]).unwrap(), t);
    }

    #[test]
    fn terminate_without_headers_is_four_bytes() {
        let t = TerminateMessage::header_less(TerminateCause::Llp(LlpErrorCode::NoMatchingRtr));
        let mut buf = [0u8; 4];
        assert_eq!(t.emit(&mut buf).unwrap(), 4);
        assert_eq!(buf, [0x20, 0x07, 0x00, 0x00]);
        assert_eq!(TerminateMessage::parse(&buf).unwrap(), t);
    }

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Seen from siw (kernel 6.1.192, x86_64): the ULPDU it sent when a Read Response
    /// segment of 1400 bytes ran past its 64-byte sink buffer. DDP tagged (layer 1,
    /// EType 1) code 0x01, with M and D as 0x01 | 0x02 in byte 2.
    #[test]
    fn terminate_control_siw_little_endian_bitfield_layout_parses() {
        let ulpdu = unhex(
            "414700000000000000020000000100000000\
             11010300\
             0578\
             8142c2265a0000007fb4bc001e60",
        );
        let seg = crate::rdmap::Segment::parse(&ulpdu).unwrap();
        let crate::rdmap::Segment::Terminate { msn, message } = seg else {
            panic!("not a Terminate: {seg:?}");
        };
        assert_eq!(msn, 1);
        assert_eq!(
            message.cause,
            TerminateCause::DdpTagged(DdpTaggedErrorCode::BaseOrBounds)
        );
        let d = message.ddp.unwrap();
        assert_eq!(d.segment_length, Some(1400));
        assert_eq!(d.header, &ulpdu[24..38]);
        assert_eq!(message.rdmap_header, None);

        // The nibbles are swapped too: siw's RDMAP (0) remote operation (2) error with
        // M|D is 0x20 in byte 0, which the RFC layout would read as LLP (2).
        let mut body = vec![0x20, 0x03, 0x03, 0x00, 0x00, 0x10];
        body.extend_from_slice(&ulpdu[..18]);
        body[7] = 0x43; // a Send's header
        let t = TerminateMessage::parse(&body).unwrap();
        assert_eq!(
            t.cause,
            TerminateCause::rdmap_operation(RdmapErrorCode::StagNotAssociated)
        );
        assert_eq!(t.ddp.unwrap().header, &body[6..24]);
        // Our own emit stays in the RFC layout.
        let mut buf = [0u8; MAX_TERMINATE_BODY_LEN];
        let n = t.emit(&mut buf).unwrap();
        assert_eq!(&buf[..4], &[0x02, 0x03, 0xC0, 0x00]);
        assert_eq!(TerminateMessage::parse(&buf[..n]).unwrap(), t);
    }

    /// siw_send_terminate() (siw_qp.c): for an RDMAP remote protection error on an
    /// inbound Send with Invalidate it sets M, D and R but copies only the 18-byte
    /// untagged DDP header (`sizeof(struct iwarp_send)` minus the MPA length field).
    #[test]
    fn terminate_r_flag_without_rdmap_header_after_a_send_parses() {
        let mut body = vec![0x10, 0x09, 0x07, 0x00, 0x00, 0x00];
        let send_inv = unhex("41440000abcd000000000000000100000000");
        body.extend_from_slice(&send_inv);
        let t = TerminateMessage::parse(&body).unwrap();
        assert_eq!(
            t.cause,
            TerminateCause::rdmap_protection(RdmapErrorCode::StagCannotBeInvalidated)
        );
        assert_eq!(t.ddp.unwrap().header, &send_inv[..]);
        assert_eq!(t.rdmap_header, None);

        // A copied Read Request header still needs its 28-byte RDMAP header.
        let mut body = vec![0x01, 0x00, 0xE0, 0x00, 0x00, 0x00];
        body.extend_from_slice(&unhex("414100000000000000010000000100000000"));
        assert!(matches!(
            TerminateMessage::parse(&body),
            Err(Error::SegmentTooShort { .. })
        ));
    }

    #[test]
    fn terminate_rejects_truncated_and_trailing_parts() {
        assert!(matches!(
            TerminateMessage::parse(&[0x10, 0x02, 0x40, 0x00, 0x00]),
            Err(Error::SegmentTooShort { .. })
        ));
        assert!(matches!(
            TerminateMessage::parse(&[0x10, 0x02, 0x00, 0x00, 0xAA]),
            Err(Error::MalformedMessage { .. })
        ));
    }
}
