//! White-box test of the tcp link's hand-off between its progress thread and a consumer that
//! polls (docs/architecture.md, "Who makes progress"), through the DAT API and the hidden
//! `dapl::testing` probe of the link's state.
use std::time::{Duration, Instant};

use dapl::testing::{handoff_state, set_handoff_window, tcp_hot_looks};
use dapl::*;
use dapl_testkit::kit::*;

/// Two tcp sides, connected.
fn pair() -> (Side, Side) {
    let p = Pair::connect(Side::new("tcp", None), Side::new("tcp", None));
    (p.a, p.b)
}

fn state(s: &Side) -> (bool, bool) {
    handoff_state(&s.ia)
}

/// Sends message `n` (its own number) from `b` to `a`, from its own slot of `src`: a Send's
/// buffer must not change until it completed (SUPPRESS hides that; a post may wait in the
/// send queue while another thread transmits), and at most a few messages are in flight.
fn send(b: &Side, src: &Lmr, n: u64) {
    let slot = n % 64 * 8;
    src.write(slot as usize, &n.to_le_bytes()).unwrap();
    b.ep.post_send(&[src.triplet(slot, 8)], n, CompletionFlags::SUPPRESS)
        .unwrap();
}

/// Checks a completion on `a`: receive `n`, carrying `n`; its buffer goes up again.
fn took(a: &Side, dst: &Lmr, ev: Event, n: u64) {
    let d = ev.as_dto().unwrap();
    assert_eq!((d.status, d.cookie.0), (DtoStatus::Success, n));
    let slot = n % 64 * 8;
    let mut v = [0u8; 8];
    dst.read(slot as usize, &mut v).unwrap();
    assert_eq!(u64::from_le_bytes(v), n);
    a.ep.post_recv(&[dst.triplet(slot, 8)], n + 64, CompletionFlags::empty())
        .unwrap();
}

/// Polls `a`'s receive EVD, with a message from `b` now and then to wake the progress
/// thread (it decides when it wakes), until the thread has handed the connection over.
fn poll_until_handed_over(a: &Side, b: &Side, bufs: (&Lmr, &Lmr), n: (&mut u64, &mut u64)) {
    let ((src, dst), (sent, got)) = (bufs, n);
    eventually(
        "the progress thread hands the connection to the polling consumer",
        || {
            if *sent == *got {
                send(b, src, *sent);
                *sent += 1;
            }
            let deadline = Instant::now() + Duration::from_millis(2);
            while Instant::now() < deadline {
                if let Some(ev) = a.recv_evd.dequeue().unwrap() {
                    took(a, dst, ev, *got);
                    *got += 1;
                }
            }
            state(a) == (false, true)
        },
    );
}

/// `b`'s send slots and `a`'s receive slots (64 of 8 bytes each), every receive posted.
fn buffers(a: &Side, b: &Side) -> (Lmr, Lmr) {
    let src = b.pz.lmr_allocate(8 * 64, MemPriv::ALL).unwrap();
    let dst = a.pz.lmr_allocate(8 * 64, MemPriv::ALL).unwrap();
    for i in 0..64u64 {
        a.ep.post_recv(&[dst.triplet(i * 8, 8)], i, CompletionFlags::empty())
            .unwrap();
    }
    (src, dst)
}

/// After `a`'s polls stopped: its progress thread takes the connection back and handles
/// message `n` from `b` by itself.
fn taken_back_and_handled(a: &Side, b: &Side, bufs: (&Lmr, &Lmr), n: u64) {
    let (src, dst) = bufs;
    eventually("the progress thread takes the connection back", || {
        state(a) == (true, false)
    });
    send(b, src, n);
    // Not evd_wait or dequeue: they would read the socket themselves (query does not).
    eventually("the progress thread handles the message", || {
        a.recv_evd.query().unwrap().count == 1
    });
    let ev = a.recv_evd.dequeue().unwrap().expect("the message");
    took(a, dst, ev, n);
}

