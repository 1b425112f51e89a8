//! Hooks for the test kit's tests (`crates/dapl-testkit`, `crates/dapl/tests`), behind the
//! `testing` feature. Not part of the API: hidden from the docs, no stability promise.
//!
//! - Fault injection on any link: [`inject_faults`] makes an endpoint's next connection run
//!   under a [`FaultPlan`] (drop, delay or cut what the endpoint transmits), whichever link
//!   establishes it (the engine wraps the link's connection).
//! - The tcp link's hand-off between its progress thread and a polling consumer
//!   (docs/architecture.md, "Who makes progress"): [`handoff_state`],
//!   [`set_handoff_window`] and [`tcp_hot_looks`]; its coalescing of bursts of posts:
//!   [`tcp_bursts_held`], [`tcp_bursts_written_late`].
//! - The shm link's mapped library memory: [`shm_direct_copies`] counts the RDMA Writes and
//!   Reads this process copied straight into or out of a peer's mapping, and
//!   [`shm_received_region_fds`] hands over the descriptors of peers' regions it received.
//! - Revocation: [`hold_receives_into`] stops a socket receive into registered memory with its
//!   access to the region counted, so a test can free the LMR while it is in flight.

use std::time::Duration;

use crate::ep::Endpoint;
use crate::ia::InterfaceAdapter;

pub use crate::engine::faults::Plan as FaultPlan;

/// `ep`'s next connection (once established, on whatever link) runs under `plan`: what `ep`
/// transmits is dropped, delayed or cut as the plan says. Install it before connecting.
pub fn inject_faults(ep: &Endpoint, plan: FaultPlan) {
    crate::engine::faults::install(ep.id(), plan);
}

/// For an IA on the tcp link: (the progress thread watches the connections, some socket was
/// taken out of its epoll set for a polling consumer's direct reads). Panics on another link.
pub fn handoff_state(ia: &InterfaceAdapter) -> (bool, bool) {
    ia.0.tcp_link().handoff_state()
}

/// For an IA on the tcp link: how long after its last poll a consumer still counts as polling
/// (4 ms unless set). Panics on another link.
pub fn set_handoff_window(ia: &InterfaceAdapter, window: Duration) {
    ia.0.tcp_link().set_handoff_window(window);
}

/// For an IA on the tcp link: how many times its progress thread woke and found a consumer
/// polling (each re-check of the hand-off window is one). Panics on another link.
pub fn tcp_hot_looks(ia: &InterfaceAdapter) -> u64 {
    ia.0.tcp_link().hot_looks()
}

/// For an IA on the tcp link: how many bursts of small posts it has held back and written
/// together (docs/architecture.md, "The tcp link", "Bursts"). Panics on another link.
pub fn tcp_bursts_held(ia: &InterfaceAdapter) -> u64 {
    ia.0.tcp_link().bursts_held().0
}

/// For an IA on the tcp link: how many of the bursts it held its progress thread wrote,
/// because their posters did not look for completions in time. Panics on another link.
pub fn tcp_bursts_written_late(ia: &InterfaceAdapter) -> u64 {
    ia.0.tcp_link().bursts_held().1
}

/// Holds the next socket receive straight into the region at `addr` (an LMR's address: the tcp
/// link's cut-through placement) after it entered the region and before it reads the socket,
/// until the returned hold is released or dropped. One hold at a time in the process.
pub fn hold_receives_into(addr: u64) -> ReceiveHold {
    crate::mem::region::hold::arm(addr);
    ReceiveHold(())
}

/// A hold made by [`hold_receives_into`].
pub struct ReceiveHold(());

impl ReceiveHold {
    /// Waits up to `timeout` until a receive is held; true if one is.
    pub fn wait_reached(&self, timeout: Duration) -> bool {
        crate::mem::region::hold::wait_reached(timeout)
    }

    /// Lets the held receive go on.
    pub fn release(self) {}
}

impl Drop for ReceiveHold {
    fn drop(&mut self) {
        crate::mem::region::hold::release();
    }
}

/// RDMA Writes and Reads this process has copied straight into or out of a shm peer's mapped
/// library memory (docs/architecture.md, "Mapped library memory"), since it started.
pub fn shm_direct_copies() -> u64 {
    crate::link::shm::DIRECT_COPIES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Posts this process's connections (any link) took straight from their poster
/// (`Qp::transmit_inline`, on an idle QP: on tcp a suppressed small Send or an RDMA Read's
/// request that begins its poster's run; on shm a suppressed small Send, and a suppressed RDMA
/// Write copied into the peer's mapping), since it started.
pub fn inline_posts() -> u64 {
    crate::engine::qp::INLINE_POSTS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Read Responses this process's connections wrote straight from the handler of their
/// request (`Qp::respond_inline`: a Read Request that arrived alone, with no response queued
/// before it and nothing of its QP's being transmitted; on tcp), since it started.
pub fn inline_responses() -> u64 {
    crate::engine::qp::INLINE_RESPONSES.load(std::sync::atomic::Ordering::Relaxed)
}

/// The descriptors of shm peers' regions this process has received since the last call
/// (copies of them), each with whether the peer sent it as writable.
pub fn shm_received_region_fds() -> Vec<(std::os::fd::OwnedFd, bool)> {
    crate::link::shm::received::take()
}
