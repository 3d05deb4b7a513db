// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Link settings for librspreload.so.
//!
//! The library needs librdmacm.so.1 (DT_NEEDED), like upstream's: the
//! loader then picks ours or upstream's the usual way (LD_LIBRARY_PATH, the
//! system's paths).  `RSPRELOAD_RDMACM_DIR` names the directory holding the
//! `librdmacm.so` to link against (the Makefile passes our build/lib);
//! without it the system's linker path is searched.  Only RDMACM_1.0
//! functions are linked; the repoll calls (RDMACM_1.5) are looked up at run
//! time, so the library also loads over an older librdmacm.  No SONAME:
//! upstream's preload library has none either (it is only ever preloaded).

fn main() {
    println!("cargo:rerun-if-env-changed=RSPRELOAD_RDMACM_DIR");
    if let Some(dir) = std::env::var_os("RSPRELOAD_RDMACM_DIR") {
        println!("cargo:rustc-link-search=native={}", dir.to_string_lossy());
    }
    println!("cargo:rustc-link-lib=dylib=rdmacm");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,defs");
}
