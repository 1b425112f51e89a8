//! Conformance of `libdaplrs.so` through the installed libdat2, as a C consumer uses it.
//!
//! `tests/c_abi.c` is compiled with `$CC` (default `gcc`) against `<dat2/udat.h>` and
//! `<dat2/dat_ib_extensions.h>` and linked with `-ldat2` only: it reaches the provider the way
//! every DAT program does, `dat_ia_open` by the IA name of a `dat.conf` line that
//! `DAT_OVERRIDE` points at, then the public DAT API (and, for
//! `dat_ep_post_send_with_invalidate`, which libdat2 declares but does not export, the
//! `DAT_EP_POST_SEND_WITH_INVALIDATE` macro, which calls the provider's vtable as libdat2's own
//! functions do). It prints one line per check,
//! `ok <group>.<name>` or `FAIL <group>.<name>: got 0x.. want 0x..`, a `summary:` line, and
//! exits non-zero if any check failed. The program runs once per test process; each test here
//! asserts on one group of checks (its name says which rule they check) and lists that
//! group's FAIL lines, with the program's whole output, when it fails.
//!
//! Finding the library: `cargo test` compiles this package's library once, with all of its
//! crate types (`cdylib` and `rlib`), into the directory that holds the test executables
//! (`target/<profile>/deps/`), because the test links the rlib. So the `libdaplrs.so` next to
//! `current_exe()` comes from the same sources as this test binary, on a clean clone too.
//! (`target/<profile>/libdaplrs.so` is not used: `cargo test` does not refresh it, only
//! `cargo build` does, so it can be stale. Running `cargo build` from inside the test is not
//! needed, and would wait on the build-directory lock held by the outer cargo.)
//!
//! A missing compiler, missing headers (`libdapl-dev`) or a missing libdat2 fail the tests.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The IA name in the generated dat.conf (what the C program opens).
const IA_NAME: &str = "daplrs-c-abi";
/// The whole C program must finish within this (it normally takes well under a second).
const RUN_LIMIT: Duration = Duration::from_secs(20);

/// One run of the C program.
struct Run {
    /// How it ended, for messages ("exit status: 0", "signal: 11", "killed after ...").
    status: String,
    success: bool,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    /// Where the program and its dat.conf were kept, when it failed (after a run that
    /// exited 0 their temporary directory is removed).
    kept: Option<PathBuf>,
}

impl Run {
    /// The check lines of one group: (ok names, FAIL lines).
    fn group(&self, group: &str) -> (Vec<&str>, Vec<&str>) {
        let prefix = format!("{group}.");
        let mut ok = Vec::new();
        let mut fail = Vec::new();
        for line in self.stdout.lines() {
            if let Some(name) = line.strip_prefix("ok ") {
                if name.starts_with(&prefix) {
                    ok.push(name);
                }
            } else if let Some(rest) = line.strip_prefix("FAIL ") {
                if rest.starts_with(&prefix) {
                    fail.push(line);
                }
            }
        }
        (ok, fail)
    }

    fn report(&self) -> String {
        let files = match &self.kept {
            Some(dir) => format!("program and dat.conf kept in {}", dir.display()),
            None => "program and dat.conf removed: it exited 0".to_string(),
        };
        format!(
            "C program: {} after {:.2?} ({files})\n\
             --- stdout ---\n{}--- stderr ---\n{}",
            self.status, self.elapsed, self.stdout, self.stderr
        )
    }
}

fn run() -> &'static Run {
    static RUN: OnceLock<Result<Run, String>> = OnceLock::new();
    match RUN.get_or_init(|| build_and_run("plain", &[])) {
        Ok(r) => r,
        Err(e) => panic!("the C conformance program could not be built or run:\n{e}"),
    }
}

/// Another run of the C program, with `env` set (`tag` names its directory).
fn run_with(tag: &str, env: &[(&str, &str)]) -> Run {
    build_and_run(tag, env)
        .unwrap_or_else(|e| panic!("the C conformance program could not be built or run:\n{e}"))
}

/// Asserts that group `group` ran at least one check and that none of its checks failed.
fn assert_group(group: &str) {
    let r = run();
    let (ok, fail) = r.group(group);
    assert!(
        fail.is_empty(),
        "{} check(s) of group `{group}` failed:\n{}\n\n{}",
        fail.len(),
        fail.join("\n"),
        r.report()
    );
    assert!(
        !ok.is_empty(),
        "no check of group `{group}` ran (the program ended early?)\n\n{}",
        r.report()
    );
}

fn provider_library() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let deps = exe
        .parent()
        .ok_or_else(|| format!("{} has no parent directory", exe.display()))?;
    let lib = deps.join("libdaplrs.so");
    if lib.is_file() {
        Ok(lib)
    } else {
        Err(format!(
            "{} not found: cargo should have built the cdylib next to the test executable \
             (crate-type = [\"cdylib\", \"rlib\"] in crates/dapl-cabi/Cargo.toml)",
            lib.display()
        ))
    }
}

