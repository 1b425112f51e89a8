//! The port links plug into: what the engine hands a link ([`OutMsg`], through a
//! [`Connection`]), what it gets back ([`TxOutcome`]), connection management ([`Link`],
//! [`PendingRequest`], [`Listener`]), progress in the consumer's thread ([`Progress`]) and
//! what differs between links ([`LinkCaps`]). Inbound messages enter a QP through the `rx_*`
//! functions of [`Qp`], which check everything against the memory table. Links depend on this
//! module, the QP and `mem`, never on the DAT layer.

use std::sync::{Arc, Weak};

use crate::engine::qp::Qp;
use crate::mem::Seg;
use crate::types::{ConnQual, DtoStatus, IaAddress};

/// Bytes of a message: resolved registered memory (gathered in order) or plain bytes (from a
/// socket buffer).
#[derive(Clone, Copy)]
pub(crate) enum Payload<'a> {
    /// Registered memory, in order.
    Segs(&'a [Seg]),
    /// Plain bytes.
    #[allow(dead_code)] // used by byte-stream links
    Bytes(&'a [u8]),
}

impl Payload<'_> {
    pub(crate) fn len(&self) -> u64 {
        match self {
            Payload::Segs(s) => s.iter().map(|s| s.len as u64).sum(),
            Payload::Bytes(b) => b.len() as u64,
        }
    }
}

/// One RDMAP message handed to a link.
pub(crate) enum OutMsg<'a> {
    /// Send (RFC 5040 Send / Send with SE), or Send with Invalidate (with SE) when
    /// `invalidate` names an STag of the peer's to invalidate before its receive completes.
    Send {
        solicited: bool,
        invalidate: Option<u32>,
        payload: Payload<'a>,
    },
    /// RDMA Write into the peer's `stag` at tagged offset `to`.
    Write {
        stag: u32,
        to: u64,
        payload: Payload<'a>,
    },
    /// RDMA Write into the peer's `stag`/`to`, then (RFC 7306 Immediate Data, with SE if
    /// `solicited`) `immediate` and the write's length for the peer's next receive, which
    /// completes as RECV_IMMED once the data is placed. Like a Send, it may find no receive
    /// buffer ([`TxOutcome::NotReady`], for links that deliver whole messages).
    WriteImmed {
        stag: u32,
        to: u64,
        payload: Payload<'a>,
        immediate: u32,
        solicited: bool,
    },
    /// RDMA Read Request: read `len` bytes at `src_stag`/`src_to` into our `sink_stag`/`sink_to`.
    ReadRequest {
        sink_stag: u32,
        sink_to: u64,
        len: u64,
        src_stag: u32,
        src_to: u64,
    },
    /// RDMA Read Response carrying the data for the oldest outstanding Read Request.
    #[allow(dead_code)] // the sink fields go on the wire for byte-stream links
    ReadResponse {
        sink_stag: u32,
        sink_to: u64,
        payload: Payload<'a>,
    },
}

/// What became of a transmitted message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxOutcome {
    /// Handed over (for a byte-stream link: written to the socket).
    Sent,
    /// Taken, but not all of it could be handed to the transport yet: the engine sends nothing
    /// more on this connection until the link calls [`Qp::tx_drained`], which completes
    /// the message.
    Queued,
    /// Taken and out, but the peer copies the message straight out of its source memory:
    /// it completes when the link calls [`Qp::tx_returned`] (once per lent message, in the
    /// order lent); the engine goes on transmitting meanwhile, and whatever completes after
    /// it waits for it (completions stay in order).
    Lent,
    /// A Send (or a write with immediate data) found no receive buffer at the peer yet; retry
    /// when woken (RNR).
    NotReady,
    /// The peer refused the message: the connection is broken and the DTO completes with this
    /// status.
    Failed(DtoStatus),
    /// The connection is gone.
    Broken,
    /// The peer has already left the connection (it disconnected; its close notice is on the
    /// way): the connection ends as DISCONNECTED, not BROKEN.
    PeerClosed,
}

