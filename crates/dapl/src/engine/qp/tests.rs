//! The QP's rules, replayed deterministically on the two-QP harness (`engine::harness`): RNR
//! wait and the wake that races it, a transmit that drains before the QP records its stall,
//! ORD and BARRIER_FENCE, flush order and the single terminal event on break and disconnect.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::engine::harness::{
    done_of, one_end, recv_wr, send_wr, Batch, Delivered, Msg, Pair, Up, PZ,
};
use crate::engine::port::{Payload, TxOutcome};
use crate::engine::qp::{
    Completion, CompletionQueue, QpEvent, ReqOp, RxResponse, RxSend, RxWriteFault,
};
use crate::mem::{EntryKind, EntryOwner, InvalidateFault, RemoteFault};
use crate::types::{
    CompletionFlags, ConnectionEventKind, DtoOp, DtoStatus, EpAttr, EpState, MemPriv, RmrTriplet,
};

use CompletionQueue::{Recv, Request};
use DtoStatus::{Flushed, RemoteResponder, Success};

fn pair() -> Pair {
    Pair::connected(EpAttr::default(), EpAttr::default())
}

fn post_send(p: &Pair, cookie: u64, off: u64, len: u64) {
    let segs = p.a.segs(&p.mem, off, len);
    p.a.qp
        .post_send(send_wr(ReqOp::Send, cookie, segs, Default::default()))
        .unwrap();
}

/// A read of `len` bytes of B's region at `off` into A's region at the same offset.
fn post_read(p: &Pair, cookie: u64, off: u64, len: u64, flags: CompletionFlags) {
    let mut wr = send_wr(
        ReqOp::Read,
        cookie,
        p.a.segs(&p.mem, off, len),
        p.b.remote(off, len),
    );
    wr.sink_stag = p.a.stag;
    wr.flags = flags;
    p.a.qp.post_send(wr).unwrap();
}

fn sends_logged(p: &Pair) -> usize {
    p.a.wire
        .log()
        .iter()
        .filter(|m| matches!(m, Msg::Send { .. }))
        .count()
}

#[test]
fn rnr_send_waits_for_a_wake_then_goes() {
    let p = pair();
    p.a.wire.script(&[TxOutcome::NotReady]);
    post_send(&p, 1, 0, 8);
    assert_eq!(sends_logged(&p), 1);
    assert!(
        p.a.up.take().is_empty(),
        "a Send without a buffer must wait"
    );
    // Another post does not overtake the waiting Send.
    post_send(&p, 2, 8, 8);
    assert_eq!(sends_logged(&p), 1);
    // What refused it (loopback: B's rx_send found no buffer) marked B's peer waiting.
    assert_eq!(
        p.b.qp.rx_send(false, None, Payload::Bytes(b"refused!")),
        RxSend::NoBuffer
    );
    // B posts buffers: the first post wakes A, which retransmits in order.
    let rsegs = p.b.segs(&p.mem, 100, 64);
    p.b.qp.post_recv(recv_wr(10, rsegs)).unwrap();
    let rsegs = p.b.segs(&p.mem, 200, 64);
    p.b.qp.post_recv(recv_wr(11, rsegs)).unwrap();
    assert_eq!(p.b.wire.pending(), 1, "one wake for the waiting peer");
    assert_eq!(p.step_b().map(|d| d.1), Some(Delivered::Wake));
    assert_eq!(sends_logged(&p), 3);
    assert_eq!(
        p.a.up.take_done(),
        [(Request, 1, Success), (Request, 2, Success)]
    );
    p.settle();
    assert_eq!(
        p.b.up.take_done(),
        [(Recv, 10, Success), (Recv, 11, Success)]
    );
}

#[test]
fn rnr_wake_arriving_inside_the_refused_transmit_is_not_lost() {
    // The race: the peer posts its buffer (and wakes us) after it refused the Send but before
    // the QP marks itself blocked. The wake must not be lost, or the Send waits forever.
    let p = pair();
    p.a.wire.script(&[TxOutcome::NotReady]);
    let a = Arc::downgrade(&p.a.qp);
    p.a.wire.on_next_transmit(move || {
        a.upgrade().unwrap().wake_from_peer();
    });
    post_send(&p, 1, 0, 8);
    assert_eq!(
        sends_logged(&p),
        2,
        "the Send went again after the racing wake"
    );
    assert_eq!(p.a.up.take_done(), [(Request, 1, Success)]);
}

