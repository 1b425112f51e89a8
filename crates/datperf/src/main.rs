//! `datperf`: perftest-like benchmarks for dapl-rs, each figure next to raw kernel TCP measured
//! in the same run. See `datperf --help` (the command line is in `args.rs`).

#![forbid(unsafe_code)]

mod args;
mod cpu;
mod dat;
mod info;
mod pagebuf;
mod pin;
mod plot;
mod raw;
mod report;
mod scale;
mod shmbase;
mod suite;
mod trace;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use std::io::IsTerminal;

use anyhow::{bail, Context, Result};
use args::{Command, LinkKind, Mode, Options};
use report::Row;
use suite::Measurement;

fn main() {
    trace::init();
    let code = match args::parse(std::env::args_os().skip(1)) {
        Ok(cmd) => execute(cmd),
        Err(args::Exit::Print(text)) => out(&text),
        Err(args::Exit::Usage(e)) => {
            eprintln!("datperf: {e}");
            2
        }
    };
    std::process::exit(code);
}

/// Runs a parsed command; returns the exit code.
fn execute(cmd: Command) -> i32 {
    let r = match cmd {
        Command::Info { names, verbose } => return run_info(&names, verbose),
        Command::Scale(o) if o.serve => scale::serve(&o).map(|()| String::new()),
        Command::Scale(o) => scale::run(&o),
        Command::Run(o) => run(&o),
    };
    match r {
        Ok(text) => out(&text),
        Err(e) => {
            eprintln!("datperf: error: {e:#}");
            1
        }
    }
}

/// Writes to stdout; a closed stdout is an exit code, not a panic.
fn out(text: &str) -> i32 {
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

fn run_info(names: &[String], verbose: bool) -> i32 {
    let names: Vec<String> = if names.is_empty() {
        info::every_ia()
    } else {
        names.to_vec()
    };
    let mut code = 0;
    for (i, n) in names.iter().enumerate() {
        match info::describe(n, verbose) {
            Ok(t) => {
                let sep = if i > 0 { "\n" } else { "" };
                if out(&format!("{sep}{t}")) != 0 {
                    return 1;
                }
            }
            Err(e) => {
                eprintln!("datperf: error: {e:#}");
                code = 1;
            }
        }
    }
    code
}

/// The TCP port of a connection qualifier on the tcp link (as `dapl` maps it).
fn port_for_qual(qual: u64) -> u16 {
    if qual <= 65535 {
        qual as u16
    } else {
        (qual % 32001 + 33534) as u16
    }
}

/// The TCP port of the raw baseline next to the DAT qualifier `qual`.
fn baseline_port(qual: u64) -> Result<u16> {
    match port_for_qual(qual).checked_add(1) {
        Some(p) => Ok(p),
        None => bail!(
            "qualifier {qual} maps to TCP port 65535; the raw TCP baseline needs the next port"
        ),
    }
}

fn run(o: &Options) -> Result<String> {
    pin::init(o.pin);
    if !matches!(o.mode, Mode::Server(_)) && suite::build(o).is_empty() {
        bail!("the options select no measurement (message rate is measured for send only)");
    }
    match &o.mode {
        Mode::Local => run_local(o),
        Mode::Client(host) => run_client(o, host),
        Mode::Server(addr) => run_server(o, *addr),
    }
}

/// How completions are found, on the DAT side and (always in the same mode) in the raw TCP
/// baseline: see `dat::Spec::polls`.
fn completion_mode(o: &Options) -> &'static str {
    match o.poll {
        Some(true) => {
            "busy polling (evd_dequeue loop; raw TCP: a non-blocking socket, polled alike)"
        }
        Some(false) => {
            "event wait (evd_wait; raw TCP: blocking), except write latency, which polls memory \
             (raw TCP: polled)"
        }
        None => {
            "busy polling for latency (evd_dequeue loop; raw TCP: a non-blocking socket, polled \
             alike), event wait for bandwidth and rate (evd_wait; raw TCP: blocking)"
        }
    }
}

