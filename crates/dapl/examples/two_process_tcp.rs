//! Two processes over the tcp link (iWARP over kernel TCP): a server that lends a window of
//! its memory and a client that writes into it, then asks for it to be checked.
//!
//! - the server listens (a PSP: the connection qualifier is its TCP port) and accepts with the
//!   window's `RmrTriplet` as private data (20 bytes);
//! - the client RDMA-writes 1 MiB into the window, then Sends a note with the length and a
//!   checksum; the server, whose receive completes after the written data (a later Send's
//!   receive is what orders a Write's placement on tcp), checks the window and Sends back
//!   "ok"; the client disconnects.
//!
//! Run without arguments, it starts the server as a child process (itself, with `--server`)
//! and is the client. On two machines: `two_process_tcp --server [IPV4]` on one (it prints its
//! address and qualifier), `two_process_tcp --client IPV4 QUAL [LOCAL_IPV4]` on the other.
//!
//! Run: `cargo run -p dapl --example two_process_tcp`

use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use dapl::*;

const T: Option<Duration> = Some(Duration::from_secs(10));
const LEN: usize = 1 << 20;

type Res<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args[..] {
        ["--server"] => server("127.0.0.1"),
        ["--server", local] => server(local),
        ["--client", peer, qual] => client("127.0.0.1", peer.parse()?, qual.parse()?),
        ["--client", peer, qual, local] => client(local, peer.parse()?, qual.parse()?),
        [] => both(),
        _ => Err("usage: two_process_tcp [--server [IPV4] | --client IPV4 QUAL [IPV4]]".into()),
    }
}

/// Starts the server as a child process, reads where it listens, runs the client.
fn both() -> Res<()> {
    let mut child = Command::new(std::env::current_exe()?)
        .arg("--server")
        .stdout(Stdio::piped())
        .spawn()?;
    let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let first = lines.next().ok_or("the server exited")??;
    println!("server (pid {}): {first}", child.id());
    // "listening on <ip> qualifier <qual>"
    let words: Vec<&str> = first.split_whitespace().collect();
    let (peer, qual) = match words[..] {
        ["listening", "on", ip, "qualifier", q] => (ip.parse()?, q.parse()?),
        _ => return Err(format!("unexpected line from the server: {first}").into()),
    };
    let result = client("127.0.0.1", peer, qual);
    for line in lines {
        println!("server: {}", line?);
    }
    let status = child.wait()?;
    result?;
    if !status.success() {
        return Err(format!("the server failed: {status}").into());
    }
    println!("two processes: 1 MiB written, checked by the server");
    Ok(())
}

/// One IA with the EVDs and the endpoint each role needs.
struct Node {
    ia: InterfaceAdapter,
    pz: Pz,
    recv_evd: Evd,
    req_evd: Evd,
    conn_evd: Evd,
    ep: Endpoint,
}

impl Node {
    fn open(local: &str) -> Res<Node> {
        let (ia, _async_evd) = InterfaceAdapter::open(&format!("tcp:{local}"), 16)?;
        let pz = ia.pz_create()?;
        let recv_evd = ia.evd_create(8, None, EvdFlags::DTO)?;
        let req_evd = ia.evd_create(8, None, EvdFlags::DTO)?;
        let conn_evd = ia.evd_create(8, None, EvdFlags::CONNECTION)?;
        let ep = (ia.endpoint(&pz).recv_evd(&recv_evd).request_evd(&req_evd))
            .connect_evd(&conn_evd)
            .build()?;
        Ok(Node {
            ia,
            pz,
            recv_evd,
            req_evd,
            conn_evd,
            ep,
        })
    }

    fn connection_event(&self) -> Res<ConnectionEventKind> {
        let (ev, _) = self
            .conn_evd
            .wait(T, 1)?
            .ok_or("no connection event in time")?;
        Ok(ev.as_connection().ok_or("not a connection event")?.kind)
    }
}

/// Waits for the next completion on `evd` and checks that it succeeded.
fn completion(evd: &Evd) -> Res<DtoCompletion> {
    let (ev, _) = evd.wait(T, 1)?.ok_or("no completion in time")?;
    let d = ev.as_dto().ok_or("not a DTO completion")?.clone();
    if d.status != DtoStatus::Success {
        return Err(format!("cookie {}: {:?}", d.cookie, d.status).into());
    }
    Ok(d)
}

