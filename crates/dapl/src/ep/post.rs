//! Posting on an endpoint: the DAT rules checked before anything is queued (handle, flags and
//! their EP-level permission, state, iov against the memory table, lengths), then the request
//! goes to the engine's QP.

use super::{post_error, state_subtype, Endpoint, EpInner};
use crate::engine::qp::{RecvWr, ReqOp, Segs, SendWr};
use crate::error::{err, DatError, ErrorType, Object, Result, Subtype};
use crate::ia::IaInner;
use crate::mem::LocalFault;
use crate::types::{CompletionFlags, Cookie, EpState, LmrTriplet, MemPriv, RmrContext, RmrTriplet};

/// How many receives [`Endpoint::post_recvs`] resolves and queues under one hold of the
/// receive queue's lock (a stack array of that many work requests).
pub const RECV_BATCH_CHUNK: usize = 32;

/// One receive of a batch ([`Endpoint::post_recvs`]): what [`Endpoint::post_recv`] takes.
#[derive(Clone, Copy, Debug)]
pub struct RecvRequest<'a> {
    /// Filled in order; empty receives a zero-length message.
    pub iov: &'a [LmrTriplet],
    /// Returned in the receive's completion.
    pub cookie: Cookie,
    /// As `post_recv`'s: empty, or UNSIGNALLED on an endpoint that allows it.
    pub flags: CompletionFlags,
}

/// A batch post stopped at a refused request ([`Endpoint::post_recvs`]).
#[derive(Debug, Clone)]
pub struct BatchError {
    /// How many requests of the batch, from its start, were posted.
    pub posted: usize,
    /// Why the next one was refused.
    pub error: DatError,
}

impl std::fmt::Display for BatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "request {} of the batch refused (those before it posted): {}",
            self.posted, self.error
        )
    }
}

impl std::error::Error for BatchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<BatchError> for DatError {
    fn from(e: BatchError) -> DatError {
        e.error
    }
}