/// A consumer that polls its receive EVD takes the connections from the progress thread
/// (which then stops waking for each message) and reads the sockets itself; going to sleep
/// in evd_wait gives them back at once, and polls that stop give them back within `HOT`.
#[test]
fn progress_thread_leaves_connections_to_a_polling_consumer_and_takes_them_back() {
    let (a, b) = pair();
    assert_eq!(state(&a), (true, false), "nobody polls yet");
    let (src, dst) = buffers(&a, &b);
    // Long enough that only evd_wait can end it.
    set_handoff_window(&a.ia, Duration::from_secs(60));
    let (mut sent, mut got) = (0u64, 0u64);
    poll_until_handed_over(&a, &b, (&src, &dst), (&mut sent, &mut got));
    // Messages still arrive, through the polls alone.
    for _ in 0..8 {
        send(&b, &src, sent);
        sent += 1;
    }
    while got < sent {
        if let Some(ev) = a.recv_evd.dequeue().unwrap() {
            took(&a, &dst, ev, got);
            got += 1;
        }
    }
    assert_eq!(state(&a), (false, true), "still handed over");
    // Sleeping in evd_wait hands them back before it sleeps.
    let r = a.recv_evd.wait(Some(Duration::from_millis(200)), 1);
    assert!(matches!(r, Ok(None)), "expected a timeout: {r:?}");
    assert_eq!(
        state(&a),
        (true, false),
        "evd_wait gave the connection back"
    );
    // So does sleeping in cno_wait.
    poll_until_handed_over(&a, &b, (&src, &dst), (&mut sent, &mut got));
    let cno = a.ia.cno_create().unwrap();
    let r = cno.wait(Some(Duration::from_millis(50)));
    assert!(matches!(r, Ok(None)), "expected a timeout: {r:?}");
    assert_eq!(
        state(&a),
        (true, false),
        "cno_wait gave the connection back"
    );
    cno.free().unwrap();
    // Polls that just stop: the progress thread takes the connection back by itself, and
    // handles what arrives then.
    set_handoff_window(&a.ia, Duration::from_millis(5));
    poll_until_handed_over(&a, &b, (&src, &dst), (&mut sent, &mut got));
    taken_back_and_handled(&a, &b, (&src, &dst), sent);
    a.close();
    b.close();
}

/// While a consumer keeps polling, the progress thread looks again later each time (twice as
/// long, up to 8 windows), rather than once per window: each look is a wake-up that takes a
/// CPU from the polling threads. Once the polls stop it still takes the connection back.
#[test]
fn progress_thread_looks_at_a_long_polling_consumer_less_and_less() {
    let (a, b) = pair();
    let (src, dst) = buffers(&a, &b);
    let window = Duration::from_millis(5);
    set_handoff_window(&a.ia, window);
    let (mut sent, mut got) = (0u64, 0u64);
    poll_until_handed_over(&a, &b, (&src, &dst), (&mut sent, &mut got));
    let polled = Duration::from_millis(400);
    let looks_before = tcp_hot_looks(&a.ia);
    let end = Instant::now() + polled;
    while Instant::now() < end {
        // The hand-over's last message may still come.
        if let Some(ev) = a.recv_evd.dequeue().unwrap() {
            took(&a, &dst, ev, got);
            got += 1;
        }
    }
    assert_eq!(got, sent);
    let looks = tcp_hot_looks(&a.ia) - looks_before;
    // One look per window would be 80; backing off to 8 windows, about 12 (plus a few the
    // hand-over's last looks may add).
    let per_window = (polled.as_millis() / window.as_millis()) as u64;
    assert!(
        looks <= per_window / 4,
        "{looks} looks in {polled:?} of polls (one per window: {per_window})"
    );
    assert!(looks >= 1, "the thread must still look");
    taken_back_and_handled(&a, &b, (&src, &dst), sent);
    a.close();
    b.close();
}

