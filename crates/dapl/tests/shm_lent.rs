//! The shm link's lent messages (a Send of 8 KiB or more that the receiver copies out of the
//! sender's memory) complete when the receiver has consumed them, however the sender waits: a
//! sender that polls learns of it in its polls (no doorbell), and one that stops polling and
//! sleeps is rung once the message is consumed.

use std::time::{Duration, Instant};

use dapl::*;
use dapl_testkit::kit::*;

const LEN: usize = 64 << 10;

/// A lent Send posted while the sender polls (so it is not marked for a doorbell) completes
/// after the sender has gone to sleep in `evd_wait` and the receiver consumes it only then (its
/// receive is posted 200 ms later): the end of the polling hands the message to the progress
/// thread, which has the receiver ring.
#[test]
fn a_lent_send_posted_while_polling_completes_after_the_sender_sleeps() {
    let pair = Pair::new("shm");
    let (a, b) = (&pair.a, &pair.b);
    let src = a.lmr(LEN);
    let dst = b.lmr(LEN);
    let data: Vec<u8> = (0..LEN).map(|i| (i * 31 + 7) as u8).collect();
    src.write(0, &data).unwrap();
    for round in 0..3u64 {
        // Polls: the sender's IA window is open when the Send is posted.
        for _ in 0..100 {
            assert!(a.req_evd.dequeue().unwrap().is_none());
        }
        a.ep.post_send(
            &[src.slice(0..LEN).unwrap()],
            round,
            CompletionFlags::empty(),
        )
        .unwrap();
        let started = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(200));
                b.ep.post_recv(
                    &[dst.slice(0..LEN).unwrap()],
                    round,
                    CompletionFlags::empty(),
                )
                .unwrap();
            });
            let (ev, _) = a
                .req_evd
                .wait(Some(Duration::from_secs(10)), 1)
                .unwrap()
                .expect("the lent Send completes");
            let d = ev.as_dto().unwrap();
            assert_eq!((d.cookie, d.status), (Cookie(round), DtoStatus::Success));
            assert!(
                started.elapsed() >= Duration::from_millis(150),
                "completed before consumed"
            );
        });
        let got = Side::recv_done(b);
        assert_eq!(
            (got.cookie, got.transferred_length),
            (Cookie(round), LEN as u64)
        );
        assert_eq!(dst.to_vec(0, LEN).unwrap(), data);
    }
    pair.close();
}

/// A polling sender streams lent Sends to a polling receiver: every one completes, in order,
/// and the data arrives (the polls return them, with no doorbell).
#[test]
fn lent_sends_between_polling_sides_complete_in_order() {
    let pair = Pair::new("shm");
    let (a, b) = (&pair.a, &pair.b);
    let src = a.lmr(LEN);
    let dst = b.lmr(LEN);
    const N: u64 = 200;
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut buf = vec![0u8; LEN];
            for i in 0..N {
                b.ep.post_recv(&[dst.slice(0..LEN).unwrap()], i, CompletionFlags::empty())
                    .unwrap();
                let ev = poll(&b.recv_evd);
                let d = ev.as_dto().unwrap();
                assert_eq!((d.cookie, d.status), (Cookie(i), DtoStatus::Success));
                dst.read(0, &mut buf).unwrap();
                assert!(buf.iter().all(|&x| x == i as u8), "message {i}");
                // Tell the sender it may reuse its buffer.
                b.ep.post_send(&[], i, CompletionFlags::empty()).unwrap();
                let ev = poll(&b.req_evd);
                assert_eq!(ev.as_dto().unwrap().status, DtoStatus::Success);
            }
        });
        for i in 0..N {
            src.write(0, &vec![i as u8; LEN]).unwrap();
            a.ep.post_recv(&[], i, CompletionFlags::empty()).unwrap();
            a.ep.post_send(&[src.slice(0..LEN).unwrap()], i, CompletionFlags::empty())
                .unwrap();
            let ev = poll(&a.req_evd);
            let d = ev.as_dto().unwrap();
            assert_eq!((d.cookie, d.status), (Cookie(i), DtoStatus::Success));
            let ev = poll(&a.recv_evd);
            assert_eq!(ev.as_dto().unwrap().cookie, Cookie(i));
        }
    });
    pair.close();
}

/// Polls `evd` (dequeue, never wait) until an event comes, for at most 10 s.
fn poll(evd: &Evd) -> Event {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(ev) = evd.dequeue().unwrap() {
            return ev;
        }
        assert!(Instant::now() < until, "no event in 10 s");
        std::thread::yield_now();
    }
}
