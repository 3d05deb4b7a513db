// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! An async rsocket client: sends a byte stream to an echo server and
//! checks what comes back, writing and reading at once (the two halves of
//! an [`AsyncRStream`] in two tasks). Needs the `tokio` feature:
//!
//! ```text
//! cargo run --release --features tokio --example async_rstream -- -s addr [-p port] [-S bytes] [-t secs]
//! ```
//!
//! The server is any rsocket echo server: a TCP program under rdma-core's
//! `librspreload.so`, say `socat TCP-LISTEN:7472,bind=ADDR PIPE`. The
//! client sends `-S` bytes of a known pattern and shuts its sending side
//! down, reads as many bytes back (an early end of the stream fails it)
//! and compares every byte; with `-t` it fails after that many seconds
//! unless done.

#![forbid(unsafe_code)]

use rdmacm::asyncio::AsyncRStream;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes written and read so far (printed when the time limit ends the run).
static SENT: AtomicUsize = AtomicUsize::new(0);
static GOT: AtomicUsize = AtomicUsize::new(0);

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8 ^ (i >> 12) as u8).collect()
}

struct Opts {
    server: IpAddr,
    port: u16,
    size: usize,
    limit: u64,
}

fn parse() -> Option<Opts> {
    let (mut server, mut port, mut size, mut limit) = (None, 7472, 1 << 20, 0);
    let mut a = std::env::args().skip(1);
    while let Some(k) = a.next() {
        let v = a.next()?;
        match k.as_str() {
            "-s" => server = Some(v.parse().ok()?),
            "-p" => port = v.parse().ok()?,
            "-S" => size = v.parse().ok()?,
            "-t" => limit = v.parse().ok()?,
            _ => return None,
        }
    }
    Some(Opts { server: server?, port, size, limit })
}

async fn run(o: Opts) -> Result<(), String> {
    let addr = SocketAddr::new(o.server, o.port);
    let s = AsyncRStream::connect(addr).await.map_err(|e| format!("connect to {addr}: {e}"))?;
    let (mut rd, mut wr) = tokio::io::split(s);
    let data = pattern(o.size);
    let out = data.clone();
    let writer = tokio::spawn(async move {
        // Uneven pieces: the writes and the echoes interleave.
        for piece in out.chunks(7919) {
            wr.write_all(piece).await.map_err(|e| format!("write: {e}"))?;
            SENT.fetch_add(piece.len(), Ordering::Relaxed);
        }
        wr.shutdown().await.map_err(|e| format!("shutdown: {e}"))?;
        Ok::<_, String>(wr)
    });
    // Every byte sent comes back: read that many (an early end of the
    // stream is an error), without waiting for the server to close.
    let mut got = Vec::with_capacity(o.size);
    let mut buf = vec![0u8; 65536];
    while got.len() < data.len() {
        let want = (data.len() - got.len()).min(buf.len());
        let n = rd.read(&mut buf[..want]).await.map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        GOT.fetch_add(n, Ordering::Relaxed);
    }
    let wr = writer.await.map_err(|e| e.to_string())??;
    drop(rd.unsplit(wr));
    if got.len() != data.len() {
        return Err(format!("{} bytes sent, {} echoed", data.len(), got.len()));
    }
    if let Some(i) = got.iter().zip(&data).position(|(a, b)| a != b) {
        return Err(format!("byte {i} echoed as {:#04x}, sent {:#04x}", got[i], data[i]));
    }
    println!("async_rstream: {} bytes sent to {addr} and echoed intact", data.len());
    Ok(())
}

fn main() -> ExitCode {
    let Some(o) = parse() else {
        eprintln!("usage: async_rstream -s addr [-p port] [-S bytes] [-t secs]");
        return ExitCode::from(2);
    };
    time_limit(o.limit);
    let rt = match tokio::runtime::Builder::new_current_thread().enable_io().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("async_rstream: tokio: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(o)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("async_rstream: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Ends the process with a failure after `secs` seconds (0: never).
fn time_limit(secs: u64) {
    if secs > 0 {
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(secs));
            eprintln!("async_rstream: not done after {secs} s ({} bytes sent, {} read)", SENT.load(Ordering::Relaxed), GOT.load(Ordering::Relaxed));
            std::process::exit(3);
        });
    }
}
