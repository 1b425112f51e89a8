//! C types of `<dat2/udat.h>` (DAT 2.0, `DAT_EXTENSIONS` on) and `<dat2/dat_ib_extensions.h>`
//! for x86_64 Linux, as libdat2 and its consumers see them.
//!
//! Names are exactly those of the C typedefs, struct fields, macros and enum constants. Every C
//! enum is a plain integer alias (`u32`, the type gcc gives an enum without negative values,
//! or `i32` where the value travels in an `int`/`DAT_COUNT`), never a Rust `enum`: values are
//! ORed together and extensions use values outside the declared set. Sizes, field offsets,
//! constant values and the vtable signatures are checked against the installed headers by
//! `tests/layout.rs`.
//!
//! C's anonymous union inside `DAT_IB_EXTENSION_EVENT_DATA` is the named field
//! [`DAT_IB_EXTENSION_EVENT_DATA::anon`]; the unnamed union type of `DAT_CNO_PARAM::proxy` is
//! [`DAT_CNO_PARAM_PROXY`]; the one of `DAT_IB_EXTENSION_EVENT_DATA::val` is
//! [`DAT_IB_EXTENSION_EVENT_DATA_VAL`].
#![allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    missing_docs,
    clippy::upper_case_acronyms
)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};

// ---------------------------------------------------------------------------------------------
// dat_platform_specific.h (Linux)

/// Unsigned host order, 32 bits.
pub type DAT_UINT32 = u32;
/// Unsigned host order, 64 bits.
pub type DAT_UINT64 = u64;
/// `unsigned long long`.
pub type DAT_UVERYLONG = u64;
pub type DAT_PVOID = *mut c_void;
/// `int`.
pub type DAT_COUNT = i32;
pub type DAT_PADDR = DAT_UINT64;
/// DAT file descriptor (`int`).
pub type DAT_FD = c_int;

/// `struct dat_comm`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DAT_COMM {
    pub domain: c_int,
    pub r#type: c_int,
    pub protocol: c_int,
}

/// `struct sockaddr` (16 bytes).
pub type DAT_SOCK_ADDR = libc::sockaddr;
/// `struct sockaddr_in6` (28 bytes).
pub type DAT_SOCK_ADDR6 = libc::sockaddr_in6;
pub const DAT_AF_INET: c_int = libc::AF_INET;
pub const DAT_AF_INET6: c_int = libc::AF_INET6;
/// Performance-optimal buffer alignment.
pub const DAT_OPTIMAL_ALIGNMENT: DAT_UINT32 = 256;

// ---------------------------------------------------------------------------------------------
// udat_config.h

pub const DAT_VERSION_MAJOR: DAT_UINT32 = 2;
pub const DAT_VERSION_MINOR: DAT_UINT32 = 0;
/// `udat_config.h` hard-codes `DAT_THREADSAFE` to `DAT_FALSE`.
pub const DAT_THREADSAFE: DAT_BOOLEAN = DAT_FALSE;
/// `udat_config.h` turns the extensions on (`#define DAT_EXTENSIONS 1`).
pub const DAT_EXTENSIONS: c_int = 1;

// ---------------------------------------------------------------------------------------------
// dat_error.h

/// `class | type | subtype`.
pub type DAT_RETURN = DAT_UINT32;
/// `enum dat_return_type`.
pub type DAT_RETURN_TYPE = c_uint;
/// `enum dat_return_subtype`.
pub type DAT_RETURN_SUBTYPE = c_uint;

pub const DAT_CLASS_ERROR: DAT_RETURN = 0x8000_0000;
pub const DAT_CLASS_WARNING: DAT_RETURN = 0x4000_0000;
pub const DAT_CLASS_SUCCESS: DAT_RETURN = 0x0000_0000;
pub const DAT_TYPE_MASK: DAT_RETURN = 0x3fff_0000;
pub const DAT_SUBTYPE_MASK: DAT_RETURN = 0x0000_ffff;

/// `DAT_IS_WARNING(status)`.
pub const fn DAT_IS_WARNING(status: DAT_RETURN) -> DAT_RETURN {
    status & DAT_CLASS_WARNING
}
/// `DAT_GET_TYPE(status)`.
pub const fn DAT_GET_TYPE(status: DAT_RETURN) -> DAT_RETURN {
    status & DAT_TYPE_MASK
}
/// `DAT_GET_SUBTYPE(status)`.
pub const fn DAT_GET_SUBTYPE(status: DAT_RETURN) -> DAT_RETURN {
    status & DAT_SUBTYPE_MASK
}

// DAT_RETURN_TYPE values (typed DAT_RETURN so they OR straight into a return code).
pub const DAT_SUCCESS: DAT_RETURN = 0x0000_0000;
pub const DAT_ABORT: DAT_RETURN = 0x0001_0000;
pub const DAT_CONN_QUAL_IN_USE: DAT_RETURN = 0x0002_0000;
pub const DAT_INSUFFICIENT_RESOURCES: DAT_RETURN = 0x0003_0000;
pub const DAT_INTERNAL_ERROR: DAT_RETURN = 0x0004_0000;
pub const DAT_INVALID_HANDLE: DAT_RETURN = 0x0005_0000;
pub const DAT_INVALID_PARAMETER: DAT_RETURN = 0x0006_0000;
pub const DAT_INVALID_STATE: DAT_RETURN = 0x0007_0000;
pub const DAT_LENGTH_ERROR: DAT_RETURN = 0x0008_0000;
pub const DAT_MODEL_NOT_SUPPORTED: DAT_RETURN = 0x0009_0000;
pub const DAT_PROVIDER_NOT_FOUND: DAT_RETURN = 0x000A_0000;
pub const DAT_PRIVILEGES_VIOLATION: DAT_RETURN = 0x000B_0000;
pub const DAT_PROTECTION_VIOLATION: DAT_RETURN = 0x000C_0000;
pub const DAT_QUEUE_EMPTY: DAT_RETURN = 0x000D_0000;
pub const DAT_QUEUE_FULL: DAT_RETURN = 0x000E_0000;
pub const DAT_TIMEOUT_EXPIRED: DAT_RETURN = 0x000F_0000;
pub const DAT_PROVIDER_ALREADY_REGISTERED: DAT_RETURN = 0x0010_0000;
pub const DAT_PROVIDER_IN_USE: DAT_RETURN = 0x0011_0000;
pub const DAT_INVALID_ADDRESS: DAT_RETURN = 0x0012_0000;
pub const DAT_INTERRUPTED_CALL: DAT_RETURN = 0x0013_0000;
pub const DAT_CONN_QUAL_UNAVAILABLE: DAT_RETURN = 0x0014_0000;
/// kDAPL only.
pub const DAT_RESERVED_LMR: DAT_RETURN = 0x0015_0000;
pub const DAT_PORT_IN_USE: DAT_RETURN = 0x0016_0000;
pub const DAT_COMM_NOT_SUPPORTED: DAT_RETURN = 0x0017_0000;
/// Start of the extension range `0x1000_0000..=0x3FFF_0000`.
pub const DAT_EXTENSION_BASE: DAT_RETURN = 0x1000_0000;
pub const DAT_NOT_IMPLEMENTED: DAT_RETURN = 0x3FFF_0000;
/// DAT 1.0 name of [`DAT_PROVIDER_NOT_FOUND`].
pub const DAT_NAME_NOT_FOUND: DAT_RETURN = DAT_PROVIDER_NOT_FOUND;

// DAT_RETURN_SUBTYPE values (sequential C enum; typed DAT_RETURN).
pub const DAT_NO_SUBTYPE: DAT_RETURN = 0;
pub const DAT_SUB_INTERRUPTED: DAT_RETURN = 1;
pub const DAT_RESOURCE_MEMORY: DAT_RETURN = 2;
pub const DAT_RESOURCE_DEVICE: DAT_RETURN = 3;
pub const DAT_RESOURCE_TEP: DAT_RETURN = 4;
pub const DAT_RESOURCE_TEVD: DAT_RETURN = 5;
pub const DAT_RESOURCE_PROTECTION_DOMAIN: DAT_RETURN = 6;
pub const DAT_RESOURCE_MEMORY_REGION: DAT_RETURN = 7;
pub const DAT_RESOURCE_ERROR_HANDLER: DAT_RETURN = 8;
pub const DAT_RESOURCE_CREDITS: DAT_RETURN = 9;
pub const DAT_RESOURCE_SRQ: DAT_RETURN = 10;
pub const DAT_INVALID_HANDLE_IA: DAT_RETURN = 11;
pub const DAT_INVALID_HANDLE_EP: DAT_RETURN = 12;
pub const DAT_INVALID_HANDLE_LMR: DAT_RETURN = 13;
pub const DAT_INVALID_HANDLE_RMR: DAT_RETURN = 14;
pub const DAT_INVALID_HANDLE_PZ: DAT_RETURN = 15;
pub const DAT_INVALID_HANDLE_PSP: DAT_RETURN = 16;
pub const DAT_INVALID_HANDLE_RSP: DAT_RETURN = 17;
pub const DAT_INVALID_HANDLE_CR: DAT_RETURN = 18;
pub const DAT_INVALID_HANDLE_CNO: DAT_RETURN = 19;
pub const DAT_INVALID_HANDLE_EVD_CR: DAT_RETURN = 20;
pub const DAT_INVALID_HANDLE_EVD_REQUEST: DAT_RETURN = 21;
pub const DAT_INVALID_HANDLE_EVD_RECV: DAT_RETURN = 22;
pub const DAT_INVALID_HANDLE_EVD_CONN: DAT_RETURN = 23;
pub const DAT_INVALID_HANDLE_EVD_ASYNC: DAT_RETURN = 24;
pub const DAT_INVALID_HANDLE_SRQ: DAT_RETURN = 25;
pub const DAT_INVALID_HANDLE_CSP: DAT_RETURN = 26;
pub const DAT_INVALID_HANDLE1: DAT_RETURN = 27;
pub const DAT_INVALID_HANDLE2: DAT_RETURN = 28;
pub const DAT_INVALID_HANDLE3: DAT_RETURN = 29;
pub const DAT_INVALID_HANDLE4: DAT_RETURN = 30;
pub const DAT_INVALID_HANDLE5: DAT_RETURN = 31;
pub const DAT_INVALID_HANDLE6: DAT_RETURN = 32;
pub const DAT_INVALID_HANDLE7: DAT_RETURN = 33;
pub const DAT_INVALID_HANDLE8: DAT_RETURN = 34;
pub const DAT_INVALID_HANDLE9: DAT_RETURN = 35;
pub const DAT_INVALID_HANDLE10: DAT_RETURN = 36;
pub const DAT_INVALID_ARG1: DAT_RETURN = 37;
pub const DAT_INVALID_ARG2: DAT_RETURN = 38;
pub const DAT_INVALID_ARG3: DAT_RETURN = 39;
pub const DAT_INVALID_ARG4: DAT_RETURN = 40;
pub const DAT_INVALID_ARG5: DAT_RETURN = 41;
pub const DAT_INVALID_ARG6: DAT_RETURN = 42;
pub const DAT_INVALID_ARG7: DAT_RETURN = 43;
pub const DAT_INVALID_ARG8: DAT_RETURN = 44;
pub const DAT_INVALID_ARG9: DAT_RETURN = 45;
pub const DAT_INVALID_ARG10: DAT_RETURN = 46;
pub const DAT_INVALID_STATE_EP_UNCONNECTED: DAT_RETURN = 47;
pub const DAT_INVALID_STATE_EP_ACTCONNPENDING: DAT_RETURN = 48;
pub const DAT_INVALID_STATE_EP_PASSCONNPENDING: DAT_RETURN = 49;
pub const DAT_INVALID_STATE_EP_TENTCONNPENDING: DAT_RETURN = 50;
pub const DAT_INVALID_STATE_EP_CONNECTED: DAT_RETURN = 51;
pub const DAT_INVALID_STATE_EP_DISCONNECTED: DAT_RETURN = 52;
pub const DAT_INVALID_STATE_EP_RESERVED: DAT_RETURN = 53;
pub const DAT_INVALID_STATE_EP_COMPLPENDING: DAT_RETURN = 54;
pub const DAT_INVALID_STATE_EP_DISCPENDING: DAT_RETURN = 55;
pub const DAT_INVALID_STATE_EP_PROVIDERCONTROL: DAT_RETURN = 56;
pub const DAT_INVALID_STATE_EP_NOTREADY: DAT_RETURN = 57;
pub const DAT_INVALID_STATE_EP_RECV_WATERMARK: DAT_RETURN = 58;
pub const DAT_INVALID_STATE_EP_PZ: DAT_RETURN = 59;
pub const DAT_INVALID_STATE_EP_EVD_REQUEST: DAT_RETURN = 60;
pub const DAT_INVALID_STATE_EP_EVD_RECV: DAT_RETURN = 61;
pub const DAT_INVALID_STATE_EP_EVD_CONNECT: DAT_RETURN = 62;
pub const DAT_INVALID_STATE_EP_UNCONFIGURED: DAT_RETURN = 63;
pub const DAT_INVALID_STATE_EP_UNCONFRESERVED: DAT_RETURN = 64;
pub const DAT_INVALID_STATE_EP_UNCONFPASSIVE: DAT_RETURN = 65;
pub const DAT_INVALID_STATE_EP_UNCONFTENTATIVE: DAT_RETURN = 66;
pub const DAT_INVALID_STATE_CNO_IN_USE: DAT_RETURN = 67;
pub const DAT_INVALID_STATE_CNO_DEAD: DAT_RETURN = 68;
pub const DAT_INVALID_STATE_EVD_OPEN: DAT_RETURN = 69;
pub const DAT_INVALID_STATE_EVD_ENABLED: DAT_RETURN = 70;
pub const DAT_INVALID_STATE_EVD_DISABLED: DAT_RETURN = 71;
pub const DAT_INVALID_STATE_EVD_WAITABLE: DAT_RETURN = 72;
pub const DAT_INVALID_STATE_EVD_UNWAITABLE: DAT_RETURN = 73;
pub const DAT_INVALID_STATE_EVD_IN_USE: DAT_RETURN = 74;
pub const DAT_INVALID_STATE_EVD_CONFIG_NOTIFY: DAT_RETURN = 75;
pub const DAT_INVALID_STATE_EVD_CONFIG_SOLICITED: DAT_RETURN = 76;
pub const DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD: DAT_RETURN = 77;
pub const DAT_INVALID_STATE_EVD_WAITER: DAT_RETURN = 78;
pub const DAT_INVALID_STATE_EVD_ASYNC: DAT_RETURN = 79;
pub const DAT_INVALID_STATE_IA_IN_USE: DAT_RETURN = 80;
pub const DAT_INVALID_STATE_LMR_IN_USE: DAT_RETURN = 81;
pub const DAT_INVALID_STATE_LMR_FREE: DAT_RETURN = 82;
pub const DAT_INVALID_STATE_PZ_IN_USE: DAT_RETURN = 83;
pub const DAT_INVALID_STATE_PZ_FREE: DAT_RETURN = 84;
pub const DAT_INVALID_STATE_SRQ_OPERATIONAL: DAT_RETURN = 85;
pub const DAT_INVALID_STATE_SRQ_ERROR: DAT_RETURN = 86;
pub const DAT_INVALID_STATE_SRQ_IN_USE: DAT_RETURN = 87;
pub const DAT_INVALID_STATE_SRQ_SHUTDOWN: DAT_RETURN = 88;
pub const DAT_PRIVILEGES_READ: DAT_RETURN = 89;
pub const DAT_PRIVILEGES_WRITE: DAT_RETURN = 90;
pub const DAT_PRIVILEGES_RDMA_READ: DAT_RETURN = 91;
pub const DAT_PRIVILEGES_RDMA_WRITE: DAT_RETURN = 92;
pub const DAT_PROTECTION_READ: DAT_RETURN = 93;
pub const DAT_PROTECTION_WRITE: DAT_RETURN = 94;
pub const DAT_PROTECTION_RDMA_READ: DAT_RETURN = 95;
pub const DAT_PROTECTION_RDMA_WRITE: DAT_RETURN = 96;
pub const DAT_INVALID_ADDRESS_UNSUPPORTED: DAT_RETURN = 97;
pub const DAT_INVALID_ADDRESS_UNREACHABLE: DAT_RETURN = 98;
pub const DAT_INVALID_ADDRESS_MALFORMED: DAT_RETURN = 99;
pub const DAT_NAME_NOT_REGISTERED: DAT_RETURN = 100;
pub const DAT_MAJOR_NOT_FOUND: DAT_RETURN = 101;
pub const DAT_MINOR_NOT_FOUND: DAT_RETURN = 102;
pub const DAT_THREAD_SAFETY_NOT_FOUND: DAT_RETURN = 103;

