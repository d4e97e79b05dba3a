//! Sparse Cholesky factorisation of the constant system matrix. The only module that uses faer.
//!
//! Split as faer splits it: [`SymbolicFactor`] (fill-reducing AMD ordering and elimination
//! structure, depends on the sparsity pattern only) and [`NumericFactor`] (the values of `L`,
//! depends on the matrix values). Models whose matrices share a pattern (backward Euler and BDF2
//! differ only on the diagonal) share one symbolic factor. faer computes the ordering and the
//! structure of `L` (its simplicial analysis); the numeric factorisation and the solve are ours,
//! both on the supernodal layout below.
//!
//! The numeric factorisation scatters the matrix into that layout and takes the supernodes in
//! order: each one's dense block is factored by row dot products (its descendants' updates are
//! already in it), then its rows below send their pairwise dot products to the supernodes that
//! own those rows' columns. It matches faer's simplicial factor to 1e-12 (tested) and needs no
//! buffers beyond the factor itself. The 2,025-node sheet, per factor: faer simplicial 2.6 ms,
//! ours 1.56 ms (model build 9.2 -> 7.6 ms, then two factors; one since BDF2 starts without a
//! backward-Euler step: 6.2 ms). faer's own supernodal factorisation
//! built that model in 5.4 ms but left 67 MB more live heap after the build (the dense kernels'
//! buffers): not taken for a game component.
//!
//! The values are laid out for the solve by
//! supernodes, runs of columns whose patterns nest (column `k` joins `k - 1` when `k - 1`'s
//! pattern is `k` followed by `k`'s), so the run shares the rows below its diagonal block. Each
//! supernode stores the strictly lower part of its diagonal block packed by rows and the block
//! below it by rows, with one 16-bit row index per row below (where the system has at most
//! 65,536 rows) instead of one per nonzero, and the reciprocal diagonal apart. No explicit zeros
//! are added: the layout holds exactly the nonzeros of `L`. [`NumericFactor::solve_permuted`]
//! sweeps it with x, y and z together; the rows below a supernode go four at a time forward
//! (sharing each load of the block's solution) and the columns four at a time backward (sums in
//! registers, no stores in the inner loop). Local-global gathers its right-hand side straight
//! into padded lanes in the factor's ordering; the contact step's solves copy theirs in and out. No solve
//! allocates.
//!
//! On the 2,025-node sheet, 105,411 nonzeros fall into 849 supernodes; 82 % of the nonzeros
//! sit in supernodes at least 8 columns wide (nonzero-weighted mean width 36). Measured with
//! `cargo bench --bench stages`, before (one row index per nonzero, column sweeps) and after,
//! same run, one core:
//!
//! | nodes | solve before | solve after | frame before | frame after |
//! |---|---|---|---|---|
//! | 529 | 17.5 us | 17.8 us | 0.606 ms | 0.542 ms |
//! | 2,025 | 116 us | 101 us | 2.92 ms | 2.47 ms |
//! | 7,921 | 704 us | 563 us | 14.1 ms | 11.6 ms |
//! | 31,329 | 6.7 ms | 4.0 ms | 106 ms | 83 ms |
//!
//! The streaming floor fell with the index traffic (2,025 nodes: 2.12 -> 1.78 MB per solve,
//! 23 -> 15.6 us). That solve did 632,000 multiply-adds (x, y and z of every nonzero, both
//! sweeps) as SSE2 pairs plus a scalar z, and compiling it for the host CPU changed nothing. Two
//! changes were needed together. The right-hand side now travels as [`Lane4`] (x, y, z and a
//! zero lane) and, where the CPU has AVX2 and FMA (detected at run time; the crate's one
//! `unsafe` call), the sweeps run in a copy compiled for them: one fused 256-bit multiply-add per
//! nonzero. Alone that gave 103 against 106 us: the time was in dependence chains. The diagonal
//! blocks were solved with one running sum per row (forward) and per column (backward), a chain
//! of up to `w` multiply-adds, and the width-1 supernodes' backward sums likewise. Forward rows
//! now use four partial sums, backward diagonal blocks go right-looking (row `i` of the packed
//! block, contiguous, updates every earlier entry once `x_i` is final), and
//! single-column sums use four partial sums. Same run, one core, before and after these
//! changes (the models after also hold one factor instead of two; only the first step used the
//! backward-Euler one):
//!
//! | nodes | solve before | solve after | frame before | frame after |
//! |---|---|---|---|---|
//! | 529 | 18.7 us | 14.7 us | 0.548 ms | 0.513 ms |
//! | 2,025 | 102.5 us | 78.3 us | 2.51 ms | 2.28 ms |
//! | 7,921 | 568 us | 429 us | 11.8 ms | 10.7 ms |
//! | 31,329 | 3.87 ms | 2.89 ms | 83.6 ms | 73.5 ms |
//!
//! The 2,025-node solve is 5.1x its streaming floor (15.3 us). On a CPU without AVX2 and FMA
//! the same lanes run as SSE2 pairs, and results differ from an FMA machine's in the last bits
//! (each machine is deterministic on its own). Not kept, with the earlier column layout:
//! - a padded 4-wide right-hand side for paired SSE2 arithmetic (155 us against 117);
//! - fused multiply-adds behind run-time FMA detection (156 us: the fused operation's longer
//!   latency sits on the dependence chains, which the changes above have since shortened);
//! - two or four partial sums per column in the backward sweep (the frame moved by less than
//!   its 10 % spread from code layout alone).
//!
//! Later attempts on this layout (eight sums, x, y and z as planes, relaxed supernodes, nested
//! dissection) are in `docs/lab/speed.md` appendix A.1; the solve's floors and where its time
//! goes by supernode width in section 2 there.
//!
//! **Rows eliminated first.** Before the ordering, [`SymbolicFactor::analyze`] picks rows whose
//! neighbours are all coupled to each other and that are not coupled to one another: on the
//! red/black mesh, every black node (its conformity row ties it to the red nodes of its fan).
//! They go first; each one's column of `L` is its diagonal and its neighbours, and eliminating
//! it adds nothing the pattern of the rows left does not hold, so AMD orders only the red rows.
//! The solve runs those columns as one flat pass (forward: scale and scatter; backward: gather
//! and scale), without a supernode's loop setup per column. On the 2,025-node sheet 506 black
//! columns go first and 319 supernodes remain, 175 of them one column wide (before: 849, 719
//! one column wide). The factor is the same size (105,411 -> 104,868 nonzeros).
//! `cargo bench --bench stages -- 2025`, before (main built in another worktree) and after,
//! alternating in one session, one core:
//!
//! | | before | after |
//! |---|---|---|
//! | solve | 80.5-80.9 us | 71.1-72.6 us |
//! | frame | 1.955-1.996 ms | 1.842-1.869 ms |
//!
//! The 7,921- and 31,329-node sheets' factors shrink 5 % and 4 % (639,899 -> 608,737 and
//! 3,425,012 -> 3,289,361 nonzeros): there AMD had not put every black node first.
//!
//! **Values in `f64` only.** The local-global map solves `K x = b` for the positions
//! themselves, where a factor rounded to `f32` moves the solution (measured: the bar cape's
//! window error at 10 x 1 went 4.8 -> 19 %). An `f32` copy (half the bytes) served the
//! quasi-Newton solver the crate had until 2026-11-28, which only preconditioned with it.

use faer::Side;
use faer::sparse::SymbolicSparseColMatRef;
use faer::sparse::linalg::SupernodalThreshold;
use faer::sparse::linalg::cholesky::{
    CholeskySymbolicParams, SymbolicCholesky, SymbolicCholeskyRaw, SymmetricOrdering,
    factorize_symbolic_cholesky,
};
use std::ops::{Add, Mul, Sub};

use glam::DVec3;

use crate::error::ClothError;
use crate::sparse::CsrMatrix;

/// Pattern of the lower triangle of a symmetric matrix in compressed-column form (= the upper
/// triangle of its CSR).
#[derive(Debug, Clone)]
struct LowerCsc {
    n: usize,
    col_ptr: Vec<u32>,
    row_idx: Vec<u32>,
}

