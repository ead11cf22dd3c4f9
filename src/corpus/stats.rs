//! Exact distributions of token counts: a count per distinct value, so percentiles are exact,
//! merging is order-independent (workers merge in any order and the result is the same), and
//! memory grows with the number of distinct values (at most the longest prompt), not with the
//! number of transitions.

use std::collections::HashMap;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Distribution {
    counts: HashMap<u64, u64>,
    count: u64,
    sum: u128,
}

/// In a file (a corpus partial): each distinct value and its count, smallest value first, so
/// the same distribution is always written the same way. The count and the sum are derived
/// again when it is read, so a file cannot make them disagree with the counts.
#[derive(serde::Serialize, serde::Deserialize)]
struct Written {
    counts: Vec<(u64, u64)>,
}

impl serde::Serialize for Distribution {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Written {
            counts: self.sorted(),
        }
        .serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for Distribution {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let written = Written::deserialize(d)?;
        let mut out = Distribution::default();
        for (v, c) in written.counts {
            if c == 0 || out.counts.insert(v, c).is_some() {
                return Err(D::Error::custom(format!(
                    "value {v} listed twice or with a count of 0"
                )));
            }
            out.count = out
                .count
                .checked_add(c)
                .ok_or_else(|| D::Error::custom("more observations than a count holds"))?;
            // At most 2^64 values below 2^64 each: the sum fits in 128 bits.
            out.sum += u128::from(v) * u128::from(c);
        }
        Ok(out)
    }
}

/// What the reports print of a distribution (the JSON shape of one, too).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    pub count: u64,
    pub sum: u128,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

/// One bar of a histogram: values in `[low, high]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bucket {
    pub low: u64,
    pub high: u64,
    pub count: u64,
}

impl Distribution {
    pub fn add(&mut self, value: u64) {
        *self.counts.entry(value).or_default() += 1;
        self.count += 1;
        self.sum += u128::from(value);
    }

    pub fn merge(&mut self, other: Distribution) {
        for (v, c) in other.counts {
            *self.counts.entry(v).or_default() += c;
        }
        self.count += other.count;
        self.sum += other.sum;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The nearest-rank `p`-th percentile (as [`summary`](Self::summary) gives them).
    pub fn percentile(&self, p: u64) -> u64 {
        self.at_percentile(&self.sorted(), p)
    }

    /// The smallest value v such that at least p% of the observations are <= v (rank
    /// ceil(p/100 * n), 1-based), in `sorted`.
    fn at_percentile(&self, sorted: &[(u64, u64)], p: u64) -> u64 {
        // ceil(p * n / 100) with integers only, at least 1.
        let rank = (u128::from(p) * u128::from(self.count))
            .div_ceil(100)
            .max(1);
        let mut seen = 0u128;
        for &(v, c) in sorted {
            seen += u128::from(c);
            if seen >= rank {
                return v;
            }
        }
        0
    }

    /// How many observations are below `n`, and their sum.
    pub fn below(&self, n: u64) -> (u64, u128) {
        self.counts
            .iter()
            .filter(|(v, _)| **v < n)
            .fold((0, 0), |(c, s), (&v, &k)| {
                (c + k, s + u128::from(v) * u128::from(k))
            })
    }

    pub fn sum(&self) -> u128 {
        self.sum
    }

    fn sorted(&self) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = self.counts.iter().map(|(&v, &c)| (v, c)).collect();
        v.sort_unstable();
        v
    }

    /// Nearest-rank percentiles: the p-th percentile is the smallest value v such that at least
    /// p% of the observations are <= v (rank ceil(p/100 * n), 1-based). Always an observed
    /// value; 0 for an empty distribution.
    pub fn summary(&self) -> Summary {
        let sorted = self.sorted();
        Summary {
            count: self.count,
            sum: self.sum,
            mean: if self.count == 0 {
                0.0
            } else {
                self.sum as f64 / self.count as f64
            },
            p50: self.at_percentile(&sorted, 50),
            p90: self.at_percentile(&sorted, 90),
            p99: self.at_percentile(&sorted, 99),
            max: sorted.last().map_or(0, |&(v, _)| v),
        }
    }

