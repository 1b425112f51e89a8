//! The library's `tracing` events (docs/tracing.md): a connection's lifecycle on every link,
//! named by its endpoint and connection ids; a Terminate with its cause, sent and received, and
//! the break it causes; an EVD overflow.
//!
//! One subscriber for the whole test binary, installed globally (the link's threads emit
//! events too), writes every event, as the text `libdaplrs.so`'s subscriber prints, into a
//! buffer. The tests run in parallel, so each looks only at the lines naming its own objects.

use std::io;
use std::sync::{Mutex, Once};

use dapl::*;
use dapl_testkit::kit::*;

static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// Appends what the subscriber writes (one whole event per write) to `LOG`.
struct Capture;

impl io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        LOG.lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn capture() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(|| Capture)
            .without_time()
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    });
}

/// The captured lines whose message contains `msg` and that have every field of `fields`
/// (`("ep", "5")` matches the token `ep=5`).
fn lines(msg: &str, fields: &[(&str, &str)]) -> Vec<String> {
    let log = LOG.lock().unwrap_or_else(|p| p.into_inner());
    String::from_utf8_lossy(&log)
        .lines()
        .filter(|l| l.contains(msg))
        .filter(|l| {
            fields.iter().all(|(k, v)| {
                let want = format!("{k}={v}");
                l.split_whitespace().any(|t| t == want)
            })
        })
        .map(str::to_owned)
        .collect()
}

/// The value of field `key` in `line`.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let prefix = format!("{key}=");
    line.split_whitespace()
        .find_map(|t| t.strip_prefix(&prefix))
}

/// Waits (events of the link's threads may come a moment after the DAT event) until exactly
/// one line matches, and returns it.
#[track_caller]
fn one(msg: &str, fields: &[(&str, &str)]) -> String {
    eventually(&format!("a `{msg}` event with {fields:?}"), || {
        !lines(msg, fields).is_empty()
    });
    let found = lines(msg, fields);
    assert_eq!(
        found.len(),
        1,
        "one `{msg}` event with {fields:?}: {found:#?}"
    );
    found.into_iter().next().unwrap()
}

per_link!(
    a_connection_is_traced_from_connect_to_its_end_by_endpoint_and_connection,
    |link| {
        capture();
        let p = Pair::new(link);
        let (a, b) = (p.a.ep.id().to_string(), p.b.ep.id().to_string());
        let (ia_a, ia_b) = (p.a.ia.id().to_string(), p.b.ia.id().to_string());
        p.a.ep.disconnect(CloseFlags::Graceful).unwrap();
        p.a.expect_conn(ConnectionEventKind::Disconnected);
        p.b.expect_conn(ConnectionEventKind::Disconnected);

        one("IA opened", &[("ia", &ia_a)]);
        one("EP created", &[("ia", &ia_a), ("ep", &a)]);
        one("connecting", &[("ia", &ia_a), ("ep", &a), ("attempt", "1")]);
        let cr = one("connection request", &[("ia", &ia_b)]);
        let cr = field(&cr, "cr").expect("a cr id").to_owned();
        one("accepting", &[("cr", &cr), ("ep", &b), ("attempt", "1")]);
        for ep in [&a, &b] {
            let up = one("connection established", &[("ep", ep), ("attempt", "1")]);
            let conn = field(&up, "conn").expect("the connection's id");
            let end = one("connection ended", &[("ep", ep), ("conn", conn)]);
            assert_eq!(field(&end, "kind"), Some("Disconnected"), "{end}");
            assert!(end.contains("DEBUG dapl::engine::qp::cm"), "{end}");
        }
        one(
            "disconnect",
            &[("ep", &a), ("flags", "Graceful"), ("state", "Connected")],
        );
        p.close();
        one("IA closed", &[("ia", &ia_a)]);
    }
);

/// The tcp link's own steps carry the same connection id as the engine's events.
#[test]
fn a_tcp_connection_traces_its_dial_and_mpa_exchange_under_the_engines_connection_id() {
    capture();
    let p = Pair::new("tcp");
    let (a, b) = (p.a.ep.id().to_string(), p.b.ep.id().to_string());
    let up_a = one("connection established", &[("ep", &a)]);
    let conn_a = field(&up_a, "conn").unwrap();
    one("dialling", &[("conn", conn_a), ("ep", &a)]);
    let reply = one("MPA Reply received", &[("conn", conn_a)]);
    assert!(reply.contains("dapl::link::tcp::conn::mpa"), "{reply}");
    let up_b = one("connection established", &[("ep", &b)]);
    let conn_b = field(&up_b, "conn").unwrap();
    one("TCP connection accepted", &[("conn", conn_b)]);
    one("MPA Reply sent", &[("conn", conn_b), ("ep", &b)]);
    p.close();
}

