//! The shm link's polling windows (docs/architecture.md, "The shm link", "Progress"): a
//! consumer that polls an empty EVD opens a window (4 ms) during which producers skip the
//! doorbell, since it reads the rings itself. One that then stops polling without going to
//! sleep in the library (a `wait_fd` user waiting in its own epoll, an async task) leaves a
//! message sent into the window to the link's progress thread, which must handle it when the
//! window ends, even if it was asleep when the window opened.

use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use dapl::*;
use dapl_testkit::kit::*;

/// Far above a window (4 ms) and what a loaded machine adds to it; far below the progress
/// thread's idle sleep (200 ms), which a window opened behind its back used to cost.
const BOUND: Duration = Duration::from_millis(100);

/// Waits on b's receive EVD's `fd` alone (no poll of the EVD) for round `round`'s completion:
/// signalled within [`BOUND`], the 8 bytes `bytes` in `inbox`.
fn delivered_within_bound(p: &Pair, fd: BorrowedFd<'_>, inbox: &Lmr, round: u64, bytes: &[u8]) {
    let t0 = Instant::now();
    let mut pfd = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::IN,
    )];
    let n = rustix::event::poll(&mut pfd, 1000).unwrap();
    let waited = t0.elapsed();
    assert_eq!(n, 1, "round {round}: no completion signalled in 1 s");
    assert!(
        waited < BOUND,
        "round {round}: the message waited {waited:?} for a window nobody polled"
    );
    let c = p.b.recv_done();
    assert_eq!(
        (c.cookie.0, c.status, c.transferred_length),
        (round, DtoStatus::Success, 8)
    );
    assert_eq!(inbox.to_vec(0, 8).unwrap(), bytes);
}

#[test]
fn a_send_into_a_window_its_consumer_abandons_is_delivered_when_the_window_ends() {
    let p = Pair::new("shm");
    let (src, inbox) = (p.a.lmr(64), p.b.lmr(64));
    src.write(0, b"windowed").unwrap();
    let fd = p.b.recv_evd.wait_fd().unwrap();
    for round in 0..3u64 {
        p.b.ep
            .post_recv(&[inbox.triplet(0, 64)], round, CompletionFlags::empty())
            .unwrap();
        // Quiet: b's progress thread goes to its idle sleep (no window open, nothing to do).
        std::thread::sleep(Duration::from_millis(20));
        // One poll of b's empty EVD opens the window; then b waits on the EVD's fd alone.
        assert!(p.b.recv_evd.dequeue().unwrap().is_none());
        p.a.ep
            .post_send(&[src.triplet(0, 8)], round, CompletionFlags::SUPPRESS)
            .unwrap();
        delivered_within_bound(&p, fd.as_fd(), &inbox, round, b"windowed");
    }
    p.close();
}

/// A Send that found no receive waits in the ring; the receive posted for it while the ring is
/// marked polled rings no doorbell (the consumer's next poll would find the Send): a consumer
/// that then waits on the EVD's fd alone still gets it when the window ends.
#[test]
fn a_send_waiting_for_a_receive_posted_in_a_window_its_consumer_abandons_is_delivered_when_the_window_ends(
) {
    let p = Pair::new("shm");
    let (src, inbox) = (p.a.lmr(64), p.b.lmr(64));
    src.write(0, b"stalled!").unwrap();
    let fd = p.b.recv_evd.wait_fd().unwrap();
    for round in 0..3u64 {
        p.a.ep
            .post_send(&[src.triplet(0, 8)], round, CompletionFlags::SUPPRESS)
            .unwrap();
        // b's polls find the Send and no receive for it: it waits in the ring, marked polled.
        for _ in 0..3 {
            assert!(p.b.recv_evd.dequeue().unwrap().is_none());
            std::thread::sleep(Duration::from_millis(1));
        }
        p.b.ep
            .post_recv(&[inbox.triplet(0, 64)], round, CompletionFlags::empty())
            .unwrap();
        delivered_within_bound(&p, fd.as_fd(), &inbox, round, b"stalled!");
        // Quiet between rounds: b's progress thread back to its idle sleep.
        std::thread::sleep(Duration::from_millis(20));
    }
    p.close();
}

