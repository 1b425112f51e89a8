//! Dropping the consumer's last handle to an object frees it, as its `free` would; events and
//! the objects that use an object do not keep it from the consumer's drop (no cycle through a
//! queued event outlives the handles), and DAT's "in use" refusals become "freed when no
//! longer used". Each test ends with a graceful IA close, which DAT refuses while any object
//! created on the IA is alive: it passing is the proof that nothing was left behind.

use dapl::*;
use dapl_testkit::kit::*;

/// A side's parts, to drop one by one.
fn parts(s: Side) -> (InterfaceAdapter, Pz, Evd, Evd, Evd, Endpoint) {
    let Side {
        ia,
        async_evd: _,
        pz,
        recv_evd,
        req_evd,
        conn_evd,
        ep,
    } = s;
    (ia, pz, recv_evd, req_evd, conn_evd, ep)
}

/// Everything created on `ia` is gone (graceful close is refused otherwise).
#[track_caller]
fn nothing_lives(ia: InterfaceAdapter) {
    ia.close(CloseFlags::Graceful)
        .expect("every object of the IA was freed by its drop");
}

per_link!(
    dropping_the_last_endpoint_handle_frees_it_flushing_its_dtos_and_ending_the_connection,
    |link| {
        let p = Pair::new(link);
        let Pair { a, b, cr_evd, psp } = p;
        let buf = a.lmr(64);
        a.ep.post_recv(&[buf.slice(..).unwrap()], 7, CompletionFlags::empty())
            .unwrap();
        let (ia, pz, recv_evd, req_evd, conn_evd, ep) = parts(a);
        drop(ep);
        // Flushed to its EVD as ep_free flushes; the event names the freed endpoint.
        let d = Side::dto(&recv_evd);
        assert_eq!((d.cookie.0, d.status), (7, DtoStatus::Flushed));
        expect_err(d.ep.query(), ErrorType::InvalidHandle);
        drop(d);
        // The peer sees the connection end.
        let (ev, _) = b
            .conn_evd
            .wait(T, 1)
            .unwrap()
            .expect("the end of the connection");
        let kind = ev.as_connection().expect("a connection event").kind;
        assert!(
            matches!(
                kind,
                ConnectionEventKind::Disconnected | ConnectionEventKind::Broken
            ),
            "{kind:?}"
        );
        drop((pz, recv_evd, req_evd, conn_evd, buf));
        nothing_lives(ia);
        drop((cr_evd, psp));
        b.close();
    }
);

per_link!(
    an_endpoint_and_its_evds_dropped_with_events_queued_leave_nothing_alive,
    |link| {
        // Both orders: EVDs last (each is free when dropped) and EVDs first (each is still in
        // use then, and goes with the endpoint). The queued events name the endpoint; the
        // endpoint holds the EVDs: neither keeps the other.
        for evds_first in [false, true] {
            let (ia, pz, recv_evd, req_evd, conn_evd, ep) = parts(Side::new(link, None));
            let buf = pz
                .lmr_allocate(64, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)
                .unwrap();
            for cookie in 0..3 {
                ep.post_recv(&[buf.slice(..).unwrap()], cookie, CompletionFlags::empty())
                    .unwrap();
            }
            if evds_first {
                drop((recv_evd, req_evd, conn_evd));
                expect_err(ia.close(CloseFlags::Graceful), ErrorType::InvalidState);
                drop(ep);
            } else {
                drop(ep);
                assert_eq!(recv_evd.query().unwrap().count, 3, "the flushed receives");
                drop((recv_evd, req_evd, conn_evd));
            }
            drop((buf, pz));
            nothing_lives(ia);
        }
    }
);

per_link!(
    an_evd_dropped_while_an_endpoint_uses_it_keeps_delivering_until_the_endpoint_goes,
    |link| {
        let a = Side::new(link, None);
        let cno = a.ia.cno_create().unwrap();
        let recv = a.ia.evd_create(8, Some(&cno), EvdFlags::DTO).unwrap();
        let ep =
            a.ia.endpoint(&a.pz)
                .recv_evd(&recv)
                .request_evd(&a.req_evd)
                .connect_evd(&a.conn_evd)
                .build()
                .unwrap();
        let inbox = a.lmr(64);
        ep.post_recv(&[inbox.slice(..).unwrap()], 1, CompletionFlags::empty())
            .unwrap();
        let recv_id = recv.id();
        drop(recv);
        let b = Side::new(link, None);
        let (psp, cr_evd) = connect(
            End {
                ep: &b.ep,
                conn_evd: &b.conn_evd,
            },
            &a.ia,
            End {
                ep: &ep,
                conn_evd: &a.conn_evd,
            },
            b"",
            b"",
        );
        let msg = b.lmr(64);
        msg.write(0, b"still here").unwrap();
        b.ep.post_send(&[msg.slice(..10).unwrap()], 2, CompletionFlags::empty())
            .unwrap();
        // The EVD the consumer let go of still takes the endpoint's completions, and its CNO
        // hands it back.
        let evd = cno.wait(T).unwrap().expect("the receive triggers the CNO");
        assert_eq!(evd.id(), recv_id);
        let got = Side::dto(&evd);
        assert_eq!((got.cookie.0, got.transferred_length), (1, 10));
        assert_eq!(inbox.to_vec(0, 10).unwrap(), b"still here");
        drop((evd, got));
        ep.free().unwrap();
        drop((psp, cr_evd, cno, inbox, ep));
        let (ia, pz, recv_evd, req_evd, conn_evd, ep) = parts(a);
        drop((pz, recv_evd, req_evd, conn_evd, ep));
        nothing_lives(ia);
        b.close();
    }
);

