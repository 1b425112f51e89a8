//! The objects of one input, as the harness (the consumer) knows them, and how a handle
//! argument is chosen.

use std::collections::HashMap;

use crate::ffi::*;

/// Which DAT object a handle names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Ia,
    Evd,
    Cno,
    Pz,
    Lmr,
    Rmr,
    Ep,
    Psp,
    Rsp,
    Srq,
    Cr,
}

impl Kind {
    pub(crate) const ALL: [Kind; 11] = [
        Kind::Ia,
        Kind::Evd,
        Kind::Cno,
        Kind::Pz,
        Kind::Lmr,
        Kind::Rmr,
        Kind::Ep,
        Kind::Psp,
        Kind::Rsp,
        Kind::Srq,
        Kind::Cr,
    ];

    /// `dat_get_handle_type`'s answer.
    pub(crate) fn handle_type(self) -> DAT_HANDLE_TYPE {
        match self {
            Kind::Ia => DAT_HANDLE_TYPE_IA,
            Kind::Evd => DAT_HANDLE_TYPE_EVD,
            Kind::Cno => DAT_HANDLE_TYPE_CNO,
            Kind::Pz => DAT_HANDLE_TYPE_PZ,
            Kind::Lmr => DAT_HANDLE_TYPE_LMR,
            Kind::Rmr => DAT_HANDLE_TYPE_RMR,
            Kind::Ep => DAT_HANDLE_TYPE_EP,
            Kind::Psp => DAT_HANDLE_TYPE_PSP,
            Kind::Rsp => DAT_HANDLE_TYPE_RSP,
            Kind::Srq => DAT_HANDLE_TYPE_SRQ,
            Kind::Cr => DAT_HANDLE_TYPE_CR,
        }
    }

    /// The `DAT_INVALID_HANDLE` subtypes that name this kind (an EVD has one per role).
    pub(crate) fn subtypes(self) -> &'static [DAT_RETURN] {
        match self {
            Kind::Ia => &[DAT_INVALID_HANDLE_IA],
            Kind::Evd => &[
                DAT_INVALID_HANDLE_EVD_CR,
                DAT_INVALID_HANDLE_EVD_REQUEST,
                DAT_INVALID_HANDLE_EVD_RECV,
                DAT_INVALID_HANDLE_EVD_CONN,
                DAT_INVALID_HANDLE_EVD_ASYNC,
            ],
            Kind::Cno => &[DAT_INVALID_HANDLE_CNO],
            Kind::Pz => &[DAT_INVALID_HANDLE_PZ],
            Kind::Lmr => &[DAT_INVALID_HANDLE_LMR],
            Kind::Rmr => &[DAT_INVALID_HANDLE_RMR],
            Kind::Ep => &[DAT_INVALID_HANDLE_EP],
            Kind::Psp => &[DAT_INVALID_HANDLE_PSP],
            Kind::Rsp => &[DAT_INVALID_HANDLE_RSP],
            Kind::Srq => &[DAT_INVALID_HANDLE_SRQ],
            Kind::Cr => &[DAT_INVALID_HANDLE_CR],
        }
    }
}

/// What the harness remembers of an object (fields that do not apply stay 0).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Info {
    /// LMR: contexts, arena range, privileges as given.
    pub(crate) lmr_ctx: u32,
    pub(crate) rmr_ctx: u32,
    pub(crate) off: usize,
    pub(crate) len: usize,
    pub(crate) privs: u32,
    /// LMR, RMR, EP, SRQ: the PZ's handle.
    pub(crate) pz: usize,
    /// EP: its EVDs and SRQ (0: none).
    pub(crate) recv_evd: usize,
    pub(crate) req_evd: usize,
    pub(crate) conn_evd: usize,
    pub(crate) srq: usize,
    /// PSP, RSP: connection qualifier and EVD; RSP: its EP.
    pub(crate) qual: u64,
    pub(crate) evd: usize,
    pub(crate) ep: usize,
    /// EVD: its CNO (0: none).
    pub(crate) cno: usize,
    /// EVD: the IA's async EVD.
    pub(crate) is_async: bool,
}

#[derive(Debug)]
pub(crate) struct Obj {
    pub(crate) kind: Kind,
    pub(crate) h: usize,
    pub(crate) live: bool,
    /// The consumer context last set (0 for a new object).
    pub(crate) context: u64,
    pub(crate) info: Info,
}

/// How a handle argument was chosen (for the statistics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// A live object of the wanted kind.
    Live,
    /// A live object of another kind.
    WrongKind,
    /// The handle of an object freed earlier (in this input or an earlier one).
    Stale,
    Null,
    /// Any 64-bit value from the input.
    Raw,
    /// Next to a live handle: another stub of its slot, misaligned, past the stubs.
    Near,
    /// A small integer (what libdat2 gives consumers for an IA).
    Small,
}

