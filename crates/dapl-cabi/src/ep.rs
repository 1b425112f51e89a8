//! Endpoint slots.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use dapl::{EpAttr, RmrTriplet};

use crate::conv::{close_flags, from_count, rmr_triplet, to_count, to_seg};
use crate::cptr::{bad_arg, zeroed, In, Out};
use crate::evd::timeout;
use crate::ffi::*;
use crate::handle::{self, ia_index, opt_evd, sockaddr, EpC, Handle, Obj, SockAddr};
use crate::ia::context_bits;
use crate::mem::{completion_flags, iov};
use crate::{err, guard, Dat, R};

/// `DAT_EP_ATTR` -> `EpAttr`. The message and RDMA size limits are not taken: DAT programs
/// pass 0 or 64 KiB there and then move megabytes (contract 5.5); the IA's limits apply.
fn attr_from_c(
    arg: u32,
    a: &DAT_EP_ATTR,
    mut base: EpAttr,
    mask: DAT_EP_PARAM_MASK,
) -> Result<EpAttr, DAT_RETURN> {
    let set = |bit: u64| mask & bit != 0;
    if set(DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS) {
        base.recv_completion_flags = completion_flags(arg, a.recv_completion_flags)?;
    }
    if set(DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS) {
        base.request_completion_flags = completion_flags(arg, a.request_completion_flags)?;
    }
    // The depth and iov fields have the same names on both sides.
    macro_rules! counts {
        ($($bit:ident => $field:ident),* $(,)?) => {
            $(if set($bit) {
                base.$field = from_count(arg, a.$field)?;
            })*
        };
    }
    counts!(
        DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS => max_recv_dtos,
        DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS => max_request_dtos,
        DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV => max_recv_iov,
        DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV => max_request_iov,
        DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN => max_rdma_read_in,
        DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT => max_rdma_read_out,
    );
    Ok(base)
}

fn attr_to_c(a: &EpAttr) -> DAT_EP_ATTR {
    let c = to_count;
    let mut o: DAT_EP_ATTR = zeroed();
    o.service_type = DAT_SERVICE_TYPE_RC;
    o.max_message_size = to_seg(a.max_message_size);
    o.max_rdma_size = to_seg(a.max_rdma_size);
    o.qos = DAT_QOS_BEST_EFFORT;
    o.recv_completion_flags = a.recv_completion_flags.bits() as DAT_COMPLETION_FLAGS;
    o.request_completion_flags = a.request_completion_flags.bits() as DAT_COMPLETION_FLAGS;
    o.max_recv_dtos = c(a.max_recv_dtos);
    o.max_request_dtos = c(a.max_request_dtos);
    o.max_recv_iov = c(a.max_recv_iov);
    o.max_request_iov = c(a.max_request_iov);
    o.max_rdma_read_in = c(a.max_rdma_read_in);
    o.max_rdma_read_out = c(a.max_rdma_read_out);
    o.srq_soft_hw = 0;
    o.max_rdma_read_iov = c(a.max_request_iov);
    o.max_rdma_write_iov = c(a.max_request_iov);
    o
}