once!(a_cno_lives_while_an_evd_is_attached_to_it, |link| {
    let (ia, _) = InterfaceAdapter::open(link, 8).unwrap();
    let cno = ia.cno_create().unwrap();
    let evd = ia.evd_create(4, Some(&cno), EvdFlags::SOFTWARE).unwrap();
    let cno_id = cno.id();
    drop(cno);
    let cno = evd.query().unwrap().cno.expect("still attached");
    assert_eq!(cno.id(), cno_id);
    drop(cno);
    evd.post_se(5).unwrap();
    let cno = evd.query().unwrap().cno.unwrap();
    assert_eq!(cno.wait(T).unwrap().expect("triggered"), evd);
    assert!(matches!(evd.dequeue().unwrap(), Some(Event::Software(5))));
    drop(cno);
    drop(evd);
    nothing_lives(ia);
});

once!(
    a_cno_does_not_hand_back_an_evd_whose_handles_are_gone,
    |link| {
        let (ia, _) = InterfaceAdapter::open(link, 8).unwrap();
        let cno = ia.cno_create().unwrap();
        let evd = ia.evd_create(4, Some(&cno), EvdFlags::SOFTWARE).unwrap();
        evd.post_se(1).unwrap();
        drop(evd);
        assert!(
            cno.wait(Some(std::time::Duration::ZERO)).unwrap().is_none(),
            "the EVD was freed with its events"
        );
        drop(cno);
        nothing_lives(ia);
    }
);

per_link!(
    dropping_an_unanswered_connection_request_rejects_it,
    |link| {
        let a = Side::new(link, None);
        let b = Side::new(link, None);
        let (psp, cr_evd, q, addr) = listen(&b.ia);
        a.ep.connect(addr.ip(), q, T, b"anyone?").unwrap();
        let arrival = expect_cr(&cr_evd);
        assert_eq!(arrival.cr.private_data(), b"anyone?");
        drop(arrival);
        a.expect_conn(ConnectionEventKind::PeerRejected);
        // The PSP still listens: the next request arrives and is accepted as usual.
        a.ep.reset().unwrap();
        a.ep.connect(addr.ip(), q, T, b"again").unwrap();
        expect_cr(&cr_evd).cr.accept(Some(&b.ep), b"").unwrap();
        a.expect_conn(ConnectionEventKind::Established);
        drop((psp, cr_evd));
        a.close();
        b.close();
    }
);

per_link!(
    a_connection_request_whose_event_is_freed_unread_is_rejected,
    |link| {
        // Found by the cabi_handles harness of crates/dapl-cabi (its stable run over
        // pseudo-random inputs): the consumer freed the PSP and its EVD with a request's
        // arrival event still queued. Nobody could answer that request: the requester waited
        // forever, and the IA's graceful close was refused over a request the consumer never
        // had.
        let a = Side::new(link, None);
        let b = Side::new(link, None);
        let (psp, cr_evd, q, addr) = listen(&b.ia);
        a.ep.connect(addr.ip(), q, None, b"anyone?").unwrap();
        eventually("the request's event", || cr_evd.query().unwrap().count > 0);
        psp.free().unwrap();
        cr_evd.free().unwrap();
        a.expect_conn(ConnectionEventKind::PeerRejected);
        drop((psp, cr_evd));
        a.close();
        let (ia, pz, recv_evd, req_evd, conn_evd, ep) = parts(b);
        drop((pz, recv_evd, req_evd, conn_evd, ep));
        nothing_lives(ia);
    }
);

