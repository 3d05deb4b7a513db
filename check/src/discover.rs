// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! What RDMA ports this machine has and which address each one answers on: sysfs
//! (/sys/class/infiniband), `rdma -j link show` for the netdev behind a port, and
//! `ip -j addr show` for its addresses.  Read only: nothing here changes the system.

use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The transport a port speaks, as the cases need to know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// InfiniBand link layer: AF_IB, SA path records.
    Ib,
    /// RoCE: an Ethernet link layer on a channel adapter.
    Roce,
    /// iWARP (node type RNIC): connections only, no UD QPs, no multicast.
    Iwarp,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Ib => "InfiniBand",
            Transport::Roce => "RoCE",
            Transport::Iwarp => "iWARP",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Port {
    pub dev: String,
    pub port: u32,
    pub state: String,
    pub link_layer: String,
    pub transport: Transport,
    pub gid0: String,
    pub netdev: Option<String>,
    pub addr: Option<IpAddr>,
    /// Why no case can run over this port (None: usable).
    pub unusable: Option<String>,
}

impl Port {
    pub fn label(&self) -> String {
        format!("{}/{}", self.dev, self.port)
    }
}

fn read(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

/// `rdma -j link show`: (device, port) -> netdev, when the tool is there and says.
fn rdma_link_netdevs() -> Vec<(String, u32, String)> {
    let out = match Command::new("rdma").args(["-j", "link", "show"]).output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        _ => return Vec::new(),
    };
    let mut v = Vec::new();
    for obj in json_objects(&out) {
        let (Some(dev), Some(port), Some(nd)) = (
            json_str(obj, "ifname"),
            json_num(obj, "port"),
            json_str(obj, "netdev"),
        ) else {
            continue;
        };
        v.push((dev, port as u32, nd));
    }
    v
}

/// The netdev of a port from sysfs: the GID table's netdevs (RoCE), or the IPoIB
/// interface on the same PCI function with the port's dev_port (InfiniBand).
fn sysfs_netdev(devdir: &Path, dev: &str, port: u32) -> Option<String> {
    let ndevs = devdir.join(format!("ports/{port}/gid_attrs/ndevs"));
    if let Ok(rd) = fs::read_dir(&ndevs) {
        let mut names: Vec<(u32, String)> = rd
            .flatten()
            .filter_map(|e| {
                let i = e.file_name().to_string_lossy().parse::<u32>().ok()?;
                let n = read(&e.path())?;
                (!n.is_empty()).then_some((i, n))
            })
            .collect();
        names.sort();
        if let Some((_, n)) = names.into_iter().next() {
            return Some(n);
        }
    }
    let rd = fs::read_dir("/sys/class/net").ok()?;
    for e in rd.flatten() {
        let p = e.path();
        if !p.join("device/infiniband").join(dev).exists() {
            continue;
        }
        let dp = read(&p.join("dev_port"))
            .and_then(|s| s.parse::<u32>().ok())
            .unwrap_or(0);
        if dp + 1 == port {
            return Some(e.file_name().to_string_lossy().into_owned());
        }
    }
    None
}

