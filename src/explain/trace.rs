// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! `rdma-resolve trace FILE...`: reads the trace lines of many processes
//! (`RDMACM_RS_TRACE`, docs/trace.md) and says what failed where: per step
//! counts and latency percentiles, the failed ids grouped by step and
//! peer, the ids whose asynchronous step never ended, the slowest peers,
//! and the destroys that waited for their own unacked events.
//!
//! The summary is one JSON value ([`J`]); the text is printed from it.
#![deny(unsafe_code)]

use super::json::{self, J};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Ids as (pid, id).
type Ids = BTreeSet<(u32, u64)>;
/// Failures of one (step, step it ends, peer): count by error, ids.
type Failed = (BTreeMap<String, u64>, Ids);

/// One parsed trace line (the fields the summary reads).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rec {
    pub t_us: u64,
    pub pid: u32,
    pub id: u64,
    pub kind: String,
    pub step: String,
    pub ok: bool,
    /// The errno's name (calls) or `status N` (events).
    pub error: Option<String>,
    /// The step an event ends.
    pub of: Option<String>,
    pub dur_us: Option<u64>,
    pub peer: Option<String>,
    pub dev: Option<String>,
    pub held: Vec<String>,
    pub self_deadlock: bool,
}

/// Reads one line; None for a line that is not a trace record.
pub fn parse_line(line: &str) -> Option<Rec> {
    let v = json::parse(line).ok()?;
    let s = |k: &str| v.get(k).and_then(J::as_str).map(str::to_string);
    let n = |k: &str| v.get(k).and_then(J::as_i64);
    if n("v")? != 1 {
        return None;
    }
    let kind = s("kind")?;
    let ok = matches!(v.get("ok"), Some(J::Bool(true)));
    let error = if ok {
        None
    } else if let Some(e) = s("errno") {
        Some(e)
    } else if kind == "event" {
        Some(format!("status {}", n("status").unwrap_or(0)))
    } else {
        Some("failed".into())
    };
    let held = match v.get("held") {
        Some(J::Arr(a)) => a.iter().filter_map(|h| h.get("event").and_then(J::as_str).map(str::to_string)).collect(),
        _ => Vec::new(),
    };
    Some(Rec {
        t_us: n("t_us")?.max(0) as u64,
        pid: n("pid")?.max(0) as u32,
        id: n("id")?.max(0) as u64,
        kind,
        step: s("step")?,
        ok,
        error,
        of: s("of"),
        dur_us: n("dur_us").map(|d| d.max(0) as u64),
        peer: s("peer"),
        dev: s("dev"),
        held,
        self_deadlock: matches!(v.get("self_deadlock"), Some(J::Bool(true))),
    })
}

/// The `p`-th percentile (0..=100) of sorted values, nearest rank.
fn pct(sorted: &[u64], p: u64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p * sorted.len() as u64).div_ceil(100)).max(1) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

fn lat(mut v: Vec<u64>) -> J {
    v.sort_unstable();
    J::obj().with("p50_us", pct(&v, 50) as i64).with("p90_us", pct(&v, 90) as i64).with("p99_us", pct(&v, 99) as i64).with("max_us", v.last().copied().unwrap_or(0) as i64)
}

/// `pid:id` names of at most 8 ids, and how many more.
fn some_ids(ids: &BTreeSet<(u32, u64)>) -> J {
    let mut a: Vec<J> = ids.iter().take(8).map(|(p, i)| J::from(format!("{p}:{i}"))).collect();
    if ids.len() > 8 {
        a.push(J::from(format!("... {} more", ids.len() - 8)));
    }
    J::Arr(a)
}

