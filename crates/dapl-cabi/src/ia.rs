//! Interface Adapter slots, and the handle-generic ones (consumer context, handle type).

use std::ffi::c_char;
use std::sync::{Arc, Mutex};

use dapl::InterfaceAdapter;

use crate::conv::{close_flags, from_count, to_count, to_seg};
use crate::cptr::{bad_arg, zeroed};
use crate::ffi::*;
use crate::handle::{self, sockaddr, Handle, IaC, Obj};
use crate::{err, guard, Dat};

/// The named attributes every IA reports (`provider_specific_attr`).
struct NamedAttrs([DAT_NAMED_ATTR; 6]);
// SAFETY: the pointers are to 'static C string literals, never written.
unsafe impl Sync for NamedAttrs {}

static PROVIDER_SPECIFIC: NamedAttrs = NamedAttrs([
    DAT_NAMED_ATTR {
        name: c"DAT_IB_RDMA_READ".as_ptr(),
        value: c"TRUE".as_ptr(),
    },
    DAT_NAMED_ATTR {
        name: c"DAT_IB_TRANSPORT_MTU".as_ptr(),
        value: c"2048".as_ptr(),
    },
    DAT_NAMED_ATTR {
        name: c"DAT_IB_RDMA_WRITE_IMMED".as_ptr(),
        value: c"TRUE".as_ptr(),
    },
    DAT_NAMED_ATTR {
        name: c"DAT_IB_CMP_AND_SWAP".as_ptr(),
        value: c"FALSE".as_ptr(),
    },
    DAT_NAMED_ATTR {
        name: c"DAT_IB_FETCH_AND_ADD".as_ptr(),
        value: c"FALSE".as_ptr(),
    },
    DAT_NAMED_ATTR {
        name: c"DAPLRS_TRANSPORT".as_ptr(),
        value: c"iWARP".as_ptr(),
    },
]);

/// Copies `s` into a fixed C name buffer, NUL-terminated and truncated to fit.
fn name_into(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len() - 1);
    for (d, b) in dst.iter_mut().zip(s.as_bytes()[..n].iter()) {
        *d = *b as c_char;
    }
    dst[n] = 0;
}

pub(crate) unsafe extern "C" fn ia_open(
    name: DAT_NAME_PTR,
    async_evd_qlen: DAT_COUNT,
    async_evd: *mut DAT_EVD_HANDLE,
    ia: *mut DAT_IA_HANDLE,
) -> DAT_RETURN {
    c_ptrs!(name: In);
    c_ptrs!(async_evd: Out);
    c_ptrs!(ia: Out);
    crate::log::init();
    guard("ia_open", || {
        let name = name.str(1)?;
        let entry = crate::provider::entry(name)
            .ok_or(err(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED))?;
        let link = entry
            .link_name
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let link = link.map_err(|why| {
            eprintln!("daplrs: ia_open({name:?}): cannot open: {why}");
            err(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED)
        })?;
        if ia.is_null() {
            return Err(bad_arg(4));
        }
        let qlen = from_count(2, async_evd_qlen)?;
        let (rust_ia, evd) = InterfaceAdapter::open(&link, qlen.max(1)).dat()?;
        let addr = rust_ia.query().dat()?.ia_address;
        let iac = Arc::new(IaC {
            ia: rust_ia.clone(),
            entry,
            address: Box::new(sockaddr(Some(addr))),
            children: Mutex::new(Vec::new()),
        });
        let h = Handle::create(&entry.provider, None, Obj::Ia(iac));
        let eh = Handle::create(&entry.provider, Some(h), Obj::Evd(evd.clone()));
        async_evd.put_opt(eh.as_ptr());
        ia.put(4, h.as_ptr())
    })
}

