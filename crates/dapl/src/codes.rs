//! Numeric DAT return types and subtypes, generated from `/usr/include/dat2/dat_error.h`
//! (checked against the header by `tests/dat_error_values.rs`).

/// `DAT_RETURN_TYPE`: the type part (bits 16..30) of a `DAT_RETURN`, values from `dat_error.h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
#[non_exhaustive]
pub enum ErrorType {
    /// `DAT_SUCCESS`
    Success = 0x0000_0000,
    /// `DAT_ABORT`
    Abort = 0x0001_0000,
    /// `DAT_CONN_QUAL_IN_USE`
    ConnQualInUse = 0x0002_0000,
    /// `DAT_INSUFFICIENT_RESOURCES`
    InsufficientResources = 0x0003_0000,
    /// `DAT_INTERNAL_ERROR`
    InternalError = 0x0004_0000,
    /// `DAT_INVALID_HANDLE`
    InvalidHandle = 0x0005_0000,
    /// `DAT_INVALID_PARAMETER`
    InvalidParameter = 0x0006_0000,
    /// `DAT_INVALID_STATE`
    InvalidState = 0x0007_0000,
    /// `DAT_LENGTH_ERROR`
    LengthError = 0x0008_0000,
    /// `DAT_MODEL_NOT_SUPPORTED`
    ModelNotSupported = 0x0009_0000,
    /// `DAT_PROVIDER_NOT_FOUND`
    ProviderNotFound = 0x000A_0000,
    /// `DAT_PRIVILEGES_VIOLATION`
    PrivilegesViolation = 0x000B_0000,
    /// `DAT_PROTECTION_VIOLATION`
    ProtectionViolation = 0x000C_0000,
    /// `DAT_QUEUE_EMPTY`
    QueueEmpty = 0x000D_0000,
    /// `DAT_QUEUE_FULL`
    QueueFull = 0x000E_0000,
    /// `DAT_TIMEOUT_EXPIRED`
    TimeoutExpired = 0x000F_0000,
    /// `DAT_PROVIDER_ALREADY_REGISTERED`
    ProviderAlreadyRegistered = 0x0010_0000,
    /// `DAT_PROVIDER_IN_USE`
    ProviderInUse = 0x0011_0000,
    /// `DAT_INVALID_ADDRESS`
    InvalidAddress = 0x0012_0000,
    /// `DAT_INTERRUPTED_CALL`
    InterruptedCall = 0x0013_0000,
    /// `DAT_CONN_QUAL_UNAVAILABLE`
    ConnQualUnavailable = 0x0014_0000,
    /// `DAT_PORT_IN_USE`
    PortInUse = 0x0016_0000,
    /// `DAT_COMM_NOT_SUPPORTED`
    CommNotSupported = 0x0017_0000,
    /// `DAT_NOT_IMPLEMENTED`
    NotImplemented = 0x3FFF_0000,
}

