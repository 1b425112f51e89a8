//! Protection Zone, LMR and RMR slots, and the iov conversion every DTO post uses.

use std::ptr::NonNull;
use std::sync::Arc;

use arrayvec::ArrayVec;
use dapl::{CompletionFlags, LmrTriplet, MemPriv};

use crate::conv::lmr_triplet;
use crate::cptr::{bad_arg, zeroed, In};
use crate::ffi::*;
use crate::handle::{self, ia_index, Handle, Kind, LmrC, Obj};
use crate::ia::context_bits;
use crate::{err, guard, Dat};

/// A consumer's iov as `dapl` triplets. Zero-length segments are dropped: DAT says their
/// address and context "are irrelevant and can be invalid".
pub(crate) fn iov(
    arg: u32,
    segs: &In<DAT_LMR_TRIPLET>,
    n: i64,
) -> Result<ArrayVec<LmrTriplet, { dapl::ia::MAX_IOV }>, DAT_RETURN> {
    let s = segs.slice(arg, n)?;
    let mut out = ArrayVec::new();
    for t in s.iter().filter(|t| t.segment_length != 0) {
        out.try_push(lmr_triplet(t)).map_err(|_| bad_arg(arg))?;
    }
    Ok(out)
}

/// Completion flags from C; unknown bits are `DAT_INVALID_PARAMETER`.
pub(crate) fn completion_flags(
    arg: u32,
    f: DAT_COMPLETION_FLAGS,
) -> Result<CompletionFlags, DAT_RETURN> {
    CompletionFlags::from_bits(f).ok_or(bad_arg(arg))
}

/// Memory privileges from C. Bits `dapl` does not know (e.g. the IB extension's
/// REMOTE_ATOMIC) grant nothing here and are accepted, as dtestx needs.
fn privileges(p: DAT_MEM_PRIV_FLAGS) -> MemPriv {
    MemPriv::from_bits_truncate(p)
}

/// An LMR's privileges from C: as given, plus LOCAL_READ. The DAT programs were written
/// against providers over InfiniBand and iWARP verbs, where local reads cannot be refused (a
/// memory region has no local-read bit), and send from LMRs registered LOCAL_WRITE only
/// (dtest does). The `dapl` API keeps DAT's strict rule; this shim follows the verbs.
fn lmr_privileges(p: DAT_MEM_PRIV_FLAGS) -> MemPriv {
    privileges(p) | MemPriv::LOCAL_READ
}

pub(crate) unsafe extern "C" fn pz_create(ia: DAT_IA_HANDLE, pz: *mut DAT_PZ_HANDLE) -> DAT_RETURN {
    c_ptrs!(pz: Out);
    guard("pz_create", || {
        let (h, iac) = handle::ia(ia)?;
        if pz.is_null() {
            return Err(bad_arg(2));
        }
        let p = iac.ia.pz_create().dat()?;
        let ph = Handle::create(h.provider(), Some(h), Obj::Pz(p));
        pz.put(2, ph.as_ptr())
    })
}

pub(crate) unsafe extern "C" fn pz_query(
    pz: DAT_PZ_HANDLE,
    _mask: DAT_PZ_PARAM_MASK,
    param: *mut DAT_PZ_PARAM,
) -> DAT_RETURN {
    c_ptrs!(param: Out);
    guard("pz_query", || {
        let (h, _) = handle::pz(pz)?;
        param.put(
            3,
            DAT_PZ_PARAM {
                ia_handle: ia_index(h.ia_handle()),
            },
        )
    })
}

