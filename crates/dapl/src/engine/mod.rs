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
