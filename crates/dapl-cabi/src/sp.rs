//! Service point (PSP, RSP), connection request and CSP slots.

use dapl::PspFlags;

use crate::cptr::{bad_arg, zeroed};
use crate::ffi::*;
use crate::handle::{self, ia_index, Handle, Kind, Obj};
use crate::{guard, Dat};

fn psp_flags(f: DAT_PSP_FLAGS) -> Result<PspFlags, DAT_RETURN> {
    match f {
        DAT_PSP_CONSUMER_FLAG => Ok(PspFlags::Consumer),
        DAT_PSP_PROVIDER_FLAG => Ok(PspFlags::Provider),
        _ => Err(bad_arg(4)),
    }
}

pub(crate) unsafe extern "C" fn psp_create(
    ia: DAT_IA_HANDLE,
    qual: DAT_CONN_QUAL,
    evd: DAT_EVD_HANDLE,
    flags: DAT_PSP_FLAGS,
    psp: *mut DAT_PSP_HANDLE,
) -> DAT_RETURN {
    c_ptrs!(psp: Out);
    guard("psp_create", || {
        let (h, iac) = handle::ia(ia)?;
        let (eh, e) = handle::evd(evd)?;
        let f = psp_flags(flags)?;
        if psp.is_null() {
            return Err(bad_arg(5));
        }
        let sp = iac.ia.psp_create(qual, &e, f).dat()?;
        let ph = Handle::create(h.provider(), Some(h), Obj::Psp(sp, eh, flags));
        psp.put(5, ph.as_ptr())
    })
}

pub(crate) unsafe extern "C" fn psp_create_any(
    ia: DAT_IA_HANDLE,
    qual: *mut DAT_CONN_QUAL,
    evd: DAT_EVD_HANDLE,
    flags: DAT_PSP_FLAGS,
    psp: *mut DAT_PSP_HANDLE,
) -> DAT_RETURN {
    c_ptrs!(qual: Out);
    c_ptrs!(psp: Out);
    guard("psp_create_any", || {
        let (h, iac) = handle::ia(ia)?;
        let (eh, e) = handle::evd(evd)?;
        let f = psp_flags(flags)?;
        if psp.is_null() || qual.is_null() {
            return Err(bad_arg(if psp.is_null() { 5 } else { 2 }));
        }
        let (sp, q) = iac.ia.psp_create_any(&e, f).dat()?;
        let ph = Handle::create(h.provider(), Some(h), Obj::Psp(sp, eh, flags));
        qual.put(2, q)?;
        psp.put(5, ph.as_ptr())
    })
}

pub(crate) unsafe extern "C" fn psp_query(
    psp: DAT_PSP_HANDLE,
    _mask: DAT_PSP_PARAM_MASK,
    param: *mut DAT_PSP_PARAM,
) -> DAT_RETURN {
    c_ptrs!(param: Out);
    guard("psp_query", || {
        let (h, o) = handle::get(psp, Kind::Psp)?;
        let Obj::Psp(sp, evd, flags) = o else {
            return Err(Kind::Psp.invalid());
        };
        param.put(
            3,
            DAT_PSP_PARAM {
                ia_handle: ia_index(h.ia_handle()),
                conn_qual: sp.conn_qual(),
                evd_handle: evd.as_ptr(),
                psp_flags: flags,
            },
        )
    })
}

fn sp_free(p: DAT_HANDLE, kind: Kind) -> crate::R {
    let (h, o) = handle::get(p, kind)?;
    let (Obj::Psp(sp, ..) | Obj::Rsp(sp, ..)) = o else {
        return Err(kind.invalid());
    };
    sp.free().dat()?;
    h.kill();
    Ok(())
}

pub(crate) unsafe extern "C" fn psp_free(psp: DAT_PSP_HANDLE) -> DAT_RETURN {
    guard("psp_free", || sp_free(psp, Kind::Psp))
}

pub(crate) unsafe extern "C" fn rsp_create(
    ia: DAT_IA_HANDLE,
    qual: DAT_CONN_QUAL,
    ep: DAT_EP_HANDLE,
    evd: DAT_EVD_HANDLE,
    rsp: *mut DAT_RSP_HANDLE,
) -> DAT_RETURN {
    c_ptrs!(rsp: Out);
    guard("rsp_create", || {
        let (h, iac) = handle::ia(ia)?;
        let (eph, e) = handle::ep(ep)?;
        let (evh, ev) = handle::evd(evd)?;
        if rsp.is_null() {
            return Err(bad_arg(5));
        }
        let sp = iac.ia.rsp_create(qual, &e.ep, &ev).dat()?;
        let rh = Handle::create(h.provider(), Some(h), Obj::Rsp(sp, eph, evh));
        rsp.put(5, rh.as_ptr())
    })
}

