//! Conformance tests for Send with Invalidate (RFC 5040; `dat_ep_post_send_with_invalidate`):
//! the named STag is invalidated at the receiver before its receive completes, the receive
//! says so (`DAT_DTO_RECEIVE_WITH_INVALIDATE` with the `rmr_context`), and only a bound RMR of
//! the receiving endpoint's PZ can be invalidated. One test per rule, named after it, per link.
//!
//! Timing: "must happen" waits use the kit's `T`; "must not happen" checks wait `QUIET`.

use std::time::Duration;

use dapl::*;
use dapl_testkit::kit::*;

/// How long a "must not happen" check waits.
const QUIET: Duration = Duration::from_millis(100);

/// An LMR of `len` bytes with every right in `pz`, filled with `byte`.
fn filled(pz: &Pz, len: usize, byte: u8) -> Lmr {
    let l = pz.lmr_allocate(len, MemPriv::ALL).unwrap();
    l.fill(0, len, byte).unwrap();
    l
}

/// Binds `rmr` to `len` bytes of `lmr` at `off` with remote read and write, through `ep`,
/// without a completion event; returns the context.
fn bind(rmr: &Rmr, lmr: &Lmr, off: u64, len: u64, ep: &Endpoint) -> RmrContext {
    rmr.bind(
        lmr,
        lmr.triplet(off, len),
        MemPriv::REMOTE_READ | MemPriv::REMOTE_WRITE,
        ep,
        0,
        CompletionFlags::SUPPRESS,
    )
    .unwrap()
}

fn snapshot(lmrs: &[&Lmr]) -> Vec<Vec<u8>> {
    lmrs.iter().map(|l| l.to_vec(0, l.len()).unwrap()).collect()
}

/// The next connection event of `side` is BROKEN, and the endpoint is DISCONNECTED.
#[track_caller]
fn expect_broken(side: &Side) {
    side.expect_conn(ConnectionEventKind::Broken);
    assert_eq!(side.ep.state(), EpState::Disconnected);
}

/// `a` sends 32 bytes with Invalidate of `ctx` (cookie 3, `flags`) from a fresh LMR; returns
/// what it sent.
/// B's side of a Send with Invalidate: a 4 KiB LMR (0x11) with an RMR bound over
/// 1024..1280 (`ctx`), and a receive (cookie 7) of `inbox_len` bytes posted into an inbox
/// (0x22).
struct Target {
    lb: Lmr,
    rmr: Rmr,
    ctx: RmrContext,
    inbox: Lmr,
}

fn target(p: &Pair, inbox_len: u64) -> Target {
    let lb = filled(&p.b.pz, 4096, 0x11);
    let rmr = p.b.pz.rmr_create().unwrap();
    let ctx = bind(&rmr, &lb, 1024, 256, &p.b.ep);
    let inbox = filled(&p.b.pz, inbox_len as usize, 0x22);
    p.b.ep
        .post_recv(&[inbox.triplet(0, inbox_len)], 7, CompletionFlags::empty())
        .unwrap();
    Target {
        lb,
        rmr,
        ctx,
        inbox,
    }
}

fn send_invalidate(p: &Pair, ctx: RmrContext, flags: CompletionFlags) -> Vec<u8> {
    let data: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(7) ^ 0x3C).collect();
    let la = p.a.lmr(64);
    la.write(0, &data).unwrap();
    p.a.ep
        .post_send_with_invalidate(&[la.triplet(0, 32)], 3, flags, ctx)
        .unwrap();
    data
}

// ------------------------------------------------------------------------------------------------
// Success

