//! Command-line parsing (hand-written: a handful of options, and every mistake must end in a
//! clear message, never a panic).

use std::net::Ipv4Addr;

/// Largest message size datperf accepts (each side registers about twice this).
pub const MAX_SIZE: u64 = 1 << 30;

/// Default connection qualifier of `--server` / `--client` (perftest's default port).
pub const DEFAULT_QUAL: u64 = 18515;

/// Which DTO a measurement exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// send / receive
    Send,
    /// RDMA write
    Write,
    /// RDMA read
    Read,
}

impl Op {
    /// The name used in measurement names and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Op::Send => "send",
            Op::Write => "write",
            Op::Read => "read",
        }
    }

    fn parse(s: &str) -> Result<Op, String> {
        match s {
            "send" => Ok(Op::Send),
            "write" => Ok(Op::Write),
            "read" => Ok(Op::Read),
            _ => Err(format!(
                "unknown test {s:?} for -t (choose send, write or read)"
            )),
        }
    }
}

/// `-k`: which kind of measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindArg {
    /// Latency.
    Lat,
    /// Bandwidth.
    Bw,
    /// Message rate.
    Rate,
}

impl KindArg {
    fn parse(s: &str) -> Result<KindArg, String> {
        match s {
            "lat" => Ok(KindArg::Lat),
            "bw" => Ok(KindArg::Bw),
            "rate" => Ok(KindArg::Rate),
            _ => Err(format!(
                "unknown kind {s:?} for -k (choose lat, bw or rate)"
            )),
        }
    }
}

/// Which link the DAT side runs over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// iWARP over kernel TCP (IA name "tcp" / "tcp:<ipv4>").
    Tcp,
    /// The in-process loopback link (self-contained runs only).
    Loopback,
    /// The shared-memory link between processes of one host (IA name "shm" / "shm:<ipv4>").
    Shm,
}

impl LinkKind {
    /// The IA name of this link on `addr` (loopback has one address only).
    pub fn ia_name(self, addr: impl std::fmt::Display) -> String {
        match self {
            LinkKind::Tcp => format!("tcp:{addr}"),
            LinkKind::Shm => format!("shm:{addr}"),
            LinkKind::Loopback => "loopback".into(),
        }
    }
}

/// Where this process stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Server and client in this process over 127.0.0.1.
    Local,
    /// Serve clients on this local address.
    Server(Ipv4Addr),
    /// Run against the server on this host.
    Client(String),
}

/// Options of a benchmark run (or of a server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Local run, server or client.
    pub mode: Mode,
    /// Only this operation (`-t`); `None`: all three.
    pub test: Option<Op>,
    /// Only this kind of measurement (`-k`); `None`: all.
    pub kind: Option<KindArg>,
    /// Message size (`-s`); `None`: the standard sizes.
    pub size: Option<u64>,
    /// Iterations per measurement (`-n`); `None`: the defaults.
    pub iters: Option<u64>,
    /// Busy polling (`--poll`: `Some(true)`) or event wait (`--event`: `Some(false)`) for
    /// every measurement; `None`: busy polling for latency, event wait for bandwidth and rate.
    pub poll: Option<bool>,
    /// Link of the DAT side.
    pub link: LinkKind,
    /// `--link` was given; a local run without it measures tcp, then shm.
    pub link_given: bool,
    /// Connection qualifier (`-p`); `None`: `DEFAULT_QUAL` for server/client, any free one for
    /// a local run.
    pub qual: Option<u64>,
    /// Local IA name override (`--ia`).
    pub ia: Option<String>,
    /// JSON output.
    pub json: bool,
    /// Few iterations (for tests and smoke runs).
    pub quick: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: Mode::Local,
            test: None,
            kind: None,
            size: None,
            iters: None,
            poll: None,
            link: LinkKind::Tcp,
            link_given: false,
            qual: None,
            ia: None,
            json: false,
            quick: false,
        }
    }
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// A benchmark run (local or client) or a server.
    Run(Options),
    /// `datperf info [IA...]`: list IAs and their attributes.
    Info(Vec<String>),
    /// `datperf scale`: a connection storm between two processes.
    Scale(crate::scale::ScaleOptions),
    /// Print the usage.
    Help,
    /// Print the version.
    Version,
}

