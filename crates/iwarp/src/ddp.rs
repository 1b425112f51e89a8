//! DDP segment headers (RFC 5041).
//!
//! Owns: the repr, parse and emit of the tagged (14-byte) and untagged (18-byte) DDP
//! headers, the DDP control byte (T, L, reserved, DV) and the untagged queue numbers.
//! RFC 5041 §4.1 "DDP Control Field", §4.2 "DDP Tagged Buffer Model Header",
//! §4.3 "DDP Untagged Buffer Model Header".
//!
//! Must not: interpret byte 1 (RsvdULP\[0:7\], the RDMAP control byte) or the RsvdULP
//! word; that is [`crate::rdmap`]'s job. Must not check MSN/MO sequencing; that is
//! [`crate::segment::UntaggedReassembly`]'s job.
//!
//! ```text
//! Tagged, 14 bytes                     Untagged, 18 bytes
//!  0 ctrl  1 RsvdULP[0:7]              0 ctrl  1 RsvdULP[0:7]
//!  2 STag (32)                         2 RsvdULP[8:39] (32)
//!  6 TO (64)                           6 QN (32)  10 MSN (32)  14 MO (32)
//! ```
//! Reserved control bits (0x3C) are sent as 0 and not checked on receive.

use crate::error::Error;

/// DDP protocol version carried in DV.
pub const DDP_VERSION: u8 = 1;
/// Tagged header length (control + RsvdULP\[0:7\] + STag + TO).
pub const TAGGED_HEADER_LEN: usize = 14;
/// Untagged header length (control + RsvdULP\[0:39\] + QN + MSN + MO).
pub const UNTAGGED_HEADER_LEN: usize = 18;
/// T: the segment uses the tagged buffer model.
pub const FLAG_TAGGED: u8 = 0x80;
/// L: last segment of a DDP message.
pub const FLAG_LAST: u8 = 0x40;
/// Reserved bits of the control byte.
pub const RESERVED_MASK: u8 = 0x3C;
/// DV bits of the control byte.
pub const VERSION_MASK: u8 = 0x03;

/// Header length announced by a DDP control byte (by its T bit).
pub const fn header_len_for_control(ctrl: u8) -> usize {
    if ctrl & FLAG_TAGGED != 0 {
        TAGGED_HEADER_LEN
    } else {
        UNTAGGED_HEADER_LEN
    }
}

/// Check the DV field of a control byte. A bad version maps to DDP tagged 0x04 or
/// untagged 0x06 by the T bit, as siw does.
pub fn check_version(ctrl: u8) -> Result<(), Error> {
    let version = ctrl & VERSION_MASK;
    if version == DDP_VERSION {
        Ok(())
    } else {
        Err(Error::DdpVersion {
            tagged: ctrl & FLAG_TAGGED != 0,
            version,
        })
    }
}

const fn control_byte(tagged: bool, last: bool) -> u8 {
    (if tagged { FLAG_TAGGED } else { 0 }) | (if last { FLAG_LAST } else { 0 }) | DDP_VERSION
}

/// Untagged queues used by RDMAP (RFC 5040: Send, Read Request and Terminate queues).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Queue {
    /// QN 0: Send variants and RFC 7306 Immediate Data, consuming posted receive buffers.
    Send = 0,
    /// QN 1: RDMA Read Requests.
    ReadRequest = 1,
    /// QN 2: Terminate.
    Terminate = 2,
}

impl Queue {
    /// All queues, indexed by QN.
    pub const ALL: [Queue; 3] = [Queue::Send, Queue::ReadRequest, Queue::Terminate];

    /// The queue for a wire QN, if RDMAP defines it.
    pub const fn from_qn(qn: u32) -> Option<Queue> {
        match qn {
            0 => Some(Queue::Send),
            1 => Some(Queue::ReadRequest),
            2 => Some(Queue::Terminate),
            _ => None,
        }
    }

    /// The wire QN.
    pub const fn qn(self) -> u32 {
        self as u32
    }
}

/// Tagged buffer model header (T=1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TaggedHeader {
    /// L: last segment of the message.
    pub last: bool,
    /// RsvdULP\[0:7\]: the RDMAP control byte.
    pub ulp_control: u8,
    /// Data sink STag.
    pub stag: u32,
    /// Tagged offset of the first payload byte.
    pub to: u64,
}