fn render(o: &Options, title: &str, rows: &[Row], base: Baseline) -> Result<String> {
    render_all(o, &[(title.to_string(), rows.to_vec(), base)])
}

/// One table per link run (JSON: one array of every row, each naming its link); with
/// `--plot`, the picture of them all.
fn render_all(o: &Options, runs: &[(String, Vec<Row>, Baseline)]) -> Result<String> {
    if let Some(path) = &o.plot {
        let links: Vec<plot::LinkRows<'_>> = runs
            .iter()
            .map(|(_, rows, base)| plot::LinkRows {
                rows,
                baseline: base.label(),
            })
            .collect();
        let title = format!(
            "datperf {}: dapl-rs (solid) vs its baseline of the same run (dashed)",
            env!("CARGO_PKG_VERSION")
        );
        plot::draw(path, &title, &links)?;
        eprintln!("datperf: plot written to {}", path.display());
    }
    Ok(if o.json {
        let all: Vec<Row> = runs.iter().flat_map(|r| r.1.iter().cloned()).collect();
        let mut s = report::json(&all);
        s.push('\n');
        s
    } else {
        let tables: Vec<String> = runs
            .iter()
            .map(|(title, rows, base)| report::table(title, rows, base.label()))
            .collect();
        tables.join("\n")
    })
}

/// What the DAT figures are set against.
#[derive(Clone, Copy)]
enum Baseline {
    /// Raw kernel TCP at this address (a datperf server's baseline port).
    Tcp(SocketAddr),
    /// The same-host floors of the shm link, measured here (`shmbase`), for buffers of
    /// this kind of memory.
    Shm(args::MemKind),
}

impl Baseline {
    fn label(self) -> &'static str {
        match self {
            Baseline::Tcp(_) => "raw TCP",
            Baseline::Shm(_) => "shm floor",
        }
    }
}

/// Runs every measurement in rounds (`suite::rounds`), each DAT round followed by its
/// baseline's round (raw TCP bandwidth: a round of each way of writing, `raw::variants`, in
/// turns first), so that all figures see the same drift of the machine's speed. `cpu_scope` says
/// whose CPU time the process's figures count.
fn run_suite(
    client: &dat::Client,
    link: &'static str,
    base: Baseline,
    suite: &[Measurement],
    quick: bool,
    cpu_scope: cpu::Scope,
) -> Result<Vec<Row>> {
    let n = suite.len();
    let progress = Progress::new(suite, quick);
    let mut rows = Vec::with_capacity(n);
    for (i, m) in suite.iter().enumerate() {
        let name = m.name();
        let head = format!("[{:>2}/{n}] {name:<15} ", i + 1);
        progress.start(&head);
        let mut d = Vec::new();
        // The baseline's rounds, per variant.
        let mut b: Vec<(&'static str, Vec<dat::Measured>)> = match base {
            Baseline::Tcp(_) => raw::variants(m)
                .iter()
                .map(|w| (w.name(), Vec::new()))
                .collect(),
            Baseline::Shm(_) => vec![("same-host floor", Vec::new())],
        };
        for (i, r) in suite::rounds(m, quick).into_iter().enumerate() {
            d.push(
                client
                    .measure(&r)
                    .with_context(|| format!("{name} (dapl-rs)"))?,
            );
            match base {
                Baseline::Tcp(raw_addr) => {
                    // It waits for its data as the DAT side did for its completions.
                    let poll = client.polls(&r);
                    let ways = raw::variants(&r);
                    for k in 0..ways.len() {
                        // Each variant goes first in turn.
                        let v = (k + i) % ways.len();
                        b[v].1
                            .push(raw::measure(raw_addr, &r, poll, ways[v]).with_context(
                                || format!("{name} (raw TCP baseline, {})", ways[v].name()),
                            )?);
                    }
                }
                Baseline::Shm(mem) => b[0].1.push(
                    shmbase::measure(&r, mem).with_context(|| format!("{name} (shm floor)"))?,
                ),
            }
            progress.round_done();
        }
        let (dat, dat_cpu) = report::combine_measured(m, &d)?;
        let (base_fig, base_cpu, base_variant) = report::best(m, &b)?;
        let row = Row {
            link,
            m: *m,
            dat,
            base: base_fig,
            dat_cpu,
            base_cpu,
            base_variant,
            cpu_scope,
        };
        let mut line = report::progress_line(&row, base.label());
        if b.len() > 1 {
            // Every variant's figure, the losers' too.
            let each = b
                .iter()
                .map(|(n, r)| {
                    report::combine_measured(m, r).map(|(f, _)| report::labelled(n, &f, m))
                })
                .collect::<Result<Vec<String>>>()?;
            line.push_str(&format!(" ({})", each.join(", ")));
        }
        progress.done(&head, &line);
        rows.push(row);
    }
    Ok(rows)
}

