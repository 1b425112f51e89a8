//! The tcp link between processes and between hosts: two processes on 127.0.0.1, and two
//! network namespaces joined by a veth pair as two hosts. Each moves 64 MiB by RDMA write, RDMA
//! read and send, verified byte for byte.
//!
//! The processes are this test binary run again with `DAPLRS_ROLE` set: the ignored test
//! `role_child` then acts as server or client.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use dapl::*;
use dapl_testkit::kit::{listen_on, qual, self_as_child, Netns, Side};

const SIZE: usize = 64 << 20;
const T: Option<Duration> = Some(Duration::from_secs(60));

/// Deterministic bytes for `seed`: the sides check each other's data without sharing it.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn dto(evd: &Evd) -> DtoCompletion {
    let (ev, _) = evd.wait(T, 1).unwrap().expect("a DTO completion");
    ev.as_dto().expect("a DTO event").clone()
}

fn conn_event(evd: &Evd) -> ConnectionEvent {
    let (ev, _) = evd.wait(T, 1).unwrap().expect("a connection event");
    ev.as_connection().expect("a connection event").clone()
}

/// Server: exposes a 64 MiB region (its RMR triplet goes in the accept's private data), takes
/// the client's 64 MiB send and checks it, then waits for the client to disconnect.
fn server(ip: &str, qual: u64) {
    let s = Side::with_qlen(&format!("tcp:{ip}"), None, 16);
    let window = s.lmr(SIZE);
    let inbox = s.lmr(SIZE);
    s.ep.post_recv(
        &[inbox.triplet(0, SIZE as u64)],
        1,
        CompletionFlags::empty(),
    )
    .unwrap();
    let (_psp, cr_evd, _) = listen_on(&s.ia, qual);
    println!("LISTENING");
    let (ev, _) = cr_evd.wait(T, 1).unwrap().expect("a connection request");
    let cr = ev.as_cr_arrival().unwrap().cr.clone();
    let t = window.rmr_triplet(0, SIZE as u64);
    let mut pd = Vec::new();
    pd.extend_from_slice(&t.rmr_context.0.to_be_bytes());
    pd.extend_from_slice(&t.virtual_address.to_be_bytes());
    cr.accept(Some(&s.ep), &pd).unwrap();
    assert_eq!(
        conn_event(&s.conn_evd).kind,
        ConnectionEventKind::Established
    );
    let r = dto(&s.recv_evd);
    assert_eq!(
        (r.cookie.0, r.status, r.transferred_length),
        (1, DtoStatus::Success, SIZE as u64)
    );
    assert!(
        inbox.to_vec(0, SIZE).unwrap() == pattern(2, SIZE),
        "the 64 MiB send arrived changed"
    );
    // By now the client's write is placed too (it was sent before the send).
    assert!(
        window.to_vec(0, SIZE).unwrap() == pattern(1, SIZE),
        "the 64 MiB RDMA write arrived changed"
    );
    let end = conn_event(&s.conn_evd);
    assert_eq!(end.kind, ConnectionEventKind::Disconnected);
    s.close();
    println!("SERVER OK");
}

