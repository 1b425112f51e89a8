//! The one seam the `cabi_handles` fuzz harness ([`crate::fuzzing`]) needs, behind the
//! `fuzzing` feature. Not part of the API: hidden from the docs, no stability promise, not in
//! the library libdat2 loads unless a build turns the feature on.
//!
//! A DAT consumer reaches the provider through libdat2: `dat_ia_open` reads dat.conf, calls
//! `dat_provider_init`, which registers the provider's vtable with libdat2's registry, and
//! libdat2 then calls `ia_open` through it. The harness runs without dat.conf and without the
//! registry: [`provider`] makes the same entry `dat_provider_init` makes (an IA name and the
//! link its `ia_params` select) and hands out its vtable, through which the harness calls
//! `ia_open` and everything else as libdat2 would.

use std::ffi::CStr;

use crate::ffi::DAT_PROVIDER;

/// The vtable of the in-process entry for the IA name `ia_name`, whose IAs open on the link of
/// `ia_params` (a dat.conf `ia_params` field, e.g. `"loopback 127.0.0.1"`). Made the first time
/// (entries live for the process), its link replaced on later calls. `ia_open` through this
/// vtable with `ia_name` opens such an IA; libdat2's registry never hears of it.
pub fn provider(ia_name: &CStr, ia_params: &str) -> Result<&'static DAT_PROVIDER, String> {
    let link = crate::provider::parse_ia_params(ia_params)?;
    Ok(&crate::provider::register(ia_name.to_owned(), Ok(link)).provider)
}
