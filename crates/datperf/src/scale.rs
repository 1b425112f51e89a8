//! `datperf scale`: a connection storm between two processes and what it costs.
//!
//! The parent is the client, a child (`datperf scale --serve`, spawned from the same binary) the
//! server. The server opens one IA with one SRQ holding a receive per connection; the client
//! creates N endpoints and connects them all at once (one `ep_connect` after another, without
//! waiting), the server accepts each request as it arrives. Every connection then sends one
//! 16-byte message naming its index, which the server checks lands once and whole. Reported: how
//! long the storm took until every connection ended (ESTABLISHED or another connection event),
//! how many ended which way and how many never ended, connections per second next to raw kernel
//! TCP doing the same in the same run (connect, accept, one byte back), resident memory per
//! endpoint on each side and the thread count of each process.
//!
//! The baseline: N blocking TCP connects from the client while the server accepts each and
//! writes one byte, the client reading every byte: a TCP handshake and one reply per
//! connection, about what an MPA exchange adds to one.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use dapl::{
    ConnectionEventKind, DtoStatus, EvdFlags, InterfaceAdapter, MemPriv, PspFlags, SrqAttr,
};

use crate::args::LinkKind;
use anyhow::{bail, Context, Result};

/// Connections when `-n` is not given: 10,000 endpoints in all.
pub const DEFAULT_CONNECTIONS: u64 = 5000;

/// Bytes of each connection's message: its index, then a hash of it.
const MSG: u64 = 16;

/// How long a connect may take before the endpoint gets TIMED_OUT (DAT's own timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// Connections that have heard nothing this long after the last connect was issued are
/// counted as silent.
const SILENT_AFTER: Duration = Duration::from_secs(75);

/// Options of `datperf scale`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleOptions {
    /// Link of both sides (tcp or shm: two processes).
    pub link: LinkKind,
    /// Connections (each an endpoint on either side).
    pub connections: u64,
    /// This process is the spawned server.
    pub serve: bool,
    /// JSON output.
    pub json: bool,
}

fn message(i: u64) -> [u8; MSG as usize] {
    let mut m = [0u8; MSG as usize];
    m[..8].copy_from_slice(&i.to_le_bytes());
    m[8..].copy_from_slice(&i.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes());
    m
}

/// Resident set of this process in KiB.
fn rss_kib() -> u64 {
    status_field("VmRSS:")
}

/// Threads of this process.
fn threads() -> u64 {
    status_field("Threads:")
}

fn status_field(name: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Raises the soft descriptor limit to the hard one; returns it.
fn raise_fd_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((_, hard)) => {
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
            hard
        }
        Err(_) => 1024,
    }
}

/// The IA name of either side, with room for every endpoint.
fn ia_name(o: &ScaleOptions) -> String {
    let base = o.link.ia_name(Ipv4Addr::LOCALHOST);
    format!("{base},max_eps={}", o.connections.max(16_384))
}

/// Runs the scale benchmark (the client side) and returns its report.
pub fn run(o: &ScaleOptions) -> Result<String> {
    if o.link == LinkKind::Loopback {
        bail!("`datperf scale` runs two processes: use --link tcp or --link shm");
    }
    let n = o.connections;
    let limit = raise_fd_limit();
    // tcp: a socket per connection; shm: a socket and two doorbells (ours and the peer's).
    let per_conn = if o.link == LinkKind::Tcp { 1 } else { 3 };
    if n * per_conn + 256 > limit {
        bail!(
            "{n} connections need about {} file descriptors per process, and the limit is \
             {limit} (raise the hard limit: `ulimit -Hn`)",
            n * per_conn + 256
        );
    }
    let mut server = Server::spawn(o)?;
    let baseline = raw_storm(n, &mut server)?;
    let dat = dat_storm(o, &mut server)?;
    server.finish()?;
    Ok(report(o, &dat, baseline))
}

/// The spawned server process, spoken to through its stdin and stdout.
struct Server {
    child: Child,
    to: ChildStdin,
    from: BufReader<ChildStdout>,
}

