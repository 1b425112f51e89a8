//! The tcp and shm links write a suppressed small Send straight from its poster's thread,
//! under the QP's lock, when the QP has nothing queued and the post begins its poster's run
//! (the poster looked for completions since its last post, as a ping-pong's every post does);
//! a post that continues a run (a stream) takes the engine's queue as every other message
//! does. Either way every message arrives whole and in order. Its own test binary: the count
//! it reads (`dapl::testing::inline_posts`) is the process's, so one test runs both links.

use dapl::*;
use dapl_testkit::kit::*;

/// Bytes of each receive buffer (and of each message's slot in the source).
const SLOT: usize = 64;

#[test]
fn only_a_suppressed_send_that_begins_its_posters_run_is_written_inline() {
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
    let mut m = 0;
    // A run of ten: its first only.
    look();
    let before = inline();
    for _ in 0..10 {
        send(m, CompletionFlags::SUPPRESS);
        m += 1;
    }
    assert_eq!(
        inline() - before,
        1,
        "{link}: a stream's posts after its first"
    );
    // Ten posts, each after a look (a ping-pong's pattern): all ten.
    let before = inline();
    for _ in 0..10 {
        look();
        send(m, CompletionFlags::SUPPRESS);
        m += 1;
    }
    assert_eq!(inline() - before, 10, "{link}: posts that each begin a run");
    // A Send whose completion is reported never goes inline, nor does the one after it (it
    // continues the run).
    look();
    let before = inline();
    send(m, CompletionFlags::empty());
    send(m + 1, CompletionFlags::SUPPRESS);
    m += 2;
    assert_eq!(inline() - before, 0, "{link}: a reported Send and its run");
    let c = p.a.req_done();
    assert_eq!((c.cookie.0, c.status), (20, DtoStatus::Success));
    for k in 0..m {
        p.b.expect_message(&inbox, k * SLOT, k, 8);
    }
    assert_eq!(p.a.ep.state(), EpState::Connected);
    p.close();
}
