//! A peer in another process, over shm (and tcp where said): this test binary re-runs itself
//! as the peer (the ignored test `shm_child`, selected by `DAPLRS_SHM_CHILD`; its link is
//! `DAPLRS_CHILD_LINK`).
//! - data: the child RDMA-writes 1 MiB into the parent's memory and sends a message after it;
//!   the parent finds every byte;
//! - death: the child is killed (SIGKILL) while the parent has receives posted: the parent's
//!   endpoint ends BROKEN at once (the rendezvous socket hangs up; no timeout), every receive
//!   completes FLUSHED exactly once, and the parent's IA goes on serving;
//! - death mid-transfer (shm and tcp): the child is killed while RDMA reads and writes run
//!   both ways and it sends mebibyte messages: the connection ends at once, every DTO of the
//!   parent completes exactly once, nothing outside the memory exposed to the child changes,
//!   and a restarted child connects to the same qualifier and moves data;
//! - a stopped child (SIGSTOP) is not dead over shm: nothing ends while it is stopped, and once
//!   it is continued (SIGCONT) the connection carries on; memory lent to it deregisters within
//!   a bound;
//! - cross-memory attach denied: two children, unprivileged and not dumpable, move large Sends,
//!   RDMA Reads and RDMA Writes through the rings instead, with every byte right, and say so.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dapl::*;
use dapl_testkit::kit::*;

const MIB: usize = 1 << 20;

fn pattern(i: usize) -> u8 {
    (i * 7 + i / 4096) as u8
}

/// The link the children use (`DAPLRS_CHILD_LINK`, set by the parent; shm unless said).
fn child_link() -> String {
    std::env::var("DAPLRS_CHILD_LINK").unwrap_or_else(|_| "shm".into())
}

/// The ignored test `shm_child` of this binary, as a process, in `role` on `link`.
fn child_command(link: &str, role: &str, q: ConnQual) -> Command {
    self_as_child(
        &[],
        "shm_child",
        &[
            ("DAPLRS_SHM_CHILD", role.to_string()),
            ("DAPLRS_SHM_QUAL", q.to_string()),
            ("DAPLRS_CHILD_LINK", link.to_string()),
        ],
    )
}

fn spawn_child_on(link: &str, role: &str, q: ConnQual) -> Child {
    child_command(link, role, q)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn the child")
}

/// The parent's side: a listening IA and an endpoint that accepts the child.
fn accept_child(role: &str) -> (Side, Child, ServicePoint, Evd) {
    accept_child_on("shm", role)
}

fn accept_child_on(link: &str, role: &str) -> (Side, Child, ServicePoint, Evd) {
    let p = Side::new(link, None);
    let (psp, cr_evd, q, _) = p.listen();
    let child = spawn_child_on(link, role, q);
    let (ev, _) = cr_evd
        .wait(Some(Duration::from_secs(20)), 1)
        .unwrap()
        .expect("the child's connection request");
    ev.as_cr_arrival()
        .unwrap()
        .cr
        .accept(Some(&p.ep), b"")
        .unwrap();
    p.expect_conn(ConnectionEventKind::Established);
    (p, child, psp, cr_evd)
}

/// `n` receives of 64 bytes on `p`'s endpoint, cookies 10, 11, ...; their memory.
fn post_receives(p: &Side, n: u64) -> Lmr {
    let bufs = p.lmr(n as usize * 64);
    for k in 0..n {
        let at = k as usize * 64;
        p.ep.post_recv(
            &[bufs.slice(at..at + 64).unwrap()],
            10 + k,
            CompletionFlags::empty(),
        )
        .unwrap();
    }
    bufs
}

/// Makes this process one that no peer can attach to: an unprivileged uid (if root: root
/// passes the dumpable check) and not dumpable.
fn become_unattachable() {
    if rustix::process::getuid().is_root() {
        // SAFETY: plain system calls on this process's credentials (glibc applies them to
        // every thread).
        unsafe {
            assert_eq!(libc::setgid(65534), 0, "setgid nobody");
            assert_eq!(libc::setuid(65534), 0, "setuid nobody");
        }
    }
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable).unwrap();
}

