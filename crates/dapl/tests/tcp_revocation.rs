//! Deregistration is final (as `ibv_dereg_mr`): once `Lmr::free` returns, the provider never
//! reads or writes that memory again, whatever a peer queued or has in flight. A hostile peer on
//! raw TCP (speaking iWARP through the sans-IO codec) against caller memory registered with
//! `Pz::lmr_register`:
//! - it queues RDMA Read Requests for much more than the sockets hold and stops reading; the
//!   consumer frees the LMR, then poisons the memory (or unmaps it, so that any access faults);
//!   the peer reads on: every payload byte it gets is one the memory held before the free, the
//!   stream ends, and the endpoint ends BROKEN;
//! - it sends a large RDMA Write in two pieces and the consumer frees and poisons the memory in
//!   between: nothing of the second piece lands, the peer gets a Terminate (invalid STag) and
//!   the endpoint ends BROKEN. (Each socket read of a cut-through Write re-checks the memory
//!   table; revocation closes the window between that check and the read.)
//! - the window itself: a cut-through socket read into the memory is held (`dapl::testing`)
//!   after it entered the region; `lmr_free` does not return until it is let go, and nothing
//!   lands after `lmr_free` returned.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::ptr::NonNull;
use std::time::Duration;

use dapl::*;
use dapl_testkit::kit::{listen, T};
use iwarp::mpa::{InitiatorConfig, InitiatorEvent, MpaInitiator};
use iwarp::rdmap::ReadRequest;
use iwarp::terminate::DdpTaggedErrorCode;
use iwarp::{FpduDecoder, FpduEncoder, Segment, TerminateCause};

/// What the memory holds while registered, and what the consumer writes once it is freed.
const BEFORE: u8 = 0x5A;
const POISON: u8 = 0xDE;

/// Anonymous memory of the test's own, registered with `lmr_register`.
struct Mapped {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapped {
    fn new(len: usize, byte: u8) -> Mapped {
        // SAFETY: an anonymous private mapping; no address hint, no file.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED, "mmap");
        let ptr = NonNull::new(p.cast::<u8>()).expect("mmap gave a null address");
        // SAFETY: `len` bytes were just mapped writable.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), byte, len) };
        Mapped { ptr, len }
    }

    /// Overwrites every byte (the memory is the test's alone again: its LMR was freed).
    fn poison(&self) {
        // SAFETY: the mapping is live and writable; the provider no longer touches it.
        unsafe { std::ptr::write_bytes(self.ptr.as_ptr(), POISON, self.len) };
    }

    /// True if every byte is `byte`.
    fn all(&self, byte: u8) -> bool {
        // SAFETY: the mapping is live; nothing writes it any more (the provider let go of it).
        let s = unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) };
        s.iter().all(|&b| b == byte)
    }

    /// Unmaps the memory: any later access by anyone faults.
    fn unmap(self) {
        // SAFETY: the mapping made in `new`, unmapped once (self is consumed).
        let r = unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
        assert_eq!(r, 0, "munmap");
    }
}

/// A dapl-rs tcp endpoint with `mem` registered (`privs`), accepting one raw connection whose
/// socket receive buffer is small; the raw stream after MPA.
struct Target {
    ia: InterfaceAdapter,
    conn: Evd,
    lmr: Lmr,
    /// Held: dropping the last handle would free the endpoint.
    _ep: Endpoint,
}