// RFC 5040 §5.3 (Send with Invalidate) and DAT_DTO_COMPLETION_EVENT_DATA: the receive
// completes as DAT_DTO_RECEIVE_WITH_INVALIDATE with the invalidated rmr_context; the sender's
// completion is an ordinary Send's; the RMR is unbound from then on.
per_link!(
    send_with_invalidate_completes_the_receive_with_invalidate_and_the_rmr_context,
    |link| {
        let p = Pair::new(link);
        let t = target(&p, 256);
        let (rmr, ctx, inbox) = (&t.rmr, t.ctx, &t.inbox);
        let data = send_invalidate(&p, ctx, CompletionFlags::empty());
        let s = p.a.req_done();
        assert_eq!(
            (s.cookie.0, s.status, s.operation, s.transferred_length),
            (3, DtoStatus::Success, DtoOp::Send, 32)
        );
        assert_eq!(s.rmr_context, None, "the sender's completion names no RMR");
        let r = p.b.recv_done();
        assert_eq!(
            (r.cookie.0, r.status, r.transferred_length),
            (7, DtoStatus::Success, 32)
        );
        assert_eq!(r.operation, DtoOp::ReceiveWithInvalidate);
        assert_eq!(r.rmr_context, Some(ctx));
        assert_eq!(inbox.to_vec(0, 32).unwrap(), data);
        // The RMR reports itself unbound.
        let q = rmr.query().unwrap();
        assert_eq!(q.rmr_context, RmrContext(0));
        assert_eq!(q.lmr_triplet, None);
        assert_eq!(q.privileges, MemPriv::empty());
        assert_eq!(rmr.rmr_triplet(), None);
        // The connection is fine: a plain send still completes as a plain receive.
        p.b.ep
            .post_recv(&[inbox.triplet(64, 64)], 8, CompletionFlags::empty())
            .unwrap();
        let la = p.a.lmr(8);
        p.a.ep
            .post_send(&[la.triplet(0, 8)], 4, CompletionFlags::empty())
            .unwrap();
        assert_eq!(p.a.req_done().status, DtoStatus::Success);
        let r = p.b.recv_done();
        assert_eq!(
            (r.cookie.0, r.status, r.operation, r.rmr_context),
            (8, DtoStatus::Success, DtoOp::Receive, None)
        );
        assert_eq!(p.b.ep.state(), EpState::Connected);
        p.close();
    }
);

// The same with DAT_COMPLETION_SUPPRESS_FLAG on the Send: no sender completion, and the
// receive still completes as DAT_DTO_RECEIVE_WITH_INVALIDATE with the RMR unbound (on shm such
// a Send, posted after a look for completions on an idle endpoint, is written by the post
// itself: `Qp::transmit_inline`).
per_link!(
    a_suppressed_send_with_invalidate_invalidates_as_a_reported_one_does,
    |link| {
        let p = Pair::new(link);
        let t = target(&p, 256);
        let (rmr, ctx, inbox) = (&t.rmr, t.ctx, &t.inbox);
        assert!(p.a.req_evd.dequeue().unwrap().is_none());
        let data = send_invalidate(&p, ctx, CompletionFlags::SUPPRESS);
        let r = p.b.recv_done();
        assert_eq!(
            (r.cookie.0, r.status, r.operation, r.rmr_context),
            (
                7,
                DtoStatus::Success,
                DtoOp::ReceiveWithInvalidate,
                Some(ctx)
            )
        );
        assert_eq!(inbox.to_vec(0, 32).unwrap(), data);
        assert_eq!(rmr.query().unwrap().rmr_context, RmrContext(0));
        assert!(
            p.a.req_evd.dequeue().unwrap().is_none(),
            "a suppressed Send's success is not reported"
        );
        assert_eq!(p.a.ep.state(), EpState::Connected);
        p.close();
    }
);

// After the invalidation the peer's RDMA Write with that context is refused as for an
// unbound RMR: the connection breaks and no byte changes; the RMR can be bound again (and
// then counts as bound for lmr_free), and unbound.
per_link!(
    rmr_invalidated_by_a_peer_refuses_its_old_context_and_can_be_bound_again,
    |link| {
        let p = Pair::new(link);
        let Target {
            lb,
            rmr,
            ctx,
            inbox,
        } = target(&p, 64);
        send_invalidate(&p, ctx, CompletionFlags::empty());
        assert_eq!(p.a.req_done().status, DtoStatus::Success);
        assert_eq!(p.b.recv_done().rmr_context, Some(ctx));
        let before = snapshot(&[&lb, &inbox]);
        // The old context names nothing now.
        let la = filled(&p.a.pz, 64, 0xEE);
        p.a.ep
            .post_rdma_write(
                &[la.triplet(0, 64)],
                5,
                &RmrTriplet::new(ctx, lb.address() + 1024, 64),
                CompletionFlags::empty(),
            )
            .unwrap();
        let w = p.a.req_done();
        assert_eq!(w.cookie, 5);
        if completes_at_peer(link) {
            assert_eq!(w.status, DtoStatus::RemoteAccess);
        } else {
            assert!(
                matches!(w.status, DtoStatus::Success | DtoStatus::Flushed),
                "{:?}",
                w.status
            );
        }
        expect_broken(&p.a);
        expect_broken(&p.b);
        assert!(
            snapshot(&[&lb, &inbox]) == before,
            "a write with an invalidated context changed memory"
        );
        // Bound again: a new context, and the LMR is in use once more.
        let ctx2 = bind(&rmr, &lb, 0, 64, &p.b.ep);
        assert_ne!(ctx2, RmrContext(0));
        assert_ne!(ctx2, ctx);
        assert_eq!(rmr.query().unwrap().rmr_context, ctx2);
        let e = expect_err(lb.free(), ErrorType::InvalidState);
        assert_eq!(e.subtype(), Subtype::InvalidStateLmrInUse);
        // Unbound: the LMR is free to go.
        let none = rmr
            .bind(
                &lb,
                lb.triplet(0, 0),
                MemPriv::REMOTE_WRITE,
                &p.b.ep,
                0,
                CompletionFlags::SUPPRESS,
            )
            .unwrap();
        assert_eq!(none, RmrContext(0));
        lb.free().unwrap();
        rmr.free().unwrap();
        p.close();
    }
);

