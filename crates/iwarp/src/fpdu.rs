//! MPA FPDU framing over the TCP byte stream (RFC 5044, no markers).
//!
//! Owns: turning one DDP segment into `ULPDU_Length | ULPDU | PAD | CRC`
//! ([`FpduEncoder`]) and cutting a byte stream, arriving in any segmentation, back into
//! ULPDUs ([`FpduDecoder`]). RFC 5044 §4 "FPDU Formats" and "MPA CRC":
//!
//! - `ULPDU_Length` (16 bits) counts only the DDP segment.
//! - `PAD = (4 - (2 + ULPDU_Length) mod 4) mod 4` zero bytes, so every FPDU is a
//!   multiple of 4 bytes.
//! - The CRC32c covers length, ULPDU and pad, and goes little-endian on the wire
//!   ([`crate::crc`]). With CRC off the 4-byte field is still present: we send zeros and
//!   ignore what we receive (siw does the same).
//!
//! Must not: parse the ULPDU ([`crate::rdmap::Segment`]), negotiate CRC
//! ([`crate::mpa`]), or touch a socket. Markers are not supported (never negotiated).

use crate::crc::{self, Crc32c, CRC_LEN};
use crate::error::Error;
use crate::rdmap::{Segment, MAX_SEGMENT_HEADER_LEN};

/// Length of the ULPDU_Length field.
pub const LENGTH_FIELD_LEN: usize = 2;
/// Largest ULPDU the 16-bit length field can describe.
pub const MAX_ULPDU_LEN: usize = u16::MAX as usize;
/// Length field plus CRC: the framing overhead before padding.
pub const FRAMING_OVERHEAD: usize = LENGTH_FIELD_LEN + CRC_LEN;

const ZERO_PAD: [u8; 3] = [0; 3];

/// Pad bytes after a ULPDU of `ulpdu_len` bytes.
pub const fn pad_len(ulpdu_len: usize) -> usize {
    (4 - (LENGTH_FIELD_LEN + ulpdu_len) % 4) % 4
}

/// Total FPDU length for a ULPDU of `ulpdu_len` bytes.
pub const fn fpdu_len(ulpdu_len: usize) -> usize {
    LENGTH_FIELD_LEN + ulpdu_len + pad_len(ulpdu_len) + CRC_LEN
}

/// Builds FPDUs. Stateless apart from whether CRC was negotiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FpduEncoder {
    crc: bool,
}

impl FpduEncoder {
    /// An encoder; `crc` is the negotiated MPA CRC setting (the Reply's C bit).
    pub const fn new(crc: bool) -> Self {
        FpduEncoder { crc }
    }

    /// Whether CRCs are computed (otherwise the CRC field is sent as zeros).
    pub const fn crc_enabled(&self) -> bool {
        self.crc
    }

