//! The tcp link writes small messages the engine has queued at once as one batch
//! (`Connection::hold`, docs/architecture.md "Posting and transmitting"): the Read Responses to
//! Read Requests received together, and Sends and Writes queued behind a read that waits for
//! ORD. Whatever is batched arrives whole and in order, with and without MPA CRC, next to
//! messages too large to batch.

use dapl::*;
use dapl_testkit::kit::*;

/// Send sizes, cycled: from one byte to past the largest message a batch copies (16 KiB).
const SEND_SIZES: [usize; 6] = [1, 8, 100, 4096, 16 * 1024, 20_000];
/// Bytes of each receive buffer (the largest send fits).
const RECV_LEN: usize = 20_480;
/// Rounds of read + send + write.
const N: usize = 60;
/// Bytes of each read and each write.
const SMALL: usize = 64;
const WRITE_LEN: usize = 1000;

fn batched_messages_arrive_whole_and_in_order(ia_name: &str) {
    // ORD 1: every read after the first waits in the send queue, and the Sends and Writes
    // posted behind it queue up too; they go out together when the read before completes.
    let a_attr = EpAttr {
        max_rdma_read_out: 1,
        max_request_dtos: 4 * N,
        ..Default::default()
    };
    let b_attr = EpAttr {
        max_recv_dtos: 2 * N,
        ..Default::default()
    };
    let p = Pair::with_attrs(ia_name, Some(&a_attr), Some(&b_attr));
    let a_src = p.a.lmr(N * RECV_LEN);
    let a_wsrc = p.a.lmr(N * WRITE_LEN);
    let a_sink = p.a.lmr(N * SMALL);
    let b_src = p.b.lmr(N * SMALL);
    let b_inbox = p.b.lmr(N * RECV_LEN);
    let b_target = p.b.lmr(N * WRITE_LEN);
    for k in 0..N {
        b_src
            .write(k * SMALL, &message_bytes(1000 + k, SMALL))
            .unwrap();
        let send = message_bytes(k, SEND_SIZES[k % SEND_SIZES.len()]);
        a_src.write(k * RECV_LEN, &send).unwrap();
        p.b.ep
            .post_recv(
                &[b_inbox.triplet((k * RECV_LEN) as u64, RECV_LEN as u64)],
                k as u64,
                CompletionFlags::empty(),
            )
            .unwrap();
    }
    for k in 0..N {
        a_wsrc
            .write(k * WRITE_LEN, &message_bytes(2000 + k, WRITE_LEN))
            .unwrap();
    }
    for k in 0..N {
        let base = 3 * k as u64;
        p.a.ep
            .post_rdma_read(
                &[a_sink.triplet((k * SMALL) as u64, SMALL as u64)],
                base,
                &b_src.rmr_triplet((k * SMALL) as u64, SMALL as u64),
                CompletionFlags::empty(),
            )
            .unwrap();
        let len = SEND_SIZES[k % SEND_SIZES.len()] as u64;
        p.a.ep
            .post_send(
                &[a_src.triplet((k * RECV_LEN) as u64, len)],
                base + 1,
                CompletionFlags::empty(),
            )
            .unwrap();
        p.a.ep
            .post_rdma_write(
                &[a_wsrc.triplet((k * WRITE_LEN) as u64, WRITE_LEN as u64)],
                base + 2,
                &b_target.rmr_triplet((k * WRITE_LEN) as u64, WRITE_LEN as u64),
                CompletionFlags::empty(),
            )
            .unwrap();
    }
    // Every request completes, successfully. Reads complete in order among themselves (and a
    // read's data is in place when it completes); the Sends and Writes behind a waiting read
    // complete after it.
    let mut next_read = 0u64;
    for _ in 0..3 * N {
        let c = p.a.req_done();
        assert_eq!(c.status, DtoStatus::Success, "{c:?}");
        if c.cookie.0 % 3 == 0 {
            let k = (c.cookie.0 / 3) as usize;
            assert_eq!(k as u64, next_read, "reads complete in order");
            next_read += 1;
            assert_eq!(
                a_sink.to_vec(k * SMALL, SMALL).unwrap(),
                message_bytes(1000 + k, SMALL),
                "read {k}"
            );
        }
    }
    // Every Send arrives whole, in order.
    for k in 0..N {
        let c = p.b.recv_done();
        let len = SEND_SIZES[k % SEND_SIZES.len()];
        assert_eq!(
            (c.cookie.0, c.status, c.transferred_length),
            (k as u64, DtoStatus::Success, len as u64),
            "send {k}"
        );
        assert!(
            b_inbox.to_vec(k * RECV_LEN, len).unwrap() == message_bytes(k, len),
            "send {k} ({len} bytes) arrived changed"
        );
    }
    // Every Write landed (they were placed before the Sends behind them completed).
    for k in 0..N {
        assert!(
            b_target.to_vec(k * WRITE_LEN, WRITE_LEN).unwrap()
                == message_bytes(2000 + k, WRITE_LEN),
            "write {k} landed changed"
        );
    }
    assert_eq!(p.a.ep.state(), EpState::Connected);
    p.close();
}

