//! The invariants: what the peer's stream delivered (its Read Requests, Writes, Send messages
//! and Read Responses, recorded as they reach the connection), what the connection sent back
//! (parsed and checked as it comes), the completion and connection events, the endpoint's and
//! the connection's state after the input and after teardown, and every byte of memory.

use std::io::{ErrorKind, Read};

use dapl::{AsyncKind, CloseFlags, ConnectionEventKind, DtoOp, DtoStatus, EpState, Event};
use iwarp::fpdu::split_fpdu;
use iwarp::rdmap::ReadRequest;
use iwarp::Segment;

use super::{region_va, Outcome, Posted, Run, Use, GUARD, RECV, RO, RW, SINK, WO};

impl Run<'_> {
    /// Bytes `a..b` of the stream reached the connection: note the peer's Read Requests.
    pub(super) fn note_delivered(&mut self, a: usize, b: usize) {
        if self.in_dec_failed {
            return;
        }
        self.in_dec.feed(&self.wire[a..b]);
        self.fed = b;
        loop {
            match self.in_dec.next_ulpdu() {
                Ok(Some(u)) => match Segment::parse(u) {
                    Ok(Segment::ReadRequest { request, .. }) => self.peer_reads.push(request),
                    Ok(Segment::Write {
                        stag, to, payload, ..
                    }) if !payload.is_empty()
                        && (stag == self.window
                            || [RW, WO].iter().any(|&i| self.h.regions[i].stag == stag)) =>
                    {
                        self.peer_writes.push((stag, to, payload.to_vec()));
                    }
                    Ok(Segment::Send {
                        last,
                        payload,
                        invalidate_stag,
                        ..
                    }) => {
                        // The link reads a Send with Invalidate's STag from its first segment.
                        let inv = *self.cur_send_inv.get_or_insert(invalidate_stag);
                        self.cur_send.extend_from_slice(payload);
                        if last {
                            self.send_msgs.push(std::mem::take(&mut self.cur_send));
                            self.send_immed.push(None);
                            self.send_inv.push(inv);
                            self.cur_send_inv = None;
                        }
                    }
                    Ok(Segment::ImmediateData { data, .. }) => {
                        let word = |i: usize| {
                            u32::from_be_bytes([data[i], data[i + 1], data[i + 2], data[i + 3]])
                        };
                        self.send_msgs.push(Vec::new());
                        self.send_immed.push(Some((word(0), word(4))));
                        self.send_inv.push(None);
                    }
                    Ok(Segment::ReadResponse { last, payload, .. }) => {
                        self.cur_resp.extend_from_slice(payload);
                        if last {
                            self.resp_msgs.push(std::mem::take(&mut self.cur_resp));
                        }
                    }
                    _ => {}
                },
                Ok(None) => return,
                Err(_) => {
                    self.in_dec_failed = true;
                    return;
                }
            }
        }
    }

    /// Reads what the connection sent and checks it. True if anything came.
    pub(super) fn read_output(&mut self) -> bool {
        let mut buf = std::mem::take(&mut self.out_buf);
        let moved = self.read_output_into(&mut buf);
        self.out_buf = buf;
        moved
    }

    fn read_output_into(&mut self, buf: &mut [u8]) -> bool {
        let mut moved = false;
        loop {
            match (&self.peer).read(buf) {
                Ok(0) => {
                    if !self.out_eof {
                        self.out_eof = true;
                        moved = true;
                    }
                    return moved;
                }
                Ok(n) => {
                    assert!(!self.out_eof, "bytes after EOF");
                    moved = true;
                    self.out_acc.extend_from_slice(&buf[..n]);
                    self.parse_output();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return moved,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // Reset by a kill with data unread: nothing more will come.
                Err(_) => {
                    self.out_eof = true;
                    return true;
                }
            }
        }
    }

    /// Splits and checks the complete FPDUs the connection sent.
    fn parse_output(&mut self) {
        let mut at = 0;
        while let Some((range, total)) =
            split_fpdu(&self.out_acc[at..], false).expect("framing without CRC cannot fail")
        {
            let frame = &self.out_acc[at..at + total];
            let ulpdu = frame[range].to_vec();
            let crc_ok = !self.crc || split_fpdu(frame, true).is_ok();
            assert!(crc_ok, "the connection sent an FPDU with a bad CRC");
            self.check_sent(&ulpdu);
            at += total;
        }
        self.out_acc.drain(..at);
    }

    fn check_sent(&mut self, ulpdu: &[u8]) {
        let seg = Segment::parse(ulpdu)
            .unwrap_or_else(|e| panic!("the connection sent a segment that does not parse: {e}"));
        assert!(
            self.terminate.is_none(),
            "the connection sent {seg:?} after its Terminate"
        );
        match seg {
            Segment::ReadRequest { msn, request } => {
                let i = self.our_reads_seen;
                let p = self
                    .reads
                    .get(i)
                    .unwrap_or_else(|| panic!("Read Request {request:?} that nobody posted"));
                assert_eq!(msn, i as u32 + 1, "Read Request MSN");
                let sink = self.region(SINK);
                assert_eq!(
                    request,
                    ReadRequest {
                        sink_stag: sink.stag,
                        sink_to: sink.real_addr(p.pieces[0].0),
                        size: p.size as u32,
                        source_stag: p.remote.rmr_context.0,
                        source_to: p.remote.virtual_address,
                    },
                    "Read Request {i} differs from the posted read"
                );
                self.our_reads_seen += 1;
            }
            Segment::ReadResponse {
                last,
                stag,
                to,
                payload,
            } => {
                let req = *self.peer_reads.get(self.resp_idx).unwrap_or_else(|| {
                    panic!(
                        "Read Response {} with no Read Request for it",
                        self.resp_idx
                    )
                });
                assert_eq!(stag, req.sink_stag, "Read Response STag");
                assert_eq!(
                    Some(to),
                    req.sink_to.checked_add(self.resp_off),
                    "Read Response TO"
                );
                let end = self.resp_off + payload.len() as u64;
                assert!(
                    end <= u64::from(req.size),
                    "Read Response longer than asked"
                );
                assert!(
                    !last || end == u64::from(req.size),
                    "last Read Response segment ends at {end} of {}",
                    req.size
                );
                // The read-only region never changes: its bytes must come back exactly.
                let ro = self.region(RO);
                if req.source_stag == ro.stag && !payload.is_empty() {
                    let at = req.source_to - region_va(RO) + self.resp_off;
                    let at = GUARD + at as usize;
                    assert_eq!(
                        payload,
                        &ro.pattern[at..at + payload.len()],
                        "Read Response bytes differ from the region"
                    );
                }
                if last {
                    self.resp_idx += 1;
                    self.resp_off = 0;
                    self.outcome.responses_sent += 1;
                } else {
                    self.resp_off = end;
                }
            }
            Segment::Terminate { message, .. } => {
                self.terminate = Some(message.cause);
                self.outcome.terminate_sent = Some(message.cause);
            }
            other => panic!("the connection sent {other:?}, which nobody posted"),
        }
    }

    pub(super) fn drain_events(&mut self) {
        for (evd, recv) in [(&self.recv_evd, true), (&self.req_evd, false)] {
            while let Some(ev) = evd.dequeue().expect("dequeue") {
                let Event::Dto(d) = ev else {
                    panic!("a DTO EVD got {ev:?}")
                };
                assert!(d.ep == self.ep, "completion for another endpoint");
                if recv && d.operation == DtoOp::RecvImmed {
                    assert_eq!(d.status, DtoStatus::Success, "RECV_IMMED is a success");
                    let imm = d.immediate.expect("RECV_IMMED carries the immediate data");
                    assert_eq!(d.rmr_context, None, "an RMR context on RECV_IMMED");
                    self.immed_done.insert(d.cookie.0, imm);
                    self.outcome.immediates.push((d.cookie.0, imm));
                } else if recv && d.operation == DtoOp::ReceiveWithInvalidate {
                    assert_eq!(
                        d.immediate, None,
                        "immediate data on RECEIVE_WITH_INVALIDATE"
                    );
                    match d.status {
                        DtoStatus::Success => {
                            let stag = d
                                .rmr_context
                                .expect("a successful RECEIVE_WITH_INVALIDATE names the STag")
                                .0;
                            assert_eq!(
                                stag, self.window,
                                "an STag other than the window's was invalidated"
                            );
                            assert!(
                                self.outcome.invalidated.is_empty(),
                                "the window was invalidated twice"
                            );
                            self.inval_done.insert(d.cookie.0, stag);
                            self.outcome.invalidated.push((d.cookie.0, stag));
                        }
                        DtoStatus::RemoteResponder => assert_eq!(d.rmr_context, None),
                        s => panic!("RECEIVE_WITH_INVALIDATE completed {s:?}"),
                    }
                } else {
                    assert_eq!(
                        d.operation,
                        if recv {
                            DtoOp::Receive
                        } else {
                            DtoOp::RdmaRead
                        }
                    );
                    assert_eq!(d.immediate, None, "immediate data on a {:?}", d.operation);
                    assert_eq!(d.rmr_context, None, "an RMR context on a {:?}", d.operation);
                }
                let posted = if recv { &self.recvs } else { &self.reads };
                assert!(
                    posted.iter().any(|p| d.cookie == p.cookie),
                    "completion of DTO {} that was never posted",
                    d.cookie
                );
                let prev = self
                    .done
                    .insert(d.cookie.0, (d.status, d.transferred_length));
                assert!(
                    prev.is_none(),
                    "DTO {} completed twice: {prev:?}, then {:?}",
                    d.cookie,
                    d.status
                );
                self.outcome
                    .completions
                    .push((d.cookie.0, d.status, d.transferred_length));
            }
        }
        while let Some(ev) = self.conn_evd.dequeue().expect("dequeue") {
            let Event::Connection(c) = ev else {
                panic!("the connection EVD got {ev:?}")
            };
            self.conn_events.push(c.kind);
            match self.conn_events.as_slice() {
                [ConnectionEventKind::Established] => {}
                [ConnectionEventKind::Established, end] => {
                    assert!(
                        matches!(
                            end,
                            ConnectionEventKind::Broken | ConnectionEventKind::Disconnected
                        ),
                        "connection ended with {end:?}"
                    );
                    self.outcome.end = Some(*end);
                }
                events => panic!("connection events {events:?}"),
            }
        }
        while let Some(ev) = self.h.async_evd.dequeue().expect("dequeue") {
            let Event::Async(a) = ev else {
                panic!("the async EVD got {ev:?}")
            };
            assert!(
                matches!(a.kind, AsyncKind::EpBroken | AsyncKind::SrqLowWatermark),
                "async event {:?}",
                a.kind
            );
        }
    }

    /// After the input: the endpoint and the connection agree.
    pub(super) fn check_mid(&mut self) {
        let state = self.ep.state();
        let probe = self.probe();
        self.outcome.state_after_input = Some(state);
        match state {
            EpState::Connected | EpState::DisconnectPending => {
                assert_eq!(
                    probe.phase, "Established",
                    "endpoint {state:?}, connection {probe:?}"
                );
                assert!(!probe.tx_failed && !probe.tx_shut, "{probe:?}");
                assert!(
                    self.terminate.is_none(),
                    "CONNECTED after sending a Terminate"
                );
                assert_eq!(self.conn_events, [ConnectionEventKind::Established]);
            }
            EpState::Disconnected => {
                assert_ne!(
                    probe.phase, "Established",
                    "endpoint DISCONNECTED, connection {probe:?}"
                );
                let (_, recvs, reqs) = self.ep.get_status().expect("status");
                assert!(!recvs && !reqs, "DISCONNECTED with DTOs still queued");
                assert_eq!(self.conn_events.len(), 2, "{:?}", self.conn_events);
            }
            s => panic!("endpoint in state {s:?} after the input"),
        }
        if self.terminate.is_some() {
            assert_eq!(self.outcome.end, Some(ConnectionEventKind::Broken));
        }
    }

    /// Ends the connection the way `control` says, frees everything, checks the rest.
    pub(super) fn finish(mut self, control: u8) -> Outcome {
        if control & 0x80 != 0 {
            self.tick();
        }
        match (control >> 5) & 3 {
            0 => {
                self.ep.disconnect(CloseFlags::Abrupt).expect("disconnect");
            }
            1 => self.fin(),
            2 => self.free_ep(),
            _ => {
                self.ep
                    .disconnect(CloseFlags::Graceful)
                    .expect("disconnect");
            }
        }
        self.drive();
        self.tick();
        self.free_ep();
        self.tick();
        self.drive();
        let srq_left = match self.srq.take() {
            Some(s) => {
                let left = s.query().expect("srq query").available_dto_count;
                s.free().expect("free the SRQ");
                left
            }
            None => 0,
        };
        self.drain_events();
        let probe = self.probe();
        assert_eq!(probe.phase, "Dead", "connection after teardown: {probe:?}");
        assert_eq!(
            self.conn_events.len(),
            2,
            "events after teardown: {:?}",
            self.conn_events
        );
        self.check_dtos(srq_left);
        self.check_memory();
        for evd in [&self.recv_evd, &self.req_evd, &self.conn_evd] {
            evd.free().expect("free an EVD");
        }
        assert_eq!(
            self.conn.references(),
            1,
            "the connection is still referenced after teardown"
        );
        std::mem::take(&mut self.outcome)
    }

    fn free_ep(&mut self) {
        if !self.freed {
            self.freed = true;
            self.ep.free().expect("free the endpoint");
            self.drive();
        }
    }

    /// Completion rules over the posted receives and reads. In posting order, statuses must
    /// read `Success* X? Flushed* none*`: successes first (FIFO consumption), then at most one
    /// that was cut short (a receive too short for its Send, a read the peer refused, or the
    /// buffer held when the connection ended), then flushes, then (SRQ only) receives never
    /// taken, which stay on the SRQ.
    fn check_dtos(&self, srq_left: usize) {
        let mut never = 0;
        for (what, list) in [("receive", &self.recvs), ("read", &self.reads)] {
            // 0: successes so far; 1: past the first failure; 2: past the first never-completed.
            let mut stage = 0;
            for (n, p) in list.iter().enumerate() {
                let c = p.cookie;
                match self.done.get(&c).copied() {
                    Some((DtoStatus::Success, len)) => {
                        assert_eq!(
                            stage, 0,
                            "{what} {c} succeeded after an earlier one did not"
                        );
                        if what == "read" {
                            assert_eq!(len, p.size, "read {c}: transferred length");
                        } else if self.immed_done.contains_key(&c) {
                            // The write's length: nothing was placed in the receive buffer.
                        } else {
                            assert!(len as usize <= shape_total(&p.pieces), "receive {c}: {len}");
                        }
                    }
                    Some((s, _)) => {
                        // A receive too short for its Send, or whose Send with Invalidate named
                        // an STag that could not be invalidated (the n-th receive took the n-th
                        // message); a read the peer refused.
                        let cut_short = match what {
                            "receive" => {
                                s == DtoStatus::LocalLength
                                    || (s == DtoStatus::RemoteResponder
                                        && self.send_inv.get(n).copied().flatten().is_some())
                            }
                            _ => s == DtoStatus::RemoteAccess,
                        };
                        assert!(
                            s == DtoStatus::Flushed || cut_short,
                            "{what} {c} completed with {s:?}"
                        );
                        assert!(
                            stage == 0 || (stage == 1 && s == DtoStatus::Flushed),
                            "{what} {c} completed {s:?} out of order"
                        );
                        stage = 1;
                    }
                    None => {
                        assert!(
                            what == "receive" && self.srq_mode,
                            "{what} {c} never completed"
                        );
                        stage = 2;
                        never += 1;
                    }
                }
            }
        }
        assert_eq!(
            never, srq_left,
            "receives that never completed vs. receives left on the SRQ"
        );
    }

    /// Which bytes of a receive or sink list may have changed: the successes' first `len`
    /// bytes, and all of the first one that completed otherwise (it may have been cut short;
    /// for a read, only up to the read length).
    fn allowed_ranges(&self, list: &[Posted], is_read: bool) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut partial_left = true;
        for p in list {
            let limit = match self.done.get(&p.cookie) {
                Some((DtoStatus::Success, _)) if self.immed_done.contains_key(&p.cookie) => 0,
                Some((DtoStatus::Success, len)) => *len as usize,
                Some(_) if partial_left => {
                    partial_left = false;
                    if is_read {
                        p.size as usize
                    } else {
                        usize::MAX
                    }
                }
                _ => 0,
            };
            let mut left = limit;
            for &(o, l) in &p.pieces {
                let k = l.min(left);
                if k > 0 {
                    out.push((o, k));
                }
                left -= k;
            }
        }
        out
    }

    /// The bytes of region `i` at `pieces`, up to `len` of them.
    fn gather(&self, i: usize, pieces: &[(usize, usize)], len: usize) -> Vec<u8> {
        let mem = &self.region(i).mem;
        let mut out = Vec::with_capacity(len);
        for &(o, l) in pieces {
            let k = l.min(len - out.len());
            let at = out.len();
            out.resize(at + k, 0);
            mem.copy_out(GUARD + o, &mut out[at..]);
        }
        out
    }

    /// Successful receives and reads hold exactly the peer's messages, in order (a receive
    /// taken by Immediate Data reports its value and write length instead).
    fn check_contents(&self) {
        for (what, list, msgs, immed, region) in [
            (
                "receive",
                &self.recvs,
                &self.send_msgs,
                &self.send_immed[..],
                RECV,
            ),
            ("read", &self.reads, &self.resp_msgs, &[][..], SINK),
        ] {
            for (n, p) in list.iter().enumerate() {
                let Some(&(DtoStatus::Success, len)) = self.done.get(&p.cookie) else {
                    break; // successes are a prefix (check_dtos)
                };
                let msg = msgs.get(n).unwrap_or_else(|| {
                    panic!(
                        "{what} {} succeeded, but the peer sent only {} messages",
                        p.cookie,
                        msgs.len()
                    )
                });
                let got_immed = self.immed_done.get(&p.cookie).copied();
                if let Some(&Some((imm, write_len))) = immed.get(n) {
                    assert_eq!(
                        (got_immed, len),
                        (Some(imm), u64::from(write_len)),
                        "{what} {}: message {n} was Immediate Data",
                        p.cookie
                    );
                    continue; // its buffer must not change (check_memory)
                }
                assert_eq!(
                    got_immed, None,
                    "{what} {}: RECV_IMMED for a Send",
                    p.cookie
                );
                if what == "receive" {
                    assert_eq!(
                        self.inval_done.get(&p.cookie).copied(),
                        self.send_inv.get(n).copied().flatten(),
                        "receive {}: message {n}'s Send with Invalidate and the completion differ",
                        p.cookie
                    );
                }
                assert_eq!(len, msg.len() as u64, "{what} {}: length", p.cookie);
                assert!(
                    self.gather(region, &p.pieces, msg.len()) == *msg,
                    "{what} {}: the buffer does not hold message {n}",
                    p.cookie
                );
            }
        }
    }

    /// The RDMA Write whose FPDU the peer had started but not finished when the input ended:
    /// (STag, TO, the payload bytes sent). Without CRC the link places such a segment's bytes as
    /// they arrive (cut-through), so they may be in memory already.
    fn partial_write(&self) -> Option<(u32, u64, &[u8])> {
        if self.in_dec_failed {
            return None;
        }
        // What the decoder holds of an unfinished FPDU: the bytes before where it was fed up to
        // (not `sent`, which jumps to the end when the connection shut its socket).
        let tail = &self.wire[self.fed - self.in_dec.buffered_len()..self.fed];
        let ulpdu_len = usize::from(u16::from_be_bytes([*tail.first()?, *tail.get(1)?]));
        let header = tail.get(2..2 + iwarp::ddp::TAGGED_HEADER_LEN)?;
        let Ok(Segment::Write { stag, to, .. }) = Segment::parse(header) else {
            return None;
        };
        let end = tail.len().min(2 + ulpdu_len);
        Some((stag, to, &tail[2 + header.len()..end]))
    }

    fn check_memory(&mut self) {
        self.check_contents();
        let partial = self.partial_write().map(|(s, t, p)| (s, t, p.to_vec()));
        let recv_ok = self.allowed_ranges(&self.recvs, false);
        let sink_ok = self.allowed_ranges(&self.reads, true);
        let mut actual = Vec::new();
        for (i, r) in self.h.regions.iter().enumerate() {
            actual.resize(r.pattern.len(), 0);
            r.mem.copy_out(0, &mut actual);
            if actual == r.pattern {
                continue;
            }
            let may: &[(usize, usize)] = match r.spec.usage {
                Use::PeerWritable => &[(0, r.spec.len)],
                Use::Untouchable => &[],
                Use::Recv => &recv_ok,
                Use::Sink => &sink_ok,
            };
            for (at, (a, p)) in actual.iter().zip(&r.pattern).enumerate() {
                if a == p {
                    continue;
                }
                let inside = at
                    .checked_sub(GUARD)
                    .filter(|&o| o < r.spec.len)
                    .is_some_and(|o| may.iter().any(|&(s, l)| o >= s && o < s + l));
                assert!(
                    inside,
                    "byte {at} of region {i} {} changed ({p:#04x} -> {a:#04x}); {}",
                    r.spec.name,
                    if at < GUARD || at >= GUARD + r.spec.len {
                        "it is a guard byte outside the registered range"
                    } else {
                        "the peer had no right to it"
                    }
                );
                if r.spec.usage == Use::PeerWritable {
                    // Some Write into this region put this very byte here.
                    let addr = region_va(i) + (at - GUARD) as u64;
                    let writes = self.peer_writes.iter().map(|(s, t, p)| (*s, *t, &p[..]));
                    let partial = partial.as_ref().map(|(s, t, p)| (*s, *t, &p[..]));
                    let explained = writes.chain(partial).any(|(stag, to, pay)| {
                        (stag == r.stag || (i == RW && stag == self.window))
                            && addr
                                .checked_sub(to)
                                .and_then(|d| pay.get(usize::try_from(d).ok()?))
                                == Some(a)
                    });
                    assert!(
                        explained,
                        "byte {at} of region {i} {} changed to {a:#04x}, which no Write put there",
                        r.spec.name
                    );
                    self.outcome.peer_wrote = true;
                }
            }
        }
    }
}

fn shape_total(pieces: &[(usize, usize)]) -> usize {
    pieces.iter().map(|p| p.1).sum()
}
