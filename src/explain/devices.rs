// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! The RDMA devices, their ports and GID tables, and the network devices
//! they sit on, as the kernel publishes them in sysfs
//! (`/sys/class/infiniband`, `/sys/class/net`): the same tables
//! libibverbs' `ibv_query_gid_ex` reads.
#![deny(unsafe_code)]

use super::json::J;
use std::path::{Path, PathBuf};

/// One GID table entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gid {
    pub index: u32,
    pub gid: [u8; 16],
    /// "RoCE v2", "IB/RoCE v1", or None when the kernel gives no type
    /// (InfiniBand, iWARP).
    pub kind: Option<String>,
    /// The network device bound to the entry (RoCE).
    pub netdev: Option<String>,
}

/// One port of an RDMA device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    pub device: String,
    pub port: u8,
    /// "ACTIVE", "DOWN", ... (the text after sysfs's "4: ").
    pub state: String,
    /// "Ethernet" or "InfiniBand".
    pub link_layer: String,
    /// The network device this port sits on, if any: the one its GID
    /// entries name, or (iWARP, whose GIDs name none) the one whose MAC
    /// address GID 0 carries.
    pub netdev: Option<String>,
    pub gids: Vec<Gid>,
}

/// A device: its name, node GUID (as sysfs prints it) and ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    pub name: String,
    pub node_guid: String,
    pub node_type: String,
    pub ports: Vec<Port>,
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn dir_names(p: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(p)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort_by(|a, b| match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        _ => a.cmp(b),
    });
    v
}

/// Parses "fe80:0000:...:0001" (sysfs) into 16 bytes.
pub fn parse_gid(s: &str) -> Option<[u8; 16]> {
    let hex: String = s.chars().filter(|c| *c != ':').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut g = [0u8; 16];
    for (i, b) in g.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(g)
}

/// A GID as an IPv6 address text (how RoCE GIDs read best).
pub fn gid_text(g: &[u8; 16]) -> String {
    std::net::Ipv6Addr::from(*g).to_string()
}

/// The MAC address of a network device.
fn mac_of(netdev: &str, root: &Path) -> Option<Vec<u8>> {
    let s = read(&root.join("class/net").join(netdev).join("address"))?;
    s.split(':').map(|x| u8::from_str_radix(x, 16).ok()).collect()
}

fn port_of(root: &Path, dev: &str, port_dir: &Path, port: u8) -> Port {
    let state = read(&port_dir.join("state")).unwrap_or_default();
    let state = state.split_once(": ").map_or(state.clone(), |(_, s)| s.to_string());
    let link_layer = read(&port_dir.join("link_layer")).unwrap_or_default();
    let mut gids = Vec::new();
    for idx in dir_names(&port_dir.join("gids")) {
        let Ok(index) = idx.parse::<u32>() else { continue };
        let Some(gid) = read(&port_dir.join("gids").join(&idx)).and_then(|s| parse_gid(&s)) else { continue };
        if gid == [0u8; 16] {
            continue;
        }
        let kind = read(&port_dir.join("gid_attrs/types").join(&idx)).filter(|s| !s.is_empty());
        let netdev = read(&port_dir.join("gid_attrs/ndevs").join(&idx)).filter(|s| !s.is_empty());
        gids.push(Gid { index, gid, kind, netdev });
    }
    let mut netdev = gids.iter().find_map(|g| g.netdev.clone());
    if netdev.is_none() {
        if let Some(g0) = gids.first() {
            // iWARP GIDs carry the MAC address in their first six bytes.
            netdev = dir_names(&root.join("class/net"))
                .into_iter()
                .find(|n| mac_of(n, root).is_some_and(|m| m.len() == 6 && m[..] == g0.gid[..6] && m.iter().any(|&b| b != 0)));
        }
    }
    Port { device: dev.to_string(), port, state, link_layer, netdev, gids }
}

/// Every RDMA device under `root` (normally `/sys`).
pub fn devices_at(root: &Path) -> Vec<Device> {
    let base: PathBuf = root.join("class/infiniband");
    dir_names(&base)
        .into_iter()
        .map(|name| {
            let d = base.join(&name);
            let ports = dir_names(&d.join("ports"))
                .into_iter()
                .filter_map(|p| p.parse::<u8>().ok())
                .map(|p| port_of(root, &name, &d.join("ports").join(p.to_string()), p))
                .collect();
            Device {
                node_guid: read(&d.join("node_guid")).unwrap_or_default(),
                node_type: read(&d.join("node_type")).unwrap_or_default(),
                name,
                ports,
            }
        })
        .collect()
}

