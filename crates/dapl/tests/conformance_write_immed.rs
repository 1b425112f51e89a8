//! Conformance tests for RDMA Write with Immediate Data (`Endpoint::post_rdma_write_immed`, the
//! DAT IB extension's `dat_ib_post_rdma_write_immed`), one test per rule, named after it, each
//! instantiated per link with `per_link!`.
//!
//! The rules (DAT IB extension, as the C layer maps it): the data is placed at the remote buffer
//! like an RDMA write; then the peer's next posted receive (its endpoint's queue, or its SRQ) is
//! consumed and completes as RECV_IMMED with the immediate value and `transferred_length` = the
//! write's length, its buffer untouched (a zero-length receive will do); that completion implies
//! the data is placed. The initiator completes as RDMA_WRITE_IMMED with the bytes written. With no
//! receive posted it behaves as a Send does. Posting checks and completion flags are a write's
//! (plus SOLICITED_WAIT, which marks the peer's receive completion solicited, as for a Send).
//! Over tcp it is an RDMA Write followed by an RFC 7306 Immediate Data message (RDMAP opcode 8).

use std::time::Duration;

use dapl::*;
use dapl_testkit::kit::*;

/// Timeout for things that must not happen.
const SHORT: Option<Duration> = Some(Duration::from_millis(50));
/// Byte the buffers are filled with before a test, to see what was written.
const SENTINEL: u8 = 0xAA;

// ------------------------------------------------------------------------------------------------
// Helpers

/// The DAT error kind of a result that must be an error.
fn kind<T: std::fmt::Debug>(r: dapl::Result<T>) -> ErrorType {
    r.expect_err("the operation must fail").kind()
}

/// The EVD holds no event at all.
#[track_caller]
fn assert_empty(evd: &Evd) {
    let ev = evd.dequeue().unwrap();
    assert!(ev.is_none(), "expected an empty EVD, got {ev:?}");
}

/// `wait` must not return within `SHORT`.
#[track_caller]
fn assert_wait_times_out(evd: &Evd) {
    assert!(matches!(evd.wait(SHORT, 1), Ok(None)), "expected a timeout");
}

/// Dequeues a DTO completion that must already be queued (no waiting).
#[track_caller]
fn dequeue_dto(evd: &Evd) -> DtoCompletion {
    evd.dequeue()
        .unwrap()
        .expect("a queued event")
        .as_dto()
        .expect("a DTO completion")
        .clone()
}

/// An LMR of `len` bytes with every privilege, filled with `SENTINEL`.
fn sentinel_lmr(pz: &Pz, len: usize) -> Lmr {
    let l = pz.lmr_allocate(len, MemPriv::ALL).unwrap();
    l.fill(0, len, SENTINEL).unwrap();
    l
}

/// Writes `data` at `off` in `src` and posts it as a write with immediate data to `dst`.
#[allow(clippy::too_many_arguments)]
fn write_immed(
    side: &Side,
    src: &Lmr,
    off: usize,
    data: &[u8],
    dst: &RmrTriplet,
    immediate: u32,
    cookie: u64,
    flags: CompletionFlags,
) {
    src.write(off, data).unwrap();
    side.ep
        .post_rdma_write_immed(
            &[src.triplet(off as u64, data.len() as u64)],
            cookie,
            dst,
            immediate,
            flags,
        )
        .unwrap();
}

/// A completion of the initiator's write with immediate data.
#[track_caller]
fn assert_write_immed_done(c: &DtoCompletion, cookie: u64, status: DtoStatus, len: u64) {
    assert_eq!(
        (c.cookie.0, c.status, c.operation, c.immediate),
        (cookie, status, DtoOp::RdmaWriteImmed, None)
    );
    if status == DtoStatus::Success {
        assert_eq!(c.transferred_length, len);
    }
}

/// A receive completed by a peer's write with immediate data.
#[track_caller]
fn assert_recv_immed(c: &DtoCompletion, cookie: u64, immediate: u32, len: u64) {
    assert_eq!(
        (
            c.cookie.0,
            c.status,
            c.operation,
            c.immediate,
            c.transferred_length
        ),
        (
            cookie,
            DtoStatus::Success,
            DtoOp::RecvImmed,
            Some(immediate),
            len
        )
    );
}

