//! One side of a test (an IA with its objects and one endpoint) and a connected pair of them.

use dapl::{
    CloseFlags, CompletionFlags, ConnQual, ConnectionEvent, ConnectionEventKind, DtoCompletion,
    DtoStatus, Endpoint, EpAttr, Evd, EvdFlags, IaAddress, InterfaceAdapter, Lmr, MemPriv, Pz,
    ServicePoint,
};

use super::connect::{connect, expect_conn, listen, End};
use super::T;

/// One side: IA, PZ, EVDs, EP.
pub struct Side {
    /// The IA, opened on the test's link.
    pub ia: InterfaceAdapter,
    /// The IA's async EVD.
    pub async_evd: Evd,
    /// The PZ of the endpoint and of [`Side::lmr`]'s LMRs.
    pub pz: Pz,
    /// The endpoint's receive EVD (DTO).
    pub recv_evd: Evd,
    /// The endpoint's request EVD (DTO, RMR bind).
    pub req_evd: Evd,
    /// The endpoint's connection EVD.
    pub conn_evd: Evd,
    /// The endpoint.
    pub ep: Endpoint,
}

impl Side {
    /// A side on `link` with DTO EVDs of 256 entries.
    pub fn new(link: &str, attr: Option<&EpAttr>) -> Side {
        Self::with_qlen(link, attr, 256)
    }

    /// A side on `link` with DTO EVDs of `qlen` entries.
    pub fn with_qlen(link: &str, attr: Option<&EpAttr>, qlen: usize) -> Side {
        let (ia, async_evd) = InterfaceAdapter::open(link, 64).expect("ia_open");
        let pz = ia.pz_create().unwrap();
        let recv_evd = ia.evd_create(qlen, None, EvdFlags::DTO).unwrap();
        let req_evd = ia
            .evd_create(qlen, None, EvdFlags::DTO | EvdFlags::RMR_BIND)
            .unwrap();
        let conn_evd = ia.evd_create(16, None, EvdFlags::CONNECTION).unwrap();
        let mut ep = ia
            .endpoint(&pz)
            .recv_evd(&recv_evd)
            .request_evd(&req_evd)
            .connect_evd(&conn_evd);
        if let Some(a) = attr {
            ep = ep.attr(a.clone());
        }
        let ep = ep.build().unwrap();
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

    /// An LMR of `len` bytes in the side's PZ with every privilege.
    pub fn lmr(&self, len: usize) -> Lmr {
        self.pz.lmr_allocate(len, MemPriv::ALL).unwrap()
    }

    /// The endpoint and its connection EVD, for [`connect`].
    pub fn end(&self) -> End<'_> {
        End {
            ep: &self.ep,
            conn_evd: &self.conn_evd,
        }
    }

    /// Listens on a fresh qualifier of the side's IA: (PSP, CR EVD, qualifier, address).
    pub fn listen(&self) -> (ServicePoint, Evd, ConnQual, IaAddress) {
        listen(&self.ia)
    }

    /// Waits for the next connection event and checks its kind.
    #[track_caller]
    pub fn expect_conn(&self, kind: ConnectionEventKind) -> ConnectionEvent {
        expect_conn(&self.conn_evd, kind)
    }

    /// Waits for the next DTO completion on `evd`.
    #[track_caller]
    pub fn dto(evd: &Evd) -> DtoCompletion {
        let (ev, _) = evd.wait(T, 1).unwrap().expect("DTO completion");
        ev.as_dto().expect("a DTO event").clone()
    }

    /// Waits for the next completion on the receive EVD.
    #[track_caller]
    pub fn recv_done(&self) -> DtoCompletion {
        Self::dto(&self.recv_evd)
    }

    /// Waits for the next completion on the request EVD.
    #[track_caller]
    pub fn req_done(&self) -> DtoCompletion {
        Self::dto(&self.req_evd)
    }

    /// Posts receive `m` (cookie `m`) of slot `m` of `inbox`, slots `slot` bytes long: the
    /// buffer [`expect_message`](Self::expect_message) finds message `m` in.
    #[track_caller]
    pub fn post_recv_slot(&self, inbox: &Lmr, m: usize, slot: usize) {
        self.ep
            .post_recv(
                &[inbox.triplet((m * slot) as u64, slot as u64)],
                m as u64,
                CompletionFlags::empty(),
            )
            .unwrap();
    }

    /// Waits for the next receive completion and checks that it is message `m` of `len` bytes
    /// (its receive posted with cookie `m`), placed whole at `at` in `inbox`
    /// ([`message_bytes`](super::message_bytes)).
    #[track_caller]
    pub fn expect_message(&self, inbox: &Lmr, at: usize, m: usize, len: usize) {
        let c = self.recv_done();
        assert_eq!(
            (c.cookie.0, c.status, c.transferred_length),
            (m as u64, DtoStatus::Success, len as u64),
            "message {m}"
        );
        assert!(
            inbox.to_vec(at, len).unwrap() == super::message_bytes(m, len),
            "message {m} ({len} bytes) arrived changed"
        );
    }

    /// Closes the IA (abrupt: everything on it goes).
    pub fn close(self) {
        self.ia.close(CloseFlags::Abrupt).unwrap();
    }
}

/// A connected pair: `a` connected actively to `b`'s PSP.
pub struct Pair {
    /// The active side.
    pub a: Side,
    /// The passive side.
    pub b: Side,
    /// `b`'s CR EVD.
    pub cr_evd: Evd,
    /// `b`'s PSP `a` connected to (still listening).
    pub psp: ServicePoint,
}

impl Pair {
    /// Two fresh sides on `link`, connected.
    pub fn new(link: &str) -> Pair {
        Self::with_attrs(link, None, None)
    }

    /// Two fresh sides on `link` with these endpoint attributes, connected.
    pub fn with_attrs(link: &str, a_attr: Option<&EpAttr>, b_attr: Option<&EpAttr>) -> Pair {
        let a = Side::new(link, a_attr);
        let b = Side::new(link, b_attr);
        Self::connect(a, b)
    }

    /// Two fresh sides on `link`, connected, for a stream from `a` to `b` of up to `depth`
    /// messages at once: `a` queues `depth` requests, `b` holds `depth` receives, and every
    /// EVD holds `depth` events (every completion may be queued before the first is taken).
    pub fn streaming(link: &str, depth: usize) -> Pair {
        let a_attr = EpAttr {
            max_request_dtos: depth,
            ..Default::default()
        };
        let b_attr = EpAttr {
            max_recv_dtos: depth,
            ..Default::default()
        };
        Self::connect(
            Side::with_qlen(link, Some(&a_attr), depth),
            Side::with_qlen(link, Some(&b_attr), depth),
        )
    }

    /// Connects two prepared sides ([`connect`], private data "hello" and "welcome");
    /// pre-posted receives stay posted.
    #[track_caller]
    pub fn connect(a: Side, b: Side) -> Pair {
        let (psp, cr_evd) = connect(a.end(), &b.ia, b.end(), b"hello", b"welcome");
        Pair { a, b, cr_evd, psp }
    }

    /// Closes both sides.
    pub fn close(self) {
        self.a.close();
        self.b.close();
    }
}