/// What both `ep_create` flavours share.
#[allow(clippy::too_many_arguments)]
fn create(
    ia: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    recv_evd: DAT_EVD_HANDLE,
    request_evd: DAT_EVD_HANDLE,
    connect_evd: DAT_EVD_HANDLE,
    srq: Option<DAT_SRQ_HANDLE>,
    attr: &In<DAT_EP_ATTR>,
    ep: &Out<DAT_EP_HANDLE>,
) -> R {
    let (h, iac) = handle::ia(ia)?;
    let (pzh, p) = handle::pz(pz)?;
    let recv = opt_evd(recv_evd)?;
    let req = opt_evd(request_evd)?;
    let conn = opt_evd(connect_evd)?;
    let out_arg = if srq.is_some() { 8 } else { 7 };
    let attr_arg = out_arg - 1;
    if ep.is_null() {
        return Err(bad_arg(out_arg));
    }
    let attr = match attr.opt() {
        None => None,
        Some(a) => Some(attr_from_c(
            attr_arg,
            &a,
            EpAttr::default(),
            DAT_EP_FIELD_EP_ATTR_ALL,
        )?),
    };
    let srq = match srq {
        None => None,
        Some(s) => Some(handle::srq(s)?),
    };
    let e = match &srq {
        None => iac.ia.ep_create(
            &p,
            recv.as_ref().map(|e| &e.1),
            req.as_ref().map(|e| &e.1),
            conn.as_ref().map(|e| &e.1),
            attr.as_ref(),
        ),
        Some((_, s)) => iac.ia.ep_create_with_srq(
            &p,
            recv.as_ref().map(|e| &e.1),
            req.as_ref().map(|e| &e.1),
            conn.as_ref().map(|e| &e.1),
            s,
            attr.as_ref(),
        ),
    }
    .dat()?;
    let epc = Arc::new(EpC {
        ep: e,
        pz: pzh,
        recv_evd: recv.map(|e| e.0),
        request_evd: req.map(|e| e.0),
        connect_evd: conn.map(|e| e.0),
        srq: srq.map(|s| s.0),
        event_pdata: Mutex::new(Vec::new()),
        remote_addrs: Mutex::new(Vec::new()),
    });
    let eh = Handle::create(h.provider(), Some(h), Obj::Ep(epc));
    ep.put(out_arg, eh.as_ptr())
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn ep_create(
    ia: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    recv_evd: DAT_EVD_HANDLE,
    request_evd: DAT_EVD_HANDLE,
    connect_evd: DAT_EVD_HANDLE,
    attr: *const DAT_EP_ATTR,
    ep: *mut DAT_EP_HANDLE,
) -> DAT_RETURN {
    c_ptrs!(attr: In);
    c_ptrs!(ep: Out);
    guard("ep_create", || {
        create(ia, pz, recv_evd, request_evd, connect_evd, None, &attr, &ep)
    })
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn ep_create_with_srq(
    ia: DAT_IA_HANDLE,
    pz: DAT_PZ_HANDLE,
    recv_evd: DAT_EVD_HANDLE,
    request_evd: DAT_EVD_HANDLE,
    connect_evd: DAT_EVD_HANDLE,
    srq: DAT_SRQ_HANDLE,
    attr: *const DAT_EP_ATTR,
    ep: *mut DAT_EP_HANDLE,
) -> DAT_RETURN {
    c_ptrs!(attr: In);
    c_ptrs!(ep: Out);
    guard("ep_create_with_srq", || {
        create(
            ia,
            pz,
            recv_evd,
            request_evd,
            connect_evd,
            Some(srq),
            &attr,
            &ep,
        )
    })
}

pub(crate) unsafe extern "C" fn ep_query(
    ep: DAT_EP_HANDLE,
    _mask: DAT_EP_PARAM_MASK,
    param: *mut DAT_EP_PARAM,
) -> DAT_RETURN {
    c_ptrs!(param: Out);
    guard("ep_query", || {
        let (h, e) = handle::ep(ep)?;
        if param.is_null() {
            return Err(bad_arg(3));
        }
        let q = e.ep.query().dat()?;
        let ia = h.ia_handle();
        let mut c: DAT_EP_PARAM = zeroed();
        c.ia_handle = ia_index(ia);
        c.ep_state = q.state as DAT_EP_STATE;
        if let Some(Obj::Ia(iac)) = ia.obj() {
            c.local_ia_address_ptr = &*iac.address as *const SockAddr as DAT_IA_ADDRESS_PTR;
        }
        c.local_port_qual = 0;
        c.remote_ia_address_ptr = match q.remote_address {
            None => std::ptr::null_mut(),
            Some(a) => {
                let want = sockaddr(Some(a));
                let mut kept = e.remote_addrs.lock().unwrap_or_else(|p| p.into_inner());
                let same = |s: &SockAddr| {
                    s.sin_addr.s_addr == want.sin_addr.s_addr && s.sin_port == want.sin_port
                };
                if !kept.last().is_some_and(|b| same(b)) {
                    kept.push(Box::new(want));
                }
                &**kept.last().expect("just pushed") as *const SockAddr as DAT_IA_ADDRESS_PTR
            }
        };
        c.remote_port_qual = q.remote_port_qual.unwrap_or(0);
        c.pz_handle = e.pz.as_ptr();
        c.recv_evd_handle = handle::ptr_or_null(e.recv_evd);
        c.request_evd_handle = handle::ptr_or_null(e.request_evd);
        c.connect_evd_handle = handle::ptr_or_null(e.connect_evd);
        c.srq_handle = handle::ptr_or_null(e.srq);
        c.ep_attr = attr_to_c(&q.attr);
        param.put(3, c)
    })
}

pub(crate) unsafe extern "C" fn ep_modify(
    ep: DAT_EP_HANDLE,
    mask: DAT_EP_PARAM_MASK,
    param: *const DAT_EP_PARAM,
) -> DAT_RETURN {
    c_ptrs!(param: In);
    guard("ep_modify", || {
        let (_, e) = handle::ep(ep)?;
        let p = param.get(3)?;
        // Only the endpoint attributes can change; handles, addresses and state cannot.
        if mask & !DAT_EP_FIELD_EP_ATTR_ALL != 0 {
            return Err(bad_arg(2));
        }
        let cur = e.ep.query().dat()?.attr;
        let new = attr_from_c(3, &p.ep_attr, cur, mask)?;
        e.ep.modify(&new).dat()
    })
}

/// The IPv4 address a consumer passed (`DAT_IA_ADDRESS_PTR`); the port in it is not used
/// (the connection qualifier is the service).
fn remote(addr: &In<DAT_SOCK_ADDR>) -> Result<SocketAddr, DAT_RETURN> {
    let a = addr.get(2)?;
    if a.sa_family as i32 != libc::AF_INET {
        return Err(err(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNSUPPORTED));
    }
    let b = a.sa_data.map(|x| x as u8);
    let ip = Ipv4Addr::new(b[2], b[3], b[4], b[5]);
    Ok(SocketAddr::new(IpAddr::V4(ip), 0))
}

fn pdata(arg: u32, p: &In<u8>, n: DAT_COUNT) -> Result<&[u8], DAT_RETURN> {
    p.slice(arg, n as i64)
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn ep_connect(
    ep: DAT_EP_HANDLE,
    addr: DAT_IA_ADDRESS_PTR,
    qual: DAT_CONN_QUAL,
    time_out: DAT_TIMEOUT,
    pdata_size: DAT_COUNT,
    private_data: DAT_PVOID,
    _qos: DAT_QOS,
    _flags: DAT_CONNECT_FLAGS,
) -> DAT_RETURN {
    c_ptrs!(addr: In);
    let private_data = private_data as *const u8;
    c_ptrs!(private_data: In);
    guard("ep_connect", || {
        let (_, e) = handle::ep(ep)?;
        let to = remote(&addr)?;
        let pd = pdata(6, &private_data, pdata_size)?;
        e.ep.connect(to.ip(), qual, timeout(time_out), pd).dat()
    })
}

pub(crate) unsafe extern "C" fn ep_dup_connect(
    ep: DAT_EP_HANDLE,
    dup: DAT_EP_HANDLE,
    time_out: DAT_TIMEOUT,
    pdata_size: DAT_COUNT,
    private_data: DAT_PVOID,
    _qos: DAT_QOS,
) -> DAT_RETURN {
    let private_data = private_data as *const u8;
    c_ptrs!(private_data: In);
    guard("ep_dup_connect", || {
        let (_, e) = handle::ep(ep)?;
        let (_, d) = handle::ep(dup)?;
        let q = d.ep.query().dat()?;
        let (Some(to), Some(qual)) = (q.remote_address, q.remote_port_qual) else {
            return Err(err(DAT_INVALID_STATE, DAT_INVALID_STATE_EP_UNCONNECTED));
        };
        let pd = pdata(5, &private_data, pdata_size)?;
        e.ep.connect(to.ip(), qual, timeout(time_out), pd).dat()
    })
}

pub(crate) unsafe extern "C" fn ep_common_connect(
    _ep: DAT_EP_HANDLE,
    _addr: DAT_IA_ADDRESS_PTR,
    _time_out: DAT_TIMEOUT,
    _pdata_size: DAT_COUNT,
    _private_data: DAT_PVOID,
) -> DAT_RETURN {
    crate::not_implemented("ep_common_connect")
}

pub(crate) unsafe extern "C" fn ep_disconnect(
    ep: DAT_EP_HANDLE,
    flags: DAT_CLOSE_FLAGS,
) -> DAT_RETURN {
    guard("ep_disconnect", || {
        let (_, e) = handle::ep(ep)?;
        e.ep.disconnect(close_flags(2, flags)?).dat()
    })
}

pub(crate) unsafe extern "C" fn ep_post_send(
    ep: DAT_EP_HANDLE,
    n: DAT_COUNT,
    segs: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    c_ptrs!(segs: In);
    guard("ep_post_send", || {
        let (_, e) = handle::ep(ep)?;
        let v = iov(3, &segs, n as i64)?;
        e.ep.post_send(&v, context_bits(cookie), completion_flags(5, flags)?)
            .dat()
    })
}

pub(crate) unsafe extern "C" fn ep_post_recv(
    ep: DAT_EP_HANDLE,
    n: DAT_COUNT,
    segs: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    c_ptrs!(segs: In);
    guard("ep_post_recv", || {
        let (_, e) = handle::ep(ep)?;
        let v = iov(3, &segs, n as i64)?;
        e.ep.post_recv(&v, context_bits(cookie), completion_flags(5, flags)?)
            .dat()
    })
}

pub(crate) unsafe extern "C" fn ep_post_rdma_read(
    ep: DAT_EP_HANDLE,
    n: DAT_COUNT,
    segs: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    remote: *const DAT_RMR_TRIPLET,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    c_ptrs!(segs: In, remote: In);
    guard("ep_post_rdma_read", || {
        post_rdma(
            ep,
            n,
            &segs,
            cookie,
            &remote,
            flags,
            dapl::Endpoint::post_rdma_read,
        )
    })
}

type RdmaPost = fn(
    &dapl::Endpoint,
    &[dapl::LmrTriplet],
    u64,
    &RmrTriplet,
    dapl::CompletionFlags,
) -> dapl::Result<()>;

/// The body of `ep_post_rdma_read` and `ep_post_rdma_write`.
fn post_rdma(
    ep: DAT_EP_HANDLE,
    n: DAT_COUNT,
    segs: &In<DAT_LMR_TRIPLET>,
    cookie: DAT_DTO_COOKIE,
    remote: &In<DAT_RMR_TRIPLET>,
    flags: DAT_COMPLETION_FLAGS,
    post: RdmaPost,
) -> R {
    let (_, e) = handle::ep(ep)?;
    let v = iov(3, segs, n as i64)?;
    let r = rmr_triplet(5, remote)?;
    post(
        &e.ep,
        &v,
        context_bits(cookie),
        &r,
        completion_flags(6, flags)?,
    )
    .dat()
}

pub(crate) unsafe extern "C" fn ep_post_rdma_write(
    ep: DAT_EP_HANDLE,
    n: DAT_COUNT,
    segs: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    remote: *const DAT_RMR_TRIPLET,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    c_ptrs!(segs: In, remote: In);
    guard("ep_post_rdma_write", || {
        post_rdma(
            ep,
            n,
            &segs,
            cookie,
            &remote,
            flags,
            dapl::Endpoint::post_rdma_write,
        )
    })
}

/// `dat_ep_post_send_with_invalidate` (reached through the provider vtable: libdat2 exports no
/// `dat_ep_post_send_with_invalidate`, only the `DAT_EP_POST_SEND_WITH_INVALIDATE` macro calls
/// it): `invalidate` TRUE sends with Invalidate of the peer's `rmr_context`, FALSE is a plain
/// `ep_post_send` (`rmr_context` ignored); any other value is `DAT_INVALID_PARAMETER`
/// (argument 6).
pub(crate) unsafe extern "C" fn ep_post_send_with_invalidate(
    ep: DAT_EP_HANDLE,
    n: DAT_COUNT,
    segs: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
    invalidate: DAT_BOOLEAN,
    rmr_context: DAT_RMR_CONTEXT,
) -> DAT_RETURN {
    c_ptrs!(segs: In);
    guard("ep_post_send_with_invalidate", || {
        let (_, e) = handle::ep(ep)?;
        let v = iov(3, &segs, n as i64)?;
        let flags = completion_flags(5, flags)?;
        match invalidate {
            DAT_TRUE => e.ep.post_send_with_invalidate(
                &v,
                context_bits(cookie),
                flags,
                dapl::RmrContext(rmr_context),
            ),
            DAT_FALSE => e.ep.post_send(&v, context_bits(cookie), flags),
            _ => return Err(bad_arg(6)),
        }
        .dat()
    })
}

pub(crate) unsafe extern "C" fn ep_post_rdma_read_to_rmr(
    _ep: DAT_EP_HANDLE,
    _local: *const DAT_RMR_TRIPLET,
    _cookie: DAT_DTO_COOKIE,
    _remote: *const DAT_RMR_TRIPLET,
    _flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    crate::not_implemented("ep_post_rdma_read_to_rmr")
}

pub(crate) unsafe extern "C" fn ep_get_status(
    ep: DAT_EP_HANDLE,
    state: *mut DAT_EP_STATE,
    recv_idle: *mut DAT_BOOLEAN,
    request_idle: *mut DAT_BOOLEAN,
) -> DAT_RETURN {
    c_ptrs!(state: Out);
    c_ptrs!(recv_idle: Out);
    c_ptrs!(request_idle: Out);
    guard("ep_get_status", || {
        let (_, e) = handle::ep(ep)?;
        let (s, recv_busy, req_busy) = e.ep.get_status().dat()?;
        let b = |busy: bool| if busy { DAT_FALSE } else { DAT_TRUE };
        state.put_opt(s as DAT_EP_STATE);
        recv_idle.put_opt(b(recv_busy));
        request_idle.put_opt(b(req_busy));
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn ep_free(ep: DAT_EP_HANDLE) -> DAT_RETURN {
    guard("ep_free", || {
        let (h, e) = handle::ep(ep)?;
        e.ep.free().dat()?;
        h.kill();
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn ep_reset(ep: DAT_EP_HANDLE) -> DAT_RETURN {
    guard("ep_reset", || handle::ep(ep)?.1.ep.reset().dat())
}

pub(crate) unsafe extern "C" fn ep_recv_query(
    ep: DAT_EP_HANDLE,
    nbufs: *mut DAT_COUNT,
    span: *mut DAT_COUNT,
) -> DAT_RETURN {
    c_ptrs!(nbufs: Out);
    c_ptrs!(span: Out);
    guard("ep_recv_query", || {
        let (_, e) = handle::ep(ep)?;
        let (n, bytes) = e.ep.recv_query().dat()?;
        nbufs.put_opt(to_count(n));
        span.put_opt(to_count(usize::try_from(bytes).unwrap_or(usize::MAX)));
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn ep_set_watermark(
    ep: DAT_EP_HANDLE,
    soft_high: DAT_COUNT,
    _hard_high: DAT_COUNT,
) -> DAT_RETURN {
    guard("ep_set_watermark", || {
        let (_, e) = handle::ep(ep)?;
        // DAT_WATERMARK_INFINITE is ~0 (-1 as a DAT_COUNT).
        let soft = usize::try_from(soft_high).ok();
        e.ep.set_watermark(soft).dat()
    })
}
