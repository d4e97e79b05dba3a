//! One implicit substep by local-global (projective dynamics) iterations.
//!
//! Given the prediction `x~` and pin positions, each iteration
//! 1. **local**: projects every red triangle onto its nearest rotation (and every curved bending
//!    row onto its rotated rest curvature), in parallel with rayon, each element writing its own
//!    slot so the result does not depend on the thread count;
//! 2. **global**: solves `K x_F = M x~ / h~^2 - S_FP x_P + sum_c w_c A_c^T p_c` for the free nodes
//!    with the prefactored `K`, x, y and z as one three-column right-hand side.
//!
//! With [`SolverMethod::Lbfgs`] the local stage evaluates the energy `f` and its gradient
//! `M (x - x~) / h~^2 + sum_c w_c A_c^T (A_c x - p_c)` instead, element by element from the
//! projections' residuals (no product with the assembled matrix, which the model therefore does
//! not keep), and the iteration is L-BFGS whose initial inverse Hessian is the prefactored `K^-1`
//! (Liu, Bouaziz and Kavan 2017): the first iteration is exactly the local-global step, later
//! ones add curvature information from the last few steps, and an Armijo backtracking line
//! search keeps each one a descent step.
//!
//! Everything the loop touches lives in [`Scratch`], allocated once with the cloth.
//!
//! Measured (2,025-node sheet, same-run `cargo bench --bench stages`): the element-wise gradient
//! against the sparse `K x` product it replaced, frame 2.51 -> 2.10 ms, and 700 KiB less model
//! (the permuted copy of `S_FF`). Tried before it and not kept: carrying `K x` along the
//! iteration (`K d = -(q + sum_j b_j K s_j)` from the two-loop recursion, `K s` stored per
//! pair): frame 2.42 -> 2.22 ms, 340 KiB more workspace, and a one-minute soak whose worst frame
//! reached 208 %; that soak figure was later found to lie within what rounding alone moves it
//! (tests/soak.rs), so it was no evidence against the idea, but the element-wise gradient made
//! the product it saved disappear. Computing the energy from `x . K x` and `x . b` instead of
//! the per-term sums cancels 13 to 14 digits (terms of 4e8, changes between late iterations of
//! 1e-6 to 1e-5): not pursued.

use glam::{DVec3, Vec3};

use crate::collision::ContactPass;
use crate::factor::{FactorPrecision, Lane4, ModelFactor, SolveLanes, SymbolicFactor};
use crate::model::{ClothModel, SolverMethod};

/// Most halvings of the step in one line search.
const MAX_BACKTRACKS: u32 = 6;
/// Armijo sufficient-decrease constant.
const ARMIJO: f64 = 1e-4;

/// Preallocated buffers of the substep loop (held by a [`crate::workspace::Workspace`]).
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// Inertial prediction `x~`.
    pub x_tilde: Vec<DVec3>,
    /// Constant part of the right-hand side for this substep (the right-hand-side form of
    /// local-global only; sized on its first use).
    pub rhs_const: Vec<DVec3>,
    /// Right-hand side being assembled (local-global), or the gradient in node order (L-BFGS).
    pub rhs: Vec<DVec3>,
    /// Rotation per rigid element.
    pub proj: Vec<[DVec3; 2]>,
    /// Scaled edge vector per render-edge spring.
    pub springs: Vec<DVec3>,
    /// Target per curved bending row.
    pub curved: Vec<DVec3>,
    /// Energy per element of a parallel local step (large models only; small ones sum as they
    /// go).
    pub energy: Vec<f64>,
    /// Right-hand side / solution in the factor's ordering, padded for the solve.
    pub solve: SolveLanes,
    /// Local origin of the linear algebra this substep (see [`solve_substep`]).
    pub origin: DVec3,
    /// L-BFGS vectors over the free nodes in the factor's ordering.
    pub lbfgs: Lbfgs,
    /// Per contact candidate: moved by the last contact pass.
    pub moved: Vec<bool>,
    /// The contact normals and their solve, in node order (sized on first use).
    pub response: Vec<DVec3>,
    /// The same in the factor's ordering.
    pub response_perm: Vec<DVec3>,
}