/// The first global address of a netdev in this network namespace: IPv4 before IPv6
/// (a link-local address would need a scope on every program's command line).
fn netdev_addr(netdev: &str) -> Result<IpAddr, String> {
    let out = Command::new("ip")
        .args(["-j", "addr", "show", "dev", netdev])
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if !out.status.success() {
        return Err(format!("netdev {netdev} is not in this network namespace"));
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut v4 = None;
    let mut v6 = None;
    for obj in json_objects(&text) {
        if json_str(obj, "scope").as_deref() != Some("global") {
            continue;
        }
        let Some(local) = json_str(obj, "local") else {
            continue;
        };
        match local.parse::<IpAddr>() {
            Ok(a @ IpAddr::V4(_)) if v4.is_none() => v4 = Some(a),
            Ok(a @ IpAddr::V6(_)) if v6.is_none() => v6 = Some(a),
            _ => {}
        }
    }
    v4.or(v6)
        .ok_or_else(|| format!("{netdev} has no global IP address"))
}

/// Every port of every RDMA device, in name order.  Err when the machine has none.
pub fn ports(sysfs: &Path) -> Result<Vec<Port>, String> {
    let class = sysfs.join("class/infiniband");
    let mut devs: Vec<PathBuf> = match fs::read_dir(&class) {
        Ok(rd) => rd.flatten().map(|e| e.path()).collect(),
        Err(_) => Vec::new(),
    };
    devs.sort();
    if devs.is_empty() {
        return Err(format!(
            "no RDMA device on this machine ({} is empty or missing)",
            class.display()
        ));
    }
    let links = rdma_link_netdevs();
    let mut ports = Vec::new();
    for d in devs {
        let dev = d
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let node = read(&d.join("node_type")).unwrap_or_default();
        let mut nums: Vec<u32> = fs::read_dir(d.join("ports"))
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        nums.sort();
        for n in nums {
            let pd = d.join(format!("ports/{n}"));
            let state = read(&pd.join("state")).unwrap_or_default();
            let state = state
                .split_once(": ")
                .map(|(_, s)| s.to_string())
                .unwrap_or(state);
            let link_layer = read(&pd.join("link_layer")).unwrap_or_else(|| "unknown".into());
            let transport = if node.contains("RNIC") {
                Transport::Iwarp
            } else if link_layer == "InfiniBand" {
                Transport::Ib
            } else {
                Transport::Roce
            };
            let gid0 = read(&pd.join("gids/0")).unwrap_or_default();
            let netdev = links
                .iter()
                .find(|(ld, lp, _)| *ld == dev && *lp == n)
                .map(|(_, _, nd)| nd.clone())
                .or_else(|| sysfs_netdev(&d, &dev, n));
            let mut p = Port {
                dev: dev.clone(),
                port: n,
                state,
                link_layer,
                transport,
                gid0,
                netdev,
                addr: None,
                unusable: None,
            };
            if p.state != "ACTIVE" {
                p.unusable = Some(format!("port state {}", p.state));
            } else if let Some(nd) = p.netdev.clone() {
                match netdev_addr(&nd) {
                    Ok(a) => p.addr = Some(a),
                    Err(e) => p.unusable = Some(e),
                }
            } else {
                p.unusable = Some("no network interface found for this port".into());
            }
            ports.push(p);
        }
    }
    Ok(ports)
}

// --- a little JSON reading, enough for `rdma -j` and `ip -j` -------------------------

/// The innermost `{...}` objects of a JSON text (those that hold no object), as slices.
pub fn json_objects(s: &str) -> Vec<&str> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut stack: Vec<(usize, bool)> = Vec::new();
    let mut in_str = false;
    let mut esc = false;
    for (i, &c) in b.iter().enumerate() {
        if in_str {
            if esc {
                esc = false;
            } else if c == b'\\' {
                esc = true;
            } else if c == b'"' {
                in_str = false;
            }
            continue;
        }
        match c {
            b'"' => in_str = true,
            b'{' => {
                if let Some(top) = stack.last_mut() {
                    top.1 = true;
                }
                stack.push((i, false));
            }
            b'}' => {
                if let Some((start, nested)) = stack.pop() {
                    if !nested {
                        out.push(&s[start..=i]);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn json_value<'a>(obj: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("\"{key}\":");
    let at = obj.find(&pat)? + pat.len();
    Some(obj[at..].trim_start())
}

pub fn json_str(obj: &str, key: &str) -> Option<String> {
    let v = json_value(obj, key)?.strip_prefix('"')?;
    let end = v.find('"')?;
    Some(v[..end].to_string())
}

pub fn json_num(obj: &str, key: &str) -> Option<u64> {
    let v = json_value(obj, key)?;
    let end = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    v[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_objects_of_ip_and_rdma_output() {
        let ip = r#"[{"ifindex":3,"ifname":"veth0","addr_info":[{"family":"inet","local":"192.0.2.1","prefixlen":24,"scope":"global"},{"family":"inet6","local":"fe80::1","scope":"link"}]}]"#;
        let objs = json_objects(ip);
        assert_eq!(objs.len(), 2);
        assert_eq!(json_str(objs[0], "local").as_deref(), Some("192.0.2.1"));
        assert_eq!(json_str(objs[1], "scope").as_deref(), Some("link"));
        let rdma = r#"[{"ifindex":0,"ifname":"rxe0","port":1,"state":"ACTIVE","physical_state":"LINK_UP","netdev":"veth0","netdev_index":3}]"#;
        let o = json_objects(rdma);
        assert_eq!(json_num(o[0], "port"), Some(1));
        assert_eq!(json_str(o[0], "netdev").as_deref(), Some("veth0"));
        assert_eq!(json_objects(r#"[{"a":"}{"}]"#).len(), 1);
    }

    #[test]
    fn no_device_is_an_error_not_a_panic() {
        let e = ports(Path::new("/nonexistent-sysfs")).unwrap_err();
        assert!(e.starts_with("no RDMA device"), "{e}");
    }
}
