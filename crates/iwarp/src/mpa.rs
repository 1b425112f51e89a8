//! MPA connection setup: Request/Reply frames and the negotiation for each role.
//!
//! Owns: the MPA Request and Reply frame repr ([`MpaFrame`], RFC 5044 §7.1.1 "MPA
//! Request and Reply Frame Format"), the RFC 6581 "enhanced RDMA connection
//! establishment" IRD/ORD block with the peer-to-peer and RTR bits ([`IrdOrd`],
//! RFC 6581), and one state machine per role ([`MpaInitiator`], [`MpaResponder`]).
//! They take bytes and return events and reply bytes; they decide CRC, IRD/ORD and the
//! RTR type. Rules implemented (iwarp-wire.md section 2 says which peer does what):
//!
//! - The Initiator sets C to ask for CRC; the Responder MUST then set C, and may set it
//!   because it requires CRC itself. CRC is used both ways iff the Reply's C=1
//!   (RFC 5044 §7.1.1, "C" bit).
//! - M (markers) is never sent; a Request with M is answered with a Reject (R=1) and a
//!   Reply with M fails the handshake, as siw does. [`MpaFrame::parse`] refuses M.
//! - Reserved flag bits are sent as 0 and ignored on receive: siw builds its Reply by
//!   copying the Request's flags, so anything we set would come back to us.
//! - PD_Length above 512 is refused on receive (RFC 5044); at most 252 ULP bytes are
//!   sent, so with the 4-byte IRD/ORD block nothing exceeds siw's 256.
//! - Exactly 20 + PD_Length bytes belong to a frame. Bytes behind the Reply are handed
//!   back to the caller as `leftover` for the FPDU decoder (a responder may send FPDUs
//!   right behind its Reply). Bytes behind a Request are an error: the Initiator MUST
//!   NOT send FPDUs before it has the Reply (RFC 5044 §7.1.2), and siw fails such a
//!   stream with -EPROTO.
//! - With A=1 (peer-to-peer), the Reply MUST also have A=1 and one RTR type; the
//!   Responder picks a zero-length Write if offered, else a zero-length Read, and never
//!   a zero-length Send (siw's choice). No usable RTR is LLP/0/0x07; an ORD the
//!   Initiator cannot serve is LLP/0/0x06 (RFC 6581; the A-bit rule is §9.2 as
//!   quoted in softiwarp issue #18).
//!
//! Must not: open sockets, run timers (siw allows 10 s for the Reply and 5 s for the
//! Request: the caller owns the clock), send FPDUs, or queue ULP traffic. After
//! `Accepted`/`accept` the caller switches to [`crate::fpdu`] with the negotiated CRC
//! setting, sends the RTR first when one was chosen ([`Rtr::segment`]), and, as
//! Responder, holds its FPDUs until the first inbound FPDU has arrived.

use crate::error::Error;
use crate::rdmap::Segment;

/// Key of an MPA Request frame.
pub const REQUEST_KEY: [u8; 16] = *b"MPA ID Req Frame";
/// Key of an MPA Reply frame.
pub const REPLY_KEY: [u8; 16] = *b"MPA ID Rep Frame";
/// Fixed part of a frame: key, flags, rev, PD_Length.
pub const HEADER_LEN: usize = 20;
/// M: the sender wants markers in the FPDUs it receives.
pub const FLAG_MARKERS: u8 = 0x80;
/// C: CRC wanted (Request) / CRC in use (Reply).
pub const FLAG_CRC: u8 = 0x40;
/// R: the connection is rejected (Reply only).
pub const FLAG_REJECT: u8 = 0x20;
/// RFC 6581 enhanced connection establishment: private data starts with [`IrdOrd`].
pub const FLAG_ENHANCED: u8 = 0x10;
/// Reserved flag bits: sent as 0, ignored on receive.
pub const FLAG_RESERVED: u8 = 0x0F;
/// Largest PD_Length accepted on receive (RFC 5044).
pub const MAX_PD_LEN: usize = 512;
/// Largest ULP private data this crate sends (256 minus the IRD/ORD block; siw's limit).
pub const MAX_ULP_PRIVATE_DATA_LEN: usize = 252;
/// Length of the RFC 6581 IRD/ORD block.
pub const IRD_ORD_LEN: usize = 4;
/// Largest IRD or ORD value (14 bits). irdma uses this value as "not given".
pub const IRD_ORD_MAX: u16 = 0x3FFF;

const A_PEER_TO_PEER: u16 = 0x8000;
const B_SEND_RTR: u16 = 0x4000;
const C_WRITE_RTR: u16 = 0x8000;
const D_READ_RTR: u16 = 0x4000;

/// Request or Reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// "MPA ID Req Frame", sent by the Initiator.
    Request,
    /// "MPA ID Rep Frame", sent by the Responder.
    Reply,
}

impl FrameKind {
    /// The 16-byte key.
    pub const fn key(self) -> &'static [u8; 16] {
        match self {
            FrameKind::Request => &REQUEST_KEY,
            FrameKind::Reply => &REPLY_KEY,
        }
    }
}

/// One zero-length "ready to receive" message type (RFC 6581 peer-to-peer mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rtr {
    /// B: zero-length Send (needs a pre-posted receive at the Responder; never chosen here).
    Send,
    /// C: zero-length RDMA Write.
    Write,
    /// D: zero-length RDMA Read Request (takes one IRD/ORD slot).
    Read,
}

impl Rtr {
    /// The RTR segment the Initiator sends as its first FPDU. `msn` is the MSN on the
    /// queue it uses (1 for a fresh connection); it is ignored for the Write RTR.
    pub const fn segment(self, msn: u32) -> Segment<'static> {
        match self {
            Rtr::Send => Segment::send_rtr(msn),
            Rtr::Write => Segment::write_rtr(),
            Rtr::Read => Segment::read_rtr(msn),
        }
    }
}

bitflags::bitflags! {
    /// A set of RTR types (the B, C and D bits).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct RtrSet: u8 {
        /// Zero-length Send.
        const SEND = 1;
        /// Zero-length RDMA Write.
        const WRITE = 2;
        /// Zero-length RDMA Read.
        const READ = 4;
    }
}

impl RtrSet {
    /// No RTR type.
    pub const NONE: RtrSet = RtrSet::empty();

    /// The type to use from this set: Write, else Read, else Send.
    pub const fn preferred(self) -> Option<Rtr> {
        if self.contains(RtrSet::WRITE) {
            Some(Rtr::Write)
        } else if self.contains(RtrSet::READ) {
            Some(Rtr::Read)
        } else if self.contains(RtrSet::SEND) {
            Some(Rtr::Send)
        } else {
            None
        }
    }
}

impl From<Rtr> for RtrSet {
    fn from(rtr: Rtr) -> Self {
        match rtr {
            Rtr::Send => RtrSet::SEND,
            Rtr::Write => RtrSet::WRITE,
            Rtr::Read => RtrSet::READ,
        }
    }
}

/// The RFC 6581 IRD/ORD block that starts the private data of an enhanced rev 2 frame.
///
/// ```text
/// |A|B|   IRD (14)   |C|D|   ORD (14)   |
/// A peer-to-peer, B zero-length Send RTR, C zero-length Write RTR, D zero-length Read RTR
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IrdOrd {
    /// A: peer-to-peer connection model (RTR negotiation in use).
    pub peer_to_peer: bool,
    /// Inbound RDMA Read depth of the sender (14 bits).
    pub ird: u16,
    /// Outbound RDMA Read depth of the sender (14 bits).
    pub ord: u16,
    /// RTR types: all offered (Request) or the one chosen (Reply).
    pub rtr: RtrSet,
}

