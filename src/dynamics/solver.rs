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

use glam::{DVec2, DVec3, Vec3};

use crate::anderson::Anderson;
use crate::collision::ContactPass;
use crate::energy::{deformation_gradient, nearest_rotation};
use crate::error::ClothError;
use crate::factor::{
    FactorPrecision, Lane4, ModelFactor, NumericFactor, SolveLanes, SymbolicFactor,
};
use crate::model::{ClothModel, PINNED, SolverMethod};
use crate::sparse::CsrMatrix;

/// Most halvings of the step in one line search.
const MAX_BACKTRACKS: u32 = 6;
/// Armijo sufficient-decrease constant.
const ARMIJO: f64 = 1e-4;
/// Anderson mixing refuses a mixed input whose fixed-point residual `|G(x) - x|` is more than
/// this many times the last accepted one's. Not 1: plain local-global is not monotone in its
/// residual either (on the banner in wind, 7.2e-3 -> 8.0e-3 m between its second and fourth
/// iteration), and a strict test refused a mixed input in 726 of the banner's 1,500
/// iterations: 2 x 5 strained 10.4 %, worse than plain local-global's 8.1 %. At 2 (and 3, or
/// none) 5.4-5.6 %; the contact gallery's console column passes 28 of 35 cells at 2, 3 and
/// without a safeguard, 26 with the strict one (docs/lab/2026-11-27-one-iteration.md).
const REFUSE_GROWTH: f64 = 2.0;

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
    /// Anderson mixing's vectors over the free nodes in the factor's ordering (sized on first
    /// use).
    pub anderson: Anderson,
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
    // The right-hand-side form (solving for the positions with an `f64` factor): local-global,
    // accelerated or not, and one iteration of any method.
    let rhs_form = matches!(
        model.settings.method,
        SolverMethod::LocalGlobal | SolverMethod::Anderson { .. }
    ) || iterations == 1;
    match model.settings.method {
        SolverMethod::Newton => {
            // A reference solver: any failure leaves the last accepted iterate, which the
            // measures then show. Contact enters only through the last pass.
            let _ = newton_substep(model, x, inv_ht2, iterations, scratch);
        }
        // One L-BFGS iteration is exactly the local-global step (no pairs yet, taken whole);
        // the local-global form skips the energy and gradient evaluations around it.
        SolverMethod::LocalGlobal | SolverMethod::Lbfgs { .. } | SolverMethod::Anderson { .. }
            if rhs_form && factor.precision() == FactorPrecision::Double =>
        {
            // Constant right-hand side: M (x~ - o) / h~^2 - S_FP (x_P - o) (free rows only are
            // read).
            let x_tilde = std::mem::take(&mut scratch.x_tilde);
            fill_rhs_const(model, x, scratch, |i| {
                model.masses[i] * inv_ht2 * (x_tilde[i] - origin)
            });
            scratch.x_tilde = x_tilde;
            match model.settings.method {
                SolverMethod::Anderson { history } if iterations > 1 => anderson(
                    model,
                    symbolic,
                    factor,
                    iterations,
                    history as usize,
                    x,
                    scratch,
                    contact,
                ),
                _ => local_global(model, symbolic, factor, iterations, x, scratch, contact),
            }
        }
        method => {
            let history = match method {
                SolverMethod::Lbfgs { history } => history as usize,
                SolverMethod::LocalGlobal
                | SolverMethod::Newton
                | SolverMethod::Anderson { .. } => 0,
            };
            lbfgs(
                model, symbolic, factor, inv_ht2, iterations, history, x, scratch, contact,
            )
        }
    }
    if contact.pass.active() || contact.pass.has_limits() {
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
    if pass.measure(x) && !pass.reuse_response() {
        let n = model.mesh.node_count();
        scratch.response.clear();
        scratch.response.resize(n, DVec3::ZERO);
        pass.response_rhs(&mut scratch.response);
        solve_nodes(
            model,
            symbolic,
            factor,
            &scratch.response,
            &mut scratch.response_perm,
            solve,
        );
        scatter_solution(model, &scratch.response_perm, &mut scratch.response);
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
    scratch
        .solve
        .double
        .resize(model.free_nodes.len(), Lane4::default());
    for _ in 0..iterations {
        local_global_map(model, symbolic, factor, x, scratch, contact);
    }
}

/// The product's iteration, the map `G`: local step at `x`, global solve with the contact
/// forces in the right-hand side (`K x = b + r`), then the coupled contact step (or, while
/// self-contact pairs are active, the per-node update). Leaves `G(x)` in `x` and the forces it
/// produced in the contact pass. `scratch.solve.double` must be sized for the free nodes.
fn local_global_map(
    model: &ClothModel,
    symbolic: &SymbolicFactor,
    factor: &ModelFactor,
    x: &mut [DVec3],
    scratch: &mut Scratch,
    contact: &mut Contact<'_>,
) {
    let ModelFactor::Double(rhs_factor) = factor else {
        unreachable!("the right-hand-side form runs only on an f64 factor (`solve_substep`)");
    };
    let active = contact.pass.active();
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
        if !contact.pass.self_contact.active() {
            contact_step(model, symbolic, factor, x, scratch, contact);
        } else {
            contact_iteration(model, symbolic, factor, x, scratch, contact);
        }
    }
}

