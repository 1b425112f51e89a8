//! Conformance tests for receives, sends' completions, SRQs, EVDs and CNOs, one test per rule
//! (named after it), each instantiated per link with `per_link!` (`per_link_with!` where the
//! rule needs a link capability); argument and state checks of objects that are never connected
//! (posting checks, SRQ, EVD and CNO rules) do not depend on the link and run once (`once!`).
//!
//! Sources of the rules: /work/shared/design.md ("Semantics that are easy to get wrong"), the
//! seeds dat_ep_post_recv, dat_srq_post_recv, rdma_post_recvv, and the provider contract.
//! "Must not happen" checks use a short timeout (`SHORT`).

use std::os::fd::BorrowedFd;
use std::thread;
use std::time::Duration;

use dapl::*;
use dapl_testkit::kit::*;

/// Timeout for things that must not happen.
const SHORT: Option<Duration> = Some(Duration::from_millis(50));
/// Byte the receive buffers are filled with before a test, to see what was written.
const SENTINEL: u8 = 0xAA;

// ------------------------------------------------------------------------------------------------
// Helpers

/// The DAT error kind of a result that must be an error.
fn kind<T: std::fmt::Debug>(r: dapl::Result<T>) -> ErrorType {
    r.expect_err("the operation must fail").kind()
}

/// The EVD holds no event at all.
fn assert_empty(evd: &Evd) {
    let ev = evd.dequeue().unwrap();
    assert!(ev.is_none(), "expected an empty EVD, got {ev:?}");
}

/// `wait` must not return within `SHORT`.
fn assert_wait_times_out(evd: &Evd) {
    assert!(matches!(evd.wait(SHORT, 1), Ok(None)), "expected a timeout");
}

/// Dequeues a DTO completion that must already be queued (no waiting).
fn dequeue_dto(evd: &Evd) -> DtoCompletion {
    evd.dequeue()
        .unwrap()
        .expect("a queued event")
        .as_dto()
        .expect("a DTO completion")
        .clone()
}

/// Dequeues an async event that must already be queued.
fn dequeue_async(evd: &Evd) -> AsyncEvent {
    evd.dequeue()
        .unwrap()
        .expect("a queued async event")
        .as_async()
        .expect("an async event")
        .clone()
}

/// An LMR of `len` bytes with every privilege, filled with `SENTINEL`.
fn sentinel_lmr(side: &Side, len: usize) -> Lmr {
    let l = side.lmr(len);
    l.fill(0, len, SENTINEL).unwrap();
    l
}

/// Writes `data` at `off` in `lmr` and posts it as one send.
fn send(side: &Side, lmr: &Lmr, off: usize, data: &[u8], cookie: u64, flags: CompletionFlags) {
    lmr.write(off, data).unwrap();
    side.ep
        .post_send(&[lmr.triplet(off as u64, data.len() as u64)], cookie, flags)
        .unwrap();
}

fn recv_flags_attr(f: CompletionFlags) -> EpAttr {
    EpAttr {
        recv_completion_flags: f,
        ..EpAttr::default()
    }
}

/// A pair whose connection was ended by `a`, both sides DISCONNECTED and reported.
fn disconnected_pair(link: &str) -> Pair {
    let p = Pair::new(link);
    p.a.ep.disconnect(CloseFlags::Abrupt).unwrap();
    p.a.expect_conn(ConnectionEventKind::Disconnected);
    p.b.expect_conn(ConnectionEventKind::Disconnected);
    assert_eq!(p.a.ep.state(), EpState::Disconnected);
    assert_eq!(p.b.ep.state(), EpState::Disconnected);
    p
}

/// A passive IA whose endpoints all take receives from one SRQ, each connected to its own
/// active peer (a plain `Side`).
struct SrqSide {
    ia: InterfaceAdapter,
    async_evd: Evd,
    pz: Pz,
    srq: Srq,
    conn_evd: Evd,
    /// One per endpoint, or one shared by all (then every entry is the same EVD).
    recv_evds: Vec<Evd>,
    eps: Vec<Endpoint>,
    peers: Vec<Side>,
    _keep: Vec<(ServicePoint, Evd)>,
}

impl SrqSide {
    fn new(link: &str, n_eps: usize, srq_attr: &SrqAttr, shared_recv_evd: bool) -> SrqSide {
        let (ia, async_evd) = InterfaceAdapter::open(link, 64).unwrap();
        let pz = ia.pz_create().unwrap();
        let srq = ia.srq_create(&pz, srq_attr).unwrap();
        let req_evd = ia.evd_create(64, None, EvdFlags::DTO).unwrap();
        let conn_evd = ia.evd_create(32, None, EvdFlags::CONNECTION).unwrap();
        let shared = ia.evd_create(256, None, EvdFlags::DTO).unwrap();
        let mut recv_evds = Vec::new();
        let mut eps = Vec::new();
        for _ in 0..n_eps {
            let r = if shared_recv_evd {
                shared.clone()
            } else {
                ia.evd_create(256, None, EvdFlags::DTO).unwrap()
            };
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
            async_evd,
            pz,
            srq,
            conn_evd,
            recv_evds,
            eps,
            peers,
            _keep: keep,
        }
    }

    fn lmr(&self, len: usize) -> Lmr {
        let l = self.pz.lmr_allocate(len, MemPriv::ALL).unwrap();
        l.fill(0, len, SENTINEL).unwrap();
        l
    }

    fn close(self) {
        for p in self.peers {
            p.close();
        }
        self.ia.close(CloseFlags::Abrupt).unwrap();
    }
}

fn readable(fd: BorrowedFd<'_>) -> bool {
    use rustix::event::{poll, PollFd, PollFlags};
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let n = poll(&mut fds, 0).unwrap();
    n == 1 && fds[0].revents().contains(PollFlags::IN)
}

// ------------------------------------------------------------------------------------------------
// post_recv

// dat_ep_post_recv: "all the front segments of the local_iov are completely filled, only one
// segment is partially filled, if needed, and all segments that follow it are not filled at all."
per_link!(
    post_recv_fills_front_segments_then_one_partial_rest_untouched,
    |link| {
        let p = Pair::new(link);
        let (l1, l2) = (sentinel_lmr(&p.b, 4096), sentinel_lmr(&p.b, 4096));
        // Segments alternate between two LMRs: 8 + 5 full, 4 of 8, 0 of 8.
        let iov = [
            l1.triplet(0, 8),
            l2.triplet(16, 5),
            l1.triplet(64, 8),
            l2.triplet(128, 8),
        ];
        p.b.ep
            .post_recv(&iov, 42, CompletionFlags::empty())
            .unwrap();
        let msg = b"ABCDEFGHIJKLMNOPQ"; // 17 bytes
        let la = p.a.lmr(4096);
        send(&p.a, &la, 0, msg, 1, CompletionFlags::empty());
        let r = p.b.recv_done();
        assert_eq!(
            (r.cookie.0, r.status, r.transferred_length, r.operation),
            (42, DtoStatus::Success, 17, DtoOp::Receive)
        );
        assert_eq!(r.ep, p.b.ep);
        let mut want1 = vec![SENTINEL; 4096];
        let mut want2 = vec![SENTINEL; 4096];
        want1[0..8].copy_from_slice(&msg[0..8]);
        want2[16..21].copy_from_slice(&msg[8..13]);
        want1[64..68].copy_from_slice(&msg[13..17]);
        assert_eq!(l1.to_vec(0, 4096).unwrap(), want1, "LMR 1");
        assert_eq!(l2.to_vec(0, 4096).unwrap(), want2, "LMR 2");
        assert_eq!(p.a.req_done().status, DtoStatus::Success);
        p.close();
    }
);

// dat_ep_post_recv: num_segments "Can be 0 for receiving a 0 size message".
per_link!(
    post_recv_zero_segments_receives_zero_length_message,
    |link| {
        let p = Pair::new(link);
        p.b.ep.post_recv(&[], 9, CompletionFlags::empty()).unwrap();
        p.a.ep.post_send(&[], 3, CompletionFlags::empty()).unwrap();
        let r = p.b.recv_done();
        assert_eq!(
            (r.cookie.0, r.status, r.transferred_length, r.operation),
            (9, DtoStatus::Success, 0, DtoOp::Receive)
        );
        let s = p.a.req_done();
        assert_eq!(
            (s.cookie.0, s.status, s.transferred_length, s.operation),
            (3, DtoStatus::Success, 0, DtoOp::Send)
        );
        // A zero-length receive is too small for any non-empty message.
        p.b.ep.post_recv(&[], 10, CompletionFlags::empty()).unwrap();
        let la = p.a.lmr(64);
        send(&p.a, &la, 0, b"x", 4, CompletionFlags::empty());
        let r = p.b.recv_done();
        assert_eq!((r.cookie.0, r.status), (10, DtoStatus::LocalLength));
        p.close();
    }
);

// dat_ep_post_recv: "If the size of an incoming message is larger than the size of the
// local_iov, the reported status ... is DAT_DTO_LENGTH_ERROR."
per_link!(post_recv_message_larger_than_iov_is_length_error, |link| {
    let p = Pair::new(link);
    let lb = sentinel_lmr(&p.b, 4096);
    p.b.ep
        .post_recv(
            &[lb.triplet(16, 8), lb.triplet(100, 4)],
            5,
            CompletionFlags::empty(),
        )
        .unwrap();
    let la = p.a.lmr(4096);
    send(&p.a, &la, 0, &[0x11; 32], 1, CompletionFlags::empty());
    let r = p.b.recv_done();
    assert_eq!(
        (r.cookie.0, r.status, r.operation),
        (5, DtoStatus::LocalLength, DtoOp::Receive)
    );
    // The iov's content is undefined, but nothing outside it may be touched.
    let mut got = lb.to_vec(0, 4096).unwrap();
    got[16..24].fill(SENTINEL);
    got[100..104].fill(SENTINEL);
    assert!(
        got.iter().all(|&b| b == SENTINEL),
        "bytes outside the iov were written"
    );
    p.close();
});

