//! Conformance tests for RDMA read/write, IRD/ORD, fencing and ordering, connection management,
//! object lifetimes and error reporting. One test per rule, named after it, instantiated per link
//! with `per_link!` (`per_link_with!` where the rule needs a link capability); argument and state
//! checks of objects that are never connected do not depend on the link and run once
//! (`once!`). Rules come from /work/shared/design.md ("Semantics that are easy to get wrong"),
//! the seed man pages and the provider contract (section 5).
//!
//! Timing: "must happen" waits use the harness's `T`; "must not happen" checks wait `QUIET`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Duration;

use dapl::*;
use dapl_testkit::kit::*;

/// How long a "must not happen" check waits.
const QUIET: Duration = Duration::from_millis(100);

// ------------------------------------------------------------------------------------------------
// Helpers

/// Nothing (signalled or not) arrives on `evd` within `QUIET`.
#[track_caller]
fn no_event(evd: &Evd, what: &str) {
    match evd.wait(Some(QUIET), 1) {
        Ok(Some((ev, _))) => panic!("{what}: unexpected event {ev:?}"),
        Ok(None) => {}
        Err(e) => panic!("{what}: {e}"),
    }
    if let Some(ev) = evd.dequeue().unwrap() {
        panic!("{what}: unexpected (unsignalled) event {ev:?}");
    }
}

/// The next event on `evd` is already queued (no waiting) and is a DTO completion.
#[track_caller]
fn dto_now(evd: &Evd) -> DtoCompletion {
    let ev = evd
        .dequeue()
        .unwrap()
        .expect("a completion queued at once (flushed immediately)");
    ev.as_dto().expect("a DTO completion").clone()
}

/// Waits for the next connection event, which must end the connection (BROKEN or
/// DISCONNECTED); returns its kind.
#[track_caller]
fn expect_conn_end(side: &Side) -> ConnectionEventKind {
    let (ev, _) = side
        .conn_evd
        .wait(T, 1)
        .unwrap()
        .expect("a connection event");
    let c = ev.as_connection().expect("a connection event");
    assert!(
        matches!(
            c.kind,
            ConnectionEventKind::Broken | ConnectionEventKind::Disconnected
        ),
        "expected BROKEN or DISCONNECTED, got {:?}",
        c.kind
    );
    assert_eq!(c.ep, side.ep);
    c.kind
}

/// An LMR of `len` bytes with `privs`, filled with `byte`.
fn filled(pz: &Pz, len: usize, privs: MemPriv, byte: u8) -> Lmr {
    let l = pz.lmr_allocate(len, privs).unwrap();
    l.fill(0, len, byte).unwrap();
    l
}

fn snapshot(lmrs: &[&Lmr]) -> Vec<Vec<u8>> {
    lmrs.iter().map(|l| l.to_vec(0, l.len()).unwrap()).collect()
}

