//! Input decoding and frame building: the operations of modes 2 and 3 ([`Op`]) read from an
//! input and turned into the FPDUs a peer sends (framed with the right MSN/MO/TO and CRC unless
//! an operation perturbs them) and into local actions; and the CRC fix-up of the raw mode 1.

use dapl::CloseFlags;
use iwarp::fpdu::fpdu_len;
use iwarp::rdmap::ReadRequest;
use iwarp::terminate::{TerminateCause, TerminateMessage};
use iwarp::{crc, FpduEncoder, Segment};

use super::{region_va, Run, SINK, STALE};

/// Rewrites the CRC trailer of every whole FPDU in `wire`, so that raw inputs get past the CRC
/// check; stops at the first incomplete frame.
pub fn fix_crcs(wire: &mut [u8]) {
    let mut at = 0;
    while at + 2 <= wire.len() {
        let total = fpdu_len(usize::from(u16::from_be_bytes([wire[at], wire[at + 1]])));
        let Some(frame) = wire.get_mut(at..at + total) else {
            return;
        };
        let covered = total - crc::CRC_LEN;
        let c = crc::to_wire(crc::crc32c(&frame[..covered]));
        frame[covered..].copy_from_slice(&c);
        at += total;
    }
}

/// Bytes of an input, read as fields; zeros once it runs out.
struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn op(&mut self) -> Option<u8> {
        let (&b, rest) = self.data.split_first()?;
        self.data = rest;
        Some(b)
    }

    fn u8(&mut self) -> u8 {
        self.op().unwrap_or(0)
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.data.len());
        let (a, b) = self.data.split_at(n);
        self.data = b;
        a
    }
}

/// The operations of modes 2 and 3: one byte, low nibble the kind, high nibble flags, then
/// the kind's fields. Peer operations append FPDUs (framed with the negotiated CRC) to the
/// stream; local operations first deliver what the stream holds, then act.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    /// `len(1) payload`: one Send segment continuing the peer's current message. Flags: 1 not
    /// last, 2 solicited, 4 with Invalidate (STag from the payload), 8 perturb (`d(1)`: MSN or MO
    /// off by `d/2 + 1`).
    Send = 0,
    /// `sel(1) off(2) len(1) payload`: one RDMA Write segment into region `sel % 9` (7: a stale
    /// STag, 8: the STag `u32` that follows) at `off`. Flags: 1 not last, 2 start a new message
    /// even if one is open, 4 `to(8)` follows and replaces the offset, 8 zero-length.
    Write = 1,
    /// `sel(1) off(2) size(2) sink(1)`: RDMA Read Request of region `sel % 9`. Flags: 1 the Read
    /// RTR form instead, 2 perturb the MSN, 4 `to(8)` follows.
    ReadRequest = 2,
    /// `len(1)`: one Read Response segment for our oldest unanswered read, with pattern bytes
    /// (`len` * 64 bytes for the large read). Flags: 1 not last (or, with 8, "last"), 2 wrong
    /// STag, 4 wrong offset, 8 length not clipped to the read.
    ReadResponse = 3,
    /// `layer(1) type(1) code(1)`: a Terminate. Flags: 1 it names a Read Request (carries its
    /// headers), 2 wrong MSN, 4 it carries a Send's DDP header.
    Terminate = 4,
    /// `len(1) bytes`: one FPDU around arbitrary ULPDU bytes.
    RawUlpdu = 5,
    /// `len(1) bytes`: bytes appended as they are.
    RawBytes = 6,
    /// Flips bit `flags & 7` of the last byte written (a CRC trailer, or the pad), unless it
    /// already went to the socket.
    Corrupt = 7,
    /// `total(2) seg(1) fill(1)`: a whole Send of `total % 2048` bytes in segments of `seg`
    /// bytes (at least a 64th of the total). Flags: 1 solicited, 2 an RFC 7306 Immediate Data
    /// message instead (the end of an RDMA Write with Immediate Data: immediate value
    /// `total << 16 | seg << 8 | fill`, write length `total`), 4 with 2: a 7-byte body, 8
    /// without 2: a Send with Invalidate, `inv(1)` follows: every segment names the STag of
    /// region `inv % 10` (as for a Write: 7 a stale STag, 8 the `u32` that follows; 9 the
    /// window, the only STag that can be invalidated).
    SendMessage = 8,
    /// `shape(1)`: post a receive (to the SRQ in SRQ mode).
    PostRecv = 9,
    /// `size(1) stag(4) to(2)`: post an RDMA read of `size` bytes. Flags: sink shape (3: the
    /// large sink, 8 KiB + `size` * 16 bytes, once per input).
    PostRead = 10,
    /// Time passes: RNR grace and linger expire.
    Tick = 11,
    /// Disconnect the endpoint. Flags: 1 graceful.
    Disconnect = 12,
    /// The peer sends its FIN.
    PeerFin = 13,
    /// Deliver what the stream holds now (a read boundary).
    Deliver = 14,
    /// `sel(1) off(2) total(2) seg(1)`: a whole RDMA Write of `total % 2048` pattern bytes in
    /// segments of `seg` bytes (at least a 64th of the total). Flags: 1 large: 8 KiB +
    /// `total % 8192` bytes in segments of `seg` * 64 bytes (0: one segment).
    WriteMessage = 15,
}

