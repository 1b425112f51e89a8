//! Command-line parsing with clap (derive): the options as perftest spells them where it has
//! them (`-t`, `-s`, `-n`, `-a`, `-p`), and every mistake a one-line message, never a panic.

use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::path::PathBuf;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

/// Largest message size datperf accepts (each side registers about twice this).
pub const MAX_SIZE: u64 = 1 << 30;

/// Largest size of a sweep (`-a`), as perftest's `-a`.
pub const SWEEP_MAX: u64 = 8 << 20;

/// Default connection qualifier of `--server` / `--client` (perftest's default port).
pub const DEFAULT_QUAL: u64 = 18515;

/// Which DTO a measurement exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
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
}

/// `-k`: which kind of measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KindArg {
    /// Latency.
    Lat,
    /// Bandwidth.
    Bw,
    /// Message rate.
    Rate,
}

/// Which link the DAT side runs over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LinkKind {
    /// iWARP over kernel TCP (IA name "tcp" / "tcp:IPV4").
    Tcp,
    /// The shared-memory link between processes of one host (IA name "shm" / "shm:IPV4").
    Shm,
    /// The in-process loopback link (self-contained runs only).
    Loopback,
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

    /// The link's short name ("tcp", "shm", "loopback").
    pub fn name(self) -> &'static str {
        match self {
            LinkKind::Tcp => "tcp",
            LinkKind::Shm => "shm",
            LinkKind::Loopback => "loopback",
        }
    }
}

/// `--mem`: whose memory the DAT side's buffers are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum MemKind {
    /// Allocated by the library (`lmr_allocate`): on shm, peers map it and RDMA to it is a
    /// copy by the initiator.
    #[default]
    Library,
    /// The program's own heap, registered (`Pz::register`): RDMA goes through the link.
    Caller,
}

/// The links of `datperf scale` (two processes: no loopback).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ScaleLink {
    Tcp,
    Shm,
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
    /// Every power of two from 2 bytes to `SWEEP_MAX` for latency and bandwidth (`-a`).
    pub all_sizes: bool,
    /// Iterations per measurement (`-n`); `None`: the defaults.
    pub iters: Option<u64>,
    /// Busy polling (`--poll`: `Some(true)`) or event wait (`--event`: `Some(false)`) for
    /// every measurement; `None`: busy polling for latency, event wait for bandwidth and rate.
    pub poll: Option<bool>,
    /// Link of the DAT side.
    pub link: LinkKind,
    /// Whose memory the buffers are (`--mem`); a client's choice holds for the server too.
    pub mem: MemKind,
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
    /// Draw bandwidth and latency against size into this SVG file (`--plot`).
    pub plot: Option<PathBuf>,
    /// Each side's timed loop on a CPU of its own (`--no-pin`: false; src/pin.rs).
    pub pin: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            mode: Mode::Local,
            test: None,
            kind: None,
            size: None,
            all_sizes: false,
            iters: None,
            poll: None,
            link: LinkKind::Tcp,
            mem: MemKind::Library,
            link_given: false,
            qual: None,
            ia: None,
            json: false,
            quick: false,
            plot: None,
            pin: true,
        }
    }
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// A benchmark run (local or client) or a server.
    Run(Options),
    /// `datperf info [-v] [IA...]`: list IAs and their attributes.
    Info {
        /// The IAs named; empty: every IA this machine offers.
        names: Vec<String>,
        /// Every attribute and limit (`-v`).
        verbose: bool,
    },
    /// `datperf scale`: a connection storm between two processes.
    Scale(crate::scale::ScaleOptions),
}

const ABOUT: &str =
    "perftest-like benchmarks for dapl-rs, next to raw kernel TCP measured in the same run";

const LONG_ABOUT: &str = "\
perftest-like benchmarks for dapl-rs, next to raw kernel TCP measured in the same run.

Without --server or --client, server and client run in this process over 127.0.0.1: the tcp
link against raw TCP, then the shm link against the same-host floors (two tables; --link picks
one). `datperf --server [ADDR]` serves benchmarks (DAT on the connection qualifier -p, the raw
TCP baseline on the next TCP port) until killed; `datperf --client HOST` runs them against it.";