/// The usage text.
pub fn usage() -> String {
    format!(
        "\
datperf {version}: perftest-like benchmarks for dapl-rs, next to raw kernel TCP measured in the same run

USAGE:
    datperf [OPTIONS]                 self-contained run: server and client in this process,
                                      over 127.0.0.1: the tcp link against raw TCP, then the
                                      shm link against the same-host floors (two tables;
                                      --link picks one)
    datperf --server [ADDR] [OPTIONS] serve benchmarks on ADDR (default 0.0.0.0): DAT on the
                                      connection qualifier -p, the raw TCP baseline on the next
                                      TCP port; runs until killed
    datperf --client HOST [OPTIONS]   run the benchmarks against a datperf server on HOST
    datperf info [IA_NAME...]         list IAs (default: loopback, tcp) and their attributes
    datperf scale [--link tcp|shm] [-n CONNECTIONS] [--json]
                                      connection storm between two processes (this one and
                                      a server it spawns): every connect issued at once,
                                      one verified message per connection; reports how each
                                      ended, connections/s next to raw TCP connect+accept,
                                      memory per endpoint and threads (default 5000
                                      connections: 10,000 endpoints)

OPTIONS:
    -t, --test send|write|read  only this operation (default: all three)
    -k, --kind lat|bw|rate      only this kind of measurement (default: all)
    -s, --size SIZE             message size, e.g. 8, 4K, 64KiB, 1M, 1MiB (default: 8 bytes
                                for latency and message rate; 4 KiB, 64 KiB and 1 MiB for
                                bandwidth)
    -n, --iters N               iterations per measurement (default: 10000 for latency,
                                512 MiB worth for bandwidth (at most 300000), 300000 for
                                message rate); they run in rounds that share them (5 for
                                latency, 3 for bandwidth and rate; one with --quick), each
                                followed by its raw TCP round; latency pools the rounds'
                                samples (each round has its own warm-up), bandwidth and
                                rate report the median round
        --quick                 few iterations (a smoke run of a few seconds)
        --poll                  find completions by busy polling (evd_dequeue loop) in every
                                measurement (default: for latency only; see below); the
                                raw TCP baseline then polls a non-blocking socket
        --event                 find completions with evd_wait in every measurement
                                (default: for bandwidth and rate); the raw TCP baseline
                                then blocks (write latency polls memory, and its baseline
                                polls, in every mode)
        --link tcp|shm|loopback link of the DAT side (shm: processes of one host; loopback:
                                self-contained runs only)
    -p, --port QUAL             connection qualifier (default {qual}); the TCP port is QUAL
                                for QUAL <= 65535, else QUAL % 32001 + 33534; the raw TCP
                                baseline uses that port + 1
        --ia NAME               local IA name (default: <link>:<address>)
        --json                  print a JSON array of {{name, unit, value, baseline, ratio}}
    -h, --help                  this text
    -V, --version               the version

MEASUREMENTS (value next to the raw TCP baseline of the same run; ratio = value / baseline):
    send_lat_8B   half round trip of an 8-byte send/recv ping-pong (median; p99 in the
                  table); baseline: half round trip of an 8-byte TCP ping-pong
    write_lat_8B  half round trip of an RDMA write ping-pong, each side polling the last
                  byte of its buffer (as ib_write_lat); baseline: TCP ping-pong
    read_lat_8B   RDMA read of 8 bytes, post to completion (a full round trip); baseline: an
                  8-byte TCP request/response round trip
    *_bw_SIZE     GB/s (10^9 bytes/s) with a window of outstanding operations; RDMA write
                  ends with an RDMA read so the peer has everything, send with the peer's
                  reply after the last receive; baseline: streaming SIZE-byte writes
                  (server to client for read) ending with an 8-byte acknowledgement
    msg_rate_8B   8-byte sends per second (Mmsg/s); baseline: 8-byte TCP writes

Completion mode: by default latency is measured with busy polling (an evd_dequeue loop, as
perftest polls its CQ; an empty evd_dequeue handles what the tcp link has received in the
calling thread) and bandwidth and message rate with evd_wait. evd_wait spins up to 50 us before
it sleeps, without yielding the CPU: measured on a loaded 2-core machine, when the benchmark
threads share a CPU this made the send/recv ping-pong 66-70 us per half round trip with --event
against 13-17 us with --poll (read latency 24 vs 20 us; see crates/datperf/README.md). The
polling loop calls sched_yield between empty polls so that the peer's thread and the link's
progress threads can run (a self-contained run has two benchmark and two progress threads).
RDMA write latency always polls memory (there is no completion on the passive side).

The raw TCP baseline waits the way the DAT side of the same measurement does, on both of its
sides (the mode travels in its request header, so a --server follows the client): where the
DAT side polls, it uses a non-blocking socket and retries reads and writes that would block in
the same loop (sched_yield between empty tries); where the DAT side waits with evd_wait, it
uses blocking reads and writes. A blocking wakeup costs what the machine's idle states and
load make it cost (on one idle machine a blocking 8-byte TCP ping-pong took 33 us per half
round trip, on a loaded one 7 us), so a polled figure over a blocking baseline gives a ratio
that says nothing about either stack.
",
        version = env!("CARGO_PKG_VERSION"),
        qual = DEFAULT_QUAL
    )
}

