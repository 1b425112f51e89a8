//! The Rust API's own shapes: the endpoint builder, checked slices of an LMR, the wire form of
//! a remote buffer.

use std::ops::Bound;

use dapl::*;
use dapl_testkit::kit::*;

once!(the_endpoint_builder_creates_what_ep_create_does, |link| {
    let s = Side::new(link, None);
    let dto = s.ia.evd_create(16, None, EvdFlags::DTO).unwrap();
    let conn = s.ia.evd_create(4, None, EvdFlags::CONNECTION).unwrap();
    let attr = EpAttr {
        max_request_dtos: 24,
        max_rdma_read_out: 3,
        ..EpAttr::default()
    };
    let ep =
        s.ia.endpoint(&s.pz)
            .dto_evd(&dto)
            .connect_evd(&conn)
            .attr(attr.clone())
            .build()
            .unwrap();
    let q = ep.query().unwrap();
    assert_eq!(q.state, EpState::Unconnected);
    assert_eq!(q.attr.max_request_dtos, 24);
    assert_eq!(q.attr.max_rdma_read_out, 3);
    assert_eq!(q.pz_id, s.pz.id());
    // Its EVDs are the ones named: a receive completes on `dto`.
    let l = s.lmr(64);
    ep.post_recv(&[l.slice(..).unwrap()], 5, CompletionFlags::empty())
        .unwrap();
    ep.free().unwrap();
    let d = dto.dequeue().unwrap().expect("the flushed receive");
    assert_eq!(d.as_dto().unwrap().cookie, 5);

    // The same checks and errors as ep_create: an EVD of the wrong kind...
    let e = expect_err(
        s.ia.endpoint(&s.pz).connect_evd(&dto).build(),
        ErrorType::InvalidHandle,
    );
    assert_eq!(e.subtype(), Subtype::InvalidHandleEvdConn);
    // ... and with an SRQ, receives go there (posting to the EP itself is refused).
    let srq = s.ia.srq_create(&s.pz, &SrqAttr::default()).unwrap();
    let ep =
        s.ia.endpoint(&s.pz)
            .dto_evd(&dto)
            .connect_evd(&conn)
            .srq(&srq)
            .build()
            .unwrap();
    expect_err(
        ep.post_recv(&[l.slice(0..8).unwrap()], 6, CompletionFlags::empty()),
        ErrorType::InvalidState,
    );
    ep.free().unwrap();
    s.close();
});

once!(
    lmr_slices_and_remote_buffers_are_checked_against_the_lmr,
    |link| {
        let s = Side::new(link, None);
        let l = s.lmr(4096);
        let base = l.address();
        let t = l.slice(10..20).unwrap();
        assert_eq!(
            (t.lmr_context, t.virtual_address, t.segment_length),
            (l.lmr_context(), base + 10, 10)
        );
        assert_eq!(l.slice(..).unwrap().segment_length, 4096);
        assert_eq!(l.slice(..=4095).unwrap().segment_length, 4096);
        assert_eq!(l.slice(4096..).unwrap().segment_length, 0);
        let r = l.remote(100..).unwrap();
        assert_eq!(
            (r.rmr_context, r.virtual_address, r.segment_length),
            (l.rmr_context(), base + 100, 3996)
        );
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 20..10;
        for bad in [
            l.slice(4000..4097),
            l.slice(..=4096),
            l.slice(reversed),
            l.slice((Bound::Excluded(usize::MAX), Bound::Unbounded)),
            l.slice(..=usize::MAX),
        ] {
            let e = expect_err(bad, ErrorType::InvalidParameter);
            assert!(e.to_string().contains("4096 bytes"), "{e}");
        }
        expect_err(l.remote(5000..5001), ErrorType::InvalidParameter);
        l.free().unwrap();
        expect_err(l.slice(..), ErrorType::InvalidHandle);
        s.close();
    }
);

#[test]
fn the_wire_form_of_a_remote_buffer_is_20_big_endian_bytes() {
    let r = RmrTriplet::new(0x0102_0304, 0x1122_3344_5566_7788, 0x99);
    let w = r.to_wire();
    assert_eq!(w.len(), RmrTriplet::WIRE_LEN);
    assert_eq!(&w[..4], &[1, 2, 3, 4]);
    assert_eq!(&w[4..12], &[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]);
    assert_eq!(&w[12..], &[0, 0, 0, 0, 0, 0, 0, 0x99]);
    assert_eq!(RmrTriplet::from_wire(&w), Some(r));
    let mut longer = w.to_vec();
    longer.extend_from_slice(b"rest of a message");
    assert_eq!(RmrTriplet::from_wire(&longer), Some(r));
    assert_eq!(RmrTriplet::from_wire(&w[..19]), None);
}