// ---------------------------------------------------------------------------------------------
// dat.h: generic types

/// Format for ia_name and attributes (`char *`).
pub type DAT_NAME_PTR = *mut c_char;
pub const DAT_NAME_MAX_LENGTH: usize = 256;

/// `struct dat_named_attr`: one `name = value` attribute.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_NAMED_ATTR {
    pub name: *const c_char,
    pub value: *const c_char,
}

/// `enum dat_boolean`.
pub type DAT_BOOLEAN = c_uint;
pub const DAT_FALSE: DAT_BOOLEAN = 0;
pub const DAT_TRUE: DAT_BOOLEAN = 1;

/// `#define DAT_IB_EXTENSION 1` (same value as [`DAT_EXTENSION_IB`]).
pub const DAT_IB_EXTENSION: DAT_EXTENSION = 1;
/// `#define DAT_IW_EXTENSION 2` (same value as [`DAT_EXTENSION_IW`]).
pub const DAT_IW_EXTENSION: DAT_EXTENSION = 2;

pub type DAT_HA_LB = DAT_UINT32;
pub const DAT_HA_LB_NONE: DAT_HA_LB = 0;
pub const DAT_HA_LB_INTERCOMM: DAT_HA_LB = 1;
pub const DAT_HA_LB_INTRACOMM: DAT_HA_LB = 2;

/// `union dat_context` (8 bytes, passed by value).
#[repr(C)]
#[derive(Clone, Copy)]
pub union DAT_CONTEXT {
    pub as_ptr: DAT_PVOID,
    pub as_64: DAT_UINT64,
    pub as_index: DAT_UVERYLONG,
}
pub type DAT_DTO_COOKIE = DAT_CONTEXT;
pub type DAT_RMR_COOKIE = DAT_CONTEXT;

/// `enum dat_completion_flags`.
pub type DAT_COMPLETION_FLAGS = c_uint;
pub const DAT_COMPLETION_DEFAULT_FLAG: DAT_COMPLETION_FLAGS = 0x00;
pub const DAT_COMPLETION_SUPPRESS_FLAG: DAT_COMPLETION_FLAGS = 0x01;
pub const DAT_COMPLETION_SOLICITED_WAIT_FLAG: DAT_COMPLETION_FLAGS = 0x02;
pub const DAT_COMPLETION_UNSIGNALLED_FLAG: DAT_COMPLETION_FLAGS = 0x04;
pub const DAT_COMPLETION_BARRIER_FENCE_FLAG: DAT_COMPLETION_FLAGS = 0x08;
pub const DAT_COMPLETION_EVD_THRESHOLD_FLAG: DAT_COMPLETION_FLAGS = 0x10;
pub const DAT_COMPLETION_LMR_INVALIDATE_FENCE_FLAG: DAT_COMPLETION_FLAGS = 0x20;

/// Microseconds.
pub type DAT_TIMEOUT = DAT_UINT32;
pub const DAT_TIMEOUT_INFINITE: DAT_TIMEOUT = !0;

// Handles.
pub type DAT_HANDLE = DAT_PVOID;
pub type DAT_CR_HANDLE = DAT_HANDLE;
pub type DAT_EP_HANDLE = DAT_HANDLE;
pub type DAT_EVD_HANDLE = DAT_HANDLE;
pub type DAT_IA_HANDLE = DAT_HANDLE;
pub type DAT_LMR_HANDLE = DAT_HANDLE;
pub type DAT_PSP_HANDLE = DAT_HANDLE;
pub type DAT_PZ_HANDLE = DAT_HANDLE;
pub type DAT_RMR_HANDLE = DAT_HANDLE;
pub type DAT_RSP_HANDLE = DAT_HANDLE;
pub type DAT_SRQ_HANDLE = DAT_HANDLE;
pub type DAT_CSP_HANDLE = DAT_HANDLE;
/// From udat.h.
pub type DAT_CNO_HANDLE = DAT_HANDLE;
pub const DAT_HANDLE_NULL: DAT_HANDLE = std::ptr::null_mut();

/// `enum dat_dtos`.
pub type DAT_DTOS = c_uint;
pub const DAT_DTO_SEND: DAT_DTOS = 0;
pub const DAT_DTO_RDMA_WRITE: DAT_DTOS = 1;
pub const DAT_DTO_RDMA_READ: DAT_DTOS = 2;
pub const DAT_DTO_RECEIVE: DAT_DTOS = 3;
pub const DAT_DTO_RECEIVE_WITH_INVALIDATE: DAT_DTOS = 4;
pub const DAT_DTO_BIND_MW: DAT_DTOS = 5;
pub const DAT_DTO_LMR_FMR: DAT_DTOS = 6;
pub const DAT_DTO_LMR_INVALIDATE: DAT_DTOS = 7;
pub const DAT_DTO_EXTENSION_BASE: DAT_DTOS = 8;

pub type DAT_IA_ADDRESS_PTR = *mut DAT_SOCK_ADDR;
pub type DAT_CONN_QUAL = DAT_UINT64;
pub type DAT_PORT_QUAL = DAT_UINT64;

/// `enum dat_qos`.
pub type DAT_QOS = c_uint;
pub const DAT_QOS_BEST_EFFORT: DAT_QOS = 0x00;
pub const DAT_QOS_HIGH_THROUGHPUT: DAT_QOS = 0x01;
pub const DAT_QOS_LOW_LATENCY: DAT_QOS = 0x02;
pub const DAT_QOS_ECONOMY: DAT_QOS = 0x04;
pub const DAT_QOS_PREMIUM: DAT_QOS = 0x08;

/// `enum dat_connect_flags`.
pub type DAT_CONNECT_FLAGS = c_uint;
pub const DAT_CONNECT_DEFAULT_FLAG: DAT_CONNECT_FLAGS = 0x00;
/// The enum member's real name: a macro renames `DAT_CONNECT_MULTIPATH_REQUESTED_FLAG` to it.
pub const DAT_CONNECT_MULTIPATH_FLAG: DAT_CONNECT_FLAGS = 0x01;
pub const DAT_CONNECT_MULTIPATH_REQUESTED_FLAG: DAT_CONNECT_FLAGS = DAT_CONNECT_MULTIPATH_FLAG;
pub const DAT_CONNECT_MULTIPATH_REQUIRED_FLAG: DAT_CONNECT_FLAGS = 0x02;

/// `enum dat_close_flags`.
pub type DAT_CLOSE_FLAGS = c_uint;
pub const DAT_CLOSE_ABRUPT_FLAG: DAT_CLOSE_FLAGS = 0x00;
pub const DAT_CLOSE_GRACEFUL_FLAG: DAT_CLOSE_FLAGS = 0x01;
pub const DAT_CLOSE_DEFAULT: DAT_CLOSE_FLAGS = DAT_CLOSE_ABRUPT_FLAG;

/// `enum dat_evd_flags`.
pub type DAT_EVD_FLAGS = c_uint;
pub const DAT_EVD_SOFTWARE_FLAG: DAT_EVD_FLAGS = 0x001;
pub const DAT_EVD_CR_FLAG: DAT_EVD_FLAGS = 0x010;
pub const DAT_EVD_DTO_FLAG: DAT_EVD_FLAGS = 0x020;
pub const DAT_EVD_CONNECTION_FLAG: DAT_EVD_FLAGS = 0x040;
pub const DAT_EVD_RMR_BIND_FLAG: DAT_EVD_FLAGS = 0x080;
pub const DAT_EVD_ASYNC_FLAG: DAT_EVD_FLAGS = 0x100;
pub const DAT_EVD_DEFAULT_FLAG: DAT_EVD_FLAGS = 0x1F0;
pub const DAT_EVD_EXTENSION_BASE: DAT_EVD_FLAGS = 0x200;

/// `enum dat_psp_flags`.
pub type DAT_PSP_FLAGS = c_uint;
pub const DAT_PSP_CONSUMER_FLAG: DAT_PSP_FLAGS = 0x00;
pub const DAT_PSP_PROVIDER_FLAG: DAT_PSP_FLAGS = 0x01;

pub type DAT_LMR_CONTEXT = DAT_UINT32;
pub type DAT_RMR_CONTEXT = DAT_UINT32;
pub type DAT_VLEN = DAT_UINT64;
pub type DAT_VADDR = DAT_UINT64;
/// The maximum data segment length (32 bits).
pub type DAT_SEG_LENGTH = DAT_UINT32;

/// `struct dat_lmr_triplet` (16 bytes).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DAT_LMR_TRIPLET {
    pub virtual_address: DAT_VADDR,
    pub segment_length: DAT_SEG_LENGTH,
    pub lmr_context: DAT_LMR_CONTEXT,
}

/// `struct dat_rmr_triplet` (16 bytes).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DAT_RMR_TRIPLET {
    pub virtual_address: DAT_VADDR,
    pub segment_length: DAT_SEG_LENGTH,
    pub rmr_context: DAT_RMR_CONTEXT,
}

/// `enum dat_mem_priv_flags`.
pub type DAT_MEM_PRIV_FLAGS = c_uint;
pub const DAT_MEM_PRIV_NONE_FLAG: DAT_MEM_PRIV_FLAGS = 0x00;
pub const DAT_MEM_PRIV_LOCAL_READ_FLAG: DAT_MEM_PRIV_FLAGS = 0x01;
pub const DAT_MEM_PRIV_REMOTE_READ_FLAG: DAT_MEM_PRIV_FLAGS = 0x02;
pub const DAT_MEM_PRIV_LOCAL_WRITE_FLAG: DAT_MEM_PRIV_FLAGS = 0x10;
pub const DAT_MEM_PRIV_REMOTE_WRITE_FLAG: DAT_MEM_PRIV_FLAGS = 0x20;
pub const DAT_MEM_PRIV_ALL_FLAG: DAT_MEM_PRIV_FLAGS = 0x33;
pub const DAT_MEM_PRIV_EXTENSION_BASE: DAT_MEM_PRIV_FLAGS = 0x40;
pub const DAT_MEM_PRIV_READ_FLAG: DAT_MEM_PRIV_FLAGS =
    DAT_MEM_PRIV_LOCAL_READ_FLAG | DAT_MEM_PRIV_REMOTE_READ_FLAG;
pub const DAT_MEM_PRIV_WRITE_FLAG: DAT_MEM_PRIV_FLAGS =
    DAT_MEM_PRIV_LOCAL_WRITE_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG;

/// `enum dat_va_type`.
pub type DAT_VA_TYPE = c_uint;
pub const DAT_VA_TYPE_VA: DAT_VA_TYPE = 0x0;
pub const DAT_VA_TYPE_ZB: DAT_VA_TYPE = 0x1;

/// `enum dat_rmr_scope`.
pub type DAT_RMR_SCOPE = c_uint;
pub const DAT_RMR_SCOPE_EP: DAT_RMR_SCOPE = 0;
pub const DAT_RMR_SCOPE_PZ: DAT_RMR_SCOPE = 1;
pub const DAT_RMR_SCOPE_ANY: DAT_RMR_SCOPE = 2;

/// `struct dat_rmr_param` (48 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_RMR_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub pz_handle: DAT_PZ_HANDLE,
    pub lmr_triplet: DAT_LMR_TRIPLET,
    pub mem_priv: DAT_MEM_PRIV_FLAGS,
    pub rmr_context: DAT_RMR_CONTEXT,
    pub rmr_scope: DAT_RMR_SCOPE,
    pub va_type: DAT_VA_TYPE,
}

/// `enum dat_rmr_param_mask`.
pub type DAT_RMR_PARAM_MASK = c_uint;
pub const DAT_RMR_FIELD_IA_HANDLE: DAT_RMR_PARAM_MASK = 0x01;
pub const DAT_RMR_FIELD_PZ_HANDLE: DAT_RMR_PARAM_MASK = 0x02;
pub const DAT_RMR_FIELD_LMR_TRIPLET: DAT_RMR_PARAM_MASK = 0x04;
pub const DAT_RMR_FIELD_MEM_PRIV: DAT_RMR_PARAM_MASK = 0x08;
pub const DAT_RMR_FIELD_RMR_CONTEXT: DAT_RMR_PARAM_MASK = 0x10;
pub const DAT_RMR_FIELD_RMR_SCOPE: DAT_RMR_PARAM_MASK = 0x20;
pub const DAT_RMR_FIELD_VA_TYPE: DAT_RMR_PARAM_MASK = 0x40;
pub const DAT_RMR_FIELD_ALL: DAT_RMR_PARAM_MASK = 0x7F;

/// `enum dat_iov_ownership`.
pub type DAT_IOV_OWNERSHIP = c_uint;
pub const DAT_IOV_CONSUMER: DAT_IOV_OWNERSHIP = 0x0;
pub const DAT_IOV_PROVIDER_NOMOD: DAT_IOV_OWNERSHIP = 0x1;
pub const DAT_IOV_PROVIDER_MOD: DAT_IOV_OWNERSHIP = 0x2;

/// `enum dat_ep_creator_for_psp`.
pub type DAT_EP_CREATOR_FOR_PSP = c_uint;
pub const DAT_PSP_CREATES_EP_NEVER: DAT_EP_CREATOR_FOR_PSP = 0;
pub const DAT_PSP_CREATES_EP_IFASKED: DAT_EP_CREATOR_FOR_PSP = 1;
pub const DAT_PSP_CREATES_EP_ALWAYS: DAT_EP_CREATOR_FOR_PSP = 2;

/// `enum dat_extension`: what `DAT_IA_ATTR::extension_supported` reports.
pub type DAT_EXTENSION = c_uint;
pub const DAT_EXTENSION_NONE: DAT_EXTENSION = 0;
pub const DAT_EXTENSION_IB: DAT_EXTENSION = 1;
pub const DAT_EXTENSION_IW: DAT_EXTENSION = 2;

