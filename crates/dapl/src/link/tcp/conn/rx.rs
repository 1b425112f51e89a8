//! The receive side: bytes read from the socket (by the progress thread, or by a consumer's
//! poll) into a staging buffer, split into FPDUs, each segment checked by the `iwarp` codec and
//! the reassembly state and handed to the engine (`rx_*`), which checks it against the memory
//! table and places it. Also here: Terminates (one from the peer ends the stream; a segment
//! that fails a check sends one, `fail`), a Send that finds no receive buffer (its ULPDU
//! parked and the socket left unread until a buffer is posted, `on_wake`, or the RNR grace
//! ends, `on_tick`), and the end of the peer's stream (`on_eof`).
//!
//! Before the stream is established the staging buffer carries the MPA Request or Reply:
//! `process` feeds those bytes to the codec kept in the phase and hands what comes out to
//! [`mpa`](super::mpa). Large tagged segments go on from here to
//! [`cut_through`](super::cut_through). All of it runs under the `rx` lock, first in the order
//! rx -> engine -> tx.

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Instant;

use iwarp::fpdu::split_fpdu;
use iwarp::mpa::{InitiatorEvent, ResponderEvent};
use iwarp::rdmap::RTR_STAG;
use iwarp::terminate::{
    DdpTaggedErrorCode, DdpUntaggedErrorCode, LlpErrorCode, RdmapErrorCode, TerminateCause,
    TerminateMessage,
};
use iwarp::Segment;

use super::cut_through::{CutSrc, CutStep};
use super::tx::parse_write_immed_data;
use super::{take_flag, Phase, Rx, TcpConn, RX_BUF};
use crate::engine::port::Payload;
use crate::engine::qp::{place_at, PlaceFault, RxReadFault, RxResponse, RxTake, RxWriteFault};
use crate::link::tcp::{lock, LINGER, RNR_GRACE};
use crate::mem::{InvalidateFault, RemoteFault};
use crate::types::{ConnectionEventKind, DtoStatus};

impl TcpConn {
    pub(crate) fn on_readable(self: &Arc<Self>) {
        self.read_and_process(false);
    }

    /// A consumer's poll reads the socket directly (no epoll): true if bytes arrived. Nothing
    /// to do while the receive side is paused (its data waits for the progress thread).
    pub(crate) fn poll_read(self: &Arc<Self>) -> bool {
        if self.rx_paused.load(Ordering::Relaxed) {
            return false;
        }
        let got = self.read_and_process_locked(false);
        self.apply_pending_shut();
        got
    }

    pub(super) fn read_and_process(self: &Arc<Self>, hangup: bool) {
        self.read_and_process_locked(hangup);
        self.apply_pending_shut();
    }

