//! One implicit substep: the product's iteration, the map `G` accelerated by Anderson mixing.
//!
//! Given the prediction `x~` and pin positions, the map `G` ([`local_global_map`]) is
//! 1. **local**: every red triangle projected onto its nearest rotation (and every curved
//!    bending row onto its rotated rest curvature), in parallel with rayon, each element writing
//!    its own slot so the result does not depend on the thread count;
//! 2. **global**: `K x_F = M x~ / h~^2 - S_FP x_P + sum_c w_c A_c^T p_c + r` solved for the free
//!    nodes with the prefactored `K`, x, y and z as one three-column right-hand side, `r` the
//!    contact forces;
//! 3. **contact**: the coupled contact step (a projected step on the forces, its response by one
//!    solve, an exact line search; [`contact_step`]).
//!
//! [`anderson`] runs a fixed number of evaluations of `G`, each at a combination of its last
//! outputs (`crate::anderson`); [`crate::SolverMethod::LocalGlobal`] runs `G` unaccelerated. The
//! projected Newton reference lives in `crate::newton`.
//!
//! Everything the loop touches lives in [`Scratch`], allocated once with the cloth.

use glam::DVec3;

use crate::anderson::Anderson;
use crate::contact::collision::pass::ContactPass;
use crate::counters::StepCounters;
use crate::dynamics::strain_cap::{self, StrainCap};
use crate::factor::{Lane4, ModelFactor, SolveLanes, SymbolicFactor};
use crate::model::{ClothModel, SolverMethod};
use crate::newton::newton_substep;

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
    /// Constant part of the right-hand side for this substep (sized on its first use).
    pub rhs_const: Vec<DVec3>,
    /// Right-hand side being assembled, in node order (or a gradient, `crate::newton`).
    pub rhs: Vec<DVec3>,
    /// Rotation per rigid element.
    pub proj: Vec<[DVec3; 2]>,
    /// Scaled edge vector per render-edge spring.
    pub springs: Vec<DVec3>,
    /// Target per curved bending row.
    pub curved: Vec<DVec3>,
    /// Energy per element of a parallel evaluation of the terms' gradient (`crate::newton`;
    /// large models only, small ones sum as they go).
    pub energy: Vec<f64>,
    /// Right-hand side / solution in the factor's ordering, padded for the solve.
    pub solve: SolveLanes,
    /// Local origin of the linear algebra this substep (see [`solve_substep`]).
    pub origin: DVec3,
    /// Anderson mixing's vectors over the free nodes in the factor's ordering (sized on first
    /// use).
    pub anderson: Anderson,
    /// Per contact candidate: moved by the last contact pass.
    pub moved: Vec<bool>,
    /// The contact normals and their solve, in node order (sized on first use).
    pub response: Vec<DVec3>,
    /// The same in the factor's ordering.
    pub response_perm: Vec<DVec3>,
    /// The strain cap's projection buffers.
    pub cap: strain_cap::ProjectionScratch,
    /// What the solve did this frame (the cap counts its own in [`Scratch::cap`]).
    pub counters: StepCounters,
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
        self.cap.ensure(model);
    }

    /// Buffers sized for `model`.
    pub fn new(model: &ClothModel) -> Self {
        let mut scratch = Self::default();
        scratch.ensure(model);
        scratch
    }
}

/// Runs `iterations` evaluations of the map `G` for one substep (accelerated by Anderson mixing
/// unless the method is plain local-global; Newton's reference iterations for
/// [`SolverMethod::Newton`]). On entry `x` holds the initial guess for free nodes and the
/// substep's pin positions for pinned nodes, `scratch.x_tilde` the prediction. On exit `x` holds
/// the new positions. With an active `contact` pass, every global solve adds the candidates'
/// contact forces to its right-hand side, every iteration updates them from the new iterate
/// ([`contact_step`]), and a last pass puts any node still inside a body on its surface
/// (`ContactPass::finish`).
pub(crate) fn solve_substep(
    model: &ClothModel,
    (iterations, cap): (u32, &StrainCap),
    x: &mut [DVec3],
    scratch: &mut Scratch,
    contact: &mut Contact<'_>,
) -> Iterations {
    let mut it = Iterations::begin(model, iterations, x, scratch);
    while it.step(model, x, scratch, contact) {}
    it.finish(model, cap, x, scratch, contact);
    it
}

