// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The report: one [`Step`] per resolution step with its status, time,
//! data and, when it failed, the reason and the fix; the whole as JSON or
//! as text, and the `--all-devices` listing.
#![deny(unsafe_code)]

use super::devices::{gid_text, Device};
use super::json::J;
use super::words::ps_name;
use super::{Family, Request};

/// The outcome of one step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    Failed,
    Skipped,
}

impl Status {
    pub(super) fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
        }
    }
}

/// One step of the report.
#[derive(Clone, Debug)]
pub struct Step {
    pub name: &'static str,
    pub status: Status,
    pub ms: f64,
    pub summary: String,
    pub data: J,
    pub reason: Option<String>,
    pub fix: Option<String>,
}

impl Step {
    pub(super) fn new(name: &'static str) -> Step {
        Step { name, status: Status::Ok, ms: 0.0, summary: String::new(), data: J::obj(), reason: None, fix: None }
    }

    pub(super) fn fail(&mut self, reason: impl Into<String>, fix: Option<String>) {
        self.status = Status::Failed;
        self.reason = Some(reason.into());
        self.fix = fix;
    }

    pub(super) fn to_json(&self) -> J {
        J::obj()
            .with("step", self.name)
            .with("status", self.status.name())
            .with("ms", (self.ms * 1000.0).round() / 1000.0)
            .with("summary", self.summary.as_str())
            .with("data", self.data.clone())
            .with("reason", self.reason.clone())
            .with("fix", self.fix.clone())
    }
}

/// The whole report.
#[derive(Clone, Debug)]
pub struct Report {
    pub request: Request,
    pub steps: Vec<Step>,
    pub devices: Option<Vec<Device>>,
}

impl Report {
    /// The first failed step, if any.
    pub fn failure(&self) -> Option<&Step> {
        self.steps.iter().find(|s| s.status == Status::Failed)
    }

    /// Whether every step that ran succeeded.
    pub fn ok(&self) -> bool {
        self.failure().is_none()
    }

    /// The report as one JSON document (schema: rdma-resolve(1)).
    pub fn to_json(&self) -> J {
        let r = &self.request;
        let fam = r.family.map(|f| match f {
            Family::Inet => "inet",
            Family::Inet6 => "inet6",
            Family::Ib => "ib",
        });
        let req = J::obj()
            .with("destination", r.node.clone())
            .with("service", r.service.clone())
            .with("source", r.source.clone())
            .with("port_space", ps_name(r.port_space))
            .with("passive", r.passive)
            .with("family", fam)
            .with("timeout_ms", r.timeout_ms);
        let f = self.failure();
        let result = J::obj()
            .with("ok", self.ok())
            .with("failed_step", f.map(|s| s.name))
            .with("reason", f.and_then(|s| s.reason.clone()))
            .with("fix", f.and_then(|s| s.fix.clone()));
        let mut o = J::obj()
            .with("tool", "rdma-resolve")
            .with("version", env!("CARGO_PKG_VERSION"))
            .with("request", req)
            .with("steps", J::Arr(self.steps.iter().map(Step::to_json).collect()))
            .with("result", result);
        if let Some(d) = &self.devices {
            o.set("devices", all_devices_json(d));
        }
        o
    }

    /// The report as text.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let r = &self.request;
        if r.node.is_some() || r.service.is_some() || r.passive {
            out.push_str(&format!(
                "rdma-resolve {}{}{} (port space {}, timeout {} ms{})\n",
                if r.passive { "passive " } else { "" },
                r.node.as_deref().unwrap_or("*"),
                r.service.as_ref().map(|s| format!(" service {s}")).unwrap_or_default(),
                ps_name(r.port_space),
                r.timeout_ms,
                r.source.as_ref().map(|s| format!(", source {s}")).unwrap_or_default(),
            ));
        }
        for (i, s) in self.steps.iter().enumerate() {
            out.push_str(&format!("{:>2}. {:<15} {:<7} {:>9.3} ms  {}\n", i + 1, s.name, s.status.name(), s.ms, s.summary));
            if let J::Obj(m) = &s.data {
                for (k, v) in m {
                    match v {
                        J::Arr(a) if a.iter().all(|x| matches!(x, J::Obj(_))) && !a.is_empty() => {
                            for (n, x) in a.iter().enumerate() {
                                let line = match x {
                                    J::Obj(f) => f.iter().map(|(k, v)| format!("{k}={}", v.plain())).collect::<Vec<_>>().join(" "),
                                    _ => x.plain(),
                                };
                                out.push_str(&format!("      {k}[{n}]: {line}\n"));
                            }
                        }
                        _ => out.push_str(&format!("      {k}: {}\n", v.plain())),
                    }
                }
            }
            if let Some(reason) = &s.reason {
                out.push_str(&format!("      why: {reason}\n"));
            }
        }
        if let Some(d) = &self.devices {
            out.push_str("RDMA devices:\n");
            out.push_str(&all_devices_text(d));
        }
        if !self.steps.is_empty() {
            match self.failure() {
                None => out.push_str("result: ok\n"),
                Some(f) => {
                    out.push_str(&format!("result: FAILED at {}: {}\n", f.name, f.reason.as_deref().unwrap_or("")));
                    if let Some(fix) = &f.fix {
                        out.push_str(&format!("fix: {fix}\n"));
                    }
                }
            }
        }
        out
    }
}

/// `--all-devices` as JSON: every device, port and GID.
pub fn all_devices_json(devs: &[Device]) -> J {
    J::Arr(
        devs.iter()
            .map(|d| {
                J::obj()
                    .with("name", d.name.as_str())
                    .with("node_guid", d.node_guid.as_str())
                    .with("node_type", d.node_type.as_str())
                    .with("ports", J::Arr(d.ports.iter().map(|p| p.to_json(true)).collect()))
            })
            .collect(),
    )
}

/// `--all-devices` as text.
pub fn all_devices_text(devs: &[Device]) -> String {
    let mut out = String::new();
    if devs.is_empty() {
        out.push_str("  (none)\n");
    }
    for d in devs {
        for p in &d.ports {
            out.push_str(&format!(
                "  {}/{}  state {}  link layer {}  netdev {}\n",
                d.name,
                p.port,
                p.state,
                p.link_layer,
                p.netdev.as_deref().unwrap_or("-")
            ));
            for g in &p.gids {
                out.push_str(&format!(
                    "    gid {:>3}  {:<40} {:<11} {}\n",
                    g.index,
                    gid_text(&g.gid),
                    g.kind.as_deref().unwrap_or("-"),
                    g.netdev.as_deref().unwrap_or("-")
                ));
            }
        }
    }
    out
}

