//! Links: what carries RDMAP-level messages between two endpoints' engines.
//!
//! A link knows how to find a listener, carry connection setup (private data both ways, accept,
//! reject) and move messages; it never decides DAT policy (states, flush rules, completion
//! flags), which stays in the DAT layer and the engine. The engine hands a [`Connection`] one
//! [`OutMsg`] at a time and learns the outcome; inbound messages enter the peer's engine through
//! the `rx_*` functions of [`crate::ep`], which check everything against the memory table.

pub(crate) mod loopback;
pub(crate) mod tcp;

use std::sync::Arc;

use crate::cr::CrArrivalInfo;
use crate::ep::EpInner;
use crate::mem::Seg;
use crate::sp::SpInner;
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
    /// Send (RFC 5040 Send / Send with SE).
    Send {
        solicited: bool,
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
    /// more on this connection until the link calls [`EpInner::tx_drained`], which completes
    /// the message.
    Queued,
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

/// The local end of an established connection, as the engine sees it.
pub(crate) trait Connection: Send + Sync {
    /// Hands one message to the link.
    fn transmit(&self, msg: OutMsg<'_>) -> TxOutcome;
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

/// Connection management and listeners of one kind of link.
pub(crate) trait Link: Send + Sync {
    /// Short name ("loopback", "tcp", ...).
    fn name(&self) -> &'static str;
    /// Starts listening for `qual` at `addr`; false if that qualifier is taken.
    fn listen(&self, addr: IaAddress, qual: ConnQual, sp: &Arc<SpInner>) -> bool;
    /// Stops listening.
    fn unlisten(&self, addr: IaAddress, qual: ConnQual);
    /// Starts connecting `ep` to `remote`/`qual` with private data; the outcome arrives as an
    /// `ep` connection event.
    fn connect(&self, ep: &Arc<EpInner>, remote: IaAddress, qual: ConnQual, private_data: &[u8]);
    /// Stops the link's threads and drops its sockets (the IA is closing). The IA's endpoints
    /// have been ended before.
    fn shutdown(&self) {}
    /// Makes progress in the caller's thread without blocking: handles whatever has arrived
    /// (an EVD consumer that polls then needs no thread switch to see it). True if there was
    /// something to handle. Links that complete inline have nothing to do. `for_inbound`: the
    /// caller polls for a completion only inbound data can bring (an empty receive EVD), so
    /// it is likely to poll again soon; a link may then leave its connections to such polls
    /// for a while (`stop_polling` ends that).
    fn poll(&self, for_inbound: bool) -> bool {
        let _ = for_inbound;
        false
    }
    /// The consumer that polled stops polling (it is going to sleep): the link's own thread
    /// takes over at once.
    fn stop_polling(&self) {}
    /// Tests: whether the link's own thread watches its connections, and whether any socket
    /// was taken out of its epoll set for direct polls (links with such a hand-off).
    #[cfg(test)]
    fn handoff_state(&self) -> Option<(bool, bool)> {
        None
    }
    /// Tests: how long after its last poll a consumer still counts as polling.
    #[cfg(test)]
    fn set_handoff_window(&self, _window: std::time::Duration) {}
}

/// The requester's side of an arrived connection request, held by the CR until accept/reject.
pub(crate) trait PendingRequest: Send + Sync {
    /// Connects `ep` with the requester, sending `private_data` with the accept. Returns false if
    /// the requester is gone (the caller reports ACCEPT_COMPLETION_ERROR).
    fn accept(&self, ep: &Arc<EpInner>, private_data: &[u8]) -> bool;
    /// Rejects the request with `private_data`.
    fn reject(&self, private_data: &[u8]);
    /// What the CR reports about the requester.
    fn info(&self) -> &CrArrivalInfo;
}