    /// Reads and handles what the socket holds; true if it held something (bytes or its end).
    fn read_and_process_locked(self: &Arc<Self>, hangup: bool) -> bool {
        let mut rx = lock(&self.rx);
        // The last read found less than it had room for: the socket was empty then, and what
        // arrives later is reported by epoll again (level-triggered), so no read to see EAGAIN.
        let mut drained = false;
        let mut got = false;
        loop {
            if matches!(rx.phase, Phase::Dead | Phase::Connecting { .. }) {
                return got;
            }
            if rx.stalled.is_some() {
                if hangup {
                    // Waiting for a receive buffer, and the socket failed or fully closed.
                    self.on_eof(rx, true);
                }
                return got;
            }
            if rx.cut.is_some() {
                match self.cut_place(&mut rx, CutSrc::Socket) {
                    // The engine shut the stream meanwhile (as for staged segments).
                    CutStep::Progress if take_flag(&self.shut_pending) => {
                        rx.cut = None;
                        self.close_rx(&mut rx);
                        continue;
                    }
                    CutStep::Progress => {
                        got = true;
                        continue;
                    }
                    CutStep::Blocked | CutStep::Stop => return got,
                    CutStep::Eof(error) => {
                        if !error {
                            self.peer_fin.store(true, Ordering::SeqCst);
                        }
                        self.on_eof(rx, error);
                        return true;
                    }
                }
            }
            if rx.start < rx.end {
                rx = match self.process(rx) {
                    Some(g) => g,
                    None => return true,
                };
                if rx.cut.is_some() {
                    continue; // the rest of that segment goes straight to its destination
                }
            }
            // Make room.
            if rx.start > 0 && (rx.end == rx.buf.len() || rx.start == rx.end) {
                let (s, e) = (rx.start, rx.end);
                rx.buf.copy_within(s..e, 0);
                rx.end = e - s;
                rx.start = 0;
            }
            if drained {
                return got;
            }
            // A buffer that is full (a frame longer than it) or that the last read filled (the
            // peer streams) grows, up to RX_BUF.
            if (rx.end == rx.buf.len() || got) && rx.buf.len() < RX_BUF {
                let mut bigger = vec![0u8; (rx.buf.len() * 4).min(RX_BUF)].into_boxed_slice();
                bigger[..rx.end].copy_from_slice(&rx.buf[..rx.end]);
                rx.buf = bigger;
            }
            let end = rx.end;
            let room = rx.buf.len() - end;
            // The system call itself (rustix): libc's `recv` is a cancellation point, whose
            // bookkeeping costs about 90 instructions a call on this, the hottest path.
            let n = match rustix::net::recv(
                &self.sock,
                &mut rx.buf[end..],
                rustix::net::RecvFlags::empty(),
            ) {
                Ok(0) => {
                    self.peer_fin.store(true, Ordering::SeqCst);
                    self.on_eof(rx, false);
                    return true;
                }
                Ok(n) => n,
                Err(rustix::io::Errno::AGAIN) => return got,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => {
                    self.on_eof(rx, true);
                    return true;
                }
            };
            got = true;
            rx.end += n;
            drained = n < room;
        }
    }

    /// The peer closed (or the socket failed).
    fn on_eof(self: &Arc<Self>, mut rx: MutexGuard<'_, Rx>, error: bool) {
        rx.peer_gone = true;
        let phase = std::mem::replace(&mut rx.phase, Phase::Dead);
        tracing::debug!(
            conn = self.id,
            error,
            phase = phase.name(),
            "the peer closed the stream"
        );
        let held = rx.recv.take();
        drop(rx);
        match phase {
            Phase::AwaitReply { attempt, .. } | Phase::Connecting { attempt, .. } => {
                self.kill();
                if let Some(ep) = self.ep() {
                    ep.attempt_failed(attempt, ConnectionEventKind::NonPeerRejected, Vec::new());
                }
            }
            Phase::Established => {
                let ep = self.ep();
                if let (Some(ep), Some((wr, _))) = (&ep, held) {
                    ep.rx_send_done(&wr, DtoStatus::Flushed, 0, true);
                }
                self.kill();
                if let Some(ep) = ep {
                    ep.peer_closed(self.id, error);
                }
            }
            Phase::AwaitAccept { resp } => {
                // The CR stays; accept finds the requester gone.
                lock(&self.rx).phase = Phase::AwaitAccept { resp };
                self.pause_rx();
            }
            _ => self.kill(),
        }
    }

    pub(crate) fn on_wake(self: &Arc<Self>) {
        self.on_wake_locked();
        self.apply_pending_shut();
    }

    fn on_wake_locked(self: &Arc<Self>) {
        let mut rx = lock(&self.rx);
        // Taken, not cloned: a Send still without a buffer is parked again by `handle_ulpdu`.
        let Some(ulpdu) = rx.stalled.take() else {
            return;
        };
        rx.rnr_until = None;
        let step = self.handle_ulpdu(&mut rx, &ulpdu);
        self.answer_reads();
        match step {
            Step::Go => {}
            Step::Stall => {
                // Still no buffer: keep waiting (the deadline stays as first set).
                return;
            }
            Step::Stop => return,
        }
        drop(rx);
        self.resume_rx();
        self.on_readable();
    }

