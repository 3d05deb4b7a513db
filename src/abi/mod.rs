// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! C data: `#[repr(C)]` mirrors of the public structures (`rdma_cma.h`),
//! the ucma kernel ABI and socket addresses.  Pure data with size and
//! offset checks; imports nothing else of the crate.

pub mod cma;
pub mod sockaddr;
pub mod ucma;
pub mod verbs;