impl LowerCsc {
    /// The pattern of `m` restricted to the rows and columns with `index[r] != u32::MAX`,
    /// renumbered to `index[r]` (which must grow with `r`), `n` of them.
    fn from_symmetric_rows(m: &CsrMatrix, index: &[u32], n: usize) -> Self {
        let mut col_ptr = Vec::with_capacity(n + 1);
        let mut row_idx = Vec::new();
        col_ptr.push(0);
        for r in 0..m.n {
            if index[r] == u32::MAX {
                continue;
            }
            let (cols, _) = m.row(r);
            for &c in cols {
                if c as usize >= r && index[c as usize] != u32::MAX {
                    row_idx.push(index[c as usize]);
                }
            }
            col_ptr.push(row_idx.len() as u32);
        }
        Self {
            n,
            col_ptr,
            row_idx,
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
    /// First column of each supernode (a run of columns whose patterns nest), then `n`.
    sn_cols: Vec<u32>,
    /// The rows below supernode `s`'s diagonal block are `sn_rows[row_ptr[s]..row_ptr[s + 1]]`.
    row_ptr: Vec<u32>,
    /// Those rows, 16-bit where the system has at most 65,536 rows.
    sn_rows: Rows,
    /// Supernode `s`'s off-diagonal values are `val_ptr[s]..val_ptr[s + 1]` of the numeric
    /// factor: the strictly lower part of its `w x w` diagonal block packed by rows, then its
    /// `|rows| x w` block below, by rows.
    val_ptr: Vec<u32>,
    /// `perm[i]`: the original row that becomes row `i` of the permuted system.
    perm: Vec<u32>,
    /// Number of columns eliminated before the supernodes (see [`Self::analyze`]): they are the
    /// first `pre` rows of the permuted system.
    pre: usize,
    /// Rows below the diagonal of eliminated column `j`: `sn_rows[pre_ptr[j]..pre_ptr[j + 1]]`,
    /// ascending; their values sit at the same offsets of the numeric factor.
    pre_ptr: Vec<u32>,
}

impl SymbolicFactor {
    /// Analyses the pattern of the symmetric matrix `m` (both triangles stored).
    ///
    /// First it picks the rows to eliminate before the rest: rows whose neighbours are all
    /// coupled to each other (eliminating one adds no entry to the matrix left) and which are
    /// not coupled to one another, taken greedily in row order. On the red/black mesh these
    /// are the black nodes, whose conformity rows tie each to the red nodes of its fan (twelve
    /// inside the sheet), about a quarter of the unknowns. Their columns of `L` hold only their own
    /// neighbours, and the solve treats them in one pass without the supernodal bookkeeping
    /// (see [`NumericFactor::solve_permuted`]). faer's AMD then orders the rows left, and the
    /// structure of their factor is laid out in supernodes.
    pub fn analyze(m: &CsrMatrix) -> Result<Self, ClothError> {
        let n = m.n;
        let pre_nodes = independent_simplicial_rows(m);
        let pre = pre_nodes.len();
        // Rows left, renumbered in order.
        let mut index = vec![0u32; n];
        for &k in &pre_nodes {
            index[k as usize] = u32::MAX;
        }
        let mut left = Vec::with_capacity(n - pre);
        for (r, ix) in index.iter_mut().enumerate() {
            if *ix != u32::MAX {
                *ix = left.len() as u32;
                left.push(r as u32);
            }
        }
        let nr = left.len();
        let (inner, sn_cols, mut row_ptr, mut val_ptr, mut rows, perm_left) = if nr == 0 {
            (
                None,
                vec![pre as u32],
                vec![0],
                vec![0],
                Vec::new(),
                Vec::new(),
            )
        } else {
            let lower = LowerCsc::from_symmetric_rows(m, &index, nr);
            let (inner, sn_cols, row_ptr, val_ptr, rows) = Self::supernodes_of(&lower, pre)?;
            let perm_left: Vec<u32> = match inner.perm() {
                Some(p) => p.arrays().0.iter().map(|&i| left[i as usize]).collect(),
                None => left.clone(),
            };
            (Some(inner), sn_cols, row_ptr, val_ptr, rows, perm_left)
        };
        let mut perm = pre_nodes;
        perm.extend_from_slice(&perm_left);
        let mut iperm = vec![0u32; n];
        for (i, &p) in perm.iter().enumerate() {
            iperm[p as usize] = i as u32;
        }
        // The eliminated columns' rows, in front of the supernodes' rows and values.
        let mut pre_rows = Vec::new();
        let mut pre_ptr = Vec::with_capacity(pre + 1);
        pre_ptr.push(0u32);
        for &k in &perm[..pre] {
            let start = pre_rows.len();
            let (cols, _) = m.row(k as usize);
            pre_rows.extend(cols.iter().filter(|&&c| c != k).map(|&c| iperm[c as usize]));
            pre_rows[start..].sort_unstable();
            pre_ptr.push(pre_rows.len() as u32);
        }
        let offset = pre_rows.len() as u32;
        for p in row_ptr.iter_mut().chain(val_ptr.iter_mut()) {
            *p = p.checked_add(offset).ok_or_else(|| {
                ClothError::Factorization("factor too large for 32-bit offsets".into())
            })?;
        }
        pre_rows.append(&mut rows);
        let sn_rows = if n <= 1 << 16 {
            Rows::Narrow(pre_rows.iter().map(|&r| r as u16).collect())
        } else {
            Rows::Wide(pre_rows)
        };
        let mut symbolic = Self {
            inner,
            sn_cols,
            row_ptr,
            sn_rows,
            val_ptr,
            perm,
            pre,
            pre_ptr,
        };
        symbolic.shrink_to_fit();
        Ok(symbolic)
    }

    /// Gives back the spare capacity the analysis left (the structure lives with its model).
    fn shrink_to_fit(&mut self) {
        match &mut self.sn_rows {
            Rows::Narrow(r) => r.shrink_to_fit(),
            Rows::Wide(r) => r.shrink_to_fit(),
        }
        for v in [
            &mut self.sn_cols,
            &mut self.row_ptr,
            &mut self.val_ptr,
            &mut self.perm,
            &mut self.pre_ptr,
        ] {
            v.shrink_to_fit();
        }
    }

    /// faer's AMD ordering and simplicial structure of `lower`, laid out in supernodes whose
    /// columns and rows are shifted by `shift` (the eliminated rows in front): the analysis,
    /// the supernodes' first columns (then the end), their row offsets and value offsets
    /// (both from 0) and their rows below.
    #[allow(clippy::type_complexity)]
    fn supernodes_of(
        lower: &LowerCsc,
        shift: usize,
    ) -> Result<
        (
            SymbolicCholesky<u32>,
            Vec<u32>,
            Vec<u32>,
            Vec<u32>,
            Vec<u32>,
        ),
        ClothError,
    > {
        let n = lower.n;
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
        let col_ptr = simplicial.col_ptr();
        let row_idx = simplicial.row_idx();
        let off = |j: usize| &row_idx[col_ptr[j] as usize + 1..col_ptr[j + 1] as usize];
        // The solve layout keeps the diagonal apart, which must lead each column.
        for (j, &start) in col_ptr[..n].iter().enumerate() {
            if row_idx.get(start as usize) != Some(&(j as u32)) {
                return Err(ClothError::Factorization(
                    "factor columns do not start on the diagonal".into(),
                ));
            }
        }
        // Supernodes: column k joins k - 1's run when k - 1's pattern is exactly k followed by
        // k's pattern, so the run's columns share the rows below it.
        let mut sn_cols = vec![shift as u32];
        let mut row_ptr = vec![0u32];
        let mut val_ptr = vec![0u32];
        let mut rows = Vec::new();
        let mut j = 0;
        while j < n {
            let mut k = j + 1;
            while k < n && off(k - 1).split_first() == Some((&(k as u32), off(k))) {
                k += 1;
            }
            let (w, below) = (k - j, off(k - 1));
            rows.extend(below.iter().map(|&r| r + shift as u32));
            sn_cols.push((k + shift) as u32);
            row_ptr.push(rows.len() as u32);
            let values = val_ptr[val_ptr.len() - 1] as usize + w * (w - 1) / 2 + below.len() * w;
            val_ptr.push(u32::try_from(values).map_err(|_| {
                ClothError::Factorization("factor too large for 32-bit offsets".into())
            })?);
            j = k;
        }
        Ok((inner, sn_cols, row_ptr, val_ptr, rows))
    }

    /// Drops faer's analysis: the solves need only the structure copied out of it, and no
    /// further numeric factorisation will be made with this pattern.
    pub fn release_analysis(&mut self) {
        self.inner = None;
    }

    /// Number of nonzeros of the factor `L`.
    pub fn factor_nnz(&self) -> usize {
        self.val_ptr[self.val_ptr.len() - 1] as usize + self.n()
    }

    /// Order of the factored system.
    fn n(&self) -> usize {
        self.sn_cols[self.sn_cols.len() - 1] as usize
    }

    /// Number of supernodes.
    fn supernodes(&self) -> usize {
        self.sn_cols.len() - 1
    }

    /// The fill-reducing ordering: row `i` of the factored system is original row `perm()[i]`.
    /// Right-hand sides passed to [`NumericFactor::solve_permuted`] are in this order.
    pub fn perm(&self) -> &[u32] {
        &self.perm
    }
}

/// Rows of `m`'s pattern that can be eliminated first with no fill and independently of each
/// other: each row's neighbours are pairwise coupled, and no two chosen rows are coupled. Greedy
/// in row order; rows with more than [`MAX_PRE_DEGREE`] neighbours are not considered (the
/// check is quadratic in the degree).
fn independent_simplicial_rows(m: &CsrMatrix) -> Vec<u32> {
    let mut blocked = vec![false; m.n];
    let mut chosen = Vec::new();
    let coupled = |a: u32, b: u32| m.row(a as usize).0.binary_search(&b).is_ok();
    for k in 0..m.n {
        if blocked[k] {
            continue;
        }
        let (cols, _) = m.row(k);
        if cols.len() > MAX_PRE_DEGREE + 1 {
            continue;
        }
        let others = || cols.iter().copied().filter(|&c| c as usize != k);
        let clique = others().all(|a| others().filter(|&b| b > a).all(|b| coupled(a, b)));
        if clique {
            chosen.push(k as u32);
            blocked[k] = true;
            for c in others() {
                blocked[c as usize] = true;
            }
        }
    }
    chosen
}

/// Most neighbours a row may have to be eliminated before the supernodes (an interior black
/// node has twelve).
const MAX_PRE_DEGREE: usize = 32;

/// Index buffers of a numeric factorisation, kept between refactorisations so that they
/// allocate nothing.
#[derive(Debug, Default)]
pub(crate) struct FactorScratch {
    sn_of: Vec<u32>,
    iperm: Vec<u32>,
    map: Vec<usize>,
    /// The factor's off-diagonal values in `f64` while it is computed (stored afterwards in
    /// the factor's own value type).
    work: Vec<f64>,
}

/// How a factor stores its off-diagonal values. The factorisation always runs in `f64`.
pub(crate) trait FactorValue:
    Copy
    + Default
    + Send
    + Sync
    + std::fmt::Debug
    + 'static
    + std::ops::Neg<Output = Self>
    + Add<Output = Self>
{
    /// x, y and z of one right-hand-side row in this precision, padded to four lanes.
    type Lanes: Elem<Self> + PadLanes + Send + Sync + std::fmt::Debug;
    /// `v` rounded to this type.
    fn from_f64(v: f64) -> Self;
    /// This value as `f64` (exact).
    fn to_f64(self) -> f64;
}

impl FactorValue for f64 {
    type Lanes = Lane4;
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
}

/// The factor a model (or a held-node refactorisation of it) keeps.
#[derive(Debug, Clone)]
pub(crate) struct ModelFactor(NumericFactor<f64>);

/// Padded right-hand-side rows for [`ModelFactor::solve_permuted`] (sized on first use).
pub(crate) type SolveLanes = Vec<Lane4>;

impl ModelFactor {
    /// Factors `m` as [`NumericFactor::factorize`] does.
    pub fn factorize(symbolic: &SymbolicFactor, m: &CsrMatrix) -> Result<Self, ClothError> {
        Ok(Self(NumericFactor::factorize(symbolic, m)?))
    }

    /// [`NumericFactor::solve_permuted`] through `lanes` (sized here).
    pub fn solve_permuted(
        &self,
        symbolic: &SymbolicFactor,
        b: &mut [DVec3],
        lanes: &mut SolveLanes,
    ) {
        lanes.resize(b.len(), Lane4::default());
        self.0.solve_permuted(symbolic, b, lanes);
    }

    /// Solves, in place, `lanes` (sized and in the factor's ordering): the solve alone.
    pub fn solve_lanes(&self, symbolic: &SymbolicFactor, lanes: &mut [Lane4]) {
        self.0.solve_lanes(symbolic, lanes)
    }

    /// [`NumericFactor::stream`].
    pub fn stream(&self, symbolic: &SymbolicFactor) -> f64 {
        self.0.stream(symbolic)
    }

    /// [`NumericFactor::bytes_per_sweep`].
    pub fn bytes_per_sweep(&self, symbolic: &SymbolicFactor) -> usize {
        self.0.bytes_per_sweep(symbolic)
    }

    /// [`NumericFactor::bytes`].
    pub fn bytes(&self) -> usize {
        self.0.bytes()
    }

    /// [`NumericFactor::inverse_diagonal`].
    pub fn inverse_diagonal(&self, symbolic: &SymbolicFactor) -> Vec<f64> {
        self.0.inverse_diagonal(symbolic)
    }
}

/// The numeric values of a Cholesky factor for one matrix with the symbolic structure it was
/// computed against.
#[derive(Debug, Clone)]
pub(crate) struct NumericFactor<V: FactorValue = f64> {
    /// `1 / L_jj`.
    inv_diag: Vec<f64>,
    /// Off-diagonal values of `L`, supernode by supernode (see [`SymbolicFactor`]'s `val_ptr`).
    off_vals: Vec<V>,
}

impl<V: FactorValue> NumericFactor<V> {
    /// Factors `m` (symmetric, both triangles stored, the pattern analysed by `symbolic`)
    /// supernode by supernode, straight into the solve layout: the entries of `m` are scattered
    /// into it, then each supernode in order is factored by dense row dot products (its
    /// descendants' updates already applied) and sends its own update, dot products of its rows
    /// below, to the supernodes that own those rows' columns.
    pub fn factorize(symbolic: &SymbolicFactor, m: &CsrMatrix) -> Result<Self, ClothError> {
        let mut f = Self::empty();
        f.refactor(symbolic, m, None, &mut FactorScratch::default())?;
        Ok(f)
    }

    /// A factor of nothing, to [`Self::refactor`] into.
    pub fn empty() -> Self {
        Self {
            inv_diag: Vec::new(),
            off_vals: Vec::new(),
        }
    }

    /// Factors `m` again into this factor's memory, as [`Self::factorize`] does, with the rows
    /// and columns flagged in `decouple` (original row order) reduced to their diagonal entry:
    /// those unknowns are held fixed by the right-hand side (a node pinned for a while, such as
    /// a node sticking to a body). Allocates nothing once `self` and `scratch` have held a factor
    /// of this size.
    pub fn refactor(
        &mut self,
        symbolic: &SymbolicFactor,
        m: &CsrMatrix,
        decouple: Option<&[bool]>,
        scratch: &mut FactorScratch,
    ) -> Result<(), ClothError> {
        match &symbolic.sn_rows {
            Rows::Narrow(rows) => self.factorize_with(symbolic, rows, m, decouple, scratch),
            Rows::Wide(rows) => self.factorize_with(symbolic, rows, m, decouple, scratch),
        }
    }

    /// [`Self::refactor`] for the row-index type `R` of `sym`'s supernodes.
    fn factorize_with<R>(
        &mut self,
        sym: &SymbolicFactor,
        rows: &[R],
        m: &CsrMatrix,
        decouple: Option<&[bool]>,
        scratch: &mut FactorScratch,
    ) -> Result<(), ClothError>
    where
        R: Copy + Into<u32>,
    {
        let n = m.n;
        let diag = &mut self.inv_diag;
        diag.clear();
        diag.resize(n, 0.0);
        let FactorScratch {
            sn_of,
            iperm,
            map,
            work: vals,
        } = scratch;
        vals.clear();
        vals.resize(sym.factor_nnz() - n, 0.0);
        let rows_of = |s: usize| &rows[sym.row_ptr[s] as usize..sym.row_ptr[s + 1] as usize];
        let rows_all = |range: std::ops::Range<usize>| &rows[range];
        let row = |rs: &[R], k: usize| rs[k].into() as usize;
        // Where row `r` of supernode `t` starts in `vals`: a row of its diagonal block, or a row
        // below it, found by advancing the cursor `p` through t's sorted rows (callers visit
        // rows in ascending order). `None` if the pattern does not hold the row.
        let row_start = |t: usize, r: usize, p: &mut usize| -> Option<usize> {
            let (t0, t1) = (sym.sn_cols[t] as usize, sym.sn_cols[t + 1] as usize);
            let base = sym.val_ptr[t] as usize;
            if r < t1 {
                let i = r - t0;
                return Some(base + i * i.saturating_sub(1) / 2);
            }
            let (tw, trows) = (t1 - t0, rows_of(t));
            while *p < trows.len() && row(trows, *p) < r {
                *p += 1;
            }
            (*p < trows.len() && row(trows, *p) == r).then(|| base + tw * (tw - 1) / 2 + *p * tw)
        };
        let outside = || ClothError::Factorization("update outside the analysed pattern".into());
        // Supernode of each column.
        sn_of.clear();
        sn_of.resize(n, 0);
        for s in 0..sym.supernodes() {
            sn_of[sym.sn_cols[s] as usize..sym.sn_cols[s + 1] as usize].fill(s as u32);
        }
        iperm.clear();
        iperm.resize(n, 0);
        for (i, &p) in sym.perm.iter().enumerate() {
            iperm[p as usize] = i as u32;
        }
        let kept = |a: usize, b: usize| decouple.is_none_or(|d| !(d[a] || d[b]));
        let pre = sym.pre;
        let pre_rows_of = |j: usize| sym.pre_ptr[j] as usize..sym.pre_ptr[j + 1] as usize;
        // Position of (row i, column j), i > j, in `vals`; `rows` are column j's supernode's
        // rows below (unused for an eliminated column).
        let locate = |i: usize, j: usize, rows: &[R]| -> Option<usize> {
            if j < pre {
                let range = pre_rows_of(j);
                let k = rows_all(range.clone()).partition_point(|&r| (r.into() as usize) < i);
                return (k < range.len() && row(rows_all(range.clone()), k) == i)
                    .then_some(range.start + k);
            }
            let s = sn_of[j] as usize;
            let (c0, c1) = (sym.sn_cols[s] as usize, sym.sn_cols[s + 1] as usize);
            let (w, base) = (c1 - c0, sym.val_ptr[s] as usize);
            if i < c1 {
                let a = i - c0;
                Some(base + a * (a - 1) / 2 + (j - c0))
            } else {
                let k = rows.partition_point(|&r| (r.into() as usize) < i);
                if k == rows.len() || row(rows, k) != i {
                    return None;
                }
                Some(base + w * (w - 1) / 2 + k * w + (j - c0))
            }
        };
        // Scatter the lower triangle of P m P^T.
        for j in 0..n {
            let rows = if j < pre {
                &[][..]
            } else {
                rows_of(sn_of[j] as usize)
            };
            let (cols, v) = m.row(sym.perm[j] as usize);
            for (&c, &x) in cols.iter().zip(v) {
                let i = iperm[c as usize] as usize;
                if i == j {
                    diag[j] += x;
                } else if i > j && kept(c as usize, sym.perm[j] as usize) {
                    let at = locate(i, j, rows).ok_or_else(|| {
                        ClothError::Factorization(
                            "matrix entry outside the analysed pattern".into(),
                        )
                    })?;
                    vals[at] += x;
                }
            }
        }
        // The eliminated columns: no update reaches them, and each sends its rows' products
        // to entries the pattern already holds (its neighbours are coupled pairwise).
        for j in 0..pre {
            let d = diag[j];
            if d.is_nan() || d <= 0.0 {
                return Err(ClothError::Factorization(
                    "matrix is not positive definite".into(),
                ));
            }
            let ljj = d.sqrt();
            diag[j] = ljj;
            let range = pre_rows_of(j);
            for v in &mut vals[range.clone()] {
                *v /= ljj;
            }
            // Column b of the update lands in the supernode t owning row r_b: rows of t's
            // diagonal block by arithmetic, rows below it by merging the sorted lists.
            let rs = rows_all(range.clone());
            for b in 0..rs.len() {
                let (rb, lb) = (row(rs, b), vals[range.start + b]);
                diag[rb] -= lb * lb;
                let t = sn_of[rb] as usize;
                let col = rb - sym.sn_cols[t] as usize;
                let mut p = 0;
                for a in b + 1..rs.len() {
                    let at = row_start(t, row(rs, a), &mut p).ok_or_else(outside)? + col;
                    vals[at] -= vals[range.start + a] * lb;
                }
            }
        }
        for s in 0..sym.supernodes() {
            let (c0, c1) = (sym.sn_cols[s] as usize, sym.sn_cols[s + 1] as usize);
            let w = c1 - c0;
            let rows = rows_of(s);
            let below = rows.len();
            let vend = sym.val_ptr[s + 1] as usize;
            let (head, later) = vals.split_at_mut(vend);
            let block = &mut head[sym.val_ptr[s] as usize..];
            let (dblock, rect) = block.split_at_mut(w * (w - 1) / 2);
            // Dense Cholesky of the supernode: column by column, rows as dot products.
            for j in 0..w {
                let oj = j * j.saturating_sub(1) / 2;
                let d =
                    diag[c0 + j] - dot::<f64, f64, false>(&dblock[oj..oj + j], &dblock[oj..oj + j]);
                if d.is_nan() || d <= 0.0 {
                    return Err(ClothError::Factorization(
                        "matrix is not positive definite".into(),
                    ));
                }
                let ljj = d.sqrt();
                diag[c0 + j] = ljj;
                // Rows after j of the diagonal block start where row j ends.
                let (upto, after) = dblock.split_at_mut(oj + j);
                let lj = &upto[oj..];
                for i in j + 1..w {
                    let oi = i * (i - 1) / 2 - (oj + j);
                    let d = dot::<f64, f64, false>(&after[oi..oi + j], lj);
                    after[oi + j] = (after[oi + j] - d) / ljj;
                }
                for row in rect.chunks_exact_mut(w) {
                    let d = dot::<f64, f64, false>(&row[..j], lj);
                    row[j] = (row[j] - d) / ljj;
                }
            }
            // Update of the later supernodes: for rows a >= b below, L_a . L_b.
            let rect: &[f64] = rect;
            let mut b = 0;
            while b < below {
                let t = sn_of[row(rows, b)] as usize;
                let (t0, t1) = (sym.sn_cols[t] as usize, sym.sn_cols[t + 1] as usize);
                let mut g1 = b;
                while g1 < below && row(rows, g1) < t1 {
                    g1 += 1;
                }
                // Where each row of s from b on starts in t's values (`later`, since t > s):
                // a row of t's diagonal block, or a row below it (found by merging the sorted
                // row lists).
                map.clear();
                let mut p = 0;
                for a in b..below {
                    map.push(row_start(t, row(rows, a), &mut p).ok_or_else(outside)? - vend);
                }
                for bb in b..g1 {
                    let lb = &rect[bb * w..(bb + 1) * w];
                    let r = row(rows, bb);
                    diag[r] -= dot::<f64, f64, false>(lb, lb);
                    let col = r - t0;
                    for (a, &at) in map.iter().enumerate().skip(bb - b + 1) {
                        let la = &rect[(b + a) * w..(b + a + 1) * w];
                        later[at + col] -= dot::<f64, f64, false>(la, lb);
                    }
                }
                b = g1;
            }
        }
        for d in diag.iter_mut() {
            *d = 1.0 / *d;
        }
        self.off_vals.clear();
        self.off_vals.extend(vals.iter().map(|&v| V::from_f64(v)));
        Ok(())
    }

    /// Solves `P A P^T y = b` in place for three right-hand sides at once (x, y, z of each row),
    /// with `b` already in the factor's ordering ([`SymbolicFactor::perm`]), through `lanes` (at
    /// least as long as `b`). One forward sweep
    /// over the supernodes of `L`, one backward sweep over the same data: the factor is
    /// streamed twice, each nonzero doing three multiply-adds. The rows eliminated first (see
    /// [`SymbolicFactor::analyze`]) are one flat pass before the forward sweep (scale, then
    /// scatter to their neighbours) and one after the backward sweep (gather, then scale).
    pub fn solve_permuted(
        &self,
        symbolic: &SymbolicFactor,
        b: &mut [DVec3],
        lanes: &mut [V::Lanes],
    ) {
        let lanes = &mut lanes[..b.len()];
        for (l, v) in lanes.iter_mut().zip(b.iter()) {
            *l = V::Lanes::from_vec(*v);
        }
        self.solve_lanes(symbolic, lanes);
        for (v, l) in b.iter_mut().zip(lanes.iter()) {
            *v = l.vec();
        }
    }

    /// [`Self::solve_permuted`] on rows already padded to four lanes: with AVX2 and FMA (checked
    /// at run time) each multiply-add is one fused operation for x, y and z.
    #[allow(unsafe_code)]
    pub fn solve_lanes(&self, symbolic: &SymbolicFactor, b: &mut [V::Lanes]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: `sweep_fused` only differs from the portable sweep by being compiled for
            // AVX2 and FMA, and the CPU was found to support both just above.
            unsafe { self.sweep_fused(symbolic, b) };
            return;
        }
        self.sweep::<V::Lanes, false>(symbolic, b);
    }

    /// The sweeps on padded lanes with fused multiply-adds, compiled for AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    fn sweep_fused(&self, symbolic: &SymbolicFactor, b: &mut [V::Lanes]) {
        self.sweep::<V::Lanes, true>(symbolic, b);
    }