/// IA attribute mask (64 bits).
pub type DAT_IA_ATTR_MASK = DAT_UINT64;
pub const DAT_IA_FIELD_IA_ADAPTER_NAME: DAT_IA_ATTR_MASK = 0x000000001;
pub const DAT_IA_FIELD_IA_VENDOR_NAME: DAT_IA_ATTR_MASK = 0x000000002;
pub const DAT_IA_FIELD_IA_HARDWARE_MAJOR_VERSION: DAT_IA_ATTR_MASK = 0x000000004;
pub const DAT_IA_FIELD_IA_HARDWARE_MINOR_VERSION: DAT_IA_ATTR_MASK = 0x000000008;
pub const DAT_IA_FIELD_IA_FIRMWARE_MAJOR_VERSION: DAT_IA_ATTR_MASK = 0x000000010;
pub const DAT_IA_FIELD_IA_FIRMWARE_MINOR_VERSION: DAT_IA_ATTR_MASK = 0x000000020;
pub const DAT_IA_FIELD_IA_ADDRESS_PTR: DAT_IA_ATTR_MASK = 0x000000040;
pub const DAT_IA_FIELD_IA_MAX_EPS: DAT_IA_ATTR_MASK = 0x000000080;
pub const DAT_IA_FIELD_IA_MAX_DTO_PER_EP: DAT_IA_ATTR_MASK = 0x000000100;
pub const DAT_IA_FIELD_IA_MAX_RDMA_READ_PER_EP_IN: DAT_IA_ATTR_MASK = 0x000000200;
pub const DAT_IA_FIELD_IA_MAX_RDMA_READ_PER_EP_OUT: DAT_IA_ATTR_MASK = 0x000000400;
pub const DAT_IA_FIELD_IA_MAX_EVDS: DAT_IA_ATTR_MASK = 0x000000800;
pub const DAT_IA_FIELD_IA_MAX_EVD_QLEN: DAT_IA_ATTR_MASK = 0x000001000;
pub const DAT_IA_FIELD_IA_MAX_IOV_SEGMENTS_PER_DTO: DAT_IA_ATTR_MASK = 0x000002000;
pub const DAT_IA_FIELD_IA_MAX_LMRS: DAT_IA_ATTR_MASK = 0x000004000;
pub const DAT_IA_FIELD_IA_MAX_LMR_BLOCK_SIZE: DAT_IA_ATTR_MASK = 0x000008000;
pub const DAT_IA_FIELD_IA_MAX_LMR_VIRTUAL_ADDRESS: DAT_IA_ATTR_MASK = 0x000010000;
pub const DAT_IA_FIELD_IA_MAX_PZS: DAT_IA_ATTR_MASK = 0x000020000;
pub const DAT_IA_FIELD_IA_MAX_MESSAGE_SIZE: DAT_IA_ATTR_MASK = 0x000040000;
pub const DAT_IA_FIELD_IA_MAX_RDMA_SIZE: DAT_IA_ATTR_MASK = 0x000080000;
pub const DAT_IA_FIELD_IA_MAX_RMRS: DAT_IA_ATTR_MASK = 0x000100000;
pub const DAT_IA_FIELD_IA_MAX_RMR_TARGET_ADDRESS: DAT_IA_ATTR_MASK = 0x000200000;
pub const DAT_IA_FIELD_IA_MAX_SRQS: DAT_IA_ATTR_MASK = 0x000400000;
pub const DAT_IA_FIELD_IA_MAX_EP_PER_SRQ: DAT_IA_ATTR_MASK = 0x000800000;
pub const DAT_IA_FIELD_IA_MAX_RECV_PER_SRQ: DAT_IA_ATTR_MASK = 0x001000000;
pub const DAT_IA_FIELD_IA_MAX_IOV_SEGMENTS_PER_RDMA_READ: DAT_IA_ATTR_MASK = 0x002000000;
pub const DAT_IA_FIELD_IA_MAX_IOV_SEGMENTS_PER_RDMA_WRITE: DAT_IA_ATTR_MASK = 0x004000000;
pub const DAT_IA_FIELD_IA_MAX_RDMA_READ_IN: DAT_IA_ATTR_MASK = 0x008000000;
pub const DAT_IA_FIELD_IA_MAX_RDMA_READ_OUT: DAT_IA_ATTR_MASK = 0x010000000;
pub const DAT_IA_FIELD_IA_MAX_RDMA_READ_PER_EP_IN_GUARANTEED: DAT_IA_ATTR_MASK = 0x020000000;
pub const DAT_IA_FIELD_IA_MAX_RDMA_READ_PER_EP_OUT_GUARANTEED: DAT_IA_ATTR_MASK = 0x040000000;
pub const DAT_IA_FIELD_IA_ZB_SUPPORTED: DAT_IA_ATTR_MASK = 0x080000000;
pub const DAT_IA_FIELD_IA_EXTENSIONS_SUPPORTED: DAT_IA_ATTR_MASK = 0x100000000;
/// udat.h; the same bit as [`DAT_IA_FIELD_IA_EXTENSIONS_SUPPORTED`].
pub const DAT_IA_FIELD_IA_EXTENSION: DAT_IA_ATTR_MASK = 0x100000000;
pub const DAT_IA_FIELD_IA_EXTENSION_VERSION: DAT_IA_ATTR_MASK = 0x200000000;
pub const DAT_IA_FIELD_IA_NUM_TRANSPORT_ATTR: DAT_IA_ATTR_MASK = 0x400000000;
pub const DAT_IA_FIELD_IA_TRANSPORT_ATTR: DAT_IA_ATTR_MASK = 0x800000000;
pub const DAT_IA_FIELD_IA_NUM_VENDOR_ATTR: DAT_IA_ATTR_MASK = 0x1000000000;
pub const DAT_IA_FIELD_IA_VENDOR_ATTR: DAT_IA_ATTR_MASK = 0x2000000000;
pub const DAT_IA_FIELD_ALL: DAT_IA_ATTR_MASK = 0x3FFFFFFFFF;
pub const DAT_IA_ALL: DAT_IA_ATTR_MASK = DAT_IA_FIELD_ALL;
pub const DAT_IA_FIELD_NONE: DAT_IA_ATTR_MASK = 0x0;

// Not defined here: `DAT_IA_FIELD_IA_MAX_DTO_PER_OP`, which dat.h defines as the undefined
// name `DAT_IA_FIELD_IA_MAX_DTO_PER_EP_IN` (unusable in C too).
/// DAPL 1.x name of [`DAT_IA_FIELD_IA_MAX_MESSAGE_SIZE`].
pub const DAT_IA_FIELD_IA_MAX_MTU_SIZE: DAT_IA_ATTR_MASK = DAT_IA_FIELD_IA_MAX_MESSAGE_SIZE;

/// `enum dat_service_type`.
pub type DAT_SERVICE_TYPE = c_uint;
/// Reliable connection.
pub const DAT_SERVICE_TYPE_RC: DAT_SERVICE_TYPE = 0;
pub const DAT_SERVICE_TYPE_EXTENSION_BASE: DAT_SERVICE_TYPE = 1;

/// `struct dat_ep_attr` (88 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_EP_ATTR {
    pub service_type: DAT_SERVICE_TYPE,
    pub max_message_size: DAT_SEG_LENGTH,
    pub max_rdma_size: DAT_SEG_LENGTH,
    pub qos: DAT_QOS,
    pub recv_completion_flags: DAT_COMPLETION_FLAGS,
    pub request_completion_flags: DAT_COMPLETION_FLAGS,
    pub max_recv_dtos: DAT_COUNT,
    pub max_request_dtos: DAT_COUNT,
    pub max_recv_iov: DAT_COUNT,
    pub max_request_iov: DAT_COUNT,
    pub max_rdma_read_in: DAT_COUNT,
    pub max_rdma_read_out: DAT_COUNT,
    pub srq_soft_hw: DAT_COUNT,
    pub max_rdma_read_iov: DAT_COUNT,
    pub max_rdma_write_iov: DAT_COUNT,
    pub ep_transport_specific_count: DAT_COUNT,
    pub ep_transport_specific: *mut DAT_NAMED_ATTR,
    pub ep_provider_specific_count: DAT_COUNT,
    pub ep_provider_specific: *mut DAT_NAMED_ATTR,
}

/// `enum dat_ep_state`.
pub type DAT_EP_STATE = c_uint;
pub const DAT_EP_STATE_UNCONNECTED: DAT_EP_STATE = 0;
pub const DAT_EP_STATE_UNCONFIGURED_UNCONNECTED: DAT_EP_STATE = 1;
pub const DAT_EP_STATE_RESERVED: DAT_EP_STATE = 2;
pub const DAT_EP_STATE_UNCONFIGURED_RESERVED: DAT_EP_STATE = 3;
pub const DAT_EP_STATE_PASSIVE_CONNECTION_PENDING: DAT_EP_STATE = 4;
pub const DAT_EP_STATE_UNCONFIGURED_PASSIVE: DAT_EP_STATE = 5;
pub const DAT_EP_STATE_ACTIVE_CONNECTION_PENDING: DAT_EP_STATE = 6;
pub const DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING: DAT_EP_STATE = 7;
pub const DAT_EP_STATE_UNCONFIGURED_TENTATIVE: DAT_EP_STATE = 8;
pub const DAT_EP_STATE_CONNECTED: DAT_EP_STATE = 9;
pub const DAT_EP_STATE_DISCONNECT_PENDING: DAT_EP_STATE = 10;
pub const DAT_EP_STATE_DISCONNECTED: DAT_EP_STATE = 11;
pub const DAT_EP_STATE_COMPLETION_PENDING: DAT_EP_STATE = 12;
pub const DAT_EP_STATE_CONNECTED_SINGLE_PATH: DAT_EP_STATE = 13;
pub const DAT_EP_STATE_CONNECTED_MULTI_PATH: DAT_EP_STATE = 14;
/// Backwards-compatibility alias of [`DAT_EP_STATE_DISCONNECTED`].
pub const DAT_EP_STATE_ERROR: DAT_EP_STATE = DAT_EP_STATE_DISCONNECTED;

/// `struct dat_ep_param` (184 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_EP_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub ep_state: DAT_EP_STATE,
    pub comm: DAT_COMM,
    pub local_ia_address_ptr: DAT_IA_ADDRESS_PTR,
    pub local_port_qual: DAT_PORT_QUAL,
    pub remote_ia_address_ptr: DAT_IA_ADDRESS_PTR,
    pub remote_port_qual: DAT_PORT_QUAL,
    pub pz_handle: DAT_PZ_HANDLE,
    pub recv_evd_handle: DAT_EVD_HANDLE,
    pub request_evd_handle: DAT_EVD_HANDLE,
    pub connect_evd_handle: DAT_EVD_HANDLE,
    pub srq_handle: DAT_SRQ_HANDLE,
    pub ep_attr: DAT_EP_ATTR,
}

/// EP parameter mask (64 bits).
pub type DAT_EP_PARAM_MASK = DAT_UINT64;
pub const DAT_EP_FIELD_IA_HANDLE: DAT_EP_PARAM_MASK = 0x00000001;
pub const DAT_EP_FIELD_EP_STATE: DAT_EP_PARAM_MASK = 0x00000002;
pub const DAT_EP_FIELD_COMM: DAT_EP_PARAM_MASK = 0x00000004;
pub const DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR: DAT_EP_PARAM_MASK = 0x00000008;
pub const DAT_EP_FIELD_LOCAL_PORT_QUAL: DAT_EP_PARAM_MASK = 0x00000010;
pub const DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR: DAT_EP_PARAM_MASK = 0x00000020;
pub const DAT_EP_FIELD_REMOTE_PORT_QUAL: DAT_EP_PARAM_MASK = 0x00000040;
pub const DAT_EP_FIELD_PZ_HANDLE: DAT_EP_PARAM_MASK = 0x00000080;
pub const DAT_EP_FIELD_RECV_EVD_HANDLE: DAT_EP_PARAM_MASK = 0x00000100;
pub const DAT_EP_FIELD_REQUEST_EVD_HANDLE: DAT_EP_PARAM_MASK = 0x00000200;
pub const DAT_EP_FIELD_CONNECT_EVD_HANDLE: DAT_EP_PARAM_MASK = 0x00000400;
pub const DAT_EP_FIELD_SRQ_HANDLE: DAT_EP_PARAM_MASK = 0x00000800;
pub const DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE: DAT_EP_PARAM_MASK = 0x00001000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE: DAT_EP_PARAM_MASK = 0x00002000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_RDMA_SIZE: DAT_EP_PARAM_MASK = 0x00004000;
pub const DAT_EP_FIELD_EP_ATTR_QOS: DAT_EP_PARAM_MASK = 0x00008000;
pub const DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS: DAT_EP_PARAM_MASK = 0x00010000;
pub const DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS: DAT_EP_PARAM_MASK = 0x00020000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS: DAT_EP_PARAM_MASK = 0x00040000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS: DAT_EP_PARAM_MASK = 0x00080000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV: DAT_EP_PARAM_MASK = 0x00100000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV: DAT_EP_PARAM_MASK = 0x00200000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN: DAT_EP_PARAM_MASK = 0x00400000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT: DAT_EP_PARAM_MASK = 0x00800000;
pub const DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW: DAT_EP_PARAM_MASK = 0x01000000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IOV: DAT_EP_PARAM_MASK = 0x02000000;
pub const DAT_EP_FIELD_EP_ATTR_MAX_RDMA_WRITE_IOV: DAT_EP_PARAM_MASK = 0x04000000;
pub const DAT_EP_FIELD_EP_ATTR_NUM_TRANSPORT_ATTR: DAT_EP_PARAM_MASK = 0x08000000;
pub const DAT_EP_FIELD_EP_ATTR_TRANSPORT_SPECIFIC_ATTR: DAT_EP_PARAM_MASK = 0x10000000;
pub const DAT_EP_FIELD_EP_ATTR_NUM_PROVIDER_ATTR: DAT_EP_PARAM_MASK = 0x20000000;
pub const DAT_EP_FIELD_EP_ATTR_PROVIDER_SPECIFIC_ATTR: DAT_EP_PARAM_MASK = 0x40000000;
pub const DAT_EP_FIELD_EP_ATTR_ALL: DAT_EP_PARAM_MASK = 0x7FFFF000;
pub const DAT_EP_FIELD_ALL: DAT_EP_PARAM_MASK = 0x7FFFFFFF;

pub const DAT_WATERMARK_INFINITE: DAT_COUNT = !0;
pub const DAT_HW_DEFAULT: DAT_COUNT = DAT_WATERMARK_INFINITE;
pub const DAT_SRQ_LW_DEFAULT: DAT_COUNT = 0x0;

/// `enum dat_srq_state`.
pub type DAT_SRQ_STATE = c_uint;
pub const DAT_SRQ_STATE_ERROR: DAT_SRQ_STATE = 0;
pub const DAT_SRQ_STATE_OPERATIONAL: DAT_SRQ_STATE = 1;
pub const DAT_SRQ_STATE_SHUTDOWN: DAT_SRQ_STATE = 2;

/// `((DAT_COUNT) ~0) - 1`, i.e. -2.
pub const DAT_VALUE_UNKNOWN: DAT_COUNT = !0 - 1;

/// `struct dat_srq_attr` (12 bytes).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DAT_SRQ_ATTR {
    pub max_recv_dtos: DAT_COUNT,
    pub max_recv_iov: DAT_COUNT,
    pub low_watermark: DAT_COUNT,
}

/// `struct dat_srq_param` (48 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_SRQ_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub srq_state: DAT_SRQ_STATE,
    pub pz_handle: DAT_PZ_HANDLE,
    pub max_recv_dtos: DAT_COUNT,
    pub max_recv_iov: DAT_COUNT,
    pub low_watermark: DAT_COUNT,
    pub available_dto_count: DAT_COUNT,
    pub outstanding_dto_count: DAT_COUNT,
}

/// `enum dat_srq_param_mask`.
pub type DAT_SRQ_PARAM_MASK = c_uint;
pub const DAT_SRQ_FIELD_IA_HANDLE: DAT_SRQ_PARAM_MASK = 0x001;
pub const DAT_SRQ_FIELD_SRQ_STATE: DAT_SRQ_PARAM_MASK = 0x002;
pub const DAT_SRQ_FIELD_PZ_HANDLE: DAT_SRQ_PARAM_MASK = 0x004;
pub const DAT_SRQ_FIELD_MAX_RECV_DTO: DAT_SRQ_PARAM_MASK = 0x008;
pub const DAT_SRQ_FIELD_MAX_RECV_IOV: DAT_SRQ_PARAM_MASK = 0x010;
pub const DAT_SRQ_FIELD_LOW_WATERMARK: DAT_SRQ_PARAM_MASK = 0x020;
pub const DAT_SRQ_FIELD_AVAILABLE_DTO_COUNT: DAT_SRQ_PARAM_MASK = 0x040;
pub const DAT_SRQ_FIELD_OUTSTANDING_DTO_COUNT: DAT_SRQ_PARAM_MASK = 0x080;
pub const DAT_SRQ_FIELD_ALL: DAT_SRQ_PARAM_MASK = 0x0FF;

/// `struct dat_pz_param` (8 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_PZ_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
}

/// `enum dat_pz_param_mask`.
pub type DAT_PZ_PARAM_MASK = c_uint;
pub const DAT_PZ_FIELD_IA_HANDLE: DAT_PZ_PARAM_MASK = 0x01;
pub const DAT_PZ_FIELD_ALL: DAT_PZ_PARAM_MASK = 0x01;