impl TaggedHeader {
    /// Parse from the start of `buf` (DV already valid or not: checked here).
    pub fn parse(buf: &[u8]) -> Result<Self, Error> {
        let h = buf.get(..TAGGED_HEADER_LEN).ok_or(Error::SegmentTooShort {
            what: "DDP tagged header",
            needed: TAGGED_HEADER_LEN,
            available: buf.len(),
        })?;
        check_version(h[0])?;
        if h[0] & FLAG_TAGGED == 0 {
            return Err(Error::InvalidArgument {
                operation: "parse DDP tagged header",
                reason: "T flag is clear",
            });
        }
        Ok(TaggedHeader {
            last: h[0] & FLAG_LAST != 0,
            ulp_control: h[1],
            stag: be32(&h[2..6]),
            to: be64(&h[6..14]),
        })
    }

    /// Write the 14 header bytes to the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let h = out(buf, TAGGED_HEADER_LEN, "DDP tagged header")?;
        h[0] = control_byte(true, self.last);
        h[1] = self.ulp_control;
        h[2..6].copy_from_slice(&self.stag.to_be_bytes());
        h[6..14].copy_from_slice(&self.to.to_be_bytes());
        Ok(TAGGED_HEADER_LEN)
    }
}

/// Untagged buffer model header (T=0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UntaggedHeader {
    /// L: last segment of the message.
    pub last: bool,
    /// RsvdULP\[0:7\]: the RDMAP control byte.
    pub ulp_control: u8,
    /// RsvdULP\[8:39\]: 0, or the STag to invalidate for Send with Invalidate.
    pub ulp_word: u32,
    /// Queue number.
    pub qn: u32,
    /// Message sequence number (per queue and direction, starts at 1).
    pub msn: u32,
    /// Message offset of the first payload byte.
    pub mo: u32,
}

impl UntaggedHeader {
    /// Parse from the start of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, Error> {
        let h = buf
            .get(..UNTAGGED_HEADER_LEN)
            .ok_or(Error::SegmentTooShort {
                what: "DDP untagged header",
                needed: UNTAGGED_HEADER_LEN,
                available: buf.len(),
            })?;
        check_version(h[0])?;
        if h[0] & FLAG_TAGGED != 0 {
            return Err(Error::InvalidArgument {
                operation: "parse DDP untagged header",
                reason: "T flag is set",
            });
        }
        Ok(UntaggedHeader {
            last: h[0] & FLAG_LAST != 0,
            ulp_control: h[1],
            ulp_word: be32(&h[2..6]),
            qn: be32(&h[6..10]),
            msn: be32(&h[10..14]),
            mo: be32(&h[14..18]),
        })
    }

    /// Write the 18 header bytes to the start of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let h = out(buf, UNTAGGED_HEADER_LEN, "DDP untagged header")?;
        h[0] = control_byte(false, self.last);
        h[1] = self.ulp_control;
        h[2..6].copy_from_slice(&self.ulp_word.to_be_bytes());
        h[6..10].copy_from_slice(&self.qn.to_be_bytes());
        h[10..14].copy_from_slice(&self.msn.to_be_bytes());
        h[14..18].copy_from_slice(&self.mo.to_be_bytes());
        Ok(UNTAGGED_HEADER_LEN)
    }
}

/// Either DDP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DdpHeader {
    /// T=1.
    Tagged(TaggedHeader),
    /// T=0.
    Untagged(UntaggedHeader),
}

impl DdpHeader {
    /// Parse the header at the start of a ULPDU; returns it and the bytes after it.
    pub fn parse(ulpdu: &[u8]) -> Result<(Self, &[u8]), Error> {
        let ctrl = *ulpdu.first().ok_or(Error::SegmentTooShort {
            what: "DDP control byte",
            needed: 1,
            available: 0,
        })?;
        if ctrl & FLAG_TAGGED != 0 {
            let h = TaggedHeader::parse(ulpdu)?;
            Ok((DdpHeader::Tagged(h), &ulpdu[TAGGED_HEADER_LEN..]))
        } else {
            let h = UntaggedHeader::parse(ulpdu)?;
            Ok((DdpHeader::Untagged(h), &ulpdu[UNTAGGED_HEADER_LEN..]))
        }
    }

