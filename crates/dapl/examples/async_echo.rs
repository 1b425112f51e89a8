//! An echo server over the tcp link, written as one tokio task: it awaits four EVDs (connection
//! requests, connection events, receives, send completions) with `tokio::select!` through
//! `dapl::async_evd::AsyncEvd`, and serves every connection from that one task. Four clients, each
//! a thread with an IA of its own (as separate programs would be), send messages of 1-64
//! bytes one at a time and check that each comes back unchanged; then they disconnect, and the
//! server stops when all of them have.
//!
//! The server echoes straight from the receive buffer (no copy): a message's buffer is posted
//! for receiving again only when its echo's send has completed.
//!
//! Run: `cargo run -p dapl --features tokio --example async_echo`

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use dapl::async_evd::AsyncEvd;
use dapl::*;

const CLIENTS: u64 = 4;
const MESSAGES: u64 = 500;
/// Receive buffers per connection on the server (a client has one message in flight).
const RECVS: u64 = 4;
const BUF: u64 = 64;
const T: Option<Duration> = Some(Duration::from_secs(10));

type Res<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Which of the server's EVDs an event came from.
#[derive(PartialEq, Eq)]
enum Source {
    Requests,
    Events,
    Received,
    Sent,
}

/// What the server keeps per connection.
struct Conn {
    ep: Endpoint,
    /// `RECVS` buffers of `BUF` bytes.
    mem: Lmr,
    echoed: u64,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Res<()> {
    let (ia, _async_evd) = InterfaceAdapter::open("tcp", 16)?;
    let pz = ia.pz_create()?;
    let cr_evd = ia.evd_create(16, None, EvdFlags::CR)?;
    let conn_evd = ia.evd_create(16, None, EvdFlags::CONNECTION)?;
    let qlen = (CLIENTS * RECVS) as usize;
    let recv_evd = ia.evd_create(qlen, None, EvdFlags::DTO)?;
    let send_evd = ia.evd_create(qlen, None, EvdFlags::DTO)?;

    // A free qualifier (a TCP port on this link) from 19490 up.
    let addr = ia.query()?.ia_address.ip();
    let (qual, _psp) = (19490..19590)
        .find_map(|q| Some((q, ia.psp_create(q, &cr_evd, PspFlags::Consumer).ok()?)))
        .ok_or("no free connection qualifier")?;
    println!("echo server on {addr} qualifier {qual}");
    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| std::thread::spawn(move || client(id, addr, qual)))
        .collect();

    let (requests, events) = (AsyncEvd::new(&cr_evd)?, AsyncEvd::new(&conn_evd)?);
    let (received, sent) = (AsyncEvd::new(&recv_evd)?, AsyncEvd::new(&send_evd)?);
    let mut conns: HashMap<u64, Conn> = HashMap::new();
    let (mut finished, mut echoed) = (0, 0);
    while finished < CLIENTS {
        // One event from whichever EVD has one; the other three futures are dropped, which
        // loses nothing (`AsyncEvd::next_event` is cancel safe).
        let (from, ev) = tokio::select! {
            ev = requests.next_event() => (Source::Requests, ev?),
            ev = events.next_event() => (Source::Events, ev?),
            ev = received.next_event() => (Source::Received, ev?),
            ev = sent.next_event() => (Source::Sent, ev?),
        };
        match from {
            Source::Requests => {
                let cr = ev.as_cr_arrival().ok_or("not a connection request")?;
                let ep = (ia.endpoint(&pz).recv_evd(&recv_evd).request_evd(&send_evd))
                    .connect_evd(&conn_evd)
                    .build()?;
                let mem = pz.lmr_allocate((RECVS * BUF) as usize, MemPriv::ALL)?;
                for slot in 0..RECVS {
                    let buf = mem.triplet(slot * BUF, BUF);
                    ep.post_recv(&[buf], slot, CompletionFlags::empty())?;
                }
                cr.cr.accept(Some(&ep), b"")?;
                conns.insert(ep.id(), Conn { ep, mem, echoed: 0 });
            }
            Source::Events => {
                let c = ev.as_connection().ok_or("not a connection event")?;
                let id = c.ep.id();
                match c.kind {
                    ConnectionEventKind::Established => println!("server: ep {id} connected"),
                    ConnectionEventKind::Disconnected => {
                        let conn = conns.remove(&id).ok_or("unknown endpoint")?;
                        println!("server: ep {id} disconnected after {} echoes", conn.echoed);
                        finished += 1;
                        // Dropping `conn` frees the endpoint (its receives flush) and the LMR.
                    }
                    other => return Err(format!("server: ep {id}: {other:?}").into()),
                }
            }
            Source::Received | Source::Sent => {
                let d = ev.as_dto().ok_or("not a DTO completion")?;
                let Some(conn) = conns.get_mut(&d.ep.id()) else {
                    continue; // a flushed DTO of a connection that ended
                };
                match d.status {
                    DtoStatus::Success => {}
                    // The peer disconnected: DTOs flush, maybe before the event says so.
                    DtoStatus::Flushed => continue,
                    other => return Err(format!("server: ep {}: {other:?}", d.ep.id()).into()),
                }
                // The slot of the buffer is the cookie of its receive and of its echo.
                let slot = d.cookie.0;
                if from == Source::Received {
                    // Echo from the very buffer.
                    let msg = conn.mem.triplet(slot * BUF, d.transferred_length);
                    conn.ep.post_send(&[msg], slot, CompletionFlags::empty())?;
                    conn.echoed += 1;
                    echoed += 1;
                } else {
                    // The echo went out: the buffer receives again.
                    let buf = conn.mem.triplet(slot * BUF, BUF);
                    conn.ep.post_recv(&[buf], slot, CompletionFlags::empty())?;
                }
            }
        }
    }
    for c in clients {
        c.join().map_err(|_| "a client panicked")??;
    }
    assert_eq!(echoed, CLIENTS * MESSAGES);
    println!("one task echoed {echoed} messages for {CLIENTS} connections");
    ia.close(CloseFlags::Abrupt)?;
    Ok(())
}

