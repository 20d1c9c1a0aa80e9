//! Cumulative weight ranges of a peer list, built at load: the weight walk of ip_hash and hash, random's peek.

use super::PeerList;

/// `starts[i]` = Σ weight of the peers before `i` (down ones included), and the total.
#[derive(Debug, Clone, Default)]
pub struct WeightRanges {
    starts: Vec<u64>,
    total: u64,
}

impl WeightRanges {
    /// The ranges of `list`'s configured weights.
    pub fn new(list: &PeerList) -> WeightRanges {
        let mut total = 0;
        let starts = list
            .peers
            .iter()
            .map(|p| {
                let start = total;
                total += u64::from(p.weight);
                start
            })
            .collect();
        WeightRanges { starts, total }
    }

    /// The range starts.
    pub fn starts(&self) -> &[u64] {
        &self.starts
    }

    /// Σ weight.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The index whose range holds `w`: the largest `i` with `starts[i] <= w`, by nginx's binary search over
    /// `[0, n)` (random's peek). As weights are at least 1, this is also the peer that nginx's linear weight walk
    /// (ip_hash, hash) stops at, in O(log n).
    #[inline]
    pub fn index_of(&self, w: u64) -> usize {
        let (mut i, mut j) = (0, self.starts.len());
        while j - i > 1 {
            let k = (i + j) / 2;
            if self.starts.get(k).is_some_and(|&s| w < s) {
                j = k;
            } else {
                i = k;
            }
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::balance::testkit::peer_list;
    use proptest::prelude::*;

    #[test]
    fn rnd_ranges_and_x_to_index() {
        let r = WeightRanges::new(&peer_list(&[5, 1, 1]));
        assert_eq!((r.starts(), r.total()), (&[0, 5, 6][..], 7));
        let got: Vec<usize> = (0..7).map(|x| r.index_of(x)).collect();
        assert_eq!(got, [0, 0, 0, 0, 0, 1, 2]);
        let r = WeightRanges::new(&peer_list(&[1, 2, 3, 4]));
        let got: Vec<usize> = (0..10).map(|x| r.index_of(x)).collect();
        assert_eq!(got, [0, 1, 1, 2, 2, 2, 3, 3, 3, 3]);
    }

    proptest! {
        #[test]
        fn binary_search_equals_the_linear_walk(weights in proptest::collection::vec(1u32..50, 1..40)) {
            let list = peer_list(&weights);
            let r = WeightRanges::new(&list);
            prop_assert_eq!(r.total(), list.total_weight);
            for w in 0..list.total_weight {
                prop_assert_eq!(r.index_of(w), list.weight_walk(w), "w = {}", w);
            }
        }
    }
}