    /// [`Self::solve_permuted`] for one scalar right-hand side.
    pub fn solve_scalar_permuted(&self, symbolic: &SymbolicFactor, b: &mut [f64])
    where
        f64: Elem<V>,
    {
        self.sweep::<f64, false>(symbolic, b);
    }

    /// Forward then backward substitution with `L`, for any right-hand-side element type.
    #[inline(always)]
    fn sweep<T, const FUSED: bool>(&self, symbolic: &SymbolicFactor, b: &mut [T])
    where
        T: Elem<V>,
    {
        match &symbolic.sn_rows {
            Rows::Narrow(rows) => self.sweep_with::<T, u16, FUSED>(symbolic, rows, b),
            Rows::Wide(rows) => self.sweep_with::<T, u32, FUSED>(symbolic, rows, b),
        }
    }

    /// The sweeps, supernode by supernode. Forward, a supernode's diagonal block is solved by
    /// rows and each row below it takes one dot product with the block's solution; backward,
    /// each row below adds its multiple into the block's right-hand side and the diagonal block
    /// is solved by rows. Each row index is read once per supernode and every inner loop runs
    /// over contiguous values and right-hand sides.
    #[inline(always)]
    fn sweep_with<T, R, const FUSED: bool>(&self, sym: &SymbolicFactor, rows: &[R], b: &mut [T])
    where
        T: Elem<V>,
        R: Copy + Into<u32>,
    {
        let (inv, vals) = (&self.inv_diag, &self.off_vals[..]);
        let ns = sym.supernodes();
        let block = |s: usize| {
            let (c0, c1) = (sym.sn_cols[s] as usize, sym.sn_cols[s + 1] as usize);
            let w = c1 - c0;
            let v = &vals[sym.val_ptr[s] as usize..sym.val_ptr[s + 1] as usize];
            let (diag, rect) = v.split_at(w * (w - 1) / 2);
            let below = &rows[sym.row_ptr[s] as usize..sym.row_ptr[s + 1] as usize];
            (c0, c1, diag, rect, below)
        };
        let pre = sym.pre;
        let pre_col = |j: usize| {
            let range = sym.pre_ptr[j] as usize..sym.pre_ptr[j + 1] as usize;
            (&rows[range.clone()], &vals[range])
        };
        // L y = b: the eliminated columns first, each a diagonal entry and its rows below.
        for j in 0..pre {
            let (rs, ls) = pre_col(j);
            let (head, tail) = b.split_at_mut(pre);
            let y = head[j] * inv[j];
            head[j] = y;
            for (&r, &l) in rs.iter().zip(ls) {
                let r = r.into() as usize - pre;
                tail[r] = T::madd::<FUSED>(tail[r], -l, y);
            }
        }
        for s in 0..ns {
            let (c0, c1, diag, rect, below) = block(s);
            let w = c1 - c0;
            let (head, tail) = b.split_at_mut(c1);
            let y = &mut head[c0..];
            let mut o = 0;
            for i in 0..w {
                y[i] = (y[i] - dot::<T, V, FUSED>(&diag[o..o + i], &y[..i])) * inv[c0 + i];
                o += i;
            }
            // Four rows at a time, sharing each load of y. The rows are zipped slices, so the
            // inner loop carries no bounds checks (cachegrind: they were 11 of its 31
            // instructions per four multiply-adds).
            let (quads, rest) = below.as_chunks::<4>();
            let (rect4, rect_rest) = rect.split_at(4 * quads.len() * w);
            let y = &y[..w];
            for (rs, block) in quads.iter().zip(rect4.chunks_exact(4 * w)) {
                let (l0, block) = block.split_at(w);
                let (l1, block) = block.split_at(w);
                let (l2, l3) = block.split_at(w);
                let [mut a0, mut a1, mut a2, mut a3] = [T::default(); 4];
                for ((((&yj, &v0), &v1), &v2), &v3) in y.iter().zip(l0).zip(l1).zip(l2).zip(l3) {
                    a0 = T::madd::<FUSED>(a0, v0, yj);
                    a1 = T::madd::<FUSED>(a1, v1, yj);
                    a2 = T::madd::<FUSED>(a2, v2, yj);
                    a3 = T::madd::<FUSED>(a3, v3, yj);
                }
                for (&r, a) in rs.iter().zip([a0, a1, a2, a3]) {
                    let r = r.into() as usize - c1;
                    tail[r] = tail[r] - a;
                }
            }
            for (&r, row) in rest.iter().zip(rect_rest.chunks_exact(w)) {
                let r = r.into() as usize - c1;
                tail[r] = tail[r] - dot::<T, V, FUSED>(row, y);
            }
        }
        // L^T x = y
        for s in (0..ns).rev() {
            let (c0, c1, diag, rect, below) = block(s);
            let w = c1 - c0;
            let (head, tail) = b.split_at_mut(c1);
            let x = &mut head[c0..];
            // x_j -= sum_k L_(r_k) j x_(r_k), four columns at a time with the sums in registers.
            let mut j = 0;
            while j + 4 <= w {
                let [mut a0, mut a1, mut a2, mut a3] = [T::default(); 4];
                for (&r, row) in below.iter().zip(rect.chunks_exact(w)) {
                    let xr = tail[r.into() as usize - c1];
                    let &[v0, v1, v2, v3] = row[j..].first_chunk::<4>().expect("j + 4 <= w");
                    a0 = T::madd::<FUSED>(a0, v0, xr);
                    a1 = T::madd::<FUSED>(a1, v1, xr);
                    a2 = T::madd::<FUSED>(a2, v2, xr);
                    a3 = T::madd::<FUSED>(a3, v3, xr);
                }
                for (q, a) in [a0, a1, a2, a3].into_iter().enumerate() {
                    x[j + q] = x[j + q] - a;
                }
                j += 4;
            }
            for j in j..w {
                // Four partial sums over the rows, so the multiply-adds do not wait on each other.
                let mut acc = [T::default(); 4];
                let (quads, rest) = below.as_chunks::<4>();
                let (rect4, rect_rest) = rect.split_at(4 * quads.len() * w);
                for (rs, block) in quads.iter().zip(rect4.chunks_exact(4 * w)) {
                    for ((&r, row), a) in rs.iter().zip(block.chunks_exact(w)).zip(&mut acc) {
                        *a = T::madd::<FUSED>(*a, row[j], tail[r.into() as usize - c1]);
                    }
                }
                for ((&r, row), a) in rest.iter().zip(rect_rest.chunks_exact(w)).zip(&mut acc) {
                    *a = T::madd::<FUSED>(*a, row[j], tail[r.into() as usize - c1]);
                }
                x[j] = x[j] - ((acc[0] + acc[1]) + (acc[2] + acc[3]));
            }
            // Right-looking: once x_i is final, row i of the packed block (contiguous) updates
            // every earlier entry, and the only dependence chain is one multiply-add per row.
            for i in (0..w).rev() {
                let xi = x[i] * inv[c0 + i];
                x[i] = xi;
                let row = &diag[i * i.saturating_sub(1) / 2..][..i];
                // Four entries per step, written out: left as one loop the vectoriser took four
                // rows' lanes apart and put them back together (cachegrind: 33 instructions per
                // four multiply-adds, most of them shuffles).
                let (xc, xr) = x[..i].as_chunks_mut::<4>();
                let (lc, lr) = row.as_chunks::<4>();
                for (xs, ls) in xc.iter_mut().zip(lc) {
                    xs[0] = T::madd::<FUSED>(xs[0], -ls[0], xi);
                    xs[1] = T::madd::<FUSED>(xs[1], -ls[1], xi);
                    xs[2] = T::madd::<FUSED>(xs[2], -ls[2], xi);
                    xs[3] = T::madd::<FUSED>(xs[3], -ls[3], xi);
                }
                for (xj, &l) in xr.iter_mut().zip(lr) {
                    *xj = T::madd::<FUSED>(*xj, -l, xi);
                }
            }
        }
        for j in 0..pre {
            let (rs, ls) = pre_col(j);
            let (head, tail) = b.split_at_mut(pre);
            let mut acc = [T::default(); 4];
            let (quads, rest) = rs.as_chunks::<4>();
            for (q, r4) in quads.iter().enumerate() {
                for (k, &r) in r4.iter().enumerate() {
                    acc[k] = T::madd::<FUSED>(acc[k], ls[4 * q + k], tail[r.into() as usize - pre]);
                }
            }
            let done = 4 * quads.len();
            for (k, &r) in rest.iter().enumerate() {
                acc[k] = T::madd::<FUSED>(acc[k], ls[done + k], tail[r.into() as usize - pre]);
            }
            head[j] = (head[j] - ((acc[0] + acc[1]) + (acc[2] + acc[3]))) * inv[j];
        }
    }

