//! Projected Newton: the converged reference ([`crate::SolverMethod::Newton`]'s substeps, which
//! `tune` and `budget_sweep` measure budgets against) and the static drape
//! ([`crate::equilibrium`]). Not a frame-loop solver: it assembles the true Hessian (each
//! element's part projected to be positive semidefinite) and refactors it every iteration, and
//! it allocates. Contact enters only through the substep's last pass.

use glam::{DVec2, DVec3};

use crate::energy::{deformation_gradient, nearest_rotation};
use crate::error::ClothError;
use crate::factor::{NumericFactor, SymbolicFactor};
use crate::model::{ClothModel, PINNED};
use crate::solver::Scratch;
use crate::sparse::CsrMatrix;

/// What [`crate::Cloth::relax`] reached.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RelaxReport {
    /// Newton iterations run.
    pub iterations: u32,
    /// Largest force residual over free nodes at the end, in newtons.
    pub force_residual: f64,
    /// Whether the residual fell below the requested tolerance.
    pub converged: bool,
}

/// Most step halvings per line search of Newton's method.
const NEWTON_BACKTRACKS: u32 = 40;

/// One implicit substep solved by Newton's method: minimises
/// `sum m |x - x~|^2 / (2 h~^2) + E(x)` (`x~` in `scratch.x_tilde`, gravity inside it) until the
/// largest nodal force residual is below a thousandth of the heaviest free node's weight, or
/// after `max_iterations`. The [`crate::SolverMethod::Newton`] path:
/// a converged reference, not a frame-loop solver (it allocates and refactors every iteration).
pub(crate) fn newton_substep(
    model: &ClothModel,
    x: &mut [DVec3],
    inv_ht2: f64,
    max_iterations: u32,
    scratch: &mut Scratch,
) -> Result<RelaxReport, ClothError> {
    let x_tilde = std::mem::take(&mut scratch.x_tilde);
    let order = &model.solve_order;
    // Tolerance: a thousandth of the heaviest node's weight under 1 g. Newton reaches it in 3
    // to 5 iterations from the prediction; the rounding floor of the gradient (the 1e8-weight
    // conformity rows) is 1e-7 to 1e-6 of that weight on the 12 x 12-cell square.
    let heaviest = model
        .free_nodes
        .iter()
        .map(|&n| model.masses[n as usize])
        .fold(0.0f64, f64::max);
    let tolerance = 1e-3 * heaviest * 9.81;
    let report = newton(
        model,
        x,
        |x, scratch, grad| {
            let mut e = static_gradient(model, x, DVec3::ZERO, scratch, grad);
            for (g, &node) in grad.iter_mut().zip(order) {
                let node = node as usize;
                let m = model.masses[node] * inv_ht2;
                let d = x[node] - x_tilde[node];
                *g += m * d;
                e += 0.5 * m * d.length_squared();
            }
            e
        },
        inv_ht2,
        tolerance,
        max_iterations,
        scratch,
    );
    scratch.x_tilde = x_tilde;
    report
}