    /// Frame one DDP segment given as `header` followed by the `payload` pieces, writing
    /// into `out`. Returns the FPDU length. Does not allocate.
    pub fn encode_into(
        &self,
        header: &[u8],
        payload: &[&[u8]],
        out: &mut [u8],
    ) -> Result<usize, Error> {
        let ulpdu_len = header.len() + payload.iter().map(|p| p.len()).sum::<usize>();
        if ulpdu_len > MAX_ULPDU_LEN {
            return Err(Error::UlpduTooLong { len: ulpdu_len });
        }
        let total = fpdu_len(ulpdu_len);
        if out.len() < total {
            return Err(Error::BufferTooSmall {
                what: "FPDU",
                needed: total,
                available: out.len(),
            });
        }
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            out[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        // ulpdu_len <= u16::MAX was checked above.
        put(&(ulpdu_len as u16).to_be_bytes());
        put(header);
        for p in payload {
            put(p);
        }
        put(&ZERO_PAD[..pad_len(ulpdu_len)]);
        let crc_field = if self.crc {
            crc::to_wire(crc::crc32c(&out[..at]))
        } else {
            [0; CRC_LEN]
        };
        out[at..at + CRC_LEN].copy_from_slice(&crc_field);
        Ok(total)
    }

    /// Frame one DDP segment and append it to `out`. Returns the FPDU length.
    ///
    /// The CRC is computed while copying, so each byte is touched once; `out` grows at
    /// most once per call (reserve ahead to avoid even that).
    pub fn encode(
        &self,
        header: &[u8],
        payload: &[&[u8]],
        out: &mut Vec<u8>,
    ) -> Result<usize, Error> {
        let ulpdu_len = header.len() + payload.iter().map(|p| p.len()).sum::<usize>();
        if ulpdu_len > MAX_ULPDU_LEN {
            return Err(Error::UlpduTooLong { len: ulpdu_len });
        }
        let total = fpdu_len(ulpdu_len);
        out.reserve(total);
        let mut crc = Crc32c::new();
        let mut put = |bytes: &[u8]| {
            if self.crc {
                crc.update(bytes);
            }
            out.extend_from_slice(bytes);
        };
        put(&(ulpdu_len as u16).to_be_bytes());
        put(header);
        for p in payload {
            put(p);
        }
        put(&ZERO_PAD[..pad_len(ulpdu_len)]);
        let crc_field = if self.crc {
            crc.wire_bytes()
        } else {
            [0; CRC_LEN]
        };
        out.extend_from_slice(&crc_field);
        Ok(total)
    }

    /// Frame a typed segment and append it to `out`.
    pub fn encode_segment(&self, segment: &Segment<'_>, out: &mut Vec<u8>) -> Result<usize, Error> {
        let mut hdr = [0u8; MAX_SEGMENT_HEADER_LEN];
        let n = segment.emit_header(&mut hdr)?;
        self.encode(&hdr[..n], &[segment.payload()], out)
    }
}

/// Streaming FPDU parser: feed TCP bytes in any segmentation, take ULPDUs out.
///
/// Bytes are kept in one internal buffer that is reused across frames (compacted on
/// [`feed`](Self::feed)), and ULPDUs are handed out as slices borrowed from it, so a
/// steady stream allocates nothing per frame. After a CRC error the decoder stays
/// failed: the stream has lost framing and the connection must be terminated.
#[derive(Clone, Debug)]
pub struct FpduDecoder {
    crc: bool,
    buf: Vec<u8>,
    start: usize,
    failed: Option<Error>,
}

impl FpduDecoder {
    /// A decoder; `crc` is the negotiated MPA CRC setting.
    pub fn new(crc: bool) -> Self {
        FpduDecoder {
            crc,
            buf: Vec::new(),
            start: 0,
            failed: None,
        }
    }

    /// Whether received CRCs are checked.
    pub const fn crc_enabled(&self) -> bool {
        self.crc
    }