// dat_ep_post_recv: "The operation on the Endpoint in DAT_EP_STATE_DISCONNECTED is allowed. If
// the operation returns successfully, the posted Recv is immediately flushed to recv_evd_handle."
per_link!(post_recv_on_disconnected_ep_is_flushed, |link| {
    let p = disconnected_pair(link);
    assert_empty(&p.b.recv_evd);
    let lb = p.b.lmr(64);
    p.b.ep
        .post_recv(&[lb.triplet(0, 64)], 77, CompletionFlags::empty())
        .unwrap();
    // At once: already queued when post_recv returns.
    let r = dequeue_dto(&p.b.recv_evd);
    assert_eq!(
        (r.cookie.0, r.status, r.operation),
        (77, DtoStatus::Flushed, DtoOp::Receive)
    );
    assert_eq!(r.ep, p.b.ep);
    assert_empty(&p.b.recv_evd);
    assert_eq!(p.b.ep.recv_query().unwrap().0, 0);
    assert_eq!(p.b.ep.state(), EpState::Disconnected);
    p.close();
});

// dat_ep_post_recv: "The operation is valid for all states of the Endpoint. The actual data
// transfer does not take place until the Endpoint is in the DAT_EP_STATE_CONNECTED state."
per_link!(
    post_recv_on_unconnected_ep_is_valid_and_filled_after_connect,
    |link| {
        let a = Side::new(link, None);
        let b = Side::new(link, None);
        assert_eq!(b.ep.state(), EpState::Unconnected);
        let lb = sentinel_lmr(&b, 64);
        b.ep.post_recv(&[lb.triplet(0, 64)], 11, CompletionFlags::empty())
            .unwrap();
        assert_eq!(b.ep.recv_query().unwrap(), (1, 64));
        assert_empty(&b.recv_evd);
        let p = Pair::connect(a, b);
        // Connecting neither completes nor flushes it.
        assert_empty(&p.b.recv_evd);
        let la = p.a.lmr(64);
        send(&p.a, &la, 0, b"early bird", 1, CompletionFlags::empty());
        let r = p.b.recv_done();
        assert_eq!(
            (r.cookie.0, r.status, r.transferred_length),
            (11, DtoStatus::Success, 10)
        );
        assert_eq!(lb.to_vec(0, 10).unwrap(), b"early bird");
        assert_eq!(lb.to_vec(10, 1).unwrap(), [SENTINEL]);
        p.close();
    }
);

// design.md: pending DTOs flush with DAT_DTO_ERR_FLUSHED when the EP leaves CONNECTED (local side).
per_link!(posted_recvs_are_flushed_on_local_disconnect, |link| {
    let p = Pair::new(link);
    let lb = p.b.lmr(256);
    for i in 0..3u64 {
        p.b.ep
            .post_recv(&[lb.triplet(i * 64, 64)], 100 + i, CompletionFlags::empty())
            .unwrap();
    }
    assert_empty(&p.b.recv_evd);
    p.b.ep.disconnect(CloseFlags::Abrupt).unwrap();
    p.b.expect_conn(ConnectionEventKind::Disconnected);
    for i in 0..3u64 {
        let r = Side::dto(&p.b.recv_evd);
        assert_eq!(
            (r.cookie.0, r.status, r.operation),
            (100 + i, DtoStatus::Flushed, DtoOp::Receive)
        );
        assert_eq!(r.ep, p.b.ep);
    }
    assert_empty(&p.b.recv_evd);
    assert_eq!(p.b.ep.recv_query().unwrap().0, 0);
    p.close();
});

// Same rule, the peer ends the connection.
per_link!(posted_recvs_are_flushed_on_peer_disconnect, |link| {
    let p = Pair::new(link);
    let lb = p.b.lmr(256);
    for i in 0..3u64 {
        p.b.ep
            .post_recv(&[lb.triplet(i * 64, 64)], 200 + i, CompletionFlags::empty())
            .unwrap();
    }
    p.a.ep.disconnect(CloseFlags::Graceful).unwrap();
    p.a.expect_conn(ConnectionEventKind::Disconnected);
    p.b.expect_conn(ConnectionEventKind::Disconnected);
    for i in 0..3u64 {
        let r = Side::dto(&p.b.recv_evd);
        assert_eq!((r.cookie.0, r.status), (200 + i, DtoStatus::Flushed));
    }
    assert_empty(&p.b.recv_evd);
    p.close();
});

// dat_ep_post_recv: "The value of DAT_COMPLETION_UNSIGNALLED_FLAG is only valid if the Endpoint
// Recv Completion Flags DAT_COMPLETION_UNSIGNALLED_FLAG. Otherwise, DAT_INVALID_PARAMETER".
once!(
    post_recv_unsignalled_without_ep_flag_is_invalid_parameter,
    |link| {
        for ep_flags in [
            CompletionFlags::empty(),
            CompletionFlags::EVD_THRESHOLD,
            CompletionFlags::SOLICITED_WAIT,
        ] {
            let b = Side::new(link, Some(&recv_flags_attr(ep_flags)));
            let lb = b.lmr(64);
            assert_eq!(
                kind(b.ep.post_recv(&[lb.triplet(0, 64)], 1, CompletionFlags::UNSIGNALLED)),
                ErrorType::InvalidParameter,
                "EP recv flags {ep_flags:?}"
            );
            assert_eq!(b.ep.recv_query().unwrap().0, 0, "nothing was posted");
            b.close();
        }
    }
);

// With the EP's recv flags = UNSIGNALLED the post is accepted; its completion is queued but does
// not notify (wait times out, dequeue finds it).
per_link!(
    post_recv_unsignalled_with_ep_flag_is_queued_without_waking,
    |link| {
        let attr = recv_flags_attr(CompletionFlags::UNSIGNALLED);
        let p = Pair::with_attrs(link, None, Some(&attr));
        let lb = p.b.lmr(64);
        p.b.ep
            .post_recv(&[lb.triplet(0, 64)], 21, CompletionFlags::UNSIGNALLED)
            .unwrap();
        let la = p.a.lmr(64);
        send(&p.a, &la, 0, b"quiet", 1, CompletionFlags::empty());
        assert_eq!(p.a.req_done().status, DtoStatus::Success);
        assert_wait_times_out(&p.b.recv_evd);
        let r = dequeue_dto(&p.b.recv_evd);
        assert_eq!(
            (r.cookie.0, r.status, r.transferred_length),
            (21, DtoStatus::Success, 5)
        );
        assert_eq!(lb.to_vec(0, 5).unwrap(), b"quiet");
        // Without the flag, a receive on the same EP notifies as usual.
        p.b.ep
            .post_recv(&[lb.triplet(0, 64)], 22, CompletionFlags::empty())
            .unwrap();
        send(&p.a, &la, 0, b"loud", 2, CompletionFlags::empty());
        let r = p.b.recv_done();
        assert_eq!((r.cookie.0, r.status), (22, DtoStatus::Success));
        p.close();
    }
);

// design.md: PZ mismatch between an LMR and the EP is DAT_PROTECTION_VIOLATION.
once!(post_recv_lmr_of_other_pz_is_protection_violation, |link| {
    let b = Side::new(link, None);
    let other = b.ia.pz_create().unwrap();
    let l = other.lmr_allocate(64, MemPriv::ALL).unwrap();
    let ok = b.lmr(64);
    assert_eq!(
        kind(b.ep.post_recv(
            &[ok.triplet(0, 8), l.triplet(0, 64)],
            1,
            CompletionFlags::empty()
        )),
        ErrorType::ProtectionViolation
    );
    assert_eq!(b.ep.recv_query().unwrap().0, 0);
    assert_empty(&b.recv_evd);
    b.close();
});

// design.md: a receive needs LOCAL_WRITE on its LMRs (the seed's "local read" is a slip).
once!(
    post_recv_lmr_without_local_write_is_privileges_violation,
    |link| {
        let b = Side::new(link, None);
        let l =
            b.pz.lmr_allocate(
                64,
                MemPriv::LOCAL_READ | MemPriv::REMOTE_READ | MemPriv::REMOTE_WRITE,
            )
            .unwrap();
        assert_eq!(
            kind(b.ep.post_recv(&[l.triplet(0, 64)], 1, CompletionFlags::empty())),
            ErrorType::PrivilegesViolation
        );
        // LOCAL_WRITE alone is enough.
        let w = b.pz.lmr_allocate(64, MemPriv::LOCAL_WRITE).unwrap();
        b.ep.post_recv(&[w.triplet(0, 64)], 2, CompletionFlags::empty())
            .unwrap();
        assert_eq!(b.ep.recv_query().unwrap(), (1, 64));
        b.close();
    }
);

// dat_ep_post_recv: DAT_INVALID_PARAMETER "one of the IOV segments pointed to a memory outside
// its LMR", including offsets whose end overflows u64.
once!(post_recv_segment_outside_lmr_is_invalid_parameter, |link| {
    let b = Side::new(link, None);
    let l = b.lmr(4096);
    let len = l.len() as u64;
    let base = l.address();
    let ctx = l.lmr_context();
    let bad = [
        l.triplet(len - 8, 9),                    // runs past the end by one
        l.triplet(len, 1),                        // starts at the end
        LmrTriplet::new(ctx, base - 1, 8),        // starts before the LMR
        LmrTriplet::new(ctx, base + 8, u64::MAX), // end overflows u64
        LmrTriplet::new(ctx, u64::MAX - 3, 8),    // address near the top
    ];
    for t in bad {
        assert_eq!(
            kind(b.ep.post_recv(&[l.triplet(0, 8), t], 1, CompletionFlags::empty())),
            ErrorType::InvalidParameter,
            "segment {t:?}"
        );
    }
    // The last byte is inside.
    b.ep.post_recv(&[l.triplet(len - 8, 8)], 2, CompletionFlags::empty())
        .unwrap();
    assert_eq!(b.ep.recv_query().unwrap(), (1, 8));
    b.close();
});

// dat_ep_post_recv: DAT_PRIVILEGES_VIOLATION "One of the LMRs used in local_iov was either
// invalid or ...".
once!(
    post_recv_invalid_lmr_context_is_privileges_violation,
    |link| {
        let b = Side::new(link, None);
        let freed = b.lmr(64);
        let stale = freed.triplet(0, 64);
        freed.free().unwrap();
        for t in [LmrTriplet::new(0, 0x1000, 8), stale] {
            assert_eq!(
                kind(b.ep.post_recv(&[t], 1, CompletionFlags::empty())),
                ErrorType::PrivilegesViolation,
                "segment {t:?}"
            );
        }
        assert_eq!(b.ep.recv_query().unwrap().0, 0);
        b.close();
    }
);

