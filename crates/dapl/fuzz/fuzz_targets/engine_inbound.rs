//! Arbitrary peer bytes (or peer operations framed into valid FPDUs) after MPA, fed through a
//! tcp connection's receive path into the engine, with memory, completion and state invariants.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dapl_testkit::inbound::engine_inbound(data);
});
