//! Event Dispatcher and CNO slots.

use std::time::Duration;

use dapl::EvdFlags;

use crate::conv::{from_count, to_count};
use crate::cptr::bad_arg;
use crate::event::to_c;
use crate::ffi::*;
use crate::handle::{self, ia_index, Handle, Obj};
use crate::{guard, Dat};

/// A DAT timeout in microseconds (`DAT_TIMEOUT_INFINITE` is none).
pub(crate) fn timeout(t: DAT_TIMEOUT) -> Option<Duration> {
    (t != DAT_TIMEOUT_INFINITE).then(|| Duration::from_micros(t as u64))
}

fn cno_arg(p: DAT_CNO_HANDLE) -> Result<Option<(Handle, dapl::Cno)>, DAT_RETURN> {
    if p.is_null() {
        Ok(None)
    } else {
        handle::cno(p).map(Some)
    }
}

pub(crate) unsafe extern "C" fn evd_create(
    ia: DAT_IA_HANDLE,
    qlen: DAT_COUNT,
    cno: DAT_CNO_HANDLE,
    flags: DAT_EVD_FLAGS,
    evd: *mut DAT_EVD_HANDLE,
) -> DAT_RETURN {
    c_ptrs!(evd: Out);
    guard("evd_create", || {
        let (h, iac) = handle::ia(ia)?;
        let cno = cno_arg(cno)?;
        let flags = EvdFlags::from_bits(flags).ok_or(bad_arg(4))?;
        let qlen = from_count(2, qlen)?;
        if evd.is_null() {
            return Err(bad_arg(5));
        }
        let e = iac
            .ia
            .evd_create(qlen, cno.as_ref().map(|c| &c.1), flags)
            .dat()?;
        let eh = Handle::create(h.provider(), Some(h), Obj::Evd(e));
        evd.put(5, eh.as_ptr())
    })
}

pub(crate) unsafe extern "C" fn evd_query(
    evd: DAT_EVD_HANDLE,
    mask: DAT_EVD_PARAM_MASK,
    param: *mut DAT_EVD_PARAM,
) -> DAT_RETURN {
    c_ptrs!(param: Out);
    guard("evd_query", || {
        let (h, e) = handle::evd(evd)?;
        let _ = mask;
        let p = e.query().dat()?;
        let cno = p.cno.and_then(|c| Handle::by_id(c.id()));
        let mut state = if p.enabled {
            DAT_EVD_STATE_ENABLED
        } else {
            DAT_EVD_STATE_DISABLED
        };
        state |= DAT_EVD_STATE_WAITABLE;
        param.put(
            3,
            DAT_EVD_PARAM {
                ia_handle: ia_index(h.ia_handle()),
                evd_qlen: to_count(p.qlen),
                evd_state: state,
                cno_handle: handle::ptr_or_null(cno),
                evd_flags: p.flags.bits() as DAT_EVD_FLAGS,
            },
        )
    })
}

pub(crate) unsafe extern "C" fn evd_modify_cno(
    evd: DAT_EVD_HANDLE,
    cno: DAT_CNO_HANDLE,
) -> DAT_RETURN {
    guard("evd_modify_cno", || {
        let (_, e) = handle::evd(evd)?;
        let cno = cno_arg(cno)?;
        e.modify_cno(cno.as_ref().map(|c| &c.1)).dat()
    })
}

pub(crate) unsafe extern "C" fn evd_enable(evd: DAT_EVD_HANDLE) -> DAT_RETURN {
    guard("evd_enable", || handle::evd(evd)?.1.enable().dat())
}

pub(crate) unsafe extern "C" fn evd_disable(evd: DAT_EVD_HANDLE) -> DAT_RETURN {
    guard("evd_disable", || handle::evd(evd)?.1.disable().dat())
}

pub(crate) unsafe extern "C" fn evd_set_unwaitable(evd: DAT_EVD_HANDLE) -> DAT_RETURN {
    guard("evd_set_unwaitable", || {
        handle::evd(evd)?.1.set_unwaitable().dat()
    })
}

pub(crate) unsafe extern "C" fn evd_clear_unwaitable(evd: DAT_EVD_HANDLE) -> DAT_RETURN {
    guard("evd_clear_unwaitable", || {
        handle::evd(evd)?.1.clear_unwaitable().dat()
    })
}

pub(crate) unsafe extern "C" fn evd_wait(
    evd: DAT_EVD_HANDLE,
    time_out: DAT_TIMEOUT,
    threshold: DAT_COUNT,
    event: *mut DAT_EVENT,
    nmore: *mut DAT_COUNT,
) -> DAT_RETURN {
    c_ptrs!(event: Out);
    c_ptrs!(nmore: Out);
    guard("evd_wait", || {
        let (h, e) = handle::evd(evd)?;
        if event.is_null() {
            return Err(bad_arg(4));
        }
        let threshold = from_count(3, threshold)?;
        let Some((ev, more)) = e.wait(timeout(time_out), threshold).dat()? else {
            return Err(crate::err(DAT_TIMEOUT_EXPIRED, 0));
        };
        nmore.put_opt(to_count(more));
        event.put(4, to_c(h, ev))
    })
}