/// `struct dat_psp_param` (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_PSP_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub conn_qual: DAT_CONN_QUAL,
    pub evd_handle: DAT_EVD_HANDLE,
    pub psp_flags: DAT_PSP_FLAGS,
}

/// `enum dat_psp_param_mask`.
pub type DAT_PSP_PARAM_MASK = c_uint;
pub const DAT_PSP_FIELD_IA_HANDLE: DAT_PSP_PARAM_MASK = 0x01;
pub const DAT_PSP_FIELD_CONN_QUAL: DAT_PSP_PARAM_MASK = 0x02;
pub const DAT_PSP_FIELD_EVD_HANDLE: DAT_PSP_PARAM_MASK = 0x04;
pub const DAT_PSP_FIELD_PSP_FLAGS: DAT_PSP_PARAM_MASK = 0x08;
pub const DAT_PSP_FIELD_ALL: DAT_PSP_PARAM_MASK = 0x0F;

/// `struct dat_rsp_param` (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_RSP_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub conn_qual: DAT_CONN_QUAL,
    pub evd_handle: DAT_EVD_HANDLE,
    pub ep_handle: DAT_EP_HANDLE,
}

/// `enum dat_rsp_param_mask`.
pub type DAT_RSP_PARAM_MASK = c_uint;
pub const DAT_RSP_FIELD_IA_HANDLE: DAT_RSP_PARAM_MASK = 0x01;
pub const DAT_RSP_FIELD_CONN_QUAL: DAT_RSP_PARAM_MASK = 0x02;
pub const DAT_RSP_FIELD_EVD_HANDLE: DAT_RSP_PARAM_MASK = 0x04;
pub const DAT_RSP_FIELD_EP_HANDLE: DAT_RSP_PARAM_MASK = 0x08;
pub const DAT_RSP_FIELD_ALL: DAT_RSP_PARAM_MASK = 0x0F;

/// `struct dat_csp_param` (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_CSP_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub comm: *mut DAT_COMM,
    pub address_ptr: DAT_IA_ADDRESS_PTR,
    pub evd_handle: DAT_EVD_HANDLE,
}

/// `enum dat_csp_param_mask`.
pub type DAT_CSP_PARAM_MASK = c_uint;
pub const DAT_CSP_FIELD_IA_HANDLE: DAT_CSP_PARAM_MASK = 0x01;
pub const DAT_CSP_FIELD_COMM: DAT_CSP_PARAM_MASK = 0x02;
pub const DAT_CSP_FIELD_IA_ADDRESS: DAT_CSP_PARAM_MASK = 0x04;
pub const DAT_CSP_FIELD_EVD_HANDLE: DAT_CSP_PARAM_MASK = 0x08;
pub const DAT_CSP_FIELD_ALL: DAT_CSP_PARAM_MASK = 0x0F;

/// `struct dat_cr_param` (40 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_CR_PARAM {
    pub remote_ia_address_ptr: DAT_IA_ADDRESS_PTR,
    pub remote_port_qual: DAT_PORT_QUAL,
    pub private_data_size: DAT_COUNT,
    pub private_data: DAT_PVOID,
    pub local_ep_handle: DAT_EP_HANDLE,
}

/// `enum dat_cr_param_mask`.
pub type DAT_CR_PARAM_MASK = c_uint;
pub const DAT_CR_FIELD_REMOTE_IA_ADDRESS_PTR: DAT_CR_PARAM_MASK = 0x01;
pub const DAT_CR_FIELD_REMOTE_PORT_QUAL: DAT_CR_PARAM_MASK = 0x02;
pub const DAT_CR_FIELD_PRIVATE_DATA_SIZE: DAT_CR_PARAM_MASK = 0x04;
pub const DAT_CR_FIELD_PRIVATE_DATA: DAT_CR_PARAM_MASK = 0x08;
pub const DAT_CR_FIELD_LOCAL_EP_HANDLE: DAT_CR_PARAM_MASK = 0x10;
pub const DAT_CR_FIELD_ALL: DAT_CR_PARAM_MASK = 0x1F;

// ---------------------------------------------------------------------------------------------
// dat.h: events

/// `enum dat_dto_completion_status`.
pub type DAT_DTO_COMPLETION_STATUS = c_uint;
pub const DAT_DTO_SUCCESS: DAT_DTO_COMPLETION_STATUS = 0;
pub const DAT_DTO_ERR_FLUSHED: DAT_DTO_COMPLETION_STATUS = 1;
pub const DAT_DTO_ERR_LOCAL_LENGTH: DAT_DTO_COMPLETION_STATUS = 2;
pub const DAT_DTO_ERR_LOCAL_EP: DAT_DTO_COMPLETION_STATUS = 3;
pub const DAT_DTO_ERR_LOCAL_PROTECTION: DAT_DTO_COMPLETION_STATUS = 4;
pub const DAT_DTO_ERR_BAD_RESPONSE: DAT_DTO_COMPLETION_STATUS = 5;
pub const DAT_DTO_ERR_REMOTE_ACCESS: DAT_DTO_COMPLETION_STATUS = 6;
pub const DAT_DTO_ERR_REMOTE_RESPONDER: DAT_DTO_COMPLETION_STATUS = 7;
pub const DAT_DTO_ERR_TRANSPORT: DAT_DTO_COMPLETION_STATUS = 8;
pub const DAT_DTO_ERR_RECEIVER_NOT_READY: DAT_DTO_COMPLETION_STATUS = 9;
pub const DAT_DTO_ERR_PARTIAL_PACKET: DAT_DTO_COMPLETION_STATUS = 10;
pub const DAT_RMR_OPERATION_FAILED: DAT_DTO_COMPLETION_STATUS = 11;
/// kDAT specific.
pub const DAT_DTO_ERR_LOCAL_MM_ERROR: DAT_DTO_COMPLETION_STATUS = 12;
pub const DAT_DTO_LENGTH_ERROR: DAT_DTO_COMPLETION_STATUS = DAT_DTO_ERR_LOCAL_LENGTH;
pub const DAT_DTO_FAILURE: DAT_DTO_COMPLETION_STATUS = DAT_DTO_ERR_FLUSHED;
/// A macro for [`DAT_DTO_COMPLETION_STATUS`] in C.
pub type DAT_RMR_BIND_COMPLETION_STATUS = DAT_DTO_COMPLETION_STATUS;
pub const DAT_RMR_BIND_SUCCESS: DAT_RMR_BIND_COMPLETION_STATUS = DAT_DTO_SUCCESS;
pub const DAT_RMR_BIND_FAILURE: DAT_RMR_BIND_COMPLETION_STATUS = DAT_DTO_ERR_FLUSHED;

/// `struct dat_dto_completion_event_data` (32 bytes). `transfered_length` is spelled as in C.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_DTO_COMPLETION_EVENT_DATA {
    pub ep_handle: DAT_EP_HANDLE,
    pub user_cookie: DAT_DTO_COOKIE,
    pub status: DAT_DTO_COMPLETION_STATUS,
    pub transfered_length: DAT_SEG_LENGTH,
    pub operation: DAT_DTOS,
    pub rmr_context: DAT_RMR_CONTEXT,
}

/// `struct dat_rmr_bind_completion_event_data` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_RMR_BIND_COMPLETION_EVENT_DATA {
    pub rmr_handle: DAT_RMR_HANDLE,
    pub user_cookie: DAT_RMR_COOKIE,
    pub status: DAT_RMR_BIND_COMPLETION_STATUS,
}

/// `union dat_sp_handle`: the service point of a connection request (a union, not a handle).
#[repr(C)]
#[derive(Clone, Copy)]
pub union DAT_SP_HANDLE {
    pub rsp_handle: DAT_RSP_HANDLE,
    pub psp_handle: DAT_PSP_HANDLE,
    pub csp_handle: DAT_CSP_HANDLE,
}

/// `struct dat_cr_arrival_event_data` (40 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_CR_ARRIVAL_EVENT_DATA {
    pub sp_handle: DAT_SP_HANDLE,
    pub local_ia_address_ptr: DAT_IA_ADDRESS_PTR,
    pub conn_qual: DAT_CONN_QUAL,
    pub cr_handle: DAT_CR_HANDLE,
    pub truncate_flag: DAT_BOOLEAN,
}

/// `struct dat_connection_event_data` (24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_CONNECTION_EVENT_DATA {
    pub ep_handle: DAT_EP_HANDLE,
    pub private_data_size: DAT_COUNT,
    pub private_data: DAT_PVOID,
}

/// `struct dat_asynch_error_event_data` (16 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_ASYNCH_ERROR_EVENT_DATA {
    /// IA, EP, EVD, SRQ, LMR, RMR or PZ handle.
    pub dat_handle: DAT_HANDLE,
    /// Object-specific reason (`DAT_*_ASYNC_ERROR_REASON`).
    pub reason: DAT_COUNT,
}

// Async error reasons travel in `DAT_ASYNCH_ERROR_EVENT_DATA::reason` (a DAT_COUNT), hence i32.
/// `enum ia_async_error_reason`.
pub type DAT_IA_ASYNC_ERROR_REASON = DAT_COUNT;
pub const DAT_IA_CATASTROPHIC_ERROR: DAT_IA_ASYNC_ERROR_REASON = 0;
pub const DAT_IA_OTHER_ERROR: DAT_IA_ASYNC_ERROR_REASON = 1;
/// `enum ep_async_error_reason`.
pub type DAT_EP_ASYNC_ERROR_REASON = DAT_COUNT;
pub const DAT_EP_TRANSFER_TO_ERROR: DAT_EP_ASYNC_ERROR_REASON = 0;
pub const DAT_EP_OTHER_ERROR: DAT_EP_ASYNC_ERROR_REASON = 1;
pub const DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT: DAT_EP_ASYNC_ERROR_REASON = 2;
/// `enum evd_async_error_reason`.
pub type DAT_EVD_ASYNC_ERROR_REASON = DAT_COUNT;
pub const DAT_EVD_OVERFLOW_ERROR: DAT_EVD_ASYNC_ERROR_REASON = 0;
pub const DAT_EVD_OTHER_ERROR: DAT_EVD_ASYNC_ERROR_REASON = 1;
/// `enum srq_async_error_reason`.
pub type DAT_SRQ_ASYNC_ERROR_REASON = DAT_COUNT;
pub const DAT_SRQ_TRANSFER_TO_ERROR: DAT_SRQ_ASYNC_ERROR_REASON = 0;
pub const DAT_SRQ_OTHER_ERROR: DAT_SRQ_ASYNC_ERROR_REASON = 1;
pub const DAT_SRQ_LOW_WATERMARK_EVENT: DAT_SRQ_ASYNC_ERROR_REASON = 2;
/// `enum lmr_async_error_reason`.
pub type DAT_LMR_ASYNC_ERROR_REASON = DAT_COUNT;
pub const DAT_LMR_OTHER_ERROR: DAT_LMR_ASYNC_ERROR_REASON = 0;
/// `enum rmr_async_error_reason`.
pub type DAT_RMR_ASYNC_ERROR_REASON = DAT_COUNT;
pub const DAT_RMR_OTHER_ERROR: DAT_RMR_ASYNC_ERROR_REASON = 0;
/// `enum pz_async_error_reason`.
pub type DAT_PZ_ASYNC_ERROR_REASON = DAT_COUNT;
pub const DAT_PZ_OTHER_ERROR: DAT_PZ_ASYNC_ERROR_REASON = 0;

/// `struct dat_software_event_data` (8 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_SOFTWARE_EVENT_DATA {
    pub pointer: DAT_PVOID,
}

/// `enum dat_event_number`.
pub type DAT_EVENT_NUMBER = c_uint;
pub const DAT_DTO_COMPLETION_EVENT: DAT_EVENT_NUMBER = 0x00001;
pub const DAT_RMR_BIND_COMPLETION_EVENT: DAT_EVENT_NUMBER = 0x01001;
pub const DAT_CONNECTION_REQUEST_EVENT: DAT_EVENT_NUMBER = 0x02001;
pub const DAT_CONNECTION_EVENT_ESTABLISHED: DAT_EVENT_NUMBER = 0x04001;
pub const DAT_CONNECTION_EVENT_PEER_REJECTED: DAT_EVENT_NUMBER = 0x04002;
pub const DAT_CONNECTION_EVENT_NON_PEER_REJECTED: DAT_EVENT_NUMBER = 0x04003;
pub const DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR: DAT_EVENT_NUMBER = 0x04004;
pub const DAT_CONNECTION_EVENT_DISCONNECTED: DAT_EVENT_NUMBER = 0x04005;
pub const DAT_CONNECTION_EVENT_BROKEN: DAT_EVENT_NUMBER = 0x04006;
pub const DAT_CONNECTION_EVENT_TIMED_OUT: DAT_EVENT_NUMBER = 0x04007;
pub const DAT_CONNECTION_EVENT_UNREACHABLE: DAT_EVENT_NUMBER = 0x04008;
pub const DAT_ASYNC_ERROR_EVD_OVERFLOW: DAT_EVENT_NUMBER = 0x08001;
pub const DAT_ASYNC_ERROR_IA_CATASTROPHIC: DAT_EVENT_NUMBER = 0x08002;
pub const DAT_ASYNC_ERROR_EP_BROKEN: DAT_EVENT_NUMBER = 0x08003;
pub const DAT_ASYNC_ERROR_TIMED_OUT: DAT_EVENT_NUMBER = 0x08004;
pub const DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR: DAT_EVENT_NUMBER = 0x08005;
pub const DAT_HA_DOWN_TO_1: DAT_EVENT_NUMBER = 0x08101;
pub const DAT_HA_UP_TO_MULTI_PATH: DAT_EVENT_NUMBER = 0x08102;
pub const DAT_SOFTWARE_EVENT: DAT_EVENT_NUMBER = 0x10001;
pub const DAT_EXTENSION_EVENT: DAT_EVENT_NUMBER = 0x20000;
pub const DAT_IB_EXTENSION_RANGE_BASE: DAT_EVENT_NUMBER = 0x40000;
pub const DAT_IW_EXTENSION_RANGE_BASE: DAT_EVENT_NUMBER = 0x80000;

/// `union dat_event_data` (40 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub union DAT_EVENT_DATA {
    pub dto_completion_event_data: DAT_DTO_COMPLETION_EVENT_DATA,
    pub rmr_completion_event_data: DAT_RMR_BIND_COMPLETION_EVENT_DATA,
    pub cr_arrival_event_data: DAT_CR_ARRIVAL_EVENT_DATA,
    pub connect_event_data: DAT_CONNECTION_EVENT_DATA,
    pub asynch_error_event_data: DAT_ASYNCH_ERROR_EVENT_DATA,
    pub software_event_data: DAT_SOFTWARE_EVENT_DATA,
}

/// `struct dat_event` (120 bytes). With `DAT_EXTENSIONS` it carries `event_extension_data`,
/// where the IB extension puts a [`DAT_IB_EXTENSION_EVENT_DATA`].
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_EVENT {
    pub event_number: DAT_EVENT_NUMBER,
    pub evd_handle: DAT_EVD_HANDLE,
    pub event_data: DAT_EVENT_DATA,
    pub event_extension_data: [DAT_UINT64; 8],
}

/// `struct dat_provider_info` (268 bytes): the registry's key for a provider.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_PROVIDER_INFO {
    pub ia_name: [c_char; DAT_NAME_MAX_LENGTH],
    pub dapl_version_major: DAT_UINT32,
    pub dapl_version_minor: DAT_UINT32,
    pub is_thread_safe: DAT_BOOLEAN,
}

pub const DAT_OPEN_EXTENSION_BASE: DAT_EXTENDED_OP = 0x1000;
pub const DAT_CLOSE_EXTENSION_BASE: DAT_EXTENDED_OP = 0x2000;
/// `typedef int DAT_EXTENDED_OP`.
pub type DAT_EXTENDED_OP = c_int;

// ---------------------------------------------------------------------------------------------
// udat.h