/// Posts `recvs` in chunks of [`RECV_BATCH_CHUNK`]: each request made a work request by
/// `make`, each chunk queued by `queue` (how many it took, and why it stopped), until the first
/// refusal. Shared by the endpoint's and the SRQ's batch posts.
pub(crate) fn post_in_chunks(
    recvs: &[RecvRequest<'_>],
    mut make: impl FnMut(&RecvRequest<'_>) -> Result<RecvWr>,
    mut queue: impl FnMut(arrayvec::IntoIter<RecvWr, RECV_BATCH_CHUNK>) -> (usize, Option<DatError>),
) -> std::result::Result<(), BatchError> {
    let mut posted = 0;
    for chunk in recvs.chunks(RECV_BATCH_CHUNK) {
        let mut wrs: arrayvec::ArrayVec<RecvWr, RECV_BATCH_CHUNK> = arrayvec::ArrayVec::new();
        let mut refused = None;
        for r in chunk {
            match make(r) {
                Ok(wr) => wrs.push(wr),
                Err(e) => {
                    refused = Some(e);
                    break;
                }
            }
        }
        let (taken, full) = queue(wrs.into_iter());
        posted += taken;
        if let Some(error) = full.or(refused) {
            return Err(BatchError { posted, error });
        }
    }
    Ok(())
}

/// What a post resolved and how it must complete.
pub(crate) struct Resolved {
    pub(crate) segs: Segs,
    pub(crate) total: u64,
}

impl EpInner {
    /// Resolves a local iov against the memory table.
    pub(crate) fn resolve_iov(
        ia: &IaInner,
        pz_id: u64,
        iov: &[LmrTriplet],
        max: usize,
        need: MemPriv,
        op: &'static str,
        obj: Object,
    ) -> Result<Resolved> {
        if iov.len() > max {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg2,
                op,
                obj,
                format!("{} iov segments, at most {max} allowed", iov.len()),
            );
        }
        let mut segs = Segs::new();
        let mut total: u64 = 0;
        for (i, t) in iov.iter().enumerate() {
            let seg = ia
                .memtable
                .resolve_local(
                    t.lmr_context.0,
                    t.virtual_address,
                    t.segment_length,
                    pz_id,
                    need,
                )
                .map_err(|f| {
                    let (kind, sub, what) = match f {
                        LocalFault::InvalidContext => (
                            ErrorType::PrivilegesViolation,
                            Subtype::NoSubtype,
                            "names no live LMR",
                        ),
                        LocalFault::PzMismatch => (
                            ErrorType::ProtectionViolation,
                            Subtype::NoSubtype,
                            "is in an LMR of another PZ",
                        ),
                        LocalFault::Privileges => (
                            ErrorType::PrivilegesViolation,
                            if need == MemPriv::LOCAL_WRITE {
                                Subtype::PrivilegesWrite
                            } else {
                                Subtype::PrivilegesRead
                            },
                            "is in an LMR without the needed local privilege",
                        ),
                        LocalFault::OutOfBounds => (
                            ErrorType::InvalidParameter,
                            Subtype::InvalidArg3,
                            "lies outside its LMR",
                        ),
                    };
                    DatError::new(
                        kind,
                        sub,
                        op,
                        obj,
                        format!(
                            "iov segment {i} (lmr_context {:#x}, va {:#x}, len {}) {what}",
                            t.lmr_context, t.virtual_address, t.segment_length
                        ),
                    )
                })?;
            total = total.saturating_add(seg.len as u64);
            segs.push(seg);
        }
        Ok(Resolved { segs, total })
    }
}

impl Endpoint {
    fn check_post_flags(
        &self,
        op: &'static str,
        flags: CompletionFlags,
        allowed: CompletionFlags,
        ep_flags: CompletionFlags,
    ) -> Result<()> {
        if !allowed.contains(flags) {
            return err(
                ErrorType::InvalidParameter,
                Subtype::InvalidArg6,
                op,
                self.0.object(),
                format!("completion flags {flags:?} are not valid here (allowed: {allowed:?})"),
            );
        }
        if flags.contains(CompletionFlags::UNSIGNALLED)
            && !ep_flags.contains(CompletionFlags::UNSIGNALLED)
        {
            return err(ErrorType::InvalidParameter, Subtype::InvalidArg6, op, self.0.object(), "DAT_COMPLETION_UNSIGNALLED_FLAG needs an endpoint created with it in its completion flags");
        }
        Ok(())
    }

    /// Posts a receive (`dat_ep_post_recv`): `iov` is filled in order; 0 segments receive a
    /// zero-length message. Valid in every state; on a DISCONNECTED endpoint the receive is
    /// flushed at once. Never blocks or allocates; `DAT_INSUFFICIENT_RESOURCES` when the
    /// receive queue is full.
    pub fn post_recv(
        &self,
        iov: &[LmrTriplet],
        cookie: impl Into<Cookie>,
        flags: CompletionFlags,
    ) -> Result<()> {
        const OP: &str = "ep_post_recv";
        let cookie: Cookie = cookie.into();
        self.check_recv_post(OP)?;
        let ep = &self.0;
        let wr = self.recv_wr(OP, &ep.qp.post_view(), iov, cookie, flags)?;
        ep.qp
            .post_recv(wr)
            .map_err(|e| post_error(e, OP, ep.object(), "receive"))
    }

    /// What every receive post checks first: the handle, and that the endpoint has a queue
    /// of its own.
    fn check_recv_post(&self, op: &'static str) -> Result<()> {
        self.check_handle(op)?;
        if self.0.srq.is_some() {
            return err(
                ErrorType::InvalidState,
                Subtype::NoSubtype,
                op,
                self.0.object(),
                "the endpoint takes its receives from an SRQ",
            );
        }
        Ok(())
    }

    /// A receive's work request: its flags checked, its iov resolved.
    fn recv_wr(
        &self,
        op: &'static str,
        v: &crate::engine::qp::PostAttrs,
        iov: &[LmrTriplet],
        cookie: Cookie,
        flags: CompletionFlags,
    ) -> Result<RecvWr> {
        let ep = &self.0;
        self.check_post_flags(op, flags, CompletionFlags::UNSIGNALLED, v.recv_flags)?;
        let r = EpInner::resolve_iov(
            &ep.ia,
            ep.pz.0.id,
            iov,
            v.max_recv_iov,
            MemPriv::LOCAL_WRITE,
            op,
            ep.object(),
        )?;
        Ok(RecvWr {
            cookie,
            flags,
            segs: r.segs,
            total: r.total,
        })
    }

    /// Posts a batch of receives in order, as [`post_recv`](Self::post_recv) posts each
    /// (the same checks, the same completions), taking the receive queue's lock once per
    /// [`RECV_BATCH_CHUNK`] receives instead of once each: the form of `ibv_post_recv` with a
    /// list of work requests, in the Rust API only (`dat_ep_post_recv` posts one). As there,
    /// the batch stops at the first receive that is refused: those before it are posted (and
    /// complete as any posted receive does), it and those after it are not, and the error
    /// says how many were posted. Never blocks or allocates.
    pub fn post_recvs(&self, recvs: &[RecvRequest<'_>]) -> std::result::Result<(), BatchError> {
        const OP: &str = "ep_post_recv";
        self.check_recv_post(OP)
            .map_err(|error| BatchError { posted: 0, error })?;
        let ep = &self.0;
        let v = ep.qp.post_view();
        post_in_chunks(
            recvs,
            |r| self.recv_wr(OP, &v, r.iov, r.cookie, r.flags),
            |wrs| {
                let (taken, full) = ep.qp.post_recvs(wrs);
                (
                    taken,
                    full.map(|e| post_error(e, OP, ep.object(), "receive")),
                )
            },
        )
    }

    fn post_request(
        &self,
        op: &'static str,
        rop: ReqOp,
        iov: &[LmrTriplet],
        cookie: Cookie,
        remote: RmrTriplet,
        flags: CompletionFlags,
    ) -> Result<()> {
        self.check_handle(op)?;
        let ep = &self.0;
        let v = ep.qp.post_view();
        let (max_iov, ep_flags, state) = (v.max_request_iov, v.request_flags, v.state);
        let allowed = match rop {
            // A write with immediate data consumes a receive at the peer, as a Send does: the
            // sender may ask for a solicited event there (RFC 7306 opcode 9).
            ReqOp::Send | ReqOp::SendInvalidate(_) | ReqOp::WriteImmed(_) => {
                CompletionFlags::SUPPRESS
                    | CompletionFlags::SOLICITED_WAIT
                    | CompletionFlags::UNSIGNALLED
                    | CompletionFlags::BARRIER_FENCE
            }
            _ => {
                CompletionFlags::SUPPRESS
                    | CompletionFlags::UNSIGNALLED
                    | CompletionFlags::BARRIER_FENCE
            }
        };
        self.check_post_flags(op, flags, allowed, ep_flags)?;
        if !matches!(state, EpState::Connected | EpState::Disconnected) {
            return err(
                ErrorType::InvalidState,
                state_subtype(state),
                op,
                ep.object(),
                format!("{op} needs a CONNECTED or DISCONNECTED endpoint, not {state:?}"),
            );
        }
        let need = if rop == ReqOp::Read {
            MemPriv::LOCAL_WRITE
        } else {
            MemPriv::LOCAL_READ
        };
        let r = EpInner::resolve_iov(&ep.ia, ep.pz.0.id, iov, max_iov, need, op, ep.object())?;
        let max = match rop {
            ReqOp::Send | ReqOp::SendInvalidate(_) => ep.ia.attr.max_message_size,
            _ => ep.ia.attr.max_rdma_size,
        };
        let size = if rop == ReqOp::Read {
            remote.segment_length
        } else {
            r.total
        };
        if size > max {
            return err(
                ErrorType::LengthError,
                Subtype::NoSubtype,
                op,
                ep.object(),
                format!("{size} bytes is more than the IA's limit of {max}"),
            );
        }
        match rop {
            ReqOp::Read if r.total < remote.segment_length => {
                return err(
                    ErrorType::LengthError,
                    Subtype::NoSubtype,
                    op,
                    ep.object(),
                    format!(
                        "the local iov holds {} bytes, less than the {} bytes of the remote buffer",
                        r.total, remote.segment_length
                    ),
                );
            }
            ReqOp::Write | ReqOp::WriteImmed(_) if r.total > remote.segment_length => {
                return err(
                    ErrorType::LengthError,
                    Subtype::NoSubtype,
                    op,
                    ep.object(),
                    format!(
                        "{} bytes do not fit the remote buffer of {} bytes",
                        r.total, remote.segment_length
                    ),
                );
            }
            ReqOp::WriteImmed(_) if u32::try_from(r.total).is_err() => {
                return err(
                    ErrorType::LengthError,
                    Subtype::NoSubtype,
                    op,
                    ep.object(),
                    format!(
                        "{} bytes: the length of a write with immediate data is sent in 32 bits",
                        r.total
                    ),
                );
            }
            _ => {}
        }
        if rop == ReqOp::Read {
            // Its completion comes with inbound data: a consumer polling for it hands that in.
            if let Some(e) = &ep.request_evd {
                e.0.await_inbound();
            }
        }
        // Never 0: a byte-stream link puts it on the wire, where STag 0 is refused.
        let sink_stag = iov.first().map(|t| t.lmr_context.0).unwrap_or(1).max(1);
        let wr = SendWr {
            cookie,
            op: rop,
            flags,
            segs: r.segs,
            total: r.total,
            remote,
            sink_stag,
            sink_to: 0,
            resp_got: 0,
        };
        ep.qp
            .post_send(wr)
            .map_err(|e| post_error(e, op, ep.object(), "request"))
    }

    /// Posts a send of the gather list `iov` (`dat_ep_post_send`). Flags: SUPPRESS,
    /// SOLICITED_WAIT (the peer's receive notifies), UNSIGNALLED (if the EP allows it),
    /// BARRIER_FENCE. On a DISCONNECTED endpoint it is flushed at once.
    pub fn post_send(
        &self,
        iov: &[LmrTriplet],
        cookie: impl Into<Cookie>,
        flags: CompletionFlags,
    ) -> Result<()> {
        self.post_request(
            "ep_post_send",
            ReqOp::Send,
            iov,
            cookie.into(),
            RmrTriplet::default(),
            flags,
        )
    }

    /// Posts a Send with Invalidate (`dat_ep_post_send_with_invalidate` with `invalidate_flag`
    /// TRUE): a send of `iov` exactly as [`post_send`](Self::post_send) (same flags, checks and
    /// errors; this side completes as an ordinary [`DtoOp::Send`](crate::types::DtoOp::Send)),
    /// which asks the peer to invalidate its RMR `rmr_context` (RFC 5040) before its receive
    /// completes. The peer's receive then completes as
    /// [`DtoOp::ReceiveWithInvalidate`](crate::types::DtoOp::ReceiveWithInvalidate) with
    /// `rmr_context` set, and that RMR is unbound there: any later access with the context is
    /// refused. Only a bound RMR of the peer endpoint's PZ can be invalidated; an LMR's
    /// context, an unknown one or another PZ's makes the peer's receive complete with
    /// `DAT_DTO_ERR_REMOTE_RESPONDER` and breaks the connection (where a Send completes only
    /// at the peer, this request completes with that status too; elsewhere it has completed
    /// when the transport took it). Over tcp: RDMAP opcode 4 (6 with SOLICITED_WAIT), the
    /// context in the DDP header's Invalidate STag field, as Linux siw and iWARP RNICs read it.
    pub fn post_send_with_invalidate(
        &self,
        iov: &[LmrTriplet],
        cookie: impl Into<Cookie>,
        flags: CompletionFlags,
        rmr_context: RmrContext,
    ) -> Result<()> {
        self.post_request(
            "ep_post_send_with_invalidate",
            ReqOp::SendInvalidate(rmr_context.0),
            iov,
            cookie.into(),
            RmrTriplet::default(),
            flags,
        )
    }

    /// Posts an RDMA write of the gather list `iov` to the remote buffer `remote`
    /// (`dat_ep_post_rdma_write`).
    pub fn post_rdma_write(
        &self,
        iov: &[LmrTriplet],
        cookie: impl Into<Cookie>,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> Result<()> {
        self.post_request(
            "ep_post_rdma_write",
            ReqOp::Write,
            iov,
            cookie.into(),
            *remote,
            flags,
        )
    }

    /// Posts an RDMA write with immediate data (the DAT IB extension's
    /// `dat_ib_post_rdma_write_immed`): the gather list `iov` is written to `remote` as by
    /// [`Endpoint::post_rdma_write`] (same checks and errors), then the peer's next posted receive
    /// (its endpoint's queue or SRQ) completes as [`DtoOp::RecvImmed`](crate::types::DtoOp::RecvImmed) with `immediate` and
    /// `transferred_length` = the bytes written; its buffer receives no data, so a zero-length
    /// receive will do. That completion implies the data is placed. With no receive posted at
    /// the peer, the operation waits as a Send does. This side completes as
    /// [`DtoOp::RdmaWriteImmed`](crate::types::DtoOp::RdmaWriteImmed) with the bytes written. Flags: those of a write (SUPPRESS,
    /// UNSIGNALLED if the EP allows it, BARRIER_FENCE), and SOLICITED_WAIT, which makes the
    /// peer's receive completion solicited, as for a Send.
    ///
    /// Over tcp this is an RDMA Write followed by an RFC 7306 Immediate Data message (RDMAP
    /// opcode 8, or 9 when solicited); only dapl-rs peers understand it.
    pub fn post_rdma_write_immed(
        &self,
        iov: &[LmrTriplet],
        cookie: impl Into<Cookie>,
        remote: &RmrTriplet,
        immediate: u32,
        flags: CompletionFlags,
    ) -> Result<()> {
        self.post_request(
            "ep_post_rdma_write_immed",
            ReqOp::WriteImmed(immediate),
            iov,
            cookie.into(),
            *remote,
            flags,
        )
    }

    /// Posts an RDMA read of the whole remote buffer `remote` into the scatter list `iov`
    /// (`dat_ep_post_rdma_read`). Valid when CONNECTED or DISCONNECTED (flushed at once);
    /// `DAT_LENGTH_ERROR` if `iov` is smaller than the remote buffer. Reads beyond the
    /// negotiated ORD wait in the send queue.
    pub fn post_rdma_read(
        &self,
        iov: &[LmrTriplet],
        cookie: impl Into<Cookie>,
        remote: &RmrTriplet,
        flags: CompletionFlags,
    ) -> Result<()> {
        self.post_request(
            "ep_post_rdma_read",
            ReqOp::Read,
            iov,
            cookie.into(),
            *remote,
            flags,
        )
    }
}
