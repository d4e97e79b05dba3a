//! Sparse Cholesky factorisation of the constant system matrix. The only module that uses faer.
//!
//! Split as faer splits it: [`SymbolicFactor`] (fill-reducing AMD ordering and elimination
//! structure, depends on the sparsity pattern only) and [`NumericFactor`] (the values of `L`,
//! depends on the matrix values). Models whose matrices share a pattern (backward Euler and BDF2
//! differ only on the diagonal) share one symbolic factor. The simplicial factorisation is forced:
//! at cloth sizes its solve is faster than the supernodal one faer would pick automatically.
//! faer's supernodal factorisation, without relaxation so that its blocks hold exactly the
//! pattern of `L`, built the model of the 2,025-node sheet in 5.4 ms instead of 8.4 ms, but the
//! process then held 67 MB more live heap after the build (the dense kernels' buffers): not
//! taken for a game component.
//!
//! The solve is ours: faer orders and factors, then the values are laid out for the solve (the
//! reciprocal of the diagonal apart, the off-diagonal values column by column with 16-bit row
//! indices where the system has at most 65,536 rows: 10 bytes per nonzero instead of 12), and
//! [`NumericFactor::solve_permuted`] sweeps the columns with x, y and z together (three
//! multiply-adds per nonzero read). The caller gathers the right-hand side directly in the
//! factor's ordering, so a solve allocates nothing and copies nothing.
//!
//! Measured (`cargo bench --bench stages`, 2,025 nodes, 105,411 nonzeros): a solve takes about
//! 120 us where streaming the same arrays twice takes 24 us, so the solve is bound by its
//! instructions (a dependent scatter, then gather, of three scalars per nonzero), not by memory
//! traffic, at this size. Not kept:
//! - a padded 4-wide right-hand side for paired SSE2 arithmetic (155 us);
//! - fused multiply-adds behind run-time FMA detection (156 us: the fused operation's longer
//!   latency sits on the dependence chains);
//! - two or four partial sums per column in the backward sweep: 117 -> 108 us in the stage
//!   bench, but the `hanging_sheet` frame went 2.63 -> 2.91 ms, and 2.53 ms once a counter was
//!   added to the solve. The frame moves by 10 % with code layout alone, so neither was a
//!   reliable gain.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::LltRegularization;
use faer::sparse::linalg::SupernodalThreshold;
use faer::sparse::linalg::cholesky::{
    CholeskySymbolicParams, SymbolicCholesky, SymbolicCholeskyRaw, SymmetricOrdering,
    factorize_symbolic_cholesky,
};
use faer::sparse::{SparseColMatRef, SymbolicSparseColMatRef};
use faer::{Par, Side};
use std::ops::{Mul, Sub};

use glam::DVec3;

use crate::error::ClothError;
use crate::sparse::CsrMatrix;

/// Lower triangle of a symmetric matrix in compressed-column form (= upper triangle of its CSR).
#[derive(Debug, Clone)]
struct LowerCsc {
    n: usize,
    col_ptr: Vec<u32>,
    row_idx: Vec<u32>,
    vals: Vec<f64>,
}

impl LowerCsc {
    fn from_symmetric(m: &CsrMatrix) -> Self {
        let mut col_ptr = Vec::with_capacity(m.n + 1);
        let mut row_idx = Vec::new();
        let mut vals = Vec::new();
        col_ptr.push(0);
        for r in 0..m.n {
            let (cols, v) = m.row(r);
            for (&c, &x) in cols.iter().zip(v) {
                if c as usize >= r {
                    row_idx.push(c);
                    vals.push(x);
                }
            }
            col_ptr.push(row_idx.len() as u32);
        }
        Self {
            n: m.n,
            col_ptr,
            row_idx,
            vals,
        }
    }

    fn symbolic(&self) -> SymbolicSparseColMatRef<'_, u32> {
        SymbolicSparseColMatRef::new_checked(self.n, self.n, &self.col_ptr, None, &self.row_idx)
    }
}