/// One client: connects, sends `MESSAGES` messages one at a time, checks each echo,
/// disconnects. Blocking calls: a thread, not a task.
fn client(id: u64, addr: IpAddr, qual: ConnQual) -> Res<()> {
    let (ia, _async_evd) = InterfaceAdapter::open("tcp", 16)?;
    let pz = ia.pz_create()?;
    let recv_evd = ia.evd_create(4, None, EvdFlags::DTO)?;
    let send_evd = ia.evd_create(4, None, EvdFlags::DTO)?;
    let conn_evd = ia.evd_create(4, None, EvdFlags::CONNECTION)?;
    let ep = ia
        .endpoint(&pz)
        .recv_evd(&recv_evd)
        .request_evd(&send_evd)
        .connect_evd(&conn_evd)
        .build()?;
    let mem = pz.lmr_allocate(2 * BUF as usize, MemPriv::ALL)?;
    let (out, back) = (0, BUF);
    ep.connect(addr, qual, T, b"")?;
    let (ev, _) = conn_evd.wait(T, 1)?.ok_or("no connection event in time")?;
    let kind = ev.as_connection().map(|c| c.kind);
    if kind != Some(ConnectionEventKind::Established) {
        return Err(format!("client {id}: {kind:?}").into());
    }
    for m in 0..MESSAGES {
        let len = 1 + (id * 7 + m) % BUF;
        let msg: Vec<u8> = (0..len).map(|i| (id * 31 + m + i) as u8).collect();
        mem.write(out as usize, &msg)?;
        ep.post_recv(&[mem.triplet(back, BUF)], m, CompletionFlags::empty())?;
        ep.post_send(&[mem.triplet(out, len)], m, CompletionFlags::empty())?;
        for evd in [&send_evd, &recv_evd] {
            let (ev, _) = evd.wait(T, 1)?.ok_or("no completion in time")?;
            let d = ev.as_dto().ok_or("not a DTO completion")?;
            if d.status != DtoStatus::Success || d.cookie != m {
                return Err(format!("client {id}: message {m}: {d:?}").into());
            }
        }
        if mem.to_vec(back as usize, len as usize)? != msg {
            return Err(format!("client {id}: message {m} came back changed").into());
        }
    }
    ep.disconnect(CloseFlags::Graceful)?;
    conn_evd.wait(T, 1)?.ok_or("no disconnect event in time")?;
    println!("client {id}: {MESSAGES} messages echoed");
    ia.close(CloseFlags::Abrupt)?;
    Ok(())
}
