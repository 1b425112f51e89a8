//! The `cabi_handles` fuzz harness: random handles, kinds, NULLs, counts and lengths through
//! the provider's vtable, as a C consumer (or a buggy one) would pass them. Behind the
//! `fuzzing` feature; run by `crates/dapl-cabi/fuzz` (target `cabi_handles`) and by the stable
//! test `tests/cabi_handles.rs`. Hidden; not part of the API.
//!
//! Each input opens one IA on the in-process loopback link through the vtable of
//! [`crate::fuzz_api::provider`] (no dat.conf, no libdat2 registry, no peer process), builds a
//! small world through the vtable (a CNO, six EVDs, two PZs, four LMRs over the harness's
//! buffers, an RMR, an SRQ, three EPs, a PSP and, unless the input says not to, a connected EP
//! pair), then reads the rest of the input as vtable calls (`ops.rs` describes the bytes),
//! and at the end frees everything and closes the IA.
//!
//! Every handle argument is a live handle of the right kind, a live one of the wrong kind, a
//! stale one (freed in this input or an earlier one), NULL, a small integer, a value next to a
//! live handle (another stub of its slot, misaligned, past the stubs), or any 64-bit value from
//! the input. Every pointer argument is NULL or points into the harness's arena (`arena.rs`),
//! at storage large enough for what the call reads or writes: never a wild pointer, which no
//! ABI can check. Counts, lengths, flags, contexts and addresses are anything.
//!
//! Invariants (a broken one panics):
//! - every return is a valid `DAT_RETURN` (class, a known type, a known subtype; the bare
//!   `DAT_QUEUE_EMPTY` only from `evd_dequeue`), never `DAT_INTERNAL_ERROR` (what `guard`
//!   makes of a panic inside);
//! - a call with a handle that does not name a live object of the kind the argument takes
//!   (NULL only where the argument is optional) fails; with `DAT_INVALID_HANDLE` when that
//!   handle is the first argument, or when every other argument was valid; and a
//!   `DAT_INVALID_HANDLE` names the kind of the first bad handle in its subtype;
//! - a call with a required output pointer NULL fails; the slots with no implementation return
//!   exactly `DAT_NOT_IMPLEMENTED`;
//! - no byte of the arena changes outside live LMRs and the call's output windows (guard zones
//!   around every area, the byte after every output, the inputs, unregistered or freed buffer
//!   bytes);
//! - a post (send, receive, RDMA, SRQ receive, write with immediate) that succeeds had every
//!   non-empty segment inside a live LMR of that lmr_context, in the PZ of its EP or SRQ, with
//!   local write for what is written; an RMR bind that succeeds had its triplet inside the LMR;
//! - a create that succeeds returns a fresh non-NULL handle that `get_handle_type` reports as
//!   the kind; queries report the handles the object was made with (IA, PZ, EVDs, SRQ, CNO),
//!   consumer contexts round-trip, events name only handles the consumer knows;
//! - at the end every live object frees with `DAT_SUCCESS` (or the IA closes ABRUPT over them),
//!   the IA closes, and afterwards every handle of the input is `DAT_INVALID_HANDLE`.

mod arena;
mod ops;
mod world;

use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::ffi::{c_void, CString};
use std::mem::offset_of;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::ffi::*;
use arena::{Arena, Out};
pub use world::{How, Kind};
use world::{Info, Pick, World};

/// Calls vtable slot `$slot` of `$p` with `$args`: identifiers only, so that nothing but the
/// call itself is inside the `unsafe` block.
macro_rules! vcall {
    ($p:expr, $slot:ident($($a:ident),* $(,)?)) => {{
        let f = $p.$slot.expect(concat!(stringify!($slot), " is set"));
        // SAFETY: every pointer argument is NULL or points into the harness's arena at
        // storage of the argument's type (arrays: at least the count passed), valid for the
        // call (`Arena::out`, the `IN_*` slots); handles may be any value: the provider looks
        // them up in its slot table and never dereferences one it did not make (the property
        // this harness checks).
        unsafe { f($($a),*) }
    }};
}
pub(crate) use vcall;