fn pattern2(i: usize) -> u8 {
    (i * 13 + 5) as u8
}

/// The children of the CMA-denied test: the server RDMA-reads 1 MiB from the client, writes
/// 1 MiB back and receives a 256 KiB Send, checking every byte.
fn cma_denied_child(role: &str, q: ConnQual) {
    become_unattachable();
    let c = Side::new("shm", None);
    assert!(
        matches!(
            c.ia.provider_attr().unwrap().link_caps.cross_memory_attach,
            CrossMemoryAttach::Denied(_)
        ),
        "the IA says peers cannot attach"
    );
    const SEND: usize = 256 << 10;
    let wire_len = 2 * RmrTriplet::WIRE_LEN;
    if role == "cma-server" {
        let (_psp, cr_evd, _) = listen_on(&c.ia, q);
        println!("listening");
        let wire = c.lmr(64);
        let big = c.lmr(SEND);
        c.ep.post_recv(&[wire.slice(..).unwrap()], 1, CompletionFlags::empty())
            .unwrap();
        c.ep.post_recv(&[big.slice(..).unwrap()], 2, CompletionFlags::empty())
            .unwrap();
        expect_cr(&cr_evd).cr.accept(Some(&c.ep), b"").unwrap();
        c.expect_conn(ConnectionEventKind::Established);
        let d = c.recv_done();
        assert_eq!((d.cookie.0, d.status), (1, DtoStatus::Success));
        let w = wire.to_vec(0, wire_len).unwrap();
        let src = RmrTriplet::from_wire(&w[..RmrTriplet::WIRE_LEN]).unwrap();
        let sink = RmrTriplet::from_wire(&w[RmrTriplet::WIRE_LEN..]).unwrap();
        let local = c.lmr(MIB);
        c.ep.post_rdma_read(
            &[local.slice(..).unwrap()],
            3,
            &src,
            CompletionFlags::empty(),
        )
        .unwrap();
        assert_eq!(c.req_done().status, DtoStatus::Success);
        let got = local.to_vec(0, MIB).unwrap();
        assert_eq!((0..MIB).find(|&i| got[i] != pattern(i)), None, "read");
        let out: Vec<u8> = (0..MIB).map(pattern2).collect();
        local.write(0, &out).unwrap();
        c.ep.post_rdma_write(
            &[local.slice(..).unwrap()],
            4,
            &sink,
            CompletionFlags::empty(),
        )
        .unwrap();
        c.ep.post_send(&[local.slice(..8).unwrap()], 5, CompletionFlags::empty())
            .unwrap();
        let d = c.recv_done();
        assert_eq!(
            (d.cookie.0, d.status, d.transferred_length),
            (2, DtoStatus::Success, SEND as u64)
        );
        let got = big.to_vec(0, SEND).unwrap();
        assert_eq!((0..SEND).find(|&i| got[i] != pattern2(i)), None, "send");
        assert_eq!(c.req_done().status, DtoStatus::Success);
        assert_eq!(c.req_done().status, DtoStatus::Success);
        c.expect_conn(ConnectionEventKind::Disconnected);
    } else {
        let done = c.lmr(8);
        c.ep.post_recv(&[done.slice(..).unwrap()], 1, CompletionFlags::empty())
            .unwrap();
        c.ep.connect(std::net::Ipv4Addr::LOCALHOST, q, T, b"")
            .unwrap();
        c.expect_conn(ConnectionEventKind::Established);
        let src = c.lmr(MIB);
        src.write(0, &(0..MIB).map(pattern).collect::<Vec<u8>>())
            .unwrap();
        let sink = c.lmr(MIB);
        let wire = c.lmr(64);
        wire.write(0, &src.remote(..).unwrap().to_wire()).unwrap();
        wire.write(RmrTriplet::WIRE_LEN, &sink.remote(..).unwrap().to_wire())
            .unwrap();
        let big = c.lmr(SEND);
        big.write(0, &(0..SEND).map(pattern2).collect::<Vec<u8>>())
            .unwrap();
        c.ep.post_send(
            &[wire.slice(..wire_len).unwrap()],
            2,
            CompletionFlags::empty(),
        )
        .unwrap();
        c.ep.post_send(&[big.slice(..).unwrap()], 3, CompletionFlags::empty())
            .unwrap();
        assert_eq!(c.req_done().status, DtoStatus::Success);
        assert_eq!(c.req_done().status, DtoStatus::Success);
        // The server's Send comes after its write: the write is all there.
        assert_eq!(c.recv_done().status, DtoStatus::Success);
        let got = sink.to_vec(0, MIB).unwrap();
        assert_eq!((0..MIB).find(|&i| got[i] != pattern2(i)), None, "write");
        c.ep.disconnect(CloseFlags::Graceful).unwrap();
        c.expect_conn(ConnectionEventKind::Disconnected);
    }
    println!("child passed");
    c.close();
}

