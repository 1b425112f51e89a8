//! A tour of the DAT model over the in-process loopback link: open an IA, register memory,
//! connect two endpoints through a PSP, then send/receive, RDMA write and RDMA read, printing
//! what moved.
//!
//! Run: `cargo run --release -p dapl --example loopback_tour`

use std::time::Duration;

use dapl::*;

const T: Option<Duration> = Some(Duration::from_secs(5));

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let (ia, _async_evd) = InterfaceAdapter::open("loopback", 16)?;
    let attr = ia.query()?;
    println!(
        "opened IA {:?} at {} (max iov {}, max message {} bytes)",
        attr.adapter_name, attr.ia_address, attr.max_iov_segments_per_dto, attr.max_message_size
    );
    let pz = ia.pz_create()?;
    let evd = |flags| ia.evd_create(64, None, flags);
    let (a_recv, a_req, a_conn) = (
        evd(EvdFlags::DTO)?,
        evd(EvdFlags::DTO)?,
        evd(EvdFlags::CONNECTION)?,
    );
    let (b_recv, b_req, b_conn) = (
        evd(EvdFlags::DTO)?,
        evd(EvdFlags::DTO)?,
        evd(EvdFlags::CONNECTION)?,
    );
    let cr_evd = evd(EvdFlags::CR)?;
    let a = (ia.endpoint(&pz).recv_evd(&a_recv).request_evd(&a_req))
        .connect_evd(&a_conn)
        .build()?;
    let b = (ia.endpoint(&pz).recv_evd(&b_recv).request_evd(&b_req))
        .connect_evd(&b_conn)
        .build()?;
    let a_mem = pz.lmr_allocate(64 * 1024, MemPriv::ALL)?;
    let b_mem = pz.lmr_allocate(64 * 1024, MemPriv::ALL)?;
    println!(
        "registered two LMRs of 64 KiB: a ctx {:#x} at {:#x}, b ctx {:#x} at {:#x}",
        a_mem.lmr_context(),
        a_mem.address(),
        b_mem.lmr_context(),
        b_mem.address()
    );

    // Connect a -> b through a Public Service Point.
    let psp = ia.psp_create(4791, &cr_evd, PspFlags::Consumer)?;
    a.connect(attr.ia_address.ip(), 4791, T, b"hi from a")?;
    let (ev, _) = cr_evd.wait(T, 1)?.ok_or("no event in time")?;
    let cr = ev.as_cr_arrival().expect("connection request").cr.clone();
    println!(
        "b got a connection request with private data {:?}",
        String::from_utf8_lossy(cr.private_data())
    );
    cr.accept(Some(&b), b"welcome")?;
    let (ev, _) = a_conn.wait(T, 1)?.ok_or("no event in time")?;
    println!(
        "a: {:?} with private data {:?}",
        ev.as_connection().map(|c| c.kind),
        ev.as_connection()
            .map(|c| String::from_utf8_lossy(&c.private_data).into_owned())
    );
    b_conn.wait(T, 1)?.ok_or("no event in time")?;

    // Send / receive, scattered over two segments.
    b.post_recv(
        &[b_mem.triplet(0, 8), b_mem.triplet(100, 100)],
        1,
        CompletionFlags::empty(),
    )?;
    a_mem.write(0, b"a message over loopback")?;
    a.post_send(&[a_mem.triplet(0, 23)], 2, CompletionFlags::empty())?;
    let (ev, _) = b_recv.wait(T, 1)?.ok_or("no event in time")?;
    let d = ev.as_dto().expect("dto").clone();
    println!(
        "recv  cookie {} status {:?} {} bytes: {:?} + {:?}",
        d.cookie,
        d.status,
        d.transferred_length,
        String::from_utf8_lossy(&b_mem.to_vec(0, 8)?),
        String::from_utf8_lossy(&b_mem.to_vec(100, 15)?)
    );
    a_req.wait(T, 1)?.ok_or("no event in time")?;

    // RDMA write a -> b, then RDMA read it back from b into a.
    let data: Vec<u8> = (0..32 * 1024).map(|i| (i % 251) as u8).collect();
    a_mem.write(1024, &data)?;
    a.post_rdma_write(
        &[a_mem.triplet(1024, data.len() as u64)],
        3,
        &b_mem.rmr_triplet(4096, data.len() as u64),
        CompletionFlags::empty(),
    )?;
    let (ev, _) = a_req.wait(T, 1)?.ok_or("no event in time")?;
    let w = ev.as_dto().expect("dto").clone();
    println!(
        "write cookie {} status {:?} {} bytes; b's copy matches: {}",
        w.cookie,
        w.status,
        w.transferred_length,
        b_mem.to_vec(4096, data.len())? == data
    );
    a.post_rdma_read(
        &[a_mem.triplet(32 * 1024, data.len() as u64)],
        4,
        &b_mem.rmr_triplet(4096, data.len() as u64),
        CompletionFlags::empty(),
    )?;
    let (ev, _) = a_req.wait(T, 1)?.ok_or("no event in time")?;
    let r = ev.as_dto().expect("dto").clone();
    println!(
        "read  cookie {} status {:?} {} bytes; a's copy matches: {}",
        r.cookie,
        r.status,
        r.transferred_length,
        a_mem.to_vec(32 * 1024, data.len())? == data
    );

    a.disconnect(CloseFlags::Graceful)?;
    let (ev, _) = a_conn.wait(T, 1)?.ok_or("no event in time")?;
    println!("a: {:?}", ev.as_connection().map(|c| c.kind));
    let (ev, _) = b_conn.wait(T, 1)?.ok_or("no event in time")?;
    println!("b: {:?}", ev.as_connection().map(|c| c.kind));
    psp.free()?;
    // Graceful close is refused while objects live; abrupt close tears everything down.
    if let Err(e) = ia.close(CloseFlags::Graceful) {
        println!("graceful close refused as expected: {e}");
    }
    ia.close(CloseFlags::Abrupt)?;
    println!("closed");
    Ok(())
}
