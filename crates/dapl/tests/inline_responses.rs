//! The tcp link writes the response to a small RDMA Read Request that arrived alone (nothing
//! received after it waits to be handled) straight from the thread that handled the request,
//! when nothing of the responder's QP is queued before it; requests that arrive together are
//! answered in one batch once they are handled, as before. Either way every read completes
//! once, in order, with its bytes. Its own test binary: the count it reads
//! (`dapl::testing::inline_responses`) is the process's.

use dapl::*;
use dapl_testkit::kit::*;

/// Reads in each part of the test.
const READS: usize = 64;

#[test]
fn a_lone_read_request_is_answered_inline_and_every_read_completes_in_order() {
    // With CRCs on too: the inline response's frame is built apart from `transmit`'s, and the
    // initiator checks every CRC (a bad one is a Terminate and a broken connection).
    for link in ["tcp", "tcp:127.0.0.1,crc"] {
        reads_answered(link);
    }
}

fn reads_answered(link: &str) {
    let p = Pair::streaming(link, READS);
    // B's source: 8 distinct bytes per read; A's sink: one slot per read.
    let src = p.b.lmr(READS * 8);
    for k in 0..READS {
        src.write(k * 8, &[k as u8 + 1; 8]).unwrap();
    }
    let sink = p.a.lmr(READS * 8);
    let read = |k: usize| {
        p.a.ep
            .post_rdma_read(
                &[sink.triplet((k * 8) as u64, 8)],
                k as u64,
                &src.rmr_triplet((k * 8) as u64, 8),
                CompletionFlags::empty(),
            )
            .unwrap();
    };
    let inline = testing::inline_responses;

    // One read at a time: each request arrives alone at an idle responder.
    let before = inline();
    for k in 0..READS / 2 {
        read(k);
        let c = p.a.req_done();
        assert_eq!((c.cookie.0, c.status), (k as u64, DtoStatus::Success));
    }
    // The responder counts a response once its link took it, which may be after the
    // initiator has seen it arrive: wait for the count to settle.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while inline() - before < (READS / 2) as u64 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(
        inline() - before,
        (READS / 2) as u64,
        "{link}: a lone request's response goes inline"
    );

    // The rest posted back to back: they arrive together or one by one, as the initiator's
    // ORD and bursts let them, so their responses are batched or inline; all complete in order.
    for k in READS / 2..READS {
        read(k);
    }
    for k in READS / 2..READS {
        let c = p.a.req_done();
        assert_eq!((c.cookie.0, c.status), (k as u64, DtoStatus::Success));
    }
    let mut got = vec![0u8; READS * 8];
    sink.read(0, &mut got).unwrap();
    for k in 0..READS {
        assert_eq!(got[k * 8..k * 8 + 8], [k as u8 + 1; 8], "{link}: read {k}");
    }
    assert_eq!(p.a.ep.state(), EpState::Connected);
    assert_eq!(p.b.ep.state(), EpState::Connected);
    p.close();
}
