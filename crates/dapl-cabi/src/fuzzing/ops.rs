//! The operations an input is read as, one per vtable function (plus a few compound ones),
//! and how their arguments come from the input.
//!
//! An operation is one byte choosing it (modulo the number of operations, in the order of
//! [`OPS`]; `not_implemented` then takes one more byte, after the NULL bits, choosing which of
//! the ten slots with no implementation), one byte of NULL bits (unused by the compound
//! operations `connect_pair` and `drain`) (if its top two bits are set, bit `i % 7` makes the call's
//! `i`-th pointer argument NULL; otherwise none is), then its arguments in order:
//! - a handle: one selector byte, `i = byte >> 3`; `byte & 7` is 0-2 the `i`-th live object of
//!   the wanted kind (any kind for the generic functions), 3 the `i`-th live object of another
//!   kind, 4 the `i`-th stale handle (freed in this input, then in earlier inputs), 5 NULL,
//!   6 the next 8 bytes as the value, 7 a value near a live handle (`i & 7`: the next stub,
//!   the previous stub, +1, the slot's first stub, +64, a small integer, all ones, another
//!   page);
//! - a count (`DAT_COUNT`): one byte, `& 15` choosing 0, 1, 2, 4, 8, 16, 17, -1, `i32::MIN`,
//!   `i32::MAX`, `byte >> 4`, the next byte, the next 2 bytes, 2^20, 2^20 + 1 or the next 4;
//! - flags: one byte; below `0xc0` the next 2 bytes masked to the known bits, else the next 4;
//!   completion flags: one byte, below `0x80` DEFAULT, below `0xc0` the next byte masked to
//!   the known bits but UNSIGNALLED, else the next 4;
//! - an iov: one count byte (`& 7`: 0, 1, 1, 1, 2, `byte >> 3`, -1, any i32; a positive count
//!   is capped at 64, the triplets the harness has room for), then per triplet one selector
//!   byte (`& 7`: 0-2 inside a live LMR, 3 empty, 4 across a live LMR's end, 5 before its
//!   start, 6 a freed LMR's context and range, 7 raw or half raw) and its offset and length;
//! - the remote triplet, private data, an address, a connection qualifier: see the functions.
//!
//! Connect timeouts are always `DAT_TIMEOUT_INFINITE` and waits always 0 µs: nothing waits, and
//! nothing happens on another thread (the loopback link delivers inline), so an input replays
//! the same way every time.

use std::ffi::c_void;
use std::mem::offset_of;

use super::arena::{self, Arena, BUFS, BUF_LEN, IN_ADDR, IN_EP_ATTR, IN_EP_PARAM, IN_EVENT};
use super::arena::{IN_PDATA, IN_RMR_TRIPLET, IN_SEGS, IN_SRQ_ATTR, MAX_SEGS, PDATA_LEN};
use super::{vcall, Call, Info, Kind, Run};
use crate::ffi::*;

/// Most live objects of one kind the create operations make (queues are allocated up front:
/// an EVD of 2^20 entries is large, and ASan's shadow of it is touched).
const MAX_LIVE: usize = 12;
/// dapl's limit on the segments of one DTO (`dapl::ia::MAX_IOV`).
const MAX_IOV: i64 = 16;
/// The most private data a connection carries.
const MAX_PDATA: i32 = 252;

type Op = fn(&mut Run);

/// The operations, by selector value.
pub(crate) const OPS: &[(&str, Op)] = &[
    ("set_consumer_context", set_consumer_context),
    ("get_consumer_context", get_consumer_context),
    ("get_handle_type", get_handle_type),
    ("ia_query", ia_query),
    ("ia_close", ia_close),
    ("lmr_sync_rdma_read", |r| lmr_sync(r, false)),
    ("lmr_sync_rdma_write", |r| lmr_sync(r, true)),
    ("cno_create", cno_create),
    ("cno_modify_agent", cno_modify_agent),
    ("cno_query", cno_query),
    ("cno_free", |r| free_op(r, Kind::Cno)),
    ("cno_wait", cno_wait),
    ("evd_create", evd_create),
    ("evd_query", evd_query),
    ("evd_modify_cno", evd_modify_cno_op),
    ("evd_enable", |r| evd_simple(r, "evd_enable")),
    ("evd_disable", |r| evd_simple(r, "evd_disable")),
    ("evd_set_unwaitable", |r| {
        evd_simple(r, "evd_set_unwaitable")
    }),
    ("evd_clear_unwaitable", |r| {
        evd_simple(r, "evd_clear_unwaitable")
    }),
    ("evd_wait", evd_wait),
    ("evd_resize", evd_resize),
    ("evd_post_se", evd_post_se),
    ("evd_dequeue", evd_dequeue),
    ("evd_free", |r| free_op(r, Kind::Evd)),
    ("pz_create", pz_create),
    ("pz_query", pz_query),
    ("pz_free", |r| free_op(r, Kind::Pz)),
    ("lmr_create", lmr_create),
    ("lmr_query", lmr_query),
    ("lmr_free", |r| free_op(r, Kind::Lmr)),
    ("rmr_create", rmr_create),
    ("rmr_query", rmr_query),
    ("rmr_bind", rmr_bind),
    ("rmr_free", |r| free_op(r, Kind::Rmr)),
    ("ep_create", |r| ep_create(r, false)),
    ("ep_create_with_srq", |r| ep_create(r, true)),
    ("ep_query", ep_query),
    ("ep_modify", ep_modify),
    ("ep_connect", ep_connect),
    ("ep_dup_connect", ep_dup_connect),
    ("ep_disconnect", ep_disconnect),
    ("ep_post_send", |r| post(r, Post::Send)),
    ("ep_post_send_with_invalidate", |r| post(r, Post::SendInv)),
    ("ep_post_recv", |r| post(r, Post::Recv)),
    ("ep_post_rdma_read", |r| post(r, Post::Read)),
    ("ep_post_rdma_write", |r| post(r, Post::Write)),
    ("dat_ib_post_rdma_write_immed", |r| {
        post(r, Post::WriteImmed)
    }),
    ("ep_get_status", ep_get_status),
    ("ep_free", |r| free_op(r, Kind::Ep)),
    ("ep_reset", ep_reset),
    ("ep_recv_query", ep_recv_query),
    ("ep_set_watermark", ep_set_watermark),
    ("srq_create", srq_create),
    ("srq_free", |r| free_op(r, Kind::Srq)),
    ("srq_post_recv", |r| post(r, Post::SrqRecv)),
    ("srq_query", srq_query),
    ("srq_resize", |r| srq_count(r, false)),
    ("srq_set_lw", |r| srq_count(r, true)),
    ("psp_create", |r| psp_create(r, false)),
    ("psp_create_any", |r| psp_create(r, true)),
    ("psp_query", psp_query),
    ("psp_free", |r| free_op(r, Kind::Psp)),
    ("rsp_create", rsp_create),
    ("rsp_query", rsp_query),
    ("rsp_free", |r| free_op(r, Kind::Rsp)),
    ("cr_query", cr_query),
    ("cr_accept", cr_accept),
    ("cr_reject", cr_reject),
    ("not_implemented", not_implemented),
    ("connect_pair", connect_pair),
    ("drain", drain),
];

pub(crate) fn index(name: &str) -> Option<u8> {
    OPS.iter().position(|(n, _)| *n == name).map(|i| i as u8)
}

pub(crate) fn run(r: &mut Run, f: u8) {
    (OPS[f as usize % OPS.len()].1)(r)
}

// ---------------------------------------------------------------------------------------------
// Arguments

