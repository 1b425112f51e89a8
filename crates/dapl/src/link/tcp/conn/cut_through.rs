//! Cut-through placement: an RDMA Write or Read Response segment whose payload is large
//! (`CUT_MIN`) and not all in the staging buffer yet is read from the socket straight into its
//! destination in registered memory instead of through the staging buffer (only without CRC,
//! which would have to be checked before placement). The receive path ([`rx`](super::rx))
//! starts it at an incomplete FPDU (`start_cut`) and, while `Rx::cut` is set, reads the socket
//! through `cut_place` instead; the engine checks each remaining range before the bytes for it
//! are read, and a fault sends a Terminate as for any other segment.

use std::io::{self, ErrorKind, Read};
use std::os::fd::BorrowedFd;
use std::sync::{Arc, MutexGuard};

use arrayvec::ArrayVec;
use iwarp::ddp::TAGGED_HEADER_LEN;
use iwarp::fpdu::fpdu_len;
use iwarp::terminate::{RdmapErrorCode, TerminateCause};
use iwarp::Segment;

use super::rx::tagged_cause;
use super::{Rx, TcpConn};
use crate::engine::qp::{place_at, PlaceFault, RxResponse, RxWriteFault};
use crate::mem::region::{is_revoked_error, recv_scatter, revoked_error, RecvPiece};
use crate::mem::{seg_span, Seg};
use crate::types::MAX_IOV;

/// Tagged payloads at least this long that are not all buffered yet are read from the socket
/// straight into their destination (cut-through) instead of through the staging buffer.
const CUT_MIN: usize = 8192;

/// A large RDMA Write or Read Response segment read from the socket straight into registered
/// memory (only without CRC, which would have to be checked before placement). Its header
/// passed every check of an ordinary segment, and each remaining range is checked again by
/// the engine before the bytes for it are read.
pub(super) struct Cut {
    read_resp: bool,
    last: bool,
    stag: u32,
    /// TO of the next payload byte.
    to: u64,
    /// Payload bytes still to come.
    left: usize,
    /// The segment's DDP/RDMAP header, for a Terminate.
    header: [u8; TAGGED_HEADER_LEN],
}

/// Where the bytes of a cut-through placement come from.
#[derive(Clone, Copy)]
pub(super) enum CutSrc<'a> {
    /// Already in the staging buffer.
    Staged(&'a [u8]),
    /// The socket (as much as it has, up to the segment's end).
    Socket,
}

/// How a cut-through step ended.
pub(super) enum CutStep {
    /// Bytes were placed (or the segment finished): go on.
    Progress,
    /// The socket has nothing more now.
    Blocked,
    /// The peer closed (true: with an error).
    Eof(bool),
    /// The connection ended (Terminate sent, or the endpoint moved on).
    Stop,
}

impl TcpConn {
    /// At an incomplete FPDU: if it is a large RDMA Write or Read Response (and CRC is off),
    /// checks its header as `handle_ulpdu` would, places the payload bytes already buffered,
    /// and leaves the rest to `cut_place` reading from the socket. None: not such a segment
    /// (it is handled whole once it has arrived).
    pub(super) fn start_cut(self: &Arc<Self>, rx: &mut MutexGuard<'_, Rx>) -> Option<CutStep> {
        const AT: usize = 2; // the MPA length field
        let (s, e) = (rx.start, rx.end);
        let head = &rx.buf[s..e];
        if rx.crc || rx.cut.is_some() || head.len() < AT + TAGGED_HEADER_LEN {
            return None;
        }
        let ulpdu_len = usize::from(u16::from_be_bytes([head[0], head[1]]));
        let payload_len = ulpdu_len.checked_sub(TAGGED_HEADER_LEN)?;
        if payload_len < CUT_MIN {
            return None;
        }
        let mut header = [0u8; TAGGED_HEADER_LEN];
        header.copy_from_slice(&head[AT..AT + TAGGED_HEADER_LEN]);
        let (read_resp, last, stag, to) = match Segment::parse(&header) {
            Ok(Segment::Write { last, stag, to, .. }) => (false, last, stag, to),
            Ok(Segment::ReadResponse { last, stag, to, .. }) => (true, last, stag, to),
            _ => return None, // refused (or handled) whole, as usual
        };
        if !rx.got_first {
            rx.got_first = true;
            self.release_hold();
        }
        let opcode = if read_resp {
            iwarp::Opcode::ReadResponse
        } else {
            iwarp::Opcode::Write
        };
        if let Err(err) = rx.tagged.on_segment(opcode, stag, to, last, payload_len) {
            let cause = err
                .terminate_cause()
                .unwrap_or(TerminateCause::rdmap_local_catastrophic());
            self.fail_in(rx, cause, &header);
            return Some(CutStep::Stop);
        }
        let buffered = e - s - AT - TAGGED_HEADER_LEN;
        let staged = buffered.min(payload_len);
        // After the payload: pad and the (unchecked, zero) CRC field. The FPDU is incomplete,
        // so fewer of those bytes are buffered than there are.
        let trailer = fpdu_len(ulpdu_len) - AT - ulpdu_len;
        rx.skip = trailer - (buffered - staged);
        rx.start = e;
        rx.cut = Some(Cut {
            read_resp,
            last,
            stag,
            to,
            left: payload_len,
            header,
        });
        let from = s + AT + TAGGED_HEADER_LEN;
        let buf = std::mem::take(&mut rx.buf);
        let step = self.cut_place(rx, CutSrc::Staged(&buf[from..from + staged]));
        rx.buf = buf;
        Some(step)
    }