/// L-BFGS state for one substep (over free nodes, factor ordering).
#[derive(Debug, Default)]
pub(crate) struct Lbfgs {
    x: Vec<DVec3>,
    g: Vec<DVec3>,
    d: Vec<DVec3>,
    /// Contact forces in the factor's ordering (sized on the first substep with contact).
    r: Vec<DVec3>,
    /// Correction pairs, stored in `f32` (half the memory; a pair only shapes the search
    /// direction, which the line search checks in `f64`).
    s: Vec<Vec<Vec3>>,
    y: Vec<Vec<Vec3>>,
    rho: Vec<f64>,
    alpha: Vec<f64>,
    /// Number of stored pairs and the slot of the newest.
    len: usize,
    newest: usize,
}

impl Lbfgs {
    /// Sizes the vectors, and the correction pairs held so far, for `nf` free nodes, reusing
    /// their memory.
    fn ensure(&mut self, nf: usize) {
        for v in [&mut self.x, &mut self.g, &mut self.d] {
            v.resize(nf, DVec3::ZERO);
        }
        for v in self.s.iter_mut().chain(self.y.iter_mut()) {
            v.resize(nf, Vec3::ZERO);
        }
        self.len = 0;
        self.newest = 0;
    }

    /// Holds at least `pairs` correction pairs of `nf` entries (grows only, so that cloths
    /// with different budgets sharing a workspace do not reallocate every step).
    fn grow_pairs(&mut self, pairs: usize, nf: usize) {
        if self.s.len() < pairs {
            self.s.resize_with(pairs, || vec![Vec3::ZERO; nf]);
            self.y.resize_with(pairs, || vec![Vec3::ZERO; nf]);
            self.rho.resize(pairs, 0.0);
            self.alpha.resize(pairs, 0.0);
        }
    }
}

impl Scratch {
    /// Sizes every buffer for `model`, reusing the memory already held: a workspace that has
    /// served the largest model it will see allocates nothing more.
    pub fn ensure(&mut self, model: &ClothModel) {
        let n = model.mesh.node_count();
        let t = model.terms.rigid.nodes.len();
        let c = model.terms.bending.curved.len();
        let sp = model.terms.springs.nodes.len();
        self.x_tilde.resize(n, DVec3::ZERO);
        self.rhs.resize(n, DVec3::ZERO);
        self.proj.resize(t, [DVec3::ZERO; 2]);
        self.springs.resize(sp, DVec3::ZERO);
        self.curved.resize(c, DVec3::ZERO);
        self.lbfgs.ensure(model.free_nodes.len());
    }

    /// Buffers sized for `model`.
    pub fn new(model: &ClothModel) -> Self {
        let mut scratch = Self::default();
        scratch.ensure(model);
        scratch
    }
}

/// Runs `iterations` local-global iterations of one substep. On entry `x` holds the initial guess
/// for free nodes and the substep's pin positions for pinned nodes, `scratch.x_tilde` the
/// prediction. On exit `x` holds the new positions. With an active `contact` pass, every global
/// solve adds the candidates' contact forces to its right-hand side, every iteration updates
/// them from the new iterate (`ContactPass::update`), and a last pass puts any node still inside
/// a body on its surface (`ContactPass::finish`).
pub(crate) fn solve_substep(
    model: &ClothModel,
    iterations: u32,
    x: &mut [DVec3],
    scratch: &mut Scratch,
    contact: &mut Contact<'_>,
) {
    let (Some(symbolic), Some(factor)) = (model.symbolic.as_ref(), model.factor.as_ref()) else {
        return; // every node pinned: nothing to solve
    };
    let h = model.settings.substep();
    let ht = model.scheme().effective_step(h);
    let inv_ht2 = 1.0 / (ht * ht);

    // The linear algebra (right-hand sides, solves, L-BFGS vectors) runs relative to a point on
    // the cloth: every term depends on differences of positions only, and far from the world
    // origin products with `K` would cancel large numbers (measured, when the gradient was still
    // a `K x` product: a sheet in free fall for 2 minutes, 70 km down, fell 0.7-1.3 % too
    // fast without this).
    scratch.origin = x[model.free_nodes[0] as usize];
    let origin = scratch.origin;
    let one_step = model.settings.method == SolverMethod::LocalGlobal || iterations == 1;
    match model.settings.method {
        SolverMethod::Newton => {
            // A reference solver: any failure leaves the last accepted iterate, which the
            // measures then show. Contact enters only through the last pass.
            let _ = crate::equilibrium::newton_substep(model, x, inv_ht2, iterations, scratch);
        }
        // One L-BFGS iteration is exactly the local-global step (no pairs yet, taken whole);
        // the local-global form skips the energy and gradient evaluations around it.
        SolverMethod::LocalGlobal | SolverMethod::Lbfgs { .. }
            if one_step && factor.precision() == FactorPrecision::Double =>
        {
            // Constant right-hand side: M (x~ - o) / h~^2 - S_FP (x_P - o) (free rows only are
            // read).
            let x_tilde = std::mem::take(&mut scratch.x_tilde);
            fill_rhs_const(model, x, scratch, |i| {
                model.masses[i] * inv_ht2 * (x_tilde[i] - origin)
            });
            scratch.x_tilde = x_tilde;
            local_global(model, symbolic, factor, iterations, x, scratch, contact)
        }
        method => {
            let history = match method {
                SolverMethod::Lbfgs { history } => history as usize,
                SolverMethod::LocalGlobal | SolverMethod::Newton => 0,
            };
            lbfgs(
                model, symbolic, factor, inv_ht2, iterations, history, x, scratch, contact,
            )
        }
    }
    if contact.pass.active() {
        contact.pass.finish(
            contact.x_start,
            x,
            &model.free_nodes,
            &mut scratch.moved,
            |x, held| restore_conformity(model, x, held),
        );
    }
}

