//! Value conversions between the C types and `dapl`'s, shared by the vtable functions.

use dapl::{CloseFlags, LmrTriplet, RmrTriplet};

use crate::cptr::{bad_arg, In};
use crate::ffi::*;

/// A count for C, saturated at `DAT_COUNT`'s maximum.
pub(crate) fn to_count(v: usize) -> DAT_COUNT {
    v.min(i32::MAX as usize) as DAT_COUNT
}

/// A length for C, saturated at `DAT_SEG_LENGTH`'s maximum.
pub(crate) fn to_seg(v: u64) -> DAT_SEG_LENGTH {
    v.min(u32::MAX as u64) as DAT_SEG_LENGTH
}

/// A count from C (argument `arg`); negative is `DAT_INVALID_PARAMETER`.
pub(crate) fn from_count(arg: u32, v: DAT_COUNT) -> Result<usize, DAT_RETURN> {
    usize::try_from(v).map_err(|_| bad_arg(arg))
}

/// `DAT_CLOSE_FLAGS` (argument `arg`).
pub(crate) fn close_flags(arg: u32, f: DAT_CLOSE_FLAGS) -> Result<CloseFlags, DAT_RETURN> {
    match f {
        DAT_CLOSE_ABRUPT_FLAG => Ok(CloseFlags::Abrupt),
        DAT_CLOSE_GRACEFUL_FLAG => Ok(CloseFlags::Graceful),
        _ => Err(bad_arg(arg)),
    }
}

/// One local segment.
pub(crate) fn lmr_triplet(t: &DAT_LMR_TRIPLET) -> LmrTriplet {
    LmrTriplet {
        lmr_context: dapl::LmrContext(t.lmr_context),
        virtual_address: t.virtual_address,
        segment_length: t.segment_length as u64,
    }
}

/// The remote buffer of an RDMA post (argument `arg`).
pub(crate) fn rmr_triplet(arg: u32, t: &In<DAT_RMR_TRIPLET>) -> Result<RmrTriplet, DAT_RETURN> {
    let t = t.get(arg)?;
    Ok(RmrTriplet {
        rmr_context: dapl::RmrContext(t.rmr_context),
        virtual_address: t.virtual_address,
        segment_length: t.segment_length as u64,
    })
}
