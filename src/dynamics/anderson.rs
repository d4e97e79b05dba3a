//! Anderson mixing (type II) of a fixed-point map, safeguarded by its residual.
//!
//! The product's iteration is the map `G` = local step, global solve, coupled contact step
//! (`solver::local_global_map`). Plain iteration `x <- G(x)` converges slowly on stiff
//! isometry. Anderson mixing (Walker and Ni 2011; Peng et al. 2018 for projective dynamics)
//! feeds `G` a combination of its last outputs instead: with the residual `f_k = G(x_k) - x_k`
//! and the last `m` differences `dF = [f_(i+1) - f_i]`, `dG = [G(x_(i+1)) - G(x_i)]`,
//!
//! ```text
//! gamma    = argmin |f_k - dF gamma|^2
//! x_(k+1)  = G(x_k) - dG gamma
//! ```
//!
//! No energy is needed: contact forces do not minimise one, so the safeguard is the residual
//! itself. An input that [`Anderson::mix`] produced is *accepted* when `G` answers it with a
//! smaller residual than the input before it, else the caller goes back to the last accepted
//! output of `G` (the pair of iterate and contact forces `G` produced there) and the history
//! is cleared (`solver::anderson`). The history is also cleared when the contact set changes:
//! the differences then belong to another map.
//!
//! Everything lives in buffers sized once ([`Anderson::ensure`]): mixing allocates nothing. The
//! sums run in a fixed order, so the result does not depend on the thread count.

use glam::DVec3;

/// Most differences [`crate::SolverMethod::Anderson`] may keep.
pub const MAX_HISTORY: usize = 16;

/// Relative Tikhonov regularisation of the least-squares fit (times the Gram matrix's largest
/// diagonal entry): keeps exactly dependent differences (a map that no longer moves) from a
/// singular system. The normal equations square the differences' condition number, so it must
/// stay tiny: at 1e-10 the linear test below stalled at a residual of 8e-3 with a full
/// history.
const REGULARISATION: f64 = 1e-14;

/// Mixing state over the free nodes of one substep (factor ordering, positions relative to the
/// substep's origin).
#[derive(Debug, Default)]
pub(crate) struct Anderson {
    /// The last accepted output of `G`, and its residual.
    g_prev: Vec<DVec3>,
    f_prev: Vec<DVec3>,
    /// The current input of `G`, its output, and that output's residual.
    x_in: Vec<DVec3>,
    g: Vec<DVec3>,
    f: Vec<DVec3>,
    /// Differences of outputs and of residuals, `history` slots used as a ring.
    dg: Vec<Vec<DVec3>>,
    df: Vec<Vec<DVec3>>,
    /// Gram matrix `dF^T dF` (row-major, `MAX_HISTORY` wide) kept as columns come and go.
    gram: Vec<f64>,
    /// Stored differences and the slot of the newest.
    len: usize,
    newest: usize,
    /// Whether `g_prev`/`f_prev` hold an accepted output.
    has_prev: bool,
    /// Squared residual of the last accepted output.
    pub(crate) prev_residual: f64,
}

impl Anderson {
    /// Sizes the buffers for `nf` free nodes and `history` differences, reusing their memory,
    /// and forgets everything (a new substep).
    pub(crate) fn ensure(&mut self, nf: usize, history: usize) {
        let history = history.clamp(1, MAX_HISTORY);
        for v in [
            &mut self.g_prev,
            &mut self.f_prev,
            &mut self.x_in,
            &mut self.g,
            &mut self.f,
        ] {
            v.resize(nf, DVec3::ZERO);
        }
        if self.dg.len() < history {
            self.dg.resize_with(history, Vec::new);
            self.df.resize_with(history, Vec::new);
        }
        for v in self.dg.iter_mut().chain(self.df.iter_mut()) {
            v.resize(nf, DVec3::ZERO);
        }
        self.gram.resize(MAX_HISTORY * MAX_HISTORY, 0.0);
        self.len = 0;
        self.newest = 0;
        self.has_prev = false;
        self.prev_residual = f64::INFINITY;
    }

    /// The input `G` is evaluated at next (to be written into the node positions).
    pub(crate) fn input(&self) -> &[DVec3] {
        &self.x_in
    }

