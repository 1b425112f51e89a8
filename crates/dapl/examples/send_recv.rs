//! Send and receive: the two-sided transfer. The receiver posts buffers first (here a scatter
//! list of two pieces); each Send of the peer fills the next posted receive, and both sides
//! learn of it from a completion. Then a gathered Send (two pieces of the sender's memory),
//! and a message that does not fit its receive (`DtoStatus::LocalLength`; the connection
//! breaks).
//!
//! Run: `cargo run -p dapl --example send_recv [-- IA_NAME]` (default `loopback`; `tcp`, `shm`)

mod common;

use common::*;
use dapl::*;

fn main() -> Res<()> {
    let (ia, _async_evd) = InterfaceAdapter::open(&ia_name(), 16)?;
    let pz = ia.pz_create()?;
    let (a, b) = (Side::new(&ia, &pz, None)?, Side::new(&ia, &pz, None)?);
    let a_mem = pz.lmr_allocate(4096, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)?;
    let b_mem = pz.lmr_allocate(4096, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)?;
    // Receives may be posted before the connection exists.
    b.ep.post_recv(
        &[b_mem.slice(0..10)?, b_mem.slice(100..200)?],
        1,
        CompletionFlags::empty(),
    )?;
    let (_, _psp) = connect(&a, &ia, &b, b"", b"")?;

    // One Send, scattered into the receive's two pieces: 10 bytes, then the rest.
    let msg = b"scattered over two pieces of the receiver's memory";
    a_mem.write(0, msg)?;
    a.ep.post_send(&[a_mem.slice(0..msg.len())?], 7, CompletionFlags::empty())?;
    let sent = completion(&a.req_evd)?;
    let got = completion(&b.recv_evd)?;
    assert_eq!((sent.cookie, sent.operation), (Cookie(7), DtoOp::Send));
    assert_eq!((got.cookie, got.operation), (Cookie(1), DtoOp::Receive));
    assert_eq!(got.transferred_length, msg.len() as u64);
    let mut placed = b_mem.to_vec(0, 10)?;
    placed.extend(b_mem.to_vec(100, msg.len() - 10)?);
    assert_eq!(placed, msg);
    println!("received {} bytes in two pieces", got.transferred_length);

    // A gathered Send: two pieces of the sender's memory make one message.
    b.ep.post_recv(&[b_mem.slice(1000..1100)?], 2, CompletionFlags::empty())?;
    a_mem.write(200, b"gathered ")?;
    a_mem.write(300, b"from two pieces")?;
    let pieces = [a_mem.slice(200..209)?, a_mem.slice(300..315)?];
    a.ep.post_send(&pieces, 8, CompletionFlags::empty())?;
    completion(&a.req_evd)?;
    let got = completion(&b.recv_evd)?;
    assert_eq!(got.cookie, 2);
    let text = b_mem.to_vec(1000, got.transferred_length as usize)?;
    assert_eq!(text, b"gathered from two pieces");
    println!("received {:?}", String::from_utf8_lossy(&text));

    // A message longer than the receive posted for it: the receive completes in error.
    b.ep.post_recv(&[b_mem.slice(2000..2004)?], 3, CompletionFlags::empty())?;
    a.ep.post_send(&[a_mem.slice(0..msg.len())?], 9, CompletionFlags::empty())?;
    let (ev, _) = b.recv_evd.wait(T, 1)?.ok_or("no completion in time")?;
    let d = ev.as_dto().ok_or("not a DTO completion")?;
    assert_eq!((d.cookie, d.status), (Cookie(3), DtoStatus::LocalLength));
    println!(
        "a {}-byte message into a 4-byte receive: {:?}",
        msg.len(),
        d.status
    );

    ia.close(CloseFlags::Abrupt)?;
    Ok(())
}
