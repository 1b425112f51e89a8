//! Freeing an LMR that a posted DTO still names (a consumer error, which DAT leaves undefined
//! and verbs answers with a local protection error): the provider never touches the freed
//! memory, the DTO completes exactly once, and the connection breaks on both sides. The
//! raw-TCP peer cases (a peer's queued reads, a write in flight) are in `tcp_revocation.rs`.

use std::ptr::NonNull;

use dapl::*;
use dapl_testkit::kit::*;

/// Caller memory registered in `side`'s PZ, filled with `byte`.
fn lent(side: &Side, buf: &mut [u8], byte: u8) -> Lmr {
    buf.fill(byte);
    let ptr = NonNull::new(buf.as_mut_ptr()).unwrap();
    // SAFETY: `buf` outlives the LMR's use: the test frees the LMR before it reads `buf`
    // again, and drops `buf` only after that.
    unsafe { side.pz.lmr_register(ptr, buf.len(), MemPriv::ALL) }.unwrap()
}

per_link!(
    a_send_into_a_receive_whose_lmr_was_freed_places_nothing_and_breaks_the_connection,
    |link| {
        let p = Pair::new(link);
        let mut sink = vec![0u8; 256];
        let lmr = lent(&p.b, &mut sink, 0x33);
        p.b.ep
            .post_recv(&[lmr.triplet(0, 256)], 7, CompletionFlags::empty())
            .unwrap();
        lmr.free().unwrap();
        let src = p.a.lmr(64);
        src.fill(0, 64, 0xEE).unwrap();
        p.a.ep
            .post_send(&[src.triplet(0, 64)], 1, CompletionFlags::empty())
            .unwrap();
        let r = p.b.recv_done();
        assert_eq!(r.cookie, 7);
        assert_eq!(r.status, DtoStatus::LocalProtection);
        let s = p.a.req_done();
        assert_eq!(s.cookie, 1, "the send completes once");
        p.a.expect_conn(ConnectionEventKind::Broken);
        p.b.expect_conn(ConnectionEventKind::Broken);
        assert!(sink.iter().all(|&b| b == 0x33), "freed memory was written");
        p.close();
    }
);

per_link_with!(
    rnr_waits_forever,
    an_rdma_read_whose_sink_lmr_was_freed_while_queued_places_nothing_and_is_flushed,
    |link| {
        let p = Pair::new(link);
        let mut sink = vec![0u8; 4096];
        let lmr = lent(&p.a, &mut sink, 0x33);
        let src = p.b.lmr(4096);
        src.fill(0, 4096, 0xEE).unwrap();
        // A Send the peer has no receive for holds the send queue; the read waits behind it.
        let note = p.a.lmr(8);
        p.a.ep
            .post_send(&[note.triplet(0, 8)], 1, CompletionFlags::empty())
            .unwrap();
        p.a.ep
            .post_rdma_read(
                &[lmr.triplet(0, 4096)],
                9,
                &src.rmr_triplet(0, 4096),
                CompletionFlags::empty(),
            )
            .unwrap();
        lmr.free().unwrap();
        let inbox = p.b.lmr(8);
        p.b.ep
            .post_recv(&[inbox.triplet(0, 8)], 2, CompletionFlags::empty())
            .unwrap();
        let c = p.a.req_done();
        assert_eq!((c.cookie.0, c.status), (1, DtoStatus::Success));
        let c = p.a.req_done();
        assert_eq!((c.cookie.0, c.status), (9, DtoStatus::Flushed));
        p.a.expect_conn(ConnectionEventKind::Broken);
        assert!(sink.iter().all(|&b| b == 0x33), "freed memory was written");
        p.close();
    }
);

once!(
    an_rmr_bind_racing_lmr_free_never_leaves_an_rmr_over_a_freed_lmr,
    |link| {
        // Either the bind counts first (the free is refused: INVALID_STATE) or the free does
        // (the bind is refused: INVALID_HANDLE); never both succeed.
        let s = Side::new(link, None);
        let (mut binds_first, mut frees_first) = (0, 0);
        for _ in 0..500 {
            let l = s.lmr(4096);
            let rmr = s.pz.rmr_create().unwrap();
            let go = std::sync::Barrier::new(2);
            let (bound, freed) = std::thread::scope(|sc| {
                let b = sc.spawn(|| {
                    go.wait();
                    rmr.bind(
                        &l,
                        l.triplet(0, 64),
                        MemPriv::REMOTE_WRITE,
                        &s.ep,
                        1,
                        CompletionFlags::SUPPRESS,
                    )
                });
                go.wait();
                let freed = l.free();
                (b.join().unwrap(), freed)
            });
            match (bound, freed) {
                (Ok(_), Err(e)) => {
                    assert_eq!(e.kind(), ErrorType::InvalidState);
                    binds_first += 1;
                    rmr.free().unwrap();
                    l.free().unwrap();
                }
                (Err(e), Ok(())) => {
                    assert_eq!(e.kind(), ErrorType::InvalidHandle);
                    frees_first += 1;
                    rmr.free().unwrap();
                }
                (b, f) => panic!("bind {b:?} and free {f:?}: an RMR over a freed LMR"),
            }
        }
        eprintln!("bind first {binds_first}, free first {frees_first}");
        s.close();
    }
);
