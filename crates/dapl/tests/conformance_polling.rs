//! Consumers that busy-poll (`evd_dequeue` loops) drive their connections themselves: on the
//! tcp link a polling consumer reads the sockets in its own thread and the progress thread
//! stands back (docs/architecture.md, "Who makes progress"). These tests check that nothing
//! that needs no consumer call stalls or is lost because of that: inbound RDMA writes while
//! the consumer spins on memory instead of polling, RDMA reads served by a polling
//! responder, more connections than a poll reads directly, and transmit backlogs. Each runs
//! over every link (`per_link!`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dapl::*;
use dapl_testkit::kit::*;

/// How long the polling phases of these tests last.
const POLL_FOR: Duration = Duration::from_millis(50);

/// Busy-polls `evd` until it yields an event (or the harness's timeout passes).
#[track_caller]
fn poll_event(evd: &Evd) -> Event {
    let end = Instant::now() + T.unwrap();
    loop {
        if let Some(ev) = evd.dequeue().unwrap() {
            return ev;
        }
        assert!(Instant::now() < end, "no event while polling");
        std::thread::yield_now();
    }
}

/// Busy-polls `evd`, which must stay empty, for `d`.
#[track_caller]
fn poll_empty(evd: &Evd, d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if let Some(ev) = evd.dequeue().unwrap() {
            panic!("unexpected event {ev:?}");
        }
    }
}

/// A filled LMR: byte `i` is `(i * 7) as u8 ^ seed`.
fn pattern(pz: &Pz, len: usize, seed: u8) -> Lmr {
    let l = pz.lmr_allocate(len, MemPriv::ALL).unwrap();
    let v: Vec<u8> = (0..len).map(|i| (i * 7) as u8 ^ seed).collect();
    l.write(0, &v).unwrap();
    l
}

fn contents(l: &Lmr) -> Vec<u8> {
    let mut v = vec![0u8; l.len()];
    l.read(0, &mut v).unwrap();
    v
}

per_link!(
    inbound_rdma_write_lands_while_the_target_spins_on_memory_after_polling,
    |link| {
        let p = Pair::new(link);
        let target = p.a.lmr(4096);
        // The target polls its receive EVD for a message (on tcp the progress thread wakes
        // for it and then leaves the connection to the polls), polls on for a while, then
        // stops calling into the library and only reads its memory, waiting for the write.
        let msg = p.b.lmr(8);
        p.a.ep
            .post_recv(&[target.triplet(0, 8)], 7, CompletionFlags::empty())
            .unwrap();
        p.b.ep
            .post_send(&[msg.triplet(0, 8)], 7, CompletionFlags::SUPPRESS)
            .unwrap();
        assert_eq!(poll_event(&p.a.recv_evd).as_dto().unwrap().cookie, 7);
        poll_empty(&p.a.recv_evd, POLL_FOR);
        let src = pattern(&p.b.pz, 4096, 0x5a);
        p.b.ep
            .post_rdma_write(
                &[src.triplet(0, 4096)],
                1,
                &target.rmr_triplet(0, 4096),
                CompletionFlags::empty(),
            )
            .unwrap();
        let want = contents(&src);
        // Polls the last byte as a consumer would (acquire), then reads the rest.
        eventually(
            "the RDMA write lands without a call from its target",
            || target.load_acquire(4095).unwrap() == want[4095],
        );
        assert!(
            contents(&target) == want,
            "the last byte landed before the rest"
        );
        assert_eq!(p.b.req_done().status, DtoStatus::Success);
        p.close();
    }
);

per_link!(rdma_reads_are_served_while_the_responder_polls, |link| {
    let p = Pair::new(link);
    let src = pattern(&p.b.pz, 64 * 1024, 0x33);
    let dst = p.a.lmr(64 * 1024);
    let stop = Arc::new(AtomicBool::new(false));
    // The responder busy-polls its receive EVD (nothing arrives there) the whole time.
    let responder = {
        let (evd, stop) = (p.b.recv_evd.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                assert!(evd.dequeue().unwrap().is_none());
            }
        })
    };
    for i in 0..64u64 {
        let len = 1 + i * 1000;
        p.a.ep
            .post_rdma_read(
                &[dst.triplet(0, len)],
                i,
                &src.rmr_triplet(0, len),
                CompletionFlags::empty(),
            )
            .unwrap();
        let d = p.a.req_done();
        assert_eq!((d.status, d.cookie.0), (DtoStatus::Success, i));
        assert_eq!(d.transferred_length, len);
    }
    stop.store(true, Ordering::Relaxed);
    responder.join().unwrap();
    assert_eq!(contents(&dst)[..63_001], contents(&src)[..63_001]);
    p.close();
});

