//! `libdaplrs.so` in a host program that installed its own global `tracing` subscriber before
//! its first IA opened, with `DAPLRS_LOG` set: the provider keeps the host's subscriber (no
//! panic, no second subscriber printing to stderr), and its events go to the host's.
//!
//! The test runs this test binary again as the host (a global subscriber is once per process),
//! through the provider's vtable as libdat2 calls it (`daplrs::fuzz_api::provider`).

use std::ffi::CStr;
use std::process::Command;

use daplrs::ffi::*;

/// Set in the child: run the host's body.
const CHILD: &str = "DAPLRS_TEST_HOST_SUBSCRIBER_CHILD";
const TEST: &str = "the_hosts_own_subscriber_is_kept_and_gets_the_providers_events";

#[test]
fn the_hosts_own_subscriber_is_kept_and_gets_the_providers_events() {
    if std::env::var_os(CHILD).is_some() {
        return host();
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = Command::new(exe)
        .args([TEST, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("DAPLRS_LOG", "debug")
        .env_remove("DAPLRS_DEBUG")
        .output()
        .expect("run the host");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report = format!("--- stdout ---\n{stdout}--- stderr ---\n{stderr}");
    assert!(
        out.status.success(),
        "the host failed ({}):\n{report}",
        out.status
    );
    // The host's subscriber (stdout, prefixed) got the provider's error events and dapl's.
    // (libtest's "test ... " starts the first line without a newline.)
    let host_lines: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.find("HOST ").map(|i| &l[i..]))
        .collect();
    assert!(
        host_lines
            .iter()
            .any(|l| l.contains("daplrs::log: error returned")
                && l.contains("op=\"pz_free\"")
                && l.contains("error=DAT_INVALID_HANDLE/DAT_INVALID_HANDLE_PZ")),
        "the host's subscriber missed pz_free's error:\n{report}"
    );
    assert!(
        host_lines.iter().any(|l| l.contains("op=\"ia_close\"")
            && l.contains("DAT_INVALID_STATE_IA_IN_USE")
            && l.contains("reason=\"ia_close on ia ")),
        "the host's subscriber missed ia_close's error and its reason:\n{report}"
    );
    assert!(
        host_lines.iter().any(|l| l.contains("dapl::ia: IA opened")),
        "the host's subscriber missed dapl's events:\n{report}"
    );
    // No subscriber of the provider's printed anything.
    assert!(
        !stderr.contains("error returned") && !stderr.contains("IA opened"),
        "the provider installed a subscriber of its own:\n{report}"
    );
}

/// The host: its own subscriber first, then an IA, two errors, and the IA's close.
fn host() {
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_writer(|| HostWriter)
        .without_time()
        .finish();
    tracing::subscriber::set_global_default(subscriber).expect("the host's subscriber");

    let name = c"daplrs-host-subscriber";
    let p = daplrs::fuzz_api::provider(name, "loopback 127.0.0.1").expect("provider entry");
    let mut ia: DAT_IA_HANDLE = std::ptr::null_mut();
    let mut evd: DAT_EVD_HANDLE = std::ptr::null_mut();
    // SAFETY: a NUL-terminated name and two valid out-pointers, as libdat2 passes them.
    let r = unsafe { p.ia_open_func.unwrap()(cstr_ptr(name), 8, &mut evd, &mut ia) };
    assert_eq!(r, DAT_SUCCESS, "ia_open");
    let garbage = 0xffff_ffff_ffff_fff8_usize as DAT_PZ_HANDLE;
    // SAFETY: no pointer argument; a handle is looked up, never dereferenced.
    let r = unsafe { p.pz_free_func.unwrap()(garbage) };
    assert_eq!(r & 0x3fff_0000, DAT_INVALID_HANDLE, "pz_free of garbage");
    let mut pz: DAT_PZ_HANDLE = std::ptr::null_mut();
    // SAFETY: a live IA handle and a valid out-pointer.
    let r = unsafe { p.pz_create_func.unwrap()(ia, &mut pz) };
    assert_eq!(r, DAT_SUCCESS, "pz_create");
    // SAFETY: a live IA handle.
    let r = unsafe { p.ia_close_func.unwrap()(ia, DAT_CLOSE_GRACEFUL_FLAG) };
    assert_eq!(
        r & 0x3fff_0000,
        DAT_INVALID_STATE,
        "graceful close with a live PZ"
    );
    // SAFETY: a live IA handle.
    let r = unsafe { p.ia_close_func.unwrap()(ia, DAT_CLOSE_ABRUPT_FLAG) };
    assert_eq!(r, DAT_SUCCESS, "abrupt close");
}

fn cstr_ptr(s: &CStr) -> DAT_NAME_PTR {
    s.as_ptr().cast_mut()
}

/// Writes each event to stdout as one line prefixed `HOST `.
struct HostWriter;

impl std::io::Write for HostWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut out = std::io::stdout().lock();
        out.write_all(b"HOST ")?;
        out.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stdout().flush()
    }
}