impl Run<'_> {
    fn count(&mut self) -> i32 {
        let b = self.inp.u8();
        match b & 15 {
            0 => 0,
            1 => 1,
            2 => 2,
            3 => 4,
            4 => 8,
            5 => 16,
            6 => 17,
            7 => -1,
            8 => i32::MIN,
            9 => i32::MAX,
            10 => (b >> 4) as i32,
            11 => self.inp.u8() as i32,
            12 => self.inp.u16() as i32,
            13 => 1 << 20,
            14 => (1 << 20) + 1,
            _ => self.inp.u32() as i32,
        }
    }

    /// Flags from the input; outside `known` makes the call dirty.
    fn flags(&mut self, c: &mut Call, known: u32) -> u32 {
        if self.inp.u8() < 0xc0 {
            self.inp.u16() as u32 & known
        } else {
            let v = self.inp.u32();
            if v & !known != 0 {
                c.dirty = true;
            }
            v
        }
    }

    /// A `DAT_CLOSE_FLAGS`.
    fn close_flags(&mut self, c: &mut Call) -> DAT_CLOSE_FLAGS {
        match self.inp.u8() & 3 {
            1 => DAT_CLOSE_GRACEFUL_FLAG,
            2 => {
                c.dirty = true;
                c.must_fail = true;
                2 + self.inp.u8() as u32
            }
            _ => DAT_CLOSE_ABRUPT_FLAG,
        }
    }

    /// A completion flags argument: mostly DEFAULT, or known bits but UNSIGNALLED (which
    /// needs an EP made for it), or any.
    fn completion_flags(&mut self, c: &mut Call) -> DAT_COMPLETION_FLAGS {
        match self.inp.u8() {
            0..0x80 => DAT_COMPLETION_DEFAULT_FLAG,
            0x80..0xc0 => self.inp.u8() as u32 & 0x3b,
            _ => {
                let v = self.inp.u32();
                if v & !0x3f != 0 {
                    c.dirty = true;
                }
                v
            }
        }
    }

    /// An attribute / parameter mask: mostly ignored by the provider.
    fn mask(&mut self) -> u64 {
        match self.inp.u8() & 3 {
            0 => u64::MAX >> 1,
            1 => 0,
            2 => DAT_EP_FIELD_EP_ATTR_ALL,
            _ => self.inp.u64(),
        }
    }

    /// A live object of `kind` chosen by the input, if any.
    fn some_live(&mut self, kind: Kind) -> Option<usize> {
        let v = self.w.live_of(kind);
        let b = self.inp.u8() as usize;
        (!v.is_empty()).then(|| v[b % v.len()])
    }

    /// One local triplet.
    fn triplet(&mut self, c: &mut Call) -> DAT_LMR_TRIPLET {
        let sel = self.inp.u8();
        let lmrs = self.w.live_of(Kind::Lmr);
        let lmr =
            (!lmrs.is_empty()).then(|| self.w.objs[lmrs[(sel >> 3) as usize % lmrs.len()]].info);
        let t = |va: u64, len: u64, ctx: u32| DAT_LMR_TRIPLET {
            virtual_address: va,
            segment_length: len as u32,
            lmr_context: ctx,
        };
        match (sel & 7, lmr) {
            (0..=2, Some(i)) => {
                let off = self.inp.u16() as usize % i.len;
                let len = 1 + self.inp.u16() as usize % (i.len - off);
                t(self.a.addr(i.off + off), len as u64, i.lmr_ctx)
            }
            (3, _) => {
                // Empty: address and context are irrelevant (and may be invalid).
                t(self.inp.u64(), 0, self.inp.u32())
            }
            (4, Some(i)) => {
                c.dirty = true;
                let back = 1 + self.inp.u8() as usize % 16;
                let len = back as u64 + self.inp.u8() as u64;
                t(self.a.addr(i.off + i.len - back.min(i.len)), len, i.lmr_ctx)
            }
            (5, Some(i)) => {
                c.dirty = true;
                let before = 1 + self.inp.u8() as u64 % 16;
                t(
                    self.a.addr(i.off) - before,
                    before + self.inp.u8() as u64,
                    i.lmr_ctx,
                )
            }
            (6, _) => {
                c.dirty = true;
                let freed: Vec<Info> = self
                    .w
                    .objs
                    .iter()
                    .filter(|o| o.kind == Kind::Lmr && !o.live)
                    .map(|o| o.info)
                    .collect();
                match freed.get(self.inp.u8() as usize % freed.len().max(1)) {
                    Some(i) => t(self.a.addr(i.off), i.len as u64, i.lmr_ctx),
                    None => t(self.inp.u64(), self.inp.u32() as u64, self.inp.u32()),
                }
            }
            (_, i) => {
                c.dirty = true;
                let sub = (sel >> 3) & 3;
                match (sub, i) {
                    (1, Some(i)) => t(self.inp.u64(), self.inp.u32() as u64, i.lmr_ctx),
                    (2, Some(i)) => t(
                        self.a.addr(i.off + self.inp.u16() as usize % i.len),
                        u32::MAX as u64 - self.inp.u8() as u64,
                        i.lmr_ctx,
                    ),
                    (3, Some(i)) => t(self.a.addr(i.off), 1 + self.inp.u8() as u64, self.inp.u32()),
                    _ => t(self.inp.u64(), self.inp.u32() as u64, self.inp.u32()),
                }
            }
        }
    }

    /// A local iov: (count, pointer, the triplets written). `dto`: for a DTO, which takes at
    /// most `MAX_IOV` non-empty segments.
    fn iov(
        &mut self,
        c: &mut Call,
        dto: bool,
    ) -> (i64, *mut DAT_LMR_TRIPLET, Vec<DAT_LMR_TRIPLET>) {
        let b = self.inp.u8();
        let n: i64 = match b & 7 {
            0 => 0,
            1..=3 => 1,
            4 => 2,
            5 => (b >> 3) as i64,
            6 => -1,
            _ => self.inp.u32() as i32 as i64,
        };
        if self.null(c) {
            if n != 0 {
                c.dirty = true;
                c.must_fail = true;
            }
            return (n, std::ptr::null_mut(), Vec::new());
        }
        if n < 0 {
            c.dirty = true;
            c.must_fail = true;
            return (n, self.a.ptr(IN_SEGS), Vec::new());
        }
        let n = n.min(MAX_SEGS as i64);
        let segs: Vec<DAT_LMR_TRIPLET> = (0..n).map(|_| self.triplet(c)).collect();
        if dto && segs.iter().filter(|t| t.segment_length != 0).count() as i64 > MAX_IOV {
            c.dirty = true;
            c.must_fail = true;
        }
        for (i, t) in segs.iter().enumerate() {
            self.a.put(IN_SEGS + 16 * i, *t);
        }
        (n, self.a.ptr(IN_SEGS), segs)
    }

    /// The remote triplet of an RDMA operation (checked by the peer, when it arrives).
    fn rmr_triplet(&mut self, c: &mut Call) -> *const DAT_RMR_TRIPLET {
        if self.null(c) {
            c.dirty = true;
            c.must_fail = true;
            return std::ptr::null();
        }
        let sel = self.inp.u8();
        let lmr = self.some_live(Kind::Lmr).map(|l| self.w.objs[l].info);
        let rmr_ctx = self
            .some_live(Kind::Rmr)
            .map(|r| self.w.objs[r].info.rmr_ctx)
            .filter(|&c| c != 0);
        let (ctx, va, len) = match (sel & 3, lmr, rmr_ctx) {
            (0 | 1, Some(i), _) => {
                let off = self.inp.u16() as usize % i.len;
                let len = self.inp.u16() as usize % (i.len - off + 1);
                (i.rmr_ctx, self.a.addr(i.off + off), len as u32)
            }
            (2, _, Some(ctx)) => (
                ctx,
                self.a
                    .addr(Arena::buf(self.inp.u8() as usize) + self.inp.u16() as usize % BUF_LEN),
                self.inp.u16() as u32,
            ),
            _ => (self.inp.u32(), self.inp.u64(), self.inp.u32()),
        };
        self.a.put(
            IN_RMR_TRIPLET,
            DAT_RMR_TRIPLET {
                virtual_address: va,
                segment_length: len,
                rmr_context: ctx,
            },
        );
        self.a.ptr(IN_RMR_TRIPLET)
    }

    /// Private data: (size, pointer).
    fn pdata(&mut self, c: &mut Call) -> (DAT_COUNT, DAT_PVOID) {
        let b = self.inp.u8();
        let n = match b & 3 {
            0 => 0,
            1 => (b >> 2) as i32,
            2 => MAX_PDATA + (b >> 7) as i32,
            _ => self.inp.u32() as i32,
        };
        if self.null(c) {
            if n != 0 {
                c.dirty = true;
                c.must_fail = true;
            }
            return (n, std::ptr::null_mut());
        }
        if n < 0 {
            c.dirty = true;
            c.must_fail = true;
            return (n, self.a.ptr(IN_PDATA));
        }
        let n = n.min(PDATA_LEN as i32);
        if n > MAX_PDATA {
            c.dirty = true;
        }
        (n, self.a.ptr(IN_PDATA))
    }

    /// The address of a connect.
    fn address(&mut self, c: &mut Call) -> DAT_IA_ADDRESS_PTR {
        if self.null(c) {
            c.dirty = true;
            c.must_fail = true;
            return std::ptr::null_mut();
        }
        let sel = self.inp.u8();
        let (family, ip) = match sel & 7 {
            0..=4 => (libc::AF_INET as u16, self.addr),
            5 => (libc::AF_INET as u16, [127, 0, 0, 1]),
            6 => {
                c.dirty = true;
                (libc::AF_INET6 as u16, [0; 4])
            }
            _ => {
                c.dirty = true;
                (self.inp.u16(), self.inp.u32().to_be_bytes())
            }
        };
        let mut data = [0 as libc::c_char; 14];
        for (d, b) in data[2..6].iter_mut().zip(ip) {
            *d = b as libc::c_char;
        }
        self.a.put(
            IN_ADDR,
            DAT_SOCK_ADDR {
                sa_family: family,
                sa_data: data,
            },
        );
        self.a.ptr(IN_ADDR)
    }

    /// A connection qualifier: a live service point's, or any.
    fn qual(&mut self) -> u64 {
        let sel = self.inp.u8();
        let sps: Vec<u64> = [Kind::Psp, Kind::Rsp]
            .iter()
            .flat_map(|&k| self.w.live_of(k))
            .map(|i| self.w.objs[i].info.qual)
            .collect();
        match sel & 3 {
            0 | 1 if !sps.is_empty() => sps[(sel >> 2) as usize % sps.len()],
            2 => (sel >> 2) as u64,
            _ => self.inp.u64(),
        }
    }

    /// Checks the segments of a post that succeeded: each non-empty one inside a live LMR of
    /// its context, in PZ `pz` (0: any), with local write if `write`.
    fn segments_ok(&self, what: &str, segs: &[DAT_LMR_TRIPLET], pz: usize, write: bool) {
        for (n, t) in segs.iter().enumerate() {
            if t.segment_length == 0 {
                continue;
            }
            let lmr = self
                .w
                .live_of(Kind::Lmr)
                .into_iter()
                .map(|i| self.w.objs[i].info)
                .find(|i| i.lmr_ctx == t.lmr_context);
            let Some(i) = lmr else {
                self.fail(format!(
                    "{what} succeeded with segment {n} ({t:?}) whose lmr_context names no live LMR"
                ));
            };
            let (s, e) = (self.a.addr(i.off), self.a.addr(i.off + i.len));
            let end = t.virtual_address.checked_add(t.segment_length as u64);
            if t.virtual_address < s || end.is_none_or(|end| end > e) {
                self.fail(format!(
                    "{what} succeeded with segment {n} ({t:?}) outside its LMR [{s:#x}, {e:#x})"
                ));
            }
            if pz != 0 && i.pz != pz {
                self.fail(format!(
                    "{what} succeeded with segment {n} in an LMR of another PZ"
                ));
            }
            if write && i.privs & DAT_MEM_PRIV_LOCAL_WRITE_FLAG == 0 {
                self.fail(format!(
                    "{what} succeeded with segment {n} in an LMR without local write"
                ));
            }
        }
    }

    /// The IA as a fixed argument.
    fn ia_arg(&mut self, c: &mut Call) -> DAT_HANDLE {
        let ia = self.w.live_of(Kind::Ia).first().copied();
        self.known(c, Some(Kind::Ia), ia)
    }

    /// A new object's handle from output `o` of a successful create.
    fn new_handle(&self, o: &arena::Out<DAT_HANDLE>) -> DAT_HANDLE {
        match self.a.read(o) {
            Some(h) => h,
            None => self.fail("a create succeeded with its handle output NULL".into()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Objects made by the harness (setup, compound operations)

pub(crate) fn make_cno(r: &mut Run) -> usize {
    let c = &mut r.fixed("cno_create");
    let ia = r.ia_arg(c);
    let agent = DAT_OS_WAIT_PROXY_AGENT_NULL;
    let out = r.a.out::<DAT_HANDLE>(false);
    let o = out.ptr;
    let ret = vcall!(r.p, cno_create_func(ia, agent, o));
    r.must(c, ret);
    let h = r.new_handle(&out);
    r.created(Kind::Cno, h, Info::default())
}

pub(crate) fn make_evd(r: &mut Run, qlen: i32, flags: u32, cno: Option<usize>) -> usize {
    let c = &mut r.fixed("evd_create");
    let ia = r.ia_arg(c);
    let cnoh = r.known(c, Some(Kind::Cno), cno);
    let out = r.a.out::<DAT_HANDLE>(false);
    let o = out.ptr;
    let ret = vcall!(r.p, evd_create_func(ia, qlen, cnoh, flags, o));
    r.must(c, ret);
    let h = r.new_handle(&out);
    let cno = cnoh as usize;
    r.created(
        Kind::Evd,
        h,
        Info {
            cno,
            ..Info::default()
        },
    )
}

pub(crate) fn make_pz(r: &mut Run) -> usize {
    let c = &mut r.fixed("pz_create");
    let ia = r.ia_arg(c);
    let out = r.a.out::<DAT_HANDLE>(false);
    let o = out.ptr;
    let ret = vcall!(r.p, pz_create_func(ia, o));
    r.must(c, ret);
    let h = r.new_handle(&out);
    r.created(Kind::Pz, h, Info::default())
}

/// An LMR over all of buffer `buf`.
pub(crate) fn make_lmr(r: &mut Run, pz: usize, buf: usize, privs: u32) -> usize {
    let c = &mut r.fixed("lmr_create");
    let ia = r.ia_arg(c);
    let pzh = r.known(c, Some(Kind::Pz), Some(pz));
    let off = Arena::buf(buf);
    let region = DAT_REGION_DESCRIPTION {
        for_va: r.a.ptr(off),
    };
    let (mt, len, va_type) = (DAT_MEM_TYPE_VIRTUAL, BUF_LEN as u64, DAT_VA_TYPE_VA);
    let out = r.a.out::<DAT_HANDLE>(false);
    let (o, n1, n2, n3, n4) = (
        out.ptr,
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    let ret = vcall!(
        r.p,
        lmr_create_func(ia, mt, region, len, pzh, privs, va_type, o, n1, n2, n3, n4)
    );
    r.must(c, ret);
    let h = r.new_handle(&out);
    lmr_created(r, h, pzh as usize, off, BUF_LEN, privs)
}

/// Records a new LMR over arena `off..off + len`, learning its contexts from `lmr_query`.
fn lmr_created(r: &mut Run, h: DAT_HANDLE, pz: usize, off: usize, len: usize, privs: u32) -> usize {
    let i = r.created(
        Kind::Lmr,
        h,
        Info {
            pz,
            off,
            len,
            privs,
            ..Info::default()
        },
    );
    let c = &mut r.fixed("lmr_query");
    let lh = r.known(c, Some(Kind::Lmr), Some(i));
    let mask = DAT_LMR_FIELD_ALL;
    let out = r.a.out::<DAT_LMR_PARAM>(false);
    let o = out.ptr;
    let ret = vcall!(r.p, lmr_query_func(lh, mask, o));
    r.must(c, ret);
    let q = r.a.read(&out).expect("not NULL");
    if q.registered_address != r.a.addr(off) || q.registered_size != len as u64 {
        r.fail(format!(
            "an LMR over [{:#x}, +{len}) registered [{:#x}, +{}]",
            r.a.addr(off),
            q.registered_address,
            q.registered_size
        ));
    }
    let info = &mut r.w.objs[i].info;
    info.lmr_ctx = q.lmr_context;
    info.rmr_ctx = q.rmr_context;
    i
}

pub(crate) fn make_rmr(r: &mut Run, pz: usize) -> usize {
    let c = &mut r.fixed("rmr_create");
    let pzh = r.known(c, Some(Kind::Pz), Some(pz));
    let out = r.a.out::<DAT_HANDLE>(false);
    let o = out.ptr;
    let ret = vcall!(r.p, rmr_create_func(pzh, o));
    r.must(c, ret);
    let h = r.new_handle(&out);
    r.created(
        Kind::Rmr,
        h,
        Info {
            pz: pzh as usize,
            ..Info::default()
        },
    )
}

pub(crate) fn make_srq(r: &mut Run, pz: usize) -> usize {
    let c = &mut r.fixed("srq_create");
    let ia = r.ia_arg(c);
    let pzh = r.known(c, Some(Kind::Pz), Some(pz));
    r.a.put(
        IN_SRQ_ATTR,
        DAT_SRQ_ATTR {
            max_recv_dtos: 16,
            max_recv_iov: 4,
            low_watermark: 0,
        },
    );
    let attr = r.a.ptr(IN_SRQ_ATTR);
    let out = r.a.out::<DAT_HANDLE>(false);
    let o = out.ptr;
    let ret = vcall!(r.p, srq_create_func(ia, pzh, attr, o));
    r.must(c, ret);
    let h = r.new_handle(&out);
    r.created(
        Kind::Srq,
        h,
        Info {
            pz: pzh as usize,
            ..Info::default()
        },
    )
}

pub(crate) fn make_ep(
    r: &mut Run,
    pz: usize,
    dto: usize,
    conn: usize,
    srq: Option<usize>,
) -> usize {
    let name = if srq.is_some() {
        "ep_create_with_srq"
    } else {
        "ep_create"
    };
    let c = &mut r.fixed(name);
    let ia = r.ia_arg(c);
    let pzh = r.known(c, Some(Kind::Pz), Some(pz));
    let recv = r.known(c, Some(Kind::Evd), Some(dto));
    let req = r.known(c, Some(Kind::Evd), Some(dto));
    let connh = r.known(c, Some(Kind::Evd), Some(conn));
    let attr: *const DAT_EP_ATTR = std::ptr::null();
    let out = r.a.out::<DAT_HANDLE>(false);
    let o = out.ptr;
    let (ret, srqh) = match srq {
        None => (
            vcall!(r.p, ep_create_func(ia, pzh, recv, req, connh, attr, o)),
            0,
        ),
        Some(s) => {
            let sh = r.known(c, Some(Kind::Srq), Some(s));
            let ret = vcall!(
                r.p,
                ep_create_with_srq_func(ia, pzh, recv, req, connh, sh, attr, o)
            );
            (ret, sh as usize)
        }
    };
    r.must(c, ret);
    let h = r.new_handle(&out);
    r.created(
        Kind::Ep,
        h,
        Info {
            pz: pzh as usize,
            recv_evd: recv as usize,
            req_evd: req as usize,
            conn_evd: connh as usize,
            srq: srqh,
            ..Info::default()
        },
    )
}

pub(crate) fn make_psp(r: &mut Run, qual: u64, evd: usize) -> usize {
    let c = &mut r.fixed("psp_create");
    let ia = r.ia_arg(c);
    let evdh = r.known(c, Some(Kind::Evd), Some(evd));
    let flags = DAT_PSP_CONSUMER_FLAG;
    let out = r.a.out::<DAT_HANDLE>(false);
    let o = out.ptr;
    let ret = vcall!(r.p, psp_create_func(ia, qual, evdh, flags, o));
    r.must(c, ret);
    let h = r.new_handle(&out);
    r.created(
        Kind::Psp,
        h,
        Info {
            qual,
            evd: evdh as usize,
            ..Info::default()
        },
    )
}

/// Connects EP `a` to EP `b` through PSP `psp` (all live): connect, take the request from the
/// PSP's EVD, accept it with `b`. Each step is an ordinary checked call; whether the
/// connection comes up depends on the EPs' states, which the input made.
pub(crate) fn connect(r: &mut Run, a: usize, b: usize, psp: usize) {
    let c = &mut r.fixed("ep_connect");
    let ep = r.known(c, Some(Kind::Ep), Some(a));
    r.a.put(
        IN_ADDR,
        DAT_SOCK_ADDR {
            sa_family: libc::AF_INET as u16,
            sa_data: {
                let mut d = [0 as libc::c_char; 14];
                for (d, b) in d[2..6].iter_mut().zip(r.addr) {
                    *d = b as libc::c_char;
                }
                d
            },
        },
    );
    let addr: DAT_IA_ADDRESS_PTR = r.a.ptr(IN_ADDR);
    let qual = r.w.objs[psp].info.qual;
    let (timeout, n, pd, qos, flags) = (DAT_TIMEOUT_INFINITE, 0, std::ptr::null_mut(), 0, 0);
    let ret = vcall!(
        r.p,
        ep_connect_func(ep, addr, qual, timeout, n, pd, qos, flags)
    );
    if !r.finish(c, ret) {
        return;
    }
    // The request is on the PSP's EVD now (the loopback link delivers inline).
    let evd = r.w.objs[psp].info.evd;
    let Some(evd) = r.w.live_obj(evd) else {
        return;
    };
    let crs_before = r.w.live_of(Kind::Cr).len();
    for _ in 0..32 {
        if !dequeue(r, evd) {
            break;
        }
        if r.w.live_of(Kind::Cr).len() > crs_before {
            break;
        }
    }
    let Some(&cr) = r.w.live_of(Kind::Cr).last() else {
        return;
    };
    let c = &mut r.fixed("cr_accept");
    let crh = r.known(c, Some(Kind::Cr), Some(cr));
    let ep = r.known(c, Some(Kind::Ep), Some(b));
    let (n, pd) = (0, std::ptr::null_mut());
    let ret = vcall!(r.p, cr_accept_func(crh, ep, n, pd));
    if r.finish(c, ret) {
        r.w.kill(cr);
    }
}

/// One `evd_dequeue` of a live EVD by the harness; true if it returned an event.
fn dequeue(r: &mut Run, evd: usize) -> bool {
    let c = &mut r.fixed("evd_dequeue");
    let e = r.known(c, Some(Kind::Evd), Some(evd));
    let out = r.a.out::<DAT_EVENT>(false);
    let o = out.ptr;
    let ret = vcall!(r.p, evd_dequeue_func(e, o));
    if r.finish(c, ret) {
        r.event(e as usize, &out);
        true
    } else {
        false
    }
}

/// `evd_modify_cno` of the harness's choosing (teardown).
pub(crate) fn modify_cno(r: &mut Run, evd: usize, cno: Option<usize>) {
    let c = &mut r.fixed("evd_modify_cno");
    let e = r.known(c, Some(Kind::Evd), Some(evd));
    let ch = r.known(c, Some(Kind::Cno), cno);
    let ret = vcall!(r.p, evd_modify_cno_func(e, ch));
    r.must(c, ret);
    r.w.objs[evd].info.cno = ch as usize;
}

/// Frees live object `o` (teardown): it must succeed.
pub(crate) fn free(r: &mut Run, o: usize) {
    let kind = r.w.objs[o].kind;
    if kind == Kind::Cr {
        let c = &mut r.fixed("cr_reject");
        let h = r.known(c, Some(Kind::Cr), Some(o));
        let (n, pd) = (0, std::ptr::null_mut());
        let ret = vcall!(r.p, cr_reject_func(h, n, pd));
        r.must(c, ret);
        r.w.kill(o);
        return;
    }
    let c = &mut r.fixed(free_name(kind));
    let h = r.known(c, Some(kind), Some(o));
    let ret = call_free(r, kind, h);
    r.must(c, ret);
    r.w.kill(o);
}

fn free_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Cno => "cno_free",
        Kind::Evd => "evd_free",
        Kind::Pz => "pz_free",
        Kind::Lmr => "lmr_free",
        Kind::Rmr => "rmr_free",
        Kind::Ep => "ep_free",
        Kind::Psp => "psp_free",
        Kind::Rsp => "rsp_free",
        Kind::Srq => "srq_free",
        Kind::Ia | Kind::Cr => unreachable!("freed otherwise"),
    }
}

fn call_free(r: &Run, kind: Kind, h: DAT_HANDLE) -> DAT_RETURN {
    match kind {
        Kind::Cno => vcall!(r.p, cno_free_func(h)),
        Kind::Evd => vcall!(r.p, evd_free_func(h)),
        Kind::Pz => vcall!(r.p, pz_free_func(h)),
        Kind::Lmr => vcall!(r.p, lmr_free_func(h)),
        Kind::Rmr => vcall!(r.p, rmr_free_func(h)),
        Kind::Ep => vcall!(r.p, ep_free_func(h)),
        Kind::Psp => vcall!(r.p, psp_free_func(h)),
        Kind::Rsp => vcall!(r.p, rsp_free_func(h)),
        Kind::Srq => vcall!(r.p, srq_free_func(h)),
        Kind::Ia | Kind::Cr => unreachable!("freed otherwise"),
    }
}

// ---------------------------------------------------------------------------------------------
// Operations: generic and IA

fn set_consumer_context(r: &mut Run) {
    let c = &mut r.call("set_consumer_context");
    let h = r.h(c, None, false);
    let v = r.inp.u64();
    let ctx = DAT_CONTEXT { as_64: v };
    let ret = vcall!(r.p, set_consumer_context_func(h, ctx));
    if r.finish(c, ret) {
        let o = c.obj(0).expect("good");
        r.w.objs[o].context = v;
    }
}

fn get_consumer_context(r: &mut Run) {
    let c = &mut r.call("get_consumer_context");
    let h = r.h(c, None, false);
    let out = r.out::<DAT_CONTEXT>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, get_consumer_context_func(h, o));
    if r.finish(c, ret) {
        let got: u64 = r.a.at(&out, 0);
        let want = r.w.objs[c.obj(0).expect("good")].context;
        if got != want {
            r.fail(format!(
                "get_consumer_context gave {got:#x}, {want:#x} was set"
            ));
        }
    }
}

fn get_handle_type(r: &mut Run) {
    let c = &mut r.call("get_handle_type");
    let h = r.h(c, None, false);
    let out = r.out::<DAT_HANDLE_TYPE>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, get_handle_type_func(h, o));
    if r.finish(c, ret) {
        let t = r.a.read(&out).expect("not NULL");
        let k = r.w.objs[c.obj(0).expect("good")].kind;
        if t != k.handle_type() {
            r.fail(format!("get_handle_type of a {k:?} gave {t}"));
        }
    }
}