    /// Sets the input from `x` (free nodes in factor ordering, relative to the origin).
    pub(crate) fn set_input(&mut self, x: impl Iterator<Item = DVec3>) {
        for (d, s) in self.x_in.iter_mut().zip(x) {
            *d = s;
        }
    }

    /// Goes back after a refused input: the stored differences are forgotten and the next
    /// input is the last accepted output (which stays the last accepted).
    pub(crate) fn refuse(&mut self) {
        self.len = 0;
        self.plain();
    }

    /// Makes the last accepted output the next input, unmixed; returns false (not judged).
    fn plain(&mut self) -> bool {
        self.x_in.copy_from_slice(&self.g_prev);
        false
    }

    /// Forgets the differences and the last accepted output too: the next output starts the
    /// history afresh (the contact set changed, so differences across it mean nothing).
    pub(crate) fn restart(&mut self) {
        self.len = 0;
        self.has_prev = false;
    }

    /// Takes `G`'s output `g` at the current input: returns its squared residual
    /// `|g - x_in|^2`, keeping the output and its residual.
    pub(crate) fn residual(&mut self, g: impl Iterator<Item = DVec3>) -> f64 {
        let mut sum = 0.0;
        for (((f, gk), &x), g) in self.f.iter_mut().zip(&mut self.g).zip(&self.x_in).zip(g) {
            *gk = g;
            *f = g - x;
            sum += f.length_squared();
        }
        sum
    }

    /// Accepts the output whose residual [`Anderson::residual`] just measured: stores its
    /// differences from the last accepted one (if any) and makes it the last accepted.
    pub(crate) fn accept(&mut self, residual: f64, history: usize) {
        let history = history.clamp(1, MAX_HISTORY).min(self.dg.len());
        if self.has_prev {
            let slot = if self.len == 0 {
                0
            } else {
                (self.newest + 1) % history
            };
            let (dg, df) = (&mut self.dg[slot], &mut self.df[slot]);
            for ((((dg, df), &g), gp), (&f, fp)) in dg
                .iter_mut()
                .zip(df.iter_mut())
                .zip(&self.g)
                .zip(self.g_prev.iter_mut())
                .zip(self.f.iter().zip(self.f_prev.iter_mut()))
            {
                *dg = g - *gp;
                *df = f - *fp;
                *gp = g;
                *fp = f;
            }
            self.newest = slot;
            self.len = (self.len + 1).min(history);
        } else {
            self.g_prev.copy_from_slice(&self.g);
            self.f_prev.copy_from_slice(&self.f);
            self.has_prev = true;
        }
        self.prev_residual = residual;
    }

    /// Forms the next input from the last accepted output: `g - dG gamma` with `gamma` the
    /// least-squares fit of its residual by the stored residual differences, or `g` itself
    /// with no history. Returns whether the input was mixed (and so is to be judged).
    ///
    /// Two passes over the nodes whatever the history: one forms every product the fit needs
    /// (the newest difference against each stored one, for the Gram matrix, and each stored one
    /// against the residual), one forms the input from every stored output difference; the
    /// sums run in node order, as one pass per product did (bit-identical). Mixing costs about
    /// 26 us an iteration on the 2,025-node sheet (13 % of the frame in `perf`, 2 x 5: 2.02 ms
    /// against plain local-global's 1.74 ms), bound by memory traffic: some 1.2 MB of vectors
    /// stream through an iteration, and fusing the passes did not move the time.
    pub(crate) fn mix(&mut self) -> bool {
        let m = self.len;
        if m == 0 {
            return self.plain();
        }
        let newest = self.newest;
        let mut gram_row = [0.0f64; MAX_HISTORY];
        let mut b = [0.0f64; MAX_HISTORY];
        let df = &self.df[..m];
        for (k, &f) in self.f_prev.iter().enumerate() {
            let d_new = df[newest][k];
            for j in 0..m {
                let d = df[j][k];
                gram_row[j] += d_new.dot(d);
                b[j] += d.dot(f);
            }
        }
        for (j, &v) in gram_row.iter().enumerate().take(m) {
            self.gram[newest * MAX_HISTORY + j] = v;
            self.gram[j * MAX_HISTORY + newest] = v;
        }
        let mut a = [0.0f64; MAX_HISTORY * MAX_HISTORY];
        let mut scale = 0.0f64;
        for i in 0..m {
            for j in 0..m {
                a[i * m + j] = self.gram[i * MAX_HISTORY + j];
            }
            scale = scale.max(a[i * m + i]);
        }
        if !(scale > 0.0 && scale.is_finite()) {
            return self.plain();
        }
        for i in 0..m {
            a[i * m + i] += REGULARISATION * scale;
        }
        let Some(gamma) = solve_spd(&mut a, &mut b, m) else {
            return self.plain();
        };
        let dg = &self.dg[..m];
        for (k, (x, &g)) in self.x_in.iter_mut().zip(&self.g_prev).enumerate() {
            let mut v = g;
            for (j, &gj) in gamma.iter().enumerate().take(m) {
                v -= gj * dg[j][k];
            }
            *x = v;
        }
        true
    }
}