    /// Processes whatever the staging buffer holds, then sends the responses to the Read
    /// Requests among it (together). Returns the guard to go on reading, or None when reading
    /// must stop (stalled, dead, or the lock had to be released).
    fn process<'a>(self: &'a Arc<Self>, rx: MutexGuard<'a, Rx>) -> Option<MutexGuard<'a, Rx>> {
        let rx = self.process_frames(rx);
        self.answer_reads();
        rx
    }

    /// Transmits the responses to the Read Requests handled since the last call.
    fn answer_reads(&self) {
        if take_flag(&self.reads_queued) {
            if let Some(ep) = self.ep() {
                ep.pump();
            }
        }
    }

    fn process_frames<'a>(
        self: &'a Arc<Self>,
        mut rx: MutexGuard<'a, Rx>,
    ) -> Option<MutexGuard<'a, Rx>> {
        loop {
            match &mut rx.phase {
                Phase::AwaitReply { .. } => {
                    let (s, e) = (rx.start, rx.end);
                    let bytes = rx.buf[s..e].to_vec();
                    rx.start = e;
                    let Phase::AwaitReply { init, attempt } = &mut rx.phase else {
                        unreachable!()
                    };
                    let attempt = *attempt;
                    match init.feed(&bytes) {
                        Ok(None) => return Some(rx),
                        Ok(Some(InitiatorEvent::Accepted(acc))) => {
                            rx.phase = Phase::Established;
                            rx.crc = acc.negotiated.crc;
                            // The stream after the Reply is FPDUs.
                            rx.start = 0;
                            rx.end = acc.leftover.len();
                            rx.buf[..acc.leftover.len()].copy_from_slice(&acc.leftover);
                            if !self.active_established(&mut rx, attempt, acc) {
                                drop(rx);
                                self.kill();
                                return None;
                            }
                            continue;
                        }
                        Ok(Some(InitiatorEvent::Rejected { private_data })) => {
                            rx.phase = Phase::Closing {
                                deadline: Instant::now() + LINGER,
                            };
                            drop(rx);
                            self.kill();
                            if let Some(ep) = self.ep() {
                                ep.attempt_failed(
                                    attempt,
                                    ConnectionEventKind::PeerRejected,
                                    private_data,
                                );
                            }
                            return None;
                        }
                        Err(_) => {
                            drop(rx);
                            self.kill();
                            if let Some(ep) = self.ep() {
                                ep.attempt_failed(
                                    attempt,
                                    ConnectionEventKind::NonPeerRejected,
                                    Vec::new(),
                                );
                            }
                            return None;
                        }
                    }
                }
                Phase::AwaitRequest { .. } => {
                    let (s, e) = (rx.start, rx.end);
                    let bytes = rx.buf[s..e].to_vec();
                    rx.start = e;
                    let Phase::AwaitRequest { resp, sp, .. } = &mut rx.phase else {
                        unreachable!()
                    };
                    match resp.feed(&bytes) {
                        Ok(None) => return Some(rx),
                        Ok(Some(ResponderEvent::Request(req))) => {
                            let sp = sp.clone();
                            let Phase::AwaitRequest { resp, .. } =
                                std::mem::replace(&mut rx.phase, Phase::Dead)
                            else {
                                unreachable!()
                            };
                            rx.phase = Phase::AwaitAccept { resp };
                            drop(rx);
                            if let Some(s) = self.shared() {
                                s.set_timed(self.id, false);
                            }
                            self.deliver_request(sp, req.private_data);
                            return None;
                        }
                        Ok(Some(ResponderEvent::Refused { reply, .. })) => {
                            rx.phase = Phase::Closing {
                                deadline: Instant::now() + LINGER,
                            };
                            drop(rx);
                            self.send_and_close(reply);
                            return None;
                        }
                        Err(_) => {
                            drop(rx);
                            self.kill();
                            return None;
                        }
                    }
                }
                Phase::AwaitAccept { .. } => {
                    // The initiator sends nothing before the Reply; keep what came.
                    if rx.end == rx.buf.len() {
                        drop(rx);
                        self.kill();
                        return None;
                    }
                    return Some(rx);
                }
                Phase::Closing { .. } => {
                    rx.start = rx.end; // discard
                    return Some(rx);
                }
                Phase::Dead | Phase::Connecting { .. } => return None,
                Phase::Established => {}
            }
            // FPDUs.
            loop {
                if rx.skip > 0 {
                    let k = rx.skip.min(rx.end - rx.start);
                    rx.start += k;
                    rx.skip -= k;
                    if rx.skip > 0 {
                        return Some(rx);
                    }
                }
                let (s, e) = (rx.start, rx.end);
                let found = split_fpdu(&rx.buf[s..e], rx.crc);
                match found {
                    Ok(None) => {
                        // A frame longer than the buffer cannot happen (ULPDU <= 65535). A
                        // large tagged segment may go on straight into its destination.
                        return match self.start_cut(&mut rx) {
                            Some(CutStep::Stop) => None,
                            _ => Some(rx),
                        };
                    }
                    Ok(Some((range, total))) => {
                        let ulpdu_at = s + range.start..s + range.end;
                        rx.start = s + total;
                        // The ULPDU is borrowed from the buffer while the engine runs; the
                        // handler never touches `buf`.
                        let buf = std::mem::take(&mut rx.buf);
                        let step = self.handle_ulpdu(&mut rx, &buf[ulpdu_at]);
                        rx.buf = buf;
                        match step {
                            // The engine shut the stream meanwhile (a graceful disconnect that
                            // this segment completed): the rest is discarded.
                            Step::Go if take_flag(&self.shut_pending) => {
                                self.close_rx(&mut rx);
                                break;
                            }
                            Step::Go => {}
                            Step::Stall | Step::Stop => return None,
                        }
                    }
                    Err(err) => {
                        // What arrived, for the log: a CRC mismatch from a peer is otherwise
                        // impossible to tell from a framing error of ours.
                        let head = &rx.buf[s..e.min(s + 32)];
                        // A known defect of Linux siw: the frame's CRC covers its payload
                        // twice (iwarp::fpdu::crc_counts_payload_twice); refused all the same.
                        let peer_defect = matches!(err, iwarp::Error::CrcMismatch { .. })
                            && iwarp::fpdu::crc_counts_payload_twice(&rx.buf[s..e]);
                        tracing::warn!(
                            conn = self.id,
                            error = %err,
                            crc_counts_payload_twice = peer_defect,
                            fpdu_len = (head.len() >= 2).then(|| {
                                iwarp::fpdu::fpdu_len(usize::from(u16::from_be_bytes([
                                    head[0], head[1],
                                ])))
                            }),
                            buffered = e - s,
                            at = s,
                            head = ?head,
                            "FPDU refused"
                        );
                        let cause = err
                            .terminate_cause()
                            .unwrap_or(TerminateCause::Llp(LlpErrorCode::CrcError));
                        self.fail(rx, cause, &[]);
                        return None;
                    }
                }
            }
        }
    }

    /// One inbound ULPDU of an established connection.
    fn handle_ulpdu(self: &Arc<Self>, rx: &mut MutexGuard<'_, Rx>, ulpdu: &[u8]) -> Step {
        let seg = match Segment::parse(ulpdu) {
            Ok(s) => s,
            Err(e) => {
                let cause = e
                    .terminate_cause()
                    .unwrap_or(TerminateCause::rdmap_local_catastrophic());
                return self.fail_in(rx, cause, ulpdu);
            }
        };
        let first = !rx.got_first;
        if first {
            rx.got_first = true;
            self.release_hold();
        }
        let Some(ep) = self.ep() else {
            return Step::Stop;
        };
        // RFC 7306 Immediate Data is a message of QN 0 of its own: it cannot arrive while a
        // Send is half received (whose buffer is held).
        if matches!(seg, Segment::ImmediateData { .. }) && rx.recv.is_some() {
            return self.fail_in(
                rx,
                TerminateCause::DdpUntagged(DdpUntaggedErrorCode::MsnRange),
                ulpdu,
            );
        }
        // A Send's first segment (or Immediate Data, which uses up a receive buffer just the
        // same) takes a receive buffer before anything else is checked, so that a message that
        // must wait leaves the order state untouched.
        if let Segment::Send { mo: 0, .. } | Segment::ImmediateData { .. } = seg {
            if rx.recv.is_none() {
                match ep.rx_send_take() {
                    // A Send with Invalidate's STag comes with the segment that took the
                    // buffer (the message's first; siw reads it there too).
                    RxTake::Buffer(wr) => {
                        let inv = match &seg {
                            Segment::Send {
                                invalidate_stag, ..
                            } => *invalidate_stag,
                            _ => None,
                        };
                        rx.recv = Some((wr, inv));
                    }
                    RxTake::NoBuffer => {
                        rx.stalled = Some(ulpdu.to_vec());
                        if rx.rnr_until.is_none() {
                            rx.rnr_until = Some(Instant::now() + RNR_GRACE);
                        }
                        self.pause_rx();
                        if let Some(s) = self.shared() {
                            s.set_timed(self.id, true);
                        }
                        return Step::Stall;
                    }
                    RxTake::NotConnected => return Step::Stop,
                }
            }
        }
        if let Err(e) = rx.untagged.check(&seg).and_then(|_| rx.tagged.check(&seg)) {
            let cause = e
                .terminate_cause()
                .unwrap_or(TerminateCause::rdmap_local_catastrophic());
            return self.fail_in(rx, cause, ulpdu);
        }
        match seg {
            Segment::Send {
                last,
                mo,
                solicited,
                payload,
                ..
            } => {
                let Some((wr, held_inv)) = rx.recv.take() else {
                    return self.fail_in(
                        rx,
                        TerminateCause::DdpUntagged(DdpUntaggedErrorCode::InvalidMo),
                        ulpdu,
                    );
                };
                match place_at(payload, &wr.segs, mo as u64) {
                    Ok(()) => {}
                    Err(PlaceFault::TooLong) => {
                        ep.rx_send_done(&wr, DtoStatus::LocalLength, 0, true);
                        return self.fail_in(
                            rx,
                            TerminateCause::DdpUntagged(DdpUntaggedErrorCode::MessageTooLong),
                            ulpdu,
                        );
                    }
                    Err(PlaceFault::Revoked) => {
                        // The receive's LMR was freed while it was posted.
                        ep.rx_send_done(&wr, DtoStatus::LocalProtection, 0, true);
                        return self.fail_in(rx, TerminateCause::rdmap_local_catastrophic(), ulpdu);
                    }
                }
                // Whether the message is a Send with Invalidate, and its STag, come from its
                // first segment: the one that took the buffer (a zero-length first segment
                // leaves the next at MO 0 too).
                let invalidate = held_inv;
                if last {
                    let len = mo as u64 + payload.len() as u64;
                    if let Err(f) = ep.rx_send_placed(&wr, len, solicited, invalidate) {
                        // The receive completed in error; the peer is told why and the
                        // connection breaks.
                        return self.fail_in(rx, invalidate_cause(f), ulpdu);
                    }
                } else {
                    rx.recv = Some((wr, invalidate));
                }
                Step::Go
            }
            Segment::ImmediateData {
                solicited, data, ..
            } => {
                // The end of an RDMA Write with Immediate Data: the Write before it on this
                // stream is placed; its receive completes with the value and the write length.
                let Some((wr, _)) = rx.recv.take() else {
                    return self.fail_in(
                        rx,
                        TerminateCause::DdpUntagged(DdpUntaggedErrorCode::NoBuffer),
                        ulpdu,
                    );
                };
                let (immediate, len) = parse_write_immed_data(data);
                ep.rx_immed_done(&wr, immediate, u64::from(len), solicited);
                Step::Go
            }
            Segment::Write {
                stag, to, payload, ..
            } => {
                if payload.is_empty() {
                    return Step::Go; // nothing to place (the Write RTR is one of these)
                }
                match ep.rx_write(stag, to, Payload::Bytes(payload)) {
                    Ok(()) => Step::Go,
                    Err(RxWriteFault::Access(f)) => self.fail_in(rx, tagged_cause(f), ulpdu),
                    Err(RxWriteFault::NotConnected) => Step::Stop,
                }
            }
            Segment::ReadRequest { request, .. } => {
                if first && request.size == 0 && request.source_stag == RTR_STAG {
                    // The Read RTR: answer with a zero-length response, no engine involved.
                    let resp = Segment::ReadResponse {
                        last: true,
                        stag: request.sink_stag,
                        to: request.sink_to,
                        payload: &[],
                    };
                    self.send_ctl_segment(&resp);
                    return Step::Go;
                }
                // Alone (nothing received after it waits in the buffer): answered now, written
                // at once if nothing of the QP's is queued before it. Else answered once what
                // was received at once is handled (`process`), in one batch.
                let alone = rx.start == rx.end;
                if !alone {
                    self.reads_queued.store(true, Ordering::SeqCst);
                }
                match ep.rx_read_request(
                    request.sink_stag,
                    request.sink_to,
                    request.size as u64,
                    request.source_stag,
                    request.source_to,
                    alone,
                ) {
                    Ok(()) => Step::Go,
                    Err(RxReadFault::Access(f)) => self.fail_in(rx, rdmap_cause(f), ulpdu),
                    Err(RxReadFault::IrdExceeded) => self.fail_in(
                        rx,
                        TerminateCause::DdpUntagged(DdpUntaggedErrorCode::MsnRange),
                        ulpdu,
                    ),
                    Err(RxReadFault::NotConnected) => Step::Stop,
                }
            }
            Segment::ReadResponse {
                last,
                stag,
                to,
                payload,
            } => {
                if rx.rtr_read_pending && payload.is_empty() && last {
                    rx.rtr_read_pending = false;
                    return Step::Go;
                }
                match ep.rx_read_response_segment(stag, to, payload, last) {
                    RxResponse::Placed => Step::Go,
                    RxResponse::NotConnected => Step::Stop,
                    RxResponse::Unexpected => self.fail_in(
                        rx,
                        TerminateCause::rdmap_operation(RdmapErrorCode::UnexpectedOpcode),
                        ulpdu,
                    ),
                    RxResponse::Revoked => {
                        self.fail_in(rx, TerminateCause::rdmap_local_catastrophic(), ulpdu)
                    }
                }
            }
            Segment::Terminate { message, .. } => {
                // The peer ends the stream. A refused Read Request is reported on the read.
                let read_refused = message.rdmap_header.is_some()
                    || message.ddp.is_some_and(|d| {
                        d.header.first().is_some_and(|c| c & 0x80 == 0)
                            && d.header.get(1).map(|b| b & 0x0f)
                                == Some(iwarp::Opcode::ReadRequest as u8)
                    });
                tracing::warn!(
                    conn = self.id,
                    ep = ep.id(),
                    cause = %message.cause,
                    detail = ?message.cause,
                    read_refused,
                    "Terminate received"
                );
                let held = rx.recv.take();
                rx.phase = Phase::Closing {
                    deadline: Instant::now() + LINGER,
                };
                if let Some((wr, _)) = held {
                    ep.rx_send_done(&wr, DtoStatus::Flushed, 0, true);
                }
                if read_refused {
                    ep.fail_oldest_read(DtoStatus::RemoteAccess);
                }
                ep.peer_closed(self.id, true);
                self.shut(true);
                Step::Stop
            }
        }
    }

    /// Sends a Terminate for `ulpdu` with `cause`, breaks the endpoint and closes the stream.
    pub(super) fn fail(
        self: &Arc<Self>,
        mut rx: MutexGuard<'_, Rx>,
        cause: TerminateCause,
        ulpdu: &[u8],
    ) {
        let _ = self.fail_in(&mut rx, cause, ulpdu);
    }

    pub(super) fn fail_in(
        self: &Arc<Self>,
        rx: &mut MutexGuard<'_, Rx>,
        cause: TerminateCause,
        ulpdu: &[u8],
    ) -> Step {
        let ep = self.ep();
        tracing::warn!(
            conn = self.id,
            ep = ep.as_ref().map(|e| e.id()),
            %cause,
            detail = ?cause,
            "Terminate sent"
        );
        let held = rx.recv.take();
        rx.stalled = None;
        rx.rnr_until = None;
        rx.phase = Phase::Closing {
            deadline: Instant::now() + LINGER,
        };
        if let Some(s) = self.shared() {
            s.set_timed(self.id, true);
        }
        let term = Segment::Terminate {
            msn: 1,
            message: TerminateMessage::for_failed_segment(cause, ulpdu),
        };
        {
            let mut tx = lock(&self.tx);
            tx.hold = false; // the Terminate goes out even before the initiator's first FPDU
            if tx.push_segment(&term) {
                tx.abandon = true;
            }
        }
        if let (Some(ep), Some((wr, _))) = (&ep, held) {
            ep.rx_send_done(&wr, DtoStatus::Flushed, 0, true);
        }
        if let Some(ep) = ep {
            // Flushes everything; its close (below, or through the engine) sends the Terminate
            // and shuts the stream down.
            ep.end_connection_of(self.id, ConnectionEventKind::Broken, false);
        }
        self.shut(true);
        Step::Stop
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    Go,
    Stall,
    Stop,
}

