//! The engine's fault injection (`engine::faults`) over every link, through the DAT API: a
//! connection cut after some messages ends on both sides, once each, and every DTO
//! posted on either side completes exactly once; a dropped or delayed message does not hang
//! the sender.

use std::collections::HashMap;
use std::time::Duration;

use super::qual;
use crate::engine::faults::{install, Plan};
use crate::*;

const LINKS: &[&str] = &["loopback", "tcp"];
const T: Option<Duration> = Some(Duration::from_secs(10));

struct Side {
    ia: InterfaceAdapter,
    lmr: Lmr,
    dto: Evd,
    conn: Evd,
    ep: Endpoint,
}

fn side(link: &str) -> Side {
    let (ia, _async) = InterfaceAdapter::open(link, 64).unwrap();
    let pz = ia.pz_create().unwrap();
    let lmr = pz.lmr_allocate(1 << 16, MemPriv::ALL).unwrap();
    let dto = ia.evd_create(256, None, EvdFlags::DTO).unwrap();
    let conn = ia.evd_create(8, None, EvdFlags::CONNECTION).unwrap();
    let ep = ia
        .ep_create(&pz, Some(&dto), Some(&dto), Some(&conn), None)
        .unwrap();
    Side {
        ia,
        lmr,
        dto,
        conn,
        ep,
    }
}

/// A connected pair; `plan` applies to A's outbound messages.
fn pair(link: &str, qual: u64, plan: Plan) -> (Side, Side) {
    let (a, b) = (side(link), side(link));
    install(a.ep.id(), plan);
    let cr_evd = b.ia.evd_create(8, None, EvdFlags::CR).unwrap();
    let _psp = b.ia.psp_create(qual, &cr_evd, PspFlags::Consumer).unwrap();
    a.ep.connect(b.ia.query().unwrap().ia_address, qual, T, b"")
        .unwrap();
    let (ev, _) = cr_evd.wait(T, 1).unwrap();
    ev.as_cr_arrival()
        .unwrap()
        .cr
        .accept(Some(&b.ep), b"")
        .unwrap();
    for s in [&a, &b] {
        let (ev, _) = s.conn.wait(T, 1).unwrap();
        assert_eq!(
            ev.as_connection().unwrap().kind,
            ConnectionEventKind::Established
        );
    }
    (a, b)
}

/// Waits for `n` completions on `evd`, and returns cookie -> status; fails on a duplicate.
fn completions(evd: &Evd, n: usize) -> HashMap<u64, DtoStatus> {
    let mut got = HashMap::new();
    while got.len() < n {
        let (ev, _) = evd.wait(T, 1).expect("a completion");
        let c = ev.as_dto().expect("a DTO completion").clone();
        assert!(
            got.insert(c.cookie, c.status).is_none(),
            "cookie {} completed twice",
            c.cookie
        );
    }
    got
}

fn no_more(evd: &Evd) {
    assert!(evd.wait(Some(Duration::from_millis(100)), 1).is_err());
}

#[test]
fn a_cut_connection_breaks_both_sides_once_and_completes_every_dto_once() {
    for link in LINKS {
        let plan = Plan {
            cut_after_msgs: Some(3),
            ..Plan::default()
        };
        let (a, b) = pair(link, qual(), plan);
        for k in 0..6u64 {
            b.ep.post_recv(
                &[b.lmr.triplet(k * 64, 64)],
                100 + k,
                CompletionFlags::empty(),
            )
            .unwrap();
        }
        for k in 0..5u64 {
            // Posts after the cut are flushed at once: still exactly one completion each.
            a.ep.post_send(&[a.lmr.triplet(k * 64, 8)], k, CompletionFlags::empty())
                .unwrap();
        }
        let got = completions(&a.dto, 5);
        let ok = got.values().filter(|s| **s == DtoStatus::Success).count();
        assert_eq!(ok, 3, "{link}: the first three went out: {got:?}");
        for k in 3..5 {
            assert_eq!(got[&k], DtoStatus::Flushed, "{link}: send {k}");
        }
        // A saw its transport break. B is told the connection ended: BROKEN over loopback,
        // and over tcp the peer sees the stream close (a cut without a protocol error sends
        // no Terminate), so DISCONNECTED; either way exactly one terminal event.
        let (ev, _) = a.conn.wait(T, 1).unwrap();
        let kind = ev.as_connection().unwrap().kind;
        assert_eq!(kind, ConnectionEventKind::Broken, "{link}: A");
        let (ev, _) = b.conn.wait(T, 1).unwrap();
        let kind = ev.as_connection().unwrap().kind;
        assert!(
            matches!(
                kind,
                ConnectionEventKind::Broken | ConnectionEventKind::Disconnected
            ),
            "{link}: B got {kind:?}"
        );
        no_more(&a.conn);
        no_more(&b.conn);
        // B: the three that arrived complete, the rest are flushed; each once.
        let got = completions(&b.dto, 6);
        let ok: Vec<_> = (100..106)
            .filter(|c| got[c] == DtoStatus::Success)
            .collect();
        assert_eq!(ok, [100, 101, 102], "{link}: {got:?}");
        no_more(&a.dto);
        no_more(&b.dto);
        a.ia.close(CloseFlags::Abrupt).unwrap();
        b.ia.close(CloseFlags::Abrupt).unwrap();
    }
}