/// An RDMA Read completes with inbound data (its response), as a receive does: a consumer
/// polling the request EVD of an endpoint that reads takes the connections as one polling a
/// receive EVD does. Before the endpoint's first read, polls of that EVD (whose completions
/// come from this side alone) leave them with the progress thread.
#[test]
fn polling_the_request_evd_of_rdma_reads_takes_the_connections_as_receives_do() {
    let (a, b) = pair();
    set_handoff_window(&a.ia, Duration::from_secs(60));
    let deadline = Instant::now() + Duration::from_millis(50);
    while Instant::now() < deadline {
        assert!(a.req_evd.dequeue().unwrap().is_none());
    }
    assert_eq!(
        state(&a),
        (true, false),
        "no read yet: the connections stay"
    );
    let src = b.pz.lmr_allocate(8, MemPriv::ALL).unwrap();
    let dst = a.pz.lmr_allocate(8, MemPriv::ALL).unwrap();
    let remote = RmrTriplet::new(src.rmr_context(), src.address(), 8);
    let mut n = 0u64;
    eventually(
        "the progress thread hands the connection to the consumer polling for its reads",
        || {
            src.write(0, &n.to_le_bytes()).unwrap();
            a.ep.post_rdma_read(&[dst.triplet(0, 8)], n, &remote, CompletionFlags::empty())
                .unwrap();
            let ev = loop {
                if let Some(ev) = a.req_evd.dequeue().unwrap() {
                    break ev;
                }
            };
            let d = ev.as_dto().unwrap();
            assert_eq!((d.status, d.cookie.0), (DtoStatus::Success, n));
            let mut v = [0u8; 8];
            dst.read(0, &mut v).unwrap();
            assert_eq!(u64::from_le_bytes(v), n);
            n += 1;
            state(&a) == (false, true)
        },
    );
    a.close();
    b.close();
}

#[test]
fn a_send_waiting_for_a_buffer_is_placed_by_the_thread_that_posts_the_buffer() {
    // The Send arrives with no receive posted: the link holds it (RNR wait). Posting the
    // buffer places it before `post_recv` returns, in the posting thread, rather than waking
    // the progress thread to do it (a wake-up and two context switches per refill).
    let (a, b) = pair();
    let src = b.lmr(64 * 8);
    let dst = a.lmr(64 * 8);
    for round in 0..20u64 {
        send(&b, &src, round);
        // Long enough for the Send to arrive and stall (well inside the 500 ms RNR grace).
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            a.recv_evd.dequeue().unwrap().is_none(),
            "round {round}: nothing may complete without a buffer"
        );
        let slot = round % 64 * 8;
        a.ep.post_recv(&[dst.triplet(slot, 8)], round, CompletionFlags::empty())
            .unwrap();
        // No wait: the completion is queued already.
        let ev = a.recv_evd.dequeue().unwrap();
        let ev = ev
            .unwrap_or_else(|| panic!("round {round}: the receive did not complete in post_recv"));
        let d = ev.as_dto().unwrap();
        assert_eq!((d.status, d.cookie.0), (DtoStatus::Success, round));
        let mut v = [0u8; 8];
        dst.read(slot as usize, &mut v).unwrap();
        assert_eq!(u64::from_le_bytes(v), round);
    }
    assert_eq!(a.ep.state(), EpState::Connected);
    a.close();
    b.close();
}

/// A consumer that begins to poll while the progress thread sleeps with the connections in
/// its epoll set takes them at once, with no message arriving: its first poll wakes the
/// thread (`Shared::open_window`). Left asleep, the thread would keep them until something
/// returned from its `epoll_wait`, and every message meanwhile would wake it in the kernel
/// for nothing (the polling consumer reads it first): a context switch per message on a
/// spinning thread's CPU, which put datperf's ping-pong at 7-15 us per half round trip for
/// whole rounds (docs/architecture.md, "Who makes progress").
#[test]
fn a_consumer_that_begins_to_poll_takes_the_connections_without_a_message() {
    let (a, b) = pair();
    set_handoff_window(&a.ia, Duration::from_millis(5));
    // Idle: nobody polls, the progress thread has the connection and sleeps.
    eventually("the progress thread has the connection", || {
        state(&a) == (true, false)
    });
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(state(&a), (true, false), "nobody polled meanwhile");
    // Empty polls alone (nothing is sent), each within the window of the one before.
    let end = Instant::now() + Duration::from_secs(2);
    loop {
        assert!(a.recv_evd.dequeue().unwrap().is_none(), "nothing was sent");
        if state(&a) == (false, true) {
            break;
        }
        assert!(
            Instant::now() < end,
            "the progress thread kept the connection from a polling consumer"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    a.close();
    b.close();
}