#[test]
fn transmit_drained_before_the_stall_is_recorded_completes_once_and_goes_on() {
    // The link finishes writing a Queued message before transmit returns (its progress thread
    // ran tx_drained in between): the QP must complete it once and transmit the next.
    let p = pair();
    p.a.wire.script(&[TxOutcome::Queued]);
    let a = Arc::downgrade(&p.a.qp);
    p.a.wire.on_next_transmit(move || {
        a.upgrade().unwrap().tx_drained(99);
    });
    post_send(&p, 1, 0, 8);
    post_send(&p, 2, 8, 8);
    assert_eq!(sends_logged(&p), 2);
    assert_eq!(
        p.a.up.take_done(),
        [(Request, 1, Success), (Request, 2, Success)]
    );
}

#[test]
fn queued_transmit_stalls_the_send_queue_until_drained() {
    let p = pair();
    p.a.wire.script(&[TxOutcome::Queued]);
    post_send(&p, 1, 0, 8);
    post_send(&p, 2, 8, 8);
    assert_eq!(
        sends_logged(&p),
        1,
        "nothing more while the link holds a message"
    );
    assert!(p.a.up.take().is_empty());
    p.a.qp.tx_drained(99);
    assert_eq!(sends_logged(&p), 2);
    assert_eq!(
        p.a.up.take_done(),
        [(Request, 1, Success), (Request, 2, Success)]
    );
}

#[test]
fn reads_beyond_ord_wait_in_the_send_queue() {
    let attr = EpAttr {
        max_rdma_read_out: 2,
        ..Default::default()
    };
    let p = Pair::connected(attr, EpAttr::default());
    assert!(p.b.region.copy_in(0, b"abcdefgh"));
    for (i, off) in [0u64, 2, 4].iter().enumerate() {
        post_read(&p, i as u64 + 1, *off, 2, CompletionFlags::empty());
    }
    let reqs = |p: &Pair| {
        p.a.wire
            .log()
            .iter()
            .filter(|m| matches!(m, Msg::ReadRequest { .. }))
            .count()
    };
    assert_eq!(reqs(&p), 2, "ORD 2: the third read waits");
    // B answers the first read: A's ORQ has room, the third request leaves.
    assert!(matches!(
        p.step_a(),
        Some((_, Delivered::ReadRequest(Ok(()))))
    ));
    assert!(matches!(
        p.step_b(),
        Some((_, Delivered::ReadResponse(RxResponse::Placed)))
    ));
    assert_eq!(reqs(&p), 3);
    p.settle();
    assert_eq!(
        p.a.up.take_done(),
        [
            (Request, 1, Success),
            (Request, 2, Success),
            (Request, 3, Success)
        ]
    );
    assert_eq!(p.a.read(0, 6), b"abcdef");
}

#[test]
fn barrier_fence_waits_for_outstanding_reads() {
    let p = pair();
    post_read(&p, 1, 0, 4, CompletionFlags::empty());
    let mut wr = send_wr(ReqOp::Send, 2, p.a.segs(&p.mem, 8, 4), Default::default());
    wr.flags = CompletionFlags::BARRIER_FENCE;
    p.a.qp.post_send(wr).unwrap();
    assert_eq!(sends_logged(&p), 0, "the fenced Send waits for the read");
    p.settle();
    assert_eq!(sends_logged(&p), 1);
    let log = p.a.wire.log();
    assert!(matches!(log[0], Msg::ReadRequest { .. }));
    assert!(matches!(log[1], Msg::Send { .. }));
    // The read completed before the Send was transmitted, so it completes first.
    let done = p.a.up.take_done();
    assert_eq!(done[0], (Request, 1, Success));
    assert_eq!(done[1], (Request, 2, Success));
}

#[test]
fn fenced_request_completes_after_the_read_even_if_another_thread_pumps_meanwhile() {
    // The read's response arrives in one thread; while that thread reports the read's
    // completion, another pumps the send queue. The fenced Send must not overtake the read's
    // completion (it did: the ORQ was empty before the completion was queued).
    let p = pair();
    post_read(&p, 1, 0, 4, CompletionFlags::empty());
    let mut wr = send_wr(ReqOp::Send, 2, p.a.segs(&p.mem, 8, 4), Default::default());
    wr.flags = CompletionFlags::BARRIER_FENCE;
    p.a.qp.post_send(wr).unwrap();
    let a = Arc::downgrade(&p.a.qp);
    p.a.up
        .before_next_completion(move || a.upgrade().unwrap().pump());
    p.settle();
    assert_eq!(
        p.a.up.take_done(),
        [(Request, 1, Success), (Request, 2, Success)]
    );
}

