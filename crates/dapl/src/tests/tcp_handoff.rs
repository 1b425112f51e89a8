//! White-box test of the tcp link's hand-off between its progress thread and a consumer that
//! polls (docs/architecture.md, "Who makes progress"), through the DAT API.
use std::time::{Duration, Instant};

use crate::*;

const T: Option<Duration> = Some(Duration::from_secs(10));

#[track_caller]
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

struct Side {
    ia: InterfaceAdapter,
    pz: Pz,
    recv: Evd,
    conn: Evd,
    ep: Endpoint,
}

fn side() -> Side {
    let (ia, _async) = InterfaceAdapter::open("tcp:127.0.0.1", 8).unwrap();
    let pz = ia.pz_create().unwrap();
    let recv = ia.evd_create(64, None, EvdFlags::DTO).unwrap();
    let conn = ia.evd_create(8, None, EvdFlags::CONNECTION).unwrap();
    let ep = ia
        .ep_create(&pz, Some(&recv), Some(&recv), Some(&conn), None)
        .unwrap();
    Side {
        ia,
        pz,
        recv,
        conn,
        ep,
    }
}

fn pair() -> (Side, Side) {
    let (a, b) = (side(), side());
    let cr_evd = b.ia.evd_create(8, None, EvdFlags::CR).unwrap();
    let qual = super::qual();
    let _psp = b.ia.psp_create(qual, &cr_evd, PspFlags::Consumer).unwrap();
    a.ep.connect(b.ia.query().unwrap().ia_address, qual, T, b"")
        .unwrap();
    let (ev, _) = cr_evd.wait(T, 1).unwrap();
    let cr = ev.as_cr_arrival().unwrap().cr.clone();
    cr.accept(Some(&b.ep), b"").unwrap();
    for s in [&a, &b] {
        let (ev, _) = s.conn.wait(T, 1).unwrap();
        assert_eq!(
            ev.as_connection().unwrap().kind,
            ConnectionEventKind::Established
        );
    }
    (a, b)
}

fn state(s: &Side) -> (bool, bool) {
    s.ia.0.tcp_link().handoff_state()
}

/// Sends message `n` (its own number) from `b` to `a`, from its own slot of `src`: a Send's
/// buffer must not change until it completed (SUPPRESS hides that; a post may wait in the
/// send queue while another thread transmits), and at most a few messages are in flight.
fn send(b: &Side, src: &Lmr, n: u64) {
    let slot = n % 64 * 8;
    src.write(slot as usize, &n.to_le_bytes()).unwrap();
    b.ep.post_send(&[src.triplet(slot, 8)], n, CompletionFlags::SUPPRESS)
        .unwrap();
}

/// Checks a completion on `a`: receive `n`, carrying `n`; its buffer goes up again.
fn took(a: &Side, dst: &Lmr, ev: Event, n: u64) {
    let d = ev.as_dto().unwrap();
    assert_eq!((d.status, d.cookie), (DtoStatus::Success, n));
    let slot = n % 64 * 8;
    let mut v = [0u8; 8];
    dst.read(slot as usize, &mut v).unwrap();
    assert_eq!(u64::from_le_bytes(v), n);
    a.ep.post_recv(&[dst.triplet(slot, 8)], n + 64, CompletionFlags::empty())
        .unwrap();
}

/// Polls `a`'s receive EVD, with a message from `b` now and then to wake the progress
/// thread (it decides when it wakes), until the thread has handed the connection over.
fn poll_until_handed_over(a: &Side, b: &Side, bufs: (&Lmr, &Lmr), n: (&mut u64, &mut u64)) {
    let ((src, dst), (sent, got)) = (bufs, n);
    eventually(
        "the progress thread hands the connection to the polling consumer",
        || {
            if *sent == *got {
                send(b, src, *sent);
                *sent += 1;
            }
            let deadline = Instant::now() + Duration::from_millis(2);
            while Instant::now() < deadline {
                if let Some(ev) = a.recv.dequeue().unwrap() {
                    took(a, dst, ev, *got);
                    *got += 1;
                }
            }
            state(a) == (false, true)
        },
    );
}

/// A consumer that polls its receive EVD takes the connections from the progress thread
/// (which then stops waking for each message) and reads the sockets itself; going to sleep
/// in evd_wait gives them back at once, and polls that stop give them back within `HOT`.
#[test]
fn progress_thread_leaves_connections_to_a_polling_consumer_and_takes_them_back() {
    let (a, b) = pair();
    assert_eq!(state(&a), (true, false), "nobody polls yet");
    let src = b.pz.lmr_allocate(8 * 64, MemPriv::ALL).unwrap();
    let dst = a.pz.lmr_allocate(8 * 64, MemPriv::ALL).unwrap();
    for i in 0..64u64 {
        a.ep.post_recv(&[dst.triplet(i * 8, 8)], i, CompletionFlags::empty())
            .unwrap();
    }
    // Long enough that only evd_wait can end it.
    a.ia.0
        .tcp_link()
        .set_handoff_window(Duration::from_secs(60));
    let (mut sent, mut got) = (0u64, 0u64);
    poll_until_handed_over(&a, &b, (&src, &dst), (&mut sent, &mut got));
    // Messages still arrive, through the polls alone.
    for _ in 0..8 {
        send(&b, &src, sent);
        sent += 1;
    }
    while got < sent {
        if let Some(ev) = a.recv.dequeue().unwrap() {
            took(&a, &dst, ev, got);
            got += 1;
        }
    }
    assert_eq!(state(&a), (false, true), "still handed over");
    // Sleeping in evd_wait hands them back before it sleeps.
    let e = a
        .recv
        .wait(Some(Duration::from_millis(200)), 1)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorType::TimeoutExpired);
    assert_eq!(
        state(&a),
        (true, false),
        "evd_wait gave the connection back"
    );
    // So does sleeping in cno_wait.
    poll_until_handed_over(&a, &b, (&src, &dst), (&mut sent, &mut got));
    let cno = a.ia.cno_create().unwrap();
    let e = cno.wait(Some(Duration::from_millis(50))).unwrap_err();
    assert_eq!(e.kind(), ErrorType::TimeoutExpired);
    assert_eq!(
        state(&a),
        (true, false),
        "cno_wait gave the connection back"
    );
    cno.free().unwrap();
    // Polls that just stop: the progress thread takes the connection back by itself, and
    // handles what arrives then.
    a.ia.0
        .tcp_link()
        .set_handoff_window(Duration::from_millis(5));
    poll_until_handed_over(&a, &b, (&src, &dst), (&mut sent, &mut got));
    eventually("the progress thread takes the connection back", || {
        state(&a) == (true, false)
    });
    send(&b, &src, sent);
    // Not evd_wait or dequeue: they would read the socket themselves (query does not).
    eventually("the progress thread handles the message", || {
        a.recv.query().unwrap().count == 1
    });
    let ev = a.recv.dequeue().unwrap().expect("the message");
    took(&a, &dst, ev, sent);
    a.ia.close(CloseFlags::Abrupt).unwrap();
    b.ia.close(CloseFlags::Abrupt).unwrap();
}