/// What the harness, playing a well-behaved peer, would send next.
#[derive(Default)]
pub(super) struct PeerState {
    pub(super) send_msn: u32,
    pub(super) send_mo: u32,
    pub(super) read_msn: u32,
    /// An open tagged message: (is a Read Response, STag, next TO).
    pub(super) tagged: Option<(bool, u32, u64)>,
    /// Our reads the peer answered completely, and bytes of the next.
    pub(super) answered: usize,
    pub(super) answer_got: u64,
}

impl Run<'_> {
    fn frame(&mut self, seg: &Segment<'_>) {
        FpduEncoder::new(self.crc)
            .encode_segment(seg, &mut self.wire)
            .expect("a generated segment frames");
    }

    fn target(&self, sel: u8, r: &mut Reader<'_>) -> (u32, u64) {
        match usize::from(sel) % 9 {
            i @ 0..=6 => (self.region(i).stag, region_va(i)),
            STALE => (self.h.stale_stag, region_va(STALE)),
            _ => (r.u32(), 0),
        }
    }

    pub(super) fn play_ops(&mut self, ops: &[u8]) {
        let mut r = Reader { data: ops };
        while let Some(op) = r.op() {
            let flags = op >> 4;
            match op & 0x0F {
                0 => self.op_send(flags, &mut r),
                1 => self.op_write(flags, &mut r),
                2 => self.op_read_request(flags, &mut r),
                3 => self.op_read_response(flags, &mut r),
                4 => self.op_terminate(flags, &mut r),
                5 => {
                    let n = usize::from(r.u8());
                    let bytes = r.bytes(n);
                    FpduEncoder::new(self.crc)
                        .encode(bytes, &[], &mut self.wire)
                        .expect("short ULPDU frames");
                }
                6 => {
                    let n = usize::from(r.u8());
                    self.wire.extend_from_slice(r.bytes(n));
                }
                7 => {
                    // Only a byte not yet written to the socket: one the link may have read
                    // already cannot change (the record of the stream would then differ from
                    // what the link got, and a placed byte would look unexplained).
                    if self.wire.len() > self.sent {
                        if let Some(b) = self.wire.last_mut() {
                            *b ^= 1 << (flags & 7);
                        }
                    }
                }
                8 => self.op_send_message(flags, &mut r),
                9 => {
                    let shape = usize::from(r.u8());
                    self.drive();
                    self.post_recv(shape);
                    self.drive();
                }
                10 => {
                    let (size, stag, to) = (r.u8(), r.u32(), u64::from(r.u16()));
                    self.drive();
                    self.post_read(size, stag, to, usize::from(flags));
                    self.drive();
                }
                11 => {
                    self.drive();
                    self.tick();
                }
                12 => {
                    self.drive();
                    if !self.freed {
                        let how = if flags & 1 != 0 {
                            CloseFlags::Graceful
                        } else {
                            CloseFlags::Abrupt
                        };
                        self.ep.disconnect(how).expect("disconnect");
                    }
                    self.drive();
                }
                13 => {
                    self.drive();
                    self.fin();
                }
                14 => self.drive(),
                _ => self.op_write_message(flags, &mut r),
            }
        }
    }

    fn op_send(&mut self, flags: u8, r: &mut Reader<'_>) {
        let n = usize::from(r.u8());
        let payload = r.bytes(n);
        let last = flags & 1 == 0;
        let (mut msn, mut mo) = (self.gen.send_msn, self.gen.send_mo);
        if flags & 8 != 0 {
            let d = r.u8();
            if d & 1 != 0 {
                msn = msn.wrapping_add(u32::from(d >> 1) + 1);
            } else {
                mo = mo.wrapping_add(u32::from(d >> 1) + 1);
            }
        }
        let invalidate_stag = (flags & 4 != 0).then(|| {
            let mut b = [0u8; 4];
            for (d, s) in b.iter_mut().zip(payload) {
                *d = *s;
            }
            u32::from_be_bytes(b)
        });
        self.frame(&Segment::Send {
            last,
            msn,
            mo,
            solicited: flags & 2 != 0,
            invalidate_stag,
            payload,
        });
        if last {
            self.gen.send_msn = self.gen.send_msn.wrapping_add(1);
            self.gen.send_mo = 0;
        } else {
            self.gen.send_mo = self.gen.send_mo.wrapping_add(n as u32);
        }
    }

    fn op_send_message(&mut self, flags: u8, r: &mut Reader<'_>) {
        if flags & 2 != 0 {
            let (total, seg, fill) = (r.u16(), r.u8(), r.u8());
            let mut body = Vec::with_capacity(8);
            body.extend_from_slice(
                &(u32::from(total) << 16 | u32::from(seg) << 8 | u32::from(fill)).to_be_bytes(),
            );
            body.extend_from_slice(&u32::from(total).to_be_bytes());
            if flags & 4 != 0 {
                body.pop(); // malformed: Immediate Data is exactly 8 bytes
            }
            let opcode = if flags & 1 != 0 { 0x49 } else { 0x48 };
            let mut ulpdu = vec![0x41, opcode, 0, 0, 0, 0, 0, 0, 0, 0];
            ulpdu.extend_from_slice(&self.gen.send_msn.to_be_bytes());
            ulpdu.extend_from_slice(&[0; 4]);
            ulpdu.extend_from_slice(&body);
            FpduEncoder::new(self.crc)
                .encode(&ulpdu, &[], &mut self.wire)
                .expect("short ULPDU frames");
            self.gen.send_msn = self.gen.send_msn.wrapping_add(1);
            self.gen.send_mo = 0;
            return;
        }
        let total = usize::from(r.u16() % 2048);
        // At most 64 segments: long runs of tiny FPDUs only cost time.
        let seg = usize::from(r.u8()).max(total / 64).max(1);
        let fill = r.u8();
        let invalidate_stag = (flags & 8 != 0).then(|| match r.u8() % 10 {
            9 => self.window,
            sel => self.target(sel, r).0,
        });
        let payload: Vec<u8> = (0..total).map(|i| fill.wrapping_add(i as u8)).collect();
        let mut off = 0;
        loop {
            let end = (off + seg).min(total);
            let last = end == total;
            self.frame(&Segment::Send {
                last,
                msn: self.gen.send_msn,
                mo: self.gen.send_mo,
                solicited: flags & 1 != 0,
                invalidate_stag,
                payload: &payload[off..end],
            });
            if last {
                self.gen.send_msn = self.gen.send_msn.wrapping_add(1);
                self.gen.send_mo = 0;
                return;
            }
            self.gen.send_mo = self.gen.send_mo.wrapping_add((end - off) as u32);
            off = end;
        }
    }

    fn op_write(&mut self, flags: u8, r: &mut Reader<'_>) {
        let sel = r.u8();
        let (stag, base) = self.target(sel, r);
        let off = u64::from(r.u16());
        let n = usize::from(r.u8());
        let to = if flags & 4 != 0 {
            u64::from(r.u32()) << 32 | u64::from(r.u32())
        } else {
            base.wrapping_add(off)
        };
        let payload = if flags & 8 != 0 { &[][..] } else { r.bytes(n) };
        let (stag, to) = match self.gen.tagged {
            Some((false, s, next)) if flags & 2 == 0 => (s, next),
            _ => (stag, to),
        };
        let last = flags & 1 == 0;
        self.frame(&Segment::Write {
            last,
            stag,
            to,
            payload,
        });
        self.gen.tagged = (!last).then(|| (false, stag, to.wrapping_add(payload.len() as u64)));
    }

    fn op_write_message(&mut self, flags: u8, r: &mut Reader<'_>) {
        let sel = r.u8();
        let (stag, base) = self.target(sel, r);
        let to = base.wrapping_add(u64::from(r.u16()));
        let (total, seg) = (r.u16(), r.u8());
        let (total, seg) = if flags & 1 != 0 {
            // Large: 8-16 KiB, in segments of `seg` * 64 bytes (0: one segment).
            let total = 8192 + usize::from(total % 8192);
            let seg = if seg == 0 {
                total
            } else {
                usize::from(seg) * 64
            };
            (total, seg)
        } else {
            (usize::from(total % 2048), usize::from(seg))
        };
        let seg = seg.max(total / 64).max(1);
        let payload: Vec<u8> = (0..total).map(|i| (i as u8) ^ 0x3C).collect();
        let mut off = 0;
        loop {
            let end = (off + seg).min(total);
            let last = end == total;
            self.frame(&Segment::Write {
                last,
                stag,
                to: to.wrapping_add(off as u64),
                payload: &payload[off..end],
            });
            if last {
                break;
            }
            off = end;
        }
        self.gen.tagged = None;
    }

    fn op_read_request(&mut self, flags: u8, r: &mut Reader<'_>) {
        let sel = r.u8();
        let (stag, base) = self.target(sel, r);
        let off = u64::from(r.u16());
        let size = u32::from(r.u16());
        let sink = 0x5100 | u32::from(r.u8());
        let to = if flags & 4 != 0 {
            u64::from(r.u32()) << 32 | u64::from(r.u32())
        } else {
            base.wrapping_add(off)
        };
        let mut msn = self.gen.read_msn;
        if flags & 2 != 0 {
            msn = msn.wrapping_add(1 + u32::from(r.u8()));
        }
        let seg = if flags & 1 != 0 {
            Segment::read_rtr(msn)
        } else {
            Segment::ReadRequest {
                msn,
                request: ReadRequest {
                    sink_stag: sink,
                    sink_to: u64::from(sink) << 20,
                    size,
                    source_stag: stag,
                    source_to: to,
                },
            }
        };
        self.frame(&seg);
        self.gen.read_msn = self.gen.read_msn.wrapping_add(1);
    }

    fn op_read_response(&mut self, flags: u8, r: &mut Reader<'_>) {
        let (stag, to0, size) = match self.reads.get(self.gen.answered) {
            Some(p) => (
                self.region(SINK).stag,
                self.region(SINK).real_addr(p.pieces[0].0),
                p.size,
            ),
            None => (self.region(SINK).stag, self.region(SINK).real_addr(0), 0),
        };
        // For the large read, lengths count in 64-byte units.
        let n = u64::from(r.u8()) * if size > 255 { 64 } else { 1 };
        let got = self.gen.answer_got;
        let len = if flags & 8 != 0 {
            n
        } else {
            n.min(size.saturating_sub(got))
        };
        let last = if flags & 8 != 0 {
            flags & 1 != 0
        } else {
            flags & 1 == 0 || got + len == size
        };
        let stag = if flags & 2 != 0 { stag ^ 0x100 } else { stag };
        let to = to0.wrapping_add(got) ^ u64::from(flags & 4);
        let payload: Vec<u8> = (0..len).map(|i| (got + i) as u8 ^ 0x5A).collect();
        self.frame(&Segment::ReadResponse {
            last,
            stag,
            to,
            payload: &payload,
        });
        if last {
            self.gen.answered += 1;
            self.gen.answer_got = 0;
        } else {
            self.gen.answer_got += len;
        }
    }

    fn op_terminate(&mut self, flags: u8, r: &mut Reader<'_>) {
        let cause = TerminateCause::from_wire(r.u8(), r.u8(), r.u8());
        let msn = if flags & 2 != 0 { 2 } else { 1 };
        let failed = if flags & 1 != 0 {
            Segment::ReadRequest {
                msn: 1,
                request: ReadRequest {
                    sink_stag: 0x0101,
                    sink_to: 0,
                    size: 8,
                    source_stag: 0x0202,
                    source_to: 0,
                },
            }
            .to_ulpdu()
        } else {
            Segment::send_rtr(1).to_ulpdu()
        }
        .expect("emit");
        let message = if flags & 5 != 0 {
            TerminateMessage::for_failed_segment(cause, &failed)
        } else {
            TerminateMessage::header_less(cause)
        };
        self.frame(&Segment::Terminate { msn, message });
    }
}