/// The symbolic Cholesky factor of a sparsity pattern: ordering and structure of `L`.
#[derive(Debug)]
pub(crate) struct SymbolicFactor {
    /// faer's analysis, needed to factor numerically; released once the model's factors exist
    /// (it holds another copy of the structure of `L`).
    inner: Option<SymbolicCholesky<u32>>,
    /// Column pointers of `L` as faer stores it (diagonal entry first in each column).
    col_ptr: Vec<u32>,
    /// Off-diagonal entries of column `j` are `off_ptr[j]..off_ptr[j + 1]` of the solve arrays.
    off_ptr: Vec<u32>,
    /// Their row indices, 16-bit where the system has at most 65,536 rows.
    off_rows: Rows,
    /// `perm[i]`: the original row that becomes row `i` of the permuted system.
    perm: Vec<u32>,
}

impl SymbolicFactor {
    /// Analyses the pattern of the symmetric matrix `m` (both triangles stored).
    pub fn analyze(m: &CsrMatrix) -> Result<Self, ClothError> {
        let lower = LowerCsc::from_symmetric(m);
        let params = CholeskySymbolicParams {
            supernodal_flop_ratio_threshold: SupernodalThreshold::FORCE_SIMPLICIAL,
            ..Default::default()
        };
        let inner = factorize_symbolic_cholesky(
            lower.symbolic(),
            Side::Lower,
            SymmetricOrdering::Amd,
            params,
        )
        .map_err(|e| ClothError::Factorization(format!("symbolic analysis failed: {e:?}")))?;
        let SymbolicCholeskyRaw::Simplicial(simplicial) = inner.raw() else {
            return Err(ClothError::Factorization(
                "expected a simplicial factorisation".into(),
            ));
        };
        let col_ptr = simplicial.col_ptr().to_vec();
        let row_idx = simplicial.row_idx();
        // The solve layout drops the diagonal, which must lead each column.
        let mut off_ptr = Vec::with_capacity(m.n + 1);
        let mut off_rows = Vec::with_capacity(row_idx.len().saturating_sub(m.n));
        off_ptr.push(0u32);
        for j in 0..m.n {
            let (start, end) = (col_ptr[j] as usize, col_ptr[j + 1] as usize);
            if row_idx.get(start) != Some(&(j as u32)) {
                return Err(ClothError::Factorization(
                    "factor columns do not start on the diagonal".into(),
                ));
            }
            off_rows.extend_from_slice(&row_idx[start + 1..end]);
            off_ptr.push(off_rows.len() as u32);
        }
        let off_rows = if m.n <= 1 << 16 {
            Rows::Narrow(off_rows.iter().map(|&r| r as u16).collect())
        } else {
            Rows::Wide(off_rows)
        };
        let perm = match inner.perm() {
            Some(p) => p.arrays().0.to_vec(),
            None => (0..m.n as u32).collect(),
        };
        Ok(Self {
            inner: Some(inner),
            col_ptr,
            off_ptr,
            off_rows,
            perm,
        })
    }

    /// Drops faer's analysis: the solves need only the structure copied out of it, and no
    /// further numeric factorisation will be made with this pattern.
    pub fn release_analysis(&mut self) {
        self.inner = None;
    }

    /// Number of nonzeros of the factor `L`.
    pub fn factor_nnz(&self) -> usize {
        self.off_rows.len() + self.off_ptr.len() - 1
    }

    /// The fill-reducing ordering: row `i` of the factored system is original row `perm()[i]`.
    /// Right-hand sides passed to [`NumericFactor::solve_permuted`] are in this order.
    pub fn perm(&self) -> &[u32] {
        &self.perm
    }
}