/// Newton's method with a projected Hessian, a Levenberg-Marquardt mass shift and an Armijo
/// line search on `eval` (energy, and gradient over the free nodes in the factor's ordering);
/// `mass_scale` adds `m mass_scale` to the Hessian's diagonal (the inertia term's `1/h~^2`, or
/// zero for statics).
pub(crate) fn newton(
    model: &ClothModel,
    x: &mut [DVec3],
    mut eval: impl FnMut(&[DVec3], &mut Scratch, &mut [DVec3]) -> f64,
    mass_scale: f64,
    tolerance: f64,
    max_iterations: u32,
    scratch: &mut Scratch,
) -> Result<RelaxReport, ClothError> {
    let nf = model.free_nodes.len();
    let order = &model.solve_order;
    if nf == 0 {
        return Ok(RelaxReport {
            converged: true,
            ..Default::default()
        });
    }
    let mut slot = vec![PINNED; x.len()];
    for (i, &node) in order.iter().enumerate() {
        slot[node as usize] = i as u32;
    }
    let mut grad = vec![DVec3::ZERO; nf];
    let mut trial_grad = vec![DVec3::ZERO; nf];
    let mut x0 = vec![DVec3::ZERO; nf];
    let mut step = vec![0.0; 3 * nf];
    let mut d = vec![DVec3::ZERO; nf];
    let mut triplets = Vec::new();
    let mut symbolic: Option<SymbolicFactor> = None;
    // Levenberg-Marquardt shift, as a multiple of each node's mass (1/s^2).
    let mut shift = 1e-3;
    let mut energy = eval(x, scratch, &mut grad);
    let residual = |g: &[DVec3]| g.iter().map(|v| v.length()).fold(0.0f64, f64::max);
    let mut report = RelaxReport {
        force_residual: residual(&grad),
        ..Default::default()
    };
    while report.iterations < max_iterations {
        if report.force_residual < tolerance {
            report.converged = true;
            break;
        }
        report.iterations += 1;
        triplets.clear();
        hessian(model, x, &slot, &mut triplets);
        for (i, &node) in order.iter().enumerate() {
            let d = (shift + mass_scale) * model.masses[node as usize].max(1e-12);
            for c in 0..3 {
                let k = 3 * i as u32 + c;
                triplets.push((k, k, d));
            }
        }
        let h = CsrMatrix::from_triplets(3 * nf, &mut triplets);
        if symbolic.is_none() {
            symbolic = Some(SymbolicFactor::analyze(&h)?);
        }
        let sym = symbolic.as_ref().expect("analysed above");
        let factor = match NumericFactor::<f64>::factorize(sym, &h) {
            Ok(f) => f,
            Err(_) => {
                shift *= 10.0;
                continue;
            }
        };
        let perm = sym.perm();
        for (k, &p) in perm.iter().enumerate() {
            let p = p as usize;
            step[k] = -grad[p / 3][p % 3];
        }
        factor.solve_scalar_permuted(sym, &mut step);
        for (k, &p) in perm.iter().enumerate() {
            let p = p as usize;
            d[p / 3][p % 3] = step[k];
        }
        let slope: f64 = grad.iter().zip(&d).map(|(g, d)| g.dot(*d)).sum();
        for (i, &node) in order.iter().enumerate() {
            x0[i] = x[node as usize];
        }
        let mut alpha = 1.0;
        let mut accepted = false;
        for _ in 0..NEWTON_BACKTRACKS {
            for (i, &node) in order.iter().enumerate() {
                x[node as usize] = x0[i] + alpha * d[i];
            }
            let e = eval(x, scratch, &mut trial_grad);
            if e <= energy + 1e-4 * alpha * slope || (e - energy).abs() <= 1e-15 * energy.abs() {
                energy = e;
                std::mem::swap(&mut grad, &mut trial_grad);
                accepted = true;
                break;
            }
            alpha *= 0.5;
        }
        if accepted {
            shift = (shift / 3.0).max(1e-6);
        } else {
            for (i, &node) in order.iter().enumerate() {
                x[node as usize] = x0[i];
            }
            shift *= 10.0;
        }
        report.force_residual = residual(&grad);
    }
    report.converged = report.force_residual < tolerance;
    Ok(report)
}

