//! Runs the built `datperf` binary: the shape of `--json` output (not the speed), `info`,
//! argument errors, and a server and a client in two processes.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const EXE: &str = env!("CARGO_BIN_EXE_datperf");

const REQUIRED: [(&str, &str); 13] = [
    ("send_lat_8B", "us"),
    ("read_lat_8B", "us"),
    ("write_lat_8B", "us"),
    ("send_bw_4KiB", "GB/s"),
    ("send_bw_64KiB", "GB/s"),
    ("send_bw_1MiB", "GB/s"),
    ("write_bw_4KiB", "GB/s"),
    ("write_bw_64KiB", "GB/s"),
    ("write_bw_1MiB", "GB/s"),
    ("read_bw_4KiB", "GB/s"),
    ("read_bw_64KiB", "GB/s"),
    ("read_bw_1MiB", "GB/s"),
    ("msg_rate_8B", "Mmsg/s"),
];

fn run(args: &[&str]) -> Output {
    Command::new(EXE)
        .args(args)
        .output()
        .expect("run the datperf binary")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Checks one JSON result and returns its link, name and unit.
fn check_entry(e: &Value) -> (String, String, String) {
    let obj = e.as_object().expect("each entry is an object");
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "baseline",
            "baseline_cpu_ns_per_byte",
            "baseline_cpu_us_per_op",
            "baseline_p99",
            "baseline_variant",
            "cpu_ns_per_byte",
            "cpu_ratio",
            "cpu_scope",
            "cpu_us_per_op",
            "link",
            "name",
            "p99",
            "ratio",
            "unit",
            "value"
        ],
        "{e}"
    );
    let link = e["link"].as_str().expect("link is a string").to_string();
    let name = e["name"].as_str().expect("name is a string").to_string();
    let unit = e["unit"].as_str().expect("unit is a string").to_string();
    let num = |k: &str| -> f64 {
        let v = e[k]
            .as_f64()
            .unwrap_or_else(|| panic!("{name}: {k} is not a number"));
        assert!(v.is_finite() && v > 0.0, "{name}: {k} = {v}");
        v
    };
    let (value, baseline, ratio) = (num("value"), num("baseline"), num("ratio"));
    // Latency rows carry both 99th percentiles, at or above their medians; others none.
    if unit == "us" {
        assert!(
            num("p99") >= value && num("baseline_p99") >= baseline,
            "{e}"
        );
    } else {
        assert!(e["p99"].is_null() && e["baseline_p99"].is_null(), "{e}");
    }
    let want = value / baseline;
    assert!(
        (ratio - want).abs() <= 1e-4 * want,
        "{name}: ratio {ratio} is not value/baseline = {want}"
    );
    // CPU time per operation and per byte, for both sides of the comparison; a byte's share is
    // the operation's over the message size.
    let size: f64 = {
        let s = name.rsplit('_').next().unwrap();
        let (n, mult) = if let Some(n) = s.strip_suffix("MiB") {
            (n, 1u64 << 20)
        } else if let Some(n) = s.strip_suffix("KiB") {
            (n, 1 << 10)
        } else {
            (s.strip_suffix('B').unwrap(), 1)
        };
        (n.parse::<u64>().unwrap() * mult) as f64
    };
    for pre in ["", "baseline_"] {
        let (op, byte) = (
            num(&format!("{pre}cpu_us_per_op")),
            num(&format!("{pre}cpu_ns_per_byte")),
        );
        let want = op * 1e3 / size;
        assert!(
            (byte - want).abs() <= 1e-4 * want,
            "{name}: {pre}cpu_ns_per_byte {byte} is not {pre}cpu_us_per_op / size = {want}"
        );
    }
    let cpu_ratio = num("cpu_ratio");
    let want = num("cpu_us_per_op") / num("baseline_cpu_us_per_op");
    assert!(
        (cpu_ratio - want).abs() <= 1e-4 * want,
        "{name}: cpu_ratio {cpu_ratio} is not cpu_us_per_op / baseline_cpu_us_per_op = {want}"
    );
    let scope = e["cpu_scope"].as_str().expect("cpu_scope is a string");
    assert!(
        ["both", "client"].contains(&scope),
        "{name}: cpu_scope {scope}"
    );
    // The raw TCP bandwidth baseline of messages above 128 KiB names the way of writing that
    // won; other baselines have one way and name none.
    let variant = &e["baseline_variant"];
    if name.contains("_bw_") && link != "shm" && size_of(&name) > 128 * 1024 {
        let v = variant.as_str().expect("baseline_variant names the winner");
        assert!(
            ["message writes", "128KiB writes"].contains(&v),
            "{name}: {v}"
        );
    } else {
        assert!(variant.is_null(), "{name}: {variant}");
    }
    (link, name, unit)
}