impl Server {
    fn spawn(o: &ScaleOptions) -> Result<Server> {
        let exe = std::env::current_exe().with_context(|| "finding datperf's own binary")?;
        let link = o.link.name();
        let mut child = Command::new(exe)
            .args(["scale", "--serve", "--link", link])
            .args(["-n", &o.connections.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| "spawning the server process")?;
        let to = child.stdin.take().expect("piped");
        let from = BufReader::new(child.stdout.take().expect("piped"));
        Ok(Server { child, to, from })
    }

    /// Sends one command line and reads the answer line: its `key=value` words.
    fn ask(&mut self, cmd: &str) -> Result<Vec<(String, u64)>> {
        writeln!(self.to, "{cmd}").with_context(|| "talking to the server process")?;
        self.to
            .flush()
            .with_context(|| "talking to the server process")?;
        let mut line = String::new();
        self.from
            .read_line(&mut line)
            .with_context(|| "reading from the server process")?;
        if line.is_empty() {
            bail!("the server process ended (its error is above)");
        }
        Ok(line
            .split_whitespace()
            .filter_map(|w| {
                let (k, v) = w.split_once('=')?;
                Some((k.to_string(), v.parse().ok()?))
            })
            .collect())
    }

    fn finish(mut self) -> Result<()> {
        writeln!(self.to, "exit").with_context(|| "talking to the server process")?;
        drop(self.to);
        let st = self
            .child
            .wait()
            .with_context(|| "waiting for the server process")?;
        if !st.success() {
            bail!("the server process failed: {st}");
        }
        Ok(())
    }
}

fn get(words: &[(String, u64)], key: &str) -> Result<u64> {
    match words.iter().find(|(k, _)| k == key) {
        Some((_, v)) => Ok(*v),
        None => bail!("the server process did not report {key}"),
    }
}

/// Raw kernel TCP: N blocking connects while the server accepts and answers each with a byte.
/// Returns connections per second.
fn raw_storm(n: u64, server: &mut Server) -> Result<f64> {
    let w = server.ask("raw")?;
    let port = get(&w, "port")? as u16;
    let started = Instant::now();
    let mut socks = Vec::with_capacity(n as usize);
    for _ in 0..n {
        socks.push(
            TcpStream::connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
                .with_context(|| "raw TCP connect")?,
        );
    }
    for s in &mut socks {
        let mut b = [0u8; 1];
        s.read_exact(&mut b).with_context(|| "raw TCP reply")?;
    }
    let secs = started.elapsed().as_secs_f64();
    // Reset, not closed: a closed socket's port waits in TIME_WAIT for a minute, and the DAT
    // storm that follows needs as many ports again.
    for s in &socks {
        let _ = socket2::SockRef::from(s).set_linger(Some(Duration::ZERO));
    }
    drop(socks);
    server.ask("raw-done")?;
    Ok(n as f64 / secs)
}

/// What the DAT storm measured.
struct DatStorm {
    established: u64,
    other: Vec<(ConnectionEventKind, u64)>,
    connect_errors: Vec<String>,
    silent: u64,
    storm_secs: f64,
    messages_ok: u64,
    messages_bad: u64,
    client_kib_per_ep: f64,
    server_kib_per_ep: f64,
    client_threads: u64,
    server_threads: u64,
}

fn dat_storm(o: &ScaleOptions, server: &mut Server) -> Result<DatStorm> {
    let n = o.connections;
    let w = server.ask("listen")?;
    let qual = get(&w, "qual")?;
    let name = ia_name(o);
    let (ia, _async) =
        InterfaceAdapter::open(&name, 64).with_context(|| format!("opening IA {name:?}"))?;
    let pz = ia.pz_create()?;
    let conn = ia.evd_create(2 * n as usize, None, EvdFlags::CONNECTION)?;
    let dto = ia.evd_create(2 * n as usize, None, EvdFlags::DTO)?;
    let src = pz.lmr_allocate((n * MSG) as usize, MemPriv::ALL)?;
    for i in 0..n {
        src.write((i * MSG) as usize, &message(i))?;
    }
    let before = rss_kib();
    let mut eps = Vec::with_capacity(n as usize);
    let mut index = std::collections::HashMap::new();
    for i in 0..n {
        let ep = ia
            .endpoint(&pz)
            .dto_evd(&dto)
            .connect_evd(&conn)
            .build()
            .with_context(|| format!("creating endpoint {i}"))?;
        index.insert(ep.id(), i);
        eps.push(ep);
    }
    // The storm: every connect issued at once.
    let started = Instant::now();
    let mut connect_errors = Vec::new();
    let mut pending = 0u64;
    for ep in &eps {
        match ep.connect(Ipv4Addr::LOCALHOST, qual, Some(CONNECT_TIMEOUT), b"") {
            Ok(()) => pending += 1,
            Err(e) => connect_errors.push(e.to_string()),
        }
    }
    let mut ended = vec![false; n as usize];
    let mut established = Vec::new();
    let mut other: Vec<(ConnectionEventKind, u64)> = Vec::new();
    let mut last = started;
    let deadline = Instant::now() + SILENT_AFTER;
    while pending > 0 && Instant::now() < deadline {
        let Some((ev, _)) = conn.wait(Some(Duration::from_millis(200)), 1)? else {
            continue;
        };
        let Some(c) = ev.as_connection() else {
            continue;
        };
        let Some(&i) = index.get(&c.ep.id()) else {
            continue;
        };
        if std::mem::replace(&mut ended[i as usize], true) {
            continue; // a later event (DISCONNECTED) of one that already ended
        }
        pending -= 1;
        last = Instant::now();
        if c.kind == ConnectionEventKind::Established {
            established.push(i);
        } else {
            match other.iter_mut().find(|(k, _)| *k == c.kind) {
                Some((_, count)) => *count += 1,
                None => other.push((c.kind, 1)),
            }
        }
    }
    let storm_secs = (last - started).as_secs_f64();
    let client_kib = rss_kib().saturating_sub(before);
    // One message per established connection, each checked by the server.
    for &i in &established {
        eps[i as usize].post_send(
            &[src.triplet(i * MSG, MSG)],
            i,
            dapl::CompletionFlags::empty(),
        )?;
    }
    let mut sent = 0;
    let send_deadline = Instant::now() + Duration::from_secs(60);
    while sent < established.len() && Instant::now() < send_deadline {
        if let Some((ev, _)) = dto.wait(Some(Duration::from_millis(200)), 1)? {
            if let Some(d) = ev.as_dto() {
                if d.status != DtoStatus::Success {
                    bail!("a send completed with {:?}", d.status);
                }
                sent += 1;
            }
        }
    }
    if sent < established.len() {
        bail!(
            "{} of {} sends never completed",
            established.len() - sent,
            established.len()
        );
    }
    let w = server.ask(&format!("report {}", established.len()))?;
    let client_threads = threads();
    drop(eps);
    ia.close(dapl::CloseFlags::Abrupt)?;
    let per_ep = |kib: u64| kib as f64 / n.max(1) as f64;
    Ok(DatStorm {
        established: established.len() as u64,
        other,
        connect_errors,
        silent: pending,
        storm_secs,
        messages_ok: get(&w, "ok")?,
        messages_bad: get(&w, "bad")?,
        client_kib_per_ep: per_ep(client_kib),
        server_kib_per_ep: per_ep(get(&w, "kib")?),
        client_threads,
        server_threads: get(&w, "threads")?,
    })
}

/// `datperf scale --json`: one object, keys in this order.
#[derive(serde::Serialize)]
struct ScaleJson {
    link: String,
    connections: u64,
    established: u64,
    other_events: Vec<OtherEvent>,
    connect_errors: usize,
    silent: u64,
    storm_seconds: f64,
    connections_per_second: f64,
    baseline_connections_per_second: f64,
    ratio: f64,
    messages_verified: u64,
    messages_bad: u64,
    client_kib_per_endpoint: f64,
    server_kib_per_endpoint: f64,
    client_threads: u64,
    server_threads: u64,
}

/// A connection event other than ESTABLISHED, and how many connections ended with it.
#[derive(serde::Serialize)]
struct OtherEvent {
    kind: String,
    count: u64,
}

/// `x` rounded to `decimals` places (what the JSON carries).
fn round_to(x: f64, decimals: i32) -> f64 {
    let p = 10f64.powi(decimals);
    (x * p).round() / p
}

fn report(o: &ScaleOptions, d: &DatStorm, raw_rate: f64) -> String {
    let n = o.connections;
    let rate = d.established as f64 / d.storm_secs.max(1e-9);
    let others: Vec<String> = d.other.iter().map(|(k, c)| format!("{c} {k:?}")).collect();
    if o.json {
        let mut s = crate::report::to_json(&ScaleJson {
            link: format!("{:?}", o.link),
            connections: n,
            established: d.established,
            other_events: d
                .other
                .iter()
                .map(|(k, c)| OtherEvent {
                    kind: format!("{k:?}"),
                    count: *c,
                })
                .collect(),
            connect_errors: d.connect_errors.len(),
            silent: d.silent,
            storm_seconds: round_to(d.storm_secs, 3),
            connections_per_second: round_to(rate, 0),
            baseline_connections_per_second: round_to(raw_rate, 0),
            ratio: round_to(rate / raw_rate, 3),
            messages_verified: d.messages_ok,
            messages_bad: d.messages_bad,
            client_kib_per_endpoint: round_to(d.client_kib_per_ep, 1),
            server_kib_per_endpoint: round_to(d.server_kib_per_ep, 1),
            client_threads: d.client_threads,
            server_threads: d.server_threads,
        });
        s.push('\n');
        return s;
    }
    let mut s = format!(
        "datperf scale: {n} connections between two processes ({link:?} link), all connects \
         issued at once\n",
        link = o.link
    );
    s += &format!(
        "  ended ESTABLISHED      {} in {:.2} s{}\n",
        d.established,
        d.storm_secs,
        if others.is_empty() {
            String::new()
        } else {
            format!("; other events: {}", others.join(", "))
        }
    );
    if !d.connect_errors.is_empty() {
        s += &format!(
            "  ep_connect refused     {} (first: {})\n",
            d.connect_errors.len(),
            d.connect_errors[0]
        );
    }
    s += &format!(
        "  never ended            {} (after {} s)\n",
        d.silent,
        SILENT_AFTER.as_secs()
    );
    s += &format!(
        "  connections/s          {rate:.0}   raw TCP connect+accept+1 byte {raw_rate:.0}   \
         ratio {:.2}\n",
        rate / raw_rate
    );
    s += &format!(
        "  messages verified      {} of {} ({} wrong)\n",
        d.messages_ok, d.established, d.messages_bad
    );
    s += &format!(
        "  memory per endpoint    client {:.1} KiB, server {:.1} KiB (resident, SRQ and \
         buffers included)\n",
        d.client_kib_per_ep, d.server_kib_per_ep
    );
    s += &format!(
        "  threads                client {}, server {}\n",
        d.client_threads, d.server_threads
    );
    s
}

/// A listening socket with the longest accept queue the host allows (`net.core.somaxconn`): the
/// kernel at its best, as the tcp link listens.
fn raw_listener() -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    s.bind(&SocketAddr::from((Ipv4Addr::LOCALHOST, 0)).into())?;
    s.listen(i32::MAX)?;
    Ok(s.into())
}