/// The summary of trace records (of any number of processes, in any
/// order): `inputs` says how many files and lines were read and how many
/// lines were not records.
pub fn summarize(recs: &[Rec], files: usize, bad_lines: usize) -> J {
    let mut recs: Vec<&Rec> = recs.iter().collect();
    recs.sort_by_key(|r| (r.pid, r.t_us));
    let pids: BTreeSet<u32> = recs.iter().map(|r| r.pid).collect();
    let ids: BTreeSet<(u32, u64)> = recs.iter().filter(|r| r.id != 0).map(|r| (r.pid, r.id)).collect();
    let end = recs.iter().map(|r| r.t_us).max().unwrap_or(0);

    // Per step: count, failures, durations.
    let mut steps: BTreeMap<(String, String), (u64, u64, Vec<u64>)> = BTreeMap::new();
    // Failures by (step, the step it ends, peer): errors and ids.
    let mut fails: BTreeMap<(String, String, String), Failed> = BTreeMap::new();
    // Per peer: durations of ended asynchronous steps, failures.
    let mut peers: HashMap<String, (Vec<u64>, u64)> = HashMap::new();
    // The open asynchronous step of each id: (step, peer, call time).
    let mut open: HashMap<(u32, u64), (String, String, u64)> = HashMap::new();
    // Ids destroyed while a step was open, by (step, peer).
    let mut abandoned: BTreeMap<(String, String), BTreeSet<(u32, u64)>> = BTreeMap::new();
    // Ids that got DISCONNECTED: a disconnect call after it (the peer
    // disconnected first) waits for no event.
    let mut gone: BTreeSet<(u32, u64)> = BTreeSet::new();
    let mut stalls = Vec::new();
    for r in &recs {
        let e = steps.entry((r.step.clone(), r.kind.clone())).or_default();
        e.0 += 1;
        if !r.ok {
            e.1 += 1;
        }
        if let Some(d) = r.dur_us {
            e.2.push(d);
        }
        let peer = r.peer.clone().unwrap_or_else(|| "-".into());
        match r.kind.as_str() {
            "call" => {
                if r.ok && matches!(r.step.as_str(), "resolve_addr" | "resolve_route" | "connect" | "accept" | "disconnect") && !(r.step == "disconnect" && gone.contains(&(r.pid, r.id))) {
                    open.insert((r.pid, r.id), (r.step.clone(), peer.clone(), r.t_us));
                } else if r.step == "destroy_id" {
                    if let Some((step, peer, _)) = open.remove(&(r.pid, r.id)) {
                        abandoned.entry((step, peer)).or_default().insert((r.pid, r.id));
                    }
                }
            }
            "event" => {
                if r.step == "DISCONNECTED" {
                    gone.insert((r.pid, r.id));
                }
                if r.of.is_some() {
                    open.remove(&(r.pid, r.id));
                }
                if let (Some(d), Some(_)) = (r.dur_us, &r.of) {
                    peers.entry(peer.clone()).or_default().0.push(d);
                }
            }
            "stall" => {
                stalls.push(
                    J::obj()
                        .with("pid", r.pid)
                        .with("id", r.id as i64)
                        .with("peer", peer.clone())
                        .with("held", r.held.iter().map(|h| J::from(h.as_str())).collect::<Vec<J>>())
                        .with("self_deadlock", r.self_deadlock),
                );
                continue;
            }
            _ => {}
        }
        if !r.ok {
            let f = fails.entry((r.step.clone(), r.of.clone().unwrap_or_default(), peer.clone())).or_default();
            *f.0.entry(r.error.clone().unwrap_or_default()).or_default() += 1;
            f.1.insert((r.pid, r.id));
            peers.entry(peer).or_default().1 += 1;
        }
    }

    let step_rows: Vec<J> = steps
        .into_iter()
        .map(|((step, kind), (n, failed, d))| {
            let mut o = J::obj().with("step", step).with("kind", kind).with("count", n as i64).with("failed", failed as i64).with("timed", d.len());
            if let J::Obj(m) = lat(d) {
                for (k, v) in m {
                    o.set(&k, v);
                }
            }
            o
        })
        .collect();
    let mut fail_rows: Vec<(usize, J)> = fails
        .into_iter()
        .map(|((step, of, peer), (errs, ids))| {
            let errors = J::Obj(errs.into_iter().map(|(k, v)| (k, J::Int(v as i64))).collect());
            let o = J::obj().with("step", step).with("of", if of.is_empty() { J::Null } else { J::from(of) }).with("peer", peer).with("count", ids.len()).with("errors", errors).with("ids", some_ids(&ids));
            (ids.len(), o)
        })
        .collect();
    fail_rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut pend: BTreeMap<(String, String), (Ids, u64)> = BTreeMap::new();
    for ((pid, id), (step, peer, t)) in open {
        let e = pend.entry((step, peer)).or_default();
        e.0.insert((pid, id));
        e.1 = e.1.max(end.saturating_sub(t));
    }
    let mut pend_rows: Vec<(usize, J)> = pend
        .into_iter()
        .map(|((step, peer), (ids, age))| (ids.len(), J::obj().with("step", step).with("peer", peer).with("count", ids.len()).with("oldest_us", age as i64).with("ids", some_ids(&ids))))
        .collect();
    pend_rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut aband_rows: Vec<(usize, J)> =
        abandoned.into_iter().map(|((step, peer), ids)| (ids.len(), J::obj().with("step", step).with("peer", peer).with("count", ids.len()).with("ids", some_ids(&ids)))).collect();
    aband_rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    let mut peer_rows: Vec<(u64, J)> = peers
        .into_iter()
        .map(|(peer, (mut d, failed))| {
            d.sort_unstable();
            let p90 = pct(&d, 90);
            let mut o = J::obj().with("peer", peer).with("timed", d.len()).with("failed", failed as i64);
            if let J::Obj(m) = lat(d) {
                for (k, v) in m {
                    o.set(&k, v);
                }
            }
            (p90, o)
        })
        .collect();
    peer_rows.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.get("peer").map(J::plain).cmp(&b.1.get("peer").map(J::plain))));
    peer_rows.truncate(10);
    let failed = !fail_rows.is_empty() || !pend_rows.is_empty() || !stalls.is_empty();
    J::obj()
        .with("files", files)
        .with("records", recs.len())
        .with("bad_lines", bad_lines)
        .with("processes", pids.len())
        .with("ids", ids.len())
        .with("ok", !failed)
        .with("steps", step_rows)
        .with("failures", fail_rows.into_iter().map(|x| x.1).collect::<Vec<J>>())
        .with("unfinished", pend_rows.into_iter().map(|x| x.1).collect::<Vec<J>>())
        .with("abandoned", aband_rows.into_iter().map(|x| x.1).collect::<Vec<J>>())
        .with("slowest_peers", peer_rows.into_iter().map(|x| x.1).collect::<Vec<J>>())
        .with("stalls", stalls)
}