#[test]
#[ignore = "the child side of the two-process tests (they run it)"]
fn shm_child() {
    let Ok(role) = std::env::var("DAPLRS_SHM_CHILD") else {
        return;
    };
    let q: ConnQual = std::env::var("DAPLRS_SHM_QUAL").unwrap().parse().unwrap();
    if role.starts_with("cma-") {
        return cma_denied_child(&role, q);
    }
    let c = Side::new(&child_link(), None);
    let inbox = c.lmr(64);
    c.ep.post_recv(&[inbox.slice(..).unwrap()], 1, CompletionFlags::empty())
        .unwrap();
    c.ep.connect(std::net::Ipv4Addr::LOCALHOST, q, T, b"child")
        .unwrap();
    c.expect_conn(ConnectionEventKind::Established);
    match role.as_str() {
        "data" => {
            // The parent sends where to write.
            c.recv_done();
            let remote = RmrTriplet::from_wire(&inbox.to_vec(0, RmrTriplet::WIRE_LEN).unwrap())
                .expect("a remote buffer");
            let src = c.lmr(MIB);
            let bytes: Vec<u8> = (0..MIB).map(pattern).collect();
            src.write(0, &bytes).unwrap();
            c.ep.post_rdma_write(
                &[src.slice(..).unwrap()],
                2,
                &remote,
                CompletionFlags::empty(),
            )
            .unwrap();
            c.ep.post_send(&[src.slice(..4).unwrap()], 3, CompletionFlags::empty())
                .unwrap();
            assert_eq!(c.req_done().status, DtoStatus::Success);
            assert_eq!(c.req_done().status, DtoStatus::Success);
            // Until the parent disconnects.
            let (ev, _) = c
                .conn_evd
                .wait(Some(Duration::from_secs(30)), 1)
                .unwrap()
                .unwrap();
            assert!(ev.as_connection().is_some());
        }
        "stall" => {
            let msg = c.lmr(8);
            c.ep.post_send(&[msg.slice(..8).unwrap()], 2, CompletionFlags::empty())
                .unwrap();
            // The parent kills this process.
            std::thread::sleep(Duration::from_secs(60));
        }
        "stop" => {
            // Sends a message, then (stopped and continued by the parent meanwhile) a second
            // one once the parent's next message arrives.
            let msg = c.lmr(8);
            c.ep.post_send(&[msg.slice(..8).unwrap()], 2, CompletionFlags::empty())
                .unwrap();
            // The receive posted before connecting takes the parent's message.
            let d = c.recv_done();
            assert_eq!((d.cookie.0, d.status), (1, DtoStatus::Success));
            c.ep.post_send(&[msg.slice(..8).unwrap()], 3, CompletionFlags::empty())
                .unwrap();
            let (ev, _) = c
                .conn_evd
                .wait(Some(Duration::from_secs(30)), 1)
                .unwrap()
                .unwrap();
            assert!(ev.as_connection().is_some());
        }
        "churn" => {
            // RDMA-reads and -writes the parent's mebibytes and sends it mebibyte messages
            // without end, eight in flight, and lets the parent read its own; the parent kills
            // this process.
            c.recv_done();
            let w = inbox.to_vec(0, 2 * RmrTriplet::WIRE_LEN).unwrap();
            let src = RmrTriplet::from_wire(&w[..RmrTriplet::WIRE_LEN]).unwrap();
            let sink = RmrTriplet::from_wire(&w[RmrTriplet::WIRE_LEN..]).unwrap();
            let mine = c.lmr(MIB);
            mine.write(0, &(0..MIB).map(pattern).collect::<Vec<u8>>())
                .unwrap();
            let scratch = c.lmr(MIB);
            let wire = c.lmr(64);
            wire.write(0, &mine.remote(..).unwrap().to_wire()).unwrap();
            c.ep.post_send(
                &[wire.slice(..RmrTriplet::WIRE_LEN).unwrap()],
                1,
                CompletionFlags::empty(),
            )
            .unwrap();
            let post = |k: u64| {
                if k % 3 == 2 {
                    c.ep.post_send(&[mine.slice(..).unwrap()], k, CompletionFlags::empty())
                } else if k % 3 == 0 {
                    c.ep.post_rdma_read(
                        &[scratch.slice(..).unwrap()],
                        k,
                        &src,
                        CompletionFlags::empty(),
                    )
                } else {
                    c.ep.post_rdma_write(
                        &[mine.slice(..).unwrap()],
                        k,
                        &sink,
                        CompletionFlags::empty(),
                    )
                }
                .unwrap()
            };
            for k in 2..10 {
                post(k);
            }
            let mut k = 10;
            loop {
                let d = c.req_done();
                assert_eq!(d.status, DtoStatus::Success);
                post(k);
                k += 1;
            }
        }
        "sleepy" => {
            // Takes a mebibyte later (the parent stops this process first).
            let big = c.lmr(MIB);
            c.ep.post_recv(&[big.slice(..).unwrap()], 2, CompletionFlags::empty())
                .unwrap();
            let msg = c.lmr(8);
            c.ep.post_send(&[msg.slice(..8).unwrap()], 3, CompletionFlags::empty())
                .unwrap();
            std::thread::sleep(Duration::from_secs(60));
        }
        r => panic!("unknown role {r}"),
    }
    c.close();
}

