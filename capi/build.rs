// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Link settings for librdmacm.so.1.
//!
//! rustc writes its own version script for a cdylib, so a second script
//! cannot assign versions.  We link with lld, give the library its SONAME,
//! and pass a script that only *declares* the version nodes; each export
//! binds itself to a node with a `.symver` directive (capi/src/lib.rs,
//! `symver!`).  The C shims and libibverbs come with the `rdmacm` crate
//! (../build.rs).

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let map = dir.join("../abi/rdmacm.map");
    println!("cargo:rerun-if-changed={}", map.display());

    if std::env::var_os("CARGO_FEATURE_SYMVER").is_some() {
        println!("cargo:rustc-cdylib-link-arg=-fuse-ld=lld");
        println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={}", map.display());
        link_order();
    }
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librdmacm.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,defs");
    // Never unloaded: process-wide state (device contexts, service threads
    // and the thread-local destructors of callers' threads) outlives any
    // dlclose (rdmacm-rs.7, THREADS).
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
}

/// The hot path first: `make lib` links the library once, lists the
/// symbols of the functions capi/hot.txt names (scripts/link-order.sh)
/// into the file RDMACM_LINK_ORDER names, and links again with lld placing
/// them in that order, side by side (docs/performance.md, "Code layout").
/// No file yet (a first build, or cargo run by hand): the linker's own
/// order. Symbol names do not depend on the order, so a list made from one
/// link serves the next.
fn link_order() {
    println!("cargo:rerun-if-env-changed=RDMACM_LINK_ORDER");
    let Some(f) = std::env::var_os("RDMACM_LINK_ORDER") else { return };
    let f = PathBuf::from(f);
    println!("cargo:rerun-if-changed={}", f.display());
    if std::fs::metadata(&f).is_ok_and(|m| m.len() > 0) {
        println!("cargo:rustc-cdylib-link-arg=-Wl,--symbol-ordering-file={}", f.display());
        // (a name the list has and this link does not is no error)
        println!("cargo:rustc-cdylib-link-arg=-Wl,--no-warn-symbol-ordering");
    }
}
