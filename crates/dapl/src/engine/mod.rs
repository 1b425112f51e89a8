//! The software RNIC: queue pairs ([`qp`]), shared receive queues ([`srq`]) and the port links
//! plug into ([`port`]). It knows nothing of the DAT objects (endpoints, EVDs, the IA) or of
//! `DatError`: it reports through upcall traits the DAT layer implements. Memory and its table
//! are in [`crate::mem`].

#[cfg(any(test, feature = "testing"))]
pub(crate) mod faults;
#[cfg(test)]
pub(crate) mod harness;
pub(crate) mod port;
pub(crate) mod qp;
pub(crate) mod srq;
pub(crate) mod timer;
pub(crate) mod turn;

use std::collections::VecDeque;

/// A queue's memory could not be had (`what`: how many entries of how many bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NoMemory {
    pub(crate) entries: usize,
    pub(crate) entry_bytes: usize,
}

impl std::fmt::Display for NoMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "cannot allocate {} entries of {} bytes (out of memory)",
            self.entries, self.entry_bytes
        )
    }
}

/// An empty queue with room for `n` entries, or [`NoMemory`] (never an abort: queue lengths
/// come from the consumer, up to 2^20).
pub(crate) fn deque<T>(n: usize) -> Result<VecDeque<T>, NoMemory> {
    let mut q = VecDeque::new();
    q.try_reserve_exact(n).map_err(|_| NoMemory {
        entries: n,
        entry_bytes: std::mem::size_of::<T>(),
    })?;
    Ok(q)
}
