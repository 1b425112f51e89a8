//! Event queues under bursts the consumer cannot pace: connection requests, connection events
//! and asynchronous errors are never dropped, however short the queue (DAT's queue lengths are
//! minimums); DTO completions keep DAT's overflow rule (conformance_recv.rs,
//! `evd_overflow_raises_async_evd_overflow`).

use std::collections::HashSet;

use dapl::*;
use dapl_testkit::kit::*;

/// Endpoints per side: two fds each on tcp (one per side of the connection).
const N: usize = 1000;

/// Enough file descriptors for `N` connections in this process.
fn raise_fd_limit() {
    dapl_testkit::kit::raise_fd_limit((4 * N + 256) as u64);
}

/// Every event on `evd` until it stays empty for a moment.
fn drain(evd: &Evd, want: usize) -> Vec<Event> {
    let mut got = Vec::new();
    while got.len() < want {
        match evd.wait(T, 1).unwrap() {
            Some((ev, _)) => got.push(ev),
            None => break,
        }
    }
    // Nothing beyond what was expected.
    while let Some(ev) = evd.dequeue().unwrap() {
        got.push(ev);
    }
    got
}

per_link!(
    connection_requests_connection_events_and_async_errors_are_never_dropped_in_a_burst,
    |link| {
        raise_fd_limit();
        // Both IAs with async EVDs of 8, as Debian's DAT programs open them; every other EVD
        // of the burst streams 8 long too.
        let (ia_a, _async_a) = InterfaceAdapter::open(link, 8).unwrap();
        let (ia_b, async_b) = InterfaceAdapter::open(link, 8).unwrap();
        let (pz_a, pz_b) = (ia_a.pz_create().unwrap(), ia_b.pz_create().unwrap());
        let dto_a = ia_a.evd_create(8, None, EvdFlags::DTO).unwrap();
        let conn_a = ia_a.evd_create(8, None, EvdFlags::CONNECTION).unwrap();
        let dto_b = ia_b.evd_create(8, None, EvdFlags::DTO).unwrap();
        let conn_b = ia_b.evd_create(8, None, EvdFlags::CONNECTION).unwrap();
        let srq = ia_b.srq_create(&pz_b, &SrqAttr::default()).unwrap();
        let (_psp, cr_evd, q, addr) = listen(&ia_b);
        let eps_a: Vec<Endpoint> = (0..N)
            .map(|_| {
                ia_a.endpoint(&pz_a)
                    .dto_evd(&dto_a)
                    .connect_evd(&conn_a)
                    .build()
                    .unwrap()
            })
            .collect();
        let eps_b: Vec<Endpoint> = (0..N)
            .map(|_| {
                ia_b.endpoint(&pz_b)
                    .dto_evd(&dto_b)
                    .connect_evd(&conn_b)
                    .srq(&srq)
                    .build()
                    .unwrap()
            })
            .collect();
        // Every request at once: N arrive at a CR EVD of 8.
        for ep in &eps_a {
            ep.connect(addr.ip(), q, T, b"").unwrap();
        }
        let crs = drain(&cr_evd, N);
        assert_eq!(crs.len(), N, "one CR arrival per request");
        for (ev, ep) in crs.iter().zip(&eps_b) {
            ev.as_cr_arrival()
                .expect("a CR arrival")
                .cr
                .accept(Some(ep), b"")
                .unwrap();
        }
        let est_a = drain(&conn_a, N);
        let est_b = drain(&conn_b, N);
        for (evs, eps) in [(&est_a, &eps_a), (&est_b, &eps_b)] {
            let ids: HashSet<u64> = evs
                .iter()
                .map(|e| {
                    let c = e.as_connection().expect("a connection event");
                    assert_eq!(c.kind, ConnectionEventKind::Established);
                    c.ep.id()
                })
                .collect();
            assert_eq!(ids.len(), N, "one ESTABLISHED per endpoint");
            assert!(eps.iter().all(|ep| ids.contains(&ep.id())));
        }
        // The peer goes at once: every endpoint of b ends, each with a connection event and
        // (on an SRQ) an asynchronous error, into queues of 8. Two consumer threads busy-poll
        // b's DTO EVD meanwhile, so that ends are handled in their threads too, beside the
        // link's progress thread (on links where a polling consumer makes progress).
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let pollers: Vec<_> = (0..2)
            .map(|_| {
                let (dto, stop) = (dto_b.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        assert!(dto.dequeue().unwrap().is_none());
                    }
                })
            })
            .collect();
        ia_a.close(CloseFlags::Abrupt).unwrap();
        let ends = drain(&conn_b, N);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for p in pollers {
            p.join().unwrap();
        }
        let ended: HashSet<u64> = ends
            .iter()
            .map(|e| {
                let c = e.as_connection().expect("a connection event");
                assert!(
                    matches!(
                        c.kind,
                        ConnectionEventKind::Disconnected | ConnectionEventKind::Broken
                    ),
                    "{:?}",
                    c.kind
                );
                c.ep.id()
            })
            .collect();
        assert_eq!((ends.len(), ended.len()), (N, N), "one end per endpoint");
        let asyncs = drain(&async_b, N);
        let broken: HashSet<u64> = asyncs
            .iter()
            .map(|e| match &e.as_async().expect("an async event").subject {
                AsyncSubject::Ep(ep) => ep.id(),
                other => panic!("an overflow or other async event: {other:?}"),
            })
            .collect();
        assert_eq!(
            (asyncs.len(), broken.len()),
            (N, N),
            "one EP_BROKEN per endpoint"
        );
        assert!(eps_b
            .iter()
            .all(|ep| ended.contains(&ep.id()) && broken.contains(&ep.id())));
        // In one order: a consumer may pair each connection event with the next async
        // event (Debian's dtestsrq does), though the ends were handled in several threads.
        let order = |evs: &[Event]| -> Vec<u64> {
            evs.iter()
                .map(
                    |e| match (e.as_connection(), e.as_async().map(|a| &a.subject)) {
                        (Some(c), _) => c.ep.id(),
                        (_, Some(AsyncSubject::Ep(ep))) => ep.id(),
                        _ => unreachable!("checked above"),
                    },
                )
                .collect()
        };
        assert!(
            order(&ends) == order(&asyncs),
            "the connection events and the async events list the endpoints in one order"
        );
        drop(eps_a);
        ia_b.close(CloseFlags::Abrupt).unwrap();
    }
);