/// How a substep's solve iterates.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// Every node pinned: nothing to solve.
    Nothing,
    /// Newton's reference ran whole in [`Iterations::begin`].
    Newton,
    /// Plain local-global.
    LocalGlobal,
    /// Anderson mixing with this many differences.
    Anderson(usize),
}

/// One substep's solve, an iteration at a time: [`solve_substep`] runs it whole, a layer group
/// ([`crate::layering`]) interleaves its cloths' iterations with the group's contact between
/// them. Holds the accelerated iteration's state between iterations (its vectors stay in
/// [`Scratch::anderson`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Iterations {
    mode: Mode,
    total: u32,
    done: u32,
    /// Whether the current input is a mixed one that the next output's residual judges.
    judged: bool,
    /// The contact set's key at the last accepted output.
    set: u64,
}

impl Iterations {
    /// Starts the solve of a substep: the local origin, the constant right-hand side and the
    /// mixing's first input (Newton's reference runs whole here; see [`solve_substep`]).
    pub(crate) fn begin(
        model: &ClothModel,
        iterations: u32,
        x: &mut [DVec3],
        scratch: &mut Scratch,
    ) -> Self {
        let mut it = Self {
            mode: Mode::Nothing,
            total: iterations,
            done: 0,
            judged: false,
            set: 0,
        };
        if model.symbolic.is_none() || model.factor.is_none() {
            return it; // every node pinned: nothing to solve
        }
        let h = model.settings.substep();
        let ht = model.scheme().effective_step(h);
        let inv_ht2 = 1.0 / (ht * ht);
        // The linear algebra (right-hand sides, solves, mixing vectors) runs relative to a
        // point on the cloth: every term depends on differences of positions only, and far
        // from the world origin products with `K` would cancel large numbers (measured, when
        // the gradient was still a `K x` product: a sheet in free fall for 2 minutes, 70 km
        // down, fell 0.7-1.3 % too fast without this).
        scratch.origin = x[model.free_nodes[0] as usize];
        let origin = scratch.origin;
        match model.settings.method {
            SolverMethod::Newton => {
                // A reference solver: any failure leaves the last accepted iterate, which the
                // measures then show. Contact enters only through the last pass.
                let _ = newton_substep(model, x, inv_ht2, iterations, scratch);
                it.mode = Mode::Newton;
            }
            SolverMethod::LocalGlobal | SolverMethod::Anderson { .. } => {
                // Constant right-hand side: M (x~ - o) / h~^2 - S_FP (x_P - o) (free rows only
                // are read).
                let x_tilde = std::mem::take(&mut scratch.x_tilde);
                fill_rhs_const(model, x, scratch, |i| {
                    model.masses[i] * inv_ht2 * (x_tilde[i] - origin)
                });
                scratch.x_tilde = x_tilde;
                scratch
                    .solve
                    .resize(model.free_nodes.len(), Lane4::default());
                it.mode = match model.settings.method {
                    SolverMethod::Anderson { history } if iterations > 1 => {
                        let history = history as usize;
                        scratch.anderson.ensure(model.free_nodes.len(), history);
                        let order = &model.solve_order;
                        scratch
                            .anderson
                            .set_input(order.iter().map(|&n| x[n as usize] - origin));
                        Mode::Anderson(history)
                    }
                    _ => Mode::LocalGlobal,
                };
            }
        }
        it
    }

    /// The same solve without Anderson mixing (plain local-global). A layer group's cloths
    /// iterate so while the group has pairs: their forces are updated between the cloths'
    /// evaluations of `G`, outside it, and mixing outputs computed under different forces
    /// extrapolated the pushes (a cape dropped on a draped sheet was thrown 2 m up after 3 s
    /// at rest on it; plain, it rests: docs/lab/2026-11-28-layers-one-solve.md).
    pub(crate) fn without_mixing(mut self) -> Self {
        if let Mode::Anderson(_) = self.mode {
            self.mode = Mode::LocalGlobal;
        }
        self
    }

