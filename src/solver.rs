//! One implicit substep by local-global (projective dynamics) iterations.
//!
//! Given the prediction `x~` and pin positions, each iteration
//! 1. **local**: projects every red triangle onto its nearest rotation (and every curved bending
//!    row onto its rotated rest curvature), in parallel with rayon, each element writing its own
//!    slot so the result does not depend on the thread count;
//! 2. **global**: solves `K x_F = M x~ / h~^2 - S_FP x_P + sum_c w_c A_c^T p_c` for the free nodes
//!    with the prefactored `K`, x, y and z as one three-column right-hand side.
//!
//! With [`SolverMethod::Lbfgs`] the same two stages evaluate the energy `f` and its gradient
//! `K x - b(x)` instead, and the iteration is L-BFGS whose initial inverse Hessian is the
//! prefactored `K^-1` (Liu, Bouaziz and Kavan 2017): the first iteration is exactly the
//! local-global step, later ones add curvature information from the last few steps, and an Armijo
//! backtracking line search keeps each one a descent step.
//!
//! Everything the loop touches lives in [`Scratch`], allocated once with the cloth.

use glam::DVec3;

use crate::factor::{NumericFactor, SymbolicFactor};
use crate::integrator::Scheme;
use crate::model::{ClothModel, SolverMethod};

/// Most halvings of the step in one line search.
const MAX_BACKTRACKS: u32 = 6;
/// Armijo sufficient-decrease constant.
const ARMIJO: f64 = 1e-4;

/// Preallocated per-cloth workspace for the substep loop.
#[derive(Debug)]
pub(crate) struct Scratch {
    /// Inertial prediction `x~`.
    pub x_tilde: Vec<DVec3>,
    /// Constant part of the right-hand side for this substep.
    pub rhs_const: Vec<DVec3>,
    /// Right-hand side being assembled.
    pub rhs: Vec<DVec3>,
    /// Rotation per rigid element.
    pub proj: Vec<[DVec3; 2]>,
    /// Energy per rigid element.
    pub proj_energy: Vec<f64>,
    /// Scaled edge vector per render-edge spring.
    pub springs: Vec<DVec3>,
    /// Energy per render-edge spring.
    pub spring_energy: Vec<f64>,
    /// Target per curved bending row.
    pub curved: Vec<DVec3>,
    /// Energy per curved bending row.
    pub curved_energy: Vec<f64>,
    /// Right-hand side / solution in the factor's ordering.
    pub solve: Vec<DVec3>,
    /// L-BFGS vectors over the free nodes in the factor's ordering.
    pub lbfgs: Lbfgs,
}

/// L-BFGS state for one substep (over free nodes, factor ordering).
#[derive(Debug, Default)]
pub(crate) struct Lbfgs {
    x: Vec<DVec3>,
    g: Vec<DVec3>,
    d: Vec<DVec3>,
    x_trial: Vec<DVec3>,
    g_trial: Vec<DVec3>,
    s: Vec<Vec<DVec3>>,
    y: Vec<Vec<DVec3>>,
    rho: Vec<f64>,
    alpha: Vec<f64>,
    /// Number of stored pairs and the slot of the newest.
    len: usize,
    newest: usize,
}

impl Lbfgs {
    fn new(nf: usize, history: usize) -> Self {
        Self {
            x: vec![DVec3::ZERO; nf],
            g: vec![DVec3::ZERO; nf],
            d: vec![DVec3::ZERO; nf],
            x_trial: vec![DVec3::ZERO; nf],
            g_trial: vec![DVec3::ZERO; nf],
            s: vec![vec![DVec3::ZERO; nf]; history],
            y: vec![vec![DVec3::ZERO; nf]; history],
            rho: vec![0.0; history],
            alpha: vec![0.0; history],
            len: 0,
            newest: 0,
        }
    }
}

impl Scratch {
    pub fn new(model: &ClothModel) -> Self {
        let n = model.mesh.node_count();
        let t = model.terms.rigid.nodes.len();
        let c = model.terms.bending.curved.len();
        let sp = model.terms.springs.nodes.len();
        Self {
            x_tilde: vec![DVec3::ZERO; n],
            rhs_const: vec![DVec3::ZERO; n],
            rhs: vec![DVec3::ZERO; n],
            proj: vec![[DVec3::ZERO; 2]; t],
            proj_energy: vec![0.0; t],
            springs: vec![DVec3::ZERO; sp],
            spring_energy: vec![0.0; sp],
            curved: vec![DVec3::ZERO; c],
            curved_energy: vec![0.0; c],
            solve: vec![DVec3::ZERO; model.free_nodes.len()],
            lbfgs: match model.settings.method {
                SolverMethod::Lbfgs { history } => {
                    Lbfgs::new(model.free_nodes.len(), history as usize)
                }
                SolverMethod::LocalGlobal => Lbfgs::default(),
            },
        }
    }
}

