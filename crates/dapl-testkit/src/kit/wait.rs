//! Timeouts and waiting.

use std::time::{Duration, Instant};

/// Generous timeout for events that must arrive.
pub const T: Option<Duration> = Some(Duration::from_secs(10));

/// Waits until `f` holds, polling: for remote placement, which a local completion does not
/// order on tcp (only a later Send's receive completion does). Panics after 10 s.
#[track_caller]
pub fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The error of `r`, which must be of `kind` (with its readable reason in the panic if not).
#[track_caller]
pub fn expect_err<T: std::fmt::Debug>(r: dapl::Result<T>, kind: dapl::ErrorType) -> dapl::DatError {
    match r {
        Ok(v) => panic!("expected {}, got Ok({v:?})", kind.c_name()),
        Err(e) => {
            assert_eq!(e.kind(), kind, "wrong error: {e}");
            e
        }
    }
}
