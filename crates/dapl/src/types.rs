//! Plain DAT value types: flags, states, statuses, triplets and cookies, with the numeric values
//! of `dat.h` so the C ABI converts them without tables.

use bitflags::bitflags;

bitflags! {
    /// `DAT_MEM_PRIV_FLAGS`: what may be done with registered memory.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct MemPriv: u32 {
        /// `DAT_MEM_PRIV_LOCAL_READ_FLAG`: local DTOs may read it (send, RDMA write source).
        const LOCAL_READ = 0x01;
        /// `DAT_MEM_PRIV_REMOTE_READ_FLAG`: a peer may RDMA-read it.
        const REMOTE_READ = 0x02;
        /// `DAT_MEM_PRIV_LOCAL_WRITE_FLAG`: local DTOs may write it (receive, RDMA read sink).
        const LOCAL_WRITE = 0x10;
        /// `DAT_MEM_PRIV_REMOTE_WRITE_FLAG`: a peer may RDMA-write it.
        const REMOTE_WRITE = 0x20;
        /// `DAT_MEM_PRIV_ALL_FLAG`.
        const ALL = 0x33;
    }
}

impl MemPriv {
    /// True if a peer may touch the memory at all.
    pub fn is_remote(self) -> bool {
        self.intersects(MemPriv::REMOTE_READ | MemPriv::REMOTE_WRITE)
    }
}

bitflags! {
    /// `DAT_COMPLETION_FLAGS`, for a post and for an endpoint's recv/request completion flags.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct CompletionFlags: u32 {
        /// `DAT_COMPLETION_SUPPRESS_FLAG`: no event on success (errors are always reported).
        const SUPPRESS = 0x01;
        /// `DAT_COMPLETION_SOLICITED_WAIT_FLAG`: on a send, ask the peer's receive to notify; on
        /// an EP's recv flags, receives notify only when the matching send was solicited.
        const SOLICITED_WAIT = 0x02;
        /// `DAT_COMPLETION_UNSIGNALLED_FLAG`: the event is queued but does not wake a waiter.
        const UNSIGNALLED = 0x04;
        /// `DAT_COMPLETION_BARRIER_FENCE_FLAG`: start only after earlier RDMA reads completed.
        const BARRIER_FENCE = 0x08;
        /// `DAT_COMPLETION_EVD_THRESHOLD_FLAG`: events notify; the waiter's threshold decides.
        const EVD_THRESHOLD = 0x10;
    }
}

bitflags! {
    /// `DAT_EVD_FLAGS`: which event streams an Event Dispatcher takes.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct EvdFlags: u32 {
        /// `DAT_EVD_SOFTWARE_FLAG`
        const SOFTWARE = 0x001;
        /// `DAT_EVD_CR_FLAG`
        const CR = 0x010;
        /// `DAT_EVD_DTO_FLAG`
        const DTO = 0x020;
        /// `DAT_EVD_CONNECTION_FLAG`
        const CONNECTION = 0x040;
        /// `DAT_EVD_RMR_BIND_FLAG`
        const RMR_BIND = 0x080;
        /// `DAT_EVD_ASYNC_FLAG`
        const ASYNC = 0x100;
    }
}

/// `DAT_CLOSE_FLAGS` for IA close and EP disconnect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseFlags {
    /// `DAT_CLOSE_ABRUPT_FLAG`: tear down now, flushing what is outstanding.
    Abrupt = 0,
    /// `DAT_CLOSE_GRACEFUL_FLAG`: refuse (IA) or wait for outstanding sends (EP).
    Graceful = 1,
}

/// `DAT_EP_STATE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EpState {
    /// Quiescent; may connect or be accepted.
    Unconnected = 0,
    /// Held by a Reserved Service Point.
    Reserved = 2,
    /// `cr_accept` called; waiting for the connection to come up.
    PassiveConnectionPending = 4,
    /// `connect` called; waiting for the peer.
    ActiveConnectionPending = 6,
    /// Created by the provider (or reserved by an RSP) for an arrived connection request.
    TentativeConnectionPending = 7,
    /// Data may move.
    Connected = 9,
    /// Graceful disconnect in progress.
    DisconnectPending = 10,
    /// The connection is over; posts are flushed.
    Disconnected = 11,
    /// Reserved by DAT for providers that keep completions pending after disconnect.
    CompletionPending = 12,
}

impl EpState {
    /// The state whose `DAT_EP_STATE` value is `v`.
    pub(crate) fn from_repr(v: u8) -> Option<EpState> {
        use EpState::*;
        [
            Unconnected,
            Reserved,
            PassiveConnectionPending,
            ActiveConnectionPending,
            TentativeConnectionPending,
            Connected,
            DisconnectPending,
            Disconnected,
            CompletionPending,
        ]
        .into_iter()
        .find(|s| *s as u8 == v)
    }
}