// More segments than the EP's max_recv_iov is DAT_INVALID_PARAMETER.
per_link!(post_recv_too_many_segments_is_invalid_parameter, |link| {
    let attr = EpAttr {
        max_recv_iov: 2,
        ..EpAttr::default()
    };
    let b = Side::new(link, Some(&attr));
    let l = b.lmr(4096);
    let iov: Vec<LmrTriplet> = (0..3).map(|i| l.triplet(i * 16, 16)).collect();
    assert_eq!(
        kind(b.ep.post_recv(&iov, 1, CompletionFlags::empty())),
        ErrorType::InvalidParameter
    );
    b.ep.post_recv(&iov[..2], 2, CompletionFlags::empty())
        .unwrap();
    // The default EP takes the IA's maximum; one more is refused too.
    let d = Side::new(link, None);
    let ld = d.lmr(4096);
    let max = d.ia.query().unwrap().max_iov_segments_per_dto;
    let iov: Vec<LmrTriplet> = (0..=max as u64).map(|i| ld.triplet(i * 8, 8)).collect();
    assert_eq!(
        kind(d.ep.post_recv(&iov, 1, CompletionFlags::empty())),
        ErrorType::InvalidParameter
    );
    d.ep.post_recv(&iov[..max], 2, CompletionFlags::empty())
        .unwrap();
    b.close();
    d.close();
});

// design.md: a full queue is DAT_INSUFFICIENT_RESOURCES.
once!(post_recv_full_queue_is_insufficient_resources, |link| {
    let attr = EpAttr {
        max_recv_dtos: 2,
        ..EpAttr::default()
    };
    let b = Side::new(link, Some(&attr));
    let l = b.lmr(64);
    for c in 0..2 {
        b.ep.post_recv(&[l.triplet(0, 64)], c, CompletionFlags::empty())
            .unwrap();
    }
    assert_eq!(
        kind(b.ep.post_recv(&[l.triplet(0, 64)], 9, CompletionFlags::empty())),
        ErrorType::InsufficientResources
    );
    assert_eq!(b.ep.recv_query().unwrap().0, 2);
    b.close();
});

// dat_ep_post_recv: DAT_INVALID_HANDLE "The ep_handle parameter is invalid."
once!(post_recv_on_freed_ep_is_invalid_handle, |link| {
    let b = Side::new(link, None);
    let l = b.lmr(64);
    b.ep.free().unwrap();
    assert_eq!(
        kind(b.ep.post_recv(&[l.triplet(0, 64)], 1, CompletionFlags::empty())),
        ErrorType::InvalidHandle
    );
    assert_eq!(
        kind(b.ep.post_send(&[l.triplet(0, 64)], 1, CompletionFlags::empty())),
        ErrorType::InvalidHandle
    );
    b.close();
});

// rdma_post_recvv: one work request with a scatter-gather list; "the user-defined context ...
// will be returned to the user through the work completion wr_id".
per_link!(
    rdma_post_recvv_is_one_receive_whose_cookie_comes_back,
    |link| {
        let p = Pair::new(link);
        let l = sentinel_lmr(&p.b, 4096);
        let cookie: u64 = 0x0123_4567_89AB_CDEF;
        let sgl = [l.triplet(0, 4), l.triplet(1000, 6), l.triplet(2000, 3)];
        p.b.ep
            .post_recv(&sgl, cookie, CompletionFlags::empty())
            .unwrap();
        assert_eq!(p.b.ep.recv_query().unwrap(), (1, 13), "one work request");
        let la = p.a.lmr(64);
        send(&p.a, &la, 0, b"0123456789abc", 1, CompletionFlags::empty());
        let r = p.b.recv_done();
        assert_eq!(
            (r.cookie.0, r.status, r.transferred_length),
            (cookie, DtoStatus::Success, 13)
        );
        assert_eq!(l.to_vec(0, 4).unwrap(), b"0123");
        assert_eq!(l.to_vec(1000, 6).unwrap(), b"456789");
        assert_eq!(l.to_vec(2000, 3).unwrap(), b"abc");
        assert_empty(&p.b.recv_evd);
        assert_eq!(p.b.ep.recv_query().unwrap(), (0, 0));
        p.close();
    }
);

// ------------------------------------------------------------------------------------------------
// SOLICITED_WAIT

// dat_srq_post_recv USAGE: "If the Endpoint Recv Completion flag is
// DAT_COMPLETION_SOLICITED_WAIT_FLAG then matching Send DTO completion flag value for Solicited
// Wait determines if the completion will be Signalled or not."
per_link!(solicited_wait_ep_is_woken_only_by_solicited_sends, |link| {
    let attr = recv_flags_attr(CompletionFlags::SOLICITED_WAIT);
    let p = Pair::with_attrs(link, None, Some(&attr));
    let lb = p.b.lmr(256);
    for c in 1..=2u64 {
        p.b.ep
            .post_recv(&[lb.triplet(c * 64, 64)], c, CompletionFlags::empty())
            .unwrap();
    }
    let waiter = {
        let evd = p.b.recv_evd.clone();
        thread::spawn(move || evd.wait(T, 1))
    };
    thread::sleep(Duration::from_millis(30));
    let la = p.a.lmr(256);
    send(&p.a, &la, 0, b"plain", 10, CompletionFlags::empty());
    assert_eq!(p.a.req_done().status, DtoStatus::Success);
    thread::sleep(SHORT.unwrap());
    assert!(
        !waiter.is_finished(),
        "an unsolicited send's receive must not wake the waiter"
    );
    assert_eq!(p.b.recv_evd.query().unwrap().count, 1, "but it is queued");
    send(
        &p.a,
        &la,
        64,
        b"urgent",
        11,
        CompletionFlags::SOLICITED_WAIT,
    );
    let (ev, more) = waiter
        .join()
        .unwrap()
        .unwrap()
        .expect("the solicited send wakes");
    let first = ev.as_dto().unwrap();
    assert_eq!(
        (first.cookie.0, first.status, first.transferred_length, more),
        (1, DtoStatus::Success, 5, 1)
    );
    let second = p.b.recv_done();
    assert_eq!(
        (second.cookie.0, second.status, second.transferred_length),
        (2, DtoStatus::Success, 6)
    );
    assert_eq!(lb.to_vec(64, 5).unwrap(), b"plain");
    assert_eq!(lb.to_vec(128, 6).unwrap(), b"urgent");
    p.close();
});

// ------------------------------------------------------------------------------------------------
// Send completions

// design.md: "SUPPRESS suppresses successful completions only; errors always complete."
per_link!(
    post_send_suppress_hides_only_successful_completions,
    |link| {
        let p = Pair::new(link);
        let lb = p.b.lmr(256);
        for c in 0..2 {
            p.b.ep
                .post_recv(&[lb.triplet(c * 64, 64)], c, CompletionFlags::empty())
                .unwrap();
        }
        let la = p.a.lmr(256);
        send(&p.a, &la, 0, b"hush", 1, CompletionFlags::SUPPRESS);
        let r = p.b.recv_done();
        assert_eq!(
            (r.cookie.0, r.status, r.transferred_length),
            (0, DtoStatus::Success, 4)
        );
        assert_eq!(lb.to_vec(0, 4).unwrap(), b"hush");
        assert_wait_times_out(&p.a.req_evd);
        send(&p.a, &la, 64, b"talk", 2, CompletionFlags::empty());
        let s = p.a.req_done();
        assert_eq!((s.cookie.0, s.status), (2, DtoStatus::Success));
        assert_empty(&p.a.req_evd);
        // A suppressed send that fails (flushed) still completes.
        p.a.ep.disconnect(CloseFlags::Abrupt).unwrap();
        p.a.expect_conn(ConnectionEventKind::Disconnected);
        send(&p.a, &la, 0, b"gone", 3, CompletionFlags::SUPPRESS);
        let f = dequeue_dto(&p.a.req_evd);
        assert_eq!((f.cookie.0, f.status), (3, DtoStatus::Flushed));
        p.close();
    }
);

// Contract: transfered_length = bytes moved, checked on sends.
per_link!(post_send_transferred_length_is_gathered_size, |link| {
    let p = Pair::new(link);
    let lb = p.b.lmr(256);
    p.b.ep
        .post_recv(&[lb.triplet(0, 256)], 1, CompletionFlags::empty())
        .unwrap();
    let la = p.a.lmr(4096);
    la.write(0, b"abc").unwrap();
    la.write(1000, b"defgh").unwrap();
    la.write(3000, b"ijklmno").unwrap();
    p.a.ep
        .post_send(
            &[la.triplet(0, 3), la.triplet(1000, 5), la.triplet(3000, 7)],
            5,
            CompletionFlags::empty(),
        )
        .unwrap();
    let s = p.a.req_done();
    assert_eq!(
        (s.cookie.0, s.status, s.transferred_length, s.operation),
        (5, DtoStatus::Success, 15, DtoOp::Send)
    );
    assert_eq!(s.ep, p.a.ep);
    let r = p.b.recv_done();
    assert_eq!(r.transferred_length, 15);
    assert_eq!(lb.to_vec(0, 15).unwrap(), b"abcdefghijklmno");
    p.close();
});

// Contract: completions in post order.
per_link!(post_send_completions_arrive_in_post_order, |link| {
    let p = Pair::new(link);
    let n = 16u64;
    let lb = p.b.lmr(64 * n as usize);
    for i in 0..n {
        p.b.ep
            .post_recv(&[lb.triplet(i * 64, 64)], i, CompletionFlags::empty())
            .unwrap();
    }
    let la = p.a.lmr(64 * n as usize);
    for i in 0..n {
        let msg = format!("message {i}");
        send(
            &p.a,
            &la,
            (i * 64) as usize,
            msg.as_bytes(),
            1000 + i,
            CompletionFlags::empty(),
        );
    }
    for i in 0..n {
        let s = p.a.req_done();
        assert_eq!((s.cookie.0, s.status), (1000 + i, DtoStatus::Success));
        let r = p.b.recv_done();
        let msg = format!("message {i}");
        assert_eq!((r.cookie.0, r.transferred_length), (i, msg.len() as u64));
        assert_eq!(
            lb.to_vec((i * 64) as usize, msg.len()).unwrap(),
            msg.as_bytes()
        );
    }
    p.close();
});