/// The server process: answers the client's commands on stdin, one line each.
pub fn serve(o: &ScaleOptions) -> Result<()> {
    raise_fd_limit();
    let n = o.connections;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    let mut lines = stdin.lock().lines();
    let mut next = || -> Result<String> {
        match lines.next() {
            Some(l) => Ok(l.with_context(|| "reading a command")?),
            None => Ok("exit".into()),
        }
    };
    let mut say = |s: String| -> Result<()> {
        writeln!(out, "{s}").with_context(|| "answering the client")?;
        out.flush().with_context(|| "answering the client")?;
        Ok(())
    };
    loop {
        let cmd = next()?;
        match cmd.split_whitespace().next().unwrap_or("") {
            "raw" => {
                let l = raw_listener().with_context(|| "raw TCP listen")?;
                say(format!("port={}", l.local_addr()?.port()))?;
                let mut socks = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let (mut s, _) = l.accept().with_context(|| "raw TCP accept")?;
                    s.write_all(&[1]).with_context(|| "raw TCP reply")?;
                    socks.push(s);
                }
                if next()? != "raw-done" {
                    bail!("expected raw-done");
                }
                drop(socks);
                say("done=1".into())?;
            }
            "listen" => {
                serve_dat(o, &mut next, &mut say)?;
            }
            "exit" | "" => return Ok(()),
            c => bail!("unknown command {c:?}"),
        }
    }
}

