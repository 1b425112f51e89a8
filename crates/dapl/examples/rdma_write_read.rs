//! RDMA Write and RDMA Read: one-sided transfers into and out of a peer's registered memory.
//! The target tells the initiator where it may write and read (an `RmrTriplet`: context,
//! address, length; here in the connection's private data, 20 bytes on the wire); it posts
//! nothing and sees no completion, its memory simply changes. The initiator's completions say
//! when its operations are done; a Read that follows a Write on the same connection sees the
//! written data.
//!
//! Run: `cargo run -p dapl --example rdma_write_read [-- IA_NAME]` (default `loopback`)

mod common;

use common::*;
use dapl::*;

const LEN: usize = 256 * 1024;

fn main() -> Res<()> {
    let (ia, _async_evd) = InterfaceAdapter::open(&ia_name(), 16)?;
    let pz = ia.pz_create()?;
    let (a, b) = (Side::new(&ia, &pz, None)?, Side::new(&ia, &pz, None)?);
    let a_mem = pz.lmr_allocate(2 * LEN, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)?;
    // The target's window: remote peers may write and read it.
    let window = pz.lmr_allocate(LEN, MemPriv::ALL)?;
    let (reply, _psp) = connect(&a, &ia, &b, b"", &window.remote(..)?.to_wire())?;
    let remote = RmrTriplet::from_wire(&reply).ok_or("short private data")?;

    // Write a pattern into the target's window.
    let data: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
    a_mem.write(0, &data)?;
    a.ep.post_rdma_write(
        &[a_mem.slice(0..LEN)?],
        1,
        &remote,
        CompletionFlags::empty(),
    )?;
    let w = completion(&a.req_evd)?;
    assert_eq!(
        (w.operation, w.transferred_length),
        (DtoOp::RdmaWrite, LEN as u64)
    );

    // Read it back into the initiator's second half. On links where a Write completes when
    // the transport took it (tcp), this Read, behind it on the connection, is what tells that
    // the Write has been placed.
    a.ep.post_rdma_read(&[a_mem.slice(LEN..)?], 2, &remote, CompletionFlags::empty())?;
    let r = completion(&a.req_evd)?;
    assert_eq!(
        (r.operation, r.transferred_length),
        (DtoOp::RdmaRead, LEN as u64)
    );
    assert_eq!(a_mem.to_vec(LEN, LEN)?, data, "read back what was written");
    assert_eq!(window.to_vec(0, LEN)?, data, "the target's memory holds it");
    println!("wrote {LEN} bytes into the peer's memory and read them back");

    // A Write outside the window is refused by the target's memory table: nothing is placed,
    // and the connection breaks (an iWARP Terminate on tcp).
    let beyond = RmrTriplet {
        virtual_address: remote.virtual_address + LEN as u64,
        ..remote
    };
    a.ep.post_rdma_write(&[a_mem.slice(0..8)?], 3, &beyond, CompletionFlags::empty())?;
    b.expect(ConnectionEventKind::Broken)?;
    println!("a write past the end of the window broke the connection");

    ia.close(CloseFlags::Abrupt)?;
    Ok(())
}
