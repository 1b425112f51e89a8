//! Connection qualifiers, listening, connection events and the one connect/accept sequence
//! ([`connect`]) every test that just needs a connection uses.

use std::sync::atomic::{AtomicU64, Ordering};

use dapl::{
    ConnQual, ConnectionEvent, ConnectionEventKind, CrArrival, Endpoint, EpState, Evd, EvdFlags,
    IaAddress, InterfaceAdapter, PspFlags, ServicePoint,
};

use super::T;

static NEXT_QUAL: AtomicU64 = AtomicU64::new(0);

/// A fresh connection qualifier per use, so tests can run in parallel. Qualifiers are TCP ports
/// on the tcp link: they stay in 20000..32000, below the kernel's ephemeral range (32768+),
/// where an outgoing connection's local port could otherwise take a listener's port. Each
/// process starts at its own place in the range and skips ports some other process (another
/// test binary, a test run beside this one) has bound on 127.0.0.1 right now.
pub fn qual() -> ConnQual {
    const BASE: u64 = 20_000;
    const SPAN: u64 = 12_000;
    let start = u64::from(std::process::id()).wrapping_mul(7_919) % SPAN;
    loop {
        let n = NEXT_QUAL.fetch_add(1, Ordering::Relaxed);
        let q = BASE + (start + n) % SPAN;
        if std::net::TcpListener::bind(("127.0.0.1", q as u16)).is_ok() {
            return q;
        }
    }
}
/// Listens on `q` of `ia` (a consumer PSP with a CR EVD of its own): (PSP, CR EVD, the IA's
/// address).
pub fn listen_on(ia: &InterfaceAdapter, q: ConnQual) -> (ServicePoint, Evd, IaAddress) {
    let cr_evd = ia.evd_create(8, None, EvdFlags::CR).unwrap();
    let psp = ia.psp_create(q, &cr_evd, PspFlags::Consumer).unwrap();
    (psp, cr_evd, ia.query().unwrap().ia_address)
}

/// Listens on a fresh qualifier ([`qual`]) of `ia`: (PSP, CR EVD, qualifier, address). A
/// qualifier another process took since [`qual`] looked is skipped.
pub fn listen(ia: &InterfaceAdapter) -> (ServicePoint, Evd, ConnQual, IaAddress) {
    let cr_evd = ia.evd_create(8, None, EvdFlags::CR).unwrap();
    for _ in 0..100 {
        let q = qual();
        match ia.psp_create(q, &cr_evd, PspFlags::Consumer) {
            Ok(psp) => return (psp, cr_evd, q, ia.query().unwrap().ia_address),
            Err(e) if e.kind() == dapl::ErrorType::ConnQualInUse => continue,
            Err(e) => panic!("psp_create: {e}"),
        }
    }
    panic!("no free connection qualifier in 100 tries");
}

/// Waits (up to [`T`]) for a CR arrival on `evd`.
#[track_caller]
pub fn expect_cr(evd: &Evd) -> CrArrival {
    let (ev, _) = evd.wait(T, 1).unwrap().expect("a CR arrival");
    ev.as_cr_arrival().expect("a CR arrival").clone()
}

/// Waits (up to [`T`]) for the next connection event on `evd` and checks its kind.
#[track_caller]
pub fn expect_conn(evd: &Evd, kind: ConnectionEventKind) -> ConnectionEvent {
    let (ev, _) = evd.wait(T, 1).unwrap().expect("connection event");
    let c = ev.as_connection().expect("a connection event").clone();
    assert_eq!(c.kind, kind, "connection event");
    c
}

/// One end of a connection: an endpoint and the EVD its connection events go to.
#[derive(Clone, Copy)]
pub struct End<'a> {
    /// The endpoint.
    pub ep: &'a Endpoint,
    /// Its connection EVD (may be shared with other endpoints or event kinds).
    pub conn_evd: &'a Evd,
}

/// The plain connect/accept sequence, for tests that need a connection (not those that test
/// connection management itself): `passive_ia` listens on a fresh qualifier (a CR EVD and a
/// PSP of its own), `active` connects with `request` as private data, the request arrives
/// carrying it and is accepted onto `passive` with `reply`; both ends then report ESTABLISHED
/// for their endpoint (the active one carrying `reply`) and are CONNECTED. Endpoints may have
/// receives posted before. Returns the PSP and its CR EVD, which stay open.
#[track_caller]
pub fn connect(
    active: End<'_>,
    passive_ia: &InterfaceAdapter,
    passive: End<'_>,
    request: &[u8],
    reply: &[u8],
) -> (ServicePoint, Evd) {
    let (psp, cr_evd, q, addr) = listen(passive_ia);
    active.ep.connect(addr.ip(), q, T, request).unwrap();
    let cr = expect_cr(&cr_evd).cr;
    assert_eq!(cr.private_data(), request);
    cr.accept(Some(passive.ep), reply).unwrap();
    let est = expect_conn(active.conn_evd, ConnectionEventKind::Established);
    assert_eq!(&est.ep, active.ep);
    assert_eq!(est.private_data, reply);
    let est = expect_conn(passive.conn_evd, ConnectionEventKind::Established);
    assert_eq!(&est.ep, passive.ep);
    assert_eq!(active.ep.state(), EpState::Connected);
    assert_eq!(passive.ep.state(), EpState::Connected);
    (psp, cr_evd)
}