/// Parses a size: decimal digits with an optional suffix B, K/KiB, M/MiB, G/GiB (powers of
/// 1024; case-insensitive). Must be in `1..=MAX_SIZE`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(digits_end);
    if num.is_empty() {
        return Err(format!(
            "bad size {s:?}: expected a number with an optional K, KiB, M, MiB, G or GiB"
        ));
    }
    let mult: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "kb" | "mb" | "gb" => {
            return Err(format!(
                "bad size {s:?}: {suffix} is ambiguous; use K/KiB (1024) or M/MiB (1024*1024)"
            ))
        }
        _ => {
            return Err(format!(
                "bad size {s:?}: unknown suffix {suffix:?} (use K, KiB, M, MiB, G or GiB)"
            ))
        }
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("bad size {s:?}: the number is too large"))?;
    let v = n
        .checked_mul(mult)
        .ok_or_else(|| format!("bad size {s:?}: too large"))?;
    if v == 0 {
        return Err(format!("bad size {s:?}: must be at least 1 byte"));
    }
    if v > MAX_SIZE {
        return Err(format!(
            "bad size {s:?}: at most {} ({MAX_SIZE} bytes)",
            size_label(MAX_SIZE)
        ));
    }
    Ok(v)
}

/// The size as measurement names spell it: `8B`, `4KiB`, `64KiB`, `1MiB`, `1000B`.
pub fn size_label(n: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (u, name) in UNITS {
        if n >= u && n % u == 0 {
            return format!("{}{name}", n / u);
        }
    }
    format!("{n}B")
}

fn parse_u64(opt: &str, v: &str, min: u64, max: u64) -> Result<u64, String> {
    let n: u64 = v
        .trim()
        .parse()
        .map_err(|_| format!("{opt} needs a whole number, not {v:?}"))?;
    if n < min || n > max {
        return Err(format!("{opt} must be in {min}..={max}, not {n}"));
    }
    Ok(n)
}