/// One contact iteration after a global solve: gaps at `x`, the collective compliance
/// measured again if the contact set grew (one solve with the contact normals as right-hand
/// side, see `ContactPass::set_response`), then the forces updated.
fn contact_iteration(
    model: &ClothModel,
    symbolic: &SymbolicFactor,
    factor: &ModelFactor,
    x: &[DVec3],
    scratch: &mut Scratch,
    contact: &mut Contact<'_>,
) {
    let mut solve = std::mem::take(&mut scratch.solve);
    contact_iteration_lanes(model, symbolic, factor, x, scratch, &mut solve, contact);
    scratch.solve = solve;
}

fn contact_iteration_lanes(
    model: &ClothModel,
    symbolic: &SymbolicFactor,
    factor: &ModelFactor,
    x: &[DVec3],
    scratch: &mut Scratch,
    solve: &mut SolveLanes,
    contact: &mut Contact<'_>,
) {
    let pass = &mut *contact.pass;
    if pass.measure(x) {
        let n = model.mesh.node_count();
        scratch.response.clear();
        scratch.response.resize(n, DVec3::ZERO);
        scratch
            .response_perm
            .resize(model.free_nodes.len(), DVec3::ZERO);
        pass.response_rhs(&mut scratch.response);
        gather_gradient(model, &scratch.response, &mut scratch.response_perm);
        factor.solve_permuted(symbolic, &mut scratch.response_perm, solve);
        for (u, &node) in scratch.response_perm.iter().zip(&model.solve_order) {
            scratch.response[node as usize] = *u;
        }
        pass.set_response(&scratch.response, &model.compliance);
    }
    pass.update(x, &model.compliance);
}

/// Puts every free black node that is not on a body (`held`) back at its conformity target,
/// the average of the corners its base triangles extrapolate from their red nodes (DESIGN.md
/// section 1). A global solve meets these rows to within their weight, but contact then moves
/// nodes one by one: a red node pushed out of a body by `d` leaves its black neighbours off
/// their targets by about `d / n`, and BDF2 carries that into the next substeps as a velocity.
/// Measured on five simulated minutes of the soak (`cargo run --release --example soak -- 5`):
/// conformity residual up to 1.8 mean edge lengths in frames that end with no contact at all,
/// and per-frame max strain 320 % at the 99.9th percentile; with this pass, 48 %. Red nodes are
/// left alone: restoring the boundary rows (which hold only red nodes) as well moved red
/// triangles off their shape and measured worse (61 %).
fn restore_conformity(model: &ClothModel, x: &mut [DVec3], held: &[bool]) {
    let rows = &model.terms.linear;
    let nv = model.mesh.base_vertex_count();
    if rows.len() < nv {
        return; // a plain mesh has no conformity rows
    }
    for v in 0..nv {
        if model.pinned_mask[v] || held[v] {
            continue;
        }
        let (nodes, coefs) = rows.row(v);
        debug_assert_eq!((nodes[0] as usize, coefs[0]), (v, 1.0));
        let mut target = DVec3::ZERO;
        for (&n, &c) in nodes[1..].iter().zip(&coefs[1..]) {
            target -= c * x[n as usize];
        }
        x[v] = target;
    }
}

/// Contact for one substep: the broad-phase result, its forces, and where the substep began.
pub(crate) struct Contact<'a> {
    pub pass: &'a mut ContactPass,
    /// Positions at the start of the substep.
    pub x_start: &'a [DVec3],
}

