//! Random handles (live, wrong kind, stale, NULL, near a live one, any value), NULL and valid
//! pointers, and any counts, lengths and flags through the provider vtable of libdaplrs.so, on
//! an IA of the in-process loopback link: valid returns, DAT_INVALID_HANDLE for bad handles,
//! no write outside registered memory, a clean close.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    daplrs::fuzzing::cabi_handles(data);
});