impl IrdOrd {
    /// Decode the 4 bytes.
    pub fn parse(b: [u8; IRD_ORD_LEN]) -> Self {
        let w0 = u16::from_be_bytes([b[0], b[1]]);
        let w1 = u16::from_be_bytes([b[2], b[3]]);
        let mut rtr = RtrSet::NONE;
        rtr.set(RtrSet::SEND, w0 & B_SEND_RTR != 0);
        rtr.set(RtrSet::WRITE, w1 & C_WRITE_RTR != 0);
        rtr.set(RtrSet::READ, w1 & D_READ_RTR != 0);
        IrdOrd {
            peer_to_peer: w0 & A_PEER_TO_PEER != 0,
            ird: w0 & IRD_ORD_MAX,
            ord: w1 & IRD_ORD_MAX,
            rtr,
        }
    }

    /// Encode the 4 bytes; IRD and ORD must fit in 14 bits.
    pub fn to_bytes(&self) -> Result<[u8; IRD_ORD_LEN], Error> {
        if self.ird > IRD_ORD_MAX || self.ord > IRD_ORD_MAX {
            return Err(Error::InvalidArgument {
                operation: "emit MPA IRD/ORD block",
                reason: "IRD and ORD are 14-bit values (at most 0x3FFF)",
            });
        }
        let mut w0 = self.ird;
        let mut w1 = self.ord;
        if self.peer_to_peer {
            w0 |= A_PEER_TO_PEER;
        }
        if self.rtr.contains(RtrSet::SEND) {
            w0 |= B_SEND_RTR;
        }
        if self.rtr.contains(RtrSet::WRITE) {
            w1 |= C_WRITE_RTR;
        }
        if self.rtr.contains(RtrSet::READ) {
            w1 |= D_READ_RTR;
        }
        let [a, b] = w0.to_be_bytes();
        let [c, d] = w1.to_be_bytes();
        Ok([a, b, c, d])
    }
}

/// MPA revision, with the IRD/ORD block when rev 2 uses enhanced establishment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Revision {
    /// Rev 1, RFC 5044.
    V1,
    /// Rev 2, RFC 6581. `ird_ord` is `Some` iff the enhanced flag (0x10) is set.
    V2 {
        /// The IRD/ORD block.
        ird_ord: Option<IrdOrd>,
    },
}

impl Revision {
    /// The Rev field value.
    pub const fn number(&self) -> u8 {
        match self {
            Revision::V1 => 1,
            Revision::V2 { .. } => 2,
        }
    }

    /// The IRD/ORD block, if any.
    pub const fn ird_ord(&self) -> Option<IrdOrd> {
        match self {
            Revision::V1 => None,
            Revision::V2 { ird_ord } => *ird_ord,
        }
    }
}

/// An MPA Request or Reply frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpaFrame<'a> {
    /// Request or Reply (the key).
    pub kind: FrameKind,
    /// M flag. [`MpaFrame::parse`] never returns `true`; emit sends what is set.
    pub markers: bool,
    /// C flag.
    pub crc: bool,
    /// R flag (Reply only; ignored on a Request).
    pub reject: bool,
    /// Rev and the IRD/ORD block.
    pub revision: Revision,
    /// ULP private data (after the IRD/ORD block, if present).
    pub private_data: &'a [u8],
}

/// Validate the fixed 20-byte header; returns the frame kind and its total length.
fn check_header(hdr: &[u8], expected: Option<FrameKind>) -> Result<(FrameKind, usize), Error> {
    if hdr.len() < HEADER_LEN {
        return Err(Error::MpaTruncated {
            needed: HEADER_LEN,
            available: hdr.len(),
        });
    }
    let key = &hdr[..16];
    let kind = if key == REQUEST_KEY {
        FrameKind::Request
    } else if key == REPLY_KEY {
        FrameKind::Reply
    } else {
        return Err(Error::MpaBadKey {
            expected: expected.unwrap_or(FrameKind::Request),
        });
    };
    if let Some(e) = expected {
        if e != kind {
            return Err(Error::MpaBadKey { expected: e });
        }
    }
    let rev = hdr[17];
    if rev != 1 && rev != 2 {
        return Err(Error::MpaUnsupportedRevision { revision: rev });
    }
    let pd_len = u16::from_be_bytes([hdr[18], hdr[19]]) as usize;
    if pd_len > MAX_PD_LEN {
        return Err(Error::MpaPrivateDataLengthInvalid { len: pd_len });
    }
    Ok((kind, HEADER_LEN + pd_len))
}

impl<'a> MpaFrame<'a> {
    /// Total frame length (20 + PD_Length) once the header is complete, `Ok(None)` while
    /// fewer than 20 bytes are available, or the header error.
    pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, Error> {
        if buf.len() < HEADER_LEN {
            return Ok(None);
        }
        check_header(buf, None).map(|(_, len)| Some(len))
    }

    /// Parse a frame at the start of `buf`; returns it and its length. Bytes after it
    /// are not looked at (they belong to the FPDU stream). Frames asking for markers are
    /// refused.
    pub fn parse(buf: &'a [u8]) -> Result<(Self, usize), Error> {
        let (frame, len) = Self::parse_allowing_markers(buf, None)?;
        if frame.markers {
            return Err(Error::MpaMarkersNotSupported { kind: frame.kind });
        }
        Ok((frame, len))
    }

    fn parse_allowing_markers(
        buf: &'a [u8],
        expected: Option<FrameKind>,
    ) -> Result<(Self, usize), Error> {
        let (kind, len) = check_header(buf, expected)?;
        if buf.len() < len {
            return Err(Error::MpaTruncated {
                needed: len,
                available: buf.len(),
            });
        }
        let flags = buf[16];
        let pd = &buf[HEADER_LEN..len];
        let revision = match buf[17] {
            1 => Revision::V1,
            _ if flags & FLAG_ENHANCED == 0 => Revision::V2 { ird_ord: None },
            _ => {
                let block: [u8; IRD_ORD_LEN] = pd
                    .get(..IRD_ORD_LEN)
                    .and_then(|b| b.try_into().ok())
                    .ok_or(Error::MpaIrdOrdMissing { pd_len: pd.len() })?;
                Revision::V2 {
                    ird_ord: Some(IrdOrd::parse(block)),
                }
            }
        };
        let private_data = if revision.ird_ord().is_some() {
            &pd[IRD_ORD_LEN..]
        } else {
            pd
        };
        Ok((
            MpaFrame {
                kind,
                markers: flags & FLAG_MARKERS != 0,
                crc: flags & FLAG_CRC != 0,
                reject: kind == FrameKind::Reply && flags & FLAG_REJECT != 0,
                revision,
                private_data,
            },
            len,
        ))
    }

    /// Bytes [`emit`](Self::emit) appends.
    pub fn wire_len(&self) -> usize {
        HEADER_LEN + self.revision.ird_ord().map_or(0, |_| IRD_ORD_LEN) + self.private_data.len()
    }