/// A passive IA whose endpoints all take receives from one SRQ, each with its own recv EVD and
/// connected to its own active peer (a plain `Side`).
struct SrqSide {
    ia: InterfaceAdapter,
    _async_evd: Evd,
    pz: Pz,
    srq: Srq,
    recv_evds: Vec<Evd>,
    eps: Vec<Endpoint>,
    peers: Vec<Side>,
    _keep: Vec<(ServicePoint, Evd)>,
}

impl SrqSide {
    fn new(link: &str, n_eps: usize) -> SrqSide {
        let (ia, async_evd) = InterfaceAdapter::open(link, 64).unwrap();
        let pz = ia.pz_create().unwrap();
        let srq = ia.srq_create(&pz, &SrqAttr::default()).unwrap();
        let req_evd = ia.evd_create(64, None, EvdFlags::DTO).unwrap();
        let conn_evd = ia.evd_create(32, None, EvdFlags::CONNECTION).unwrap();
        let mut recv_evds = Vec::new();
        let mut eps = Vec::new();
        for _ in 0..n_eps {
            let r = ia.evd_create(64, None, EvdFlags::DTO).unwrap();
            let ep = ia
                .ep_create_with_srq(&pz, Some(&r), Some(&req_evd), Some(&conn_evd), &srq, None)
                .unwrap();
            recv_evds.push(r);
            eps.push(ep);
        }
        let mut peers = Vec::new();
        let mut keep = Vec::new();
        for ep in &eps {
            let peer = Side::new(link, None);
            let passive = End {
                ep,
                conn_evd: &conn_evd,
            };
            keep.push(connect(peer.end(), &ia, passive, b"", b""));
            peers.push(peer);
        }
        SrqSide {
            ia,
            _async_evd: async_evd,
            pz,
            srq,
            recv_evds,
            eps,
            peers,
            _keep: keep,
        }
    }

    fn close(self) {
        for p in self.peers {
            p.close();
        }
        self.ia.close(CloseFlags::Abrupt).unwrap();
    }
}

// ------------------------------------------------------------------------------------------------
// Data placement and the two completions

// The receive completion implies the write's data is placed: no waiting for placement after it.
// The receive buffer gets no data; a zero-length receive will do; a write longer than the
// receive buffer is fine (its length is reported, nothing is placed there).
per_link!(
    write_immed_places_data_before_the_receive_completes_with_the_immediate,
    |link| {
        let p = Pair::new(link);
        let la = p.a.lmr(1 << 20);
        let lb = sentinel_lmr(&p.b.pz, 1 << 20);
        let lb_recv = sentinel_lmr(&p.b.pz, 64);
        p.b.ep.post_recv(&[], 1, CompletionFlags::empty()).unwrap();
        p.b.ep
            .post_recv(&[lb_recv.triplet(0, 8)], 2, CompletionFlags::empty())
            .unwrap();

        write_immed(
            &p.a,
            &la,
            0,
            b"hello, immediate",
            &lb.rmr_triplet(100, 64),
            0xDEAD_BEEF,
            10,
            CompletionFlags::empty(),
        );
        let r = p.b.recv_done();
        assert_recv_immed(&r, 1, 0xDEAD_BEEF, 16);
        assert_eq!(r.ep, p.b.ep);
        // Placed already: read at once, no polling.
        assert_eq!(lb.to_vec(100, 16).unwrap(), b"hello, immediate");
        assert_eq!(lb.to_vec(116, 1).unwrap(), [SENTINEL]);
        assert_write_immed_done(&p.a.req_done(), 10, DtoStatus::Success, 16);

        // A large write (many DDP segments over tcp) into a receive of 8 bytes.
        let big: Vec<u8> = (0..(1u32 << 20)).map(|i| (i * 7 + 3) as u8).collect();
        write_immed(
            &p.a,
            &la,
            0,
            &big,
            &lb.rmr_triplet(0, 1 << 20),
            7,
            11,
            CompletionFlags::empty(),
        );
        let r = p.b.recv_done();
        assert_recv_immed(&r, 2, 7, 1 << 20);
        assert!(lb.to_vec(0, 1 << 20).unwrap() == big, "the write is placed");
        assert_eq!(lb_recv.to_vec(0, 64).unwrap(), vec![SENTINEL; 64]);
        assert_write_immed_done(&p.a.req_done(), 11, DtoStatus::Success, 1 << 20);
        assert_empty(&p.a.req_evd);
        assert_empty(&p.b.recv_evd);
        p.close();
    }
);

