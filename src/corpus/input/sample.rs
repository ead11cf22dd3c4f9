//! `--sample N --seed S`: a fixed number of rows picked uniformly from an input of any
//! length, reproducibly.

/// Reservoir sampling (Vitter's algorithm R) with a seeded generator: the same rows for the
/// same input and seed. Memory grows with N (the rows kept), not with the input. The rows kept,
/// in input order, and how many there were.
pub(super) fn reservoir<T>(items: impl Iterator<Item = T>, n: u64, seed: u64) -> (Vec<T>, u64) {
    let mut rng = SplitMix64(seed);
    let mut kept: Vec<(u64, T)> = Vec::new();
    let mut seen = 0u64;
    for item in items {
        if (seen as usize) < n as usize {
            kept.push((seen, item));
        } else {
            let j = rng.below(seen + 1);
            if j < n {
                kept[j as usize] = (seen, item);
            }
        }
        seen += 1;
    }
    kept.sort_by_key(|(order, _)| *order);
    (kept.into_iter().map(|(_, item)| item).collect(), seen)
}

/// A small seeded generator for sampling (splitmix64: full period, good enough to pick rows,
/// and reproducible everywhere without a dependency).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (Lemire's multiply-shift with rejection, so no modulo bias).
    fn below(&mut self, bound: u64) -> u64 {
        loop {
            let m = u128::from(self.next()) * u128::from(bound);
            let low = m as u64;
            if low >= bound.wrapping_neg() % bound {
                return (m >> 64) as u64;
            }
        }
    }
}