    /// Append the frame to `out`; returns its length. Refuses more than
    /// [`MAX_ULP_PRIVATE_DATA_LEN`] bytes of private data and R on a Request.
    pub fn emit(&self, out: &mut Vec<u8>) -> Result<usize, Error> {
        if self.private_data.len() > MAX_ULP_PRIVATE_DATA_LEN {
            return Err(Error::PrivateDataTooLong {
                len: self.private_data.len(),
                max: MAX_ULP_PRIVATE_DATA_LEN,
            });
        }
        if self.reject && self.kind == FrameKind::Request {
            return Err(Error::InvalidArgument {
                operation: "emit MPA Request",
                reason: "R (reject) exists only in a Reply",
            });
        }
        let block = self.revision.ird_ord().map(|b| b.to_bytes()).transpose()?;
        let mut flags = 0u8;
        if self.markers {
            flags |= FLAG_MARKERS;
        }
        if self.crc {
            flags |= FLAG_CRC;
        }
        if self.reject {
            flags |= FLAG_REJECT;
        }
        if block.is_some() {
            flags |= FLAG_ENHANCED;
        }
        let len = self.wire_len();
        // len - 20 <= 256, fits in u16.
        let pd_len = (len - HEADER_LEN) as u16;
        out.reserve(len);
        out.extend_from_slice(self.kind.key());
        out.push(flags);
        out.push(self.revision.number());
        out.extend_from_slice(&pd_len.to_be_bytes());
        if let Some(b) = block {
            out.extend_from_slice(&b);
        }
        out.extend_from_slice(self.private_data);
        Ok(len)
    }
}

/// The outcome of a successful negotiation, as seen by the local side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// MPA revision in use (the Reply's Rev).
    pub revision: u8,
    /// CRC in both directions (the Reply's C bit).
    pub crc: bool,
    /// Local inbound RDMA Read depth.
    pub ird: u16,
    /// Local outbound RDMA Read depth (never above the peer's IRD when it sent one).
    pub ord: u16,
    /// The RTR the Initiator sends as its first FPDU (peer-to-peer mode only).
    pub rtr: Option<Rtr>,
    /// The peer's IRD/ORD block, when it sent one.
    pub peer: Option<IrdOrd>,
}

/// What the Initiator asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InitiatorConfig {
    /// Ask for CRC (recommended for hardware peers; siw agrees to it).
    pub crc: bool,
    /// Send rev 2 with the enhanced flag and the IRD/ORD block; `false` sends rev 1.
    pub enhanced: bool,
    /// Inbound RDMA Read depth offered.
    pub ird: u16,
    /// Outbound RDMA Read depth wanted.
    pub ord: u16,
    /// `Some(offered)`: peer-to-peer mode (A=1) offering these RTR types. Needs `enhanced`.
    pub peer_to_peer: Option<RtrSet>,
}

impl InitiatorConfig {
    /// Rev 2 + enhanced, CRC wanted, client/server mode.
    pub const fn new(ird: u16, ord: u16) -> Self {
        InitiatorConfig {
            crc: true,
            enhanced: true,
            ird,
            ord,
            peer_to_peer: None,
        }
    }
}

/// What the Initiator learns from the Reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitiatorEvent {
    /// The Responder accepted. Switch to FPDUs.
    Accepted(Accepted),
    /// The Responder rejected (R=1). Close the connection.
    Rejected {
        /// The Responder's ULP private data.
        private_data: Vec<u8>,
    },
}

/// An accepted connection, from the Initiator's side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// CRC, IRD/ORD and RTR in force.
    pub negotiated: Negotiated,
    /// The Responder's ULP private data.
    pub private_data: Vec<u8>,
    /// Bytes that followed the Reply in the stream: feed them to the FPDU decoder first.
    pub leftover: Vec<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InitiatorPhase {
    AwaitingReply,
    Done,
    Failed,
}

/// The Initiator (rdma_connect side): sends the Request, waits for the Reply.
#[derive(Clone, Debug)]
pub struct MpaInitiator {
    config: InitiatorConfig,
    request: Vec<u8>,
    rx: Vec<u8>,
    phase: InitiatorPhase,
}

impl MpaInitiator {
    /// Build the Request. Send [`request`](Self::request) right after TCP connects, and
    /// nothing else until the Reply has arrived.
    pub fn new(config: InitiatorConfig, private_data: &[u8]) -> Result<Self, Error> {
        let revision = if config.enhanced {
            Revision::V2 {
                ird_ord: Some(IrdOrd {
                    peer_to_peer: config.peer_to_peer.is_some(),
                    ird: config.ird,
                    ord: config.ord,
                    rtr: config.peer_to_peer.unwrap_or(RtrSet::NONE),
                }),
            }
        } else {
            Revision::V1
        };
        if let Some(offer) = config.peer_to_peer {
            if !config.enhanced {
                return Err(Error::InvalidArgument {
                    operation: "MPA Initiator",
                    reason: "peer-to-peer mode needs rev 2 enhanced establishment",
                });
            }
            if offer.is_empty() {
                return Err(Error::InvalidArgument {
                    operation: "MPA Initiator",
                    reason: "peer-to-peer mode needs at least one RTR type",
                });
            }
            if offer.contains(RtrSet::READ) && config.ord == 0 {
                return Err(Error::InvalidArgument {
                    operation: "MPA Initiator",
                    reason: "a Read RTR needs ORD >= 1",
                });
            }
        }
        let mut request = Vec::new();
        MpaFrame {
            kind: FrameKind::Request,
            markers: false,
            crc: config.crc,
            reject: false,
            revision,
            private_data,
        }
        .emit(&mut request)?;
        Ok(MpaInitiator {
            config,
            request,
            rx: Vec::new(),
            phase: InitiatorPhase::AwaitingReply,
        })
    }

    /// The Request frame bytes.
    pub fn request(&self) -> &[u8] {
        &self.request
    }

    /// Feed bytes received from the Responder. Returns `Ok(None)` until the whole Reply
    /// is in. Any error fails the handshake (close TCP); the error's
    /// [`terminate_cause`](Error::terminate_cause) says which MPA code applies.
    pub fn feed(&mut self, data: &[u8]) -> Result<Option<InitiatorEvent>, Error> {
        if self.phase != InitiatorPhase::AwaitingReply {
            return Err(Error::WrongState {
                operation: "MPA Initiator feed",
                state: if self.phase == InitiatorPhase::Done {
                    "reply already processed"
                } else {
                    "failed"
                },
            });
        }
        self.rx.extend_from_slice(data);
        if self.rx.len() < HEADER_LEN {
            return Ok(None);
        }
        let result = self.process_reply();
        self.phase = match result {
            Ok(None) => InitiatorPhase::AwaitingReply,
            Ok(Some(_)) => InitiatorPhase::Done,
            Err(_) => InitiatorPhase::Failed,
        };
        result
    }