fn ia_query(r: &mut Run) {
    let c = &mut r.call("ia_query");
    let ia = r.h(c, Some(Kind::Ia), false);
    let evd_out = r.out::<DAT_HANDLE>(c, false);
    let ia_mask = r.mask();
    let ia_attr = r.out::<DAT_IA_ATTR>(c, ia_mask != 0);
    let p_mask = r.mask();
    let p_attr = r.out::<DAT_PROVIDER_ATTR>(c, p_mask != 0);
    let (e, a, p) = (evd_out.ptr, ia_attr.ptr, p_attr.ptr);
    let ret = vcall!(r.p, ia_query_func(ia, e, ia_mask, a, p_mask, p));
    if r.finish(c, ret) {
        if let Some(got) = r.a.read(&evd_out) {
            let want =
                r.w.live_of(Kind::Evd)
                    .into_iter()
                    .find(|&i| r.w.objs[i].info.is_async)
                    .map_or(0, |i| r.w.objs[i].h);
            r.same_handle("ia_query's async EVD", got, want);
        }
    }
}

/// `ia_close` of anything but the live IA, or of the live IA in a way that must be refused (a
/// flags value that is neither ABRUPT nor GRACEFUL, or GRACEFUL over live objects): the world
/// lives on.
fn ia_close(r: &mut Run) {
    let c = &mut r.call("ia_close");
    let h = r.h(c, Some(Kind::Ia), false);
    let sel = r.inp.u8();
    let flags = if c.obj(0).is_some_and(|o| r.w.objs[o].kind == Kind::Ia) {
        let others = r.w.all_live().into_iter().any(|i| {
            let o = &r.w.objs[i];
            o.kind != Kind::Ia && !o.info.is_async
        });
        c.must_fail = true;
        if sel & 1 == 0 {
            c.dirty = true;
            2 + (sel >> 1) as u32
        } else if others {
            DAT_CLOSE_GRACEFUL_FLAG
        } else {
            return;
        }
    } else {
        sel as u32 & 1
    };
    let ret = vcall!(r.p, ia_close_func(h, flags));
    r.finish(c, ret);
}