// A write with immediate data uses up a receive as a Send does: interleaved with Sends, the
// receives complete in posting order with the kind of the message that took each.
per_link!(write_immed_and_sends_take_receives_in_order, |link| {
    let p = Pair::new(link);
    let la = p.a.lmr(4096);
    let lb = sentinel_lmr(&p.b.pz, 4096);
    let lb_recv = sentinel_lmr(&p.b.pz, 4096);
    for c in 0..4u64 {
        p.b.ep
            .post_recv(
                &[lb_recv.triplet(c * 64, 64)],
                100 + c,
                CompletionFlags::empty(),
            )
            .unwrap();
    }
    la.write(0, b"send-0").unwrap();
    p.a.ep
        .post_send(&[la.triplet(0, 6)], 1, CompletionFlags::empty())
        .unwrap();
    write_immed(
        &p.a,
        &la,
        64,
        b"w1",
        &lb.rmr_triplet(0, 2),
        0x11,
        2,
        CompletionFlags::empty(),
    );
    write_immed(
        &p.a,
        &la,
        128,
        &[],
        &lb.rmr_triplet(0, 0),
        0x22,
        3,
        CompletionFlags::empty(),
    );
    la.write(192, b"send-3").unwrap();
    p.a.ep
        .post_send(&[la.triplet(192, 6)], 4, CompletionFlags::empty())
        .unwrap();

    let r = p.b.recv_done();
    assert_eq!(
        (r.cookie.0, r.operation, r.transferred_length, r.immediate),
        (100, DtoOp::Receive, 6, None)
    );
    assert_recv_immed(&p.b.recv_done(), 101, 0x11, 2);
    assert_recv_immed(&p.b.recv_done(), 102, 0x22, 0);
    let r = p.b.recv_done();
    assert_eq!(
        (r.cookie.0, r.operation, r.transferred_length, r.immediate),
        (103, DtoOp::Receive, 6, None)
    );
    assert_eq!(lb_recv.to_vec(0, 6).unwrap(), b"send-0");
    assert_eq!(lb_recv.to_vec(64, 128).unwrap(), vec![SENTINEL; 128]);
    assert_eq!(lb_recv.to_vec(192, 6).unwrap(), b"send-3");
    assert_eq!(lb.to_vec(0, 3).unwrap(), b"w1\xAA");
    let ops: Vec<(u64, DtoOp)> = (0..4)
        .map(|_| {
            let c = p.a.req_done();
            assert_eq!(c.status, DtoStatus::Success);
            (c.cookie.0, c.operation)
        })
        .collect();
    assert_eq!(
        ops,
        [
            (1, DtoOp::Send),
            (2, DtoOp::RdmaWriteImmed),
            (3, DtoOp::RdmaWriteImmed),
            (4, DtoOp::Send)
        ]
    );
    p.close();
});

// ------------------------------------------------------------------------------------------------
// No receive posted