    /// Append received stream bytes (for example the MPA leftover, then each `read`).
    pub fn feed(&mut self, data: &[u8]) {
        if self.failed.is_some() || data.is_empty() {
            return;
        }
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// Bytes received but not yet returned as part of a ULPDU.
    pub fn buffered_len(&self) -> usize {
        self.buf.len() - self.start
    }

    /// True when no partial FPDU is buffered (the stream is at a frame boundary).
    pub fn is_at_boundary(&self) -> bool {
        self.buffered_len() == 0
    }

    /// The next complete ULPDU, `Ok(None)` if more bytes are needed, or the CRC error.
    /// The slice is valid until the next call on the decoder.
    pub fn next_ulpdu(&mut self) -> Result<Option<&[u8]>, Error> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        match split_fpdu(&self.buf[self.start..], self.crc) {
            Ok(None) => Ok(None),
            Ok(Some((ulpdu, total))) => {
                let begin = self.start + ulpdu.start;
                self.start += total;
                Ok(Some(&self.buf[begin..begin + ulpdu.len()]))
            }
            Err(e) => {
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }
}

/// Finds the first FPDU at the start of `buf` (a receive buffer the caller manages): returns
/// the ULPDU's byte range within `buf` and the FPDU's total length, `Ok(None)` if `buf` does not
/// hold the whole FPDU yet, or the CRC error (when `crc` is on). For callers that read the
/// stream into their own buffer; [`FpduDecoder`] is built on it.
pub fn split_fpdu(
    buf: &[u8],
    crc: bool,
) -> Result<Option<(core::ops::Range<usize>, usize)>, Error> {
    if buf.len() < LENGTH_FIELD_LEN {
        return Ok(None);
    }
    let ulpdu_len = u16::from_be_bytes([buf[0], buf[1]]) as usize;
    let total = fpdu_len(ulpdu_len);
    if buf.len() < total {
        return Ok(None);
    }
    if crc {
        let covered = total - CRC_LEN;
        let computed = crc::crc32c(&buf[..covered]);
        let received = crc::from_wire([
            buf[covered],
            buf[covered + 1],
            buf[covered + 2],
            buf[covered + 3],
        ]);
        if computed != received {
            return Err(Error::CrcMismatch { computed, received });
        }
    }
    Ok(Some((
        LENGTH_FIELD_LEN..LENGTH_FIELD_LEN + ulpdu_len,
        total,
    )))
}

/// Whether the CRC of `fpdu` (one whole FPDU: length field to CRC field) is the CRC of its
/// bytes with the DDP payload counted twice: length field, DDP/RDMAP header, payload,
/// payload again, pad. Linux siw (seen with 6.1) now and then sends a data FPDU so, its
/// payload itself right: two of its transmit paths (the posting system call and its
/// transmit thread) both add the payload to one FPDU's CRC (docs/interop-siw.md). Such a
/// frame is refused all the same (a CRC error ends the stream, RFC 5044); this only says
/// whose fault it was. False for anything shorter than its length field says, or without a
/// payload.
pub fn crc_counts_payload_twice(fpdu: &[u8]) -> bool {
    let Some(&[hi, lo, ctrl]) = fpdu.get(..3) else {
        return false;
    };
    let ulpdu_len = u16::from_be_bytes([hi, lo]) as usize;
    let total = fpdu_len(ulpdu_len);
    let header = crate::ddp::header_len_for_control(ctrl);
    if fpdu.len() < total || ulpdu_len <= header {
        return false;
    }
    let covered = total - CRC_LEN;
    let payload_end = LENGTH_FIELD_LEN + ulpdu_len;
    let payload = &fpdu[LENGTH_FIELD_LEN + header..payload_end];
    let mut c = Crc32c::new();
    c.update(&fpdu[..payload_end]);
    c.update(payload);
    c.update(&fpdu[payload_end..covered]);
    let received = crc::from_wire([
        fpdu[covered],
        fpdu[covered + 1],
        fpdu[covered + 2],
        fpdu[covered + 3],
    ]);
    c.value() == received
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdmap::ReadRequest;
    use crate::terminate::{LlpErrorCode, TerminateCause};

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    // iwarp-wire.md section 2.5: all four reported "Good CRC32" by tshark 4.0.17.
    const SEND_VECTOR: &str = "001f 4143 00000000 00000000 00000001 00000000 \
        48656c6c6f2c20695741525021 000000 1343081e";
    const WRITE_VECTOR: &str =
        "0020c140abcd0001000000000000100057524954452d5041594c4f41442d303132330000 6eba0132";
    const READ_REQUEST_VECTOR: &str = "002e 4141 00000000 00000001 00000001 00000000 00001234 \
        0000000000002000 00000008 00005678 0000000000003000 2fbbf6ee";
    const WRITE_RTR_VECTOR: &str = "000ec140000000010000000000000000ebd34c5f";

    fn vectors() -> [(Segment<'static>, Vec<u8>); 4] {
        [
            (
                Segment::Send {
                    last: true,
                    msn: 1,
                    mo: 0,
                    solicited: false,
                    invalidate_stag: None,
                    payload: b"Hello, iWARP!",
                },
                hex(SEND_VECTOR),
            ),
            (
                Segment::Write {
                    last: true,
                    stag: 0xabcd_0001,
                    to: 0x1000,
                    payload: b"WRITE-PAYLOAD-0123",
                },
                hex(WRITE_VECTOR),
            ),
            (
                Segment::ReadRequest {
                    msn: 1,
                    request: ReadRequest {
                        sink_stag: 0x1234,
                        sink_to: 0x2000,
                        size: 8,
                        source_stag: 0x5678,
                        source_to: 0x3000,
                    },
                },
                hex(READ_REQUEST_VECTOR),
            ),
            (Segment::write_rtr(), hex(WRITE_RTR_VECTOR)),
        ]
    }

    fn decode_one(crc: bool, wire: &[u8]) -> Vec<u8> {
        let mut d = FpduDecoder::new(crc);
        d.feed(wire);
        let u = d.next_ulpdu().unwrap().unwrap().to_vec();
        assert!(d.is_at_boundary());
        u
    }

    #[test]
    fn send_fpdu_matches_wire_doc_vector() {
        let [(seg, wire), ..] = vectors();
        let mut out = Vec::new();
        FpduEncoder::new(true)
            .encode_segment(&seg, &mut out)
            .unwrap();
        assert_eq!(out, wire);
        let ulpdu = decode_one(true, &wire);
        assert_eq!(Segment::parse(&ulpdu).unwrap(), seg);
    }

    #[test]
    fn all_wire_doc_vectors_emit_and_parse_byte_for_byte() {
        for (seg, wire) in vectors() {
            let enc = FpduEncoder::new(true);
            let mut out = Vec::new();
            let n = enc.encode_segment(&seg, &mut out).unwrap();
            assert_eq!(out, wire, "emit {seg:?}");
            assert_eq!(n, wire.len());
            assert_eq!(wire.len() % 4, 0, "FPDUs are 4-byte multiples");
            let mut fixed = [0u8; 128];
            let mut hdr = [0u8; MAX_SEGMENT_HEADER_LEN];
            let h = seg.emit_header(&mut hdr).unwrap();
            let m = enc
                .encode_into(&hdr[..h], &[seg.payload()], &mut fixed)
                .unwrap();
            assert_eq!(&fixed[..m], &wire[..], "encode_into {seg:?}");
            let ulpdu = decode_one(true, &wire);
            assert_eq!(Segment::parse(&ulpdu).unwrap(), seg, "parse {seg:?}");
        }
    }

    /// RFC 7306 Immediate Data, MSN 1, as dapl-rs sends it for an RDMA Write with Immediate
    /// (immediate 0x12345678, write length 0x1000; docs/architecture.md), CRC on. Computed,
    /// not checked by tshark (4.0.17 shows opcode 8 as "Unknown").
    const IMMEDIATE_DATA_VECTOR: &str =
        "001a 4148 00000000 00000000 00000001 00000000 12345678 00001000 66986f23";

    #[test]
    fn immediate_data_fpdu_is_26_byte_ulpdu_without_pad() {
        let seg = Segment::ImmediateData {
            msn: 1,
            solicited: false,
            data: [0x12, 0x34, 0x56, 0x78, 0x00, 0x00, 0x10, 0x00],
        };
        let wire = hex(IMMEDIATE_DATA_VECTOR);
        let mut out = Vec::new();
        let n = FpduEncoder::new(true)
            .encode_segment(&seg, &mut out)
            .unwrap();
        assert_eq!(out, wire);
        assert_eq!(n, 32);
        let ulpdu = decode_one(true, &wire);
        assert_eq!(Segment::parse(&ulpdu).unwrap(), seg);
    }

    #[test]
    fn crc_covers_length_ulpdu_and_pad() {
        let wire = hex(SEND_VECTOR);
        let covered = &wire[..wire.len() - 4];
        assert_eq!(
            crc::to_wire(crc::crc32c(covered)),
            [
                wire[wire.len() - 4],
                wire[wire.len() - 3],
                wire[wire.len() - 2],
                wire[wire.len() - 1]
            ]
        );
    }

    #[test]
    fn crc_off_sends_zero_crc_field_and_ignores_received_one() {
        let [(seg, wire), ..] = vectors();
        let mut out = Vec::new();
        FpduEncoder::new(false)
            .encode_segment(&seg, &mut out)
            .unwrap();
        assert_eq!(&out[..out.len() - 4], &wire[..wire.len() - 4]);
        assert_eq!(&out[out.len() - 4..], &[0, 0, 0, 0]);
        // A CRC-off receiver ignores whatever is in the field, even a valid CRC.
        assert_eq!(decode_one(false, &wire), decode_one(false, &out));
    }

    #[test]
    fn pad_makes_every_fpdu_a_multiple_of_four() {
        for len in 0..64 {
            assert_eq!(fpdu_len(len) % 4, 0);
            assert!(pad_len(len) < 4);
        }
        assert_eq!(pad_len(46), 0);
        assert_eq!(pad_len(31), 3);
    }

    #[test]
    fn decoder_fed_one_byte_at_a_time_yields_every_ulpdu() {
        let mut stream = Vec::new();
        for (_, wire) in vectors() {
            stream.extend_from_slice(&wire);
        }
        let mut d = FpduDecoder::new(true);
        let mut got = Vec::new();
        for b in &stream {
            d.feed(std::slice::from_ref(b));
            while let Some(u) = d.next_ulpdu().unwrap() {
                got.push(Segment::parse(u).unwrap().opcode());
            }
        }
        assert_eq!(got.len(), 4);
        assert!(d.is_at_boundary());
    }

    #[test]
    fn decoder_handles_many_fpdus_in_one_feed() {
        let mut stream = Vec::new();
        for (_, wire) in vectors() {
            stream.extend_from_slice(&wire);
        }
        stream.extend_from_slice(&stream.clone());
        let mut d = FpduDecoder::new(true);
        d.feed(&stream[..stream.len() - 3]);
        let mut n = 0;
        while d.next_ulpdu().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, 7);
        d.feed(&stream[stream.len() - 3..]);
        assert!(d.next_ulpdu().unwrap().is_some());
        assert!(d.next_ulpdu().unwrap().is_none());
    }

    #[test]
    fn bad_crc_is_detected_and_maps_to_llp_crc_error() {
        let mut wire = hex(WRITE_VECTOR);
        wire[10] ^= 0x01; // flip one bit in the STag/TO area
        let mut d = FpduDecoder::new(true);
        d.feed(&wire);
        let e = d.next_ulpdu().unwrap_err();
        assert!(matches!(e, Error::CrcMismatch { .. }));
        assert_eq!(
            e.terminate_cause(),
            Some(TerminateCause::Llp(LlpErrorCode::CrcError))
        );
        // The decoder stays failed.
        d.feed(&hex(WRITE_RTR_VECTOR));
        assert_eq!(d.next_ulpdu().unwrap_err(), e);
    }

    /// siw's defect as captured (2026-11-28): a tagged Write FPDU whose CRC covers its payload
    /// twice is recognised, its pad too; a right CRC or another wrong one is not.
    #[test]
    fn a_crc_that_counts_the_payload_twice_is_recognised() {
        for payload_len in [1usize, 3, 1436] {
            let mut f = Vec::new();
            let ulpdu_len = crate::ddp::TAGGED_HEADER_LEN + payload_len;
            f.extend_from_slice(&(ulpdu_len as u16).to_be_bytes());
            f.extend_from_slice(&[
                0x81, 0x40, 0, 0, 4, 1, 0, 0, 0x56, 0x1c, 0x34, 0x61, 0xb3, 0x80,
            ]);
            f.extend((0..payload_len).map(|i| b'A' + (i % 58) as u8));
            f.resize(fpdu_len(ulpdu_len) - CRC_LEN, 0); // pad
            let payload_end = LENGTH_FIELD_LEN + ulpdu_len;
            let mut twice = Crc32c::new();
            twice.update(&f[..payload_end]);
            twice.update(&f[LENGTH_FIELD_LEN + crate::ddp::TAGGED_HEADER_LEN..payload_end]);
            twice.update(&f[payload_end..]);
            let right = crc::crc32c(&f);
            let mut bad = f.clone();
            bad.extend_from_slice(&twice.wire_bytes());
            assert!(crc_counts_payload_twice(&bad), "payload of {payload_len}");
            assert!(matches!(
                split_fpdu(&bad, true),
                Err(Error::CrcMismatch { .. })
            ));
            let mut good = f.clone();
            good.extend_from_slice(&crc::to_wire(right));
            assert!(!crc_counts_payload_twice(&good));
            let mut other = f.clone();
            other.extend_from_slice(&crc::to_wire(right ^ 1));
            assert!(!crc_counts_payload_twice(&other));
            assert!(
                !crc_counts_payload_twice(&bad[..bad.len() - 1]),
                "cut short"
            );
        }
        assert!(!crc_counts_payload_twice(&[0, 1]));
    }

    #[test]
    fn big_endian_crc_is_rejected() {
        let mut wire = hex(WRITE_RTR_VECTOR);
        let n = wire.len();
        wire[n - 4..].reverse();
        let mut d = FpduDecoder::new(true);
        d.feed(&wire);
        assert!(matches!(d.next_ulpdu(), Err(Error::CrcMismatch { .. })));
    }

    #[test]
    fn encoder_refuses_oversized_ulpdu_and_small_buffers() {
        let big = vec![0u8; MAX_ULPDU_LEN];
        let enc = FpduEncoder::new(true);
        assert!(matches!(
            enc.encode(&[0u8; 14], &[&big], &mut Vec::new()),
            Err(Error::UlpduTooLong { .. })
        ));
        let mut small = [0u8; 8];
        assert!(matches!(
            enc.encode_into(&[0u8; 14], &[], &mut small),
            Err(Error::BufferTooSmall { .. })
        ));
        // The largest legal ULPDU frames fine.
        let mut out = Vec::new();
        let n = enc.encode(&[], &[&big], &mut out).unwrap();
        assert_eq!(n, fpdu_len(MAX_ULPDU_LEN));
        let mut d = FpduDecoder::new(true);
        d.feed(&out);
        assert_eq!(d.next_ulpdu().unwrap().unwrap().len(), MAX_ULPDU_LEN);
    }
}
