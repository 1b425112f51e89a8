//! The shm link between two processes: this test binary re-runs itself as the peer (the
//! ignored test `shm_child`, selected by `DAPLRS_SHM_CHILD`).
//! - data: the child RDMA-writes 1 MiB into the parent's memory and sends a message after it;
//!   the parent finds every byte;
//! - death: the child is killed (SIGKILL) while the parent has receives posted: the parent's
//!   endpoint ends BROKEN at once (the rendezvous socket hangs up; no timeout), every receive
//!   completes FLUSHED exactly once, and the parent's IA goes on serving;
//! - a stopped child (SIGSTOP) is not dead: nothing ends while it is stopped, and once it is
//!   continued (SIGCONT) the connection carries on.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dapl::*;
use dapl_testkit::kit::*;

const MIB: usize = 1 << 20;

fn pattern(i: usize) -> u8 {
    (i * 7 + i / 4096) as u8
}

fn spawn_child(role: &str, q: ConnQual) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "shm_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("DAPLRS_SHM_CHILD", role)
        .env("DAPLRS_SHM_QUAL", q.to_string())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn the child")
}

/// The parent's side: a listening IA and an endpoint that accepts the child.
fn accept_child(role: &str) -> (Side, Child, ServicePoint, Evd) {
    let p = Side::new("shm", None);
    let (psp, cr_evd, q, _) = p.listen();
    let child = spawn_child(role, q);
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

#[test]
#[ignore = "the child side of the two-process tests (they run it)"]
fn shm_child() {
    let Ok(role) = std::env::var("DAPLRS_SHM_CHILD") else {
        return;
    };
    let q: ConnQual = std::env::var("DAPLRS_SHM_QUAL").unwrap().parse().unwrap();
    let c = Side::new("shm", None);
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
        r => panic!("unknown role {r}"),
    }
    c.close();
}

#[test]
fn a_child_process_rdma_writes_a_mebibyte_into_the_parent_over_shm() {
    let (p, mut child, _psp, _cr) = accept_child("data");
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
    p.close();
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
    let q = psp.conn_qual();
    let other = Side::new("shm", None);
    p.ep.reset().unwrap();
    other
        .ep
        .connect(std::net::Ipv4Addr::LOCALHOST, q, T, b"")
        .unwrap();
    expect_cr(&cr_evd).cr.accept(Some(&p.ep), b"").unwrap();
    other.expect_conn(ConnectionEventKind::Established);
    p.expect_conn(ConnectionEventKind::Established);
    other.close();
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
    rustix::process::kill_process(pid, rustix::process::Signal::Stop).unwrap();
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