/// `DAT_DTO_COMPLETION_STATUS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DtoStatus {
    /// `DAT_DTO_SUCCESS`
    Success = 0,
    /// `DAT_DTO_ERR_FLUSHED`: the EP left CONNECTED before the DTO ran.
    Flushed = 1,
    /// `DAT_DTO_ERR_LOCAL_LENGTH`: the incoming message did not fit the receive's iov
    /// (the DAT man pages call this `DAT_DTO_LENGTH_ERROR`).
    LocalLength = 2,
    /// `DAT_DTO_ERR_LOCAL_EP`
    LocalEp = 3,
    /// `DAT_DTO_ERR_LOCAL_PROTECTION`
    LocalProtection = 4,
    /// `DAT_DTO_ERR_BAD_RESPONSE`
    BadResponse = 5,
    /// `DAT_DTO_ERR_REMOTE_ACCESS`: the peer refused the STag, rights or bounds.
    RemoteAccess = 6,
    /// `DAT_DTO_ERR_REMOTE_RESPONDER`: the peer failed the operation (e.g. no receive buffer).
    RemoteResponder = 7,
    /// `DAT_DTO_ERR_TRANSPORT`: the connection broke under the DTO.
    Transport = 8,
    /// `DAT_DTO_ERR_RECEIVER_NOT_READY`
    ReceiverNotReady = 9,
    /// `DAT_DTO_ERR_PARTIAL_PACKET`
    PartialPacket = 10,
    /// `DAT_RMR_OPERATION_FAILED`
    RmrOperationFailed = 11,
}

/// `DAT_DTOS`: which operation a completion is for. The last two are the IB extension's
/// `DAT_IB_DTOS` (`dat_ib_extensions.h`), numbered from `DAT_DTO_EXTENSION_BASE` (8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DtoOp {
    /// `DAT_DTO_SEND`
    Send = 0,
    /// `DAT_DTO_RDMA_WRITE`
    RdmaWrite = 1,
    /// `DAT_DTO_RDMA_READ`
    RdmaRead = 2,
    /// `DAT_DTO_RECEIVE`
    Receive = 3,
    /// `DAT_DTO_RECEIVE_WITH_INVALIDATE`
    ReceiveWithInvalidate = 4,
    /// `DAT_DTO_BIND_MW`
    BindMw = 5,
    /// `DAT_IB_DTO_RDMA_WRITE_IMMED`: an RDMA write with immediate data, at the initiator.
    RdmaWriteImmed = 8,
    /// `DAT_IB_DTO_RECV_IMMED`: a receive consumed by a peer's RDMA write with immediate
    /// data; the completion carries the immediate value and the write's length.
    RecvImmed = 9,
}

/// A number of the consumer's or of the provider's that only means one thing: its own type,
/// built from and compared with the plain integer, shown as DAT shows it.
macro_rules! id_newtype {
    ($(#[$m:meta])* $t:ident($int:ty), $fmt:literal) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        #[repr(transparent)]
        pub struct $t(pub $int);

        impl From<$int> for $t {
            fn from(v: $int) -> Self {
                $t(v)
            }
        }

        impl From<$t> for $int {
            fn from(v: $t) -> Self {
                v.0
            }
        }

        impl PartialEq<$int> for $t {
            fn eq(&self, o: &$int) -> bool {
                self.0 == *o
            }
        }

        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, $fmt, self.0)
            }
        }

        impl std::fmt::LowerHex for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::LowerHex::fmt(&self.0, f)
            }
        }
    };
}

id_newtype!(
    /// `DAT_DTO_COOKIE` / `DAT_RMR_COOKIE`: 64 opaque bits of the consumer's, returned in the
    /// completion. Posting takes `impl Into<Cookie>`, so a plain `u64` does.
    Cookie(u64),
    "{:#x}"
);

/// `DAT_CONN_QUAL`: the service point's connection qualifier (a port, for the tcp link).
pub type ConnQual = u64;

/// `DAT_VADDR`: a registered virtual address.
pub type VAddr = u64;

id_newtype!(
    /// `DAT_LMR_CONTEXT`: the local key of an LMR (its own type, so it cannot be given where
    /// a remote key is wanted):
    ///
    /// ```compile_fail
    /// # use dapl::*;
    /// let local = LmrContext(7);
    /// let remote = RmrTriplet::new(local, 0, 8); // a local key is no remote key
    /// ```
    ///
    /// ```
    /// # use dapl::*;
    /// let remote = RmrTriplet::new(RmrContext(7), 0, 8);
    /// let same = RmrTriplet::new(7u32, 0, 8); // the plain integer converts
    /// assert_eq!(remote, same);
    /// assert_eq!(remote.rmr_context, 7);
    /// assert_eq!(remote.rmr_context.to_string(), "rmr_context 0x7");
    /// ```
    LmrContext(u32),
    "lmr_context {:#x}"
);

id_newtype!(
    /// `DAT_RMR_CONTEXT`: the remote key (the iWARP STag) of an LMR or RMR.
    RmrContext(u32),
    "rmr_context {:#x}"
);

/// `DAT_LMR_TRIPLET`: one segment of a local I/O vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LmrTriplet {
    /// Which LMR the segment is in.
    pub lmr_context: LmrContext,
    /// Start of the segment (a virtual address inside the LMR).
    pub virtual_address: VAddr,
    /// Length in bytes.
    pub segment_length: u64,
}

