//! Shared Receive Queue slots.

use dapl::SrqAttr;

use crate::conv::{from_count, to_count};
use crate::cptr::bad_arg;
use crate::ffi::*;
use crate::handle::{self, ia_index, Handle, Kind, Obj};
use crate::ia::context_bits;
use crate::mem::iov;
use crate::{guard, Dat};

/// A low watermark from C: 0 (`DAT_SRQ_LW_DEFAULT`) means none.
fn lw(arg: u32, v: DAT_COUNT) -> Result<Option<usize>, DAT_RETURN> {
    Ok(Some(from_count(arg, v)?).filter(|&n| n != 0))
}

pub(crate) unsafe extern "C" fn srq_create(
    ia: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    attr: *mut DAT_SRQ_ATTR,
    srq: *mut DAT_SRQ_HANDLE,
) -> DAT_RETURN {
    c_ptrs!(attr: In);
    c_ptrs!(srq: Out);
    guard("srq_create", || {
        let (h, iac) = handle::ia(ia)?;
        let (pzh, p) = handle::pz(pz)?;
        let a = attr.get(3)?;
        if srq.is_null() {
            return Err(bad_arg(4));
        }
        let a = SrqAttr {
            max_recv_dtos: from_count(3, a.max_recv_dtos)?,
            max_recv_iov: from_count(3, a.max_recv_iov)?,
            low_watermark: lw(3, a.low_watermark)?,
        };
        let s = iac.ia.srq_create(&p, &a).dat()?;
        let sh = Handle::create(h.provider(), Some(h), Obj::Srq(s, pzh));
        srq.put(4, sh.as_ptr())
    })
}

pub(crate) unsafe extern "C" fn srq_free(srq: DAT_SRQ_HANDLE) -> DAT_RETURN {
    guard("srq_free", || {
        let (h, s) = handle::srq(srq)?;
        s.free().dat()?;
        h.kill();
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn srq_post_recv(
    srq: DAT_SRQ_HANDLE,
    n: DAT_COUNT,
    segs: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
) -> DAT_RETURN {
    c_ptrs!(segs: In);
    guard("srq_post_recv", || {
        let (_, s) = handle::srq(srq)?;
        let v = iov(3, &segs, n as i64)?;
        s.post_recv(&v, context_bits(cookie)).dat()
    })
}

pub(crate) unsafe extern "C" fn srq_query(
    srq: DAT_SRQ_HANDLE,
    _mask: DAT_SRQ_PARAM_MASK,
    param: *mut DAT_SRQ_PARAM,
) -> DAT_RETURN {
    c_ptrs!(param: Out);
    guard("srq_query", || {
        let (h, o) = handle::get(srq, Kind::Srq)?;
        let Obj::Srq(s, pzh) = o else {
            return Err(Kind::Srq.invalid());
        };
        let q = s.query().dat()?;
        let c = to_count;
        param.put(
            3,
            DAT_SRQ_PARAM {
                ia_handle: ia_index(h.ia_handle()),
                srq_state: DAT_SRQ_STATE_OPERATIONAL,
                pz_handle: pzh.as_ptr(),
                max_recv_dtos: c(q.attr.max_recv_dtos),
                max_recv_iov: c(q.attr.max_recv_iov),
                low_watermark: c(q.attr.low_watermark.unwrap_or(0)),
                available_dto_count: c(q.available_dto_count),
                outstanding_dto_count: c(q
                    .attr
                    .max_recv_dtos
                    .saturating_sub(q.available_dto_count)),
            },
        )
    })
}

pub(crate) unsafe extern "C" fn srq_resize(srq: DAT_SRQ_HANDLE, qlen: DAT_COUNT) -> DAT_RETURN {
    guard("srq_resize", || {
        let (_, s) = handle::srq(srq)?;
        s.resize(from_count(2, qlen)?).dat()
    })
}

pub(crate) unsafe extern "C" fn srq_set_lw(srq: DAT_SRQ_HANDLE, low: DAT_COUNT) -> DAT_RETURN {
    guard("srq_set_lw", || {
        let (_, s) = handle::srq(srq)?;
        s.set_lw(lw(2, low)?).dat()
    })
}
