//! The receive side of a QP: what links call with the peer's messages. Every tagged access and
//! read request is checked against the memory table before a byte moves.

use super::{Qp, QpCore, ReadWork, RecvOp, RecvWr, SendWr};
use crate::engine::port::{InlineOutcome, OutMsg, Payload};
use crate::mem::region::RegionMemory;
use crate::mem::{seg_span, InvalidateFault, RemoteFault, Seg};
use crate::types::{DtoStatus, EpState, MemPriv};

impl Qp {
    fn rx_connected(c: &QpCore) -> bool {
        matches!(c.state, EpState::Connected | EpState::DisconnectPending)
    }

    /// Inbound Send: takes the next receive buffer (own queue or SRQ) and places the message.
    /// A Send with Invalidate (`invalidate`: the STag) then invalidates it as
    /// [`Qp::rx_send_placed`] does before the receive completes.
    pub(crate) fn rx_send(
        &self,
        solicited: bool,
        invalidate: Option<u32>,
        payload: Payload<'_>,
    ) -> RxSend {
        let mut c = self.lock();
        let Some(wr) = self.take_recv_connected(&mut c) else {
            return RxSend::NoBuffer;
        };
        let recv_flags = c.attr.recv_completion_flags;
        let len = payload.len();
        if len > wr.total {
            drop(c);
            self.complete_recv(&wr, DtoStatus::LocalLength, 0, true, recv_flags);
            return RxSend::TooLong;
        }
        if !scatter(payload, &wr.segs) {
            drop(c);
            self.complete_recv(&wr, DtoStatus::LocalProtection, 0, true, recv_flags);
            return RxSend::Revoked;
        }
        drop(c);
        match self.finish_send(&wr, len, solicited, recv_flags, invalidate) {
            Ok(()) => RxSend::Placed,
            Err(f) => RxSend::NotInvalidated(f),
        }
    }

    /// Completes a receive whose Send was placed whole (taken by [`Qp::rx_send_take`]). For a
    /// Send with Invalidate (`invalidate`: the STag, RFC 5040) the STag is invalidated first,
    /// in the memory table, for this QP's PZ: only a bound RMR's can be (an LMR's, an unknown
    /// one or another PZ's is refused); the receive then completes as RECEIVE_WITH_INVALIDATE
    /// carrying it, and any later access with it is refused as an invalid STag. A refused
    /// invalidation completes the receive with REMOTE_RESPONDER (siw's `IB_WC_REM_INV_REQ_ERR`,
    /// which the reference DAT provider maps so) and returns the fault: the link must then
    /// end the connection as for any refused remote access (tcp: Terminate RDMAP "STag
    /// cannot be invalidated").
    pub(crate) fn rx_send_placed(
        &self,
        wr: &RecvWr,
        len: u64,
        solicited: bool,
        invalidate: Option<u32>,
    ) -> Result<(), InvalidateFault> {
        let recv_flags = self.recv_flags();
        self.finish_send(wr, len, solicited, recv_flags, invalidate)
    }

    fn finish_send(
        &self,
        wr: &RecvWr,
        len: u64,
        solicited: bool,
        recv_flags: crate::types::CompletionFlags,
        invalidate: Option<u32>,
    ) -> Result<(), InvalidateFault> {
        let Some(stag) = invalidate else {
            self.complete_recv(wr, DtoStatus::Success, len, solicited, recv_flags);
            return Ok(());
        };
        match self.memtable.invalidate(stag, self.pz_id) {
            Ok(()) => {
                self.complete_recv_as(
                    wr,
                    DtoStatus::Success,
                    len,
                    solicited,
                    recv_flags,
                    RecvOp::Invalidated(Some(stag)),
                );
                Ok(())
            }
            Err(f) => {
                self.complete_recv_as(
                    wr,
                    DtoStatus::RemoteResponder,
                    0,
                    true,
                    recv_flags,
                    RecvOp::Invalidated(None),
                );
                Err(f)
            }
        }
    }

    /// Inbound RDMA Write: checked against the memory table, then placed.
    pub(crate) fn rx_write(
        &self,
        stag: u32,
        to: u64,
        payload: Payload<'_>,
    ) -> std::result::Result<(), RxWriteFault> {
        self.rx_write_with(stag, to, payload.len(), |seg| {
            scatter(payload, std::slice::from_ref(seg))
        })
    }