#[test]
fn a_child_process_rdma_writes_a_mebibyte_into_the_parent_over_shm() {
    let (p, child, _psp, _cr) = accept_child("data");
    data_exchange(&p, child);
    p.close();
}

/// The parent's side of the `data` role on `p`'s connected endpoint: the child RDMA-writes a
/// mebibyte into it and then sends; every byte is checked; then a graceful disconnect.
fn data_exchange(p: &Side, mut child: Child) {
    let target = p.lmr(MIB);
    let done = p.lmr(8);
    p.ep.post_recv(&[done.slice(..).unwrap()], 9, CompletionFlags::empty())
        .unwrap();
    let wire = p.lmr(64);
    wire.write(0, &target.remote(..).unwrap().to_wire())
        .unwrap();
    p.ep.post_send(
        &[wire.slice(..RmrTriplet::WIRE_LEN).unwrap()],
        1,
        CompletionFlags::empty(),
    )
    .unwrap();
    assert_eq!(p.req_done().status, DtoStatus::Success);
    let (ev, _) = p
        .recv_evd
        .wait(Some(Duration::from_secs(20)), 1)
        .unwrap()
        .expect("the child's message after its write");
    assert_eq!(ev.as_dto().unwrap().status, DtoStatus::Success);
    let got = target.to_vec(0, MIB).unwrap();
    let bad = (0..MIB).find(|&i| got[i] != pattern(i));
    assert_eq!(bad, None, "the first byte that differs");
    p.ep.disconnect(CloseFlags::Graceful).unwrap();
    p.expect_conn(ConnectionEventKind::Disconnected);
    assert!(child.wait().unwrap().success(), "the child passed");
}

