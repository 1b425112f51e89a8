//! A hostile peer on raw TCP, speaking iWARP through the sans-IO codec, against a dapl-rs tcp
//! endpoint: each bad frame gets the right Terminate and a close, the endpoint ends BROKEN with
//! its receive flushed, and no byte of registered memory changes. A peer that resets the
//! connection or half-closes it with work outstanding: every DTO flushed once, the IA serves on.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use dapl::*;
use dapl_testkit::kit::qual;
use iwarp::mpa::{InitiatorConfig, InitiatorEvent, MpaInitiator};
use iwarp::rdmap::ReadRequest;
use iwarp::terminate::{DdpTaggedErrorCode, LlpErrorCode, RdmapErrorCode};
use iwarp::{FpduDecoder, FpduEncoder, Segment, TerminateCause};

const T: Option<Duration> = Some(Duration::from_secs(10));

struct Target {
    ia: InterfaceAdapter,
    pz: Pz,
    conn: Evd,
    recv: Evd,
    ep: Endpoint,
    lmrs: Vec<Lmr>,
    /// (STag, address) of a 4 KiB REMOTE_WRITE region and of one without REMOTE_READ.
    writable: (u32, u64),
    unreadable: (u32, u64),
    /// (STag, address) of a 64 KiB REMOTE_WRITE region (large enough for cut-through).
    big: (u32, u64),
}

/// A dapl-rs endpoint accepting one raw connection, and the raw stream after MPA.
fn setup(crc: bool, qual: u64) -> (Target, TcpStream, FpduEncoder, FpduDecoder) {
    let (ia, _) = InterfaceAdapter::open("tcp:127.0.0.1", 16).unwrap();
    let pz = ia.pz_create().unwrap();
    let recv = ia.evd_create(8, None, EvdFlags::DTO).unwrap();
    let conn = ia.evd_create(8, None, EvdFlags::CONNECTION).unwrap();
    let ep = ia
        .ep_create(&pz, Some(&recv), Some(&recv), Some(&conn), None)
        .unwrap();
    let w = pz.lmr_allocate(4096, MemPriv::ALL).unwrap();
    w.fill(0, 4096, 0x5A).unwrap();
    let nr = pz
        .lmr_allocate(
            4096,
            MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE | MemPriv::REMOTE_WRITE,
        )
        .unwrap();
    nr.fill(0, 4096, 0x6B).unwrap();
    let big = pz.lmr_allocate(64 << 10, MemPriv::ALL).unwrap();
    big.fill(0, 64 << 10, 0x3C).unwrap();
    let inbox = pz.lmr_allocate(256, MemPriv::ALL).unwrap();
    inbox.fill(0, 256, 0x7C).unwrap();
    ep.post_recv(&[inbox.triplet(0, 256)], 1, CompletionFlags::empty())
        .unwrap();
    let cr_evd = ia.evd_create(4, None, EvdFlags::CR).unwrap();
    let psp = ia.psp_create(qual, &cr_evd, PspFlags::Consumer).unwrap();
    // Qualifiers up to 65535 are the TCP port itself.
    let mut s = TcpStream::connect(("127.0.0.1", qual as u16)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut init = MpaInitiator::new(
        InitiatorConfig {
            crc,
            enhanced: true,
            ird: 4,
            ord: 4,
            peer_to_peer: None,
        },
        b"evil",
    )
    .unwrap();
    s.write_all(init.request()).unwrap();
    let (ev, _) = cr_evd.wait(T, 1).unwrap().expect("an event in time");
    ev.as_cr_arrival()
        .unwrap()
        .cr
        .accept(Some(&ep), b"")
        .unwrap();
    let mut buf = [0u8; 512];
    let acc = loop {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed during MPA");
        if let Some(InitiatorEvent::Accepted(a)) = init.feed(&buf[..n]).unwrap() {
            break a;
        }
    };
    assert_eq!(acc.negotiated.crc, crc);
    let mut dec = FpduDecoder::new(crc);
    dec.feed(&acc.leftover);
    let (ev, _) = conn.wait(T, 1).unwrap().expect("an event in time");
    assert_eq!(
        ev.as_connection().unwrap().kind,
        ConnectionEventKind::Established
    );
    drop(psp);
    let writable = (w.rmr_context().0, w.address());
    let unreadable = (nr.rmr_context().0, nr.address());
    let big_key = (big.rmr_context().0, big.address());
    (
        Target {
            ia,
            pz,
            conn,
            recv,
            ep,
            lmrs: vec![w, nr, inbox, big],
            writable,
            unreadable,
            big: big_key,
        },
        s,
        FpduEncoder::new(crc),
        dec,
    )
}

/// Reads until the Terminate arrives and returns its cause; then expects EOF.
fn expect_terminate(s: &mut TcpStream, dec: &mut FpduDecoder) -> TerminateCause {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(u) = dec.next_ulpdu().unwrap() {
            let u = u.to_vec();
            if let Segment::Terminate { message, .. } = Segment::parse(&u).unwrap() {
                let cause = message.cause;
                // Then the stream ends.
                loop {
                    match s.read(&mut buf) {
                        Ok(0) => return cause,
                        Ok(_) => {}
                        Err(e) => panic!("expected EOF after the Terminate: {e}"),
                    }
                }
            }
            continue;
        }
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed without a Terminate");
        dec.feed(&buf[..n]);
    }
}