impl LmrTriplet {
    /// A segment of `len` bytes at `va` in the LMR with `lmr_context`.
    pub fn new(lmr_context: impl Into<LmrContext>, va: VAddr, len: u64) -> Self {
        LmrTriplet {
            lmr_context: lmr_context.into(),
            virtual_address: va,
            segment_length: len,
        }
    }
}

/// `DAT_RMR_TRIPLET`: a remote buffer (what a peer advertises for RDMA).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RmrTriplet {
    /// The remote key.
    pub rmr_context: RmrContext,
    /// Start of the buffer in the peer's registered address space.
    pub virtual_address: VAddr,
    /// Length in bytes.
    pub segment_length: u64,
}

impl RmrTriplet {
    /// A remote buffer of `len` bytes at `va` under `rmr_context`.
    pub fn new(rmr_context: impl Into<RmrContext>, va: VAddr, len: u64) -> Self {
        RmrTriplet {
            rmr_context: rmr_context.into(),
            virtual_address: va,
            segment_length: len,
        }
    }

    /// Bytes of the wire form ([`to_wire`](Self::to_wire)).
    pub const WIRE_LEN: usize = 20;

    /// The wire form to give a peer (in private data or a message): the RMR context (4
    /// bytes), the virtual address (8), the length (8), each big-endian (network order), as
    /// the STag, tagged offset and length travel in iWARP headers.
    pub fn to_wire(&self) -> [u8; Self::WIRE_LEN] {
        let mut b = [0u8; Self::WIRE_LEN];
        b[..4].copy_from_slice(&self.rmr_context.0.to_be_bytes());
        b[4..12].copy_from_slice(&self.virtual_address.to_be_bytes());
        b[12..].copy_from_slice(&self.segment_length.to_be_bytes());
        b
    }

    /// Reads the wire form from the first [`WIRE_LEN`](Self::WIRE_LEN) bytes of `b`; None
    /// if `b` is shorter.
    pub fn from_wire(b: &[u8]) -> Option<Self> {
        let b: &[u8; Self::WIRE_LEN] = b.get(..Self::WIRE_LEN)?.try_into().ok()?;
        let (ctx, rest) = b.split_at(4);
        let (va, len) = rest.split_at(8);
        Some(RmrTriplet {
            rmr_context: RmrContext(u32::from_be_bytes(ctx.try_into().ok()?)),
            virtual_address: u64::from_be_bytes(va.try_into().ok()?),
            segment_length: u64::from_be_bytes(len.try_into().ok()?),
        })
    }
}

/// `DAT_IA_ADDRESS_PTR` in Rust: IPv4/IPv6 socket address of an IA or a peer.
pub type IaAddress = std::net::SocketAddr;

/// Kinds of connection events (`DAT_CONNECTION_EVENT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectionEventKind {
    /// The connection is up; data may move.
    Established,
    /// The peer's consumer rejected the request.
    PeerRejected,
    /// Nobody listened, or the provider rejected the request.
    NonPeerRejected,
    /// `cr_accept` could not complete (the requester went away).
    AcceptCompletionError,
    /// The connection ended (once per connection per endpoint).
    Disconnected,
    /// The connection broke (protocol error, Terminate, lost transport).
    Broken,
    /// `connect` timed out.
    TimedOut,
    /// The remote address cannot be reached.
    Unreachable,
}

/// The most segments one work request (or SRQ receive) may name.
pub const MAX_IOV: usize = 16;

/// `DAT_EP_ATTR`: the per-endpoint limits and completion behaviour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpAttr {
    /// Largest send.
    pub max_message_size: u64,
    /// Largest RDMA read or write.
    pub max_rdma_size: u64,
    /// How receives complete: DEFAULT (0), UNSIGNALLED (posts may ask for no notification),
    /// SOLICITED_WAIT (receives notify only for solicited sends) or EVD_THRESHOLD.
    pub recv_completion_flags: CompletionFlags,
    /// How requests complete: DEFAULT, UNSIGNALLED or EVD_THRESHOLD.
    pub request_completion_flags: CompletionFlags,
    /// Receive queue depth.
    pub max_recv_dtos: usize,
    /// Request (send/write/read) queue depth.
    pub max_request_dtos: usize,
    /// Most segments in a receive's iov.
    pub max_recv_iov: usize,
    /// Most segments in a request's iov.
    pub max_request_iov: usize,
    /// Most inbound RDMA reads queued (IRD offered).
    pub max_rdma_read_in: usize,
    /// Most outbound RDMA reads in flight (ORD wanted).
    pub max_rdma_read_out: usize,
}

impl Default for EpAttr {
    fn default() -> Self {
        EpAttr {
            max_message_size: 1 << 31,
            max_rdma_size: 1 << 31,
            recv_completion_flags: CompletionFlags::EVD_THRESHOLD,
            request_completion_flags: CompletionFlags::EVD_THRESHOLD,
            max_recv_dtos: 64,
            max_request_dtos: 64,
            max_recv_iov: MAX_IOV,
            max_request_iov: MAX_IOV,
            max_rdma_read_in: 8,
            max_rdma_read_out: 8,
        }
    }
}