#[test]
fn a_killed_peer_process_breaks_the_connection_at_once_and_flushes_every_receive_once() {
    let (p, mut child, psp, cr_evd) = accept_child("stall");
    let _bufs = post_receives(&p, 4);
    // The child's message: it is connected and alive.
    let first = p.recv_done();
    assert_eq!((first.cookie.0, first.status), (10, DtoStatus::Success));
    let t0 = Instant::now();
    child.kill().unwrap();
    child.wait().unwrap();
    let (ev, _) = p
        .conn_evd
        .wait(Some(Duration::from_secs(5)), 1)
        .unwrap()
        .expect("the connection's end");
    assert_eq!(
        ev.as_connection().unwrap().kind,
        ConnectionEventKind::Broken
    );
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "detected from the hang-up, not a timeout: {:?}",
        t0.elapsed()
    );
    let mut flushed: Vec<u64> = (0..3)
        .map(|_| {
            let d = p.recv_done();
            assert_eq!(d.status, DtoStatus::Flushed);
            d.cookie.0
        })
        .collect();
    flushed.sort();
    assert_eq!(flushed, [11, 12, 13]);
    assert!(p.recv_evd.dequeue().unwrap().is_none(), "each once");
    // The IA serves on: an endpoint of another IA connects to the same PSP.
    restart_child(&p, &psp, &cr_evd, "shm");
    p.close();
}

#[test]
fn a_stopped_peer_process_is_not_declared_dead_and_carries_on_when_continued() {
    let (p, mut child, _psp, _cr) = accept_child("stop");
    let _bufs = post_receives(&p, 2);
    assert_eq!(
        p.recv_done().status,
        DtoStatus::Success,
        "the child's first message"
    );
    let pid = rustix::process::Pid::from_child(&child);
    stop(&child);
    // Stopped for longer than any grace: no connection event, nothing flushed.
    std::thread::sleep(Duration::from_secs(2));
    assert!(p.conn_evd.dequeue().unwrap().is_none(), "nothing ended");
    assert!(p.recv_evd.dequeue().unwrap().is_none(), "nothing flushed");
    assert_eq!(p.ep.state(), EpState::Connected);
    // Our message waits in its ring; continued, the child answers it.
    let msg = p.lmr(8);
    p.ep.post_send(&[msg.slice(..8).unwrap()], 1, CompletionFlags::empty())
        .unwrap();
    assert_eq!(p.req_done().status, DtoStatus::Success);
    rustix::process::kill_process(pid, rustix::process::Signal::Cont).unwrap();
    let second = p.recv_done();
    assert_eq!((second.cookie.0, second.status), (11, DtoStatus::Success));
    p.ep.disconnect(CloseFlags::Graceful).unwrap();
    p.expect_conn(ConnectionEventKind::Disconnected);
    assert!(child.wait().unwrap().success(), "the child passed");
    p.close();
}

#[test]
fn with_cross_memory_attach_denied_large_transfers_go_through_the_rings_intact() {
    use std::io::{BufRead, BufReader, Read};
    let q = qual();
    let spawn = |role: &str| {
        child_command("shm", role, q)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the child")
    };
    let mut server = spawn("cma-server");
    let mut out = BufReader::new(server.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("listening") {
        line.clear();
        assert_ne!(
            out.read_line(&mut line).unwrap(),
            0,
            "the server child ended early"
        );
    }
    let client = spawn("cma-client");
    let client = client.wait_with_output().unwrap();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let mut server_err = String::new();
    server
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut server_err)
        .unwrap();
    let status = server.wait().unwrap();
    let client_err = String::from_utf8_lossy(&client.stderr);
    let client_out = String::from_utf8_lossy(&client.stdout);
    assert!(status.success(), "server: {rest}\n{server_err}");
    assert!(
        client.status.success(),
        "client: {client_out}\n{client_err}"
    );
    assert!(rest.contains("child passed") && client_out.contains("child passed"));
    for err in [&server_err, &client_err.to_string()] {
        assert!(
            err.contains("cross-memory attach to process")
                && err.contains("copied through the shared-memory rings"),
            "each side says once why it copies through the rings: {err}"
        );
    }
}

