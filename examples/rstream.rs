// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rstream in Rust: the stream test of rdma-core's `rstream`, over an
//! rsocket used as `std::io::Read + Write` ([`rdmacm::RStream`]), with no
//! `unsafe`. It talks to upstream's `rstream` either way.
//!
//! ```text
//! rstream -b addr [-p port] [-S size] [-C count] [-I iterations] [-T v]   server
//! rstream -s addr [-p port] [-S size] [-C count] [-I iterations] [-T v]   client
//! ```
//!
//! The exchange (rstream's "custom" test): 16 bytes from the client, 16
//! back; then, `-I` times, `-C` transfers of `-S` bytes from the client to
//! the server and as many back. With `-T v` each direction carries the byte
//! sequence 0, 1, ..., 255, 0, ... from its first byte on (the 16-byte
//! handshake included), and the receiver checks it. Then both ends shut
//! the stream down and close it; the line printed is rstream's.

#![forbid(unsafe_code)]

use rdmacm::{RListener, RStream};
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Instant;

const DEFAULT_PORT: u16 = 7471;

struct Opts {
    /// Client (`-s`) or server (`-b`), and the address.
    client: bool,
    addr: IpAddr,
    port: u16,
    size: usize,
    count: u64,
    iterations: u64,
    verify: bool,
}

/// The running byte sequence of one direction.
#[derive(Default)]
struct Pattern(u8);

impl Pattern {
    fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            *b = self.0;
            self.0 = self.0.wrapping_add(1);
        }
    }

    /// Checks `buf` against the sequence; the offset of the first wrong byte.
    fn check(&mut self, buf: &[u8]) -> Result<(), usize> {
        for (i, &b) in buf.iter().enumerate() {
            if b != self.0 {
                return Err(i);
            }
            self.0 = self.0.wrapping_add(1);
        }
        Ok(())
    }
}

/// One end of the test: the stream, its buffer, and the two directions'
/// sequences.
struct Test {
    s: RStream,
    buf: Vec<u8>,
    verify: bool,
    out: Pattern,
    inp: Pattern,
    /// Bytes received so far (where a verification failure was).
    received: u64,
}

impl Test {
    fn send(&mut self, n: usize) -> std::io::Result<()> {
        if self.verify {
            self.out.fill(&mut self.buf[..n]);
        }
        self.s.write_all(&self.buf[..n])
    }

    fn recv(&mut self, n: usize) -> std::io::Result<()> {
        self.s.read_exact(&mut self.buf[..n])?;
        if self.verify {
            if let Err(i) = self.inp.check(&self.buf[..n]) {
                return Err(std::io::Error::other(format!("data verification failed byte {}", self.received + i as u64)));
            }
        }
        self.received += n as u64;
        Ok(())
    }

    /// A transfer of the client's direction (`to_server`) or the other.
    fn xfer(&mut self, client: bool, to_server: bool, n: usize) -> std::io::Result<()> {
        if client == to_server {
            self.send(n)
        } else {
            self.recv(n)
        }
    }
}

fn run(o: &Opts) -> std::io::Result<()> {
    let addr = SocketAddr::new(o.addr, o.port);
    let s = if o.client {
        RStream::connect(addr)?
    } else {
        let l = RListener::bind(addr, 1)?;
        l.accept()?.0
    };
    let mut t = Test { s, buf: vec![0; o.size.max(16)], verify: o.verify, out: Pattern::default(), inp: Pattern::default(), received: 0 };
    // The handshake: 16 bytes each way.
    t.xfer(o.client, true, 16)?;
    t.xfer(o.client, false, 16)?;
    let start = Instant::now();
    for _ in 0..o.iterations {
        for _ in 0..o.count {
            t.xfer(o.client, true, o.size)?;
        }
        for _ in 0..o.count {
            t.xfer(o.client, false, o.size)?;
        }
    }
    let usec = start.elapsed().as_secs_f64() * 1e6;
    let bytes = o.iterations * o.count * o.size as u64 * 2;
    // rstream's columns: name, size, transfers, iterations, total, seconds, Gb/s, usec per transfer
    println!("{:<10}{:<8}{:<8}{:<8}{:<8}{:>8} {:>10}{:>13}", "name", "bytes", "xfers", "iters", "total", "time", "Gb/sec", "usec/xfer");
    println!(
        "{:<10}{:<8}{:<8}{:<8}{:<8}{:>8.2}s{:>10.2}{:>11.2}",
        "custom",
        o.size,
        o.count,
        o.iterations,
        bytes,
        usec / 1e6,
        bytes as f64 * 8.0 / (1000.0 * usec.max(1.0)),
        usec / (o.iterations * o.count * 2).max(1) as f64
    );
    t.s.shutdown(Shutdown::Both)?;
    Ok(())
}

fn usage() -> ! {
    eprintln!("usage: rstream -s server_address | -b bind_address [-p port] [-S size] [-C count] [-I iterations] [-T v]");
    std::process::exit(22)
}

fn parse_args() -> Opts {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut o = Opts { client: false, addr: IpAddr::from([0, 0, 0, 0]), port: DEFAULT_PORT, size: 1000, count: 1000, iterations: 1, verify: false };
    let mut side = None;
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).map(String::as_str).unwrap_or_else(|| usage());
        let n = || v.parse::<u64>().unwrap_or_else(|_| usage());
        match args[i].as_str() {
            "-s" | "-b" => {
                side = Some(args[i] == "-s");
                o.addr = v.parse().ok().or_else(|| (v, 0).to_socket_addrs().ok()?.next().map(|a| a.ip())).unwrap_or_else(|| usage());
            }
            "-p" => o.port = v.parse().unwrap_or_else(|_| usage()),
            "-S" => o.size = n() as usize,
            "-C" => o.count = n(),
            "-I" => o.iterations = n(),
            // Test options: v verifies; b (blocking calls) is what this program does anyway.
            "-T" => {
                for c in v.chars() {
                    match c {
                        'v' => o.verify = true,
                        'b' => {}
                        _ => usage(),
                    }
                }
            }
            _ => usage(),
        }
        i += 2;
    }
    o.client = side.unwrap_or_else(|| usage());
    if o.size == 0 {
        usage();
    }
    o
}

fn main() -> ExitCode {
    let o = parse_args();
    match run(&o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rstream: {e}");
            ExitCode::FAILURE
        }
    }
}
