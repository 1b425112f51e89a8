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
    for round in 0..5u64 {
        for i in 0..N {
            src.write(8 * i as usize, &(round * N + i).to_le_bytes())
                .unwrap();
            p.b.ep
                .post_recv(&[inbox.triplet(8 * i, 8)], i, CompletionFlags::empty())
                .unwrap();
        }
        // One empty poll opens the window: a's records ring no doorbell, and b's progress
        // thread leaves them to b's polls.
        assert!(p.b.recv_evd.dequeue().unwrap().is_none());
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