#[test]
fn a_peer_killed_during_rdma_reads_writes_and_sends_breaks_the_connection_over_shm() {
    killed_during_transfers("shm");
}

#[test]
fn a_peer_killed_during_rdma_reads_writes_and_sends_breaks_the_connection_over_tcp() {
    killed_during_transfers("tcp");
}

/// The child RDMA-reads and -writes the parent's memory and sends it mebibytes while the
/// parent reads the child's; the parent kills it: the connection ends at once, every DTO of the
/// parent completes exactly once, nothing outside the memory exposed to the child changes, the
/// memory deregisters without waiting, and a restarted child connects to the same qualifier.
fn killed_during_transfers(link: &str) {
    const GUARD: u8 = 0xee;
    let (p, mut child, psp, cr_evd) = accept_child_on(link, "churn");
    // One registration of 4 MiB; the child gets remote access to two middle mebibytes only.
    let mem = p.lmr(4 * MIB);
    mem.write(0, &vec![GUARD; 4 * MIB]).unwrap();
    mem.write(MIB, &(0..MIB).map(pattern).collect::<Vec<u8>>())
        .unwrap();
    let inbox = p.lmr(64);
    p.ep.post_recv(&[inbox.slice(..).unwrap()], 100, CompletionFlags::empty())
        .unwrap();
    let wire = p.lmr(64);
    wire.write(0, &mem.remote(MIB..2 * MIB).unwrap().to_wire())
        .unwrap();
    wire.write(
        RmrTriplet::WIRE_LEN,
        &mem.remote(2 * MIB..3 * MIB).unwrap().to_wire(),
    )
    .unwrap();
    p.ep.post_send(
        &[wire.slice(..2 * RmrTriplet::WIRE_LEN).unwrap()],
        1,
        CompletionFlags::empty(),
    )
    .unwrap();
    assert_eq!(p.req_done().status, DtoStatus::Success);
    let d = p.recv_done();
    assert_eq!((d.cookie.0, d.status), (100, DtoStatus::Success));
    let theirs = RmrTriplet::from_wire(&inbox.to_vec(0, RmrTriplet::WIRE_LEN).unwrap()).unwrap();
    // The child's mebibyte messages, four receives posted, reposted as they complete.
    let inbound = p.lmr(4 * MIB);
    let recv = |k: u64| {
        let at = (k % 4) as usize * MIB;
        p.ep.post_recv(
            &[inbound.slice(at..at + MIB).unwrap()],
            k,
            CompletionFlags::empty(),
        )
    };
    let mut recvs_posted = std::collections::HashSet::new();
    for k in 1000..1004 {
        recv(k).unwrap();
        recvs_posted.insert(k);
    }
    let mut next_recv = 1004;
    let mut received = 0;
    // Our own reads of the child's mebibyte, four in flight, until it dies.
    let sinks: Vec<Lmr> = (0..4).map(|_| p.lmr(MIB)).collect();
    let read = |k: u64| {
        let s = &sinks[(k % 4) as usize];
        p.ep.post_rdma_read(
            &[s.slice(..).unwrap()],
            k,
            &theirs,
            CompletionFlags::empty(),
        )
    };
    let mut posted = 0u64;
    for k in 10..14 {
        read(k).unwrap();
        posted += 1;
    }
    let (mut done, mut flushed) = (0u64, 0u64);
    let mut seen = std::collections::HashSet::new();
    let start = Instant::now();
    let mut killed_at = None;
    let mut next = 14;
    let end = loop {
        if killed_at.is_none() && start.elapsed() > Duration::from_millis(300) {
            child.kill().unwrap();
            killed_at = Some(Instant::now());
        }
        if let Some(ev) = p.conn_evd.dequeue().unwrap() {
            break ev.as_connection().unwrap().kind;
        }
        if let Some(ev) = p.recv_evd.dequeue().unwrap() {
            let d = ev.as_dto().unwrap().clone();
            assert!(
                recvs_posted.remove(&d.cookie.0),
                "receive {} twice",
                d.cookie.0
            );
            if d.status == DtoStatus::Success {
                received += 1;
                let at = (d.cookie.0 % 4) as usize * MIB;
                let got = inbound.to_vec(at, MIB).unwrap();
                assert_eq!((0..MIB).find(|&i| got[i] != pattern(i)), None, "a message");
            } else {
                assert_eq!(d.status, DtoStatus::Flushed);
            }
            if killed_at.is_none() && recv(next_recv).is_ok() {
                recvs_posted.insert(next_recv);
            }
            next_recv += 1;
        }
        if let Some(ev) = p.req_evd.dequeue().unwrap() {
            let d = ev.as_dto().unwrap().clone();
            assert!(
                seen.insert(d.cookie.0),
                "cookie {} completed twice",
                d.cookie.0
            );
            match d.status {
                DtoStatus::Success => done += 1,
                DtoStatus::Flushed => flushed += 1,
                s => panic!("read {}: {s:?}", d.cookie.0),
            }
            if killed_at.is_none() {
                if d.status == DtoStatus::Success {
                    let got = sinks[(d.cookie.0 % 4) as usize].to_vec(0, MIB).unwrap();
                    assert_eq!((0..MIB).find(|&i| got[i] != pattern(i)), None);
                }
                if read(next).is_ok() {
                    posted += 1;
                }
                next += 1;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no end of the connection"
        );
    };
    // (tcp: the dead process's kernel resets the connection or closes it.)
    assert!(
        end == ConnectionEventKind::Broken
            || (link == "tcp" && end == ConnectionEventKind::Disconnected),
        "{end:?}"
    );
    let waited = killed_at.expect("killed").elapsed();
    assert!(
        waited < Duration::from_secs(2),
        "detected at once: {waited:?}"
    );
    child.wait().unwrap();
    // Every read we posted completes exactly once.
    while done + flushed < posted {
        let d = p.req_done();
        assert!(
            seen.insert(d.cookie.0),
            "cookie {} completed twice",
            d.cookie.0
        );
        assert!(matches!(d.status, DtoStatus::Success | DtoStatus::Flushed));
        if d.status == DtoStatus::Success {
            done += 1
        } else {
            flushed += 1
        }
    }
    assert!(p.req_evd.dequeue().unwrap().is_none(), "nothing more");
    assert!(done >= 4, "reads went through before the kill: {done}");
    while !recvs_posted.is_empty() {
        let d = p.recv_done();
        assert!(
            recvs_posted.remove(&d.cookie.0),
            "receive {} twice",
            d.cookie.0
        );
        assert!(matches!(d.status, DtoStatus::Success | DtoStatus::Flushed));
    }
    assert!(p.recv_evd.dequeue().unwrap().is_none(), "nothing more");
    assert!(received >= 1, "messages arrived before the kill");
    // Outside the two mebibytes the child could reach, nothing changed; the one it read from
    // is as it was.
    let all = mem.to_vec(0, 4 * MIB).unwrap();
    assert!(
        all[..MIB].iter().all(|&b| b == GUARD),
        "first guard mebibyte"
    );
    assert!(
        all[3 * MIB..].iter().all(|&b| b == GUARD),
        "last guard mebibyte"
    );
    assert_eq!(
        (0..MIB).find(|&i| all[MIB + i] != pattern(i)),
        None,
        "read source"
    );
    // The memory can be deregistered (no lease outlives the dead peer), and the IA serves on.
    let t = Instant::now();
    drop(sinks);
    drop(mem);
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "deregistration waited {:?}",
        t.elapsed()
    );
    restart_child(&p, &psp, &cr_evd, link);
    p.close();
}