per_link!(one_poller_gets_every_message_of_three_connections, |link| {
    // One IA, three endpoints sharing one receive EVD, connected to three peers; the consumer
    // polls the shared EVD while the connections come up one by one and carry messages.
    let (ia, _async) = InterfaceAdapter::open(link, 16).unwrap();
    let pz = ia.pz_create().unwrap();
    let recv = ia.evd_create(256, None, EvdFlags::DTO).unwrap();
    let req = ia.evd_create(256, None, EvdFlags::DTO).unwrap();
    let buf = pz.lmr_allocate(3 * 64 * 8, MemPriv::ALL).unwrap();
    let mut peers = Vec::new();
    let mut eps = Vec::new();
    for c in 0..3u64 {
        let conn = ia.evd_create(8, None, EvdFlags::CONNECTION).unwrap();
        let ep = ia
            .ep_create(&pz, Some(&recv), Some(&req), Some(&conn), None)
            .unwrap();
        for i in 0..64u64 {
            let at = (c * 64 + i) * 8;
            ep.post_recv(&[buf.triplet(at, 8)], at, CompletionFlags::empty())
                .unwrap();
        }
        let peer = Side::new(link, None);
        let active = End {
            ep: &ep,
            conn_evd: &conn,
        };
        let (psp, cr_evd) = connect(active, &peer.ia, peer.end(), b"", b"");
        eps.push((ep, conn));
        let src = peer.lmr(8);
        peers.push((peer, psp, cr_evd, src));
        // Every connection so far sends some messages; the consumer polls them all in.
        let mut got = std::collections::HashSet::new();
        for (k, (peer, _, _, src)) in peers.iter().enumerate() {
            for i in 0..64u64 / (c + 1) {
                let value = k as u64 * 1000 + i;
                src.write(0, &value.to_le_bytes()).unwrap();
                peer.ep
                    .post_send(&[src.triplet(0, 8)], i, CompletionFlags::empty())
                    .unwrap();
                assert_eq!(peer.req_done().status, DtoStatus::Success);
                let ev = poll_event(&recv);
                let d = ev.as_dto().unwrap();
                assert_eq!(d.status, DtoStatus::Success);
                assert_eq!(d.ep, eps[k].0);
                let mut v = [0u8; 8];
                buf.read(d.cookie.0 as usize, &mut v).unwrap();
                assert_eq!(u64::from_le_bytes(v), value);
                assert!(got.insert(d.cookie), "buffer {} completed twice", d.cookie);
                // The buffer goes up again for the next round.
                let again = [buf.triplet(d.cookie.0, 8)];
                eps[k]
                    .0
                    .post_recv(&again, d.cookie, CompletionFlags::empty())
                    .unwrap();
            }
        }
    }
    for (peer, _, _, _) in peers {
        peer.close();
    }
    ia.close(CloseFlags::Abrupt).unwrap();
});

per_link!(
    a_send_larger_than_the_socket_buffers_completes_while_both_sides_poll,
    |link| {
        const LEN: usize = 24 << 20;
        let p = Pair::new(link);
        let src = pattern(&p.a.pz, LEN, 0x77);
        let dst = p.b.lmr(LEN);
        p.b.ep
            .post_recv(&[dst.triplet(0, LEN as u64)], 9, CompletionFlags::empty())
            .unwrap();
        // The receiver polls on its own thread; the sender posts, then polls its receive
        // EVD (where nothing arrives) before it looks for the send's completion.
        let receiver = {
            let evd = p.b.recv_evd.clone();
            std::thread::spawn(move || poll_event(&evd).as_dto().unwrap().clone())
        };
        p.a.ep
            .post_send(&[src.triplet(0, LEN as u64)], 3, CompletionFlags::empty())
            .unwrap();
        poll_empty(&p.a.recv_evd, POLL_FOR);
        let d = poll_event(&p.a.req_evd);
        let d = d.as_dto().unwrap();
        assert_eq!((d.status, d.cookie.0), (DtoStatus::Success, 3));
        let r = receiver.join().unwrap();
        assert_eq!((r.status, r.cookie.0), (DtoStatus::Success, 9));
        assert_eq!(r.transferred_length, LEN as u64);
        assert!(contents(&dst) == contents(&src), "the data arrived intact");
        p.close();
    }
);