#[test]
fn break_flushes_in_flight_then_reads_then_queued_then_receives_and_ends_once() {
    let attr = EpAttr {
        max_rdma_read_out: 1,
        ..Default::default()
    };
    let p = Pair::connected(attr, EpAttr::default());
    let rsegs = p.a.segs(&p.mem, 512, 16);
    p.a.qp.post_recv(recv_wr(50, rsegs)).unwrap();
    post_read(&p, 1, 0, 4, CompletionFlags::empty()); // outstanding (ORQ)
    post_read(&p, 2, 4, 4, CompletionFlags::empty()); // waits: ORD 1
    post_send(&p, 3, 8, 4); // queued behind it
    assert_eq!(p.a.qp.state(), EpState::Connected);
    p.a.qp.end_connection(ConnectionEventKind::Broken, true);
    p.a.qp.end_connection(ConnectionEventKind::Broken, true); // a second end does nothing
    let ups = p.a.up.take();
    assert!(one_end(&ups, ConnectionEventKind::Broken), "{ups:?}");
    let done: Vec<_> = ups
        .iter()
        .filter_map(|u| match u {
            Up::Done(c) => Some((c.queue, c.cookie.0, c.status)),
            _ => None,
        })
        .collect();
    assert_eq!(
        done,
        [
            (Request, 1, Flushed),
            (Request, 2, Flushed),
            (Request, 3, Flushed),
            (Recv, 50, Flushed)
        ]
    );
    assert_eq!(p.a.qp.state(), EpState::Disconnected);
    // The peer is told the connection broke, and ends once too.
    let last = p.a.wire.log().len();
    p.settle();
    assert_eq!(
        p.a.wire.log().len(),
        last,
        "nothing transmitted after the end"
    );
    let ups = p.b.up.take();
    assert!(one_end(&ups, ConnectionEventKind::Broken), "{ups:?}");
}

#[test]
fn graceful_disconnect_finishes_outstanding_reads_then_ends_once() {
    let p = pair();
    post_read(&p, 1, 0, 4, CompletionFlags::empty());
    post_send(&p, 2, 8, 4);
    p.a.qp.disconnect_graceful();
    assert_eq!(p.a.qp.state(), EpState::DisconnectPending);
    assert!(
        !p.a.up.take().iter().any(|u| matches!(u, Up::Event(_))),
        "no end while a read is outstanding"
    );
    // B serves the read (and takes the Send: it has a buffer).
    let rsegs = p.b.segs(&p.mem, 512, 16);
    p.b.qp.post_recv(recv_wr(60, rsegs)).unwrap();
    p.settle();
    let ups = p.a.up.take();
    let done: Vec<_> = ups
        .iter()
        .filter_map(|u| match u {
            Up::Done(c) => Some((c.cookie.0, c.status)),
            _ => None,
        })
        .collect();
    assert_eq!(
        done,
        [(1, Success)],
        "the read completes; the Send completed before"
    );
    assert!(one_end(&ups, ConnectionEventKind::Disconnected), "{ups:?}");
    assert!(matches!(ups.last(), Some(Up::Event(QpEvent::Ended(_)))));
    assert_eq!(p.a.qp.state(), EpState::Disconnected);
    let ups = p.b.up.take();
    assert!(one_end(&ups, ConnectionEventKind::Disconnected), "{ups:?}");
    assert!(ups
        .iter()
        .any(|u| matches!(u, Up::Done(c) if c.cookie == 60 && c.status == Success)));
}

#[test]
fn inbound_send_without_a_buffer_marks_the_peer_waiting_and_places_nothing() {
    let p = pair();
    post_send(&p, 1, 0, 4);
    assert!(matches!(
        p.step_a(),
        Some((_, Delivered::Send(RxSend::NoBuffer)))
    ));
    assert!(p.b.up.take().is_empty());
    assert!(p.b.qp.take_peer_waiting().is_some());
}