// The invalidation gives back the binding's use of its LMR exactly once: lmr_free works at
// once when it was the only RMR, and with two RMRs on one LMR only after the other goes too,
// however the invalidated RMR is freed or rebound afterwards.
per_link!(
    lmr_free_counts_an_rmr_invalidated_by_a_peer_as_unbound_exactly_once,
    |link| {
        let p = Pair::new(link);
        let lb = filled(&p.b.pz, 4096, 0x11);
        let inbox = filled(&p.b.pz, 256, 0x22);
        for c in 0..2u64 {
            p.b.ep
                .post_recv(
                    &[inbox.triplet(c * 64, 64)],
                    10 + c,
                    CompletionFlags::empty(),
                )
                .unwrap();
        }
        // One RMR: the LMR can be freed once the peer invalidated it.
        let only = p.b.pz.rmr_create().unwrap();
        let ctx = bind(&only, &lb, 0, 128, &p.b.ep);
        send_invalidate(&p, ctx, CompletionFlags::empty());
        assert_eq!(p.a.req_done().status, DtoStatus::Success);
        assert_eq!(p.b.recv_done().rmr_context, Some(ctx));
        lb.free().unwrap();
        only.free().unwrap();
        // Two RMRs on one LMR: invalidating one leaves the other's use.
        let lc = filled(&p.b.pz, 4096, 0x33);
        let r1 = p.b.pz.rmr_create().unwrap();
        let r2 = p.b.pz.rmr_create().unwrap();
        let c1 = bind(&r1, &lc, 0, 64, &p.b.ep);
        bind(&r2, &lc, 64, 64, &p.b.ep);
        send_invalidate(&p, c1, CompletionFlags::empty());
        assert_eq!(p.a.req_done().status, DtoStatus::Success);
        assert_eq!(p.b.recv_done().rmr_context, Some(c1));
        expect_err(lc.free(), ErrorType::InvalidState);
        // Freeing the invalidated RMR gives nothing back a second time.
        r1.free().unwrap();
        expect_err(lc.free(), ErrorType::InvalidState);
        assert_ne!(r2.query().unwrap().rmr_context, RmrContext(0));
        r2.free().unwrap();
        lc.free().unwrap();
        p.close();
    }
);

// ------------------------------------------------------------------------------------------------
// Refusals