fn check_broken_and_untouched(t: Target, before: Vec<Vec<u8>>, recv_status: DtoStatus) {
    let (ev, _) = t.conn.wait(T, 1).unwrap().expect("an event in time");
    assert_eq!(
        ev.as_connection().unwrap().kind,
        ConnectionEventKind::Broken
    );
    assert_eq!(t.ep.state(), EpState::Disconnected);
    let (ev, _) = t.recv.wait(T, 1).unwrap().expect("an event in time");
    let d = ev.as_dto().unwrap();
    assert_eq!((d.cookie.0, d.status), (1, recv_status));
    assert!(snapshot(&t) == before, "registered memory changed");
    t.ia.close(CloseFlags::Abrupt).unwrap();
}

fn snapshot(t: &Target) -> Vec<Vec<u8>> {
    t.lmrs
        .iter()
        .map(|l| l.to_vec(0, l.len()).unwrap())
        .collect()
}

fn hostile(
    qual: u64,
    crc: bool,
    frame: impl FnOnce(&Target, &FpduEncoder) -> Vec<u8>,
    want: TerminateCause,
) {
    let (t, mut s, enc, mut dec) = setup(crc, qual);
    let before = snapshot(&t);
    let bytes = frame(&t, &enc);
    s.write_all(&bytes).unwrap();
    assert_eq!(expect_terminate(&mut s, &mut dec), want);
    // The posted receive is flushed, or (the Send too long for it) completes LENGTH_ERROR.
    let recv_status = match want {
        TerminateCause::DdpUntagged(iwarp::terminate::DdpUntaggedErrorCode::MessageTooLong) => {
            DtoStatus::LocalLength
        }
        _ => DtoStatus::Flushed,
    };
    check_broken_and_untouched(t, before, recv_status);
}

fn seg(enc: &FpduEncoder, s: Segment<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    enc.encode_segment(&s, &mut out).unwrap();
    out
}

/// The FPDU of a one-segment RDMA Write of `payload` to the start of the writable region.
fn writable_write(t: &Target, enc: &FpduEncoder, payload: &[u8]) -> Vec<u8> {
    seg(
        enc,
        Segment::Write {
            last: true,
            stag: t.writable.0,
            to: t.writable.1,
            payload,
        },
    )
}

#[test]
fn hostile_write_with_invalid_stag_is_terminated_ddp_invalid_stag() {
    hostile(
        qual(),
        false,
        |t, enc| {
            seg(
                enc,
                Segment::Write {
                    last: true,
                    stag: t.writable.0 ^ 0x55,
                    to: t.writable.1,
                    payload: b"evil",
                },
            )
        },
        TerminateCause::DdpTagged(DdpTaggedErrorCode::InvalidStag),
    );
}

#[test]
fn hostile_write_past_region_end_is_terminated_base_or_bounds() {
    hostile(
        qual(),
        false,
        |t, enc| {
            seg(
                enc,
                Segment::Write {
                    last: true,
                    stag: t.writable.0,
                    to: t.writable.1 + 4090,
                    payload: b"overflow",
                },
            )
        },
        TerminateCause::DdpTagged(DdpTaggedErrorCode::BaseOrBounds),
    );
}

#[test]
fn hostile_write_with_wrapping_offset_is_terminated_to_wrap() {
    hostile(
        qual(),
        false,
        |t, enc| {
            seg(
                enc,
                Segment::Write {
                    last: true,
                    stag: t.writable.0,
                    to: u64::MAX - 1,
                    payload: b"xx",
                },
            )
        },
        TerminateCause::DdpTagged(DdpTaggedErrorCode::ToWrap),
    );
}

#[test]
fn hostile_read_without_remote_read_is_terminated_access_rights() {
    hostile(
        qual(),
        false,
        |t, enc| {
            seg(
                enc,
                Segment::ReadRequest {
                    msn: 1,
                    request: ReadRequest {
                        sink_stag: 7,
                        sink_to: 0,
                        size: 64,
                        source_stag: t.unreadable.0,
                        source_to: t.unreadable.1,
                    },
                },
            )
        },
        TerminateCause::rdmap_protection(RdmapErrorCode::AccessRights),
    );
}

