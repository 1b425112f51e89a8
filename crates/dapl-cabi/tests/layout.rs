//! `daplrs::ffi` against the installed DAT 2.0 headers (`/usr/include/dat2`, Debian package
//! `libdapl-dev`).
//!
//! The test writes a C program (generated from the lists below) into a temporary directory,
//! compiles it with `$CC` (default `cc`), and runs it; it prints the size, alignment and field
//! offsets/sizes of every struct and union, the sizes of the typedefs and the values of the
//! constants, as the C compiler sees them. The same C file is also run through the
//! preprocessor, and the `*_FUNC` typedefs and `struct dat_provider` are read from that output
//! to check every vtable signature and the slot order. Each test collects every mismatch and
//! fails once, listing them all. A missing compiler or missing headers fail the tests loudly.
//!
//! Completeness: struct/union field lists are exhaustive patterns (adding a Rust field without
//! listing it here does not compile), and `every_public_item_of_ffi_is_checked_here` fails for
//! any top-level `pub const/type/struct/union/fn` of `src/ffi.rs` not listed below.

use std::any::type_name;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::mem::{align_of, size_of, MaybeUninit};
use std::process::Command;
use std::sync::OnceLock;

use daplrs::ffi;

// ---------------------------------------------------------------------------------------------
// What is checked

/// One struct or union as Rust lays it out, with the C type expression it is compared to.
struct TypeLayout {
    rust: &'static str,
    c_type: &'static str,
    is_union: bool,
    type_name: &'static str,
    size: usize,
    align: usize,
    fields: Vec<FieldLayout>,
}

struct FieldLayout {
    rust: &'static str,
    c_name: &'static str,
    offset: usize,
    size: usize,
    type_name: &'static str,
}

fn size_of_pointee<T>(_: *const T) -> usize {
    size_of::<T>()
}

fn type_name_of_pointee<T>(_: *const T) -> &'static str {
    type_name::<T>()
}