impl ErrorType {
    /// Every type, for tables and tests.
    pub const ALL: &'static [ErrorType] = &[
        ErrorType::Success,
        ErrorType::Abort,
        ErrorType::ConnQualInUse,
        ErrorType::InsufficientResources,
        ErrorType::InternalError,
        ErrorType::InvalidHandle,
        ErrorType::InvalidParameter,
        ErrorType::InvalidState,
        ErrorType::LengthError,
        ErrorType::ModelNotSupported,
        ErrorType::ProviderNotFound,
        ErrorType::PrivilegesViolation,
        ErrorType::ProtectionViolation,
        ErrorType::QueueEmpty,
        ErrorType::QueueFull,
        ErrorType::TimeoutExpired,
        ErrorType::ProviderAlreadyRegistered,
        ErrorType::ProviderInUse,
        ErrorType::InvalidAddress,
        ErrorType::InterruptedCall,
        ErrorType::ConnQualUnavailable,
        ErrorType::PortInUse,
        ErrorType::CommNotSupported,
        ErrorType::NotImplemented,
    ];
    /// The C name of this type, as in `dat_error.h`.
    pub const fn c_name(self) -> &'static str {
        match self {
            ErrorType::Success => "DAT_SUCCESS",
            ErrorType::Abort => "DAT_ABORT",
            ErrorType::ConnQualInUse => "DAT_CONN_QUAL_IN_USE",
            ErrorType::InsufficientResources => "DAT_INSUFFICIENT_RESOURCES",
            ErrorType::InternalError => "DAT_INTERNAL_ERROR",
            ErrorType::InvalidHandle => "DAT_INVALID_HANDLE",
            ErrorType::InvalidParameter => "DAT_INVALID_PARAMETER",
            ErrorType::InvalidState => "DAT_INVALID_STATE",
            ErrorType::LengthError => "DAT_LENGTH_ERROR",
            ErrorType::ModelNotSupported => "DAT_MODEL_NOT_SUPPORTED",
            ErrorType::ProviderNotFound => "DAT_PROVIDER_NOT_FOUND",
            ErrorType::PrivilegesViolation => "DAT_PRIVILEGES_VIOLATION",
            ErrorType::ProtectionViolation => "DAT_PROTECTION_VIOLATION",
            ErrorType::QueueEmpty => "DAT_QUEUE_EMPTY",
            ErrorType::QueueFull => "DAT_QUEUE_FULL",
            ErrorType::TimeoutExpired => "DAT_TIMEOUT_EXPIRED",
            ErrorType::ProviderAlreadyRegistered => "DAT_PROVIDER_ALREADY_REGISTERED",
            ErrorType::ProviderInUse => "DAT_PROVIDER_IN_USE",
            ErrorType::InvalidAddress => "DAT_INVALID_ADDRESS",
            ErrorType::InterruptedCall => "DAT_INTERRUPTED_CALL",
            ErrorType::ConnQualUnavailable => "DAT_CONN_QUAL_UNAVAILABLE",
            ErrorType::PortInUse => "DAT_PORT_IN_USE",
            ErrorType::CommNotSupported => "DAT_COMM_NOT_SUPPORTED",
            ErrorType::NotImplemented => "DAT_NOT_IMPLEMENTED",
        }
    }
}

