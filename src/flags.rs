//! Per-node flags packed 64 to a word. What a cloth keeps between frames about each node
//! (touching a body, sticking to one) then costs an eighth of a `Vec<bool>`: 506 bytes instead of
//! 4,050 for the 2,025-node sheet's two sets, part of what each further cloth of a shared model
//! adds.

/// A fixed-length set of per-node flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NodeFlags {
    words: Vec<u64>,
    len: usize,
}

impl NodeFlags {
    /// `len` flags, all clear.
    pub fn new(len: usize) -> Self {
        Self {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// Flag `i`.
    pub fn get(&self, i: usize) -> bool {
        self.words[i / 64] >> (i % 64) & 1 == 1
    }

    /// Every flag in order.
    pub fn iter(&self) -> impl Iterator<Item = bool> + '_ {
        (0..self.len).map(|i| self.get(i))
    }

    /// Sets the flags from `bools` (of the same length), without allocating.
    pub fn assign(&mut self, bools: &[bool]) {
        debug_assert_eq!(bools.len(), self.len);
        self.words.fill(0);
        for (i, _) in bools.iter().enumerate().filter(|(_, b)| **b) {
            self.words[i / 64] |= 1 << (i % 64);
        }
    }

    /// The flags as booleans (allocates).
    pub fn to_vec(&self) -> Vec<bool> {
        self.iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flags set from booleans read back as the same booleans, across word boundaries, and
    /// assigning all-false clears them.
    #[test]
    fn flags_round_trip_through_booleans() {
        let bools: Vec<bool> = (0..131)
            .map(|i| i % 3 == 0 || i == 64 || i == 130)
            .collect();
        let mut flags = NodeFlags::new(bools.len());
        assert_eq!(flags.to_vec(), vec![false; 131]);
        flags.assign(&bools);
        assert_eq!(flags.to_vec(), bools);
        flags.assign(&[false; 131]);
        assert_eq!(flags.to_vec(), vec![false; 131]);
    }
}
