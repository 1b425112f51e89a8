//! Owned registration: `Pz::register` takes a buffer, peers read and write it, and
//! `Lmr::deregister` hands it back, with their writes, only once nothing can touch it again.

use dapl::*;
use dapl_testkit::kit::*;

per_link!(
    an_owned_buffer_serves_peer_reads_and_writes_and_comes_back_with_the_writes,
    |link| {
        let p = Pair::new(link);
        let buf: Vec<u8> = (0..8192u32).map(|i| (i * 13) as u8).collect();
        let want_read = buf[100..4196].to_vec();
        let lmr = p.a.pz.register(buf, MemPriv::ALL).unwrap();
        assert_eq!(lmr.len(), 8192);
        // The peer reads part of it...
        let sink = p.b.lmr(4096);
        p.b.ep
            .post_rdma_read(
                &[sink.triplet(0, 4096)],
                1,
                &lmr.rmr_triplet(100, 4096),
                CompletionFlags::empty(),
            )
            .unwrap();
        assert_eq!(p.b.req_done().status, DtoStatus::Success);
        assert_eq!(sink.to_vec(0, 4096).unwrap(), want_read);
        // ... and writes another part.
        let src = p.b.lmr(1000);
        src.fill(0, 1000, 0xA5).unwrap();
        p.b.ep
            .post_rdma_write(
                &[src.triplet(0, 1000)],
                2,
                &lmr.rmr_triplet(5000, 1000),
                CompletionFlags::empty(),
            )
            .unwrap();
        assert_eq!(p.b.req_done().status, DtoStatus::Success);
        eventually("the write lands", || {
            lmr.load_acquire(5999).unwrap() == 0xA5
        });
        let back = lmr.deregister().unwrap();
        assert_eq!(back.len(), 8192);
        assert_eq!(
            &back[100..4196],
            &want_read[..],
            "what the peer read is unchanged"
        );
        assert!(
            back[5000..6000].iter().all(|&b| b == 0xA5),
            "the peer's write"
        );
        assert_eq!(back[4999], (4999u32 * 13) as u8);
        assert_eq!(back[6000], (6000u32 * 13) as u8);
        // The LMR is gone: its handle and its STag.
        expect_err(lmr.read(0, &mut [0u8; 4]), ErrorType::InvalidHandle);
        expect_err(lmr.deregister(), ErrorType::InvalidHandle);
        // (A Read: over tcp a refused Write has completed when TCP took it.)
        p.b.ep
            .post_rdma_read(
                &[sink.triplet(0, 8)],
                3,
                &lmr.rmr_triplet(0, 8),
                CompletionFlags::empty(),
            )
            .unwrap();
        assert_eq!(p.b.req_done().status, DtoStatus::RemoteAccess, "stale STag");
        p.close();
    }
);

once!(
    deregister_is_refused_while_an_rmr_is_bound_and_for_memory_the_lmr_does_not_own,
    |link| {
        let s = Side::new(link, None);
        let owned = s.pz.register(vec![7u8; 4096], MemPriv::ALL).unwrap();
        let rmr = s.pz.rmr_create().unwrap();
        rmr.bind(
            &owned,
            owned.triplet(0, 100),
            MemPriv::REMOTE_WRITE,
            &s.ep,
            1,
            CompletionFlags::empty(),
        )
        .unwrap();
        let e = expect_err(owned.deregister(), ErrorType::InvalidState);
        assert_eq!(e.subtype(), Subtype::InvalidStateLmrInUse);
        assert_eq!(owned.load_acquire(4095).unwrap(), 7, "still registered");
        rmr.free().unwrap();
        assert_eq!(owned.deregister().unwrap(), vec![7u8; 4096]);

        // Library memory and lent memory are not the LMR's to hand back.
        let allocated = s.lmr(64);
        let e = expect_err(allocated.deregister(), ErrorType::InvalidParameter);
        assert!(e.to_string().contains("use free"), "{e}");
        allocated.query().unwrap();
        allocated.free().unwrap();

        // An empty buffer is refused (and a Box<[u8]> is taken as well as a Vec).
        expect_err(
            s.pz.register(Vec::new(), MemPriv::ALL),
            ErrorType::LengthError,
        );
        let boxed: Box<[u8]> = vec![1u8; 16].into_boxed_slice();
        let l = s.pz.register(boxed, MemPriv::ALL).unwrap();

        // The IA's close frees the LMR; the buffer still comes back, once.
        s.close();
        assert_eq!(l.deregister().unwrap(), vec![1u8; 16]);
        expect_err(l.deregister(), ErrorType::InvalidHandle);
    }
);
