// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! A stream's rsetsockopt, rgetsockopt and rfcntl: the values go to its
//! connection manager id where upstream passes them on, and are kept in the
//! stream's [`SockOpts`] for the one table of [`options::getsockopt`].
#![deny(unsafe_code)]

use super::guard::lock;
use super::options::{self, int_of, system_keepalive_time, OptOut, OptSource, Sizes, SockOpts, RDMA_INLINE, RDMA_IOMAPSIZE, RDMA_ROUTE, RDMA_RQSIZE, RDMA_SQSIZE, SOL_RDMA};
use super::state::*;
use super::svc::STREAMS;
use super::wire::{scale_to_value, value_to_scale};
use nix::errno::Errno;
use std::ffi::c_int;
use std::time::{Duration, Instant};

impl Stream {
    /// SO_KEEPALIVE on or off; the first time, the interval comes from the
    /// system's tcp_keepalive_time (7200 s without it), as upstream.
    pub(super) fn set_keepalive(&mut self, on: bool) {
        if on == self.so.keepalive {
            return;
        }
        if on && self.so.keepalive_time == 0 {
            self.so.keepalive_time = system_keepalive_time();
        }
        self.so.keepalive = on;
        self.conn.set_keepalive_due(on.then(|| Instant::now() + Duration::from_secs(self.so.keepalive_time as u64)));
        STREAMS.kick();
    }
}

/// Socket options. `opt` is the caller's option value (None for NULL).
pub fn setsockopt(h: &Handle, level: c_int, name: c_int, opt: Option<&[u8]>) -> Result<(), Errno> {
    let mut s = lock(h)?;
    let v = int_of(opt);
    match level {
        libc::SOL_SOCKET => match name {
            libc::SO_REUSEADDR => {
                let r = match opt {
                    None => Err(Errno::EINVAL),
                    Some(b) if b.len() != std::mem::size_of::<c_int>() => Err(Errno::EINVAL),
                    Some(_) => s.cm()?.set_reuseaddr(v?),
                };
                if let Err(e) = r {
                    if e != Errno::ENOSYS && s.ctl.state() == ST_INIT {
                        return Err(e);
                    }
                }
                s.so.reuseaddr = v? != 0;
                Ok(())
            }
            libc::SO_RCVBUF => {
                let v = v? as u32;
                if s.ep.is_none() {
                    s.rx.set_rbuf_size(v << 1);
                }
                Ok(())
            }
            libc::SO_SNDBUF => {
                let v = v? as u32;
                if s.ep.is_none() {
                    s.tx.set_sbuf_size(v << 1);
                }
                if s.tx.sbuf_size() < RS_SNDLOWAT {
                    s.tx.set_sbuf_size(RS_SNDLOWAT << 1);
                }
                Ok(())
            }
            libc::SO_LINGER => {
                // struct linger: l_onoff first.
                s.so.linger_off = v? == 0;
                Ok(())
            }
            libc::SO_OOBINLINE => {
                s.so.oobinline = v? != 0;
                Ok(())
            }
            libc::SO_KEEPALIVE => {
                let on = v? != 0;
                s.set_keepalive(on);
                Ok(())
            }
            _ => Err(Errno::ENOTSUP),
        },
        libc::IPPROTO_IP => match name {
            libc::IP_TOS => {
                let t = v?;
                s.so.ip_tos = t;
                s.cm()?.set_option_bytes(crate::abi::ucma::RDMA_OPTION_ID, crate::abi::ucma::RDMA_OPTION_ID_TOS, &opt.unwrap_or(&[])[..opt.map_or(0, |b| b.len())])
            }
            _ => Err(Errno::ENOTSUP),
        },
        libc::IPPROTO_IPV6 => match name {
            libc::IPV6_V6ONLY => {
                let on = v?;
                s.cm()?.set_option_bytes(crate::abi::ucma::RDMA_OPTION_ID, crate::abi::ucma::RDMA_OPTION_ID_AFONLY, opt.unwrap_or(&[]))?;
                s.so.v6only = on != 0;
                Ok(())
            }
            _ => Err(Errno::ENOTSUP),
        },
        libc::IPPROTO_TCP => match name {
            libc::TCP_NODELAY => {
                s.so.tcp_nodelay = v? != 0;
                Ok(())
            }
            libc::TCP_KEEPCNT | libc::TCP_KEEPINTVL | libc::TCP_MAXSEG | libc::TCP_CONGESTION => Ok(()),
            libc::TCP_KEEPIDLE => {
                let t = v?;
                if t <= 0 {
                    return Err(Errno::EINVAL);
                }
                s.so.keepalive_time = t as u32;
                if s.so.keepalive {
                    s.conn.set_keepalive_due(Some(Instant::now() + Duration::from_secs(t as u64)));
                    STREAMS.kick();
                }
                Ok(())
            }
            _ => Err(Errno::ENOTSUP),
        },
        SOL_RDMA => {
            if s.ctl.state() & (ST_OPENING | ST_CONNECTED) != 0 || s.ctl.state() >= ST_CONNECT_ERROR || s.ep.is_some() {
                return Err(Errno::EINVAL);
            }
            if name == RDMA_ROUTE {
                s.so.route = Some(opt.ok_or(Errno::EINVAL)?.to_vec());
                return Ok(());
            }
            let v = v? as u32;
            match name {
                RDMA_SQSIZE => s.tx.set_sq_size(v.min(RS_QP_MAX_SIZE)),
                RDMA_RQSIZE => s.rx.set_rq_size(v.min(RS_QP_MAX_SIZE)),
                RDMA_INLINE => s.tx.set_sq_inline(v.min(RS_QP_MAX_SIZE)),
                RDMA_IOMAPSIZE => s.iomaps.set_target_size(scale_to_value(value_to_scale(v, 8) & 0xFF, 8) & 0xFFFF),
                _ => return Err(Errno::ENOTSUP),
            }
            Ok(())
        }
        _ => Err(Errno::ENOTSUP),
    }
}