per_link!(
    a_burst_of_graceful_disconnects_gives_each_endpoint_one_established_then_one_disconnected,
    |link| {
        raise_fd_limit();
        const M: usize = 300;
        let (ia_a, _x) = InterfaceAdapter::open(link, 8).unwrap();
        let (ia_b, _y) = InterfaceAdapter::open(link, 8).unwrap();
        let (pz_a, pz_b) = (ia_a.pz_create().unwrap(), ia_b.pz_create().unwrap());
        let dto = ia_a.evd_create(8, None, EvdFlags::DTO).unwrap();
        let conn_a = ia_a.evd_create(8, None, EvdFlags::CONNECTION).unwrap();
        let dto_b = ia_b.evd_create(8, None, EvdFlags::DTO).unwrap();
        let conn_b = ia_b.evd_create(8, None, EvdFlags::CONNECTION).unwrap();
        let (_psp, cr_evd, q, addr) = listen(&ia_b);
        let eps_a: Vec<Endpoint> = (0..M)
            .map(|_| {
                ia_a.endpoint(&pz_a)
                    .dto_evd(&dto)
                    .connect_evd(&conn_a)
                    .build()
                    .unwrap()
            })
            .collect();
        for ep in &eps_a {
            ep.connect(addr.ip(), q, T, b"").unwrap();
        }
        let mut eps_b = Vec::new();
        for _ in 0..M {
            let ep = ia_b
                .endpoint(&pz_b)
                .dto_evd(&dto_b)
                .connect_evd(&conn_b)
                .build()
                .unwrap();
            expect_cr(&cr_evd).cr.accept(Some(&ep), b"").unwrap();
            eps_b.push(ep);
        }
        let est_a = drain(&conn_a, M);
        assert!(est_a
            .iter()
            .all(|e| e.as_connection().unwrap().kind == ConnectionEventKind::Established));
        for ep in &eps_a {
            ep.disconnect(CloseFlags::Graceful).unwrap();
        }
        let evs = drain(&conn_b, 2 * M);
        let mut seen: std::collections::HashMap<u64, Vec<ConnectionEventKind>> = Default::default();
        for e in &evs {
            let c = e.as_connection().unwrap();
            seen.entry(c.ep.id()).or_default().push(c.kind);
        }
        for ep in &eps_b {
            assert_eq!(
                seen.get(&ep.id()).map(Vec::as_slice),
                Some(
                    &[
                        ConnectionEventKind::Established,
                        ConnectionEventKind::Disconnected
                    ][..]
                ),
                "endpoint {}",
                ep.id()
            );
        }
        assert_eq!(evs.len(), 2 * M);
        drop((eps_a, eps_b));
        ia_a.close(CloseFlags::Abrupt).unwrap();
        ia_b.close(CloseFlags::Abrupt).unwrap();
    }
);