/// `enum dat_mem_type`.
pub type DAT_MEM_TYPE = c_uint;
pub const DAT_MEM_TYPE_VIRTUAL: DAT_MEM_TYPE = 0x00;
pub const DAT_MEM_TYPE_LMR: DAT_MEM_TYPE = 0x01;
pub const DAT_MEM_TYPE_SHARED_VIRTUAL: DAT_MEM_TYPE = 0x02;

/// `enum dat_handle_type`.
pub type DAT_HANDLE_TYPE = c_uint;
pub const DAT_HANDLE_TYPE_CR: DAT_HANDLE_TYPE = 0;
pub const DAT_HANDLE_TYPE_EP: DAT_HANDLE_TYPE = 1;
pub const DAT_HANDLE_TYPE_EVD: DAT_HANDLE_TYPE = 2;
pub const DAT_HANDLE_TYPE_IA: DAT_HANDLE_TYPE = 3;
pub const DAT_HANDLE_TYPE_LMR: DAT_HANDLE_TYPE = 4;
pub const DAT_HANDLE_TYPE_PSP: DAT_HANDLE_TYPE = 5;
pub const DAT_HANDLE_TYPE_PZ: DAT_HANDLE_TYPE = 6;
pub const DAT_HANDLE_TYPE_RMR: DAT_HANDLE_TYPE = 7;
pub const DAT_HANDLE_TYPE_RSP: DAT_HANDLE_TYPE = 8;
pub const DAT_HANDLE_TYPE_CNO: DAT_HANDLE_TYPE = 9;
pub const DAT_HANDLE_TYPE_SRQ: DAT_HANDLE_TYPE = 10;
pub const DAT_HANDLE_TYPE_CSP: DAT_HANDLE_TYPE = 11;
pub const DAT_HANDLE_TYPE_EXTENSION_BASE: DAT_HANDLE_TYPE = 12;

/// `enum dat_evd_state`.
pub type DAT_EVD_STATE = c_uint;
pub const DAT_EVD_STATE_ENABLED: DAT_EVD_STATE = 0x01;
pub const DAT_EVD_STATE_DISABLED: DAT_EVD_STATE = 0x02;
pub const DAT_EVD_STATE_WAITABLE: DAT_EVD_STATE = 0x04;
pub const DAT_EVD_STATE_UNWAITABLE: DAT_EVD_STATE = 0x08;
pub const DAT_EVD_STATE_CONFIG_NOTIFY: DAT_EVD_STATE = 0x10;
pub const DAT_EVD_STATE_CONFIG_SOLICITED: DAT_EVD_STATE = 0x20;
/// Equals `CONFIG_NOTIFY | CONFIG_SOLICITED` in the header.
pub const DAT_EVD_STATE_CONFIG_THRESHOLD: DAT_EVD_STATE = 0x30;

/// `enum dat_evd_param_mask`.
pub type DAT_EVD_PARAM_MASK = c_uint;
pub const DAT_EVD_FIELD_IA_HANDLE: DAT_EVD_PARAM_MASK = 0x01;
pub const DAT_EVD_FIELD_EVD_QLEN: DAT_EVD_PARAM_MASK = 0x02;
pub const DAT_EVD_FIELD_EVD_STATE: DAT_EVD_PARAM_MASK = 0x04;
pub const DAT_EVD_FIELD_CNO: DAT_EVD_PARAM_MASK = 0x08;
pub const DAT_EVD_FIELD_EVD_FLAGS: DAT_EVD_PARAM_MASK = 0x10;
pub const DAT_EVD_FIELD_ALL: DAT_EVD_PARAM_MASK = 0x1F;

/// Provider attribute mask (64 bits).
pub type DAT_PROVIDER_ATTR_MASK = DAT_UINT64;

/// `enum dat_lmr_param_mask`.
pub type DAT_LMR_PARAM_MASK = c_uint;
pub const DAT_LMR_FIELD_IA_HANDLE: DAT_LMR_PARAM_MASK = 0x001;
pub const DAT_LMR_FIELD_MEM_TYPE: DAT_LMR_PARAM_MASK = 0x002;
pub const DAT_LMR_FIELD_REGION_DESC: DAT_LMR_PARAM_MASK = 0x004;
pub const DAT_LMR_FIELD_LENGTH: DAT_LMR_PARAM_MASK = 0x008;
pub const DAT_LMR_FIELD_PZ_HANDLE: DAT_LMR_PARAM_MASK = 0x010;
pub const DAT_LMR_FIELD_MEM_PRIV: DAT_LMR_PARAM_MASK = 0x020;
pub const DAT_LMR_FIELD_VA_TYPE: DAT_LMR_PARAM_MASK = 0x040;
pub const DAT_LMR_FIELD_LMR_CONTEXT: DAT_LMR_PARAM_MASK = 0x080;
pub const DAT_LMR_FIELD_RMR_CONTEXT: DAT_LMR_PARAM_MASK = 0x100;
pub const DAT_LMR_FIELD_REGISTERED_SIZE: DAT_LMR_PARAM_MASK = 0x200;
pub const DAT_LMR_FIELD_REGISTERED_ADDRESS: DAT_LMR_PARAM_MASK = 0x400;
pub const DAT_LMR_FIELD_ALL: DAT_LMR_PARAM_MASK = 0x7FF;

/// `struct dat_evd_param` (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_EVD_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub evd_qlen: DAT_COUNT,
    pub evd_state: DAT_EVD_STATE,
    pub cno_handle: DAT_CNO_HANDLE,
    pub evd_flags: DAT_EVD_FLAGS,
}

/// Size of what a [`DAT_LMR_COOKIE`] points to.
pub const DAT_LMR_COOKIE_SIZE: usize = 40;
/// `char (*)[DAT_LMR_COOKIE_SIZE]`.
pub type DAT_LMR_COOKIE = *mut [c_char; DAT_LMR_COOKIE_SIZE];

/// OS wait proxy agent function: `void (*)(DAT_PVOID instance_data, DAT_EVD_HANDLE)`.
pub type DAT_AGENT_FUNC = Option<unsafe extern "C" fn(DAT_PVOID, DAT_EVD_HANDLE)>;

/// `struct dat_os_wait_proxy_agent` (16 bytes, passed by value to `cno_create`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_OS_WAIT_PROXY_AGENT {
    pub instance_data: DAT_PVOID,
    pub proxy_agent_func: DAT_AGENT_FUNC,
}

/// `DAT_OS_WAIT_PROXY_AGENT_NULL`.
pub const DAT_OS_WAIT_PROXY_AGENT_NULL: DAT_OS_WAIT_PROXY_AGENT = DAT_OS_WAIT_PROXY_AGENT {
    instance_data: std::ptr::null_mut(),
    proxy_agent_func: None,
};

/// `ia_open`'s async EVD argument value meaning "use the existing async EVD".
pub const DAT_EVD_ASYNC_EXISTS: DAT_EVD_HANDLE = 0x1 as DAT_EVD_HANDLE;
pub const DAT_EVD_OUT_OF_SCOPE: DAT_EVD_HANDLE = 0x2 as DAT_EVD_HANDLE;

/// `struct dat_shared_memory` (16 bytes, uDAPL only).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_SHARED_MEMORY {
    pub virtual_address: DAT_PVOID,
    pub shared_memory_id: DAT_LMR_COOKIE,
}

/// `union dat_region_description` (16 bytes, passed by value to `lmr_create`).
#[repr(C)]
#[derive(Clone, Copy)]
pub union DAT_REGION_DESCRIPTION {
    pub for_va: DAT_PVOID,
    pub for_lmr_handle: DAT_LMR_HANDLE,
    pub for_shared_memory: DAT_SHARED_MEMORY,
}

/// `struct dat_lmr_param` (80 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_LMR_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub mem_type: DAT_MEM_TYPE,
    pub region_desc: DAT_REGION_DESCRIPTION,
    pub length: DAT_VLEN,
    pub pz_handle: DAT_PZ_HANDLE,
    pub mem_priv: DAT_MEM_PRIV_FLAGS,
    pub va_type: DAT_VA_TYPE,
    pub lmr_context: DAT_LMR_CONTEXT,
    pub rmr_context: DAT_RMR_CONTEXT,
    pub registered_size: DAT_VLEN,
    pub registered_address: DAT_VADDR,
}

/// `enum dat_proxy_type`.
pub type DAT_PROXY_TYPE = c_uint;
pub const DAT_PROXY_TYPE_NONE: DAT_PROXY_TYPE = 0x0;
pub const DAT_PROXY_TYPE_AGENT: DAT_PROXY_TYPE = 0x1;
pub const DAT_PROXY_TYPE_FD: DAT_PROXY_TYPE = 0x2;

/// The unnamed union type of `DAT_CNO_PARAM::proxy` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub union DAT_CNO_PARAM_PROXY {
    pub agent: DAT_OS_WAIT_PROXY_AGENT,
    pub fd: DAT_FD,
    pub none: DAT_PVOID,
}

/// `struct dat_cno_param` (32 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_CNO_PARAM {
    pub ia_handle: DAT_IA_HANDLE,
    pub proxy_type: DAT_PROXY_TYPE,
    pub proxy: DAT_CNO_PARAM_PROXY,
}

/// `enum dat_cno_param_mask`. Note the header's values: `PROXY` is 0x3 and `ALL` is 0x4.
pub type DAT_CNO_PARAM_MASK = c_uint;
pub const DAT_CNO_FIELD_IA_HANDLE: DAT_CNO_PARAM_MASK = 0x1;
pub const DAT_CNO_FIELD_PROXY_TYPE: DAT_CNO_PARAM_MASK = 0x2;
pub const DAT_CNO_FIELD_PROXY: DAT_CNO_PARAM_MASK = 0x3;
pub const DAT_CNO_FIELD_ALL: DAT_CNO_PARAM_MASK = 0x4;

/// `struct dat_ia_attr` (688 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_IA_ATTR {
    pub adapter_name: [c_char; DAT_NAME_MAX_LENGTH],
    pub vendor_name: [c_char; DAT_NAME_MAX_LENGTH],
    pub hardware_version_major: DAT_UINT32,
    pub hardware_version_minor: DAT_UINT32,
    pub firmware_version_major: DAT_UINT32,
    pub firmware_version_minor: DAT_UINT32,
    pub ia_address_ptr: DAT_IA_ADDRESS_PTR,
    pub max_eps: DAT_COUNT,
    pub max_dto_per_ep: DAT_COUNT,
    pub max_rdma_read_per_ep_in: DAT_COUNT,
    pub max_rdma_read_per_ep_out: DAT_COUNT,
    pub max_evds: DAT_COUNT,
    pub max_evd_qlen: DAT_COUNT,
    pub max_iov_segments_per_dto: DAT_COUNT,
    pub max_lmrs: DAT_COUNT,
    pub max_lmr_block_size: DAT_SEG_LENGTH,
    pub max_lmr_virtual_address: DAT_VADDR,
    pub max_pzs: DAT_COUNT,
    pub max_message_size: DAT_SEG_LENGTH,
    pub max_rdma_size: DAT_SEG_LENGTH,
    pub max_rmrs: DAT_COUNT,
    pub max_rmr_target_address: DAT_VADDR,
    pub max_srqs: DAT_COUNT,
    pub max_ep_per_srq: DAT_COUNT,
    pub max_recv_per_srq: DAT_COUNT,
    pub max_iov_segments_per_rdma_read: DAT_COUNT,
    pub max_iov_segments_per_rdma_write: DAT_COUNT,
    pub max_rdma_read_in: DAT_COUNT,
    pub max_rdma_read_out: DAT_COUNT,
    pub max_rdma_read_per_ep_in_guaranteed: DAT_BOOLEAN,
    pub max_rdma_read_per_ep_out_guaranteed: DAT_BOOLEAN,
    pub zb_supported: DAT_BOOLEAN,
    pub extension_supported: DAT_EXTENSION,
    pub extension_version: DAT_COUNT,
    pub num_transport_attr: DAT_COUNT,
    pub transport_attr: *mut DAT_NAMED_ATTR,
    pub num_vendor_attr: DAT_COUNT,
    pub vendor_attr: *mut DAT_NAMED_ATTR,
}

/// `enum dat_pz_support`.
pub type DAT_PZ_SUPPORT = c_uint;
pub const DAT_PZ_UNIQUE: DAT_PZ_SUPPORT = 0;
pub const DAT_PZ_SHAREABLE: DAT_PZ_SUPPORT = 1;

/// `struct dat_provider_attr` (520 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_PROVIDER_ATTR {
    pub provider_name: [c_char; DAT_NAME_MAX_LENGTH],
    pub provider_version_major: DAT_UINT32,
    pub provider_version_minor: DAT_UINT32,
    pub dapl_version_major: DAT_UINT32,
    pub dapl_version_minor: DAT_UINT32,
    pub lmr_mem_types_supported: DAT_MEM_TYPE,
    pub iov_ownership_on_return: DAT_IOV_OWNERSHIP,
    pub dat_qos_supported: DAT_QOS,
    pub completion_flags_supported: DAT_COMPLETION_FLAGS,
    pub is_thread_safe: DAT_BOOLEAN,
    pub max_private_data_size: DAT_COUNT,
    pub supports_multipath: DAT_BOOLEAN,
    pub ep_creator: DAT_EP_CREATOR_FOR_PSP,
    pub pz_support: DAT_PZ_SUPPORT,
    pub optimal_buffer_alignment: DAT_UINT32,
    /// `const DAT_BOOLEAN [6][6]` in C.
    pub evd_stream_merging_supported: [[DAT_BOOLEAN; 6]; 6],
    pub srq_supported: DAT_BOOLEAN,
    pub srq_watermarks_supported: DAT_COUNT,
    pub srq_ep_pz_difference_supported: DAT_BOOLEAN,
    pub srq_info_supported: DAT_COUNT,
    pub ep_recv_info_supported: DAT_COUNT,
    pub lmr_sync_req: DAT_BOOLEAN,
    pub dto_async_return_guaranteed: DAT_BOOLEAN,
    pub rdma_write_for_rdma_read_req: DAT_BOOLEAN,
    pub rdma_read_lmr_rmr_context_exposure: DAT_BOOLEAN,
    pub rmr_scope_supported: DAT_RMR_SCOPE,
    pub is_signal_safe: DAT_BOOLEAN,
    pub ha_supported: DAT_BOOLEAN,
    pub ha_loadbalancing: DAT_HA_LB,
    pub num_provider_specific_attr: DAT_COUNT,
    pub provider_specific_attr: *mut DAT_NAMED_ATTR,
}