    /// Reads the factor's solve arrays (values and row indices) forward and then backward with
    /// independent, vectorisable sums: the memory-traffic floor of a solve.
    pub fn stream(&self, symbolic: &SymbolicFactor) -> f64 {
        // Sums in the values' own type: widening each value would measure the conversions.
        // 32 independent sums: eight 256-bit registers of `f32`, so that the adds' latency does
        // not bound the stream.
        let mut acc = [V::default(); 32];
        for _ in 0..2 {
            for c in self.off_vals.chunks_exact(32) {
                for k in 0..32 {
                    acc[k] = acc[k] + c[k];
                }
            }
        }
        let mut idx = [0u32; 8];
        for _ in 0..2 {
            match &symbolic.sn_rows {
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
        acc.iter().map(|a| a.to_f64()).sum::<f64>()
            + idx.iter().fold(0u32, |a, &b| a.wrapping_add(b)) as f64
    }

    /// Bytes one sweep of a solve reads from the factor: values, row indices, the supernodes'
    /// column, row and value offsets, and the reciprocal diagonal.
    pub fn bytes_per_sweep(&self, symbolic: &SymbolicFactor) -> usize {
        self.bytes() + symbolic.sn_rows.bytes() + symbolic.supernodes() * 12 + symbolic.pre * 4
    }

    /// Bytes held by the factor's values.
    pub fn bytes(&self) -> usize {
        self.off_vals.len() * std::mem::size_of::<V>()
            + self.inv_diag.len() * std::mem::size_of::<f64>()
    }

    /// The diagonal of the factored matrix's inverse, `(A^-1)_ii`, in the factor's ordering:
    /// how far a unit force on row `i` alone moves it, with every other row free to follow.
    ///
    /// Selected inversion (Takahashi's recurrence): with `A = L L^T = U D U^T`, `U` unit lower,
    /// the entries of `Z = A^-1` on the pattern of `L` satisfy, column by column from the last,
    /// `Z_ij = -sum_k U_kj Z_ik` and `Z_jj = 1 / D_j - sum_k U_kj Z_kj` over the rows `k` below
    /// `j` in column `j`. Those rows form a clique of the filled graph, so every `Z_ik` needed
    /// lies on the pattern and was computed with a later column. Allocates its working copy of
    /// `L` (about 12 bytes a nonzero) and runs in the sum over columns of the rows below times
    /// their columns' lengths: once per model, never in the frame loop.
    pub fn inverse_diagonal(&self, symbolic: &SymbolicFactor) -> Vec<f64> {
        let n = symbolic.n();
        let rows: Vec<u32> = match &symbolic.sn_rows {
            Rows::Narrow(r) => r.iter().map(|&x| x as u32).collect(),
            Rows::Wide(r) => r.clone(),
        };
        // L column by column (rows below the diagonal, ascending) as U = L / L_jj.
        let mut col_ptr = vec![0usize; n + 1];
        let mut col_rows: Vec<u32> = Vec::with_capacity(self.off_vals.len());
        let mut col_vals: Vec<f64> = Vec::with_capacity(self.off_vals.len());
        for j in 0..symbolic.pre {
            let range = symbolic.pre_ptr[j] as usize..symbolic.pre_ptr[j + 1] as usize;
            col_rows.extend_from_slice(&rows[range.clone()]);
            col_vals.extend(
                self.off_vals[range]
                    .iter()
                    .map(|v| v.to_f64() * self.inv_diag[j]),
            );
            col_ptr[j + 1] = col_rows.len();
        }
        for s in 0..symbolic.supernodes() {
            let (c0, c1) = (
                symbolic.sn_cols[s] as usize,
                symbolic.sn_cols[s + 1] as usize,
            );
            let w = c1 - c0;
            let below = &rows[symbolic.row_ptr[s] as usize..symbolic.row_ptr[s + 1] as usize];
            let v = &self.off_vals[symbolic.val_ptr[s] as usize..symbolic.val_ptr[s + 1] as usize];
            let (diag, rect) = v.split_at(w * (w - 1) / 2);
            for j in 0..w {
                let scale = self.inv_diag[c0 + j];
                for i in j + 1..w {
                    col_rows.push((c0 + i) as u32);
                    col_vals.push(diag[i * (i - 1) / 2 + j].to_f64() * scale);
                }
                for (k, &r) in below.iter().enumerate() {
                    col_rows.push(r);
                    col_vals.push(rect[k * w + j].to_f64() * scale);
                }
                col_ptr[c0 + j + 1] = col_rows.len();
            }
        }
        let mut z_off = vec![0.0f64; col_rows.len()];
        let mut z_diag = vec![0.0f64; n];
        let mut pos = vec![u32::MAX; n];
        let mut acc: Vec<f64> = Vec::new();
        for j in (0..n).rev() {
            let (a, b) = (col_ptr[j], col_ptr[j + 1]);
            let s_rows = &col_rows[a..b];
            let u = &col_vals[a..b];
            acc.clear();
            acc.resize(s_rows.len(), 0.0);
            for (q, &r) in s_rows.iter().enumerate() {
                pos[r as usize] = q as u32;
            }
            // acc[q] = sum_k U_kj Z_{s_q, k} over k in the pattern of column j.
            for (bk, &k) in s_rows.iter().enumerate() {
                let k = k as usize;
                let ukj = u[bk];
                acc[bk] += ukj * z_diag[k];
                for t in col_ptr[k]..col_ptr[k + 1] {
                    let q = pos[col_rows[t] as usize];
                    if q != u32::MAX {
                        let z = z_off[t];
                        acc[q as usize] += ukj * z;
                        acc[bk] += u[q as usize] * z;
                    }
                }
            }
            let inv = self.inv_diag[j];
            let mut zjj = inv * inv;
            for (q, &r) in s_rows.iter().enumerate() {
                z_off[a + q] = -acc[q];
                zjj += u[q] * acc[q];
                pos[r as usize] = u32::MAX;
            }
            z_diag[j] = zjj;
        }
        z_diag
    }
}

/// x, y and z of one right-hand-side row padded to four lanes, so that one 256-bit operation
/// serves all three (see [`NumericFactor::solve_lanes`]).
#[derive(Clone, Copy, Default, Debug, PartialEq)]
#[repr(C, align(32))]
pub(crate) struct Lane4(pub [f64; 4]);

impl Lane4 {
    /// `v` in the first three lanes.
    #[inline(always)]
    pub fn from_vec(v: DVec3) -> Self {
        Self([v.x, v.y, v.z, 0.0])
    }

    /// The first three lanes.
    #[inline(always)]
    pub fn vec(self) -> DVec3 {
        DVec3::new(self.0[0], self.0[1], self.0[2])
    }
}

/// Lane-wise `+` and `-`, and `*` by an `f64` (rounded to the lanes' type first), for a padded
/// lane type over `$t`.
macro_rules! lane_arithmetic {
    ($lanes:ident, $t:ty) => {
        impl Add for $lanes {
            type Output = $lanes;
            #[inline(always)]
            fn add(self, o: $lanes) -> $lanes {
                $lanes(std::array::from_fn(|k| self.0[k] + o.0[k]))
            }
        }

        impl Sub for $lanes {
            type Output = $lanes;
            #[inline(always)]
            fn sub(self, o: $lanes) -> $lanes {
                $lanes(std::array::from_fn(|k| self.0[k] - o.0[k]))
            }
        }

        impl Mul<f64> for $lanes {
            type Output = $lanes;
            #[inline(always)]
            fn mul(self, s: f64) -> $lanes {
                let s = s as $t;
                $lanes(std::array::from_fn(|k| self.0[k] * s))
            }
        }
    };
}

lane_arithmetic!(Lane4, f64);

/// A right-hand-side element of the sweeps: a scalar or padded lanes.
pub(crate) trait Elem<V>:
    Copy + Default + Add<Output = Self> + Sub<Output = Self> + Mul<f64, Output = Self>
{
    /// `acc + l * y`, rounded once where `FUSED` and the type supports it.
    fn madd<const FUSED: bool>(acc: Self, l: V, y: Self) -> Self;
}

/// A right-hand-side row padded to four lanes.
pub(crate) trait PadLanes: Copy + Default {
    /// `v` in the first three lanes.
    fn from_vec(v: DVec3) -> Self;
    /// The first three lanes.
    fn vec(self) -> DVec3;
}

impl PadLanes for Lane4 {
    #[inline(always)]
    fn from_vec(v: DVec3) -> Self {
        Lane4::from_vec(v)
    }
    #[inline(always)]
    fn vec(self) -> DVec3 {
        Lane4::vec(self)
    }
}

impl Elem<f64> for f64 {
    #[inline(always)]
    fn madd<const FUSED: bool>(acc: f64, l: f64, y: f64) -> f64 {
        acc + l * y
    }
}

impl Elem<f64> for Lane4 {
    #[inline(always)]
    fn madd<const FUSED: bool>(acc: Lane4, l: f64, y: Lane4) -> Lane4 {
        if FUSED {
            // Only instantiated inside `sweep_fused`, compiled with FMA: one instruction.
            Lane4(std::array::from_fn(|k| l.mul_add(y.0[k], acc.0[k])))
        } else {
            Lane4(std::array::from_fn(|k| acc.0[k] + l * y.0[k]))
        }
    }
}

/// `sum_j row[j] * y[j]` with four partial sums, so that the multiply-adds of a long row do not
/// wait on one another.
#[inline(always)]
fn dot<T, V, const FUSED: bool>(row: &[V], y: &[T]) -> T
where
    T: Elem<V>,
    V: FactorValue,
{
    if row.len() < 4 {
        let mut acc = T::default();
        for (&r, &y) in row.iter().zip(y) {
            acc = T::madd::<FUSED>(acc, r, y);
        }
        return acc;
    }
    let mut acc = [T::default(); 4];
    let (rc, rr) = row.as_chunks::<4>();
    let (yc, yr) = y[..row.len()].as_chunks::<4>();
    for (r, y) in rc.iter().zip(yc) {
        for k in 0..4 {
            acc[k] = T::madd::<FUSED>(acc[k], r[k], y[k]);
        }
    }
    let mut tail = T::default();
    for (&r, &y) in rr.iter().zip(yr) {
        tail = T::madd::<FUSED>(tail, r, y);
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

/// Row indices of the factor's off-diagonal entries.
#[derive(Debug)]
enum Rows {
    Narrow(Vec<u16>),
    Wide(Vec<u32>),
}

impl Rows {
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

    /// Our factor expanded to a dense lower triangle (row-major), with `true` where the layout
    /// stores an entry.
    fn dense_factor(s: &SymbolicFactor, f: &NumericFactor) -> (Vec<f64>, Vec<bool>) {
        let n = s.n();
        let (mut l, mut held) = (vec![0.0; n * n], vec![false; n * n]);
        let rows: Vec<usize> = match &s.sn_rows {
            Rows::Narrow(r) => r.iter().map(|&x| x as usize).collect(),
            Rows::Wide(r) => r.iter().map(|&x| x as usize).collect(),
        };
        let mut put = |i: usize, j: usize, v: f64| {
            l[i * n + j] = v;
            held[i * n + j] = true;
        };
        for j in 0..n {
            put(j, j, 1.0 / f.inv_diag[j]);
        }
        for j in 0..s.pre {
            let range = s.pre_ptr[j] as usize..s.pre_ptr[j + 1] as usize;
            for (&r, &v) in rows[range.clone()].iter().zip(&f.off_vals[range]) {
                put(r, j, v);
            }
        }
        for sn in 0..s.supernodes() {
            let (c0, c1) = (s.sn_cols[sn] as usize, s.sn_cols[sn + 1] as usize);
            let w = c1 - c0;
            let below = &rows[s.row_ptr[sn] as usize..s.row_ptr[sn + 1] as usize];
            let v = &f.off_vals[s.val_ptr[sn] as usize..s.val_ptr[sn + 1] as usize];
            let (diag, rect) = v.split_at(w * (w - 1) / 2);
            for i in 1..w {
                for j in 0..i {
                    put(c0 + i, c0 + j, diag[i * (i - 1) / 2 + j]);
                }
            }
            for (k, &r) in below.iter().enumerate() {
                for j in 0..w {
                    put(r, c0 + j, rect[k * w + j]);
                }
            }
        }
        (l, held)
    }

    /// Dense Cholesky factor (row-major lower triangle) of `P m P^T`.
    fn dense_cholesky(m: &CsrMatrix, perm: &[u32]) -> Vec<f64> {
        let n = m.n;
        let mut iperm = vec![0usize; n];
        for (i, &p) in perm.iter().enumerate() {
            iperm[p as usize] = i;
        }
        let mut a = vec![0.0; n * n];
        for r in 0..n {
            let (cols, vals) = m.row(r);
            for (&c, &v) in cols.iter().zip(vals) {
                a[iperm[r] * n + iperm[c as usize]] = v;
            }
        }
        for j in 0..n {
            let d = (a[j * n + j] - (0..j).map(|k| a[j * n + k].powi(2)).sum::<f64>()).sqrt();
            a[j * n + j] = d;
            for i in j + 1..n {
                let dot: f64 = (0..j).map(|k| a[i * n + k] * a[j * n + k]).sum();
                a[i * n + j] = (a[i * n + j] - dot) / d;
                a[j * n + i] = 0.0;
            }
        }
        a
    }

    /// Factors `m` and solves `m x = b` for `b = m x`, three right-hand sides at once and the z
    /// components alone; both must reproduce `x` to 1e-12 relative. The factor must match a
    /// dense Cholesky factor of the permuted matrix to 1e-12 of its largest entry, with every
    /// entry the layout does not store below that.
    fn assert_solves_reproduce(m: &CsrMatrix, x: &[DVec3]) {
        let s = SymbolicFactor::analyze(m).unwrap();
        let f = NumericFactor::factorize(&s, m).unwrap();
        assert_factor_matches_dense(&s, &f, m);
        // b = A x, gathered in the factor's ordering.
        let ax = |r: usize| -> DVec3 {
            let (cols, vals) = m.row(r);
            cols.iter()
                .zip(vals)
                .map(|(&j, &v)| v * x[j as usize])
                .sum()
        };
        let mut b: Vec<DVec3> = s.perm().iter().map(|&r| ax(r as usize)).collect();
        let mut bz: Vec<f64> = b.iter().map(|v| v.z).collect();
        let mut lanes = vec![Lane4::default(); b.len()];
        f.solve_permuted(&s, &mut b, &mut lanes);
        f.solve_scalar_permuted(&s, &mut bz);
        for (k, &r) in s.perm().iter().enumerate() {
            let want = x[r as usize];
            let scale = want.length().max(1.0);
            assert!((b[k] - want).length() < 1e-12 * scale, "row {k}");
            assert!((bz[k] - want.z).abs() < 1e-12 * scale, "row {k}");
        }
    }

    /// `f` (laid out by `s`) against a dense Cholesky factor of `P m P^T`: every entry to 1e-12
    /// of the largest, every entry the layout does not store zero to the same tolerance, and
    /// the layout holding exactly `factor_nnz` entries.
    fn assert_factor_matches_dense(s: &SymbolicFactor, f: &NumericFactor, m: &CsrMatrix) {
        let (ours, held) = dense_factor(s, f);
        let reference = dense_cholesky(m, s.perm());
        let big = reference.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for (k, (a, b)) in ours.iter().zip(&reference).enumerate() {
            assert!(
                (a - b).abs() <= 1e-12 * big,
                "entry {k} ({}): {a} against the dense factor's {b}",
                held[k]
            );
        }
        assert_eq!(held.iter().filter(|&&h| h).count(), s.factor_nnz());
    }

    /// The system matrix of a 6 x 6-cell red/black sheet pinned along one edge, and its model.
    fn sheet_system() -> (std::sync::Arc<crate::ClothModel>, CsrMatrix) {
        use crate::{BaseMesh, ClothMesh, ClothModel, Material, SolverSettings};
        let c = 6;
        let base = BaseMesh::rectangle(1.0, 1.0, c, c).unwrap();
        let mesh = std::sync::Arc::new(ClothMesh::new(&base).unwrap());
        let top: Vec<u32> = (0..=c).map(|i| BaseMesh::grid_index(c, i, c)).collect();
        let pins = mesh.nodes_for_vertices(&top, true);
        let model =
            ClothModel::new(mesh, Material::default(), &pins, SolverSettings::default()).unwrap();
        let m = model.system().clone();
        (model, m)
    }

    /// On a red/black sheet the rows eliminated before the supernodes are exactly the free
    /// black nodes (each tied to the red nodes of its fan by its conformity row, and none
    /// coupled to another), and the factor still matches a dense one to 1e-12.
    #[test]
    fn black_nodes_are_eliminated_before_the_supernodes() {
        let (model, m) = sheet_system();
        let s = SymbolicFactor::analyze(&m).unwrap();
        let mesh = model.mesh();
        let black: Vec<u32> = (0..m.n as u32)
            .filter(|&fi| (model.free_nodes[fi as usize] as usize) < mesh.base_vertex_count())
            .collect();
        let mut pre = s.perm()[..s.pre].to_vec();
        pre.sort_unstable();
        assert_eq!(pre, black);
        let f = NumericFactor::factorize(&s, &m).unwrap();
        assert_factor_matches_dense(&s, &f, &m);
    }

    /// Refactoring with some rows decoupled (held nodes, among them eliminated ones and their
    /// neighbours) gives the factor of the matrix with those rows and columns reduced to their
    /// diagonal, to 1e-12; refactoring again without them gives the first factor back exactly.
    #[test]
    fn refactor_with_decoupled_rows_matches_the_reduced_matrix() {
        let (_, m) = sheet_system();
        let s = SymbolicFactor::analyze(&m).unwrap();
        let first = NumericFactor::<f64>::factorize(&s, &m).unwrap();
        let mut decouple = vec![false; m.n];
        let held: Vec<usize> = [s.perm()[0], s.perm()[s.pre / 2]]
            .into_iter()
            .map(|r| r as usize)
            .chain([3, m.n / 2, m.n - 1])
            .collect();
        for &r in &held {
            decouple[r] = true;
        }
        let mut reduced = m.clone();
        for r in 0..m.n {
            let range = m.row_ptr[r] as usize..m.row_ptr[r + 1] as usize;
            for k in range {
                let c = m.cols[k] as usize;
                if c != r && (decouple[r] || decouple[c]) {
                    reduced.vals[k] = 0.0;
                }
            }
        }
        let mut f = NumericFactor::empty();
        let mut scratch = FactorScratch::default();
        f.refactor(&s, &m, Some(&decouple), &mut scratch).unwrap();
        assert_factor_matches_dense(&s, &f, &reduced);
        f.refactor(&s, &m, None, &mut scratch).unwrap();
        assert_eq!(f.inv_diag, first.inv_diag);
        assert_eq!(f.off_vals, first.off_vals);
    }

    /// The selected inversion's diagonal of `A^-1` on the red/black sheet's system (black
    /// rows eliminated first, then supernodes) matches `(A^-1)_ii` from a solve with the unit
    /// vector `e_i`, for every row, to 1e-10 relative.
    #[test]
    fn inverse_diagonal_matches_unit_solves() {
        let (_, m) = sheet_system();
        let s = SymbolicFactor::analyze(&m).unwrap();
        let f = NumericFactor::<f64>::factorize(&s, &m).unwrap();
        let diag = f.inverse_diagonal(&s);
        let mut e = vec![0.0; m.n];
        for i in 0..m.n {
            e.fill(0.0);
            e[i] = 1.0;
            f.solve_scalar_permuted(&s, &mut e);
            let want = e[i];
            assert!(want > 0.0);
            assert!(
                (diag[i] - want).abs() <= 1e-10 * want,
                "row {i}: {} {want}",
                diag[i]
            );
        }
    }

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
        let x: Vec<DVec3> = (0..n)
            .map(|i| DVec3::new((i as f64).sin(), (i as f64).cos(), i as f64))
            .collect();
        assert_solves_reproduce(&m, &x);
    }

    /// A 16 x 16 grid with a 9-point coupling (wide supernodes after AMD ordering), weights
    /// varied so no two entries agree: solving `A x = b` for three right-hand sides and for one
    /// reproduces `x` to 1e-12 relative, and the supernodes cover the factor's nonzeros exactly.
    #[test]
    fn supernodal_solves_match_on_a_grid() {
        let g = 16u32;
        let n = (g * g) as usize;
        let mut t = Vec::new();
        for i in 0..g {
            for j in 0..g {
                let a = i * g + j;
                let mut diag = 1.0;
                for (di, dj) in [(0i32, 1i32), (1, 0), (1, 1), (1, -1)] {
                    let (p, q) = (i as i32 + di, j as i32 + dj);
                    if p < 0 || q < 0 || p >= g as i32 || q >= g as i32 {
                        continue;
                    }
                    let b = p as u32 * g + q as u32;
                    let v = -1.0 - 0.01 * ((a * 7 + b * 13) % 17) as f64;
                    t.push((a, b, v));
                    t.push((b, a, v));
                    diag -= 2.0 * v;
                }
                t.push((a, a, diag + 8.0));
            }
        }
        let m = CsrMatrix::from_triplets(n, &mut t);
        let s = SymbolicFactor::analyze(&m).unwrap();
        assert!(s.supernodes() < n * 3 / 4, "{} supernodes", s.supernodes());
        let x: Vec<DVec3> = (0..n)
            .map(|i| DVec3::new((i as f64).sin(), (i as f64 * 0.3).cos(), 1.0 + i as f64))
            .collect();
        assert_solves_reproduce(&m, &x);
    }
}
