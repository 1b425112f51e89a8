//! The engine's fault injection (`dapl::testing::inject_faults`: a plan that wraps whatever
//! connection a link establishes for an endpoint) over every link, through the DAT API. Under
//! a cut connection both sides end once each and every DTO posted on either side completes
//! exactly once; a delayed connection delivers everything in order; a dropped message hangs
//! nothing.

use std::collections::HashMap;
use std::time::Duration;

use dapl::testing::{inject_faults, FaultPlan};
use dapl::*;
use dapl_testkit::kit::*;

/// A connected pair on `link` whose active side `a` transmits under `plan`.
fn pair(link: &str, plan: FaultPlan) -> Pair {
    let a = Side::new(link, None);
    inject_faults(&a.ep, plan);
    Pair::connect(a, Side::new(link, None))
}

/// Waits for `n` completions on `evd`, and returns cookie -> status; fails on a duplicate.
#[track_caller]
fn completions(evd: &Evd, n: usize) -> HashMap<u64, DtoStatus> {
    let mut got = HashMap::new();
    while got.len() < n {
        let c = Side::dto(evd);
        assert!(
            got.insert(c.cookie.0, c.status).is_none(),
            "cookie {} completed twice",
            c.cookie
        );
    }
    got
}

#[track_caller]
fn no_more(evd: &Evd) {
    let r = evd.wait(Some(Duration::from_millis(100)), 1);
    assert!(matches!(r, Ok(None)), "expected nothing more: {r:?}");
}

/// The connection event that ends `s`'s connection: exactly one.
#[track_caller]
fn ended_once(s: &Side) -> ConnectionEventKind {
    let (ev, _) = s.conn_evd.wait(T, 1).unwrap().expect("an event in time");
    let kind = ev.as_connection().expect("a connection event").kind;
    no_more(&s.conn_evd);
    kind
}

/// A cut after `sent_before_cut` of five 8-byte Sends (by message count or by bytes): those
/// complete, the rest are flushed, each once; A reports BROKEN; B one terminal event (BROKEN
/// over loopback; over tcp the peer sees the stream close, and a cut without a protocol error
/// sends no Terminate: DISCONNECTED); B's receives complete, once each, with data for the
/// Sends that went out.
fn cut_connection(link: &str, plan: FaultPlan, sent_before_cut: u64) {
    let p = pair(link, plan);
    let (la, lb) = (p.a.lmr(4096), p.b.lmr(4096));
    for k in 0..6u64 {
        p.b.ep
            .post_recv(&[lb.triplet(k * 64, 64)], 100 + k, CompletionFlags::empty())
            .unwrap();
    }
    for k in 0..5u64 {
        // Posts after the cut are flushed at once: still exactly one completion each.
        p.a.ep
            .post_send(&[la.triplet(k * 64, 8)], k, CompletionFlags::empty())
            .unwrap();
    }
    let got = completions(&p.a.req_evd, 5);
    for k in 0..5 {
        let want = if k < sent_before_cut {
            DtoStatus::Success
        } else {
            DtoStatus::Flushed
        };
        assert_eq!(got[&k], want, "send {k}: {got:?}");
    }
    assert_eq!(ended_once(&p.a), ConnectionEventKind::Broken, "A");
    let kind = ended_once(&p.b);
    assert!(
        matches!(
            kind,
            ConnectionEventKind::Broken | ConnectionEventKind::Disconnected
        ),
        "B got {kind:?}"
    );
    let got = completions(&p.b.recv_evd, 6);
    let ok: Vec<u64> = (100..106)
        .filter(|c| got[c] == DtoStatus::Success)
        .collect();
    let want: Vec<u64> = (100..100 + sent_before_cut).collect();
    assert_eq!(ok, want, "{got:?}");
    no_more(&p.a.req_evd);
    no_more(&p.b.recv_evd);
    p.close();
}

per_link!(
    a_cut_connection_breaks_both_sides_once_and_completes_every_dto_once,
    |link| {
        let plan = FaultPlan {
            cut_after_msgs: Some(3),
            ..FaultPlan::default()
        };
        cut_connection(link, plan, 3);
    }
);

per_link!(
    a_connection_cut_after_some_bytes_breaks_both_sides_once_and_completes_every_dto_once,
    |link| {
        // 8-byte Sends: the third would pass 20 bytes, so two go out.
        let plan = FaultPlan {
            cut_after_bytes: Some(20),
            ..FaultPlan::default()
        };
        cut_connection(link, plan, 2);
    }
);

per_link!(a_delayed_connection_delivers_everything_in_order, |link| {
    let plan = FaultPlan {
        delay: Some(Duration::from_millis(5)),
        ..FaultPlan::default()
    };
    let p = pair(link, plan);
    let (la, lb) = (p.a.lmr(4096), p.b.lmr(4096));
    for k in 0..4u64 {
        p.b.ep
            .post_recv(&[lb.triplet(k * 64, 64)], 100 + k, CompletionFlags::empty())
            .unwrap();
        la.write(k as usize * 64, &[k as u8 + 1; 8]).unwrap();
    }
    for k in 0..4u64 {
        p.a.ep
            .post_send(&[la.triplet(k * 64, 8)], k, CompletionFlags::empty())
            .unwrap();
    }
    let got = completions(&p.a.req_evd, 4);
    assert!(got.values().all(|s| *s == DtoStatus::Success), "{got:?}");
    let order: Vec<u64> = (0..4).map(|_| p.b.recv_done().cookie.0).collect();
    assert_eq!(order, [100, 101, 102, 103]);
    for k in 0..4u64 {
        assert_eq!(
            lb.to_vec(k as usize * 64, 8).unwrap(),
            [k as u8 + 1; 8],
            "message {k}"
        );
    }
    p.close();
});

per_link!(
    a_dropped_message_hangs_nothing_and_every_dto_completes_once,
    |link| {
        let plan = FaultPlan {
            drop_nth: Some(1),
            ..FaultPlan::default()
        };
        let p = pair(link, plan);
        let (la, lb) = (p.a.lmr(4096), p.b.lmr(4096));
        for k in 0..3u64 {
            p.b.ep
                .post_recv(&[lb.triplet(k * 64, 64)], 100 + k, CompletionFlags::empty())
                .unwrap();
        }
        for k in 0..3u64 {
            p.a.ep
                .post_send(&[la.triplet(k * 64, 8)], k, CompletionFlags::empty())
                .unwrap();
        }
        // The sender's three complete, once each (the lost one as if sent, or flushed when
        // the peer noticed the gap and broke the connection).
        completions(&p.a.req_evd, 3);
        // However the peer took the gap (loopback: it never sees the message; tcp: the next
        // Send's sequence number is out of order, a Terminate breaks the connection), the
        // connection can be ended and every receive completes exactly once, at most two of
        // them with data.
        p.a.ep.disconnect(CloseFlags::Abrupt).unwrap();
        let (ev, _) = p.b.conn_evd.wait(T, 1).unwrap().expect("an event in time");
        assert!(ev.as_connection().is_some());
        let got = completions(&p.b.recv_evd, 3);
        let ok = got.values().filter(|s| **s == DtoStatus::Success).count();
        assert!(ok <= 2, "{got:?}");
        no_more(&p.b.recv_evd);
        no_more(&p.a.req_evd);
        p.close();
    }
);
