//! # iwarp: a sans-IO iWARP wire codec
//!
//! The whole iWARP protocol stack above TCP, as pure functions and state machines in
//! the style of `quinn-proto` and smoltcp's `wire`: bytes in, events and bytes out. No
//! sockets, no threads, no clock, no `unsafe`. The companion document is
//! `shared/iwarp-wire.md` (frame layouts, what Linux siw and hardware RNICs do).
//!
//! Layers, bottom up, and the module that owns each:
//!
//! | module | protocol | owns |
//! |---|---|---|
//! | [`crc`] | RFC 5044 | CRC32c, little-endian on the wire |
//! | [`mpa`] | RFC 5044 / RFC 6581 | Request/Reply frames, CRC/IRD/ORD/RTR negotiation per role |
//! | [`fpdu`] | RFC 5044 | `ULPDU_Length | ULPDU | PAD | CRC` framing, streaming decoder |
//! | [`ddp`] | RFC 5041 | tagged / untagged headers |
//! | [`rdmap`] | RFC 5040, RFC 7306 | opcodes, Read Request header, Immediate Data, typed [`Segment`] view |
//! | [`terminate`] | RFC 5040 / 5041 / 5044 | Terminate causes and message body |
//! | [`segment`] | RFC 5041 | segmentation to MULPDU, MSN/MO/TO order checks |
//!
//! A connection, as the caller drives it:
//!
//! 1. Initiator: [`MpaInitiator::new`], send [`MpaInitiator::request`], feed received
//!    bytes to [`MpaInitiator::feed`] until [`mpa::InitiatorEvent::Accepted`]. Responder:
//!    feed [`MpaResponder::feed`] until [`mpa::ResponderEvent::Request`], then
//!    [`MpaResponder::accept`] or [`MpaResponder::reject`] and send the bytes returned.
//! 2. Both: build an [`FpduEncoder`] / [`FpduDecoder`] with the negotiated CRC setting;
//!    feed the Initiator's `leftover` to the decoder first. In peer-to-peer mode the
//!    Initiator's first FPDU is the chosen RTR ([`mpa::Rtr::segment`]).
//! 3. Send: split each message with [`segment::Segmenter`], frame each segment with
//!    [`FpduEncoder::encode_segment`]. Receive: [`FpduDecoder::next_ulpdu`] →
//!    [`Segment::parse`] → [`segment::UntaggedReassembly`] /
//!    [`segment::TaggedReassembly`].
//! 4. On any [`Error`] with a [`Error::terminate_cause`], send one Terminate
//!    ([`terminate::TerminateMessage::for_failed_segment`]) and close TCP.
//!
//! ## Quick start
//! Both ends of one connection in memory: the MPA handshake, then a 10,000-byte Send
//! segmented for a 1,460-byte MSS, framed with CRC, and decoded on the other side. A real
//! caller writes the same bytes to a TCP socket and feeds what it reads.
//!
//! ```
//! use iwarp::mpa::{InitiatorConfig, InitiatorEvent, ResponderConfig, ResponderEvent};
//! use iwarp::segment::{mulpdu_for_emss, OutboundMessage, Segmenter};
//! use iwarp::{FpduDecoder, FpduEncoder, MpaInitiator, MpaResponder, Segment};
//!
//! // MPA: the Initiator's Request, the Responder's Reply (each side's private data along).
//! let mut initiator = MpaInitiator::new(InitiatorConfig::new(4, 4), b"hello")?;
//! let mut responder = MpaResponder::new(ResponderConfig::default());
//! let Some(ResponderEvent::Request(request)) = responder.feed(initiator.request())? else {
//!     panic!("a whole Request was fed");
//! };
//! assert_eq!(request.private_data, b"hello");
//! let reply = responder.accept(b"welcome", 4, 4)?;
//! let Some(InitiatorEvent::Accepted(accepted)) = initiator.feed(&reply)? else {
//!     panic!("a whole Reply was fed");
//! };
//! assert!(accepted.negotiated.crc);
//!
//! // FPDUs: segment a Send to the connection's MULPDU, frame each segment.
//! let message: Vec<u8> = (0..10_000).map(|i| i as u8).collect();
//! let send = OutboundMessage::Send { msn: 1, solicited: false, invalidate_stag: None };
//! let encoder = FpduEncoder::new(accepted.negotiated.crc);
//! let mut stream = Vec::new();
//! for segment in Segmenter::new(send, &message, mulpdu_for_emss(1460))? {
//!     encoder.encode_segment(&segment, &mut stream)?;
//! }
//!
//! // The receiver: FPDUs out of the byte stream (CRC checked), segments out of FPDUs.
//! let mut decoder = FpduDecoder::new(accepted.negotiated.crc);
//! decoder.feed(&stream);
//! let mut received = Vec::new();
//! while let Some(ulpdu) = decoder.next_ulpdu()? {
//!     match Segment::parse(ulpdu)? {
//!         Segment::Send { msn: 1, mo, payload, .. } => {
//!             assert_eq!(mo as usize, received.len());
//!             received.extend_from_slice(payload);
//!         }
//!         other => panic!("unexpected {other:?}"),
//!     }
//! }
//! assert_eq!(received, message);
//! # Ok::<(), iwarp::Error>(())
//! ```
//!
//! RFC section numbers cited in module docs were written from memory of the RFCs and
//! follow `iwarp-wire.md`; where the two differ, the section title is the reference.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod crc;
pub mod ddp;
mod error;
pub mod fpdu;
pub mod fuzzing;
pub mod mpa;
pub mod rdmap;
pub mod segment;
pub mod terminate;

pub use error::Error;
pub use fpdu::{FpduDecoder, FpduEncoder};
pub use mpa::{MpaFrame, MpaInitiator, MpaResponder};
pub use rdmap::{Opcode, Segment};
pub use terminate::{Layer, TerminateCause, TerminateMessage};

/// Result with this crate's [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;
