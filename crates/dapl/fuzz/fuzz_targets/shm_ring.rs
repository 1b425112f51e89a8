//! Arbitrary ring contents (tail, head and records as a peer could leave them) fed to the shm
//! link's ring consumer: every record it accepts lies inside the mapping, nothing panics.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    dapl::fuzz_api::shm_ring_consume(data);
});
