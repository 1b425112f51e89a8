//! Links: what carries RDMAP-level messages between two QPs. A link knows how to find a
//! listener, carry connection setup (private data both ways, accept, reject) and move messages;
//! it never decides DAT policy (states, flush rules, completion flags). It plugs into the
//! engine's port ([`crate::engine::port`]) and knows nothing of the DAT layer.

pub(crate) mod looks;
pub(crate) mod loopback;
pub(crate) mod shm;
pub(crate) mod spare_fd;
pub(crate) mod tcp;

/// CLOCK_MONOTONIC in ns, read through the vDSO: the same clock in every process of the host
/// (the shm link's peers compare its values), and cheaper than `Instant` arithmetic (the tcp
/// link reads it twice per small post).
pub(crate) fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64)
}
