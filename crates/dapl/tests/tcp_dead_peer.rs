//! A silent peer breaks a tcp connection within the IA's dead-peer bound (`dead_peer=<s>` in
//! the IA name; `IaAttr::dead_peer_timeout`), with the kernel's own mechanisms
//! (`TCP_USER_TIMEOUT`, keepalive):
//! - a network that goes silent mid-transfer (two network namespaces as two hosts; the veth
//!   link is taken down): both ends report BROKEN within the bound, every posted DTO completes
//!   exactly once, and once the network is back both IAs serve a new connection;
//! - a peer that stops reading (its process stopped with SIGSTOP while the other streams to
//!   it): the sender's connection breaks within the bound.
//!
//! The processes are this test binary run again with `DAPLRS_ROLE` set (the ignored test
//! `role_child`); they print what they saw on stdout, one line per step.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use dapl::*;
use dapl_testkit::kit::{listen, self_as_child, Netns, Side};

/// The bound the tests set: short, so the tests stay short.
const BOUND_S: u64 = 3;
const MSG: usize = 64 << 10;
const WINDOW: u64 = 16;
const T: Option<Duration> = Some(Duration::from_secs(30));

fn ia_name(ip: &str) -> String {
    format!("tcp:{ip},dead_peer={BOUND_S}")
}

/// Takes every completion of `evd` until `outstanding` cookies have all completed, each
/// exactly once (SUCCESS or FLUSHED); returns how many were flushed.
fn drain(evd: &Evd, outstanding: &mut HashSet<u64>) -> usize {
    let mut flushed = 0;
    while !outstanding.is_empty() {
        let (ev, _) = evd.wait(T, 1).unwrap().expect("every DTO completes");
        let d = ev.as_dto().unwrap().clone();
        assert!(
            outstanding.remove(&d.cookie.0),
            "cookie {} completed twice or was never posted",
            d.cookie.0
        );
        match d.status {
            DtoStatus::Success => {}
            DtoStatus::Flushed => flushed += 1,
            s => panic!("cookie {}: {s:?}", d.cookie.0),
        }
    }
    assert!(evd.dequeue().unwrap().is_none(), "nothing completes twice");
    flushed
}

/// Server: receives the client's stream of sends until the connection breaks, then serves one
/// more connection (`silent-net`) or waits to be killed (`stops-reading`). It listens on a
/// qualifier free in its own network namespace and prints it ("LISTENING q"): one the parent
/// chose could be taken by another process before the child binds it.
fn server(ip: &str, serve_again: bool) {
    let s = Side::with_qlen(&ia_name(ip), None, 64);
    assert_eq!(
        s.ia.query().unwrap().dead_peer_timeout,
        Some(Duration::from_secs(BOUND_S))
    );
    let bufs = s.lmr(MSG * WINDOW as usize);
    let mut posted = HashSet::new();
    for k in 0..WINDOW {
        s.ep.post_recv(
            &[bufs.triplet(k * MSG as u64, MSG as u64)],
            k,
            CompletionFlags::empty(),
        )
        .unwrap();
        posted.insert(k);
    }
    let (_psp, cr_evd, q, _) = listen(&s.ia);
    println!("LISTENING {q}");
    let (ev, _) = cr_evd.wait(T, 1).unwrap().expect("a connection request");
    ev.as_cr_arrival()
        .unwrap()
        .cr
        .accept(Some(&s.ep), b"")
        .unwrap();
    let (ev, _) = s.conn_evd.wait(T, 1).unwrap().unwrap();
    assert_eq!(
        ev.as_connection().unwrap().kind,
        ConnectionEventKind::Established
    );
    // Keep receiving (reposting each buffer) until the connection ends.
    let mut next = WINDOW;
    let mut got = 0u64;
    loop {
        if s.conn_evd.dequeue().unwrap().is_some() {
            println!("SERVER BROKEN");
            break;
        }
        let Some((ev, _)) = s.recv_evd.wait(Some(Duration::from_millis(20)), 1).unwrap() else {
            continue;
        };
        let d = ev.as_dto().unwrap().clone();
        assert!(posted.remove(&d.cookie.0));
        if d.status != DtoStatus::Success {
            assert_eq!(d.status, DtoStatus::Flushed);
            continue;
        }
        got += 1;
        if got == 20 {
            println!("RECEIVING");
        }
        let at = d.cookie.0 % WINDOW * MSG as u64;
        if s.ep
            .post_recv(
                &[bufs.triplet(at, MSG as u64)],
                next,
                CompletionFlags::empty(),
            )
            .is_ok()
        {
            posted.insert(next);
        }
        next += 1;
    }
    let flushed = drain(&s.recv_evd, &mut posted);
    println!("SERVER DRAINED {flushed} flushed");
    if !serve_again {
        std::thread::sleep(Duration::from_secs(60));
        return;
    }
    // The same IA serves the next connection once the network is back.
    let ep2 =
        s.ia.endpoint(&s.pz)
            .dto_evd(&s.recv_evd)
            .connect_evd(&s.conn_evd)
            .build()
            .unwrap();
    let one = s.lmr(8);
    ep2.post_recv(&[one.triplet(0, 8)], 1, CompletionFlags::empty())
        .unwrap();
    let (ev, _) = cr_evd
        .wait(T, 1)
        .unwrap()
        .expect("a second connection request");
    ev.as_cr_arrival()
        .unwrap()
        .cr
        .accept(Some(&ep2), b"")
        .unwrap();
    let (ev, _) = s
        .recv_evd
        .wait(T, 1)
        .unwrap()
        .expect("the second connection's message");
    assert_eq!(ev.as_dto().unwrap().status, DtoStatus::Success);
    println!("SERVER SERVED");
    s.close();
}

