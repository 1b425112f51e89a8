//! # dapl-testkit — the test kit of dapl-rs (not published)
//!
//! [`kit`]: what the integration tests of `crates/dapl` share (a dev-dependency of `dapl`):
//! the one list of links and the macros that generate a test per link
//! ([`per_link!`], [`per_link_with!`], [`once!`]), `Side` and `Pair`, the connect/accept
//! sequence, timeouts. Test files start with `use dapl_testkit::kit::*;`.
//!
//! [`inbound`]: the `engine_inbound` harness. It drives a tcp connection of the `dapl` crate
//! over a socketpair, with no progress thread behind it, through the connection's receive path
//! and the engine, and checks invariants on every byte of registered memory, every completion
//! and everything the connection sends back. Two things run it:
//!
//! - the `engine_inbound` cargo-fuzz target (`crates/dapl/fuzz`, `scripts/fuzz.sh`, see
//!   `docs/fuzzing.md`), which calls [`inbound::engine_inbound`] on every input;
//! - this crate's test `tests/engine_inbound.rs`, on a stable toolchain: pseudo-random inputs
//!   and the regression inputs of the bugs the fuzzer found
//!   (`cargo test -p dapl-testkit --test engine_inbound`).
//!
//! It reaches into `dapl` only through the hidden `dapl::fuzz_api` (feature `fuzzing`): an
//! Established connection over a given socket, the calls the progress thread makes on it, and
//! memory-table entries at fixed addresses.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod inbound;
pub mod kit;