/// The note the client sends after its write: the length and a checksum of what it wrote.
fn note(data: &[u8]) -> [u8; 16] {
    let sum = data.iter().fold(0u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let mut n = [0u8; 16];
    n[..8].copy_from_slice(&(data.len() as u64).to_be_bytes());
    n[8..].copy_from_slice(&sum.to_be_bytes());
    n
}

fn server(local: &str) -> Res<()> {
    let node = Node::open(local)?;
    let window = node.pz.lmr_allocate(LEN, MemPriv::ALL)?;
    let msgs = node
        .pz
        .lmr_allocate(64, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)?;
    node.ep
        .post_recv(&[msgs.slice(0..16)?], 1, CompletionFlags::empty())?;
    let cr_evd = node.ia.evd_create(4, None, EvdFlags::CR)?;
    // A qualifier is a TCP port here: the first free one from 19700 up.
    let (qual, _psp) = (19700..19800)
        .find_map(|q| Some((q, node.ia.psp_create(q, &cr_evd, PspFlags::Consumer).ok()?)))
        .ok_or("no free connection qualifier")?;
    // The parent reads this line to know where to connect.
    println!(
        "listening on {} qualifier {qual}",
        node.ia.query()?.ia_address.ip()
    );

    let (ev, _) = cr_evd.wait(T, 1)?.ok_or("no connection request in time")?;
    let cr = ev
        .as_cr_arrival()
        .ok_or("not a connection request")?
        .cr
        .clone();
    cr.accept(Some(&node.ep), &window.remote(..)?.to_wire())?;
    if node.connection_event()? != ConnectionEventKind::Established {
        return Err("not established".into());
    }
    let got = completion(&node.recv_evd)?;
    let told = msgs.to_vec(0, got.transferred_length as usize)?;
    let len = u64::from_be_bytes(told.get(..8).ok_or("short note")?.try_into()?) as usize;
    let verdict: &[u8] = if len <= LEN && note(&window.to_vec(0, len)?)[..] == told[..] {
        b"ok"
    } else {
        b"mismatch"
    };
    println!(
        "{len} bytes in the window: {}",
        String::from_utf8_lossy(verdict)
    );
    msgs.write(32, verdict)?;
    node.ep.post_send(
        &[msgs.slice(32..32 + verdict.len())?],
        2,
        CompletionFlags::empty(),
    )?;
    completion(&node.req_evd)?;
    // The client disconnects when it has the answer.
    if node.connection_event()? != ConnectionEventKind::Disconnected {
        return Err("not disconnected".into());
    }
    node.ia.close(CloseFlags::Abrupt)?;
    if verdict != b"ok" {
        return Err("the window did not hold what the client wrote".into());
    }
    Ok(())
}

fn client(local: &str, peer: IpAddr, qual: ConnQual) -> Res<()> {
    let node = Node::open(local)?;
    let mem = node
        .pz
        .lmr_allocate(LEN + 64, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)?;
    node.ep
        .post_recv(&[mem.slice(LEN..LEN + 64)?], 1, CompletionFlags::empty())?;
    node.ep.connect(peer, qual, T, b"")?;
    let (ev, _) = node
        .conn_evd
        .wait(T, 1)?
        .ok_or("no connection event in time")?;
    let c = ev.as_connection().ok_or("not a connection event")?;
    if c.kind != ConnectionEventKind::Established {
        return Err(format!("connect: {:?}", c.kind).into());
    }
    let window = RmrTriplet::from_wire(&c.private_data).ok_or("short private data")?;

    let data: Vec<u8> = (0..LEN).map(|i| (i * 13 % 256) as u8).collect();
    mem.write(0, &data)?;
    node.ep
        .post_rdma_write(&[mem.slice(0..LEN)?], 2, &window, CompletionFlags::empty())?;
    let n = note(&data);
    let notes = node.pz.lmr_allocate(16, MemPriv::LOCAL_READ)?;
    notes.write(0, &n)?;
    node.ep
        .post_send(&[notes.slice(..)?], 3, CompletionFlags::empty())?;
    completion(&node.req_evd)?;
    completion(&node.req_evd)?;
    let answer = completion(&node.recv_evd)?;
    let text = mem.to_vec(LEN, answer.transferred_length as usize)?;
    println!(
        "client: the server says {:?}",
        String::from_utf8_lossy(&text)
    );
    node.ep.disconnect(CloseFlags::Graceful)?;
    node.connection_event()?;
    node.ia.close(CloseFlags::Abrupt)?;
    if text != b"ok" {
        return Err("the server found something else in its window".into());
    }
    Ok(())
}