/// Solves the symmetric positive definite `m x m` system `a x = b` (row-major, `m` wide) by
/// Cholesky in place; `None` where a pivot is not positive or the solution not finite.
fn solve_spd(
    a: &mut [f64; MAX_HISTORY * MAX_HISTORY],
    b: &mut [f64; MAX_HISTORY],
    m: usize,
) -> Option<[f64; MAX_HISTORY]> {
    for j in 0..m {
        let mut d = a[j * m + j];
        for k in 0..j {
            d -= a[j * m + k] * a[j * m + k];
        }
        if d <= 0.0 || !d.is_finite() {
            return None;
        }
        let d = d.sqrt();
        a[j * m + j] = d;
        for i in j + 1..m {
            let mut s = a[i * m + j];
            for k in 0..j {
                s -= a[i * m + k] * a[j * m + k];
            }
            a[i * m + j] = s / d;
        }
    }
    for i in 0..m {
        let mut s = b[i];
        for k in 0..i {
            s -= a[i * m + k] * b[k];
        }
        b[i] = s / a[i * m + i];
    }
    for i in (0..m).rev() {
        let mut s = b[i];
        for k in i + 1..m {
            s -= a[k * m + i] * b[k];
        }
        b[i] = s / a[i * m + i];
    }
    b[..m].iter().all(|v| v.is_finite()).then_some(*b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a linear contraction `G(x) = A x + c` in `n` unknowns, Anderson mixing with `n`
    /// differences reaches the fixed point (to 1e-9) in `n + 2` evaluations, where plain
    /// iteration with the same contraction factor 0.95 is still `0.95^(n+2)` away.
    #[test]
    fn mixing_solves_a_linear_contraction_in_few_steps() {
        let n = 4; // four nodes' x lanes only (y, z stay 0)
        let a = [
            [0.9, 0.05, 0.0, 0.0],
            [0.05, 0.8, 0.05, 0.0],
            [0.0, 0.05, 0.95, 0.0],
            [0.0, 0.0, 0.0, 0.7],
        ];
        let c = [1.0, -2.0, 0.5, 3.0];
        let g = |x: &[DVec3]| -> Vec<DVec3> {
            (0..n)
                .map(|i| {
                    let v: f64 = (0..n).map(|j| a[i][j] * x[j].x).sum::<f64>() + c[i];
                    DVec3::new(v, 0.0, 0.0)
                })
                .collect()
        };
        let mut aa = Anderson::default();
        aa.ensure(n, n);
        aa.set_input(std::iter::repeat_n(DVec3::ZERO, n));
        for _ in 0..n + 2 {
            let out = g(aa.input());
            let r = aa.residual(out.iter().copied());
            aa.accept(r, n);
            aa.mix();
        }
        let out = g(aa.input());
        let r = aa.residual(out.iter().copied());
        assert!(r.sqrt() < 1e-9, "residual {}", r.sqrt());
    }

    /// A singular history (the same difference twice) falls back to the plain output instead
    /// of producing non-finite coefficients.
    #[test]
    fn a_singular_history_gives_the_plain_output() {
        let mut aa = Anderson::default();
        aa.ensure(2, 3);
        aa.set_input([DVec3::ZERO, DVec3::ZERO].into_iter());
        for _ in 0..4 {
            let out = [DVec3::ONE, DVec3::ONE];
            let r = aa.residual(out.iter().copied());
            aa.accept(r, 3);
            aa.mix();
            assert!(aa.input().iter().all(|v| v.is_finite()));
        }
    }
}