/// `rhs_const[i] = load(i) - (S_FP (x_P - origin))_i` for every free node `i`.
fn fill_rhs_const(
    model: &ClothModel,
    x: &[DVec3],
    scratch: &mut Scratch,
    load: impl Fn(usize) -> DVec3,
) {
    let cp = &model.coupling;
    let origin = scratch.origin;
    scratch.rhs_const.resize(x.len(), DVec3::ZERO);
    for (fi, &node) in model.free_nodes.iter().enumerate() {
        let i = node as usize;
        let mut b = load(i);
        for k in cp.row_ptr[fi] as usize..cp.row_ptr[fi + 1] as usize {
            b -= cp.vals[k] * (x[cp.pins[k] as usize] - origin);
        }
        scratch.rhs_const[i] = b;
    }
}

/// Local step at `x`, then `rhs = rhs_const + sum_c w_c A_c^T p_c`.
pub(crate) fn project_and_assemble(model: &ClothModel, x: &[DVec3], scratch: &mut Scratch) {
    let terms = &model.terms;
    terms.project_rigid(x, &mut scratch.proj);
    terms.project_springs(x, &mut scratch.springs);
    if !terms.bending.curved.is_empty() {
        terms.project_curved(x, &mut scratch.curved);
    }
    scratch.rhs.copy_from_slice(&scratch.rhs_const);
    terms.scatter_rigid(&scratch.proj, &mut scratch.rhs);
    terms.scatter_springs(&scratch.springs, &mut scratch.rhs);
    if !terms.bending.curved.is_empty() {
        terms.scatter_curved(&scratch.curved, &mut scratch.rhs);
    }
}

#[allow(clippy::too_many_arguments)]
fn local_global(
    model: &ClothModel,
    symbolic: &SymbolicFactor,
    factor: &ModelFactor,
    iterations: u32,
    x: &mut [DVec3],
    scratch: &mut Scratch,
    contact: &mut Contact<'_>,
) {
    let ModelFactor::Double(rhs_factor) = factor else {
        unreachable!("the right-hand-side form runs only on an f64 factor (`solve_substep`)");
    };
    scratch
        .solve
        .double
        .resize(model.free_nodes.len(), Lane4::default());
    let active = contact.pass.active();
    for _ in 0..iterations {
        project_and_assemble(model, x, scratch);
        if active {
            // The contact forces join the right-hand side: `K x = b + r`.
            let force = &contact.pass.node_force;
            for (b, &node) in scratch.solve.double.iter_mut().zip(&model.solve_order) {
                *b = Lane4::from_vec(scratch.rhs[node as usize] + force[node as usize]);
            }
        } else {
            for (b, &node) in scratch.solve.double.iter_mut().zip(&model.solve_order) {
                *b = Lane4::from_vec(scratch.rhs[node as usize]);
            }
        }
        rhs_factor.solve_lanes(symbolic, &mut scratch.solve.double);
        for (b, &node) in scratch.solve.double.iter().zip(&model.solve_order) {
            x[node as usize] = b.vec() + scratch.origin;
        }
        if active {
            contact_iteration(model, symbolic, factor, x, scratch, contact);
        }
    }
}