per_link!(
    transmit_backlogs_drain_while_the_sender_alternates_polling_and_waiting,
    |link| {
        // Sends of 64 KiB in a window of 32, signalled every 8th: the socket fills, the link
        // queues the rest and must be told when it can write again, while the sender's thread
        // polls its receive EVD (handing the link's progress over to it) and sleeps in
        // evd_wait (handing it back) in turn. A lost writability interest stalls this.
        const LEN: u64 = 64 * 1024;
        const COUNT: u64 = 3000;
        const WINDOW: u64 = 32;
        let p = Pair::new(link);
        let src = pattern(&p.a.pz, LEN as usize, 0x11);
        let dst = p.b.lmr(LEN as usize * 64);
        for i in 0..64 {
            p.b.ep
                .post_recv(&[dst.triplet(i * LEN, LEN)], i, CompletionFlags::empty())
                .unwrap();
        }
        let receiver = {
            let (ep, evd, dst) = (p.b.ep.clone(), p.b.recv_evd.clone(), dst.clone());
            std::thread::spawn(move || {
                for n in 0..COUNT {
                    let (ev, _) = evd.wait(T, 1).unwrap().expect("a receive completion");
                    let d = ev.as_dto().unwrap().clone();
                    assert_eq!((d.status, d.cookie.0 % 64), (DtoStatus::Success, n % 64));
                    let at = d.cookie.0 % 64 * LEN;
                    ep.post_recv(
                        &[dst.triplet(at, LEN)],
                        d.cookie.0 + 64,
                        CompletionFlags::empty(),
                    )
                    .unwrap();
                }
            })
        };
        let (mut posted, mut done) = (0u64, 0u64);
        while done < COUNT {
            while posted < COUNT && posted - done < WINDOW {
                let flags = if (posted + 1) % 8 == 0 || posted + 1 == COUNT {
                    CompletionFlags::empty()
                } else {
                    CompletionFlags::SUPPRESS
                };
                p.a.ep
                    .post_send(&[src.triplet(0, LEN)], posted, flags)
                    .unwrap();
                posted += 1;
            }
            if done % 16 == 0 {
                // A few empty polls of the receive EVD, then sleep for the send completion.
                for _ in 0..64 {
                    assert!(p.a.recv_evd.dequeue().unwrap().is_none());
                }
            }
            let (ev, _) = p.a.req_evd.wait(T, 1).unwrap().expect("a send completion");
            let d = ev.as_dto().unwrap();
            assert_eq!(d.status, DtoStatus::Success);
            done = d.cookie.0 + 1;
        }
        receiver.join().unwrap();
        p.close();
    }
);

per_link!(
    rdma_write_whose_data_the_target_saw_before_it_disconnected_completes_successfully,
    |link| {
        // The target spins on the last byte and disconnects the moment it lands (as dtest's
        // RDMA write ping-pong does after its last round): the write's data arrived, so the
        // writer's completion is SUCCESS, never FLUSHED. Over shm a write of 64 KiB is lent
        // (the target copies it out of the writer's memory), and the target's Close once
        // overtook the return of the descriptor it was still handling. Many rounds: the
        // window is a few instructions wide.
        const LEN: usize = 64 * 1024;
        for round in 0..150u32 {
            let p = Pair::new(link);
            let target = p.a.lmr(LEN);
            let src = pattern(&p.b.pz, LEN, round as u8 | 1);
            let last = contents(&src)[LEN - 1];
            assert_ne!(last, 0);
            let watcher = {
                let (target, ep) = (target.clone(), p.a.ep.clone());
                std::thread::spawn(move || {
                    while target.load_acquire(LEN - 1).unwrap() != last {
                        std::hint::spin_loop();
                    }
                    ep.disconnect(CloseFlags::Abrupt).unwrap();
                })
            };
            p.b.ep
                .post_rdma_write(
                    &[src.triplet(0, LEN as u64)],
                    u64::from(round),
                    &target.rmr_triplet(0, LEN as u64),
                    CompletionFlags::empty(),
                )
                .unwrap();
            watcher.join().unwrap();
            let done = p.b.req_done();
            assert_eq!(done.cookie, u64::from(round));
            assert_eq!(
                done.status,
                DtoStatus::Success,
                "round {round}: the write whose data the target saw"
            );
            p.close();
        }
    }
);

