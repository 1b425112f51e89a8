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
use std::net::Ipv4Addr;
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

/// The listening process of the listener test (an ignored test run as a child): listens, then
/// on the parent's word holds every descriptor it may have, then gives them back and accepts.
/// Lines in on stdin, out on stdout.
#[test]
#[ignore = "run by a_listener_without_a_descriptor_refuses_the_requester_at_once_*"]
fn listener_child() {
    let link = std::env::var("DAPLRS_FD_CHILD_LINK").expect("run by the parent test");
    let s = Setup::new(&link);
    let mut lines = std::io::stdin().lines();
    let mut next = move || lines.next().expect("a line from the parent").unwrap();
    println!("qual={}", s.q);
    assert_eq!(next(), "starve");
    let mut lowered = Lowered::leaving(16);
    lowered.leave(0);
    println!("starved");
    assert_eq!(next(), "feed");
    drop(lowered);
    // The refused connection never became a CR arrival.
    assert!(
        s.cr_evd
            .wait(Some(Duration::from_millis(100)), 1)
            .unwrap()
            .is_none(),
        "no CR arrival for a refused connection"
    );
    println!("fed");
    let b = s.ep();
    expect_cr(&s.cr_evd).cr.accept(Some(&b), b"").unwrap();
    expect_conn(&s.conn, ConnectionEventKind::Established);
    assert_eq!(next(), "exit");
    s.ia.close(CloseFlags::Abrupt).unwrap();
}

/// A listener that cannot get a descriptor for a waiting connection refuses it at once
/// (NON_PEER_REJECTED at the requester, no CR arrival at the listener) and serves the next
/// requester once descriptors are back. The listener is another process (this binary's
/// `listener_child`), so nothing of the requester's counts against its descriptors.
fn a_listener_without_a_descriptor_refuses_the_requester_at_once(link: &str) {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    // The other test lowers this process's limit: spawning needs descriptors of its own.
    let _serial = LIMIT.lock().unwrap_or_else(|e| e.into_inner());
    let mut child = self_as_child(
        &[],
        "listener_child",
        &[("DAPLRS_FD_CHILD_LINK", link.into())],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .spawn()
    .expect("spawn the listener");
    let mut to = child.stdin.take().unwrap();
    let mut from = BufReader::new(child.stdout.take().unwrap()).lines();
    // The child's stdout also carries the test harness's lines: look for ours.
    let mut expect = |what: &str| -> String {
        loop {
            let l = from.next().expect("the listener's output").unwrap();
            if let Some(at) = l.find(what) {
                return l[at + what.len()..].to_string();
            }
        }
    };
    let q: ConnQual = expect("qual=").trim().parse().unwrap();
    writeln!(to, "starve").unwrap();
    expect("starved");
    let (ia, _async) = InterfaceAdapter::open(link, 8).unwrap();
    let pz = ia.pz_create().unwrap();
    let conn = ia.evd_create(8, None, EvdFlags::CONNECTION).unwrap();
    let dto = ia.evd_create(8, None, EvdFlags::DTO).unwrap();
    let ep = || {
        ia.endpoint(&pz)
            .dto_evd(&dto)
            .connect_evd(&conn)
            .build()
            .unwrap()
    };
    let a = ep();
    a.connect(Ipv4Addr::LOCALHOST, q, T, b"").unwrap();
    let (ev, _) = conn
        .wait(Some(Duration::from_secs(5)), 1)
        .unwrap()
        .expect("the refused requester hears of it, well before its timeout");
    let ev = ev.as_connection().expect("a connection event").clone();
    // Refused by the provider at the other end, not by its consumer.
    assert_eq!(ev.kind, ConnectionEventKind::NonPeerRejected, "{ev:?}");
    writeln!(to, "feed").unwrap();
    expect("fed");
    // Descriptors back: the listener serves the next requester.
    let c = ep();
    c.connect(Ipv4Addr::LOCALHOST, q, T, b"").unwrap();
    expect_conn(&conn, ConnectionEventKind::Established);
    writeln!(to, "exit").unwrap();
    assert!(
        child.wait().unwrap().success(),
        "the listener process failed"
    );
    ia.close(CloseFlags::Abrupt).unwrap();
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
