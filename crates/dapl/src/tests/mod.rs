//! White-box tests through the DAT layer that need the crate's internals.

mod faults;
mod tcp_handoff;