/// The peer process restarts and connects to the same qualifier: `p`'s IA (its endpoint
/// reset) accepts it and a mebibyte moves.
fn restart_child(p: &Side, psp: &ServicePoint, cr_evd: &Evd, link: &str) {
    p.ep.reset().unwrap();
    let child = spawn_child_on(link, "data", psp.conn_qual());
    let (ev, _) = cr_evd
        .wait(Some(Duration::from_secs(20)), 1)
        .unwrap()
        .expect("the restarted child's connection request");
    ev.as_cr_arrival()
        .unwrap()
        .cr
        .accept(Some(&p.ep), b"")
        .unwrap();
    p.expect_conn(ConnectionEventKind::Established);
    data_exchange(p, child);
}

/// A connected `sleepy` child, stopped (SIGSTOP), and a mebibyte Send posted to it: it goes
/// by descriptor, which the stopped child cannot copy out.
/// (The PSP, its EVD and the receive buffer are returned to be kept.)
#[allow(clippy::type_complexity)]
fn send_to_a_stopped_child() -> (Side, Child, Lmr, (ServicePoint, Evd, Lmr)) {
    let (p, child, psp, cr) = accept_child("sleepy");
    let bufs = post_receives(&p, 1);
    assert_eq!(
        p.recv_done().status,
        DtoStatus::Success,
        "the child is there"
    );
    stop(&child);
    let src = p.lmr(MIB);
    p.ep.post_send(&[src.slice(..).unwrap()], 1, CompletionFlags::empty())
        .unwrap();
    (p, child, src, (psp, cr, bufs))
}