fn strip_raw(s: &'static str) -> &'static str {
    s.strip_prefix("r#").unwrap_or(s)
}

/// Proves at compile time that the field list names every field of a struct (unions: any one
/// field in a pattern, so nothing to prove).
macro_rules! exhaustive {
    (struct $t:ident { $($f:ident),* }) => {
        let _ = |v: &ffi::$t| {
            let ffi::$t { $($f: _),* } = v;
        };
    };
    (union $t:ident { $($f:ident),* }) => {};
}

/// `struct NAME { field, rust_field = "c_field", ... }`, `union NAME = "C type" { ... }`.
macro_rules! layouts {
    ($( $kind:ident $t:ident $(= $cty:literal)? { $( $f:ident $(= $cf:literal)? ),* $(,)? } )*) => {
        fn layouts() -> Vec<TypeLayout> {
            let mut v = Vec::new();
            $(
                exhaustive!($kind $t { $($f),* });
                let c_type: Option<&'static str> = None $(.or(Some($cty)))?;
                let u = MaybeUninit::<ffi::$t>::uninit();
                let p = u.as_ptr();
                v.push(TypeLayout {
                    rust: stringify!($t),
                    c_type: c_type.unwrap_or(stringify!($t)),
                    is_union: stringify!($kind) == "union",
                    type_name: type_name::<ffi::$t>(),
                    size: size_of::<ffi::$t>(),
                    align: align_of::<ffi::$t>(),
                    fields: vec![$({
                        let c_name: Option<&'static str> = None $(.or(Some($cf)))?;
                        // SAFETY: `addr_of!` only computes the address of a field inside `u`
                        // (in bounds, properly aligned); nothing is read or referenced.
                        let fp = unsafe { std::ptr::addr_of!((*p).$f) };
                        FieldLayout {
                            rust: strip_raw(stringify!($f)),
                            c_name: c_name.unwrap_or(strip_raw(stringify!($f))),
                            offset: std::mem::offset_of!(ffi::$t, $f),
                            size: size_of_pointee(fp),
                            type_name: type_name_of_pointee(fp),
                        }
                    }),*],
                });
            )*
            v
        }
    };
}

layouts! {
    struct DAT_COMM { domain, r#type, protocol }
    struct DAT_SOCK_ADDR { sa_family, sa_data }
    struct DAT_SOCK_ADDR6 { sin6_family, sin6_port, sin6_flowinfo, sin6_addr, sin6_scope_id }
    struct DAT_NAMED_ATTR { name, value }
    union DAT_CONTEXT { as_ptr, as_64, as_index }
    struct DAT_LMR_TRIPLET { virtual_address, segment_length, lmr_context }
    struct DAT_RMR_TRIPLET { virtual_address, segment_length, rmr_context }
    struct DAT_RMR_PARAM {
        ia_handle, pz_handle, lmr_triplet, mem_priv, rmr_context, rmr_scope, va_type
    }
    struct DAT_EP_ATTR {
        service_type, max_message_size, max_rdma_size, qos, recv_completion_flags,
        request_completion_flags, max_recv_dtos, max_request_dtos, max_recv_iov,
        max_request_iov, max_rdma_read_in, max_rdma_read_out, srq_soft_hw, max_rdma_read_iov,
        max_rdma_write_iov, ep_transport_specific_count, ep_transport_specific,
        ep_provider_specific_count, ep_provider_specific,
    }
    struct DAT_EP_PARAM {
        ia_handle, ep_state, comm, local_ia_address_ptr, local_port_qual,
        remote_ia_address_ptr, remote_port_qual, pz_handle, recv_evd_handle,
        request_evd_handle, connect_evd_handle, srq_handle, ep_attr,
    }
    struct DAT_SRQ_ATTR { max_recv_dtos, max_recv_iov, low_watermark }
    struct DAT_SRQ_PARAM {
        ia_handle, srq_state, pz_handle, max_recv_dtos, max_recv_iov, low_watermark,
        available_dto_count, outstanding_dto_count,
    }
    struct DAT_PZ_PARAM { ia_handle }
    struct DAT_PSP_PARAM { ia_handle, conn_qual, evd_handle, psp_flags }
    struct DAT_RSP_PARAM { ia_handle, conn_qual, evd_handle, ep_handle }
    struct DAT_CSP_PARAM { ia_handle, comm, address_ptr, evd_handle }
    struct DAT_CR_PARAM {
        remote_ia_address_ptr, remote_port_qual, private_data_size, private_data,
        local_ep_handle,
    }
    struct DAT_DTO_COMPLETION_EVENT_DATA {
        ep_handle, user_cookie, status, transfered_length, operation, rmr_context
    }
    struct DAT_RMR_BIND_COMPLETION_EVENT_DATA { rmr_handle, user_cookie, status }
    union DAT_SP_HANDLE { rsp_handle, psp_handle, csp_handle }
    struct DAT_CR_ARRIVAL_EVENT_DATA {
        sp_handle, local_ia_address_ptr, conn_qual, cr_handle, truncate_flag
    }
    struct DAT_CONNECTION_EVENT_DATA { ep_handle, private_data_size, private_data }
    struct DAT_ASYNCH_ERROR_EVENT_DATA { dat_handle, reason }
    struct DAT_SOFTWARE_EVENT_DATA { pointer }
    union DAT_EVENT_DATA {
        dto_completion_event_data, rmr_completion_event_data, cr_arrival_event_data,
        connect_event_data, asynch_error_event_data, software_event_data,
    }
    struct DAT_EVENT { event_number, evd_handle, event_data, event_extension_data }
    struct DAT_PROVIDER_INFO { ia_name, dapl_version_major, dapl_version_minor, is_thread_safe }
    struct DAT_EVD_PARAM { ia_handle, evd_qlen, evd_state, cno_handle, evd_flags }
    struct DAT_OS_WAIT_PROXY_AGENT { instance_data, proxy_agent_func }
    struct DAT_SHARED_MEMORY { virtual_address, shared_memory_id }
    union DAT_REGION_DESCRIPTION { for_va, for_lmr_handle, for_shared_memory }
    struct DAT_LMR_PARAM {
        ia_handle, mem_type, region_desc, length, pz_handle, mem_priv, va_type, lmr_context,
        rmr_context, registered_size, registered_address,
    }
    union DAT_CNO_PARAM_PROXY = "__typeof__(((DAT_CNO_PARAM *)0)->proxy)" { agent, fd, none }
    struct DAT_CNO_PARAM { ia_handle, proxy_type, proxy }
    struct DAT_IA_ATTR {
        adapter_name, vendor_name, hardware_version_major, hardware_version_minor,
        firmware_version_major, firmware_version_minor, ia_address_ptr, max_eps,
        max_dto_per_ep, max_rdma_read_per_ep_in, max_rdma_read_per_ep_out, max_evds,
        max_evd_qlen, max_iov_segments_per_dto, max_lmrs, max_lmr_block_size,
        max_lmr_virtual_address, max_pzs, max_message_size, max_rdma_size, max_rmrs,
        max_rmr_target_address, max_srqs, max_ep_per_srq, max_recv_per_srq,
        max_iov_segments_per_rdma_read, max_iov_segments_per_rdma_write, max_rdma_read_in,
        max_rdma_read_out, max_rdma_read_per_ep_in_guaranteed,
        max_rdma_read_per_ep_out_guaranteed, zb_supported, extension_supported,
        extension_version, num_transport_attr, transport_attr, num_vendor_attr, vendor_attr,
    }
    struct DAT_PROVIDER_ATTR {
        provider_name, provider_version_major, provider_version_minor, dapl_version_major,
        dapl_version_minor, lmr_mem_types_supported, iov_ownership_on_return,
        dat_qos_supported, completion_flags_supported, is_thread_safe, max_private_data_size,
        supports_multipath, ep_creator, pz_support, optimal_buffer_alignment,
        evd_stream_merging_supported, srq_supported, srq_watermarks_supported,
        srq_ep_pz_difference_supported, srq_info_supported, ep_recv_info_supported,
        lmr_sync_req, dto_async_return_guaranteed, rdma_write_for_rdma_read_req,
        rdma_read_lmr_rmr_context_exposure, rmr_scope_supported, is_signal_safe, ha_supported,
        ha_loadbalancing, num_provider_specific_attr, provider_specific_attr,
    }
    struct DAT_PROVIDER {
        device_name, extension, ia_open_func, ia_query_func, ia_close_func,
        set_consumer_context_func, get_consumer_context_func, get_handle_type_func,
        cno_create_func, cno_modify_agent_func, cno_query_func, cno_free_func, cno_wait_func,
        cr_query_func, cr_accept_func, cr_reject_func, cr_handoff_func, evd_create_func,
        evd_query_func, evd_modify_cno_func, evd_enable_func, evd_disable_func, evd_wait_func,
        evd_resize_func, evd_post_se_func, evd_dequeue_func, evd_free_func, ep_create_func,
        ep_query_func, ep_modify_func, ep_connect_func, ep_dup_connect_func,
        ep_disconnect_func, ep_post_send_func, ep_post_recv_func, ep_post_rdma_read_func,
        ep_post_rdma_write_func, ep_get_status_func, ep_free_func, lmr_create_func,
        lmr_query_func, lmr_free_func, rmr_create_func, rmr_query_func, rmr_bind_func,
        rmr_free_func, psp_create_func, psp_query_func, psp_free_func, rsp_create_func,
        rsp_query_func, rsp_free_func, pz_create_func, pz_query_func, pz_free_func,
        psp_create_any_func, ep_reset_func, evd_set_unwaitable_func, evd_clear_unwaitable_func,
        lmr_sync_rdma_read_func, lmr_sync_rdma_write_func, ep_create_with_srq_func,
        ep_recv_query_func, ep_set_watermark_func, srq_create_func, srq_free_func,
        srq_post_recv_func, srq_query_func, srq_resize_func, srq_set_lw_func, csp_create_func,
        csp_query_func, csp_free_func, ep_common_connect_func, rmr_create_for_ep_func,
        ep_post_send_with_invalidate_func, ep_post_rdma_read_to_rmr_func, cno_fd_create_func,
        cno_trigger_func, ia_ha_related_func, handle_extendedop_func,
    }
    struct DAT_IB_ADDR_HANDLE { ah, qpn, ia_addr }
    struct DAT_IB_IMMED_DATA { data }
    struct DAT_IB_COLLECTIVE_EVENT_DATA { handle, context }
    union DAT_IB_EXTENSION_EVENT_DATA_VAL = "__typeof__(((DAT_IB_EXTENSION_EVENT_DATA *)0)->val)" {
        immed
    }
    // `anon` is C's anonymous union; its offset is that of its member `remote_ah` (its size
    // is compared with `remote_ah`'s, the larger member). The union itself is checked in
    // `the_anonymous_union_of_the_ib_extension_event_data_matches`.
    struct DAT_IB_EXTENSION_EVENT_DATA { r#type, status, val, anon = "remote_ah", context }
    union DAT_IB_EXTENSION_EVENT_DATA_ANON = "" { remote_ah, coll }
}

/// Typedefs compared by size and alignment (and, for plain integer typedefs, signedness).
macro_rules! typedefs {
    (ints: [$($i:ident),* $(,)?] others: [$($o:ident),* $(,)?]) => {
        /// (name, size, align, Some(is_signed) for integer typedefs, Rust type name)
        fn typedefs() -> Vec<(&'static str, usize, usize, Option<bool>, &'static str)> {
            vec![
                $((
                    stringify!($i),
                    size_of::<ffi::$i>(),
                    align_of::<ffi::$i>(),
                    Some(ffi::$i::MIN != 0),
                    type_name::<ffi::$i>(),
                ),)*
                $((
                    stringify!($o),
                    size_of::<ffi::$o>(),
                    align_of::<ffi::$o>(),
                    None,
                    type_name::<ffi::$o>(),
                ),)*
            ]
        }
    };
}

typedefs! {
    ints: [
        DAT_UINT32, DAT_UINT64, DAT_UVERYLONG, DAT_COUNT, DAT_PADDR, DAT_FD, DAT_RETURN,
        DAT_HA_LB, DAT_TIMEOUT, DAT_CONN_QUAL, DAT_PORT_QUAL, DAT_LMR_CONTEXT, DAT_RMR_CONTEXT,
        DAT_VLEN, DAT_VADDR, DAT_SEG_LENGTH, DAT_IA_ATTR_MASK, DAT_EP_PARAM_MASK,
        DAT_PROVIDER_ATTR_MASK, DAT_EXTENDED_OP,
    ]
    others: [
        // C enums (gcc: 4 bytes; Rust u32 or, where the value travels in an int, i32)
        DAT_RETURN_TYPE, DAT_RETURN_SUBTYPE, DAT_BOOLEAN, DAT_COMPLETION_FLAGS, DAT_DTOS,
        DAT_QOS, DAT_CONNECT_FLAGS, DAT_CLOSE_FLAGS, DAT_EVD_FLAGS, DAT_PSP_FLAGS,
        DAT_MEM_PRIV_FLAGS, DAT_VA_TYPE, DAT_RMR_SCOPE, DAT_RMR_PARAM_MASK, DAT_IOV_OWNERSHIP,
        DAT_EP_CREATOR_FOR_PSP, DAT_EXTENSION, DAT_SERVICE_TYPE, DAT_EP_STATE, DAT_SRQ_STATE,
        DAT_SRQ_PARAM_MASK, DAT_PZ_PARAM_MASK, DAT_PSP_PARAM_MASK, DAT_RSP_PARAM_MASK,
        DAT_CSP_PARAM_MASK, DAT_CR_PARAM_MASK, DAT_DTO_COMPLETION_STATUS,
        DAT_RMR_BIND_COMPLETION_STATUS, DAT_IA_ASYNC_ERROR_REASON, DAT_EP_ASYNC_ERROR_REASON,
        DAT_EVD_ASYNC_ERROR_REASON, DAT_SRQ_ASYNC_ERROR_REASON, DAT_LMR_ASYNC_ERROR_REASON,
        DAT_RMR_ASYNC_ERROR_REASON, DAT_PZ_ASYNC_ERROR_REASON, DAT_EVENT_NUMBER, DAT_MEM_TYPE,
        DAT_HANDLE_TYPE, DAT_EVD_STATE, DAT_EVD_PARAM_MASK, DAT_LMR_PARAM_MASK, DAT_PROXY_TYPE,
        DAT_CNO_PARAM_MASK, DAT_PZ_SUPPORT, DAT_HA_RELATIONSHIP, DAT_IB_EVENT_NUMBER, DAT_IB_OP,
        DAT_IB_EXT_TYPE, DAT_IB_STATUS, DAT_IB_RETURN, DAT_IB_DTOS, DAT_IB_HANDLE_TYPE,
        DAT_IB_EVD_EXTENSION_FLAGS, DAT_IB_MEM_PRIV_FLAGS, DAT_IB_SERVICE_TYPE,
        // pointers
        DAT_PVOID, DAT_NAME_PTR, DAT_HANDLE, DAT_CR_HANDLE, DAT_EP_HANDLE, DAT_EVD_HANDLE,
        DAT_IA_HANDLE, DAT_LMR_HANDLE, DAT_PSP_HANDLE, DAT_PZ_HANDLE, DAT_RMR_HANDLE,
        DAT_RSP_HANDLE, DAT_SRQ_HANDLE, DAT_CSP_HANDLE, DAT_CNO_HANDLE, DAT_IA_ADDRESS_PTR,
        DAT_LMR_COOKIE, DAT_IB_COLLECTIVE_HANDLE,
        // aliases of structs/unions
        DAT_DTO_COOKIE, DAT_RMR_COOKIE,
    ]
}

/// Function pointer typedefs, compared with the `typedef RET (*NAME)(...)` of the headers.
macro_rules! fn_typedefs {
    ($($f:ident),* $(,)?) => {
        fn fn_typedefs() -> Vec<(&'static str, &'static str)> {
            vec![$((stringify!($f), type_name::<ffi::$f>()),)*]
        }
    };
}

fn_typedefs! {
    DAT_IA_OPEN_FUNC, DAT_IA_OPENV_FUNC, DAT_IA_CLOSE_FUNC, DAT_IA_QUERY_FUNC,
    DAT_SET_CONSUMER_CONTEXT_FUNC, DAT_GET_CONSUMER_CONTEXT_FUNC, DAT_GET_HANDLE_TYPE_FUNC,
    DAT_CR_QUERY_FUNC, DAT_CR_ACCEPT_FUNC, DAT_CR_REJECT_FUNC, DAT_CR_HANDOFF_FUNC,
    DAT_EVD_RESIZE_FUNC, DAT_EVD_POST_SE_FUNC, DAT_EVD_DEQUEUE_FUNC, DAT_EVD_FREE_FUNC,
    DAT_EVD_QUERY_FUNC, DAT_EP_CREATE_FUNC, DAT_EP_CREATE_WITH_SRQ_FUNC, DAT_EP_QUERY_FUNC,
    DAT_EP_MODIFY_FUNC, DAT_EP_CONNECT_FUNC, DAT_EP_COMMON_CONNECT_FUNC, DAT_EP_DUP_CONNECT_FUNC,
    DAT_EP_DISCONNECT_FUNC, DAT_EP_POST_SEND_FUNC, DAT_EP_POST_SEND_WITH_INVALIDATE_FUNC,
    DAT_EP_POST_RECV_FUNC, DAT_EP_POST_RDMA_READ_FUNC, DAT_EP_POST_RDMA_READ_TO_RMR_FUNC,
    DAT_EP_POST_RDMA_WRITE_FUNC, DAT_EP_GET_STATUS_FUNC, DAT_EP_FREE_FUNC, DAT_EP_RESET_FUNC,
    DAT_EP_RECV_QUERY_FUNC, DAT_EP_SET_WATERMARK_FUNC, DAT_LMR_CREATE_FUNC, DAT_LMR_QUERY_FUNC,
    DAT_LMR_FREE_FUNC, DAT_LMR_SYNC_RDMA_READ_FUNC, DAT_LMR_SYNC_RDMA_WRITE_FUNC,
    DAT_RMR_CREATE_FUNC, DAT_RMR_CREATE_FOR_EP_FUNC, DAT_RMR_QUERY_FUNC, DAT_RMR_BIND_FUNC,
    DAT_RMR_FREE_FUNC, DAT_PSP_CREATE_FUNC, DAT_PSP_CREATE_ANY_FUNC, DAT_PSP_QUERY_FUNC,
    DAT_PSP_FREE_FUNC, DAT_RSP_CREATE_FUNC, DAT_RSP_QUERY_FUNC, DAT_RSP_FREE_FUNC,
    DAT_CSP_CREATE_FUNC, DAT_CSP_QUERY_FUNC, DAT_CSP_FREE_FUNC, DAT_PZ_CREATE_FUNC,
    DAT_PZ_QUERY_FUNC, DAT_PZ_FREE_FUNC, DAT_SRQ_CREATE_FUNC, DAT_SRQ_SET_LW_FUNC,
    DAT_SRQ_FREE_FUNC, DAT_SRQ_QUERY_FUNC, DAT_SRQ_RESIZE_FUNC, DAT_SRQ_POST_RECV_FUNC,
    DAT_IA_HA_RELATED_FUNC, DAT_HANDLE_EXTENDEDOP_FUNC, DAT_EVD_CREATE_FUNC,
    DAT_EVD_MODIFY_CNO_FUNC, DAT_CNO_CREATE_FUNC, DAT_CNO_FD_CREATE_FUNC, DAT_CNO_TRIGGER_FUNC,
    DAT_CNO_MODIFY_AGENT_FUNC, DAT_CNO_QUERY_FUNC, DAT_CNO_FREE_FUNC, DAT_CNO_WAIT_FUNC,
    DAT_EVD_ENABLE_FUNC, DAT_EVD_WAIT_FUNC, DAT_EVD_DISABLE_FUNC, DAT_EVD_SET_UNWAITABLE_FUNC,
    DAT_EVD_CLEAR_UNWAITABLE_FUNC, DAT_AGENT_FUNC, DAT_PROVIDER_INIT_FUNC,
    DAT_PROVIDER_FINI_FUNC,
}

/// Integer constants (compared as values, whatever their Rust integer type).
macro_rules! int_consts {
    ($($c:ident),* $(,)?) => {
        fn int_consts() -> Vec<(&'static str, i128)> {
            vec![$((stringify!($c), ffi::$c as i128),)*]
        }
    };
}

int_consts! {
    // udat_config.h, dat_platform_specific.h
    DAT_VERSION_MAJOR, DAT_VERSION_MINOR, DAT_THREADSAFE, DAT_EXTENSIONS, DAT_AF_INET,
    DAT_AF_INET6, DAT_OPTIMAL_ALIGNMENT,
    // dat_error.h
    DAT_CLASS_ERROR, DAT_CLASS_WARNING, DAT_CLASS_SUCCESS, DAT_TYPE_MASK, DAT_SUBTYPE_MASK,
    DAT_SUCCESS, DAT_ABORT, DAT_CONN_QUAL_IN_USE, DAT_INSUFFICIENT_RESOURCES,
    DAT_INTERNAL_ERROR, DAT_INVALID_HANDLE, DAT_INVALID_PARAMETER, DAT_INVALID_STATE,
    DAT_LENGTH_ERROR, DAT_MODEL_NOT_SUPPORTED, DAT_PROVIDER_NOT_FOUND,
    DAT_PRIVILEGES_VIOLATION, DAT_PROTECTION_VIOLATION, DAT_QUEUE_EMPTY, DAT_QUEUE_FULL,
    DAT_TIMEOUT_EXPIRED, DAT_PROVIDER_ALREADY_REGISTERED, DAT_PROVIDER_IN_USE,
    DAT_INVALID_ADDRESS, DAT_INTERRUPTED_CALL, DAT_CONN_QUAL_UNAVAILABLE, DAT_RESERVED_LMR,
    DAT_PORT_IN_USE, DAT_COMM_NOT_SUPPORTED, DAT_EXTENSION_BASE, DAT_NOT_IMPLEMENTED,
    DAT_NAME_NOT_FOUND,
    DAT_NO_SUBTYPE, DAT_SUB_INTERRUPTED, DAT_RESOURCE_MEMORY, DAT_RESOURCE_DEVICE,
    DAT_RESOURCE_TEP, DAT_RESOURCE_TEVD, DAT_RESOURCE_PROTECTION_DOMAIN,
    DAT_RESOURCE_MEMORY_REGION, DAT_RESOURCE_ERROR_HANDLER, DAT_RESOURCE_CREDITS,
    DAT_RESOURCE_SRQ, DAT_INVALID_HANDLE_IA, DAT_INVALID_HANDLE_EP, DAT_INVALID_HANDLE_LMR,
    DAT_INVALID_HANDLE_RMR, DAT_INVALID_HANDLE_PZ, DAT_INVALID_HANDLE_PSP,
    DAT_INVALID_HANDLE_RSP, DAT_INVALID_HANDLE_CR, DAT_INVALID_HANDLE_CNO,
    DAT_INVALID_HANDLE_EVD_CR, DAT_INVALID_HANDLE_EVD_REQUEST, DAT_INVALID_HANDLE_EVD_RECV,
    DAT_INVALID_HANDLE_EVD_CONN, DAT_INVALID_HANDLE_EVD_ASYNC, DAT_INVALID_HANDLE_SRQ,
    DAT_INVALID_HANDLE_CSP, DAT_INVALID_HANDLE1, DAT_INVALID_HANDLE2, DAT_INVALID_HANDLE3,
    DAT_INVALID_HANDLE4, DAT_INVALID_HANDLE5, DAT_INVALID_HANDLE6, DAT_INVALID_HANDLE7,
    DAT_INVALID_HANDLE8, DAT_INVALID_HANDLE9, DAT_INVALID_HANDLE10, DAT_INVALID_ARG1,
    DAT_INVALID_ARG2, DAT_INVALID_ARG3, DAT_INVALID_ARG4, DAT_INVALID_ARG5, DAT_INVALID_ARG6,
    DAT_INVALID_ARG7, DAT_INVALID_ARG8, DAT_INVALID_ARG9, DAT_INVALID_ARG10,
    DAT_INVALID_STATE_EP_UNCONNECTED, DAT_INVALID_STATE_EP_ACTCONNPENDING,
    DAT_INVALID_STATE_EP_PASSCONNPENDING, DAT_INVALID_STATE_EP_TENTCONNPENDING,
    DAT_INVALID_STATE_EP_CONNECTED, DAT_INVALID_STATE_EP_DISCONNECTED,
    DAT_INVALID_STATE_EP_RESERVED, DAT_INVALID_STATE_EP_COMPLPENDING,
    DAT_INVALID_STATE_EP_DISCPENDING, DAT_INVALID_STATE_EP_PROVIDERCONTROL,
    DAT_INVALID_STATE_EP_NOTREADY, DAT_INVALID_STATE_EP_RECV_WATERMARK,
    DAT_INVALID_STATE_EP_PZ, DAT_INVALID_STATE_EP_EVD_REQUEST, DAT_INVALID_STATE_EP_EVD_RECV,
    DAT_INVALID_STATE_EP_EVD_CONNECT, DAT_INVALID_STATE_EP_UNCONFIGURED,
    DAT_INVALID_STATE_EP_UNCONFRESERVED, DAT_INVALID_STATE_EP_UNCONFPASSIVE,
    DAT_INVALID_STATE_EP_UNCONFTENTATIVE, DAT_INVALID_STATE_CNO_IN_USE,
    DAT_INVALID_STATE_CNO_DEAD, DAT_INVALID_STATE_EVD_OPEN, DAT_INVALID_STATE_EVD_ENABLED,
    DAT_INVALID_STATE_EVD_DISABLED, DAT_INVALID_STATE_EVD_WAITABLE,
    DAT_INVALID_STATE_EVD_UNWAITABLE, DAT_INVALID_STATE_EVD_IN_USE,
    DAT_INVALID_STATE_EVD_CONFIG_NOTIFY, DAT_INVALID_STATE_EVD_CONFIG_SOLICITED,
    DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD, DAT_INVALID_STATE_EVD_WAITER,
    DAT_INVALID_STATE_EVD_ASYNC, DAT_INVALID_STATE_IA_IN_USE, DAT_INVALID_STATE_LMR_IN_USE,
    DAT_INVALID_STATE_LMR_FREE, DAT_INVALID_STATE_PZ_IN_USE, DAT_INVALID_STATE_PZ_FREE,
    DAT_INVALID_STATE_SRQ_OPERATIONAL, DAT_INVALID_STATE_SRQ_ERROR,
    DAT_INVALID_STATE_SRQ_IN_USE, DAT_INVALID_STATE_SRQ_SHUTDOWN, DAT_PRIVILEGES_READ,
    DAT_PRIVILEGES_WRITE, DAT_PRIVILEGES_RDMA_READ, DAT_PRIVILEGES_RDMA_WRITE,
    DAT_PROTECTION_READ, DAT_PROTECTION_WRITE, DAT_PROTECTION_RDMA_READ,
    DAT_PROTECTION_RDMA_WRITE, DAT_INVALID_ADDRESS_UNSUPPORTED,
    DAT_INVALID_ADDRESS_UNREACHABLE, DAT_INVALID_ADDRESS_MALFORMED, DAT_NAME_NOT_REGISTERED,
    DAT_MAJOR_NOT_FOUND, DAT_MINOR_NOT_FOUND, DAT_THREAD_SAFETY_NOT_FOUND,
    // dat.h
    DAT_NAME_MAX_LENGTH, DAT_FALSE, DAT_TRUE, DAT_IB_EXTENSION, DAT_IW_EXTENSION,
    DAT_HA_LB_NONE, DAT_HA_LB_INTERCOMM, DAT_HA_LB_INTRACOMM,
    DAT_COMPLETION_DEFAULT_FLAG, DAT_COMPLETION_SUPPRESS_FLAG,
    DAT_COMPLETION_SOLICITED_WAIT_FLAG, DAT_COMPLETION_UNSIGNALLED_FLAG,
    DAT_COMPLETION_BARRIER_FENCE_FLAG, DAT_COMPLETION_EVD_THRESHOLD_FLAG,
    DAT_COMPLETION_LMR_INVALIDATE_FENCE_FLAG, DAT_TIMEOUT_INFINITE,
    DAT_DTO_SEND, DAT_DTO_RDMA_WRITE, DAT_DTO_RDMA_READ, DAT_DTO_RECEIVE,
    DAT_DTO_RECEIVE_WITH_INVALIDATE, DAT_DTO_BIND_MW, DAT_DTO_LMR_FMR, DAT_DTO_LMR_INVALIDATE,
    DAT_DTO_EXTENSION_BASE,
    DAT_QOS_BEST_EFFORT, DAT_QOS_HIGH_THROUGHPUT, DAT_QOS_LOW_LATENCY, DAT_QOS_ECONOMY,
    DAT_QOS_PREMIUM,
    DAT_CONNECT_DEFAULT_FLAG, DAT_CONNECT_MULTIPATH_FLAG, DAT_CONNECT_MULTIPATH_REQUESTED_FLAG,
    DAT_CONNECT_MULTIPATH_REQUIRED_FLAG,
    DAT_CLOSE_ABRUPT_FLAG, DAT_CLOSE_GRACEFUL_FLAG, DAT_CLOSE_DEFAULT,
    DAT_EVD_SOFTWARE_FLAG, DAT_EVD_CR_FLAG, DAT_EVD_DTO_FLAG, DAT_EVD_CONNECTION_FLAG,
    DAT_EVD_RMR_BIND_FLAG, DAT_EVD_ASYNC_FLAG, DAT_EVD_DEFAULT_FLAG, DAT_EVD_EXTENSION_BASE,
    DAT_PSP_CONSUMER_FLAG, DAT_PSP_PROVIDER_FLAG,
    DAT_MEM_PRIV_NONE_FLAG, DAT_MEM_PRIV_LOCAL_READ_FLAG, DAT_MEM_PRIV_REMOTE_READ_FLAG,
    DAT_MEM_PRIV_LOCAL_WRITE_FLAG, DAT_MEM_PRIV_REMOTE_WRITE_FLAG, DAT_MEM_PRIV_ALL_FLAG,
    DAT_MEM_PRIV_EXTENSION_BASE, DAT_MEM_PRIV_READ_FLAG, DAT_MEM_PRIV_WRITE_FLAG,
    DAT_VA_TYPE_VA, DAT_VA_TYPE_ZB, DAT_RMR_SCOPE_EP, DAT_RMR_SCOPE_PZ, DAT_RMR_SCOPE_ANY,
    DAT_RMR_FIELD_IA_HANDLE, DAT_RMR_FIELD_PZ_HANDLE, DAT_RMR_FIELD_LMR_TRIPLET,
    DAT_RMR_FIELD_MEM_PRIV, DAT_RMR_FIELD_RMR_CONTEXT, DAT_RMR_FIELD_RMR_SCOPE,
    DAT_RMR_FIELD_VA_TYPE, DAT_RMR_FIELD_ALL,
    DAT_IOV_CONSUMER, DAT_IOV_PROVIDER_NOMOD, DAT_IOV_PROVIDER_MOD,
    DAT_PSP_CREATES_EP_NEVER, DAT_PSP_CREATES_EP_IFASKED, DAT_PSP_CREATES_EP_ALWAYS,
    DAT_EXTENSION_NONE, DAT_EXTENSION_IB, DAT_EXTENSION_IW,
    DAT_IA_FIELD_IA_ADAPTER_NAME, DAT_IA_FIELD_IA_VENDOR_NAME,
    DAT_IA_FIELD_IA_HARDWARE_MAJOR_VERSION, DAT_IA_FIELD_IA_HARDWARE_MINOR_VERSION,
    DAT_IA_FIELD_IA_FIRMWARE_MAJOR_VERSION, DAT_IA_FIELD_IA_FIRMWARE_MINOR_VERSION,
    DAT_IA_FIELD_IA_ADDRESS_PTR, DAT_IA_FIELD_IA_MAX_EPS, DAT_IA_FIELD_IA_MAX_DTO_PER_EP,
    DAT_IA_FIELD_IA_MAX_RDMA_READ_PER_EP_IN, DAT_IA_FIELD_IA_MAX_RDMA_READ_PER_EP_OUT,
    DAT_IA_FIELD_IA_MAX_EVDS, DAT_IA_FIELD_IA_MAX_EVD_QLEN,
    DAT_IA_FIELD_IA_MAX_IOV_SEGMENTS_PER_DTO, DAT_IA_FIELD_IA_MAX_LMRS,
    DAT_IA_FIELD_IA_MAX_LMR_BLOCK_SIZE, DAT_IA_FIELD_IA_MAX_LMR_VIRTUAL_ADDRESS,
    DAT_IA_FIELD_IA_MAX_PZS, DAT_IA_FIELD_IA_MAX_MESSAGE_SIZE, DAT_IA_FIELD_IA_MAX_RDMA_SIZE,
    DAT_IA_FIELD_IA_MAX_RMRS, DAT_IA_FIELD_IA_MAX_RMR_TARGET_ADDRESS, DAT_IA_FIELD_IA_MAX_SRQS,
    DAT_IA_FIELD_IA_MAX_EP_PER_SRQ, DAT_IA_FIELD_IA_MAX_RECV_PER_SRQ,
    DAT_IA_FIELD_IA_MAX_IOV_SEGMENTS_PER_RDMA_READ,
    DAT_IA_FIELD_IA_MAX_IOV_SEGMENTS_PER_RDMA_WRITE, DAT_IA_FIELD_IA_MAX_RDMA_READ_IN,
    DAT_IA_FIELD_IA_MAX_RDMA_READ_OUT, DAT_IA_FIELD_IA_MAX_RDMA_READ_PER_EP_IN_GUARANTEED,
    DAT_IA_FIELD_IA_MAX_RDMA_READ_PER_EP_OUT_GUARANTEED, DAT_IA_FIELD_IA_ZB_SUPPORTED,
    DAT_IA_FIELD_IA_EXTENSIONS_SUPPORTED, DAT_IA_FIELD_IA_EXTENSION,
    DAT_IA_FIELD_IA_EXTENSION_VERSION, DAT_IA_FIELD_IA_NUM_TRANSPORT_ATTR,
    DAT_IA_FIELD_IA_TRANSPORT_ATTR, DAT_IA_FIELD_IA_NUM_VENDOR_ATTR,
    DAT_IA_FIELD_IA_VENDOR_ATTR, DAT_IA_FIELD_ALL, DAT_IA_ALL, DAT_IA_FIELD_NONE,
    DAT_IA_FIELD_IA_MAX_MTU_SIZE,
    DAT_SERVICE_TYPE_RC, DAT_SERVICE_TYPE_EXTENSION_BASE,
    DAT_EP_STATE_UNCONNECTED, DAT_EP_STATE_UNCONFIGURED_UNCONNECTED, DAT_EP_STATE_RESERVED,
    DAT_EP_STATE_UNCONFIGURED_RESERVED, DAT_EP_STATE_PASSIVE_CONNECTION_PENDING,
    DAT_EP_STATE_UNCONFIGURED_PASSIVE, DAT_EP_STATE_ACTIVE_CONNECTION_PENDING,
    DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING, DAT_EP_STATE_UNCONFIGURED_TENTATIVE,
    DAT_EP_STATE_CONNECTED, DAT_EP_STATE_DISCONNECT_PENDING, DAT_EP_STATE_DISCONNECTED,
    DAT_EP_STATE_COMPLETION_PENDING, DAT_EP_STATE_CONNECTED_SINGLE_PATH,
    DAT_EP_STATE_CONNECTED_MULTI_PATH, DAT_EP_STATE_ERROR,
    DAT_EP_FIELD_IA_HANDLE, DAT_EP_FIELD_EP_STATE, DAT_EP_FIELD_COMM,
    DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR, DAT_EP_FIELD_LOCAL_PORT_QUAL,
    DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR, DAT_EP_FIELD_REMOTE_PORT_QUAL, DAT_EP_FIELD_PZ_HANDLE,
    DAT_EP_FIELD_RECV_EVD_HANDLE, DAT_EP_FIELD_REQUEST_EVD_HANDLE,
    DAT_EP_FIELD_CONNECT_EVD_HANDLE, DAT_EP_FIELD_SRQ_HANDLE,
    DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE, DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE,
    DAT_EP_FIELD_EP_ATTR_MAX_RDMA_SIZE, DAT_EP_FIELD_EP_ATTR_QOS,
    DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS, DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS,
    DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS, DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS,
    DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV, DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV,
    DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN, DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT,
    DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW, DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IOV,
    DAT_EP_FIELD_EP_ATTR_MAX_RDMA_WRITE_IOV, DAT_EP_FIELD_EP_ATTR_NUM_TRANSPORT_ATTR,
    DAT_EP_FIELD_EP_ATTR_TRANSPORT_SPECIFIC_ATTR, DAT_EP_FIELD_EP_ATTR_NUM_PROVIDER_ATTR,
    DAT_EP_FIELD_EP_ATTR_PROVIDER_SPECIFIC_ATTR, DAT_EP_FIELD_EP_ATTR_ALL, DAT_EP_FIELD_ALL,
    DAT_WATERMARK_INFINITE, DAT_HW_DEFAULT, DAT_SRQ_LW_DEFAULT,
    DAT_SRQ_STATE_ERROR, DAT_SRQ_STATE_OPERATIONAL, DAT_SRQ_STATE_SHUTDOWN, DAT_VALUE_UNKNOWN,
    DAT_SRQ_FIELD_IA_HANDLE, DAT_SRQ_FIELD_SRQ_STATE, DAT_SRQ_FIELD_PZ_HANDLE,
    DAT_SRQ_FIELD_MAX_RECV_DTO, DAT_SRQ_FIELD_MAX_RECV_IOV, DAT_SRQ_FIELD_LOW_WATERMARK,
    DAT_SRQ_FIELD_AVAILABLE_DTO_COUNT, DAT_SRQ_FIELD_OUTSTANDING_DTO_COUNT, DAT_SRQ_FIELD_ALL,
    DAT_PZ_FIELD_IA_HANDLE, DAT_PZ_FIELD_ALL,
    DAT_PSP_FIELD_IA_HANDLE, DAT_PSP_FIELD_CONN_QUAL, DAT_PSP_FIELD_EVD_HANDLE,
    DAT_PSP_FIELD_PSP_FLAGS, DAT_PSP_FIELD_ALL,
    DAT_RSP_FIELD_IA_HANDLE, DAT_RSP_FIELD_CONN_QUAL, DAT_RSP_FIELD_EVD_HANDLE,
    DAT_RSP_FIELD_EP_HANDLE, DAT_RSP_FIELD_ALL,
    DAT_CSP_FIELD_IA_HANDLE, DAT_CSP_FIELD_COMM, DAT_CSP_FIELD_IA_ADDRESS,
    DAT_CSP_FIELD_EVD_HANDLE, DAT_CSP_FIELD_ALL,
    DAT_CR_FIELD_REMOTE_IA_ADDRESS_PTR, DAT_CR_FIELD_REMOTE_PORT_QUAL,
    DAT_CR_FIELD_PRIVATE_DATA_SIZE, DAT_CR_FIELD_PRIVATE_DATA, DAT_CR_FIELD_LOCAL_EP_HANDLE,
    DAT_CR_FIELD_ALL,
    DAT_DTO_SUCCESS, DAT_DTO_ERR_FLUSHED, DAT_DTO_ERR_LOCAL_LENGTH, DAT_DTO_ERR_LOCAL_EP,
    DAT_DTO_ERR_LOCAL_PROTECTION, DAT_DTO_ERR_BAD_RESPONSE, DAT_DTO_ERR_REMOTE_ACCESS,
    DAT_DTO_ERR_REMOTE_RESPONDER, DAT_DTO_ERR_TRANSPORT, DAT_DTO_ERR_RECEIVER_NOT_READY,
    DAT_DTO_ERR_PARTIAL_PACKET, DAT_RMR_OPERATION_FAILED, DAT_DTO_ERR_LOCAL_MM_ERROR,
    DAT_DTO_LENGTH_ERROR, DAT_DTO_FAILURE, DAT_RMR_BIND_SUCCESS, DAT_RMR_BIND_FAILURE,
    DAT_IA_CATASTROPHIC_ERROR, DAT_IA_OTHER_ERROR, DAT_EP_TRANSFER_TO_ERROR,
    DAT_EP_OTHER_ERROR, DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT, DAT_EVD_OVERFLOW_ERROR,
    DAT_EVD_OTHER_ERROR, DAT_SRQ_TRANSFER_TO_ERROR, DAT_SRQ_OTHER_ERROR,
    DAT_SRQ_LOW_WATERMARK_EVENT, DAT_LMR_OTHER_ERROR, DAT_RMR_OTHER_ERROR, DAT_PZ_OTHER_ERROR,
    DAT_DTO_COMPLETION_EVENT, DAT_RMR_BIND_COMPLETION_EVENT, DAT_CONNECTION_REQUEST_EVENT,
    DAT_CONNECTION_EVENT_ESTABLISHED, DAT_CONNECTION_EVENT_PEER_REJECTED,
    DAT_CONNECTION_EVENT_NON_PEER_REJECTED, DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR,
    DAT_CONNECTION_EVENT_DISCONNECTED, DAT_CONNECTION_EVENT_BROKEN,
    DAT_CONNECTION_EVENT_TIMED_OUT, DAT_CONNECTION_EVENT_UNREACHABLE,
    DAT_ASYNC_ERROR_EVD_OVERFLOW, DAT_ASYNC_ERROR_IA_CATASTROPHIC, DAT_ASYNC_ERROR_EP_BROKEN,
    DAT_ASYNC_ERROR_TIMED_OUT, DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR, DAT_HA_DOWN_TO_1,
    DAT_HA_UP_TO_MULTI_PATH, DAT_SOFTWARE_EVENT, DAT_EXTENSION_EVENT,
    DAT_IB_EXTENSION_RANGE_BASE, DAT_IW_EXTENSION_RANGE_BASE,
    DAT_OPEN_EXTENSION_BASE, DAT_CLOSE_EXTENSION_BASE,
    // udat.h
    DAT_MEM_TYPE_VIRTUAL, DAT_MEM_TYPE_LMR, DAT_MEM_TYPE_SHARED_VIRTUAL,
    DAT_HANDLE_TYPE_CR, DAT_HANDLE_TYPE_EP, DAT_HANDLE_TYPE_EVD, DAT_HANDLE_TYPE_IA,
    DAT_HANDLE_TYPE_LMR, DAT_HANDLE_TYPE_PSP, DAT_HANDLE_TYPE_PZ, DAT_HANDLE_TYPE_RMR,
    DAT_HANDLE_TYPE_RSP, DAT_HANDLE_TYPE_CNO, DAT_HANDLE_TYPE_SRQ, DAT_HANDLE_TYPE_CSP,
    DAT_HANDLE_TYPE_EXTENSION_BASE,
    DAT_EVD_STATE_ENABLED, DAT_EVD_STATE_DISABLED, DAT_EVD_STATE_WAITABLE,
    DAT_EVD_STATE_UNWAITABLE, DAT_EVD_STATE_CONFIG_NOTIFY, DAT_EVD_STATE_CONFIG_SOLICITED,
    DAT_EVD_STATE_CONFIG_THRESHOLD,
    DAT_EVD_FIELD_IA_HANDLE, DAT_EVD_FIELD_EVD_QLEN, DAT_EVD_FIELD_EVD_STATE,
    DAT_EVD_FIELD_CNO, DAT_EVD_FIELD_EVD_FLAGS, DAT_EVD_FIELD_ALL,
    DAT_LMR_FIELD_IA_HANDLE, DAT_LMR_FIELD_MEM_TYPE, DAT_LMR_FIELD_REGION_DESC,
    DAT_LMR_FIELD_LENGTH, DAT_LMR_FIELD_PZ_HANDLE, DAT_LMR_FIELD_MEM_PRIV,
    DAT_LMR_FIELD_VA_TYPE, DAT_LMR_FIELD_LMR_CONTEXT, DAT_LMR_FIELD_RMR_CONTEXT,
    DAT_LMR_FIELD_REGISTERED_SIZE, DAT_LMR_FIELD_REGISTERED_ADDRESS, DAT_LMR_FIELD_ALL,
    DAT_LMR_COOKIE_SIZE,
    DAT_PROXY_TYPE_NONE, DAT_PROXY_TYPE_AGENT, DAT_PROXY_TYPE_FD,
    DAT_CNO_FIELD_IA_HANDLE, DAT_CNO_FIELD_PROXY_TYPE, DAT_CNO_FIELD_PROXY, DAT_CNO_FIELD_ALL,
    DAT_PZ_UNIQUE, DAT_PZ_SHAREABLE,
    DAT_PROVIDER_FIELD_PROVIDER_NAME, DAT_PROVIDER_FIELD_PROVIDER_VERSION_MAJOR,
    DAT_PROVIDER_FIELD_PROVIDER_VERSION_MINOR, DAT_PROVIDER_FIELD_DAPL_VERSION_MAJOR,
    DAT_PROVIDER_FIELD_DAPL_VERSION_MINOR, DAT_PROVIDER_FIELD_LMR_MEM_TYPE_SUPPORTED,
    DAT_PROVIDER_FIELD_IOV_OWNERSHIP, DAT_PROVIDER_FIELD_DAT_QOS_SUPPORTED,
    DAT_PROVIDER_FIELD_COMPLETION_FLAGS_SUPPORTED, DAT_PROVIDER_FIELD_IS_THREAD_SAFE,
    DAT_PROVIDER_FIELD_MAX_PRIVATE_DATA_SIZE, DAT_PROVIDER_FIELD_SUPPORTS_MULTIPATH,
    DAT_PROVIDER_FIELD_EP_CREATOR, DAT_PROVIDER_FIELD_PZ_SUPPORT,
    DAT_PROVIDER_FIELD_OPTIMAL_BUFFER_ALIGNMENT,
    DAT_PROVIDER_FIELD_EVD_STREAM_MERGING_SUPPORTED, DAT_PROVIDER_FIELD_SRQ_SUPPORTED,
    DAT_PROVIDER_FIELD_SRQ_WATERMARKS_SUPPORTED,
    DAT_PROVIDER_FIELD_SRQ_EP_PZ_DIFFERENCE_SUPPORTED, DAT_PROVIDER_FIELD_SRQ_INFO_SUPPORTED,
    DAT_PROVIDER_FIELD_EP_RECV_INFO_SUPPORTED, DAT_PROVIDER_FIELD_LMR_SYNC_REQ,
    DAT_PROVIDER_FIELD_DTO_ASYNC_RETURN_GUARANTEED,
    DAT_PROVIDER_FIELD_RDMA_WRITE_FOR_RDMA_READ_REQ,
    DAT_PROVIDER_FIELD_RDMA_READ_LMR_RMR_CONTEXT_EXPOSURE,
    DAT_PROVIDER_FIELD_RMR_SCOPE_SUPPORTED, DAT_PROVIDER_FIELD_IS_SIGNAL_SAFE,
    DAT_PROVIDER_FIELD_HA_SUPPORTED, DAT_PROVIDER_FIELD_HA_LB,
    DAT_PROVIDER_FIELD_NUM_PROVIDER_SPECIFIC_ATTR, DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR,
    DAT_PROVIDER_FIELD_ALL, DAT_PROVIDER_FIELD_NONE,
    // dat_registry.h
    DAT_HA_FALSE, DAT_HA_TRUE, DAT_HA_UNKNOWN, DAT_HA_CONFLICTING, DAT_HA_EXTENSION_BASE,
    // dat_ib_extensions.h
    DAT_IB_EXTENSION_VERSION,
    DAT_IB_DTO_EVENT, DAT_IB_UD_CONNECTION_REQUEST_EVENT, DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED,
    DAT_IB_UD_CONNECTION_REJECT_EVENT, DAT_IB_UD_CONNECTION_ERROR_EVENT,
    DAT_IB_COLLECTIVE_EVENT,
    DAT_IB_FETCH_AND_ADD_OP, DAT_IB_CMP_AND_SWAP_OP, DAT_IB_RDMA_WRITE_IMMED_OP,
    DAT_IB_UD_SEND_OP, DAT_IB_QUERY_COUNTERS_OP, DAT_IB_PRINT_COUNTERS_OP,
    DAT_IB_COLLECTIVE_CREATE_MEMBER_OP, DAT_IB_COLLECTIVE_FREE_MEMBER_OP,
    DAT_IB_COLLECTIVE_CREATE_GROUP_OP, DAT_IB_COLLECTIVE_FREE_GROUP_OP,
    DAT_IB_COLLECTIVE_SET_CLOCK_OP, DAT_IB_COLLECTIVE_READ_CLOCK_OP,
    DAT_IB_COLLECTIVE_SCATTER_OP, DAT_IB_COLLECTIVE_SCATTERV_OP, DAT_IB_COLLECTIVE_GATHER_OP,
    DAT_IB_COLLECTIVE_GATHERV_OP, DAT_IB_COLLECTIVE_ALLGATHER_OP,
    DAT_IB_COLLECTIVE_ALLGATHERV_OP, DAT_IB_COLLECTIVE_ALLTOALL_OP,
    DAT_IB_COLLECTIVE_ALLTOALLV_OP, DAT_IB_COLLECTIVE_REDUCE_OP,
    DAT_IB_COLLECTIVE_ALLREDUCE_OP, DAT_IB_COLLECTIVE_REDUCE_SCATTER_OP,
    DAT_IB_COLLECTIVE_SCAN_OP, DAT_IB_COLLECTIVE_BROADCAST_OP, DAT_IB_COLLECTIVE_BARRIER_OP,
    DAT_IB_START_COUNTERS_OP, DAT_IB_STOP_COUNTERS_OP, DAT_IB_UD_CM_FREE_OP,
    DAT_IB_UD_AH_FREE_OP, DAT_IB_OPEN_QUERY_OP, DAT_IB_CLOSE_QUERY_OP,
    DAT_IB_FETCH_AND_ADD, DAT_IB_CMP_AND_SWAP, DAT_IB_RDMA_WRITE_IMMED,
    DAT_IB_RDMA_WRITE_IMMED_DATA, DAT_IB_RECV_IMMED_DATA, DAT_IB_UD_CONNECT_REQUEST,
    DAT_IB_UD_REMOTE_AH, DAT_IB_UD_PASSIVE_REMOTE_AH, DAT_IB_UD_SEND, DAT_IB_UD_RECV,
    DAT_IB_UD_CONNECT_REJECT, DAT_IB_UD_CONNECT_ERROR, DAT_IB_COLLECTIVE_CREATE_STATUS,
    DAT_IB_COLLECTIVE_CREATE_DATA, DAT_IB_COLLECTIVE_CLOCK_SET_STATUS,
    DAT_IB_COLLECTIVE_SCATTER_STATUS, DAT_IB_COLLECTIVE_SCATTERV_STATUS,
    DAT_IB_COLLECTIVE_GATHER_STATUS, DAT_IB_COLLECTIVE_GATHERV_STATUS,
    DAT_IB_COLLECTIVE_ALLGATHER_STATUS, DAT_IB_COLLECTIVE_ALLGATHERV_STATUS,
    DAT_IB_COLLECTIVE_ALLTOALL_STATUS, DAT_IB_COLLECTIVE_ALLTOALLV_STATUS,
    DAT_IB_COLLECTIVE_REDUCE_STATUS, DAT_IB_COLLECTIVE_ALLREDUCE_STATUS,
    DAT_IB_COLLECTIVE_REDUCE_SCATTER_STATUS, DAT_IB_COLLECTIVE_SCAN_STATUS,
    DAT_IB_COLLECTIVE_BROADCAST_STATUS, DAT_IB_COLLECTIVE_BARRIER_STATUS,
    DAT_OP_SUCCESS, DAT_IB_OP_ERR, DAT_IB_COLL_COMP_ERR, DAT_IB_ERR, DAT_IB_COLLECTIVE_ERR,
    DAT_IB_DTO_RDMA_WRITE_IMMED, DAT_IB_DTO_RECV_IMMED, DAT_IB_DTO_FETCH_ADD,
    DAT_IB_DTO_CMP_SWAP, DAT_IB_DTO_RECV_MSG_IMMED, DAT_IB_DTO_SEND_UD, DAT_IB_DTO_RECV_UD,
    DAT_IB_DTO_RECV_UD_IMMED, DAT_IB_DTO_COLLECTIVES,
    DAT_IB_HANDLE_TYPE_EXT, DAT_IB_HANDLE_TYPE_COLLECTIVE, DAT_IB_EVD_EXTENSION_FLAG,
    DAT_IB_MEM_PRIV_REMOTE_ATOMIC, DAT_IB_SERVICE_TYPE_UD,
}

/// Pointer-valued constants: (name, Rust value as an address).
fn ptr_consts() -> Vec<(&'static str, i128)> {
    vec![
        ("DAT_HANDLE_NULL", ffi::DAT_HANDLE_NULL as usize as i128),
        (
            "DAT_EVD_ASYNC_EXISTS",
            ffi::DAT_EVD_ASYNC_EXISTS as usize as i128,
        ),
        (
            "DAT_EVD_OUT_OF_SCOPE",
            ffi::DAT_EVD_OUT_OF_SCOPE as usize as i128,
        ),
        (
            "DAT_OS_WAIT_PROXY_AGENT_NULL.instance_data",
            ffi::DAT_OS_WAIT_PROXY_AGENT_NULL.instance_data as usize as i128,
        ),
        (
            "DAT_OS_WAIT_PROXY_AGENT_NULL.proxy_agent_func",
            ffi::DAT_OS_WAIT_PROXY_AGENT_NULL
                .proxy_agent_func
                .map_or(0, |f| f as usize as i128),
        ),
    ]
}

/// String constants.
fn str_consts() -> Vec<(&'static str, &'static str)> {
    let s = |c: &'static std::ffi::CStr| c.to_str().expect("ASCII constant");
    vec![
        ("DAT_IB_ATTR_COUNTERS", s(ffi::DAT_IB_ATTR_COUNTERS)),
        (
            "DAT_IB_ATTR_FETCH_AND_ADD",
            s(ffi::DAT_IB_ATTR_FETCH_AND_ADD),
        ),
        ("DAT_IB_ATTR_CMP_AND_SWAP", s(ffi::DAT_IB_ATTR_CMP_AND_SWAP)),
        ("DAT_IB_ATTR_IMMED_DATA", s(ffi::DAT_IB_ATTR_IMMED_DATA)),
        ("DAT_IB_ATTR_UD", s(ffi::DAT_IB_ATTR_UD)),
        (
            "DAT_PROVIDER_INIT_FUNC_STR",
            s(ffi::DAT_PROVIDER_INIT_FUNC_STR),
        ),
        (
            "DAT_PROVIDER_FINI_FUNC_STR",
            s(ffi::DAT_PROVIDER_FINI_FUNC_STR),
        ),
    ]
}

/// Inputs for the `DAT_GET_TYPE`-style macros that ffi.rs has as `const fn`s.
const STATUS_SAMPLES: [u32; 5] = [0, 0x800a_0064, 0x4005_001b, 0x000d_0000, 0xffff_ffff];

/// A `DAT_RETURN -> DAT_RETURN` macro of dat_error.h and its Rust `const fn`.
type MacroFn = (&'static str, fn(ffi::DAT_RETURN) -> ffi::DAT_RETURN);

fn macro_fns() -> Vec<MacroFn> {
    vec![
        ("DAT_IS_WARNING", ffi::DAT_IS_WARNING),
        ("DAT_GET_TYPE", ffi::DAT_GET_TYPE),
        ("DAT_GET_SUBTYPE", ffi::DAT_GET_SUBTYPE),
    ]
}

// ---------------------------------------------------------------------------------------------
// The C side

const C_PRELUDE: &str = "\
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <dat2/udat.h>
#include <dat2/dat_registry.h>
#include <dat2/dat_ib_extensions.h>

#define SIZE(key, T) printf(\"size %s %zu %zu\\n\", key, sizeof(T), _Alignof(T))
#define FIELD(key, T, f) printf(\"field %s %zu %zu\\n\", key, offsetof(T, f), sizeof(((T *)0)->f))
#define INT(key, v) printf(\"const %s %lld\\n\", key, (long long)(v))
#define PTR(key, v) printf(\"const %s %lld\\n\", key, (long long)(intptr_t)(v))
#define STR(key, v) printf(\"const %s %s\\n\", key, (v))
#define SIGNED(key, T) printf(\"signed %s %d\\n\", key, (int)((T)-1 < (T)0))

int main(void)
{
";

/// The C program's `main` body: one `printf` per fact.
fn c_program() -> String {
    let mut c = String::from(C_PRELUDE);
    for t in layouts() {
        if t.c_type.is_empty() {
            continue; // see the_anonymous_union_of_the_ib_extension_event_data_matches
        }
        writeln!(c, "    SIZE(\"{}\", {});", t.rust, t.c_type).unwrap();
        for f in &t.fields {
            let key = format!("{}.{}", t.rust, f.rust);
            writeln!(c, "    FIELD(\"{key}\", {}, {});", t.c_type, f.c_name).unwrap();
        }
    }
    // C's anonymous union in DAT_IB_EXTENSION_EVENT_DATA has no type name: its members are
    // addressed through the parent, its size is the distance from its start to `context`.
    let p = "DAT_IB_EXTENSION_EVENT_DATA";
    c.push_str(&format!(
        "    printf(\"anon size %zu\\n\", offsetof({p}, context) - offsetof({p}, remote_ah));\n\
         \x20   printf(\"anon remote_ah %zu %zu\\n\", offsetof({p}, remote_ah) - offsetof({p}, remote_ah), sizeof((({p} *)0)->remote_ah));\n\
         \x20   printf(\"anon coll %zu %zu\\n\", offsetof({p}, coll) - offsetof({p}, remote_ah), sizeof((({p} *)0)->coll));\n"
    ));
    for (name, ..) in typedefs() {
        writeln!(c, "    SIZE(\"{name}\", {name});").unwrap();
    }
    for (name, _, _, signed, _) in typedefs() {
        if signed.is_some() {
            writeln!(c, "    SIGNED(\"{name}\", {name});").unwrap();
        }
    }
    for (name, _) in int_consts() {
        writeln!(c, "    INT(\"{name}\", {name});").unwrap();
    }
    for (name, _) in ptr_consts() {
        writeln!(c, "    PTR(\"{name}\", {name});").unwrap();
    }
    for (name, _) in str_consts() {
        writeln!(c, "    STR(\"{name}\", {name});").unwrap();
    }
    for (name, _) in macro_fns() {
        for s in STATUS_SAMPLES {
            writeln!(c, "    INT(\"{name}({s:#x})\", {name}({s:#x}u));").unwrap();
        }
    }
    c.push_str("    return 0;\n}\n");
    c
}

fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_string())
}

struct CFacts {
    /// `"<kind> <key>"` -> the rest of the line.
    values: HashMap<String, String>,
    /// The preprocessed C program (for the typedef and `struct dat_provider` text).
    preprocessed: String,
}

/// Compiles and runs the C program once per test process.
fn c_facts() -> &'static CFacts {
    static FACTS: OnceLock<CFacts> = OnceLock::new();
    FACTS.get_or_init(|| {
        let mut dir = tempfile::Builder::new()
            .prefix("daplrs-layout-")
            .tempdir()
            .expect("create temp dir");
        let src = dir.path().join("layout.c");
        let exe = dir.path().join("layout");
        std::fs::write(&src, c_program()).expect("write layout.c");
        let hint = "the C side of this test needs a C compiler ($CC, default `cc`) and the \
                    DAT 2.0 headers in /usr/include/dat2 (Debian/Ubuntu: apt-get install \
                    gcc libdapl-dev)";
        let run = |cmd: &mut Command, what: &str| -> Result<String, String> {
            let out = cmd
                .output()
                .map_err(|e| format!("cannot run {what} ({e}): {hint}"))?;
            if !out.status.success() {
                return Err(format!(
                    "{what} failed ({}), {hint}\n{}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            String::from_utf8(out.stdout).map_err(|e| format!("{what}: output not UTF-8 ({e})"))
        };
        let outputs = (|| {
            run(
                Command::new(cc())
                    .args(["-std=gnu11", "-Wall", "-Werror", "-o"])
                    .arg(&exe)
                    .arg(&src),
                "compiling the C layout program",
            )?;
            let preprocessed = run(
                Command::new(cc())
                    .args(["-std=gnu11", "-E", "-P"])
                    .arg(&src),
                "preprocessing the C layout program",
            )?;
            let stdout = run(&mut Command::new(&exe), "the C layout program")?;
            Ok::<_, String>((preprocessed, stdout))
        })();
        let (preprocessed, stdout) = outputs.unwrap_or_else(|e| {
            // Keep the source (and the program, if built) to look at.
            dir.disable_cleanup(true);
            panic!("{e}\nsource kept at {}", src.display())
        });
        let mut values = HashMap::new();
        for line in stdout.lines() {
            let mut it = line.splitn(3, ' ');
            let (Some(kind), Some(key), Some(rest)) = (it.next(), it.next(), it.next()) else {
                panic!("unexpected line from the C program: {line:?}");
            };
            values.insert(format!("{kind} {key}"), rest.to_string());
        }
        CFacts {
            values,
            preprocessed,
        }
    })
}

/// The C program's value for `key`, or a mismatch note.
fn c_value(key: &str, problems: &mut Vec<String>) -> Option<&'static str> {
    let v = c_facts().values.get(key).map(String::as_str);
    if v.is_none() {
        problems.push(format!("{key}: the C program printed nothing"));
    }
    v
}

fn fail_if_any(what: &str, problems: Vec<String>) {
    assert!(
        problems.is_empty(),
        "{} mismatch(es) between daplrs::ffi and the dat2 headers ({what}):\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}

// ---------------------------------------------------------------------------------------------
// A small tokenizer for the preprocessed C text

fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'#' {
            // a leftover line marker or pragma: skip the line
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c.is_ascii_alphanumeric() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(text[s..i].to_string());
        } else if c == b'"' || c == b'\'' {
            let s = i;
            i += 1;
            while i < b.len() && b[i] != c {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push(text[s..i.min(b.len())].to_string());
        } else {
            out.push((c as char).to_string());
            i += 1;
        }
    }
    out
}

/// `typedef RET (*NAME)(PARAMS);` of the preprocessed headers: NAME -> (RET tokens, params).
fn c_fn_typedefs() -> HashMap<String, (Vec<String>, Vec<Vec<String>>)> {
    let t = tokens(&c_facts().preprocessed);
    let mut out = HashMap::new();
    let mut i = 0;
    while i < t.len() {
        if t[i] != "typedef" {
            i += 1;
            continue;
        }
        // the statement up to its `;` at depth 0
        let start = i + 1;
        let mut depth = 0i32;
        let mut j = start;
        while j < t.len() && !(depth == 0 && t[j] == ";") {
            match t[j].as_str() {
                "(" | "{" | "[" => depth += 1,
                ")" | "}" | "]" => depth -= 1,
                _ => {}
            }
            j += 1;
        }
        let stmt = &t[start..j];
        i = j + 1;
        let Some(lp) = stmt.iter().position(|s| s == "(") else {
            continue;
        };
        // RET ( * NAME ) ( PARAMS )
        if stmt.len() < lp + 6
            || stmt[lp + 1] != "*"
            || stmt[lp + 3] != ")"
            || stmt[lp + 4] != "("
            || stmt.last().map(String::as_str) != Some(")")
        {
            continue;
        }
        let name = stmt[lp + 2].clone();
        let ret = stmt[..lp].to_vec();
        let inner = &stmt[lp + 5..stmt.len() - 1];
        let mut params = Vec::new();
        let mut cur = Vec::new();
        let mut depth = 0i32;
        for tok in inner {
            match tok.as_str() {
                "(" => depth += 1,
                ")" => depth -= 1,
                "," if depth == 0 => {
                    params.push(std::mem::take(&mut cur));
                    continue;
                }
                _ => {}
            }
            cur.push(tok.clone());
        }
        if !cur.is_empty() {
            params.push(cur);
        }
        if params.len() == 1 && params[0] == ["void"] {
            params.clear();
        }
        out.insert(name, (ret, params));
    }
    out
}

/// Members of `struct dat_provider { ... }`: (type tokens, member name), in order.
fn c_provider_members() -> Vec<(Vec<String>, String)> {
    let t = tokens(&c_facts().preprocessed);
    let start = (0..t.len().saturating_sub(2))
        .find(|&i| t[i] == "struct" && t[i + 1] == "dat_provider" && t[i + 2] == "{")
        .expect("`struct dat_provider {` in the preprocessed headers");
    let mut members = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    for tok in &t[start + 3..] {
        match tok.as_str() {
            "}" => break,
            ";" => {
                let name = cur.pop().expect("member name");
                members.push((std::mem::take(&mut cur), name));
            }
            _ => cur.push(tok.clone()),
        }
    }
    members
}

/// The Rust type name a C parameter type must have, through the Rust aliases of the C
/// typedef names (`DAT_EP_HANDLE` -> `*mut core::ffi::c_void`, `const DAT_EVENT *` ->
/// `*const daplrs::ffi::DAT_EVENT`). `const` before the first `*` makes that pointer
/// `*const`; a top-level `const` (`const DAT_PVOID`) does not change the type.
fn rust_type_for_c(
    tokens: &[String],
    names: &HashMap<String, &'static str>,
) -> Result<String, String> {
    let stars = tokens.iter().filter(|t| *t == "*").count();
    let first_star = tokens.iter().position(|t| t == "*").unwrap_or(tokens.len());
    let pointee_const = tokens[..first_star].iter().any(|t| t == "const");
    let base: Vec<&String> = tokens[..first_star]
        .iter()
        .filter(|t| *t != "const")
        .collect();
    if base.len() != 1 || tokens[first_star..].iter().any(|t| t != "*") {
        return Err(format!("cannot read the C type `{}`", tokens.join(" ")));
    }
    let base = base[0].as_str();
    let mut ty = match names.get(base) {
        Some(n) => (*n).to_string(),
        None => return Err(format!("no Rust type known for the C type `{base}`")),
    };
    for level in 0..stars {
        let kind = if level == 0 && pointee_const {
            "*const "
        } else {
            "*mut "
        };
        ty = format!("{kind}{ty}");
    }
    Ok(ty)
}

/// C type name -> Rust type name, for every typedef, struct and union checked here.
fn rust_names_of_c_types() -> HashMap<String, &'static str> {
    let mut m: HashMap<String, &'static str> = HashMap::new();
    for (name, _, _, _, tn) in typedefs() {
        m.insert(name.to_string(), tn);
    }
    for t in layouts() {
        m.insert(t.rust.to_string(), t.type_name);
    }
    for (name, tn) in fn_typedefs() {
        m.insert(name.to_string(), tn);
    }
    m.insert("va_list".into(), type_name::<*mut std::ffi::c_void>());
    m.insert("char".into(), type_name::<std::ffi::c_char>());
    m
}

// ---------------------------------------------------------------------------------------------
// Tests

#[test]
fn every_struct_and_union_matches_the_dat2_headers_in_size_alignment_and_field_offsets() {
    let mut problems = Vec::new();
    let mut fields = 0;
    for t in layouts() {
        if t.c_type.is_empty() {
            continue;
        }
        let key = format!("size {}", t.rust);
        if let Some(c) = c_value(&key, &mut problems) {
            let rust = format!("{} {}", t.size, t.align);
            if c != rust {
                problems.push(format!(
                    "{} (C: {}): C size/align {c}, Rust {rust}",
                    t.rust, t.c_type
                ));
            }
        }
        for f in &t.fields {
            fields += 1;
            let key = format!("field {}.{}", t.rust, f.rust);
            if let Some(c) = c_value(&key, &mut problems) {
                let rust = format!("{} {}", f.offset, f.size);
                if c != rust {
                    problems.push(format!(
                        "{}.{} (C: {}): C offset/size {c}, Rust {rust}",
                        t.rust, f.rust, f.c_name
                    ));
                }
            }
            if t.is_union && f.offset != 0 {
                problems.push(format!(
                    "{}.{}: union member at offset {}",
                    t.rust, f.rust, f.offset
                ));
            }
        }
    }
    assert!(fields > 300, "only {fields} fields checked");
    fail_if_any("struct/union layouts", problems);
}

#[test]
fn the_sizes_and_offsets_the_provider_contract_relies_on_hold() {
    // Numbers from docs (dat2-provider-contract.md, §2.5), restated so a header or ffi change
    // that moves them shows up by name.
    use std::mem::offset_of;
    let expected: &[(&str, usize, usize)] = &[
        ("sizeof DAT_EVENT", size_of::<ffi::DAT_EVENT>(), 120),
        (
            "DAT_EVENT.evd_handle",
            offset_of!(ffi::DAT_EVENT, evd_handle),
            8,
        ),
        (
            "DAT_EVENT.event_data",
            offset_of!(ffi::DAT_EVENT, event_data),
            16,
        ),
        (
            "sizeof DAT_EVENT_DATA",
            size_of::<ffi::DAT_EVENT_DATA>(),
            40,
        ),
        (
            "DAT_EVENT.event_extension_data",
            offset_of!(ffi::DAT_EVENT, event_extension_data),
            56,
        ),
        (
            "sizeof DAT_DTO_COMPLETION_EVENT_DATA",
            size_of::<ffi::DAT_DTO_COMPLETION_EVENT_DATA>(),
            32,
        ),
        (
            "DAT_DTO_COMPLETION_EVENT_DATA.rmr_context",
            offset_of!(ffi::DAT_DTO_COMPLETION_EVENT_DATA, rmr_context),
            28,
        ),
        (
            "sizeof DAT_CR_ARRIVAL_EVENT_DATA",
            size_of::<ffi::DAT_CR_ARRIVAL_EVENT_DATA>(),
            40,
        ),
        (
            "sizeof DAT_CONNECTION_EVENT_DATA",
            size_of::<ffi::DAT_CONNECTION_EVENT_DATA>(),
            24,
        ),
        (
            "sizeof DAT_ASYNCH_ERROR_EVENT_DATA",
            size_of::<ffi::DAT_ASYNCH_ERROR_EVENT_DATA>(),
            16,
        ),
        ("sizeof DAT_IA_ATTR", size_of::<ffi::DAT_IA_ATTR>(), 688),
        (
            "DAT_IA_ATTR.ia_address_ptr",
            offset_of!(ffi::DAT_IA_ATTR, ia_address_ptr),
            528,
        ),
        (
            "DAT_IA_ATTR.max_eps",
            offset_of!(ffi::DAT_IA_ATTR, max_eps),
            536,
        ),
        (
            "DAT_IA_ATTR.extension_supported",
            offset_of!(ffi::DAT_IA_ATTR, extension_supported),
            648,
        ),
        (
            "DAT_IA_ATTR.vendor_attr",
            offset_of!(ffi::DAT_IA_ATTR, vendor_attr),
            680,
        ),
        (
            "sizeof DAT_PROVIDER_ATTR",
            size_of::<ffi::DAT_PROVIDER_ATTR>(),
            520,
        ),
        (
            "DAT_PROVIDER_ATTR.evd_stream_merging_supported",
            offset_of!(ffi::DAT_PROVIDER_ATTR, evd_stream_merging_supported),
            312,
        ),
        (
            "DAT_PROVIDER_ATTR.srq_supported",
            offset_of!(ffi::DAT_PROVIDER_ATTR, srq_supported),
            456,
        ),
        (
            "DAT_PROVIDER_ATTR.num_provider_specific_attr",
            offset_of!(ffi::DAT_PROVIDER_ATTR, num_provider_specific_attr),
            508,
        ),
        (
            "DAT_PROVIDER_ATTR.provider_specific_attr",
            offset_of!(ffi::DAT_PROVIDER_ATTR, provider_specific_attr),
            512,
        ),
        ("sizeof DAT_EP_ATTR", size_of::<ffi::DAT_EP_ATTR>(), 88),
        ("sizeof DAT_EP_PARAM", size_of::<ffi::DAT_EP_PARAM>(), 184),
        (
            "DAT_EP_PARAM.ep_attr",
            offset_of!(ffi::DAT_EP_PARAM, ep_attr),
            96,
        ),
        ("sizeof DAT_CR_PARAM", size_of::<ffi::DAT_CR_PARAM>(), 40),
        ("sizeof DAT_EVD_PARAM", size_of::<ffi::DAT_EVD_PARAM>(), 32),
        ("sizeof DAT_LMR_PARAM", size_of::<ffi::DAT_LMR_PARAM>(), 80),
        ("sizeof DAT_RMR_PARAM", size_of::<ffi::DAT_RMR_PARAM>(), 48),
        ("sizeof DAT_PSP_PARAM", size_of::<ffi::DAT_PSP_PARAM>(), 32),
        ("sizeof DAT_RSP_PARAM", size_of::<ffi::DAT_RSP_PARAM>(), 32),
        ("sizeof DAT_SRQ_PARAM", size_of::<ffi::DAT_SRQ_PARAM>(), 48),
        ("sizeof DAT_SRQ_ATTR", size_of::<ffi::DAT_SRQ_ATTR>(), 12),
        ("sizeof DAT_CNO_PARAM", size_of::<ffi::DAT_CNO_PARAM>(), 32),
        ("sizeof DAT_PZ_PARAM", size_of::<ffi::DAT_PZ_PARAM>(), 8),
        (
            "sizeof DAT_LMR_TRIPLET",
            size_of::<ffi::DAT_LMR_TRIPLET>(),
            16,
        ),
        (
            "sizeof DAT_RMR_TRIPLET",
            size_of::<ffi::DAT_RMR_TRIPLET>(),
            16,
        ),
        ("sizeof DAT_SOCK_ADDR", size_of::<ffi::DAT_SOCK_ADDR>(), 16),
        (
            "sizeof DAT_SOCK_ADDR6",
            size_of::<ffi::DAT_SOCK_ADDR6>(),
            28,
        ),
        ("sizeof DAT_CONTEXT", size_of::<ffi::DAT_CONTEXT>(), 8),
        (
            "sizeof DAT_REGION_DESCRIPTION",
            size_of::<ffi::DAT_REGION_DESCRIPTION>(),
            16,
        ),
        (
            "sizeof DAT_OS_WAIT_PROXY_AGENT",
            size_of::<ffi::DAT_OS_WAIT_PROXY_AGENT>(),
            16,
        ),
        (
            "sizeof DAT_PROVIDER_INFO",
            size_of::<ffi::DAT_PROVIDER_INFO>(),
            268,
        ),
        ("sizeof DAT_PROVIDER", size_of::<ffi::DAT_PROVIDER>(), 648),
        (
            "sizeof DAT_IB_EXTENSION_EVENT_DATA",
            size_of::<ffi::DAT_IB_EXTENSION_EVENT_DATA>(),
            64,
        ),
        (
            "DAT_IB_EXTENSION_EVENT_DATA.val",
            offset_of!(ffi::DAT_IB_EXTENSION_EVENT_DATA, val),
            8,
        ),
        (
            "DAT_IB_EXTENSION_EVENT_DATA.anon",
            offset_of!(ffi::DAT_IB_EXTENSION_EVENT_DATA, anon),
            16,
        ),
        (
            "DAT_IB_EXTENSION_EVENT_DATA.context",
            offset_of!(ffi::DAT_IB_EXTENSION_EVENT_DATA, context),
            56,
        ),
    ];
    let problems: Vec<String> = expected
        .iter()
        .filter(|(_, got, want)| got != want)
        .map(|(what, got, want)| format!("{what}: Rust {got}, contract {want}"))
        .collect();
    // The IB extension data must fit into DAT_EVENT::event_extension_data.
    assert!(size_of::<ffi::DAT_IB_EXTENSION_EVENT_DATA>() <= 8 * 8);
    fail_if_any("contract §2.5 numbers", problems);
}

#[test]
fn the_anonymous_union_of_the_ib_extension_event_data_matches() {
    use std::mem::offset_of;
    let mut problems = Vec::new();
    let anon = size_of::<ffi::DAT_IB_EXTENSION_EVENT_DATA_ANON>();
    let checks = [
        ("anon size", anon.to_string()),
        (
            "anon remote_ah",
            format!(
                "{} {}",
                offset_of!(ffi::DAT_IB_EXTENSION_EVENT_DATA_ANON, remote_ah),
                size_of::<ffi::DAT_IB_ADDR_HANDLE>()
            ),
        ),
        (
            "anon coll",
            format!(
                "{} {}",
                offset_of!(ffi::DAT_IB_EXTENSION_EVENT_DATA_ANON, coll),
                size_of::<ffi::DAT_IB_COLLECTIVE_EVENT_DATA>()
            ),
        ),
    ];
    for (key, rust) in checks {
        if let Some(c) = c_value(key, &mut problems) {
            if c != rust {
                problems.push(format!("{key}: C {c}, Rust {rust}"));
            }
        }
    }
    fail_if_any("DAT_IB_EXTENSION_EVENT_DATA's anonymous union", problems);
}

#[test]
fn every_typedef_matches_the_dat2_headers_in_size_and_signedness() {
    let mut problems = Vec::new();
    for (name, size, align, signed, _) in typedefs() {
        if let Some(c) = c_value(&format!("size {name}"), &mut problems) {
            let rust = format!("{size} {align}");
            if c != rust {
                problems.push(format!("{name}: C size/align {c}, Rust {rust}"));
            }
        }
        if let Some(signed) = signed {
            if let Some(c) = c_value(&format!("signed {name}"), &mut problems) {
                let rust = if signed { "1" } else { "0" };
                if c != rust {
                    problems.push(format!("{name}: C signed={c}, Rust signed={rust}"));
                }
            }
        }
    }
    fail_if_any("typedefs", problems);
}

#[test]
fn every_constant_matches_the_dat2_headers() {
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    let ints = int_consts().into_iter().chain(ptr_consts());
    for (name, rust) in ints {
        assert!(seen.insert(name), "{name} listed twice");
        if let Some(c) = c_value(&format!("const {name}"), &mut problems) {
            if c != rust.to_string() {
                problems.push(format!("{name}: C {c}, Rust {rust} ({rust:#x})"));
            }
        }
    }
    for (name, rust) in str_consts() {
        if let Some(c) = c_value(&format!("const {name}"), &mut problems) {
            if c != rust {
                problems.push(format!("{name}: C {c:?}, Rust {rust:?}"));
            }
        }
    }
    for (name, f) in macro_fns() {
        for s in STATUS_SAMPLES {
            let key = format!("const {name}({s:#x})");
            if let Some(c) = c_value(&key, &mut problems) {
                let rust = f(s);
                if c != rust.to_string() {
                    problems.push(format!("{name}({s:#x}): C {c}, Rust {rust}"));
                }
            }
        }
    }
    assert!(seen.len() > 500, "only {} constants checked", seen.len());
    fail_if_any("constants", problems);
}

#[test]
fn every_function_pointer_typedef_has_the_c_signature_of_the_headers() {
    let c = c_fn_typedefs();
    let names = rust_names_of_c_types();
    let mut problems = Vec::new();
    for (name, rust) in fn_typedefs() {
        let Some((ret, params)) = c.get(name) else {
            problems.push(format!(
                "{name}: no such function pointer typedef in the headers"
            ));
            continue;
        };
        let ret = match ret
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            ["void"] => String::new(),
            _ => match rust_type_for_c(ret, &names) {
                Ok(r) => format!(" -> {r}"),
                Err(e) => {
                    problems.push(format!("{name}: return type: {e}"));
                    continue;
                }
            },
        };
        let mut args = Vec::new();
        for p in params {
            match rust_type_for_c(p, &names) {
                Ok(a) => args.push(a),
                Err(e) => problems.push(format!("{name}: {e}")),
            }
        }
        if args.len() != params.len() {
            continue;
        }
        let want = format!(
            "core::option::Option<unsafe extern \"C\" fn({}){ret}>",
            args.join(", ")
        );
        if rust != want {
            problems.push(format!("{name}:\n      Rust {rust}\n      C    {want}"));
        }
    }
    fail_if_any("function pointer typedefs", problems);
}

#[test]
fn every_provider_slot_is_at_8_times_its_index_in_header_order_with_the_header_type() {
    let layouts = layouts();
    let provider = layouts
        .iter()
        .find(|t| t.rust == "DAT_PROVIDER")
        .expect("DAT_PROVIDER layout");
    let members = c_provider_members();
    let fn_types: HashMap<&str, &str> = fn_typedefs().into_iter().collect();
    let mut problems = Vec::new();
    if size_of::<ffi::DAT_PROVIDER>() != 648 || provider.fields.len() != 81 {
        problems.push(format!(
            "DAT_PROVIDER: {} bytes, {} slots (want 648, 81)",
            size_of::<ffi::DAT_PROVIDER>(),
            provider.fields.len()
        ));
    }
    if members.len() != provider.fields.len() {
        problems.push(format!(
            "struct dat_provider has {} members, DAT_PROVIDER {}",
            members.len(),
            provider.fields.len()
        ));
    }
    for (i, f) in provider.fields.iter().enumerate() {
        if f.offset != 8 * i || f.size != 8 {
            problems.push(format!(
                "slot {i} {}: offset {} size {} (want {} 8)",
                f.rust,
                f.offset,
                f.size,
                8 * i
            ));
        }
        let Some((c_type, c_name)) = members.get(i) else {
            continue;
        };
        if c_name != f.rust {
            problems.push(format!(
                "slot {i}: C member {c_name}, Rust field {}",
                f.rust
            ));
        }
        if let [t] = c_type.as_slice() {
            if t.ends_with("_FUNC") {
                match fn_types.get(t.as_str()) {
                    Some(&want) if want == f.type_name => {}
                    Some(&want) => problems.push(format!(
                        "slot {i} {c_name}: C type {t} is {want}, Rust field is {}",
                        f.type_name
                    )),
                    None => problems.push(format!("slot {i} {c_name}: {t} not in ffi")),
                }
                continue;
            }
        }
        // device_name (const char *) and extension (DAT_PVOID)
        let want = match c_type.join(" ").as_str() {
            "const char *" => type_name::<*const std::ffi::c_char>(),
            "DAT_PVOID" => type_name::<ffi::DAT_PVOID>(),
            other => {
                problems.push(format!("slot {i} {c_name}: unexpected C type {other}"));
                continue;
            }
        };
        if want != f.type_name {
            problems.push(format!(
                "slot {i} {c_name}: Rust {}, want {want}",
                f.type_name
            ));
        }
    }
    fail_if_any("DAT_PROVIDER slots", problems);
}

#[test]
fn every_public_item_of_ffi_is_checked_here() {
    let src = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/ffi.rs"))
        .expect("read src/ffi.rs");
    let mut checked: BTreeSet<String> = BTreeSet::new();
    checked.extend(layouts().iter().map(|t| t.rust.to_string()));
    checked.extend(typedefs().iter().map(|t| t.0.to_string()));
    checked.extend(fn_typedefs().iter().map(|t| t.0.to_string()));
    checked.extend(int_consts().iter().map(|t| t.0.to_string()));
    checked.extend(ptr_consts().iter().map(|t| t.0.to_string()));
    checked.extend(str_consts().iter().map(|t| t.0.to_string()));
    checked.extend(macro_fns().iter().map(|t| t.0.to_string()));
    // Covered as a whole by ptr_consts' two field entries.
    checked.insert("DAT_OS_WAIT_PROXY_AGENT_NULL".into());
    let mut unchecked = Vec::new();
    let mut items = 0;
    for line in src.lines() {
        // top-level items only (extern block members are indented)
        let rest = [
            "pub const fn ",
            "pub const ",
            "pub type ",
            "pub struct ",
            "pub union ",
        ]
        .iter()
        .find_map(|p| line.strip_prefix(p));
        let Some(rest) = rest else { continue };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        items += 1;
        if !checked.contains(&name) {
            unchecked.push(name);
        }
    }
    assert!(items > 600, "only {items} items found in src/ffi.rs");
    assert!(
        unchecked.is_empty(),
        "public items of src/ffi.rs that tests/layout.rs does not check: {unchecked:?}"
    );
}
