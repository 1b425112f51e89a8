//! The one error type of the crate: a DAT return type and subtype with the numeric values of
//! `dat_error.h` (so the C ABI maps it 1:1 to a `DAT_RETURN`), plus a readable reason naming the
//! object, the operation and the cause.

use std::borrow::Cow;
use std::fmt;

pub use crate::codes::{ErrorType, Subtype};

/// `DAT_CLASS_ERROR`: the class bit every error `DAT_RETURN` carries.
pub const DAT_CLASS_ERROR: u32 = 0x8000_0000;

/// An error from a DAT operation.
///
/// `kind` and `subtype` are the DAT numbers; `Display` reads like
/// `post_recv on ep 3: iov segment 1 lies outside LMR 0x102 (DAT_INVALID_PARAMETER/DAT_INVALID_ARG3)`.
#[derive(Clone, PartialEq, Eq)]
pub struct DatError {
    kind: ErrorType,
    subtype: Subtype,
    op: &'static str,
    object: Object,
    cause: Cow<'static, str>,
}

/// Which object an error is about: its DAT kind and the id the library gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Object {
    /// Short DAT object name: "ia", "ep", "evd", "lmr", ...
    pub kind: &'static str,
    /// The object's id inside its IA (0 when there is none yet).
    pub id: u64,
}

impl Object {
    /// An object of `kind` with `id`.
    pub const fn new(kind: &'static str, id: u64) -> Self {
        Object { kind, id }
    }
}

impl fmt::Display for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.id)
    }
}

impl DatError {
    /// A new error; `cause` says what went wrong in words.
    pub fn new(
        kind: ErrorType,
        subtype: Subtype,
        op: &'static str,
        object: Object,
        cause: impl Into<Cow<'static, str>>,
    ) -> Self {
        DatError {
            kind,
            subtype,
            op,
            object,
            cause: cause.into(),
        }
    }

    /// The DAT return type (`DAT_INVALID_PARAMETER`, ...).
    pub fn kind(&self) -> ErrorType {
        self.kind
    }

    /// The DAT return subtype (`DAT_INVALID_ARG3`, ...).
    pub fn subtype(&self) -> Subtype {
        self.subtype
    }

    /// The operation that failed ("post_send", "ep_free", ...).
    pub fn op(&self) -> &'static str {
        self.op
    }

    /// The object the operation was called on.
    pub fn object(&self) -> Object {
        self.object
    }

    /// The cause in words.
    pub fn cause(&self) -> &str {
        &self.cause
    }

    /// The `DAT_RETURN` value: class bit | type | subtype.
    pub fn dat_return(&self) -> u32 {
        DAT_CLASS_ERROR | self.kind as u32 | self.subtype as u32
    }
}

impl fmt::Display for DatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on {}: {} ({}/{})",
            self.op,
            self.object,
            self.cause,
            self.kind.c_name(),
            self.subtype.c_name()
        )
    }
}

impl fmt::Debug for DatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DatError({self})")
    }
}

impl std::error::Error for DatError {}

/// Result of every fallible DAT operation.
pub type Result<T> = std::result::Result<T, DatError>;

/// Shorthand used across the crate to build errors at the point of failure.
pub(crate) fn err<T>(
    kind: ErrorType,
    subtype: Subtype,
    op: &'static str,
    object: Object,
    cause: impl Into<Cow<'static, str>>,
) -> Result<T> {
    Err(DatError::new(kind, subtype, op, object, cause))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dat_return_is_class_type_and_subtype() {
        let e = DatError::new(
            ErrorType::InvalidParameter,
            Subtype::InvalidArg3,
            "post_recv",
            Object::new("ep", 3),
            "segment outside LMR",
        );
        assert_eq!(e.dat_return(), 0x8006_0000 | 39);
        let text = e.to_string();
        assert!(text.contains("post_recv on ep 3"), "{text}");
        assert!(
            text.contains("DAT_INVALID_PARAMETER/DAT_INVALID_ARG3"),
            "{text}"
        );
    }
}