fn lmr_sync(r: &mut Run, write: bool) {
    let c = &mut r.call(if write {
        "lmr_sync_rdma_write"
    } else {
        "lmr_sync_rdma_read"
    });
    let ia = r.h(c, Some(Kind::Ia), false);
    let (n, segs, _) = r.iov(c, false);
    let n = n as u64;
    let segs = segs.cast_const();
    let ret = if write {
        vcall!(r.p, lmr_sync_rdma_write_func(ia, segs, n))
    } else {
        vcall!(r.p, lmr_sync_rdma_read_func(ia, segs, n))
    };
    // Not checked: whether a success had its segments inside LMRs (this provider checks only
    // the handle and the array: memory is coherent, there is nothing to sync).
    r.finish(c, ret);
}

// ---------------------------------------------------------------------------------------------
// CNO and EVD

fn cno_create(r: &mut Run) {
    if r.w.live_of(Kind::Cno).len() >= MAX_LIVE {
        return;
    }
    let c = &mut r.call("cno_create");
    let ia = r.h(c, Some(Kind::Ia), false);
    let agent = DAT_OS_WAIT_PROXY_AGENT_NULL;
    let out = r.out::<DAT_HANDLE>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, cno_create_func(ia, agent, o));
    if r.finish(c, ret) {
        r.stats.creates += 1;
        let h = r.new_handle(&out);
        r.created(Kind::Cno, h, Info::default());
    }
}

fn cno_modify_agent(r: &mut Run) {
    let c = &mut r.call("cno_modify_agent");
    let cno = r.h(c, Some(Kind::Cno), false);
    let agent = DAT_OS_WAIT_PROXY_AGENT_NULL;
    let ret = vcall!(r.p, cno_modify_agent_func(cno, agent));
    r.finish(c, ret);
}

fn cno_query(r: &mut Run) {
    let c = &mut r.call("cno_query");
    let cno = r.h(c, Some(Kind::Cno), false);
    let mask = r.mask() as u32;
    let out = r.out::<DAT_CNO_PARAM>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, cno_query_func(cno, mask, o));
    if r.finish(c, ret) {
        let ia: *mut c_void = r.a.at(&out, offset_of!(DAT_CNO_PARAM, ia_handle));
        r.same_handle("cno_query's ia_handle", ia, r.ia);
    }
}

fn cno_wait(r: &mut Run) {
    let c = &mut r.call("cno_wait");
    let cno = r.h(c, Some(Kind::Cno), false);
    let t: DAT_TIMEOUT = 0;
    let out = r.out::<DAT_HANDLE>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, cno_wait_func(cno, t, o));
    if r.finish(c, ret) {
        let e = r.a.read(&out).expect("not NULL") as usize;
        if r.w.seen.get(&e) != Some(&Kind::Evd) {
            r.fail(format!("cno_wait gave {e:#x}, not an EVD of this IA"));
        }
    }
}