/// Pushes the Hessian of the static energy (each element's part projected to be positive
/// semidefinite) over the free unknowns `3 * slot[node] + axis`.
fn hessian(model: &ClothModel, x: &[DVec3], slot: &[u32], out: &mut Vec<(u32, u32, f64)>) {
    let terms = &model.terms;
    // Quadratic rows (conformity, boundary, bending): w c_a c_b on each axis. Curved bending
    // rows use the same Gauss-Newton block.
    for rows in [&terms.linear, &terms.bending.rows] {
        for r in 0..rows.len() {
            let (nodes, coefs) = rows.row(r);
            let w = rows.weight[r];
            for (&a, &ca) in nodes.iter().zip(coefs) {
                for (&b, &cb) in nodes.iter().zip(coefs) {
                    let (sa, sb) = (slot[a as usize], slot[b as usize]);
                    if sa != PINNED && sb != PINNED {
                        for c in 0..3 {
                            out.push((3 * sa + c, 3 * sb + c, w * ca * cb));
                        }
                    }
                }
            }
        }
    }
    let mut push_block = |a: u32, b: u32, m: &[[f64; 3]; 3]| {
        let (sa, sb) = (slot[a as usize], slot[b as usize]);
        if sa != PINNED && sb != PINNED {
            for (i, row) in m.iter().enumerate() {
                for (j, &v) in row.iter().enumerate() {
                    out.push((3 * sa + i as u32, 3 * sb + j as u32, v));
                }
            }
        }
    };
    // Isometry: H = G^T H_F G with H_F the projected Hessian of (w/2)|F - R(F)|^2.
    let rigid = &terms.rigid;
    for e in 0..rigid.nodes.len() {
        let f = deformation_gradient(&rigid.nodes[e], &rigid.grad[e], x);
        let hf = isometry_hessian(f, rigid.weight[e]);
        let g: &[DVec2; 3] = &rigid.grad[e];
        for a in 0..3 {
            for b in 0..3 {
                let mut m = [[0.0; 3]; 3];
                for (i, row) in m.iter_mut().enumerate() {
                    for (j, v) in row.iter_mut().enumerate() {
                        for c in 0..2 {
                            for d in 0..2 {
                                *v += g[a][c] * g[b][d] * hf[3 * c + i][3 * d + j];
                            }
                        }
                    }
                }
                push_block(rigid.nodes[e][a], rigid.nodes[e][b], &m);
            }
        }
    }
    // Render-edge springs: w [u u^T + max(1 - r/l, 0) (I - u u^T)].
    let sp = &terms.springs;
    for ((&[a, b], &w), &rest) in sp.nodes.iter().zip(&sp.weight).zip(&sp.rest) {
        let d = x[a as usize] - x[b as usize];
        let l = d.length().max(1e-300);
        let u = d / l;
        let t = (1.0 - rest / l).max(0.0);
        let mut m = [[0.0; 3]; 3];
        for (i, row) in m.iter_mut().enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                let id = if i == j { 1.0 } else { 0.0 };
                *v = w * (u[i] * u[j] + t * (id - u[i] * u[j]));
            }
        }
        let neg = m.map(|r| r.map(|v| -v));
        push_block(a, a, &m);
        push_block(b, b, &m);
        push_block(a, b, &neg);
        push_block(b, a, &neg);
    }
}

/// Hessian of `(w/2)|F - R(F)|^2` in the six entries of `F` (column-major: `3 * column + axis`),
/// by central differences of its gradient `w (F - R(F))`, projected onto its positive
/// semidefinite part.
#[allow(clippy::needless_range_loop)] // index loops read as the matrix algebra they implement
fn isometry_hessian(f: [DVec3; 2], w: f64) -> [[f64; 6]; 6] {
    let scale = f[0].length().max(f[1].length()).max(1e-12);
    let h = 1e-6 * scale;
    let grad = |f: [DVec3; 2]| {
        let r = nearest_rotation(f);
        let (g0, g1) = (f[0] - r[0], f[1] - r[1]);
        [g0.x, g0.y, g0.z, g1.x, g1.y, g1.z]
    };
    let mut m = [[0.0; 6]; 6];
    for k in 0..6 {
        let mut plus = f;
        let mut minus = f;
        plus[k / 3][k % 3] += h;
        minus[k / 3][k % 3] -= h;
        let (gp, gm) = (grad(plus), grad(minus));
        for i in 0..6 {
            m[i][k] = w * (gp[i] - gm[i]) / (2.0 * h);
        }
    }
    for i in 0..6 {
        for k in 0..i {
            let s = 0.5 * (m[i][k] + m[k][i]);
            m[i][k] = s;
            m[k][i] = s;
        }
    }
    project_psd(m)
}

