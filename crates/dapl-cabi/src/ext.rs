//! The DAT IB extension operations (called from the `va_list` shim in csrc/ext_shim.c).

use crate::conv::rmr_triplet;
use crate::ffi::*;
use crate::handle;
use crate::mem::{completion_flags, iov};
use crate::{guard, Dat};

/// `dat_ib_post_rdma_write_immed`: an RDMA write whose arrival completes the peer's next
/// receive with `immediate` (between dapl-rs peers: RFC 7306 Immediate Data on the wire).
///
/// # Safety
/// Called by the C shim with the arguments of a `dat_extension_op` call: `local` points at
/// `segments` triplets and `remote` at one, as the DAT IB extension requires.
#[no_mangle]
pub unsafe extern "C" fn daplrs_ext_rdma_write_immed(
    ep: DAT_HANDLE,
    segments: DAT_COUNT,
    local: *const DAT_LMR_TRIPLET,
    cookie: u64,
    remote: *const DAT_RMR_TRIPLET,
    immediate: u32,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    c_ptrs!(local: In);
    c_ptrs!(remote: In);
    guard("dat_ib_post_rdma_write_immed", || {
        let (_, e) = handle::ep(ep)?;
        let v = iov(3, &local, segments as i64)?;
        let r = rmr_triplet(5, &remote)?;
        let flags = completion_flags(7, flags)?;
        e.ep.post_rdma_write_immed(&v, cookie, &r, immediate, flags)
            .dat()
    })
}
