// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The one error type of the API.

#![deny(unsafe_code)]

use nix::errno::Errno;
use std::fmt;

/// What went wrong: an `errno` value, as the C library would have set it,
/// or a `getaddrinfo` failure (`EAI_*`).
///
/// ```
/// let e = rdmacm::Error::from_errno(libc::ENODEV);
/// assert_eq!(e.errno(), libc::ENODEV);
/// let io: std::io::Error = e.into();
/// assert_eq!(io.raw_os_error(), Some(libc::ENODEV));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Error {
    errno: i32,
    gai: Option<i32>,
}

/// `Result<T, rdmacm::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The error of an `errno` value (`libc::E*`).
    pub fn from_errno(errno: i32) -> Error {
        Error { errno, gai: None }
    }

    /// The error of a `getaddrinfo` failure (`libc::EAI_*`, negative).
    /// Its [`Error::errno`] is `EIO`, or the errno `EAI_SYSTEM` left.
    pub fn from_gai(code: i32) -> Error {
        let errno = if code == libc::EAI_SYSTEM { Errno::last_raw() } else { libc::EIO };
        Error { errno, gai: Some(code) }
    }

    /// The `errno` value (for a `getaddrinfo` failure, see
    /// [`Error::from_gai`]).
    pub fn errno(&self) -> i32 {
        self.errno
    }

    /// The `EAI_*` code of a `getaddrinfo` failure.
    pub fn gai_code(&self) -> Option<i32> {
        self.gai
    }
}

/// The error of an errno value the layers below return (`.map_err(errno)`:
/// not a `From` impl, so that no type of the `nix` crate is part of the
/// public API).
/// An errno value `Errno` has no name for (the kernel's ENOTSUPP, 524,
/// from a multicast join on RoCEv2, for one) keeps its number: the layers
/// below keep it beside the `UnknownErrno` they return.
pub(crate) fn errno(e: Errno) -> Error {
    if e == Errno::UnknownErrno {
        return Error::from_errno(crate::sys::take_unlisted());
    }
    Error::from_errno(e as i32)
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        match e.gai {
            None => std::io::Error::from_raw_os_error(e.errno),
            Some(_) => std::io::Error::other(e),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.gai {
            None => write!(f, "Error({})", Errno::from_raw(self.errno)),
            Some(c) => write!(f, "Error(EAI {c})"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.gai {
            None => match Errno::from_raw(self.errno) {
                // As glibc's strerror words a number it has no text for.
                Errno::UnknownErrno => write!(f, "Unknown error {}", self.errno),
                e => write!(f, "{}", e.desc()),
            },
            Some(c) => write!(f, "getaddrinfo failed (EAI code {c})"),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_round_trip() {
        let e = errno(Errno::ETIMEDOUT);
        assert_eq!(e.errno(), libc::ETIMEDOUT);
        assert_eq!(e.gai_code(), None);
        let io = std::io::Error::from(e);
        assert_eq!(io.raw_os_error(), Some(libc::ETIMEDOUT));
        assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
        assert_eq!(e.to_string(), Errno::ETIMEDOUT.desc());
    }

    /// A number `Errno` cannot name (524, the kernel's ENOTSUPP) is the
    /// error's errno, not 0, and its text is glibc's for it.
    #[test]
    fn unnamed_errno_values_keep_their_number() {
        let e = errno(crate::sys::errno_from_raw(524));
        assert_eq!(e.errno(), 524);
        assert_eq!(e.to_string(), "Unknown error 524");
        assert_eq!(std::io::Error::from(e).raw_os_error(), Some(524));
    }

    #[test]
    fn gai_is_not_an_errno() {
        let e = Error::from_gai(libc::EAI_NONAME);
        assert_eq!(e.gai_code(), Some(libc::EAI_NONAME));
        assert_eq!(e.errno(), libc::EIO);
        let io = std::io::Error::from(e);
        assert_eq!(io.raw_os_error(), None);
        assert!(io.to_string().contains("getaddrinfo"));
    }
}