/// What one input reached, for tests that check the harness gets where it should.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    /// Operations read from the input.
    pub ops: u64,
    /// Vtable calls (setup and teardown included).
    pub calls: u64,
    pub successes: u64,
    /// Calls read from the input with at least one bad handle, by how the first bad one was
    /// chosen.
    pub bad_handle_calls: BTreeMap<String, u64>,
    /// Calls read from the input that passed a handle freed earlier in this input.
    pub used_after_free: u64,
    /// Returns of `DAT_INVALID_HANDLE` to calls read from the input.
    pub invalid_handle: u64,
    /// Successful frees read from the input (not setup or teardown).
    pub frees: u64,
    /// Successful creates read from the input.
    pub creates: u64,
    /// Posts that were refused although every handle was good.
    pub posts_refused: u64,
    /// Posts that succeeded.
    pub posts_accepted: u64,
    /// Events dequeued, by event number.
    pub events: BTreeMap<u32, u64>,
    /// Per vtable function: [calls, successes].
    pub per_function: BTreeMap<&'static str, [u64; 2]>,
}

/// Runs one input; panics if an invariant breaks.
pub fn cabi_handles(data: &[u8]) -> Stats {
    HARNESS.with(|h| h.borrow_mut().run(data))
}

/// The index of the operation named `name` (a vtable function name without `_func`, or
/// `connect_pair`, `drain`, `not_implemented`), for hand-written inputs.
pub fn op(name: &str) -> u8 {
    ops::index(name).unwrap_or_else(|| panic!("no operation {name:?}"))
}

/// Handle selector bytes (see `ops.rs`), for hand-written inputs.
pub mod sel {
    /// The `i`-th live object of the wanted kind.
    pub fn live(i: u8) -> u8 {
        i << 3
    }
    /// The `i`-th live object of another kind.
    pub fn wrong_kind(i: u8) -> u8 {
        (i << 3) | 3
    }
    /// The `i`-th stale handle (this input's freed ones first, then earlier inputs').
    pub fn stale(i: u8) -> u8 {
        (i << 3) | 4
    }
    pub const NULL: u8 = 5;
    /// Followed by 8 bytes: the value.
    pub const RAW: u8 = 6;
}

thread_local! {
    static HARNESS: RefCell<Harness> = RefCell::new(Harness::new());
}

/// What lives across the inputs of one thread.
struct Harness {
    p: &'static DAT_PROVIDER,
    name: CString,
    /// This harness's loopback address (each thread its own: listeners are per address).
    addr: [u8; 4],
    arena: Arena,
    /// Handles of earlier inputs' objects (all closed with their IA).
    old: VecDeque<usize>,
}

impl Harness {
    fn new() -> Harness {
        static N: AtomicU32 = AtomicU32::new(1);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let addr = [127, 77, (n >> 8) as u8, n as u8];
        let name = CString::new(format!("daplrs-fuzz-{n}")).expect("no NUL");
        let params = format!("loopback {}.{}.{}.{}", addr[0], addr[1], addr[2], addr[3]);
        let p = crate::fuzz_api::provider(&name, &params).expect("loopback ia_params parse");
        Harness {
            p,
            name,
            addr,
            arena: Arena::new(),
            old: VecDeque::new(),
        }
    }

    fn run(&mut self, data: &[u8]) -> Stats {
        let old: Vec<usize> = self.old.iter().copied().collect();
        let mut r = Run {
            p: self.p,
            a: &mut self.arena,
            w: World::default(),
            inp: Input { data, pos: 0 },
            old: &old,
            stats: Stats::default(),
            ia: 0,
            addr: self.addr,
            trace: Vec::new(),
            posted_se: HashSet::new(),
            closed: false,
            in_ops: false,
        };
        let mode = r.inp.u8();
        r.setup(&self.name, mode & 4 == 0);
        r.in_ops = true;
        while !r.inp.done() && r.stats.ops < 400 {
            r.stats.ops += 1;
            let f = r.inp.u8();
            ops::run(&mut r, f);
        }
        r.in_ops = false;
        r.teardown(mode & 3);
        let seen: Vec<usize> = r.w.seen.keys().copied().collect();
        let stats = std::mem::take(&mut r.stats);
        drop(r);
        for h in seen {
            if self.old.len() >= 64 {
                self.old.pop_front();
            }
            self.old.push_back(h);
        }
        stats
    }
}