/// `DAT_RETURN_SUBTYPE`: the low 16 bits of a `DAT_RETURN`, values from `dat_error.h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
#[non_exhaustive]
pub enum Subtype {
    /// `DAT_NO_SUBTYPE`
    NoSubtype = 0,
    /// `DAT_SUB_INTERRUPTED`
    SubInterrupted = 1,
    /// `DAT_RESOURCE_MEMORY`
    ResourceMemory = 2,
    /// `DAT_RESOURCE_DEVICE`
    ResourceDevice = 3,
    /// `DAT_RESOURCE_TEP`
    ResourceTep = 4,
    /// `DAT_RESOURCE_TEVD`
    ResourceTevd = 5,
    /// `DAT_RESOURCE_PROTECTION_DOMAIN`
    ResourceProtectionDomain = 6,
    /// `DAT_RESOURCE_MEMORY_REGION`
    ResourceMemoryRegion = 7,
    /// `DAT_RESOURCE_ERROR_HANDLER`
    ResourceErrorHandler = 8,
    /// `DAT_RESOURCE_CREDITS`
    ResourceCredits = 9,
    /// `DAT_RESOURCE_SRQ`
    ResourceSrq = 10,
    /// `DAT_INVALID_HANDLE_IA`
    InvalidHandleIa = 11,
    /// `DAT_INVALID_HANDLE_EP`
    InvalidHandleEp = 12,
    /// `DAT_INVALID_HANDLE_LMR`
    InvalidHandleLmr = 13,
    /// `DAT_INVALID_HANDLE_RMR`
    InvalidHandleRmr = 14,
    /// `DAT_INVALID_HANDLE_PZ`
    InvalidHandlePz = 15,
    /// `DAT_INVALID_HANDLE_PSP`
    InvalidHandlePsp = 16,
    /// `DAT_INVALID_HANDLE_RSP`
    InvalidHandleRsp = 17,
    /// `DAT_INVALID_HANDLE_CR`
    InvalidHandleCr = 18,
    /// `DAT_INVALID_HANDLE_CNO`
    InvalidHandleCno = 19,
    /// `DAT_INVALID_HANDLE_EVD_CR`
    InvalidHandleEvdCr = 20,
    /// `DAT_INVALID_HANDLE_EVD_REQUEST`
    InvalidHandleEvdRequest = 21,
    /// `DAT_INVALID_HANDLE_EVD_RECV`
    InvalidHandleEvdRecv = 22,
    /// `DAT_INVALID_HANDLE_EVD_CONN`
    InvalidHandleEvdConn = 23,
    /// `DAT_INVALID_HANDLE_EVD_ASYNC`
    InvalidHandleEvdAsync = 24,
    /// `DAT_INVALID_HANDLE_SRQ`
    InvalidHandleSrq = 25,
    /// `DAT_INVALID_HANDLE_CSP`
    InvalidHandleCsp = 26,
    /// `DAT_INVALID_HANDLE1`
    InvalidHandle1 = 27,
    /// `DAT_INVALID_HANDLE2`
    InvalidHandle2 = 28,
    /// `DAT_INVALID_HANDLE3`
    InvalidHandle3 = 29,
    /// `DAT_INVALID_HANDLE4`
    InvalidHandle4 = 30,
    /// `DAT_INVALID_HANDLE5`
    InvalidHandle5 = 31,
    /// `DAT_INVALID_HANDLE6`
    InvalidHandle6 = 32,
    /// `DAT_INVALID_HANDLE7`
    InvalidHandle7 = 33,
    /// `DAT_INVALID_HANDLE8`
    InvalidHandle8 = 34,
    /// `DAT_INVALID_HANDLE9`
    InvalidHandle9 = 35,
    /// `DAT_INVALID_HANDLE10`
    InvalidHandle10 = 36,
    /// `DAT_INVALID_ARG1`
    InvalidArg1 = 37,
    /// `DAT_INVALID_ARG2`
    InvalidArg2 = 38,
    /// `DAT_INVALID_ARG3`
    InvalidArg3 = 39,
    /// `DAT_INVALID_ARG4`
    InvalidArg4 = 40,
    /// `DAT_INVALID_ARG5`
    InvalidArg5 = 41,
    /// `DAT_INVALID_ARG6`
    InvalidArg6 = 42,
    /// `DAT_INVALID_ARG7`
    InvalidArg7 = 43,
    /// `DAT_INVALID_ARG8`
    InvalidArg8 = 44,
    /// `DAT_INVALID_ARG9`
    InvalidArg9 = 45,
    /// `DAT_INVALID_ARG10`
    InvalidArg10 = 46,
    /// `DAT_INVALID_STATE_EP_UNCONNECTED`
    InvalidStateEpUnconnected = 47,
    /// `DAT_INVALID_STATE_EP_ACTCONNPENDING`
    InvalidStateEpActconnpending = 48,
    /// `DAT_INVALID_STATE_EP_PASSCONNPENDING`
    InvalidStateEpPassconnpending = 49,
    /// `DAT_INVALID_STATE_EP_TENTCONNPENDING`
    InvalidStateEpTentconnpending = 50,
    /// `DAT_INVALID_STATE_EP_CONNECTED`
    InvalidStateEpConnected = 51,
    /// `DAT_INVALID_STATE_EP_DISCONNECTED`
    InvalidStateEpDisconnected = 52,
    /// `DAT_INVALID_STATE_EP_RESERVED`
    InvalidStateEpReserved = 53,
    /// `DAT_INVALID_STATE_EP_COMPLPENDING`
    InvalidStateEpComplpending = 54,
    /// `DAT_INVALID_STATE_EP_DISCPENDING`
    InvalidStateEpDiscpending = 55,
    /// `DAT_INVALID_STATE_EP_PROVIDERCONTROL`
    InvalidStateEpProvidercontrol = 56,
    /// `DAT_INVALID_STATE_EP_NOTREADY`
    InvalidStateEpNotready = 57,
    /// `DAT_INVALID_STATE_EP_RECV_WATERMARK`
    InvalidStateEpRecvWatermark = 58,
    /// `DAT_INVALID_STATE_EP_PZ`
    InvalidStateEpPz = 59,
    /// `DAT_INVALID_STATE_EP_EVD_REQUEST`
    InvalidStateEpEvdRequest = 60,
    /// `DAT_INVALID_STATE_EP_EVD_RECV`
    InvalidStateEpEvdRecv = 61,
    /// `DAT_INVALID_STATE_EP_EVD_CONNECT`
    InvalidStateEpEvdConnect = 62,
    /// `DAT_INVALID_STATE_EP_UNCONFIGURED`
    InvalidStateEpUnconfigured = 63,
    /// `DAT_INVALID_STATE_EP_UNCONFRESERVED`
    InvalidStateEpUnconfreserved = 64,
    /// `DAT_INVALID_STATE_EP_UNCONFPASSIVE`
    InvalidStateEpUnconfpassive = 65,
    /// `DAT_INVALID_STATE_EP_UNCONFTENTATIVE`
    InvalidStateEpUnconftentative = 66,
    /// `DAT_INVALID_STATE_CNO_IN_USE`
    InvalidStateCnoInUse = 67,
    /// `DAT_INVALID_STATE_CNO_DEAD`
    InvalidStateCnoDead = 68,
    /// `DAT_INVALID_STATE_EVD_OPEN`
    InvalidStateEvdOpen = 69,
    /// `DAT_INVALID_STATE_EVD_ENABLED`
    InvalidStateEvdEnabled = 70,
    /// `DAT_INVALID_STATE_EVD_DISABLED`
    InvalidStateEvdDisabled = 71,
    /// `DAT_INVALID_STATE_EVD_WAITABLE`
    InvalidStateEvdWaitable = 72,
    /// `DAT_INVALID_STATE_EVD_UNWAITABLE`
    InvalidStateEvdUnwaitable = 73,
    /// `DAT_INVALID_STATE_EVD_IN_USE`
    InvalidStateEvdInUse = 74,
    /// `DAT_INVALID_STATE_EVD_CONFIG_NOTIFY`
    InvalidStateEvdConfigNotify = 75,
    /// `DAT_INVALID_STATE_EVD_CONFIG_SOLICITED`
    InvalidStateEvdConfigSolicited = 76,
    /// `DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD`
    InvalidStateEvdConfigThreshold = 77,
    /// `DAT_INVALID_STATE_EVD_WAITER`
    InvalidStateEvdWaiter = 78,
    /// `DAT_INVALID_STATE_EVD_ASYNC`
    InvalidStateEvdAsync = 79,
    /// `DAT_INVALID_STATE_IA_IN_USE`
    InvalidStateIaInUse = 80,
    /// `DAT_INVALID_STATE_LMR_IN_USE`
    InvalidStateLmrInUse = 81,
    /// `DAT_INVALID_STATE_LMR_FREE`
    InvalidStateLmrFree = 82,
    /// `DAT_INVALID_STATE_PZ_IN_USE`
    InvalidStatePzInUse = 83,
    /// `DAT_INVALID_STATE_PZ_FREE`
    InvalidStatePzFree = 84,
    /// `DAT_INVALID_STATE_SRQ_OPERATIONAL`
    InvalidStateSrqOperational = 85,
    /// `DAT_INVALID_STATE_SRQ_ERROR`
    InvalidStateSrqError = 86,
    /// `DAT_INVALID_STATE_SRQ_IN_USE`
    InvalidStateSrqInUse = 87,
    /// `DAT_INVALID_STATE_SRQ_SHUTDOWN`
    InvalidStateSrqShutdown = 88,
    /// `DAT_PRIVILEGES_READ`
    PrivilegesRead = 89,
    /// `DAT_PRIVILEGES_WRITE`
    PrivilegesWrite = 90,
    /// `DAT_PRIVILEGES_RDMA_READ`
    PrivilegesRdmaRead = 91,
    /// `DAT_PRIVILEGES_RDMA_WRITE`
    PrivilegesRdmaWrite = 92,
    /// `DAT_PROTECTION_READ`
    ProtectionRead = 93,
    /// `DAT_PROTECTION_WRITE`
    ProtectionWrite = 94,
    /// `DAT_PROTECTION_RDMA_READ`
    ProtectionRdmaRead = 95,
    /// `DAT_PROTECTION_RDMA_WRITE`
    ProtectionRdmaWrite = 96,
    /// `DAT_INVALID_ADDRESS_UNSUPPORTED`
    InvalidAddressUnsupported = 97,
    /// `DAT_INVALID_ADDRESS_UNREACHABLE`
    InvalidAddressUnreachable = 98,
    /// `DAT_INVALID_ADDRESS_MALFORMED`
    InvalidAddressMalformed = 99,
    /// `DAT_NAME_NOT_REGISTERED`
    NameNotRegistered = 100,
    /// `DAT_MAJOR_NOT_FOUND`
    MajorNotFound = 101,
    /// `DAT_MINOR_NOT_FOUND`
    MinorNotFound = 102,
    /// `DAT_THREAD_SAFETY_NOT_FOUND`
    ThreadSafetyNotFound = 103,
}