/// The status a refused remote access completes with: RemoteAccess on loopback. Over tcp a
/// refused Read completes with RemoteAccess too (the peer's Terminate names the Read Request),
/// but a Write has completed successfully when TCP took it (see `completes_at_peer`); the
/// connection breaks after it.
#[track_caller]
fn assert_remote_refused(link: &str, op: Op, status: DtoStatus) {
    if completes_at_peer(link) || op == Op::Read {
        assert_eq!(status, DtoStatus::RemoteAccess);
    } else {
        assert!(
            matches!(status, DtoStatus::Success | DtoStatus::Flushed),
            "{status:?}"
        );
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    Write,
    Read,
}

/// A "hostile peer" access: `a` issues `op` against the remote buffer that `setup` returns
/// (built on `b`, together with every LMR of `b` that must stay unchanged). Checks: the DTO
/// completes with a non-success status (even with SUPPRESS in `flags`), no byte of any involved
/// LMR changes, both sides see the connection end once and are DISCONNECTED, outstanding and
/// later DTOs are flushed.
fn hostile(
    link: &str,
    op: Op,
    flags: CompletionFlags,
    setup: impl FnOnce(&Pair) -> (RmrTriplet, Vec<Lmr>),
) {
    let p = Pair::new(link);
    let (remote, b_lmrs) = setup(&p);
    // a's source (write) or sink (read) and a neighbour of it.
    let la = filled(&p.a.pz, 4096, MemPriv::ALL, 0xEE);
    let la_nb = filled(&p.a.pz, 4096, MemPriv::ALL, 0x22);
    // A receive b posted before the fault: it must be flushed.
    let lb_recv = filled(&p.b.pz, 256, MemPriv::ALL, 0x33);
    p.b.ep
        .post_recv(&[lb_recv.triplet(0, 256)], 500, CompletionFlags::empty())
        .unwrap();
    let mut all: Vec<&Lmr> = vec![&la, &la_nb, &lb_recv];
    all.extend(b_lmrs.iter());
    let before = snapshot(&all);

    let len = remote.segment_length.min(4096);
    match op {
        Op::Write => {
            p.a.ep
                .post_rdma_write(&[la.triplet(0, len)], 77, &remote, flags)
        }
        Op::Read => {
            p.a.ep
                .post_rdma_read(&[la.triplet(0, len)], 77, &remote, flags)
        }
    }
    .unwrap();
    let c = p.a.req_done();
    assert_eq!(c.cookie, 77);
    assert_eq!(
        c.operation,
        match op {
            Op::Write => DtoOp::RdmaWrite,
            Op::Read => DtoOp::RdmaRead,
        }
    );
    assert_remote_refused(link, op, c.status);

    expect_conn_end(&p.a);
    expect_conn_end(&p.b);
    assert_eq!(p.a.ep.state(), EpState::Disconnected);
    assert_eq!(p.b.ep.state(), EpState::Disconnected);

    let r = p.b.recv_done();
    assert_eq!((r.cookie.0, r.status), (500, DtoStatus::Flushed));

    assert!(
        snapshot(&all) == before,
        "a refused {op:?} changed registered memory"
    );

    // Later DTOs are flushed at once, on both sides.
    p.a.ep
        .post_rdma_write(&[la.triplet(0, 8)], 78, &remote, CompletionFlags::empty())
        .unwrap();
    let f = dto_now(&p.a.req_evd);
    assert_eq!((f.cookie.0, f.status), (78, DtoStatus::Flushed));
    p.a.ep
        .post_rdma_read(
            &[la.triplet(0, 8)],
            79,
            &remote.with_len(8),
            CompletionFlags::empty(),
        )
        .unwrap();
    let f = dto_now(&p.a.req_evd);
    assert_eq!((f.cookie.0, f.status), (79, DtoStatus::Flushed));
    p.b.ep
        .post_recv(&[lb_recv.triplet(0, 8)], 501, CompletionFlags::empty())
        .unwrap();
    let f = dto_now(&p.b.recv_evd);
    assert_eq!((f.cookie.0, f.status), (501, DtoStatus::Flushed));
    assert!(snapshot(&all) == before, "flushed DTOs changed memory");

    // Disconnecting a broken connection is a no-op, and the end was reported once.
    p.a.ep.disconnect(CloseFlags::Abrupt).unwrap();
    p.b.ep.disconnect(CloseFlags::Graceful).unwrap();
    no_event(&p.a.conn_evd, "a after the break");
    no_event(&p.b.conn_evd, "b after the break");
    p.close();
}

trait WithLen {
    fn with_len(self, len: u64) -> Self;
}
impl WithLen for RmrTriplet {
    fn with_len(mut self, len: u64) -> Self {
        self.segment_length = len;
        self
    }
}

/// Sides with custom EP attributes, connected.
fn pair_with(link: &str, a: EpAttr, b: EpAttr) -> Pair {
    Pair::with_attrs(link, Some(&a), Some(&b))
}

/// Streams RDMA writes from `from` into `into` until `stop`, keeping `from`'s transmitter busy
/// (so that inbound read requests at `from` queue up instead of being answered at once).
/// Counts the writes posted in `posted`.
fn background_writer(
    from: &Endpoint,
    src: &Lmr,
    into: &Lmr,
    stop: &AtomicBool,
    posted: &AtomicU64,
) {
    let len = src.len().min(into.len()) as u64;
    while !stop.load(Ordering::Relaxed) {
        match from.post_rdma_write(
            &[src.triplet(0, len)],
            0,
            &into.rmr_triplet(0, len),
            CompletionFlags::SUPPRESS,
        ) {
            Ok(()) => {
                posted.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if e.kind() == ErrorType::InsufficientResources => std::thread::yield_now(),
            Err(e) => panic!("background write: {e}"),
        }
    }
}

/// Sets the flag when dropped, also while unwinding from a failed assertion.
struct StopOnDrop<'a>(&'a AtomicBool);
impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs `body` while `p.b` streams writes to `p.a` from another thread (started before `body`
/// runs).
fn with_busy_responder<R>(p: &Pair, body: impl FnOnce() -> R) -> R {
    let noise_src = p.b.lmr(256 * 1024);
    let noise_dst = p.a.lmr(256 * 1024);
    let stop = AtomicBool::new(false);
    let posted = AtomicU64::new(0);
    let r = std::thread::scope(|s| {
        s.spawn(|| background_writer(&p.b.ep, &noise_src, &noise_dst, &stop, &posted));
        let _stop = StopOnDrop(&stop);
        while posted.load(Ordering::Relaxed) < 4 {
            std::thread::yield_now();
        }
        body()
    });
    // The noise LMRs go when this returns (dropping an LMR frees it): first every write the
    // writer posted must be placed. A Read behind them completes only after they are (its
    // response follows them on the stream).
    let probe = p.b.lmr(8);
    loop {
        // The send queue may still be full of the writer's writes.
        match p.b.ep.post_rdma_read(
            &[probe.triplet(0, 8)],
            0xD0D0,
            &noise_dst.rmr_triplet(0, 8),
            CompletionFlags::empty(),
        ) {
            Ok(()) => break,
            Err(e) if e.kind() == ErrorType::InsufficientResources => std::thread::yield_now(),
            Err(e) => panic!("the probe read: {e}"),
        }
    }
    let c = p.b.req_done();
    assert_eq!((c.cookie.0, c.status), (0xD0D0, DtoStatus::Success));
    r
}

// ------------------------------------------------------------------------------------------------
// RDMA write / read: data movement

per_link!(rdma_write_gathers_segments_in_order, |link| {
    let p = Pair::new(link);
    let la = p.a.lmr(4096);
    let la2 = p.a.lmr(4096);
    la.write(0, b"0123456789").unwrap();
    la2.write(100, b"abcde").unwrap();
    la.write(200, b"XYZWVUT").unwrap();
    let lb = filled(&p.b.pz, 4096, MemPriv::ALL, 0x5A);
    // Remote buffer larger than the 22 bytes written: only 22 bytes move.
    p.a.ep
        .post_rdma_write(
            &[la.triplet(0, 10), la2.triplet(100, 5), la.triplet(200, 7)],
            11,
            &lb.rmr_triplet(1000, 40),
            CompletionFlags::empty(),
        )
        .unwrap();
    let c = p.a.req_done();
    assert_eq!(
        (c.cookie.0, c.status, c.operation, c.transferred_length),
        (11, DtoStatus::Success, DtoOp::RdmaWrite, 22)
    );
    eventually("the write is placed", || {
        lb.to_vec(1000, 22).unwrap() == b"0123456789abcdeXYZWVUT"
    });
    assert_eq!(lb.to_vec(990, 10).unwrap(), vec![0x5A; 10]);
    assert_eq!(lb.to_vec(1022, 100).unwrap(), vec![0x5A; 100]);
    p.close();
});

per_link!(
    rdma_read_scatters_front_full_one_partial_rest_untouched,
    |link| {
        let p = Pair::new(link);
        let la = filled(&p.a.pz, 4096, MemPriv::ALL, 0x11);
        let la2 = filled(&p.a.pz, 4096, MemPriv::ALL, 0x22);
        let lb = p.b.lmr(4096);
        let data: Vec<u8> = (0..25u8).map(|i| b'A' + i).collect();
        lb.write(500, &data).unwrap();
        p.a.ep
            .post_rdma_read(
                &[
                    la.triplet(0, 10),
                    la2.triplet(50, 10),
                    la.triplet(100, 10),
                    la.triplet(200, 10),
                ],
                12,
                &lb.rmr_triplet(500, 25),
                CompletionFlags::empty(),
            )
            .unwrap();
        let c = p.a.req_done();
        assert_eq!(
            (c.cookie.0, c.status, c.operation, c.transferred_length),
            (12, DtoStatus::Success, DtoOp::RdmaRead, 25)
        );
        assert_eq!(la.to_vec(0, 10).unwrap(), &data[0..10]); // full
        assert_eq!(la2.to_vec(50, 10).unwrap(), &data[10..20]); // full
        assert_eq!(la.to_vec(100, 5).unwrap(), &data[20..25]); // partial
        assert_eq!(la.to_vec(105, 5).unwrap(), vec![0x11; 5]); // rest of the partial one
        assert_eq!(la.to_vec(200, 10).unwrap(), vec![0x11; 10]); // untouched
        assert_eq!(la.to_vec(10, 90).unwrap(), vec![0x11; 90]); // between segments
        assert_eq!(la2.to_vec(0, 50).unwrap(), vec![0x22; 50]);
        assert_eq!(la2.to_vec(60, 100).unwrap(), vec![0x22; 100]);
        p.close();
    }
);

per_link!(transferred_length_equals_bytes_moved, |link| {
    let p = Pair::new(link);
    let la = p.a.lmr(1 << 16);
    let lb = p.b.lmr(1 << 16);
    for (i, len) in [1u64, 7, 4096, 4097, 65_000].into_iter().enumerate() {
        let i = i as u64;
        p.a.ep
            .post_rdma_write(
                &[la.triplet(0, len)],
                2 * i,
                &lb.rmr_triplet(0, len),
                CompletionFlags::empty(),
            )
            .unwrap();
        let w = p.a.req_done();
        assert_eq!((w.cookie.0, w.status), (2 * i, DtoStatus::Success));
        assert_eq!(w.transferred_length, len, "write of {len}");
        // Read into an iov larger than the remote buffer: the remote length moves.
        p.a.ep
            .post_rdma_read(
                &[la.triplet(0, len + 10)],
                2 * i + 1,
                &lb.rmr_triplet(0, len),
                CompletionFlags::empty(),
            )
            .unwrap();
        let r = p.a.req_done();
        assert_eq!((r.cookie.0, r.status), (2 * i + 1, DtoStatus::Success));
        assert_eq!(r.transferred_length, len, "read of {len}");
    }
    p.close();
});

// ------------------------------------------------------------------------------------------------
// RDMA read / write: states

per_link!(rdma_read_valid_when_connected, |link| {
    let p = Pair::new(link);
    let la = p.a.lmr(64);
    let lb = p.b.lmr(64);
    lb.write(0, b"connected").unwrap();
    p.a.ep
        .post_rdma_read(
            &[la.triplet(0, 9)],
            1,
            &lb.rmr_triplet(0, 9),
            CompletionFlags::empty(),
        )
        .unwrap();
    assert_eq!(p.a.req_done().status, DtoStatus::Success);
    assert_eq!(la.to_vec(0, 9).unwrap(), b"connected");
    p.close();
});

per_link!(rdma_read_on_disconnected_ep_is_flushed_at_once, |link| {
    let p = Pair::new(link);
    let la = filled(&p.a.pz, 64, MemPriv::ALL, 0x44);
    let lb = filled(&p.b.pz, 64, MemPriv::ALL, 0x55);
    p.a.ep.disconnect(CloseFlags::Abrupt).unwrap();
    p.a.expect_conn(ConnectionEventKind::Disconnected);
    p.b.expect_conn(ConnectionEventKind::Disconnected);
    assert_eq!(p.a.ep.state(), EpState::Disconnected);
    // SUPPRESS does not hide a flush (an error completion).
    for (cookie, flags) in [
        (5, CompletionFlags::empty()),
        (6, CompletionFlags::SUPPRESS),
    ] {
        p.a.ep
            .post_rdma_read(&[la.triplet(0, 16)], cookie, &lb.rmr_triplet(0, 16), flags)
            .unwrap();
        let c = dto_now(&p.a.req_evd);
        assert_eq!(
            (c.cookie.0, c.status, c.operation),
            (cookie, DtoStatus::Flushed, DtoOp::RdmaRead)
        );
        assert_eq!(c.ep, p.a.ep);
    }
    // Writes likewise.
    p.a.ep
        .post_rdma_write(
            &[la.triplet(0, 16)],
            7,
            &lb.rmr_triplet(0, 16),
            CompletionFlags::empty(),
        )
        .unwrap();
    let c = dto_now(&p.a.req_evd);
    assert_eq!(
        (c.cookie.0, c.status, c.operation),
        (7, DtoStatus::Flushed, DtoOp::RdmaWrite)
    );
    assert_eq!(la.to_vec(0, 64).unwrap(), vec![0x44; 64]);
    assert_eq!(lb.to_vec(0, 64).unwrap(), vec![0x55; 64]);
    p.close();
});

once!(rdma_read_on_unconnected_ep_is_invalid_state, |link| {
    let s = Side::new(link, None);
    let l = s.lmr(64);
    let e = expect_err(
        s.ep.post_rdma_read(
            &[l.triplet(0, 8)],
            1,
            &l.rmr_triplet(0, 8),
            CompletionFlags::empty(),
        ),
        ErrorType::InvalidState,
    );
    assert_eq!(e.subtype(), Subtype::InvalidStateEpUnconnected);
    expect_err(
        s.ep.post_rdma_write(
            &[l.triplet(0, 8)],
            1,
            &l.rmr_triplet(0, 8),
            CompletionFlags::empty(),
        ),
        ErrorType::InvalidState,
    );
    no_event(&s.req_evd, "nothing is queued for a refused post");
    s.close();
});

per_link!(rdma_read_in_pending_states_is_invalid_state, |link| {
    let a = Side::new(link, None);
    let b = Side::new(link, None);
    let la = a.lmr(64);
    let lb = b.lmr(64);
    let read = |ep: &Endpoint, l: &Lmr| {
        ep.post_rdma_read(
            &[l.triplet(0, 8)],
            1,
            &lb.rmr_triplet(0, 8),
            CompletionFlags::empty(),
        )
    };

    // (PASSIVE_CONNECTION_PENDING cannot be held from outside on loopback, where accept
    // completes inside cr_accept; it is covered by the same state check.)
    // ACTIVE_CONNECTION_PENDING: connect to a PSP that never answers.
    let (_psp, cr_evd, q, addr) = b.listen();
    a.ep.connect(addr.ip(), q, None, b"").unwrap();
    assert_eq!(a.ep.state(), EpState::ActiveConnectionPending);
    expect_err(read(&a.ep, &la), ErrorType::InvalidState);
    let cr = expect_cr(&cr_evd).cr;

    // RESERVED and TENTATIVE_CONNECTION_PENDING: an RSP's endpoint.
    let c = Side::new(link, None);
    let lc = c.lmr(64);
    let rsp_evd = c.ia.evd_create(8, None, EvdFlags::CR).unwrap();
    let rq = qual();
    let _rsp = c.ia.rsp_create(rq, &c.ep, &rsp_evd).unwrap();
    assert_eq!(c.ep.state(), EpState::Reserved);
    expect_err(read(&c.ep, &lc), ErrorType::InvalidState);
    let d = Side::new(link, None);
    d.ep.connect(c.ia.query().unwrap().ia_address.ip(), rq, None, b"")
        .unwrap();
    let _cr2 = expect_cr(&rsp_evd);
    assert_eq!(c.ep.state(), EpState::TentativeConnectionPending);
    expect_err(read(&c.ep, &lc), ErrorType::InvalidState);

    cr.accept(Some(&b.ep), b"").unwrap();
    a.expect_conn(ConnectionEventKind::Established);
    b.expect_conn(ConnectionEventKind::Established);
    if !completes_at_peer(link) {
        // DISCONNECT_PENDING cannot be held from outside over tcp: a graceful disconnect
        // completes as soon as TCP has taken the queued sends.
        for s in [a, b, c, d] {
            s.close();
        }
        return;
    }
    // DISCONNECT_PENDING: a graceful disconnect waiting for a send the peer has no buffer for.
    la.write(0, b"late").unwrap();
    a.ep.post_send(&[la.triplet(0, 4)], 9, CompletionFlags::empty())
        .unwrap();
    a.ep.disconnect(CloseFlags::Graceful).unwrap();
    assert_eq!(a.ep.state(), EpState::DisconnectPending);
    expect_err(read(&a.ep, &la), ErrorType::InvalidState);
    // The peer posts a buffer: the send goes first, then the connection closes.
    b.ep.post_recv(&[lb.triplet(0, 64)], 3, CompletionFlags::empty())
        .unwrap();
    let s = a.req_done();
    assert_eq!((s.cookie.0, s.status), (9, DtoStatus::Success));
    assert_eq!(b.recv_done().status, DtoStatus::Success);
    assert_eq!(lb.to_vec(0, 4).unwrap(), b"late");
    a.expect_conn(ConnectionEventKind::Disconnected);
    b.expect_conn(ConnectionEventKind::Disconnected);
    for s in [a, b, c, d] {
        s.close();
    }
});

// ------------------------------------------------------------------------------------------------
// RDMA read / write: local checks at post time

per_link!(
    rdma_read_local_iov_smaller_than_remote_is_length_error,
    |link| {
        let p = Pair::new(link);
        let la = filled(&p.a.pz, 256, MemPriv::ALL, 0x10);
        let lb = p.b.lmr(256);
        expect_err(
            p.a.ep.post_rdma_read(
                &[la.triplet(0, 10), la.triplet(20, 10)],
                1,
                &lb.rmr_triplet(0, 21),
                CompletionFlags::empty(),
            ),
            ErrorType::LengthError,
        );
        // RDMA write of more than the remote buffer holds: also a length error.
        expect_err(
            p.a.ep.post_rdma_write(
                &[la.triplet(0, 21)],
                2,
                &lb.rmr_triplet(0, 20),
                CompletionFlags::empty(),
            ),
            ErrorType::LengthError,
        );
        no_event(&p.a.req_evd, "refused posts complete nothing");
        assert_eq!(p.a.ep.state(), EpState::Connected);
        assert_eq!(la.to_vec(0, 256).unwrap(), vec![0x10; 256]);
        // Exactly enough is fine.
        p.a.ep
            .post_rdma_read(
                &[la.triplet(0, 10), la.triplet(20, 11)],
                3,
                &lb.rmr_triplet(0, 21),
                CompletionFlags::empty(),
            )
            .unwrap();
        assert_eq!(p.a.req_done().status, DtoStatus::Success);
        p.close();
    }
);

per_link!(
    rdma_read_into_lmr_without_local_write_is_privileges_violation,
    |link| {
        let p = Pair::new(link);
        let ro = filled(
            &p.a.pz,
            64,
            MemPriv::LOCAL_READ | MemPriv::REMOTE_READ | MemPriv::REMOTE_WRITE,
            0x66,
        );
        let ok = p.a.lmr(64);
        let lb = p.b.lmr(64);
        // Also when only a later segment lacks the privilege.
        for iov in [
            vec![ro.triplet(0, 16)],
            vec![ok.triplet(0, 8), ro.triplet(0, 8)],
        ] {
            expect_err(
                p.a.ep
                    .post_rdma_read(&iov, 1, &lb.rmr_triplet(0, 16), CompletionFlags::empty()),
                ErrorType::PrivilegesViolation,
            );
        }
        assert_eq!(ro.to_vec(0, 64).unwrap(), vec![0x66; 64]);
        no_event(&p.a.req_evd, "refused posts complete nothing");
        p.close();
    }
);

per_link!(
    rdma_write_from_lmr_without_local_read_is_privileges_violation,
    |link| {
        let p = Pair::new(link);
        let wo =
            p.a.pz
                .lmr_allocate(64, MemPriv::LOCAL_WRITE | MemPriv::REMOTE_WRITE)
                .unwrap();
        let lb = filled(&p.b.pz, 64, MemPriv::ALL, 0x77);
        expect_err(
            p.a.ep.post_rdma_write(
                &[wo.triplet(0, 16)],
                1,
                &lb.rmr_triplet(0, 16),
                CompletionFlags::empty(),
            ),
            ErrorType::PrivilegesViolation,
        );
        assert_eq!(lb.to_vec(0, 64).unwrap(), vec![0x77; 64]);
        no_event(&p.a.req_evd, "refused posts complete nothing");
        p.close();
    }
);

per_link!(
    rdma_with_lmr_of_another_pz_is_protection_violation,
    |link| {
        let p = Pair::new(link);
        let other = p.a.ia.pz_create().unwrap();
        let foreign = filled(&other, 64, MemPriv::ALL, 0x99);
        let lb = filled(&p.b.pz, 64, MemPriv::ALL, 0x88);
        expect_err(
            p.a.ep.post_rdma_read(
                &[foreign.triplet(0, 16)],
                1,
                &lb.rmr_triplet(0, 16),
                CompletionFlags::empty(),
            ),
            ErrorType::ProtectionViolation,
        );
        expect_err(
            p.a.ep.post_rdma_write(
                &[foreign.triplet(0, 16)],
                2,
                &lb.rmr_triplet(0, 16),
                CompletionFlags::empty(),
            ),
            ErrorType::ProtectionViolation,
        );
        assert_eq!(foreign.to_vec(0, 64).unwrap(), vec![0x99; 64]);
        assert_eq!(lb.to_vec(0, 64).unwrap(), vec![0x88; 64]);
        no_event(&p.a.req_evd, "refused posts complete nothing");
        assert_eq!(p.a.ep.state(), EpState::Connected);
        p.close();
    }
);

per_link!(
    rdma_iov_segment_outside_its_lmr_is_invalid_parameter,
    |link| {
        let p = Pair::new(link);
        let la = p.a.lmr(64);
        let lb = p.b.lmr(4096);
        expect_err(
            p.a.ep.post_rdma_read(
                &[la.triplet(60, 8)],
                1,
                &lb.rmr_triplet(0, 8),
                CompletionFlags::empty(),
            ),
            ErrorType::InvalidParameter,
        );
        expect_err(
            p.a.ep.post_rdma_write(
                &[la.triplet(0, 65)],
                1,
                &lb.rmr_triplet(0, 65),
                CompletionFlags::empty(),
            ),
            ErrorType::InvalidParameter,
        );
        p.close();
    }
);

// ------------------------------------------------------------------------------------------------
// RDMA: remote checks ("hostile peer")

per_link!(
    rdma_write_with_invalid_rmr_context_breaks_connection,
    |link| {
        // Several invalid keys: a wrong key byte, 0, all ones, and the stale key of a freed LMR.
        for variant in 0..4 {
            hostile(link, Op::Write, CompletionFlags::empty(), |p| {
                let stale = p.b.lmr(4096);
                let stale_ctx = stale.rmr_context();
                stale.free().unwrap();
                let target = filled(&p.b.pz, 4096, MemPriv::ALL, 0x5A);
                let nb = filled(&p.b.pz, 4096, MemPriv::ALL, 0xA5);
                let good = target.rmr_triplet(0, 64);
                let ctx = match variant {
                    0 => RmrContext(good.rmr_context.0 ^ 0x01),
                    1 => RmrContext(0),
                    2 => RmrContext(u32::MAX),
                    _ => stale_ctx,
                };
                assert_ne!(ctx, target.rmr_context());
                assert_ne!(ctx, nb.rmr_context());
                (
                    RmrTriplet::new(ctx, good.virtual_address, 64),
                    vec![target, nb],
                )
            });
        }
    }
);

per_link!(rdma_write_without_remote_write_breaks_connection, |link| {
    hostile(link, Op::Write, CompletionFlags::empty(), |p| {
        let privs = MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE | MemPriv::REMOTE_READ;
        let target = filled(&p.b.pz, 4096, privs, 0x5A);
        let nb = filled(&p.b.pz, 4096, MemPriv::ALL, 0xA5);
        (target.rmr_triplet(0, 64), vec![target, nb])
    });
});

per_link!(rdma_write_past_end_of_region_breaks_connection, |link| {
    // Past the end, and (second run) starting before the start.
    for before_start in [false, true] {
        hostile(link, Op::Write, CompletionFlags::empty(), |p| {
            let target = filled(&p.b.pz, 4096, MemPriv::ALL, 0x5A);
            let nb = filled(&p.b.pz, 4096, MemPriv::ALL, 0xA5);
            let t = if before_start {
                RmrTriplet::new(target.rmr_context(), target.address() - 8, 64)
            } else {
                target.rmr_triplet(4096 - 32, 64)
            };
            (t, vec![target, nb])
        });
    }
});

per_link!(
    rdma_write_with_overflowing_offset_breaks_connection,
    |link| {
        for va in [u64::MAX - 16, u64::MAX] {
            hostile(link, Op::Write, CompletionFlags::empty(), |p| {
                let target = filled(&p.b.pz, 4096, MemPriv::ALL, 0x5A);
                let nb = filled(&p.b.pz, 4096, MemPriv::ALL, 0xA5);
                (
                    RmrTriplet::new(target.rmr_context(), va, 64),
                    vec![target, nb],
                )
            });
        }
    }
);

per_link!(rdma_read_without_remote_read_breaks_connection, |link| {
    hostile(link, Op::Read, CompletionFlags::empty(), |p| {
        let privs = MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE | MemPriv::REMOTE_WRITE;
        let src = filled(&p.b.pz, 4096, privs, 0x5A);
        let nb = filled(&p.b.pz, 4096, MemPriv::ALL, 0xA5);
        (src.rmr_triplet(0, 64), vec![src, nb])
    });
});

per_link!(
    rdma_read_from_region_of_another_pz_breaks_connection,
    |link| {
        hostile(link, Op::Read, CompletionFlags::empty(), |p| {
            let other = p.b.ia.pz_create().unwrap();
            let src = filled(&other, 4096, MemPriv::ALL, 0x5A);
            let nb = filled(&p.b.pz, 4096, MemPriv::ALL, 0xA5);
            (src.rmr_triplet(0, 64), vec![src, nb])
        });
    }
);

per_link!(
    rdma_write_to_region_of_another_pz_breaks_connection,
    |link| {
        hostile(link, Op::Write, CompletionFlags::empty(), |p| {
            let other = p.b.ia.pz_create().unwrap();
            let target = filled(&other, 4096, MemPriv::ALL, 0x5A);
            let nb = filled(&p.b.pz, 4096, MemPriv::ALL, 0xA5);
            (target.rmr_triplet(0, 64), vec![target, nb])
        });
    }
);

per_link!(
    rdma_read_past_end_or_overflowing_breaks_connection,
    |link| {
        for case in 0..3 {
            hostile(link, Op::Read, CompletionFlags::empty(), |p| {
                let src = filled(&p.b.pz, 4096, MemPriv::ALL, 0x5A);
                let nb = filled(&p.b.pz, 4096, MemPriv::ALL, 0xA5);
                let t = match case {
                    0 => src.rmr_triplet(4096 - 32, 64),
                    1 => RmrTriplet::new(src.rmr_context(), u64::MAX - 16, 64),
                    _ => RmrTriplet::new(src.rmr_context().0 ^ 0x01, src.address(), 64),
                };
                (t, vec![src, nb])
            });
        }
    }
);

per_link!(suppressed_failing_rdma_write_still_reports_error, |link| {
    // First make sure SUPPRESS really suppresses a success on this link...
    let p = Pair::new(link);
    let la = p.a.lmr(64);
    let lb = p.b.lmr(64);
    la.write(0, b"quiet").unwrap();
    p.a.ep
        .post_rdma_write(
            &[la.triplet(0, 5)],
            1,
            &lb.rmr_triplet(0, 5),
            CompletionFlags::SUPPRESS,
        )
        .unwrap();
    no_event(&p.a.req_evd, "a suppressed successful write");
    assert_eq!(lb.to_vec(0, 5).unwrap(), b"quiet");
    p.close();
    // ...then a failing one must still complete (with an error). (A Write refused over tcp
    // has already completed successfully -- suppressed -- when the peer's Terminate arrives:
    // only the Read is reported there.)
    if completes_at_peer(link) {
        hostile(link, Op::Write, CompletionFlags::SUPPRESS, |p| {
            let privs = MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE;
            let target = filled(&p.b.pz, 4096, privs, 0x5A);
            (target.rmr_triplet(0, 64), vec![target])
        });
    }
    hostile(link, Op::Read, CompletionFlags::SUPPRESS, |p| {
        let privs = MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE;
        let src = filled(&p.b.pz, 4096, privs, 0x5A);
        (src.rmr_triplet(0, 64), vec![src])
    });
});

per_link!(dtos_queued_behind_a_refused_write_are_flushed, |link| {
    let p = Pair::new(link);
    let la = p.a.lmr(4096);
    la.write(0, b"first").unwrap();
    let lb = filled(&p.b.pz, 4096, MemPriv::ALL, 0x5A);
    let bad = RmrTriplet::new(lb.rmr_context().0 ^ 0x01, lb.address(), 16);
    // A send the peer has no buffer for yet holds the queue; the bad write and two more DTOs
    // queue behind it.
    p.a.ep
        .post_send(&[la.triplet(0, 5)], 1, CompletionFlags::empty())
        .unwrap();
    p.a.ep
        .post_rdma_write(&[la.triplet(0, 16)], 2, &bad, CompletionFlags::empty())
        .unwrap();
    p.a.ep
        .post_rdma_write(
            &[la.triplet(0, 16)],
            3,
            &lb.rmr_triplet(0, 16),
            CompletionFlags::empty(),
        )
        .unwrap();
    p.a.ep
        .post_rdma_read(
            &[la.triplet(100, 16)],
            4,
            &lb.rmr_triplet(0, 16),
            CompletionFlags::empty(),
        )
        .unwrap();
    let lr = p.b.lmr(64);
    p.b.ep
        .post_recv(&[lr.triplet(0, 64)], 10, CompletionFlags::empty())
        .unwrap();
    let s = p.a.req_done();
    assert_eq!((s.cookie.0, s.status), (1, DtoStatus::Success));
    let r = p.b.recv_done();
    assert_eq!(
        (r.cookie.0, r.status, r.transferred_length),
        (10, DtoStatus::Success, 5)
    );
    let w = p.a.req_done();
    assert_eq!(w.cookie, 2);
    assert_remote_refused(link, Op::Write, w.status);
    for cookie in [3, 4] {
        let f = p.a.req_done();
        if cookie == 3 && !completes_at_peer(link) {
            // Written to TCP before the peer's Terminate came back.
            assert_eq!(f.cookie.0, 3);
            assert!(matches!(f.status, DtoStatus::Success | DtoStatus::Flushed));
        } else {
            assert_eq!((f.cookie.0, f.status), (cookie, DtoStatus::Flushed));
        }
    }
    assert_eq!(lb.to_vec(0, 4096).unwrap(), vec![0x5A; 4096]);
    expect_conn_end(&p.a);
    expect_conn_end(&p.b);
    p.close();
});

// ------------------------------------------------------------------------------------------------
// IRD / ORD

per_link!(ird_ord_negotiated_as_min_of_out_and_peer_in, |link| {
    let a = EpAttr {
        max_rdma_read_in: 3,
        max_rdma_read_out: 2,
        ..Default::default()
    };
    let b = EpAttr {
        max_rdma_read_in: 4,
        max_rdma_read_out: 5,
        ..Default::default()
    };
    let p = pair_with(link, a, b);
    let qa = p.a.ep.query().unwrap();
    let qb = p.b.ep.query().unwrap();
    assert_eq!((qa.ord, qa.ird), (2, 3)); // ord = min(2, 4), ird = min(3, 5)
    assert_eq!((qb.ord, qb.ird), (3, 2)); // ord = min(5, 3), ird = min(4, 2)
    p.close();
    // The other way round: the active side wants more than the passive side offers.
    let a = EpAttr {
        max_rdma_read_in: 1,
        max_rdma_read_out: 6,
        ..Default::default()
    };
    let b = EpAttr {
        max_rdma_read_in: 4,
        max_rdma_read_out: 2,
        ..Default::default()
    };
    let p = pair_with(link, a, b);
    let qa = p.a.ep.query().unwrap();
    let qb = p.b.ep.query().unwrap();
    assert_eq!((qa.ord, qa.ird), (4, 1)); // ord = min(6, 4), ird = min(1, 2)
    assert_eq!((qb.ord, qb.ird), (1, 4)); // ord = min(2, 1), ird = min(4, 6)
                                          // The attributes themselves are unchanged.
    assert_eq!(qa.attr.max_rdma_read_out, 6);
    p.close();
});

per_link!(ep_with_ord_zero_connects_with_ord_zero, |link| {
    // An active EP that may not read (max_rdma_read_out 0) still connects: over tcp it must not
    // offer the peer-to-peer Read RTR (a read of its own), only the Write RTR.
    let a = EpAttr {
        max_rdma_read_out: 0,
        ..Default::default()
    };
    let p = pair_with(link, a, EpAttr::default());
    let qa = p.a.ep.query().unwrap();
    let qb = p.b.ep.query().unwrap();
    assert_eq!((qa.ord, qb.ird), (0, 0));
    p.close();
});

per_link!(rdma_reads_beyond_ord_wait_and_complete_in_order, |link| {
    // The responder offers IRD 2 and the requester wants ORD 2: if the requester ever had more
    // than 2 reads outstanding, the responder would break the connection. The responder's
    // transmitter is kept busy by a stream of writes so that read requests really queue up.
    const N: u64 = 100;
    let a_attr = EpAttr {
        max_rdma_read_out: 2,
        max_rdma_read_in: 3,
        max_request_dtos: 128,
        ..Default::default()
    };
    let b_attr = EpAttr {
        max_rdma_read_in: 2,
        max_rdma_read_out: 5,
        ..Default::default()
    };
    let p = pair_with(link, a_attr, b_attr);
    let q = p.a.ep.query().unwrap();
    assert_eq!((q.ord, q.ird), (2, 3));
    let q = p.b.ep.query().unwrap();
    assert_eq!((q.ord, q.ird), (3, 2));

    let src = p.b.lmr(64 * N as usize);
    for i in 0..N {
        src.write(64 * i as usize, &[i as u8 ^ 0x5A; 64]).unwrap();
    }
    let sink = filled(&p.a.pz, 64 * N as usize, MemPriv::ALL, 0xFF);
    with_busy_responder(&p, || {
        for round in 0..20 {
            for i in 0..N {
                p.a.ep
                    .post_rdma_read(
                        &[sink.triplet(64 * i, 64)],
                        round * N + i,
                        &src.rmr_triplet(64 * i, 64),
                        CompletionFlags::empty(),
                    )
                    .unwrap();
            }
            for i in 0..N {
                let c = p.a.req_done();
                assert_eq!(
                    (c.cookie.0, c.status, c.operation, c.transferred_length),
                    (round * N + i, DtoStatus::Success, DtoOp::RdmaRead, 64),
                    "read {i} of round {round}"
                );
            }
            sink.fill(0, 64 * N as usize, 0xFF).unwrap();
        }
    });
    // Data: one more round without noise, checked slot by slot.
    for i in 0..N {
        p.a.ep
            .post_rdma_read(
                &[sink.triplet(64 * i, 64)],
                i,
                &src.rmr_triplet(64 * i, 64),
                CompletionFlags::empty(),
            )
            .unwrap();
    }
    for i in 0..N {
        let c = p.a.req_done();
        assert_eq!((c.cookie.0, c.status), (i, DtoStatus::Success));
    }
    for i in 0..N {
        assert_eq!(
            sink.to_vec(64 * i as usize, 64).unwrap(),
            vec![i as u8 ^ 0x5A; 64]
        );
    }
    assert_eq!(p.a.ep.state(), EpState::Connected);
    assert_eq!(p.b.ep.state(), EpState::Connected);
    no_event(&p.a.conn_evd, "no break");
    p.close();
});

per_link!(rdma_reads_within_negotiated_ord_under_load, |link| {
    // Like the test above, but the requester asks for more (8) than the responder offers (2),
    // so only the negotiated ORD keeps it within the responder's IRD; every round's data is
    // checked while the responder is busy.
    const N: u64 = 32;
    let a_attr = EpAttr {
        max_rdma_read_out: 8,
        ..Default::default()
    };
    let b_attr = EpAttr {
        max_rdma_read_in: 2,
        ..Default::default()
    };
    let p = pair_with(link, a_attr, b_attr);
    assert_eq!(p.a.ep.query().unwrap().ord, 2);
    let src = p.b.lmr(64 * N as usize);
    let sink = p.a.lmr(64 * N as usize);
    with_busy_responder(&p, || {
        for round in 0..10u64 {
            for i in 0..N {
                src.write(64 * i as usize, &[(round * N + i) as u8; 64])
                    .unwrap();
            }
            sink.fill(0, 64 * N as usize, 0xFF).unwrap();
            for i in 0..N {
                p.a.ep
                    .post_rdma_read(
                        &[sink.triplet(64 * i, 64)],
                        i,
                        &src.rmr_triplet(64 * i, 64),
                        CompletionFlags::empty(),
                    )
                    .unwrap();
            }
            for i in 0..N {
                let c = p.a.req_done();
                assert_eq!((c.cookie.0, c.status), (i, DtoStatus::Success));
                // Completed in order: this read's data is in place now.
                assert_eq!(
                    sink.to_vec(64 * i as usize, 64).unwrap(),
                    vec![(round * N + i) as u8; 64],
                    "read {i} of round {round}"
                );
            }
        }
    });
    assert_eq!(p.a.ep.state(), EpState::Connected);
    p.close();
});

// ------------------------------------------------------------------------------------------------
// Fencing and ordering

per_link!(barrier_fence_send_waits_for_earlier_rdma_read, |link| {
    // Each round: the peer puts a new value in its buffer; we RDMA-read it into L and then send L
    // with BARRIER_FENCE. Without the fence the send could carry L's old contents. The peer's
    // transmitter is kept busy so read responses are not answered inline.
    const ROUNDS: u64 = 200;
    let p = Pair::new(link);
    let src = p.b.lmr(64);
    let l = p.a.lmr(64);
    let rbuf = p.b.lmr(64);
    with_busy_responder(&p, || {
        for i in 0..ROUNDS {
            let v = [(i % 251) as u8 + 1; 64];
            src.write(0, &v).unwrap();
            l.fill(0, 64, 0).unwrap();
            rbuf.fill(0, 64, 0).unwrap();
            p.b.ep
                .post_recv(&[rbuf.triplet(0, 64)], i, CompletionFlags::empty())
                .unwrap();
            p.a.ep
                .post_rdma_read(
                    &[l.triplet(0, 64)],
                    2 * i,
                    &src.rmr_triplet(0, 64),
                    CompletionFlags::empty(),
                )
                .unwrap();
            p.a.ep
                .post_send(
                    &[l.triplet(0, 64)],
                    2 * i + 1,
                    CompletionFlags::BARRIER_FENCE,
                )
                .unwrap();
            let first = p.a.req_done();
            assert_eq!(
                (first.cookie.0, first.operation, first.status),
                (2 * i, DtoOp::RdmaRead, DtoStatus::Success),
                "the read completes before the fenced send"
            );
            let second = p.a.req_done();
            assert_eq!(
                (second.cookie.0, second.operation, second.status),
                (2 * i + 1, DtoOp::Send, DtoStatus::Success)
            );
            let r = p.b.recv_done();
            assert_eq!(
                (r.cookie.0, r.status, r.transferred_length),
                (i, DtoStatus::Success, 64)
            );
            assert_eq!(
                rbuf.to_vec(0, 64).unwrap(),
                v,
                "round {i}: the send carried stale data"
            );
        }
    });
    p.close();
});

per_link!(
    rdma_write_placed_before_later_send_completes_at_peer,
    |link| {
        const ROUNDS: usize = 200;
        let a_attr = EpAttr {
            max_request_dtos: 2 * ROUNDS,
            ..Default::default()
        };
        let b_attr = EpAttr {
            max_recv_dtos: ROUNDS,
            ..Default::default()
        };
        let p = pair_with(link, a_attr, b_attr);
        let la = p.a.lmr(64 * ROUNDS);
        let lb = filled(&p.b.pz, 64 * ROUNDS, MemPriv::ALL, 0);
        let rbuf = p.b.lmr(16);
        for i in 0..ROUNDS {
            la.fill(64 * i, 64, (i % 255) as u8 + 1).unwrap();
        }
        for i in 0..ROUNDS {
            p.b.ep
                .post_recv(&[rbuf.triplet(0, 16)], i as u64, CompletionFlags::empty())
                .unwrap();
        }
        let sbuf = p.a.lmr(16);
        for i in 0..ROUNDS {
            p.a.ep
                .post_rdma_write(
                    &[la.triplet(64 * i as u64, 64)],
                    0,
                    &lb.rmr_triplet(64 * i as u64, 64),
                    CompletionFlags::SUPPRESS,
                )
                .unwrap();
            p.a.ep
                .post_send(&[sbuf.triplet(0, 8)], 0, CompletionFlags::SUPPRESS)
                .unwrap();
        }
        for i in 0..ROUNDS {
            let r = p.b.recv_done();
            assert_eq!((r.cookie.0, r.status), (i as u64, DtoStatus::Success));
            // The write posted before this send is in place the moment the receive completes.
            assert_eq!(
                lb.to_vec(64 * i, 64).unwrap(),
                vec![(i % 255) as u8 + 1; 64],
                "round {i}"
            );
        }
        p.close();
    }
);

// ------------------------------------------------------------------------------------------------
// Connection management

per_link!(psp_create_on_used_qualifier_is_conn_qual_in_use, |link| {
    let s = Side::new(link, None);
    let other = Side::new(link, None);
    let (psp, cr_evd, q, _) = s.listen();
    let e = expect_err(
        s.ia.psp_create(q, &cr_evd, PspFlags::Consumer),
        ErrorType::ConnQualInUse,
    );
    assert!(e.to_string().contains("DAT_CONN_QUAL_IN_USE"), "{e}");
    // Another IA with the same address shares the qualifier space.
    let cr2 = other.ia.evd_create(8, None, EvdFlags::CR).unwrap();
    expect_err(
        other.ia.psp_create(q, &cr2, PspFlags::Provider),
        ErrorType::ConnQualInUse,
    );
    // An RSP too.
    expect_err(
        other.ia.rsp_create(q, &other.ep, &cr2),
        ErrorType::ConnQualInUse,
    );
    assert_eq!(other.ep.state(), EpState::Unconnected);
    // Freed, the qualifier is usable again.
    psp.free().unwrap();
    let psp2 = other.ia.psp_create(q, &cr2, PspFlags::Consumer).unwrap();
    assert_eq!(psp2.conn_qual(), q);
    s.close();
    other.close();
});

per_link!(psp_create_any_returns_usable_qualifier, |link| {
    let a = Side::new(link, None);
    let b = Side::new(link, None);
    let cr_evd = b.ia.evd_create(8, None, EvdFlags::CR).unwrap();
    let (psp, q) = b.ia.psp_create_any(&cr_evd, PspFlags::Consumer).unwrap();
    assert_eq!(psp.conn_qual(), q);
    assert_eq!(psp.query().unwrap().conn_qual, q);
    // It is taken...
    expect_err(
        b.ia.psp_create(q, &cr_evd, PspFlags::Consumer),
        ErrorType::ConnQualInUse,
    );
    // ...and a second one differs.
    let (psp2, q2) = b.ia.psp_create_any(&cr_evd, PspFlags::Consumer).unwrap();
    assert_ne!(q, q2);
    psp2.free().unwrap();
    a.ep.connect(b.ia.query().unwrap().ia_address.ip(), q, T, b"any")
        .unwrap();
    let arr = expect_cr(&cr_evd);
    assert_eq!(arr.conn_qual, q);
    assert_eq!(arr.sp, psp);
    arr.cr.accept(Some(&b.ep), b"").unwrap();
    a.expect_conn(ConnectionEventKind::Established);
    b.expect_conn(ConnectionEventKind::Established);
    a.close();
    b.close();
});

per_link!(
    ep_create_accepts_evds_of_another_ia_of_the_process,
    |link| {
        let b = Side::new(link, None);
        let (ia1, _) = InterfaceAdapter::open(link, 8).unwrap();
        let (ia2, _) = InterfaceAdapter::open(link, 8).unwrap();
        let evd = ia1
            .evd_create(16, None, EvdFlags::CONNECTION | EvdFlags::DTO)
            .unwrap();
        let pz = ia2.pz_create().unwrap();
        let ep = ia2
            .ep_create(&pz, Some(&evd), Some(&evd), Some(&evd), None)
            .unwrap();
        // ESTABLISHED (naming `ep`) arrives on the EVD of the other IA.
        let active = End {
            ep: &ep,
            conn_evd: &evd,
        };
        let _listening = connect(active, &b.ia, b.end(), b"", b"");
        ia2.close(CloseFlags::Abrupt).unwrap();
        ia1.close(CloseFlags::Abrupt).unwrap();
        b.close();
    }
);

per_link!(connect_without_listener_is_non_peer_rejected, |link| {
    let a = Side::new(link, None);
    let la = a.lmr(64);
    a.ep.post_recv(&[la.triplet(0, 64)], 1, CompletionFlags::empty())
        .unwrap();
    let addr = a.ia.query().unwrap().ia_address;
    a.ep.connect(addr.ip(), qual(), T, b"anyone?").unwrap();
    a.expect_conn(ConnectionEventKind::NonPeerRejected);
    assert_eq!(a.ep.state(), EpState::Disconnected);
    // A receive posted before the attempt is flushed.
    let r = a.recv_done();
    assert_eq!((r.cookie.0, r.status), (1, DtoStatus::Flushed));
    no_event(&a.conn_evd, "one event per attempt");
    a.close();
});

/// tcp: a refused connect is retried for a while (a peer may create its PSP just after telling
/// us to connect, as Debian's dtestx does), so a listener that appears in time is reached.
#[test]
fn tcp_connect_refused_then_listener_appears_is_established() {
    let a = Side::new("tcp", None);
    let b = Side::new("tcp", None);
    let q = qual();
    let addr = b.ia.query().unwrap().ia_address;
    a.ep.connect(addr.ip(), q, T, b"early").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(a.ep.state(), EpState::ActiveConnectionPending);
    let cr_evd = b.ia.evd_create(8, None, EvdFlags::CR).unwrap();
    let _psp = b.ia.psp_create(q, &cr_evd, PspFlags::Consumer).unwrap();
    let arr = expect_cr(&cr_evd);
    assert_eq!(arr.cr.private_data(), b"early");
    arr.cr.accept(Some(&b.ep), b"").unwrap();
    a.expect_conn(ConnectionEventKind::Established);
    b.expect_conn(ConnectionEventKind::Established);
    a.close();
    b.close();
}

per_link!(
    reject_with_private_data_is_peer_rejected_carrying_it,
    |link| {
        let a = Side::new(link, None);
        let b = Side::new(link, None);
        let (_psp, cr_evd, q, addr) = b.listen();
        a.ep.connect(addr.ip(), q, T, b"please").unwrap();
        let arr = expect_cr(&cr_evd);
        assert_eq!(arr.cr.private_data(), b"please");
        let pd: Vec<u8> = (0..252u32).map(|i| (i * 7) as u8).collect();
        arr.cr.reject(&pd).unwrap();
        let ev = a.expect_conn(ConnectionEventKind::PeerRejected);
        assert_eq!(ev.private_data, pd);
        assert_eq!(ev.ep, a.ep);
        assert_eq!(a.ep.state(), EpState::Disconnected);
        // The CR is consumed.
        expect_err(arr.cr.reject(b""), ErrorType::InvalidHandle);
        expect_err(arr.cr.accept(Some(&b.ep), b""), ErrorType::InvalidHandle);
        assert_eq!(b.ep.state(), EpState::Unconnected);
        no_event(&a.conn_evd, "one event per attempt");
        no_event(&b.conn_evd, "the passive EP was never involved");
        a.close();
        b.close();
    }
);

per_link!(connect_timeout_is_timed_out, |link| {
    let a = Side::new(link, None);
    let b = Side::new(link, None);
    let (_psp, cr_evd, q, addr) = b.listen();
    a.ep.connect(addr.ip(), q, Some(Duration::from_millis(50)), b"")
        .unwrap();
    let arr = expect_cr(&cr_evd);
    a.expect_conn(ConnectionEventKind::TimedOut);
    assert_eq!(a.ep.state(), EpState::Disconnected);
    // Accepting the stale request cannot complete.
    arr.cr.accept(Some(&b.ep), b"too late").unwrap();
    b.expect_conn(ConnectionEventKind::AcceptCompletionError);
    assert_ne!(b.ep.state(), EpState::Connected);
    no_event(&a.conn_evd, "nothing after TIMED_OUT");
    no_event(&b.conn_evd, "nothing after ACCEPT_COMPLETION_ERROR");
    a.close();
    b.close();
});

per_link!(connect_timeout_does_not_fire_after_established, |link| {
    // The first connect's timer (150 ms) runs out while the EP is connected again on a second
    // attempt: it must not end that connection.
    let a = Side::new(link, None);
    let b = Side::new(link, None);
    let (_psp, cr_evd, q, addr) = b.listen();
    a.ep.connect(addr.ip(), q, Some(Duration::from_millis(150)), b"")
        .unwrap();
    expect_cr(&cr_evd).cr.accept(Some(&b.ep), b"").unwrap();
    a.expect_conn(ConnectionEventKind::Established);
    b.expect_conn(ConnectionEventKind::Established);
    a.ep.disconnect(CloseFlags::Abrupt).unwrap();
    a.expect_conn(ConnectionEventKind::Disconnected);
    b.expect_conn(ConnectionEventKind::Disconnected);
    a.ep.reset().unwrap();
    b.ep.reset().unwrap();
    a.ep.connect(addr.ip(), q, None, b"").unwrap();
    expect_cr(&cr_evd).cr.accept(Some(&b.ep), b"").unwrap();
    a.expect_conn(ConnectionEventKind::Established);
    b.expect_conn(ConnectionEventKind::Established);
    std::thread::sleep(Duration::from_millis(200));
    no_event(&a.conn_evd, "a stale connect timer");
    no_event(&b.conn_evd, "the peer of a stale connect timer");
    assert_eq!(a.ep.state(), EpState::Connected);
    assert_eq!(b.ep.state(), EpState::Connected);
    a.close();
    b.close();
});

per_link!(private_data_over_252_bytes_is_invalid_parameter, |link| {
    let a = Side::new(link, None);
    let b = Side::new(link, None);
    assert_eq!(a.ia.query().unwrap().max_private_data_size, 252);
    let (_psp, cr_evd, q, addr) = b.listen();
    let big = vec![1u8; 253];
    expect_err(
        a.ep.connect(addr.ip(), q, T, &big),
        ErrorType::InvalidParameter,
    );
    assert_eq!(a.ep.state(), EpState::Unconnected);
    no_event(&cr_evd, "a refused connect sends nothing");
    let max: Vec<u8> = (0..252u32).map(|i| i as u8).collect();
    a.ep.connect(addr.ip(), q, T, &max).unwrap();
    let arr = expect_cr(&cr_evd);
    assert_eq!(arr.cr.private_data(), &max[..]);
    expect_err(
        arr.cr.accept(Some(&b.ep), &big),
        ErrorType::InvalidParameter,
    );
    expect_err(arr.cr.reject(&big), ErrorType::InvalidParameter);
    // The CR survives the refused calls.
    arr.cr.accept(Some(&b.ep), &max).unwrap();
    let est = a.expect_conn(ConnectionEventKind::Established);
    assert_eq!(est.private_data, max);
    b.expect_conn(ConnectionEventKind::Established);
    a.close();
    b.close();
});

per_link!(connect_on_connected_ep_is_invalid_state, |link| {
    let p = Pair::new(link);
    let addr = p.b.ia.query().unwrap().ia_address;
    let q = p.psp.conn_qual();
    let e = expect_err(
        p.a.ep.connect(addr.ip(), q, T, b""),
        ErrorType::InvalidState,
    );
    assert_eq!(e.subtype(), Subtype::InvalidStateEpConnected);
    expect_err(
        p.b.ep.connect(addr.ip(), q, T, b""),
        ErrorType::InvalidState,
    );
    no_event(&p.cr_evd, "no request sent");
    assert_eq!(p.a.ep.state(), EpState::Connected);
    p.close();
});

per_link!(
    disconnected_reported_exactly_once_per_ep_per_connection,
    |link| {
        for round in 0..20 {
            let p = Pair::new(link);
            let flags = if round % 2 == 0 {
                CloseFlags::Abrupt
            } else {
                CloseFlags::Graceful
            };
            let barrier = Barrier::new(2);
            std::thread::scope(|s| {
                s.spawn(|| {
                    barrier.wait();
                    p.a.ep.disconnect(flags).unwrap();
                });
                s.spawn(|| {
                    barrier.wait();
                    p.b.ep.disconnect(flags).unwrap();
                });
            });
            p.a.expect_conn(ConnectionEventKind::Disconnected);
            p.b.expect_conn(ConnectionEventKind::Disconnected);
            assert_eq!(p.a.ep.state(), EpState::Disconnected);
            assert_eq!(p.b.ep.state(), EpState::Disconnected);
            if round < 2 {
                no_event(&p.a.conn_evd, "a: a second DISCONNECTED");
                no_event(&p.b.conn_evd, "b: a second DISCONNECTED");
            } else {
                assert!(p.a.conn_evd.dequeue().unwrap().is_none());
                assert!(p.b.conn_evd.dequeue().unwrap().is_none());
            }
            p.close();
        }
    }
);

per_link!(disconnect_on_disconnected_ep_is_noop, |link| {
    let p = Pair::new(link);
    p.a.ep.disconnect(CloseFlags::Graceful).unwrap();
    p.a.expect_conn(ConnectionEventKind::Disconnected);
    p.b.expect_conn(ConnectionEventKind::Disconnected);
    for flags in [CloseFlags::Graceful, CloseFlags::Abrupt] {
        p.a.ep.disconnect(flags).unwrap();
        p.b.ep.disconnect(flags).unwrap();
    }
    assert_eq!(p.a.ep.state(), EpState::Disconnected);
    assert_eq!(p.b.ep.state(), EpState::Disconnected);
    no_event(&p.a.conn_evd, "a");
    no_event(&p.b.conn_evd, "b");
    p.close();
});

per_link!(
    disconnect_while_connecting_aborts_once_and_late_accept_fails,
    |link| {
        let a = Side::new(link, None);
        let b = Side::new(link, None);
        let (_psp, cr_evd, q, addr) = b.listen();
        a.ep.connect(addr.ip(), q, None, b"").unwrap();
        let arr = expect_cr(&cr_evd);
        assert_eq!(a.ep.state(), EpState::ActiveConnectionPending);
        a.ep.disconnect(CloseFlags::Abrupt).unwrap();
        a.expect_conn(ConnectionEventKind::Disconnected);
        assert_eq!(a.ep.state(), EpState::Disconnected);
        a.ep.disconnect(CloseFlags::Abrupt).unwrap();
        no_event(&a.conn_evd, "one DISCONNECTED for the aborted attempt");
        arr.cr.accept(Some(&b.ep), b"").unwrap();
        b.expect_conn(ConnectionEventKind::AcceptCompletionError);
        assert_ne!(b.ep.state(), EpState::Connected);
        no_event(
            &a.conn_evd,
            "the aborted EP hears nothing of the late accept",
        );
        no_event(&b.conn_evd, "one event for the failed accept");
        a.close();
        b.close();
    }
);

per_link!(
    ep_reset_returns_disconnected_to_unconnected_for_reuse,
    |link| {
        let p = Pair::new(link);
        let Pair { a, b, cr_evd, psp } = p;
        a.ep.disconnect(CloseFlags::Abrupt).unwrap();
        a.expect_conn(ConnectionEventKind::Disconnected);
        b.expect_conn(ConnectionEventKind::Disconnected);
        // Not yet reset: connect is refused.
        expect_err(
            a.ep.connect(
                b.ia.query().unwrap().ia_address.ip(),
                psp.conn_qual(),
                T,
                b"",
            ),
            ErrorType::InvalidState,
        );
        a.ep.reset().unwrap();
        b.ep.reset().unwrap();
        assert_eq!(a.ep.state(), EpState::Unconnected);
        assert_eq!(b.ep.state(), EpState::Unconnected);
        // Reconnect the same EPs through the same PSP and move data.
        a.ep.connect(
            b.ia.query().unwrap().ia_address.ip(),
            psp.conn_qual(),
            T,
            b"again",
        )
        .unwrap();
        let arr = expect_cr(&cr_evd);
        assert_eq!(arr.cr.private_data(), b"again");
        arr.cr.accept(Some(&b.ep), b"welcome back").unwrap();
        let est = a.expect_conn(ConnectionEventKind::Established);
        assert_eq!(est.private_data, b"welcome back");
        b.expect_conn(ConnectionEventKind::Established);
        let la = a.lmr(64);
        let lb = b.lmr(64);
        la.write(0, b"second life").unwrap();
        a.ep.post_rdma_write(
            &[la.triplet(0, 11)],
            1,
            &lb.rmr_triplet(0, 11),
            CompletionFlags::empty(),
        )
        .unwrap();
        assert_eq!(a.req_done().status, DtoStatus::Success);
        eventually("the write is placed", || {
            lb.to_vec(0, 11).unwrap() == b"second life"
        });
        a.close();
        b.close();
    }
);

once!(ep_reset_on_unconnected_succeeds, |link| {
    let s = Side::new(link, None);
    s.ep.reset().unwrap();
    s.ep.reset().unwrap();
    assert_eq!(s.ep.state(), EpState::Unconnected);
    no_event(&s.conn_evd, "reset reports nothing");
    s.close();
});

per_link!(ep_reset_on_connected_is_invalid_state, |link| {
    let p = Pair::new(link);
    let e = expect_err(p.a.ep.reset(), ErrorType::InvalidState);
    assert_eq!(e.subtype(), Subtype::InvalidStateEpConnected);
    expect_err(p.b.ep.reset(), ErrorType::InvalidState);
    assert_eq!(p.a.ep.state(), EpState::Connected);
    // Still usable.
    let la = p.a.lmr(8);
    let lb = p.b.lmr(8);
    p.a.ep
        .post_rdma_write(
            &[la.triplet(0, 8)],
            1,
            &lb.rmr_triplet(0, 8),
            CompletionFlags::empty(),
        )
        .unwrap();
    assert_eq!(p.a.req_done().status, DtoStatus::Success);
    // And in a pending state.
    let c = Side::new(link, None);
    let (_psp, _cr_evd, q, addr) = p.b.listen();
    c.ep.connect(addr.ip(), q, None, b"").unwrap();
    expect_err(c.ep.reset(), ErrorType::InvalidState);
    c.close();
    p.close();
});

per_link!(rsp_reserves_ep_and_accept_none_uses_it, |link| {
    let a = Side::new(link, None);
    let b = Side::new(link, None);
    let rsp_evd = b.ia.evd_create(8, None, EvdFlags::CR).unwrap();
    let q = qual();
    let rsp = b.ia.rsp_create(q, &b.ep, &rsp_evd).unwrap();
    assert!(!rsp.is_public());
    assert_eq!(b.ep.state(), EpState::Reserved);
    let sp = rsp.query().unwrap();
    assert_eq!(sp.conn_qual, q);
    assert_eq!(sp.ep.as_ref(), Some(&b.ep));
    // A reserved EP cannot connect on its own.
    expect_err(
        b.ep.connect(a.ia.query().unwrap().ia_address.ip(), qual(), T, b""),
        ErrorType::InvalidState,
    );
    a.ep.connect(b.ia.query().unwrap().ia_address.ip(), q, T, b"to the rsp")
        .unwrap();
    let arr = expect_cr(&rsp_evd);
    assert_eq!(arr.sp, rsp);
    assert_eq!(arr.conn_qual, q);
    let cq = arr.cr.query().unwrap();
    assert_eq!(cq.remote.private_data, b"to the rsp");
    assert_eq!(cq.local_ep.as_ref(), Some(&b.ep));
    assert_eq!(cq.sp, rsp);
    arr.cr.accept(None, b"reserved ok").unwrap();
    let est = a.expect_conn(ConnectionEventKind::Established);
    assert_eq!(est.private_data, b"reserved ok");
    let est_b = b.expect_conn(ConnectionEventKind::Established);
    assert_eq!(est_b.ep, b.ep);
    assert_eq!(b.ep.state(), EpState::Connected);
    // Data moves on the reserved EP.
    let la = a.lmr(16);
    let lb = b.lmr(16);
    lb.write(0, b"from reserved").unwrap();
    a.ep.post_rdma_read(
        &[la.triplet(0, 13)],
        1,
        &lb.rmr_triplet(0, 13),
        CompletionFlags::empty(),
    )
    .unwrap();
    assert_eq!(a.req_done().status, DtoStatus::Success);
    assert_eq!(la.to_vec(0, 13).unwrap(), b"from reserved");
    a.close();
    b.close();
});

per_link!(
    rsp_create_on_a_reserved_endpoint_is_invalid_state_and_leaves_the_reservation,
    |link| {
        let a = Side::new(link, None);
        let b = Side::new(link, None);
        let rsp_evd = b.ia.evd_create(8, None, EvdFlags::CR).unwrap();
        let q = qual();
        let _rsp = b.ia.rsp_create(q, &b.ep, &rsp_evd).unwrap();
        let e = expect_err(
            b.ia.rsp_create(qual(), &b.ep, &rsp_evd),
            ErrorType::InvalidState,
        );
        assert_eq!(e.subtype(), Subtype::InvalidStateEpReserved, "{e}");
        // The first RSP still holds the endpoint: a request to it is accepted onto it.
        assert_eq!(b.ep.state(), EpState::Reserved);
        a.ep.connect(b.ia.query().unwrap().ia_address.ip(), q, T, b"")
            .unwrap();
        expect_cr(&rsp_evd).cr.accept(None, b"").unwrap();
        a.expect_conn(ConnectionEventKind::Established);
        b.expect_conn(ConnectionEventKind::Established);
        a.close();
        b.close();
    }
);

per_link!(cr_query_shows_private_data, |link| {
    let a = Side::new(link, None);
    let b = Side::new(link, None);
    let (psp, cr_evd, q, addr) = b.listen();
    a.ep.connect(addr.ip(), q, T, b"query me").unwrap();
    let arr = expect_cr(&cr_evd);
    let cq = arr.cr.query().unwrap();
    assert_eq!(cq.remote.private_data, b"query me");
    assert_eq!(cq.remote.remote_addr, a.ia.query().unwrap().ia_address);
    assert_eq!(cq.sp, psp);
    assert!(cq.local_ep.is_none());
    arr.cr.reject(b"").unwrap();
    a.expect_conn(ConnectionEventKind::PeerRejected);
    expect_err(arr.cr.query(), ErrorType::InvalidHandle);
    a.close();
    b.close();
});

per_link!(accepting_cr_twice_is_invalid_handle, |link| {
    // A new request, accepted once...
    let c = Side::new(link, None);
    let d = Side::new(link, None);
    let (_psp, cr_evd, q, addr) = d.listen();
    c.ep.connect(addr.ip(), q, T, b"").unwrap();
    let arr = expect_cr(&cr_evd);
    arr.cr.accept(Some(&d.ep), b"").unwrap();
    c.expect_conn(ConnectionEventKind::Established);
    d.expect_conn(ConnectionEventKind::Established);
    // ...then again on a fresh UNCONNECTED EP (so only the CR's state can refuse it).
    let spare =
        d.ia.ep_create(
            &d.pz,
            Some(&d.recv_evd),
            Some(&d.req_evd),
            Some(&d.conn_evd),
            None,
        )
        .unwrap();
    let e = expect_err(arr.cr.accept(Some(&spare), b""), ErrorType::InvalidHandle);
    assert_eq!(e.subtype(), Subtype::InvalidHandleCr);
    assert_eq!(spare.state(), EpState::Unconnected);
    expect_err(arr.cr.reject(b""), ErrorType::InvalidHandle);
    no_event(&c.conn_evd, "the connection is unaffected");
    assert_eq!(c.ep.state(), EpState::Connected);
    assert_eq!(d.ep.state(), EpState::Connected);
    spare.free().unwrap();
    c.close();
    d.close();
});

per_link!(
    ep_free_while_connected_flushes_receives_and_peer_disconnects,
    |link| {
        let p = Pair::new(link);
        let lb = filled(&p.b.pz, 256, MemPriv::ALL, 0x42);
        for i in 0..3u64 {
            p.b.ep
                .post_recv(&[lb.triplet(64 * i, 64)], 100 + i, CompletionFlags::empty())
                .unwrap();
        }
        // A send the peer has no buffer for stays queued (loopback): it is flushed too. Over
        // tcp it completed when TCP took it.
        let ls = p.b.lmr(8);
        p.b.ep
            .post_send(&[ls.triplet(0, 8)], 200, CompletionFlags::empty())
            .unwrap();
        p.b.ep.free().unwrap();
        let s = p.b.req_done();
        if completes_at_peer(link) {
            assert_eq!(s.status, DtoStatus::Flushed);
        } else {
            assert!(matches!(s.status, DtoStatus::Success | DtoStatus::Flushed));
        }
        assert_eq!((s.cookie.0, s.operation), (200, DtoOp::Send));
        for i in 0..3u64 {
            let r = p.b.recv_done();
            assert_eq!(
                (r.cookie.0, r.status, r.operation),
                (100 + i, DtoStatus::Flushed, DtoOp::Receive)
            );
        }
        expect_conn_end(&p.a);
        assert_eq!(p.a.ep.state(), EpState::Disconnected);
        expect_err(p.b.ep.query(), ErrorType::InvalidHandle);
        // The peer's posts are flushed now.
        let la = p.a.lmr(8);
        p.a.ep
            .post_send(&[la.triplet(0, 8)], 5, CompletionFlags::empty())
            .unwrap();
        assert_eq!(dto_now(&p.a.req_evd).status, DtoStatus::Flushed);
        assert_eq!(lb.to_vec(0, 256).unwrap(), vec![0x42; 256]);
        no_event(&p.a.conn_evd, "one end event");
        p.close();
    }
);

per_link!(established_carries_accept_private_data, |link| {
    let a = Side::new(link, None);
    let b = Side::new(link, None);
    let (_psp, cr_evd, q, addr) = b.listen();
    a.ep.connect(addr.ip(), q, T, b"hi").unwrap();
    let arr = expect_cr(&cr_evd);
    let pd = b"accepted: here is my rkey".to_vec();
    // The accept may take its private data from the CR's own buffer.
    let echo = arr.cr.private_data().to_vec();
    arr.cr.accept(Some(&b.ep), &pd).unwrap();
    let est = a.expect_conn(ConnectionEventKind::Established);
    assert_eq!(est.private_data, pd);
    assert_eq!(est.ep, a.ep);
    let est_b = b.expect_conn(ConnectionEventKind::Established);
    assert_eq!(est_b.ep, b.ep);
    assert_eq!(echo, b"hi");
    // Empty private data gives an empty ESTABLISHED payload.
    let c = Side::new(link, None);
    let d = Side::new(link, None);
    let (_psp2, cr2, q2, addr2) = d.listen();
    c.ep.connect(addr2.ip(), q2, T, b"").unwrap();
    expect_cr(&cr2).cr.accept(Some(&d.ep), b"").unwrap();
    assert!(c
        .expect_conn(ConnectionEventKind::Established)
        .private_data
        .is_empty());
    d.expect_conn(ConnectionEventKind::Established);
    for s in [a, b, c, d] {
        s.close();
    }
});

per_link!(cr_arrival_names_psp_and_consumer_qualifier, |link| {
    let a = Side::new(link, None);
    let b = Side::new(link, None);
    let (psp, cr_evd, q, addr) = b.listen();
    a.ep.connect(addr.ip(), q, T, b"").unwrap();
    let arr = expect_cr(&cr_evd);
    assert_eq!(arr.sp, psp);
    assert_eq!(arr.conn_qual, q);
    arr.cr.accept(Some(&b.ep), b"").unwrap();
    a.expect_conn(ConnectionEventKind::Established);
    b.expect_conn(ConnectionEventKind::Established);
    assert_eq!(a.ep.query().unwrap().remote_port_qual, Some(q));
    assert_eq!(a.ep.query().unwrap().remote_address, Some(addr));
    a.close();
    b.close();
});

// ------------------------------------------------------------------------------------------------
// Objects

once!(pz_free_while_in_use_is_invalid_state, |link| {
    let s = Side::new(link, None);
    // In use by the EP.
    let e = expect_err(s.pz.free(), ErrorType::InvalidState);
    assert_eq!(e.subtype(), Subtype::InvalidStatePzInUse);
    // In use by an LMR only.
    let pz2 = s.ia.pz_create().unwrap();
    let l = pz2.lmr_allocate(64, MemPriv::ALL).unwrap();
    expect_err(pz2.free(), ErrorType::InvalidState);
    // In use by an RMR only.
    l.free().unwrap();
    let r = pz2.rmr_create().unwrap();
    expect_err(pz2.free(), ErrorType::InvalidState);
    r.free().unwrap();
    pz2.free().unwrap();
    expect_err(pz2.free(), ErrorType::InvalidHandle);
    // The EP's PZ becomes free once the EP is gone.
    s.ep.free().unwrap();
    s.pz.free().unwrap();
    s.ia.close(CloseFlags::Abrupt).unwrap();
});

once!(lmr_allocate_zero_is_length_error, |link| {
    let s = Side::new(link, None);
    let e = expect_err(s.pz.lmr_allocate(0, MemPriv::ALL), ErrorType::LengthError);
    assert!(e.to_string().contains("DAT_LENGTH_ERROR"), "{e}");
    s.pz.lmr_allocate(1, MemPriv::ALL).unwrap();
    s.close();
});

once!(lmr_free_while_rmr_bound_is_invalid_state, |link| {
    let s = Side::new(link, None);
    let l = s.lmr(4096);
    let rmr = s.pz.rmr_create().unwrap();
    rmr.bind(
        &l,
        l.triplet(0, 100),
        MemPriv::REMOTE_WRITE,
        &s.ep,
        1,
        CompletionFlags::empty(),
    )
    .unwrap();
    let e = expect_err(l.free(), ErrorType::InvalidState);
    assert_eq!(e.subtype(), Subtype::InvalidStateLmrInUse);
    l.query().unwrap(); // still alive
    rmr.free().unwrap();
    l.free().unwrap();
    expect_err(l.query(), ErrorType::InvalidHandle);
    s.close();
});

per_link!(rmr_bind_completes_on_request_evd_with_cookie, |link| {
    let p = Pair::new(link);
    let lb = p.b.lmr(4096);
    let rmr = p.b.pz.rmr_create().unwrap();
    let ctx = rmr
        .bind(
            &lb,
            lb.triplet(1000, 100),
            MemPriv::REMOTE_WRITE,
            &p.b.ep,
            0xC0FFEE,
            CompletionFlags::empty(),
        )
        .unwrap();
    assert_ne!(ctx, 0);
    assert_ne!(ctx, lb.rmr_context());
    let (ev, _) = p.b.req_evd.wait(T, 1).unwrap().expect("an event in time");
    match ev {
        Event::RmrBind(b) => {
            assert_eq!(b.cookie, 0xC0FFEE);
            assert_eq!(b.status, DtoStatus::Success);
            assert_eq!(b.rmr.id(), rmr.id());
        }
        other => panic!("expected an RMR bind completion, got {other:?}"),
    }
    let q = rmr.query().unwrap();
    assert_eq!(q.rmr_context, ctx);
    assert_eq!(q.privileges, MemPriv::REMOTE_WRITE);
    assert_eq!(q.lmr_triplet, Some(lb.triplet(1000, 100)));
    assert_eq!(
        rmr.rmr_triplet(),
        Some(RmrTriplet::new(ctx, lb.address() + 1000, 100))
    );
    // Nothing on the recv EVD or the peer.
    assert!(p.b.recv_evd.dequeue().unwrap().is_none());
    assert!(p.a.req_evd.dequeue().unwrap().is_none());
    // SUPPRESS suppresses the bind completion.
    rmr.bind(
        &lb,
        lb.triplet(0, 10),
        MemPriv::REMOTE_READ,
        &p.b.ep,
        2,
        CompletionFlags::SUPPRESS,
    )
    .unwrap();
    no_event(&p.b.req_evd, "a suppressed bind");
    p.close();
});

per_link!(rmr_allows_peer_write_within_range_only, |link| {
    let p = Pair::new(link);
    let lb = filled(
        &p.b.pz,
        4096,
        MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE,
        0x5A,
    );
    let rmr = p.b.pz.rmr_create().unwrap();
    rmr.bind(
        &lb,
        lb.triplet(1000, 100),
        MemPriv::REMOTE_WRITE,
        &p.b.ep,
        1,
        CompletionFlags::SUPPRESS,
    )
    .unwrap();
    let t = rmr.rmr_triplet().unwrap();
    let la = p.a.lmr(4096);
    let data: Vec<u8> = (0..100u8).collect();
    la.write(0, &data).unwrap();
    // The whole window, in two pieces.
    p.a.ep
        .post_rdma_write(
            &[la.triplet(0, 60)],
            1,
            &RmrTriplet::new(t.rmr_context, t.virtual_address, 60),
            CompletionFlags::empty(),
        )
        .unwrap();
    p.a.ep
        .post_rdma_write(
            &[la.triplet(60, 40)],
            2,
            &RmrTriplet::new(t.rmr_context, t.virtual_address + 60, 40),
            CompletionFlags::empty(),
        )
        .unwrap();
    assert_eq!(p.a.req_done().status, DtoStatus::Success);
    assert_eq!(p.a.req_done().status, DtoStatus::Success);
    eventually("both writes are placed", || {
        lb.to_vec(1000, 100).unwrap() == data
    });
    let before = lb.to_vec(0, 4096).unwrap();
    // One byte beyond the window (still inside the LMR): refused, nothing changes.
    p.a.ep
        .post_rdma_write(
            &[la.triplet(0, 2)],
            3,
            &RmrTriplet::new(t.rmr_context, t.virtual_address + 99, 2),
            CompletionFlags::empty(),
        )
        .unwrap();
    let c = p.a.req_done();
    assert_eq!(c.cookie, 3);
    assert_remote_refused(link, Op::Write, c.status);
    assert_eq!(lb.to_vec(0, 4096).unwrap(), before);
    expect_conn_end(&p.a);
    expect_conn_end(&p.b);
    p.close();
});

per_link!(rmr_without_remote_read_refuses_peer_read, |link| {
    let p = Pair::new(link);
    let lb = filled(&p.b.pz, 4096, MemPriv::ALL, 0x5A);
    let rmr = p.b.pz.rmr_create().unwrap();
    rmr.bind(
        &lb,
        lb.triplet(0, 100),
        MemPriv::REMOTE_WRITE,
        &p.b.ep,
        1,
        CompletionFlags::SUPPRESS,
    )
    .unwrap();
    let la = filled(&p.a.pz, 128, MemPriv::ALL, 0x11);
    p.a.ep
        .post_rdma_read(
            &[la.triplet(0, 100)],
            1,
            &rmr.rmr_triplet().unwrap(),
            CompletionFlags::empty(),
        )
        .unwrap();
    let c = p.a.req_done();
    assert_remote_refused(link, Op::Read, c.status);
    assert_eq!(la.to_vec(0, 128).unwrap(), vec![0x11; 128]);
    expect_conn_end(&p.a);
    expect_conn_end(&p.b);
    p.close();
});

per_link!(rmr_unbind_invalidates_old_context, |link| {
    let p = Pair::new(link);
    let lb = filled(
        &p.b.pz,
        4096,
        MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE,
        0x5A,
    );
    let rmr = p.b.pz.rmr_create().unwrap();
    rmr.bind(
        &lb,
        lb.triplet(0, 256),
        MemPriv::REMOTE_WRITE,
        &p.b.ep,
        1,
        CompletionFlags::empty(),
    )
    .unwrap();
    let (ev, _) = p.b.req_evd.wait(T, 1).unwrap().expect("an event in time");
    assert!(matches!(ev, Event::RmrBind(ref b) if b.cookie == 1));
    let old = rmr.rmr_triplet().unwrap();
    let la = p.a.lmr(256);
    la.fill(0, 256, 0x77).unwrap();
    p.a.ep
        .post_rdma_write(&[la.triplet(0, 16)], 1, &old, CompletionFlags::empty())
        .unwrap();
    assert_eq!(p.a.req_done().status, DtoStatus::Success);
    eventually("the write is placed", || {
        lb.to_vec(0, 16).unwrap() == vec![0x77; 16]
    });
    // Unbind.
    let ctx = rmr
        .bind(
            &lb,
            lb.triplet(0, 0),
            MemPriv::REMOTE_WRITE,
            &p.b.ep,
            2,
            CompletionFlags::empty(),
        )
        .unwrap();
    assert_eq!(ctx, 0);
    let (ev, _) = p.b.req_evd.wait(T, 1).unwrap().expect("an event in time");
    assert!(matches!(ev, Event::RmrBind(ref b) if b.cookie == 2));
    assert_eq!(rmr.query().unwrap().rmr_context, 0);
    assert!(rmr.rmr_triplet().is_none());
    // The LMR is no longer held by the RMR.
    let before = lb.to_vec(0, 4096).unwrap();
    la.fill(0, 256, 0x99).unwrap();
    p.a.ep
        .post_rdma_write(&[la.triplet(0, 16)], 2, &old, CompletionFlags::empty())
        .unwrap();
    let c = p.a.req_done();
    assert_eq!(c.cookie, 2);
    assert_remote_refused(link, Op::Write, c.status);
    assert_eq!(lb.to_vec(0, 4096).unwrap(), before);
    expect_conn_end(&p.a);
    expect_conn_end(&p.b);
    rmr.free().unwrap();
    lb.free().unwrap();
    p.close();
});

per_link!(rmr_rebind_invalidates_previous_context, |link| {
    let p = Pair::new(link);
    let lb = filled(
        &p.b.pz,
        4096,
        MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE,
        0x5A,
    );
    let rmr = p.b.pz.rmr_create().unwrap();
    let c1 = rmr
        .bind(
            &lb,
            lb.triplet(0, 64),
            MemPriv::REMOTE_WRITE,
            &p.b.ep,
            1,
            CompletionFlags::SUPPRESS,
        )
        .unwrap();
    let c2 = rmr
        .bind(
            &lb,
            lb.triplet(2048, 64),
            MemPriv::REMOTE_WRITE,
            &p.b.ep,
            2,
            CompletionFlags::SUPPRESS,
        )
        .unwrap();
    assert_ne!(c1, c2);
    let la = filled(&p.a.pz, 64, MemPriv::ALL, 0x31);
    // The new window works...
    p.a.ep
        .post_rdma_write(
            &[la.triplet(0, 64)],
            1,
            &RmrTriplet::new(c2, lb.address() + 2048, 64),
            CompletionFlags::empty(),
        )
        .unwrap();
    assert_eq!(p.a.req_done().status, DtoStatus::Success);
    eventually("the write is placed", || {
        lb.to_vec(2048, 64).unwrap() == vec![0x31; 64]
    });
    // ...the old key does not.
    p.a.ep
        .post_rdma_write(
            &[la.triplet(0, 64)],
            2,
            &RmrTriplet::new(c1, lb.address(), 64),
            CompletionFlags::empty(),
        )
        .unwrap();
    assert_remote_refused(link, Op::Write, p.a.req_done().status);
    assert_eq!(lb.to_vec(0, 64).unwrap(), vec![0x5A; 64]);
    p.close();
});

once!(evd_free_while_in_use_is_invalid_state, |link| {
    let s = Side::new(link, None);
    for evd in [&s.recv_evd, &s.req_evd, &s.conn_evd] {
        let e = expect_err(evd.free(), ErrorType::InvalidState);
        assert_eq!(e.subtype(), Subtype::InvalidStateEvdInUse);
    }
    // A CR EVD used by a PSP.
    let (psp, cr_evd, _, _) = s.listen();
    expect_err(cr_evd.free(), ErrorType::InvalidState);
    psp.free().unwrap();
    cr_evd.free().unwrap();
    // The async EVD belongs to ia_close.
    expect_err(s.async_evd.free(), ErrorType::InvalidState);
    s.ep.free().unwrap();
    s.recv_evd.free().unwrap();
    s.req_evd.free().unwrap();
    s.conn_evd.free().unwrap();
    expect_err(s.recv_evd.dequeue(), ErrorType::InvalidHandle);
    s.ia.close(CloseFlags::Abrupt).unwrap();
});

once!(
    ia_close_graceful_with_live_objects_is_invalid_state,
    |link| {
        let s = Side::new(link, None);
        let l = s.lmr(64);
        let e = expect_err(s.ia.close(CloseFlags::Graceful), ErrorType::InvalidState);
        assert_eq!(e.subtype(), Subtype::InvalidStateIaInUse);
        // Still open and usable.
        s.ia.query().unwrap();
        // Free everything, leaf first; each step a graceful close is still refused.
        l.free().unwrap();
        expect_err(s.ia.close(CloseFlags::Graceful), ErrorType::InvalidState);
        s.ep.free().unwrap();
        expect_err(s.ia.close(CloseFlags::Graceful), ErrorType::InvalidState);
        s.pz.free().unwrap();
        s.recv_evd.free().unwrap();
        s.req_evd.free().unwrap();
        expect_err(s.ia.close(CloseFlags::Graceful), ErrorType::InvalidState);
        s.conn_evd.free().unwrap();
        s.ia.close(CloseFlags::Graceful).unwrap();
        expect_err(s.ia.pz_create(), ErrorType::InvalidHandle);
        expect_err(s.ia.close(CloseFlags::Graceful), ErrorType::InvalidHandle);
    }
);

per_link!(ia_close_abrupt_with_connected_ep_disconnects_peer, |link| {
    let p = Pair::new(link);
    let Pair { a, b, .. } = p;
    let lb = b.lmr(64);
    b.ep.post_recv(&[lb.triplet(0, 64)], 9, CompletionFlags::empty())
        .unwrap();
    a.ia.close(CloseFlags::Abrupt).unwrap();
    expect_conn_end(&b);
    assert_eq!(b.ep.state(), EpState::Disconnected);
    let r = b.recv_done();
    assert_eq!((r.cookie.0, r.status), (9, DtoStatus::Flushed));
    // Every object of the closed IA is gone.
    expect_err(a.ep.query(), ErrorType::InvalidHandle);
    expect_err(a.pz.lmr_allocate(8, MemPriv::ALL), ErrorType::InvalidHandle);
    expect_err(a.req_evd.dequeue(), ErrorType::InvalidHandle);
    expect_err(a.ia.query(), ErrorType::InvalidHandle);
    no_event(&b.conn_evd, "one end event");
    b.close();
});

per_link!(operations_on_freed_handles_are_invalid_handle, |link| {
    let s = Side::new(link, None);
    let l = s.lmr(64);
    let rmr = s.pz.rmr_create().unwrap();
    let ep2 =
        s.ia.ep_create(
            &s.pz,
            Some(&s.recv_evd),
            Some(&s.req_evd),
            Some(&s.conn_evd),
            None,
        )
        .unwrap();
    let (psp, _cr_evd, _, addr) = s.listen();

    ep2.free().unwrap();
    expect_err(ep2.query(), ErrorType::InvalidHandle);
    expect_err(
        ep2.post_recv(&[l.triplet(0, 8)], 1, CompletionFlags::empty()),
        ErrorType::InvalidHandle,
    );
    expect_err(
        ep2.post_rdma_read(
            &[l.triplet(0, 8)],
            1,
            &l.rmr_triplet(0, 8),
            CompletionFlags::empty(),
        ),
        ErrorType::InvalidHandle,
    );
    expect_err(ep2.connect(addr.ip(), 1, T, b""), ErrorType::InvalidHandle);
    expect_err(ep2.disconnect(CloseFlags::Abrupt), ErrorType::InvalidHandle);
    expect_err(ep2.reset(), ErrorType::InvalidHandle);
    expect_err(ep2.free(), ErrorType::InvalidHandle);
    expect_err(
        rmr.bind(
            &l,
            l.triplet(0, 8),
            MemPriv::REMOTE_READ,
            &ep2,
            1,
            CompletionFlags::empty(),
        ),
        ErrorType::InvalidHandle,
    );

    rmr.free().unwrap();
    expect_err(rmr.query(), ErrorType::InvalidHandle);
    expect_err(rmr.free(), ErrorType::InvalidHandle);
    expect_err(
        rmr.bind(
            &l,
            l.triplet(0, 8),
            MemPriv::REMOTE_READ,
            &s.ep,
            1,
            CompletionFlags::empty(),
        ),
        ErrorType::InvalidHandle,
    );

    let ctx_triplet = l.triplet(0, 8);
    l.free().unwrap();
    expect_err(l.query(), ErrorType::InvalidHandle);
    expect_err(l.write(0, b"x"), ErrorType::InvalidHandle);
    expect_err(l.free(), ErrorType::InvalidHandle);
    // A freed LMR's context in an iov names no LMR: per the seeds that is a privileges
    // violation ("one of the LMRs used in local_iov is invalid"), not an invalid handle.
    expect_err(
        s.ep.post_recv(&[ctx_triplet], 1, CompletionFlags::empty()),
        ErrorType::PrivilegesViolation,
    );

    psp.free().unwrap();
    expect_err(psp.query(), ErrorType::InvalidHandle);
    expect_err(psp.free(), ErrorType::InvalidHandle);

    let pz2 = s.ia.pz_create().unwrap();
    pz2.free().unwrap();
    expect_err(pz2.lmr_allocate(64, MemPriv::ALL), ErrorType::InvalidHandle);
    expect_err(pz2.rmr_create(), ErrorType::InvalidHandle);
    expect_err(
        s.ia.ep_create(&pz2, None, None, None, None),
        ErrorType::InvalidHandle,
    );

    let evd = s.ia.evd_create(4, None, EvdFlags::DTO).unwrap();
    evd.free().unwrap();
    expect_err(evd.dequeue(), ErrorType::InvalidHandle);
    expect_err(evd.wait(Some(Duration::ZERO), 1), ErrorType::InvalidHandle);
    expect_err(evd.free(), ErrorType::InvalidHandle);
    expect_err(
        s.ia.ep_create(&s.pz, Some(&evd), None, None, None),
        ErrorType::InvalidHandle,
    );
    s.close();
});

once!(ep_query_returns_attributes, |link| {
    let attr = EpAttr {
        max_recv_dtos: 7,
        max_request_dtos: 9,
        max_recv_iov: 3,
        max_request_iov: 5,
        max_rdma_read_in: 2,
        max_rdma_read_out: 6,
        recv_completion_flags: CompletionFlags::SOLICITED_WAIT,
        request_completion_flags: CompletionFlags::UNSIGNALLED,
        ..Default::default()
    };
    let s = Side::new(link, Some(&attr));
    let q = s.ep.query().unwrap();
    assert_eq!(q.attr, attr);
    assert_eq!(q.state, EpState::Unconnected);
    assert_eq!(q.pz_id, s.pz.id());
    assert_eq!(s.ep.pz(), s.pz);
    assert_eq!((q.ord, q.ird), (0, 0));
    assert!(q.remote_address.is_none());
    // Limits are enforced: iov length and queue depth.
    let l = s.lmr(64);
    let segs: Vec<LmrTriplet> = (0..4).map(|i| l.triplet(i * 8, 8)).collect();
    expect_err(
        s.ep.post_recv(&segs, 1, CompletionFlags::empty()),
        ErrorType::InvalidParameter,
    );
    for i in 0..7 {
        s.ep.post_recv(&segs[..3], i, CompletionFlags::empty())
            .unwrap();
    }
    expect_err(
        s.ep.post_recv(&segs[..1], 8, CompletionFlags::empty()),
        ErrorType::InsufficientResources,
    );
    s.close();
});

// Only on links where Sends the peer has no receive buffer for stay in the sender's queue: a
// Send completes at the peer and waits there for a buffer (LinkCaps).
per_link_with!(
    completes_at_peer && rnr_waits_forever,
    ep_request_queue_depth_is_enforced,
    |link| {
        let a_attr = EpAttr {
            max_request_dtos: 4,
            max_request_iov: 2,
            ..Default::default()
        };
        let p = pair_with(link, a_attr, EpAttr::default());
        let la = p.a.lmr(64);
        let lb = p.b.lmr(64);
        expect_err(
            p.a.ep.post_rdma_write(
                &[la.triplet(0, 1), la.triplet(1, 1), la.triplet(2, 1)],
                0,
                &lb.rmr_triplet(0, 3),
                CompletionFlags::empty(),
            ),
            ErrorType::InvalidParameter,
        );
        // Sends the peer has no buffers for stay queued and occupy the request queue.
        for i in 0..4 {
            p.a.ep
                .post_send(&[la.triplet(0, 8)], i, CompletionFlags::empty())
                .unwrap();
        }
        expect_err(
            p.a.ep.post_rdma_write(
                &[la.triplet(0, 8)],
                4,
                &lb.rmr_triplet(0, 8),
                CompletionFlags::empty(),
            ),
            ErrorType::InsufficientResources,
        );
        for i in 0..4 {
            p.b.ep
                .post_recv(&[lb.triplet(0, 64)], i, CompletionFlags::empty())
                .unwrap();
        }
        for i in 0..4 {
            assert_eq!(p.a.req_done().cookie, i);
        }
        p.a.ep
            .post_rdma_write(
                &[la.triplet(0, 8)],
                4,
                &lb.rmr_triplet(0, 8),
                CompletionFlags::empty(),
            )
            .unwrap();
        assert_eq!(p.a.req_done().cookie, 4);
        p.close();
    }
);

per_link!(ep_modify_when_connected_is_invalid_state, |link| {
    let p = Pair::new(link);
    let mut attr = p.a.ep.query().unwrap().attr;
    attr.max_recv_dtos = 10;
    let e = expect_err(p.a.ep.modify(&attr), ErrorType::InvalidState);
    assert_eq!(e.subtype(), Subtype::InvalidStateEpConnected);
    assert_ne!(p.a.ep.query().unwrap().attr.max_recv_dtos, 10);
    // Allowed when UNCONNECTED.
    let s = Side::new(link, None);
    s.ep.modify(&attr).unwrap();
    assert_eq!(s.ep.query().unwrap().attr, attr);
    s.close();
    p.close();
});

once!(
    ep_attr_with_invalid_completion_flags_is_invalid_parameter,
    |link| {
        let s = Side::new(link, None);
        let bad = [
            EpAttr {
                recv_completion_flags: CompletionFlags::SUPPRESS,
                ..Default::default()
            },
            EpAttr {
                recv_completion_flags: CompletionFlags::BARRIER_FENCE,
                ..Default::default()
            },
            EpAttr {
                request_completion_flags: CompletionFlags::SOLICITED_WAIT,
                ..Default::default()
            },
            EpAttr {
                request_completion_flags: CompletionFlags::SUPPRESS,
                ..Default::default()
            },
        ];
        for attr in &bad {
            expect_err(
                s.ia.ep_create(&s.pz, Some(&s.recv_evd), Some(&s.req_evd), None, Some(attr)),
                ErrorType::InvalidParameter,
            );
            expect_err(s.ep.modify(attr), ErrorType::InvalidParameter);
        }
        assert_eq!(s.ep.query().unwrap().attr, EpAttr::default());
        // A post asking for UNSIGNALLED on an EP without it is refused too.
        let l = s.lmr(8);
        expect_err(
            s.ep.post_recv(&[l.triplet(0, 8)], 1, CompletionFlags::UNSIGNALLED),
            ErrorType::InvalidParameter,
        );
        s.close();
    }
);

once!(ia_open_unknown_name_is_provider_not_found, |_link| {
    for name in ["no-such-ia", "", "LOOPBACK", "tcp:nowhere"] {
        let e = expect_err(
            InterfaceAdapter::open(name, 8).map(|_| ()),
            ErrorType::ProviderNotFound,
        );
        assert!(e.to_string().contains("DAT_PROVIDER_NOT_FOUND"), "{e}");
    }
});

once!(
    ia_open_on_an_address_this_host_does_not_have_is_invalid_address,
    |_link| {
        // 192.0.2.0/24 is TEST-NET-1: never an address of this host.
        let e = expect_err(
            InterfaceAdapter::open("tcp:192.0.2.77", 8).map(|_| ()),
            ErrorType::InvalidAddress,
        );
        assert!(
            e.to_string()
                .contains("192.0.2.77 is not an address of this host"),
            "{e}"
        );
    }
);

per_link!(ia_attributes_reflect_enforced_limits, |link| {
    let p = Pair::new(link);
    let attr = p.a.ia.query().unwrap();
    // iov segments per DTO.
    let n = attr.max_iov_segments_per_dto;
    assert!(n >= 4);
    let la = p.a.lmr(8 * (n + 1));
    let lb = p.b.lmr(8 * (n + 1));
    let segs: Vec<LmrTriplet> = (0..n as u64 + 1).map(|i| la.triplet(8 * i, 8)).collect();
    let remote = lb.rmr_triplet(0, 8 * (n as u64 + 1));
    expect_err(
        p.a.ep
            .post_rdma_write(&segs, 1, &remote, CompletionFlags::empty()),
        ErrorType::InvalidParameter,
    );
    expect_err(
        p.a.ep
            .post_rdma_read(&segs, 1, &remote, CompletionFlags::empty()),
        ErrorType::InvalidParameter,
    );
    expect_err(
        p.b.ep.post_recv(&segs[..], 1, CompletionFlags::empty()),
        ErrorType::InvalidParameter,
    );
    p.a.ep
        .post_rdma_write(&segs[..n], 2, &remote, CompletionFlags::empty())
        .unwrap();
    let c = p.a.req_done();
    assert_eq!((c.cookie.0, c.status), (2, DtoStatus::Success));
    assert_eq!(c.transferred_length, 8 * n as u64);
    // EP attributes above the IA's limits.
    for bad in [
        EpAttr {
            max_request_iov: n + 1,
            ..Default::default()
        },
        EpAttr {
            max_recv_iov: n + 1,
            ..Default::default()
        },
        EpAttr {
            max_request_dtos: attr.max_dto_per_ep + 1,
            ..Default::default()
        },
        EpAttr {
            max_recv_dtos: attr.max_dto_per_ep + 1,
            ..Default::default()
        },
        EpAttr {
            max_rdma_read_out: attr.max_rdma_read_per_ep + 1,
            ..Default::default()
        },
        EpAttr {
            max_rdma_read_in: attr.max_rdma_read_per_ep + 1,
            ..Default::default()
        },
    ] {
        expect_err(
            p.a.ia.ep_create(&p.a.pz, None, None, None, Some(&bad)),
            ErrorType::InvalidParameter,
        );
    }
    // EVD queue length.
    expect_err(
        p.a.ia
            .evd_create(attr.max_evd_qlen + 1, None, EvdFlags::DTO),
        ErrorType::InvalidParameter,
    );
    expect_err(
        p.a.ia.evd_create(0, None, EvdFlags::DTO),
        ErrorType::InvalidParameter,
    );
    // Private data.
    let big = vec![0u8; attr.max_private_data_size + 1];
    let s = Side::new(link, None);
    expect_err(
        s.ep.connect(attr.ia_address.ip(), p.psp.conn_qual(), T, &big),
        ErrorType::InvalidParameter,
    );
    // LMR size.
    expect_err(
        p.a.pz.lmr_allocate(
            (attr.max_lmr_block_size + 1).min(usize::MAX as u64) as usize,
            MemPriv::ALL,
        ),
        ErrorType::LengthError,
    );
    s.close();
    p.close();
});

// ------------------------------------------------------------------------------------------------
// Error text

per_link!(error_display_names_operation_object_and_dat_codes, |link| {
    let p = Pair::new(link);
    let la = p.a.lmr(64);
    let lb = p.b.lmr(64);
    let e = expect_err(
        p.a.ep.post_rdma_read(
            &[la.triplet(0, 8)],
            1,
            &lb.rmr_triplet(0, 16),
            CompletionFlags::empty(),
        ),
        ErrorType::LengthError,
    );
    let text = e.to_string();
    let on = format!("ep_post_rdma_read on ep {}", p.a.ep.id());
    assert!(text.contains(&on), "{text}");
    assert!(text.contains("DAT_LENGTH_ERROR"), "{text}");
    assert_eq!(e.op(), "ep_post_rdma_read");
    assert_eq!(e.object().kind, "ep");
    assert_eq!(e.object().id, p.a.ep.id());
    assert_eq!(
        e.dat_return(),
        0x8000_0000 | ErrorType::LengthError as u32 | e.subtype() as u32
    );
    // A privileges violation names the subtype too.
    let ro = p.a.pz.lmr_allocate(64, MemPriv::LOCAL_READ).unwrap();
    let e = expect_err(
        p.a.ep.post_rdma_read(
            &[ro.triplet(0, 8)],
            1,
            &lb.rmr_triplet(0, 8),
            CompletionFlags::empty(),
        ),
        ErrorType::PrivilegesViolation,
    );
    let text = e.to_string();
    assert!(text.contains("ep_post_rdma_read on ep"), "{text}");
    assert!(text.contains("DAT_PRIVILEGES_VIOLATION"), "{text}");
    assert!(text.contains("DAT_PRIVILEGES_WRITE"), "{text}");
    // Debug shows the same text.
    assert!(format!("{e:?}").contains("DAT_PRIVILEGES_VIOLATION"));
    let e = expect_err(p.a.ep.reset(), ErrorType::InvalidState);
    assert!(e.to_string().contains("ep_reset on ep"), "{e}");
    assert!(e.to_string().contains("DAT_INVALID_STATE"), "{e}");
    p.close();
});

per_link!(
    dto_racing_disconnect_completes_once_and_not_on_next_connection,
    |link| {
        // A send (the peer has no buffer) or an RDMA write posted while the peer disconnects
        // completes exactly once -- flushed, or (write) successful -- and is never carried over to
        // the next connection of the same endpoints (after reset and reconnect).
        let p = Pair::new(link);
        let Pair { a, b, cr_evd, psp } = p;
        let la = a.lmr(4096);
        let lb = filled(&b.pz, 4096, MemPriv::ALL, 0);
        let addr = b.ia.query().unwrap().ia_address;
        for i in 0..1000u64 {
            let write = i % 2 == 1;
            let barrier = Barrier::new(2);
            std::thread::scope(|s| {
                s.spawn(|| {
                    barrier.wait();
                    if write {
                        a.ep.post_rdma_write(
                            &[la.triplet(0, 4096)],
                            i,
                            &lb.rmr_triplet(0, 4096),
                            CompletionFlags::empty(),
                        )
                    } else {
                        a.ep.post_send(&[la.triplet(0, 8)], i, CompletionFlags::empty())
                    }
                    .unwrap();
                });
                s.spawn(|| {
                    barrier.wait();
                    b.ep.disconnect(CloseFlags::Abrupt).unwrap();
                });
            });
            let c = a.req_done();
            assert_eq!(c.cookie, i, "iteration {i}");
            if write {
                assert!(
                    matches!(c.status, DtoStatus::Success | DtoStatus::Flushed),
                    "iteration {i}: a write racing a disconnect completed with {:?}",
                    c.status
                );
            } else if completes_at_peer(link) {
                assert_eq!(c.status, DtoStatus::Flushed, "iteration {i}");
            } else {
                assert!(
                    matches!(c.status, DtoStatus::Success | DtoStatus::Flushed),
                    "iteration {i}: a send racing a disconnect completed with {:?}",
                    c.status
                );
            }
            a.expect_conn(ConnectionEventKind::Disconnected);
            b.expect_conn(ConnectionEventKind::Disconnected);
            assert_eq!(
                a.ep.get_status().unwrap(),
                (EpState::Disconnected, false, false)
            );
            a.ep.reset().unwrap();
            b.ep.reset().unwrap();
            a.ep.connect(addr.ip(), psp.conn_qual(), T, b"").unwrap();
            let arr = match cr_evd.wait(T, 1) {
                Ok(Some((ev, _))) => ev.as_cr_arrival().unwrap().clone(),
                r => panic!(
                    "iteration {i}: no CR ({r:?}); a: {:?} {:?}",
                    a.ep.state(),
                    a.conn_evd.dequeue()
                ),
            };
            arr.cr.accept(Some(&b.ep), b"").unwrap();
            a.expect_conn(ConnectionEventKind::Established);
            b.expect_conn(ConnectionEventKind::Established);
            if let Some(ev) = a.req_evd.dequeue().unwrap() {
                panic!("iteration {i}: a stale completion {ev:?}");
            }
            if let Some(ev) = b.recv_evd.dequeue().unwrap() {
                panic!("iteration {i}: the peer received {ev:?}");
            }
        }
        a.close();
        b.close();
    }
);

per_link!(rdma_posted_on_established_finds_peer_connected, |link| {
    // A DTO posted the moment ESTABLISHED arrives (on either side) must not find the other side
    // still pending: the connection is up on both ends before either hears ESTABLISHED.
    let a = Side::new(link, None);
    let b = Side::new(link, None);
    let (_psp, cr_evd, q, addr) = b.listen();
    let la = a.lmr(64);
    let lb = b.lmr(64);
    for i in 0..500u64 {
        a.ep.connect(addr.ip(), q, T, b"").unwrap();
        let cr = expect_cr(&cr_evd).cr;
        std::thread::scope(|s| {
            s.spawn(|| {
                cr.accept(Some(&b.ep), b"").unwrap();
                // The passive side writes as soon as it hears ESTABLISHED.
                b.expect_conn(ConnectionEventKind::Established);
                b.ep.post_rdma_write(
                    &[lb.triplet(0, 8)],
                    i,
                    &la.rmr_triplet(8, 8),
                    CompletionFlags::empty(),
                )
                .unwrap();
            });
            a.expect_conn(ConnectionEventKind::Established);
            if i % 2 == 0 {
                a.ep.post_rdma_write(
                    &[la.triplet(0, 8)],
                    i,
                    &lb.rmr_triplet(8, 8),
                    CompletionFlags::empty(),
                )
            } else {
                a.ep.post_rdma_read(
                    &[la.triplet(16, 8)],
                    i,
                    &lb.rmr_triplet(0, 8),
                    CompletionFlags::empty(),
                )
            }
            .unwrap();
        });
        let ca = a.req_done();
        let cb = b.req_done();
        assert_eq!(
            (ca.cookie.0, ca.status),
            (i, DtoStatus::Success),
            "iteration {i}"
        );
        assert_eq!(
            (cb.cookie.0, cb.status),
            (i, DtoStatus::Success),
            "iteration {i}"
        );
        assert_eq!(a.ep.state(), EpState::Connected, "iteration {i}");
        assert_eq!(b.ep.state(), EpState::Connected, "iteration {i}");
        a.ep.disconnect(CloseFlags::Abrupt).unwrap();
        a.expect_conn(ConnectionEventKind::Disconnected);
        b.expect_conn(ConnectionEventKind::Disconnected);
        a.ep.reset().unwrap();
        b.ep.reset().unwrap();
    }
    a.close();
    b.close();
});

per_link!(
    a_write_completes_before_the_peers_answer_to_it_in_one_evd,
    |link| {
        // One EVD takes a's requests and receives (as dtestx's does). b's link refuses a's
        // RDMA Write (a bad STag) and ends the connection at once: the Write's completion
        // must come before the receive that end flushes, on every link (the peer's answer
        // never overtakes the completion of what it answers).
        for round in 0..200u64 {
            let a = Side::new(link, None);
            let b = Side::new(link, None);
            let dto = a.ia.evd_create(16, None, EvdFlags::DTO).unwrap();
            let ep =
                a.ia.endpoint(&a.pz)
                    .dto_evd(&dto)
                    .connect_evd(&a.conn_evd)
                    .build()
                    .unwrap();
            let (la, lb) = (a.lmr(64), b.lmr(64));
            ep.post_recv(&[la.triplet(0, 8)], 1, CompletionFlags::empty())
                .unwrap();
            let (_psp, _cr) = connect(
                End {
                    ep: &ep,
                    conn_evd: &a.conn_evd,
                },
                &b.ia,
                b.end(),
                b"",
                b"",
            );
            let good = lb.rmr_triplet(0, 8);
            let bad = RmrTriplet::new(good.rmr_context.0 ^ 0x5a00, good.virtual_address, 8);
            ep.post_rdma_write(&[la.triplet(8, 8)], 3, &bad, CompletionFlags::empty())
                .unwrap();
            let first = Side::dto(&dto);
            assert_eq!(
                first.cookie.0, 3,
                "round {round}: the Write's completion first"
            );
            assert_remote_refused(link, Op::Write, first.status);
            let second = Side::dto(&dto);
            assert_eq!(
                (second.cookie.0, second.status),
                (1, DtoStatus::Flushed),
                "round {round}"
            );
            drop(ep);
            a.close();
            b.close();
        }
    }
);

per_link!(
    a_large_send_completes_before_the_peers_reply_to_it_in_one_evd,
    |link| {
        // One EVD takes a's requests and receives. b replies to a's 256 KiB Send as soon as
        // it has received it: a's Send completion must come before the reply's receive, on
        // every link, however the link moves large messages (the shm link lets the peer copy
        // them out of the sender's memory, and the Send completes once it has).
        const LEN: usize = 256 << 10;
        const L: u64 = LEN as u64;
        let a = Side::new(link, None);
        let b = Side::new(link, None);
        let dto = a.ia.evd_create(16, None, EvdFlags::DTO).unwrap();
        let ep =
            a.ia.endpoint(&a.pz)
                .dto_evd(&dto)
                .connect_evd(&a.conn_evd)
                .build()
                .unwrap();
        let (la, lb) = (a.lmr(LEN + 64), b.lmr(LEN + 64));
        let (_psp, _cr) = connect(
            End {
                ep: &ep,
                conn_evd: &a.conn_evd,
            },
            &b.ia,
            b.end(),
            b"",
            b"",
        );
        for round in 0..100u64 {
            la.write(0, &[round as u8; LEN]).unwrap();
            ep.post_recv(&[la.triplet(L, 8)], 1, CompletionFlags::empty())
                .unwrap();
            b.ep.post_recv(&[lb.triplet(0, L)], 2, CompletionFlags::empty())
                .unwrap();
            ep.post_send(&[la.triplet(0, L)], 3, CompletionFlags::empty())
                .unwrap();
            let got = b.recv_done();
            assert_eq!(
                (got.status, got.transferred_length),
                (DtoStatus::Success, L)
            );
            b.ep.post_send(&[lb.triplet(L, 8)], 4, CompletionFlags::empty())
                .unwrap();
            let first = Side::dto(&dto);
            assert_eq!(
                (first.cookie.0, first.status),
                (3, DtoStatus::Success),
                "round {round}: the Send's completion first"
            );
            let second = Side::dto(&dto);
            assert_eq!((second.cookie.0, second.status), (1, DtoStatus::Success));
            assert_eq!(b.req_done().status, DtoStatus::Success);
            let mut back = vec![0u8; LEN];
            lb.read(0, &mut back).unwrap();
            assert!(
                back.iter().all(|&x| x == round as u8),
                "round {round}: data"
            );
        }
        drop(ep);
        a.close();
        b.close();
    }
);
