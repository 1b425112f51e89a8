//! The tcp link holds back the small messages of a burst of posts (posts of one thread in quick
//! succession, with no look for completions between them) and writes them together when the
//! poster next looks for completions or, at the latest, when the link's progress thread runs,
//! which a held burst wakes (docs/architecture.md, "The tcp link"). What it held arrives whole
//! and in order, between messages too large to hold; a poster that never calls the library
//! again still gets its messages out; `nocoalesce` turns it off.

use dapl::*;
use dapl_testkit::kit::*;

/// Send sizes, cycled: held ones (up to 16 KiB) and one too large to hold.
const SIZES: [usize; 6] = [1, 8, 64, 4096, 16 * 1024, 20_000];
/// Bytes of each receive buffer.
const RECV_LEN: usize = 20_480;
/// Messages per burst.
const N: usize = 64;
/// Bursts tried at most before concluding that none was held (a burst is only held while its
/// posts follow each other within microseconds, which a loaded machine may not allow).
const ROUNDS: usize = 30;
/// Bursts tried at most for a burst written late (left to the progress thread's tick).
const LATE_ROUNDS: usize = 10 * ROUNDS;

/// Sends bursts of `N` messages from a to b until one was held (or `rounds` bursts went),
/// checking that every message arrives whole and in order; returns the bursts held.
fn bursts_arrive_whole_and_in_order(ia_name: &str, rounds: usize) -> u64 {
    let a_attr = EpAttr {
        max_request_dtos: N + 8,
        ..Default::default()
    };
    let b_attr = EpAttr {
        max_recv_dtos: N + 8,
        ..Default::default()
    };
    let p = Pair::with_attrs(ia_name, Some(&a_attr), Some(&b_attr));
    let a_src = p.a.lmr(N * RECV_LEN);
    let b_inbox = p.b.lmr(N * RECV_LEN);
    let mut held = 0;
    for round in 0..rounds {
        for k in 0..N {
            let m = round * N + k;
            a_src
                .write(k * RECV_LEN, &message_bytes(m, SIZES[m % SIZES.len()]))
                .unwrap();
            p.b.ep
                .post_recv(
                    &[b_inbox.triplet((k * RECV_LEN) as u64, RECV_LEN as u64)],
                    m as u64,
                    CompletionFlags::empty(),
                )
                .unwrap();
        }
        // The burst: nothing but posts, back to back; only the last asks for a completion.
        for k in 0..N {
            let m = round * N + k;
            let flags = if k + 1 == N {
                CompletionFlags::empty()
            } else {
                CompletionFlags::SUPPRESS
            };
            let len = SIZES[m % SIZES.len()] as u64;
            p.a.ep
                .post_send(
                    &[a_src.triplet((k * RECV_LEN) as u64, len)],
                    m as u64,
                    flags,
                )
                .unwrap();
        }
        let c = p.a.req_done();
        assert_eq!(
            (c.cookie.0, c.status),
            ((round * N + N - 1) as u64, DtoStatus::Success)
        );
        for k in 0..N {
            let m = round * N + k;
            p.b.expect_message(&b_inbox, k * RECV_LEN, m, SIZES[m % SIZES.len()]);
        }
        held = dapl::testing::tcp_bursts_held(&p.a.ia);
        if held > 0 {
            break;
        }
    }
    assert_eq!(p.a.ep.state(), EpState::Connected);
    p.close();
    held
}

#[test]
fn a_burst_of_small_sends_is_held_and_arrives_whole_and_in_order_without_crc() {
    let held = bursts_arrive_whole_and_in_order("tcp:127.0.0.1", ROUNDS);
    assert!(held > 0, "no burst of {ROUNDS} was held back");
}

#[test]
fn a_burst_of_small_sends_is_held_and_arrives_whole_and_in_order_with_crc() {
    let held = bursts_arrive_whole_and_in_order("tcp:127.0.0.1,crc", ROUNDS);
    assert!(held > 0, "no burst of {ROUNDS} was held back");
}