fn setup(mem: &Mapped, privs: MemPriv, ord: u32) -> (Target, TcpStream, FpduEncoder) {
    let (ia, _) = InterfaceAdapter::open("tcp:127.0.0.1", 16).unwrap();
    let pz = ia.pz_create().unwrap();
    let dto = ia.evd_create(64, None, EvdFlags::DTO).unwrap();
    let conn = ia.evd_create(8, None, EvdFlags::CONNECTION).unwrap();
    let attr = EpAttr {
        max_rdma_read_in: ord as usize,
        ..EpAttr::default()
    };
    let ep = ia
        .ep_create(&pz, Some(&dto), Some(&dto), Some(&conn), Some(&attr))
        .unwrap();
    // SAFETY: `mem` stays mapped until the test frees the LMR (or closes the IA), and the
    // test touches it only after that.
    let lmr = unsafe { pz.lmr_register(mem.ptr, mem.len, privs) }.unwrap();
    let (psp, cr_evd, qual, _) = listen(&ia);
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    // A small receive window: the provider's responses back up in its own socket at once.
    sock.set_recv_buffer_size(4096).unwrap();
    sock.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], qual as u16)).into())
        .unwrap();
    let mut s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut init = MpaInitiator::new(
        InitiatorConfig {
            crc: false,
            enhanced: true,
            ird: 4,
            ord: ord as u16,
            peer_to_peer: None,
        },
        b"",
    )
    .unwrap();
    s.write_all(init.request()).unwrap();
    let (ev, _) = cr_evd.wait(T, 1).unwrap().expect("an event in time");
    let cr = ev.as_cr_arrival().unwrap().cr.clone();
    cr.accept(Some(&ep), b"").unwrap();
    let mut buf = [0u8; 512];
    loop {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed during MPA");
        if let Some(InitiatorEvent::Accepted(a)) = init.feed(&buf[..n]).unwrap() {
            assert!(a.leftover.is_empty(), "no FPDU before ours");
            break;
        }
    }
    let (ev, _) = conn.wait(T, 1).unwrap().expect("an event in time");
    assert_eq!(
        ev.as_connection().unwrap().kind,
        ConnectionEventKind::Established
    );
    drop(psp);
    (
        Target {
            ia,
            conn,
            lmr,
            _ep: ep,
        },
        s,
        FpduEncoder::new(false),
    )
}

fn seg(enc: &FpduEncoder, s: Segment<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    enc.encode_segment(&s, &mut out).unwrap();
    out
}

/// Reads the stream to its end (EOF or reset), at most `limit` bytes.
fn read_to_end(s: &mut TcpStream, limit: usize) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return all,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return all,
            Err(e) => panic!("reading the provider's stream: {e}"),
        }
        assert!(
            all.len() <= limit,
            "more than {limit} bytes: the reads were all served"
        );
    }
}

/// The payload bytes of the tagged FPDUs (Read Responses) in a raw FPDU stream without CRC,
/// including those of a last FPDU cut short; and whether a Terminate came.
fn tagged_payloads(stream: &[u8]) -> (Vec<u8>, bool) {
    let (mut out, mut terminated, mut p) = (Vec::new(), false, 0);
    while p + 2 <= stream.len() {
        let ulpdu_len = u16::from_be_bytes([stream[p], stream[p + 1]]) as usize;
        let ulpdu = &stream[p + 2..(p + 2 + ulpdu_len).min(stream.len())];
        let tagged = ulpdu.first().is_some_and(|c| c & 0x80 != 0);
        if tagged {
            // DDP tagged header (control, RDMAP control, STag, TO): 14 bytes.
            out.extend_from_slice(ulpdu.get(14..).unwrap_or_default());
        } else if ulpdu.get(1).is_some_and(|c| c & 0x0F == 0x07) {
            terminated = true;
        }
        let fpdu = 2 + ulpdu_len + (4 - (2 + ulpdu_len) % 4) % 4 + 4;
        p += fpdu;
    }
    (out, terminated)
}

/// Reads the rest of the stream: its first FPDU is a Terminate for an invalid STag.
fn expect_terminate_invalid_stag(s: &mut TcpStream) {
    let stream = read_to_end(s, 1 << 20);
    let mut dec = FpduDecoder::new(false);
    dec.feed(&stream);
    let u = dec.next_ulpdu().unwrap().expect("a Terminate").to_vec();
    let Segment::Terminate { message, .. } = Segment::parse(&u).unwrap() else {
        panic!("expected a Terminate");
    };
    assert_eq!(
        message.cause,
        TerminateCause::DdpTagged(DdpTaggedErrorCode::InvalidStag)
    );
}

fn expect_broken(t: &Target) {
    let (ev, _) = t.conn.wait(T, 1).unwrap().expect("an event in time");
    assert_eq!(
        ev.as_connection().unwrap().kind,
        ConnectionEventKind::Broken
    );
}