    /// [`Qp::rx_write`] for a link that places the payload itself (e.g. reads it from its
    /// socket straight into the region): the whole range `to..to+len` is checked (STag, PZ,
    /// REMOTE_WRITE, bounds) and the connection too, then `fill` gets the destination and
    /// returns false if it found the region revoked (deregistered since it was resolved): that
    /// is refused as an invalid STag, as it would have been a moment later. A link that places
    /// part of it calls again for the rest, which is checked again.
    pub(crate) fn rx_write_with(
        &self,
        stag: u32,
        to: u64,
        len: u64,
        fill: impl FnOnce(&Seg) -> bool,
    ) -> std::result::Result<(), RxWriteFault> {
        let seg = self
            .memtable
            .resolve_remote(stag, to, len, self.pz_id, MemPriv::REMOTE_WRITE)
            .map_err(RxWriteFault::Access)?;
        {
            let c = self.lock();
            if !Self::rx_connected(&c) {
                // The connection ended under the write: a flush, not a protection error.
                return Err(RxWriteFault::NotConnected);
            }
        }
        if !fill(&seg) {
            return Err(RxWriteFault::Access(RemoteFault::InvalidStag));
        }
        Ok(())
    }

    /// Inbound RDMA Write with Immediate Data, whole (links that deliver whole messages): the
    /// write is checked against the memory table (a zero-length one is not: nothing is placed,
    /// as a byte-stream link skips an empty Write), then, as for an inbound Send, it takes the
    /// next receive buffer (own queue or SRQ); only then is the data placed, and the receive
    /// completes as RECV_IMMED with `immediate` and the write's length. With no buffer nothing
    /// is placed and the sender waits (RNR), exactly as for a Send.
    pub(crate) fn rx_write_immed(
        &self,
        stag: u32,
        to: u64,
        payload: Payload<'_>,
        immediate: u32,
        solicited: bool,
    ) -> RxWriteImmed {
        let len = payload.len();
        let seg = if len == 0 {
            None
        } else {
            match self
                .memtable
                .resolve_remote(stag, to, len, self.pz_id, MemPriv::REMOTE_WRITE)
            {
                Ok(seg) => Some(seg),
                Err(f) => return RxWriteImmed::Access(f),
            }
        };
        let mut c = self.lock();
        let Some(wr) = self.take_recv_connected(&mut c) else {
            return RxWriteImmed::NoBuffer;
        };
        let recv_flags = c.attr.recv_completion_flags;
        if seg
            .as_ref()
            .is_some_and(|seg| !scatter(payload, std::slice::from_ref(seg)))
        {
            // The sink was deregistered since it was resolved: refused as an invalid STag
            // (the connection ends); the receive it took is flushed, first of its queue.
            drop(c);
            self.complete_recv(&wr, DtoStatus::Flushed, 0, true, recv_flags);
            return RxWriteImmed::Access(RemoteFault::InvalidStag);
        }
        drop(c);
        self.complete_recv_as(
            &wr,
            DtoStatus::Success,
            len,
            solicited,
            recv_flags,
            RecvOp::Immed(immediate),
        );
        RxWriteImmed::Placed
    }

    /// Inbound RDMA Read Request: checked (IRD, STag, PZ, REMOTE_READ, bounds), then, if it
    /// arrived `alone` (nothing received with it waits to be handled), answered at once by the
    /// link if it can ([`Qp::respond_inline`]), else queued for the transmit side and pumped.
    /// Not alone: only queued; the link calls [`Qp::pump`] once it has handled what it
    /// received at once, so that the responses to several Read Requests go out together. The
    /// transmit side sends queued responses in request order.
    pub(crate) fn rx_read_request(
        &self,
        sink_stag: u32,
        sink_to: u64,
        len: u64,
        src_stag: u32,
        src_to: u64,
        alone: bool,
    ) -> std::result::Result<(), RxReadFault> {
        let seg = self
            .memtable
            .resolve_remote(src_stag, src_to, len, self.pz_id, MemPriv::REMOTE_READ)
            .map_err(RxReadFault::Access)?;
        let mut c = self.lock();
        if !Self::rx_connected(&c) {
            return Err(RxReadFault::NotConnected);
        }
        if c.irq.len() >= c.ird {
            return Err(RxReadFault::IrdExceeded);
        }
        if alone && self.respond_inline(&c, sink_stag, sink_to, &seg) {
            return Ok(());
        }
        c.irq.push_back(ReadWork {
            sink_stag,
            sink_to,
            seg,
        });
        drop(c);
        if alone {
            self.pump();
        }
        Ok(())
    }