pub(crate) unsafe extern "C" fn ia_query(
    ia: DAT_IA_HANDLE,
    async_evd: *mut DAT_EVD_HANDLE,
    ia_attr_mask: DAT_IA_ATTR_MASK,
    ia_attr: *mut DAT_IA_ATTR,
    provider_attr_mask: DAT_PROVIDER_ATTR_MASK,
    provider_attr: *mut DAT_PROVIDER_ATTR,
) -> DAT_RETURN {
    c_ptrs!(async_evd: Out);
    c_ptrs!(ia_attr: Out);
    c_ptrs!(provider_attr: Out);
    guard("ia_query", || {
        let (_, iac) = handle::ia(ia)?;
        if ia_attr.is_null() && ia_attr_mask != 0 {
            return Err(bad_arg(4));
        }
        if provider_attr.is_null() && provider_attr_mask != 0 {
            return Err(bad_arg(6));
        }
        if !async_evd.is_null() {
            let evd = iac.ia.async_evd().and_then(|e| Handle::by_id(e.id()));
            async_evd.put_opt(handle::ptr_or_null(evd));
        }
        // Every field is filled whatever the masks ask for (dtest reads fields it did not ask for).
        let a = iac.ia.query().dat()?;
        if !ia_attr.is_null() {
            let mut c: DAT_IA_ATTR = zeroed();
            name_into(&mut c.adapter_name, &a.adapter_name);
            name_into(&mut c.vendor_name, a.vendor_name);
            c.hardware_version_major = 0;
            c.firmware_version_major = 0;
            c.ia_address_ptr = &*iac.address as *const _ as DAT_IA_ADDRESS_PTR;
            c.max_eps = to_count(a.max_eps);
            c.max_dto_per_ep = to_count(a.max_dto_per_ep);
            c.max_rdma_read_per_ep_in = to_count(a.max_rdma_read_per_ep);
            c.max_rdma_read_per_ep_out = to_count(a.max_rdma_read_per_ep);
            c.max_evds = to_count(a.max_evds);
            c.max_evd_qlen = to_count(a.max_evd_qlen);
            c.max_iov_segments_per_dto = to_count(a.max_iov_segments_per_dto);
            c.max_lmrs = to_count(a.max_lmrs);
            c.max_lmr_block_size = to_seg(a.max_lmr_block_size);
            c.max_lmr_virtual_address = u64::MAX;
            c.max_pzs = to_count(a.max_pzs);
            c.max_message_size = to_seg(a.max_message_size);
            c.max_rdma_size = to_seg(a.max_rdma_size);
            c.max_rmrs = to_count(a.max_rmrs);
            c.max_rmr_target_address = u64::MAX;
            c.max_srqs = to_count(a.max_srqs);
            c.max_ep_per_srq = to_count(a.max_eps);
            c.max_recv_per_srq = to_count(a.max_recv_per_srq);
            c.max_iov_segments_per_rdma_read = to_count(a.max_iov_segments_per_dto);
            c.max_iov_segments_per_rdma_write = to_count(a.max_iov_segments_per_dto);
            c.max_rdma_read_in = to_count(a.max_rdma_read_per_ep);
            c.max_rdma_read_out = to_count(a.max_rdma_read_per_ep);
            c.max_rdma_read_per_ep_in_guaranteed = DAT_TRUE;
            c.max_rdma_read_per_ep_out_guaranteed = DAT_TRUE;
            c.zb_supported = DAT_FALSE;
            c.extension_supported = DAT_EXTENSION_IB;
            c.extension_version = DAT_IB_EXTENSION_VERSION as DAT_COUNT;
            c.num_transport_attr = 0;
            c.transport_attr = std::ptr::null_mut();
            c.num_vendor_attr = 0;
            c.vendor_attr = std::ptr::null_mut();
            ia_attr.put(4, c)?;
        }
        if !provider_attr.is_null() {
            let p = iac.ia.provider_attr().dat()?;
            let mut c: DAT_PROVIDER_ATTR = zeroed();
            // The registry's close key: device_name, 2.0, not thread safe (contract 1.5).
            let name = iac.entry.name();
            name_into(&mut c.provider_name, &name);
            c.provider_version_major = p.provider_version.0;
            c.provider_version_minor = p.provider_version.1;
            c.dapl_version_major = 2;
            c.dapl_version_minor = 0;
            c.is_thread_safe = DAT_FALSE;
            c.lmr_mem_types_supported = DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR;
            c.iov_ownership_on_return = DAT_IOV_CONSUMER;
            c.dat_qos_supported = DAT_QOS_BEST_EFFORT;
            c.completion_flags_supported = DAT_COMPLETION_DEFAULT_FLAG
                | DAT_COMPLETION_SUPPRESS_FLAG
                | DAT_COMPLETION_UNSIGNALLED_FLAG
                | DAT_COMPLETION_SOLICITED_WAIT_FLAG
                | DAT_COMPLETION_BARRIER_FENCE_FLAG;
            c.max_private_data_size = to_count(a.max_private_data_size);
            c.supports_multipath = DAT_FALSE;
            c.ep_creator = DAT_PSP_CREATES_EP_NEVER;
            c.pz_support = DAT_PZ_UNIQUE;
            c.optimal_buffer_alignment = 4096;
            c.srq_supported = if p.srq_supported { DAT_TRUE } else { DAT_FALSE };
            c.srq_watermarks_supported = p.srq_watermarks_supported as DAT_COUNT;
            c.srq_ep_pz_difference_supported = DAT_FALSE;
            c.srq_info_supported = 0;
            c.ep_recv_info_supported = 0;
            c.lmr_sync_req = DAT_FALSE;
            c.dto_async_return_guaranteed = DAT_FALSE;
            c.rdma_write_for_rdma_read_req = DAT_FALSE;
            c.rdma_read_lmr_rmr_context_exposure = DAT_FALSE;
            c.rmr_scope_supported = DAT_RMR_SCOPE_EP;
            c.is_signal_safe = DAT_FALSE;
            c.ha_supported = DAT_FALSE;
            c.num_provider_specific_attr = PROVIDER_SPECIFIC.0.len() as DAT_COUNT;
            c.provider_specific_attr = PROVIDER_SPECIFIC.0.as_ptr() as *mut DAT_NAMED_ATTR;
            provider_attr.put(6, c)?;
        }
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn ia_close(ia: DAT_IA_HANDLE, flags: DAT_CLOSE_FLAGS) -> DAT_RETURN {
    guard("ia_close", || {
        let (h, iac) = handle::ia(ia)?;
        iac.ia.close(close_flags(2, flags)?).dat()?;
        handle::kill_ia(h, &iac);
        Ok(())
    })
}

fn any(h: DAT_HANDLE) -> Result<Handle, DAT_RETURN> {
    let hd = Handle::from_ptr(h).ok_or(err(DAT_INVALID_HANDLE, 0))?;
    if hd.obj().is_none() {
        return Err(hd.kind.invalid());
    }
    Ok(hd)
}

pub(crate) unsafe extern "C" fn set_consumer_context(
    h: DAT_HANDLE,
    context: DAT_CONTEXT,
) -> DAT_RETURN {
    guard("set_consumer_context", || {
        any(h)?
            .context()
            .store(context_bits(context), std::sync::atomic::Ordering::Relaxed);
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn get_consumer_context(
    h: DAT_HANDLE,
    context: *mut DAT_CONTEXT,
) -> DAT_RETURN {
    c_ptrs!(context: Out);
    guard("get_consumer_context", || {
        let v = any(h)?.context().load(std::sync::atomic::Ordering::Relaxed);
        context.put(2, DAT_CONTEXT { as_64: v })
    })
}

pub(crate) unsafe extern "C" fn get_handle_type(
    h: DAT_HANDLE,
    ty: *mut DAT_HANDLE_TYPE,
) -> DAT_RETURN {
    c_ptrs!(ty: Out);
    guard("get_handle_type", || ty.put(2, any(h)?.kind.handle_type()))
}

pub(crate) unsafe extern "C" fn ia_ha_related(
    _ia: DAT_IA_HANDLE,
    _name: DAT_NAME_PTR,
    _answer: *mut DAT_BOOLEAN,
) -> DAT_RETURN {
    crate::not_implemented("ia_ha_related")
}

/// The 64 bits of a `DAT_CONTEXT` (every member of the union is at most 8 bytes at offset 0).
pub(crate) fn context_bits(c: DAT_CONTEXT) -> u64 {
    // SAFETY: DAT_CONTEXT is an 8-byte union of a u64, a pointer and an index; every bit
    // pattern is a valid u64.
    unsafe { c.as_64 }
}
