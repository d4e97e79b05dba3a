//! One implicit substep by local-global (projective dynamics) iterations.
//!
//! Given the prediction `x~` and pin positions, each iteration
//! 1. **local**: projects every red triangle onto its nearest rotation (and every curved bending
//!    row onto its rotated rest curvature), in parallel with rayon, each element writing its own
//!    slot so the result does not depend on the thread count;
//! 2. **global**: solves `K x_F = M x~ / h~^2 - S_FP x_P + sum_c w_c A_c^T p_c` for the free nodes
//!    with the prefactored `K`, x, y and z as one three-column right-hand side.
//!
//! Everything the loop touches lives in [`Scratch`], allocated once with the cloth.

use glam::DVec3;

use crate::integrator::Scheme;
use crate::model::ClothModel;

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
    /// Target per curved bending row.
    pub curved: Vec<DVec3>,
    /// Energy per curved bending row.
    pub curved_energy: Vec<f64>,
    /// Right-hand side / solution in the factor's ordering.
    pub solve: Vec<DVec3>,
}

impl Scratch {
    pub fn new(model: &ClothModel) -> Self {
        let n = model.mesh.node_count();
        let t = model.terms.rigid.nodes.len();
        let c = model.terms.bending.curved.len();
        Self {
            x_tilde: vec![DVec3::ZERO; n],
            rhs_const: vec![DVec3::ZERO; n],
            rhs: vec![DVec3::ZERO; n],
            proj: vec![[DVec3::ZERO; 2]; t],
            proj_energy: vec![0.0; t],
            curved: vec![DVec3::ZERO; c],
            curved_energy: vec![0.0; c],
            solve: vec![DVec3::ZERO; model.free_nodes.len()],
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
    let cp = &model.coupling;
    for (fi, &node) in model.free_nodes.iter().enumerate() {
        let i = node as usize;
        let mut b = model.masses[i] * inv_ht2 * scratch.x_tilde[i];
        for k in cp.row_ptr[fi] as usize..cp.row_ptr[fi + 1] as usize {
            b -= cp.vals[k] * x[cp.pins[k] as usize];
        }
        scratch.rhs_const[i] = b;
    }

    let terms = &model.terms;
    for _ in 0..iterations {
        // Local step.
        terms.project_rigid(x, &mut scratch.proj, &mut scratch.proj_energy);
        if !terms.bending.curved.is_empty() {
            terms.project_curved(x, &mut scratch.curved, &mut scratch.curved_energy);
        }
        // Global step.
        scratch.rhs.copy_from_slice(&scratch.rhs_const);
        terms.scatter_rigid(&scratch.proj, &mut scratch.rhs);
        if !terms.bending.curved.is_empty() {
            terms.scatter_curved(&scratch.curved, &mut scratch.rhs);
        }
        for (b, &node) in scratch.solve.iter_mut().zip(&model.solve_order) {
            *b = scratch.rhs[node as usize];
        }
        factor.solve_permuted(symbolic, &mut scratch.solve);
        for (b, &node) in scratch.solve.iter().zip(&model.solve_order) {
            x[node as usize] = *b;
        }
    }
}