/// Progress on stderr: an indicatif bar on a terminal (the finished measurements' lines
/// above it), else one plain line per measurement.
enum Progress {
    Bar(indicatif::ProgressBar),
    /// Plain lines; true while a measurement's line is started but not ended.
    Lines(std::cell::Cell<bool>),
}

impl Progress {
    fn new(suite: &[Measurement], quick: bool) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress::Lines(std::cell::Cell::new(false));
        }
        let rounds: usize = suite.iter().map(|m| suite::rounds(m, quick).len()).sum();
        let bar = indicatif::ProgressBar::new(rounds as u64);
        let style = indicatif::ProgressStyle::with_template(
            "{msg}[{bar:30.cyan/blue}] {pos}/{len} rounds, {elapsed} (about {eta} left)",
        );
        if let Ok(style) = style {
            bar.set_style(style.progress_chars("=> "));
        }
        Progress::Bar(bar)
    }

    fn start(&self, head: &str) {
        match self {
            Progress::Bar(b) => b.set_message(head.to_string()),
            Progress::Lines(open) => {
                eprint!("{head}");
                open.set(true);
            }
        }
    }

    fn round_done(&self) {
        if let Progress::Bar(b) = self {
            b.inc(1);
        }
    }

    fn done(&self, head: &str, line: &str) {
        match self {
            Progress::Bar(b) => b.println(format!("{head}{line}")),
            Progress::Lines(open) => {
                eprintln!("{line}");
                open.set(false);
            }
        }
    }
}

impl Drop for Progress {
    /// The bar goes when the suite ends, whether it ended well or not; a plain line left open
    /// by a failed measurement is ended, so that the error gets a line of its own.
    fn drop(&mut self) {
        match self {
            Progress::Bar(b) => b.finish_and_clear(),
            Progress::Lines(open) => {
                if open.get() {
                    eprintln!("failed");
                }
            }
        }
    }
}

fn join<T>(h: std::thread::JoinHandle<Result<T>>, what: &str) -> Result<T> {
    match h.join() {
        Ok(r) => r,
        Err(_) => bail!("the {what} thread panicked"),
    }
}

/// Server and client in this process over 127.0.0.1: the chosen link, or tcp then shm.
fn run_local(o: &Options) -> Result<String> {
    let links: &[LinkKind] = if o.link_given {
        std::slice::from_ref(&o.link)
    } else {
        &[LinkKind::Tcp, LinkKind::Shm]
    };
    let mut runs = Vec::new();
    for &link in links {
        let o = Options { link, ..o.clone() };
        runs.push(run_local_link(&o)?);
    }
    render_all(o, &runs)
}