/// The numeric values of a Cholesky factor for one matrix with the symbolic structure it was
/// computed against.
#[derive(Debug, Clone)]
pub(crate) struct NumericFactor {
    /// `1 / L_jj`.
    inv_diag: Vec<f64>,
    /// Off-diagonal values of `L`, column by column (see [`SymbolicFactor`]'s `off_ptr`).
    off_vals: Vec<f64>,
}

impl NumericFactor {
    /// Factors `m` (symmetric, both triangles stored, the pattern analysed by `symbolic`).
    pub fn factorize(symbolic: &SymbolicFactor, m: &CsrMatrix) -> Result<Self, ClothError> {
        let inner = symbolic.inner.as_ref().ok_or_else(|| {
            ClothError::Factorization("the symbolic analysis was already released".into())
        })?;
        let lower = LowerCsc::from_symmetric(m);
        let a = SparseColMatRef::new(lower.symbolic(), &lower.vals);
        let mut values = vec![0.0; inner.len_val()];
        let req = inner.factorize_numeric_llt_scratch::<f64>(Par::Seq, Default::default());
        let mut mem = MemBuffer::try_new(req)
            .map_err(|_| ClothError::Factorization("out of memory".into()))?;
        inner
            .factorize_numeric_llt(
                &mut values,
                a,
                Side::Lower,
                LltRegularization::default(),
                Par::Seq,
                MemStack::new(&mut mem),
                Default::default(),
            )
            .map_err(|e| {
                ClothError::Factorization(format!("matrix is not positive definite: {e:?}"))
            })?;
        let n = m.n;
        let mut inv_diag = Vec::with_capacity(n);
        let mut off_vals = Vec::with_capacity(values.len().saturating_sub(n));
        for j in 0..n {
            let (start, end) = (
                symbolic.col_ptr[j] as usize,
                symbolic.col_ptr[j + 1] as usize,
            );
            inv_diag.push(1.0 / values[start]);
            off_vals.extend_from_slice(&values[start + 1..end]);
        }
        Ok(Self { inv_diag, off_vals })
    }

    /// Solves `P A P^T y = b` in place for three right-hand sides at once (x, y, z of each row),
    /// with `b` already in the factor's ordering ([`SymbolicFactor::perm`]). One forward sweep
    /// over the columns of `L`, one backward sweep over the same data: the factor is streamed
    /// twice, each nonzero doing three multiply-adds.
    pub fn solve_permuted(&self, symbolic: &SymbolicFactor, b: &mut [DVec3]) {
        self.sweep(symbolic, b);
    }

    /// [`Self::solve_permuted`] for one scalar right-hand side.
    pub fn solve_scalar_permuted(&self, symbolic: &SymbolicFactor, b: &mut [f64]) {
        self.sweep(symbolic, b);
    }

    /// Forward then backward substitution with `L`, for any right-hand-side element type.
    #[inline]
    fn sweep<T>(&self, symbolic: &SymbolicFactor, b: &mut [T])
    where
        T: Copy + Sub<Output = T> + Mul<f64, Output = T>,
        f64: Mul<T, Output = T>,
    {
        match &symbolic.off_rows {
            Rows::Narrow(rows) => self.sweep_with(&symbolic.off_ptr, rows, b),
            Rows::Wide(rows) => self.sweep_with(&symbolic.off_ptr, rows, b),
        }
    }

    #[inline]
    fn sweep_with<T, R>(&self, ptr: &[u32], rows: &[R], b: &mut [T])
    where
        T: Copy + Sub<Output = T> + Mul<f64, Output = T>,
        f64: Mul<T, Output = T>,
        R: Copy + Into<u32>,
    {
        let (inv, vals) = (&self.inv_diag, &self.off_vals);
        let n = b.len();
        // L y = b
        for j in 0..n {
            let (s, e) = (ptr[j] as usize, ptr[j + 1] as usize);
            let yj = b[j] * inv[j];
            b[j] = yj;
            for (&i, &l) in rows[s..e].iter().zip(&vals[s..e]) {
                let i = i.into() as usize;
                b[i] = b[i] - l * yj;
            }
        }
        // L^T x = y
        for j in (0..n).rev() {
            let (s, e) = (ptr[j] as usize, ptr[j + 1] as usize);
            let mut acc = b[j];
            for (&i, &l) in rows[s..e].iter().zip(&vals[s..e]) {
                acc = acc - l * b[i.into() as usize];
            }
            b[j] = acc * inv[j];
        }
    }