const AFTER_LONG_HELP: &str = "\
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
                  (above 128 KiB the faster of that and writing each message in 128 KiB
                  pieces, tagged [message] or [128KiB]; server to client for read), ending
                  with an 8-byte acknowledgement
    msg_rate_8B   8-byte sends per second (Mmsg/s); baseline: 8-byte TCP writes

CPU TIME: each row also gives the user + system CPU time of the timed loop, for both and their
ratio: per operation (us/op; latency: one iteration) or per byte (ns/B = CPU s per GB) for
bandwidth. It counts every thread of the process (getrusage RUSAGE_SELF): both sides and the
progress threads in a self-contained run, the client's process only with --client.

ITERATIONS: by default 10000 for latency, 512 MiB worth for bandwidth (at most 300000) and
300000 for message rate; they run in rounds that share them (5 for latency, 3 for bandwidth
and rate; one with --quick), each followed by its raw TCP round; latency pools the rounds'
samples (each round has its own warm-up), bandwidth and rate report the median round. A sweep
(-a) scales them down with the size: latency 1000 iterations down to 20 at 8 MiB, bandwidth
64 MiB worth (at least 8, at most 20000).

COMPLETION MODE: by default latency is measured with busy polling (an evd_dequeue loop, as
perftest polls its CQ; an empty evd_dequeue handles what the tcp link has received in the
calling thread) and bandwidth and message rate with evd_wait. evd_wait polls up to 50 us before
it sleeps, pacing its yields as the polling loop does (below). The
polling loop calls sched_yield between empty polls while its yields let other threads run (the
peer's thread and the link's progress threads: a self-contained run has two benchmark and two
progress threads), and only every 16th empty poll once 64 yields in a row returned within 1 us
(nobody else wanted its CPU); one slower yield brings the yield after every poll back.
RDMA write latency always polls memory (there is no completion on the passive side).

The raw TCP baseline waits the way the DAT side of the same measurement does, on both of its
sides (the mode travels in its request header, so a --server follows the client): where the
DAT side polls, it uses a non-blocking socket and retries reads and writes that would block in
the same loop (yielding alike); where the DAT side waits with evd_wait, it
uses blocking reads and writes. A blocking wakeup costs what the machine's idle states and
load make it cost (on one idle machine a blocking 8-byte TCP ping-pong took 33 us per half
round trip, on a loaded one 7 us), so a polled figure over a blocking baseline gives a ratio
that says nothing about either stack.