/// The message size a measurement's name ends with (`send_bw_4KiB`: 4096).
fn size_of(name: &str) -> u64 {
    let last = name.rsplit('_').next().expect("a size suffix");
    let digits: String = last.chars().take_while(char::is_ascii_digit).collect();
    let n: u64 = digits.parse().expect("a size");
    match &last[digits.len()..] {
        "B" => n,
        "KiB" => n << 10,
        "MiB" => n << 20,
        u => panic!("{name}: unit {u}"),
    }
}

/// Parses stdout as the JSON array and checks every entry.
fn entries(out: &Output) -> Vec<(String, String, String)> {
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "datperf failed ({}):\n{}\n{stdout}",
        out.status,
        text(&out.stderr)
    );
    let v: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}"));
    v.as_array()
        .expect("a JSON array")
        .iter()
        .map(check_entry)
        .collect()
}

/// Every entry's `cpu_scope`.
fn cpu_scopes(out: &Output) -> Vec<String> {
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    v.as_array()
        .expect("a JSON array")
        .iter()
        .map(|e| e["cpu_scope"].as_str().unwrap_or("?").to_string())
        .collect()
}

#[test]
fn json_quick_run_has_every_measurement_once_per_link() {
    // No --link: the tcp link, then the shm link.
    let out = run(&["--json", "--quick"]);
    let got = entries(&out);
    for link in ["tcp", "shm"] {
        for (name, unit) in REQUIRED {
            let n = got
                .iter()
                .filter(|(l, g, _)| l == link && g == name)
                .count();
            assert_eq!(n, 1, "{link} {name} appears {n} times in {got:?}");
            let (_, _, u) = got.iter().find(|(l, g, _)| l == link && g == name).unwrap();
            assert_eq!(u, unit, "unit of {name}");
        }
    }
    assert_eq!(got.len(), 2 * REQUIRED.len(), "{got:?}");
    // One process: both sides' CPU time.
    assert!(cpu_scopes(&out).iter().all(|s| s == "both"));
    // Progress went to stderr, one line per measurement.
    let err = text(&out.stderr);
    assert_eq!(err.matches("[13/13] msg_rate_8B").count(), 2, "{err}");
}