/// `iterations` evaluations of the map `G` ([`local_global_map`]) accelerated by Anderson
/// mixing with `history` differences ([`crate::anderson`]). Each evaluation after the first is
/// at the mixed input; an input whose output has a larger fixed-point residual `|G(x) - x|`
/// than the last accepted output's is refused: the contact forces go back to what they were
/// before it, the next evaluation is at the last accepted output, and the history is cleared
/// (the refused evaluation counts against the budget, so the cost stays fixed). The history is
/// also cleared when the contact set changes. On exit `x` and the contact forces are the pair
/// `G` produced at its last accepted evaluation.
#[allow(clippy::too_many_arguments)]
fn anderson(
    model: &ClothModel,
    symbolic: &SymbolicFactor,
    factor: &ModelFactor,
    iterations: u32,
    history: usize,
    x: &mut [DVec3],
    scratch: &mut Scratch,
    contact: &mut Contact<'_>,
) {
    scratch
        .solve
        .double
        .resize(model.free_nodes.len(), Lane4::default());
    let mut aa = std::mem::take(&mut scratch.anderson);
    aa.ensure(model.free_nodes.len(), history);
    let origin = scratch.origin;
    let order = &model.solve_order;
    aa.set_input(order.iter().map(|&n| x[n as usize] - origin));
    let mut judged = false;
    let mut set = contact.pass.contact_set_key();
    for k in 0..iterations {
        if judged {
            contact.pass.save_forces();
        }
        local_global_map(model, symbolic, factor, x, scratch, contact);
        let residual = aa.residual(order.iter().map(|&n| x[n as usize] - origin));
        // A non-finite residual is refused too.
        let within = residual < REFUSE_GROWTH * REFUSE_GROWTH * aa.prev_residual;
        if judged && !within {
            // Refused: back to the last accepted pair.
            contact.pass.restore_forces();
            aa.refuse();
            for (&n, &v) in order.iter().zip(aa.input()) {
                x[n as usize] = v + origin;
            }
            judged = false;
            continue;
        }
        let now = contact.pass.contact_set_key();
        if now != set {
            aa.restart();
            set = now;
        }
        aa.accept(residual, history);
        if k + 1 == iterations {
            break;
        }
        judged = aa.mix();
        for (&n, &v) in order.iter().zip(aa.input()) {
            x[n as usize] = v + origin;
        }
    }
    scratch.anderson = aa;
}