fn evd_create(r: &mut Run) {
    if r.w.live_of(Kind::Evd).len() >= MAX_LIVE {
        return;
    }
    let c = &mut r.call("evd_create");
    let ia = r.h(c, Some(Kind::Ia), false);
    let qlen = r.count();
    if !(1..=1 << 20).contains(&qlen) {
        c.dirty = true;
    }
    let cno = r.h(c, Some(Kind::Cno), true);
    let flags = r.flags(c, 0x1f1);
    let out = r.out::<DAT_HANDLE>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, evd_create_func(ia, qlen, cno, flags, o));
    if r.finish(c, ret) {
        r.stats.creates += 1;
        let h = r.new_handle(&out);
        let cno = cno as usize;
        r.created(
            Kind::Evd,
            h,
            Info {
                cno,
                ..Info::default()
            },
        );
    }
}

fn evd_query(r: &mut Run) {
    let c = &mut r.call("evd_query");
    let evd = r.h(c, Some(Kind::Evd), false);
    let mask = r.mask() as u32;
    let out = r.out::<DAT_EVD_PARAM>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, evd_query_func(evd, mask, o));
    if r.finish(c, ret) {
        let q = r.a.read(&out).expect("not NULL");
        let e = c.obj(0).expect("good");
        r.same_handle("evd_query's ia_handle", q.ia_handle, r.ia);
        let cno = r.w.objs[e].info.cno;
        let cno = if r.w.live_obj(cno).is_some() { cno } else { 0 };
        r.same_handle("evd_query's cno_handle", q.cno_handle, cno);
    }
}

fn evd_modify_cno_op(r: &mut Run) {
    let c = &mut r.call("evd_modify_cno");
    let evd = r.h(c, Some(Kind::Evd), false);
    let cno = r.h(c, Some(Kind::Cno), true);
    let ret = vcall!(r.p, evd_modify_cno_func(evd, cno));
    if r.finish(c, ret) {
        let e = c.obj(0).expect("good");
        r.w.objs[e].info.cno = cno as usize;
    }
}

fn evd_simple(r: &mut Run, name: &'static str) {
    let c = &mut r.call(name);
    let evd = r.h(c, Some(Kind::Evd), false);
    let ret = match name {
        "evd_enable" => vcall!(r.p, evd_enable_func(evd)),
        "evd_disable" => vcall!(r.p, evd_disable_func(evd)),
        "evd_set_unwaitable" => vcall!(r.p, evd_set_unwaitable_func(evd)),
        _ => vcall!(r.p, evd_clear_unwaitable_func(evd)),
    };
    r.finish(c, ret);
}

fn evd_wait(r: &mut Run) {
    let c = &mut r.call("evd_wait");
    let evd = r.h(c, Some(Kind::Evd), false);
    let t: DAT_TIMEOUT = 0;
    let threshold = r.count();
    let out = r.out::<DAT_EVENT>(c, true);
    let nmore = r.out::<DAT_COUNT>(c, false);
    let (o, m) = (out.ptr, nmore.ptr);
    let ret = vcall!(r.p, evd_wait_func(evd, t, threshold, o, m));
    if r.finish(c, ret) {
        r.event(evd as usize, &out);
    }
}

fn evd_resize(r: &mut Run) {
    let c = &mut r.call("evd_resize");
    let evd = r.h(c, Some(Kind::Evd), false);
    let qlen = r.count();
    if !(1..=1 << 20).contains(&qlen) {
        c.dirty = true;
    }
    let ret = vcall!(r.p, evd_resize_func(evd, qlen));
    r.finish(c, ret);
}

fn evd_post_se(r: &mut Run) {
    let c = &mut r.call("evd_post_se");
    let evd = r.h(c, Some(Kind::Evd), false);
    let sel = r.inp.u8();
    let pointer = r.inp.u64();
    let ev = if r.null(c) {
        c.dirty = true;
        c.must_fail = true;
        std::ptr::null()
    } else {
        let number = if sel & 7 != 7 {
            DAT_SOFTWARE_EVENT
        } else {
            c.dirty = true;
            c.must_fail = true;
            DAT_DTO_COMPLETION_EVENT
        };
        let mut e = <DAT_EVENT as arena::Plain>::zeroed();
        e.event_number = number;
        e.event_data.software_event_data = DAT_SOFTWARE_EVENT_DATA {
            pointer: pointer as usize as DAT_PVOID,
        };
        r.a.put(IN_EVENT, e);
        r.a.ptr::<DAT_EVENT>(IN_EVENT).cast_const()
    };
    let ret = vcall!(r.p, evd_post_se_func(evd, ev));
    if r.finish(c, ret) {
        r.posted_se.insert(pointer);
    }
}

fn evd_dequeue(r: &mut Run) {
    let c = &mut r.call("evd_dequeue");
    let evd = r.h(c, Some(Kind::Evd), false);
    let out = r.out::<DAT_EVENT>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, evd_dequeue_func(evd, o));
    if r.finish(c, ret) {
        r.event(evd as usize, &out);
    }
}

// ---------------------------------------------------------------------------------------------
// PZ, LMR, RMR

fn pz_create(r: &mut Run) {
    if r.w.live_of(Kind::Pz).len() >= MAX_LIVE {
        return;
    }
    let c = &mut r.call("pz_create");
    let ia = r.h(c, Some(Kind::Ia), false);
    let out = r.out::<DAT_HANDLE>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, pz_create_func(ia, o));
    if r.finish(c, ret) {
        r.stats.creates += 1;
        let h = r.new_handle(&out);
        r.created(Kind::Pz, h, Info::default());
    }
}

fn pz_query(r: &mut Run) {
    let c = &mut r.call("pz_query");
    let pz = r.h(c, Some(Kind::Pz), false);
    let mask = r.mask() as u32;
    let out = r.out::<DAT_PZ_PARAM>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, pz_query_func(pz, mask, o));
    if r.finish(c, ret) {
        let q = r.a.read(&out).expect("not NULL");
        r.same_handle("pz_query's ia_handle", q.ia_handle, r.ia);
    }
}

fn lmr_create(r: &mut Run) {
    if r.w.live_of(Kind::Lmr).len() >= MAX_LIVE {
        return;
    }
    let c = &mut r.call("lmr_create");
    // The provider checks the IA, the PZ, then (for DAT_MEM_TYPE_LMR) the region's LMR.
    let ia = r.h(c, Some(Kind::Ia), false);
    let pz = r.h(c, Some(Kind::Pz), false);
    let sel = r.inp.u8();
    let buf = Arena::buf(r.inp.u8() as usize);
    let off = r.inp.u16() as usize % BUF_LEN;
    let (mem_type, region, base_len) = match sel & 7 {
        6 => {
            let l = r.h(c, Some(Kind::Lmr), false);
            let base = c.handles[2]
                .pick
                .obj
                .filter(|&o| r.w.objs[o].kind == Kind::Lmr);
            let len = base.map(|b| r.w.objs[b].info.len);
            (
                DAT_MEM_TYPE_LMR,
                DAT_REGION_DESCRIPTION { for_lmr_handle: l },
                len,
            )
        }
        7 => {
            c.dirty = true;
            c.must_fail = true;
            let t = DAT_MEM_TYPE_SHARED_VIRTUAL + (sel >> 3) as u32;
            (
                t,
                DAT_REGION_DESCRIPTION {
                    for_va: r.a.ptr(buf + off),
                },
                None,
            )
        }
        _ if sel & 0x80 != 0 && sel & 0x40 != 0 => {
            // A NULL address.
            c.dirty = true;
            c.must_fail = true;
            (
                DAT_MEM_TYPE_VIRTUAL,
                DAT_REGION_DESCRIPTION {
                    for_va: std::ptr::null_mut(),
                },
                None,
            )
        }
        _ => (
            DAT_MEM_TYPE_VIRTUAL,
            DAT_REGION_DESCRIPTION {
                for_va: r.a.ptr(buf + off),
            },
            None,
        ),
    };
    let lsel = r.inp.u8();
    let length: u64 = match lsel & 7 {
        0 => {
            c.dirty = true;
            c.must_fail = true;
            0
        }
        1 => {
            // Wraps the address space: refused, whatever the region.
            c.dirty = true;
            c.must_fail = true;
            u64::MAX - r.inp.u16() as u64
        }
        _ if mem_type == DAT_MEM_TYPE_LMR => {
            let n = 1 + r.inp.u16() as u64 % (BUF_LEN as u64 + 64);
            if base_len.is_none_or(|b| n > b as u64) {
                c.dirty = true;
                c.must_fail = base_len.is_some();
            }
            n
        }
        _ => 1 + r.inp.u16() as u64 % (BUF_LEN - off) as u64,
    };
    let privs = r.flags(c, 0x73);
    let va_type = r.inp.u8() as u32 & 1;
    let lmr = r.out::<DAT_HANDLE>(c, true);
    let lctx = r.out::<DAT_LMR_CONTEXT>(c, false);
    let rctx = r.out::<DAT_RMR_CONTEXT>(c, false);
    let rlen = r.out::<DAT_VLEN>(c, false);
    let raddr = r.out::<DAT_VADDR>(c, false);
    let (o, o1, o2, o3, o4) = (lmr.ptr, lctx.ptr, rctx.ptr, rlen.ptr, raddr.ptr);
    let ret = vcall!(
        r.p,
        lmr_create_func(ia, mem_type, region, length, pz, privs, va_type, o, o1, o2, o3, o4)
    );
    if !r.finish(c, ret) {
        return;
    }
    r.stats.creates += 1;
    let h = r.new_handle(&lmr);
    let off = if mem_type == DAT_MEM_TYPE_LMR {
        let base = c.handles[2].pick.obj.expect("good");
        r.w.objs[base].info.off
    } else {
        buf + off
    };
    // Read the outputs before the next call reuses the output area.
    let got = [
        r.a.read(&lctx).map(|v| v as u64),
        r.a.read(&rctx).map(|v| v as u64),
        r.a.read(&rlen),
        r.a.read(&raddr),
    ];
    let i = lmr_created(r, h, pz as usize, off, length as usize, privs);
    let info = r.w.objs[i].info;
    let want = [
        (info.lmr_ctx as u64, "lmr_context"),
        (info.rmr_ctx as u64, "rmr_context"),
        (length, "registered_length"),
        (r.a.addr(off), "registered_address"),
    ];
    for (got, (want, what)) in got.into_iter().zip(want) {
        if got.is_some_and(|g| g != want) {
            r.fail(format!(
                "lmr_create's {what} is {got:?}, lmr_query says {want:#x}"
            ));
        }
    }
}

