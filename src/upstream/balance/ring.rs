//! A consistent-hash ring: each server owns points in proportion to its
//! weight, a key belongs to the first point at or after its hash, and a
//! server that is out is skipped — so only its keys move, to the servers
//! that follow its points.

/// Points per unit of weight: enough that shares stay within a few
/// percent of the weights.
const POINTS_PER_WEIGHT: u64 = 1_000;

/// At most this many points, however large the weights.
const MAX_POINTS: u64 = 200_000;

#[derive(Debug)]
pub(super) struct Ring {
    /// (point, server), sorted by point.
    points: Vec<(u64, usize)>,
}

impl Ring {
    pub(super) fn new(weights: impl Iterator<Item = u32>) -> Self {
        let weights: Vec<u64> = weights.map(|w| u64::from(w.max(1))).collect();
        let total: u64 = weights.iter().sum::<u64>().max(1);
        let per_weight = (MAX_POINTS / total).clamp(1, POINTS_PER_WEIGHT);
        let mut points = Vec::new();
        for (server, w) in weights.iter().enumerate() {
            for n in 0..w.saturating_mul(per_weight) {
                let label = format!("{server}-{n}");
                points.push((key(label.as_bytes()), server));
            }
        }
        points.sort_unstable();
        Ring { points }
    }

    /// The server for `hash`: the first at or after it on the ring for
    /// which `ok` holds.
    pub(super) fn lookup(&self, hash: u64, ok: impl Fn(usize) -> bool) -> Option<usize> {
        let start = self.points.partition_point(|(p, _)| *p < hash);
        let n = self.points.len();
        (0..n)
            .map(|i| self.points[(start + i) % n].1)
            .find(|&server| ok(server))
    }
}

/// A request key's hash: FNV-1a, then a 64-bit finaliser (splitmix64's)
/// to spread short keys over the ring. Stable across processes and
/// versions, so every weir of a fleet sends a key to the same server.
pub(crate) fn key(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}
