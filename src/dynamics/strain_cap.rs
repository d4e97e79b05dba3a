//! The strain cap: at the end of each substep's iterations, the base edges stretched (or
//! squeezed) past the cloth's tolerance are brought back within it, with contact, limits and
//! pins in the same projection, before the velocities are taken (docs/design.md section 3).
//!
//! The strain measure (docs/design.md section 6) reads a base edge `(a, b)` through its red
//! midpoint `r`: `(|x_a - r| + |r - x_b|) / rest - 1`. Each half, `(a, r)` and `(r, b)`, is a
//! render edge of rest length `rest / 2`, and holding both halves within `[1 - tol, 1 + tol] x
//! rest / 2` holds the edge's strain within `tol`. A sweep projects every half outside that band
//! onto it, moving its two ends along it in inverse proportion to their masses (pinned nodes do
//! not move, so pins stay where the character puts them, and momentum is kept). Sweeps alternate
//! direction (a symmetric Gauss-Seidel: a correction crosses the cloth in two sweeps either way)
//! and, with bodies or limits about, each is followed by the contact pass putting back on its
//! surface any node the sweep carried into a body, so that the cap never pushes cloth into a
//! body: the body wins where the two disagree. The velocity update then reads the capped
//! positions (BDF2's `v = (3/2 x_{n+1} - 2 x_n + 1/2 x_{n-1}) / h`), which makes the cap a
//! position-level form of Goldenthal et al.'s fast projection (2007), a filter after the
//! integrator's step: the stretch the budgeted iterations left is taken out of the positions and
//! out of the velocity together.
//!
//! The cost is bounded by [`StrainCap::sweeps`]; a sweep that finds no half outside the band
//! ends the cap (a substep within the tolerance pays one pass over the edges).

use glam::DVec3;
use serde::{Deserialize, Serialize};

use crate::error::ClothError;
use crate::mesh::StrainEdge;
use crate::model::ClothModel;

/// The strain cap's settings (see the module docs). All fields have documented defaults
/// ([`StrainCap::default`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StrainCap {
    /// The strain each base edge is held within after a substep (0.03 = 3 %), both ways. Default
    /// `0.03`, in (0, 1).
    pub tolerance: f64,
    /// Most sweeps over the edges per substep; `0` turns the cap off (the step is then exactly
    /// what it was without one). Default `16` (measured on the soak: docs/lab/2026-11-29-motion.md).
    pub sweeps: u32,
}

impl Default for StrainCap {
    fn default() -> Self {
        Self {
            tolerance: 0.03,
            sweeps: 16,
        }
    }
}

impl StrainCap {
    /// No cap: the substep ends where its iterations left it.
    pub const OFF: StrainCap = StrainCap {
        tolerance: 0.03,
        sweeps: 0,
    };

    /// Most sweeps accepted.
    pub const MAX_SWEEPS: u32 = 1000;

    /// Checks the tolerance (in (0, 1)) and the sweeps (at most [`StrainCap::MAX_SWEEPS`]).
    pub fn validate(&self) -> Result<(), ClothError> {
        if !(self.tolerance > 0.0 && self.tolerance < 1.0) {
            return Err(ClothError::InvalidSetting {
                name: "strain_cap.tolerance",
                reason: format!("must be in (0, 1), got {}", self.tolerance),
            });
        }
        if self.sweeps > Self::MAX_SWEEPS {
            return Err(ClothError::InvalidSetting {
                name: "strain_cap.sweeps",
                reason: format!("at most {}, got {}", Self::MAX_SWEEPS, self.sweeps),
            });
        }
        Ok(())
    }

    /// Whether the cap does anything.
    pub fn is_on(&self) -> bool {
        self.sweeps > 0
    }
}

/// One sweep of the cap over `x` with tolerance `tol`: in edge order, or in reverse when
/// `backward`. Returns whether any half edge was outside the band (and moved).
pub(crate) fn sweep(model: &ClothModel, x: &mut [DVec3], tol: f64, backward: bool) -> bool {
    let pinned = &model.pinned_mask;
    let masses = &model.masses;
    let inv_mass = |n: usize| if pinned[n] { 0.0 } else { 1.0 / masses[n] };
    let (lo, hi) = ((1.0 - tol) * (1.0 - tol), (1.0 + tol) * (1.0 + tol));
    let mut any = false;
    let mut project = |i: usize, j: usize, rest: f64, x: &mut [DVec3]| {
        let d = x[j] - x[i];
        // Most halves are inside the band: tested on squared lengths, no root or division.
        let (dd, r2) = (d.length_squared(), rest * rest);
        if dd >= lo * r2 && dd <= hi * r2 {
            return;
        }
        let (wi, wj) = (inv_mass(i), inv_mass(j));
        if wi + wj == 0.0 || dd == 0.0 {
            return;
        }
        let len = dd.sqrt();
        let target = if dd > hi * r2 {
            (1.0 + tol) * rest
        } else {
            (1.0 - tol) * rest
        };
        let c = (len - target) / (wi + wj) * (d / len);
        x[i] += wi * c;
        x[j] -= wj * c;
        any = true;
    };
    let mut edge = |e: &StrainEdge| {
        let (a, b) = (e.a as usize, e.b as usize);
        match e.mid {
            Some(m) => {
                let half = 0.5 * e.rest_length;
                project(a, m as usize, half, x);
                project(m as usize, b, half, x);
            }
            None => project(a, b, e.rest_length, x),
        }
    };
    let edges = model.mesh.strain_edges();
    if backward {
        edges.iter().rev().for_each(&mut edge);
    } else {
        edges.iter().for_each(&mut edge);
    }
    any
}

/// The sweeps of `cap` over `x` without bodies or limits: until one finds nothing outside the
/// band, at most `cap.sweeps`.
pub(crate) fn apply(model: &ClothModel, cap: &StrainCap, x: &mut [DVec3]) {
    let mut sweeps = Sweeps::new(model, cap);
    for _ in 0..cap.sweeps {
        if !sweeps.next(x) {
            break;
        }
    }
}

/// The cap's sweeps one at a time, alternating direction (what the contact pass interleaves
/// with its push-out).
pub(crate) struct Sweeps<'a> {
    model: &'a ClothModel,
    tolerance: f64,
    done: u32,
}

impl<'a> Sweeps<'a> {
    /// The sweeps of `cap` on `model`'s cloth.
    pub(crate) fn new(model: &'a ClothModel, cap: &StrainCap) -> Self {
        Self {
            model,
            tolerance: cap.tolerance,
            done: 0,
        }
    }

    /// Runs the next sweep; whether it moved anything.
    pub(crate) fn next(&mut self, x: &mut [DVec3]) -> bool {
        self.done += 1;
        sweep(self.model, x, self.tolerance, self.done % 2 == 0)
    }
}