/// Opens a polling window on `evd`'s IA that marks every ring of it polled, with the IA's
/// progress thread asleep until the window's end: the window that an earlier poll opened (the
/// connection set-up's waits poll) first runs out, since a window marks only the rings that
/// exist when it opens; the opening wakes the idle progress thread to time the window's end,
/// and it is let go back to sleep.
fn open_window_on_every_ring(evd: &Evd) {
    std::thread::sleep(Duration::from_millis(10));
    assert!(evd.dequeue().unwrap().is_none());
    std::thread::sleep(Duration::from_millis(1));
    assert!(evd.dequeue().unwrap().is_none());
}

/// A polling `dequeue_into(max)` (or `dequeue`) handles the records in the rings only until it
/// has its `max` completions: the rest stay in the ring, marked polled, for its next look,
/// instead of being queued on the EVD (two holds of its lock per completion) for the next
/// call to pop. Nothing is lost or reordered. (The progress thread may handle records itself
/// when a round is slow, so the queue is required to be empty in one round of several.)
#[test]
fn a_polling_dequeue_leaves_in_the_ring_what_it_did_not_ask_for() {
    const N: u64 = 16;
    const MAX: usize = 4;
    let p = Pair::new("shm");
    let (src, inbox) = (p.a.lmr(8 * N as usize), p.b.lmr(8 * N as usize));
    let mut left_in_ring = 0;
    for round in 0..10u64 {
        for i in 0..N {
            src.write(8 * i as usize, &(round * N + i).to_le_bytes())
                .unwrap();
            p.b.ep
                .post_recv(&[inbox.triplet(8 * i, 8)], i, CompletionFlags::empty())
                .unwrap();
        }
        // a's records ring no doorbell, and b's progress thread leaves them to b's polls.
        open_window_on_every_ring(&p.b.recv_evd);
        for i in 0..N {
            p.a.ep
                .post_send(&[src.triplet(8 * i, 8)], i, CompletionFlags::SUPPRESS)
                .unwrap();
        }
        let mut batch = Vec::new();
        let mut got = Vec::new();
        let end = Instant::now() + Duration::from_secs(5);
        while batch.is_empty() {
            assert!(Instant::now() < end, "round {round}: no completion");
            p.b.recv_evd.dequeue_into(&mut batch, MAX).unwrap();
        }
        assert!(batch.len() <= MAX);
        if p.b.recv_evd.query().unwrap().count == 0 {
            left_in_ring += 1;
        }
        got.extend(batch.iter().map(|e| e.as_dto().unwrap().cookie.0));
        // A single dequeue takes one, and leaves the rest as well.
        let one = loop {
            if let Some(e) = p.b.recv_evd.dequeue().unwrap() {
                break e;
            }
            assert!(Instant::now() < end, "round {round}: no second completion");
        };
        got.push(one.as_dto().unwrap().cookie.0);
        while (got.len() as u64) < N {
            assert!(
                Instant::now() < end,
                "round {round}: only {} completions",
                got.len()
            );
            batch.clear();
            p.b.recv_evd.dequeue_into(&mut batch, MAX).unwrap();
            got.extend(batch.iter().map(|e| e.as_dto().unwrap().cookie.0));
        }
        assert_eq!(got, (0..N).collect::<Vec<_>>(), "round {round}");
        for i in 0..N {
            let v =
                u64::from_le_bytes(inbox.to_vec(8 * i as usize, 8).unwrap().try_into().unwrap());
            assert_eq!(v, round * N + i, "round {round}, message {i}");
        }
        assert!(p.b.recv_evd.dequeue().unwrap().is_none());
    }
    assert!(
        left_in_ring > 0,
        "every round's first batch queued the rest of the ring's completions on the EVD"
    );
    p.close();
}

