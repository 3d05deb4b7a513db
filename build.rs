// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Native parts of the `rdmacm` crate: the C shims (libibverbs' static
//! inline functions, the gid helpers, glibc's cancellation protocol) and
//! libibverbs itself.  The shared library's link settings (SONAME, symbol
//! versions) are capi/build.rs's.

fn main() {
    println!("cargo:rerun-if-changed=src/sys/verbs_shim.c");
    println!("cargo:rerun-if-changed=src/sys/gid_shim.c");
    println!("cargo:rerun-if-changed=src/sys/cancel_shim.c");
    println!("cargo:rerun-if-changed=src/sys/cleanup_shim.c");

    // Small C shim for libibverbs' static inline functions and struct
    // fields that would otherwise need the whole verbs.h in Rust: the
    // connection manager's verbs calls and the one data path of the Rust
    // API and rsockets (src/sys/verbs/).
    shim_build()
        .file("src/sys/verbs_shim.c")
        .file("src/sys/gid_shim.c")
        .file("src/sys/cancel_shim.c")
        // cancel_shim.c: the unwinder passes through its frames (no
        // -fexceptions: it uses pthread.h's C cleanup protocol).
        .flag("-fasynchronous-unwind-tables")
        .compile("rdmacm_verbs_shim");
    // The one wait whose cleanup is the unwinder's (-fexceptions: the
    // cleanup is in the unwind tables, nothing registered per call).
    shim_build().file("src/sys/cleanup_shim.c").flag("-fexceptions").compile("rdmacm_cleanup_shim");
    println!("cargo:rustc-link-lib=dylib=ibverbs");
}

/// The flags every C shim is built with.
fn shim_build() -> cc::Build {
    let mut b = cc::Build::new();
    b.flag_if_supported("-Wall")
        .flag_if_supported("-Wextra")
        .flag("-fvisibility=hidden")
        // calls into libc and libibverbs through the GOT, as rustc makes
        // them: one jump less per call (the rsocket path makes a dozen)
        .flag_if_supported("-fno-plt");
    b
}