/// Client: streams 64 KiB sends, `WINDOW` in flight, until the connection breaks; then (after
/// a line on stdin) connects a new endpoint and sends one message.
fn client(ip: &str, server_ip: &str, q: u64, again: bool) {
    let c = Side::with_qlen(&ia_name(ip), None, 64);
    let src = c.lmr(MSG);
    let server: std::net::Ipv4Addr = server_ip.parse().unwrap();
    c.ep.connect(server, q, T, b"").unwrap();
    let (ev, _) = c.conn_evd.wait(T, 1).unwrap().unwrap();
    assert_eq!(
        ev.as_connection().unwrap().kind,
        ConnectionEventKind::Established
    );
    println!("CONNECTED");
    let mut outstanding = HashSet::new();
    let mut next = 0u64;
    loop {
        while outstanding.len() < WINDOW as usize {
            if c.ep
                .post_send(
                    &[src.triplet(0, MSG as u64)],
                    next,
                    CompletionFlags::empty(),
                )
                .is_err()
            {
                break;
            }
            outstanding.insert(next);
            next += 1;
        }
        if c.conn_evd.dequeue().unwrap().is_some() {
            println!("CLIENT BROKEN");
            break;
        }
        if let Some((ev, _)) = c.req_evd.wait(Some(Duration::from_millis(20)), 1).unwrap() {
            let d = ev.as_dto().unwrap().clone();
            assert!(
                outstanding.remove(&d.cookie.0),
                "cookie {} twice",
                d.cookie.0
            );
            assert!(matches!(d.status, DtoStatus::Success | DtoStatus::Flushed));
        }
    }
    let flushed = drain(&c.req_evd, &mut outstanding);
    println!("CLIENT DRAINED {flushed} flushed");
    if !again {
        return;
    }
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let ep2 =
        c.ia.endpoint(&c.pz)
            .dto_evd(&c.req_evd)
            .connect_evd(&c.conn_evd)
            .build()
            .unwrap();
    ep2.connect(server, q, T, b"").unwrap();
    let (ev, _) = c.conn_evd.wait(T, 1).unwrap().unwrap();
    assert_eq!(
        ev.as_connection().unwrap().kind,
        ConnectionEventKind::Established
    );
    ep2.post_send(&[src.triplet(0, 8)], 1, CompletionFlags::empty())
        .unwrap();
    assert_eq!(Side::dto(&c.req_evd).status, DtoStatus::Success);
    println!("CLIENT SERVED");
    c.close();
}

#[test]
#[ignore = "run as a child process by the tests below"]
fn role_child() {
    let Ok(role) = std::env::var("DAPLRS_ROLE") else {
        return;
    };
    let q: u64 = std::env::var("DAPLRS_QUAL").unwrap().parse().unwrap();
    let server_ip = std::env::var("DAPLRS_SERVER_IP").unwrap();
    let client_ip = std::env::var("DAPLRS_CLIENT_IP").unwrap();
    match role.as_str() {
        "server" => server(&server_ip, true),
        "server-stalls" => server(&server_ip, false),
        "client" => client(&client_ip, &server_ip, q, true),
        "client-once" => client(&client_ip, &server_ip, q, false),
        r => panic!("unknown role {r}"),
    }
}