#[test]
fn batched_messages_arrive_whole_and_in_order_without_crc() {
    batched_messages_arrive_whole_and_in_order("tcp:127.0.0.1");
}

#[test]
fn batched_messages_arrive_whole_and_in_order_with_crc() {
    batched_messages_arrive_whole_and_in_order("tcp:127.0.0.1,crc");
}

#[test]
fn batched_messages_arrive_whole_and_in_order_over_every_link() {
    // The batch is a tcp link mechanism; the rule holds on every link.
    for link in LINKS {
        batched_messages_arrive_whole_and_in_order(link);
    }
}

/// Sizes of [`inline_and_large_sends_that_fill_the_socket_arrive_whole_and_in_order`], cycled:
/// up to 512 bytes a Send is copied into one frame when nothing waits before it (the link's
/// inline copy); 513 bytes go by reference into registered memory. Mostly inline,
/// so that the sockets fill with inline frames.
const MIXED_SIZES: [usize; 16] = [
    1, 8, 100, 512, 300, 8, 8, 64, 512, 500, 8, 256, 8, 513, 256, 8,
];

/// Inline and by-reference Sends, mixed and sent faster than the receiver takes them (it
/// pauses now and then with a window of receives posted, so the sender's Sends behind them
/// wait in the sockets): the sockets fill, so inline frames are written in part and finish when
/// they drain (the engine told then). Every message arrives whole and in order, and each
/// Send completes once, in order. Without bursts (`nocoalesce`), so that small Sends take
/// the inline copy rather than the held batch.
fn inline_and_large_sends_that_fill_the_socket_arrive_whole_and_in_order(ia_name: &str) {
    const COUNT: usize = 40_000;
    const WINDOW: usize = 64;
    const SLOT: usize = 64 * 1024;
    let attr = EpAttr {
        max_request_dtos: WINDOW,
        max_recv_dtos: WINDOW,
        ..Default::default()
    };
    let p = Pair::with_attrs(ia_name, Some(&attr), Some(&attr));
    let src = p.a.lmr(WINDOW * SLOT);
    let dst = p.b.lmr(WINDOW * SLOT);
    let size = |k: usize| MIXED_SIZES[k % MIXED_SIZES.len()];
    for k in 0..WINDOW {
        p.b.ep
            .post_recv(
                &[dst.triplet((k * SLOT) as u64, SLOT as u64)],
                k as u64,
                CompletionFlags::empty(),
            )
            .unwrap();
    }
    let receiver = {
        let (ep, evd, dst) = (p.b.ep.clone(), p.b.recv_evd.clone(), dst.clone());
        std::thread::spawn(move || {
            for k in 0..COUNT {
                if k % 8000 == 0 {
                    // Well within the 500 ms a Send may wait for a buffer.
                    std::thread::sleep(std::time::Duration::from_millis(120));
                }
                let (ev, _) = evd.wait(T, 1).unwrap().expect("a receive completion");
                let d = ev.as_dto().unwrap().clone();
                assert_eq!(
                    (d.cookie.0, d.status, d.transferred_length),
                    (k as u64, DtoStatus::Success, size(k) as u64),
                    "message {k}"
                );
                let at = k % WINDOW * SLOT;
                assert!(
                    dst.to_vec(at, size(k)).unwrap() == message_bytes(k, size(k)),
                    "message {k} ({} bytes) arrived changed",
                    size(k)
                );
                ep.post_recv(
                    &[dst.triplet(at as u64, SLOT as u64)],
                    (k + WINDOW) as u64,
                    CompletionFlags::empty(),
                )
                .unwrap();
            }
        })
    };
    let (mut posted, mut done) = (0, 0);
    while done < COUNT {
        while posted < COUNT && posted - done < WINDOW {
            let at = posted % WINDOW * SLOT;
            src.write(at, &message_bytes(posted, size(posted))).unwrap();
            p.a.ep
                .post_send(
                    &[src.triplet(at as u64, size(posted) as u64)],
                    posted as u64,
                    CompletionFlags::empty(),
                )
                .unwrap();
            posted += 1;
        }
        let d = p.a.req_done();
        assert_eq!((d.cookie.0, d.status), (done as u64, DtoStatus::Success));
        done += 1;
    }
    receiver.join().unwrap();
    assert!(
        p.a.req_evd.dequeue().unwrap().is_none(),
        "a Send completed twice"
    );
    p.close();
}

#[test]
fn inline_and_large_sends_that_fill_the_socket_arrive_whole_and_in_order_without_crc() {
    inline_and_large_sends_that_fill_the_socket_arrive_whole_and_in_order(
        "tcp:127.0.0.1,nocoalesce",
    );
}

#[test]
fn inline_and_large_sends_that_fill_the_socket_arrive_whole_and_in_order_with_crc() {
    inline_and_large_sends_that_fill_the_socket_arrive_whole_and_in_order(
        "tcp:127.0.0.1,crc,nocoalesce",
    );
}