/// Runs `iterations` local-global iterations of one substep. On entry `x` holds the initial guess
/// for free nodes and the substep's pin positions for pinned nodes, `scratch.x_tilde` the
/// prediction. On exit `x` holds the new positions.
pub(crate) fn solve_substep(
    model: &ClothModel,
    scheme: Scheme,
    iterations: u32,
    x: &mut [DVec3],
    scratch: &mut Scratch,
) {
    let (Some(symbolic), Some(factor)) = (model.symbolic.as_ref(), model.factor(scheme)) else {
        return; // every node pinned: nothing to solve
    };
    let h = model.settings.substep();
    let ht = scheme.effective_step(h);
    let inv_ht2 = 1.0 / (ht * ht);

    // Constant right-hand side: M x~ / h~^2 - S_FP x_P (free rows only are read).
    let x_tilde = std::mem::take(&mut scratch.x_tilde);
    fill_rhs_const(model, x, scratch, |i| {
        model.masses[i] * inv_ht2 * x_tilde[i]
    });
    scratch.x_tilde = x_tilde;

    match model.settings.method {
        SolverMethod::LocalGlobal => local_global(model, symbolic, factor, iterations, x, scratch),
        SolverMethod::Lbfgs { .. } => {
            lbfgs(model, symbolic, factor, inv_ht2, iterations, x, scratch)
        }
    }
}

/// `rhs_const[i] = load(i) - (S_FP x_P)_i` for every free node `i`.
fn fill_rhs_const(
    model: &ClothModel,
    x: &[DVec3],
    scratch: &mut Scratch,
    load: impl Fn(usize) -> DVec3,
) {
    let cp = &model.coupling;
    for (fi, &node) in model.free_nodes.iter().enumerate() {
        let i = node as usize;
        let mut b = load(i);
        for k in cp.row_ptr[fi] as usize..cp.row_ptr[fi + 1] as usize {
            b -= cp.vals[k] * x[cp.pins[k] as usize];
        }
        scratch.rhs_const[i] = b;
    }
}

/// Energy of every term at the positions of the last [`project_and_assemble`]: the projected
/// terms' per-element energies plus the quadratic rows at `x`.
fn terms_energy(model: &ClothModel, x: &[DVec3], scratch: &Scratch) -> f64 {
    scratch.proj_energy.iter().sum::<f64>()
        + scratch.spring_energy.iter().sum::<f64>()
        + scratch.curved_energy.iter().sum::<f64>()
        + model.terms.quadratic_energy(x)
}

/// Local step at `x`, then `rhs = rhs_const + sum_c w_c A_c^T p_c`.
fn project_and_assemble(model: &ClothModel, x: &[DVec3], scratch: &mut Scratch) {
    let terms = &model.terms;
    terms.project_rigid(x, &mut scratch.proj, &mut scratch.proj_energy);
    terms.project_springs(x, &mut scratch.springs, &mut scratch.spring_energy);
    if !terms.bending.curved.is_empty() {
        terms.project_curved(x, &mut scratch.curved, &mut scratch.curved_energy);
    }
    scratch.rhs.copy_from_slice(&scratch.rhs_const);
    terms.scatter_rigid(&scratch.proj, &mut scratch.rhs);
    terms.scatter_springs(&scratch.springs, &mut scratch.rhs);
    if !terms.bending.curved.is_empty() {
        terms.scatter_curved(&scratch.curved, &mut scratch.rhs);
    }
}

fn local_global(
    model: &ClothModel,
    symbolic: &SymbolicFactor,
    factor: &NumericFactor,
    iterations: u32,
    x: &mut [DVec3],
    scratch: &mut Scratch,
) {
    for _ in 0..iterations {
        project_and_assemble(model, x, scratch);
        for (b, &node) in scratch.solve.iter_mut().zip(&model.solve_order) {
            *b = scratch.rhs[node as usize];
        }
        factor.solve_permuted(symbolic, &mut scratch.solve);
        for (b, &node) in scratch.solve.iter().zip(&model.solve_order) {
            x[node as usize] = *b;
        }
    }
}

/// Energy (up to a constant) and gradient over the free nodes at `xs` (factor ordering); also
/// writes `xs` into the node positions `x`.
fn evaluate(
    model: &ClothModel,
    inv_ht2: f64,
    xs: &[DVec3],
    g: &mut [DVec3],
    x: &mut [DVec3],
    scratch: &mut Scratch,
) -> f64 {
    let order = &model.solve_order;
    for (xi, &node) in xs.iter().zip(order) {
        x[node as usize] = *xi;
    }
    project_and_assemble(model, x, scratch);
    let k = &model.stiffness_perm;
    let mut f = 0.0;
    for (i, &node) in order.iter().enumerate() {
        let node = node as usize;
        let m = model.masses[node] * inv_ht2;
        let (cols, vals) = k.row(i);
        let mut kx = m * xs[i];
        for (&c, &v) in cols.iter().zip(vals) {
            kx += v * xs[c as usize];
        }
        g[i] = kx - scratch.rhs[node];
        f += 0.5 * m * (xs[i] - scratch.x_tilde[node]).length_squared();
    }
    f + terms_energy(model, x, scratch)
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
    fill_rhs_const(model, x, scratch, |i| model.masses[i] * gravity);
    let potential: f64 = model
        .free_nodes
        .iter()
        .map(|&n| -model.masses[n as usize] * gravity.dot(x[n as usize]))
        .sum();
    project_and_assemble(model, x, scratch);
    let k = &model.stiffness_perm;
    let order = &model.solve_order;
    for (i, &node) in order.iter().enumerate() {
        let (cols, vals) = k.row(i);
        let mut kx = DVec3::ZERO;
        for (&c, &v) in cols.iter().zip(vals) {
            kx += v * x[order[c as usize] as usize];
        }
        grad[i] = kx - scratch.rhs[node as usize];
    }
    potential + terms_energy(model, x, scratch)
}

