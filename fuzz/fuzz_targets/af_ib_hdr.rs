// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    rdmacm_fuzz::af_ib_hdr::af_ib_one(data);
});