// design.md: UNSIGNALLED on a post is valid only with the EP's request flag; else INVALID_PARAMETER.
per_link!(
    post_send_unsignalled_without_ep_flag_is_invalid_parameter,
    |link| {
        let p = Pair::new(link);
        let la = p.a.lmr(64);
        assert_eq!(
            kind(
                p.a.ep
                    .post_send(&[la.triplet(0, 8)], 1, CompletionFlags::UNSIGNALLED)
            ),
            ErrorType::InvalidParameter
        );
        assert_empty(&p.a.req_evd);
        assert!(!p.a.ep.get_status().unwrap().2, "nothing queued");
        p.close();
    }
);

// With request flags = UNSIGNALLED the send completion is queued but does not wake `wait`.
per_link!(
    post_send_unsignalled_with_ep_flag_is_queued_without_waking,
    |link| {
        let attr = EpAttr {
            request_completion_flags: CompletionFlags::UNSIGNALLED,
            ..EpAttr::default()
        };
        let p = Pair::with_attrs(link, Some(&attr), None);
        let lb = p.b.lmr(64);
        p.b.ep
            .post_recv(&[lb.triplet(0, 64)], 1, CompletionFlags::empty())
            .unwrap();
        let la = p.a.lmr(64);
        send(&p.a, &la, 0, b"shh", 4, CompletionFlags::UNSIGNALLED);
        assert_eq!(p.b.recv_done().status, DtoStatus::Success);
        assert_wait_times_out(&p.a.req_evd);
        let s = dequeue_dto(&p.a.req_evd);
        assert_eq!(
            (s.cookie.0, s.status, s.transferred_length),
            (4, DtoStatus::Success, 3)
        );
        p.close();
    }
);

// design.md: sends are valid in CONNECTED and DISCONNECTED; other states DAT_INVALID_STATE.
once!(post_send_on_unconnected_ep_is_invalid_state, |link| {
    let a = Side::new(link, None);
    let la = a.lmr(64);
    assert_eq!(a.ep.state(), EpState::Unconnected);
    assert_eq!(
        kind(a.ep.post_send(&[la.triplet(0, 8)], 1, CompletionFlags::empty())),
        ErrorType::InvalidState
    );
    assert_empty(&a.req_evd);
    a.close();
});

per_link!(post_send_on_disconnected_ep_is_flushed, |link| {
    let p = disconnected_pair(link);
    let la = p.a.lmr(64);
    p.a.ep
        .post_send(&[la.triplet(0, 8)], 31, CompletionFlags::empty())
        .unwrap();
    let s = dequeue_dto(&p.a.req_evd);
    assert_eq!(
        (s.cookie.0, s.status, s.operation),
        (31, DtoStatus::Flushed, DtoOp::Send)
    );
    assert_eq!(s.ep, p.a.ep);
    assert_empty(&p.a.req_evd);
    assert_empty(&p.b.recv_evd);
    p.close();
});

// design.md: "A full queue is DAT_INSUFFICIENT_RESOURCES". Sends stay queued while the peer has
// no receive posted.
// Only on links where Sends the peer has no receive buffer for stay in the sender's queue: a
// Send completes at the peer and waits there for a buffer (LinkCaps).
per_link_with!(
    completes_at_peer && rnr_waits_forever,
    post_send_full_request_queue_is_insufficient_resources,
    |link| {
        let attr = EpAttr {
            max_request_dtos: 2,
            ..EpAttr::default()
        };
        let p = Pair::with_attrs(link, Some(&attr), None);
        let la = p.a.lmr(256);
        send(&p.a, &la, 0, b"one", 1, CompletionFlags::empty());
        send(&p.a, &la, 64, b"two", 2, CompletionFlags::empty());
        assert_eq!(
            kind(
                p.a.ep
                    .post_send(&[la.triplet(128, 5)], 3, CompletionFlags::empty())
            ),
            ErrorType::InsufficientResources
        );
        assert_empty(&p.a.req_evd);
        let lb = p.b.lmr(256);
        for c in 0..2u64 {
            p.b.ep
                .post_recv(&[lb.triplet(c * 64, 64)], c, CompletionFlags::empty())
                .unwrap();
        }
        for c in 1..=2 {
            let s = p.a.req_done();
            assert_eq!((s.cookie.0, s.status), (c, DtoStatus::Success));
        }
        for c in 0..2 {
            let r = p.b.recv_done();
            assert_eq!(
                (r.cookie.0, r.status, r.transferred_length),
                (c, DtoStatus::Success, 3)
            );
        }
        assert_eq!(lb.to_vec(0, 3).unwrap(), b"one");
        assert_eq!(lb.to_vec(64, 3).unwrap(), b"two");
        // The slots are free again.
        p.b.ep
            .post_recv(&[lb.triplet(128, 64)], 9, CompletionFlags::empty())
            .unwrap();
        send(&p.a, &la, 128, b"three", 3, CompletionFlags::empty());
        assert_eq!(p.a.req_done().cookie, 3);
        assert_eq!(p.b.recv_done().cookie, 9);
        p.close();
    }
);