/// Stops `child` (SIGSTOP) and waits until it is stopped (the signal is asynchronous: its
/// threads may run a moment longer).
fn stop(child: &Child) {
    let pid = rustix::process::Pid::from_child(child);
    rustix::process::kill_process(pid, rustix::process::Signal::Stop).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let stopped = |task: std::fs::DirEntry| {
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        stat.rfind(')')
            .and_then(|i| stat[i + 2..].chars().next())
            .is_none_or(|c| c == 'T' || c == 't')
    };
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", child.id())).unwrap();
        if tasks.map_while(std::io::Result::ok).all(stopped) {
            return;
        }
        assert!(Instant::now() < deadline, "the child did not stop");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Continues and kills a stopped child.
fn end_child(mut child: Child) {
    let pid = rustix::process::Pid::from_child(&child);
    rustix::process::kill_process(pid, rustix::process::Signal::Cont).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn memory_lent_to_a_stopped_peer_stays_registered_until_a_bounded_wait_after_the_connection_ends() {
    let (p, child, src, _keep) = send_to_a_stopped_child();
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        p.req_evd.dequeue().unwrap().is_none(),
        "not complete before the peer has it"
    );
    p.ep.disconnect(CloseFlags::Abrupt).unwrap();
    let d = p.req_done();
    assert_eq!((d.cookie.0, d.status), (1, DtoStatus::Flushed));
    // The peer may still copy the source out once continued: deregistration waits for it,
    // but not for ever.
    let t = Instant::now();
    drop(src);
    let waited = t.elapsed();
    assert!(
        waited > Duration::from_millis(1500) && waited < Duration::from_secs(4),
        "deregistration waited {waited:?}"
    );
    end_child(child);
    p.close();
}

#[test]
fn deregistering_memory_a_stopped_peer_has_not_copied_out_breaks_the_connection_within_a_bound() {
    let (p, child, src, _keep) = send_to_a_stopped_child();
    std::thread::sleep(Duration::from_millis(100));
    // Freed with the Send in flight on a live connection to a stopped peer: no hang.
    let t = Instant::now();
    drop(src);
    let waited = t.elapsed();
    assert!(
        waited < Duration::from_secs(6),
        "deregistration waited {waited:?}"
    );
    assert_eq!(expect_conn_end_kind(&p), ConnectionEventKind::Broken);
    let d = p.req_done();
    assert_eq!((d.cookie.0, d.status), (1, DtoStatus::Flushed));
    end_child(child);
    p.close();
}

fn expect_conn_end_kind(p: &Side) -> ConnectionEventKind {
    let (ev, _) = p
        .conn_evd
        .wait(Some(Duration::from_secs(5)), 1)
        .unwrap()
        .expect("the connection's end");
    ev.as_connection().unwrap().kind
}