fn ms(v: Option<&J>) -> String {
    match v.and_then(J::as_i64) {
        Some(us) => format!("{:.1}", us as f64 / 1000.0),
        None => "-".into(),
    }
}

/// The summary as text (tables; latencies in milliseconds).
pub fn to_text(s: &J) -> String {
    let g = |o: &J, k: &str| o.get(k).map(J::plain).unwrap_or_else(|| "-".into());
    let arr = |k: &str| match s.get(k) {
        Some(J::Arr(a)) => a.clone(),
        _ => Vec::new(),
    };
    let mut out = format!(
        "{} records from {} file(s), {} process(es), {} ids{}\n\n",
        g(s, "records"),
        g(s, "files"),
        g(s, "processes"),
        g(s, "ids"),
        if g(s, "bad_lines") != "0" { format!(" ({} lines not records, skipped)", g(s, "bad_lines")) } else { String::new() }
    );
    out += &format!("{:<22} {:<6} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9}\n", "step", "kind", "count", "failed", "p50 ms", "p90 ms", "p99 ms", "max ms");
    for r in arr("steps") {
        let timed = r.get("timed").and_then(J::as_i64).unwrap_or(0) > 0;
        let l = |k: &str| if timed { ms(r.get(k)) } else { "-".into() };
        out += &format!("{:<22} {:<6} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9}\n", g(&r, "step"), g(&r, "kind"), g(&r, "count"), g(&r, "failed"), l("p50_us"), l("p90_us"), l("p99_us"), l("max_us"));
    }
    let fails = arr("failures");
    out += "\nfailed:\n";
    if fails.is_empty() {
        out += "  nothing\n";
    }
    for f in fails {
        let of = f.get("of").filter(|o| **o != J::Null).map(|o| format!(" (ending {})", o.plain())).unwrap_or_default();
        out += &format!("  {} id(s): {}{} peer {}: {}; ids {}\n", g(&f, "count"), g(&f, "step"), of, g(&f, "peer"), g(&f, "errors"), g(&f, "ids"));
    }
    let pend = arr("unfinished");
    if !pend.is_empty() {
        out += "\nnever ended (no event after the call by the end of the trace):\n";
        for p in pend {
            out += &format!("  {} id(s): {} to peer {}, oldest {} ms; ids {}\n", g(&p, "count"), g(&p, "step"), g(&p, "peer"), ms(p.get("oldest_us")), g(&p, "ids"));
        }
    }
    let aband = arr("abandoned");
    if !aband.is_empty() {
        out += "\ndestroyed before their step ended:\n";
        for a in aband {
            out += &format!("  {} id(s): {} to peer {}; ids {}\n", g(&a, "count"), g(&a, "step"), g(&a, "peer"), g(&a, "ids"));
        }
    }
    let peers = arr("slowest_peers");
    if !peers.is_empty() {
        out += "\nslowest peers (call to event):\n";
        out += &format!("  {:<40} {:>7} {:>7} {:>9} {:>9} {:>9}\n", "peer", "timed", "failed", "p50 ms", "p90 ms", "max ms");
        for p in peers {
            out += &format!("  {:<40} {:>7} {:>7} {:>9} {:>9} {:>9}\n", g(&p, "peer"), g(&p, "timed"), g(&p, "failed"), ms(p.get("p50_us")), ms(p.get("p90_us")), ms(p.get("max_us")));
        }
    }
    let stalls = arr("stalls");
    if !stalls.is_empty() {
        out += "\ndestroys waiting for unacked events:\n";
        for st in stalls {
            let me = if st.get("self_deadlock") == Some(&J::Bool(true)) { " (held by the destroying thread itself: waits until another thread acks)" } else { "" };
            out += &format!("  pid {} id {} peer {}: {}{}\n", g(&st, "pid"), g(&st, "id"), g(&st, "peer"), g(&st, "held"), me);
        }
    }
    out
}