// Contract: "Incoming sends before a recv is posted must wait, not fail (IB RNR retry)". On
// loopback the sender's completion waits too; over tcp the Send completes when TCP takes it and
// the receiver holds it (briefly) until a buffer is posted.
per_link!(send_before_peer_posts_recv_waits_then_completes, |link| {
    let p = Pair::new(link);
    let la = p.a.lmr(64);
    send(&p.a, &la, 0, b"patience", 1, CompletionFlags::empty());
    if completes_at_peer(link) {
        assert_wait_times_out(&p.a.req_evd);
    } else {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_empty(&p.b.recv_evd);
    assert_eq!(p.a.ep.state(), EpState::Connected);
    let lb = sentinel_lmr(&p.b, 64);
    p.b.ep
        .post_recv(&[lb.triplet(0, 64)], 2, CompletionFlags::empty())
        .unwrap();
    let s = p.a.req_done();
    assert_eq!(
        (s.cookie.0, s.status, s.transferred_length),
        (1, DtoStatus::Success, 8)
    );
    let r = p.b.recv_done();
    assert_eq!(
        (r.cookie.0, r.status, r.transferred_length),
        (2, DtoStatus::Success, 8)
    );
    assert_eq!(lb.to_vec(0, 9).unwrap(), b"patience\xAA");
    p.close();
});

// ------------------------------------------------------------------------------------------------
// SRQ

// dat_srq_post_recv: a buffer may be used "by any connected EP that uses SRQ"; the completion is
// "equivalent to ... the Receive posted to the Endpoint for the Endpoint that dequeued" it.
per_link!(
    srq_receive_completes_on_the_recv_evd_of_the_ep_that_took_it,
    |link| {
        let s = SrqSide::new(link, 2, &SrqAttr::default(), false);
        let l = s.lmr(4096);
        for c in 0..4u64 {
            s.srq.post_recv(&[l.triplet(c * 64, 64)], c).unwrap();
        }
        // EP 1's peer sends first: it takes the oldest buffer.
        let lp1 = s.peers[1].lmr(64);
        send(
            &s.peers[1],
            &lp1,
            0,
            b"to ep one",
            10,
            CompletionFlags::empty(),
        );
        let r = Side::dto(&s.recv_evds[1]);
        assert_eq!(
            (r.cookie.0, r.status, r.transferred_length, r.operation),
            (0, DtoStatus::Success, 9, DtoOp::Receive)
        );
        assert_eq!(r.ep, s.eps[1]);
        assert_empty(&s.recv_evds[0]);
        let lp0 = s.peers[0].lmr(64);
        send(
            &s.peers[0],
            &lp0,
            0,
            b"to ep zero",
            11,
            CompletionFlags::empty(),
        );
        let r = Side::dto(&s.recv_evds[0]);
        assert_eq!((r.cookie.0, r.transferred_length), (1, 10));
        assert_eq!(r.ep, s.eps[0]);
        assert_empty(&s.recv_evds[1]);
        assert_eq!(l.to_vec(0, 9).unwrap(), b"to ep one");
        assert_eq!(l.to_vec(64, 10).unwrap(), b"to ep zero");
        assert_eq!(s.srq.query().unwrap().available_dto_count, 2);
        s.close();
    }
);

// dat_srq_post_recv: "The posted Recv DTOs will complete in the order of Send postings to the
// other endpoint of each connection".
per_link!(srq_completions_keep_per_connection_order, |link| {
    let s = SrqSide::new(link, 2, &SrqAttr::default(), true);
    let n = 6u64;
    let l = s.lmr(64 * 2 * n as usize);
    for c in 0..2 * n {
        s.srq.post_recv(&[l.triplet(c * 64, 64)], c).unwrap();
    }
    let lps: Vec<Lmr> = s.peers.iter().map(|p| p.lmr(64 * n as usize)).collect();
    for i in 0..n {
        for (k, peer) in s.peers.iter().enumerate() {
            let msg = [k as u8, i as u8];
            send(
                peer,
                &lps[k],
                (i * 64) as usize,
                &msg,
                i,
                CompletionFlags::empty(),
            );
        }
    }
    let mut next = [0u8; 2];
    for _ in 0..2 * n {
        let r = Side::dto(&s.recv_evds[0]);
        assert_eq!((r.status, r.transferred_length), (DtoStatus::Success, 2));
        let msg = l.to_vec((r.cookie.0 * 64) as usize, 2).unwrap();
        let k = msg[0] as usize;
        assert_eq!(r.ep, s.eps[k], "completion on the EP whose peer sent it");
        assert_eq!(msg[1], next[k], "per-connection order on EP {k}");
        next[k] += 1;
    }
    assert_eq!(next, [n as u8, n as u8]);
    s.close();
});

// dat_srq_post_recv: scatter as for an EP receive; 0 segments receive a zero-size message.
per_link!(srq_post_recv_scatters_and_takes_zero_length, |link| {
    let s = SrqSide::new(link, 1, &SrqAttr::default(), false);
    let l = s.lmr(4096);
    s.srq
        .post_recv(&[l.triplet(0, 4), l.triplet(100, 4), l.triplet(200, 4)], 1)
        .unwrap();
    s.srq.post_recv(&[], 2).unwrap();
    let lp = s.peers[0].lmr(64);
    send(&s.peers[0], &lp, 0, b"srqdata", 1, CompletionFlags::empty());
    let r = Side::dto(&s.recv_evds[0]);
    assert_eq!(
        (r.cookie.0, r.status, r.transferred_length),
        (1, DtoStatus::Success, 7)
    );
    let mut want = vec![SENTINEL; 4096];
    want[0..4].copy_from_slice(b"srqd");
    want[100..103].copy_from_slice(b"ata");
    assert_eq!(l.to_vec(0, 4096).unwrap(), want);
    s.peers[0]
        .ep
        .post_send(&[], 2, CompletionFlags::empty())
        .unwrap();
    let r = Side::dto(&s.recv_evds[0]);
    assert_eq!(
        (r.cookie.0, r.status, r.transferred_length),
        (2, DtoStatus::Success, 0)
    );
    s.close();
});

// dat_srq_post_recv: DAT_PROTECTION_VIOLATION "Protection Zone mismatch between an LMR of one of
// the local_iov segments and the SRQ".
once!(
    srq_post_recv_lmr_of_other_pz_is_protection_violation,
    |link| {
        let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
        let pz = ia.pz_create().unwrap();
        let other = ia.pz_create().unwrap();
        let srq = ia.srq_create(&pz, &SrqAttr::default()).unwrap();
        let l = other.lmr_allocate(64, MemPriv::ALL).unwrap();
        assert_eq!(
            kind(srq.post_recv(&[l.triplet(0, 64)], 1)),
            ErrorType::ProtectionViolation
        );
        assert_eq!(srq.query().unwrap().available_dto_count, 0);
        // An SRQ EP must be in the SRQ's PZ too.
        let evd = ia.evd_create(8, None, EvdFlags::DTO).unwrap();
        assert_eq!(
            kind(ia.ep_create_with_srq(&other, Some(&evd), Some(&evd), None, &srq, None)),
            ErrorType::ProtectionViolation
        );
        ia.close(CloseFlags::Abrupt).unwrap();
    }
);

// dat_srq_post_recv: DAT_PRIVILEGES_VIOLATION "... did not have the local write privileges";
// DAT_INVALID_PARAMETER for a segment outside its LMR or too many segments.
once!(
    srq_post_recv_without_local_write_is_privileges_violation,
    |link| {
        let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
        let pz = ia.pz_create().unwrap();
        let attr = SrqAttr {
            max_recv_iov: 2,
            ..SrqAttr::default()
        };
        let srq = ia.srq_create(&pz, &attr).unwrap();
        let ro = pz.lmr_allocate(64, MemPriv::LOCAL_READ).unwrap();
        assert_eq!(
            kind(srq.post_recv(&[ro.triplet(0, 64)], 1)),
            ErrorType::PrivilegesViolation
        );
        assert_eq!(
            kind(srq.post_recv(&[LmrTriplet::new(0, 0x1000, 8)], 1)),
            ErrorType::PrivilegesViolation
        );
        let l = pz.lmr_allocate(4096, MemPriv::LOCAL_WRITE).unwrap();
        assert_eq!(
            kind(srq.post_recv(&[l.triplet(4090, 8)], 1)),
            ErrorType::InvalidParameter
        );
        assert_eq!(
            kind(srq.post_recv(
                &[LmrTriplet::new(l.lmr_context(), l.address() + 1, u64::MAX)],
                1
            )),
            ErrorType::InvalidParameter
        );
        assert_eq!(
            kind(srq.post_recv(&[l.triplet(0, 8), l.triplet(8, 8), l.triplet(16, 8)], 1)),
            ErrorType::InvalidParameter
        );
        assert_eq!(srq.query().unwrap().available_dto_count, 0);
        ia.close(CloseFlags::Abrupt).unwrap();
    }
);

once!(srq_post_recv_full_is_insufficient_resources, |link| {
    let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
    let pz = ia.pz_create().unwrap();
    let attr = SrqAttr {
        max_recv_dtos: 2,
        ..SrqAttr::default()
    };
    let srq = ia.srq_create(&pz, &attr).unwrap();
    let l = pz.lmr_allocate(64, MemPriv::ALL).unwrap();
    srq.post_recv(&[l.triplet(0, 32)], 1).unwrap();
    srq.post_recv(&[l.triplet(32, 32)], 2).unwrap();
    assert_eq!(
        kind(srq.post_recv(&[l.triplet(0, 8)], 3)),
        ErrorType::InsufficientResources
    );
    assert_eq!(srq.query().unwrap().available_dto_count, 2);
    ia.close(CloseFlags::Abrupt).unwrap();
});

// dat_srq_free: refused while an EP uses the SRQ; fine once it is gone.
once!(srq_free_is_invalid_state_while_an_ep_uses_it, |link| {
    let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
    let pz = ia.pz_create().unwrap();
    let srq = ia.srq_create(&pz, &SrqAttr::default()).unwrap();
    let evd = ia.evd_create(8, None, EvdFlags::DTO).unwrap();
    let ep = ia
        .ep_create_with_srq(&pz, Some(&evd), Some(&evd), None, &srq, None)
        .unwrap();
    assert_eq!(kind(srq.free()), ErrorType::InvalidState);
    assert_eq!(srq.query().unwrap().ep_count, 1, "still alive");
    ep.free().unwrap();
    srq.free().unwrap();
    let l = pz.lmr_allocate(64, MemPriv::ALL).unwrap();
    assert_eq!(
        kind(srq.post_recv(&[l.triplet(0, 64)], 1)),
        ErrorType::InvalidHandle
    );
    ia.close(CloseFlags::Abrupt).unwrap();
});

// dat_srq_set_lw: one asynchronous event when the posted count falls below the low watermark.
per_link!(srq_low_watermark_raises_exactly_one_async_event, |link| {
    let s = SrqSide::new(link, 1, &SrqAttr::default(), false);
    let l = s.lmr(4096);
    for c in 0..4u64 {
        s.srq.post_recv(&[l.triplet(c * 64, 64)], c).unwrap();
    }
    s.srq.set_lw(Some(2)).unwrap();
    assert_empty(&s.async_evd);
    let lp = s.peers[0].lmr(64);
    // 4 -> 3 -> 2: not below 2.
    for c in 0..2 {
        send(&s.peers[0], &lp, 0, b"x", c, CompletionFlags::empty());
        Side::dto(&s.recv_evds[0]);
    }
    assert_empty(&s.async_evd);
    // 2 -> 1: below.
    send(&s.peers[0], &lp, 0, b"x", 2, CompletionFlags::empty());
    Side::dto(&s.recv_evds[0]);
    let a = dequeue_async(&s.async_evd);
    assert_eq!(a.kind, AsyncKind::SrqLowWatermark);
    assert_eq!(a.reason, 2, "DAT_SRQ_LOW_WATERMARK_EVENT");
    match &a.subject {
        AsyncSubject::Srq(q) => assert_eq!(q.id(), s.srq.id()),
        other => panic!("subject {other:?}"),
    }
    // 1 -> 0: still below, no second event until re-armed.
    send(&s.peers[0], &lp, 0, b"x", 3, CompletionFlags::empty());
    Side::dto(&s.recv_evds[0]);
    assert_empty(&s.async_evd);
    s.close();
});

// dat_srq_set_lw: if the count is already below the new watermark the event is raised at once.
once!(srq_set_lw_below_current_count_fires_at_once, |link| {
    let (ia, async_evd) = InterfaceAdapter::open(link, 8).unwrap();
    let pz = ia.pz_create().unwrap();
    let srq = ia.srq_create(&pz, &SrqAttr::default()).unwrap();
    let l = pz.lmr_allocate(64, MemPriv::ALL).unwrap();
    srq.post_recv(&[l.triplet(0, 64)], 1).unwrap();
    srq.set_lw(Some(1)).unwrap(); // 1 is not below 1
    assert_empty(&async_evd);
    srq.set_lw(Some(3)).unwrap();
    let a = dequeue_async(&async_evd);
    assert_eq!(a.kind, AsyncKind::SrqLowWatermark);
    assert!(matches!(a.subject, AsyncSubject::Srq(ref q) if q.id() == srq.id()));
    assert_empty(&async_evd);
    srq.set_lw(None).unwrap();
    assert_empty(&async_evd);
    assert_eq!(srq.query().unwrap().attr.low_watermark, None);
    ia.close(CloseFlags::Abrupt).unwrap();
});

// dat_srq_resize: refused below the number of posted receives.
once!(srq_resize_below_posted_count_is_invalid_state, |link| {
    let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
    let pz = ia.pz_create().unwrap();
    let attr = SrqAttr {
        max_recv_dtos: 8,
        ..SrqAttr::default()
    };
    let srq = ia.srq_create(&pz, &attr).unwrap();
    let l = pz.lmr_allocate(64, MemPriv::ALL).unwrap();
    for c in 0..3 {
        srq.post_recv(&[l.triplet(0, 8)], c).unwrap();
    }
    assert_eq!(kind(srq.resize(2)), ErrorType::InvalidState);
    assert_eq!(srq.query().unwrap().attr.max_recv_dtos, 8);
    srq.resize(3).unwrap();
    assert_eq!(
        kind(srq.post_recv(&[l.triplet(0, 8)], 9)),
        ErrorType::InsufficientResources
    );
    srq.resize(16).unwrap();
    srq.post_recv(&[l.triplet(0, 8)], 9).unwrap();
    let q = srq.query().unwrap();
    assert_eq!((q.attr.max_recv_dtos, q.available_dto_count), (16, 4));
    ia.close(CloseFlags::Abrupt).unwrap();
});

// dat_srq_query: available receives and the EPs using the SRQ.
per_link!(srq_query_reports_posted_and_ep_counts, |link| {
    let s = SrqSide::new(link, 2, &SrqAttr::default(), false);
    let q = s.srq.query().unwrap();
    assert_eq!((q.available_dto_count, q.ep_count), (0, 2));
    assert_eq!(q.pz_id, s.eps[0].query().unwrap().pz_id);
    let l = s.lmr(256);
    for c in 0..3u64 {
        s.srq.post_recv(&[l.triplet(c * 64, 64)], c).unwrap();
    }
    assert_eq!(s.srq.query().unwrap().available_dto_count, 3);
    let lp = s.peers[0].lmr(64);
    send(&s.peers[0], &lp, 0, b"x", 1, CompletionFlags::empty());
    Side::dto(&s.recv_evds[0]);
    assert_eq!(s.srq.query().unwrap().available_dto_count, 2);
    s.eps[1].free().unwrap();
    assert_eq!(s.srq.query().unwrap().ep_count, 1);
    s.close();
});

// An EP that takes its receives from an SRQ has no receive queue of its own.
once!(post_recv_on_srq_ep_is_invalid_state, |link| {
    let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
    let pz = ia.pz_create().unwrap();
    let srq = ia.srq_create(&pz, &SrqAttr::default()).unwrap();
    let evd = ia.evd_create(8, None, EvdFlags::DTO).unwrap();
    let ep = ia
        .ep_create_with_srq(&pz, Some(&evd), Some(&evd), None, &srq, None)
        .unwrap();
    let l = pz.lmr_allocate(64, MemPriv::ALL).unwrap();
    assert_eq!(
        kind(ep.post_recv(&[l.triplet(0, 64)], 1, CompletionFlags::empty())),
        ErrorType::InvalidState
    );
    assert_empty(&evd);
    assert_eq!(srq.query().unwrap().available_dto_count, 0);
    ia.close(CloseFlags::Abrupt).unwrap();
});

// Contract §9: "SRQ EPs: on disconnect also post DAT_ASYNC_ERROR_EP_BROKEN (dat_handle = EP) to
// the IA async EVD, in the same order as the DISCONNECTED events." Plain EPs do not.
per_link!(srq_ep_disconnect_posts_async_ep_broken, |link| {
    let s = SrqSide::new(link, 2, &SrqAttr::default(), false);
    // EP 1 ended by its peer, then EP 0 ended locally.
    s.peers[1].ep.disconnect(CloseFlags::Graceful).unwrap();
    s.peers[1].expect_conn(ConnectionEventKind::Disconnected);
    eventually("EP 1 hears of its peer's disconnect", || {
        s.eps[1].state() == EpState::Disconnected
    });
    s.eps[0].disconnect(CloseFlags::Abrupt).unwrap();
    s.peers[0].expect_conn(ConnectionEventKind::Disconnected);
    for k in [1, 0] {
        let (ev, _) = s.conn_evd.wait(T, 1).unwrap().expect("an event in time");
        let c = ev.as_connection().unwrap();
        assert_eq!(
            (c.kind, &c.ep),
            (ConnectionEventKind::Disconnected, &s.eps[k])
        );
        let a = dequeue_async(&s.async_evd);
        assert_eq!(a.kind, AsyncKind::EpBroken);
        match &a.subject {
            AsyncSubject::Ep(ep) => assert_eq!(ep, &s.eps[k], "EP_BROKEN order"),
            other => panic!("subject {other:?}"),
        }
    }
    assert_empty(&s.async_evd);
    assert_empty(&s.conn_evd);
    // The non-SRQ peers got no async event.
    for p in &s.peers {
        assert_empty(&p.async_evd);
    }
    s.close();
});

// ------------------------------------------------------------------------------------------------
// EVD

// dat_evd_dequeue on an empty EVD: DAT_QUEUE_EMPTY, here Ok(None).
once!(evd_dequeue_on_empty_returns_none, |link| {
    let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
    let evd = ia
        .evd_create(4, None, EvdFlags::DTO | EvdFlags::SOFTWARE)
        .unwrap();
    assert!(evd.dequeue().unwrap().is_none());
    evd.post_se(5).unwrap();
    assert!(matches!(evd.dequeue().unwrap(), Some(Event::Software(5))));
    assert!(evd.dequeue().unwrap().is_none());
    ia.close(CloseFlags::Abrupt).unwrap();
});

// dat_evd_wait: returns once `threshold` events are queued; reports how many remain.
once!(evd_wait_returns_only_at_threshold, |link| {
    let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
    let evd = ia.evd_create(8, None, EvdFlags::SOFTWARE).unwrap();
    evd.post_se(1).unwrap();
    evd.post_se(2).unwrap();
    assert!(matches!(evd.wait(SHORT, 3), Ok(None)), "expected a timeout");
    assert_eq!(
        evd.query().unwrap().count,
        2,
        "a timed-out wait takes nothing"
    );
    evd.post_se(3).unwrap();
    let (ev, more) = evd.wait(T, 3).unwrap().expect("an event in time");
    assert!(matches!(ev, Event::Software(1)), "{ev:?}");
    assert_eq!(more, 2);
    // A waiter blocked on a threshold is woken by the event that reaches it.
    let w = {
        let e = evd.clone();
        thread::spawn(move || e.wait(T, 4))
    };
    thread::sleep(Duration::from_millis(30));
    evd.post_se(4).unwrap();
    thread::sleep(Duration::from_millis(30));
    assert!(!w.is_finished(), "3 events < threshold 4");
    evd.post_se(5).unwrap();
    let (ev, more) = w.join().unwrap().unwrap().expect("an event in time");
    assert!(matches!(ev, Event::Software(2)), "{ev:?}");
    assert_eq!(more, 3);
    ia.close(CloseFlags::Abrupt).unwrap();
});

once!(
    evd_wait_threshold_out_of_range_is_invalid_parameter,
    |link| {
        let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
        let evd = ia.evd_create(4, None, EvdFlags::SOFTWARE).unwrap();
        evd.post_se(1).unwrap();
        assert_eq!(kind(evd.wait(SHORT, 0)), ErrorType::InvalidParameter);
        assert_eq!(kind(evd.wait(SHORT, 5)), ErrorType::InvalidParameter);
        assert_eq!(evd.query().unwrap().count, 1);
        assert!(evd.wait(SHORT, 1).is_ok());
        ia.close(CloseFlags::Abrupt).unwrap();
    }
);

// Contract: DAT_TIMEOUT_EXPIRED on timeout, including 0 (in Rust: `Ok(None)`).
once!(evd_wait_zero_timeout_on_empty_times_out, |link| {
    let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
    let evd = ia.evd_create(4, None, EvdFlags::SOFTWARE).unwrap();
    assert!(
        matches!(evd.wait(Some(Duration::ZERO), 1), Ok(None)),
        "expected a timeout"
    );
    evd.post_se(7).unwrap();
    let (ev, more) = evd
        .wait(Some(Duration::ZERO), 1)
        .unwrap()
        .expect("an event in time");
    assert!(matches!(ev, Event::Software(7)));
    assert_eq!(more, 0);
    ia.close(CloseFlags::Abrupt).unwrap();
});

// design.md: "an EVD overflow is an async error" (DAT_ASYNC_ERROR_EVD_OVERFLOW on the IA's
// async EVD).
per_link!(evd_overflow_raises_async_evd_overflow, |link| {
    let a = Side::new(link, None);
    let b = Side::with_qlen(link, None, 2);
    let p = Pair::connect(a, b);
    let lb = p.b.lmr(256);
    for c in 0..3u64 {
        p.b.ep
            .post_recv(&[lb.triplet(c * 64, 64)], c, CompletionFlags::empty())
            .unwrap();
    }
    let la = p.a.lmr(64);
    assert_empty(&p.b.async_evd);
    for c in 0..3 {
        send(&p.a, &la, 0, b"x", c, CompletionFlags::empty());
        assert_eq!(p.a.req_done().status, DtoStatus::Success);
    }
    let (ev, _) = p.b.async_evd.wait(T, 1).unwrap().expect("an event in time");
    let ae = ev.as_async().expect("an async event");
    assert_eq!(ae.kind, AsyncKind::EvdOverflow);
    match &ae.subject {
        AsyncSubject::Evd(e) => assert_eq!(e, &p.b.recv_evd),
        other => panic!("subject {other:?}"),
    }
    assert_eq!(p.b.recv_evd.query().unwrap().count, 2);
    assert_eq!(dequeue_dto(&p.b.recv_evd).cookie, 0);
    assert_eq!(dequeue_dto(&p.b.recv_evd).cookie, 1);
    assert_empty(&p.b.recv_evd);
    p.close();
});

// dat_evd_post_se: needs DAT_EVD_SOFTWARE_FLAG; DAT_QUEUE_FULL when the queue is full.
once!(
    evd_post_se_needs_software_flag_and_full_is_queue_full,
    |link| {
        let (ia, async_evd) = InterfaceAdapter::open(link, 8).unwrap();
        let dto = ia.evd_create(4, None, EvdFlags::DTO).unwrap();
        assert_eq!(kind(dto.post_se(1)), ErrorType::InvalidParameter);
        assert_empty(&dto);
        let sw = ia.evd_create(2, None, EvdFlags::SOFTWARE).unwrap();
        sw.post_se(10).unwrap();
        sw.post_se(11).unwrap();
        assert_eq!(kind(sw.post_se(12)), ErrorType::QueueFull);
        // A refused post_se is not an overflow.
        assert_empty(&async_evd);
        let (ev, more) = sw.wait(T, 1).unwrap().expect("an event in time");
        assert!(matches!(ev, Event::Software(10)));
        assert_eq!(more, 1);
        sw.post_se(12).unwrap();
        ia.close(CloseFlags::Abrupt).unwrap();
    }
);

// dat_evd_resize: DAT_INVALID_STATE if more events are queued than the new length holds.
once!(evd_resize_smaller_than_queued_is_invalid_state, |link| {
    let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
    let evd = ia.evd_create(4, None, EvdFlags::SOFTWARE).unwrap();
    for v in 0..3 {
        evd.post_se(v).unwrap();
    }
    assert_eq!(kind(evd.resize(2)), ErrorType::InvalidState);
    let q = evd.query().unwrap();
    assert_eq!((q.qlen, q.count), (4, 3));
    evd.resize(3).unwrap();
    assert_eq!(kind(evd.post_se(3)), ErrorType::QueueFull);
    ia.close(CloseFlags::Abrupt).unwrap();
});

once!(evd_resize_larger_keeps_events_and_holds_more, |link| {
    let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
    let evd = ia.evd_create(2, None, EvdFlags::SOFTWARE).unwrap();
    evd.post_se(0).unwrap();
    evd.post_se(1).unwrap();
    evd.resize(5).unwrap();
    for v in 2..5 {
        evd.post_se(v).unwrap();
    }
    assert_eq!(kind(evd.post_se(5)), ErrorType::QueueFull);
    assert_eq!(evd.query().unwrap().qlen, 5);
    for v in 0..5 {
        assert!(matches!(evd.dequeue().unwrap(), Some(Event::Software(x)) if x == v));
    }
    ia.close(CloseFlags::Abrupt).unwrap();
});

// dat_evd_set_unwaitable: waits fail with DAT_INVALID_STATE, current waiters are woken.
once!(evd_set_unwaitable_makes_wait_invalid_state, |link| {
    let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
    let evd = ia.evd_create(4, None, EvdFlags::SOFTWARE).unwrap();
    let w = {
        let e = evd.clone();
        thread::spawn(move || e.wait(T, 1))
    };
    thread::sleep(Duration::from_millis(30));
    evd.set_unwaitable().unwrap();
    assert_eq!(kind(w.join().unwrap()), ErrorType::InvalidState);
    evd.post_se(1).unwrap();
    assert_eq!(kind(evd.wait(SHORT, 1)), ErrorType::InvalidState);
    // dequeue still works; clear_unwaitable restores waiting.
    evd.post_se(2).unwrap();
    assert!(matches!(evd.dequeue().unwrap(), Some(Event::Software(1))));
    evd.clear_unwaitable().unwrap();
    assert!(matches!(
        evd.wait(T, 1).unwrap().expect("an event in time").0,
        Event::Software(2)
    ));
    ia.close(CloseFlags::Abrupt).unwrap();
});

// evd.rs: the wait fd "is readable exactly while the EVD holds a signalled event".
once!(
    evd_wait_fd_is_readable_exactly_while_a_signalled_event_is_queued,
    |link| {
        let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
        let evd = ia.evd_create(8, None, EvdFlags::SOFTWARE).unwrap();
        // Created while an event is queued: readable at once.
        evd.post_se(1).unwrap();
        let fd = evd.wait_fd().unwrap();
        assert!(readable(fd));
        evd.post_se(2).unwrap();
        assert!(evd.dequeue().unwrap().is_some());
        assert!(readable(fd), "one event is still queued");
        assert!(evd.dequeue().unwrap().is_some());
        assert!(!readable(fd), "drained");
        evd.post_se(3).unwrap();
        assert!(readable(fd));
        evd.wait(T, 1).unwrap().expect("an event in time");
        assert!(!readable(fd), "drained by wait");
        ia.close(CloseFlags::Abrupt).unwrap();
    }
);

per_link!(evd_wait_fd_is_not_readable_for_unsignalled_events, |link| {
    let attr = recv_flags_attr(CompletionFlags::UNSIGNALLED);
    let p = Pair::with_attrs(link, None, Some(&attr));
    let fd = p.b.recv_evd.wait_fd().unwrap();
    assert!(!readable(fd));
    let lb = p.b.lmr(64);
    p.b.ep
        .post_recv(&[lb.triplet(0, 64)], 1, CompletionFlags::UNSIGNALLED)
        .unwrap();
    let la = p.a.lmr(64);
    send(&p.a, &la, 0, b"x", 1, CompletionFlags::empty());
    assert_eq!(p.a.req_done().status, DtoStatus::Success);
    eventually("the receive completes", || {
        p.b.recv_evd.query().unwrap().count == 1
    });
    assert!(
        !readable(fd),
        "an unsignalled event does not make the fd readable"
    );
    p.b.ep
        .post_recv(&[lb.triplet(0, 64)], 2, CompletionFlags::empty())
        .unwrap();
    send(&p.a, &la, 0, b"y", 2, CompletionFlags::empty());
    eventually("the signalled receive makes the fd readable", || {
        readable(fd)
    });
    assert_eq!(dequeue_dto(&p.b.recv_evd).cookie, 1);
    assert!(readable(fd), "the signalled one is still queued");
    assert_eq!(dequeue_dto(&p.b.recv_evd).cookie, 2);
    assert!(!readable(fd));
    p.close();
});

// ------------------------------------------------------------------------------------------------
// CNO

// dat_cno_wait: returns the attached EVD that received a signalled event.
once!(cno_wait_returns_the_evd_that_was_triggered, |link| {
    let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
    let cno = ia.cno_create().unwrap();
    let e1 = ia.evd_create(4, Some(&cno), EvdFlags::SOFTWARE).unwrap();
    let e2 = ia.evd_create(4, Some(&cno), EvdFlags::SOFTWARE).unwrap();
    assert!(matches!(cno.wait(SHORT), Ok(None)), "expected a timeout");
    for (evd, other) in [(&e2, &e1), (&e1, &e2)] {
        let w = {
            let c = cno.clone();
            thread::spawn(move || c.wait(T))
        };
        thread::sleep(Duration::from_millis(30));
        evd.post_se(1).unwrap();
        let got = w.join().unwrap().unwrap().expect("the CNO is triggered");
        assert_eq!(&got, evd);
        assert_ne!(&got, other);
        assert!(evd.dequeue().unwrap().is_some());
    }
    assert!(matches!(cno.wait(SHORT), Ok(None)), "expected a timeout");
    ia.close(CloseFlags::Abrupt).unwrap();
});

// dat_evd_disable: a disabled EVD still queues events but does not trigger its CNO.
once!(cno_is_not_triggered_by_a_disabled_evd, |link| {
    let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
    let cno = ia.cno_create().unwrap();
    let e1 = ia.evd_create(4, Some(&cno), EvdFlags::SOFTWARE).unwrap();
    let e2 = ia.evd_create(4, Some(&cno), EvdFlags::SOFTWARE).unwrap();
    e1.disable().unwrap();
    assert!(!e1.query().unwrap().enabled);
    e1.post_se(1).unwrap();
    assert!(matches!(cno.wait(SHORT), Ok(None)), "expected a timeout");
    assert_eq!(e1.query().unwrap().count, 1, "the event is still queued");
    e2.post_se(2).unwrap();
    assert_eq!(cno.wait(T).unwrap().expect("an event in time"), e2);
    e1.enable().unwrap();
    e1.post_se(3).unwrap();
    assert_eq!(cno.wait(T).unwrap().expect("an event in time"), e1);
    ia.close(CloseFlags::Abrupt).unwrap();
});

// dat_cno_free: refused while an EVD is attached.
once!(cno_free_is_invalid_state_while_an_evd_is_attached, |link| {
    let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
    let cno = ia.cno_create().unwrap();
    let e1 = ia.evd_create(4, Some(&cno), EvdFlags::SOFTWARE).unwrap();
    let e2 = ia.evd_create(4, None, EvdFlags::SOFTWARE).unwrap();
    e2.modify_cno(Some(&cno)).unwrap();
    assert_eq!(kind(cno.free()), ErrorType::InvalidState);
    e1.modify_cno(None).unwrap();
    assert_eq!(kind(cno.free()), ErrorType::InvalidState);
    e2.free().unwrap();
    cno.free().unwrap();
    assert_eq!(kind(cno.wait(SHORT)), ErrorType::InvalidHandle);
    ia.close(CloseFlags::Abrupt).unwrap();
});

// iWARP has no RNR retry: an inbound Send that finds no receive buffer waits briefly on tcp (the
// peer may be racing a re-post), then the receiver terminates the stream (DDP untagged error
// "no buffer") and both endpoints end, the sender's outstanding work flushed. Only on links
// where a Send does not wait for a receive without limit (LinkCaps).
per_link_with!(
    !rnr_waits_forever,
    send_without_receive_buffer_past_grace_breaks_connection,
    |link| {
        let p = Pair::new(link);
        let la = p.a.lmr(64);
        send(&p.a, &la, 0, b"nobody", 1, CompletionFlags::empty());
        let s = p.a.req_done();
        assert_eq!((s.cookie.0, s.status), (1, DtoStatus::Success));
        let b_end =
            p.b.conn_evd
                .wait(T, 1)
                .unwrap()
                .expect("an event in time")
                .0;
        assert_eq!(
            b_end.as_connection().unwrap().kind,
            ConnectionEventKind::Broken
        );
        let a_end =
            p.a.conn_evd
                .wait(T, 1)
                .unwrap()
                .expect("an event in time")
                .0;
        assert_eq!(
            a_end.as_connection().unwrap().kind,
            ConnectionEventKind::Broken
        );
        assert_eq!(p.a.ep.state(), EpState::Disconnected);
        assert_eq!(p.b.ep.state(), EpState::Disconnected);
        assert_empty(&p.b.recv_evd);
        p.close();
    }
);

// dat_ep_set_watermark: an endpoint on an SRQ that holds more of its buffers than its soft high
// watermark raises one asynchronous event (reason DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT), once per
// setting; ep_recv_query counts the SRQ buffers it holds.
per_link!(
    ep_soft_high_watermark_raises_one_async_event_per_setting,
    |link| {
        let s = SrqSide::new(link, 1, &SrqAttr::default(), false);
        let l = s.lmr(4096);
        for c in 0..8u64 {
            s.srq.post_recv(&[l.triplet(c * 64, 64)], c).unwrap();
        }
        let lp = s.peers[0].lmr(64);
        // A watermark of 1: one buffer at a time is not above it.
        s.eps[0].set_watermark(Some(1)).unwrap();
        send(&s.peers[0], &lp, 0, b"x", 0, CompletionFlags::empty());
        Side::dto(&s.recv_evds[0]);
        assert_empty(&s.async_evd);
        assert_eq!(
            s.eps[0].recv_query().unwrap(),
            (0, 0),
            "nothing held once completed"
        );
        // A watermark of 0: the next buffer taken is above it.
        s.eps[0].set_watermark(Some(0)).unwrap();
        assert_empty(&s.async_evd);
        send(&s.peers[0], &lp, 0, b"x", 1, CompletionFlags::empty());
        Side::dto(&s.recv_evds[0]);
        let a = dequeue_async(&s.async_evd);
        assert_eq!(a.kind, AsyncKind::EpSoftHighWatermark);
        assert_eq!(a.reason, 2, "DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT");
        match &a.subject {
            AsyncSubject::Ep(e) => assert_eq!(e.id(), s.eps[0].id()),
            other => panic!("subject {other:?}"),
        }
        // Once per setting: not again until set again.
        send(&s.peers[0], &lp, 0, b"x", 2, CompletionFlags::empty());
        Side::dto(&s.recv_evds[0]);
        assert_empty(&s.async_evd);
        s.eps[0].set_watermark(Some(0)).unwrap();
        send(&s.peers[0], &lp, 0, b"x", 3, CompletionFlags::empty());
        Side::dto(&s.recv_evds[0]);
        assert_eq!(
            dequeue_async(&s.async_evd).kind,
            AsyncKind::EpSoftHighWatermark
        );
        // Infinite: never.
        s.eps[0].set_watermark(None).unwrap();
        send(&s.peers[0], &lp, 0, b"x", 4, CompletionFlags::empty());
        Side::dto(&s.recv_evds[0]);
        assert_empty(&s.async_evd);
        s.close();
    }
);

// ------------------------------------------------------------------------------------------------
// Batches of receives (`Endpoint::post_recvs`, the Rust API's form of ibv_post_recv's list)

/// The iovs of `n` 16-byte receives into consecutive slots of `l`.
fn slot_requests(l: &Lmr, n: usize) -> Vec<[LmrTriplet; 1]> {
    (0..n).map(|k| [l.triplet(16 * k as u64, 16)]).collect()
}

fn requests<'a>(iovs: &'a [[LmrTriplet; 1]], base: u64) -> Vec<RecvRequest<'a>> {
    iovs.iter()
        .enumerate()
        .map(|(k, iov)| RecvRequest {
            iov,
            cookie: (base + k as u64).into(),
            flags: CompletionFlags::empty(),
        })
        .collect()
}

