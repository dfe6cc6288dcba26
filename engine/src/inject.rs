//! Time and randomness, injected.
//!
//! Library code in Strata never reads the wall clock or a thread-local
//! generator; it is handed a [`Clock`] and an [`Rng`]. Production code
//! passes [`SystemClock`] and [`SystemRng`]; tests and the simulation pass
//! [`ManualClock`] and [`SeededRng`], so one seed replays one run.

use std::sync::atomic::{AtomicU64, Ordering};

/// A source of time.
pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;

    /// Microseconds since the Unix epoch, for measuring durations (commit
    /// latency metrics). The default is [`Clock::now_ms`] times 1,000.
    fn now_us(&self) -> u64 {
        self.now_ms().saturating_mul(1_000)
    }

    /// Waits `ms` milliseconds (a retry's backoff). A manual clock moves its
    /// reading forward instead of blocking.
    fn sleep_ms(&self, ms: u64);
}

/// A source of randomness.
pub trait Rng: Send {
    /// 64 uniformly random bits.
    fn next_u64(&mut self) -> u64;

    /// A uniform value in `0..n` (`0` when `n` is 0).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Lemire's multiply-shift; the bias is below 2^-64 * n.
        let wide = u128::from(self.next_u64()) * u128::from(n);
        u64::try_from(wide >> 64).unwrap_or(0)
    }

    /// True with probability `p` (clamped to 0..=1).
    fn chance(&mut self, p: f64) -> bool {
        // 53 random bits as a float in [0, 1).
        #[allow(clippy::cast_precision_loss)]
        let x = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        x < p
    }
}

/// The operating system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)] // the one sanctioned wall-clock read
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    #[allow(clippy::disallowed_methods)] // the same sanctioned read, finer
    fn now_us(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }

    fn sleep_ms(&self, ms: u64) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

/// A clock that moves only when told to.
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// A clock reading `ms`.
    pub const fn new(ms: u64) -> Self {
        Self(AtomicU64::new(ms))
    }

    /// Sets the reading (it may go backwards, as real clocks do).
    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }

    /// Moves the reading forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }

    fn sleep_ms(&self, ms: u64) {
        self.advance(ms);
    }
}

/// A deterministic generator (SplitMix64): the same seed, the same stream.
#[derive(Debug, Clone)]
pub struct SeededRng(u64);

impl SeededRng {
    /// A generator for `seed`.
    pub const fn new(seed: u64) -> Self {
        Self(seed)
    }
}

impl Rng for SeededRng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A generator seeded from the operating system's per-process hash keys.
#[derive(Debug, Clone)]
pub struct SystemRng(SeededRng);

impl SystemRng {
    /// A generator with an unpredictable seed.
    #[allow(clippy::disallowed_types)] // the one sanctioned ambient randomness
    pub fn new() -> Self {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(0x5EED);
        Self(SeededRng::new(h.finish()))
    }
}

impl Default for SystemRng {
    fn default() -> Self {
        Self::new()
    }
}

impl Rng for SystemRng {
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
}