fn dot(a: &[DVec3], b: &[DVec3]) -> f64 {
    a.iter().zip(b).map(|(p, q)| p.dot(*q)).sum()
}

fn lbfgs(
    model: &ClothModel,
    symbolic: &SymbolicFactor,
    factor: &NumericFactor,
    inv_ht2: f64,
    iterations: u32,
    x: &mut [DVec3],
    scratch: &mut Scratch,
) {
    let mut lb = std::mem::take(&mut scratch.lbfgs);
    let m = lb.s.len();
    lb.len = 0;
    for (xi, &node) in lb.x.iter_mut().zip(&model.solve_order) {
        *xi = x[node as usize];
    }
    let mut f = evaluate(model, inv_ht2, &lb.x, &mut lb.g, x, scratch);
    for _ in 0..iterations {
        // Two-loop recursion: d = -H g with H0 = K^-1.
        lb.d.copy_from_slice(&lb.g);
        for k in 0..lb.len {
            let j = (lb.newest + m - k) % m;
            let a = lb.rho[j] * dot(&lb.s[j], &lb.d);
            lb.alpha[j] = a;
            for (d, y) in lb.d.iter_mut().zip(&lb.y[j]) {
                *d -= a * *y;
            }
        }
        factor.solve_permuted(symbolic, &mut lb.d);
        for k in (0..lb.len).rev() {
            let j = (lb.newest + m - k) % m;
            let b = lb.alpha[j] - lb.rho[j] * dot(&lb.y[j], &lb.d);
            for (d, s) in lb.d.iter_mut().zip(&lb.s[j]) {
                *d += b * *s;
            }
        }
        for d in lb.d.iter_mut() {
            *d = -*d;
        }
        let mut gd = dot(&lb.g, &lb.d);
        if gd.is_nan() || gd >= 0.0 {
            // Not a descent direction (curvature pairs gone stale): fall back to local-global.
            lb.len = 0;
            lb.d.copy_from_slice(&lb.g);
            factor.solve_permuted(symbolic, &mut lb.d);
            for d in lb.d.iter_mut() {
                *d = -*d;
            }
            gd = dot(&lb.g, &lb.d);
            if gd.is_nan() || gd >= 0.0 {
                break; // converged to rounding
            }
        }
        // Armijo backtracking. With no curvature pairs the direction is the local-global step,
        // which decreases the energy by construction: take it whole (a failed comparison there
        // only means the energy differences are below rounding).
        let plain_step = lb.len == 0;
        let mut step = 1.0;
        let mut f_trial;
        let mut tries = 0;
        loop {
            for ((t, &xi), &di) in lb.x_trial.iter_mut().zip(&lb.x).zip(&lb.d) {
                *t = xi + step * di;
            }
            f_trial = evaluate(model, inv_ht2, &lb.x_trial, &mut lb.g_trial, x, scratch);
            if plain_step || f_trial <= f + ARMIJO * step * gd || tries == MAX_BACKTRACKS {
                break;
            }
            step *= 0.5;
            tries += 1;
        }
        if !plain_step && (f_trial.is_nan() || f_trial > f) {
            // No decrease even at the smallest step: drop the curvature pairs and retry from
            // here with the local-global direction.
            for (xi, &node) in lb.x.iter().zip(&model.solve_order) {
                x[node as usize] = *xi;
            }
            f = evaluate(model, inv_ht2, &lb.x, &mut lb.g, x, scratch);
            lb.len = 0;
            continue;
        }
        // New correction pair.
        let slot = if lb.len == 0 { 0 } else { (lb.newest + 1) % m };
        let (mut sy, mut yy) = (0.0, 0.0);
        for i in 0..lb.x.len() {
            let s = lb.x_trial[i] - lb.x[i];
            let y = lb.g_trial[i] - lb.g[i];
            lb.s[slot][i] = s;
            lb.y[slot][i] = y;
            sy += s.dot(y);
            yy += y.dot(y);
        }
        if sy > 1e-12 * yy && m > 0 {
            lb.rho[slot] = 1.0 / sy;
            lb.newest = slot;
            lb.len = (lb.len + 1).min(m);
        }
        std::mem::swap(&mut lb.x, &mut lb.x_trial);
        std::mem::swap(&mut lb.g, &mut lb.g_trial);
        f = f_trial;
    }
    scratch.lbfgs = lb;
}