/// Reads every file (`-` is stdin) and summarizes it.
pub fn summarize_files(files: &[String]) -> Result<J, String> {
    let mut recs = Vec::new();
    let mut bad = 0;
    for f in files {
        let text = if f == "-" {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(|e| format!("stdin: {e}"))?;
            s
        } else {
            let b = std::fs::read(f).map_err(|e| format!("{f}: {e}"))?;
            String::from_utf8_lossy(&b).into_owned()
        };
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            match parse_line(l) {
                Some(r) => recs.push(r),
                None => bad += 1,
            }
        }
    }
    Ok(summarize(&recs, files.len(), bad))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(pid: u32, id: u64, t: u64, kind: &str, step: &str, extra: &str) -> String {
        format!(r#"{{"v":1,"t_us":{t},"wall_us":{},"pid":{pid},"tid":{pid},"id":{id},"kind":"{kind}","step":"{step}"{extra}}}"#, t + 1_700_000_000_000_000)
    }

    /// Two client processes: pid 10's ids reach their peer, pid 11's ids
    /// to 192.0.2.9 fail route resolution or never hear back on connect.
    fn storm() -> Vec<String> {
        let mut v = Vec::new();
        for id in 1..=4u64 {
            let t = id * 100;
            v.push(line(10, id, t, "call", "resolve_addr", r#","result":0,"ok":true,"dur_us":5,"peer":"192.0.2.2:7471""#));
            v.push(line(10, id, t + 50, "event", "ADDR_RESOLVED", r#","status":0,"ok":true,"of":"resolve_addr","dur_us":50,"peer":"192.0.2.2:7471","dev":"rxe0""#));
            v.push(line(10, id, t + 60, "call", "connect", r#","result":0,"ok":true,"dur_us":7,"peer":"192.0.2.2:7471""#));
            v.push(line(10, id, t + 60 + id * 1000, "event", "ESTABLISHED", &format!(r#","status":0,"ok":true,"of":"connect","dur_us":{},"peer":"192.0.2.2:7471""#, id * 1000)));
            if id == 4 {
                // The peer disconnects first; the disconnect call after it ends nothing.
                v.push(line(10, id, 9000, "event", "DISCONNECTED", r#","status":0,"ok":true,"peer":"192.0.2.2:7471""#));
                v.push(line(10, id, 9100, "call", "disconnect", r#","result":0,"ok":true,"dur_us":4,"peer":"192.0.2.2:7471""#));
                v.push(line(10, id, 9200, "call", "destroy_id", r#","result":0,"ok":true,"dur_us":4,"peer":"192.0.2.2:7471""#));
            }
        }
        for id in 1..=3u64 {
            v.push(line(11, id, 10, "call", "resolve_route", r#","result":0,"ok":true,"dur_us":3,"peer":"192.0.2.9:7471""#));
            v.push(line(11, id, 2_000_010, "event", "ROUTE_ERROR", r#","status":-110,"ok":false,"of":"resolve_route","dur_us":2000000,"peer":"192.0.2.9:7471""#));
        }
        v.push(line(11, 4, 20, "call", "connect", r#","result":0,"ok":true,"dur_us":3,"peer":"192.0.2.9:7471""#));
        v.push(line(11, 5, 30, "call", "resolve_addr", r#","result":22,"errno":"EINVAL","ok":false,"dur_us":1"#));
        v.push(line(11, 7, 50, "call", "resolve_addr", r#","result":0,"ok":true,"dur_us":2,"peer":"192.0.2.9:7471""#));
        v.push(line(11, 7, 60, "call", "destroy_id", r#","result":0,"ok":true,"dur_us":2,"peer":"192.0.2.9:7471""#));
        v.push(line(11, 6, 40, "stall", "destroy_id_blocked", r#","ok":false,"waited_ms":1000,"unacked":1,"held":[{"event":"CONNECT_REQUEST","status":0,"by_this_thread":true}],"self_deadlock":true"#));
        v.push("not json".into());
        v
    }

    fn summary() -> J {
        let lines = storm();
        let recs: Vec<Rec> = lines.iter().filter_map(|l| parse_line(l)).collect();
        summarize(&recs, 2, lines.len() - recs.len())
    }

    #[test]
    fn counts_and_percentiles() {
        let s = summary();
        assert_eq!(s.get("records"), Some(&J::Int(30)));
        assert_eq!(s.get("bad_lines"), Some(&J::Int(1)));
        assert_eq!(s.get("processes"), Some(&J::Int(2)));
        assert_eq!(s.get("ids"), Some(&J::Int(11)));
        assert_eq!(s.get("ok"), Some(&J::Bool(false)));
        let J::Arr(steps) = s.get("steps").unwrap() else { panic!() };
        let est = steps.iter().find(|r| r.get("step") == Some(&J::from("ESTABLISHED"))).unwrap();
        assert_eq!(est.get("count"), Some(&J::Int(4)));
        assert_eq!(est.get("p50_us"), Some(&J::Int(2000)));
        assert_eq!(est.get("p90_us"), Some(&J::Int(4000)));
        assert_eq!(est.get("max_us"), Some(&J::Int(4000)));
        let re = steps.iter().find(|r| r.get("step") == Some(&J::from("ROUTE_ERROR"))).unwrap();
        assert_eq!(re.get("failed"), Some(&J::Int(3)));
    }

    #[test]
    fn failures_by_step_and_peer() {
        let s = summary();
        let J::Arr(f) = s.get("failures").unwrap() else { panic!() };
        let top = &f[0];
        assert_eq!(top.get("step"), Some(&J::from("ROUTE_ERROR")));
        assert_eq!(top.get("of"), Some(&J::from("resolve_route")));
        assert_eq!(top.get("peer"), Some(&J::from("192.0.2.9:7471")));
        assert_eq!(top.get("count"), Some(&J::Int(3)));
        assert_eq!(top.get("errors").unwrap().get("status -110"), Some(&J::Int(3)));
        assert_eq!(top.get("ids"), Some(&J::Arr(vec!["11:1".into(), "11:2".into(), "11:3".into()])));
        let inval = f.iter().find(|r| r.get("step") == Some(&J::from("resolve_addr"))).unwrap();
        assert_eq!(inval.get("errors").unwrap().get("EINVAL"), Some(&J::Int(1)));
        assert_eq!(inval.get("peer"), Some(&J::from("-")));
        // The connect that never heard back.
        let J::Arr(u) = s.get("unfinished").unwrap() else { panic!() };
        assert_eq!(u.len(), 1);
        assert_eq!(u[0].get("step"), Some(&J::from("connect")));
        assert_eq!(u[0].get("peer"), Some(&J::from("192.0.2.9:7471")));
        assert_eq!(u[0].get("ids"), Some(&J::Arr(vec!["11:4".into()])));
        let J::Arr(a) = s.get("abandoned").unwrap() else { panic!() };
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].get("step"), Some(&J::from("resolve_addr")));
        assert_eq!(a[0].get("ids"), Some(&J::Arr(vec!["11:7".into()])));
        let J::Arr(st) = s.get("stalls").unwrap() else { panic!() };
        assert_eq!(st[0].get("self_deadlock"), Some(&J::Bool(true)));
    }

    #[test]
    fn slowest_peer_first_and_text() {
        let s = summary();
        let J::Arr(p) = s.get("slowest_peers").unwrap() else { panic!() };
        assert_eq!(p[0].get("peer"), Some(&J::from("192.0.2.9:7471")));
        assert_eq!(p[0].get("failed"), Some(&J::Int(3)));
        assert_eq!(p[1].get("peer"), Some(&J::from("192.0.2.2:7471")));
        let t = to_text(&s);
        assert!(t.contains("3 id(s): ROUTE_ERROR (ending resolve_route) peer 192.0.2.9:7471"), "{t}");
        assert!(t.contains("1 id(s): connect to peer 192.0.2.9:7471"), "{t}");
        assert!(t.contains("held by the destroying thread itself"), "{t}");
        // The JSON form parses back.
        assert_eq!(json::parse(&s.to_string()).unwrap(), s);
    }

    #[test]
    fn clean_trace_is_ok() {
        let lines = storm();
        let recs: Vec<Rec> = lines.iter().filter_map(|l| parse_line(l)).filter(|r| r.pid == 10).collect();
        let s = summarize(&recs, 1, 0);
        assert_eq!(s.get("ok"), Some(&J::Bool(true)));
        assert!(to_text(&s).contains("failed:\n  nothing\n"));
    }

    #[test]
    fn percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!((pct(&v, 50), pct(&v, 90), pct(&v, 99), pct(&v, 100)), (50, 90, 99, 100));
        assert_eq!(pct(&[7], 50), 7);
        assert_eq!(pct(&[], 50), 0);
    }
}
