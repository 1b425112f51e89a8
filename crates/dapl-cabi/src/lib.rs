//! # libdaplrs.so — dapl-rs as a DAT 2.0 provider for libdat2
//!
//! The C ABI shim: it converts C types to the `dapl` crate's types and `DatError`s to
//! `DAT_RETURN`, validates every handle it receives against a table of live objects, and
//! catches panics at the boundary. libdat2 finds it through a `dat.conf` line such as
//! `daplrs-lo u2.0 nonthreadsafe default /path/libdaplrs.so dapl.2.0 "tcp 127.0.0.1" ""`.
//!
//! Set `DAPLRS_LOG` (a `tracing` filter: `DAPLRS_LOG=debug`, `DAPLRS_LOG=dapl::link::tcp=trace`)
//! to have this provider's and `dapl`'s events printed to stderr: every error it returns with
//! its DAT code and the reason, the connection lifecycle, Terminates, breaks (docs/tracing.md).
//! `DAPLRS_DEBUG=1` is an alias of `DAPLRS_LOG=debug`.
#![allow(non_camel_case_types, non_snake_case, clippy::missing_safety_doc)]

/// Wraps a vtable function's own pointer arguments in [`cptr::In`] / [`cptr::Out`], shadowing
/// them: `c_ptrs!(ep: In, param: Out);`. Used only on the arguments of the function it
/// appears in, first thing in its body.
macro_rules! c_ptrs {
    () => {};
    ($name:ident: $kind:ident $(, $($rest:tt)*)?) => {
        // SAFETY: `$name` is the enclosing vtable function's pointer argument, which its C
        // caller promises is NULL or valid for the call (the DAT contract; cptr's doc).
        let $name = unsafe { $crate::cptr::$kind::new($name) };
        $(c_ptrs!($($rest)*);)?
    };
}

mod conv;
pub mod cptr;
mod ep;
mod evd;
mod event;
mod ext;
pub mod ffi;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzz_api;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod handle;
mod ia;
mod log;
mod mem;
pub mod provider;
mod sp;
mod srq;

use std::panic::{catch_unwind, AssertUnwindSafe};

use ffi::*;

/// What the body of a vtable function returns.
pub(crate) type R = Result<(), DAT_RETURN>;

/// Runs a vtable function's body: errors become their `DAT_RETURN` (and an event, `log.rs`),
/// a panic becomes `DAT_INTERNAL_ERROR` (it never unwinds into C).
pub(crate) fn guard(op: &'static str, f: impl FnOnce() -> R) -> DAT_RETURN {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => {
            log::succeeded();
            DAT_SUCCESS
        }
        Ok(Err(code)) => {
            log::returned(op, code);
            code
        }
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            log::panicked(op, &what);
            DAT_CLASS_ERROR | DAT_INTERNAL_ERROR
        }
    }
}

/// A `dapl` error as a `DAT_RETURN`; its reason goes into the error event of the call that
/// returns it.
pub(crate) fn dat(e: dapl::DatError) -> DAT_RETURN {
    log::keep_reason(&e);
    e.dat_return()
}

/// `?`-friendly conversion of `dapl::Result`.
pub(crate) trait Dat<T> {
    fn dat(self) -> Result<T, DAT_RETURN>;
}

impl<T> Dat<T> for dapl::Result<T> {
    fn dat(self) -> Result<T, DAT_RETURN> {
        self.map_err(dat)
    }
}

/// An error `DAT_RETURN` from a type and subtype.
pub(crate) fn err(ty: DAT_RETURN, sub: DAT_RETURN) -> DAT_RETURN {
    DAT_CLASS_ERROR | ty | sub
}

/// `DAT_NOT_IMPLEMENTED`, for the vtable slots with no `dapl` equivalent (listed in README).
pub(crate) fn not_implemented(op: &'static str) -> DAT_RETURN {
    guard(op, || Err(err(DAT_NOT_IMPLEMENTED, 0)))
}

#[cfg(test)]
mod tests {
    use crate::ffi::*;

    /// A handle that names no live object of the argument's kind is `DAT_INVALID_HANDLE`
    /// whatever the other arguments are: the slots that take a count check the handle first,
    /// like every other slot. Found by the `cabi_handles` harness (its stable run over
    /// pseudo-random inputs, before the fuzz target ran): `srq_resize` of a garbage handle
    /// with a count of -1 returned `DAT_INVALID_PARAMETER`.
    #[test]
    fn a_bad_handle_is_invalid_handle_even_when_a_count_is_invalid_too() {
        let garbage = 0xffff_ffff_ffff_fff8_usize as DAT_HANDLE;
        for h in [std::ptr::null_mut(), garbage] {
            for n in [-1, i32::MIN, 0, 8] {
                let bad = |sub| DAT_CLASS_ERROR | DAT_INVALID_HANDLE | sub;
                // SAFETY: no pointer arguments; a handle is looked up, never dereferenced.
                let r = unsafe { crate::evd::evd_resize(h, n) };
                assert_eq!(
                    r,
                    bad(DAT_INVALID_HANDLE_EVD_REQUEST),
                    "evd_resize({h:p}, {n})"
                );
                // SAFETY: as above.
                let r = unsafe { crate::srq::srq_resize(h, n) };
                assert_eq!(r, bad(DAT_INVALID_HANDLE_SRQ), "srq_resize({h:p}, {n})");
                // SAFETY: as above.
                let r = unsafe { crate::srq::srq_set_lw(h, n) };
                assert_eq!(r, bad(DAT_INVALID_HANDLE_SRQ), "srq_set_lw({h:p}, {n})");
            }
        }
    }
}
