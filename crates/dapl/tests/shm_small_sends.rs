//! Small Sends over the shm link: a Send of one segment that fits in one ring record is written
//! straight from its segment (`ShmConn::transmit_as`), and a suppressed one posted while the QP
//! has nothing queued is written by the poster under the QP's lock (`Qp::transmit_inline`);
//! when the peer's ring is full it takes the general path, which queues it until the peer
//! frees room (and later suppressed Sends queue behind it). Whatever path each took, every
//! message arrives whole and in order, and every completion asked for comes.

use dapl::*;
use dapl_testkit::kit::*;

/// Messages: more than the 128 KiB ring holds (records of 64 or 128 bytes here), so that the
/// ring fills while the receiver has no buffer and later Sends wait in the sender.
const N: usize = 3000;
/// Payload sizes, cycled: empty, one word, odd, the largest that fits one record (128 - 40),
/// and one byte more, which takes two records' worth of room through the general path.
const SIZES: [usize; 6] = [0, 8, 13, 64, 88, 89];
/// Bytes of each receive buffer.
const SLOT: usize = 128;

#[test]
fn small_sends_that_find_the_ring_full_wait_and_arrive_whole_and_in_order() {
    // Every completion may be queued before the first is dequeued: EVDs that hold them all.
    let p = Pair::streaming("shm", N + 8);
    let src = p.a.lmr(N * SLOT);
    let inbox = p.b.lmr(N * SLOT);
    for m in 0..N {
        src.write(m * SLOT, &message_bytes(m, SIZES[m % SIZES.len()]))
            .unwrap();
    }
    // Every tenth Send asks for its completion (held until it is queued), the rest are
    // suppressed (published at once): both ways through the one-record path.
    for m in 0..N {
        let flags = if m % 10 == 9 {
            CompletionFlags::empty()
        } else {
            CompletionFlags::SUPPRESS
        };
        let len = SIZES[m % SIZES.len()] as u64;
        p.a.ep
            .post_send(&[src.triplet((m * SLOT) as u64, len)], m as u64, flags)
            .unwrap();
    }
    // No receive buffer yet: the first record waits in the ring (well within the grace before
    // a Send without a buffer breaks the connection), the ring fills and the rest wait.
    for m in 0..N {
        p.b.post_recv_slot(&inbox, m, SLOT);
    }
    for m in 0..N {
        p.b.expect_message(&inbox, m * SLOT, m, SIZES[m % SIZES.len()]);
    }
    for m in (9..N).step_by(10) {
        let c = p.a.req_done();
        assert_eq!((c.cookie.0, c.status), (m as u64, DtoStatus::Success));
    }
    assert!(p.a.req_evd.dequeue().unwrap().is_none());
    assert_eq!(p.a.ep.state(), EpState::Connected);
    p.close();
}
