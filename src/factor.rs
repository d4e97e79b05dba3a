//! Sparse Cholesky factorisation of the constant system matrix. The only module that uses faer.
//!
//! Split as faer splits it: [`SymbolicFactor`] (fill-reducing AMD ordering and elimination
//! structure, depends on the sparsity pattern only) and [`NumericFactor`] (the values of `L`,
//! depends on the matrix values). Models whose matrices share a pattern (backward Euler and BDF2
//! differ only on the diagonal) share one symbolic factor. The simplicial factorisation is forced:
//! at cloth sizes its solve is faster than the supernodal one faer would pick automatically.
//!
//! The solve is ours: faer orders and factors, then [`NumericFactor::solve_permuted`] sweeps the
//! factor's columns with x, y and z together (three multiply-adds per nonzero read). The caller
//! gathers the right-hand side directly in the factor's ordering, so a solve allocates nothing and
//! copies nothing.

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::LltRegularization;
use faer::sparse::linalg::SupernodalThreshold;
use faer::sparse::linalg::cholesky::{
    CholeskySymbolicParams, SymbolicCholesky, SymbolicCholeskyRaw, SymmetricOrdering,
    factorize_symbolic_cholesky,
};
use faer::sparse::{SparseColMatRef, SymbolicSparseColMatRef};
use faer::{Par, Side};
use std::ops::{Div, Mul, Sub};

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
    /// Column pointers of `L` (compressed columns, diagonal entry first in each column).
    col_ptr: Vec<u32>,
    /// Row indices of `L`.
    row_idx: Vec<u32>,
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
        let row_idx = simplicial.row_idx().to_vec();
        // The sweeps below rely on the diagonal leading each column.
        for (j, &start) in col_ptr.iter().take(m.n).enumerate() {
            if row_idx.get(start as usize) != Some(&(j as u32)) {
                return Err(ClothError::Factorization(
                    "factor columns do not start on the diagonal".into(),
                ));
            }
        }
        let perm = match inner.perm() {
            Some(p) => p.arrays().0.to_vec(),
            None => (0..m.n as u32).collect(),
        };
        Ok(Self {
            inner: Some(inner),
            col_ptr,
            row_idx,
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
        self.row_idx.len()
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
    values: Vec<f64>,
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
        Ok(Self { values })
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
        T: Copy + Sub<Output = T> + Div<f64, Output = T>,
        f64: Mul<T, Output = T>,
    {
        let (cp, ri, lv) = (&symbolic.col_ptr, &symbolic.row_idx, &self.values);
        let n = b.len();
        // L y = b
        for j in 0..n {
            let (s, e) = (cp[j] as usize, cp[j + 1] as usize);
            let yj = b[j] / lv[s];
            b[j] = yj;
            for (&i, &l) in ri[s + 1..e].iter().zip(&lv[s + 1..e]) {
                b[i as usize] = b[i as usize] - l * yj;
            }
        }
        // L^T x = y
        for j in (0..n).rev() {
            let (s, e) = (cp[j] as usize, cp[j + 1] as usize);
            let mut acc = b[j];
            for (&i, &l) in ri[s + 1..e].iter().zip(&lv[s + 1..e]) {
                acc = acc - l * b[i as usize];
            }
            b[j] = acc / lv[s];
        }
    }

    /// Reads the factor (values and row indices) forward and then backward with independent,
    /// vectorisable sums: the memory-traffic floor of a solve.
    pub fn stream(&self, symbolic: &SymbolicFactor) -> f64 {
        let (ri, lv) = (&symbolic.row_idx, &self.values);
        let mut acc = [0.0f64; 8];
        let mut idx = [0u32; 8];
        for c in lv.chunks_exact(8) {
            for k in 0..8 {
                acc[k] += c[k];
            }
        }
        for c in ri.chunks_exact(8) {
            for k in 0..8 {
                idx[k] = idx[k].wrapping_add(c[k]);
            }
        }
        for c in lv.rchunks_exact(8) {
            for k in 0..8 {
                acc[k] += c[k];
            }
        }
        for c in ri.rchunks_exact(8) {
            for k in 0..8 {
                idx[k] = idx[k].wrapping_add(c[k]);
            }
        }
        acc.iter().sum::<f64>() + idx.iter().fold(0u32, |a, &b| a.wrapping_add(b)) as f64
    }

    /// Bytes one sweep of a solve reads from the factor: values, row indices, column pointers.
    pub fn bytes_per_sweep(&self, symbolic: &SymbolicFactor) -> usize {
        self.values.len() * std::mem::size_of::<f64>()
            + symbolic.row_idx.len() * std::mem::size_of::<u32>()
            + symbolic.col_ptr.len() * std::mem::size_of::<u32>()
    }

    /// Bytes held by the factor's values.
    pub fn bytes(&self) -> usize {
        self.values.len() * std::mem::size_of::<f64>()
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
