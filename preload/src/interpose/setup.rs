// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! What the exports read once per process (the configuration, the program's
//! name) and the trace lines they write under RDMACM_RS_LOG.

use crate::calls::quiet;
use crate::config::{self, Config};
use std::sync::OnceLock;

pub(super) fn config() -> &'static (Config, String) {
    static C: OnceLock<(Config, String)> = OnceLock::new();
    // (reading the file passes cancellation points: none may act here)
    C.get_or_init(|| quiet(|| (config::load(), config::program_name())))
}

/// Under RDMACM_RS_LOG: one line on stderr about what the library does
/// with a socket (an rsocket, a kernel socket, a fallback).
macro_rules! trace {
    ($($t:tt)*) => {
        if $crate::interpose::setup::config().0.trace {
            eprintln!("librspreload[{}]: {}", std::process::id(), format_args!($($t)*));
        }
    };
}

pub(super) use trace;