    /// Runs the next iteration (one evaluation of the map `G`, [`local_global_map`], at the
    /// current input). Returns false, doing nothing, once the budget is spent.
    ///
    /// With Anderson mixing, each evaluation after the first is at a combination of the last
    /// outputs ([`crate::anderson`]); an input whose output has a larger fixed-point residual
    /// `|G(x) - x|` than the last accepted output's is refused: the contact forces go back to
    /// what they were before it, the next evaluation is at the last accepted output, and the
    /// history is cleared (the refused evaluation counts against the budget, so the cost stays
    /// fixed). The history is also cleared when the contact set changes. After the last
    /// iteration `x` and the contact forces are the pair `G` produced at its last accepted
    /// evaluation.
    pub(crate) fn step(
        &mut self,
        model: &ClothModel,
        x: &mut [DVec3],
        scratch: &mut Scratch,
        contact: &mut Contact<'_>,
    ) -> bool {
        if self.done >= self.total {
            return false;
        }
        let (Some(symbolic), Some(factor)) = (model.symbolic.as_ref(), model.factor.as_ref())
        else {
            return false;
        };
        let k = self.done;
        self.done += 1;
        match self.mode {
            Mode::Nothing | Mode::Newton => {
                self.done = self.total;
                false
            }
            Mode::LocalGlobal => {
                local_global_map(model, symbolic, factor, x, scratch, contact);
                self.done < self.total
            }
            Mode::Anderson(history) => {
                let mut aa = std::mem::take(&mut scratch.anderson);
                let origin = scratch.origin;
                let order = &model.solve_order;
                if self.judged {
                    contact.pass.save_forces();
                }
                local_global_map(model, symbolic, factor, x, scratch, contact);
                let residual = aa.residual(order.iter().map(|&n| x[n as usize] - origin));
                // A non-finite residual is refused too.
                let within = residual < REFUSE_GROWTH * REFUSE_GROWTH * aa.prev_residual;
                if self.judged && !within {
                    // Refused: back to the last accepted pair.
                    contact.pass.restore_forces();
                    aa.refuse();
                    for (&n, &v) in order.iter().zip(aa.input()) {
                        x[n as usize] = v + origin;
                    }
                    self.judged = false;
                } else {
                    let now = contact.pass.contact_set_key();
                    if k == 0 || now != self.set {
                        if k > 0 {
                            aa.restart();
                        }
                        self.set = now;
                    }
                    aa.accept(residual, history);
                    if k + 1 < self.total {
                        self.judged = aa.mix();
                        for (&n, &v) in order.iter().zip(aa.input()) {
                            x[n as usize] = v + origin;
                        }
                    }
                }
                scratch.anderson = aa;
                self.done < self.total
            }
        }
    }

    /// Ends the solve: the contact pass's last pass (nodes still inside a body go on its
    /// surface; see `ContactPass::finish`) with the strain cap's steps `cap` inside it
    /// ([`crate::dynamics::strain_cap`]).
    pub(crate) fn finish(
        &self,
        model: &ClothModel,
        cap: &StrainCap,
        x: &mut [DVec3],
        scratch: &mut Scratch,
        contact: &mut Contact<'_>,
    ) {
        if self.mode == Mode::Nothing {
            return;
        }
        if contact.pass.active() || contact.pass.has_limits() {
            let projection = &mut scratch.cap;
            projection.begin(model, cap, true);
            contact.pass.finish(
                contact.x_start,
                x,
                &model.free_nodes,
                &mut scratch.moved,
                |x, held| restore_conformity(model, x, held),
                (
                    cap.steps,
                    |x: &mut [DVec3], touching: &[(u32, DVec3, DVec3)]| {
                        strain_cap::project(model, x, cap, touching, projection)
                    },
                ),
            );
            projection.end(cap);
        } else if cap.is_on() {
            strain_cap::apply(model, cap, x, &mut scratch.cap);
        }
    }
}