/// A handle argument as chosen: its value, what it names now (if a live object), and how.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pick {
    pub(crate) value: usize,
    /// Index of the live object with exactly this value.
    pub(crate) obj: Option<usize>,
    pub(crate) how: How,
}

#[derive(Default)]
pub(crate) struct World {
    pub(crate) objs: Vec<Obj>,
    live: HashMap<usize, usize>,
    /// Handle values of objects freed in this input.
    pub(crate) freed: Vec<usize>,
    /// Every handle value this input's objects ever had.
    pub(crate) seen: HashMap<usize, Kind>,
}

impl World {
    /// Records a new object; its handle must be non-NULL and not be a live object's.
    pub(crate) fn add(&mut self, kind: Kind, h: usize, info: Info) -> Result<usize, String> {
        if h == 0 {
            return Err(format!("a new {kind:?} has a NULL handle"));
        }
        if let Some(&i) = self.live.get(&h) {
            return Err(format!(
                "a new {kind:?} got handle {h:#x}, which is the live {:?} #{i}'s",
                self.objs[i].kind
            ));
        }
        let i = self.objs.len();
        self.objs.push(Obj {
            kind,
            h,
            live: true,
            context: 0,
            info,
        });
        self.live.insert(h, i);
        self.seen.insert(h, kind);
        Ok(i)
    }

    /// The object is gone (its free succeeded, or its IA closed).
    pub(crate) fn kill(&mut self, i: usize) {
        let o = &mut self.objs[i];
        if o.live {
            o.live = false;
            self.live.remove(&o.h);
            self.freed.push(o.h);
        }
    }

    /// The live object with handle value `h`.
    pub(crate) fn live_obj(&self, h: usize) -> Option<usize> {
        self.live.get(&h).copied()
    }

    /// The live objects of a kind, in creation order.
    pub(crate) fn live_of(&self, k: Kind) -> Vec<usize> {
        (0..self.objs.len())
            .filter(|&i| self.objs[i].live && self.objs[i].kind == k)
            .collect()
    }

    /// Every live object, in creation order.
    pub(crate) fn all_live(&self) -> Vec<usize> {
        (0..self.objs.len())
            .filter(|&i| self.objs[i].live)
            .collect()
    }

    /// Chooses a handle argument wanting `want` (None: any kind) from selector byte `sel`, and
    /// up to 8 more bytes from `more`. See the module `ops` for the byte's meaning.
    pub(crate) fn pick(
        &self,
        want: Option<Kind>,
        sel: u8,
        old: &[usize],
        mut more: impl FnMut() -> u64,
    ) -> Pick {
        let idx = (sel >> 3) as usize;
        let pick_from =
            |v: &[usize]| -> Option<usize> { (!v.is_empty()).then(|| v[idx % v.len()]) };
        let (value, how) = match sel & 7 {
            0..=2 => {
                let v = match want {
                    Some(k) => self.live_of(k),
                    None => self.all_live(),
                };
                match pick_from(&v) {
                    Some(i) => (self.objs[i].h, How::Live),
                    None => (0, How::Null),
                }
            }
            3 => {
                let v: Vec<usize> = self
                    .all_live()
                    .into_iter()
                    .filter(|&i| Some(self.objs[i].kind) != want)
                    .collect();
                match (want, pick_from(&v)) {
                    (Some(_), Some(i)) => (self.objs[i].h, How::WrongKind),
                    _ => self.stale(idx, old),
                }
            }
            4 => self.stale(idx, old),
            5 => (0, How::Null),
            6 => (more() as usize, How::Raw),
            _ => {
                let all = self.all_live();
                let base = pick_from(&all).map_or(0x1000, |i| self.objs[i].h);
                match idx & 7 {
                    0 => (base.wrapping_add(8), How::Near),
                    1 => (base.wrapping_sub(8), How::Near),
                    2 => (base.wrapping_add(1), How::Near),
                    3 => (base & !63, How::Near),
                    4 => (base.wrapping_add(64), How::Near),
                    5 => ((idx >> 3) & 3, How::Small),
                    6 => (usize::MAX & !7, How::Raw),
                    _ => (base ^ 0x1000, How::Near),
                }
            }
        };
        Pick {
            value,
            obj: self.live_obj(value),
            how,
        }
    }

    fn stale(&self, idx: usize, old: &[usize]) -> (usize, How) {
        let n = self.freed.len() + old.len();
        if n == 0 {
            return (0xdead_b000, How::Raw);
        }
        let i = idx % n;
        let v = if i < self.freed.len() {
            self.freed[i]
        } else {
            old[i - self.freed.len()]
        };
        (v, How::Stale)
    }
}