    fn process_reply(&mut self) -> Result<Option<InitiatorEvent>, Error> {
        let (_, total) = check_header(&self.rx, Some(FrameKind::Reply))?;
        if self.rx.len() < total {
            return Ok(None);
        }
        let (frame, _) = MpaFrame::parse_allowing_markers(&self.rx, Some(FrameKind::Reply))?;
        if frame.markers {
            return Err(Error::MpaMarkersNotSupported {
                kind: FrameKind::Reply,
            });
        }
        let requested_rev = if self.config.enhanced { 2 } else { 1 };
        if frame.revision.number() > requested_rev {
            return Err(Error::MpaRevisionMismatch {
                requested: requested_rev,
                replied: frame.revision.number(),
            });
        }
        if frame.reject {
            return Ok(Some(InitiatorEvent::Rejected {
                private_data: frame.private_data.to_vec(),
            }));
        }
        if self.config.crc && !frame.crc {
            return Err(Error::MpaCrcNotHonoured);
        }
        let peer = frame.revision.ird_ord();
        let (ird, ord, rtr) = match peer {
            Some(peer) => self.check_enhanced_reply(peer)?,
            // A rev 1 (or non-enhanced rev 2) Responder: no IRD/ORD exchange, no RTR.
            // The ULP must then send the first FPDU itself (RFC 5044 §7.1.2).
            None => (self.config.ird, self.config.ord, None),
        };
        let negotiated = Negotiated {
            revision: frame.revision.number(),
            crc: frame.crc,
            ird,
            ord,
            rtr,
            peer,
        };
        let private_data = frame.private_data.to_vec();
        let leftover = self.rx[total..].to_vec();
        self.rx = Vec::new();
        Ok(Some(InitiatorEvent::Accepted(Accepted {
            negotiated,
            private_data,
            leftover,
        })))
    }

    /// RFC 6581 checks on the Responder's IRD/ORD block.
    fn check_enhanced_reply(&self, peer: IrdOrd) -> Result<(u16, u16, Option<Rtr>), Error> {
        // The Responder's ORD is how many reads it may have outstanding against us.
        if peer.ord > self.config.ird {
            return Err(Error::MpaInsufficientIrd {
                needed: peer.ord,
                available: self.config.ird,
            });
        }
        let ord = self.config.ord.min(peer.ird);
        let rtr = match self.config.peer_to_peer {
            None => None,
            Some(offered) => {
                let usable = offered.intersection(peer.rtr);
                let chosen = match (peer.peer_to_peer, usable.preferred()) {
                    (true, Some(r)) => r,
                    _ => {
                        return Err(Error::MpaNoMatchingRtr {
                            offered,
                            replied: peer.rtr,
                        })
                    }
                };
                if chosen == Rtr::Read && peer.ird == 0 {
                    return Err(Error::MpaInsufficientIrd {
                        needed: 1,
                        available: 0,
                    });
                }
                Some(chosen)
            }
        };
        Ok((self.config.ird, ord, rtr))
    }
}

/// Local policy of the Responder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponderConfig {
    /// Use CRC even when the Initiator did not ask for it.
    pub crc_required: bool,
}

/// A received MPA Request, for the ULP to accept or reject.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MpaRequest {
    /// Rev and the Initiator's IRD/ORD block (its IRD, ORD, A bit and RTR offer).
    pub revision: Revision,
    /// The Initiator asked for CRC.
    pub crc: bool,
    /// The Initiator's ULP private data.
    pub private_data: Vec<u8>,
}