#[test]
fn hostile_send_longer_than_receive_buffer_is_terminated_too_long() {
    let payload = vec![0xEE; 300];
    hostile(
        qual(),
        false,
        |_, enc| {
            seg(
                enc,
                Segment::Send {
                    last: true,
                    msn: 1,
                    mo: 0,
                    solicited: false,
                    invalidate_stag: None,
                    payload: &payload,
                },
            )
        },
        TerminateCause::DdpUntagged(iwarp::terminate::DdpUntaggedErrorCode::MessageTooLong),
    );
}

/// A Send with Invalidate of `stag` carrying "inv!" (MSN 1, one segment).
fn send_invalidate(enc: &FpduEncoder, stag: u32) -> Vec<u8> {
    seg(
        enc,
        Segment::Send {
            last: true,
            msn: 1,
            mo: 0,
            solicited: false,
            invalidate_stag: Some(stag),
            payload: b"inv!",
        },
    )
}

/// What a refused Send with Invalidate leaves: the message placed in the posted receive
/// (before the invalidation was tried, as siw does), nothing else changed.
fn placed_in_inbox(t: &Target) -> Vec<Vec<u8>> {
    let mut want = snapshot(t);
    want[2][..4].copy_from_slice(b"inv!");
    want
}

/// A Send with Invalidate of the STag `stag_of` picks is refused with `want`: its receive
/// completes REMOTE_RESPONDER, the endpoint ends BROKEN, nothing else changes.
fn refused_invalidate(crc: bool, stag_of: impl FnOnce(&Target) -> u32, want: TerminateCause) {
    let (t, mut s, enc, mut dec) = setup(crc, qual());
    let after = placed_in_inbox(&t);
    s.write_all(&send_invalidate(&enc, stag_of(&t))).unwrap();
    assert_eq!(expect_terminate(&mut s, &mut dec), want);
    check_broken_and_untouched(t, after, DtoStatus::RemoteResponder);
}

// RFC 5040: an STag that is not a memory window (here an LMR's own) cannot be invalidated;
// siw answers an STag it cannot invalidate with RDMAP "STag cannot be invalidated" (0x09).
#[test]
fn hostile_send_with_invalidate_of_a_registration_is_terminated_stag_cannot_be_invalidated() {
    refused_invalidate(
        false,
        |t| t.writable.0,
        TerminateCause::rdmap_operation(RdmapErrorCode::StagCannotBeInvalidated),
    );
}

#[test]
fn hostile_send_with_invalidate_of_an_unknown_stag_is_terminated_stag_cannot_be_invalidated() {
    refused_invalidate(
        true,
        |t| t.writable.0 ^ 0x5500,
        TerminateCause::rdmap_operation(RdmapErrorCode::StagCannotBeInvalidated),
    );
}

// siw (siw_invalidate_stag): another PD's STag is -EACCES, a remote protection error.
#[test]
fn hostile_send_with_invalidate_of_another_pzs_rmr_is_terminated_remote_protection() {
    let (t, mut s, enc, mut dec) = setup(false, qual());
    let pz2 = t.ia.pz_create().unwrap();
    let l2 = pz2.lmr_allocate(4096, MemPriv::ALL).unwrap();
    l2.fill(0, 4096, 0x77).unwrap();
    let ep2 = t.ia.endpoint(&pz2).build().unwrap();
    let rmr = pz2.rmr_create().unwrap();
    let ctx = rmr
        .bind(
            &l2,
            l2.triplet(0, 4096),
            MemPriv::REMOTE_WRITE,
            &ep2,
            0,
            CompletionFlags::SUPPRESS,
        )
        .unwrap();
    let after = placed_in_inbox(&t);
    s.write_all(&send_invalidate(&enc, ctx.0)).unwrap();
    assert_eq!(
        expect_terminate(&mut s, &mut dec),
        TerminateCause::rdmap_protection(RdmapErrorCode::StagCannotBeInvalidated)
    );
    assert_eq!(rmr.query().unwrap().rmr_context, ctx, "still bound");
    assert!(l2.to_vec(0, 4096).unwrap().iter().all(|&b| b == 0x77));
    check_broken_and_untouched(t, after, DtoStatus::RemoteResponder);
}

