//! The tcp and shm links write a suppressed small Send straight from its poster's thread,
//! under the QP's lock, when the QP has nothing queued. Over tcp only a post that begins its
//! poster's run (the poster looked for completions since its last post, as a ping-pong's
//! every post does) is taken: a post that continues a run (a stream) takes the engine's queue
//! as every other message does, where the link's burst rules hold it. Over shm every one is
//! taken (the ring has room). Either way every message arrives whole and in order. Its own
//! test binary: the count it reads (`dapl::testing::inline_posts`) is the process's, so one
//! test runs both links.

use dapl::*;
use dapl_testkit::kit::*;

/// Bytes of each receive buffer (and of each message's slot in the source).
const SLOT: usize = 64;

#[test]
fn a_suppressed_send_goes_inline_over_tcp_when_it_begins_a_run_and_over_shm_always() {
    // With CRCs on too: an inline Send's frame is built apart from `transmit`'s, and the
    // receiving side checks every CRC (a bad one is a Terminate and a broken connection).
    for link in ["tcp", "tcp:127.0.0.1,crc", "shm"] {
        runs_begin_inline(link);
    }
}

fn runs_begin_inline(link: &str) {
    let p = Pair::streaming(link, 64);
    let src = p.a.lmr(64 * SLOT);
    let inbox = p.b.lmr(64 * SLOT);
    for m in 0..64 {
        src.write(m * SLOT, &message_bytes(m, 8)).unwrap();
        p.b.post_recv_slot(&inbox, m, SLOT);
    }
    let send = |m: usize, flags: CompletionFlags| {
        p.a.ep
            .post_send(&[src.triplet((m * SLOT) as u64, 8)], m as u64, flags)
            .unwrap();
    };
    let look = || assert!(p.a.req_evd.dequeue().unwrap().is_none());
    let inline = testing::inline_posts;
    let shm = link.starts_with("shm");
    let mut m = 0;
    // A run of ten: over tcp its first only, over shm all ten.
    look();
    let before = inline();
    for _ in 0..10 {
        send(m, CompletionFlags::SUPPRESS);
        m += 1;
    }
    assert_eq!(
        inline() - before,
        if shm { 10 } else { 1 },
        "{link}: a stream's posts"
    );
    // Ten posts, each after a look (a ping-pong's pattern): all ten.
    let before = inline();
    for _ in 0..10 {
        look();
        send(m, CompletionFlags::SUPPRESS);
        m += 1;
    }
    assert_eq!(inline() - before, 10, "{link}: posts that each begin a run");
    // A Send whose completion is reported never goes inline; the suppressed one after it
    // continues the run (over tcp queued, over shm inline: the reported one is out).
    look();
    let before = inline();
    send(m, CompletionFlags::empty());
    assert_eq!(inline() - before, 0, "{link}: a reported Send");
    send(m + 1, CompletionFlags::SUPPRESS);
    m += 2;
    assert_eq!(
        inline() - before,
        u64::from(shm),
        "{link}: the suppressed Send after a reported one"
    );
    let c = p.a.req_done();
    assert_eq!((c.cookie.0, c.status), (20, DtoStatus::Success));
    for k in 0..m {
        p.b.expect_message(&inbox, k * SLOT, k, 8);
    }
    assert_eq!(p.a.ep.state(), EpState::Connected);
    p.close();
}