pub const DAT_PROVIDER_FIELD_PROVIDER_NAME: DAT_PROVIDER_ATTR_MASK = 0x00000001;
pub const DAT_PROVIDER_FIELD_PROVIDER_VERSION_MAJOR: DAT_PROVIDER_ATTR_MASK = 0x00000002;
pub const DAT_PROVIDER_FIELD_PROVIDER_VERSION_MINOR: DAT_PROVIDER_ATTR_MASK = 0x00000004;
pub const DAT_PROVIDER_FIELD_DAPL_VERSION_MAJOR: DAT_PROVIDER_ATTR_MASK = 0x00000008;
pub const DAT_PROVIDER_FIELD_DAPL_VERSION_MINOR: DAT_PROVIDER_ATTR_MASK = 0x00000010;
pub const DAT_PROVIDER_FIELD_LMR_MEM_TYPE_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x00000020;
pub const DAT_PROVIDER_FIELD_IOV_OWNERSHIP: DAT_PROVIDER_ATTR_MASK = 0x00000040;
pub const DAT_PROVIDER_FIELD_DAT_QOS_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x00000080;
pub const DAT_PROVIDER_FIELD_COMPLETION_FLAGS_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x00000100;
pub const DAT_PROVIDER_FIELD_IS_THREAD_SAFE: DAT_PROVIDER_ATTR_MASK = 0x00000200;
pub const DAT_PROVIDER_FIELD_MAX_PRIVATE_DATA_SIZE: DAT_PROVIDER_ATTR_MASK = 0x00000400;
pub const DAT_PROVIDER_FIELD_SUPPORTS_MULTIPATH: DAT_PROVIDER_ATTR_MASK = 0x00000800;
pub const DAT_PROVIDER_FIELD_EP_CREATOR: DAT_PROVIDER_ATTR_MASK = 0x00001000;
pub const DAT_PROVIDER_FIELD_PZ_SUPPORT: DAT_PROVIDER_ATTR_MASK = 0x00002000;
pub const DAT_PROVIDER_FIELD_OPTIMAL_BUFFER_ALIGNMENT: DAT_PROVIDER_ATTR_MASK = 0x00004000;
pub const DAT_PROVIDER_FIELD_EVD_STREAM_MERGING_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x00008000;
pub const DAT_PROVIDER_FIELD_SRQ_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x00010000;
pub const DAT_PROVIDER_FIELD_SRQ_WATERMARKS_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x00020000;
pub const DAT_PROVIDER_FIELD_SRQ_EP_PZ_DIFFERENCE_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x00040000;
pub const DAT_PROVIDER_FIELD_SRQ_INFO_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x00080000;
pub const DAT_PROVIDER_FIELD_EP_RECV_INFO_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x00100000;
pub const DAT_PROVIDER_FIELD_LMR_SYNC_REQ: DAT_PROVIDER_ATTR_MASK = 0x00200000;
pub const DAT_PROVIDER_FIELD_DTO_ASYNC_RETURN_GUARANTEED: DAT_PROVIDER_ATTR_MASK = 0x00400000;
pub const DAT_PROVIDER_FIELD_RDMA_WRITE_FOR_RDMA_READ_REQ: DAT_PROVIDER_ATTR_MASK = 0x00800000;
pub const DAT_PROVIDER_FIELD_RDMA_READ_LMR_RMR_CONTEXT_EXPOSURE: DAT_PROVIDER_ATTR_MASK =
    0x01000000;
pub const DAT_PROVIDER_FIELD_RMR_SCOPE_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x02000000;
pub const DAT_PROVIDER_FIELD_IS_SIGNAL_SAFE: DAT_PROVIDER_ATTR_MASK = 0x04000000;
pub const DAT_PROVIDER_FIELD_HA_SUPPORTED: DAT_PROVIDER_ATTR_MASK = 0x08000000;
pub const DAT_PROVIDER_FIELD_HA_LB: DAT_PROVIDER_ATTR_MASK = 0x10000000;
pub const DAT_PROVIDER_FIELD_NUM_PROVIDER_SPECIFIC_ATTR: DAT_PROVIDER_ATTR_MASK = 0x20000000;
pub const DAT_PROVIDER_FIELD_PROVIDER_SPECIFIC_ATTR: DAT_PROVIDER_ATTR_MASK = 0x40000000;
pub const DAT_PROVIDER_FIELD_ALL: DAT_PROVIDER_ATTR_MASK = 0x7FFFFFFF;
pub const DAT_PROVIDER_FIELD_NONE: DAT_PROVIDER_ATTR_MASK = 0x0;

// ---------------------------------------------------------------------------------------------
// dat_redirection.h / udat_redirection.h: the provider vtable
//
// `const DAT_NAME_PTR` and `const DAT_PVOID` parameters are `char *const` / `void *const` in
// C, i.e. the pointee is not const: they are `DAT_NAME_PTR` / `DAT_PVOID` here.

pub type DAT_IA_OPEN_FUNC = Option<
    unsafe extern "C" fn(
        DAT_NAME_PTR,
        DAT_COUNT,
        *mut DAT_EVD_HANDLE,
        *mut DAT_IA_HANDLE,
    ) -> DAT_RETURN,
>;
pub type DAT_IA_OPENV_FUNC = Option<
    unsafe extern "C" fn(
        DAT_NAME_PTR,
        DAT_COUNT,
        *mut DAT_EVD_HANDLE,
        *mut DAT_IA_HANDLE,
        DAT_UINT32,
        DAT_UINT32,
        DAT_BOOLEAN,
    ) -> DAT_RETURN,
>;
pub type DAT_IA_CLOSE_FUNC =
    Option<unsafe extern "C" fn(DAT_IA_HANDLE, DAT_CLOSE_FLAGS) -> DAT_RETURN>;
pub type DAT_IA_QUERY_FUNC = Option<
    unsafe extern "C" fn(
        DAT_IA_HANDLE,
        *mut DAT_EVD_HANDLE,
        DAT_IA_ATTR_MASK,
        *mut DAT_IA_ATTR,
        DAT_PROVIDER_ATTR_MASK,
        *mut DAT_PROVIDER_ATTR,
    ) -> DAT_RETURN,
>;
pub type DAT_SET_CONSUMER_CONTEXT_FUNC =
    Option<unsafe extern "C" fn(DAT_HANDLE, DAT_CONTEXT) -> DAT_RETURN>;
pub type DAT_GET_CONSUMER_CONTEXT_FUNC =
    Option<unsafe extern "C" fn(DAT_HANDLE, *mut DAT_CONTEXT) -> DAT_RETURN>;
pub type DAT_GET_HANDLE_TYPE_FUNC =
    Option<unsafe extern "C" fn(DAT_HANDLE, *mut DAT_HANDLE_TYPE) -> DAT_RETURN>;

pub type DAT_CR_QUERY_FUNC =
    Option<unsafe extern "C" fn(DAT_CR_HANDLE, DAT_CR_PARAM_MASK, *mut DAT_CR_PARAM) -> DAT_RETURN>;
pub type DAT_CR_ACCEPT_FUNC =
    Option<unsafe extern "C" fn(DAT_CR_HANDLE, DAT_EP_HANDLE, DAT_COUNT, DAT_PVOID) -> DAT_RETURN>;
pub type DAT_CR_REJECT_FUNC =
    Option<unsafe extern "C" fn(DAT_CR_HANDLE, DAT_COUNT, DAT_PVOID) -> DAT_RETURN>;
pub type DAT_CR_HANDOFF_FUNC =
    Option<unsafe extern "C" fn(DAT_CR_HANDLE, DAT_CONN_QUAL) -> DAT_RETURN>;

pub type DAT_EVD_RESIZE_FUNC =
    Option<unsafe extern "C" fn(DAT_EVD_HANDLE, DAT_COUNT) -> DAT_RETURN>;
pub type DAT_EVD_POST_SE_FUNC =
    Option<unsafe extern "C" fn(DAT_EVD_HANDLE, *const DAT_EVENT) -> DAT_RETURN>;
pub type DAT_EVD_DEQUEUE_FUNC =
    Option<unsafe extern "C" fn(DAT_EVD_HANDLE, *mut DAT_EVENT) -> DAT_RETURN>;
pub type DAT_EVD_FREE_FUNC = Option<unsafe extern "C" fn(DAT_EVD_HANDLE) -> DAT_RETURN>;
pub type DAT_EVD_QUERY_FUNC = Option<
    unsafe extern "C" fn(DAT_EVD_HANDLE, DAT_EVD_PARAM_MASK, *mut DAT_EVD_PARAM) -> DAT_RETURN,
>;

pub type DAT_EP_CREATE_FUNC = Option<
    unsafe extern "C" fn(
        DAT_IA_HANDLE,
        DAT_PZ_HANDLE,
        DAT_EVD_HANDLE,
        DAT_EVD_HANDLE,
        DAT_EVD_HANDLE,
        *const DAT_EP_ATTR,
        *mut DAT_EP_HANDLE,
    ) -> DAT_RETURN,
>;
pub type DAT_EP_CREATE_WITH_SRQ_FUNC = Option<
    unsafe extern "C" fn(
        DAT_IA_HANDLE,
        DAT_PZ_HANDLE,
        DAT_EVD_HANDLE,
        DAT_EVD_HANDLE,
        DAT_EVD_HANDLE,
        DAT_SRQ_HANDLE,
        *const DAT_EP_ATTR,
        *mut DAT_EP_HANDLE,
    ) -> DAT_RETURN,
>;
pub type DAT_EP_QUERY_FUNC =
    Option<unsafe extern "C" fn(DAT_EP_HANDLE, DAT_EP_PARAM_MASK, *mut DAT_EP_PARAM) -> DAT_RETURN>;
pub type DAT_EP_MODIFY_FUNC = Option<
    unsafe extern "C" fn(DAT_EP_HANDLE, DAT_EP_PARAM_MASK, *const DAT_EP_PARAM) -> DAT_RETURN,
>;
pub type DAT_EP_CONNECT_FUNC = Option<
    unsafe extern "C" fn(
        DAT_EP_HANDLE,
        DAT_IA_ADDRESS_PTR,
        DAT_CONN_QUAL,
        DAT_TIMEOUT,
        DAT_COUNT,
        DAT_PVOID,
        DAT_QOS,
        DAT_CONNECT_FLAGS,
    ) -> DAT_RETURN,
>;
pub type DAT_EP_COMMON_CONNECT_FUNC = Option<
    unsafe extern "C" fn(
        DAT_EP_HANDLE,
        DAT_IA_ADDRESS_PTR,
        DAT_TIMEOUT,
        DAT_COUNT,
        DAT_PVOID,
    ) -> DAT_RETURN,
>;
pub type DAT_EP_DUP_CONNECT_FUNC = Option<
    unsafe extern "C" fn(
        DAT_EP_HANDLE,
        DAT_EP_HANDLE,
        DAT_TIMEOUT,
        DAT_COUNT,
        DAT_PVOID,
        DAT_QOS,
    ) -> DAT_RETURN,
>;
pub type DAT_EP_DISCONNECT_FUNC =
    Option<unsafe extern "C" fn(DAT_EP_HANDLE, DAT_CLOSE_FLAGS) -> DAT_RETURN>;
pub type DAT_EP_POST_SEND_FUNC = Option<
    unsafe extern "C" fn(
        DAT_EP_HANDLE,
        DAT_COUNT,
        *mut DAT_LMR_TRIPLET,
        DAT_DTO_COOKIE,
        DAT_COMPLETION_FLAGS,
    ) -> DAT_RETURN,
>;
pub type DAT_EP_POST_SEND_WITH_INVALIDATE_FUNC = Option<
    unsafe extern "C" fn(
        DAT_EP_HANDLE,
        DAT_COUNT,
        *mut DAT_LMR_TRIPLET,
        DAT_DTO_COOKIE,
        DAT_COMPLETION_FLAGS,
        DAT_BOOLEAN,
        DAT_RMR_CONTEXT,
    ) -> DAT_RETURN,
>;
pub type DAT_EP_POST_RECV_FUNC = Option<
    unsafe extern "C" fn(
        DAT_EP_HANDLE,
        DAT_COUNT,
        *mut DAT_LMR_TRIPLET,
        DAT_DTO_COOKIE,
        DAT_COMPLETION_FLAGS,
    ) -> DAT_RETURN,
>;
pub type DAT_EP_POST_RDMA_READ_FUNC = Option<
    unsafe extern "C" fn(
        DAT_EP_HANDLE,
        DAT_COUNT,
        *mut DAT_LMR_TRIPLET,
        DAT_DTO_COOKIE,
        *const DAT_RMR_TRIPLET,
        DAT_COMPLETION_FLAGS,
    ) -> DAT_RETURN,
>;
pub type DAT_EP_POST_RDMA_READ_TO_RMR_FUNC = Option<
    unsafe extern "C" fn(
        DAT_EP_HANDLE,
        *const DAT_RMR_TRIPLET,
        DAT_DTO_COOKIE,
        *const DAT_RMR_TRIPLET,
        DAT_COMPLETION_FLAGS,
    ) -> DAT_RETURN,
>;
pub type DAT_EP_POST_RDMA_WRITE_FUNC = Option<
    unsafe extern "C" fn(
        DAT_EP_HANDLE,
        DAT_COUNT,
        *mut DAT_LMR_TRIPLET,
        DAT_DTO_COOKIE,
        *const DAT_RMR_TRIPLET,
        DAT_COMPLETION_FLAGS,
    ) -> DAT_RETURN,
>;
pub type DAT_EP_GET_STATUS_FUNC = Option<
    unsafe extern "C" fn(
        DAT_EP_HANDLE,
        *mut DAT_EP_STATE,
        *mut DAT_BOOLEAN,
        *mut DAT_BOOLEAN,
    ) -> DAT_RETURN,
>;
pub type DAT_EP_FREE_FUNC = Option<unsafe extern "C" fn(DAT_EP_HANDLE) -> DAT_RETURN>;
pub type DAT_EP_RESET_FUNC = Option<unsafe extern "C" fn(DAT_EP_HANDLE) -> DAT_RETURN>;
pub type DAT_EP_RECV_QUERY_FUNC =
    Option<unsafe extern "C" fn(DAT_EP_HANDLE, *mut DAT_COUNT, *mut DAT_COUNT) -> DAT_RETURN>;
pub type DAT_EP_SET_WATERMARK_FUNC =
    Option<unsafe extern "C" fn(DAT_EP_HANDLE, DAT_COUNT, DAT_COUNT) -> DAT_RETURN>;

pub type DAT_LMR_CREATE_FUNC = Option<
    unsafe extern "C" fn(
        DAT_IA_HANDLE,
        DAT_MEM_TYPE,
        DAT_REGION_DESCRIPTION,
        DAT_VLEN,
        DAT_PZ_HANDLE,
        DAT_MEM_PRIV_FLAGS,
        DAT_VA_TYPE,
        *mut DAT_LMR_HANDLE,
        *mut DAT_LMR_CONTEXT,
        *mut DAT_RMR_CONTEXT,
        *mut DAT_VLEN,
        *mut DAT_VADDR,
    ) -> DAT_RETURN,
>;
pub type DAT_LMR_QUERY_FUNC = Option<
    unsafe extern "C" fn(DAT_LMR_HANDLE, DAT_LMR_PARAM_MASK, *mut DAT_LMR_PARAM) -> DAT_RETURN,
>;
pub type DAT_LMR_FREE_FUNC = Option<unsafe extern "C" fn(DAT_LMR_HANDLE) -> DAT_RETURN>;
pub type DAT_LMR_SYNC_RDMA_READ_FUNC =
    Option<unsafe extern "C" fn(DAT_IA_HANDLE, *const DAT_LMR_TRIPLET, DAT_VLEN) -> DAT_RETURN>;
pub type DAT_LMR_SYNC_RDMA_WRITE_FUNC =
    Option<unsafe extern "C" fn(DAT_IA_HANDLE, *const DAT_LMR_TRIPLET, DAT_VLEN) -> DAT_RETURN>;

pub type DAT_RMR_CREATE_FUNC =
    Option<unsafe extern "C" fn(DAT_PZ_HANDLE, *mut DAT_RMR_HANDLE) -> DAT_RETURN>;
pub type DAT_RMR_CREATE_FOR_EP_FUNC =
    Option<unsafe extern "C" fn(DAT_PZ_HANDLE, *mut DAT_RMR_HANDLE) -> DAT_RETURN>;
pub type DAT_RMR_QUERY_FUNC = Option<
    unsafe extern "C" fn(DAT_RMR_HANDLE, DAT_RMR_PARAM_MASK, *mut DAT_RMR_PARAM) -> DAT_RETURN,
>;
pub type DAT_RMR_BIND_FUNC = Option<
    unsafe extern "C" fn(
        DAT_RMR_HANDLE,
        DAT_LMR_HANDLE,
        *const DAT_LMR_TRIPLET,
        DAT_MEM_PRIV_FLAGS,
        DAT_VA_TYPE,
        DAT_EP_HANDLE,
        DAT_RMR_COOKIE,
        DAT_COMPLETION_FLAGS,
        *mut DAT_RMR_CONTEXT,
    ) -> DAT_RETURN,
>;
pub type DAT_RMR_FREE_FUNC = Option<unsafe extern "C" fn(DAT_RMR_HANDLE) -> DAT_RETURN>;

pub type DAT_PSP_CREATE_FUNC = Option<
    unsafe extern "C" fn(
        DAT_IA_HANDLE,
        DAT_CONN_QUAL,
        DAT_EVD_HANDLE,
        DAT_PSP_FLAGS,
        *mut DAT_PSP_HANDLE,
    ) -> DAT_RETURN,
