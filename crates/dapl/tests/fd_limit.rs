//! Running out of file descriptors (tcp and shm).
//!
//! - A connect that cannot get a descriptor fails at once with `DAT_INSUFFICIENT_RESOURCES` and
//!   a reason (the endpoint stays UNCONNECTED, no connection event follows, and it connects
//!   once descriptors are back).
//! - A listener that cannot get a descriptor for a waiting connection refuses it at once (the
//!   requester gets a connection event, not silence until its timeout) and serves the next
//!   requester once descriptors are back.
//!
//! Its own test binary: it lowers the process's descriptor limit (one test at a time).

use std::fs::File;
use std::sync::Mutex;
use std::time::Duration;

use dapl::*;
use dapl_testkit::kit::*;
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// The tests share the process's descriptor limit.
static LIMIT: Mutex<()> = Mutex::new(());

fn open_fds() -> u64 {
    // Less the directory's own descriptor, open while it is read.
    std::fs::read_dir("/proc/self/fd").unwrap().count() as u64 - 1
}

/// The process's descriptor limit lowered; put back on drop.
struct Lowered {
    old: Rlimit,
    /// Descriptors held so that exactly as many as asked are left.
    held: Vec<File>,
}

impl Lowered {
    /// Lowers the soft limit to leave `spare` descriptors free.
    fn leaving(spare: u64) -> Lowered {
        let old = getrlimit(Resource::Nofile);
        let limit = open_fds() + spare;
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(limit),
                maximum: old.maximum,
            },
        )
        .unwrap();
        Lowered {
            old,
            held: Vec::new(),
        }
    }

    /// Holds descriptors until exactly `n` are left: takes every one there is (the limit
    /// bounds descriptor numbers, not their count), then gives `n` back.
    fn leave(&mut self, n: u64) {
        loop {
            match File::open("/dev/null") {
                Ok(f) => self.held.push(f),
                Err(e) if e.raw_os_error() == Some(libc::EMFILE) => break,
                Err(e) => panic!("{e}"),
            }
        }
        for _ in 0..n {
            self.held.pop().expect("descriptors to give back");
        }
    }
}

impl Drop for Lowered {
    fn drop(&mut self) {
        self.held.clear();
        setrlimit(Resource::Nofile, self.old).unwrap();
    }
}

struct Setup {
    ia: InterfaceAdapter,
    pz: Pz,
    conn: Evd,
    dto: Evd,
    cr_evd: Evd,
    q: ConnQual,
    addr: IaAddress,
    _psp: ServicePoint,
    _async: Evd,
}

impl Setup {
    fn new(link: &str) -> Setup {
        let (ia, _async) = InterfaceAdapter::open(link, 64).unwrap();
        let pz = ia.pz_create().unwrap();
        let conn = ia.evd_create(256, None, EvdFlags::CONNECTION).unwrap();
        let dto = ia.evd_create(256, None, EvdFlags::DTO).unwrap();
        let (_psp, cr_evd, q, addr) = listen(&ia);
        Setup {
            ia,
            pz,
            conn,
            dto,
            cr_evd,
            q,
            addr,
            _psp,
            _async,
        }
    }

    fn ep(&self) -> Endpoint {
        self.ia
            .endpoint(&self.pz)
            .dto_evd(&self.dto)
            .connect_evd(&self.conn)
            .build()
            .unwrap()
    }

    fn connect_pair(&self, a: &Endpoint, b: &Endpoint) {
        a.connect(self.addr.ip(), self.q, T, b"").unwrap();
        expect_cr(&self.cr_evd).cr.accept(Some(b), b"").unwrap();
        expect_conn(&self.conn, ConnectionEventKind::Established);
        expect_conn(&self.conn, ConnectionEventKind::Established);
    }

