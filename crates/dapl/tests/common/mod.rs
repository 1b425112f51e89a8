//! Test harness shared by the conformance tests: a connected pair of endpoints over a link
//! chosen by name, so every test runs unchanged over each link.
#![allow(dead_code)]

use std::time::Duration;

use dapl::*;

/// The links the conformance suite runs over. Each test is instantiated once per entry.
pub const LINKS: &[&str] = &["loopback", "tcp"];

/// What differs on `link` (`ProviderAttr::link_caps`), read once per link from a freshly
/// opened IA: tests decide by these, never by the link's name.
pub fn caps(link: &str) -> LinkCaps {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CAPS: OnceLock<Mutex<HashMap<String, LinkCaps>>> = OnceLock::new();
    let mut m = CAPS.get_or_init(Mutex::default).lock().unwrap();
    *m.entry(link.to_string()).or_insert_with(|| {
        let (ia, _) = InterfaceAdapter::open(link, 4).expect("ia_open");
        let caps = ia.provider_attr().unwrap().link_caps;
        ia.close(CloseFlags::Abrupt).unwrap();
        caps
    })
}

/// True if a Send or RDMA Write completes only once the peer has placed it (loopback). Over
/// tcp it completes when TCP has taken its last byte (RFC 5040 local completion; Linux siw
/// does the same), so a peer without a receive buffer does not hold the sender's queue, and
/// an RDMA Write the peer refuses has already completed successfully when the peer's
/// Terminate breaks the connection.
pub fn completes_at_peer(link: &str) -> bool {
    caps(link).completes_at_peer
}

/// Waits until `f` holds, polling: for remote placement, which a local completion does not
/// order on tcp (only a later Send's receive completion does).
#[track_caller]
pub fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(std::time::Instant::now() < end, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Generous timeout for events that must arrive.
pub const T: Option<Duration> = Some(Duration::from_secs(10));

static NEXT_QUAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A fresh connection qualifier per use, so tests can run in parallel. Qualifiers are TCP ports
/// on the tcp link: they stay in 20000..32000, below the kernel's ephemeral range (32768+),
/// where an outgoing connection's local port could otherwise take a listener's port.
pub fn qual() -> ConnQual {
    let n = NEXT_QUAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 3000;
    20_000 + std::process::id() as u64 % 4 * 3000 + n
}

/// One side: IA, PZ, EVDs, EP.
pub struct Side {
    pub ia: InterfaceAdapter,
    pub async_evd: Evd,
    pub pz: Pz,
    pub recv_evd: Evd,
    pub req_evd: Evd,
    pub conn_evd: Evd,
    pub ep: Endpoint,
}

impl Side {
    pub fn new(link: &str, attr: Option<&EpAttr>) -> Side {
        Self::with_qlen(link, attr, 256)
    }

    pub fn with_qlen(link: &str, attr: Option<&EpAttr>, qlen: usize) -> Side {
        let (ia, async_evd) = InterfaceAdapter::open(link, 64).expect("ia_open");
        let pz = ia.pz_create().unwrap();
        let recv_evd = ia.evd_create(qlen, None, EvdFlags::DTO).unwrap();
        let req_evd = ia
            .evd_create(qlen, None, EvdFlags::DTO | EvdFlags::RMR_BIND)
            .unwrap();
        let conn_evd = ia.evd_create(16, None, EvdFlags::CONNECTION).unwrap();
        let ep = ia
            .ep_create(&pz, Some(&recv_evd), Some(&req_evd), Some(&conn_evd), attr)
            .unwrap();
        Side {
            ia,
            async_evd,
            pz,
            recv_evd,
            req_evd,
            conn_evd,
            ep,
        }
    }

    pub fn lmr(&self, len: usize) -> Lmr {
        self.pz.lmr_allocate(len, MemPriv::ALL).unwrap()
    }

    /// Waits for the next connection event and checks its kind.
    pub fn expect_conn(&self, kind: ConnectionEventKind) -> ConnectionEvent {
        let (ev, _) = self.conn_evd.wait(T, 1).expect("connection event");
        let c = ev.as_connection().expect("a connection event").clone();
        assert_eq!(c.kind, kind, "connection event");
        c
    }

    /// Waits for the next DTO completion on `evd`.
    pub fn dto(evd: &Evd) -> DtoCompletion {
        let (ev, _) = evd.wait(T, 1).expect("DTO completion");
        ev.as_dto().expect("a DTO event").clone()
    }

    pub fn recv_done(&self) -> DtoCompletion {
        Self::dto(&self.recv_evd)
    }

    pub fn req_done(&self) -> DtoCompletion {
        Self::dto(&self.req_evd)
    }

    pub fn close(self) {
        self.ia.close(CloseFlags::Abrupt).unwrap();
    }
}

/// A connected pair: `a` connected actively to `b`'s PSP.
pub struct Pair {
    pub a: Side,
    pub b: Side,
    pub cr_evd: Evd,
    pub psp: ServicePoint,
}

impl Pair {
    pub fn new(link: &str) -> Pair {
        Self::with_attrs(link, None, None)
    }

    pub fn with_attrs(link: &str, a_attr: Option<&EpAttr>, b_attr: Option<&EpAttr>) -> Pair {
        let a = Side::new(link, a_attr);
        let b = Side::new(link, b_attr);
        Self::connect(a, b)
    }

    /// Connects two prepared sides; pre-posted receives stay posted.
    pub fn connect(a: Side, b: Side) -> Pair {
        let cr_evd = b.ia.evd_create(8, None, EvdFlags::CR).unwrap();
        let q = qual();
        let psp = b.ia.psp_create(q, &cr_evd, PspFlags::Consumer).unwrap();
        let addr = b.ia.query().unwrap().ia_address;
        a.ep.connect(addr, q, T, b"hello").unwrap();
        let (ev, _) = cr_evd.wait(T, 1).unwrap();
        let cr = ev.as_cr_arrival().expect("CR arrival").cr.clone();
        assert_eq!(cr.private_data(), b"hello");
        cr.accept(Some(&b.ep), b"welcome").unwrap();
        let est = a.expect_conn(ConnectionEventKind::Established);
        assert_eq!(est.private_data, b"welcome");
        b.expect_conn(ConnectionEventKind::Established);
        assert_eq!(a.ep.state(), EpState::Connected);
        assert_eq!(b.ep.state(), EpState::Connected);
        Pair { a, b, cr_evd, psp }
    }

    pub fn close(self) {
        self.a.close();
        self.b.close();
    }
}

/// Instantiates a test body for the loopback link only, for rules whose setup needs a Send
/// held by a missing receive buffer (see [`completes_at_peer`]).
#[macro_export]
macro_rules! loopback_only {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn loopback() {
                let f: fn(&str) = $body;
                f("loopback");
            }
        }
    };
}

/// Instantiates a test body once per link: `per_link!(name, |link| { ... });`
#[macro_export]
macro_rules! per_link {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn loopback() {
                let f: fn(&str) = $body;
                f("loopback");
            }
            #[test]
            fn tcp() {
                let f: fn(&str) = $body;
                f("tcp");
            }
        }
    };
}