// A poll that finds many messages produces all their completions at once: the first goes
// straight back to the `dequeue` that polled (it is never queued), the rest are queued behind
// it. Each comes out once, in the order of the receives, and nothing more.
per_link!(
    completions_one_poll_produces_are_dequeued_in_order_exactly_once,
    |link| {
        const N: usize = 200;
        const LEN: usize = 8;
        let p = Pair::streaming(link, N + 8);
        let src = p.a.lmr(N * LEN);
        let inbox = p.b.lmr(N * LEN);
        for round in 0..3 {
            for m in 0..N {
                src.write(m * LEN, &message_bytes(m + round * N, LEN))
                    .unwrap();
                p.b.ep
                    .post_recv(
                        &[inbox.triplet((m * LEN) as u64, LEN as u64)],
                        m as u64,
                        CompletionFlags::empty(),
                    )
                    .unwrap();
            }
            // The receiver polls (so the messages wait for its polls, not the progress
            // thread), then the sender sends them all, then the receiver takes them.
            poll_empty(&p.b.recv_evd, Duration::from_millis(5));
            for m in 0..N {
                p.a.ep
                    .post_send(
                        &[src.triplet((m * LEN) as u64, LEN as u64)],
                        m as u64,
                        CompletionFlags::SUPPRESS,
                    )
                    .unwrap();
            }
            for m in 0..N {
                let Event::Dto(c) = poll_event(&p.b.recv_evd) else {
                    panic!("not a DTO completion");
                };
                assert_eq!(
                    (c.cookie.0, c.status, c.transferred_length),
                    (m as u64, DtoStatus::Success, LEN as u64),
                    "round {round}, message {m}"
                );
                assert_eq!(
                    inbox.to_vec(m * LEN, LEN).unwrap(),
                    message_bytes(m + round * N, LEN),
                    "round {round}, message {m}"
                );
            }
            poll_empty(&p.b.recv_evd, Duration::from_millis(5));
        }
        p.close();
    }
);

per_link!(
    a_batch_dequeue_returns_every_completion_once_in_order_and_at_most_max,
    |link| {
        // `Evd::dequeue_into`: completions a look at the link produces go straight to the
        // caller's batch, the rest stay queued for the next call; none is lost, repeated or
        // reordered, and no call returns more than it was asked for.
        const N: u64 = 40;
        const MAX: usize = 7;
        let p = Pair::new(link);
        let inbox = p.a.lmr(8 * N as usize);
        for i in 0..N {
            p.a.ep
                .post_recv(&[inbox.triplet(8 * i, 8)], i, CompletionFlags::empty())
                .unwrap();
        }
        let out = p.b.lmr(8 * N as usize);
        for i in 0..N {
            out.write(8 * i as usize, &i.to_le_bytes()).unwrap();
            p.b.ep
                .post_send(&[out.triplet(8 * i, 8)], i, CompletionFlags::SUPPRESS)
                .unwrap();
        }
        let mut batch = Vec::new();
        assert_eq!(p.a.recv_evd.dequeue_into(&mut batch, 0).unwrap(), 0);
        let mut cookies = Vec::new();
        let end = Instant::now() + T.unwrap();
        while (cookies.len() as u64) < N {
            assert!(Instant::now() < end, "only {} completions", cookies.len());
            batch.clear();
            let n = p.a.recv_evd.dequeue_into(&mut batch, MAX).unwrap();
            assert_eq!(n, batch.len());
            assert!(n <= MAX, "{n} events for a batch of at most {MAX}");
            for ev in &batch {
                let d = ev.as_dto().expect("a DTO completion");
                assert_eq!(d.status, DtoStatus::Success);
                assert_eq!(d.operation, DtoOp::Receive);
                cookies.push(d.cookie.0);
            }
            if n == 0 {
                std::thread::yield_now();
            }
        }
        assert_eq!(cookies, (0..N).collect::<Vec<_>>());
        for i in 0..N {
            let mut b = [0u8; 8];
            inbox.read(8 * i as usize, &mut b).unwrap();
            assert_eq!(u64::from_le_bytes(b), i);
        }
        batch.clear();
        poll_empty(&p.a.recv_evd, POLL_FOR);
        assert_eq!(p.a.recv_evd.dequeue_into(&mut batch, MAX).unwrap(), 0);
    }
);