struct Proc {
    child: Child,
    /// The child's stdout, line by line (a reader thread), so that waits have a deadline.
    lines: Receiver<String>,
}

impl Proc {
    fn spawn(prefix: &[&str], role: &str, server_ip: &str, client_ip: &str, q: u64) -> Proc {
        let mut child = self_as_child(
            prefix,
            "role_child",
            &[
                ("DAPLRS_ROLE", role.to_string()),
                ("DAPLRS_QUAL", q.to_string()),
                ("DAPLRS_SERVER_IP", server_ip.to_string()),
                ("DAPLRS_CLIENT_IP", client_ip.to_string()),
            ],
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the child");
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(std::io::Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Proc { child, lines }
    }

    /// Waits (at most 40 s) for a line that contains `what`.
    fn expect(&mut self, what: &str) {
        self.expect_line(what);
    }

    /// The qualifier a server child listens on (its "LISTENING q" line).
    fn listening(&mut self) -> u64 {
        let line = self.expect_line("LISTENING");
        let q = line.rsplit(' ').next().and_then(|w| w.parse().ok());
        q.unwrap_or_else(|| panic!("no qualifier in {line:?}"))
    }

    /// Waits (at most 40 s) for a line that contains `what`, and returns it.
    fn expect_line(&mut self, what: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(what) => return line,
                Ok(_) => {}
                Err(e) => panic!("no {what:?} from the child ({e})"),
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `a` and `b` each printed `what`; returns the time each took from `t0`.
fn both_print(a: &mut Proc, b: &mut Proc, what: &str, t0: Instant) -> [Duration; 2] {
    std::thread::scope(|s| {
        let ha = s.spawn(|| {
            a.expect(what);
            t0.elapsed()
        });
        let hb = s.spawn(|| {
            b.expect(what);
            t0.elapsed()
        });
        [ha.join().unwrap(), hb.join().unwrap()]
    })
}

#[test]
fn a_network_that_goes_silent_mid_transfer_breaks_both_ends_within_the_bound() {
    let n = Netns::create();
    let (sip, cip) = (Netns::addr(1), Netns::addr(0));
    let mut srv = Proc::spawn(&n.exec(1), "server", sip, cip, 0);
    let q = srv.listening();
    let mut cli = Proc::spawn(&n.exec(0), "client", sip, cip, q);
    cli.expect("CONNECTED");
    srv.expect("RECEIVING");
    // Silence: nothing passes either way, and neither end is told.
    n.set_link(0, false);
    let t0 = Instant::now();
    let [ts, tc] = both_print(&mut srv, &mut cli, "BROKEN", t0);
    let bound = Duration::from_secs(BOUND_S);
    // Within the bound, plus a keepalive interval of slack for an idle receiver.
    let slack = Duration::from_secs(BOUND_S / 4 + 2);
    for (who, t) in [("server", ts), ("client", tc)] {
        assert!(t <= bound + slack, "{who} broke after {t:?}");
    }
    // Every posted DTO completed exactly once (the children check it).
    srv.expect("SERVER DRAINED");
    cli.expect("CLIENT DRAINED");
    // The network comes back: both IAs serve a new connection.
    n.set_link(0, true);
    writeln!(cli.child.stdin.as_mut().unwrap(), "go").unwrap();
    srv.expect("SERVER SERVED");
    cli.expect("CLIENT SERVED");
    assert!(srv.child.wait().unwrap().success());
    assert!(cli.child.wait().unwrap().success());
}

#[test]
fn a_peer_that_stops_reading_breaks_the_senders_connection_within_the_bound() {
    let ip = "127.0.0.1";
    let mut srv = Proc::spawn(&[], "server-stalls", ip, ip, 0);
    let q = srv.listening();
    let mut cli = Proc::spawn(&[], "client-once", ip, ip, q);
    cli.expect("CONNECTED");
    srv.expect("RECEIVING");
    let pid = rustix::process::Pid::from_child(&srv.child);
    rustix::process::kill_process(pid, rustix::process::Signal::Stop).unwrap();
    let t0 = Instant::now();
    cli.expect("CLIENT BROKEN");
    let t = t0.elapsed();
    // The stopped peer's kernel still acknowledges until its receive buffer is full, then
    // advertises a zero window, which the bound also covers.
    assert!(
        t <= Duration::from_secs(2 * BOUND_S + 2),
        "the sender broke after {t:?}"
    );
    cli.expect("CLIENT DRAINED");
    assert!(cli.child.wait().unwrap().success());
}