#[test]
fn nocoalesce_holds_no_burst() {
    let held = bursts_arrive_whole_and_in_order("tcp:127.0.0.1,nocoalesce", 3);
    assert_eq!(held, 0);
}

/// Posts bursts of RDMA writes from a to b, each after a look for completions (which lets a
/// burst be held: see the next test) and after `pause` with nothing posted (`None`: right after
/// the last burst landed), until one was held, and checks that each lands with no call on a's
/// side after its posts. False if none of `ROUNDS` was held.
fn held_writes_land_without_a_look(pause: Option<std::time::Duration>) -> bool {
    const W: usize = 32;
    let p = Pair::new("tcp:127.0.0.1");
    let (src, dst) = (p.a.lmr(W * 8), p.b.lmr(W * 8));
    for round in 0..ROUNDS {
        let before = dapl::testing::tcp_bursts_held(&p.a.ia);
        assert!(p.a.req_evd.dequeue().unwrap().is_none());
        if let Some(pause) = pause {
            std::thread::sleep(pause);
        }
        burst_of_writes(&p, &src, &dst, W, round as u8 + 1);
        // Without a pause, the first burst follows the set-up, not a burst: it does not count.
        if dapl::testing::tcp_bursts_held(&p.a.ia) > before && (pause.is_some() || round > 0) {
            p.close();
            return true;
        }
    }
    p.close();
    false
}

#[test]
fn a_burst_whose_poster_never_calls_the_library_again_still_goes_out() {
    // The pattern of RDMA writes followed by a spin on memory: the poster waits for nothing
    // the library would tell it, so only the progress thread can write what was held. After
    // a pause long enough for a's progress thread to be asleep (it stops watching held bursts
    // after a quiet tick, spins 50 us after its last event, and a consumer's polls keep it
    // off for 4 ms), the held burst must wake it.
    assert!(
        held_writes_land_without_a_look(Some(std::time::Duration::from_millis(20))),
        "no burst of {ROUNDS} was held back"
    );
}

#[test]
fn bursts_in_quick_succession_still_go_out_without_a_look() {
    // Right after a burst, the progress thread is awake or watching by its timer: a held
    // burst then wakes nobody and waits for the next tick. (Its poster looks before each
    // burst, never after: the bursts written late only space out the held ones.)
    assert!(
        held_writes_land_without_a_look(None),
        "no burst of {ROUNDS} was held back"
    );
}

/// Posts `w` 8-byte RDMA writes of `v` from `src` into `dst` back to back, then waits, with no
/// call on the poster's side, until they all landed.
fn burst_of_writes(p: &Pair, src: &Lmr, dst: &Lmr, w: usize, v: u8) {
    src.write(0, &vec![v; w * 8]).unwrap();
    for k in 0..w {
        p.a.ep
            .post_rdma_write(
                &[src.triplet((k * 8) as u64, 8)],
                k as u64,
                &dst.rmr_triplet((k * 8) as u64, 8),
                CompletionFlags::SUPPRESS,
            )
            .unwrap();
    }
    eventually("every write of the burst lands", || {
        dst.to_vec(0, w * 8).unwrap() == vec![v; w * 8]
    });
}