    /// Write the header; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        match self {
            DdpHeader::Tagged(h) => h.emit(buf),
            DdpHeader::Untagged(h) => h.emit(buf),
        }
    }

    /// Header length on the wire.
    pub const fn len(&self) -> usize {
        match self {
            DdpHeader::Tagged(_) => TAGGED_HEADER_LEN,
            DdpHeader::Untagged(_) => UNTAGGED_HEADER_LEN,
        }
    }

    /// Never empty; provided for API symmetry with `len`.
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// The L flag.
    pub const fn last(&self) -> bool {
        match self {
            DdpHeader::Tagged(h) => h.last,
            DdpHeader::Untagged(h) => h.last,
        }
    }

    /// RsvdULP\[0:7\] (the RDMAP control byte).
    pub const fn ulp_control(&self) -> u8 {
        match self {
            DdpHeader::Tagged(h) => h.ulp_control,
            DdpHeader::Untagged(h) => h.ulp_control,
        }
    }
}

fn out<'b>(buf: &'b mut [u8], len: usize, what: &'static str) -> Result<&'b mut [u8], Error> {
    let available = buf.len();
    buf.get_mut(..len).ok_or(Error::BufferTooSmall {
        what,
        needed: len,
        available,
    })
}

pub(crate) fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

pub(crate) fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_header_round_trips_with_dv_1() {
        let h = TaggedHeader {
            last: true,
            ulp_control: 0x40,
            stag: 0xabcd_0001,
            to: 0x1000,
        };
        let mut b = [0u8; TAGGED_HEADER_LEN];
        h.emit(&mut b).unwrap();
        assert_eq!(
            b,
            [0xc1, 0x40, 0xab, 0xcd, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0x10, 0x00]
        );
        assert_eq!(TaggedHeader::parse(&b).unwrap(), h);
        let (any, rest) = DdpHeader::parse(&b).unwrap();
        assert_eq!(any, DdpHeader::Tagged(h));
        assert!(rest.is_empty());
    }

    #[test]
    fn untagged_header_round_trips_and_non_last_clears_l() {
        let h = UntaggedHeader {
            last: false,
            ulp_control: 0x43,
            ulp_word: 0,
            qn: 0,
            msn: 1,
            mo: 4096,
        };
        let mut b = [0u8; UNTAGGED_HEADER_LEN];
        h.emit(&mut b).unwrap();
        assert_eq!(b[0], 0x01);
        assert_eq!(UntaggedHeader::parse(&b).unwrap(), h);
    }

    #[test]
    fn ddp_reserved_control_bits_are_ignored_on_receive() {
        let mut b = [0u8; TAGGED_HEADER_LEN];
        b[0] = 0xc1 | RESERVED_MASK;
        b[1] = 0x40;
        let h = TaggedHeader::parse(&b).unwrap();
        assert!(h.last);
        let mut again = [0u8; TAGGED_HEADER_LEN];
        h.emit(&mut again).unwrap();
        assert_eq!(again[0], 0xc1, "reserved bits are sent as 0");
    }

    #[test]
    fn bad_ddp_version_maps_to_tagged_04_or_untagged_06() {
        use crate::terminate::{DdpTaggedErrorCode, DdpUntaggedErrorCode, TerminateCause};
        let e = check_version(0xc2).unwrap_err();
        assert_eq!(
            e.terminate_cause(),
            Some(TerminateCause::DdpTagged(
                DdpTaggedErrorCode::InvalidVersion
            ))
        );
        let e = check_version(0x40).unwrap_err();
        assert_eq!(
            e.terminate_cause(),
            Some(TerminateCause::DdpUntagged(
                DdpUntaggedErrorCode::InvalidVersion
            ))
        );
    }

    #[test]
    fn short_headers_are_refused() {
        assert!(matches!(
            DdpHeader::parse(&[0xc1, 0x40, 0, 0]),
            Err(Error::SegmentTooShort { needed: 14, .. })
        ));
        assert!(matches!(
            DdpHeader::parse(&[0x41; 17]),
            Err(Error::SegmentTooShort { needed: 18, .. })
        ));
        let mut small = [0u8; 10];
        assert!(matches!(
            TaggedHeader {
                last: true,
                ulp_control: 0x40,
                stag: 1,
                to: 0
            }
            .emit(&mut small),
            Err(Error::BufferTooSmall { .. })
        ));
    }
}