impl OptSource for Stream {
    fn opts(&self) -> &SockOpts {
        &self.so
    }

    fn sizes(&self) -> Sizes {
        Sizes { sbuf: self.tx.sbuf_size(), rbuf: self.rx.rbuf_size(), sq: self.tx.sq_size(), rq: self.rx.rq_size(), inline: self.tx.sq_inline(), iomap: self.iomaps.target_size() }
    }

    fn take_error(&mut self) -> c_int {
        self.ctl.take_err()
    }

    fn paths(&self) -> Vec<crate::abi::cma::ibv_sa_path_rec> {
        self.cm.as_ref().map(|c| c.route_paths()).unwrap_or_default()
    }

    /// As upstream: "established" only in the state with both directions
    /// shut down and the disconnect not yet completed (its test is for the
    /// bare connected bit).
    fn established(&self) -> bool {
        self.ctl.state() == ST_CONNECTED
    }
}

/// rgetsockopt on a stream (see [`options::getsockopt`]).
pub fn getsockopt(h: &Handle, level: c_int, name: c_int, room: usize) -> Result<OptOut, Errno> {
    options::getsockopt(&mut *lock(h)?, level, name, room)
}

/// rfcntl: F_GETFL/F_SETFL (O_NONBLOCK is what counts), F_GETFD/F_SETFD;
/// the values are stored and read back as given, as upstream.
pub fn fcntl(h: &Handle, cmd: c_int, arg: c_int) -> Result<c_int, Errno> {
    let mut s = lock(h)?;
    match cmd {
        libc::F_GETFL => Ok(s.fs_flags),
        libc::F_SETFL => {
            let on = arg & libc::O_NONBLOCK != 0;
            if on != s.nonblocking() && s.ctl.state() != ST_LISTENING && s.ctl.state() < ST_CONNECTED {
                s.conn.set_nonblock(on);
            }
            if let Some(ep) = &s.ep {
                ep.qp.set_channel_blocking(!on)?;
            }
            s.fs_flags = arg;
            s.sleepers.touch();
            Ok(0)
        }
        libc::F_GETFD => Ok(s.fd_flags),
        libc::F_SETFD => {
            s.fd_flags = arg;
            Ok(0)
        }
        _ => Err(Errno::ENOTSUP),
    }
}