fn serve_dat(
    o: &ScaleOptions,
    next: &mut dyn FnMut() -> Result<String>,
    say: &mut dyn FnMut(String) -> Result<()>,
) -> Result<()> {
    let n = o.connections;
    let name = ia_name(o);
    let (ia, _async) =
        InterfaceAdapter::open(&name, 64).with_context(|| format!("opening IA {name:?}"))?;
    let pz = ia.pz_create()?;
    let srq = ia.srq_create(
        &pz,
        &SrqAttr {
            max_recv_dtos: n as usize,
            ..SrqAttr::default()
        },
    )?;
    let dto = ia.evd_create(2 * n as usize, None, EvdFlags::DTO)?;
    let conn = ia.evd_create(2 * n as usize, None, EvdFlags::CONNECTION)?;
    let cr_evd = ia.evd_create(2 * n as usize, None, EvdFlags::CR)?;
    let inbox = pz.lmr_allocate((n * MSG) as usize, MemPriv::ALL)?;
    for k in 0..n {
        srq.post_recv(&[inbox.triplet(k * MSG, MSG)], k)?;
    }
    let (_psp, qual) = ia.psp_create_any(&cr_evd, PspFlags::Consumer)?;
    let before = rss_kib();
    // Accept in a thread while the client connects; the main thread waits for "report".
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let acceptor = {
        let (ia, pz, srq, dto, conn, cr_evd, stop) = (
            ia.clone(),
            pz.clone(),
            srq.clone(),
            dto.clone(),
            conn.clone(),
            cr_evd.clone(),
            stop.clone(),
        );
        std::thread::spawn(move || -> Result<Vec<dapl::Endpoint>> {
            let mut eps = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let Some((ev, _)) = cr_evd.wait(Some(Duration::from_millis(100)), 1)? else {
                    continue;
                };
                let Some(cr) = ev.as_cr_arrival() else {
                    continue;
                };
                let ep = ia
                    .endpoint(&pz)
                    .srq(&srq)
                    .dto_evd(&dto)
                    .connect_evd(&conn)
                    .build()?;
                // A requester that gave up meanwhile makes the accept fail: not an error here.
                let _ = cr.cr.accept(Some(&ep), b"");
                eps.push(ep);
            }
            Ok(eps)
        })
    };
    say(format!("qual={qual}"))?;
    let cmd = next()?;
    let Some(expected) = cmd
        .strip_prefix("report ")
        .and_then(|v| v.trim().parse::<u64>().ok())
    else {
        bail!("expected `report <count>`, got {cmd:?}");
    };
    // Every message the client sent: once and whole.
    let mut seen = vec![false; n as usize];
    let (mut ok, mut bad) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(60);
    while ok + bad < expected && Instant::now() < deadline {
        let Some((ev, _)) = dto.wait(Some(Duration::from_millis(200)), 1)? else {
            continue;
        };
        let Some(d) = ev.as_dto() else { continue };
        let slot = d.cookie.0;
        let mut m = [0u8; MSG as usize];
        inbox.read((slot * MSG) as usize, &mut m)?;
        let i = u64::from_le_bytes(m[..8].try_into().expect("8 bytes"));
        let whole = d.status == DtoStatus::Success
            && d.transferred_length == MSG
            && i < n
            && m == message(i)
            && !std::mem::replace(&mut seen[i as usize], true);
        if whole {
            ok += 1;
        } else {
            bad += 1;
        }
    }
    let kib = rss_kib().saturating_sub(before);
    let threads = threads();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let eps = acceptor
        .join()
        .map_err(|_| anyhow::Error::msg("the acceptor thread panicked"))??;
    say(format!(
        "ok={ok} bad={bad} kib={kib} threads={threads} eps={}",
        eps.len()
    ))?;
    drop(eps);
    ia.close(dapl::CloseFlags::Abrupt)?;
    Ok(())
}