fn lmr_query(r: &mut Run) {
    let c = &mut r.call("lmr_query");
    let lmr = r.h(c, Some(Kind::Lmr), false);
    let mask = r.mask() as u32;
    let out = r.out::<DAT_LMR_PARAM>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, lmr_query_func(lmr, mask, o));
    if r.finish(c, ret) {
        let q = r.a.read(&out).expect("not NULL");
        let i = r.w.objs[c.obj(0).expect("good")].info;
        r.same_handle("lmr_query's ia_handle", q.ia_handle, r.ia);
        r.same_handle("lmr_query's pz_handle", q.pz_handle, i.pz);
        if q.lmr_context != i.lmr_ctx
            || q.registered_address != r.a.addr(i.off)
            || q.registered_size != i.len as u64
        {
            r.fail(format!(
                "lmr_query gave context {:#x} [{:#x}, +{}], the LMR was {:#x} [{:#x}, +{}]",
                q.lmr_context,
                q.registered_address,
                q.registered_size,
                i.lmr_ctx,
                r.a.addr(i.off),
                i.len
            ));
        }
    }
}

fn rmr_create(r: &mut Run) {
    if r.w.live_of(Kind::Rmr).len() >= MAX_LIVE {
        return;
    }
    let c = &mut r.call("rmr_create");
    let pz = r.h(c, Some(Kind::Pz), false);
    let out = r.out::<DAT_HANDLE>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, rmr_create_func(pz, o));
    if r.finish(c, ret) {
        r.stats.creates += 1;
        let h = r.new_handle(&out);
        r.created(
            Kind::Rmr,
            h,
            Info {
                pz: pz as usize,
                ..Info::default()
            },
        );
    }
}

fn rmr_query(r: &mut Run) {
    let c = &mut r.call("rmr_query");
    let rmr = r.h(c, Some(Kind::Rmr), false);
    let mask = r.mask() as u32;
    let out = r.out::<DAT_RMR_PARAM>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, rmr_query_func(rmr, mask, o));
    if r.finish(c, ret) {
        let q = r.a.read(&out).expect("not NULL");
        let i = r.w.objs[c.obj(0).expect("good")].info;
        r.same_handle("rmr_query's ia_handle", q.ia_handle, r.ia);
        r.same_handle("rmr_query's pz_handle", q.pz_handle, i.pz);
    }
}

fn rmr_bind(r: &mut Run) {
    let c = &mut r.call("rmr_bind");
    let rmr = r.h(c, Some(Kind::Rmr), false);
    let lmr = r.h(c, Some(Kind::Lmr), false);
    let ep = r.h(c, Some(Kind::Ep), false);
    let t = if r.null(c) {
        c.dirty = true;
        c.must_fail = true;
        None
    } else {
        let t = r.triplet(c);
        r.a.put(IN_SEGS, t);
        Some(t)
    };
    let tp: *const DAT_LMR_TRIPLET = if t.is_some() {
        r.a.ptr(IN_SEGS)
    } else {
        std::ptr::null()
    };
    let privs = r.flags(c, 0x73);
    let va_type = r.inp.u8() as u32 & 1;
    let cookie = DAT_RMR_COOKIE { as_64: r.inp.u64() };
    let flags = r.completion_flags(c);
    let out = r.out::<DAT_RMR_CONTEXT>(c, false);
    let o = out.ptr;
    let ret = vcall!(
        r.p,
        rmr_bind_func(rmr, lmr, tp, privs, va_type, ep, cookie, flags, o)
    );
    if !r.finish(c, ret) {
        return;
    }
    let t = t.expect("a bind with no triplet succeeded");
    if t.segment_length != 0 {
        let l = r.w.objs[c.obj(1).expect("good")].info;
        if t.lmr_context != l.lmr_ctx {
            r.fail(format!("rmr_bind succeeded with {t:?} of another LMR"));
        }
        r.segments_ok("rmr_bind", &[t], 0, false);
    }
    let rm = c.obj(0).expect("good");
    if let Some(ctx) = r.a.read(&out) {
        r.w.objs[rm].info.rmr_ctx = ctx;
    }
}

// ---------------------------------------------------------------------------------------------
// EP

/// An EP attribute argument: NULL, a valid small one, or counts from the input.
fn ep_attr(r: &mut Run, c: &mut Call) -> DAT_EP_ATTR {
    let sel = r.inp.u8();
    let mut a = <DAT_EP_ATTR as arena::Plain>::zeroed();
    a.max_recv_dtos = 8;
    a.max_request_dtos = 8;
    a.max_recv_iov = 4;
    a.max_request_iov = 4;
    a.max_rdma_read_in = 2;
    a.max_rdma_read_out = 2;
    a.max_message_size = 1 << 16;
    a.max_rdma_size = 1 << 16;
    if sel & 3 == 3 {
        c.dirty = true;
        a.recv_completion_flags = r.inp.u32() & 0x3f;
        a.request_completion_flags = r.inp.u32() & 0x3f;
        a.max_recv_dtos = r.count();
        a.max_request_dtos = r.count();
        a.max_recv_iov = r.count();
        a.max_request_iov = r.count();
        a.max_rdma_read_in = r.count();
        a.max_rdma_read_out = r.count();
        a.service_type = r.inp.u8() as u32;
    }
    a
}

fn ep_create(r: &mut Run, with_srq: bool) {
    if r.w.live_of(Kind::Ep).len() >= MAX_LIVE {
        return;
    }
    let c = &mut r.call(if with_srq {
        "ep_create_with_srq"
    } else {
        "ep_create"
    });
    let ia = r.h(c, Some(Kind::Ia), false);
    let pz = r.h(c, Some(Kind::Pz), false);
    let recv = r.h(c, Some(Kind::Evd), true);
    let req = r.h(c, Some(Kind::Evd), true);
    let conn = r.h(c, Some(Kind::Evd), true);
    let srq = if with_srq {
        r.h(c, Some(Kind::Srq), false)
    } else {
        std::ptr::null_mut()
    };
    let attr: *const DAT_EP_ATTR = if r.null(c) {
        std::ptr::null()
    } else {
        let a = ep_attr(r, c);
        r.a.put(IN_EP_ATTR, a);
        r.a.ptr(IN_EP_ATTR)
    };
    let out = r.out::<DAT_HANDLE>(c, true);
    let o = out.ptr;
    let ret = if with_srq {
        vcall!(
            r.p,
            ep_create_with_srq_func(ia, pz, recv, req, conn, srq, attr, o)
        )
    } else {
        vcall!(r.p, ep_create_func(ia, pz, recv, req, conn, attr, o))
    };
    if r.finish(c, ret) {
        r.stats.creates += 1;
        let h = r.new_handle(&out);
        let info = Info {
            pz: pz as usize,
            recv_evd: recv as usize,
            req_evd: req as usize,
            conn_evd: conn as usize,
            srq: srq as usize,
            ..Info::default()
        };
        r.created(Kind::Ep, h, info);
    }
}

fn ep_query(r: &mut Run) {
    let c = &mut r.call("ep_query");
    let ep = r.h(c, Some(Kind::Ep), false);
    let mask = r.mask();
    let out = r.out::<DAT_EP_PARAM>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, ep_query_func(ep, mask, o));
    if r.finish(c, ret) {
        let q = r.a.read(&out).expect("not NULL");
        let i = r.w.objs[c.obj(0).expect("good")].info;
        r.same_handle("ep_query's ia_handle", q.ia_handle, r.ia);
        r.same_handle("ep_query's pz_handle", q.pz_handle, i.pz);
        r.same_handle("ep_query's recv_evd_handle", q.recv_evd_handle, i.recv_evd);
        r.same_handle(
            "ep_query's request_evd_handle",
            q.request_evd_handle,
            i.req_evd,
        );
        r.same_handle(
            "ep_query's connect_evd_handle",
            q.connect_evd_handle,
            i.conn_evd,
        );
        r.same_handle("ep_query's srq_handle", q.srq_handle, i.srq);
        if q.ep_state > DAT_EP_STATE_CONNECTED_MULTI_PATH {
            r.fail(format!("ep_query's ep_state is {}", q.ep_state));
        }
    }
}

fn ep_modify(r: &mut Run) {
    let c = &mut r.call("ep_modify");
    let ep = r.h(c, Some(Kind::Ep), false);
    let mask = r.mask();
    if mask & !DAT_EP_FIELD_EP_ATTR_ALL != 0 {
        c.dirty = true;
    }
    let param: *const DAT_EP_PARAM = if r.null(c) {
        c.dirty = true;
        c.must_fail = true;
        std::ptr::null()
    } else {
        let mut p = <DAT_EP_PARAM as arena::Plain>::zeroed();
        p.ep_attr = ep_attr(r, c);
        r.a.put(IN_EP_PARAM, p);
        r.a.ptr(IN_EP_PARAM)
    };
    let ret = vcall!(r.p, ep_modify_func(ep, mask, param));
    r.finish(c, ret);
}

fn ep_connect(r: &mut Run) {
    let c = &mut r.call("ep_connect");
    let ep = r.h(c, Some(Kind::Ep), false);
    let addr = r.address(c);
    let qual = r.qual();
    let timeout = DAT_TIMEOUT_INFINITE;
    let (n, pd) = r.pdata(c);
    let qos = r.inp.u8() as u32;
    let flags = r.inp.u8() as u32;
    let ret = vcall!(
        r.p,
        ep_connect_func(ep, addr, qual, timeout, n, pd, qos, flags)
    );
    r.finish(c, ret);
}

