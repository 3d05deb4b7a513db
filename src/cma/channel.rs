// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! An event channel's accessors ([`Channel`] is declared in [`super::base`]).
#![deny(unsafe_code)]

use super::base::Channel;
use crate::abi::cma::rdma_event_channel;

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Channel(fd {})", self.ch.fd)
    }
}

impl Channel {
    /// The channel's ucma file descriptor.
    pub fn fd(&self) -> i32 {
        self.ch.fd
    }

    /// The address C knows the channel by.
    pub fn raw(&self) -> *mut rdma_event_channel {
        &self.ch as *const rdma_event_channel as *mut rdma_event_channel
    }
}