impl Subtype {
    /// Every subtype, for tables and tests.
    pub const ALL: &'static [Subtype] = &[
        Subtype::NoSubtype,
        Subtype::SubInterrupted,
        Subtype::ResourceMemory,
        Subtype::ResourceDevice,
        Subtype::ResourceTep,
        Subtype::ResourceTevd,
        Subtype::ResourceProtectionDomain,
        Subtype::ResourceMemoryRegion,
        Subtype::ResourceErrorHandler,
        Subtype::ResourceCredits,
        Subtype::ResourceSrq,
        Subtype::InvalidHandleIa,
        Subtype::InvalidHandleEp,
        Subtype::InvalidHandleLmr,
        Subtype::InvalidHandleRmr,
        Subtype::InvalidHandlePz,
        Subtype::InvalidHandlePsp,
        Subtype::InvalidHandleRsp,
        Subtype::InvalidHandleCr,
        Subtype::InvalidHandleCno,
        Subtype::InvalidHandleEvdCr,
        Subtype::InvalidHandleEvdRequest,
        Subtype::InvalidHandleEvdRecv,
        Subtype::InvalidHandleEvdConn,
        Subtype::InvalidHandleEvdAsync,
        Subtype::InvalidHandleSrq,
        Subtype::InvalidHandleCsp,
        Subtype::InvalidHandle1,
        Subtype::InvalidHandle2,
        Subtype::InvalidHandle3,
        Subtype::InvalidHandle4,
        Subtype::InvalidHandle5,
        Subtype::InvalidHandle6,
        Subtype::InvalidHandle7,
        Subtype::InvalidHandle8,
        Subtype::InvalidHandle9,
        Subtype::InvalidHandle10,
        Subtype::InvalidArg1,
        Subtype::InvalidArg2,
        Subtype::InvalidArg3,
        Subtype::InvalidArg4,
        Subtype::InvalidArg5,
        Subtype::InvalidArg6,
        Subtype::InvalidArg7,
        Subtype::InvalidArg8,
        Subtype::InvalidArg9,
        Subtype::InvalidArg10,
        Subtype::InvalidStateEpUnconnected,
        Subtype::InvalidStateEpActconnpending,
        Subtype::InvalidStateEpPassconnpending,
        Subtype::InvalidStateEpTentconnpending,
        Subtype::InvalidStateEpConnected,
        Subtype::InvalidStateEpDisconnected,
        Subtype::InvalidStateEpReserved,
        Subtype::InvalidStateEpComplpending,
        Subtype::InvalidStateEpDiscpending,
        Subtype::InvalidStateEpProvidercontrol,
        Subtype::InvalidStateEpNotready,
        Subtype::InvalidStateEpRecvWatermark,
        Subtype::InvalidStateEpPz,
        Subtype::InvalidStateEpEvdRequest,
        Subtype::InvalidStateEpEvdRecv,
        Subtype::InvalidStateEpEvdConnect,
        Subtype::InvalidStateEpUnconfigured,
        Subtype::InvalidStateEpUnconfreserved,
        Subtype::InvalidStateEpUnconfpassive,
        Subtype::InvalidStateEpUnconftentative,
        Subtype::InvalidStateCnoInUse,
        Subtype::InvalidStateCnoDead,
        Subtype::InvalidStateEvdOpen,
        Subtype::InvalidStateEvdEnabled,
        Subtype::InvalidStateEvdDisabled,
        Subtype::InvalidStateEvdWaitable,
        Subtype::InvalidStateEvdUnwaitable,
        Subtype::InvalidStateEvdInUse,
        Subtype::InvalidStateEvdConfigNotify,
        Subtype::InvalidStateEvdConfigSolicited,
        Subtype::InvalidStateEvdConfigThreshold,
        Subtype::InvalidStateEvdWaiter,
        Subtype::InvalidStateEvdAsync,
        Subtype::InvalidStateIaInUse,
        Subtype::InvalidStateLmrInUse,
        Subtype::InvalidStateLmrFree,
        Subtype::InvalidStatePzInUse,
        Subtype::InvalidStatePzFree,
        Subtype::InvalidStateSrqOperational,
        Subtype::InvalidStateSrqError,
        Subtype::InvalidStateSrqInUse,
        Subtype::InvalidStateSrqShutdown,
        Subtype::PrivilegesRead,
        Subtype::PrivilegesWrite,
        Subtype::PrivilegesRdmaRead,
        Subtype::PrivilegesRdmaWrite,
        Subtype::ProtectionRead,
        Subtype::ProtectionWrite,
        Subtype::ProtectionRdmaRead,
        Subtype::ProtectionRdmaWrite,
        Subtype::InvalidAddressUnsupported,
        Subtype::InvalidAddressUnreachable,
        Subtype::InvalidAddressMalformed,
        Subtype::NameNotRegistered,
        Subtype::MajorNotFound,
        Subtype::MinorNotFound,
        Subtype::ThreadSafetyNotFound,
    ];
    /// The C name of this subtype, as in `dat_error.h`.
    pub const fn c_name(self) -> &'static str {
        match self {
            Subtype::NoSubtype => "DAT_NO_SUBTYPE",
            Subtype::SubInterrupted => "DAT_SUB_INTERRUPTED",
            Subtype::ResourceMemory => "DAT_RESOURCE_MEMORY",
            Subtype::ResourceDevice => "DAT_RESOURCE_DEVICE",
            Subtype::ResourceTep => "DAT_RESOURCE_TEP",
            Subtype::ResourceTevd => "DAT_RESOURCE_TEVD",
            Subtype::ResourceProtectionDomain => "DAT_RESOURCE_PROTECTION_DOMAIN",
            Subtype::ResourceMemoryRegion => "DAT_RESOURCE_MEMORY_REGION",
            Subtype::ResourceErrorHandler => "DAT_RESOURCE_ERROR_HANDLER",
            Subtype::ResourceCredits => "DAT_RESOURCE_CREDITS",
            Subtype::ResourceSrq => "DAT_RESOURCE_SRQ",
            Subtype::InvalidHandleIa => "DAT_INVALID_HANDLE_IA",
            Subtype::InvalidHandleEp => "DAT_INVALID_HANDLE_EP",
            Subtype::InvalidHandleLmr => "DAT_INVALID_HANDLE_LMR",
            Subtype::InvalidHandleRmr => "DAT_INVALID_HANDLE_RMR",
            Subtype::InvalidHandlePz => "DAT_INVALID_HANDLE_PZ",
            Subtype::InvalidHandlePsp => "DAT_INVALID_HANDLE_PSP",
            Subtype::InvalidHandleRsp => "DAT_INVALID_HANDLE_RSP",
            Subtype::InvalidHandleCr => "DAT_INVALID_HANDLE_CR",
            Subtype::InvalidHandleCno => "DAT_INVALID_HANDLE_CNO",
            Subtype::InvalidHandleEvdCr => "DAT_INVALID_HANDLE_EVD_CR",
            Subtype::InvalidHandleEvdRequest => "DAT_INVALID_HANDLE_EVD_REQUEST",
            Subtype::InvalidHandleEvdRecv => "DAT_INVALID_HANDLE_EVD_RECV",
            Subtype::InvalidHandleEvdConn => "DAT_INVALID_HANDLE_EVD_CONN",
            Subtype::InvalidHandleEvdAsync => "DAT_INVALID_HANDLE_EVD_ASYNC",
            Subtype::InvalidHandleSrq => "DAT_INVALID_HANDLE_SRQ",
            Subtype::InvalidHandleCsp => "DAT_INVALID_HANDLE_CSP",
            Subtype::InvalidHandle1 => "DAT_INVALID_HANDLE1",
            Subtype::InvalidHandle2 => "DAT_INVALID_HANDLE2",
            Subtype::InvalidHandle3 => "DAT_INVALID_HANDLE3",
            Subtype::InvalidHandle4 => "DAT_INVALID_HANDLE4",
            Subtype::InvalidHandle5 => "DAT_INVALID_HANDLE5",
            Subtype::InvalidHandle6 => "DAT_INVALID_HANDLE6",
            Subtype::InvalidHandle7 => "DAT_INVALID_HANDLE7",
            Subtype::InvalidHandle8 => "DAT_INVALID_HANDLE8",
            Subtype::InvalidHandle9 => "DAT_INVALID_HANDLE9",
            Subtype::InvalidHandle10 => "DAT_INVALID_HANDLE10",
            Subtype::InvalidArg1 => "DAT_INVALID_ARG1",
            Subtype::InvalidArg2 => "DAT_INVALID_ARG2",
            Subtype::InvalidArg3 => "DAT_INVALID_ARG3",
            Subtype::InvalidArg4 => "DAT_INVALID_ARG4",
            Subtype::InvalidArg5 => "DAT_INVALID_ARG5",
            Subtype::InvalidArg6 => "DAT_INVALID_ARG6",
            Subtype::InvalidArg7 => "DAT_INVALID_ARG7",
            Subtype::InvalidArg8 => "DAT_INVALID_ARG8",
            Subtype::InvalidArg9 => "DAT_INVALID_ARG9",
            Subtype::InvalidArg10 => "DAT_INVALID_ARG10",
            Subtype::InvalidStateEpUnconnected => "DAT_INVALID_STATE_EP_UNCONNECTED",
            Subtype::InvalidStateEpActconnpending => "DAT_INVALID_STATE_EP_ACTCONNPENDING",
            Subtype::InvalidStateEpPassconnpending => "DAT_INVALID_STATE_EP_PASSCONNPENDING",
            Subtype::InvalidStateEpTentconnpending => "DAT_INVALID_STATE_EP_TENTCONNPENDING",
            Subtype::InvalidStateEpConnected => "DAT_INVALID_STATE_EP_CONNECTED",
            Subtype::InvalidStateEpDisconnected => "DAT_INVALID_STATE_EP_DISCONNECTED",
            Subtype::InvalidStateEpReserved => "DAT_INVALID_STATE_EP_RESERVED",
            Subtype::InvalidStateEpComplpending => "DAT_INVALID_STATE_EP_COMPLPENDING",
            Subtype::InvalidStateEpDiscpending => "DAT_INVALID_STATE_EP_DISCPENDING",
            Subtype::InvalidStateEpProvidercontrol => "DAT_INVALID_STATE_EP_PROVIDERCONTROL",
            Subtype::InvalidStateEpNotready => "DAT_INVALID_STATE_EP_NOTREADY",
            Subtype::InvalidStateEpRecvWatermark => "DAT_INVALID_STATE_EP_RECV_WATERMARK",
            Subtype::InvalidStateEpPz => "DAT_INVALID_STATE_EP_PZ",
            Subtype::InvalidStateEpEvdRequest => "DAT_INVALID_STATE_EP_EVD_REQUEST",
            Subtype::InvalidStateEpEvdRecv => "DAT_INVALID_STATE_EP_EVD_RECV",
            Subtype::InvalidStateEpEvdConnect => "DAT_INVALID_STATE_EP_EVD_CONNECT",
            Subtype::InvalidStateEpUnconfigured => "DAT_INVALID_STATE_EP_UNCONFIGURED",
            Subtype::InvalidStateEpUnconfreserved => "DAT_INVALID_STATE_EP_UNCONFRESERVED",
            Subtype::InvalidStateEpUnconfpassive => "DAT_INVALID_STATE_EP_UNCONFPASSIVE",
            Subtype::InvalidStateEpUnconftentative => "DAT_INVALID_STATE_EP_UNCONFTENTATIVE",
            Subtype::InvalidStateCnoInUse => "DAT_INVALID_STATE_CNO_IN_USE",
            Subtype::InvalidStateCnoDead => "DAT_INVALID_STATE_CNO_DEAD",
            Subtype::InvalidStateEvdOpen => "DAT_INVALID_STATE_EVD_OPEN",
            Subtype::InvalidStateEvdEnabled => "DAT_INVALID_STATE_EVD_ENABLED",
            Subtype::InvalidStateEvdDisabled => "DAT_INVALID_STATE_EVD_DISABLED",
            Subtype::InvalidStateEvdWaitable => "DAT_INVALID_STATE_EVD_WAITABLE",
            Subtype::InvalidStateEvdUnwaitable => "DAT_INVALID_STATE_EVD_UNWAITABLE",
            Subtype::InvalidStateEvdInUse => "DAT_INVALID_STATE_EVD_IN_USE",
            Subtype::InvalidStateEvdConfigNotify => "DAT_INVALID_STATE_EVD_CONFIG_NOTIFY",
            Subtype::InvalidStateEvdConfigSolicited => "DAT_INVALID_STATE_EVD_CONFIG_SOLICITED",
            Subtype::InvalidStateEvdConfigThreshold => "DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD",
            Subtype::InvalidStateEvdWaiter => "DAT_INVALID_STATE_EVD_WAITER",
            Subtype::InvalidStateEvdAsync => "DAT_INVALID_STATE_EVD_ASYNC",
            Subtype::InvalidStateIaInUse => "DAT_INVALID_STATE_IA_IN_USE",
            Subtype::InvalidStateLmrInUse => "DAT_INVALID_STATE_LMR_IN_USE",
            Subtype::InvalidStateLmrFree => "DAT_INVALID_STATE_LMR_FREE",
            Subtype::InvalidStatePzInUse => "DAT_INVALID_STATE_PZ_IN_USE",
            Subtype::InvalidStatePzFree => "DAT_INVALID_STATE_PZ_FREE",
            Subtype::InvalidStateSrqOperational => "DAT_INVALID_STATE_SRQ_OPERATIONAL",
            Subtype::InvalidStateSrqError => "DAT_INVALID_STATE_SRQ_ERROR",
            Subtype::InvalidStateSrqInUse => "DAT_INVALID_STATE_SRQ_IN_USE",
            Subtype::InvalidStateSrqShutdown => "DAT_INVALID_STATE_SRQ_SHUTDOWN",
            Subtype::PrivilegesRead => "DAT_PRIVILEGES_READ",
            Subtype::PrivilegesWrite => "DAT_PRIVILEGES_WRITE",
            Subtype::PrivilegesRdmaRead => "DAT_PRIVILEGES_RDMA_READ",
            Subtype::PrivilegesRdmaWrite => "DAT_PRIVILEGES_RDMA_WRITE",
            Subtype::ProtectionRead => "DAT_PROTECTION_READ",
            Subtype::ProtectionWrite => "DAT_PROTECTION_WRITE",
            Subtype::ProtectionRdmaRead => "DAT_PROTECTION_RDMA_READ",
            Subtype::ProtectionRdmaWrite => "DAT_PROTECTION_RDMA_WRITE",
            Subtype::InvalidAddressUnsupported => "DAT_INVALID_ADDRESS_UNSUPPORTED",
            Subtype::InvalidAddressUnreachable => "DAT_INVALID_ADDRESS_UNREACHABLE",
            Subtype::InvalidAddressMalformed => "DAT_INVALID_ADDRESS_MALFORMED",
            Subtype::NameNotRegistered => "DAT_NAME_NOT_REGISTERED",
            Subtype::MajorNotFound => "DAT_MAJOR_NOT_FOUND",
            Subtype::MinorNotFound => "DAT_MINOR_NOT_FOUND",
            Subtype::ThreadSafetyNotFound => "DAT_THREAD_SAFETY_NOT_FOUND",
        }
    }
}