>;
pub type DAT_PSP_CREATE_ANY_FUNC = Option<
    unsafe extern "C" fn(
        DAT_IA_HANDLE,
        *mut DAT_CONN_QUAL,
        DAT_EVD_HANDLE,
        DAT_PSP_FLAGS,
        *mut DAT_PSP_HANDLE,
    ) -> DAT_RETURN,
>;
pub type DAT_PSP_QUERY_FUNC = Option<
    unsafe extern "C" fn(DAT_PSP_HANDLE, DAT_PSP_PARAM_MASK, *mut DAT_PSP_PARAM) -> DAT_RETURN,
>;
pub type DAT_PSP_FREE_FUNC = Option<unsafe extern "C" fn(DAT_PSP_HANDLE) -> DAT_RETURN>;

pub type DAT_RSP_CREATE_FUNC = Option<
    unsafe extern "C" fn(
        DAT_IA_HANDLE,
        DAT_CONN_QUAL,
        DAT_EP_HANDLE,
        DAT_EVD_HANDLE,
        *mut DAT_RSP_HANDLE,
    ) -> DAT_RETURN,
>;
pub type DAT_RSP_QUERY_FUNC = Option<
    unsafe extern "C" fn(DAT_RSP_HANDLE, DAT_RSP_PARAM_MASK, *mut DAT_RSP_PARAM) -> DAT_RETURN,
>;
pub type DAT_RSP_FREE_FUNC = Option<unsafe extern "C" fn(DAT_RSP_HANDLE) -> DAT_RETURN>;

pub type DAT_CSP_CREATE_FUNC = Option<
    unsafe extern "C" fn(
        DAT_IA_HANDLE,
        *mut DAT_COMM,
        DAT_IA_ADDRESS_PTR,
        DAT_EVD_HANDLE,
        *mut DAT_CSP_HANDLE,
    ) -> DAT_RETURN,
>;
pub type DAT_CSP_QUERY_FUNC = Option<
    unsafe extern "C" fn(DAT_CSP_HANDLE, DAT_CSP_PARAM_MASK, *mut DAT_CSP_PARAM) -> DAT_RETURN,
>;
pub type DAT_CSP_FREE_FUNC = Option<unsafe extern "C" fn(DAT_CSP_HANDLE) -> DAT_RETURN>;

pub type DAT_PZ_CREATE_FUNC =
    Option<unsafe extern "C" fn(DAT_IA_HANDLE, *mut DAT_PZ_HANDLE) -> DAT_RETURN>;
pub type DAT_PZ_QUERY_FUNC =
    Option<unsafe extern "C" fn(DAT_PZ_HANDLE, DAT_PZ_PARAM_MASK, *mut DAT_PZ_PARAM) -> DAT_RETURN>;
pub type DAT_PZ_FREE_FUNC = Option<unsafe extern "C" fn(DAT_PZ_HANDLE) -> DAT_RETURN>;

pub type DAT_SRQ_CREATE_FUNC = Option<
    unsafe extern "C" fn(
        DAT_IA_HANDLE,
        DAT_PZ_HANDLE,
        *mut DAT_SRQ_ATTR,
        *mut DAT_SRQ_HANDLE,
    ) -> DAT_RETURN,
>;
pub type DAT_SRQ_SET_LW_FUNC =
    Option<unsafe extern "C" fn(DAT_SRQ_HANDLE, DAT_COUNT) -> DAT_RETURN>;
pub type DAT_SRQ_FREE_FUNC = Option<unsafe extern "C" fn(DAT_SRQ_HANDLE) -> DAT_RETURN>;
pub type DAT_SRQ_QUERY_FUNC = Option<
    unsafe extern "C" fn(DAT_SRQ_HANDLE, DAT_SRQ_PARAM_MASK, *mut DAT_SRQ_PARAM) -> DAT_RETURN,
>;
pub type DAT_SRQ_RESIZE_FUNC =
    Option<unsafe extern "C" fn(DAT_SRQ_HANDLE, DAT_COUNT) -> DAT_RETURN>;
pub type DAT_SRQ_POST_RECV_FUNC = Option<
    unsafe extern "C" fn(
        DAT_SRQ_HANDLE,
        DAT_COUNT,
        *mut DAT_LMR_TRIPLET,
        DAT_DTO_COOKIE,
    ) -> DAT_RETURN,
>;

pub type DAT_IA_HA_RELATED_FUNC =
    Option<unsafe extern "C" fn(DAT_IA_HANDLE, DAT_NAME_PTR, *mut DAT_BOOLEAN) -> DAT_RETURN>;

/// `(DAT_HANDLE, DAT_EXTENDED_OP, va_list)`. On x86_64 a `va_list` parameter is passed as a
/// pointer to the caller's `__va_list_tag`, hence `*mut c_void`.
pub type DAT_HANDLE_EXTENDEDOP_FUNC =
    Option<unsafe extern "C" fn(DAT_HANDLE, DAT_EXTENDED_OP, *mut c_void) -> DAT_RETURN>;

pub type DAT_EVD_CREATE_FUNC = Option<
    unsafe extern "C" fn(
        DAT_IA_HANDLE,
        DAT_COUNT,
        DAT_CNO_HANDLE,
        DAT_EVD_FLAGS,
        *mut DAT_EVD_HANDLE,
    ) -> DAT_RETURN,
>;
pub type DAT_EVD_MODIFY_CNO_FUNC =
    Option<unsafe extern "C" fn(DAT_EVD_HANDLE, DAT_CNO_HANDLE) -> DAT_RETURN>;
pub type DAT_CNO_CREATE_FUNC = Option<
    unsafe extern "C" fn(DAT_IA_HANDLE, DAT_OS_WAIT_PROXY_AGENT, *mut DAT_CNO_HANDLE) -> DAT_RETURN,
>;
pub type DAT_CNO_FD_CREATE_FUNC =
    Option<unsafe extern "C" fn(DAT_IA_HANDLE, *mut DAT_FD, *mut DAT_CNO_HANDLE) -> DAT_RETURN>;
pub type DAT_CNO_TRIGGER_FUNC =
    Option<unsafe extern "C" fn(DAT_CNO_HANDLE, *mut DAT_EVD_HANDLE) -> DAT_RETURN>;
pub type DAT_CNO_MODIFY_AGENT_FUNC =
    Option<unsafe extern "C" fn(DAT_CNO_HANDLE, DAT_OS_WAIT_PROXY_AGENT) -> DAT_RETURN>;
pub type DAT_CNO_QUERY_FUNC = Option<
    unsafe extern "C" fn(DAT_CNO_HANDLE, DAT_CNO_PARAM_MASK, *mut DAT_CNO_PARAM) -> DAT_RETURN,
>;
pub type DAT_CNO_FREE_FUNC = Option<unsafe extern "C" fn(DAT_CNO_HANDLE) -> DAT_RETURN>;
pub type DAT_CNO_WAIT_FUNC =
    Option<unsafe extern "C" fn(DAT_CNO_HANDLE, DAT_TIMEOUT, *mut DAT_EVD_HANDLE) -> DAT_RETURN>;
pub type DAT_EVD_ENABLE_FUNC = Option<unsafe extern "C" fn(DAT_EVD_HANDLE) -> DAT_RETURN>;
pub type DAT_EVD_WAIT_FUNC = Option<
    unsafe extern "C" fn(
        DAT_EVD_HANDLE,
        DAT_TIMEOUT,
        DAT_COUNT,
        *mut DAT_EVENT,
        *mut DAT_COUNT,
    ) -> DAT_RETURN,
>;
pub type DAT_EVD_DISABLE_FUNC = Option<unsafe extern "C" fn(DAT_EVD_HANDLE) -> DAT_RETURN>;
pub type DAT_EVD_SET_UNWAITABLE_FUNC = Option<unsafe extern "C" fn(DAT_EVD_HANDLE) -> DAT_RETURN>;
pub type DAT_EVD_CLEAR_UNWAITABLE_FUNC = Option<unsafe extern "C" fn(DAT_EVD_HANDLE) -> DAT_RETURN>;

/// `struct dat_provider` (648 bytes = 81 pointer-sized slots, `DAT_EXTENSIONS` on).
///
/// libdat2 dispatches with `(*(DAT_PROVIDER **)handle)->xxx_func`, so every handle the provider
/// returns must point at memory whose first word is a `*const DAT_PROVIDER`, and libdat2 never
/// NULL-checks a slot: every `Option` must be `Some`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DAT_PROVIDER {
    pub device_name: *const c_char,
    pub extension: DAT_PVOID,
    pub ia_open_func: DAT_IA_OPEN_FUNC,
    pub ia_query_func: DAT_IA_QUERY_FUNC,
    pub ia_close_func: DAT_IA_CLOSE_FUNC,
    pub set_consumer_context_func: DAT_SET_CONSUMER_CONTEXT_FUNC,
    pub get_consumer_context_func: DAT_GET_CONSUMER_CONTEXT_FUNC,
    pub get_handle_type_func: DAT_GET_HANDLE_TYPE_FUNC,
    pub cno_create_func: DAT_CNO_CREATE_FUNC,
    pub cno_modify_agent_func: DAT_CNO_MODIFY_AGENT_FUNC,
    pub cno_query_func: DAT_CNO_QUERY_FUNC,
    pub cno_free_func: DAT_CNO_FREE_FUNC,
    pub cno_wait_func: DAT_CNO_WAIT_FUNC,
    pub cr_query_func: DAT_CR_QUERY_FUNC,
    pub cr_accept_func: DAT_CR_ACCEPT_FUNC,
    pub cr_reject_func: DAT_CR_REJECT_FUNC,
    pub cr_handoff_func: DAT_CR_HANDOFF_FUNC,
    pub evd_create_func: DAT_EVD_CREATE_FUNC,
    pub evd_query_func: DAT_EVD_QUERY_FUNC,
    pub evd_modify_cno_func: DAT_EVD_MODIFY_CNO_FUNC,
    pub evd_enable_func: DAT_EVD_ENABLE_FUNC,
    pub evd_disable_func: DAT_EVD_DISABLE_FUNC,
    pub evd_wait_func: DAT_EVD_WAIT_FUNC,
    pub evd_resize_func: DAT_EVD_RESIZE_FUNC,
    pub evd_post_se_func: DAT_EVD_POST_SE_FUNC,
    pub evd_dequeue_func: DAT_EVD_DEQUEUE_FUNC,
    pub evd_free_func: DAT_EVD_FREE_FUNC,
    pub ep_create_func: DAT_EP_CREATE_FUNC,
    pub ep_query_func: DAT_EP_QUERY_FUNC,
    pub ep_modify_func: DAT_EP_MODIFY_FUNC,
    pub ep_connect_func: DAT_EP_CONNECT_FUNC,
    pub ep_dup_connect_func: DAT_EP_DUP_CONNECT_FUNC,
    pub ep_disconnect_func: DAT_EP_DISCONNECT_FUNC,
    pub ep_post_send_func: DAT_EP_POST_SEND_FUNC,
    pub ep_post_recv_func: DAT_EP_POST_RECV_FUNC,
    pub ep_post_rdma_read_func: DAT_EP_POST_RDMA_READ_FUNC,
    pub ep_post_rdma_write_func: DAT_EP_POST_RDMA_WRITE_FUNC,
    pub ep_get_status_func: DAT_EP_GET_STATUS_FUNC,
    pub ep_free_func: DAT_EP_FREE_FUNC,
    pub lmr_create_func: DAT_LMR_CREATE_FUNC,
    pub lmr_query_func: DAT_LMR_QUERY_FUNC,
    pub lmr_free_func: DAT_LMR_FREE_FUNC,
    pub rmr_create_func: DAT_RMR_CREATE_FUNC,
    pub rmr_query_func: DAT_RMR_QUERY_FUNC,
    pub rmr_bind_func: DAT_RMR_BIND_FUNC,
    pub rmr_free_func: DAT_RMR_FREE_FUNC,
    pub psp_create_func: DAT_PSP_CREATE_FUNC,
    pub psp_query_func: DAT_PSP_QUERY_FUNC,
    pub psp_free_func: DAT_PSP_FREE_FUNC,
    pub rsp_create_func: DAT_RSP_CREATE_FUNC,
    pub rsp_query_func: DAT_RSP_QUERY_FUNC,
    pub rsp_free_func: DAT_RSP_FREE_FUNC,
    pub pz_create_func: DAT_PZ_CREATE_FUNC,
    pub pz_query_func: DAT_PZ_QUERY_FUNC,
    pub pz_free_func: DAT_PZ_FREE_FUNC,
    pub psp_create_any_func: DAT_PSP_CREATE_ANY_FUNC,
    pub ep_reset_func: DAT_EP_RESET_FUNC,
    pub evd_set_unwaitable_func: DAT_EVD_SET_UNWAITABLE_FUNC,
    pub evd_clear_unwaitable_func: DAT_EVD_CLEAR_UNWAITABLE_FUNC,
    pub lmr_sync_rdma_read_func: DAT_LMR_SYNC_RDMA_READ_FUNC,
    pub lmr_sync_rdma_write_func: DAT_LMR_SYNC_RDMA_WRITE_FUNC,
    pub ep_create_with_srq_func: DAT_EP_CREATE_WITH_SRQ_FUNC,
    pub ep_recv_query_func: DAT_EP_RECV_QUERY_FUNC,
    pub ep_set_watermark_func: DAT_EP_SET_WATERMARK_FUNC,
    pub srq_create_func: DAT_SRQ_CREATE_FUNC,
    pub srq_free_func: DAT_SRQ_FREE_FUNC,
    pub srq_post_recv_func: DAT_SRQ_POST_RECV_FUNC,
    pub srq_query_func: DAT_SRQ_QUERY_FUNC,
    pub srq_resize_func: DAT_SRQ_RESIZE_FUNC,
    pub srq_set_lw_func: DAT_SRQ_SET_LW_FUNC,
    pub csp_create_func: DAT_CSP_CREATE_FUNC,
    pub csp_query_func: DAT_CSP_QUERY_FUNC,
    pub csp_free_func: DAT_CSP_FREE_FUNC,
    pub ep_common_connect_func: DAT_EP_COMMON_CONNECT_FUNC,
    pub rmr_create_for_ep_func: DAT_RMR_CREATE_FOR_EP_FUNC,
    pub ep_post_send_with_invalidate_func: DAT_EP_POST_SEND_WITH_INVALIDATE_FUNC,
    pub ep_post_rdma_read_to_rmr_func: DAT_EP_POST_RDMA_READ_TO_RMR_FUNC,
    pub cno_fd_create_func: DAT_CNO_FD_CREATE_FUNC,
    pub cno_trigger_func: DAT_CNO_TRIGGER_FUNC,
    pub ia_ha_related_func: DAT_IA_HA_RELATED_FUNC,
    pub handle_extendedop_func: DAT_HANDLE_EXTENDEDOP_FUNC,
}

// ---------------------------------------------------------------------------------------------
// dat_registry.h

/// `dat_provider_init`, exported by the provider library.
pub const DAT_PROVIDER_INIT_FUNC_STR: &CStr = c"dat_provider_init";
/// `dat_provider_fini`, exported by the provider library.
pub const DAT_PROVIDER_FINI_FUNC_STR: &CStr = c"dat_provider_fini";

/// `void dat_provider_init(const DAT_PROVIDER_INFO *, const char *instance_data)`.
pub type DAT_PROVIDER_INIT_FUNC =
    Option<unsafe extern "C" fn(*const DAT_PROVIDER_INFO, *const c_char)>;
/// `void dat_provider_fini(const DAT_PROVIDER_INFO *)`.
pub type DAT_PROVIDER_FINI_FUNC = Option<unsafe extern "C" fn(*const DAT_PROVIDER_INFO)>;

