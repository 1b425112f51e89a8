//! White-box tests through the DAT layer that need the crate's internals.

mod faults;
mod tcp_handoff;

/// A connection qualifier whose TCP port on 127.0.0.1 nobody holds right now (other test
/// processes run beside this one), in 20000..32000, below the ephemeral ports.
fn qual() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let start = u64::from(std::process::id()).wrapping_mul(7_919) % 12_000;
    loop {
        let q = 20_000 + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % 12_000;
        if std::net::TcpListener::bind(("127.0.0.1", q as u16)).is_ok() {
            return q;
        }
    }
}