/// The nearest positive semidefinite matrix: symmetric Jacobi eigen-decomposition, negative
/// eigenvalues set to zero.
#[allow(clippy::needless_range_loop)] // Jacobi rotations update rows and columns by index
fn project_psd(mut a: [[f64; 6]; 6]) -> [[f64; 6]; 6] {
    let mut v = [[0.0; 6]; 6];
    for (i, row) in v.iter_mut().enumerate() {
        row[i] = 1.0;
    }
    let norm: f64 = a.iter().flatten().map(|x| x * x).sum::<f64>().sqrt();
    for _sweep in 0..50 {
        let off: f64 = (0..6)
            .flat_map(|i| (0..6).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[i][j] * a[i][j])
            .sum::<f64>()
            .sqrt();
        if off <= 1e-15 * norm.max(1e-300) {
            break;
        }
        for p in 0..6 {
            for q in p + 1..6 {
                if a[p][q].abs() <= 1e-300 {
                    continue;
                }
                let theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..6 {
                    let (akp, akq) = (a[k][p], a[k][q]);
                    a[k][p] = c * akp - s * akq;
                    a[k][q] = s * akp + c * akq;
                }
                for k in 0..6 {
                    let (apk, aqk) = (a[p][k], a[q][k]);
                    a[p][k] = c * apk - s * aqk;
                    a[q][k] = s * apk + c * aqk;
                }
                for row in v.iter_mut() {
                    let (vp, vq) = (row[p], row[q]);
                    row[p] = c * vp - s * vq;
                    row[q] = s * vp + c * vq;
                }
            }
        }
    }
    let mut out = [[0.0; 6]; 6];
    for k in 0..6 {
        let lambda = a[k][k].max(0.0);
        if lambda == 0.0 {
            continue;
        }
        for i in 0..6 {
            for j in 0..6 {
                out[i][j] += lambda * v[i][k] * v[j][k];
            }
        }
    }
    out
}

/// Static energy `E(x) - sum m g . x` (up to a constant) and its gradient over the free nodes in
/// the factor's ordering (`grad[i]` belongs to node `solve_order[i]`). At an equilibrium under
/// `gravity` the gradient is zero, whatever solver reached it.
pub(crate) fn static_gradient(
    model: &ClothModel,
    x: &[DVec3],
    gravity: DVec3,
    scratch: &mut Scratch,
    grad: &mut [DVec3],
) -> f64 {
    let mut potential = 0.0;
    scratch.rhs.fill(DVec3::ZERO);
    for &n in &model.free_nodes {
        let n = n as usize;
        potential -= model.masses[n] * gravity.dot(x[n]);
        scratch.rhs[n] = -model.masses[n] * gravity;
    }
    let energy = add_terms_gradient(model, x, scratch);
    for (gi, &node) in grad.iter_mut().zip(&model.solve_order) {
        *gi = scratch.rhs[node as usize];
    }
    potential + energy
}

/// Energy of every term at `x` and its gradient `sum_c w_c A_c^T (A_c x - p_c)` added to
/// `scratch.rhs` (node order, every node), element by element from the local step's residuals:
/// no product with the assembled matrix is needed (which the model therefore does not keep).
pub(crate) fn add_terms_gradient(model: &ClothModel, x: &[DVec3], scratch: &mut Scratch) -> f64 {
    let terms = &model.terms;
    let grad = &mut scratch.rhs;
    let rigid = terms.rigid_residuals(x, &mut scratch.proj, &mut scratch.energy);
    terms.scatter_rigid(&scratch.proj, grad);
    let springs = terms.spring_residuals(x, &mut scratch.springs, &mut scratch.energy);
    terms.scatter_springs(&scratch.springs, grad);
    let mut curved = 0.0;
    if !terms.bending.curved.is_empty() {
        curved = terms.curved_residuals(x, &mut scratch.curved, &mut scratch.energy);
        terms.scatter_curved(&scratch.curved, grad);
    }
    rigid + springs + curved + terms.quadratic_gradient(x, grad)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Projection keeps a PSD matrix (to 1e-10) and removes a negative eigenvalue exactly.
    #[test]
    fn psd_projection_clamps_only_negative_eigenvalues() {
        let mut a = [[0.0; 6]; 6];
        for (i, row) in a.iter_mut().enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                *v = if i == j {
                    3.0 + i as f64
                } else {
                    0.3 / (1.0 + (i + j) as f64)
                };
            }
        }
        let p = project_psd(a);
        for i in 0..6 {
            for j in 0..6 {
                assert!((p[i][j] - a[i][j]).abs() < 1e-10, "{i} {j}");
            }
        }
        let mut d = [[0.0; 6]; 6];
        d[0][0] = -2.0;
        d[1][1] = 5.0;
        let p = project_psd(d);
        assert!(p[0][0].abs() < 1e-14 && (p[1][1] - 5.0).abs() < 1e-14);
    }
}