// What siw sends for ib_post_send(IB_WR_SEND_WITH_INV): the receive completes with
// RECEIVE_WITH_INVALIDATE and the STag, the RMR is unbound, and a Write with the STag after it
// is refused as an invalid STag (DDP tagged 0x00) before a byte lands.
#[test]
fn a_peers_send_with_invalidate_unbinds_the_rmr_and_a_later_write_with_it_is_terminated() {
    let (t, mut s, enc, mut dec) = setup(true, qual());
    let rmr = t.pz.rmr_create().unwrap();
    let ctx = rmr
        .bind(
            &t.lmrs[0],
            t.lmrs[0].triplet(0, 1024),
            MemPriv::REMOTE_WRITE,
            &t.ep,
            0,
            CompletionFlags::SUPPRESS,
        )
        .unwrap();
    s.write_all(&send_invalidate(&enc, ctx.0)).unwrap();
    let (ev, _) = t.recv.wait(T, 1).unwrap().expect("an event in time");
    let d = ev.as_dto().unwrap();
    assert_eq!(
        (d.cookie.0, d.status, d.transferred_length),
        (1, DtoStatus::Success, 4)
    );
    assert_eq!(
        (d.operation, d.rmr_context),
        (DtoOp::ReceiveWithInvalidate, Some(ctx))
    );
    assert_eq!(rmr.query().unwrap().rmr_context, RmrContext(0));
    let before = snapshot(&t);
    s.write_all(&seg(
        &enc,
        Segment::Write {
            last: true,
            stag: ctx.0,
            to: t.writable.1,
            payload: b"late",
        },
    ))
    .unwrap();
    assert_eq!(
        expect_terminate(&mut s, &mut dec),
        TerminateCause::DdpTagged(DdpTaggedErrorCode::InvalidStag)
    );
    let (ev, _) = t.conn.wait(T, 1).unwrap().expect("an event in time");
    assert_eq!(
        ev.as_connection().unwrap().kind,
        ConnectionEventKind::Broken
    );
    assert!(snapshot(&t) == before, "registered memory changed");
    t.ia.close(CloseFlags::Abrupt).unwrap();
}

/// The next ULPDU the target sends.
fn next_ulpdu(s: &mut TcpStream, dec: &mut FpduDecoder) -> Vec<u8> {
    let mut buf = [0u8; 16 << 10];
    loop {
        if let Some(u) = dec.next_ulpdu().unwrap() {
            return u.to_vec();
        }
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed while a segment was expected");
        dec.feed(&buf[..n]);
    }
}

/// The target holds its FPDUs (MPA responder) until the peer's first arrives: a Send into its
/// posted inbox, whose completion is taken here.
fn release_hold(t: &Target, s: &mut TcpStream, enc: &FpduEncoder) {
    s.write_all(&seg(
        enc,
        Segment::Send {
            last: true,
            msn: 1,
            mo: 0,
            solicited: false,
            invalidate_stag: None,
            payload: b"go",
        },
    ))
    .unwrap();
    let (ev, _) = t.recv.wait(T, 1).unwrap().expect("an event in time");
    assert_eq!(ev.as_dto().unwrap().status, DtoStatus::Success);
}

// The wire format siw reads (siw_qp_rx.c: `send_inv.inval_stag`, the 32 bits after the DDP
// and RDMAP control bytes, taken from a message's first segment; the opcode from its RDMAP
// control byte): RDMAP opcode 4 (6 with SOLICITED_WAIT), the STag big-endian in ULPDU bytes
// 2-5 (DDP RsvdULP[8:39]) of every segment, QN 0, the Send MSNs in order.
#[test]
fn send_with_invalidate_goes_out_as_opcode_4_or_6_with_the_stag_in_every_segment() {
    let (t, mut s, enc, mut dec) = setup(false, qual());
    release_hold(&t, &mut s, &enc);
    let stag = 0xA1B2_C3D4u32;
    let big = &t.lmrs[3];
    let sends = [
        (big.triplet(0, 100), CompletionFlags::empty(), 0x44u8),
        (big.triplet(0, 64 << 10), CompletionFlags::empty(), 0x44),
        (big.triplet(0, 300), CompletionFlags::SOLICITED_WAIT, 0x46),
    ];
    for (i, (iov, flags, _)) in sends.iter().enumerate() {
        t.ep.post_send_with_invalidate(&[*iov], 10 + i as u64, *flags, RmrContext(stag))
            .unwrap();
    }
    for (i, (iov, _, opcode)) in sends.iter().enumerate() {
        let msn = 1 + i as u32;
        let mut got = 0u64;
        let mut segments = 0;
        loop {
            let u = next_ulpdu(&mut s, &mut dec);
            let last = u[0] & 0x40 != 0;
            assert_eq!(u[0] & 0x80, 0, "untagged");
            assert_eq!(u[1], *opcode, "RDMAP control byte of send {i}");
            assert_eq!(u[2..6], stag.to_be_bytes(), "Invalidate STag of send {i}");
            assert_eq!(u[6..10], 0u32.to_be_bytes(), "QN 0");
            assert_eq!(u[10..14], msn.to_be_bytes(), "MSN");
            assert_eq!(u[14..18], (got as u32).to_be_bytes(), "MO");
            match Segment::parse(&u).unwrap() {
                Segment::Send {
                    invalidate_stag,
                    solicited,
                    payload,
                    ..
                } => {
                    assert_eq!(invalidate_stag, Some(stag));
                    assert_eq!(solicited, *opcode == 0x46);
                    got += payload.len() as u64;
                }
                other => panic!("expected a Send, got {other:?}"),
            }
            segments += 1;
            if last {
                break;
            }
        }
        assert_eq!(got, iov.segment_length, "send {i}: bytes");
        if i == 1 {
            assert!(segments > 1, "64 KiB goes in more than one segment");
        }
    }
    for i in 0..3u64 {
        let (ev, _) = t.recv.wait(T, 1).unwrap().expect("an event in time");
        let d = ev.as_dto().unwrap();
        assert_eq!(
            (d.cookie.0, d.status, d.operation, d.rmr_context),
            (10 + i, DtoStatus::Success, DtoOp::Send, None)
        );
    }
    t.ia.close(CloseFlags::Abrupt).unwrap();
}

