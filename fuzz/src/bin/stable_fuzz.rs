// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Stable-toolchain fuzz harness: random inputs (xorshift, seeded) fed to
//! the same bodies as the libFuzzer targets, for a bounded time.
//!
//!   stable_fuzz [SECONDS [SEED]]     (default 60 s, seed from the clock)

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(60);
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    }) | 1;
    println!("stable_fuzz: {secs} s, seed {seed}");
    let mut x = seed;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Seeds that reach the interesting branches; mutated at random below.
    let seeds: [&[u8]; 4] = [
        b"\x03\x0b192.0.2.1\x00\x047471\x0a\x00\x00\x00\x03\x00\x00\x01\x00\x00",
        b"\x03\x0ffe80::1%1\x00\x00\x00\x00\x00\x044660\x1a\x00\x00\x00\x04\x00\x00",
        b"\x02\x041234\x01\x00\x00\x00\x01\x02\x03\x01\x02\x02\x00\x00\x00\x00",
        b"\x00\x00\x10\x00\x00\x00\x00\x00\x00",
    ];
    // The library's first export call installs its panic hook, which keeps
    // panics of its own object (here: all of this binary) off stderr; make
    // the first call now and put a hook back that prints the failure.
    rdmacm_fuzz::getaddrinfo_one(seeds[0]);
    std::panic::set_hook(Box::new(|info| eprintln!("stable_fuzz: FAILURE: {info}")));
    let t0 = std::time::Instant::now();
    let mut n: u64 = 0;
    while t0.elapsed().as_secs() < secs {
        let r = next();
        let mut data: Vec<u8> = if r % 3 == 0 {
            seeds[(r >> 8) as usize % seeds.len()].to_vec()
        } else {
            let len = (next() % 300) as usize;
            (0..len).map(|_| next() as u8).collect()
        };
        for _ in 0..(next() % 4) {
            if !data.is_empty() {
                let i = next() as usize % data.len();
                data[i] = next() as u8;
            }
        }
        match n % 6 {
            0 => rdmacm_fuzz::getaddrinfo_one(&data),
            1 => rdmacm_fuzz::acm_response_one(&data),
            2 => rdmacm_fuzz::gid_reachable_one(&data),
            3 => rdmacm_fuzz::rsocket_wire::wire_one(&data),
            4 => rdmacm_fuzz::af_ib_hdr::af_ib_one(&data),
            _ => rdmacm_fuzz::events::events_one(&data),
        }
        n += 1;
    }
    println!("stable_fuzz: {n} inputs, no failure");
}