pub(super) fn tagged_cause(f: RemoteFault) -> TerminateCause {
    TerminateCause::DdpTagged(match f {
        RemoteFault::InvalidStag => DdpTaggedErrorCode::InvalidStag,
        RemoteFault::BaseBounds => DdpTaggedErrorCode::BaseOrBounds,
        RemoteFault::PzMismatch => DdpTaggedErrorCode::StagNotAssociated,
        RemoteFault::AccessRights => {
            return TerminateCause::rdmap_protection(RdmapErrorCode::AccessRights)
        }
    })
}

/// The Terminate for a Send with Invalidate whose STag could not be invalidated: RDMAP
/// "STag cannot be invalidated" (0x09), as a remote protection error when the STag is another
/// PZ's and a remote operation error otherwise (siw: EType 1 for its `-EACCES`, a PD mismatch;
/// 2 for an unknown STag).
pub(super) fn invalidate_cause(f: InvalidateFault) -> TerminateCause {
    match f {
        InvalidateFault::PzMismatch => {
            TerminateCause::rdmap_protection(RdmapErrorCode::StagCannotBeInvalidated)
        }
        InvalidateFault::InvalidStag | InvalidateFault::NotInvalidatable => {
            TerminateCause::rdmap_operation(RdmapErrorCode::StagCannotBeInvalidated)
        }
    }
}

fn rdmap_cause(f: RemoteFault) -> TerminateCause {
    TerminateCause::rdmap_protection(match f {
        RemoteFault::InvalidStag => RdmapErrorCode::InvalidStag,
        RemoteFault::BaseBounds => RdmapErrorCode::BaseOrBounds,
        RemoteFault::PzMismatch => RdmapErrorCode::StagNotAssociated,
        RemoteFault::AccessRights => RdmapErrorCode::AccessRights,
    })
}