    /// Places the next bytes of the cut-through segment from `src` (the engine checks the
    /// remaining range first), and ends the segment when its last byte is in.
    pub(super) fn cut_place(
        self: &Arc<Self>,
        rx: &mut MutexGuard<'_, Rx>,
        src: CutSrc<'_>,
    ) -> CutStep {
        let Some(cut) = rx.cut.as_ref() else {
            return CutStep::Progress;
        };
        let (read_resp, last, stag, to, left, header) = (
            cut.read_resp,
            cut.last,
            cut.stag,
            cut.to,
            cut.left,
            cut.header,
        );
        let Some(ep) = self.ep() else {
            rx.cut = None;
            return CutStep::Stop;
        };
        // What the socket read (or the staged bytes placed) gave; a region revoked under the
        // placement (deregistered since the engine resolved it) is `revoked_error`.
        let mut got: io::Result<usize> = Ok(0);
        let fill = |segs: &[Seg], at: u64| -> io::Result<usize> {
            match src {
                CutSrc::Staged(b) => match place_at(b, segs, at) {
                    Ok(()) => Ok(b.len()),
                    Err(PlaceFault::Revoked) => Err(revoked_error()),
                    Err(PlaceFault::TooLong) => Ok(0), // cannot happen: the engine checked
                },
                // The message's last byte is stored after the rest, as `copy_in` does for
                // staged bytes (a consumer may poll it, then read the rest): the socket read
                // stops one short, and that byte comes with a read of its own.
                CutSrc::Socket if last && left == 1 => {
                    let mut b = [0u8; 1];
                    match (&self.sock).read(&mut b)? {
                        1 => match place_at(&b, segs, at) {
                            Ok(()) => Ok(1),
                            Err(PlaceFault::Revoked) => Err(revoked_error()),
                            Err(PlaceFault::TooLong) => Ok(0), // the engine checked the range
                        },
                        n => Ok(n),
                    }
                }
                CutSrc::Socket if last => recv_into(self.fd(), segs, at, left - 1),
                CutSrc::Socket => recv_into(self.fd(), segs, at, left),
            }
        };
        let fault = if read_resp {
            match ep.rx_read_response_with(stag, to, left as u64, last, |segs, at| {
                got = fill(segs, at);
                match &got {
                    Err(e) if is_revoked_error(e) => None,
                    r => Some(*r.as_ref().unwrap_or(&0) as u64),
                }
            }) {
                RxResponse::Placed => None,
                RxResponse::NotConnected => Some(None),
                RxResponse::Unexpected => Some(Some(TerminateCause::rdmap_operation(
                    RdmapErrorCode::UnexpectedOpcode,
                ))),
                // Our sink was deregistered while the read was outstanding.
                RxResponse::Revoked => Some(Some(TerminateCause::rdmap_local_catastrophic())),
            }
        } else {
            match ep.rx_write_with(stag, to, left as u64, |seg| {
                got = fill(std::slice::from_ref(seg), 0);
                !got.as_ref().is_err_and(is_revoked_error)
            }) {
                Ok(()) => None,
                Err(RxWriteFault::Access(f)) => Some(Some(tagged_cause(f))),
                Err(RxWriteFault::NotConnected) => Some(None),
            }
        };
        match fault {
            None => {}
            Some(None) => {
                rx.cut = None;
                return CutStep::Stop;
            }
            Some(Some(cause)) => {
                rx.cut = None;
                self.fail_in(rx, cause, &header);
                return CutStep::Stop;
            }
        }
        match got {
            Ok(0) if matches!(src, CutSrc::Socket) => CutStep::Eof(false),
            Ok(n) => {
                let cut = rx.cut.as_mut().expect("checked above");
                cut.left -= n;
                cut.to += n as u64;
                if cut.left == 0 {
                    rx.cut = None;
                }
                CutStep::Progress
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => CutStep::Blocked,
            Err(e) if e.kind() == ErrorKind::Interrupted => CutStep::Progress,
            Err(_) => CutStep::Eof(true),
        }
    }
}

/// Reads up to `max` bytes from `fd` into the scatter list `segs` from byte `at` on.
fn recv_into(fd: BorrowedFd<'_>, segs: &[Seg], at: u64, max: usize) -> io::Result<usize> {
    let pieces: ArrayVec<RecvPiece<'_>, MAX_IOV> = seg_span(segs, at, max)
        .map(|(i, off, len)| RecvPiece {
            mem: &segs[i].region,
            offset: segs[i].offset + off,
            len,
        })
        .collect();
    if pieces.is_empty() {
        return Ok(0);
    }
    recv_scatter(fd, &pieces)
}