pub(crate) unsafe extern "C" fn evd_dequeue(
    evd: DAT_EVD_HANDLE,
    event: *mut DAT_EVENT,
) -> DAT_RETURN {
    c_ptrs!(event: Out);
    guard("evd_dequeue", || {
        let (h, e) = handle::evd(evd)?;
        if event.is_null() {
            return Err(bad_arg(2));
        }
        match e.dequeue().dat()? {
            Some(ev) => event.put(2, to_c(h, ev)),
            // The bare type, no class bit: dtest -p compares the whole value (contract 2.6).
            None => Err(DAT_QUEUE_EMPTY),
        }
    })
}

pub(crate) unsafe extern "C" fn evd_resize(evd: DAT_EVD_HANDLE, qlen: DAT_COUNT) -> DAT_RETURN {
    guard("evd_resize", || {
        let (_, e) = handle::evd(evd)?;
        e.resize(from_count(2, qlen)?).dat()
    })
}

pub(crate) unsafe extern "C" fn evd_post_se(
    evd: DAT_EVD_HANDLE,
    event: *const DAT_EVENT,
) -> DAT_RETURN {
    c_ptrs!(event: In);
    guard("evd_post_se", || {
        let (_, e) = handle::evd(evd)?;
        let Some(p) = event.software_event_data(2)? else {
            return Err(bad_arg(2));
        };
        e.post_se(p as usize as u64).dat()
    })
}

pub(crate) unsafe extern "C" fn evd_free(evd: DAT_EVD_HANDLE) -> DAT_RETURN {
    guard("evd_free", || {
        let (h, e) = handle::evd(evd)?;
        e.free().dat()?;
        h.kill();
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn cno_create(
    ia: DAT_IA_HANDLE,
    _agent: DAT_OS_WAIT_PROXY_AGENT,
    cno: *mut DAT_CNO_HANDLE,
) -> DAT_RETURN {
    c_ptrs!(cno: Out);
    guard("cno_create", || {
        let (h, iac) = handle::ia(ia)?;
        if cno.is_null() {
            return Err(bad_arg(3));
        }
        let c = iac.ia.cno_create().dat()?;
        let ch = Handle::create(h.provider(), Some(h), Obj::Cno(c));
        cno.put(3, ch.as_ptr())
    })
}

pub(crate) unsafe extern "C" fn cno_modify_agent(
    cno: DAT_CNO_HANDLE,
    _agent: DAT_OS_WAIT_PROXY_AGENT,
) -> DAT_RETURN {
    // The OS wait proxy agent is accepted and not called: consumers wait with dat_cno_wait.
    guard("cno_modify_agent", || handle::cno(cno).map(|_| ()))
}

pub(crate) unsafe extern "C" fn cno_query(
    cno: DAT_CNO_HANDLE,
    _mask: DAT_CNO_PARAM_MASK,
    param: *mut DAT_CNO_PARAM,
) -> DAT_RETURN {
    c_ptrs!(param: Out);
    guard("cno_query", || {
        let (h, _) = handle::cno(cno)?;
        param.put(
            3,
            DAT_CNO_PARAM {
                ia_handle: ia_index(h.ia_handle()),
                proxy_type: DAT_PROXY_TYPE_NONE,
                proxy: DAT_CNO_PARAM_PROXY {
                    none: std::ptr::null_mut(),
                },
            },
        )
    })
}

pub(crate) unsafe extern "C" fn cno_free(cno: DAT_CNO_HANDLE) -> DAT_RETURN {
    guard("cno_free", || {
        let (h, c) = handle::cno(cno)?;
        c.free().dat()?;
        h.kill();
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn cno_wait(
    cno: DAT_CNO_HANDLE,
    time_out: DAT_TIMEOUT,
    evd: *mut DAT_EVD_HANDLE,
) -> DAT_RETURN {
    c_ptrs!(evd: Out);
    guard("cno_wait", || {
        let (_, c) = handle::cno(cno)?;
        if evd.is_null() {
            return Err(bad_arg(3));
        }
        let Some(e) = c.wait(timeout(time_out)).dat()? else {
            return Err(crate::err(DAT_TIMEOUT_EXPIRED, 0));
        };
        let eh = handle::ptr_or_null(Handle::by_id(e.id()));
        evd.put(3, eh)
    })
}

pub(crate) unsafe extern "C" fn cno_fd_create(
    _ia: DAT_IA_HANDLE,
    _fd: *mut DAT_FD,
    _cno: *mut DAT_CNO_HANDLE,
) -> DAT_RETURN {
    crate::not_implemented("cno_fd_create")
}

pub(crate) unsafe extern "C" fn cno_trigger(
    _cno: DAT_CNO_HANDLE,
    _evd: *mut DAT_EVD_HANDLE,
) -> DAT_RETURN {
    crate::not_implemented("cno_trigger")
}