    /// Buckets whose bounds double: `0`, `1`, `2-3`, `4-7`, … up to the largest value, so
    /// counts from a few tokens to a whole long prompt fit one chart. Empty buckets between
    /// the smallest and the largest are kept (a chart shows the gap).
    pub fn histogram(&self) -> Vec<Bucket> {
        let sorted = self.sorted();
        let Some(&(max, _)) = sorted.last() else {
            return Vec::new();
        };
        let bucket_of = |v: u64| -> usize {
            if v == 0 {
                0
            } else {
                64 - v.leading_zeros() as usize
            }
        };
        let bounds = |i: usize| -> (u64, u64) {
            if i == 0 {
                (0, 0)
            } else {
                let low = 1u64 << (i - 1);
                (low, low.saturating_mul(2) - 1)
            }
        };
        let first = bucket_of(sorted[0].0);
        let mut out: Vec<Bucket> = (first..=bucket_of(max))
            .map(|i| {
                let (low, high) = bounds(i);
                Bucket {
                    low,
                    high,
                    count: 0,
                }
            })
            .collect();
        for (v, c) in sorted {
            out[bucket_of(v) - first].count += c;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(values: &[u64]) -> Distribution {
        let mut d = Distribution::default();
        for &v in values {
            d.add(v);
        }
        d
    }

    #[test]
    fn nearest_rank_percentiles() {
        // 1..=100: p50 = 50, p90 = 90, p99 = 99 by nearest rank.
        let d = of(&(1..=100).collect::<Vec<_>>());
        let s = d.summary();
        assert_eq!((s.p50, s.p90, s.p99, s.max), (50, 90, 99, 100));
        assert_eq!(s.sum, 5050);
        assert_eq!(s.mean, 50.5);
        // Four values: rank ceil(0.5*4)=2 -> 20; ceil(0.9*4)=4 -> 40; ceil(0.99*4)=4 -> 40.
        let s = of(&[40, 10, 30, 20]).summary();
        assert_eq!((s.p50, s.p90, s.p99), (20, 40, 40));
        // One value: every percentile is it.
        let s = of(&[7]).summary();
        assert_eq!((s.p50, s.p90, s.p99, s.max), (7, 7, 7, 7));
        assert_eq!(Distribution::default().summary(), Summary::default());
    }

    #[test]
    fn repeated_values_count_each_time() {
        // 9 zeros and one 1000: p50 and p90 are 0, p99 is the outlier.
        let mut v = vec![0; 9];
        v.push(1000);
        let s = of(&v).summary();
        assert_eq!(
            (s.p50, s.p90, s.p99, s.max, s.count),
            (0, 0, 1000, 1000, 10)
        );
    }

    #[test]
    fn merge_is_order_independent() {
        let (a, b) = (of(&[1, 5, 5, 9]), of(&[5, 2, 100]));
        let mut ab = a.clone();
        ab.merge(b.clone());
        let mut ba = b;
        ba.merge(a);
        assert_eq!(ab, ba);
        assert_eq!(ab, of(&[1, 5, 5, 9, 5, 2, 100]));
    }

    #[test]
    fn written_and_read_back() {
        let d = of(&[5, 1, 5, 9, 0]);
        let text = serde_json::to_string(&d).unwrap();
        assert_eq!(text, r#"{"counts":[[0,1],[1,1],[5,2],[9,1]]}"#);
        let back: Distribution = serde_json::from_str(&text).unwrap();
        assert_eq!(back, d);
        assert_eq!((back.count(), back.sum()), (5, 20));
        // A value twice, or a count of zero, is not a distribution kvaudit wrote.
        assert!(serde_json::from_str::<Distribution>(r#"{"counts":[[1,1],[1,2]]}"#).is_err());
        assert!(serde_json::from_str::<Distribution>(r#"{"counts":[[1,0]]}"#).is_err());
        let over = format!(r#"{{"counts":[[1,{}],[2,1]]}}"#, u64::MAX);
        assert!(serde_json::from_str::<Distribution>(&over).is_err());
    }

    #[test]
    fn histogram_buckets_double() {
        let h = of(&[0, 1, 2, 3, 4, 7, 8, 100]).histogram();
        let got: Vec<(u64, u64, u64)> = h.iter().map(|b| (b.low, b.high, b.count)).collect();
        assert_eq!(
            got,
            vec![
                (0, 0, 1),
                (1, 1, 1),
                (2, 3, 2),
                (4, 7, 2),
                (8, 15, 1),
                (16, 31, 0),
                (32, 63, 0),
                (64, 127, 1)
            ]
        );
        // Starts at the smallest value's bucket.
        let h = of(&[20, 40]).histogram();
        assert_eq!((h[0].low, h.len()), (16, 2));
        assert!(Distribution::default().histogram().is_empty());
    }
}