/// Every RDMA device of this system.
pub fn devices() -> Vec<Device> {
    devices_at(Path::new("/sys"))
}

/// The device whose node GUID (big-endian, as the kernel reports it in
/// the ucma answers) is `guid`.
pub fn by_guid(devs: &[Device], guid: u64) -> Option<&Device> {
    let b = guid.to_ne_bytes();
    let text = format!("{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
    devs.iter().find(|d| d.node_guid == text)
}

/// The ports sitting on network device `netdev`.
pub fn ports_on<'a>(devs: &'a [Device], netdev: &str) -> Vec<&'a Port> {
    devs.iter().flat_map(|d| d.ports.iter()).filter(|p| p.netdev.as_deref() == Some(netdev)).collect()
}

impl Port {
    /// The port as a JSON object (for `--all-devices` and the device step).
    pub fn to_json(&self, with_gids: bool) -> J {
        let mut o = J::obj()
            .with("device", self.device.as_str())
            .with("port", self.port)
            .with("state", self.state.as_str())
            .with("link_layer", self.link_layer.as_str())
            .with("netdev", self.netdev.clone());
        if with_gids {
            let gids: Vec<J> = self
                .gids
                .iter()
                .map(|g| {
                    J::obj()
                        .with("index", g.index)
                        .with("gid", gid_text(&g.gid))
                        .with("type", g.kind.clone())
                        .with("netdev", g.netdev.clone())
                })
                .collect();
            o.set("gids", J::Arr(gids));
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_tables() {
        let root = std::env::temp_dir().join(format!("rdma-resolve-sysfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let w = |p: &str, s: &str| {
            let f = root.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, s).unwrap();
        };
        w("class/infiniband/rxe0/node_guid", "5054:00ff:fe12:3456\n");
        w("class/infiniband/rxe0/ports/1/state", "4: ACTIVE\n");
        w("class/infiniband/rxe0/ports/1/link_layer", "Ethernet\n");
        w("class/infiniband/rxe0/ports/1/gids/0", "fe80:0000:0000:0000:5054:00ff:fe12:3456\n");
        w("class/infiniband/rxe0/ports/1/gid_attrs/types/0", "IB/RoCE v1\n");
        w("class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0", "veth0\n");
        w("class/infiniband/rxe0/ports/1/gids/1", "0000:0000:0000:0000:0000:ffff:c000:0201\n");
        w("class/infiniband/rxe0/ports/1/gid_attrs/types/1", "RoCE v2\n");
        w("class/infiniband/rxe0/ports/1/gid_attrs/ndevs/1", "veth0\n");
        w("class/infiniband/rxe0/ports/1/gids/2", "0000:0000:0000:0000:0000:0000:0000:0000\n");
        w("class/infiniband/siw0/node_guid", "0a0b:0c0d:0e0f:0000\n");
        w("class/infiniband/siw0/ports/1/state", "4: ACTIVE\n");
        w("class/infiniband/siw0/ports/1/link_layer", "Ethernet\n");
        w("class/infiniband/siw0/ports/1/gids/0", "0a0b:0c0d:0e0f:0000:0000:0000:0000:0000\n");
        w("class/net/veth2/address", "0a:0b:0c:0d:0e:0f\n");
        w("class/net/veth0/address", "52:54:00:12:34:56\n");
        let d = devices_at(&root);
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(d.len(), 2);
        let p = &d[0].ports[0];
        assert_eq!((p.state.as_str(), p.netdev.as_deref()), ("ACTIVE", Some("veth0")));
        assert_eq!(p.gids.len(), 2, "the zero GID is not listed");
        assert_eq!(gid_text(&p.gids[1].gid), "::ffff:192.0.2.1");
        assert_eq!(p.gids[1].kind.as_deref(), Some("RoCE v2"));
        assert_eq!(d[1].ports[0].netdev.as_deref(), Some("veth2"), "iWARP: by the MAC in GID 0");
        assert_eq!(ports_on(&d, "veth2")[0].device, "siw0");
        let guid = u64::from_ne_bytes([0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56]);
        assert_eq!(by_guid(&d, guid).unwrap().name, "rxe0");
    }
}
