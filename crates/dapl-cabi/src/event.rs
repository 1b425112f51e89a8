//! `dapl::Event` -> `DAT_EVENT`.

use std::ffi::c_void;
use std::sync::Arc;

use dapl::{AsyncSubject, Event};

use crate::ffi::*;
use crate::handle::{ptr_or_null, sockaddr, CrC, Handle, Obj};

fn handle_of(id: u64) -> DAT_HANDLE {
    ptr_or_null(Handle::by_id(id))
}

/// Stores `pdata` with the EP so the pointer in the event stays valid until the EP is freed,
/// and returns (size, pointer).
fn keep_pdata(ep: DAT_HANDLE, pdata: &[u8]) -> (DAT_COUNT, DAT_PVOID) {
    if pdata.is_empty() {
        return (0, std::ptr::null_mut());
    }
    let Some(Obj::Ep(epc)) = Handle::from_ptr(ep).and_then(|h| h.obj()) else {
        return (0, std::ptr::null_mut());
    };
    let b: Box<[u8]> = pdata.into();
    let p = b.as_ptr() as *mut c_void;
    // Kept for the EP's life, as promised above (a consumer may read an event's private data
    // long after dequeuing it): at most 252 bytes per connection event of the EP.
    let mut kept = epc.event_pdata.lock().unwrap_or_else(|p| p.into_inner());
    kept.push(b);
    (pdata.len() as DAT_COUNT, p)
}

/// The IB extension type of a completion, for the operations only the extension has.
fn ib_ext_type(op: dapl::DtoOp) -> Option<DAT_IB_EXT_TYPE> {
    match op {
        dapl::DtoOp::RdmaWriteImmed => Some(DAT_IB_RDMA_WRITE_IMMED),
        dapl::DtoOp::RecvImmed => Some(DAT_IB_RDMA_WRITE_IMMED_DATA),
        _ => None,
    }
}

/// Converts `ev`, dequeued from the EVD whose handle is `evd`, for the consumer.
pub(crate) fn to_c(evd: Handle, ev: Event) -> DAT_EVENT {
    let mut out: DAT_EVENT = crate::cptr::zeroed();
    out.event_number = ev.number() as DAT_EVENT_NUMBER;
    out.evd_handle = evd.as_ptr();
    match ev {
        Event::Dto(d) => {
            if let Some(ty) = ib_ext_type(d.operation) {
                // The IB extension's completions: own event number, and the extension data
                // (DAT_IB_EXTENSION_EVENT_DATA: type, status, val.immed.data at byte 8) in
                // event_extension_data, laid out here word by word (x86-64, little-endian).
                out.event_number = DAT_IB_DTO_EVENT as DAT_EVENT_NUMBER;
                let status = if d.status == dapl::DtoStatus::Success {
                    0u64
                } else {
                    1
                };
                out.event_extension_data[0] = ty as u64 | status << 32;
                out.event_extension_data[1] = d.immediate.unwrap_or(0) as u64;
            }
            out.event_data.dto_completion_event_data = DAT_DTO_COMPLETION_EVENT_DATA {
                ep_handle: handle_of(d.ep.id()),
                user_cookie: DAT_DTO_COOKIE { as_64: d.cookie.0 },
                status: d.status as DAT_DTO_COMPLETION_STATUS,
                transfered_length: d.transferred_length as DAT_SEG_LENGTH,
                operation: d.operation as DAT_DTOS,
                // Set for a successful DAT_DTO_RECEIVE_WITH_INVALIDATE (undefined otherwise).
                rmr_context: d.rmr_context.map_or(0, |c| c.0),
            };
        }
        Event::RmrBind(b) => {
            out.event_data.rmr_completion_event_data = DAT_RMR_BIND_COMPLETION_EVENT_DATA {
                rmr_handle: handle_of(b.rmr.id()),
                user_cookie: DAT_RMR_COOKIE { as_64: b.cookie.0 },
                status: b.status as DAT_RMR_BIND_COMPLETION_STATUS,
            };
        }
        Event::ConnectionRequest(c) => {
            // The CR is a handle of the IA whose EVD it came from, which its IA's close
            // invalidates: also when its service point was freed before the request was
            // dequeued (its handle gone, `sp_handle` NULL).
            let ia = evd.ia_handle();
            let sp_ptr = ptr_or_null(Handle::by_id(c.sp.id()));
            let remote = c.cr.query().ok();
            let crc = Arc::new(CrC {
                cr: c.cr,
                remote: Box::new(sockaddr(remote.as_ref().map(|r| r.remote.remote_addr))),
                remote_port: remote.as_ref().map_or(0, |r| r.remote.remote_port_qual),
            });
            let provider = evd.provider();
            let cr = Handle::create(provider, Some(ia), Obj::Cr(crc));
            let local = match ia.obj() {
                Some(Obj::Ia(iac)) => &*iac.address as *const _ as DAT_IA_ADDRESS_PTR,
                _ => std::ptr::null_mut(),
            };
            out.event_data.cr_arrival_event_data = DAT_CR_ARRIVAL_EVENT_DATA {
                sp_handle: DAT_SP_HANDLE { psp_handle: sp_ptr },
                local_ia_address_ptr: local,
                conn_qual: c.conn_qual,
                cr_handle: cr.as_ptr(),
                truncate_flag: 0,
            };
        }
        Event::Connection(c) => {
            let ep = handle_of(c.ep.id());
            let (private_data_size, private_data) = keep_pdata(ep, &c.private_data);
            out.event_data.connect_event_data = DAT_CONNECTION_EVENT_DATA {
                ep_handle: ep,
                private_data_size,
                private_data,
            };
        }
        Event::Async(a) => {
            let dat_handle = match &a.subject {
                AsyncSubject::Evd(e) => handle_of(e.id()),
                AsyncSubject::Ep(e) => handle_of(e.id()),
                AsyncSubject::Srq(s) => handle_of(s.id()),
                // The provider's own IA handle, not libdat2's index: the reference provider
                // (dapl_evd_util.c) posts its IA pointer here too.
                AsyncSubject::Ia => evd.ia_handle().as_ptr(),
                // A subject added to dapl later: the IA stands for it.
                _ => evd.ia_handle().as_ptr(),
            };
            out.event_data.asynch_error_event_data = DAT_ASYNCH_ERROR_EVENT_DATA {
                dat_handle,
                reason: a.reason as DAT_COUNT,
            };
        }
        Event::Software(v) => {
            out.event_data.software_event_data = DAT_SOFTWARE_EVENT_DATA {
                pointer: v as usize as DAT_PVOID,
            };
        }
        // An event kind added to dapl later: its number, no data.
        _ => {}
    }
    out
}
