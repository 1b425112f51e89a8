//! FPDU decoder (CRC on and off) and DDP/RDMAP segment parser over arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    iwarp::fuzzing::frame_parser(data);
});