/// Parses the arguments after the program name.
pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<Command, String> {
    let args: Vec<&str> = args.iter().map(|s| s.as_ref()).collect();
    if args.first() == Some(&"info") {
        let mut names = Vec::new();
        for a in &args[1..] {
            match *a {
                "-h" | "--help" => return Ok(Command::Help),
                a if a.starts_with('-') => {
                    return Err(format!("unknown option {a:?} for `datperf info`"))
                }
                a => names.push(a.to_string()),
            }
        }
        return Ok(Command::Info(names));
    }
    if args.first() == Some(&"scale") {
        return parse_scale(&args[1..]);
    }
    let mut o = Options::default();
    let mut server: Option<Ipv4Addr> = None;
    let mut client: Option<String> = None;
    let mut link_set = false;
    let mut i = 0;
    while i < args.len() {
        let raw = args[i];
        i += 1;
        // `--opt=value` form for long options.
        let (opt, inline) = match raw.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k, Some(v)),
            _ => (raw, None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            if let Some(v) = inline {
                return Ok(v.to_string());
            }
            match args.get(i) {
                Some(v) => {
                    i += 1;
                    Ok(v.to_string())
                }
                None => Err(format!("{opt} needs {what}")),
            }
        };
        const FLAGS: [&str; 8] = [
            "-h",
            "--help",
            "-V",
            "--version",
            "--poll",
            "--event",
            "--json",
            "--quick",
        ];
        if inline.is_some() && FLAGS.contains(&opt) {
            return Err(format!("{opt} takes no value"));
        }
        match opt {
            "-h" | "--help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            "--server" => {
                if server.is_some() {
                    return Err("--server given twice".into());
                }
                let addr = match inline {
                    Some(v) => Some(v.to_string()),
                    None => match args.get(i) {
                        Some(v) if !v.starts_with('-') => {
                            i += 1;
                            Some(v.to_string())
                        }
                        _ => None,
                    },
                };
                server = Some(match addr {
                    None => Ipv4Addr::UNSPECIFIED,
                    Some(a) => a
                        .parse()
                        .map_err(|_| format!("--server takes a local IPv4 address, not {a:?}"))?,
                });
            }
            "--client" | "-c" => {
                if client.is_some() {
                    return Err("--client given twice".into());
                }
                let h = value("a host name or address")?;
                if h.is_empty() {
                    return Err("--client needs a host name or address".into());
                }
                client = Some(h);
            }
            "-t" | "--test" => o.test = Some(Op::parse(&value("send, write or read")?)?),
            "-k" | "--kind" => o.kind = Some(KindArg::parse(&value("lat, bw or rate")?)?),
            "-s" | "--size" => o.size = Some(parse_size(&value("a size")?)?),
            "-n" | "--iters" => {
                o.iters = Some(parse_u64(opt, &value("a count")?, 1, 1_000_000_000)?)
            }
            "-p" | "--port" => o.qual = Some(parse_u64(opt, &value("a qualifier")?, 1, u64::MAX)?),
            "--poll" => o.poll = Some(true),
            "--event" => o.poll = Some(false),
            "--link" => {
                o.link = match value("tcp, shm or loopback")?.as_str() {
                    "tcp" => LinkKind::Tcp,
                    "shm" => LinkKind::Shm,
                    "loopback" => LinkKind::Loopback,
                    v => return Err(format!("unknown link {v:?} (choose tcp, shm or loopback)")),
                };
                link_set = true;
            }
            "--ia" => {
                let n = value("an IA name")?;
                if n.is_empty() {
                    return Err("--ia needs an IA name".into());
                }
                o.ia = Some(n);
            }
            "--json" => o.json = true,
            "--quick" => o.quick = true,
            a if a.starts_with('-') => return Err(format!("unknown option {a:?} (see --help)")),
            a => return Err(format!("unexpected argument {a:?} (see --help)")),
        }
    }
    o.mode = match (server, client) {
        (Some(_), Some(_)) => return Err("--server and --client exclude each other".into()),
        (Some(a), None) => Mode::Server(a),
        (None, Some(h)) => Mode::Client(h),
        (None, None) => Mode::Local,
    };
    o.link_given = link_set;
    if link_set && o.link == LinkKind::Loopback && o.mode != Mode::Local {
        return Err(
            "--link loopback works only within one process (a run without --server/--client)"
                .into(),
        );
    }
    if o.ia.is_some() && o.mode == Mode::Local {
        return Err("--ia applies to --server and --client runs".into());
    }
    Ok(Command::Run(o))
}