#[test]
fn a_post_after_the_end_is_flushed_at_once() {
    let p = pair();
    p.a.qp
        .end_connection(ConnectionEventKind::Disconnected, false);
    p.a.up.take();
    post_send(&p, 7, 0, 4);
    assert_eq!(p.a.up.take_done(), [(Request, 7, Flushed)]);
    assert!(p.a.wire.log().is_empty());
}

/// Counts its `removed` calls: the owner a DAT RMR's binding gives its memory-table entry.
#[derive(Default)]
struct Owner(AtomicUsize);

impl EntryOwner for Owner {
    fn removed(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A window (RMR entry) of `len` bytes over B's region at `off`, in protection zone `pz`,
/// with REMOTE_WRITE, and its owner.
fn window(p: &Pair, off: usize, len: u64, pz: u64) -> (u32, Arc<Owner>) {
    let owner = Arc::new(Owner::default());
    let as_dyn: Arc<dyn EntryOwner> = owner.clone();
    let stag = p
        .mem
        .insert_owned(
            EntryKind::Rmr,
            p.b.region.clone(),
            off,
            p.b.region.addr() + off as u64,
            len,
            pz,
            MemPriv::REMOTE_WRITE,
            1 << 10,
            Some(as_dyn),
        )
        .unwrap();
    (stag, owner)
}

/// A posts a Send with Invalidate of `stag` (8 bytes of its region; SOLICITED_WAIT if
/// `solicited`) and B has one receive (cookie 5) posted.
fn post_send_invalidate(p: &Pair, stag: u32, solicited: bool) {
    p.b.qp
        .post_recv(recv_wr(5, p.b.segs(&p.mem, 0, 64)))
        .unwrap();
    let mut wr = send_wr(
        ReqOp::SendInvalidate(stag),
        1,
        p.a.segs(&p.mem, 0, 8),
        Default::default(),
    );
    if solicited {
        wr.flags = CompletionFlags::SOLICITED_WAIT;
    }
    p.a.qp.post_send(wr).unwrap();
}

fn the_completion(ups: Vec<Up>) -> Completion {
    match &ups[..] {
        [Up::Done(c)] => *c,
        other => panic!("expected one completion, got {other:?}"),
    }
}

#[test]
fn send_with_invalidate_invalidates_the_window_before_the_receive_completes() {
    let p = pair();
    let (win, owner) = window(&p, 512, 64, PZ);
    let win_va = p.b.region.addr() + 512;
    post_send_invalidate(&p, win, true);
    assert!(
        matches!(&p.a.wire.log()[..], [Msg::Send { solicited: true, invalidate: Some(s), bytes }]
            if *s == win && bytes.len() == 8),
        "{:?}",
        p.a.wire.log()
    );
    assert_eq!(owner.0.load(Ordering::SeqCst), 0, "not before it arrives");
    // When B reports the receive, the window is gone already.
    let (mem, seen) = (p.mem.clone(), Arc::new(AtomicUsize::new(0)));
    let seen2 = seen.clone();
    p.b.up.before_next_completion(move || {
        let r = mem.resolve_remote(win, win_va, 1, PZ, MemPriv::REMOTE_WRITE);
        if r.is_err() {
            seen2.store(1, Ordering::SeqCst);
        }
    });
    let (_, d) = p.step_a().unwrap();
    assert_eq!(d, Delivered::Send(RxSend::Placed));
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "invalidated before completing"
    );
    let c = the_completion(p.b.up.take());
    assert_eq!(
        (c.queue, c.cookie.0, c.status, c.len),
        (Recv, 5, Success, 8)
    );
    assert_eq!(c.op, DtoOp::ReceiveWithInvalidate);
    assert_eq!(c.rmr_context, Some(win));
    assert!(c.signalled);
    assert_eq!(p.b.read(0, 8), p.a.read(0, 8));
    // The sender's completion is an ordinary Send's.
    let c = the_completion(p.a.up.take());
    assert_eq!((c.queue, c.cookie.0, c.status), (Request, 1, Success));
    assert_eq!((c.op, c.rmr_context), (DtoOp::Send, None));
    assert_eq!(owner.0.load(Ordering::SeqCst), 1, "the owner is told once");
    // A later write with the STag is refused as an invalid STag, and places nothing.
    let before = p.b.read(512, 64);
    let wr = send_wr(
        ReqOp::Write,
        2,
        p.a.segs(&p.mem, 0, 8),
        RmrTriplet::new(win, win_va, 8),
    );
    p.a.qp.post_send(wr).unwrap();
    assert_eq!(
        p.step_a().unwrap().1,
        Delivered::Write(Err(RxWriteFault::Access(RemoteFault::InvalidStag)))
    );
    assert_eq!(p.b.read(512, 64), before);
    assert_eq!(owner.0.load(Ordering::SeqCst), 1);
}

#[test]
fn send_with_invalidate_of_a_registration_an_unknown_or_another_pzs_stag_fails_the_receive() {
    for case in 0..3 {
        let p = pair();
        let (other_pz_win, owner) = window(&p, 512, 64, PZ + 1);
        let (stag, fault) = match case {
            // B's LMR: a registration, not a window.
            0 => (p.b.stag, InvalidateFault::NotInvalidatable),
            1 => (other_pz_win, InvalidateFault::PzMismatch),
            _ => (other_pz_win ^ 0x80, InvalidateFault::InvalidStag),
        };
        post_send_invalidate(&p, stag, false);
        let (_, d) = p.step_a().unwrap();
        assert_eq!(
            d,
            Delivered::Send(RxSend::NotInvalidated(fault)),
            "case {case}"
        );
        let c = the_completion(p.b.up.take());
        assert_eq!((c.queue, c.cookie.0, c.status), (Recv, 5, RemoteResponder));
        assert_eq!((c.op, c.rmr_context), (DtoOp::ReceiveWithInvalidate, None));
        // Nothing was invalidated.
        assert_eq!(owner.0.load(Ordering::SeqCst), 0);
        let va = p.b.region.addr();
        assert!(p
            .mem
            .resolve_remote(p.b.stag, va, 8, PZ, MemPriv::REMOTE_WRITE)
            .is_ok());
        assert!(p
            .mem
            .resolve_remote(other_pz_win, va + 512, 8, PZ + 1, MemPriv::REMOTE_WRITE)
            .is_ok());
    }
}

#[test]
fn responses_to_read_requests_received_together_go_out_as_one_held_batch() {
    let p = pair();
    // Three Read Requests handled at once (as the tcp link does for one read from its
    // socket): queued, then one pump.
    for k in 0..3u64 {
        p.b.qp
            .rx_read_request(
                p.a.stag,
                k * 64,
                64,
                p.b.stag,
                p.b.region.addr() + k * 64,
                false,
            )
            .unwrap();
    }
    assert!(
        p.b.wire.log().is_empty(),
        "nothing goes out before the pump"
    );
    p.b.qp.pump();
    let log = p.b.wire.log();
    assert_eq!(log.len(), 3);
    assert!(log.iter().all(|m| matches!(m, Msg::ReadResponse { .. })));
    // Held before the first, flushed once after the last.
    assert_eq!(p.b.wire.batches(), [(Batch::Hold, 0), (Batch::Flush, 3)]);
}

#[test]
fn a_lone_message_is_never_held() {
    let p = pair();
    post_send(&p, 1, 0, 8);
    p.b.qp
        .rx_read_request(p.a.stag, 0, 8, p.b.stag, p.b.region.addr(), true)
        .unwrap();
    assert_eq!(sends_logged(&p), 1);
    assert_eq!(p.b.wire.log().len(), 1);
    assert!(p.a.wire.batches().is_empty(), "{:?}", p.a.wire.batches());
    assert!(p.b.wire.batches().is_empty(), "{:?}", p.b.wire.batches());
}

#[test]
fn a_batch_that_stops_at_a_fence_is_flushed() {
    let p = pair();
    // A transmit stalls (the link queued it), and meanwhile a read, a fenced Send and another
    // Send are posted: when the link drains, the read goes, the fenced Send waits for it, and
    // what was held must go out then rather than wait for the fence.
    p.a.wire.script(&[TxOutcome::Queued]);
    post_send(&p, 1, 0, 8);
    post_read(&p, 2, 64, 8, CompletionFlags::empty());
    let segs = p.a.segs(&p.mem, 128, 8);
    let mut wr = send_wr(ReqOp::Send, 3, segs, Default::default());
    wr.flags = CompletionFlags::BARRIER_FENCE;
    p.a.qp.post_send(wr).unwrap();
    p.a.qp.tx_drained(99);
    let log = p.a.wire.log();
    assert!(
        matches!(log[..], [Msg::Send { .. }, Msg::ReadRequest { .. }]),
        "{log:?}"
    );
    assert_eq!(p.a.wire.batches(), [(Batch::Hold, 1), (Batch::Flush, 2)]);
}

#[test]
fn an_end_during_a_transmit_flushes_after_the_transmitted_wr_completes() {
    // The link's receive path ends the connection (the peer's Terminate answering this very
    // Write) on another thread while the Write is still inside `transmit`: the Write's
    // completion must come before the receive that the end flushes (one EVD may take both, as
    // dtestx's does), and the end is reported once.
    let p = pair();
    let rsegs = p.a.segs(&p.mem, 100, 64);
    p.a.qp.post_recv(recv_wr(10, rsegs)).unwrap();
    let a = Arc::downgrade(&p.a.qp);
    p.a.wire.on_next_transmit(move || {
        a.upgrade()
            .unwrap()
            .end_connection_of(99, ConnectionEventKind::Broken, true);
    });
    let segs = p.a.segs(&p.mem, 0, 8);
    p.a.qp
        .post_send(send_wr(ReqOp::Write, 1, segs, p.b.remote(0, 8)))
        .unwrap();
    let ups = p.a.up.take();
    let done: Vec<_> = ups
        .iter()
        .filter_map(|u| match u {
            Up::Done(c) => Some((c.queue, c.cookie.0, c.status)),
            Up::Event(_) => None,
        })
        .collect();
    assert_eq!(
        done,
        [(Request, 1, Success), (Recv, 10, Flushed)],
        "{ups:?}"
    );
    assert!(one_end(&ups, ConnectionEventKind::Broken), "{ups:?}");
    assert_eq!(p.a.qp.lock().state, EpState::Disconnected);
}

/// A Send of A's region at `off`, `len` bytes, with `flags`.
fn post_send_flagged(p: &Pair, cookie: u64, off: u64, len: u64, flags: CompletionFlags) {
    let mut wr = send_wr(
        ReqOp::Send,
        cookie,
        p.a.segs(&p.mem, off, len),
        Default::default(),
    );
    wr.flags = flags;
    p.a.qp.post_send(wr).unwrap();
}

#[test]
fn a_suppressed_send_on_an_idle_qp_goes_to_the_link_inline_and_arrives() {
    let p = pair();
    p.a.wire.take_inline();
    assert!(p.a.region.copy_in(0, b"inline!!"));
    post_send_flagged(&p, 1, 0, 8, CompletionFlags::SUPPRESS);
    assert_eq!(p.a.wire.inline_log(), [true]);
    assert!(
        p.a.up.take().is_empty(),
        "a suppressed success reports nothing"
    );
    let rsegs = p.b.segs(&p.mem, 100, 64);
    p.b.qp.post_recv(recv_wr(10, rsegs)).unwrap();
    assert!(p.step_a().is_some());
    assert_eq!(p.b.up.take_done(), [(Recv, 10, Success)]);
    let mut got = [0u8; 8];
    assert!(p.b.region.copy_out(100, &mut got));
    assert_eq!(&got, b"inline!!");
}

#[test]
fn only_suppressed_sends_and_writes_and_reads_go_inline() {
    let p = pair();
    p.a.wire.take_inline();
    post_send_flagged(&p, 1, 0, 8, CompletionFlags::empty());
    let write = |cookie, flags| {
        let mut w = send_wr(
            ReqOp::Write,
            cookie,
            p.a.segs(&p.mem, 0, 8),
            p.b.remote(0, 8),
        );
        w.flags = flags;
        p.a.qp.post_send(w).unwrap();
    };
    // A signalled write is reported when the link has it: never inline.
    write(2, CompletionFlags::empty());
    assert_eq!(p.a.wire.inline_log(), [false, false]);
    assert_eq!(
        p.a.up.take_done(),
        [(Request, 1, Success), (Request, 2, Success)]
    );
    write(3, CompletionFlags::SUPPRESS);
    assert_eq!(p.a.wire.inline_log(), [false, false, true]);
    post_read(&p, 4, 0, 8, CompletionFlags::empty());
    assert_eq!(p.a.wire.inline_log(), [false, false, true, true]);
}

#[test]
fn a_suppressed_write_whose_inline_attempt_failed_is_reported_once_and_breaks_the_connection() {
    let p = pair();
    p.a.wire.take_inline();
    p.a.wire.fail_next_inline(DtoStatus::RemoteAccess);
    let mut w = send_wr(ReqOp::Write, 7, p.a.segs(&p.mem, 0, 8), p.b.remote(0, 8));
    w.flags = CompletionFlags::SUPPRESS;
    p.a.qp.post_send(w).unwrap();
    // Offered once, not queued and transmitted again.
    assert_eq!(p.a.wire.inline_log(), [true]);
    let ups = p.a.up.take();
    assert_eq!(done_of(&ups), [(Request, 7, DtoStatus::RemoteAccess)]);
    assert!(one_end(&ups, ConnectionEventKind::Broken), "{ups:?}");
    assert_eq!(p.a.qp.state(), EpState::Disconnected);
    assert_eq!(p.a.wire.log().len(), 1, "nothing transmitted after the end");
}

#[test]
fn a_read_goes_inline_while_the_orq_has_room_and_completes_from_its_response_in_order() {
    let p = pair();
    p.a.wire.take_inline();
    let ord = EpAttr::default().max_rdma_read_out;
    for k in 0..ord + 1 {
        assert!(p.b.region.copy_in(8 * k, &[k as u8 + 1; 8]));
        post_read(&p, k as u64, 8 * k as u64, 8, CompletionFlags::empty());
    }
    // ORD requests inline; the next waits in the SQ for room in the ORQ.
    let mut want = vec![true; ord];
    assert_eq!(p.a.wire.inline_log(), want);
    assert!(p.a.up.take_done().is_empty());
    p.settle();
    want.push(false);
    assert_eq!(p.a.wire.inline_log(), want);
    let done: Vec<_> = (0..ord as u64 + 1).map(|k| (Request, k, Success)).collect();
    assert_eq!(p.a.up.take_done(), done);
    for k in 0..ord + 1 {
        assert_eq!(p.a.read(8 * k, 8), [k as u8 + 1; 8], "read {k}'s bytes");
    }
}

#[test]
fn a_lone_read_request_is_answered_inline_only_with_no_response_queued_before_it() {
    let p = pair();
    p.b.wire.take_inline();
    assert!(p.b.region.copy_in(0, b"one.....two.....three..."));
    // B's link keeps the first response it is given (`Queued`: its transmit stalls), so it
    // declines the offer of it inline (a scripted wire takes nothing inline) and the second
    // request, arriving alone while that response is B's, queues behind it.
    p.b.wire.script(&[TxOutcome::Queued]);
    post_read(&p, 1, 0, 8, CompletionFlags::empty());
    post_read(&p, 2, 8, 8, CompletionFlags::empty());
    p.settle();
    assert_eq!(
        p.b.wire.inline_log(),
        [false],
        "only the first response, queued"
    );
    assert_eq!(p.a.up.take_done(), [(Request, 1, Success)]);
    p.b.qp.tx_drained(99);
    p.settle();
    assert_eq!(
        p.b.wire.inline_log(),
        [false, false],
        "the second after it, queued"
    );
    assert_eq!(p.a.up.take_done(), [(Request, 2, Success)]);
    // Idle again: the next lone request is answered inline, by the request's handler.
    post_read(&p, 3, 16, 8, CompletionFlags::empty());
    p.settle();
    assert_eq!(p.b.wire.inline_log(), [false, false, true]);
    assert_eq!(p.a.up.take_done(), [(Request, 3, Success)]);
    assert_eq!(p.a.read(0, 24), b"one.....two.....three...");
    let responses: Vec<_> =
        p.b.wire
            .log()
            .into_iter()
            .filter_map(|m| match m {
                Msg::ReadResponse { bytes, .. } => Some(bytes),
                _ => None,
            })
            .collect();
    assert_eq!(
        responses,
        [
            b"one.....".to_vec(),
            b"two.....".to_vec(),
            b"three...".to_vec()
        ]
    );
}

#[test]
fn a_fenced_request_behind_an_inline_read_waits_for_its_completion() {
    let p = pair();
    p.a.wire.take_inline();
    assert!(p.b.region.copy_in(0, b"answer.."));
    post_read(&p, 1, 0, 8, CompletionFlags::empty());
    post_send_flagged(
        &p,
        2,
        8,
        8,
        CompletionFlags::SUPPRESS | CompletionFlags::BARRIER_FENCE,
    );
    assert_eq!(p.a.wire.inline_log(), [true], "the fenced Send is queued");
    p.settle();
    assert_eq!(p.a.wire.inline_log(), [true, false]);
    assert_eq!(p.a.up.take_done(), [(Request, 1, Success)]);
    assert_eq!(p.a.read(0, 8), b"answer..");
}

#[test]
fn a_suppressed_send_behind_a_stalled_one_keeps_its_place() {
    let p = pair();
    p.a.wire.take_inline();
    p.a.wire.script(&[TxOutcome::Queued]);
    post_send(&p, 1, 0, 8);
    // The link holds message 1: 2 queues behind it rather than going inline ahead of it.
    post_send_flagged(&p, 2, 8, 8, CompletionFlags::SUPPRESS);
    assert_eq!(p.a.wire.inline_log(), [false]);
    p.a.qp.tx_drained(99);
    assert_eq!(p.a.wire.inline_log(), [false, false]);
    // Idle again: the next one goes inline, after both.
    post_send_flagged(&p, 3, 16, 8, CompletionFlags::SUPPRESS);
    assert_eq!(p.a.wire.inline_log(), [false, false, true]);
    assert_eq!(p.a.up.take_done(), [(Request, 1, Success)]);
    assert_eq!(
        sent_bytes(&p),
        [a_bytes(&p, 0), a_bytes(&p, 8), a_bytes(&p, 16)]
    );
}

/// The payloads of the Sends A's wire carried, in order.
fn sent_bytes(p: &Pair) -> Vec<Vec<u8>> {
    p.a.wire
        .log()
        .into_iter()
        .map(|m| match m {
            Msg::Send { bytes, .. } => bytes,
            other => panic!("not a Send: {other:?}"),
        })
        .collect()
}

/// 8 bytes of A's region at `off`.
fn a_bytes(p: &Pair, off: usize) -> Vec<u8> {
    let mut b = vec![0u8; 8];
    assert!(p.a.region.copy_out(off, &mut b));
    b
}

#[test]
fn a_suppressed_send_posted_during_a_transmit_waits_for_it() {
    // Another thread posts while this one is inside `transmit` (the turn is taken, the QP's
    // lock free): its Send must queue and go after, not inline ahead of the WR in the link.
    let p = pair();
    p.a.wire.take_inline();
    let a = Arc::downgrade(&p.a.qp);
    let segs = p.a.segs(&p.mem, 8, 8);
    p.a.wire.on_next_transmit(move || {
        let mut wr = send_wr(ReqOp::Send, 2, segs, Default::default());
        wr.flags = CompletionFlags::SUPPRESS;
        a.upgrade().unwrap().post_send(wr).unwrap();
    });
    assert!(p.a.region.copy_in(0, b"first..."));
    assert!(p.a.region.copy_in(8, b"second.."));
    post_send(&p, 1, 0, 8);
    assert_eq!(p.a.wire.inline_log(), [false, false]);
    assert_eq!(sent_bytes(&p), [b"first...".to_vec(), b"second..".to_vec()]);
    assert_eq!(p.a.up.take_done(), [(Request, 1, Success)]);
}

#[test]
fn a_suppressed_send_waits_while_a_read_response_is_queued() {
    // B owes A a Read Response (queued in B's IRQ while B's link is stalled): B's suppressed
    // Send must not overtake it.
    let p = pair();
    p.b.wire.take_inline();
    p.b.wire.script(&[TxOutcome::Queued]);
    let segs = p.b.segs(&p.mem, 0, 8);
    p.b.qp
        .post_send(send_wr(ReqOp::Send, 1, segs, Default::default()))
        .unwrap();
    post_read(&p, 5, 0, 8, CompletionFlags::empty());
    assert!(p.step_a().is_some(), "the read request reaches B");
    let mut wr = send_wr(ReqOp::Send, 2, p.b.segs(&p.mem, 8, 8), Default::default());
    wr.flags = CompletionFlags::SUPPRESS;
    p.b.qp.post_send(wr).unwrap();
    assert_eq!(p.b.wire.inline_log(), [false]);
    p.b.qp.tx_drained(99);
    let log = p.b.wire.log();
    assert!(
        matches!(
            log[..],
            [Msg::Send { .. }, Msg::ReadResponse { .. }, Msg::Send { .. }]
        ),
        "{log:?}"
    );
    assert_eq!(p.b.wire.inline_log(), [false, false, false]);
}