#[test]
fn table_and_selection_over_the_loopback_link() {
    let out = run(&[
        "--link", "loopback", "-t", "read", "-s", "64KiB", "-n", "50",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", text(&out.stderr));
    assert!(stdout.contains("loopback link"), "{stdout}");
    for name in ["read_lat_64KiB", "read_bw_64KiB"] {
        assert_eq!(stdout.matches(name).count(), 1, "{stdout}");
    }
    assert!(
        !stdout.contains("send_") && !stdout.contains("write_"),
        "{stdout}"
    );
}

#[test]
fn info_lists_the_ias() {
    // Every IA of the machine: loopback, then tcp and shm on each local IPv4 address.
    let out = run(&["info"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.starts_with("ia_name:\t\t\tloopback\n"), "{stdout}");
    assert!(stdout.contains("ia_name:\t\t\ttcp:127.0.0.1\n"), "{stdout}");
    assert!(stdout.contains("ia_name:\t\t\tshm:127.0.0.1\n"), "{stdout}");
    assert!(
        stdout.contains("\tia_address:                 127.0.0.1 (lo)\n"),
        "{stdout}"
    );
    assert!(stdout.contains("\tmax_message_size:"), "{stdout}");
    assert!(!stdout.contains("max_rdma_read_per_ep:"), "{stdout}");
    let blocks = stdout.matches("ia_name:").count();
    assert!(blocks >= 3 && blocks % 2 == 1, "{stdout}");
    // -v: every attribute and limit, for each IA named.
    let out = run(&["info", "-v", "tcp", "shm"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(stdout.matches("ia_name:").count(), 2, "{stdout}");
    for k in [
        "link",
        "provider",
        "ia_address",
        "srq",
        "dto_completes",
        "send_without_receive",
        "max_eps",
        "max_dto_per_ep",
        "max_rdma_read_per_ep",
        "max_evds",
        "max_evd_qlen",
        "max_iov_segments_per_dto",
        "max_lmrs",
        "max_lmr_block_size",
        "max_pzs",
        "max_message_size",
        "max_rdma_size",
        "max_rmrs",
        "max_srqs",
        "max_recv_per_srq",
        "max_private_data_size",
        "dead_peer_timeout",
        "cross_memory_attach",
    ] {
        assert_eq!(
            stdout.matches(&format!("\t{k}:")).count(),
            2,
            "{k}: {stdout}"
        );
    }
    assert!(
        stdout.contains("\tlink:                       tcp\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\tlink:                       shm\n"),
        "{stdout}"
    );
    let out = run(&["info", "nonesuch"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("DAT_PROVIDER_NOT_FOUND"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn bad_arguments_exit_2_with_a_message() {
    for args in [
        &["-s", "4KB"][..],
        &["-t", "atomic"],
        &["-n"],
        &["--bogus"],
        &["--client", "h", "--link", "loopback"],
        &["scale", "--link", "loopback"],
        &["scale", "-n", "0"],
        &["scale", "--bogus"],
    ] {
        let out = run(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("datperf: "), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        // One line: what was wrong and where to look.
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("--help`)"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    let out = run(&["--help"]);
    assert!(out.status.success() && text(&out.stdout).contains("--server"));
    assert!(text(&out.stdout).contains("MEASUREMENTS"));
    let out = run(&["-V"]);
    assert!(out.status.success() && text(&out.stdout).starts_with("datperf "));
}

/// `-a --plot` over the loopback link with few iterations: every size of the sweep is in the
/// JSON once for dapl-rs with its baseline, and the SVG has a line for each.
#[test]
fn a_sweep_has_every_size_and_draws_its_plot() {
    let dir = std::env::temp_dir().join(format!("datperf-sweep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let svg_path = dir.join("sweep.svg");
    let out = run(&[
        "--link",
        "loopback",
        "-a",
        "--quick",
        "-t",
        "write",
        "--json",
        "--plot",
        svg_path.to_str().unwrap(),
    ]);
    let got = entries(&out);
    let sizes: Vec<String> = (1..=23)
        .map(|s| {
            let n = 1u64 << s;
            if n >= 1 << 20 {
                format!("{}MiB", n >> 20)
            } else if n >= 1 << 10 {
                format!("{}KiB", n >> 10)
            } else {
                format!("{n}B")
            }
        })
        .collect();
    assert_eq!(sizes[0], "2B");
    assert_eq!(sizes[22], "8MiB");
    for kind in ["lat", "bw"] {
        for size in &sizes {
            let name = format!("write_{kind}_{size}");
            let n = got
                .iter()
                .filter(|(l, g, _)| l == "loopback" && *g == name)
                .count();
            assert_eq!(n, 1, "{name} appears {n} times");
        }
    }
    // Latency and bandwidth at 23 sizes; check_entry saw a value and a baseline in each.
    assert_eq!(got.len(), 46, "{got:?}");
    let svg = std::fs::read_to_string(&svg_path).expect("the SVG was written");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    // Two panels (bandwidth, latency), each with its legend of the two series.
    for (label, n) in [
        ("write bandwidth", 1),
        ("write latency", 1),
        ("loopback: dapl-rs", 2),
        ("loopback: raw TCP", 2),
    ] {
        assert_eq!(svg.matches(label).count(), n, "{label} in the SVG");
    }
    // One line (polyline or path) per series and panel: dapl-rs solid, the baseline dashed.
    assert!(svg.matches("<polyline").count() >= 2, "no lines drawn");
    assert!(
        !svg.contains("send bandwidth"),
        "a panel for an operation not measured"
    );
}

#[test]
fn nobody_listening_is_a_clear_error() {
    let port = 29_000 + std::process::id() % 1000;
    let out = run(&[
        "--client",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-t",
        "send",
        "-n",
        "5",
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("datperf: error:") && err.contains("nobody accepts"),
        "{err}"
    );
    // The error has a line of its own, which says what to do.
    let line = err.lines().find(|l| l.contains("nobody accepts")).unwrap();
    assert!(line.starts_with("datperf: error:"), "{err}");
    assert!(line.contains("datperf --server"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_server_on_an_address_this_host_does_not_have_says_so() {
    // 192.0.2.0/24 is TEST-NET-1: never an address of this host.
    let out = run(&["--server", "192.0.2.77"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("192.0.2.77 is not an address of this host") && !err.contains("in use"),
        "{err}"
    );
}

/// A TCP port that is free on 127.0.0.1 together with the next one (the server's DAT
/// qualifier and its raw TCP baseline port), below the kernel's ephemeral range (from 32768 by
/// default), where the connections of the other tests pick their local ports.
fn free_port_pair() -> u16 {
    let base = 20_000 + (std::process::id() % 1000) as u16 * 2;
    (0..2000)
        .map(|i| 20_000 + (base - 20_000 + i * 2) % 12_000)
        .find(|&p| {
            TcpListener::bind(("127.0.0.1", p)).is_ok()
                && TcpListener::bind(("127.0.0.1", p + 1)).is_ok()
        })
        .expect("a free pair of TCP ports")
}

/// Kills the server when the test ends, whatever happens.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn server_and_client_in_two_processes() {
    let q = free_port_pair().to_string();
    let mut srv = Server(
        Command::new(EXE)
            .args(["--server", "127.0.0.1", "-p", &q])
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server"),
    );
    // Wait for its "listening" line.
    let mut lines = BufReader::new(srv.0.stderr.take().unwrap()).lines();
    let start = Instant::now();
    let mut said = String::new();
    loop {
        let Some(line) = lines.next() else {
            panic!("the server ended before listening:\n{said}");
        };
        let line = line.unwrap();
        if line.contains("stop with Ctrl-C") {
            break;
        }
        said.push_str(&line);
        said.push('\n');
        assert!(start.elapsed() < Duration::from_secs(10), "{said}");
    }
    let out = run(&[
        "--client",
        "127.0.0.1",
        "-p",
        &q,
        "--json",
        "-s",
        "64K",
        "-n",
        "40",
        "--poll",
    ]);
    let got = entries(&out);
    let names: Vec<&str> = got.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "send_lat_64KiB",
            "read_lat_64KiB",
            "write_lat_64KiB",
            "send_bw_64KiB",
            "write_bw_64KiB",
            "read_bw_64KiB",
            "msg_rate_64KiB"
        ]
    );
    // The server's CPU time is its own process's, not reported.
    assert!(cpu_scopes(&out).iter().all(|s| s == "client"));
    drop(srv);
}

/// `datperf scale` over both two-process links: every connection ends ESTABLISHED and its
/// message lands once and whole at the server process.
#[test]
fn scale_storm_establishes_every_connection_and_verifies_every_message() {
    for link in ["tcp", "shm"] {
        let out = run(&["scale", "--link", link, "-n", "200", "--json"]);
        let err = text(&out.stderr);
        assert!(out.status.success(), "{link}: {err}");
        let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        assert_eq!(v["connections"], 200, "{link}: {v}");
        assert_eq!(v["established"], 200, "{link}: {v}");
        assert_eq!(v["silent"], 0, "{link}: {v}");
        assert_eq!(v["connect_errors"], 0, "{link}: {v}");
        assert_eq!(v["messages_verified"], 200, "{link}: {v}");
        assert_eq!(v["messages_bad"], 0, "{link}: {v}");
        assert!(
            v["connections_per_second"].as_f64().unwrap() > 0.0,
            "{link}: {v}"
        );
        assert!(v["server_threads"].as_u64().unwrap() >= 1, "{link}: {v}");
    }
}
