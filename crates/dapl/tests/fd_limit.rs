//! Running out of file descriptors (tcp): a connect that cannot get a socket fails at once with
//! `DAT_INSUFFICIENT_RESOURCES` and a reason (the endpoint stays UNCONNECTED, no connection
//! event follows, and it connects once descriptors are back). Its own test binary: it lowers the
//! process's descriptor limit.

use std::time::Duration;

use dapl::*;
use dapl_testkit::kit::*;
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").unwrap().count() as u64
}

/// Sets the soft descriptor limit to `n`; returns the old limit.
fn limit_to(n: u64) -> Rlimit {
    let old = getrlimit(Resource::Nofile);
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(n),
            maximum: old.maximum,
        },
    )
    .unwrap();
    old
}

#[test]
fn a_connect_without_a_descriptor_fails_at_once_with_insufficient_resources() {
    let (ia, _async) = InterfaceAdapter::open("tcp", 64).unwrap();
    let pz = ia.pz_create().unwrap();
    let conn = ia.evd_create(256, None, EvdFlags::CONNECTION).unwrap();
    let dto = ia.evd_create(256, None, EvdFlags::DTO).unwrap();
    let (_psp, cr_evd, q, addr) = listen(&ia);
    let ep = || {
        ia.endpoint(&pz)
            .dto_evd(&dto)
            .connect_evd(&conn)
            .build()
            .unwrap()
    };
    let old = limit_to(open_fds() + 12);
    let mut connected = Vec::new();
    let refused = loop {
        assert!(connected.len() < 20, "the limit was never reached");
        let (a, b) = (ep(), ep());
        match a.connect(addr.ip(), q, T, b"") {
            Ok(()) => {
                expect_cr(&cr_evd).cr.accept(Some(&b), b"").unwrap();
                expect_conn(&conn, ConnectionEventKind::Established);
                expect_conn(&conn, ConnectionEventKind::Established);
                connected.push((a, b));
            }
            Err(e) => break (a, b, e),
        }
    };
    let (a, b, e) = refused;
    setrlimit(Resource::Nofile, old).unwrap();
    assert_eq!(e.kind(), ErrorType::InsufficientResources, "{e}");
    assert!(e.to_string().contains("file descriptors"), "{e}");
    assert_eq!(a.state(), EpState::Unconnected);
    assert!(
        conn.wait(Some(Duration::from_millis(300)), 1)
            .unwrap()
            .is_none(),
        "no connection event for a connect that never started"
    );
    // Descriptors back: the same endpoint connects.
    a.connect(addr.ip(), q, T, b"").unwrap();
    expect_cr(&cr_evd).cr.accept(Some(&b), b"").unwrap();
    expect_conn(&conn, ConnectionEventKind::Established);
    expect_conn(&conn, ConnectionEventKind::Established);
    assert!(!connected.is_empty());
    drop(connected);
    ia.close(CloseFlags::Abrupt).unwrap();
}