/// Energy of every term at `x` and its gradient `sum_c w_c A_c^T (A_c x - p_c)` added to
/// `scratch.rhs` (node order, every node), element by element from the local step's residuals:
/// no product with the assembled matrix is needed (which the model therefore does not keep).
fn add_terms_gradient(model: &ClothModel, x: &[DVec3], scratch: &mut Scratch) -> f64 {
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

/// Energy (up to a constant) at `xs` (free nodes, factor ordering), with its gradient left in
/// `scratch.rhs` (node order; [`gather_gradient`] takes it out); also writes `xs` into the node
/// positions `x`.
///
/// The gradient is `M (x - x~) / h~^2` plus the terms' gradient, summed element by element
/// ([`add_terms_gradient`]); pinned nodes enter through the elements they belong to.
fn evaluate(
    model: &ClothModel,
    inv_ht2: f64,
    xs: &[DVec3],
    x: &mut [DVec3],
    scratch: &mut Scratch,
) -> f64 {
    evaluate_points(model, inv_ht2, xs.iter().copied(), x, scratch)
}

/// [`evaluate`] at the point `xs + step d` (the line search's trial, formed as it is read, so
/// that it needs no buffer of its own).
fn evaluate_trial(
    model: &ClothModel,
    inv_ht2: f64,
    (xs, d, step): (&[DVec3], &[DVec3], f64),
    x: &mut [DVec3],
    scratch: &mut Scratch,
) -> f64 {
    let points = xs.iter().zip(d).map(|(&xi, &di)| xi + step * di);
    evaluate_points(model, inv_ht2, points, x, scratch)
}

#[inline(always)]
fn evaluate_points(
    model: &ClothModel,
    inv_ht2: f64,
    points: impl Iterator<Item = DVec3>,
    x: &mut [DVec3],
    scratch: &mut Scratch,
) -> f64 {
    let order = &model.solve_order;
    let origin = scratch.origin;
    let mut f = 0.0;
    for (xi, &node) in points.zip(order) {
        let node = node as usize;
        x[node] = xi + origin;
        let m = model.masses[node] * inv_ht2;
        let d = x[node] - scratch.x_tilde[node];
        scratch.rhs[node] = m * d;
        f += 0.5 * m * d.length_squared();
    }
    for &p in &model.pins {
        scratch.rhs[p as usize] = DVec3::ZERO;
    }
    f += add_terms_gradient(model, x, scratch);
    f
}

/// The gradient of the last [`evaluate`] (in `rhs`, node order) in the factor's ordering.
fn gather_gradient(model: &ClothModel, rhs: &[DVec3], g: &mut [DVec3]) {
    for (gi, &node) in g.iter_mut().zip(&model.solve_order) {
        *gi = rhs[node as usize];
    }
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

fn dot(a: &[DVec3], b: &[DVec3]) -> f64 {
    a.iter().zip(b).map(|(p, q)| p.dot(*q)).sum()
}

/// `sum_i a_i . b_i` with `a` widened from stored `f32`.
fn dot_f32(a: &[Vec3], b: &[DVec3]) -> f64 {
    a.iter().zip(b).map(|(p, q)| p.as_dvec3().dot(*q)).sum()
}

/// L-BFGS iterations with `history` correction pairs (at most the workspace's).
///
/// With contact the substep minimises `f(x) - r . x` for the contact forces `r`, which are held
/// constant within an iteration and updated after it: the search direction and the line search
/// see the gradient `g - r`, while each correction pair is a difference of the smooth gradient
/// `g` alone, so the pairs stay secants of the smooth energy when the forces change.
#[allow(clippy::too_many_arguments)]
fn lbfgs(
    model: &ClothModel,
    symbolic: &SymbolicFactor,
    factor: &ModelFactor,
    inv_ht2: f64,
    iterations: u32,
    history: usize,
    x: &mut [DVec3],
    scratch: &mut Scratch,
    contact: &mut Contact<'_>,
) {
    let mut lb = std::mem::take(&mut scratch.lbfgs);
    // A pair is made after each iteration and first used by the next, so a substep uses at most
    // `iterations - 1` of them: the ring needs no more slots than that (the same directions as
    // `history` slots, bit for bit; 47.5 KB less on the 2,025-node sheet at 5 iterations).
    let m = history.min(iterations.saturating_sub(1) as usize);
    lb.grow_pairs(m, model.free_nodes.len());
    lb.len = 0;
    let active = contact.pass.active();
    if active {
        lb.r.resize(model.free_nodes.len(), DVec3::ZERO);
        gather_gradient(model, &contact.pass.node_force, &mut lb.r);
    }
    for (xi, &node) in lb.x.iter_mut().zip(&model.solve_order) {
        *xi = x[node as usize] - scratch.origin;
    }
    let mut f = evaluate(model, inv_ht2, &lb.x, x, scratch);
    gather_gradient(model, &scratch.rhs, &mut lb.g);
    for _ in 0..iterations {
        // The contact forces' share of the energy and of the gradient along the direction.
        let force_dot = |lb: &Lbfgs, v: &[DVec3]| if active { dot(&lb.r, v) } else { 0.0 };
        // Two-loop recursion: d = -H (g - r) with H0 = K^-1.
        lb.d.copy_from_slice(&lb.g);
        if active {
            for (d, r) in lb.d.iter_mut().zip(&lb.r) {
                *d -= *r;
            }
        }
        for k in 0..lb.len {
            let j = (lb.newest + m - k) % m;
            let a = lb.rho[j] * dot_f32(&lb.s[j], &lb.d);
            lb.alpha[j] = a;
            for (d, y) in lb.d.iter_mut().zip(&lb.y[j]) {
                *d -= a * y.as_dvec3();
            }
        }
        factor.solve_permuted(symbolic, &mut lb.d, &mut scratch.solve);
        for k in (0..lb.len).rev() {
            let j = (lb.newest + m - k) % m;
            let b = lb.alpha[j] - lb.rho[j] * dot_f32(&lb.y[j], &lb.d);
            for (d, s) in lb.d.iter_mut().zip(&lb.s[j]) {
                *d += b * s.as_dvec3();
            }
        }
        for d in lb.d.iter_mut() {
            *d = -*d;
        }
        let mut gd = dot(&lb.g, &lb.d) - force_dot(&lb, &lb.d);
        if gd.is_nan() || gd >= 0.0 {
            // Not a descent direction (curvature pairs gone stale): fall back to local-global.
            lb.len = 0;
            lb.d.copy_from_slice(&lb.g);
            if active {
                for (d, r) in lb.d.iter_mut().zip(&lb.r) {
                    *d -= *r;
                }
            }
            factor.solve_permuted(symbolic, &mut lb.d, &mut scratch.solve);
            for d in lb.d.iter_mut() {
                *d = -*d;
            }
            gd = dot(&lb.g, &lb.d) - force_dot(&lb, &lb.d);
            if gd.is_nan() || gd >= 0.0 {
                break; // converged to rounding
            }
        }
        let (rx, rd) = (force_dot(&lb, &lb.x), force_dot(&lb, &lb.d));
        let f_total = f - rx;
        // Armijo backtracking. With no curvature pairs the direction is the local-global step,
        // which decreases the energy by construction: take it whole (a failed comparison there
        // only means the energy differences are below rounding).
        let plain_step = lb.len == 0;
        let mut step = 1.0;
        let mut f_trial;
        let mut f_trial_total;
        let mut tries = 0;
        loop {
            // The trial's gradient stays in `scratch.rhs` until the step is accepted.
            f_trial = evaluate_trial(model, inv_ht2, (&lb.x, &lb.d, step), x, scratch);
            f_trial_total = f_trial - (rx + step * rd);
            if plain_step
                || f_trial_total <= f_total + ARMIJO * step * gd
                || tries == MAX_BACKTRACKS
            {
                break;
            }
            step *= 0.5;
            tries += 1;
        }
        if !plain_step && (f_trial_total.is_nan() || f_trial_total > f_total) {
            // No decrease even at the smallest step: drop the curvature pairs and retry from
            // here with the local-global direction.
            f = evaluate(model, inv_ht2, &lb.x, x, scratch);
            gather_gradient(model, &scratch.rhs, &mut lb.g);
            lb.len = 0;
            continue;
        }
        // New correction pair, and the accepted gradient taken out of `scratch.rhs`.
        if m > 0 {
            let slot = if lb.len == 0 { 0 } else { (lb.newest + 1) % m };
            let (mut sy, mut yy) = (0.0, 0.0);
            for (i, &node) in model.solve_order.iter().enumerate() {
                let g_trial = scratch.rhs[node as usize];
                // The accepted point, formed as the line search's evaluation formed it.
                let x_trial = lb.x[i] + step * lb.d[i];
                // Rounded as stored, so that rho belongs to the pair the recursion uses.
                let s = (x_trial - lb.x[i]).as_vec3();
                lb.x[i] = x_trial;
                let y = (g_trial - lb.g[i]).as_vec3();
                lb.s[slot][i] = s;
                lb.y[slot][i] = y;
                lb.g[i] = g_trial;
                let (s, y) = (s.as_dvec3(), y.as_dvec3());
                sy += s.dot(y);
                yy += y.dot(y);
            }
            if sy > 1e-12 * yy {
                lb.rho[slot] = 1.0 / sy;
                lb.newest = slot;
                lb.len = (lb.len + 1).min(m);
            }
        } else {
            gather_gradient(model, &scratch.rhs, &mut lb.g);
            for (xi, &di) in lb.x.iter_mut().zip(&lb.d) {
                *xi += step * di;
            }
        }
        f = f_trial;
        // Contact: new forces from the accepted iterate (held in `x` by the last evaluation).
        if active {
            let mut solve = std::mem::take(&mut scratch.solve);
            contact_iteration_lanes(model, symbolic, factor, x, scratch, &mut solve, contact);
            scratch.solve = solve;
            gather_gradient(model, &contact.pass.node_force, &mut lb.r);
        }
    }
    scratch.lbfgs = lb;
}
