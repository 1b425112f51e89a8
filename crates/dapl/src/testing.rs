//! Hooks for the test kit's tests (`crates/dapl-testkit`, `crates/dapl/tests`), behind the
//! `testing` feature. Not part of the API: hidden from the docs, no stability promise.
//!
//! - Fault injection on any link: [`inject_faults`] makes an endpoint's next connection run
//!   under a [`FaultPlan`] (drop, delay or cut what the endpoint transmits), whichever link
//!   establishes it (the engine wraps the link's connection).
//! - The tcp link's hand-off between its progress thread and a polling consumer
//!   (docs/architecture.md, "Who makes progress"): [`handoff_state`] and
//!   [`set_handoff_window`].

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
