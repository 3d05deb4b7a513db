// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! rdma-resolve: explains, step by step, how the library resolves a
//! destination and, when it cannot, why (see rdma-resolve(1)).  The work
//! is done by `rdmacm::internal::explain` over the library's own Rust API; this file
//! only reads the command line, prints the report, and supplies the one
//! call that needs an open device context (`ibv_gid_reachable`).

use nix::errno::Errno;
use rdmacm::internal::abi::cma::{RDMA_PS_IB, RDMA_PS_IPOIB, RDMA_PS_TCP, RDMA_PS_UDP};
use rdmacm::internal::cma::{self, gid_env::CmGidEnv, objects::Vouched};
use rdmacm::internal::explain::{self, Family, Request};
use std::process::ExitCode;

const USAGE: &str = "usage: rdma-resolve [options] [destination]
  destination              host name or numeric address (IPv6 link-local: fe80::2%veth0)
  -p, --service SERVICE    port number or service name
  -b, --source ADDRESS     numeric source address
  -P, --port-space PS      tcp (default), udp, ib or ipoib
      --passive            explain a listener (destination optional: the wildcard)
  -f, --family FAMILY      inet, inet6 or ib
  -t, --timeout MS         resolution timeout in milliseconds (default 2000)
      --json               print one JSON document (schema in rdma-resolve(1))
      --all-devices        list every RDMA device, port and GID
  -v, --verbose            trace the library's decisions on stderr (RDMACM_RS_LOG=debug)
  -h, --help               this text
  -V, --version            the version
exit status: 0 resolved, 1 a step failed, 2 usage error

usage: rdma-resolve trace [--json] FILE...
  summarizes the trace lines (RDMACM_RS_TRACE) of any number of processes
  (FILE - is stdin): per step counts and latencies, the failed ids by step
  and peer, the steps that never ended, the slowest peers
exit status: 0 nothing failed, 1 something failed or never ended, 2 usage error or unreadable file";

struct Opts {
    req: Request,
    json: bool,
    all_devices: bool,
    verbose: bool,
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts { req: Request::default(), json: false, all_devices: false, verbose: false };
    let mut i = 0;
    let mut node = None;
    while i < args.len() {
        let a = args[i].as_str();
        let (key, inline) = match a.split_once('=') {
            Some((k, v)) if a.starts_with("--") => (k, Some(v.to_string())),
            _ => (a, None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            i += 1;
            args.get(i).cloned().ok_or_else(|| format!("{name} needs a value"))
        };
        match key {
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            "-V" | "--version" => {
                println!("rdma-resolve {}", env!("CARGO_PKG_VERSION"));
                return Ok(None);
            }
            "-p" | "--service" => o.req.service = Some(value(key)?),
            "-b" | "--source" => o.req.source = Some(value(key)?),
            "-P" | "--port-space" => {
                o.req.port_space = match value(key)?.as_str() {
                    "tcp" => RDMA_PS_TCP,
                    "udp" => RDMA_PS_UDP,
                    "ib" => RDMA_PS_IB,
                    "ipoib" => RDMA_PS_IPOIB,
                    v => return Err(format!("unknown port space {v} (tcp, udp, ib, ipoib)")),
                }
            }
            "--passive" => o.req.passive = true,
            "-f" | "--family" => {
                o.req.family = Some(match value(key)?.as_str() {
                    "inet" | "ipv4" | "4" => Family::Inet,
                    "inet6" | "ipv6" | "6" => Family::Inet6,
                    "ib" => Family::Ib,
                    v => return Err(format!("unknown family {v} (inet, inet6, ib)")),
                })
            }
            "-t" | "--timeout" => {
                let v = value(key)?;
                o.req.timeout_ms = v.parse::<i32>().ok().filter(|t| *t > 0).ok_or_else(|| format!("bad timeout {v} (milliseconds, > 0)"))?;
            }
            "--json" => o.json = true,
            "--all-devices" => o.all_devices = true,
            "-v" | "--verbose" => o.verbose = true,
            s if s.starts_with('-') && s.len() > 1 => return Err(format!("unknown option {s}")),
            s => {
                if node.replace(s.to_string()).is_some() {
                    return Err("more than one destination".into());
                }
            }
        }
        i += 1;
    }
    o.req.node = node;
    if o.req.node.is_none() && !o.req.passive && o.req.service.is_none() && !o.all_devices {
        return Err("a destination is needed (or --passive, or --all-devices)".into());
    }
    Ok(Some(o))
}

/// `ibv_gid_reachable` on the CM's own open context of the device with
/// node GUID `guid`.
fn gid_check(guid: u64, port: u8, gid: &[u8; 16], timeout: i32) -> Result<(), Errno> {
    let cm = cma::global();
    let list = cma::get_devices(cm)?;
    let ctx = {
        let devs = cm.devices.lock();
        list.iter().copied().find(|c| devs.list.iter().any(|d| d.verbs.0 == *c && d.guid == guid))
    };
    let r = match ctx {
        Some(ctx) => {
            // SAFETY: ctx is a context the CM opened and holds a reference
            // on (get_devices) until free_devices below, after its last use.
            let ctx = unsafe { Vouched::new(ctx) };
            rdmacm::internal::gid::gid_reachable(&CmGidEnv::new(cm, ctx), port.into(), gid, timeout)
        }
        None => Err(Errno::ENODEV),
    };
    cma::free_devices(cm, &list);
    r
}

/// `rdma-resolve trace [--json] FILE...`.
fn trace_main(args: &[String]) -> ExitCode {
    let mut json = false;
    let mut files = Vec::new();
    for a in args {
        match a.as_str() {
            "--json" => json = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            s if s.starts_with('-') && s != "-" => {
                eprintln!("rdma-resolve trace: unknown option {s}\n{USAGE}");
                return ExitCode::from(2);
            }
            s => files.push(s.to_string()),
        }
    }
    if files.is_empty() {
        eprintln!("rdma-resolve trace: no trace file\n{USAGE}");
        return ExitCode::from(2);
    }
    let s = match explain::trace::summarize_files(&files) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rdma-resolve trace: {e}");
            return ExitCode::from(2);
        }
    };
    if json {
        println!("{s}");
    } else {
        print!("{}", explain::trace::to_text(&s));
    }
    if s.get("ok") == Some(&explain::json::J::Bool(true)) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("trace") {
        return trace_main(&args[1..]);
    }
    let o = match parse(&args) {
        Ok(Some(o)) => o,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rdma-resolve: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if o.verbose && rdmacm::internal::sys::env::var(c"RDMACM_RS_LOG").is_none() {
        // Single-threaded still: nothing else reads the environment yet.
        std::env::set_var("RDMACM_RS_LOG", "debug");
    }
    rdmacm::internal::logging::init(rdmacm::internal::sys::env::var, rdmacm::internal::sys::env::open_log_file, rdmacm::internal::sys::cancel::shield);
    let mut report = if o.req.node.is_some() || o.req.passive || o.req.service.is_some() {
        explain::explain(&o.req, &gid_check)
    } else {
        explain::Report { request: o.req.clone(), steps: Vec::new(), devices: None }
    };
    if o.all_devices {
        report.devices = Some(explain::devices::devices());
    }
    if o.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