// A small suppressed Send that begins its poster's run is written by the poster at once
// (`Qp::transmit_inline`), its payload copied into its frame; if the socket takes only part of
// it, the link keeps the rest and writes it before anything posted later. A peer that stops
// reading fills the socket: every message still arrives whole, in order, once.
#[test]
fn inline_sends_the_socket_takes_in_part_arrive_whole_and_in_order_before_later_ones() {
    const LEN: usize = 512;
    const SLOTS: usize = 8;
    let (t, mut s, enc, mut dec) = setup(false, qual());
    release_hold(&t, &mut s, &enc);
    let src = &t.lmrs[3];
    for k in 0..SLOTS {
        src.fill(k * LEN, LEN, k as u8 + 1).unwrap();
    }
    let post = |m: usize, flags| {
        t.ep.post_send(
            &[src.triplet((m % SLOTS * LEN) as u64, LEN as u64)],
            m as u64,
            flags,
        )
    };
    // Each after a look, as a ping-pong posts: inline until the socket is full and a message
    // waits in the link, then queued behind it.
    let mut m = 0;
    let mut queued = None;
    while m < 200_000 {
        assert!(t.recv.dequeue().unwrap().is_none());
        let before = testing::inline_posts();
        post(m, CompletionFlags::SUPPRESS).unwrap();
        m += 1;
        if testing::inline_posts() == before {
            queued = Some(m - 1);
            break;
        }
    }
    let first_queued = queued.expect("the peer's socket never filled");
    assert!(first_queued > 0, "the first posts went inline");
    for _ in 0..3 {
        assert!(t.recv.dequeue().unwrap().is_none());
        post(m, CompletionFlags::SUPPRESS).unwrap();
        m += 1;
    }
    post(m, CompletionFlags::empty()).unwrap();
    m += 1;
    // Now read: the Sends in MSN order, each whole, its bytes from its slot.
    for k in 0..m {
        let u = next_ulpdu(&mut s, &mut dec);
        match Segment::parse(&u).unwrap() {
            Segment::Send {
                last: true,
                msn,
                mo: 0,
                payload,
                ..
            } => {
                assert_eq!(
                    msn,
                    1 + k as u32,
                    "message {k} of {m} ({first_queued} inline)"
                );
                assert_eq!(payload, [(k % SLOTS) as u8 + 1; LEN], "message {k}'s bytes");
            }
            other => panic!("message {k}: expected a whole Send, got {other:?}"),
        }
    }
    let (ev, _) = t
        .recv
        .wait(T, 1)
        .unwrap()
        .expect("the last Send's completion");
    let d = ev.as_dto().unwrap();
    assert_eq!((d.cookie.0, d.status), ((m - 1) as u64, DtoStatus::Success));
    assert!(
        t.recv.dequeue().unwrap().is_none(),
        "only the last one reports"
    );
    assert_eq!(t.ep.state(), EpState::Connected);
    t.ia.close(CloseFlags::Abrupt).unwrap();
}

#[test]
fn hostile_bad_crc_is_terminated_llp_crc_error() {
    hostile(
        qual(),
        true,
        |t, enc| {
            let mut f = writable_write(t, enc, b"crc!");
            let n = f.len();
            f[n - 1] ^= 0xFF;
            f
        },
        TerminateCause::Llp(LlpErrorCode::CrcError),
    );
}