fn ep_dup_connect(r: &mut Run) {
    let c = &mut r.call("ep_dup_connect");
    let ep = r.h(c, Some(Kind::Ep), false);
    let dup = r.h(c, Some(Kind::Ep), false);
    let timeout = DAT_TIMEOUT_INFINITE;
    let (n, pd) = r.pdata(c);
    let qos = r.inp.u8() as u32;
    let ret = vcall!(r.p, ep_dup_connect_func(ep, dup, timeout, n, pd, qos));
    r.finish(c, ret);
}

fn ep_disconnect(r: &mut Run) {
    let c = &mut r.call("ep_disconnect");
    let ep = r.h(c, Some(Kind::Ep), false);
    let flags = r.close_flags(c);
    let ret = vcall!(r.p, ep_disconnect_func(ep, flags));
    r.finish(c, ret);
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Post {
    Send,
    SendInv,
    Recv,
    Read,
    Write,
    WriteImmed,
    SrqRecv,
}

/// Every posting function: an EP (or SRQ), an iov, a cookie, flags, and what the kind adds.
fn post(r: &mut Run, kind: Post) {
    let name = match kind {
        Post::Send => "ep_post_send",
        Post::SendInv => "ep_post_send_with_invalidate",
        Post::Recv => "ep_post_recv",
        Post::Read => "ep_post_rdma_read",
        Post::Write => "ep_post_rdma_write",
        Post::WriteImmed => "dat_ib_post_rdma_write_immed",
        Post::SrqRecv => "srq_post_recv",
    };
    let c = &mut r.call(name);
    let h = if kind == Post::SrqRecv {
        r.h(c, Some(Kind::Srq), false)
    } else {
        r.h(c, Some(Kind::Ep), false)
    };
    let (n, segs, written) = r.iov(c, true);
    let n = n as DAT_COUNT;
    let ck = r.inp.u64();
    let cookie = DAT_DTO_COOKIE { as_64: ck };
    let remote = match kind {
        Post::Read | Post::Write | Post::WriteImmed => r.rmr_triplet(c),
        _ => std::ptr::null(),
    };
    let flags = r.completion_flags(c);
    let ret = match kind {
        Post::Send => vcall!(r.p, ep_post_send_func(h, n, segs, cookie, flags)),
        Post::SendInv => {
            let inv = match r.inp.u8() & 3 {
                0 | 1 => DAT_TRUE,
                2 => DAT_FALSE,
                _ => {
                    c.dirty = true;
                    c.must_fail = true;
                    2 + r.inp.u8() as u32
                }
            };
            let ctx: DAT_RMR_CONTEXT = match r.some_live(Kind::Rmr) {
                Some(i) if r.inp.u8() & 1 == 0 => r.w.objs[i].info.rmr_ctx,
                _ => r.inp.u32(),
            };
            vcall!(
                r.p,
                ep_post_send_with_invalidate_func(h, n, segs, cookie, flags, inv, ctx)
            )
        }
        Post::Recv => vcall!(r.p, ep_post_recv_func(h, n, segs, cookie, flags)),
        Post::Read => vcall!(
            r.p,
            ep_post_rdma_read_func(h, n, segs, cookie, remote, flags)
        ),
        Post::Write => vcall!(
            r.p,
            ep_post_rdma_write_func(h, n, segs, cookie, remote, flags)
        ),
        Post::WriteImmed => {
            let imm = r.inp.u32();
            let segs = segs.cast_const();
            // SAFETY: as for every vtable call (see `vcall!`): `segs` is NULL or the harness's
            // triplets, at least `n` of them; `remote` NULL or the harness's triplet. This is
            // the function the IB extension's va_list shim calls (csrc/ext_shim.c).
            unsafe { crate::ext::daplrs_ext_rdma_write_immed(h, n, segs, ck, remote, imm, flags) }
        }
        Post::SrqRecv => vcall!(r.p, srq_post_recv_func(h, n, segs, cookie)),
    };
    let ok = r.finish(c, ret);
    if c.handles.iter().enumerate().all(|(i, _)| c.good(&r.w, i)) {
        if ok {
            r.stats.posts_accepted += 1;
        } else {
            r.stats.posts_refused += 1;
        }
    }
    if ok {
        let o = c.obj(0).expect("good");
        let pz = r.w.objs[o].info.pz;
        let write = matches!(kind, Post::Recv | Post::Read | Post::SrqRecv);
        r.segments_ok(name, &written, pz, write);
    }
}

fn ep_get_status(r: &mut Run) {
    let c = &mut r.call("ep_get_status");
    let ep = r.h(c, Some(Kind::Ep), false);
    let state = r.out::<DAT_EP_STATE>(c, false);
    let ri = r.out::<DAT_BOOLEAN>(c, false);
    let qi = r.out::<DAT_BOOLEAN>(c, false);
    let (s, a, b) = (state.ptr, ri.ptr, qi.ptr);
    let ret = vcall!(r.p, ep_get_status_func(ep, s, a, b));
    if r.finish(c, ret) {
        if let Some(s) = r.a.read(&state) {
            if s > DAT_EP_STATE_CONNECTED_MULTI_PATH {
                r.fail(format!("ep_get_status's state is {s}"));
            }
        }
        for b in [r.a.read(&ri), r.a.read(&qi)].into_iter().flatten() {
            if b > DAT_TRUE {
                r.fail(format!("ep_get_status's idle flag is {b}"));
            }
        }
    }
}

fn ep_reset(r: &mut Run) {
    let c = &mut r.call("ep_reset");
    let ep = r.h(c, Some(Kind::Ep), false);
    let ret = vcall!(r.p, ep_reset_func(ep));
    r.finish(c, ret);
}

fn ep_recv_query(r: &mut Run) {
    let c = &mut r.call("ep_recv_query");
    let ep = r.h(c, Some(Kind::Ep), false);
    let a = r.out::<DAT_COUNT>(c, false);
    let b = r.out::<DAT_COUNT>(c, false);
    let (x, y) = (a.ptr, b.ptr);
    let ret = vcall!(r.p, ep_recv_query_func(ep, x, y));
    r.finish(c, ret);
}

fn ep_set_watermark(r: &mut Run) {
    let c = &mut r.call("ep_set_watermark");
    let ep = r.h(c, Some(Kind::Ep), false);
    let soft = r.count();
    let hard = r.count();
    let ret = vcall!(r.p, ep_set_watermark_func(ep, soft, hard));
    r.finish(c, ret);
}

// ---------------------------------------------------------------------------------------------
// SRQ

fn srq_create(r: &mut Run) {
    if r.w.live_of(Kind::Srq).len() >= 4 {
        return;
    }
    let c = &mut r.call("srq_create");
    let ia = r.h(c, Some(Kind::Ia), false);
    let pz = r.h(c, Some(Kind::Pz), false);
    let attr: *mut DAT_SRQ_ATTR = if r.null(c) {
        c.dirty = true;
        c.must_fail = true;
        std::ptr::null_mut()
    } else {
        let sel = r.inp.u8();
        let a = if sel & 3 == 3 {
            c.dirty = true;
            DAT_SRQ_ATTR {
                max_recv_dtos: r.count(),
                max_recv_iov: r.count(),
                low_watermark: r.count(),
            }
        } else {
            DAT_SRQ_ATTR {
                max_recv_dtos: 1 + (sel >> 2) as i32,
                max_recv_iov: 1 + (sel & 3) as i32,
                low_watermark: 0,
            }
        };
        r.a.put(IN_SRQ_ATTR, a);
        r.a.ptr(IN_SRQ_ATTR)
    };
    let out = r.out::<DAT_HANDLE>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, srq_create_func(ia, pz, attr, o));
    if r.finish(c, ret) {
        r.stats.creates += 1;
        let h = r.new_handle(&out);
        r.created(
            Kind::Srq,
            h,
            Info {
                pz: pz as usize,
                ..Info::default()
            },
        );
    }
}

fn srq_query(r: &mut Run) {
    let c = &mut r.call("srq_query");
    let srq = r.h(c, Some(Kind::Srq), false);
    let mask = r.mask() as u32;
    let out = r.out::<DAT_SRQ_PARAM>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, srq_query_func(srq, mask, o));
    if r.finish(c, ret) {
        let q = r.a.read(&out).expect("not NULL");
        let i = r.w.objs[c.obj(0).expect("good")].info;
        r.same_handle("srq_query's ia_handle", q.ia_handle, r.ia);
        r.same_handle("srq_query's pz_handle", q.pz_handle, i.pz);
    }
}

fn srq_count(r: &mut Run, lw: bool) {
    let c = &mut r.call(if lw { "srq_set_lw" } else { "srq_resize" });
    let srq = r.h(c, Some(Kind::Srq), false);
    let n = r.count();
    if n < 0 {
        c.dirty = true;
        c.must_fail = true;
    }
    let ret = if lw {
        vcall!(r.p, srq_set_lw_func(srq, n))
    } else {
        vcall!(r.p, srq_resize_func(srq, n))
    };
    r.finish(c, ret);
}

// ---------------------------------------------------------------------------------------------
// Service points and connection requests

fn psp_create(r: &mut Run, any: bool) {
    if r.w.live_of(Kind::Psp).len() >= 4 {
        return;
    }
    let c = &mut r.call(if any { "psp_create_any" } else { "psp_create" });
    let ia = r.h(c, Some(Kind::Ia), false);
    let evd = r.h(c, Some(Kind::Evd), false);
    let sel = r.inp.u8();
    let flags = match sel & 7 {
        6 => DAT_PSP_PROVIDER_FLAG,
        7 => {
            c.dirty = true;
            c.must_fail = true;
            2 + (sel >> 3) as u32
        }
        _ => DAT_PSP_CONSUMER_FLAG,
    };
    let out = r.out::<DAT_HANDLE>(c, true);
    let o = out.ptr;
    let (ret, qual_out, qual) = if any {
        let q = r.out::<DAT_CONN_QUAL>(c, true);
        let qp = q.ptr;
        (
            vcall!(r.p, psp_create_any_func(ia, qp, evd, flags, o)),
            Some(q),
            0,
        )
    } else {
        let qual = r.qual();
        (
            vcall!(r.p, psp_create_func(ia, qual, evd, flags, o)),
            None,
            qual,
        )
    };
    if r.finish(c, ret) {
        r.stats.creates += 1;
        let h = r.new_handle(&out);
        let qual = match qual_out {
            Some(q) => r.a.read(&q).expect("not NULL"),
            None => qual,
        };
        let info = Info {
            qual,
            evd: evd as usize,
            ..Info::default()
        };
        r.created(Kind::Psp, h, info);
    }
}