#[test]
fn a_poster_that_does_not_look_has_nothing_held_until_it_looks_again() {
    // Once the progress thread had to write one of its bursts, a poster that spins on memory
    // for its answers waits for no tick on its later bursts: they go out as posted until it
    // looks for completions again.
    const W: usize = 32;
    let p = Pair::new("tcp:127.0.0.1");
    let (src, dst) = (p.a.lmr(W * 8), p.b.lmr(W * 8));
    let mut v = 0u8;
    let mut next = || {
        v = v % 250 + 1;
        v
    };
    // A burst is left to the progress thread only when the poster's posts follow each other
    // within microseconds, which an unoptimised build on a loaded machine seldom manages: up
    // to ten times the usual rounds (the loop ends at the first).
    let late = (0..LATE_ROUNDS).any(|_| {
        burst_of_writes(&p, &src, &dst, W, next());
        dapl::testing::tcp_bursts_written_late(&p.a.ia) > 0
    });
    assert!(
        late,
        "no burst of {LATE_ROUNDS} was left to the progress thread"
    );
    let held = dapl::testing::tcp_bursts_held(&p.a.ia);
    for _ in 0..5 {
        burst_of_writes(&p, &src, &dst, W, next());
    }
    assert_eq!(
        dapl::testing::tcp_bursts_held(&p.a.ia),
        held,
        "held with no look"
    );
    // A look (nothing to find: every write was suppressed) lets bursts be held again.
    let again = (0..LATE_ROUNDS).any(|_| {
        assert!(p.a.req_evd.dequeue().unwrap().is_none());
        burst_of_writes(&p, &src, &dst, W, next());
        dapl::testing::tcp_bursts_held(&p.a.ia) > held
    });
    assert!(again, "no burst of {LATE_ROUNDS} was held after a look");
    p.close();
}

#[test]
fn a_ping_pong_never_holds_a_message() {
    // Latency patterns must not wait for a tick: a send/recv ping-pong (each side looks for
    // its receive before it answers) and an RDMA write ping-pong on memory with two writes per
    // turn (data, then the flag the peer spins on) hold nothing on either side.
    const ROUNDS_PP: usize = 100;
    let p = Pair::new("tcp:127.0.0.1");
    let (a_buf, b_buf) = (p.a.lmr(64), p.b.lmr(64));
    for i in 0..ROUNDS_PP {
        p.b.ep
            .post_recv(&[b_buf.triplet(0, 8)], i as u64, CompletionFlags::empty())
            .unwrap();
        p.a.ep
            .post_recv(&[a_buf.triplet(8, 8)], i as u64, CompletionFlags::empty())
            .unwrap();
        p.a.ep
            .post_send(&[a_buf.triplet(0, 8)], i as u64, CompletionFlags::SUPPRESS)
            .unwrap();
        assert_eq!(p.b.recv_done().status, DtoStatus::Success);
        p.b.ep
            .post_send(&[b_buf.triplet(8, 8)], i as u64, CompletionFlags::SUPPRESS)
            .unwrap();
        assert_eq!(p.a.recv_done().status, DtoStatus::Success);
    }
    // Memory: a writes data (its bytes 16..24 into the peer's 40..48) and then a flag (its byte
    // 32 into the peer's 56), which the peer spins on; b answers likewise.
    let turn = |from: &Side, src: &Lmr, to: &Lmr, v: u8| {
        src.write(16, &[v; 8]).unwrap();
        src.write(32, &[v]).unwrap();
        for (off, at, len) in [(16u64, 40u64, 8u64), (32, 56, 1)] {
            from.ep
                .post_rdma_write(
                    &[src.triplet(off, len)],
                    0,
                    &to.rmr_triplet(at, len),
                    CompletionFlags::SUPPRESS,
                )
                .unwrap();
        }
    };
    let spin = |on: &Lmr, v: u8| {
        // Spinning (no sleep between looks), so turns follow each other at once.
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while on.load_acquire(56).unwrap() != v {
            assert!(
                std::time::Instant::now() < end,
                "the peer's flag {v} never came"
            );
            std::hint::spin_loop();
        }
        assert_eq!(
            on.to_vec(40, 8).unwrap(),
            [v; 8],
            "the data before the flag"
        );
    };
    for i in 0..ROUNDS_PP {
        let v = (i % 250 + 1) as u8;
        turn(&p.a, &a_buf, &b_buf, v);
        spin(&b_buf, v);
        turn(&p.b, &b_buf, &a_buf, v);
        spin(&a_buf, v);
    }
    assert_eq!(dapl::testing::tcp_bursts_held(&p.a.ia), 0);
    assert_eq!(dapl::testing::tcp_bursts_held(&p.b.ia), 0);
    p.close();
}