#[test]
fn a_delayed_connection_delivers_everything_in_order() {
    for link in LINKS {
        let plan = Plan {
            delay: Some(Duration::from_millis(5)),
            ..Plan::default()
        };
        let (a, b) = pair(link, qual(), plan);
        for k in 0..4u64 {
            b.ep.post_recv(
                &[b.lmr.triplet(k * 64, 64)],
                100 + k,
                CompletionFlags::empty(),
            )
            .unwrap();
            a.lmr.write(k as usize * 64, &[k as u8 + 1; 8]).unwrap();
        }
        for k in 0..4u64 {
            a.ep.post_send(&[a.lmr.triplet(k * 64, 8)], k, CompletionFlags::empty())
                .unwrap();
        }
        let got = completions(&a.dto, 4);
        assert!(got.values().all(|s| *s == DtoStatus::Success), "{link}");
        let mut order = Vec::new();
        for _ in 0..4 {
            let (ev, _) = b.dto.wait(T, 1).unwrap();
            order.push(ev.as_dto().unwrap().cookie);
        }
        assert_eq!(order, [100, 101, 102, 103], "{link}");
        for k in 0..4u64 {
            assert_eq!(
                b.lmr.to_vec(k as usize * 64, 8).unwrap(),
                [k as u8 + 1; 8],
                "{link}"
            );
        }
        a.ia.close(CloseFlags::Abrupt).unwrap();
        b.ia.close(CloseFlags::Abrupt).unwrap();
    }
}

#[test]
fn a_dropped_message_hangs_nothing_and_every_dto_completes_once() {
    for link in LINKS {
        let plan = Plan {
            drop_nth: Some(1),
            ..Plan::default()
        };
        let (a, b) = pair(link, qual(), plan);
        for k in 0..3u64 {
            b.ep.post_recv(
                &[b.lmr.triplet(k * 64, 64)],
                100 + k,
                CompletionFlags::empty(),
            )
            .unwrap();
        }
        for k in 0..3u64 {
            a.ep.post_send(&[a.lmr.triplet(k * 64, 8)], k, CompletionFlags::empty())
                .unwrap();
        }
        // The sender's three complete, once each (the lost one as if sent, or flushed when
        // the peer noticed the gap and broke the connection).
        completions(&a.dto, 3);
        // However the peer took the gap (loopback: it never sees the message; tcp: the next
        // Send's sequence number is out of order, a Terminate breaks the connection), the
        // connection can be ended and every receive completes exactly once, at most two of
        // them with data.
        a.ep.disconnect(CloseFlags::Abrupt).unwrap();
        let (ev, _) = b.conn.wait(T, 1).unwrap();
        assert!(ev.as_connection().is_some(), "{link}");
        let got = completions(&b.dto, 3);
        let ok = got.values().filter(|s| **s == DtoStatus::Success).count();
        assert!(ok <= 2, "{link}: {got:?}");
        no_more(&b.dto);
        no_more(&a.dto);
        a.ia.close(CloseFlags::Abrupt).unwrap();
        b.ia.close(CloseFlags::Abrupt).unwrap();
    }
}