/// A Send with Invalidate of the context `setup` returns (built on `b`, with every LMR of `b`
/// that must stay unchanged and the RMRs that must stay bound, with their contexts): the
/// receive completes REMOTE_RESPONDER as RECEIVE_WITH_INVALIDATE without a context, the
/// connection breaks on both sides, the next receive is flushed, nothing else changes.
fn refused_invalidate(
    link: &str,
    setup: impl FnOnce(&Pair) -> (RmrContext, Vec<Lmr>, Vec<(Rmr, RmrContext)>),
) {
    let p = Pair::new(link);
    let (ctx, lmrs, rmrs) = setup(&p);
    // The first receive takes the message (its buffer may hold it); the second must stay.
    let first = filled(&p.b.pz, 64, 0x44);
    let second = filled(&p.b.pz, 64, 0x55);
    p.b.ep
        .post_recv(&[first.triplet(0, 64)], 500, CompletionFlags::empty())
        .unwrap();
    p.b.ep
        .post_recv(&[second.triplet(0, 64)], 501, CompletionFlags::empty())
        .unwrap();
    let mut all: Vec<&Lmr> = lmrs.iter().collect();
    all.push(&second);
    let before = snapshot(&all);
    send_invalidate(&p, ctx, CompletionFlags::empty());
    let s = p.a.req_done();
    assert_eq!((s.cookie.0, s.operation), (3, DtoOp::Send));
    if completes_at_peer(link) {
        assert_eq!(s.status, DtoStatus::RemoteResponder);
    } else {
        assert!(
            matches!(s.status, DtoStatus::Success | DtoStatus::Flushed),
            "{:?}",
            s.status
        );
    }
    let r = p.b.recv_done();
    assert_eq!((r.cookie.0, r.status), (500, DtoStatus::RemoteResponder));
    assert_eq!(
        (r.operation, r.rmr_context),
        (DtoOp::ReceiveWithInvalidate, None)
    );
    let r = p.b.recv_done();
    assert_eq!((r.cookie.0, r.status), (501, DtoStatus::Flushed));
    expect_broken(&p.a);
    expect_broken(&p.b);
    assert!(
        snapshot(&all) == before,
        "a refused invalidation changed memory"
    );
    for (rmr, ctx) in &rmrs {
        assert_eq!(rmr.query().unwrap().rmr_context, *ctx, "an RMR was unbound");
    }
    for l in &lmrs {
        l.query().unwrap();
    }
    // Nothing more: one end each.
    assert!(p.a.conn_evd.wait(Some(QUIET), 1).unwrap().is_none());
    assert!(p.b.conn_evd.wait(Some(QUIET), 1).unwrap().is_none());
    drop(rmrs);
    p.close();
}

// verbs: a plain registration (an LMR here) cannot be invalidated remotely, only a window.
per_link!(
    send_with_invalidate_of_an_lmr_context_fails_the_receive_and_breaks_the_connection,
    |link| {
        refused_invalidate(link, |p| {
            let lb = filled(&p.b.pz, 4096, 0x11);
            (lb.rmr_context(), vec![lb], Vec::new())
        })
    }
);

per_link!(
    send_with_invalidate_of_an_unknown_context_fails_the_receive_and_breaks_the_connection,
    |link| {
        refused_invalidate(link, |p| {
            let lb = filled(&p.b.pz, 4096, 0x11);
            let rmr = p.b.pz.rmr_create().unwrap();
            let ctx = bind(&rmr, &lb, 0, 64, &p.b.ep);
            // A context of the same index with another key, and one bound before and unbound.
            let stale = p.b.pz.rmr_create().unwrap();
            let old = bind(&stale, &lb, 64, 64, &p.b.ep);
            stale.free().unwrap();
            assert_ne!(old, ctx);
            (RmrContext(ctx.0 ^ 0x01), vec![lb], vec![(rmr, ctx)])
        })
    }
);

per_link!(
    send_with_invalidate_of_a_freed_rmr_context_fails_the_receive_and_breaks_the_connection,
    |link| {
        refused_invalidate(link, |p| {
            let lb = filled(&p.b.pz, 4096, 0x11);
            let stale = p.b.pz.rmr_create().unwrap();
            let old = bind(&stale, &lb, 64, 64, &p.b.ep);
            stale.free().unwrap();
            (old, vec![lb], Vec::new())
        })
    }
);

// RFC 5040: the STag must be associated with the receiving stream's protection domain; siw
// refuses another PD's with a remote protection error.
per_link!(
    send_with_invalidate_of_another_pzs_rmr_fails_the_receive_and_leaves_that_rmr_bound,
    |link| {
        refused_invalidate(link, |p| {
            let pz2 = p.b.ia.pz_create().unwrap();
            let l2 = filled(&pz2, 4096, 0x66);
            // An endpoint of the other PZ to bind through (never connected).
            let ep2 = p.b.ia.endpoint(&pz2).build().unwrap();
            let rmr = pz2.rmr_create().unwrap();
            let ctx = bind(&rmr, &l2, 0, 256, &ep2);
            (ctx, vec![l2], vec![(rmr, ctx)])
        })
    }
);

// ------------------------------------------------------------------------------------------------
// Solicited