// A batch is posted as its receives one by one would be: in order (each message fills the
// next receive of the batch, across the batch's internal chunks), each completing once.
per_link!(
    a_batch_of_receives_is_filled_in_order_and_each_completes_once,
    |link| {
        let p = Pair::new(link);
        const N: usize = RECV_BATCH_CHUNK + 9;
        let lb = sentinel_lmr(&p.b, 16 * N);
        let iovs = slot_requests(&lb, N);
        p.b.ep.post_recvs(&requests(&iovs, 1000)).unwrap();
        assert_eq!(p.b.ep.recv_query().unwrap(), (N, 16 * N as u64));
        let la = p.a.lmr(64);
        for k in 0..N {
            let msg = [k as u8; 5];
            send(&p.a, &la, 0, &msg, k as u64, CompletionFlags::SUPPRESS);
            // One at a time: the sender's buffer is reused.
            let r = p.b.recv_done();
            assert_eq!(
                (r.cookie.0, r.status, r.transferred_length, r.operation),
                (1000 + k as u64, DtoStatus::Success, 5, DtoOp::Receive),
                "message {k}"
            );
        }
        let mut want = vec![SENTINEL; 16 * N];
        for k in 0..N {
            want[16 * k..16 * k + 5].fill(k as u8);
        }
        assert_eq!(lb.to_vec(0, 16 * N).unwrap(), want);
        assert_empty(&p.b.recv_evd);
        assert_eq!(p.b.ep.recv_query().unwrap().0, 0);
        p.close();
    }
);