/// What became of a message offered to [`Connection::transmit_inline`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InlineOutcome {
    /// Not taken (nothing of it done): it takes `transmit`.
    Declined,
    /// Written: done as a `TxOutcome::Sent` message is.
    Taken,
    /// Attempted and failed as `TxOutcome::Failed` says (a one-sided copy the peer's table
    /// refused after it began, a source revoked meanwhile): the WR completes with it and the
    /// connection breaks, as from `transmit`; it is not offered again.
    Failed(DtoStatus),
}

/// What a connection may take inline ([`Connection::takes_inline`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Inlines {
    /// Suppressed Sends.
    pub(crate) sends: bool,
    /// Suppressed RDMA Writes (the shm link: a copy into the peer's mapping under the post).
    pub(crate) writes: bool,
    /// Read Requests.
    pub(crate) reads: bool,
    /// Read Responses (to a Read Request that arrived alone: `Qp::rx_read_request`).
    pub(crate) responses: bool,
}

impl Inlines {
    /// Nothing: every message takes `transmit`.
    pub(crate) const NONE: Inlines = Inlines {
        sends: false,
        writes: false,
        reads: false,
        responses: false,
    };
}

/// The local end of an established connection, as the engine sees it.
pub(crate) trait Connection: Send + Sync {
    /// Hands one message to the link.
    fn transmit(&self, msg: OutMsg<'_>) -> TxOutcome;
    /// The engine queued the completion of the Send or Write that `transmit` just reported
    /// `Sent`. A link whose peer could otherwise react to the message before that completion
    /// is queued (and have its answer, or the end of the connection, reported first) may hold
    /// the message back until this call. A connection that wraps another must pass it on.
    fn sent_completed(&self) {}
    /// [`transmit`](Self::transmit) of a Send or Write whose successful completion is not
    /// reported (SUPPRESS): nothing of this side's can come after the peer's answer, so a link
    /// that holds messages until [`sent_completed`](Self::sent_completed) need not hold this
    /// one. A connection that wraps another must pass it on.
    fn transmit_unreported(&self, msg: OutMsg<'_>) -> TxOutcome {
        self.transmit(msg)
    }
    /// A Send or RDMA Write whose success is not reported (SUPPRESS), a Read Request (its WR
    /// goes into the ORQ under the same hold of the QP's lock), or the Read Response to a lone
    /// Read Request (`Qp::respond_inline`), offered while nothing else of the QP's is queued,
    /// in the link, or being transmitted (`Qp::transmit_inline`): a link that can write it at
    /// once, without blocking and without calling the engine, does so and returns `Taken` (as
    /// if `transmit_unreported` had returned `Sent`), or `Failed` if the attempt failed as a
    /// `transmit` would have; otherwise `Declined` (no room, the connection ending, a message
    /// it does not take this way: nothing of it done), and the engine queues it and transmits
    /// it as usual. Called with the QP's
    /// lock held: the link may take its own locks that come after the engine's, nothing else.
    /// A connection that wraps another passes it on only if it adds nothing per message (the
    /// fault injector declines, so that its faults apply to every message).
    fn transmit_inline(&self, _msg: &OutMsg<'_>) -> InlineOutcome {
        InlineOutcome::Declined
    }
    /// Which messages [`transmit_inline`](Self::transmit_inline) can take at all: asked once,
    /// when the connection is established, so that a post the link never takes that way costs
    /// nothing more. A connection that wraps another answers as its `transmit_inline` does.
    fn takes_inline(&self) -> Inlines {
        Inlines::NONE
    }
    /// More messages follow at once (the engine has more work queued for this connection):
    /// until [`Connection::flush`], the link may hold back the messages `transmit` reports
    /// `Sent` and write them together (the tcp link: one `sendmsg` for a batch of small
    /// messages, copied). A connection that wraps another must pass it on.
    fn hold(&self) {}
    /// Writes what was held back since [`Connection::hold`], as far as the transport takes it
    /// now (the rest as any backlog). A connection that wraps another must pass it on.
    fn flush(&self) {}
    /// Tells the peer a receive buffer was posted (its blocked Send may go now).
    fn wake_peer(&self);
    /// Ends the connection from this side; the peer is told (it flushes and reports).
    fn close(&self, broken: bool);
    /// The peer's IA address.
    #[allow(dead_code)] // for links that report it in queries
    fn remote_addr(&self) -> IaAddress;
    /// Identifies the connection (both directions share it).
    fn id(&self) -> u64;
}

/// What differs between links, for the IA attributes and for consumers (tests among them)
/// whose expectations depend on it. Never decide by a link's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkCaps {
    /// A Send or RDMA Write completes only once the peer has placed it (loopback). Otherwise
    /// (tcp, as RFC 5040 and Linux siw) it completes when the transport has taken its last
    /// byte: a peer without a receive buffer does not hold the sender's queue, and a Write the
    /// peer refuses has already completed successfully when the peer's Terminate breaks the
    /// connection.
    pub completes_at_peer: bool,
    /// A Send that finds no receive buffer waits at the sender until one is posted
    /// (loopback); otherwise the receiver holds it for a grace period and then breaks the
    /// connection (tcp: 500 ms, Terminate "no buffer").
    pub rnr_waits_forever: bool,
    /// Most segments of one work request.
    pub max_iov: usize,
    /// Most bytes of private data with a connect, accept or reject.
    pub max_private_data: usize,
    /// Whether peer processes can copy large messages straight out of this process's
    /// registered memory (the shm link's single copy by cross-memory attach).
    pub cross_memory_attach: CrossMemoryAttach,
    /// How long a connection whose peer went silent (no acknowledgement, no keepalive answer)
    /// lasts before it breaks; None where a peer cannot go silent unnoticed (loopback: one
    /// process; shm: a dead peer hangs its socket up at once, a stopped one is not dead).
    pub dead_peer_bound: Option<std::time::Duration>,
}