/// One link's self-contained run: its title, rows and baseline.
fn run_local_link(o: &Options) -> Result<(String, Vec<Row>, Baseline)> {
    let suite = suite::build(o);
    let ia_name = o.link.name();
    let server = dat::Server::start(ia_name, o.qual).with_context(|| "starting the server side")?;
    let qual = server.qual();
    let addr = server.address()?;
    let raw_srv = raw::RawServer::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0))?;
    let raw_addr = raw_srv.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let dat_thread = std::thread::Builder::new()
        .name("datperf-server".into())
        .spawn(move || {
            let r = server.serve(&stop2, false);
            let c = server.close();
            r.and(c)
        })?;
    let raw_thread = std::thread::Builder::new()
        .name("datperf-raw-server".into())
        .spawn(move || raw_srv.serve(true))?;
    eprintln!(
        "datperf: {} measurements over the {ia_name} link (127.0.0.1, qualifier {qual}) and raw \
         TCP; completions by {}",
        suite.len(),
        completion_mode(o)
    );
    // shm's own floors for the shm link (same host), raw TCP for the others.
    let base = match o.link {
        LinkKind::Shm => Baseline::Shm(o.mem),
        _ => Baseline::Tcp(raw_addr),
    };
    let rows = dat::Client::open(ia_name, SocketAddr::new(addr.ip(), 0), qual, o.poll)
        .map(|c| c.with_mem(o.mem))
        .with_context(|| "starting the client side")
        .and_then(|client| {
            let rows = run_suite(&client, ia_name, base, &suite, o.quick, cpu::Scope::Both);
            let closed = client.close();
            rows.and_then(|r| closed.map(|()| r))
        });
    stop.store(true, std::sync::atomic::Ordering::Release);
    let quit = raw::quit(raw_addr);
    let rows = rows?;
    join(dat_thread, "DAT server")?;
    quit?;
    join(raw_thread, "raw TCP server")?;
    let link = match o.link {
        LinkKind::Tcp => "tcp link (iWARP over kernel TCP)",
        LinkKind::Shm => "shm link (shared-memory rings)",
        LinkKind::Loopback => "loopback link (in-process)",
    };
    let against = match base {
        Baseline::Shm(args::MemKind::Library) => {
            "the same-host floors (latency: two threads ping-ponging on one cache line; \
             bandwidth: memcpy of the same size for RDMA on library memory, which the peer \
             maps, process_vm_readv for sends; rate: an SPSC ring of 8-byte messages)"
        }
        Baseline::Shm(args::MemKind::Caller) => {
            "the same-host floors (latency: two threads ping-ponging on one cache line; \
             bandwidth: process_vm_readv of the same size (caller memory); rate: an SPSC \
             ring of 8-byte messages)"
        }
        Baseline::Tcp(_) => "raw kernel TCP (TCP_NODELAY), 127.0.0.1",
    };
    let title = format!(
        "datperf {}: dapl-rs {link} vs {against}, same run; completions: {}",
        env!("CARGO_PKG_VERSION"),
        completion_mode(o)
    );
    Ok((title, rows, base))
}

/// The first IPv4 address of `host`.
fn resolve(host: &str) -> Result<Ipv4Addr> {
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        return Ok(ip);
    }
    let addrs = (host, 0u16).to_socket_addrs().with_context(|| {
        format!("resolving {host:?} (check the name, or give the server's IPv4 address)")
    })?;
    for a in addrs {
        if let IpAddr::V4(ip) = a.ip() {
            return Ok(ip);
        }
    }
    bail!("{host:?} has no IPv4 address (the tcp link is IPv4 only)")
}

/// The local address the kernel would use to reach `peer` (no packet is sent).
fn local_ip_for(peer: Ipv4Addr) -> Result<Ipv4Addr> {
    if peer.is_loopback() {
        return Ok(Ipv4Addr::LOCALHOST);
    }
    let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    s.connect((peer, 9))
        .with_context(|| format!("finding a route to {peer}"))?;
    match s.local_addr()?.ip() {
        IpAddr::V4(ip) => Ok(ip),
        IpAddr::V6(_) => bail!("no IPv4 route to {peer}"),
    }
}