pub(crate) unsafe extern "C" fn pz_free(pz: DAT_PZ_HANDLE) -> DAT_RETURN {
    guard("pz_free", || {
        let (h, p) = handle::pz(pz)?;
        p.free().dat()?;
        h.kill();
        Ok(())
    })
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn lmr_create(
    ia: DAT_IA_HANDLE,
    mem_type: DAT_MEM_TYPE,
    region: DAT_REGION_DESCRIPTION,
    length: DAT_VLEN,
    pz: DAT_PZ_HANDLE,
    privs: DAT_MEM_PRIV_FLAGS,
    va_type: DAT_VA_TYPE,
    lmr: *mut DAT_LMR_HANDLE,
    lmr_context: *mut DAT_LMR_CONTEXT,
    rmr_context: *mut DAT_RMR_CONTEXT,
    registered_length: *mut DAT_VLEN,
    registered_address: *mut DAT_VADDR,
) -> DAT_RETURN {
    c_ptrs!(lmr: Out);
    c_ptrs!(lmr_context: Out);
    c_ptrs!(rmr_context: Out);
    c_ptrs!(registered_length: Out);
    c_ptrs!(registered_address: Out);
    guard("lmr_create", || {
        let (h, _) = handle::ia(ia)?;
        let (pzh, p) = handle::pz(pz)?;
        if pzh.ia_handle().as_ptr() != h.as_ptr() {
            return Err(Kind::Pz.invalid());
        }
        if lmr.is_null() {
            return Err(bad_arg(8));
        }
        let len = usize::try_from(length).map_err(|_| err(DAT_LENGTH_ERROR, 0))?;
        if len == 0 {
            return Err(err(DAT_LENGTH_ERROR, 0));
        }
        // SAFETY: every member of the region union is pointer-sized at offset 0 or a struct
        // starting with a pointer; reading the first pointer is valid for any bits.
        let base = unsafe { region.for_va };
        let base = match mem_type {
            DAT_MEM_TYPE_VIRTUAL => base as *mut u8,
            DAT_MEM_TYPE_LMR => {
                // Another LMR's memory, registered again in this PZ.
                let (_, other) = handle::lmr(base)?;
                let start = other.lmr.address() as usize as *mut u8;
                if len > other.lmr.len() {
                    return Err(err(DAT_LENGTH_ERROR, 0));
                }
                start
            }
            _ => return Err(err(DAT_NOT_IMPLEMENTED, 0)),
        };
        let ptr = NonNull::new(base).ok_or(bad_arg(3))?;
        if (ptr.as_ptr() as usize).checked_add(len).is_none() {
            return Err(err(DAT_LENGTH_ERROR, 0));
        }
        // SAFETY: dat_lmr_create's contract: the consumer's memory [va, va+length) stays
        // valid and is not unmapped until dat_lmr_free (or the IA's close) returned, the same
        // promise every DAT provider relies on when it registers memory with a NIC; dapl never
        // touches it after that (regions are revoked). C code holds no Rust references. The
        // pages are not touched here (dapltest registers up to 1 GiB without writing it).
        let l = unsafe { p.lmr_register(ptr, len, lmr_privileges(privs)) }.dat()?;
        lmr_context.put_opt(l.lmr_context().0);
        rmr_context.put_opt(l.rmr_context().0);
        registered_length.put_opt(l.len() as DAT_VLEN);
        registered_address.put_opt(l.address());
        let lc = Arc::new(LmrC {
            lmr: l,
            pz: pzh,
            mem_type,
            privileges: privs,
            va_type,
        });
        let lh = Handle::create(h.provider(), Some(h), Obj::Lmr(lc));
        lmr.put(8, lh.as_ptr())
    })
}

pub(crate) unsafe extern "C" fn lmr_query(
    lmr: DAT_LMR_HANDLE,
    _mask: DAT_LMR_PARAM_MASK,
    param: *mut DAT_LMR_PARAM,
) -> DAT_RETURN {
    c_ptrs!(param: Out);
    guard("lmr_query", || {
        let (h, l) = handle::lmr(lmr)?;
        let q = l.lmr.query().dat()?;
        let mut c: DAT_LMR_PARAM = zeroed();
        c.ia_handle = ia_index(h.ia_handle());
        c.mem_type = l.mem_type;
        c.region_desc.for_va = q.registered_address as usize as DAT_PVOID;
        c.length = q.registered_size;
        c.pz_handle = l.pz.as_ptr();
        c.mem_priv = l.privileges;
        c.va_type = l.va_type;
        c.lmr_context = q.lmr_context.0;
        c.rmr_context = q.rmr_context.0;
        c.registered_size = q.registered_size;
        c.registered_address = q.registered_address;
        param.put(3, c)
    })
}

pub(crate) unsafe extern "C" fn lmr_free(lmr: DAT_LMR_HANDLE) -> DAT_RETURN {
    guard("lmr_free", || {
        let (h, l) = handle::lmr(lmr)?;
        l.lmr.free().dat()?;
        h.kill();
        Ok(())
    })
}

fn lmr_sync(ia: DAT_IA_HANDLE, segs: In<DAT_LMR_TRIPLET>, n: DAT_VLEN) -> crate::R {
    // Memory is cache coherent and placed by the CPU: there is nothing to flush. Check the
    // arguments all the same.
    handle::ia(ia)?;
    segs.slice(2, i64::try_from(n).map_err(|_| bad_arg(3))?)?;
    Ok(())
}

pub(crate) unsafe extern "C" fn lmr_sync_rdma_read(
    ia: DAT_IA_HANDLE,
    segs: *const DAT_LMR_TRIPLET,
    n: DAT_VLEN,
) -> DAT_RETURN {
    c_ptrs!(segs: In);
    guard("lmr_sync_rdma_read", || lmr_sync(ia, segs, n))
}

pub(crate) unsafe extern "C" fn lmr_sync_rdma_write(
    ia: DAT_IA_HANDLE,
    segs: *const DAT_LMR_TRIPLET,
    n: DAT_VLEN,
) -> DAT_RETURN {
    c_ptrs!(segs: In);
    guard("lmr_sync_rdma_write", || lmr_sync(ia, segs, n))
}

pub(crate) unsafe extern "C" fn rmr_create(
    pz: DAT_PZ_HANDLE,
    rmr: *mut DAT_RMR_HANDLE,
) -> DAT_RETURN {
    c_ptrs!(rmr: Out);
    guard("rmr_create", || {
        let (pzh, p) = handle::pz(pz)?;
        if rmr.is_null() {
            return Err(bad_arg(2));
        }
        let r = p.rmr_create().dat()?;
        let ia = pzh.ia_handle();
        let rh = Handle::create(pzh.provider(), Some(ia), Obj::Rmr(r, pzh));
        rmr.put(2, rh.as_ptr())
    })
}

pub(crate) unsafe extern "C" fn rmr_create_for_ep(
    _pz: DAT_PZ_HANDLE,
    _rmr: *mut DAT_RMR_HANDLE,
) -> DAT_RETURN {
    crate::not_implemented("rmr_create_for_ep")
}

pub(crate) unsafe extern "C" fn rmr_query(
    rmr: DAT_RMR_HANDLE,
    _mask: DAT_RMR_PARAM_MASK,
    param: *mut DAT_RMR_PARAM,
) -> DAT_RETURN {
    c_ptrs!(param: Out);
    guard("rmr_query", || {
        let (h, o) = handle::get(rmr, Kind::Rmr)?;
        let Obj::Rmr(r, pzh) = o else {
            return Err(Kind::Rmr.invalid());
        };
        let q = r.query().dat()?;
        let mut c: DAT_RMR_PARAM = zeroed();
        c.ia_handle = ia_index(h.ia_handle());
        c.pz_handle = pzh.as_ptr();
        if let Some(t) = q.lmr_triplet {
            c.lmr_triplet = DAT_LMR_TRIPLET {
                virtual_address: t.virtual_address,
                segment_length: t.segment_length as DAT_SEG_LENGTH,
                lmr_context: t.lmr_context.0,
            };
        }
        c.mem_priv = q.privileges.bits() as DAT_MEM_PRIV_FLAGS;
        c.rmr_context = q.rmr_context.0;
        c.rmr_scope = DAT_RMR_SCOPE_EP;
        c.va_type = DAT_VA_TYPE_VA;
        param.put(3, c)
    })
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn rmr_bind(
    rmr: DAT_RMR_HANDLE,
    lmr: DAT_LMR_HANDLE,
    triplet: *const DAT_LMR_TRIPLET,
    privs: DAT_MEM_PRIV_FLAGS,
    _va_type: DAT_VA_TYPE,
    ep: DAT_EP_HANDLE,
    cookie: DAT_RMR_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
    context: *mut DAT_RMR_CONTEXT,
) -> DAT_RETURN {
    c_ptrs!(triplet: In);
    c_ptrs!(context: Out);
    guard("rmr_bind", || {
        let (_, r) = handle::rmr(rmr)?;
        let (_, l) = handle::lmr(lmr)?;
        let (_, e) = handle::ep(ep)?;
        let t = lmr_triplet(&triplet.get(3)?);
        let flags = completion_flags(8, flags)?;
        let ctx = r
            .bind(
                &l.lmr,
                t,
                privileges(privs),
                &e.ep,
                context_bits(cookie),
                flags,
            )
            .dat()?;
        context.put_opt(ctx.0);
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn rmr_free(rmr: DAT_RMR_HANDLE) -> DAT_RETURN {
    guard("rmr_free", || {
        let (h, r) = handle::rmr(rmr)?;
        r.free().dat()?;
        h.kill();
        Ok(())
    })
}