EXAMPLES:
    datperf --quick                          a smoke run of a few seconds
    datperf -a --plot sweep.svg              every size from 2 B to 8 MiB, drawn
    datperf --server 10.0.0.2                on host B
    datperf --client 10.0.0.2 -t write -s 64K on host A
    datperf info -v                          every IA of this machine, every attribute";

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "datperf",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_long_help = AFTER_LONG_HELP,
    args_conflicts_with_subcommands = true,
    max_term_width = 100
)]
struct Cli {
    #[command(subcommand)]
    sub: Option<Sub>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Sub {
    /// List the IAs this machine offers and their attributes (like ibv_devinfo)
    Info(InfoArgs),
    /// Connection storm between this process and a server process it spawns
    #[command(long_about = "\
Connection storm between this process and a server process it spawns: every connect issued at
once, one verified message per connection. Reports how each connection ended, connections/s
next to raw TCP connect+accept, memory per endpoint and threads.")]
    Scale(ScaleArgs),
}

#[derive(Debug, Args)]
struct InfoArgs {
    /// IA names, e.g. loopback, tcp:10.0.0.1, shm, tcp:127.0.0.1,crc [default: loopback, then
    /// tcp and shm on every local IPv4 address]
    #[arg(value_name = "IA_NAME")]
    names: Vec<String>,
    /// Every attribute and limit (default: the main ones)
    #[arg(short, long)]
    verbose: bool,
}

#[derive(Debug, Args)]
struct ScaleArgs {
    /// Link of both processes
    #[arg(long, value_enum, default_value = "tcp")]
    link: ScaleLink,
    /// Connections (an endpoint on either side of each)
    #[arg(
        short = 'n',
        long,
        value_name = "N",
        default_value_t = crate::scale::DEFAULT_CONNECTIONS,
        value_parser = clap::value_parser!(u64).range(1..=1_000_000),
        allow_negative_numbers = true
    )]
    connections: u64,
    /// Print one JSON object
    #[arg(long)]
    json: bool,
    /// Be the spawned server process (internal)
    #[arg(long, hide = true)]
    serve: bool,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Serve benchmarks on this local address until killed
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        default_missing_value = "0.0.0.0",
        conflicts_with = "client",
        help_heading = "Mode"
    )]
    server: Option<Ipv4Addr>,
    /// Run the benchmarks against the datperf server on HOST
    #[arg(
        short = 'c',
        long,
        value_name = "HOST",
        value_parser = clap::builder::NonEmptyStringValueParser::new(),
        help_heading = "Mode"
    )]
    client: Option<String>,

    /// Only this operation [default: all three]
    #[arg(short, long, value_enum, overrides_with = "test")]
    test: Option<Op>,
    /// Only this kind of measurement [default: all]
    #[arg(short, long, value_enum, overrides_with = "kind")]
    kind: Option<KindArg>,
    /// Message size: 8, 4K, 64KiB, 1M, 1MiB [default: 8 B for latency and rate; 4 KiB,
    /// 64 KiB and 1 MiB for bandwidth]
    #[arg(
        short,
        long,
        value_name = "SIZE",
        value_parser = parse_size,
        overrides_with = "size",
        conflicts_with = "all_sizes"
    )]
    size: Option<u64>,
    /// Sweep latency and bandwidth over every power of two from 2 B to 8 MiB (as perftest's -a)
    #[arg(short, long)]
    all_sizes: bool,
    /// Iterations per measurement [default: see ITERATIONS under --help]
    #[arg(
        short = 'n',
        long,
        value_name = "N",
        value_parser = clap::value_parser!(u64).range(1..=1_000_000_000),
        allow_negative_numbers = true,
        overrides_with = "iters"
    )]
    iters: Option<u64>,
    /// Few iterations (a smoke run of a few seconds)
    #[arg(long, overrides_with = "quick")]
    quick: bool,
    /// Find completions by busy polling in every measurement (the raw TCP baseline then polls
    /// a non-blocking socket) [default: for latency only]
    #[arg(long, overrides_with_all = ["poll", "event"])]
    poll: bool,
    /// Find completions with evd_wait in every measurement (the raw TCP baseline then blocks)
    /// [default: for bandwidth and rate]
    #[arg(long, overrides_with_all = ["poll", "event"])]
    event: bool,
    /// Link of the DAT side (shm: processes of one host; loopback: self-contained runs only)
    /// [default: tcp, then shm, in a self-contained run; tcp otherwise]
    #[arg(long, value_enum, overrides_with = "link")]
    link: Option<LinkKind>,
    /// Whose memory the buffers are: library (lmr_allocate; on shm peers map it, and the
    /// bandwidth baseline of RDMA is memcpy) or caller (registered heap memory; the shm
    /// baseline is process_vm_readv) [default: library]
    #[arg(long, value_enum, overrides_with = "mem")]
    mem: Option<MemKind>,
    /// Connection qualifier [default: 18515]; the TCP port is QUAL for QUAL <= 65535, else
    /// QUAL % 32001 + 33534; the raw TCP baseline uses that port + 1
    #[arg(
        short = 'p',
        long = "port",
        value_name = "QUAL",
        value_parser = clap::value_parser!(u64).range(1..),
        allow_negative_numbers = true,
        overrides_with = "qual"
    )]
    qual: Option<u64>,
    /// Local IA name of --server and --client (default: LINK:ADDRESS)
    #[arg(
        long,
        value_name = "NAME",
        value_parser = clap::builder::NonEmptyStringValueParser::new(),
        overrides_with = "ia"
    )]
    ia: Option<String>,
    /// Print a JSON array of {link, name, unit, value, baseline, ratio} on stdout
    #[arg(long, overrides_with = "json")]
    json: bool,
    /// Draw bandwidth and latency against message size, dapl-rs next to its baseline, into
    /// this SVG file (best with -a)
    #[arg(long, value_name = "FILE.svg", overrides_with = "plot")]
    plot: Option<PathBuf>,
    /// Leave each side's CPU to the scheduler (by default, with two CPUs or more, the client's
    /// timed loop runs on the first CPU the process may use and the server's on the second,
    /// baselines alike)
    #[arg(long, overrides_with = "no_pin")]
    no_pin: bool,
}

