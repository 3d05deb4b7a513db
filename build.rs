// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Link settings for librdmacm.so.1.
//!
//! rustc writes its own version script for a cdylib, so a second script
//! cannot assign versions.  We link with lld, give the library its SONAME,
//! and pass a script that only *declares* the version nodes; each export
//! binds itself to a node with a `.symver` directive (src/ffi/mod.rs).

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let map = dir.join("abi/rdmacm.map");
    println!("cargo:rerun-if-changed={}", map.display());
    println!("cargo:rerun-if-changed=src/sys/verbs_shim.c");
    println!("cargo:rerun-if-changed=src/sys/gid_shim.c");
    println!("cargo:rerun-if-changed=src/sys/cancel_shim.c");

    if std::env::var_os("CARGO_FEATURE_SYMVER").is_some() {
        println!("cargo:rustc-cdylib-link-arg=-fuse-ld=lld");
        println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={}", map.display());
    }
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librdmacm.so.1");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,defs");
    // Never unloaded: process-wide state (device contexts, service threads
    // and the thread-local destructors of callers' threads) outlives any
    // dlclose (rdmacm-rs.7, THREADS).
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");

    // Small C shim for libibverbs' static inline functions and struct
    // fields that would otherwise need the whole verbs.h in Rust.
    cc::Build::new()
        .file("src/sys/verbs_shim.c")
        .file("src/sys/gid_shim.c")
        .file("src/sys/cancel_shim.c")
        .flag_if_supported("-Wall")
        .flag_if_supported("-Wextra")
        .flag("-fvisibility=hidden")
        // cancel_shim.c: the unwinder passes through its frames (no
        // -fexceptions: it uses pthread.h's C cleanup protocol).
        .flag("-fasynchronous-unwind-tables")
        .compile("rdmacm_verbs_shim");
    println!("cargo:rustc-link-lib=dylib=ibverbs");
}
