//! Pointer arguments from C, the one place this crate dereferences them.
//!
//! The vtable functions have the exact C signatures (checked against the headers by
//! tests/layout.rs), so they are `unsafe extern "C" fn`: their caller promises what the DAT
//! API promises, that every non-NULL pointer argument points at aligned, initialised (input)
//! or writable (output) storage of the declared type (arrays: of the declared count) for the
//! duration of the call. Each function's first lines wrap its pointer arguments in [`In`] or
//! [`Out`] (`c_ptrs!`, which calls `unsafe fn new` on the function's own arguments and
//! nowhere else), and from then on
//! only these types touch the memory: the `unsafe` blocks below rely on that contract and
//! check NULL themselves.

use std::ffi::{c_char, CStr};

use crate::ffi::{
    DAT_CLASS_ERROR, DAT_EVENT, DAT_INVALID_PARAMETER, DAT_PVOID, DAT_RETURN, DAT_SOFTWARE_EVENT,
};

/// An output (or in-out) pointer argument.
#[repr(transparent)]
pub struct Out<T>(*mut T);

/// An input pointer argument (a single value or the first of an array).
#[repr(transparent)]
pub struct In<T>(*const T);

/// `DAT_INVALID_PARAMETER` with subtype `DAT_INVALID_ARG<n>`.
pub(crate) fn bad_arg(n: u32) -> DAT_RETURN {
    DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | n
}

impl<T> Out<T> {
    /// Wraps a vtable function's output argument.
    ///
    /// # Safety
    /// `p` is NULL or valid for writes of a `T` for the rest of the call (the DAT contract).
    pub(crate) unsafe fn new(p: *mut T) -> Self {
        Out(p)
    }

    /// Whether the caller passed NULL.
    pub(crate) fn is_null(&self) -> bool {
        self.0.is_null()
    }

    /// Stores `v`; NULL is `DAT_INVALID_PARAMETER` naming argument `arg`.
    pub(crate) fn put(&self, arg: u32, v: T) -> Result<(), DAT_RETURN> {
        if self.0.is_null() {
            return Err(bad_arg(arg));
        }
        // SAFETY: non-NULL, and by the DAT contract (module doc) writable storage for a T.
        // `write` does not drop the old contents, which may be uninitialised.
        unsafe { self.0.write(v) };
        Ok(())
    }

    /// Stores `v` if the caller asked for it (NULL: DAT allows leaving this output out).
    pub(crate) fn put_opt(&self, v: T) {
        if !self.0.is_null() {
            // SAFETY: as in `put`.
            unsafe { self.0.write(v) };
        }
    }
}

impl<T> In<T> {
    /// Wraps a vtable function's input argument.
    ///
    /// # Safety
    /// `p` is NULL or valid for reads of an initialised `T` (or the array the call names) for
    /// the rest of the call (the DAT contract).
    pub(crate) unsafe fn new(p: *const T) -> Self {
        In(p)
    }
}

impl<T: Copy> In<T> {
    /// The value; NULL is `DAT_INVALID_PARAMETER` naming argument `arg`.
    pub(crate) fn get(&self, arg: u32) -> Result<T, DAT_RETURN> {
        self.opt().ok_or(bad_arg(arg))
    }

    /// The value, or `None` for NULL.
    pub(crate) fn opt(&self) -> Option<T> {
        if self.0.is_null() {
            None
        } else {
            // SAFETY: non-NULL, and by the DAT contract an initialised, aligned T.
            Some(unsafe { self.0.read() })
        }
    }

    /// The array of `n` elements; NULL with `n > 0`, or a negative `n`, is
    /// `DAT_INVALID_PARAMETER` naming argument `arg`. NULL with `n == 0` is empty.
    pub(crate) fn slice(&self, arg: u32, n: i64) -> Result<&[T], DAT_RETURN> {
        let Ok(n) = usize::try_from(n) else {
            return Err(bad_arg(arg));
        };
        if n == 0 {
            return Ok(&[]);
        }
        if self.0.is_null() {
            return Err(bad_arg(arg));
        }
        // SAFETY: non-NULL, and by the DAT contract `n` initialised, aligned Ts that stay
        // valid for the call; the slice's lifetime is tied to `&self`.
        Ok(unsafe { std::slice::from_raw_parts(self.0, n) })
    }
}

impl In<DAT_EVENT> {
    /// The data pointer of a software event (`dat_evd_post_se`), or `None` if the event is of
    /// another kind; NULL is `DAT_INVALID_PARAMETER` naming argument `arg`. Reads the two
    /// fields it needs and nothing else: the caller may have initialised no more of the event.
    pub(crate) fn software_event_data(&self, arg: u32) -> Result<Option<DAT_PVOID>, DAT_RETURN> {
        if self.0.is_null() {
            return Err(bad_arg(arg));
        }
        let p = self.0;
        // SAFETY: non-NULL, aligned storage for a DAT_EVENT (module doc) whose `event_number`
        // the caller set; `&raw const` projects to the field without reading anything else.
        let number = unsafe { (&raw const (*p).event_number).read() };
        if number != DAT_SOFTWARE_EVENT {
            return Ok(None);
        }
        // SAFETY: as above; for a software event the caller set the union's software member,
        // whose pointer is read alone.
        let data = unsafe { (&raw const (*p).event_data.software_event_data.pointer).read() };
        Ok(Some(data))
    }
}

impl In<c_char> {
    /// A NUL-terminated string; NULL or invalid UTF-8 is `DAT_INVALID_PARAMETER`.
    pub(crate) fn str(&self, arg: u32) -> Result<&str, DAT_RETURN> {
        if self.0.is_null() {
            return Err(bad_arg(arg));
        }
        // SAFETY: non-NULL, and by the DAT contract a NUL-terminated string valid for the call.
        let s = unsafe { CStr::from_ptr(self.0) };
        s.to_str().map_err(|_| bad_arg(arg))
    }
}

/// C structs that are plain old data: integers, pointers, arrays and unions of them, for
/// which all-zero bytes are a valid value.
///
/// # Safety
/// Implement only for such types.
pub(crate) unsafe trait Pod: Sized {}

macro_rules! pod {
    ($($t:ty),* $(,)?) => {
        // SAFETY: each of these is a `#[repr(C)]` struct or union of integers, raw pointers,
        // arrays and other such types (see ffi.rs), so all-zero bytes are a valid value.
        $(unsafe impl Pod for $t {})*
    };
}

pod!(
    crate::ffi::DAT_EVENT,
    crate::ffi::DAT_IA_ATTR,
    crate::ffi::DAT_PROVIDER_ATTR,
    crate::ffi::DAT_EP_PARAM,
    crate::ffi::DAT_EP_ATTR,
    crate::ffi::DAT_LMR_PARAM,
    crate::ffi::DAT_RMR_PARAM,
    crate::ffi::DAT_CR_PARAM,
);

/// An all-zero `T`.
pub(crate) fn zeroed<T: Pod>() -> T {
    // SAFETY: `T: Pod` promises all-zero bytes are a valid T.
    unsafe { std::mem::zeroed() }
}