/// Parses a size: decimal digits with an optional suffix B, K/KiB, M/MiB, G/GiB (powers of
/// 1024; case-insensitive). Must be in `1..=MAX_SIZE`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(digits_end);
    if num.is_empty() {
        return Err("expected a number with an optional K, KiB, M, MiB, G or GiB".into());
    }
    let mult: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "kb" | "mb" | "gb" => {
            return Err(format!(
                "{suffix} is ambiguous; use K/KiB (1024) or M/MiB (1024*1024)"
            ))
        }
        _ => {
            return Err(format!(
                "unknown suffix {suffix:?} (use K, KiB, M, MiB, G or GiB)"
            ))
        }
    };
    let n: u64 = num.parse().map_err(|_| "the number is too large")?;
    let v = n.checked_mul(mult).ok_or("too large")?;
    if v == 0 {
        return Err("must be at least 1 byte".into());
    }
    if v > MAX_SIZE {
        return Err(format!(
            "at most {} ({MAX_SIZE} bytes)",
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

/// The sizes of a sweep: 2, 4, ... `SWEEP_MAX` bytes.
pub fn sweep_sizes() -> Vec<u64> {
    (1..=SWEEP_MAX.trailing_zeros())
        .map(|s| 1u64 << s)
        .collect()
}

/// What `parse` gives instead of a command.
#[derive(Debug)]
pub enum Exit {
    /// `--help` or `--version`: print this on stdout, exit 0.
    Print(String),
    /// A user error: print this one line on stderr, exit 2.
    Usage(String),
}

/// Parses the arguments after the program name.
pub fn parse<I, S>(args: I) -> Result<Command, Exit>
where
    I: IntoIterator<Item = S>,
    S: Into<OsString> + Clone,
{
    let argv: Vec<OsString> = std::iter::once(OsString::from("datperf"))
        .chain(args.into_iter().map(Into::into))
        .collect();
    let sub = match argv.get(1).and_then(|a| a.to_str()) {
        Some(s @ ("info" | "scale")) => format!(" {s}"),
        _ => String::new(),
    };
    let cli = Cli::try_parse_from(&argv).map_err(|e| clap_exit(&e, &sub))?;
    let usage = |kind: ErrorKind, msg: &str| clap_exit(&Cli::command().error(kind, msg), &sub);
    let r = match cli.sub {
        Some(Sub::Info(i)) => {
            return Ok(Command::Info {
                names: i.names,
                verbose: i.verbose,
            })
        }
        Some(Sub::Scale(s)) => {
            return Ok(Command::Scale(crate::scale::ScaleOptions {
                link: match s.link {
                    ScaleLink::Tcp => LinkKind::Tcp,
                    ScaleLink::Shm => LinkKind::Shm,
                },
                connections: s.connections,
                serve: s.serve,
                json: s.json,
            }))
        }
        None => cli.run,
    };
    let mode = match (r.server, r.client) {
        (Some(a), None) => Mode::Server(a),
        (None, Some(h)) => Mode::Client(h),
        // clap refuses both (`conflicts_with`).
        (_, _) => Mode::Local,
    };
    if r.link == Some(LinkKind::Loopback) && mode != Mode::Local {
        return Err(usage(
            ErrorKind::ArgumentConflict,
            "--link loopback works only within one process (a run without --server/--client)",
        ));
    }
    if r.ia.is_some() && mode == Mode::Local {
        return Err(usage(
            ErrorKind::ArgumentConflict,
            "--ia applies to --server and --client runs (a self-contained run opens its own IAs)",
        ));
    }
    if r.plot.is_some() && matches!(mode, Mode::Server(_)) {
        return Err(usage(
            ErrorKind::ArgumentConflict,
            "--plot applies to the side that measures: give it to the client, not --server",
        ));
    }
    Ok(Command::Run(Options {
        mode,
        test: r.test,
        kind: r.kind,
        size: r.size,
        all_sizes: r.all_sizes,
        iters: r.iters,
        poll: match (r.poll, r.event) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        },
        link: r.link.unwrap_or(LinkKind::Tcp),
        mem: r.mem.unwrap_or_default(),
        link_given: r.link.is_some(),
        qual: r.qual,
        ia: r.ia,
        json: r.json,
        quick: r.quick,
        plot: r.plot,
        pin: !r.no_pin,
    }))
}

/// A clap error as datperf reports it: help and version as they are, a mistake as one line
/// (what was wrong, clap's tip if it has one, where to look).
fn clap_exit(e: &clap::Error, sub: &str) -> Exit {
    let text = e.render().to_string();
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        return Exit::Print(text);
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        return Exit::Usage(format!("a command is missing (see `datperf{sub} --help`)"));
    }
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let what = lines
        .next()
        .map(|l| l.strip_prefix("error: ").unwrap_or(l).to_string())
        .unwrap_or_else(|| e.kind().to_string());
    let mut msg = what;
    for l in lines {
        if let Some(t) = l.strip_prefix("tip: ") {
            msg.push_str("; ");
            msg.push_str(t);
        } else if l.starts_with("[possible values:") {
            msg.push(' ');
            msg.push_str(l);
        }
    }
    msg.push_str(&format!(" (see `datperf{sub} --help`)"));
    Exit::Usage(msg)
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
            Err(Exit::Usage(e)) => {
                assert!(!e.contains('\n'), "{args:?}: not one line: {e}");
                e
            }
            other => panic!("{args:?} should fail, gave {other:?}"),
        }
    }

    fn printed(args: &[&str]) -> String {
        match parse(args) {
            Err(Exit::Print(t)) => t,
            other => panic!("{args:?} should print, gave {other:?}"),
        }
    }

    #[test]
    fn the_command_is_well_formed() {
        Cli::command().debug_assert();
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
    fn sweep_sizes_are_the_powers_of_two_from_2_to_8_mib() {
        let s = sweep_sizes();
        assert_eq!(s.len(), 23);
        assert_eq!((s[0], s[1], s[22]), (2, 4, 8 << 20));
        assert!(s.windows(2).all(|w| w[1] == 2 * w[0]));
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
            (o.test, o.size, o.iters, o.link, o.link_given),
            (
                Some(Op::Read),
                Some(1 << 20),
                Some(5),
                LinkKind::Loopback,
                true
            )
        );
        // The last of --poll and --event counts, as does the last of a repeated option.
        assert_eq!(run(&["--poll", "--event"]).poll, Some(false));
        assert_eq!(run(&["--event", "--poll"]).poll, Some(true));
        assert_eq!(run(&["-t", "send", "-t", "read"]).test, Some(Op::Read));
        assert!(run(&["--json", "--json"]).json);
        let o = run(&["-a", "--plot", "out.svg", "-k", "bw"]);
        assert!(o.all_sizes && o.size.is_none());
        assert_eq!(o.plot.as_deref(), Some(std::path::Path::new("out.svg")));
        assert!(run(&["--all-sizes"]).all_sizes);
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
        assert_eq!(run(&["-c", "h"]).mode, Mode::Client("h".into()));
    }

    #[test]
    fn info_takes_names_and_verbose() {
        assert_eq!(
            parse(["info"]).unwrap(),
            Command::Info {
                names: vec![],
                verbose: false
            }
        );
        assert_eq!(
            parse(["info", "-v", "tcp:127.0.0.1,crc"]).unwrap(),
            Command::Info {
                names: vec!["tcp:127.0.0.1,crc".into()],
                verbose: true
            }
        );
        assert!(fails(&["info", "--bogus"]).contains("datperf info --help"));
        assert!(printed(&["info", "--help"]).contains("IA_NAME"));
    }

    #[test]
    fn scale_options() {
        let Ok(Command::Scale(s)) = parse(["scale", "--link", "shm", "-n", "200", "--json"]) else {
            panic!("scale not parsed");
        };
        assert_eq!(
            (s.link, s.connections, s.json, s.serve),
            (LinkKind::Shm, 200, true, false)
        );
        let Ok(Command::Scale(s)) = parse(["scale", "--serve"]) else {
            panic!("scale not parsed");
        };
        assert_eq!(s.link, LinkKind::Tcp);
        assert_eq!(s.connections, crate::scale::DEFAULT_CONNECTIONS);
        assert!(s.serve);
        assert!(fails(&["scale", "--link", "loopback"]).contains("loopback"));
        assert!(fails(&["scale", "-n", "0"]).contains("0"));
        assert!(fails(&["scale", "--bogus"]).contains("--bogus"));
        // Run options do not mix with a subcommand.
        assert!(!fails(&["--json", "scale"]).is_empty());
    }

    #[test]
    fn help_and_version() {
        let h = printed(&["-h"]);
        assert!(h.contains("--server") && h.contains("--all-sizes") && h.contains("info"));
        let long = printed(&["--json", "--help"]);
        assert!(long.contains("MEASUREMENTS") && long.contains("COMPLETION MODE"));
        assert!(printed(&["-V"]).contains(env!("CARGO_PKG_VERSION")));
    }

    #[test]
    fn bad_arguments_are_one_line_errors_not_panics() {
        assert!(fails(&["-t"]).contains("value is required"));
        let e = fails(&["-t", "atomic"]);
        assert!(
            e.contains("atomic") && e.contains("possible values: send, write, read"),
            "{e}"
        );
        assert!(fails(&["-k", "fast"]).contains("fast"));
        assert!(fails(&["-s", "4KB"]).contains("ambiguous"));
        assert!(fails(&["-n", "0"]).contains("0"));
        assert!(fails(&["-n", "ten"]).contains("ten"));
        assert!(fails(&["-p", "-5"]).contains("-5"));
        assert!(fails(&["--link", "udp"]).contains("udp"));
        assert_eq!(run(&["--link", "shm"]).link, LinkKind::Shm);
        assert_eq!(run(&["--link", "shm"]).mem, MemKind::Library);
        assert_eq!(run(&["--mem", "caller"]).mem, MemKind::Caller);
        assert!(fails(&["--bogus"]).contains("--bogus"));
        assert!(fails(&["--bogus=1"]).contains("--bogus"));
        // clap's suggestion makes it into the line.
        assert!(fails(&["--pol"]).contains("--poll"));
        assert!(fails(&["stray"]).contains("stray"));
        assert!(fails(&["--server", "not-an-ip"]).contains("IPv4"));
        assert!(fails(&["--server", "--client", "x"]).contains("cannot be used with"));
        assert!(fails(&["--client"]).contains("value is required"));
        assert!(fails(&["--client", ""]).contains("--client"));
        assert!(fails(&["--client", "h", "--link", "loopback"]).contains("one process"));
        assert!(fails(&["--ia", "tcp"]).contains("--ia"));
        assert!(fails(&["--server", "--server"]).contains("multiple times"));
        assert!(fails(&["--json=yes"]).contains("--json"));
        assert!(fails(&["-a", "-s", "8"]).contains("cannot be used with"));
        assert!(fails(&["--server", "--plot", "x.svg"]).contains("--plot"));
        assert!(fails(&["-t", "atomic"]).ends_with("(see `datperf --help`)"));
    }
}
