//! 1,000 connected endpoints on one IA sharing one SRQ, on every link: each peer sends one
//! message, every message lands exactly once and whole in an SRQ buffer, and the resident memory
//! each endpoint pair added is printed (`--nocapture`; informative: memory targets are shown by
//! benchmarks).

use std::collections::HashSet;

use dapl::*;
use dapl_testkit::kit::*;

const N: u64 = 1000;
const MSG: u64 = 16;

fn message(i: u64) -> [u8; MSG as usize] {
    let mut m = [0u8; MSG as usize];
    m[..8].copy_from_slice(&i.to_le_bytes());
    m[8..].copy_from_slice(&(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_le_bytes());
    m
}

per_link!(
    a_thousand_endpoints_on_one_srq_each_deliver_their_message_once,
    |link| {
        raise_fd_limit(8 * N + 256);
        let (sia, _sa) = InterfaceAdapter::open(link, 64).unwrap();
        let spz = sia.pz_create().unwrap();
        let srq = sia
            .srq_create(
                &spz,
                &SrqAttr {
                    max_recv_dtos: N as usize,
                    ..SrqAttr::default()
                },
            )
            .unwrap();
        let s_dto = sia.evd_create(2 * N as usize, None, EvdFlags::DTO).unwrap();
        let s_conn = sia
            .evd_create(2 * N as usize, None, EvdFlags::CONNECTION)
            .unwrap();
        let inbox = spz.lmr_allocate((N * MSG) as usize, MemPriv::ALL).unwrap();
        for k in 0..N {
            srq.post_recv(&[inbox.triplet(k * MSG, MSG)], k).unwrap();
        }
        let (_psp, cr_evd, q, addr) = listen(&sia);
        let (cia, _ca) = InterfaceAdapter::open(link, 64).unwrap();
        let cpz = cia.pz_create().unwrap();
        let c_dto = cia.evd_create(2 * N as usize, None, EvdFlags::DTO).unwrap();
        let c_conn = cia
            .evd_create(2 * N as usize, None, EvdFlags::CONNECTION)
            .unwrap();
        let src = cpz.lmr_allocate((N * MSG) as usize, MemPriv::ALL).unwrap();
        for i in 0..N {
            src.write((i * MSG) as usize, &message(i)).unwrap();
        }
        let before = rss_kib();
        let mut pairs = Vec::new();
        for _ in 0..N {
            let s_ep = sia
                .endpoint(&spz)
                .srq(&srq)
                .dto_evd(&s_dto)
                .connect_evd(&s_conn)
                .build()
                .unwrap();
            let c_ep = cia
                .endpoint(&cpz)
                .dto_evd(&c_dto)
                .connect_evd(&c_conn)
                .build()
                .unwrap();
            c_ep.connect(addr.ip(), q, T, b"").unwrap();
            expect_cr(&cr_evd).cr.accept(Some(&s_ep), b"").unwrap();
            expect_conn(&c_conn, ConnectionEventKind::Established);
            expect_conn(&s_conn, ConnectionEventKind::Established);
            pairs.push((s_ep, c_ep));
        }
        let after = rss_kib();
        eprintln!(
            "{link}: {N} endpoint pairs connected; resident memory {} KiB per pair",
            after.saturating_sub(before) / N
        );
        for (i, (_, c_ep)) in pairs.iter().enumerate() {
            let i = i as u64;
            c_ep.post_send(&[src.triplet(i * MSG, MSG)], i, CompletionFlags::empty())
                .unwrap();
        }
        let mut buffers = HashSet::new();
        for _ in 0..N {
            let d = Side::dto(&s_dto);
            assert_eq!((d.status, d.transferred_length), (DtoStatus::Success, MSG));
            assert!(buffers.insert(d.cookie.0), "buffer {} twice", d.cookie.0);
        }
        let mut sent = 0;
        while sent < N {
            assert_eq!(Side::dto(&c_dto).status, DtoStatus::Success);
            sent += 1;
        }
        let got = inbox.to_vec(0, (N * MSG) as usize).unwrap();
        let mut seen = HashSet::new();
        for chunk in got.chunks(MSG as usize) {
            let i = u64::from_le_bytes(chunk[..8].try_into().unwrap());
            assert_eq!(chunk, message(i), "message {i}");
            assert!(seen.insert(i), "message {i} twice");
        }
        assert_eq!(seen.len() as u64, N);
        drop(pairs);
        cia.close(CloseFlags::Abrupt).unwrap();
        sia.close(CloseFlags::Abrupt).unwrap();
    }
);

/// The endpoint limit is reported (`ia_query`'s `max_eps`), enforced with
/// `DAT_INSUFFICIENT_RESOURCES` and a reason, and set by the IA name's `max_eps=<n>`: raised
/// past the default, an IA holds more endpoints than 16,384.
#[test]
fn the_endpoint_limit_is_reported_enforced_and_raised_by_the_ia_name() {
    let (ia, _a) = InterfaceAdapter::open("loopback", 8).unwrap();
    assert_eq!(ia.query().unwrap().max_eps, 16_384);
    drop(ia);
    let (ia, _a) = InterfaceAdapter::open("loopback:127.0.0.1,max_eps=3", 8).unwrap();
    assert_eq!(ia.query().unwrap().max_eps, 3);
    let pz = ia.pz_create().unwrap();
    let eps: Vec<_> = (0..3).map(|_| ia.endpoint(&pz).build().unwrap()).collect();
    let e = ia.endpoint(&pz).build().unwrap_err();
    assert_eq!(e.kind(), ErrorType::InsufficientResources, "{e}");
    assert!(e.to_string().contains("max_eps"), "{e}");
    drop(eps);
    ia.endpoint(&pz).build().unwrap();
    drop(ia);

    let big = 20_000;
    let (ia, _a) = InterfaceAdapter::open(&format!("loopback:127.0.0.1,max_eps={big}"), 8).unwrap();
    assert_eq!(ia.query().unwrap().max_eps, big);
    let pz = ia.pz_create().unwrap();
    let eps: Vec<_> = (0..big)
        .map(|_| ia.endpoint(&pz).build().unwrap())
        .collect();
    assert!(ia.endpoint(&pz).build().is_err());
    drop(eps);

    for bad in ["tcp:127.0.0.1,max_eps=0", "shm:127.0.0.1,max_eps=x"] {
        let e = InterfaceAdapter::open(bad, 8).unwrap_err();
        assert_eq!(e.kind(), ErrorType::InvalidParameter, "{bad}: {e}");
        assert!(e.to_string().contains("endpoint limit"), "{bad}: {e}");
    }
    let (ia, _a) = InterfaceAdapter::open("tcp:127.0.0.1,crc,max_eps=50000", 8).unwrap();
    assert_eq!(ia.query().unwrap().max_eps, 50_000);
}