/// An RDMA Write to an STag the peer never registered: the peer sends a Terminate (DDP tagged
/// buffer error, invalid STag: DDP/1/0x00), both sides log it with its cause, and both
/// connections break.
#[test]
fn a_terminate_is_traced_with_its_cause_on_both_sides_and_the_break_follows() {
    capture();
    let p = Pair::new("tcp");
    let (a, b) = (p.a.ep.id().to_string(), p.b.ep.id().to_string());
    let src = p.a.lmr(64);
    p.a.ep
        .post_rdma_write(
            &[src.triplet(0, 8)],
            1,
            &RmrTriplet::new(0x00de_ad00, 0, 8),
            CompletionFlags::empty(),
        )
        .unwrap();
    p.a.expect_conn(ConnectionEventKind::Broken);
    p.b.expect_conn(ConnectionEventKind::Broken);

    let sent = one("Terminate sent", &[("ep", &b), ("cause", "DDP/1/0x00")]);
    assert!(sent.contains(" WARN "), "{sent}");
    assert!(sent.contains("detail=DdpTagged(InvalidStag)"), "{sent}");
    let got = one("Terminate received", &[("ep", &a), ("cause", "DDP/1/0x00")]);
    assert!(got.contains("read_refused=false"), "{got}");
    for ep in [&a, &b] {
        let broken = one("connection broken", &[("ep", ep)]);
        assert!(broken.contains(" INFO "), "{broken}");
        assert_eq!(field(&broken, "kind"), Some("Broken"), "{broken}");
    }
    p.close();
}

/// The same refusal over the links without Terminates: loopback names the memory table's
/// fault, shm the line of the check that refused the peer's record; both connections break.
#[test]
fn a_refused_write_is_traced_with_its_cause_over_loopback_and_shm() {
    capture();
    for link in ["loopback", "shm"] {
        let p = Pair::new(link);
        let (a, b) = (p.a.ep.id().to_string(), p.b.ep.id().to_string());
        let src = p.a.lmr(64);
        p.a.ep
            .post_rdma_write(
                &[src.triplet(0, 8)],
                1,
                &RmrTriplet::new(0x00de_ad00, 0, 8),
                CompletionFlags::empty(),
            )
            .unwrap();
        p.a.expect_conn(ConnectionEventKind::Broken);
        p.b.expect_conn(ConnectionEventKind::Broken);
        if link == "loopback" {
            let line = one(
                "message refused by the peer",
                &[
                    ("peer_ep", &b),
                    ("status", "RemoteAccess"),
                    ("cause", "InvalidStag"),
                ],
            );
            assert!(line.contains(" WARN dapl::link::loopback"), "{line}");
        } else {
            let line = one(
                "broken Close sent",
                &[("ep", &b), ("read_refused", "false")],
            );
            let at = field(&line, "at").expect("the refusing check's line");
            assert!(at.starts_with("crates/dapl/src/link/shm/"), "{line}");
            one("broken Close received", &[("ep", &a)]);
        }
        for ep in [&a, &b] {
            one("connection broken", &[("ep", ep), ("kind", "Broken")]);
        }
        p.close();
    }
}

/// Three flushed receives into a receive EVD of two entries: the third is dropped, and the
/// overflow is an event naming the EVD and its IA.
#[test]
fn an_evd_overflow_is_traced_with_the_evd_and_its_ia() {
    capture();
    let s = Side::with_qlen("loopback", None, 2);
    let buf = s.lmr(64);
    for cookie in 0..3 {
        s.ep.post_recv(&[buf.triplet(0, 8)], cookie, CompletionFlags::empty())
            .unwrap();
    }
    let (evd, ia) = (s.recv_evd.id().to_string(), s.ia.id().to_string());
    assert!(lines("EVD overflow", &[("evd", &evd)]).is_empty());
    s.ep.free().unwrap();
    let line = one("EVD overflow", &[("evd", &evd), ("ia", &ia), ("qlen", "2")]);
    assert!(line.contains(" WARN dapl::evd"), "{line}");
    let (ev, _) = s
        .async_evd
        .wait(T, 1)
        .unwrap()
        .expect("the overflow's async event");
    assert!(format!("{ev:?}").contains("EvdOverflow"), "{ev:?}");
    s.close();
}
