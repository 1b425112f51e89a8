//! White-box tests through the DAT layer that need the crate's internals.

mod tcp_handoff;
