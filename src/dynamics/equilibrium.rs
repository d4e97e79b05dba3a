//! Static equilibrium by projected Newton: the converged reference for statics, and a
//! pre-settle that drapes a cloth before its first frame. The Newton iteration itself lives with
//! the other solvers (`solver`), which also run it for each substep of
//! [`crate::SolverMethod::Newton`] (the converged reference for motion).
//!
//! Local-global iterations converge slowly on stiff isometry: the constant matrix treats every
//! rotation of a red triangle as stretch, so a soft bending mode moves by a fraction
//! `k_b / W` of its error per iteration and can look converged (steps of 1e-9 m) while forces are
//! still far from balanced. Newton's method uses the true Hessian instead: each iteration
//! assembles it (per-element Hessians projected onto their positive semidefinite part, with a
//! Levenberg-Marquardt mass shift when a step fails), factors it and line-searches on the energy.
//! It stops on the force residual `|grad E - M g|`, which no stall can fake. It allocates and
//! refactors every iteration: a tool for set-up and tests, not for the frame loop.

use glam::DVec3;

use crate::error::ClothError;
use crate::model::ClothModel;
pub use crate::newton::RelaxReport;
use crate::newton::{newton, static_gradient};
use crate::solver::Scratch;

/// Newton iterations on the static energy over the free nodes of `x` (pinned nodes stay where
/// `x` has them) until the largest nodal force residual is below `tolerance` newtons.
pub(crate) fn relax(
    model: &ClothModel,
    x: &mut [DVec3],
    gravity: DVec3,
    tolerance: f64,
    max_iterations: u32,
    scratch: &mut Scratch,
) -> Result<RelaxReport, ClothError> {
    newton(
        model,
        x,
        |x, scratch, grad| static_gradient(model, x, gravity, scratch, grad),
        0.0,
        tolerance,
        max_iterations,
        scratch,
    )
}