/// A poll that its consumer's `dequeue` finds satisfied still handles a record of every ring
/// that has one: a consumer whose every look is satisfied by one connection does not leave
/// another connection's messages waiting. (While it polls, the producers ring no doorbell, so
/// its looks are the only ones until its window ends.) Both orders of the two connections in
/// the IA's list, since the one looked at first is handled either way.
#[test]
fn a_satisfied_poll_still_handles_a_record_of_every_ring() {
    const BUSY: u64 = 64;
    for busy_is_first in [true, false] {
        let p = Pair::new("shm");
        // A second connection between the same two IAs, with its own receive EVD at b.
        let a2_conn = p.a.ia.evd_create(16, None, EvdFlags::CONNECTION).unwrap();
        let b2_conn = p.b.ia.evd_create(16, None, EvdFlags::CONNECTION).unwrap();
        let b2_recv = p.b.ia.evd_create(256, None, EvdFlags::DTO).unwrap();
        let a2 = (p.a.ia.endpoint(&p.a.pz))
            .recv_evd(&p.a.recv_evd)
            .request_evd(&p.a.req_evd)
            .connect_evd(&a2_conn)
            .build()
            .unwrap();
        let b2 = (p.b.ia.endpoint(&p.b.pz))
            .recv_evd(&b2_recv)
            .request_evd(&p.b.req_evd)
            .connect_evd(&b2_conn)
            .build()
            .unwrap();
        let _second = connect(
            End {
                ep: &a2,
                conn_evd: &a2_conn,
            },
            &p.b.ia,
            End {
                ep: &b2,
                conn_evd: &b2_conn,
            },
            b"",
            b"",
        );
        let (busy, quiet) = if busy_is_first {
            ((&p.a.ep, &p.b.ep, &p.b.recv_evd), (&a2, &b2, &b2_recv))
        } else {
            ((&a2, &b2, &b2_recv), (&p.a.ep, &p.b.ep, &p.b.recv_evd))
        };
        let (src, inbox) = (p.a.lmr(8), p.b.lmr(8 * (BUSY as usize + 1)));
        for i in 0..BUSY {
            busy.1
                .post_recv(&[inbox.triplet(8 * i, 8)], i, CompletionFlags::empty())
                .unwrap();
        }
        quiet
            .1
            .post_recv(&[inbox.triplet(8 * BUSY, 8)], 0, CompletionFlags::empty())
            .unwrap();
        open_window_on_every_ring(busy.2);
        for i in 0..BUSY {
            busy.0
                .post_send(&[src.triplet(0, 8)], i, CompletionFlags::SUPPRESS)
                .unwrap();
        }
        quiet
            .0
            .post_send(&[src.triplet(0, 8)], 0, CompletionFlags::SUPPRESS)
            .unwrap();
        // Each `dequeue` of the busy EVD is satisfied by the busy connection's first record;
        // the quiet one's record is handled in the same look (or, if that look finds the
        // quiet ring's lock held by the progress thread, in the next). Left alone by
        // satisfied looks, it would wait until the busy ring is empty.
        let mut taken = 0;
        let end = Instant::now() + Duration::from_secs(5);
        while quiet.2.query().unwrap().count == 0 {
            assert!(
                Instant::now() < end,
                "the quiet connection's message never came"
            );
            if busy.2.dequeue().unwrap().is_some() {
                taken += 1;
            }
            assert!(
                taken <= 2,
                "busy first: {busy_is_first}: {taken} satisfied looks left the quiet ring alone"
            );
        }
        let got = quiet.2.dequeue().unwrap().expect("the quiet completion");
        assert_eq!(got.as_dto().unwrap().status, DtoStatus::Success);
        while taken < BUSY {
            assert!(Instant::now() < end, "only {taken} busy completions");
            if busy.2.dequeue().unwrap().is_some() {
                taken += 1;
            }
        }
        drop((a2, b2));
        p.close();
    }
}