    /// Reads the factor's solve arrays (values and row indices) forward and then backward with
    /// independent, vectorisable sums: the memory-traffic floor of a solve.
    pub fn stream(&self, symbolic: &SymbolicFactor) -> f64 {
        let mut acc = [0.0f64; 8];
        for _ in 0..2 {
            for c in self.off_vals.chunks_exact(8) {
                for k in 0..8 {
                    acc[k] += c[k];
                }
            }
        }
        let mut idx = [0u32; 8];
        for _ in 0..2 {
            match &symbolic.off_rows {
                Rows::Narrow(r) => {
                    for c in r.chunks_exact(8) {
                        for k in 0..8 {
                            idx[k] = idx[k].wrapping_add(c[k] as u32);
                        }
                    }
                }
                Rows::Wide(r) => {
                    for c in r.chunks_exact(8) {
                        for k in 0..8 {
                            idx[k] = idx[k].wrapping_add(c[k]);
                        }
                    }
                }
            }
        }
        acc.iter().sum::<f64>() + idx.iter().fold(0u32, |a, &b| a.wrapping_add(b)) as f64
    }

    /// Bytes one sweep of a solve reads from the factor: values, row indices, column pointers
    /// and reciprocal diagonal.
    pub fn bytes_per_sweep(&self, symbolic: &SymbolicFactor) -> usize {
        self.bytes() + symbolic.off_rows.bytes() + symbolic.off_ptr.len() * 4
    }

    /// Bytes held by the factor's values.
    pub fn bytes(&self) -> usize {
        (self.off_vals.len() + self.inv_diag.len()) * std::mem::size_of::<f64>()
    }
}

/// Row indices of the factor's off-diagonal entries.
#[derive(Debug)]
enum Rows {
    Narrow(Vec<u16>),
    Wide(Vec<u32>),
}

impl Rows {
    fn len(&self) -> usize {
        match self {
            Rows::Narrow(r) => r.len(),
            Rows::Wide(r) => r.len(),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Rows::Narrow(r) => r.len() * 2,
            Rows::Wide(r) => r.len() * 4,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Factor-and-solve of a small SPD tridiagonal system reproduces the right-hand side to 1e-12.
    #[test]
    fn solves_spd_system_for_three_right_hand_sides() {
        let n = 5;
        let mut t = Vec::new();
        for i in 0..n as u32 {
            t.push((i, i, 4.0));
            if i + 1 < n as u32 {
                t.push((i, i + 1, -1.0));
                t.push((i + 1, i, -1.0));
            }
        }
        let m = CsrMatrix::from_triplets(n, &mut t);
        let s = SymbolicFactor::analyze(&m).unwrap();
        let f = NumericFactor::factorize(&s, &m).unwrap();
        let x: Vec<DVec3> = (0..n)
            .map(|i| DVec3::new((i as f64).sin(), (i as f64).cos(), i as f64))
            .collect();
        // b = A x, gathered in the factor's ordering.
        let ax = |r: usize| -> DVec3 {
            let (cols, vals) = m.row(r);
            cols.iter()
                .zip(vals)
                .map(|(&j, &v)| v * x[j as usize])
                .sum()
        };
        let mut b: Vec<DVec3> = s.perm().iter().map(|&r| ax(r as usize)).collect();
        f.solve_permuted(&s, &mut b);
        for (k, &r) in s.perm().iter().enumerate() {
            assert!((b[k] - x[r as usize]).length() < 1e-12);
        }
    }
}