/// Linux siw now and then sends a Write FPDU whose CRC covers its payload twice (its two
/// transmit paths both add the payload; docs/interop-siw.md): the payload is right and the
/// CRC is not, and RFC 5044 has such a frame end the stream like any other CRC error. The
/// refusal's log line says whose fault it was (`crc_counts_payload_twice`).
#[test]
fn hostile_crc_counting_the_payload_twice_as_siw_sends_it_is_terminated_llp_crc_error() {
    hostile(
        qual(),
        true,
        |t, enc| {
            let payload = b"rdma-ping-2: FGHIJKLMNOPQ";
            let mut f = writable_write(t, enc, payload);
            let n = f.len();
            let payload_end = 2 + iwarp::ddp::TAGGED_HEADER_LEN + payload.len();
            let mut c = iwarp::crc::Crc32c::new();
            c.update(&f[..payload_end]);
            c.update(payload);
            c.update(&f[payload_end..n - 4]);
            f[n - 4..].copy_from_slice(&c.wire_bytes());
            assert!(iwarp::fpdu::crc_counts_payload_twice(&f));
            f
        },
        TerminateCause::Llp(LlpErrorCode::CrcError),
    );
}

#[test]
fn hostile_garbage_instead_of_mpa_request_is_closed_without_a_request() {
    let (ia, _) = InterfaceAdapter::open("tcp:127.0.0.1", 16).unwrap();
    let cr_evd = ia.evd_create(4, None, EvdFlags::CR).unwrap();
    let q = qual();
    let _psp = ia.psp_create(q, &cr_evd, PspFlags::Consumer).unwrap();
    let mut s = TcpStream::connect(("127.0.0.1", q as u16)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(&[0x42; 64]).unwrap();
    let mut b = [0u8; 64];
    assert_eq!(s.read(&mut b).unwrap(), 0, "the listener closes the stream");
    assert!(cr_evd.dequeue().unwrap().is_none(), "no connection request");
    ia.close(CloseFlags::Abrupt).unwrap();
}

/// Regression (found by the `engine_inbound` fuzz target): a receive buffer that a
/// half-received Send holds in the connection completes FLUSHED when the endpoint disconnects.
/// It used to be dropped: the engine's flush does not see it, and closing the connection only
/// moved it to Closing.
#[test]
fn hostile_half_received_send_leaves_its_receive_flushed_on_local_disconnect() {
    let (t, mut s, enc, mut dec) = setup(false, qual());
    let mut wire = seg(
        &enc,
        Segment::Send {
            last: false,
            msn: 1,
            mo: 0,
            solicited: false,
            invalidate_stag: None,
            payload: b"half",
        },
    );
    // A Read Request behind it: its response shows that the Send segment was processed.
    wire.extend(seg(
        &enc,
        Segment::ReadRequest {
            msn: 1,
            request: ReadRequest {
                sink_stag: 7,
                sink_to: 0,
                size: 4,
                source_stag: t.writable.0,
                source_to: t.writable.1,
            },
        },
    ));
    s.write_all(&wire).unwrap();
    let mut buf = [0u8; 4096];
    'response: loop {
        while let Some(u) = dec.next_ulpdu().unwrap() {
            if let Segment::ReadResponse { last: true, .. } = Segment::parse(u).unwrap() {
                break 'response;
            }
        }
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed before the Read Response");
        dec.feed(&buf[..n]);
    }
    t.ep.disconnect(CloseFlags::Abrupt).unwrap();
    let (ev, _) = t.recv.wait(T, 1).unwrap().expect("an event in time");
    let d = ev.as_dto().unwrap();
    assert_eq!((d.cookie.0, d.status), (1, DtoStatus::Flushed));
    t.ia.close(CloseFlags::Abrupt).unwrap();
}

/// Writes `bytes` in two parts with a pause between, so that a large segment's header arrives
/// before its payload (the receiver then reads the payload straight into memory).
fn write_split(s: &mut TcpStream, bytes: &[u8], at: usize) {
    s.write_all(&bytes[..at]).unwrap();
    s.flush().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    s.write_all(&bytes[at..]).unwrap();
}

#[test]
fn hostile_large_write_past_region_end_arriving_in_pieces_is_terminated_base_or_bounds() {
    // 40 KiB aimed at the 4 KiB region: refused on its header, before any payload byte lands,
    // although the payload is still on its way.
    let (t, mut s, enc, mut dec) = setup(false, qual());
    let before = snapshot(&t);
    let payload = vec![0xEE; 40 << 10];
    let bytes = seg(
        &enc,
        Segment::Write {
            last: true,
            stag: t.writable.0,
            to: t.writable.1,
            payload: &payload,
        },
    );
    write_split(&mut s, &bytes, 16 + 1000);
    assert_eq!(
        expect_terminate(&mut s, &mut dec),
        TerminateCause::DdpTagged(DdpTaggedErrorCode::BaseOrBounds)
    );
    check_broken_and_untouched(t, before, DtoStatus::Flushed);
}