/// The queued-reads case; `unmap`: unmap the memory after the free instead of keeping it
/// poisoned.
fn queued_reads_then_free(unmap: bool) {
    const LEN: usize = 2 << 20;
    const READS: u32 = 16;
    let mem = Mapped::new(LEN, BEFORE);
    let (t, mut s, enc) = setup(
        &mem,
        MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE | MemPriv::REMOTE_READ,
        READS,
    );
    // 32 MiB asked for, far more than both sockets' buffers hold.
    for i in 0..READS {
        let rr = seg(
            &enc,
            Segment::ReadRequest {
                msn: i + 1,
                request: ReadRequest {
                    sink_stag: 0x0102_0304,
                    sink_to: 0,
                    size: LEN as u32,
                    source_stag: t.lmr.rmr_context().0,
                    source_to: t.lmr.address(),
                },
            },
        );
        s.write_all(&rr).unwrap();
    }
    // The provider answers until its socket is full, then waits for the peer to read.
    std::thread::sleep(Duration::from_millis(300));
    t.lmr.free().unwrap();
    if unmap {
        mem.unmap();
    } else {
        mem.poison();
    }
    let stream = read_to_end(&mut s, LEN * READS as usize);
    let (payload, _) = tagged_payloads(&stream);
    assert!(
        !payload.is_empty(),
        "some responses went out before the free"
    );
    assert!(
        payload.len() < LEN * READS as usize,
        "the reads were all served although their memory was freed"
    );
    if let Some(at) = payload.iter().position(|&b| b != BEFORE) {
        panic!(
            "payload byte {at} of {} is {:#04x}: memory read after lmr_free",
            payload.len(),
            payload[at]
        );
    }
    expect_broken(&t);
    t.ia.close(CloseFlags::Abrupt).unwrap();
}

#[test]
fn lmr_free_stops_queued_read_responses_no_byte_sent_after_it() {
    queued_reads_then_free(false);
}

#[test]
fn lmr_free_stops_queued_read_responses_memory_unmapped_after_it_is_never_touched() {
    queued_reads_then_free(true);
}

#[test]
fn lmr_free_during_a_large_write_places_nothing_after_it_and_terminates_invalid_stag() {
    const LEN: usize = 64 << 10;
    let mem = Mapped::new(LEN, BEFORE);
    let (t, mut s, enc) = setup(&mem, MemPriv::ALL, 4);
    // One 60 KiB Write (cut through: received straight into the memory), in two pieces.
    let payload = vec![0x11u8; 60 << 10];
    let bytes = seg(
        &enc,
        Segment::Write {
            last: true,
            stag: t.lmr.rmr_context().0,
            to: t.lmr.address(),
            payload: &payload,
        },
    );
    let first = 2 + 14 + 20_000;
    s.write_all(&bytes[..first]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    t.lmr.free().unwrap();
    mem.poison();
    s.write_all(&bytes[first..]).unwrap();
    expect_terminate_invalid_stag(&mut s);
    assert!(
        mem.all(POISON),
        "bytes of the write landed in memory after lmr_free"
    );
    expect_broken(&t);
    t.ia.close(CloseFlags::Abrupt).unwrap();
    mem.unmap();
}

#[test]
fn lmr_free_waits_for_a_socket_read_into_the_memory_in_flight_and_nothing_lands_after_it() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const LEN: usize = 64 << 10;
    let mem = Mapped::new(LEN, BEFORE);
    let (t, mut s, enc) = setup(&mem, MemPriv::ALL, 4);
    let hold = dapl::testing::hold_receives_into(t.lmr.address());
    let payload = vec![0x11u8; 60 << 10];
    let write = |payload: &[u8]| {
        seg(
            &enc,
            Segment::Write {
                last: true,
                stag: t.lmr.rmr_context().0,
                to: t.lmr.address(),
                payload,
            },
        )
    };
    let bytes = write(&payload);
    // The first piece starts the cut-through placement; its next socket read is held once it
    // entered the region.
    let first = 2 + 14 + 20_000;
    s.write_all(&bytes[..first]).unwrap();
    assert!(
        hold.wait_reached(T.unwrap()),
        "the cut-through socket read into the memory"
    );
    let freed = Arc::new(AtomicBool::new(false));
    let free = {
        let (lmr, freed) = (t.lmr.clone(), freed.clone());
        std::thread::spawn(move || {
            lmr.free().unwrap();
            freed.store(true, Ordering::SeqCst);
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !freed.load(Ordering::SeqCst),
        "lmr_free returned while a socket read into the memory was in flight"
    );
    // The rest waits in the socket for the held read, which may place it: lmr_free has not
    // returned yet.
    s.write_all(&bytes[first..]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    hold.release();
    free.join().unwrap();
    assert!(freed.load(Ordering::SeqCst));
    // Freed: from here on no byte may land.
    mem.poison();
    s.write_all(&write(&[0x22u8; 100])).unwrap();
    expect_terminate_invalid_stag(&mut s);
    assert!(mem.all(POISON), "bytes landed in memory after lmr_free");
    expect_broken(&t);
    t.ia.close(CloseFlags::Abrupt).unwrap();
    mem.unmap();
}
