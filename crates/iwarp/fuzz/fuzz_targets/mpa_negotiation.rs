//! MPA Initiator and Responder fed arbitrary bytes, plus an input-driven handshake.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    iwarp::fuzzing::mpa_negotiation(data);
});
