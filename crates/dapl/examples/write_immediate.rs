//! RDMA Write with immediate data (the DAT IB extension's `dat_ib_post_rdma_write_immed`): a
//! one-sided write that also completes a receive at the target, carrying a 32-bit value and
//! the write's length. The target learns that (and when) the data arrived without a second
//! message; its receive buffer gets no data, so a zero-length receive will do. Over tcp it is
//! an RDMA Write followed by an RFC 7306 Immediate Data message, understood by dapl-rs peers.
//!
//! Run: `cargo run -p dapl --example write_immediate [-- IA_NAME]` (default `loopback`)

mod common;

use common::*;
use dapl::*;

fn main() -> Res<()> {
    let (ia, _async_evd) = InterfaceAdapter::open(&ia_name(), 16)?;
    let pz = ia.pz_create()?;
    let (a, b) = (Side::new(&ia, &pz, None)?, Side::new(&ia, &pz, None)?);
    let src = pz.lmr_allocate(64 * 1024, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)?;
    let window = pz.lmr_allocate(64 * 1024, MemPriv::ALL)?;
    let (reply, _psp) = connect(&a, &ia, &b, b"", &window.remote(..)?.to_wire())?;
    let remote = RmrTriplet::from_wire(&reply).ok_or("short private data")?;

    for (round, len) in [(1u32, 100usize), (2, 64 * 1024)] {
        // The target's zero-length receive: the immediate data's completion takes it.
        b.ep.post_recv(&[], u64::from(round), CompletionFlags::empty())?;
        let data: Vec<u8> = (0..len).map(|i| (i as u32 * 7 + round) as u8).collect();
        src.write(0, &data)?;
        let immediate = 0xfeed_0000 | round;
        a.ep.post_rdma_write_immed(
            &[src.slice(0..len)?],
            u64::from(round),
            &remote,
            immediate,
            CompletionFlags::empty(),
        )?;
        let w = completion(&a.req_evd)?;
        assert_eq!(w.operation, DtoOp::RdmaWriteImmed);
        // The receive completes only once the data is placed: reading it now is safe.
        let r = completion(&b.recv_evd)?;
        assert_eq!(r.operation, DtoOp::RecvImmed);
        assert_eq!(r.immediate, Some(immediate));
        assert_eq!(r.transferred_length, len as u64);
        assert_eq!(window.to_vec(0, len)?, data);
        println!(
            "the target's receive {} completed with immediate {:#x} for {} written bytes",
            r.cookie, immediate, r.transferred_length
        );
    }

    ia.close(CloseFlags::Abrupt)?;
    Ok(())
}