/// One per-node contact iteration after a global solve (while self-contact pairs are active):
/// gaps at `x`, the collective compliance measured again if the contact set grew (one solve with
/// the contact normals as right-hand side, see `ContactPass::set_response`), then the forces
/// updated.
fn contact_iteration(
    model: &ClothModel,
    symbolic: &SymbolicFactor,
    factor: &ModelFactor,
    x: &[DVec3],
    scratch: &mut Scratch,
    contact: &mut Contact<'_>,
) {
    let pass = &mut *contact.pass;
    if pass.measure(x) && !pass.reuse_response() {
        let n = model.mesh.node_count();
        scratch.response.clear();
        scratch.response.resize(n, DVec3::ZERO);
        pass.response_rhs(&mut scratch.response);
        scratch.counters.count_solve(model);
        solve_nodes(
            model,
            symbolic,
            factor,
            &scratch.response,
            &mut scratch.response_perm,
            &mut scratch.solve,
        );
        scatter_solution(model, &scratch.response_perm, &mut scratch.response);
        pass.set_response(&scratch.response, &model.compliance);
    }
    pass.update(x, &model.compliance);
}

/// Puts every free black node that is not on a body (`held`) back at its conformity target,
/// the average of the corners its base triangles extrapolate from their red nodes (docs/design.md
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
    /// Per node, the forces of the cloth's layer group on it (node order; `None` outside a
    /// group), added to every global solve's right-hand side.
    pub external: Option<&'a [DVec3]>,
}

impl<'a> Contact<'a> {
    /// A cloth's own contact, outside a layer group.
    pub(crate) fn alone(pass: &'a mut ContactPass, x_start: &'a [DVec3]) -> Self {
        Self {
            pass,
            x_start,
            external: None,
        }
    }
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

/// The product's iteration, the map `G`: local step at `x`, global solve with the contact
/// forces in the right-hand side (`K x = b + r`), then the coupled contact step (or, while
/// self-contact pairs are active, the per-node update). Leaves `G(x)` in `x` and the forces it
/// produced in the contact pass. `scratch.solve` must be sized for the free nodes.
fn local_global_map(
    model: &ClothModel,
    symbolic: &SymbolicFactor,
    factor: &ModelFactor,
    x: &mut [DVec3],
    scratch: &mut Scratch,
    contact: &mut Contact<'_>,
) {
    let active = contact.pass.active();
    let counters = &mut scratch.counters;
    counters.count_solve(model);
    counters.local_nodes += x.len() as u64;
    if active {
        counters.contact_visits += contact.pass.candidates.len() as u64;
        if contact.pass.self_contact.active() {
            counters.self_pair_visits += contact.pass.self_contact.pairs.len() as u64;
        }
    }
    project_and_assemble(model, x, scratch);
    if let Some(external) = contact.external {
        // The forces of the cloth's layer group join too (`crate::layering`).
        let force = &contact.pass.node_force;
        for (b, &node) in scratch.solve.iter_mut().zip(&model.solve_order) {
            let i = node as usize;
            let r = if active { force[i] } else { DVec3::ZERO };
            *b = Lane4::from_vec(scratch.rhs[i] + r + external[i]);
        }
    } else if active {
        // The contact forces join the right-hand side: `K x = b + r`.
        let force = &contact.pass.node_force;
        for (b, &node) in scratch.solve.iter_mut().zip(&model.solve_order) {
            *b = Lane4::from_vec(scratch.rhs[node as usize] + force[node as usize]);
        }
    } else {
        for (b, &node) in scratch.solve.iter_mut().zip(&model.solve_order) {
            *b = Lane4::from_vec(scratch.rhs[node as usize]);
        }
    }
    factor.solve_lanes(symbolic, &mut scratch.solve);
    for (b, &node) in scratch.solve.iter().zip(&model.solve_order) {
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
    scratch.counters.count_solve(model);
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
    scratch.counters.count_solve(model);
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

/// The entries of `rhs` (node order) at the free nodes, in the factor's ordering.
fn gather_gradient(model: &ClothModel, rhs: &[DVec3], g: &mut [DVec3]) {
    for (gi, &node) in g.iter_mut().zip(&model.solve_order) {
        *gi = rhs[node as usize];
    }
}