/// `enum dat_ha_relationship`.
pub type DAT_HA_RELATIONSHIP = c_uint;
pub const DAT_HA_FALSE: DAT_HA_RELATIONSHIP = 0;
pub const DAT_HA_TRUE: DAT_HA_RELATIONSHIP = 1;
pub const DAT_HA_UNKNOWN: DAT_HA_RELATIONSHIP = 2;
pub const DAT_HA_CONFLICTING: DAT_HA_RELATIONSHIP = 3;
pub const DAT_HA_EXTENSION_BASE: DAT_HA_RELATIONSHIP = 4;

extern "C" {
    /// Registers `provider` under the key `info` (the very `info` passed to
    /// `dat_provider_init`). `DAT_PROVIDER_ALREADY_REGISTERED` if the key exists.
    pub fn dat_registry_add_provider(
        provider: *const DAT_PROVIDER,
        info: *const DAT_PROVIDER_INFO,
    ) -> DAT_RETURN;
    /// Unregisters; `DAT_PROVIDER_IN_USE` while IAs of it are open.
    pub fn dat_registry_remove_provider(
        provider: *const DAT_PROVIDER,
        info: *const DAT_PROVIDER_INFO,
    ) -> DAT_RETURN;
    /// libdat2's IA handle mapping (not in the headers): index -> provider pointer when
    /// `handle` is below the table size, provider pointer -> consumer index otherwise.
    pub fn dats_get_ia_handle(handle: DAT_IA_HANDLE, out: *mut DAT_IA_HANDLE) -> DAT_RETURN;
}

// ---------------------------------------------------------------------------------------------
// dat_ib_extensions.h

/// IB extension version 2.0.9 (`DAT_IA_ATTR::extension_version`).
pub const DAT_IB_EXTENSION_VERSION: DAT_COUNT = 209;
pub const DAT_IB_ATTR_COUNTERS: &CStr = c"DAT_COUNTERS";
pub const DAT_IB_ATTR_FETCH_AND_ADD: &CStr = c"DAT_IB_FETCH_AND_ADD";
pub const DAT_IB_ATTR_CMP_AND_SWAP: &CStr = c"DAT_IB_CMP_AND_SWAP";
pub const DAT_IB_ATTR_IMMED_DATA: &CStr = c"DAT_IB_IMMED_DATA";
pub const DAT_IB_ATTR_UD: &CStr = c"DAT_IB_UD";

pub type DAT_IB_COLLECTIVE_HANDLE = DAT_HANDLE;

/// `enum dat_ib_event_number` (values go into `DAT_EVENT::event_number`).
pub type DAT_IB_EVENT_NUMBER = DAT_EVENT_NUMBER;
pub const DAT_IB_DTO_EVENT: DAT_IB_EVENT_NUMBER = DAT_IB_EXTENSION_RANGE_BASE;
pub const DAT_IB_UD_CONNECTION_REQUEST_EVENT: DAT_IB_EVENT_NUMBER = DAT_IB_EXTENSION_RANGE_BASE + 1;
pub const DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED: DAT_IB_EVENT_NUMBER =
    DAT_IB_EXTENSION_RANGE_BASE + 2;
pub const DAT_IB_UD_CONNECTION_REJECT_EVENT: DAT_IB_EVENT_NUMBER = DAT_IB_EXTENSION_RANGE_BASE + 3;
pub const DAT_IB_UD_CONNECTION_ERROR_EVENT: DAT_IB_EVENT_NUMBER = DAT_IB_EXTENSION_RANGE_BASE + 4;
pub const DAT_IB_COLLECTIVE_EVENT: DAT_IB_EVENT_NUMBER = DAT_IB_EXTENSION_RANGE_BASE + 5;

/// `enum dat_ib_op`: the `DAT_EXTENDED_OP` values (typed like the vtable's `int` argument).
pub type DAT_IB_OP = DAT_EXTENDED_OP;
pub const DAT_IB_FETCH_AND_ADD_OP: DAT_IB_OP = 0;
pub const DAT_IB_CMP_AND_SWAP_OP: DAT_IB_OP = 1;
pub const DAT_IB_RDMA_WRITE_IMMED_OP: DAT_IB_OP = 2;
pub const DAT_IB_UD_SEND_OP: DAT_IB_OP = 3;
pub const DAT_IB_QUERY_COUNTERS_OP: DAT_IB_OP = 4;
pub const DAT_IB_PRINT_COUNTERS_OP: DAT_IB_OP = 5;
pub const DAT_IB_COLLECTIVE_CREATE_MEMBER_OP: DAT_IB_OP = 6;
pub const DAT_IB_COLLECTIVE_FREE_MEMBER_OP: DAT_IB_OP = 7;
pub const DAT_IB_COLLECTIVE_CREATE_GROUP_OP: DAT_IB_OP = 8;
pub const DAT_IB_COLLECTIVE_FREE_GROUP_OP: DAT_IB_OP = 9;
pub const DAT_IB_COLLECTIVE_SET_CLOCK_OP: DAT_IB_OP = 10;
pub const DAT_IB_COLLECTIVE_READ_CLOCK_OP: DAT_IB_OP = 11;
pub const DAT_IB_COLLECTIVE_SCATTER_OP: DAT_IB_OP = 12;
pub const DAT_IB_COLLECTIVE_SCATTERV_OP: DAT_IB_OP = 13;
pub const DAT_IB_COLLECTIVE_GATHER_OP: DAT_IB_OP = 14;
pub const DAT_IB_COLLECTIVE_GATHERV_OP: DAT_IB_OP = 15;
pub const DAT_IB_COLLECTIVE_ALLGATHER_OP: DAT_IB_OP = 16;
pub const DAT_IB_COLLECTIVE_ALLGATHERV_OP: DAT_IB_OP = 17;
pub const DAT_IB_COLLECTIVE_ALLTOALL_OP: DAT_IB_OP = 18;
pub const DAT_IB_COLLECTIVE_ALLTOALLV_OP: DAT_IB_OP = 19;
pub const DAT_IB_COLLECTIVE_REDUCE_OP: DAT_IB_OP = 20;
pub const DAT_IB_COLLECTIVE_ALLREDUCE_OP: DAT_IB_OP = 21;
pub const DAT_IB_COLLECTIVE_REDUCE_SCATTER_OP: DAT_IB_OP = 22;
pub const DAT_IB_COLLECTIVE_SCAN_OP: DAT_IB_OP = 23;
pub const DAT_IB_COLLECTIVE_BROADCAST_OP: DAT_IB_OP = 24;
pub const DAT_IB_COLLECTIVE_BARRIER_OP: DAT_IB_OP = 25;
pub const DAT_IB_START_COUNTERS_OP: DAT_IB_OP = 26;
pub const DAT_IB_STOP_COUNTERS_OP: DAT_IB_OP = 27;
pub const DAT_IB_UD_CM_FREE_OP: DAT_IB_OP = 28;
pub const DAT_IB_UD_AH_FREE_OP: DAT_IB_OP = 29;
pub const DAT_IB_OPEN_QUERY_OP: DAT_IB_OP = DAT_OPEN_EXTENSION_BASE;
pub const DAT_IB_CLOSE_QUERY_OP: DAT_IB_OP = DAT_CLOSE_EXTENSION_BASE;

/// `enum dat_ib_ext_type`: `DAT_IB_EXTENSION_EVENT_DATA::type`.
pub type DAT_IB_EXT_TYPE = c_uint;
pub const DAT_IB_FETCH_AND_ADD: DAT_IB_EXT_TYPE = 0;
pub const DAT_IB_CMP_AND_SWAP: DAT_IB_EXT_TYPE = 1;
pub const DAT_IB_RDMA_WRITE_IMMED: DAT_IB_EXT_TYPE = 2;
pub const DAT_IB_RDMA_WRITE_IMMED_DATA: DAT_IB_EXT_TYPE = 3;
pub const DAT_IB_RECV_IMMED_DATA: DAT_IB_EXT_TYPE = 4;
pub const DAT_IB_UD_CONNECT_REQUEST: DAT_IB_EXT_TYPE = 5;
pub const DAT_IB_UD_REMOTE_AH: DAT_IB_EXT_TYPE = 6;
pub const DAT_IB_UD_PASSIVE_REMOTE_AH: DAT_IB_EXT_TYPE = 7;
pub const DAT_IB_UD_SEND: DAT_IB_EXT_TYPE = 8;
pub const DAT_IB_UD_RECV: DAT_IB_EXT_TYPE = 9;
pub const DAT_IB_UD_CONNECT_REJECT: DAT_IB_EXT_TYPE = 10;
pub const DAT_IB_UD_CONNECT_ERROR: DAT_IB_EXT_TYPE = 11;
pub const DAT_IB_COLLECTIVE_CREATE_STATUS: DAT_IB_EXT_TYPE = 12;
pub const DAT_IB_COLLECTIVE_CREATE_DATA: DAT_IB_EXT_TYPE = 13;
pub const DAT_IB_COLLECTIVE_CLOCK_SET_STATUS: DAT_IB_EXT_TYPE = 14;
pub const DAT_IB_COLLECTIVE_SCATTER_STATUS: DAT_IB_EXT_TYPE = 15;
pub const DAT_IB_COLLECTIVE_SCATTERV_STATUS: DAT_IB_EXT_TYPE = 16;
pub const DAT_IB_COLLECTIVE_GATHER_STATUS: DAT_IB_EXT_TYPE = 17;
pub const DAT_IB_COLLECTIVE_GATHERV_STATUS: DAT_IB_EXT_TYPE = 18;
pub const DAT_IB_COLLECTIVE_ALLGATHER_STATUS: DAT_IB_EXT_TYPE = 19;
pub const DAT_IB_COLLECTIVE_ALLGATHERV_STATUS: DAT_IB_EXT_TYPE = 20;
pub const DAT_IB_COLLECTIVE_ALLTOALL_STATUS: DAT_IB_EXT_TYPE = 21;
pub const DAT_IB_COLLECTIVE_ALLTOALLV_STATUS: DAT_IB_EXT_TYPE = 22;
pub const DAT_IB_COLLECTIVE_REDUCE_STATUS: DAT_IB_EXT_TYPE = 23;
pub const DAT_IB_COLLECTIVE_ALLREDUCE_STATUS: DAT_IB_EXT_TYPE = 24;
pub const DAT_IB_COLLECTIVE_REDUCE_SCATTER_STATUS: DAT_IB_EXT_TYPE = 25;
pub const DAT_IB_COLLECTIVE_SCAN_STATUS: DAT_IB_EXT_TYPE = 26;
pub const DAT_IB_COLLECTIVE_BROADCAST_STATUS: DAT_IB_EXT_TYPE = 27;
pub const DAT_IB_COLLECTIVE_BARRIER_STATUS: DAT_IB_EXT_TYPE = 28;

/// `enum dat_ib_status`: `DAT_IB_EXTENSION_EVENT_DATA::status`.
pub type DAT_IB_STATUS = c_uint;
pub const DAT_OP_SUCCESS: DAT_IB_STATUS = 0;
pub const DAT_IB_OP_ERR: DAT_IB_STATUS = 1;
pub const DAT_IB_COLL_COMP_ERR: DAT_IB_STATUS = 2;

/// `enum dat_ib_return` (DAT_RETURN types of the IB extension).
pub type DAT_IB_RETURN = DAT_RETURN;
pub const DAT_IB_ERR: DAT_IB_RETURN = DAT_EXTENSION_BASE;
pub const DAT_IB_COLLECTIVE_ERR: DAT_IB_RETURN = DAT_EXTENSION_BASE + 1;

/// `enum dat_ib_dtos`: values of `DAT_DTO_COMPLETION_EVENT_DATA::operation`.
pub type DAT_IB_DTOS = DAT_DTOS;
pub const DAT_IB_DTO_RDMA_WRITE_IMMED: DAT_IB_DTOS = DAT_DTO_EXTENSION_BASE;
pub const DAT_IB_DTO_RECV_IMMED: DAT_IB_DTOS = DAT_DTO_EXTENSION_BASE + 1;
pub const DAT_IB_DTO_FETCH_ADD: DAT_IB_DTOS = DAT_DTO_EXTENSION_BASE + 2;
pub const DAT_IB_DTO_CMP_SWAP: DAT_IB_DTOS = DAT_DTO_EXTENSION_BASE + 3;
pub const DAT_IB_DTO_RECV_MSG_IMMED: DAT_IB_DTOS = DAT_DTO_EXTENSION_BASE + 4;
pub const DAT_IB_DTO_SEND_UD: DAT_IB_DTOS = DAT_DTO_EXTENSION_BASE + 5;
pub const DAT_IB_DTO_RECV_UD: DAT_IB_DTOS = DAT_DTO_EXTENSION_BASE + 6;
pub const DAT_IB_DTO_RECV_UD_IMMED: DAT_IB_DTOS = DAT_DTO_EXTENSION_BASE + 7;
pub const DAT_IB_DTO_COLLECTIVES: DAT_IB_DTOS = DAT_DTO_EXTENSION_BASE + 8;

/// `enum dat_ib_handle_type`.
pub type DAT_IB_HANDLE_TYPE = DAT_HANDLE_TYPE;
pub const DAT_IB_HANDLE_TYPE_EXT: DAT_IB_HANDLE_TYPE = DAT_HANDLE_TYPE_EXTENSION_BASE;
pub const DAT_IB_HANDLE_TYPE_COLLECTIVE: DAT_IB_HANDLE_TYPE = DAT_HANDLE_TYPE_EXTENSION_BASE + 1;

/// `enum dat_ib_evd_extension_flags`.
pub type DAT_IB_EVD_EXTENSION_FLAGS = DAT_EVD_FLAGS;
pub const DAT_IB_EVD_EXTENSION_FLAG: DAT_IB_EVD_EXTENSION_FLAGS = DAT_EVD_EXTENSION_BASE;

/// `enum dat_ib_mem_priv_flags`.
pub type DAT_IB_MEM_PRIV_FLAGS = DAT_MEM_PRIV_FLAGS;
pub const DAT_IB_MEM_PRIV_REMOTE_ATOMIC: DAT_IB_MEM_PRIV_FLAGS = DAT_MEM_PRIV_EXTENSION_BASE;

/// `enum dat_ib_service_type`.
pub type DAT_IB_SERVICE_TYPE = DAT_SERVICE_TYPE;
pub const DAT_IB_SERVICE_TYPE_UD: DAT_IB_SERVICE_TYPE = DAT_SERVICE_TYPE_EXTENSION_BASE;

/// `struct dat_ib_addr_handle` (40 bytes): a UD address handle (`ah` is a `struct ibv_ah *`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_IB_ADDR_HANDLE {
    pub ah: *mut c_void,
    pub qpn: DAT_UINT32,
    pub ia_addr: DAT_SOCK_ADDR6,
}

/// `struct dat_ib_immed_data`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DAT_IB_IMMED_DATA {
    pub data: DAT_UINT32,
}

/// `struct dat_ib_collective_event_data` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_IB_COLLECTIVE_EVENT_DATA {
    pub handle: DAT_HANDLE,
    pub context: DAT_CONTEXT,
}

/// The unnamed union type of `DAT_IB_EXTENSION_EVENT_DATA::val`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union DAT_IB_EXTENSION_EVENT_DATA_VAL {
    pub immed: DAT_IB_IMMED_DATA,
}

/// C's anonymous union inside `DAT_IB_EXTENSION_EVENT_DATA` (40 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub union DAT_IB_EXTENSION_EVENT_DATA_ANON {
    pub remote_ah: DAT_IB_ADDR_HANDLE,
    pub coll: DAT_IB_COLLECTIVE_EVENT_DATA,
}

/// `struct dat_ib_extension_event_data` (64 bytes): lives in `DAT_EVENT::event_extension_data`
/// of `DAT_IB_DTO_EVENT` events.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DAT_IB_EXTENSION_EVENT_DATA {
    pub r#type: DAT_IB_EXT_TYPE,
    pub status: DAT_IB_STATUS,
    pub val: DAT_IB_EXTENSION_EVENT_DATA_VAL,
    /// C: an anonymous union; `remote_ah` / `coll` are its members.
    pub anon: DAT_IB_EXTENSION_EVENT_DATA_ANON,
    pub context: DAT_CONTEXT,
}