per_link!(
    dropping_the_last_service_point_handle_frees_its_qualifier,
    |link| {
        let s = Side::new(link, None);
        let (psp, cr_evd, q, _) = s.listen();
        let same = psp.clone();
        drop(psp);
        expect_err(
            s.ia.psp_create(q, &cr_evd, PspFlags::Consumer),
            ErrorType::ConnQualInUse,
        );
        drop(same);
        let again = s.ia.psp_create(q, &cr_evd, PspFlags::Consumer).unwrap();
        assert_eq!(again.conn_qual(), q);
        // An RSP's endpoint stays reserved while the RSP lives, and is free to go after.
        let ep =
            s.ia.endpoint(&s.pz)
                .dto_evd(&s.req_evd)
                .connect_evd(&s.conn_evd)
                .build()
                .unwrap();
        let rsp = s.ia.rsp_create(qual(), &ep, &cr_evd).unwrap();
        drop(ep);
        assert_eq!(
            rsp.query().unwrap().ep.unwrap().state(),
            EpState::Reserved,
            "the RSP holds its endpoint"
        );
        // And the other way round: the RSP goes first, the endpoint is the consumer's again.
        let ep2 =
            s.ia.endpoint(&s.pz)
                .dto_evd(&s.req_evd)
                .connect_evd(&s.conn_evd)
                .build()
                .unwrap();
        let rsp2 = s.ia.rsp_create(qual(), &ep2, &cr_evd).unwrap();
        assert_eq!(ep2.state(), EpState::Reserved);
        drop(rsp2);
        assert_eq!(ep2.state(), EpState::Unconnected);
        ep2.query().expect("the endpoint lives on");
        drop((rsp, again, cr_evd, ep2));
        let (ia, pz, recv_evd, req_evd, conn_evd, ep) = parts(s);
        drop((pz, recv_evd, req_evd, conn_evd, ep));
        nothing_lives(ia);
    }
);

per_link!(dropping_the_last_rmr_handle_unbinds_and_frees_it, |link| {
    let p = Pair::new(link);
    let lmr = p.b.lmr(64);
    let rmr = p.b.pz.rmr_create().unwrap();
    rmr.bind(
        &lmr,
        lmr.slice(..).unwrap(),
        MemPriv::REMOTE_READ,
        &p.b.ep,
        1,
        CompletionFlags::empty(),
    )
    .unwrap();
    let (ev, _) = p.b.req_evd.wait(T, 1).unwrap().expect("the bind completes");
    assert!(matches!(ev, Event::RmrBind(_)), "{ev:?}");
    expect_err(lmr.free(), ErrorType::InvalidState);
    drop(ev); // it names the RMR
    drop(rmr);
    lmr.free().expect("no RMR is bound to it any more");
    p.close();
});

per_link!(
    an_srq_dropped_while_endpoints_use_it_goes_with_the_last_of_them,
    |link| {
        let (ia, pz, recv_evd, req_evd, conn_evd, ep0) = parts(Side::new(link, None));
        let srq = ia.srq_create(&pz, &SrqAttr::default()).unwrap();
        let buf = pz
            .lmr_allocate(64, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)
            .unwrap();
        srq.post_recv(&[buf.slice(..).unwrap()], 3).unwrap();
        let eps: Vec<Endpoint> = (0..2)
            .map(|_| {
                ia.endpoint(&pz)
                    .dto_evd(&recv_evd)
                    .connect_evd(&conn_evd)
                    .srq(&srq)
                    .build()
                    .unwrap()
            })
            .collect();
        drop(srq);
        let mut eps = eps.into_iter();
        drop(eps.next());
        expect_err(ia.close(CloseFlags::Graceful), ErrorType::InvalidState);
        drop(eps);
        drop((ep0, buf, recv_evd, req_evd, conn_evd, pz));
        nothing_lives(ia);
    }
);

once!(
    an_evd_and_the_endpoint_using_it_dropped_at_once_in_two_threads_are_both_freed,
    |link| {
        // The EVD's last handle and its last user (the endpoint's release) race: one of the
        // two must see both counts at zero and free it, whichever comes first.
        let (ia, _) = InterfaceAdapter::open(link, 8).unwrap();
        let pz = ia.pz_create().unwrap();
        for _ in 0..300 {
            let evd = ia.evd_create(4, None, EvdFlags::DTO).unwrap();
            let conn = ia.evd_create(4, None, EvdFlags::CONNECTION).unwrap();
            let ep = ia
                .endpoint(&pz)
                .dto_evd(&evd)
                .connect_evd(&conn)
                .build()
                .unwrap();
            let go = std::sync::Barrier::new(3);
            std::thread::scope(|s| {
                s.spawn(|| {
                    go.wait();
                    drop(ep);
                });
                s.spawn(|| {
                    go.wait();
                    drop(evd);
                });
                s.spawn(|| {
                    go.wait();
                    drop(conn);
                });
            });
        }
        drop(pz);
        nothing_lives(ia);
    }
);