/// Parses the arguments after `datperf scale`.
fn parse_scale(args: &[&str]) -> Result<Command, String> {
    let mut o = crate::scale::ScaleOptions {
        link: LinkKind::Tcp,
        connections: crate::scale::DEFAULT_CONNECTIONS,
        serve: false,
        json: false,
    };
    let mut i = 0;
    while i < args.len() {
        let (opt, inline) = match args[i].split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k, Some(v)),
            _ => (args[i], None),
        };
        i += 1;
        let mut value = |what: &str| -> Result<String, String> {
            if let Some(v) = inline {
                return Ok(v.to_string());
            }
            i += 1;
            args.get(i - 1)
                .map(|v| v.to_string())
                .ok_or_else(|| format!("{opt} needs {what}"))
        };
        match opt {
            "-h" | "--help" => return Ok(Command::Help),
            "--link" => {
                o.link = match value("tcp or shm")?.as_str() {
                    "tcp" => LinkKind::Tcp,
                    "shm" => LinkKind::Shm,
                    v => return Err(format!("`datperf scale` runs over tcp or shm, not {v:?}")),
                }
            }
            "-n" | "--connections" => {
                o.connections = parse_u64(opt, &value("a count")?, 1, 1_000_000)?
            }
            "--json" => o.json = true,
            "--serve" => o.serve = true,
            a => return Err(format!("unknown argument {a:?} for `datperf scale`")),
        }
    }
    Ok(Command::Scale(o))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Options {
        match parse(args) {
            Ok(Command::Run(o)) => o,
            other => panic!("{args:?} gave {other:?}"),
        }
    }

    fn fails(args: &[&str]) -> String {
        match parse(args) {
            Err(e) => e,
            Ok(c) => panic!("{args:?} should fail, gave {c:?}"),
        }
    }

    #[test]
    fn sizes_with_suffixes() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("8B"), Ok(8));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("64kib"), Ok(65536));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size(" 1000 "), Ok(1000));
    }

    #[test]
    fn bad_sizes_are_errors() {
        for s in [
            "",
            "K",
            "0",
            "0K",
            "-1",
            "1.5K",
            "4KB",
            "1MB",
            "4X",
            "2G",
            "99999999999999999999",
            "18446744073709551615K",
        ] {
            assert!(parse_size(s).is_err(), "{s:?} should be refused");
        }
        assert!(parse_size("4KB").unwrap_err().contains("ambiguous"));
    }

    #[test]
    fn size_labels() {
        assert_eq!(size_label(8), "8B");
        assert_eq!(size_label(4096), "4KiB");
        assert_eq!(size_label(65536), "64KiB");
        assert_eq!(size_label(1 << 20), "1MiB");
        assert_eq!(size_label(1 << 30), "1GiB");
        assert_eq!(size_label(1000), "1000B");
        assert_eq!(size_label(1536), "1536B");
        assert_eq!(size_label(3 << 20), "3MiB");
    }

    #[test]
    fn no_arguments_is_a_local_run() {
        let o = run(&[]);
        assert_eq!(o, Options::default());
        assert_eq!(o.mode, Mode::Local);
        assert_eq!(o.link, LinkKind::Tcp);
        assert_eq!(o.poll, None);
    }

    #[test]
    fn options_are_parsed() {
        let o = run(&[
            "-t", "write", "-s", "64K", "-n", "100", "--poll", "--json", "--quick", "-p", "20000",
        ]);
        assert_eq!(o.test, Some(Op::Write));
        assert_eq!(o.size, Some(65536));
        assert_eq!(o.iters, Some(100));
        assert!(o.poll == Some(true) && o.json && o.quick);
        assert_eq!(o.qual, Some(20000));
        assert_eq!(run(&["-k", "bw"]).kind, Some(KindArg::Bw));
        assert_eq!(run(&["--kind=rate"]).kind, Some(KindArg::Rate));
        let o = run(&["--test=read", "--size=1MiB", "--iters=5", "--link=loopback"]);
        assert_eq!(
            (o.test, o.size, o.iters, o.link),
            (Some(Op::Read), Some(1 << 20), Some(5), LinkKind::Loopback)
        );
        assert_eq!(run(&["--poll", "--event"]).poll, Some(false));
    }

    #[test]
    fn server_and_client_modes() {
        assert_eq!(run(&["--server"]).mode, Mode::Server(Ipv4Addr::UNSPECIFIED));
        assert_eq!(
            run(&["--server", "10.0.0.2", "-p", "9000"]).mode,
            Mode::Server(Ipv4Addr::new(10, 0, 0, 2))
        );
        // An option after --server is not taken for its address.
        let o = run(&["--server", "--poll"]);
        assert_eq!(o.mode, Mode::Server(Ipv4Addr::UNSPECIFIED));
        assert_eq!(o.poll, Some(true));
        let o = run(&["--client", "host-b", "-t", "send", "--ia", "tcp:10.0.0.1"]);
        assert_eq!(o.mode, Mode::Client("host-b".into()));
        assert_eq!(o.ia.as_deref(), Some("tcp:10.0.0.1"));
    }

    #[test]
    fn info_takes_names() {
        assert_eq!(parse(&["info"]), Ok(Command::Info(vec![])));
        assert_eq!(
            parse(&["info", "tcp:127.0.0.1,crc"]),
            Ok(Command::Info(vec!["tcp:127.0.0.1,crc".into()]))
        );
        assert!(parse(&["info", "--bogus"]).is_err());
        assert_eq!(parse(&["info", "--help"]), Ok(Command::Help));
    }

    #[test]
    fn help_and_version() {
        assert_eq!(parse(&["-h"]), Ok(Command::Help));
        assert_eq!(parse(&["--json", "--help"]), Ok(Command::Help));
        assert_eq!(parse(&["-V"]), Ok(Command::Version));
        assert!(usage().contains("--server"));
    }

    #[test]
    fn bad_arguments_are_errors_not_panics() {
        assert!(fails(&["-t"]).contains("needs"));
        assert!(fails(&["-t", "atomic"]).contains("atomic"));
        assert!(fails(&["-k", "fast"]).contains("fast"));
        assert!(fails(&["-s", "4KB"]).contains("ambiguous"));
        assert!(fails(&["-n", "0"]).contains("-n"));
        assert!(fails(&["-n", "ten"]).contains("whole number"));
        assert!(fails(&["-p", "-5"]).contains("-p"));
        assert!(fails(&["--link", "udp"]).contains("udp"));
        assert_eq!(run(&["--link", "shm"]).link, LinkKind::Shm);
        assert!(fails(&["--bogus"]).contains("--bogus"));
        assert!(fails(&["--bogus=1"]).contains("--bogus"));
        assert!(fails(&["stray"]).contains("stray"));
        assert!(fails(&["--server", "not-an-ip"]).contains("IPv4"));
        assert!(fails(&["--server", "--client", "x"]).contains("exclude"));
        assert!(fails(&["--client"]).contains("needs"));
        assert!(fails(&["--client", "h", "--link", "loopback"]).contains("one process"));
        assert!(fails(&["--ia", "tcp"]).contains("--ia"));
        assert!(fails(&["--server", "--server"]).contains("twice"));
        assert!(fails(&["--json=yes"]).contains("no value"));
    }
}