/// A dat.conf field, quoted (the path may contain spaces; `\` and `"` are escaped).
fn quoted(s: &str) -> String {
    let mut q = String::from("\"");
    for c in s.chars() {
        if c == '\\' || c == '"' {
            q.push('\\');
        }
        q.push(c);
    }
    q.push('"');
    q
}

fn compile(src: &Path, out: &Path) -> Result<(), String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "gcc".into());
    let res = Command::new(&cc)
        .args(["-std=gnu11", "-O1", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(out)
        .arg(src)
        .arg("-ldat2")
        .output()
        .map_err(|e| format!("cannot run the C compiler `{cc}` ({e}): install gcc"))?;
    if !res.status.success() {
        return Err(format!(
            "`{cc}` failed to compile {} ({}); it needs the DAT 2.0 headers \
             (/usr/include/dat2, Debian package libdapl-dev) and libdat2.so:\n{}{}",
            src.display(),
            res.status,
            String::from_utf8_lossy(&res.stdout),
            String::from_utf8_lossy(&res.stderr)
        ));
    }
    Ok(())
}

/// Builds the C program and runs it once, with the provider's logging variables
/// (`DAPLRS_LOG`, `DAPLRS_DEBUG`) removed from the environment and `env` set.
fn build_and_run(tag: &str, env: &[(&str, &str)]) -> Result<Run, String> {
    let lib = provider_library()?;
    let tmp = tempfile::Builder::new()
        .prefix(&format!("daplrs-c-abi-{tag}-"))
        .tempdir()
        .map_err(|e| format!("temporary directory: {e}"))?;
    let dir = tmp.path();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c_abi.c");
    let prog = dir.join("c_abi");
    compile(&src, &prog)?;

    let lib = lib.to_str().ok_or("library path is not UTF-8")?;
    let conf = dir.join("dat.conf");
    let line = format!(
        "{IA_NAME} u2.0 nonthreadsafe default {} dapl.2.0 \"tcp 127.0.0.1\" \"\"\n",
        quoted(lib)
    );
    std::fs::write(&conf, line).map_err(|e| format!("{}: {e}", conf.display()))?;

    let start = Instant::now();
    let mut child = Command::new(&prog)
        .arg(IA_NAME)
        .env("DAT_OVERRIDE", &conf)
        .env_remove("DAPLRS_LOG")
        .env_remove("DAPLRS_DEBUG")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", prog.display()))?;
    let drain = |mut p: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _ = p.read_to_end(&mut b);
            String::from_utf8_lossy(&b).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let err = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let (status, success) = loop {
        match child.try_wait().map_err(|e| format!("wait: {e}"))? {
            Some(s) => break (s.to_string(), s.success()),
            None if start.elapsed() > RUN_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                break (format!("killed after {RUN_LIMIT:?} (hung)"), false);
            }
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let elapsed = start.elapsed();
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    eprintln!("c_abi: C program ran in {elapsed:.2?} ({status})");
    let kept = (!success).then(|| tmp.keep());
    Ok(Run {
        status,
        success,
        stdout,
        stderr,
        elapsed,
        kept,
    })
}

#[test]
fn c_program_runs_every_check_to_the_end_and_exits_zero() {
    let r = run();
    let fails: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("FAIL "))
        .collect();
    assert!(
        r.success && fails.is_empty(),
        "{} failed check(s):\n{}\n\n{}",
        fails.len(),
        fails.join("\n"),
        r.report()
    );
    let summary = r.stdout.lines().find(|l| l.starts_with("summary: "));
    assert!(
        summary.is_some_and(|s| s.ends_with(", 0 failed")),
        "no clean summary line\n\n{}",
        r.report()
    );
    assert!(r.elapsed < RUN_LIMIT, "too slow\n\n{}", r.report());
}

#[test]
fn setup_steps_create_and_free_every_object_used_by_the_checks() {
    assert_group("setup");
}

#[test]
fn ia_opens_by_its_dat_conf_name_with_an_async_evd() {
    assert_group("load");
}

#[test]
fn ia_query_reports_loopback_address_iov_ib_extension_and_registry_keys() {
    assert_group("ia_query");
}

#[test]
fn handle_of_the_wrong_kind_is_invalid_handle() {
    assert_group("wrong_kind");
}

#[test]
fn freed_handle_is_invalid_handle_on_every_later_use() {
    assert_group("freed");
}

#[test]
fn empty_evd_dequeue_is_bare_queue_empty_and_wait_times_out() {
    assert_group("evd_empty");
}

#[test]
fn evd_post_se_reads_only_the_number_and_software_pointer_of_the_event() {
    assert_group("post_se");
}

#[test]
fn cno_query_reports_the_libdat2_ia_handle_and_no_proxy() {
    assert_group("cno_query");
}

#[test]
fn optional_null_out_pointers_are_accepted_and_required_ones_refused() {
    assert_group("null_out");
}

#[test]
fn lmr_of_length_0_is_length_error_and_1_gib_lmr_leaves_memory_untouched() {
    assert_group("lmr");
}

#[test]
fn pz_free_while_an_lmr_or_ep_uses_it_is_invalid_state() {
    assert_group("pz_in_use");
}

#[test]
fn consumer_context_round_trips_and_handle_type_is_reported_for_each_kind() {
    assert_group("handle_info");
}

#[test]
fn loopback_connection_carries_psp_conn_qual_and_private_data_both_ways() {
    assert_group("conn");
}

#[test]
fn send_recv_rdma_write_and_read_complete_with_length_cookie_ep_and_data() {
    assert_group("dto");
}

#[test]
fn ep_query_reports_libdat2_ia_index_and_both_addresses() {
    assert_group("ep_query");
}

#[test]
fn rdma_write_immed_completes_as_ib_dto_event_with_the_immediate_on_the_peer() {
    assert_group("immed");
}

#[test]
fn send_with_invalidate_through_the_vtable_reports_receive_with_invalidate_and_the_context() {
    assert_group("invalidate");
}

#[test]
fn disconnect_posts_exactly_one_disconnected_per_ep() {
    assert_group("disconnect");
}

#[test]
fn ia_close_abrupt_frees_live_objects_and_graceful_needs_an_empty_ia() {
    assert_group("close");
}

// ------------------------------------------------------------------------------------------------
// Diagnostics: DAPLRS_LOG and DAPLRS_DEBUG (src/log.rs, docs/tracing.md)

/// The stderr lines of `r` that are error events of vtable call `op`.
fn error_lines<'a>(r: &'a Run, op: &str) -> Vec<&'a str> {
    let op = format!("op=\"{op}\"");
    r.stderr
        .lines()
        .filter(|l| l.contains("daplrs::log: error returned") && l.contains(&op))
        .collect()
}