    /// How many descriptors `ep.connect` takes before it returns (the requester's share), and
    /// the pair it connected (dropping it would raise events).
    fn descriptors_of_a_connect(&self) -> (u64, (Endpoint, Endpoint)) {
        let (a, b) = (self.ep(), self.ep());
        let before = open_fds();
        a.connect(self.addr.ip(), self.q, T, b"").unwrap();
        let n = open_fds() - before;
        expect_cr(&self.cr_evd).cr.accept(Some(&b), b"").unwrap();
        expect_conn(&self.conn, ConnectionEventKind::Established);
        expect_conn(&self.conn, ConnectionEventKind::Established);
        assert!(n >= 1, "a connect takes a descriptor");
        (n, (a, b))
    }
}

fn a_connect_without_a_descriptor_fails_at_once_with_insufficient_resources(link: &str) {
    let _serial = LIMIT.lock().unwrap_or_else(|e| e.into_inner());
    let s = Setup::new(link);
    let mut lowered = Lowered::leaving(16);
    // Connections made under the limit stay up through what follows.
    let kept = (s.ep(), s.ep());
    s.connect_pair(&kept.0, &kept.1);
    let (a, b) = (s.ep(), s.ep());
    lowered.leave(0);
    let e = a.connect(s.addr.ip(), s.q, T, b"").unwrap_err();
    drop(lowered);
    assert_eq!(e.kind(), ErrorType::InsufficientResources, "{e}");
    assert!(e.to_string().contains("file descriptors"), "{e}");
    assert_eq!(a.state(), EpState::Unconnected);
    assert!(
        s.conn
            .wait(Some(Duration::from_millis(300)), 1)
            .unwrap()
            .is_none(),
        "no connection event for a connect that never started"
    );
    // Descriptors back: the same endpoint connects.
    s.connect_pair(&a, &b);
    assert_eq!(kept.0.state(), EpState::Connected);
    s.ia.close(CloseFlags::Abrupt).unwrap();
}

fn a_listener_without_a_descriptor_refuses_the_requester_at_once(link: &str) {
    let _serial = LIMIT.lock().unwrap_or_else(|e| e.into_inner());
    let s = Setup::new(link);
    let (need, _measured) = s.descriptors_of_a_connect();
    let (a, b) = (s.ep(), s.ep());
    let mut lowered = Lowered::leaving(need + 8);
    // The requester gets every descriptor left: the listener has none to accept with.
    lowered.leave(need);
    a.connect(s.addr.ip(), s.q, T, b"").unwrap();
    let ev = s
        .conn
        .wait(Some(Duration::from_secs(5)), 1)
        .unwrap()
        .expect("the refused requester hears of it, well before its timeout");
    let ev = ev.0.as_connection().expect("a connection event").clone();
    drop(lowered);
    // Refused by the provider at the other end, not by its consumer.
    assert_eq!(ev.kind, ConnectionEventKind::NonPeerRejected, "{ev:?}");
    assert!(
        s.cr_evd
            .wait(Some(Duration::from_millis(100)), 1)
            .unwrap()
            .is_none(),
        "no CR arrival for a refused connection"
    );
    // Descriptors back: the listener serves the next requester.
    let (c, d) = (s.ep(), s.ep());
    s.connect_pair(&c, &d);
    drop(b);
    s.ia.close(CloseFlags::Abrupt).unwrap();
}

#[test]
fn a_connect_without_a_descriptor_fails_at_once_with_insufficient_resources_tcp() {
    a_connect_without_a_descriptor_fails_at_once_with_insufficient_resources("tcp");
}

#[test]
fn a_connect_without_a_descriptor_fails_at_once_with_insufficient_resources_shm() {
    a_connect_without_a_descriptor_fails_at_once_with_insufficient_resources("shm");
}

#[test]
fn a_listener_without_a_descriptor_refuses_the_requester_at_once_tcp() {
    a_listener_without_a_descriptor_refuses_the_requester_at_once("tcp");
}

#[test]
fn a_listener_without_a_descriptor_refuses_the_requester_at_once_shm() {
    a_listener_without_a_descriptor_refuses_the_requester_at_once("shm");
}
