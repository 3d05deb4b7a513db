// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! An HTTP/1.1 server on hyper over RDMA: hyper's connection runs on an
//! [`AsyncRStream`] (an rsocket stream, `tokio::io::AsyncRead +
//! AsyncWrite`) through hyper-util's `TokioIo`, and the connections come
//! from an [`AsyncRListener`]. Needs the `tokio` feature:
//!
//! ```text
//! cargo run --release --features tokio --example rhttp -- -f FILE [-b addr] [-p port] [-c conns] [-t secs]
//! ```
//!
//! Every GET is answered with FILE's bytes (read once, at the start).
//! After `-c` connections have been accepted and have ended (0: serve
//! forever) it prints what it served and exits; with `-t` it fails after
//! that many seconds unless done. Any rsocket client is a
//! client of it: `curl` under rdma-core's `librspreload.so`, say:
//!
//! ```text
//! LD_PRELOAD=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so curl -o out http://192.0.2.2:8088/
//! ```

#![forbid(unsafe_code)]

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rdmacm::asyncio::AsyncRListener;
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What was served, over all connections.
#[derive(Default)]
struct Served {
    requests: AtomicU64,
    bytes: AtomicU64,
}

struct Opts {
    bind: IpAddr,
    port: u16,
    file: String,
    conns: usize,
    limit: u64,
}

fn usage() -> ExitCode {
    eprintln!("usage: rhttp -f FILE [-b addr] [-p port] [-c conns] [-t secs]");
    ExitCode::from(2)
}

fn parse() -> Option<Opts> {
    let mut o = Opts { bind: IpAddr::V4(Ipv4Addr::UNSPECIFIED), port: 8088, file: String::new(), conns: 0, limit: 0 };
    let mut a = std::env::args().skip(1);
    while let Some(k) = a.next() {
        let v = a.next()?;
        match k.as_str() {
            "-b" => o.bind = v.parse().ok()?,
            "-p" => o.port = v.parse().ok()?,
            "-f" => o.file = v,
            "-c" => o.conns = v.parse().ok()?,
            "-t" => o.limit = v.parse().ok()?,
            _ => return None,
        }
    }
    (!o.file.is_empty()).then_some(o)
}

async fn answer(req: Request<hyper::body::Incoming>, body: Bytes, served: Arc<Served>) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() != Method::GET {
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        return Ok(r);
    }
    served.requests.fetch_add(1, Ordering::Relaxed);
    served.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
    Ok(Response::new(Full::new(body)))
}

async fn serve(o: Opts, body: Bytes) -> Result<(), String> {
    let addr = SocketAddr::new(o.bind, o.port);
    let mut l = AsyncRListener::bind(addr, 16).map_err(|e| format!("listen on {addr}: {e}"))?;
    println!("rhttp: serving {} bytes on {addr}", body.len());
    let served = Arc::new(Served::default());
    let mut tasks = tokio::task::JoinSet::new();
    let mut accepted = 0;
    while o.conns == 0 || accepted < o.conns {
        let (s, peer) = l.accept().await.map_err(|e| format!("accept: {e}"))?;
        accepted += 1;
        let (body, served) = (body.clone(), served.clone());
        tasks.spawn(async move {
            let svc = service_fn(move |req| answer(req, body.clone(), served.clone()));
            let r = http1::Builder::new().serve_connection(TokioIo::new(s), svc).await;
            r.map_err(|e| format!("connection from {}: {e}", peer.map_or("?".into(), |p| p.to_string())))
        });
    }
    let mut failed = 0;
    while let Some(r) = tasks.join_next().await {
        if let Err(e) = r.map_err(|e| e.to_string()).and_then(|r| r) {
            eprintln!("rhttp: {e}");
            failed += 1;
        }
    }
    println!("rhttp: {} connections, {} requests, {} bytes served", accepted, served.requests.load(Ordering::Relaxed), served.bytes.load(Ordering::Relaxed));
    if failed > 0 {
        return Err(format!("{failed} connection(s) failed"));
    }
    Ok(())
}

fn main() -> ExitCode {
    let Some(o) = parse() else { return usage() };
    time_limit(o.limit);
    let body = match std::fs::read(&o.file) {
        Ok(b) => Bytes::from(b),
        Err(e) => {
            eprintln!("rhttp: {}: {e}", o.file);
            return ExitCode::FAILURE;
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread().enable_io().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rhttp: tokio: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(serve(o, body)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rhttp: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Ends the process with a failure after `secs` seconds (0: never).
fn time_limit(secs: u64) {
    if secs > 0 {
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(secs));
            eprintln!("rhttp: not done after {secs} s");
            std::process::exit(3);
        });
    }
}