/// Cross-memory attach (`process_vm_readv`) on this link, as this process finds it now. It is
/// probed again on every connection, in each direction; where it is denied, large messages are
/// copied through the shared-memory rings instead (slower, never a failure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrossMemoryAttach {
    /// The link does not use it (tcp, loopback).
    NotUsed,
    /// Peers can attach to this process (each connection still probes the peer for real).
    Available,
    /// Denied here, for this reason: peers copy through the rings.
    Denied(&'static str),
}

/// Connection management and listeners of one kind of link.
pub(crate) trait Link: Send + Sync {
    /// Short name ("loopback", "tcp", ...), for diagnostics and queries only.
    fn name(&self) -> &'static str;
    /// What differs on this link.
    fn caps(&self) -> LinkCaps;
    /// Starts listening for `qual` at `addr`, or says why it cannot.
    fn listen(
        &self,
        addr: IaAddress,
        qual: ConnQual,
        listener: Weak<dyn Listener>,
    ) -> Result<(), ListenError>;
    /// Stops listening.
    fn unlisten(&self, addr: IaAddress, qual: ConnQual);
    /// Starts connecting `qp` to `remote`/`qual` with private data; the outcome arrives as a
    /// connection event of `qp` (established or attempt failed). Err only when the attempt
    /// could not even start for want of local resources (file descriptors, memory: see
    /// [`is_resource_error`]): nothing was started and no event will come; the caller reports
    /// INSUFFICIENT_RESOURCES.
    fn connect(
        &self,
        qp: &Arc<Qp>,
        remote: IaAddress,
        qual: ConnQual,
        private_data: &[u8],
    ) -> std::io::Result<()>;
    /// Stops the link's threads and drops its sockets (the IA is closing). The IA's QPs have
    /// been ended before.
    fn shutdown(&self) {}
}

