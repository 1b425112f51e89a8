//! A shared receive queue: several endpoints take their receives from one pool of buffers,
//! so a server with many connections needs buffers for the traffic, not for each connection.
//! Three connections share an SRQ of eight buffers; each completion names the endpoint that
//! took the buffer. When the pool falls below its low watermark, the IA's async EVD says so
//! (once per setting), time to post more.
//!
//! Run: `cargo run -p dapl --example srq [-- IA_NAME]` (default `loopback`)

mod common;

use common::*;
use dapl::*;

const CONNS: usize = 3;
const BUFS: u64 = 8;
const BUF: u64 = 64;

fn main() -> Res<()> {
    let (ia, async_evd) = InterfaceAdapter::open(&ia_name(), 16)?;
    let pz = ia.pz_create()?;
    let srq = ia.srq_create(
        &pz,
        &SrqAttr {
            max_recv_dtos: BUFS as usize,
            low_watermark: Some(3),
            ..SrqAttr::default()
        },
    )?;
    let pool = pz.lmr_allocate((BUFS * BUF) as usize, MemPriv::LOCAL_WRITE)?;
    for i in 0..BUFS {
        srq.post_recv(&[pool.triplet(i * BUF, BUF)], i)?;
    }
    let mut pairs = Vec::new();
    for _ in 0..CONNS {
        let (client, server) = (Side::new(&ia, &pz, None)?, Side::new(&ia, &pz, Some(&srq))?);
        let (_, psp) = connect(&client, &ia, &server, b"", b"")?;
        pairs.push((client, server, psp));
    }

    // Each client sends twice: six of the eight shared buffers are used.
    let out = pz.lmr_allocate(64, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)?;
    for round in 0..2 {
        for (i, (client, _, _)) in pairs.iter().enumerate() {
            let text = format!("client {i} message {round}");
            out.write(0, text.as_bytes())?;
            client
                .ep
                .post_send(&[out.slice(0..text.len())?], 0, CompletionFlags::empty())?;
            completion(&client.req_evd)?;
        }
    }
    let mut used = Vec::new();
    for (i, (_, server, _)) in pairs.iter().enumerate() {
        for round in 0..2 {
            let d = completion(&server.recv_evd)?;
            assert_eq!(
                d.ep, server.ep,
                "the completion names the endpoint that took it"
            );
            let text = pool.to_vec((d.cookie.0 * BUF) as usize, d.transferred_length as usize)?;
            assert_eq!(text, format!("client {i} message {round}").as_bytes());
            println!(
                "ep {}: buffer {} holds {:?}",
                d.ep.id(),
                d.cookie,
                String::from_utf8_lossy(&text)
            );
            used.push(d.cookie.0);
        }
    }
    used.sort_unstable();
    assert_eq!(
        used,
        (0..6).collect::<Vec<_>>(),
        "buffers are taken in posting order"
    );

    // Two left, below the watermark of three: one async event.
    let (ev, _) = async_evd.wait(T, 1)?.ok_or("no low-watermark event")?;
    let a = ev.as_async().ok_or("not an async event")?;
    assert_eq!(a.kind, AsyncKind::SrqLowWatermark);
    println!(
        "{} receives left in the SRQ: {:?}",
        srq.query()?.available_dto_count,
        a.kind
    );

    ia.close(CloseFlags::Abrupt)?;
    Ok(())
}