/// The input, read front to back; zeros past its end.
pub(crate) struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Input<'_> {
    pub(crate) fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
    pub(crate) fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos = self.pos.saturating_add(1);
        b
    }
    pub(crate) fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub(crate) fn u32(&mut self) -> u32 {
        u32::from_le_bytes(std::array::from_fn(|_| self.u8()))
    }
    pub(crate) fn u64(&mut self) -> u64 {
        u64::from_le_bytes(std::array::from_fn(|_| self.u8()))
    }
}

/// One handle argument of a call.
pub(crate) struct HandleArg {
    want: Option<Kind>,
    optional: bool,
    pick: Pick,
}

/// One vtable call being made: what its arguments were, for the checks.
pub(crate) struct Call {
    name: &'static str,
    /// Handle arguments, in the order the provider checks them.
    handles: Vec<HandleArg>,
    /// Some non-handle argument may be invalid (so a bad handle may be reported as another
    /// error first).
    dirty: bool,
    /// Some argument is surely invalid (a required output is NULL, ...): must not succeed.
    must_fail: bool,
    /// A slot with no implementation: `DAT_NOT_IMPLEMENTED` whatever the arguments.
    not_implemented: bool,
    /// Bit i: the call's i-th pointer argument is NULL (mod 7).
    nulls: u8,
    next_ptr: u32,
}

impl Call {
    fn good(&self, w: &World, i: usize) -> bool {
        let a = &self.handles[i];
        if a.pick.value == 0 {
            return a.optional;
        }
        match a.pick.obj {
            Some(o) => a.want.is_none_or(|k| w.objs[o].kind == k),
            None => false,
        }
    }

    /// The live object handle argument `i` names (after a success: it was good).
    pub(crate) fn obj(&self, i: usize) -> Option<usize> {
        self.handles[i].pick.obj
    }
}

/// One input's run.
pub(crate) struct Run<'h> {
    p: &'static DAT_PROVIDER,
    pub(crate) a: &'h mut Arena,
    pub(crate) w: World,
    pub(crate) inp: Input<'h>,
    old: &'h [usize],
    pub(crate) stats: Stats,
    /// The IA's handle (as `ia_open` returned it; no libdat2 index).
    pub(crate) ia: usize,
    pub(crate) addr: [u8; 4],
    trace: Vec<(&'static str, DAT_RETURN)>,
    posted_se: HashSet<u64>,
    closed: bool,
    /// The calls are the input's (not setup's or teardown's): counted in the statistics.
    in_ops: bool,
}

/// Whether `r` is a `DAT_RETURN` this provider may return (`dequeue`: the bare
/// `DAT_QUEUE_EMPTY` of `evd_dequeue` too).
pub(crate) fn valid_return(r: DAT_RETURN, dequeue: bool) -> bool {
    if r == DAT_SUCCESS || (dequeue && r == DAT_QUEUE_EMPTY) {
        return true;
    }
    let ty = DAT_GET_TYPE(r);
    let sub = DAT_GET_SUBTYPE(r);
    r & DAT_CLASS_ERROR != 0
        && r & DAT_CLASS_WARNING == 0
        && ((DAT_ABORT..=DAT_COMM_NOT_SUPPORTED).contains(&ty) || ty == DAT_NOT_IMPLEMENTED)
        && sub <= DAT_THREAD_SAFETY_NOT_FOUND
}

fn is_type(r: DAT_RETURN, ty: DAT_RETURN) -> bool {
    r != DAT_SUCCESS && DAT_GET_TYPE(r) == ty
}