/// Client: writes 64 MiB into the server's window, reads it back, sends 64 MiB.
fn client(local: &str, server_ip: &str, qual: u64) {
    let c = Side::with_qlen(&format!("tcp:{local}"), None, 16);
    let (ep, req, conn) = (&c.ep, &c.req_evd, &c.conn_evd);
    let out = c.lmr(SIZE);
    out.write(0, &pattern(1, SIZE)).unwrap();
    let back = c.lmr(SIZE);
    let addr = std::net::SocketAddr::new(server_ip.parse().unwrap(), 0);
    ep.connect(addr.ip(), qual, T, b"").unwrap();
    let est = conn_event(conn);
    assert_eq!(est.kind, ConnectionEventKind::Established);
    let pd = est.private_data;
    let ctx = u32::from_be_bytes(pd[0..4].try_into().unwrap());
    let va = u64::from_be_bytes(pd[4..12].try_into().unwrap());
    let remote = RmrTriplet::new(ctx, va, SIZE as u64);
    ep.post_rdma_write(
        &[out.triplet(0, SIZE as u64)],
        1,
        &remote,
        CompletionFlags::empty(),
    )
    .unwrap();
    ep.post_rdma_read(
        &[back.triplet(0, SIZE as u64)],
        2,
        &remote,
        CompletionFlags::empty(),
    )
    .unwrap();
    let w = dto(req);
    assert_eq!((w.cookie.0, w.status), (1, DtoStatus::Success));
    let r = dto(req);
    assert_eq!(
        (r.cookie.0, r.status, r.transferred_length),
        (2, DtoStatus::Success, SIZE as u64)
    );
    assert!(
        back.to_vec(0, SIZE).unwrap() == pattern(1, SIZE),
        "the 64 MiB RDMA read returned other bytes than were written"
    );
    out.write(0, &pattern(2, SIZE)).unwrap();
    ep.post_send(&[out.triplet(0, SIZE as u64)], 3, CompletionFlags::empty())
        .unwrap();
    let s = dto(req);
    assert_eq!((s.cookie.0, s.status), (3, DtoStatus::Success));
    // Graceful: the send is on its way before the FIN.
    ep.disconnect(CloseFlags::Graceful).unwrap();
    assert_eq!(conn_event(conn).kind, ConnectionEventKind::Disconnected);
    c.close();
    println!("CLIENT OK");
}

#[test]
#[ignore = "run as a child process by the tests below"]
fn role_child() {
    let role = std::env::var("DAPLRS_ROLE").expect("DAPLRS_ROLE");
    let qual: u64 = std::env::var("DAPLRS_QUAL").unwrap().parse().unwrap();
    let server_ip = std::env::var("DAPLRS_SERVER_IP").unwrap();
    match role.as_str() {
        "server" => server(&server_ip, qual),
        "client" => client(
            &std::env::var("DAPLRS_CLIENT_IP").unwrap(),
            &server_ip,
            qual,
        ),
        r => panic!("unknown role {r}"),
    }
}

fn spawn(prefix: &[&str], role: &str, server_ip: &str, client_ip: &str, qual: u64) -> Child {
    self_as_child(
        prefix,
        "role_child",
        &[
            ("DAPLRS_ROLE", role.to_string()),
            ("DAPLRS_QUAL", qual.to_string()),
            ("DAPLRS_SERVER_IP", server_ip.to_string()),
            ("DAPLRS_CLIENT_IP", client_ip.to_string()),
        ],
    )
    .stdout(Stdio::piped())
    .spawn()
    .expect("spawn the child")
}

/// Runs server and client as processes; both must print their OK line and exit 0.
fn run_pair(server_prefix: &[&str], client_prefix: &[&str], server_ip: &str, client_ip: &str) {
    let qual = qual();
    let mut srv = spawn(server_prefix, "server", server_ip, client_ip, qual);
    let mut lines = BufReader::new(srv.stdout.take().unwrap()).lines();
    loop {
        let line = lines
            .next()
            .expect("the server ended before listening")
            .unwrap();
        if line.contains("LISTENING") {
            break;
        }
    }
    let cli = spawn(client_prefix, "client", server_ip, client_ip, qual);
    let cout = cli.wait_with_output().unwrap();
    let cli_text = String::from_utf8_lossy(&cout.stdout).to_string();
    let srv_text: Vec<String> = lines.map_while(std::result::Result::ok).collect();
    let sst = srv.wait().unwrap();
    assert!(
        cout.status.success() && cli_text.contains("CLIENT OK"),
        "client failed: {cli_text}"
    );
    assert!(
        sst.success() && srv_text.iter().any(|l| l.contains("SERVER OK")),
        "server failed: {srv_text:?}"
    );
}

#[test]
fn tcp_two_processes_move_64_mib_by_write_read_and_send() {
    run_pair(&[], &[], "127.0.0.1", "127.0.0.1");
}

#[test]
fn tcp_two_hosts_in_network_namespaces_move_64_mib_by_write_read_and_send() {
    let n = Netns::create();
    run_pair(&n.exec(1), &n.exec(0), Netns::addr(1), Netns::addr(0));
}