// ibv_post_recv's rule for a list: the first refused request stops it; those before it are
// posted, it and those after it are not, and the error says how many were posted.
once!(
    a_batch_stops_at_its_first_refused_receive_with_those_before_posted,
    |link| {
        let b = Side::new(link, None);
        let l = b.lmr(16 * 8);
        let other = b.ia.pz_create().unwrap();
        let foreign = other.lmr_allocate(64, MemPriv::ALL).unwrap();
        let mut iovs = slot_requests(&l, 6);
        iovs[3] = [foreign.triplet(0, 16)];
        let e = b.ep.post_recvs(&requests(&iovs, 0)).unwrap_err();
        assert_eq!(e.posted, 3);
        assert_eq!(e.error.kind(), ErrorType::ProtectionViolation);
        assert!(e.to_string().contains("request 3"), "{e}");
        assert_eq!(b.ep.recv_query().unwrap(), (3, 48));
        // Bad flags refuse a request the same way.
        let iovs = slot_requests(&l, 2);
        let mut reqs = requests(&iovs, 10);
        reqs[0].flags = CompletionFlags::UNSIGNALLED;
        let e = b.ep.post_recvs(&reqs).unwrap_err();
        assert_eq!((e.posted, e.error.kind()), (0, ErrorType::InvalidParameter));
        assert_eq!(b.ep.recv_query().unwrap().0, 3);
        assert_empty(&b.recv_evd);
        b.close();
    }
);