pub(crate) unsafe extern "C" fn rsp_query(
    rsp: DAT_RSP_HANDLE,
    _mask: DAT_RSP_PARAM_MASK,
    param: *mut DAT_RSP_PARAM,
) -> DAT_RETURN {
    c_ptrs!(param: Out);
    guard("rsp_query", || {
        let (h, o) = handle::get(rsp, Kind::Rsp)?;
        let Obj::Rsp(sp, ep, evd) = o else {
            return Err(Kind::Rsp.invalid());
        };
        param.put(
            3,
            DAT_RSP_PARAM {
                ia_handle: ia_index(h.ia_handle()),
                conn_qual: sp.conn_qual(),
                evd_handle: evd.as_ptr(),
                ep_handle: ep.as_ptr(),
            },
        )
    })
}

pub(crate) unsafe extern "C" fn rsp_free(rsp: DAT_RSP_HANDLE) -> DAT_RETURN {
    guard("rsp_free", || sp_free(rsp, Kind::Rsp))
}

pub(crate) unsafe extern "C" fn cr_query(
    cr: DAT_CR_HANDLE,
    _mask: DAT_CR_PARAM_MASK,
    param: *mut DAT_CR_PARAM,
) -> DAT_RETURN {
    c_ptrs!(param: Out);
    guard("cr_query", || {
        let (_, c) = handle::cr(cr)?;
        let q = c.cr.query().dat()?;
        let pd = c.cr.private_data();
        let mut p: DAT_CR_PARAM = zeroed();
        p.remote_ia_address_ptr = &*c.remote as *const handle::SockAddr as DAT_IA_ADDRESS_PTR;
        p.remote_port_qual = c.remote_port;
        p.private_data_size = pd.len() as DAT_COUNT;
        // Points into the CR's own copy, valid until the CR is accepted or rejected.
        p.private_data = if pd.is_empty() {
            std::ptr::null_mut()
        } else {
            pd.as_ptr() as DAT_PVOID
        };
        p.local_ep_handle = handle::ptr_or_null(q.local_ep.and_then(|e| Handle::by_id(e.id())));
        param.put(3, p)
    })
}

pub(crate) unsafe extern "C" fn cr_accept(
    cr: DAT_CR_HANDLE,
    ep: DAT_EP_HANDLE,
    pdata_size: DAT_COUNT,
    private_data: DAT_PVOID,
) -> DAT_RETURN {
    let private_data = private_data as *const u8;
    c_ptrs!(private_data: In);
    guard("cr_accept", || {
        let (h, c) = handle::cr(cr)?;
        let ep = if ep.is_null() {
            None
        } else {
            Some(handle::ep(ep)?.1)
        };
        // The consumer may pass a pointer into the CR's own private data (dtest does): the
        // slice is read while `c` keeps the CR alive.
        let pd = private_data.slice(4, pdata_size as i64)?;
        c.cr.accept(ep.as_ref().map(|e| &e.ep), pd).dat()?;
        h.kill();
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn cr_reject(
    cr: DAT_CR_HANDLE,
    pdata_size: DAT_COUNT,
    private_data: DAT_PVOID,
) -> DAT_RETURN {
    let private_data = private_data as *const u8;
    c_ptrs!(private_data: In);
    guard("cr_reject", || {
        let (h, c) = handle::cr(cr)?;
        let pd = private_data.slice(3, pdata_size as i64)?;
        c.cr.reject(pd).dat()?;
        h.kill();
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn cr_handoff(_cr: DAT_CR_HANDLE, _qual: DAT_CONN_QUAL) -> DAT_RETURN {
    crate::not_implemented("cr_handoff")
}

pub(crate) unsafe extern "C" fn csp_create(
    _ia: DAT_IA_HANDLE,
    _comm: *mut DAT_COMM,
    _addr: DAT_IA_ADDRESS_PTR,
    _evd: DAT_EVD_HANDLE,
    _csp: *mut DAT_CSP_HANDLE,
) -> DAT_RETURN {
    crate::not_implemented("csp_create")
}

pub(crate) unsafe extern "C" fn csp_query(
    _csp: DAT_CSP_HANDLE,
    _mask: DAT_CSP_PARAM_MASK,
    _param: *mut DAT_CSP_PARAM,
) -> DAT_RETURN {
    crate::not_implemented("csp_query")
}

pub(crate) unsafe extern "C" fn csp_free(_csp: DAT_CSP_HANDLE) -> DAT_RETURN {
    crate::not_implemented("csp_free")
}