/// The coupled contact step after a global solve (iterations with body contact and no
/// self-contact pairs): from the iterate `x`, the forces' projected step `delta`
/// ([`ContactPass::propose`], each node by its own compliance), its response `z = K^-1 delta`
/// by one solve (the Delassus operator `N^T K^-1 N` applied whole, every contact's coupling
/// with every other included), and the step length that minimises the contact problem's
/// energy along it in that linear model, `alpha = -delta . u / delta . z`, at most 1 (so that
/// each force stays in its cone). The forces take the step and `x` moves by `alpha z`, which is
/// exactly how the next global solve would answer the new forces: one solve gives both the
/// step length and the position update.
///
/// This replaced the per-node Jacobi update with the collective compliance (still used while
/// self-contact pairs are active, `contact_iteration`), which answers only the contact set's
/// collective mode and converged slowly around a wrap (docs/lab/2026-11-26-coupled-contact.md:
/// at 1 x 5 local-global the limb sweep 16.1 -> 9.7 %, the bar drop 11.4 -> 7.0 %).
fn contact_step(
    model: &ClothModel,
    symbolic: &SymbolicFactor,
    factor: &ModelFactor,
    x: &mut [DVec3],
    scratch: &mut Scratch,
    contact: &mut Contact<'_>,
) {
    let pass = &mut *contact.pass;
    pass.measure(x);
    let n = model.mesh.node_count();
    scratch.response.clear();
    scratch.response.resize(n, DVec3::ZERO);
    let slope = pass.propose(x, &model.compliance, &mut scratch.response);
    if slope.is_nan() || slope >= 0.0 {
        return; // converged (or nothing engaged)
    }
    solve_nodes(
        model,
        symbolic,
        factor,
        &scratch.response,
        &mut scratch.response_perm,
        &mut scratch.solve,
    );
    // `delta . K^-1 delta`, the step's curvature (positive: `K` is positive definite).
    let curvature: f64 = scratch
        .response_perm
        .iter()
        .zip(&model.solve_order)
        .map(|(z, &node)| scratch.response[node as usize].dot(*z))
        .sum();
    let alpha = if curvature > 0.0 {
        (-slope / curvature).min(1.0)
    } else {
        1.0
    };
    for (z, &node) in scratch.response_perm.iter().zip(&model.solve_order) {
        x[node as usize] += alpha * *z;
    }
    pass.take_step(alpha);
}

/// The displacement the contact forces `force` (node order, every node) cause in a global
/// solve, `K^-1 r`, left in `scratch.response` (node order; zero at pinned nodes). Returns
/// false where there is nothing to solve (every node pinned). One solve with the constant
/// factor; used after the iterations to tell the motion the contact gave from the rest
/// ([`crate::pipeline`]'s velocity split).
pub(crate) fn contact_displacement(
    model: &ClothModel,
    force: &[DVec3],
    scratch: &mut Scratch,
) -> bool {
    let (Some(symbolic), Some(factor)) = (model.symbolic.as_ref(), model.factor.as_ref()) else {
        return false;
    };
    solve_nodes(
        model,
        symbolic,
        factor,
        force,
        &mut scratch.response_perm,
        &mut scratch.solve,
    );
    scratch.response.clear();
    scratch.response.resize(force.len(), DVec3::ZERO);
    scatter_solution(model, &scratch.response_perm, &mut scratch.response);
    true
}

/// `K^-1 rhs` for a right-hand side in node order (every node; pinned rows are not read), left
/// in `out` in the factor's ordering (sized here), through `lanes`.
fn solve_nodes(
    model: &ClothModel,
    symbolic: &SymbolicFactor,
    factor: &ModelFactor,
    rhs: &[DVec3],
    out: &mut Vec<DVec3>,
    lanes: &mut SolveLanes,
) {
    out.resize(model.free_nodes.len(), DVec3::ZERO);
    gather_gradient(model, rhs, out);
    factor.solve_permuted(symbolic, out, lanes);
}

/// Writes a solution in the factor's ordering into the free nodes' entries of `nodes`.
fn scatter_solution(model: &ClothModel, solution: &[DVec3], nodes: &mut [DVec3]) {
    for (u, &node) in solution.iter().zip(&model.solve_order) {
        nodes[node as usize] = *u;
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
            // While a game constraint pushes, the substep iterates as local-global: the limit
            // forces are corrected with compliances from `K^-1`, which is how a local-global
            // step answers a force, and the curvature pairs of L-BFGS overshoot them. Measured
            // on the cape demo at 2 x 5 with max distance and backstops: 108 % max strain with
            // the pairs kept, 28 % without.
            if contact.pass.limit_pushing() {
                lb.len = 0;
            }
        }
    }
    scratch.lbfgs = lb;
}

// Projected Newton (the `Newton` method's substeps and `equilibrium::relax`).

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