fn psp_query(r: &mut Run) {
    let c = &mut r.call("psp_query");
    let psp = r.h(c, Some(Kind::Psp), false);
    let mask = r.mask() as u32;
    let out = r.out::<DAT_PSP_PARAM>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, psp_query_func(psp, mask, o));
    if r.finish(c, ret) {
        let q = r.a.read(&out).expect("not NULL");
        let i = r.w.objs[c.obj(0).expect("good")].info;
        r.same_handle("psp_query's ia_handle", q.ia_handle, r.ia);
        r.same_handle("psp_query's evd_handle", q.evd_handle, i.evd);
        if q.conn_qual != i.qual {
            r.fail(format!(
                "psp_query's conn_qual is {:#x}, not {:#x}",
                q.conn_qual, i.qual
            ));
        }
    }
}

fn rsp_create(r: &mut Run) {
    if r.w.live_of(Kind::Rsp).len() >= 4 {
        return;
    }
    let c = &mut r.call("rsp_create");
    let ia = r.h(c, Some(Kind::Ia), false);
    let qual = r.qual();
    let ep = r.h(c, Some(Kind::Ep), false);
    let evd = r.h(c, Some(Kind::Evd), false);
    let out = r.out::<DAT_HANDLE>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, rsp_create_func(ia, qual, ep, evd, o));
    if r.finish(c, ret) {
        r.stats.creates += 1;
        let h = r.new_handle(&out);
        let info = Info {
            qual,
            ep: ep as usize,
            evd: evd as usize,
            ..Info::default()
        };
        r.created(Kind::Rsp, h, info);
    }
}

fn rsp_query(r: &mut Run) {
    let c = &mut r.call("rsp_query");
    let rsp = r.h(c, Some(Kind::Rsp), false);
    let mask = r.mask() as u32;
    let out = r.out::<DAT_RSP_PARAM>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, rsp_query_func(rsp, mask, o));
    if r.finish(c, ret) {
        let q = r.a.read(&out).expect("not NULL");
        let i = r.w.objs[c.obj(0).expect("good")].info;
        r.same_handle("rsp_query's ia_handle", q.ia_handle, r.ia);
        r.same_handle("rsp_query's evd_handle", q.evd_handle, i.evd);
        r.same_handle("rsp_query's ep_handle", q.ep_handle, i.ep);
        if q.conn_qual != i.qual {
            r.fail(format!(
                "rsp_query's conn_qual is {:#x}, not {:#x}",
                q.conn_qual, i.qual
            ));
        }
    }
}

fn cr_query(r: &mut Run) {
    let c = &mut r.call("cr_query");
    let cr = r.h(c, Some(Kind::Cr), false);
    let mask = r.mask() as u32;
    let out = r.out::<DAT_CR_PARAM>(c, true);
    let o = out.ptr;
    let ret = vcall!(r.p, cr_query_func(cr, mask, o));
    if r.finish(c, ret) {
        let q = r.a.read(&out).expect("not NULL");
        let ep = q.local_ep_handle as usize;
        if ep != 0 && r.w.seen.get(&ep) != Some(&Kind::Ep) {
            r.fail(format!(
                "cr_query's local_ep_handle {ep:#x} is no EP of this IA"
            ));
        }
        if !(0..=MAX_PDATA).contains(&q.private_data_size)
            || (q.private_data_size > 0) == q.private_data.is_null()
        {
            r.fail(format!(
                "cr_query's private data is {} bytes at {:p}",
                q.private_data_size, q.private_data
            ));
        }
    }
}

fn cr_accept(r: &mut Run) {
    let c = &mut r.call("cr_accept");
    let cr = r.h(c, Some(Kind::Cr), false);
    let ep = r.h(c, Some(Kind::Ep), true);
    let (n, pd) = r.pdata(c);
    let ret = vcall!(r.p, cr_accept_func(cr, ep, n, pd));
    if r.finish(c, ret) {
        r.stats.frees += 1;
        r.w.kill(c.obj(0).expect("good"));
    }
}

fn cr_reject(r: &mut Run) {
    let c = &mut r.call("cr_reject");
    let cr = r.h(c, Some(Kind::Cr), false);
    let (n, pd) = r.pdata(c);
    let ret = vcall!(r.p, cr_reject_func(cr, n, pd));
    if r.finish(c, ret) {
        r.stats.frees += 1;
        r.w.kill(c.obj(0).expect("good"));
    }
}

// ---------------------------------------------------------------------------------------------
// Frees, the slots with no implementation, compound operations

fn free_op(r: &mut Run, kind: Kind) {
    let c = &mut r.call(free_name(kind));
    let h = r.h(c, Some(kind), false);
    let ret = call_free(r, kind, h);
    if r.finish(c, ret) {
        r.stats.frees += 1;
        r.w.kill(c.obj(0).expect("good"));
    }
}

fn not_implemented(r: &mut Run) {
    let c = &mut r.call("not_implemented");
    c.not_implemented = true;
    let which = r.inp.u8() % 10;
    let names = [
        "cr_handoff",
        "csp_create",
        "csp_query",
        "csp_free",
        "ep_common_connect",
        "ep_post_rdma_read_to_rmr",
        "cno_fd_create",
        "cno_trigger",
        "ia_ha_related",
        "rmr_create_for_ep",
    ];
    c.name = names[which as usize];
    let h = r.h(c, None, false);
    let q = r.inp.u64();
    let ret = match which {
        0 => vcall!(r.p, cr_handoff_func(h, q)),
        1 => {
            let comm = r.out::<DAT_COMM>(c, false).ptr;
            let addr = r.address(c);
            let evd = r.h(c, Some(Kind::Evd), false);
            let csp = r.out::<DAT_HANDLE>(c, false).ptr;
            vcall!(r.p, csp_create_func(h, comm, addr, evd, csp))
        }
        2 => {
            let m = q as u32;
            let p = r.out::<DAT_CSP_PARAM>(c, false).ptr;
            vcall!(r.p, csp_query_func(h, m, p))
        }
        3 => vcall!(r.p, csp_free_func(h)),
        4 => {
            let addr = r.address(c);
            let t = DAT_TIMEOUT_INFINITE;
            let (n, pd) = r.pdata(c);
            vcall!(r.p, ep_common_connect_func(h, addr, t, n, pd))
        }
        5 => {
            let local = r.rmr_triplet(c);
            let remote = r.rmr_triplet(c);
            let cookie = DAT_DTO_COOKIE { as_64: q };
            let f = r.completion_flags(c);
            vcall!(
                r.p,
                ep_post_rdma_read_to_rmr_func(h, local, cookie, remote, f)
            )
        }
        6 => {
            let fd = r.out::<DAT_FD>(c, false).ptr;
            let cno = r.out::<DAT_HANDLE>(c, false).ptr;
            vcall!(r.p, cno_fd_create_func(h, fd, cno))
        }
        7 => {
            let evd = r.out::<DAT_HANDLE>(c, false).ptr;
            vcall!(r.p, cno_trigger_func(h, evd))
        }
        8 => {
            let name: DAT_NAME_PTR = r.a.ptr(IN_PDATA);
            let answer = r.out::<DAT_BOOLEAN>(c, false).ptr;
            vcall!(r.p, ia_ha_related_func(h, name, answer))
        }
        _ => {
            let rmr = r.out::<DAT_HANDLE>(c, false).ptr;
            vcall!(r.p, rmr_create_for_ep_func(h, rmr))
        }
    };
    r.finish(c, ret);
}

/// Connects two live EPs through a live PSP (made first if there is none), as a consumer
/// does: a path the fuzzer would otherwise have to find call by call.
fn connect_pair(r: &mut Run) {
    let _nulls = r.inp.u8();
    let (Some(a), Some(b)) = (r.some_live(Kind::Ep), r.some_live(Kind::Ep)) else {
        return;
    };
    let psp = match r.some_live(Kind::Psp) {
        Some(p) => p,
        None => {
            let Some(evd) =
                r.w.live_of(Kind::Evd)
                    .into_iter()
                    .find(|&e| !r.w.objs[e].info.is_async)
            else {
                return;
            };
            let qual = 0x7000_0000 + r.inp.u16() as u64;
            let c = &mut r.fixed("psp_create");
            let ia = r.ia_arg(c);
            let evdh = r.known(c, Some(Kind::Evd), Some(evd));
            let flags = DAT_PSP_CONSUMER_FLAG;
            let out = r.a.out::<DAT_HANDLE>(false);
            let o = out.ptr;
            let ret = vcall!(r.p, psp_create_func(ia, qual, evdh, flags, o));
            if !r.finish(c, ret) {
                return;
            }
            let h = r.new_handle(&out);
            r.created(
                Kind::Psp,
                h,
                Info {
                    qual,
                    evd: evdh as usize,
                    ..Info::default()
                },
            )
        }
    };
    connect(r, a, b, psp);
}

/// Dequeues every event of every live EVD (the harness's bookkeeping: requests become CRs).
fn drain(r: &mut Run) {
    let _nulls = r.inp.u8();
    for e in r.w.live_of(Kind::Evd) {
        drain_evd(r, e);
    }
}

/// Dequeues (up to 128) events of live EVD `e`.
pub(crate) fn drain_evd(r: &mut Run, e: usize) {
    for _ in 0..128 {
        if !r.w.objs[e].live || !dequeue(r, e) {
            break;
        }
    }
}

// Keep the input-area constants in one place.
const _: () = assert!(BUFS == 4 && IN_SEGS < IN_RMR_TRIPLET);