impl Run<'_> {
    /// Stops the input with a broken invariant.
    pub(crate) fn fail(&self, what: String) -> ! {
        let tail: Vec<String> = self
            .trace
            .iter()
            .rev()
            .take(24)
            .rev()
            .map(|(n, r)| format!("  {n} -> {r:#010x}"))
            .collect();
        panic!(
            "cabi_handles: {what}\n(op {} of the input; the last calls:)\n{}",
            self.stats.ops,
            tail.join("\n")
        );
    }

    /// Starts a call whose arguments come from the input.
    pub(crate) fn call(&mut self, name: &'static str) -> Call {
        let b = self.inp.u8();
        self.call_with(name, if b & 0xc0 == 0xc0 { b } else { 0 })
    }

    /// Starts a call whose arguments the harness chooses.
    pub(crate) fn fixed(&mut self, name: &'static str) -> Call {
        self.call_with(name, 0)
    }

    fn call_with(&mut self, name: &'static str, nulls: u8) -> Call {
        self.a.begin();
        Call {
            name,
            handles: Vec::new(),
            dirty: false,
            must_fail: false,
            not_implemented: false,
            nulls,
            next_ptr: 0,
        }
    }

    /// A handle argument from the input.
    pub(crate) fn h(&mut self, c: &mut Call, want: Option<Kind>, optional: bool) -> DAT_HANDLE {
        let sel = self.inp.u8();
        let Run { w, inp, old, .. } = self;
        let pick = w.pick(want, sel, old, || inp.u64());
        c.handles.push(HandleArg {
            want,
            optional,
            pick,
        });
        pick.value as DAT_HANDLE
    }

    /// A handle argument the harness chooses: object `o`'s (None: NULL).
    pub(crate) fn known(
        &mut self,
        c: &mut Call,
        want: Option<Kind>,
        o: Option<usize>,
    ) -> DAT_HANDLE {
        let value = o.map_or(0, |o| self.w.objs[o].h);
        c.handles.push(HandleArg {
            want,
            optional: o.is_none(),
            pick: Pick {
                value,
                obj: self.w.live_obj(value),
                how: if o.is_some() { How::Live } else { How::Null },
            },
        });
        value as DAT_HANDLE
    }

    /// Whether the call's next pointer argument is NULL.
    pub(crate) fn null(&mut self, c: &mut Call) -> bool {
        let n = c.nulls >> (c.next_ptr % 7) & 1 == 1;
        c.next_ptr += 1;
        n
    }

    /// An output argument (NULL when the input says so; a NULL required one fails the call).
    pub(crate) fn out<T>(&mut self, c: &mut Call, required: bool) -> Out<T> {
        let null = self.null(c);
        if null && required {
            c.must_fail = true;
            c.dirty = true;
        }
        self.a.out(null)
    }

    /// Arena ranges of the live LMRs.
    fn live_ranges(&self) -> Vec<(usize, usize)> {
        self.w
            .live_of(Kind::Lmr)
            .into_iter()
            .map(|i| (self.w.objs[i].info.off, self.w.objs[i].info.len))
            .collect()
    }

    /// Checks a call's return against its arguments and the arena against the snapshot;
    /// true if the call succeeded.
    pub(crate) fn finish(&mut self, c: &Call, ret: DAT_RETURN) -> bool {
        self.trace.push((c.name, ret));
        if self.trace.len() > 64 {
            self.trace.drain(..32);
        }
        self.stats.calls += 1;
        let ok = ret == DAT_SUCCESS;
        let e = self.stats.per_function.entry(c.name).or_default();
        e[0] += 1;
        if ok {
            e[1] += 1;
            self.stats.successes += 1;
        }
        if !valid_return(ret, c.name == "evd_dequeue") {
            self.fail(format!(
                "{} returned {ret:#010x}, not a valid DAT_RETURN",
                c.name
            ));
        }
        if is_type(ret, DAT_INTERNAL_ERROR) {
            self.fail(format!(
                "{} returned DAT_INTERNAL_ERROR ({ret:#010x}): a panic inside the provider?",
                c.name
            ));
        }
        if self.in_ops && is_type(ret, DAT_INVALID_HANDLE) {
            self.stats.invalid_handle += 1;
        }
        if self.in_ops
            && c.handles.iter().any(|a| {
                a.pick.value != 0 && a.pick.obj.is_none() && self.w.freed.contains(&a.pick.value)
            })
        {
            self.stats.used_after_free += 1;
        }
        if c.not_implemented {
            if ret != DAT_CLASS_ERROR | DAT_NOT_IMPLEMENTED {
                self.fail(format!(
                    "{} has no implementation but returned {ret:#010x}",
                    c.name
                ));
            }
        } else if let Some(first) = (0..c.handles.len()).find(|&i| !c.good(&self.w, i)) {
            let a = &c.handles[first];
            if self.in_ops {
                *self
                    .stats
                    .bad_handle_calls
                    .entry(format!("{:?}", a.pick.how))
                    .or_default() += 1;
            }
            let what = format!(
                "{} with handle argument {} = {:#x} ({:?}, wanted {:?}{})",
                c.name,
                first + 1,
                a.pick.value,
                a.pick.how,
                a.want,
                if a.optional { ", optional" } else { "" }
            );
            if ok {
                self.fail(format!("{what} succeeded"));
            }
            if (first == 0 || !c.dirty) && !is_type(ret, DAT_INVALID_HANDLE) {
                self.fail(format!(
                    "{what} returned {ret:#010x}, not DAT_INVALID_HANDLE"
                ));
            }
            if is_type(ret, DAT_INVALID_HANDLE) {
                let sub = DAT_GET_SUBTYPE(ret);
                let fits = match a.want {
                    Some(k) => k.subtypes().contains(&sub),
                    None => {
                        sub == 0 || (DAT_INVALID_HANDLE_IA..=DAT_INVALID_HANDLE_SRQ).contains(&sub)
                    }
                };
                if !fits {
                    self.fail(format!(
                        "{what} returned {ret:#010x}: the subtype names another kind"
                    ));
                }
            }
        } else if c.must_fail && ok {
            self.fail(format!(
                "{} succeeded with an argument that must fail it",
                c.name
            ));
        }
        let live = self.live_ranges();
        if let Err(e) = self.a.check(&live) {
            self.fail(format!("after {} ({ret:#010x}): {e}", c.name));
        }
        ok
    }

    /// A setup or teardown step that must succeed.
    fn must(&mut self, c: &Call, ret: DAT_RETURN) {
        if !self.finish(c, ret) {
            self.fail(format!(
                "{} (setup or teardown) returned {ret:#010x}",
                c.name
            ));
        }
    }

    /// Records a new object from a successful create, checking its handle.
    pub(crate) fn created(&mut self, kind: Kind, h: DAT_HANDLE, info: Info) -> usize {
        let i = match self.w.add(kind, h as usize, info) {
            Ok(i) => i,
            Err(e) => self.fail(e),
        };
        let mut c = self.fixed("get_handle_type");
        let hh = self.known(&mut c, None, Some(i));
        let out = self.a.out::<u32>(false);
        let ptr = out.ptr;
        let ret = vcall!(self.p, get_handle_type_func(hh, ptr));
        self.must(&c, ret);
        let t = self.a.read(&out).expect("not NULL");
        if t != kind.handle_type() {
            self.fail(format!(
                "a new {kind:?}'s handle {:#x} has handle type {t}",
                h as usize
            ));
        }
        i
    }

    /// Checks that a handle written into a query result is `want`'s (0: none).
    pub(crate) fn same_handle(&self, what: &str, got: DAT_HANDLE, want: usize) {
        if got as usize != want {
            self.fail(format!(
                "{what} is {:#x}, the object's is {want:#x}",
                got as usize
            ));
        }
    }

    /// Checks a dequeued event (in output `o`, from the EVD with handle `evd`) and records the
    /// connection requests it hands out.
    pub(crate) fn event(&mut self, evd: usize, o: &Out<DAT_EVENT>) {
        let ev: DAT_EVENT = self.a.read(o).expect("not NULL");
        let number = ev.event_number;
        *self.stats.events.entry(number).or_default() += 1;
        if ev.evd_handle as usize != evd {
            self.fail(format!(
                "event {number:#x} from EVD {evd:#x} says EVD {:#x}",
                ev.evd_handle as usize
            ));
        }
        let data = offset_of!(DAT_EVENT, event_data);
        let known = |w: &World, h: usize, k: &[Kind]| {
            h == 0 || w.seen.get(&h).is_some_and(|sk| k.contains(sk))
        };
        match number {
            DAT_DTO_COMPLETION_EVENT | DAT_IB_DTO_EVENT => {
                let d: DAT_DTO_COMPLETION_EVENT_DATA = self.a.at(o, data);
                if !known(&self.w, d.ep_handle as usize, &[Kind::Ep]) {
                    self.fail(format!("a DTO event names EP {:#x}", d.ep_handle as usize));
                }
                if d.status > DAT_DTO_ERR_LOCAL_MM_ERROR {
                    self.fail(format!("a DTO event has status {}", d.status));
                }
            }
            DAT_RMR_BIND_COMPLETION_EVENT => {
                let d: DAT_RMR_BIND_COMPLETION_EVENT_DATA = self.a.at(o, data);
                if !known(&self.w, d.rmr_handle as usize, &[Kind::Rmr]) {
                    self.fail(format!(
                        "a bind event names RMR {:#x}",
                        d.rmr_handle as usize
                    ));
                }
            }
            DAT_CONNECTION_REQUEST_EVENT => {
                let sp: *mut c_void = self
                    .a
                    .at(o, data + offset_of!(DAT_CR_ARRIVAL_EVENT_DATA, sp_handle));
                let cr: *mut c_void = self
                    .a
                    .at(o, data + offset_of!(DAT_CR_ARRIVAL_EVENT_DATA, cr_handle));
                if !known(&self.w, sp as usize, &[Kind::Psp, Kind::Rsp]) {
                    self.fail(format!("a connection request names SP {:#x}", sp as usize));
                }
                self.created(Kind::Cr, cr, Info::default());
            }
            DAT_CONNECTION_EVENT_ESTABLISHED..=DAT_CONNECTION_EVENT_UNREACHABLE => {
                let d: DAT_CONNECTION_EVENT_DATA = self.a.at(o, data);
                if !known(&self.w, d.ep_handle as usize, &[Kind::Ep]) {
                    self.fail(format!(
                        "a connection event names EP {:#x}",
                        d.ep_handle as usize
                    ));
                }
                if !(0..=252).contains(&d.private_data_size)
                    || (d.private_data_size > 0) == d.private_data.is_null()
                {
                    self.fail(format!(
                        "a connection event has private data {} at {:p}",
                        d.private_data_size, d.private_data
                    ));
                }
            }
            DAT_ASYNC_ERROR_EVD_OVERFLOW..=DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR => {
                let d: DAT_ASYNCH_ERROR_EVENT_DATA = self.a.at(o, data);
                let h = d.dat_handle as usize;
                if h != self.ia && !known(&self.w, h, &Kind::ALL) {
                    self.fail(format!("an async event names handle {h:#x}"));
                }
            }
            DAT_SOFTWARE_EVENT => {
                let d: DAT_SOFTWARE_EVENT_DATA = self.a.at(o, data);
                if !self.posted_se.contains(&(d.pointer as usize as u64)) {
                    self.fail(format!(
                        "a software event carries {:p}, never posted",
                        d.pointer
                    ));
                }
            }
            _ => self.fail(format!("an event with number {number:#x}")),
        }
    }

    /// Opens the IA and makes the world every input starts with.
    fn setup(&mut self, name: &CString, connect: bool) {
        // ia_open, as libdat2 calls it.
        let c = self.fixed("ia_open");
        let n = name.as_ptr().cast_mut();
        let qlen: DAT_COUNT = 8;
        let evd_out = self.a.out::<DAT_HANDLE>(false);
        let ia_out = self.a.out::<DAT_HANDLE>(false);
        let (e, i) = (evd_out.ptr, ia_out.ptr);
        let ret = vcall!(self.p, ia_open_func(n, qlen, e, i));
        self.must(&c, ret);
        let ia = self.a.read(&ia_out).expect("set");
        let async_evd = self.a.read(&evd_out).expect("set");
        self.ia = ia as usize;
        self.created(Kind::Ia, ia, Info::default());
        self.created(
            Kind::Evd,
            async_evd,
            Info {
                is_async: true,
                ..Info::default()
            },
        );

        let cno = ops::make_cno(self);
        let dto0 = ops::make_evd(self, 64, DAT_EVD_DTO_FLAG | DAT_EVD_RMR_BIND_FLAG, None);
        let dto1 = ops::make_evd(self, 64, DAT_EVD_DTO_FLAG, None);
        let conn0 = ops::make_evd(self, 16, DAT_EVD_CONNECTION_FLAG, None);
        let conn1 = ops::make_evd(self, 16, DAT_EVD_CONNECTION_FLAG, None);
        let cr = ops::make_evd(self, 16, DAT_EVD_CR_FLAG, None);
        ops::make_evd(self, 8, DAT_EVD_SOFTWARE_FLAG, Some(cno));
        let pz0 = ops::make_pz(self);
        let pz1 = ops::make_pz(self);
        ops::make_lmr(self, pz0, 0, DAT_MEM_PRIV_ALL_FLAG);
        ops::make_lmr(self, pz0, 1, DAT_MEM_PRIV_ALL_FLAG);
        ops::make_lmr(self, pz0, 2, DAT_MEM_PRIV_REMOTE_READ_FLAG);
        ops::make_lmr(self, pz1, 3, DAT_MEM_PRIV_ALL_FLAG);
        ops::make_rmr(self, pz0);
        let srq = ops::make_srq(self, pz0);
        let a = ops::make_ep(self, pz0, dto0, conn0, None);
        let b = ops::make_ep(self, pz0, dto1, conn1, None);
        ops::make_ep(self, pz0, dto1, conn1, Some(srq));
        let psp = ops::make_psp(self, 0x5eed_0000 + self.addr[3] as u64, cr);
        if connect {
            ops::connect(self, a, b, psp);
        }
    }

    /// Frees everything (`mode` 0: each object, then ia_close GRACEFUL; 1: each object, then
    /// ABRUPT; 2, 3: ia_close ABRUPT over the live objects), then checks every handle of the
    /// input is invalid.
    fn teardown(&mut self, mode: u8) {
        if mode < 2 {
            // The async EVD is not freed before ia_close: take its events (a PSP may have
            // used it for connection requests, which are then rejected below), and detach its
            // CNO. The other EVDs are freed with what they hold (which rejects the requests in
            // them).
            for e in self.w.live_of(Kind::Evd) {
                if self.w.objs[e].info.is_async {
                    ops::drain_evd(self, e);
                    if self.w.objs[e].info.cno != 0 {
                        ops::modify_cno(self, e, None);
                    }
                }
            }
            for kind in [
                Kind::Cr,
                Kind::Rsp,
                Kind::Psp,
                Kind::Ep,
                Kind::Rmr,
                Kind::Lmr,
                Kind::Srq,
                Kind::Evd,
                Kind::Cno,
                Kind::Pz,
            ] {
                for o in self.w.live_of(kind) {
                    if !self.w.objs[o].info.is_async {
                        ops::free(self, o);
                    }
                }
            }
        }
        let ia = self.w.live_of(Kind::Ia)[0];
        let mut c = self.fixed("ia_close");
        let h = self.known(&mut c, Some(Kind::Ia), Some(ia));
        let flags = if mode == 0 {
            DAT_CLOSE_GRACEFUL_FLAG
        } else {
            DAT_CLOSE_ABRUPT_FLAG
        };
        let ret = vcall!(self.p, ia_close_func(h, flags));
        self.must(&c, ret);
        self.closed = true;
        for o in self.w.all_live() {
            self.w.kill(o);
        }
        let live = self.live_ranges();
        debug_assert!(live.is_empty());
        // Every handle this input had is invalid now.
        let all: Vec<(usize, Kind)> = self.w.seen.iter().map(|(&h, &k)| (h, k)).collect();
        for (h, k) in all {
            let mut c = self.fixed("get_handle_type");
            c.handles.push(HandleArg {
                want: None,
                optional: false,
                pick: Pick {
                    value: h,
                    obj: None,
                    how: How::Stale,
                },
            });
            let hh = h as DAT_HANDLE;
            let out = self.a.out::<u32>(false);
            let ptr = out.ptr;
            let ret = vcall!(self.p, get_handle_type_func(hh, ptr));
            if ret == DAT_SUCCESS {
                self.fail(format!(
                    "after ia_close the handle {h:#x} of a {k:?} is still valid"
                ));
            }
            self.finish(&c, ret);
        }
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        // An invariant failed mid-input (a stable test catching the panic, say): close the IA
        // so no LMR outlives the input over the arena.
        if !self.closed && self.ia != 0 {
            let h = self.ia as DAT_HANDLE;
            let flags = DAT_CLOSE_ABRUPT_FLAG;
            let _ = vcall!(self.p, ia_close_func(h, flags));
        }
    }
}
