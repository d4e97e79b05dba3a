//! A small compressed-sparse-row matrix for assembling the constant system matrix.
//!
//! The crate assembles `sum_c w_c A_c^T A_c` from triplets once per model, then splits it into the
//! free-free block (factored, see [`crate::factor`]) and the free-pinned block (applied to pin
//! targets every substep). Kept free of any solver dependency.

/// A square sparse matrix in CSR form with sorted, unique column indices per row.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CsrMatrix {
    pub n: usize,
    pub row_ptr: Vec<u32>,
    pub cols: Vec<u32>,
    pub vals: Vec<f64>,
}

impl CsrMatrix {
    /// Sums duplicate `(row, col, value)` triplets into an `n x n` CSR matrix.
    pub fn from_triplets(n: usize, triplets: &mut [(u32, u32, f64)]) -> Self {
        triplets.sort_unstable_by_key(|&(r, c, _)| (r, c));
        let mut row_ptr = vec![0u32; n + 1];
        let mut cols = Vec::with_capacity(triplets.len() / 2);
        let mut vals: Vec<f64> = Vec::with_capacity(triplets.len() / 2);
        let mut last: Option<(u32, u32)> = None;
        for &(r, c, v) in triplets.iter() {
            if last == Some((r, c)) {
                *vals.last_mut().expect("a previous entry exists") += v;
            } else {
                cols.push(c);
                vals.push(v);
                row_ptr[r as usize + 1] += 1;
                last = Some((r, c));
            }
        }
        for i in 0..n {
            row_ptr[i + 1] += row_ptr[i];
        }
        Self {
            n,
            row_ptr,
            cols,
            vals,
        }
    }

    /// Entries of row `r` as `(cols, vals)`.
    pub fn row(&self, r: usize) -> (&[u32], &[f64]) {
        let range = self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize;
        (&self.cols[range.clone()], &self.vals[range])
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.cols.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Duplicates are summed and rows come out sorted.
    #[test]
    fn triplets_are_summed_into_sorted_rows() {
        let mut t = vec![(1, 0, 1.0), (0, 1, 2.0), (1, 0, 3.0), (0, 0, 5.0)];
        let m = CsrMatrix::from_triplets(2, &mut t);
        assert_eq!(m.row(0), (&[0u32, 1][..], &[5.0, 2.0][..]));
        assert_eq!(m.row(1), (&[0u32][..], &[4.0][..]));
    }
}
