//! Single stages of a substep, run in isolation for the per-stage benchmarks
//! (`benches/stages.rs`) and for measuring the factor's streaming rate. Hidden from the docs; not
//! part of the supported API.

use glam::DVec3;

use crate::cloth::Cloth;
use crate::factor::{Lane4, SolveLanes};
use crate::model::ClothModel;
use crate::solver::Scratch;

/// One cloth's model with a workspace, at the cloth's current positions.
pub struct Stages {
    model: std::sync::Arc<ClothModel>,
    x: Vec<DVec3>,
    scratch: Scratch,
    rhs: SolveLanes,
    /// The right-hand side every [`Self::global_solve`] starts from.
    rhs0: SolveLanes,
}

impl Stages {
    /// Stages of `cloth` at its current state.
    pub fn new(cloth: &Cloth) -> Self {
        let model = cloth.model().clone();
        let mut scratch = Scratch::new(&model);
        // The constant part of the right-hand side (prediction and pins) is sized on its first
        // use in a step; here it stays zero.
        scratch
            .rhs_const
            .resize(model.mesh.node_count(), DVec3::ZERO);
        let free = cloth.positions().iter().take(model.free_nodes.len());
        let rhs0: SolveLanes = free.map(|&p| Lane4::from_vec(p)).collect();
        Self {
            x: cloth.positions().to_vec(),
            model,
            scratch,
            rhs: rhs0.clone(),
            rhs0,
        }
    }

    /// The local step: every term projected at the current positions and the right-hand side
    /// assembled.
    pub fn local_step(&mut self) {
        crate::solver::project_and_assemble(&self.model, &self.x, &mut self.scratch);
    }

    /// One global solve (the model's factor, three right-hand sides), from the same right-hand
    /// side each time (the cloth's free positions), copied in first. Solving in place again and
    /// again shrinks the values by `A^-1` (about 50x a solve on the hanging sheet) through
    /// subnormal numbers to zeros within 50 solves, which a frame's solves never see.
    pub fn global_solve(&mut self) {
        let (Some(symbolic), Some(factor)) =
            (self.model.symbolic.as_ref(), self.model.factor.as_ref())
        else {
            return;
        };
        self.rhs.copy_from_slice(&self.rhs0);
        factor.solve_lanes(symbolic, &mut self.rhs);
    }

    /// Reads the factor's values and row indices once forward and once backward, with one
    /// multiply-add per nonzero and no dependence between them: the memory-traffic floor of a
    /// solve. Returns a sum so the reads cannot be optimised away.
    pub fn stream_factor(&self) -> f64 {
        let (Some(symbolic), Some(factor)) =
            (self.model.symbolic.as_ref(), self.model.factor.as_ref())
        else {
            return 0.0;
        };
        factor.stream(symbolic)
    }

    /// Bytes one solve reads from the factor (values and row indices, both sweeps).
    pub fn factor_bytes_per_solve(&self) -> usize {
        match (self.model.symbolic.as_ref(), self.model.factor.as_ref()) {
            (Some(s), Some(f)) => 2 * f.bytes_per_sweep(s),
            _ => 0,
        }
    }
}