/// Checks the error events every logging run must print: the PZ the `setup` group frees while
/// an LMR and an EP still use it (a `dapl` error: code, names and reason), and the handle of
/// the wrong kind `wrong_kind` passes (an error of the C ABI's own: no reason).
#[track_caller]
fn assert_errors_printed(r: &Run) {
    assert!(r.success, "{}", r.report());
    let in_use = error_lines(r, "pz_free");
    assert!(
        in_use.iter().any(|l| l.contains(" DEBUG ")
            && l.contains("code=0x80070053")
            && l.contains("error=DAT_INVALID_STATE/DAT_INVALID_STATE_PZ_IN_USE")
            && l.contains("reason=\"pz_free on pz ")),
        "no error event for pz_free of a PZ in use:\n{}",
        r.report()
    );
    let bad_handle = r
        .stderr
        .lines()
        .filter(|l| l.contains("error returned") && l.contains("error=DAT_INVALID_HANDLE/"))
        .count();
    assert!(
        bad_handle > 0,
        "no DAT_INVALID_HANDLE error event:\n{}",
        r.report()
    );
}

#[test]
fn without_daplrs_log_or_daplrs_debug_the_provider_prints_nothing() {
    let r = run();
    assert!(r.success, "{}", r.report());
    assert_eq!(
        r.stderr, "",
        "stderr of a run that asked for no diagnostics"
    );
}

#[test]
fn daplrs_log_debug_prints_every_error_returned_and_the_connection_lifecycle() {
    let r = run_with("log", &[("DAPLRS_LOG", "debug")]);
    assert_errors_printed(&r);
    for what in [
        "dapl::ia: IA opened",
        "dapl::ep: connecting",
        "dapl::engine::qp::cm: connection established",
        "dapl::engine::qp::cm: connection ended",
    ] {
        assert!(
            r.stderr.contains(what),
            "no `{what}` event:\n{}",
            r.report()
        );
    }
    // A poll that found nothing is not an error worth a debug line.
    assert!(
        !r.stderr.contains("DAT_QUEUE_EMPTY"),
        "DAT_QUEUE_EMPTY at debug:\n{}",
        r.report()
    );
}

#[test]
fn daplrs_debug_is_an_alias_of_daplrs_log_debug() {
    let r = run_with("debug", &[("DAPLRS_DEBUG", "1")]);
    assert_errors_printed(&r);
    assert!(
        r.stderr
            .contains("dapl::engine::qp::cm: connection established"),
        "{}",
        r.report()
    );
    let off = run_with("debug0", &[("DAPLRS_DEBUG", "0")]);
    assert!(off.success, "{}", off.report());
    assert_eq!(off.stderr, "", "DAPLRS_DEBUG=0 asks for nothing");
}

#[test]
fn daplrs_log_filters_by_target() {
    let r = run_with("tcp", &[("DAPLRS_LOG", "dapl::link::tcp=debug")]);
    assert!(r.success, "{}", r.report());
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("dapl::link::tcp::conn::mpa: MPA Reply sent")),
        "no tcp link event:\n{}",
        r.report()
    );
    assert!(
        lines.iter().all(|l| l.contains(" dapl::link::tcp")),
        "an event of another target:\n{}",
        r.report()
    );
}