/// Progress in the consumer's thread: what an event dispatcher calls when its consumer polls
/// an empty queue or is about to sleep. A link whose own thread (or the hardware) makes all
/// progress keeps the defaults. A shared-memory link would poll its rings here, a verbs
/// provider its completion queues (and re-arm their notification in `idle`).
pub(crate) trait Progress: Send + Sync {
    /// Handles, without blocking, whatever has arrived. True if there was something to handle.
    /// `for_inbound`: the caller waits for a completion only inbound data can bring (an empty
    /// receive EVD, or the request EVD of an endpoint that reads), so it is likely to poll
    /// again soon; the link may then leave its connections to such polls for a while (until
    /// `idle`).
    ///
    /// Once [`poll_satisfied`] says so, the consumer whose poll this is has all it asked for
    /// (its `dequeue` was handed as many completions as it takes): a link may then stop
    /// handling a connection's input after the message it is at and leave the rest, still
    /// marked polled, to the next look, instead of queueing completions nobody waits for yet.
    fn poll(&self, for_inbound: bool) -> bool {
        let _ = for_inbound;
        false
    }
    /// The consumer that polled stops polling (it is going to sleep): whatever makes progress
    /// without it takes over at once.
    fn idle(&self) {}
    /// The consumer looks for completions (`dequeue`, `wait`, `cno_wait`): what the link held
    /// back to write together (a burst of small posts, see the tcp link's coalescing) goes out
    /// now, and a message posted after this call is not held as part of the burst before it.
    fn flush(&self) {}
}

/// Where a link delivers the connection requests that arrive for a listened-on qualifier (a
/// DAT service point).
pub(crate) trait Listener: Send + Sync {
    /// False once the listener is gone (freed): requests for it are refused.
    fn is_open(&self) -> bool;
    /// A request arrived; the listener accepts or rejects it through `req`, now or later.
    fn request_arrived(self: Arc<Self>, req: Box<dyn PendingRequest>);
}

/// What a connection request says about the requester.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrArrivalInfo {
    /// The requester's IA address.
    pub remote_addr: IaAddress,
    /// The requester's port qualifier.
    pub remote_port_qual: ConnQual,
    /// The requester's private data.
    pub private_data: Vec<u8>,
}

/// The requester's side of an arrived connection request, held by the CR until accept/reject.
pub(crate) trait PendingRequest: Send + Sync {
    /// Connects `qp` with the requester, sending `private_data` with the accept. Returns false if
    /// the requester is gone (the caller reports ACCEPT_COMPLETION_ERROR).
    fn accept(&self, qp: &Arc<Qp>, private_data: &[u8]) -> bool;
    /// Rejects the request with `private_data`.
    fn reject(&self, private_data: &[u8]);
    /// What the CR reports about the requester.
    fn info(&self) -> &CrArrivalInfo;
}

/// True for the errors of a system call that mean this process or host ran out of something
/// (file descriptors, memory, buffers), as opposed to a peer's or the network's answer.
/// Why a link cannot listen on a connection qualifier.
#[derive(Debug)]
pub(crate) enum ListenError {
    /// Another listener, of this process or another, holds the qualifier.
    InUse,
    /// This process may not listen there: why, and what would be allowed.
    Denied(String),
    /// The system refused (out of file descriptors or memory, ...).
    Failed(std::io::Error),
}

thread_local! {
    /// This thread's polling consumer's slot, kept by the event dispatcher (`evd.rs`, its
    /// hand-off): 0 while no consumer polls, an opaque token of the consumer while it polls,
    /// [`SATISFIED`] once the poll has handed it all it asked for.
    pub(crate) static POLL_SLOT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// [`POLL_SLOT`] of a consumer that has all it asked for (never a token: tokens are
/// addresses, multiples of 8, tagged at most with 2).
pub(crate) const SATISFIED: usize = 1;

/// Whether this thread's consumer, polling through [`Progress::poll`], has been handed all
/// the completions it asked for.
#[inline]
pub(crate) fn poll_satisfied() -> bool {
    POLL_SLOT
        .try_with(|s| s.get() == SATISFIED)
        .unwrap_or(false)
}

pub(crate) fn is_resource_error(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM | libc::ENOBUFS)
    )
}

/// True for `EMFILE`/`ENFILE`: no descriptor for this process or the host.
pub(crate) fn is_descriptor_exhaustion(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Most bytes of private data with a connect, accept or reject on the links here (the DAT
/// minimum a provider must take is 64; MPA allows 512 for rev 2, less the IRD/ORD words).
pub(crate) const MAX_PRIVATE_DATA: usize = 252;
