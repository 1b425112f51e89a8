use dapl::*;
use dapl_testkit::kit::*;

per_link!(send_write_read_roundtrip, |link| {
    let p = Pair::new(link);
    let (la, lb) = (p.a.lmr(8192), p.b.lmr(8192));
    lb.fill(0, 8192, 0).unwrap();
    p.b.ep
        .post_recv(&[lb.triplet(0, 100)], 7, CompletionFlags::empty())
        .unwrap();
    la.write(0, b"ping").unwrap();
    p.a.ep
        .post_send(&[la.triplet(0, 4)], 1, CompletionFlags::empty())
        .unwrap();
    let s = p.a.req_done();
    assert_eq!(
        (s.cookie.0, s.status, s.transferred_length, s.operation),
        (1, DtoStatus::Success, 4, DtoOp::Send)
    );
    let r = p.b.recv_done();
    assert_eq!(
        (r.cookie.0, r.status, r.transferred_length, r.operation),
        (7, DtoStatus::Success, 4, DtoOp::Receive)
    );
    assert_eq!(lb.to_vec(0, 4).unwrap(), b"ping");
    // RDMA write a -> b
    la.write(100, b"written").unwrap();
    p.a.ep
        .post_rdma_write(
            &[la.triplet(100, 7)],
            2,
            &lb.rmr_triplet(1000, 7),
            CompletionFlags::empty(),
        )
        .unwrap();
    let w = p.a.req_done();
    assert_eq!(
        (w.status, w.transferred_length, w.operation),
        (DtoStatus::Success, 7, DtoOp::RdmaWrite)
    );
    // Over tcp the write completes when TCP took it; placement follows.
    eventually("the write is placed", || {
        lb.to_vec(1000, 7).unwrap() == b"written"
    });
    // RDMA read a <- b
    lb.write(2000, b"readme").unwrap();
    p.a.ep
        .post_rdma_read(
            &[la.triplet(3000, 6)],
            3,
            &lb.rmr_triplet(2000, 6),
            CompletionFlags::empty(),
        )
        .unwrap();
    let rd = p.a.req_done();
    assert_eq!(
        (rd.status, rd.transferred_length, rd.operation),
        (DtoStatus::Success, 6, DtoOp::RdmaRead)
    );
    assert_eq!(la.to_vec(3000, 6).unwrap(), b"readme");
    p.a.ep.disconnect(CloseFlags::Graceful).unwrap();
    p.a.expect_conn(ConnectionEventKind::Disconnected);
    p.b.expect_conn(ConnectionEventKind::Disconnected);
    p.close();
});