    /// Offers the response to a Read Request straight to the link, under the QP's lock (`c`),
    /// when nothing of this QP's waits to be transmitted or is being transmitted (no response
    /// queued before it, an empty send queue, the transmit turn idle): what
    /// [`Qp::transmit_inline`] does for a post, for the responder of a lone small read, whose
    /// answer then takes no queue, no turn and no pump. Responses stay in request order: one
    /// is answered here only when none is queued. True if the link wrote it (or kept it as
    /// its own backlog); false: queue it.
    fn respond_inline(&self, c: &QpCore, sink_stag: u32, sink_to: u64, seg: &Seg) -> bool {
        if !c.conn_inlines.responses || !self.transmit_idle(c) {
            return false;
        }
        let Some(conn) = c.conn.as_ref() else {
            return false;
        };
        // A link that takes responses this way only writes them (no outcome but taken or not).
        let taken = conn.transmit_inline(&OutMsg::ReadResponse {
            sink_stag,
            sink_to,
            payload: Payload::Segs(std::slice::from_ref(seg)),
        }) == InlineOutcome::Taken;
        #[cfg(feature = "testing")]
        if taken {
            super::INLINE_RESPONSES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        taken
    }

    /// Inbound RDMA Read Response: matched to the oldest outstanding read and placed into its
    /// local iov. Returns false on a protocol error (no read outstanding, or wrong length).
    pub(crate) fn rx_read_response(&self, payload: Payload<'_>) -> RxResponse {
        let wr = {
            let mut c = self.lock();
            if !Self::rx_connected(&c) {
                // The connection ended under the response (the read was flushed).
                return RxResponse::NotConnected;
            }
            let Some(head) = c.orq.front() else {
                return RxResponse::Unexpected;
            };
            let len = payload.len();
            if len != head.remote.segment_length || len > head.total {
                return RxResponse::Unexpected;
            }
            if !scatter(payload, &head.segs) {
                return RxResponse::Revoked; // the read stays outstanding: the break flushes it
            }
            c.reads_completing += 1;
            c.orq.pop_front().expect("head exists")
        };
        self.read_done(&wr);
        RxResponse::Placed
    }

    // Streamed receive side: byte-stream links deliver a message segment by segment.

    /// First segment of an inbound Send: takes the receive buffer (own queue or SRQ) that the
    /// whole message goes into. On `NoBuffer` the peer is marked waiting, so a post wakes the
    /// link through [`Connection::wake_peer`].
    pub(crate) fn rx_send_take(&self) -> RxTake {
        let took = {
            let mut c = self.lock();
            if !Self::rx_connected(&c) {
                return RxTake::NotConnected;
            }
            match self.take_recv(&mut c) {
                Some(wr) => RxTake::Buffer(wr),
                None => RxTake::NoBuffer,
            }
        };
        self.raise_soft_high();
        took
    }

    /// The next receive buffer (own queue or SRQ); with none, the peer is marked waiting.
    /// [`take_recv`](Self::take_recv) for a message placed at once (loopback): also `None`,
    /// with the peer waiting, while not connected yet (the accept is still settling).
    fn take_recv_connected(&self, c: &mut QpCore) -> Option<RecvWr> {
        if !Self::rx_connected(c) {
            // Not listed on an SRQ: the accept's end wakes the peer (loopback's
            // `wake_from_peer`), whatever a post would.
            c.peer_waiting = true;
            return None;
        }
        self.take_recv(c)
    }

    fn take_recv(&self, c: &mut QpCore) -> Option<RecvWr> {
        let wr = match &self.srq {
            None => c.rq.pop_front(),
            Some(srq) => {
                let wr = srq.take(self.id);
                if let Some(w) = &wr {
                    self.srq_held
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    self.srq_held_bytes
                        .fetch_add(w.total, std::sync::atomic::Ordering::Relaxed);
                    self.check_soft_high(c);
                }
                wr
            }
        };
        if wr.is_none() {
            c.peer_waiting = true;
        }
        wr
    }

    /// Completes a receive taken by [`Qp::rx_send_take`] with an error (or a flush) status;
    /// a receive whose Send was placed whole completes through [`Qp::rx_send_placed`].
    pub(crate) fn rx_send_done(&self, wr: &RecvWr, status: DtoStatus, len: u64, solicited: bool) {
        let recv_flags = self.recv_flags();
        self.complete_recv(wr, status, len, solicited, recv_flags);
    }

    /// Completes a receive taken by [`Qp::rx_send_take`] for an inbound RFC 7306 Immediate
    /// Data message that ends an RDMA Write with Immediate Data (its data was placed before, in
    /// stream order): RECV_IMMED with `immediate` and the write's length `len`.
    pub(crate) fn rx_immed_done(&self, wr: &RecvWr, immediate: u32, len: u64, solicited: bool) {
        let recv_flags = self.recv_flags();
        self.complete_recv_as(
            wr,
            DtoStatus::Success,
            len,
            solicited,
            recv_flags,
            RecvOp::Immed(immediate),
        );
    }

    /// One segment of an inbound RDMA Read Response: placed into the oldest outstanding read
    /// at the offset its tagged offset names. Segments must continue the read in order, carry
    /// the read's sink STag and not run past its length; `last` must end it exactly.
    pub(crate) fn rx_read_response_segment(
        &self,
        stag: u32,
        to: u64,
        bytes: &[u8],
        last: bool,
    ) -> RxResponse {
        self.rx_read_response_with(stag, to, bytes.len() as u64, last, |segs, at| {
            place_at(bytes, segs, at).ok().map(|()| bytes.len() as u64)
        })
    }

    /// [`Qp::rx_read_response_segment`] for a link that places the `len` payload bytes
    /// itself: the segment is checked against the oldest outstanding read (STag, TO, length,
    /// `last` ending it exactly), then `fill(sink, offset)` places a prefix of it into the
    /// read's scatter list `sink` from byte `offset` on, under the endpoint's lock (a flush
    /// cannot complete the read meanwhile), and returns how many bytes it placed, or None if
    /// it found the sink revoked (its LMR freed while the read was outstanding: `Revoked`, the
    /// read stays outstanding and the link ends the connection, which flushes it). The read
    /// completes once a `last` segment is placed whole; a link that placed part of it calls
    /// again for the rest.
    pub(crate) fn rx_read_response_with(
        &self,
        stag: u32,
        to: u64,
        len: u64,
        last: bool,
        fill: impl FnOnce(&[Seg], u64) -> Option<u64>,
    ) -> RxResponse {
        let wr = {
            let mut c = self.lock();
            if !Self::rx_connected(&c) {
                return RxResponse::NotConnected;
            }
            let Some(head) = c.orq.front_mut() else {
                return RxResponse::Unexpected;
            };
            let want = head.remote.segment_length;
            let got = head.resp_got;
            let end = got.checked_add(len);
            if stag != head.sink_stag
                || head.sink_to.checked_add(got) != Some(to)
                || end.is_none_or(|e| e > want || e > head.total)
                || (last && end != Some(want))
            {
                return RxResponse::Unexpected;
            }
            let Some(placed) = fill(&head.segs, got) else {
                return RxResponse::Revoked;
            };
            let placed = placed.min(len);
            head.resp_got = got + placed;
            if !last || placed < len {
                return RxResponse::Placed;
            }
            c.reads_completing += 1;
            c.orq.pop_front().expect("head exists")
        };
        self.read_done(&wr);
        RxResponse::Placed
    }

    /// Reports a read taken off the ORQ (counted in `reads_completing` when it was taken), then
    /// lets the send queue go on. Until the completion is queued, a BARRIER_FENCE request (and
    /// a graceful disconnect) still waits: it must not complete before the read it waited for.
    fn read_done(&self, wr: &SendWr) {
        self.complete_send(wr, DtoStatus::Success, wr.remote.segment_length);
        self.lock().reads_completing -= 1;
        self.pump();
    }

    /// The peer refused the oldest outstanding read (its Terminate names a Read Request): it
    /// completes with `status` before the connection's end flushes the rest.
    pub(crate) fn fail_oldest_read(&self, status: DtoStatus) {
        let wr = self.lock().orq.pop_front();
        if let Some(wr) = wr {
            self.complete_send(&wr, status, 0);
        }
    }
}

/// What an inbound Send found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxSend {
    /// Placed and completed.
    Placed,
    /// No receive buffer was posted (RNR): the sender waits for a wake.
    NoBuffer,
    /// The message was longer than the receive buffer: completed with LENGTH_ERROR.
    TooLong,
    /// The receive buffer's memory was deregistered (its LMR freed while the receive was
    /// posted): completed with LOCAL_PROTECTION, nothing placed; the connection must end.
    Revoked,
    /// A Send with Invalidate named an STag that cannot be invalidated: placed, but completed
    /// with REMOTE_RESPONDER; the connection must end.
    NotInvalidated(InvalidateFault),
}