per_link!(
    a_remote_buffer_sent_in_its_wire_form_takes_the_peers_write,
    |link| {
        let p = Pair::new(link);
        // b advertises a buffer to a in a message; a writes into it.
        let target = p.b.lmr(4096);
        let msg = p.b.lmr(64);
        msg.write(0, &target.remote(1000..2000).unwrap().to_wire())
            .unwrap();
        let inbox = p.a.lmr(64);
        p.a.ep
            .post_recv(&[inbox.slice(..).unwrap()], 1, CompletionFlags::empty())
            .unwrap();
        p.b.ep
            .post_send(
                &[msg.slice(..RmrTriplet::WIRE_LEN).unwrap()],
                2,
                CompletionFlags::empty(),
            )
            .unwrap();
        let got = p.a.recv_done();
        assert_eq!(got.transferred_length, RmrTriplet::WIRE_LEN as u64);
        let remote = RmrTriplet::from_wire(&inbox.to_vec(0, 64).unwrap()).unwrap();
        assert_eq!(remote.segment_length, 1000);
        let src = p.a.lmr(1000);
        src.fill(0, 1000, 0x3C).unwrap();
        p.a.ep
            .post_rdma_write(
                &[src.slice(..).unwrap()],
                3,
                &remote,
                CompletionFlags::empty(),
            )
            .unwrap();
        assert_eq!(p.a.req_done().status, DtoStatus::Success);
        eventually("the write lands", || {
            target.load_acquire(1999).unwrap() == 0x3C
        });
        let all = target.to_vec(0, 4096).unwrap();
        assert!(all[1000..2000].iter().all(|&b| b == 0x3C));
        assert!(all[..1000].iter().chain(&all[2000..]).all(|&b| b == 0));
        p.close();
    }
);

per_link!(
    dropping_the_last_lmr_handle_frees_it_and_a_bound_rmr_holds_one,
    |link| {
        let p = Pair::new(link);
        let sink = p.a.lmr(64);
        let read = |remote: RmrTriplet, cookie| {
            p.a.ep
                .post_rdma_read(
                    &[sink.slice(..8).unwrap()],
                    cookie,
                    &remote,
                    CompletionFlags::empty(),
                )
                .unwrap();
            p.a.req_done().status
        };
        // Dropped: its STag is gone at once.
        let gone = p.b.lmr(64).remote(..8).unwrap();
        assert_eq!(read(gone, 1), DtoStatus::RemoteAccess);
        p.close();

        // An RMR bound to an LMR holds it: dropping the consumer's handle leaves it registered
        // until the RMR is freed.
        let p = Pair::new(link);
        let sink = p.a.lmr(64);
        let lmr = p.b.lmr(64);
        lmr.fill(0, 64, 0x77).unwrap();
        let rmr = p.b.pz.rmr_create().unwrap();
        let ctx = rmr
            .bind(
                &lmr,
                lmr.slice(..64).unwrap(),
                MemPriv::REMOTE_READ,
                &p.b.ep,
                9,
                CompletionFlags::empty(),
            )
            .unwrap();
        let (bound, _) = p.b.req_evd.wait(T, 1).unwrap().expect("the bind completes");
        assert!(matches!(bound, Event::RmrBind(_)), "{bound:?}");
        let whole = lmr.remote(..8).unwrap();
        let via_rmr = RmrTriplet::new(ctx, whole.virtual_address, 8);
        drop(lmr);
        p.a.ep
            .post_rdma_read(
                &[sink.slice(..8).unwrap()],
                2,
                &via_rmr,
                CompletionFlags::empty(),
            )
            .unwrap();
        assert_eq!(p.a.req_done().status, DtoStatus::Success);
        assert_eq!(sink.to_vec(0, 8).unwrap(), vec![0x77; 8]);
        rmr.free().unwrap();
        p.a.ep
            .post_rdma_read(
                &[sink.slice(..8).unwrap()],
                3,
                &whole,
                CompletionFlags::empty(),
            )
            .unwrap();
        assert_eq!(
            p.a.req_done().status,
            DtoStatus::RemoteAccess,
            "freed with the RMR's handle"
        );
        p.close();
    }
);

once!(
    dropped_handles_free_their_objects_so_a_graceful_close_succeeds,
    |link| {
        let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
        let pz = ia.pz_create().unwrap();
        let lmr = pz.lmr_allocate(64, MemPriv::ALL).unwrap();
        drop(pz);
        // The LMR holds its PZ: both are alive.
        assert_eq!(lmr.query().unwrap().lmr_context, lmr.lmr_context());
        let e = expect_err(ia.close(CloseFlags::Graceful), ErrorType::InvalidState);
        assert!(e.to_string().contains("2 objects"), "{e}");
        drop(lmr);
        ia.close(CloseFlags::Graceful).unwrap();
    }
);
