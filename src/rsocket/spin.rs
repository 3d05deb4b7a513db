// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
//! Whether a blocked call busy-polls before it sleeps.
//!
//! `polling_time` (the rsocket configuration) is how long a call that
//! would block busy-polls the CQ before it arms it and sleeps, as upstream.
//! A busy poll pays off only when the answer comes within that time; when
//! it does not (a peer slower than the window: a server waiting for its
//! next request, a loaded or emulated machine), the spin is CPU taken from
//! the threads that would produce the answer. Each stream therefore
//! remembers how its recent spins ended: after [`MISS_LIMIT`] spins in a
//! row that ended in a sleep anyway, its blocked calls sleep at once, but
//! for one spin every [`PROBE_EVERY`] waits; a spin that finds its answer
//! (a probe's included) makes the stream spin on every wait again. A call
//! never spins longer than `polling_time`.
#![deny(unsafe_code)]

/// Spins in a row that ended in a sleep, after which the stream stops
/// spinning.
pub const MISS_LIMIT: u8 = 4;
/// While the stream does not spin, one wait in this many spins (a probe).
pub const PROBE_EVERY: u8 = 16;

/// A stream's record of its recent spins.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpinPolicy {
    /// Spins in a row that ended in a sleep (at most [`MISS_LIMIT`]).
    misses: u8,
    /// Waits without a spin since the stream stopped spinning (or since
    /// the last probe).
    skipped: u8,
}

impl SpinPolicy {
    /// A blocked call is about to spin or sleep: whether it spins.
    pub fn begin(&mut self) -> bool {
        if self.spinning() {
            return true;
        }
        self.skipped += 1;
        if self.skipped >= PROBE_EVERY {
            self.skipped = 0;
            return true;
        }
        false
    }

    /// The spin found its answer: spin on every wait again.
    pub fn hit(&mut self) {
        *self = SpinPolicy::default();
    }

    /// The spin's time ran out: the call sleeps.
    pub fn miss(&mut self) {
        if self.spinning() {
            self.misses += 1;
        }
    }

    /// Whether the stream's blocked calls currently spin on every wait.
    pub fn spinning(&self) -> bool {
        self.misses < MISS_LIMIT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` waits in a row, each spinning and ending in a sleep.
    fn misses(p: &mut SpinPolicy, n: u8) {
        for _ in 0..n {
            assert!(p.begin());
            p.miss();
        }
    }

    #[test]
    fn spins_until_the_misses_add_up() {
        let mut p = SpinPolicy::default();
        misses(&mut p, MISS_LIMIT);
        assert!(!p.spinning());
        // Then only one wait in PROBE_EVERY spins.
        let spun = (0..PROBE_EVERY as u32 * 3).filter(|_| {
            let s = p.begin();
            if s {
                p.miss();
            }
            s
        });
        assert_eq!(spun.count(), 3);
        assert!(!p.spinning());
    }

    #[test]
    fn a_hit_resets() {
        let mut p = SpinPolicy::default();
        misses(&mut p, MISS_LIMIT - 1);
        // One hit before the limit: the count starts over.
        assert!(p.begin());
        p.hit();
        misses(&mut p, MISS_LIMIT - 1);
        assert!(p.spinning());
        misses(&mut p, 1);
        assert!(!p.spinning());
    }

    #[test]
    fn a_probe_that_hits_resumes_spinning() {
        let mut p = SpinPolicy::default();
        misses(&mut p, MISS_LIMIT);
        let mut waits = 0;
        while !p.begin() {
            waits += 1;
        }
        assert_eq!(waits, PROBE_EVERY - 1);
        p.hit();
        assert!(p.spinning());
        assert!(p.begin());
    }
}