/// What an inbound RDMA Write with Immediate Data found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxWriteImmed {
    /// Placed, and a receive buffer completed with the immediate data.
    Placed,
    /// No receive buffer was posted (RNR): nothing was placed; the sender waits for a wake.
    NoBuffer,
    /// The memory table refused the sink.
    Access(RemoteFault),
}

/// What the first segment of an inbound Send found.
#[allow(clippy::large_enum_variant)] // returned once per message, moved straight out
pub(crate) enum RxTake {
    /// This receive buffer takes the message.
    Buffer(RecvWr),
    /// No receive buffer is posted: the peer is marked waiting.
    NoBuffer,
    /// The endpoint is not connected (any more).
    NotConnected,
}

/// What an inbound RDMA Read Response found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxResponse {
    /// Placed into the oldest outstanding read (which completed if it was its end).
    Placed,
    /// The endpoint is not connected (any more).
    NotConnected,
    /// No read was outstanding, or the length is wrong: a protocol error.
    Unexpected,
    /// The read's sink memory was deregistered (its LMR freed while the read was
    /// outstanding): not (all) placed; the connection must end, which flushes the read.
    Revoked,
}

/// Why an inbound RDMA Write was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxWriteFault {
    /// The memory table refused the sink.
    Access(RemoteFault),
    /// The endpoint is not connected (any more).
    NotConnected,
}