// DAT_COMPLETION_SOLICITED_WAIT_FLAG on the send makes the peer's receive completion
// solicited, with Invalidate as without (RFC 5040 opcode 6).
per_link!(
    solicited_send_with_invalidate_wakes_a_solicited_wait_receive,
    |link| {
        let attr = EpAttr {
            recv_completion_flags: CompletionFlags::SOLICITED_WAIT,
            ..EpAttr::default()
        };
        let p = Pair::with_attrs(link, None, Some(&attr));
        let lb = filled(&p.b.pz, 4096, 0x11);
        let (r1, r2) = (p.b.pz.rmr_create().unwrap(), p.b.pz.rmr_create().unwrap());
        let (c1, c2) = (
            bind(&r1, &lb, 0, 64, &p.b.ep),
            bind(&r2, &lb, 64, 64, &p.b.ep),
        );
        let inbox = filled(&p.b.pz, 256, 0x22);
        for c in 0..2u64 {
            p.b.ep
                .post_recv(
                    &[inbox.triplet(c * 64, 64)],
                    20 + c,
                    CompletionFlags::empty(),
                )
                .unwrap();
        }
        // Unsolicited: completed, but it does not wake a waiter.
        send_invalidate(&p, c1, CompletionFlags::empty());
        assert_eq!(p.a.req_done().status, DtoStatus::Success);
        eventually("the unsolicited receive completes", || {
            p.b.recv_evd.query().unwrap().count == 1
        });
        assert!(
            p.b.recv_evd.wait(Some(QUIET), 1).unwrap().is_none(),
            "an unsolicited Send with Invalidate must not wake a SOLICITED_WAIT endpoint"
        );
        // Solicited: wakes it.
        send_invalidate(&p, c2, CompletionFlags::SOLICITED_WAIT);
        assert_eq!(p.a.req_done().status, DtoStatus::Success);
        let (ev, more) =
            p.b.recv_evd
                .wait(T, 1)
                .unwrap()
                .expect("the solicited one wakes");
        let first = ev.as_dto().unwrap().clone();
        assert_eq!(more, 1);
        let second = p.b.recv_evd.dequeue().unwrap().expect("the second receive");
        let second = second.as_dto().unwrap();
        for (d, cookie, ctx) in [(&first, 20, c1), (second, 21, c2)] {
            assert_eq!((d.cookie.0, d.status), (cookie, DtoStatus::Success));
            assert_eq!(d.operation, DtoOp::ReceiveWithInvalidate);
            assert_eq!(d.rmr_context, Some(ctx));
        }
        assert_eq!(r1.query().unwrap().rmr_context, RmrContext(0));
        assert_eq!(r2.query().unwrap().rmr_context, RmrContext(0));
        p.close();
    }
);

// ------------------------------------------------------------------------------------------------
// Posting

// dat_ep_post_send_with_invalidate takes what dat_ep_post_send takes: the same flags, and on
// a DISCONNECTED endpoint it is flushed at once.
per_link!(
    send_with_invalidate_on_a_disconnected_ep_is_flushed_at_once,
    |link| {
        let p = Pair::new(link);
        p.a.ep.disconnect(CloseFlags::Abrupt).unwrap();
        p.a.expect_conn(ConnectionEventKind::Disconnected);
        let la = p.a.lmr(64);
        p.a.ep
            .post_send_with_invalidate(
                &[la.triplet(0, 8)],
                9,
                CompletionFlags::empty(),
                RmrContext(0x1234),
            )
            .unwrap();
        let f = p.a.req_done();
        assert_eq!(
            (f.cookie.0, f.status, f.operation),
            (9, DtoStatus::Flushed, DtoOp::Send)
        );
        p.close();
    }
);

once!(send_with_invalidate_refuses_flags_a_send_refuses, |link| {
    let s = Side::new(link, None);
    let l = s.lmr(64);
    let e = expect_err(
        s.ep.post_send_with_invalidate(
            &[l.triplet(0, 8)],
            1,
            CompletionFlags::EVD_THRESHOLD,
            RmrContext(0x1234),
        ),
        ErrorType::InvalidParameter,
    );
    assert!(
        e.to_string().contains("ep_post_send_with_invalidate"),
        "{e}"
    );
    // Not connected: invalid state, as for a send.
    expect_err(
        s.ep.post_send_with_invalidate(
            &[l.triplet(0, 8)],
            1,
            CompletionFlags::empty(),
            RmrContext(0x1234),
        ),
        ErrorType::InvalidState,
    );
    s.close();
});
