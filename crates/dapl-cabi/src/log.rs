//! Diagnostics of `libdaplrs.so`: the `tracing` subscriber it installs when the environment
//! asks for one, and the event every error `DAT_RETURN` becomes (docs/tracing.md).
//!
//! - `DAPLRS_LOG=<filter>` (`EnvFilter` directives: `debug`, `dapl::link::tcp=trace`,
//!   `daplrs=debug,dapl=info`, ...) installs a subscriber that writes to stderr;
//! - `DAPLRS_DEBUG` (set, and not `0`), the older switch, is an alias of `DAPLRS_LOG=debug`
//!   (which prints every error the provider returns, as it did before); `DAPLRS_LOG` wins
//!   when both are set.
//!
//! With neither set nothing is installed: the library prints nothing and its events cost a
//! load of a cached "disabled" per call site. The subscriber is installed once, at the first
//! `dat_provider_init` or `ia_open`; if the host program already installed a global one,
//! that one is kept (and gets dapl's events).

use std::cell::RefCell;
use std::sync::Once;

use tracing::Level;
use tracing_subscriber::EnvFilter;

use crate::ffi::{DAT_CLASS_ERROR, DAT_QUEUE_EMPTY, DAT_RETURN};

/// The filter the environment asks for, if any.
fn directives() -> Option<String> {
    if let Some(v) = std::env::var_os("DAPLRS_LOG") {
        if !v.is_empty() {
            return Some(v.to_string_lossy().into_owned());
        }
    }
    match std::env::var_os("DAPLRS_DEBUG") {
        Some(v) if v != "0" => Some("debug".into()),
        _ => None,
    }
}

/// Installs the stderr subscriber if `DAPLRS_LOG` or `DAPLRS_DEBUG` asks for one (once per
/// process; later calls return at once).
pub(crate) fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Some(d) = directives() else {
            return;
        };
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(EnvFilter::builder().parse_lossy(&d))
            .with_writer(std::io::stderr)
            .with_thread_names(true)
            .finish();
        // Fails only if the host program installed its own: keep that one.
        let _ = tracing::subscriber::set_global_default(subscriber);
    });
}

thread_local! {
    /// The reason of the last `dapl` error [`crate::dat`] converted on this thread, kept
    /// (only while error events are enabled) for the event of the vtable call returning it.
    static REASON: RefCell<Option<(DAT_RETURN, String)>> = const { RefCell::new(None) };
}

/// Whether errors are events anyone receives (cheap: a cached per-call-site answer).
fn errors_enabled() -> bool {
    tracing::enabled!(Level::DEBUG)
}

/// Keeps `e`'s reason for the error event of the vtable call that returns it.
pub(crate) fn keep_reason(e: &dapl::DatError) {
    if errors_enabled() {
        REASON.with(|r| *r.borrow_mut() = Some((e.dat_return(), e.to_string())));
    }
}

/// The C names of `code`'s type and subtype (`dat_error.h`).
fn names(code: DAT_RETURN) -> (&'static str, &'static str) {
    let ty = dapl::ErrorType::ALL
        .iter()
        .find(|t| **t as u32 == code & 0x3fff_0000)
        .map_or("unknown type", |t| t.c_name());
    let sub = dapl::Subtype::ALL
        .iter()
        .find(|s| **s as u32 == code & 0xffff)
        .map_or("unknown subtype", |s| s.c_name());
    (ty, sub)
}

/// The event of vtable function `op` returning `code` (not `DAT_SUCCESS`), with the reason
/// the `dapl` error gave when it came from one. `DAT_QUEUE_EMPTY` (a poll that found nothing)
/// is a trace event, every other error a debug one.
pub(crate) fn returned(op: &'static str, code: DAT_RETURN) {
    if !errors_enabled() {
        return;
    }
    let reason = REASON
        .with(|r| r.borrow_mut().take())
        .filter(|(c, _)| *c == code)
        .map(|(_, s)| s);
    if code == DAT_QUEUE_EMPTY {
        tracing::trace!(op, code = format_args!("{code:#010x}"), "DAT_QUEUE_EMPTY");
        return;
    }
    let (ty, sub) = names(code);
    tracing::debug!(
        op,
        code = format_args!("{code:#010x}"),
        error = format_args!("{ty}/{sub}"),
        reason = reason.as_deref(),
        "error returned"
    );
}

/// Forgets a kept reason that no error return used (the call succeeded after all).
pub(crate) fn succeeded() {
    if errors_enabled() {
        REASON.with(|r| r.borrow_mut().take());
    }
}

/// A panic caught at the boundary (returned as `DAT_INTERNAL_ERROR`): an error event, or a
/// line on stderr when no subscriber takes events (as before: a bug must not go unseen).
pub(crate) fn panicked(op: &'static str, what: &str) {
    let code = DAT_CLASS_ERROR | crate::ffi::DAT_INTERNAL_ERROR;
    if tracing::enabled!(Level::ERROR) {
        tracing::error!(
            op,
            code = format_args!("{code:#010x}"),
            panic = what,
            "internal error"
        );
    } else {
        eprintln!("daplrs: {op}: internal error (panic: {what})");
    }
}