/// Why an inbound RDMA Read Request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RxReadFault {
    /// The memory table refused the source.
    Access(RemoteFault),
    /// More reads outstanding than the negotiated IRD.
    IrdExceeded,
    /// The endpoint is not connected.
    NotConnected,
}

/// Why [`place_at`] placed nothing, or not everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PlaceFault {
    /// The bytes do not fit (nothing was copied).
    TooLong,
    /// A segment's region was revoked (deregistered since it was resolved): the copy stopped
    /// there.
    Revoked,
}

/// Copies `bytes` into the scatter list `dst` starting `offset` bytes into it.
pub(crate) fn place_at(bytes: &[u8], dst: &[Seg], offset: u64) -> Result<(), PlaceFault> {
    place_with(bytes.len(), dst, offset, |d, to, from, k| {
        d.region.copy_in(to, &bytes[from..from + k])
    })
}

/// Copies the `len` bytes at `at` of `src` into the scatter list `dst` starting `offset`
/// bytes into it, region to region: [`place_at`] for a link whose payload lies in memory of
/// its own (the shm link's receive ring), without copying it out first. The caller has
/// checked that `src` holds the range (else the copy is refused as `Revoked`).
pub(crate) fn place_from(
    src: &RegionMemory,
    at: usize,
    len: usize,
    dst: &[Seg],
    offset: u64,
) -> Result<(), PlaceFault> {
    debug_assert!(at.checked_add(len).is_some_and(|end| end <= src.len()));
    place_with(len, dst, offset, |d, to, from, k| {
        src.copy_to(at + from, &d.region, to, k)
    })
}

/// The placement of `len` bytes into `dst` from byte `offset` on, whatever holds them:
/// `copy(segment, offset in its region, offset in the source, length)` copies one piece and
/// returns false if it found the segment's region revoked. Nothing is copied if they do not
/// fit.
fn place_with(
    len: usize,
    dst: &[Seg],
    offset: u64,
    mut copy: impl FnMut(&Seg, usize, usize, usize) -> bool,
) -> Result<(), PlaceFault> {
    let total: u64 = dst.iter().map(|s| s.len as u64).sum();
    if offset.checked_add(len as u64).is_none_or(|end| end > total) {
        return Err(PlaceFault::TooLong);
    }
    let mut from = 0;
    for (i, at, k) in seg_span(dst, offset, len) {
        let d = &dst[i];
        // The range is inside the segment (seg_span), so only revocation refuses it.
        if !copy(d, d.offset + at, from, k) {
            return Err(PlaceFault::Revoked);
        }
        from += k;
    }
    Ok(())
}