/// What the Responder learns from the Request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResponderEvent {
    /// A valid Request: call [`MpaResponder::accept`] or [`MpaResponder::reject`].
    Request(MpaRequest),
    /// A Request this stack cannot serve (it asks for markers). Send `reply` (R=1),
    /// then close TCP, as siw does.
    Refused {
        /// Why.
        reason: Error,
        /// The Reject frame to send.
        reply: Vec<u8>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum ResponderPhase {
    AwaitingRequest,
    Pending(MpaRequest),
    Done,
    Failed,
}

/// The Responder (listening side): reads the Request, produces the Reply.
#[derive(Clone, Debug)]
pub struct MpaResponder {
    config: ResponderConfig,
    rx: Vec<u8>,
    phase: ResponderPhase,
    negotiated: Option<Negotiated>,
}

impl MpaResponder {
    /// A Responder for one accepted TCP connection.
    pub fn new(config: ResponderConfig) -> Self {
        MpaResponder {
            config,
            rx: Vec::new(),
            phase: ResponderPhase::AwaitingRequest,
            negotiated: None,
        }
    }

    /// The Request waiting for accept/reject, if any.
    pub fn pending_request(&self) -> Option<&MpaRequest> {
        match &self.phase {
            ResponderPhase::Pending(r) => Some(r),
            _ => None,
        }
    }

    /// What was agreed, after a successful [`accept`](Self::accept).
    pub fn negotiated(&self) -> Option<&Negotiated> {
        self.negotiated.as_ref()
    }

    /// Feed bytes received from the Initiator. Returns `Ok(None)` until the Request is
    /// complete. Bytes beyond the Request fail the handshake.
    pub fn feed(&mut self, data: &[u8]) -> Result<Option<ResponderEvent>, Error> {
        match self.phase {
            ResponderPhase::AwaitingRequest => {}
            ResponderPhase::Pending(_) => {
                if data.is_empty() {
                    return Ok(None);
                }
                self.phase = ResponderPhase::Failed;
                return Err(Error::MpaDataAfterRequest { extra: data.len() });
            }
            ResponderPhase::Done | ResponderPhase::Failed => {
                return Err(Error::WrongState {
                    operation: "MPA Responder feed",
                    state: if self.phase == ResponderPhase::Done {
                        "reply already produced"
                    } else {
                        "failed"
                    },
                })
            }
        }
        self.rx.extend_from_slice(data);
        if self.rx.len() < HEADER_LEN {
            return Ok(None);
        }
        match self.process_request() {
            Ok(event) => Ok(event),
            Err(e) => {
                self.phase = ResponderPhase::Failed;
                Err(e)
            }
        }
    }

    fn process_request(&mut self) -> Result<Option<ResponderEvent>, Error> {
        let (_, total) = check_header(&self.rx, Some(FrameKind::Request))?;
        if self.rx.len() < total {
            return Ok(None);
        }
        if self.rx.len() > total {
            return Err(Error::MpaDataAfterRequest {
                extra: self.rx.len() - total,
            });
        }
        let (frame, _) = MpaFrame::parse_allowing_markers(&self.rx, Some(FrameKind::Request))?;
        let request = MpaRequest {
            revision: frame.revision,
            crc: frame.crc,
            private_data: frame.private_data.to_vec(),
        };
        let markers = frame.markers;
        self.rx = Vec::new();
        if markers {
            let reply = self.reject_reply(&request, &[])?;
            self.phase = ResponderPhase::Done;
            return Ok(Some(ResponderEvent::Refused {
                reason: Error::MpaMarkersNotSupported {
                    kind: FrameKind::Request,
                },
                reply,
            }));
        }
        self.phase = ResponderPhase::Pending(request.clone());
        Ok(Some(ResponderEvent::Request(request)))
    }

    fn pending(&self, operation: &'static str) -> Result<MpaRequest, Error> {
        match &self.phase {
            ResponderPhase::Pending(r) => Ok(r.clone()),
            ResponderPhase::AwaitingRequest => Err(Error::WrongState {
                operation,
                state: "no Request received yet",
            }),
            ResponderPhase::Done => Err(Error::WrongState {
                operation,
                state: "reply already produced",
            }),
            ResponderPhase::Failed => Err(Error::WrongState {
                operation,
                state: "failed",
            }),
        }
    }

    fn check_private_data(private_data: &[u8]) -> Result<(), Error> {
        if private_data.len() > MAX_ULP_PRIVATE_DATA_LEN {
            return Err(Error::PrivateDataTooLong {
                len: private_data.len(),
                max: MAX_ULP_PRIVATE_DATA_LEN,
            });
        }
        Ok(())
    }

    /// Accept the pending Request with the local `ird`/`ord`; returns the Reply bytes.
    ///
    /// CRC is on iff the Initiator asked or [`ResponderConfig::crc_required`]. With an
    /// IRD/ORD block, ORD is lowered to the Initiator's IRD, and in peer-to-peer mode the
    /// RTR is Write if offered, else Read. On `MpaNoMatchingRtr` or `MpaInsufficientIrd`
    /// the Request stays pending, so the caller can still [`reject`](Self::reject).
    pub fn accept(&mut self, private_data: &[u8], ird: u16, ord: u16) -> Result<Vec<u8>, Error> {
        let request = self.pending("MPA Responder accept")?;
        Self::check_private_data(private_data)?;
        if ird > IRD_ORD_MAX || ord > IRD_ORD_MAX {
            return Err(Error::InvalidArgument {
                operation: "MPA Responder accept",
                reason: "IRD and ORD are 14-bit values (at most 0x3FFF)",
            });
        }
        let crc = request.crc || self.config.crc_required;
        let (revision, ord, rtr, peer) = match request.revision {
            Revision::V1 => (Revision::V1, ord, None, None),
            Revision::V2 { ird_ord: None } => (Revision::V2 { ird_ord: None }, ord, None, None),
            Revision::V2 {
                ird_ord: Some(peer),
            } => {
                let ord = ord.min(peer.ird);
                let rtr = if peer.peer_to_peer {
                    // siw: Write if offered, else Read; never the zero-length Send.
                    let usable = peer.rtr.intersection(RtrSet::WRITE | RtrSet::READ);
                    match usable.preferred() {
                        Some(r) => Some(r),
                        None => {
                            return Err(Error::MpaNoMatchingRtr {
                                offered: peer.rtr,
                                replied: RtrSet::NONE,
                            })
                        }
                    }
                } else {
                    None
                };
                if rtr == Some(Rtr::Read) && ird == 0 {
                    return Err(Error::MpaInsufficientIrd {
                        needed: 1,
                        available: 0,
                    });
                }
                let block = IrdOrd {
                    peer_to_peer: peer.peer_to_peer,
                    ird,
                    ord,
                    rtr: rtr.map_or(RtrSet::NONE, RtrSet::from),
                };
                (
                    Revision::V2 {
                        ird_ord: Some(block),
                    },
                    ord,
                    rtr,
                    Some(peer),
                )
            }
        };
        let mut reply = Vec::new();
        MpaFrame {
            kind: FrameKind::Reply,
            markers: false,
            crc,
            reject: false,
            revision,
            private_data,
        }
        .emit(&mut reply)?;
        self.negotiated = Some(Negotiated {
            revision: revision.number(),
            crc,
            ird,
            ord,
            rtr,
            peer,
        });
        self.phase = ResponderPhase::Done;
        Ok(reply)
    }

    /// Reject the pending Request; returns the Reply bytes (R=1). Close TCP after
    /// sending them.
    pub fn reject(&mut self, private_data: &[u8]) -> Result<Vec<u8>, Error> {
        let request = self.pending("MPA Responder reject")?;
        Self::check_private_data(private_data)?;
        let reply = self.reject_reply(&request, private_data)?;
        self.phase = ResponderPhase::Done;
        Ok(reply)
    }

    fn reject_reply(&self, request: &MpaRequest, private_data: &[u8]) -> Result<Vec<u8>, Error> {
        let revision = match request.revision {
            Revision::V2 {
                ird_ord: Some(peer),
            } => Revision::V2 {
                ird_ord: Some(IrdOrd {
                    peer_to_peer: peer.peer_to_peer,
                    ird: 0,
                    ord: 0,
                    rtr: RtrSet::NONE,
                }),
            },
            other => other,
        };
        let mut reply = Vec::new();
        MpaFrame {
            kind: FrameKind::Reply,
            markers: false,
            crc: request.crc || self.config.crc_required,
            reject: true,
            revision,
            private_data,
        }
        .emit(&mut reply)?;
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fpdu::{FpduDecoder, FpduEncoder};
    use crate::terminate::{LlpErrorCode, TerminateCause};

    fn handshake(
        config: InitiatorConfig,
        responder: ResponderConfig,
        accept: impl FnOnce(&MpaRequest, &mut MpaResponder) -> Result<Vec<u8>, Error>,
    ) -> (Result<Option<InitiatorEvent>, Error>, MpaResponder) {
        let mut ini = MpaInitiator::new(config, b"hello").unwrap();
        let mut res = MpaResponder::new(responder);
        let req = match res.feed(ini.request()).unwrap() {
            Some(ResponderEvent::Request(r)) => r,
            other => panic!("expected a Request, got {other:?}"),
        };
        assert_eq!(req.private_data, b"hello");
        let reply = match accept(&req, &mut res) {
            Ok(r) => r,
            Err(e) => return (Err(e), res),
        };
        (ini.feed(&reply), res)
    }

    fn accepted(ev: Result<Option<InitiatorEvent>, Error>) -> Accepted {
        match ev {
            Ok(Some(InitiatorEvent::Accepted(a))) => a,
            other => panic!("expected Accepted, got {other:?}"),
        }
    }

    #[test]
    fn rev2_request_bytes_carry_enhanced_flag_and_ird_ord_block() {
        let mut config = InitiatorConfig::new(16, 8);
        config.peer_to_peer = Some(RtrSet::WRITE | RtrSet::READ);
        let ini = MpaInitiator::new(config, b"pd").unwrap();
        let r = ini.request();
        assert_eq!(&r[..16], b"MPA ID Req Frame");
        assert_eq!(
            r[16],
            FLAG_CRC | FLAG_ENHANCED,
            "C + enhanced, reserved bits 0"
        );
        assert_eq!(r[17], 2);
        assert_eq!(&r[18..20], &[0, 6]);
        // A | IRD 16, C | D | ORD 8
        assert_eq!(&r[20..24], &[0x80, 0x10, 0xC0, 0x08]);
        assert_eq!(&r[24..], b"pd");
        let (frame, len) = MpaFrame::parse(r).unwrap();
        assert_eq!(len, r.len());
        assert_eq!(
            frame.revision.ird_ord(),
            Some(IrdOrd {
                peer_to_peer: true,
                ird: 16,
                ord: 8,
                rtr: RtrSet::WRITE | RtrSet::READ
            })
        );
        assert_eq!(frame.private_data, b"pd");
    }

    #[test]
    fn rtr_set_debug_names_the_types() {
        assert_eq!(format!("{:?}", RtrSet::NONE), "RtrSet(0x0)");
        assert_eq!(
            format!("{:?}", RtrSet::WRITE | RtrSet::READ),
            "RtrSet(WRITE | READ)"
        );
        assert_eq!(RtrSet::READ.preferred(), Some(Rtr::Read));
        assert_eq!((RtrSet::SEND | RtrSet::WRITE).preferred(), Some(Rtr::Write));
    }

    #[test]
    fn ird_ord_block_bit_positions_follow_rfc6581() {
        let b = IrdOrd {
            peer_to_peer: false,
            ird: IRD_ORD_MAX,
            ord: 0,
            rtr: RtrSet::SEND,
        };
        assert_eq!(b.to_bytes().unwrap(), [0x7F, 0xFF, 0x00, 0x00]);
        assert_eq!(IrdOrd::parse([0x7F, 0xFF, 0x00, 0x00]), b);
        assert_eq!(
            IrdOrd::parse([0xC0, 0x01, 0x40, 0x02]),
            IrdOrd {
                peer_to_peer: true,
                ird: 1,
                ord: 2,
                rtr: RtrSet::SEND | RtrSet::READ
            }
        );
        let too_big = IrdOrd {
            ird: IRD_ORD_MAX + 1,
            ..b
        };
        assert!(matches!(
            too_big.to_bytes(),
            Err(Error::InvalidArgument { .. })
        ));
    }

    #[test]
    fn mpa_frames_round_trip_for_each_revision() {
        let frames = [
            MpaFrame {
                kind: FrameKind::Request,
                markers: false,
                crc: false,
                reject: false,
                revision: Revision::V1,
                private_data: b"rev1",
            },
            MpaFrame {
                kind: FrameKind::Reply,
                markers: false,
                crc: true,
                reject: true,
                revision: Revision::V2 { ird_ord: None },
                private_data: &[],
            },
            MpaFrame {
                kind: FrameKind::Reply,
                markers: false,
                crc: true,
                reject: false,
                revision: Revision::V2 {
                    ird_ord: Some(IrdOrd {
                        peer_to_peer: true,
                        ird: 128,
                        ord: 1,
                        rtr: RtrSet::READ,
                    }),
                },
                private_data: &[7; MAX_ULP_PRIVATE_DATA_LEN],
            },
        ];
        for f in frames {
            let mut out = Vec::new();
            assert_eq!(f.emit(&mut out).unwrap(), f.wire_len());
            assert_eq!(MpaFrame::frame_len(&out).unwrap(), Some(out.len()));
            assert_eq!(MpaFrame::parse(&out).unwrap(), (f, out.len()));
        }
    }

    #[test]
    fn emit_refuses_more_than_252_private_data_bytes() {
        let f = MpaFrame {
            kind: FrameKind::Request,
            markers: false,
            crc: true,
            reject: false,
            revision: Revision::V1,
            private_data: &[0; MAX_ULP_PRIVATE_DATA_LEN + 1],
        };
        assert_eq!(
            f.emit(&mut Vec::new()),
            Err(Error::PrivateDataTooLong { len: 253, max: 252 })
        );
        assert!(MpaInitiator::new(InitiatorConfig::new(1, 1), &[0; 300]).is_err());
    }

    #[test]
    fn parse_refuses_pd_length_above_512_but_reads_up_to_512() {
        let mut frame = Vec::from(REPLY_KEY);
        frame.extend_from_slice(&[FLAG_CRC, 1, 0x02, 0x01]); // PD_Length 513
        assert_eq!(
            MpaFrame::parse(&frame).unwrap_err(),
            Error::MpaPrivateDataLengthInvalid { len: 513 }
        );
        let mut frame = Vec::from(REPLY_KEY);
        frame.extend_from_slice(&[FLAG_CRC, 1, 0x02, 0x00]); // 512, larger than siw's 256
        frame.extend_from_slice(&[0xAB; 512]);
        let (f, len) = MpaFrame::parse(&frame).unwrap();
        assert_eq!(len, 532);
        assert_eq!(f.private_data.len(), 512);
    }

    #[test]
    fn parse_refuses_markers() {
        let mut frame = Vec::from(REQUEST_KEY);
        frame.extend_from_slice(&[FLAG_MARKERS, 1, 0, 0]);
        let e = MpaFrame::parse(&frame).unwrap_err();
        assert_eq!(
            e,
            Error::MpaMarkersNotSupported {
                kind: FrameKind::Request
            }
        );
        assert_eq!(
            e.terminate_cause(),
            Some(TerminateCause::Llp(LlpErrorCode::InvalidMpaFrame))
        );
    }

    #[test]
    fn parse_refuses_bad_key_bad_rev_short_frames_and_missing_ird_ord() {
        let mut bad_key = Vec::from(*b"MPA ID Xyz Frame");
        bad_key.extend_from_slice(&[0, 1, 0, 0]);
        assert!(matches!(
            MpaFrame::parse(&bad_key),
            Err(Error::MpaBadKey { .. })
        ));
        let mut rev3 = Vec::from(REQUEST_KEY);
        rev3.extend_from_slice(&[0, 3, 0, 0]);
        assert_eq!(
            MpaFrame::parse(&rev3).unwrap_err(),
            Error::MpaUnsupportedRevision { revision: 3 }
        );
        let mut short = Vec::from(REQUEST_KEY);
        short.extend_from_slice(&[0, 1, 0, 4, 1, 2]);
        assert!(matches!(
            MpaFrame::parse(&short),
            Err(Error::MpaTruncated { needed: 24, .. })
        ));
        assert_eq!(MpaFrame::frame_len(&short[..19]).unwrap(), None);
        let mut no_block = Vec::from(REQUEST_KEY);
        no_block.extend_from_slice(&[FLAG_ENHANCED, 2, 0, 2, 0, 0]);
        assert_eq!(
            MpaFrame::parse(&no_block).unwrap_err(),
            Error::MpaIrdOrdMissing { pd_len: 2 }
        );
    }

    #[test]
    fn reserved_flag_bits_are_ignored_on_receive_and_never_sent() {
        let mut ini = MpaInitiator::new(InitiatorConfig::new(4, 4), &[]).unwrap();
        assert_eq!(ini.request()[16] & FLAG_RESERVED, 0);
        let mut res = MpaResponder::new(ResponderConfig::default());
        let mut req = ini.request().to_vec();
        req[16] |= FLAG_RESERVED | FLAG_REJECT; // siw would copy these back
        assert!(matches!(
            res.feed(&req).unwrap(),
            Some(ResponderEvent::Request(_))
        ));
        let reply = res.accept(&[], 4, 4).unwrap();
        assert_eq!(reply[16] & (FLAG_RESERVED | FLAG_REJECT), 0);
        let mut reply_with_reserved = reply.clone();
        reply_with_reserved[16] |= FLAG_RESERVED;
        assert!(matches!(
            ini.feed(&reply_with_reserved).unwrap(),
            Some(InitiatorEvent::Accepted(_))
        ));
    }

    #[test]
    fn rev1_handshake_without_crc() {
        let mut config = InitiatorConfig::new(2, 2);
        config.enhanced = false;
        config.crc = false;
        let (ev, res) = handshake(config, ResponderConfig::default(), |req, res| {
            assert_eq!(req.revision, Revision::V1);
            assert!(!req.crc);
            res.accept(b"ok", 3, 5)
        });
        let a = accepted(ev);
        assert_eq!(
            a.negotiated,
            Negotiated {
                revision: 1,
                crc: false,
                ird: 2,
                ord: 2,
                rtr: None,
                peer: None
            }
        );
        assert_eq!(a.private_data, b"ok");
        assert!(a.leftover.is_empty());
        assert_eq!(res.negotiated().unwrap().revision, 1);
    }

    #[test]
    fn rev2_handshake_exchanges_ird_ord_and_lowers_ord_to_peer_ird() {
        let (ev, res) = handshake(
            InitiatorConfig::new(8, 32),
            ResponderConfig::default(),
            |req, res| {
                let peer = req.revision.ird_ord().unwrap();
                assert_eq!((peer.ird, peer.ord, peer.peer_to_peer), (8, 32, false));
                res.accept(b"", 32, 16) // ORD 16 > initiator IRD 8: lowered to 8
            },
        );
        let a = accepted(ev);
        assert!(a.negotiated.crc);
        assert_eq!(a.negotiated.revision, 2);
        assert_eq!((a.negotiated.ird, a.negotiated.ord), (8, 32));
        assert_eq!(a.negotiated.peer.unwrap().ord, 8);
        let r = res.negotiated().unwrap();
        assert_eq!((r.ird, r.ord, r.rtr), (32, 8, None));
    }

    #[test]
    fn responder_uses_crc_iff_requested_or_locally_required() {
        for (asked, required) in [(false, false), (false, true), (true, false), (true, true)] {
            let mut config = InitiatorConfig::new(1, 1);
            config.crc = asked;
            let (ev, res) = handshake(
                config,
                ResponderConfig {
                    crc_required: required,
                },
                |_, res| res.accept(&[], 1, 1),
            );
            assert_eq!(accepted(ev).negotiated.crc, asked || required);
            assert_eq!(res.negotiated().unwrap().crc, asked || required);
        }
    }

    #[test]
    fn initiator_fails_reply_that_drops_requested_crc() {
        let mut ini = MpaInitiator::new(InitiatorConfig::new(1, 1), &[]).unwrap();
        let mut res = MpaResponder::new(ResponderConfig::default());
        res.feed(ini.request()).unwrap();
        let mut reply = res.accept(&[], 1, 1).unwrap();
        reply[16] &= !FLAG_CRC;
        assert_eq!(ini.feed(&reply), Err(Error::MpaCrcNotHonoured));
        assert!(matches!(ini.feed(&[]), Err(Error::WrongState { .. })));
    }

    #[test]
    fn p2p_responder_picks_write_rtr_when_offered() {
        let mut config = InitiatorConfig::new(4, 4);
        config.peer_to_peer = Some(RtrSet::WRITE | RtrSet::READ);
        let (ev, res) = handshake(config, ResponderConfig::default(), |_, res| {
            res.accept(&[], 4, 4)
        });
        let a = accepted(ev);
        assert_eq!(a.negotiated.rtr, Some(Rtr::Write));
        assert_eq!(res.negotiated().unwrap().rtr, Some(Rtr::Write));
        let peer = a.negotiated.peer.unwrap();
        assert!(peer.peer_to_peer, "A must be echoed");
        assert_eq!(peer.rtr, RtrSet::WRITE, "exactly one RTR bit");
        assert_eq!(Rtr::Write.segment(1), Segment::write_rtr());
    }

    #[test]
    fn p2p_responder_picks_read_rtr_when_only_read_offered() {
        let mut config = InitiatorConfig::new(4, 1);
        config.peer_to_peer = Some(RtrSet::READ);
        let (ev, _) = handshake(config, ResponderConfig::default(), |_, res| {
            res.accept(&[], 2, 2)
        });
        assert_eq!(accepted(ev).negotiated.rtr, Some(Rtr::Read));
    }

    #[test]
    fn p2p_with_only_send_rtr_is_no_matching_rtr_then_reject() {
        let mut config = InitiatorConfig::new(4, 4);
        config.peer_to_peer = Some(RtrSet::SEND);
        let mut ini = MpaInitiator::new(config, &[]).unwrap();
        let mut res = MpaResponder::new(ResponderConfig::default());
        res.feed(ini.request()).unwrap();
        let e = res.accept(&[], 4, 4).unwrap_err();
        assert!(matches!(e, Error::MpaNoMatchingRtr { .. }));
        assert_eq!(e.terminate_cause().unwrap().to_wire(), (2, 0, 0x07));
        // Still pending: the ULP can reject.
        assert!(res.pending_request().is_some());
        let reply = res.reject(b"no rtr").unwrap();
        assert_eq!(
            ini.feed(&reply).unwrap(),
            Some(InitiatorEvent::Rejected {
                private_data: b"no rtr".to_vec()
            })
        );
    }

    #[test]
    fn p2p_read_rtr_needs_an_ird_slot_at_the_responder() {
        let mut config = InitiatorConfig::new(4, 1);
        config.peer_to_peer = Some(RtrSet::READ);
        let mut ini = MpaInitiator::new(config, &[]).unwrap();
        let mut res = MpaResponder::new(ResponderConfig::default());
        res.feed(ini.request()).unwrap();
        let e = res.accept(&[], 0, 0).unwrap_err();
        assert_eq!(e.terminate_cause().unwrap().to_wire(), (2, 0, 0x06));
        let reply = res.accept(&[], 1, 0).unwrap();
        assert!(matches!(
            ini.feed(&reply).unwrap(),
            Some(InitiatorEvent::Accepted(_))
        ));
        for offer in [
            RtrSet::READ,
            RtrSet::READ | RtrSet::SEND,
            RtrSet::READ | RtrSet::WRITE,
        ] {
            let mut config = InitiatorConfig::new(4, 0);
            config.peer_to_peer = Some(offer);
            assert!(
                MpaInitiator::new(config, &[]).is_err(),
                "offering a Read RTR ({offer:?}) needs ORD >= 1"
            );
        }
    }

    #[test]
    fn initiator_requires_a_bit_and_an_offered_rtr_in_the_reply() {
        let mut config = InitiatorConfig::new(4, 4);
        config.peer_to_peer = Some(RtrSet::READ);
        let mut ini = MpaInitiator::new(config, &[]).unwrap();
        // A Reply that dropped A (cxgb4 sends TERM "RTR mismatch" for this).
        let reply = MpaFrame {
            kind: FrameKind::Reply,
            markers: false,
            crc: true,
            reject: false,
            revision: Revision::V2 {
                ird_ord: Some(IrdOrd {
                    peer_to_peer: false,
                    ird: 4,
                    ord: 4,
                    rtr: RtrSet::READ,
                }),
            },
            private_data: &[],
        };
        let mut bytes = Vec::new();
        reply.emit(&mut bytes).unwrap();
        let e = ini.feed(&bytes).unwrap_err();
        assert!(matches!(e, Error::MpaNoMatchingRtr { .. }));
        // A Reply that picked an RTR we did not offer.
        let mut ini = MpaInitiator::new(config, &[]).unwrap();
        let mut wrong = reply;
        wrong.revision = Revision::V2 {
            ird_ord: Some(IrdOrd {
                peer_to_peer: true,
                ird: 4,
                ord: 4,
                rtr: RtrSet::WRITE,
            }),
        };
        let mut bytes = Vec::new();
        wrong.emit(&mut bytes).unwrap();
        assert!(matches!(
            ini.feed(&bytes),
            Err(Error::MpaNoMatchingRtr { .. })
        ));
    }

    #[test]
    fn initiator_reports_insufficient_ird_when_reply_ord_exceeds_it() {
        let mut ini = MpaInitiator::new(InitiatorConfig::new(2, 2), &[]).unwrap();
        let reply = MpaFrame {
            kind: FrameKind::Reply,
            markers: false,
            crc: true,
            reject: false,
            revision: Revision::V2 {
                ird_ord: Some(IrdOrd {
                    peer_to_peer: false,
                    ird: 2,
                    ord: 3,
                    rtr: RtrSet::NONE,
                }),
            },
            private_data: &[],
        };
        let mut bytes = Vec::new();
        reply.emit(&mut bytes).unwrap();
        let e = ini.feed(&bytes).unwrap_err();
        assert_eq!(
            e,
            Error::MpaInsufficientIrd {
                needed: 3,
                available: 2
            }
        );
        assert_eq!(e.terminate_cause().unwrap().to_wire(), (2, 0, 0x06));
    }

    #[test]
    fn rev2_initiator_accepts_a_rev1_responder() {
        let mut ini = MpaInitiator::new(InitiatorConfig::new(3, 5), &[]).unwrap();
        let mut reply = Vec::from(REPLY_KEY);
        reply.extend_from_slice(&[FLAG_CRC, 1, 0, 0]);
        let a = accepted(ini.feed(&reply));
        assert_eq!(a.negotiated.revision, 1);
        assert_eq!((a.negotiated.ird, a.negotiated.ord), (3, 5));
        assert_eq!(a.negotiated.peer, None);
    }

    #[test]
    fn rev1_initiator_refuses_a_rev2_reply() {
        let mut config = InitiatorConfig::new(1, 1);
        config.enhanced = false;
        let mut ini = MpaInitiator::new(config, &[]).unwrap();
        let mut reply = Vec::from(REPLY_KEY);
        reply.extend_from_slice(&[FLAG_CRC, 2, 0, 0]);
        assert_eq!(
            ini.feed(&reply).unwrap_err(),
            Error::MpaRevisionMismatch {
                requested: 1,
                replied: 2
            }
        );
    }

    #[test]
    fn reject_with_private_data_reaches_the_initiator() {
        let mut ini = MpaInitiator::new(InitiatorConfig::new(1, 1), b"let me in").unwrap();
        let mut res = MpaResponder::new(ResponderConfig::default());
        res.feed(ini.request()).unwrap();
        let reply = res.reject(b"go away").unwrap();
        assert_eq!(reply[16] & FLAG_REJECT, FLAG_REJECT);
        let (frame, _) = MpaFrame::parse(&reply).unwrap();
        assert!(frame.reject);
        assert_eq!(
            ini.feed(&reply).unwrap(),
            Some(InitiatorEvent::Rejected {
                private_data: b"go away".to_vec()
            })
        );
        assert!(res.negotiated().is_none());
        assert!(matches!(
            res.accept(&[], 1, 1),
            Err(Error::WrongState { .. })
        ));
    }

    #[test]
    fn responder_refuses_markers_with_a_reject_reply() {
        let mut req = Vec::from(REQUEST_KEY);
        req.extend_from_slice(&[FLAG_MARKERS | FLAG_CRC, 1, 0, 0]);
        let mut res = MpaResponder::new(ResponderConfig::default());
        match res.feed(&req).unwrap() {
            Some(ResponderEvent::Refused { reason, reply }) => {
                assert_eq!(
                    reason,
                    Error::MpaMarkersNotSupported {
                        kind: FrameKind::Request
                    }
                );
                let (frame, _) = MpaFrame::parse(&reply).unwrap();
                assert!(frame.reject);
                assert!(!frame.markers);
                assert_eq!(frame.revision, Revision::V1);
            }
            other => panic!("expected Refused, got {other:?}"),
        }
    }

    #[test]
    fn initiator_fails_a_reply_that_wants_markers() {
        let mut ini = MpaInitiator::new(InitiatorConfig::new(1, 1), &[]).unwrap();
        let mut reply = Vec::from(REPLY_KEY);
        reply.extend_from_slice(&[FLAG_MARKERS | FLAG_CRC, 1, 0, 0]);
        assert_eq!(
            ini.feed(&reply).unwrap_err(),
            Error::MpaMarkersNotSupported {
                kind: FrameKind::Reply
            }
        );
    }

    #[test]
    fn initiator_refuses_a_request_key_in_place_of_a_reply() {
        let mut ini = MpaInitiator::new(InitiatorConfig::new(1, 1), &[]).unwrap();
        let echo = ini.request().to_vec();
        assert_eq!(
            ini.feed(&echo).unwrap_err(),
            Error::MpaBadKey {
                expected: FrameKind::Reply
            }
        );
    }

    #[test]
    fn bytes_after_the_reply_are_handed_back_as_leftover() {
        let mut res = MpaResponder::new(ResponderConfig::default());
        let mut ini = MpaInitiator::new(InitiatorConfig::new(1, 1), &[]).unwrap();
        res.feed(ini.request()).unwrap();
        let mut stream = res.accept(b"pd", 1, 1).unwrap();
        let reply_len = stream.len();
        // The responder sends an FPDU straight behind its Reply.
        FpduEncoder::new(true)
            .encode_segment(&Segment::send_rtr(1), &mut stream)
            .unwrap();
        let a = accepted(ini.feed(&stream));
        assert_eq!(a.leftover, &stream[reply_len..]);
        let mut dec = FpduDecoder::new(a.negotiated.crc);
        dec.feed(&a.leftover);
        let u = dec.next_ulpdu().unwrap().unwrap();
        assert_eq!(Segment::parse(u).unwrap(), Segment::send_rtr(1));
    }

    #[test]
    fn reply_fed_one_byte_at_a_time_keeps_leftover_exact() {
        let mut res = MpaResponder::new(ResponderConfig::default());
        let mut ini = MpaInitiator::new(InitiatorConfig::new(1, 1), &[9; 10]).unwrap();
        for b in ini.request().to_vec() {
            if let Some(ev) = res.feed(&[b]).unwrap() {
                assert!(matches!(ev, ResponderEvent::Request(_)));
            }
        }
        let mut stream = res.accept(&[1, 2, 3], 1, 1).unwrap();
        let reply_len = stream.len();
        stream.extend_from_slice(&[0xEE, 0xFF]);
        let mut event = None;
        for (i, b) in stream[..reply_len].iter().enumerate() {
            let ev = ini.feed(&[*b]).unwrap();
            if i + 1 < reply_len {
                assert!(ev.is_none());
            } else {
                event = ev;
            }
        }
        match event {
            Some(InitiatorEvent::Accepted(a)) => {
                assert_eq!(a.private_data, [1, 2, 3]);
                assert!(a.leftover.is_empty());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bytes_behind_the_request_fail_the_responder() {
        let ini = MpaInitiator::new(InitiatorConfig::new(1, 1), &[]).unwrap();
        let mut res = MpaResponder::new(ResponderConfig::default());
        let mut stream = ini.request().to_vec();
        stream.push(0);
        assert_eq!(
            res.feed(&stream).unwrap_err(),
            Error::MpaDataAfterRequest { extra: 1 }
        );
        // Also when they arrive after the Request event but before accept.
        let mut res = MpaResponder::new(ResponderConfig::default());
        res.feed(ini.request()).unwrap();
        assert_eq!(
            res.feed(&[0, 0]).unwrap_err(),
            Error::MpaDataAfterRequest { extra: 2 }
        );
    }

    #[test]
    fn responder_accept_validates_arguments_and_state() {
        let mut res = MpaResponder::new(ResponderConfig::default());
        assert!(matches!(
            res.accept(&[], 1, 1),
            Err(Error::WrongState { .. })
        ));
        let ini = MpaInitiator::new(InitiatorConfig::new(1, 1), &[]).unwrap();
        res.feed(ini.request()).unwrap();
        assert!(matches!(
            res.accept(&[0; 253], 1, 1),
            Err(Error::PrivateDataTooLong { .. })
        ));
        assert!(matches!(
            res.accept(&[], 0x4000, 1),
            Err(Error::InvalidArgument { .. })
        ));
        assert!(res.accept(&[0; 252], 1, 1).is_ok());
        assert!(matches!(res.feed(&[1]), Err(Error::WrongState { .. })));
    }
}