#[test]
fn large_write_arriving_in_pieces_is_placed_exactly_and_the_stream_stays_in_step() {
    // An odd-length 40001-byte write (3 pad bytes follow it) split after 516 bytes, then a
    // Send in the same stream: the write lands exactly at offset 1000 of the 64 KiB region,
    // nothing around it changes, and the Send after the pad and CRC field is read in step.
    let (t, mut s, enc, _dec) = setup(false, qual());
    let mut want = snapshot(&t);
    let payload: Vec<u8> = (0..40_001u32).map(|i| (i * 7 + 1) as u8).collect();
    let mut bytes = seg(
        &enc,
        Segment::Write {
            last: true,
            stag: t.big.0,
            to: t.big.1 + 1000,
            payload: &payload,
        },
    );
    bytes.extend(seg(
        &enc,
        Segment::Send {
            last: true,
            msn: 1,
            mo: 0,
            solicited: false,
            invalidate_stag: None,
            payload: b"after the write",
        },
    ));
    write_split(&mut s, &bytes, 16 + 500);
    let (ev, _) = t.recv.wait(T, 1).unwrap().expect("an event in time");
    let d = ev.as_dto().unwrap();
    assert_eq!(
        (d.cookie.0, d.status, d.transferred_length),
        (1, DtoStatus::Success, 15)
    );
    want[2][..15].copy_from_slice(b"after the write");
    want[3][1000..1000 + payload.len()].copy_from_slice(&payload);
    assert!(
        snapshot(&t) == want,
        "memory differs from the write and the send"
    );
    assert_eq!(t.ep.state(), EpState::Connected);
    t.ia.close(CloseFlags::Abrupt).unwrap();
}

/// The raw peer ends the connection without a word (`end`: a reset, a half-close) while the
/// target has a receive and an RDMA Read outstanding: each completes exactly once (FLUSHED),
/// the endpoint ends as `want`, no registered byte changes, and the IA serves a new connection.
fn peer_ends_without_a_word(
    end: impl FnOnce(TcpStream) -> Option<TcpStream>,
    want: ConnectionEventKind,
) {
    let (t, mut s, enc, mut dec) = setup(false, qual());
    let before = snapshot(&t);
    // The responder sends nothing before the initiator's first FPDU (RFC 5044): a one-byte
    // RDMA Write of the byte already there.
    let first = seg(
        &enc,
        Segment::Write {
            last: true,
            stag: t.writable.0,
            to: t.writable.1,
            payload: &[0x5A],
        },
    );
    s.write_all(&first).unwrap();
    let sink = t.lmrs[3].triplet(0, 64);
    let remote = RmrTriplet::new(0x1234, 0, 64);
    t.ep.post_rdma_read(&[sink], 2, &remote, CompletionFlags::empty())
        .unwrap();
    // The Read Request is on the wire: the read is outstanding.
    let mut buf = [0u8; 4096];
    'request: loop {
        while let Some(u) = dec.next_ulpdu().unwrap() {
            if let Segment::ReadRequest { .. } = Segment::parse(u).unwrap() {
                break 'request;
            }
        }
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed before the Read Request");
        dec.feed(&buf[..n]);
    }
    let _kept = end(s);
    let (ev, _) = t.conn.wait(T, 1).unwrap().expect("the connection ends");
    assert_eq!(ev.as_connection().unwrap().kind, want);
    let mut cookies: Vec<u64> = (0..2)
        .map(|_| {
            let (ev, _) = t.recv.wait(T, 1).unwrap().expect("every DTO completes");
            let d = ev.as_dto().unwrap();
            assert_eq!(d.status, DtoStatus::Flushed, "cookie {}", d.cookie.0);
            d.cookie.0
        })
        .collect();
    cookies.sort_unstable();
    assert_eq!(cookies, [1, 2]);
    assert!(t.recv.dequeue().unwrap().is_none(), "each once");
    assert!(snapshot(&t) == before, "registered memory changed");
    // The IA serves on: a dapl-rs endpoint connects to a new service point of it.
    let q = qual();
    let cr_evd = t.ia.evd_create(4, None, EvdFlags::CR).unwrap();
    let _psp = t.ia.psp_create(q, &cr_evd, PspFlags::Consumer).unwrap();
    let other = dapl_testkit::kit::Side::new("tcp", None);
    other
        .ep
        .connect(std::net::Ipv4Addr::LOCALHOST, q, T, b"")
        .unwrap();
    t.ep.reset().unwrap();
    let (ev, _) = cr_evd.wait(T, 1).unwrap().expect("a connection request");
    ev.as_cr_arrival()
        .unwrap()
        .cr
        .accept(Some(&t.ep), b"")
        .unwrap();
    other.expect_conn(ConnectionEventKind::Established);
    let (ev, _) = t.conn.wait(T, 1).unwrap().expect("established");
    assert_eq!(
        ev.as_connection().unwrap().kind,
        ConnectionEventKind::Established
    );
    other.close();
    t.ia.close(CloseFlags::Abrupt).unwrap();
}