/// Copies `src` into the scatter list `dst` in order: front segments full, at most one partial,
/// the rest untouched. The caller has checked that `src` fits; false if a region (of `src` or
/// `dst`) was revoked, where the copy stopped.
#[must_use]
fn scatter(src: Payload<'_>, dst: &[Seg]) -> bool {
    let mut di = 0usize; // destination segment
    let mut doff = 0usize; // offset inside it
    let mut put = |copy: &mut dyn FnMut(&Seg, usize, usize, usize) -> bool, mut n: usize| {
        let mut soff = 0usize;
        while n > 0 && di < dst.len() {
            let d = &dst[di];
            let room = d.len - doff;
            let k = room.min(n);
            if !copy(d, d.offset + doff, soff, k) {
                return false;
            }
            doff += k;
            soff += k;
            n -= k;
            if doff == d.len {
                di += 1;
                doff = 0;
            }
        }
        true
    };
    match src {
        Payload::Bytes(b) => place_at(b, dst, 0) == Ok(()),
        Payload::Segs(ss) => ss.iter().all(|s| {
            put(
                &mut |d, at, so, k| s.region.copy_to(s.offset + so, &d.region, at, k),
                s.len,
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn region(bytes: &[u8]) -> Arc<RegionMemory> {
        let r = RegionMemory::allocate(bytes.len()).expect("memory");
        assert!(r.copy_in(0, bytes));
        Arc::new(r)
    }

    fn bytes_of(r: &RegionMemory) -> Vec<u8> {
        let mut v = vec![0; r.len()];
        assert!(r.copy_out(0, &mut v));
        v
    }

    /// Two segments: 5 bytes at offset 3 of one region, 4000 at offset 8 of another.
    fn sink() -> (Arc<RegionMemory>, Arc<RegionMemory>, Vec<Seg>) {
        let (x, y) = (region(&[0xee; 16]), region(&[0xee; 4096]));
        let segs = vec![
            Seg {
                region: x.clone(),
                offset: 3,
                len: 5,
            },
            Seg {
                region: y.clone(),
                offset: 8,
                len: 4000,
            },
        ];
        (x, y, segs)
    }

    #[test]
    fn placement_from_a_region_lands_where_placement_of_the_same_bytes_does() {
        let data: Vec<u8> = (0..3000u32).map(|i| (i * 7 + 1) as u8).collect();
        let mut src_bytes = vec![0x55; 64];
        src_bytes.extend_from_slice(&data);
        let src = region(&src_bytes);
        for offset in [0u64, 2, 5, 900] {
            let (x1, y1, direct) = sink();
            let (x2, y2, copied) = sink();
            assert_eq!(place_from(&src, 64, data.len(), &direct, offset), Ok(()));
            assert_eq!(place_at(&data, &copied, offset), Ok(()));
            assert_eq!(bytes_of(&x1), bytes_of(&x2), "offset {offset}");
            assert_eq!(bytes_of(&y1), bytes_of(&y2), "offset {offset}");
            // Something moved, and nothing outside the segments.
            assert_ne!(bytes_of(&y1), vec![0xee; 4096]);
            assert_eq!(bytes_of(&x1)[..3], [0xee; 3]);
            assert_eq!(bytes_of(&y1)[..8], [0xee; 8]);
            assert_eq!(bytes_of(&y1)[4008..], [0xee; 88]);
        }
    }

    #[test]
    fn placement_from_a_region_that_does_not_fit_the_scatter_list_copies_nothing() {
        let src = region(&[7; 4096]);
        let (x, y, segs) = sink();
        assert_eq!(
            place_from(&src, 0, 4000, &segs, 6),
            Err(PlaceFault::TooLong)
        );
        assert_eq!(bytes_of(&x), vec![0xee; 16]);
        assert_eq!(bytes_of(&y), vec![0xee; 4096]);
    }

    #[test]
    fn placement_from_a_region_stops_as_revoked_at_a_revoked_segment() {
        let src = region(&[7; 4096]);
        let (x, y, segs) = sink();
        y.revoke();
        assert_eq!(
            place_from(&src, 0, 3000, &segs, 0),
            Err(PlaceFault::Revoked)
        );
        // The segment before it was placed (as `place_at` does), nothing after.
        let mut want = vec![0xee; 16];
        want[3..8].fill(7);
        assert_eq!(bytes_of(&x), want);
    }
}