// A batch that fills the receive queue: the receives that fit are posted, the first that does
// not is DAT_INSUFFICIENT_RESOURCES, as for a single post.
once!(
    a_batch_that_fills_the_queue_posts_what_fits_then_is_insufficient_resources,
    |link| {
        let attr = EpAttr {
            max_recv_dtos: 4,
            ..EpAttr::default()
        };
        let b = Side::new(link, Some(&attr));
        let l = b.lmr(16 * 8);
        b.ep.post_recv(&[l.triplet(0, 16)], 99, CompletionFlags::empty())
            .unwrap();
        let iovs = slot_requests(&l, 6);
        let e = b.ep.post_recvs(&requests(&iovs, 0)).unwrap_err();
        assert_eq!(
            (e.posted, e.error.kind()),
            (3, ErrorType::InsufficientResources)
        );
        assert_eq!(b.ep.recv_query().unwrap().0, 4);
        // An empty batch posts nothing and succeeds.
        b.ep.post_recvs(&[]).unwrap();
        b.close();
    }
);

// As a single post on a DISCONNECTED endpoint: every receive of the batch is flushed at once,
// in order.
per_link!(
    a_batch_on_a_disconnected_endpoint_is_flushed_in_order,
    |link| {
        let p = disconnected_pair(link);
        let lb = p.b.lmr(16 * 40);
        let iovs = slot_requests(&lb, 40);
        p.b.ep.post_recvs(&requests(&iovs, 500)).unwrap();
        for k in 0..40u64 {
            let r = dequeue_dto(&p.b.recv_evd);
            assert_eq!((r.cookie.0, r.status), (500 + k, DtoStatus::Flushed));
        }
        assert_empty(&p.b.recv_evd);
        p.close();
    }
);

// An endpoint on an SRQ takes no receives of its own, in a batch as alone.
once!(a_batch_on_an_srq_endpoint_is_invalid_state, |link| {
    let s = SrqSide::new(link, 1, &SrqAttr::default(), false);
    let l = s.lmr(64);
    let iovs = slot_requests(&l, 2);
    let e = s.eps[0].post_recvs(&requests(&iovs, 0)).unwrap_err();
    assert_eq!((e.posted, e.error.kind()), (0, ErrorType::InvalidState));
    s.close();
});

// An SRQ's batch is taken in order by the endpoints that use it, each receive once.
per_link!(an_srq_batch_is_taken_in_order_by_its_endpoints, |link| {
    let s = SrqSide::new(link, 2, &SrqAttr::default(), true);
    const N: usize = RECV_BATCH_CHUNK + 3;
    let l = s.lmr(16 * N);
    let iovs = slot_requests(&l, N);
    s.srq.post_recvs(&requests(&iovs, 300)).unwrap();
    assert_eq!(s.srq.query().unwrap().available_dto_count, N);
    for k in 0..N {
        let peer = &s.peers[k % 2];
        let lp = peer.lmr(64);
        send(
            peer,
            &lp,
            0,
            &[k as u8; 3],
            k as u64,
            CompletionFlags::SUPPRESS,
        );
        let r = Side::dto(&s.recv_evds[0]);
        assert_eq!(
            (r.cookie.0, r.status, r.transferred_length),
            (300 + k as u64, DtoStatus::Success, 3),
            "message {k}"
        );
        assert_eq!(l.to_vec(16 * k, 3).unwrap(), vec![k as u8; 3]);
    }
    assert_eq!(s.srq.query().unwrap().available_dto_count, 0);
    s.close();
});

// An SRQ's batch stops at its first refused request (flags, which dat_srq_post_recv does not
// take; a full queue), with those before it posted.
once!(an_srq_batch_stops_at_its_first_refused_receive, |link| {
    let (ia, _async_evd) = InterfaceAdapter::open(link, 8).unwrap();
    let pz = ia.pz_create().unwrap();
    let attr = SrqAttr {
        max_recv_dtos: 5,
        ..SrqAttr::default()
    };
    let srq = ia.srq_create(&pz, &attr).unwrap();
    let l = pz.lmr_allocate(16 * 8, MemPriv::ALL).unwrap();
    let iovs = slot_requests(&l, 8);
    let mut reqs = requests(&iovs, 0);
    reqs[2].flags = CompletionFlags::SUPPRESS;
    let e = srq.post_recvs(&reqs).unwrap_err();
    assert_eq!((e.posted, e.error.kind()), (2, ErrorType::InvalidParameter));
    assert_eq!(srq.query().unwrap().available_dto_count, 2);
    let e = srq.post_recvs(&requests(&iovs, 10)).unwrap_err();
    assert_eq!(
        (e.posted, e.error.kind()),
        (3, ErrorType::InsufficientResources)
    );
    assert_eq!(srq.query().unwrap().available_dto_count, 5);
    ia.close(CloseFlags::Abrupt).unwrap();
});

// A Send that arrived before any receive waits (RNR) and is placed when a batch brings one,
// on an endpoint's own queue and on an SRQ.
per_link!(
    a_send_waiting_for_a_buffer_is_placed_when_a_batch_posts_one,
    |link| {
        let p = Pair::new(link);
        let la = p.a.lmr(64);
        send(&p.a, &la, 0, b"early", 1, CompletionFlags::SUPPRESS);
        std::thread::sleep(Duration::from_millis(20));
        let lb = sentinel_lmr(&p.b, 64);
        let iovs = slot_requests(&lb, 2);
        p.b.ep.post_recvs(&requests(&iovs, 70)).unwrap();
        let r = p.b.recv_done();
        assert_eq!(
            (r.cookie.0, r.status, r.transferred_length),
            (70, DtoStatus::Success, 5)
        );
        assert_eq!(lb.to_vec(0, 5).unwrap(), b"early");
        p.close();

        let s = SrqSide::new(link, 1, &SrqAttr::default(), false);
        let lp = s.peers[0].lmr(64);
        send(&s.peers[0], &lp, 0, b"late", 2, CompletionFlags::SUPPRESS);
        std::thread::sleep(Duration::from_millis(20));
        let l = s.lmr(64);
        let iovs = slot_requests(&l, 1);
        s.srq.post_recvs(&requests(&iovs, 80)).unwrap();
        let r = Side::dto(&s.recv_evds[0]);
        assert_eq!(
            (r.cookie.0, r.status, r.transferred_length),
            (80, DtoStatus::Success, 4)
        );
        s.close();
    }
);
