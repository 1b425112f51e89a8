//! One error type for the binary: a message, with the DAT error's own text when one caused it.

use std::fmt;

/// A failure, ready to print.
#[derive(Debug)]
pub struct Error(String);

/// Result of datperf's fallible steps.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error with this message.
    pub fn msg(m: impl Into<String>) -> Error {
        Error(m.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

impl From<dapl::DatError> for Error {
    fn from(e: dapl::DatError) -> Error {
        Error(format!("DAT error: {e}"))
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error(format!("I/O error: {e}"))
    }
}

/// Adds what was being done to an error.
pub trait Context<T> {
    /// Prefixes the error with `what`.
    fn ctx(self, what: impl fmt::Display) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn ctx(self, what: impl fmt::Display) -> Result<T> {
        self.map_err(|e| Error(format!("{what}: {}", e.into())))
    }
}

/// Returns early with an error message.
macro_rules! bail {
    ($($t:tt)*) => { return Err($crate::error::Error::msg(format!($($t)*))) };
}
pub(crate) use bail;