#[test]
fn a_peer_that_resets_the_connection_breaks_it_and_flushes_every_dto_once() {
    peer_ends_without_a_word(
        |s| {
            // SO_LINGER 0: the close sends a RST.
            socket2::SockRef::from(&s)
                .set_linger(Some(Duration::ZERO))
                .unwrap();
            drop(s);
            None
        },
        ConnectionEventKind::Broken,
    );
}

/// A FIN with no Terminate before it is the peer's orderly close (as siw reports a TCP close:
/// the iWARP CM's CLOSE, which uDAPL reports as DISCONNECTED); what it left outstanding here
/// can never complete and is flushed.
#[test]
fn a_peer_that_half_closes_without_a_terminate_ends_it_disconnected_and_flushes_every_dto_once() {
    peer_ends_without_a_word(
        |s| {
            s.shutdown(std::net::Shutdown::Write).unwrap();
            Some(s) // still open for reading
        },
        ConnectionEventKind::Disconnected,
    );
}

#[test]
fn a_crc_stream_of_small_fpdus_arriving_in_any_segmentation_is_placed_exactly() {
    // siw's way with a 64 KiB RDMA Write when CRC is on: FPDUs of at most 1,450 ULPDU bytes
    // (a tagged segment each, TO advancing, the last one flagged), then the go-ahead Send.
    // Here the stream reaches the endpoint in chunks of every size from 1 byte to 9 KiB, with
    // pauses, so that frames end and begin at every place in the receive buffer as it grows
    // and is compacted: every CRC checks, the memory holds exactly each round's bytes and each
    // round's Send completes its receive.
    let (t, mut s, enc, _dec) = setup(true, qual());
    let inbox = &t.lmrs[2];
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    const ULPDU_MAX: usize = 1450;
    let chunk = ULPDU_MAX - 18; // a tagged header is 14 bytes, and the 2-byte MPA length
    for round in 0..24u32 {
        let payload: Vec<u8> = (0..(64 << 10) - 1u32)
            .map(|i| (i.wrapping_mul(31) ^ round.wrapping_mul(97)) as u8)
            .collect();
        let mut bytes = Vec::new();
        let mut at = 0;
        while at < payload.len() {
            let end = (at + chunk).min(payload.len());
            enc.encode_segment(
                &Segment::Write {
                    last: end == payload.len(),
                    stag: t.big.0,
                    to: t.big.1 + at as u64,
                    payload: &payload[at..end],
                },
                &mut bytes,
            )
            .unwrap();
            at = end;
        }
        enc.encode_segment(
            &Segment::Send {
                last: true,
                msn: round + 1,
                mo: 0,
                solicited: false,
                invalidate_stag: None,
                payload: &round.to_be_bytes(),
            },
            &mut bytes,
        )
        .unwrap();
        let mut off = 0;
        while off < bytes.len() {
            let n = match round % 3 {
                0 => 1 + next(64) as usize,
                1 => 1 + next(2048) as usize,
                _ => 1 + next(9 << 10) as usize,
            }
            .min(bytes.len() - off);
            s.write_all(&bytes[off..off + n]).unwrap();
            off += n;
            if next(16) == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        let (ev, _) = t
            .recv
            .wait(T, 1)
            .unwrap()
            .expect("the round's Send in time");
        let d = ev.as_dto().unwrap();
        assert_eq!(
            (d.status, d.transferred_length),
            (DtoStatus::Success, 4),
            "round {round}"
        );
        assert_eq!(inbox.to_vec(0, 4).unwrap(), round.to_be_bytes());
        assert!(
            t.lmrs[3].to_vec(0, payload.len()).unwrap() == payload,
            "round {round}: the write's bytes"
        );
        t.ep.post_recv(&[inbox.triplet(0, 256)], 1, CompletionFlags::empty())
            .unwrap();
    }
    assert_eq!(t.ep.state(), EpState::Connected);
    t.ia.close(CloseFlags::Abrupt).unwrap();
}