fn run_client(o: &Options, host: &str) -> Result<String> {
    let ip = resolve(host)?;
    let qual = o.qual.unwrap_or(args::DEFAULT_QUAL);
    let raw_addr = SocketAddr::new(IpAddr::V4(ip), baseline_port(qual)?);
    let ia_name = match &o.ia {
        Some(n) => n.clone(),
        None => o.link.ia_name(local_ip_for(ip)?),
    };
    let suite = suite::build(o);
    eprintln!(
        "datperf: {} measurements against {ip} (qualifier {qual}, raw TCP port {}) from IA \
         {ia_name}; completions by {}",
        suite.len(),
        raw_addr.port(),
        completion_mode(o)
    );
    let client = dat::Client::open(&ia_name, SocketAddr::new(IpAddr::V4(ip), 0), qual, o.poll)?
        .with_mem(o.mem);
    let base = match o.link {
        LinkKind::Shm => Baseline::Shm(o.mem),
        _ => Baseline::Tcp(raw_addr),
    };
    let link = o.link.name();
    let rows = run_suite(&client, link, base, &suite, o.quick, cpu::Scope::Client);
    let closed = client.close();
    let rows = rows?;
    closed?;
    let title = format!(
        "datperf {}: dapl-rs IA {ia_name} -> {ip} vs raw kernel TCP (TCP_NODELAY), same run; \
         completions: {}",
        env!("CARGO_PKG_VERSION"),
        completion_mode(o)
    );
    render(o, &title, &rows, base)
}

fn run_server(o: &Options, addr: Ipv4Addr) -> Result<String> {
    let qual = o.qual.unwrap_or(args::DEFAULT_QUAL);
    let raw_port = baseline_port(qual)?;
    let ia_name = o.ia.clone().unwrap_or_else(|| o.link.ia_name(addr));
    if o.test.is_some()
        || o.kind.is_some()
        || o.size.is_some()
        || o.all_sizes
        || o.iters.is_some()
        || o.json
        || o.quick
        || o.poll.is_some()
    {
        eprintln!(
            "datperf server: note: the client chooses the measurements and their completion \
             mode; -t, -k, -s, -a, -n, --quick, --json, --poll and --event apply to it"
        );
    }
    let server = dat::Server::start(&ia_name, Some(qual))?;
    let raw_srv = raw::RawServer::bind(SocketAddr::new(IpAddr::V4(addr), raw_port))?;
    eprintln!(
        "datperf server: dapl-rs IA {ia_name} on connection qualifier {qual} (TCP port {}), raw \
         TCP baseline on port {raw_port}; stop with Ctrl-C",
        port_for_qual(qual)
    );
    let raw_thread = std::thread::Builder::new()
        .name("datperf-raw-server".into())
        .spawn(move || raw_srv.serve(false))?;
    let never = AtomicBool::new(false);
    let r = server.serve(&never, true);
    let _ = server.close();
    r?;
    join(raw_thread, "raw TCP server")?;
    Ok(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualifier_ports() {
        assert_eq!(port_for_qual(18515), 18515);
        assert_eq!(port_for_qual(65535), 65535);
        assert_eq!(port_for_qual(70000), (70000 % 32001 + 33534) as u16);
        assert_eq!(baseline_port(18515).unwrap(), 18516);
        assert!(baseline_port(65535).is_err());
    }

    #[test]
    fn resolving() {
        assert_eq!(resolve("10.1.2.3").unwrap(), Ipv4Addr::new(10, 1, 2, 3));
        assert_eq!(resolve("localhost").unwrap(), Ipv4Addr::LOCALHOST);
        assert_eq!(
            local_ip_for(Ipv4Addr::LOCALHOST).unwrap(),
            Ipv4Addr::LOCALHOST
        );
    }
}