// Contract: an incoming message before a receive is posted must wait, not fail. As for a Send: on
// loopback the initiator's completion waits too (nothing is placed yet); over tcp it completes
// when TCP takes it and the receiver holds the Immediate Data (briefly) until a buffer is posted.
per_link!(
    write_immed_without_posted_receive_waits_like_a_send,
    |link| {
        let p = Pair::new(link);
        let la = p.a.lmr(64);
        let lb = sentinel_lmr(&p.b.pz, 64);
        write_immed(
            &p.a,
            &la,
            0,
            b"patience",
            &lb.rmr_triplet(8, 8),
            42,
            1,
            CompletionFlags::empty(),
        );
        if completes_at_peer(link) {
            assert_wait_times_out(&p.a.req_evd);
        } else {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_empty(&p.b.recv_evd);
        assert_eq!(p.a.ep.state(), EpState::Connected);
        assert_eq!(p.b.ep.state(), EpState::Connected);
        p.b.ep.post_recv(&[], 2, CompletionFlags::empty()).unwrap();
        assert_recv_immed(&p.b.recv_done(), 2, 42, 8);
        assert_eq!(lb.to_vec(8, 8).unwrap(), b"patience");
        assert_write_immed_done(&p.a.req_done(), 1, DtoStatus::Success, 8);
        p.close();
    }
);

// Over tcp a peer that posts no receive within the RNR grace (500 ms) ends the connection with a
// Terminate ("no buffer"), exactly as for a Send: both sides see BROKEN and nothing completes as
// RECV_IMMED. (On loopback a Send, and so a write with immediate data, waits without limit.)
per_link_with!(
    !rnr_waits_forever,
    write_immed_without_receive_past_the_rnr_grace_breaks_like_a_send,
    |link| {
        let p = Pair::new(link);
        let la = p.a.lmr(64);
        let lb = sentinel_lmr(&p.b.pz, 64);
        write_immed(
            &p.a,
            &la,
            0,
            b"too late",
            &lb.rmr_triplet(0, 8),
            1,
            1,
            CompletionFlags::empty(),
        );
        assert_write_immed_done(&p.a.req_done(), 1, DtoStatus::Success, 8);
        p.a.expect_conn(ConnectionEventKind::Broken);
        p.b.expect_conn(ConnectionEventKind::Broken);
        assert_eq!(p.a.ep.state(), EpState::Disconnected);
        assert_eq!(p.b.ep.state(), EpState::Disconnected);
        // A receive posted now is flushed, not completed with the immediate data.
        p.b.ep.post_recv(&[], 2, CompletionFlags::empty()).unwrap();
        let r = dequeue_dto(&p.b.recv_evd);
        assert_eq!(
            (r.cookie.0, r.status, r.operation, r.immediate),
            (2, DtoStatus::Flushed, DtoOp::Receive, None)
        );
        p.close();
    }
);

// ------------------------------------------------------------------------------------------------
// Completion flags

// SUPPRESS drops the initiator's successful completion but the request slot is freed all the
// same: more writes than the request queue holds go through one after another.
per_link!(
    write_immed_suppressed_completion_still_frees_the_send_slot,
    |link| {
        let attr = EpAttr {
            max_request_dtos: 2,
            ..EpAttr::default()
        };
        let p = Pair::with_attrs(link, Some(&attr), None);
        let la = p.a.lmr(4096);
        let lb = sentinel_lmr(&p.b.pz, 4096);
        for i in 0..8u64 {
            p.b.ep.post_recv(&[], i, CompletionFlags::empty()).unwrap();
            write_immed(
                &p.a,
                &la,
                (i * 8) as usize,
                &[i as u8; 8],
                &lb.rmr_triplet(i * 8, 8),
                i as u32,
                i,
                CompletionFlags::SUPPRESS,
            );
            assert_recv_immed(&p.b.recv_done(), i, i as u32, 8);
        }
        assert_empty(&p.a.req_evd);
        for i in 0..8u8 {
            assert_eq!(lb.to_vec(i as usize * 8, 8).unwrap(), [i; 8]);
        }
        // Still room for two at once.
        for c in [100, 101] {
            p.b.ep.post_recv(&[], c, CompletionFlags::empty()).unwrap();
            write_immed(
                &p.a,
                &la,
                0,
                b"x",
                &lb.rmr_triplet(0, 1),
                0,
                c,
                CompletionFlags::empty(),
            );
        }
        for c in [100, 101] {
            assert_write_immed_done(&p.a.req_done(), c, DtoStatus::Success, 1);
        }
        p.close();
    }
);

// A receive endpoint created with SOLICITED_WAIT is woken only by a write with immediate data
// posted with SOLICITED_WAIT (RFC 7306 opcode 9 over tcp); an unsolicited one still completes,
// unsignalled.
per_link!(
    write_immed_solicited_wait_wakes_a_solicited_wait_ep,
    |link| {
        let b_attr = EpAttr {
            recv_completion_flags: CompletionFlags::SOLICITED_WAIT,
            ..EpAttr::default()
        };
        let p = Pair::with_attrs(link, None, Some(&b_attr));
        let la = p.a.lmr(64);
        let lb = sentinel_lmr(&p.b.pz, 64);
        p.b.ep.post_recv(&[], 1, CompletionFlags::empty()).unwrap();
        p.b.ep.post_recv(&[], 2, CompletionFlags::empty()).unwrap();
        write_immed(
            &p.a,
            &la,
            0,
            b"quiet",
            &lb.rmr_triplet(0, 5),
            5,
            1,
            CompletionFlags::empty(),
        );
        assert_write_immed_done(&p.a.req_done(), 1, DtoStatus::Success, 5);
        assert_wait_times_out(&p.b.recv_evd);
        eventually("the unsolicited receive completes", || {
            p.b.recv_evd.query().unwrap().count > 0
        });
        assert_recv_immed(&dequeue_dto(&p.b.recv_evd), 1, 5, 5);
        write_immed(
            &p.a,
            &la,
            0,
            b"wake!",
            &lb.rmr_triplet(0, 5),
            6,
            2,
            CompletionFlags::SOLICITED_WAIT,
        );
        let (ev, _) =
            p.b.recv_evd
                .wait(T, 1)
                .unwrap()
                .expect("a solicited completion wakes");
        assert_recv_immed(ev.as_dto().unwrap(), 2, 6, 5);
        assert_eq!(lb.to_vec(0, 5).unwrap(), b"wake!");
        p.close();
    }
);

// ------------------------------------------------------------------------------------------------
// SRQ

// dat_srq_post_recv: a buffer is used by whichever endpoint the message arrives on, and completes
// on that endpoint's recv EVD; a write with immediate data takes one like a Send.
per_link!(
    write_immed_to_an_srq_endpoint_completes_on_the_arrival_eps_recv_evd,
    |link| {
        let s = SrqSide::new(link, 2);
        let l = sentinel_lmr(&s.pz, 4096);
        s.srq.post_recv(&[l.triplet(0, 64)], 1).unwrap();
        s.srq.post_recv(&[], 2).unwrap();
        let lp1 = s.peers[1].lmr(64);
        write_immed(
            &s.peers[1],
            &lp1,
            0,
            b"via ep one",
            &l.rmr_triplet(1000, 10),
            0x0001_0001,
            10,
            CompletionFlags::empty(),
        );
        let r = Side::dto(&s.recv_evds[1]);
        assert_recv_immed(&r, 1, 0x0001_0001, 10);
        assert_eq!(r.ep, s.eps[1]);
        assert_eq!(l.to_vec(1000, 10).unwrap(), b"via ep one");
        assert_eq!(l.to_vec(0, 64).unwrap(), vec![SENTINEL; 64]);
        assert_empty(&s.recv_evds[0]);

        let lp0 = s.peers[0].lmr(64);
        write_immed(
            &s.peers[0],
            &lp0,
            0,
            b"via ep zero",
            &l.rmr_triplet(2000, 11),
            0x0002_0002,
            11,
            CompletionFlags::empty(),
        );
        let r = Side::dto(&s.recv_evds[0]);
        assert_recv_immed(&r, 2, 0x0002_0002, 11);
        assert_eq!(r.ep, s.eps[0]);
        assert_eq!(l.to_vec(2000, 11).unwrap(), b"via ep zero");
        assert_empty(&s.recv_evds[1]);
        assert_eq!(s.srq.query().unwrap().available_dto_count, 0);
        for (i, peer) in s.peers.iter().enumerate() {
            assert_write_immed_done(
                &peer.req_done(),
                11 - i as u64,
                DtoStatus::Success,
                11 - i as u64,
            );
        }
        s.close();
    }
);

// ------------------------------------------------------------------------------------------------
// Posting checks: those of post_rdma_write

per_link!(write_immed_posting_checks_are_those_of_a_write, |link| {
    let p = Pair::new(link);
    let la = p.a.lmr(4096);
    let lb = p.b.lmr(4096);
    let ep = &p.a.ep;
    // More bytes than the remote buffer holds.
    assert_eq!(
        kind(ep.post_rdma_write_immed(
            &[la.triplet(0, 16)],
            1,
            &lb.rmr_triplet(0, 8),
            0,
            CompletionFlags::empty()
        )),
        ErrorType::LengthError
    );
    // A segment outside its LMR.
    assert_eq!(
        kind(ep.post_rdma_write_immed(
            &[la.triplet(4090, 16)],
            1,
            &lb.rmr_triplet(0, 16),
            0,
            CompletionFlags::empty()
        )),
        ErrorType::InvalidParameter
    );
    // UNSIGNALLED needs an endpoint created with it.
    assert_eq!(
        kind(ep.post_rdma_write_immed(
            &[la.triplet(0, 8)],
            1,
            &lb.rmr_triplet(0, 8),
            0,
            CompletionFlags::UNSIGNALLED
        )),
        ErrorType::InvalidParameter
    );
    // An LMR of another PZ.
    let other = p.a.ia.pz_create().unwrap();
    let lo = other.lmr_allocate(64, MemPriv::ALL).unwrap();
    assert_eq!(
        kind(ep.post_rdma_write_immed(
            &[lo.triplet(0, 8)],
            1,
            &lb.rmr_triplet(0, 8),
            0,
            CompletionFlags::empty()
        )),
        ErrorType::ProtectionViolation
    );
    assert_empty(&p.a.req_evd);
    lo.free().unwrap();
    other.free().unwrap();
    // On a DISCONNECTED endpoint: flushed at once.
    ep.disconnect(CloseFlags::Abrupt).unwrap();
    p.a.expect_conn(ConnectionEventKind::Disconnected);
    ep.post_rdma_write_immed(
        &[la.triplet(0, 8)],
        5,
        &lb.rmr_triplet(0, 8),
        9,
        CompletionFlags::SUPPRESS,
    )
    .unwrap();
    assert_write_immed_done(&dequeue_dto(&p.a.req_evd), 5, DtoStatus::Flushed, 0);
    p.close();

    // On an UNCONNECTED endpoint: invalid state.
    let s = Side::new(link, None);
    let l = s.lmr(64);
    assert_eq!(
        kind(s.ep.post_rdma_write_immed(
            &[l.triplet(0, 8)],
            1,
            &RmrTriplet::new(1, 0, 8),
            0,
            CompletionFlags::empty()
        )),
        ErrorType::InvalidState
    );
    s.close();
});

// A peer that refuses the write (no REMOTE_WRITE) breaks the connection as for a plain write: its
// posted receive is flushed, never completed as RECV_IMMED, and no byte changes. The initiator's
// completion is RemoteAccess on loopback, even with SUPPRESS; over tcp the write has completed
// when TCP took it (see `completes_at_peer`), before the peer's Terminate breaks the connection.
per_link!(
    write_immed_refused_by_the_peer_breaks_the_connection,
    |link| {
        let p = Pair::new(link);
        let la = p.a.lmr(64);
        let lb =
            p.b.pz
                .lmr_allocate(
                    64,
                    MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE | MemPriv::REMOTE_READ,
                )
                .unwrap();
        lb.fill(0, 64, SENTINEL).unwrap();
        p.b.ep.post_recv(&[], 1, CompletionFlags::empty()).unwrap();
        let flags = if completes_at_peer(link) {
            CompletionFlags::SUPPRESS
        } else {
            CompletionFlags::empty()
        };
        write_immed(&p.a, &la, 0, b"denied", &lb.rmr_triplet(0, 6), 3, 7, flags);
        let c = p.a.req_done();
        assert_eq!((c.cookie.0, c.operation), (7, DtoOp::RdmaWriteImmed));
        if completes_at_peer(link) {
            assert_eq!(c.status, DtoStatus::RemoteAccess);
        } else {
            assert!(
                matches!(c.status, DtoStatus::Success | DtoStatus::Flushed),
                "{:?}",
                c.status
            );
        }
        p.a.expect_conn(ConnectionEventKind::Broken);
        p.b.expect_conn(ConnectionEventKind::Broken);
        let r = p.b.recv_done();
        assert_eq!(
            (r.cookie.0, r.status, r.operation, r.immediate),
            (1, DtoStatus::Flushed, DtoOp::Receive, None)
        );
        assert_eq!(lb.to_vec(0, 64).unwrap(), vec![SENTINEL; 64]);
        p.close();
    }
);
