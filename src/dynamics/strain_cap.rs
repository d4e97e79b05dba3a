//! The strain cap: at the end of each substep's iterations, the base edges stretched (or
//! squeezed) past the cloth's tolerance are brought back within it, with contact, limits and
//! pins in the same projection, before the velocities are taken (docs/design.md section 3).
//!
//! The strain measure (docs/design.md section 6) reads a base edge `(a, b)` through its red
//! midpoint `r`: `(|x_a - r| + |r - x_b|) / rest - 1`. Each half, `(a, r)` and `(r, b)`, is a
//! render edge of rest length `rest / 2`, and holding both halves within `[1 - tol, 1 + tol] x
//! rest / 2` holds the edge's strain within `tol`.
//!
//! A step of the cap is Goldenthal et al.'s fast projection (2007) onto that band: the halves
//! outside it, linearised at the current positions, are brought onto its nearer end together by
//! the least mass-weighted displacement `dx = -W J^T (J W J^T)^-1 C` (`W` the inverse masses,
//! zero on pinned nodes, so pins stay where the character puts them and momentum is kept), the
//! system solved by a few Jacobi-preconditioned conjugate-gradient iterations. Solving the
//! halves together matters: a cape whose pins are jerked 15 cm in one frame is stretched along
//! its whole length, and one-edge-at-a-time (Gauss-Seidel) projections need about a thousand
//! sweeps to carry the correction down it (docs/lab/2026-11-29-motion.md). With bodies or
//! limits about, the nodes touching them after the contact pass are rows of the same system
//! (each node's motion along the body's normal held at zero: the step slides it on the body's
//! tangent plane, as Wang 2012 projects isometry and contact together), each step is followed
//! by the contact pass putting back on its surface any node the step still carried into a body,
//! and the nodes' paths are guarded after the last step: the cap never leaves cloth inside a
//! body, and where the two disagree the body wins. (Alternating alone, the cap and the push-out
//! took turns at the nodes a body held: `cape --limits` 7.0 % against 5.3 % with the rows, the
//! soak's worst frame 11.1 % against 6.2 %. Letting a row go where it held its node down, one
//! solve more, was worse: 5.7 %.) The velocity update
//! then reads the capped positions (BDF2's `v = (3/2 x_{n+1} - 2 x_n + 1/2 x_{n-1}) / h`), so
//! the stretch the budgeted iterations left is taken out of the positions and the velocities
//! together, as the fast projection's velocity filter does.
//!
//! Steps repeat, each linearised again, until every half edge is within the band. A half edge
//! a step has made a row stays one for the substep's later steps (held at its length once
//! within the band): else the next step, moving its neighbours, carried it out again. A half
//! edge outside is aimed a little inside the band's end (2 % of the tolerance), so that the
//! linearisation's error does not leave it a hair outside. Together they took the banner from
//! 14 steps a substep to 2.7 (aimed 0.1 % inside; its step median is the same at 2 %), and
//! the soak's worst frame over five minutes from 6.2 to 4.4 %
//! (docs/lab/2026-11-29-motion.md section 6).
//!
//! The cost is bounded by [`StrainCap::steps`] x [`StrainCap::cg_iterations`]; a substep
//! within the tolerance pays one pass over the edges.

use glam::DVec3;
use serde::{Deserialize, Serialize};

use crate::error::ClothError;
use crate::model::ClothModel;

/// The strain cap's settings (see the module docs). All fields have documented defaults
/// ([`StrainCap::default`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StrainCap {
    /// The strain each base edge is held within after a substep (0.03 = 3 %), both ways.
    /// Default `0.03`, in (0, 1).
    pub tolerance: f64,
    /// Most projection steps per substep, each followed by the bodies' push-out; `0` turns the
    /// cap off (the step is then exactly what it was without one). Default `16` (on the soak,
    /// 4 steps left a worst frame of 13.5 % and 16 frames over 10 % in five minutes, 16 steps
    /// 11.1 % and one, at the same frame time: docs/lab/2026-11-29-motion.md).
    pub steps: u32,
    /// Most conjugate-gradient iterations per step. Default `20`, at least 1.
    pub cg_iterations: u32,
}

impl Default for StrainCap {
    fn default() -> Self {
        Self {
            tolerance: 0.03,
            steps: 16,
            cg_iterations: 20,
        }
    }
}

impl StrainCap {
    /// No cap: the substep ends where its iterations left it.
    pub const OFF: StrainCap = StrainCap {
        tolerance: 0.03,
        steps: 0,
        cg_iterations: 20,
    };

    /// Most steps, and most conjugate-gradient iterations a step, accepted.
    pub const MAX_ITERATIONS: u32 = 1000;

    /// Checks the tolerance (in (0, 1)), the steps (at most [`StrainCap::MAX_ITERATIONS`]) and
    /// the conjugate-gradient iterations (1 to [`StrainCap::MAX_ITERATIONS`]).
    pub fn validate(&self) -> Result<(), ClothError> {
        if !(self.tolerance > 0.0 && self.tolerance < 1.0) {
            return Err(ClothError::InvalidSetting {
                name: "strain_cap.tolerance",
                reason: format!("must be in (0, 1), got {}", self.tolerance),
            });
        }
        if self.steps > Self::MAX_ITERATIONS {
            return Err(ClothError::InvalidSetting {
                name: "strain_cap.steps",
                reason: format!("at most {}, got {}", Self::MAX_ITERATIONS, self.steps),
            });
        }
        if !(1..=Self::MAX_ITERATIONS).contains(&self.cg_iterations) {
            return Err(ClothError::InvalidSetting {
                name: "strain_cap.cg_iterations",
                reason: format!(
                    "must be in 1..={}, got {}",
                    Self::MAX_ITERATIONS,
                    self.cg_iterations
                ),
            });
        }
        Ok(())
    }

    /// Whether the cap does anything.
    pub fn is_on(&self) -> bool {
        self.steps > 0
    }
}

/// The steps of `cap` over `x` without bodies or limits: until one finds every half edge
/// within the band, at most `cap.steps`.
pub(crate) fn apply(
    model: &ClothModel,
    cap: &StrainCap,
    x: &mut [DVec3],
    scratch: &mut ProjectionScratch,
) {
    scratch.begin();
    for _ in 0..cap.steps {
        if !project(model, x, cap, &[], scratch) {
            break;
        }
    }
}

/// One row of the projection, linearised at the current positions: a half edge outside the
/// band (`i` to `j`), or a node touching a body (`j == NO_NODE`: its motion along the body's
/// normal `n` held at zero, so that the step slides it on the body's tangent plane).
#[derive(Debug, Clone, Copy, Default)]
struct Active {
    i: u32,
    j: u32,
    /// Unit direction from `i` to `j`.
    n: DVec3,
    /// Inverse masses of `i` and `j`.
    wi: f64,
    wj: f64,
    /// Length past the band's nearer end (positive stretched, negative squeezed); 0 for a
    /// contact row.
    c: f64,
}

/// `Active::j` of a contact row.
const NO_NODE: u32 = u32::MAX;

/// How far inside the band's nearer end (a share of the tolerance) a half edge outside it is
/// brought: 2 %. Aimed at the end itself, the linearised step left edges outside by rounding
/// (1e-16 m) and the cap ran all its steps on them: the banner at 3 % took 14 steps a substep,
/// 2.7 aimed 0.1 % inside. A little more margin lets an inexact conjugate-gradient solve land
/// within the band too (a 0.9 % cap on the banner: 7.4 steps a substep aimed 0.1 % inside,
/// 6.7 at 5 %).
const AIM_INSIDE: f64 = 0.02;

/// The fast projection's buffers, reused from substep to substep (sized for the largest model
/// seen: a workspace that has served it allocates nothing more).
#[derive(Debug, Default)]
pub(crate) struct ProjectionScratch {
    active: Vec<Active>,
    cg: Cg,
    /// Per node, `J^T v` of the vector being multiplied.
    node: Vec<DVec3>,
    /// Per half edge (`2 x edge + half`), whether a step of this substep's cap has made it a
    /// row: it stays one (held at its length where it is now within the band), so that the
    /// next steps do not carry it back out.
    held: Vec<bool>,
}

impl ProjectionScratch {
    /// Sizes the buffers for `model` (every half edge may be active).
    pub(crate) fn ensure(&mut self, model: &ClothModel) {
        // Every half edge and every node (a contact row) may be active.
        let halves = 2 * model.mesh.strain_edges().len() + model.mesh.node_count();
        let cg = &mut self.cg;
        for v in [&mut cg.lambda, &mut cg.r, &mut cg.z, &mut cg.p, &mut cg.ap] {
            v.reserve(halves.saturating_sub(v.len()));
        }
        self.active
            .reserve(halves.saturating_sub(self.active.len()));
        self.node.resize(model.mesh.node_count(), DVec3::ZERO);
        self.held.resize(2 * model.mesh.strain_edges().len(), false);
    }

    /// Starts a substep's cap: no half edge held yet.
    pub(crate) fn begin(&mut self) {
        self.held.fill(false);
    }
}

/// One step of the fast projection onto the band of `cap` (see the module docs): the half
/// edges outside it, linearised, brought onto its nearer end together, the system solved by at
/// most `cap.cg_iterations` Jacobi-preconditioned conjugate-gradient iterations. Returns whether
/// any half edge was outside the band (and the positions moved).
pub(crate) fn project(
    model: &ClothModel,
    x: &mut [DVec3],
    cap: &StrainCap,
    touching: &[(u32, DVec3, DVec3)],
    s: &mut ProjectionScratch,
) -> bool {
    let tol = cap.tolerance;
    let pinned = &model.pinned_mask;
    let masses = &model.masses;
    let inv_mass = |n: usize| if pinned[n] { 0.0 } else { 1.0 / masses[n] };
    let (lo, hi) = ((1.0 - tol) * (1.0 - tol), (1.0 + tol) * (1.0 + tol));
    // Where a half edge is brought: just inside the band's nearer end, so that the step's
    // linearisation error (second order in its motion) lands within the band rather than a
    // hair outside it, which would cost another step.
    let aim = tol * (1.0 - AIM_INSIDE);
    s.active.clear();
    let mut outside = false;
    let (active, held) = (&mut s.active, &mut s.held);
    let mut half = |k: usize, i: usize, j: usize, rest: f64, x: &[DVec3]| {
        let d = x[j] - x[i];
        let (dd, r2) = (d.length_squared(), rest * rest);
        let within = dd >= lo * r2 && dd <= hi * r2;
        if within && !held[k] {
            return;
        }
        let (wi, wj) = (inv_mass(i), inv_mass(j));
        if wi + wj == 0.0 || dd == 0.0 {
            return;
        }
        let len = dd.sqrt();
        let target = if within {
            len
        } else if dd > hi * r2 {
            (1.0 + aim) * rest
        } else {
            (1.0 - aim) * rest
        };
        outside |= !within;
        held[k] = true;
        active.push(Active {
            i: i as u32,
            j: j as u32,
            n: d / len,
            wi,
            wj,
            c: len - target,
        });
    };
    for (k, e) in model.mesh.strain_edges().iter().enumerate() {
        let (a, b) = (e.a as usize, e.b as usize);
        match e.mid {
            Some(m) => {
                let h = 0.5 * e.rest_length;
                half(2 * k, a, m as usize, h, x);
                half(2 * k + 1, m as usize, b, h, x);
            }
            None => half(2 * k, a, b, e.rest_length, x),
        }
    }
    if !outside {
        return false;
    }
    // The nodes touching a body move only along its tangent plane in this step (the cap and
    // the push-out otherwise take turns at a node a body holds: the push-out undoes the step
    // there, and the edges around it stay stretched).
    for &(i, n, _) in touching {
        let w = inv_mass(i as usize);
        if w > 0.0 && n.is_finite() && n != DVec3::ZERO {
            s.active.push(Active {
                i,
                j: NO_NODE,
                n: n.normalize(),
                wi: w,
                wj: 0.0,
                c: 0.0,
            });
        }
    }
    solve(&s.active, cap.cg_iterations, &mut s.cg, &mut s.node);
    let act = &s.active;
    // dx = -W J^T lambda.
    for a in act {
        s.node[a.i as usize] = DVec3::ZERO;
        if a.j != NO_NODE {
            s.node[a.j as usize] = DVec3::ZERO;
        }
    }
    for (a, &l) in act.iter().zip(&s.cg.lambda) {
        if a.j == NO_NODE {
            s.node[a.i as usize] += l * a.n;
        } else {
            s.node[a.i as usize] -= l * a.n;
            s.node[a.j as usize] += l * a.n;
        }
    }
    for a in act {
        for (n, w) in [(a.i, a.wi), (a.j, a.wj)] {
            let n = n as usize;
            if n != NO_NODE as usize && w > 0.0 && s.node[n] != DVec3::ZERO {
                x[n] -= w * s.node[n];
                s.node[n] = DVec3::ZERO;
            }
        }
    }
    true
}

/// The conjugate-gradient vectors of [`solve`].
#[derive(Debug, Default)]
struct Cg {
    lambda: Vec<f64>,
    r: Vec<f64>,
    z: Vec<f64>,
    p: Vec<f64>,
    ap: Vec<f64>,
}

/// `J W J^T lambda = c` over the rows `act`, by at most `iterations` Jacobi-preconditioned
/// conjugate-gradient iterations from zero, into `cg.lambda`; `node` is per-node scratch.
fn solve(act: &[Active], iterations: u32, cg: &mut Cg, node: &mut [DVec3]) {
    let m = act.len();
    // `out = J W J^T v` through the nodes: `J^T v` scattered, scaled by W, gathered. A half
    // edge's row is `-n` on `i` and `n` on `j`, a contact row `n` on `i`.
    let multiply = |v: &[f64], node: &mut [DVec3], out: &mut [f64]| {
        for a in act {
            node[a.i as usize] = DVec3::ZERO;
            if a.j != NO_NODE {
                node[a.j as usize] = DVec3::ZERO;
            }
        }
        for (a, &vk) in act.iter().zip(v) {
            if a.j == NO_NODE {
                node[a.i as usize] += vk * a.n;
            } else {
                node[a.i as usize] -= vk * a.n;
                node[a.j as usize] += vk * a.n;
            }
        }
        for (a, o) in act.iter().zip(out.iter_mut()) {
            *o = if a.j == NO_NODE {
                a.n.dot(a.wi * node[a.i as usize])
            } else {
                a.n.dot(a.wj * node[a.j as usize] - a.wi * node[a.i as usize])
            };
        }
    };
    for v in [&mut cg.lambda, &mut cg.r, &mut cg.z, &mut cg.p, &mut cg.ap] {
        v.clear();
        v.resize(m, 0.0);
    }
    for (k, a) in act.iter().enumerate() {
        cg.r[k] = a.c;
        cg.z[k] = a.c / (a.wi + a.wj);
    }
    cg.p.copy_from_slice(&cg.z);
    let mut rz: f64 = cg.r.iter().zip(&cg.z).map(|(r, z)| r * z).sum();
    let tiny = 1e-12 * rz.abs();
    for _ in 0..iterations {
        multiply(&cg.p, node, &mut cg.ap);
        let pap: f64 = cg.p.iter().zip(&cg.ap).map(|(p, q)| p * q).sum();
        if pap.is_nan() || pap <= 0.0 {
            break;
        }
        let alpha = rz / pap;
        for (k, a) in act.iter().enumerate() {
            cg.lambda[k] += alpha * cg.p[k];
            cg.r[k] -= alpha * cg.ap[k];
            cg.z[k] = cg.r[k] / (a.wi + a.wj);
        }
        let rz_new: f64 = cg.r.iter().zip(&cg.z).map(|(r, z)| r * z).sum();
        if rz_new <= tiny {
            break;
        }
        let beta = rz_new / rz;
        rz = rz_new;
        for (p, z) in cg.p.iter_mut().zip(&cg.z) {
            *p = z + beta * *p;
        }
    }
}
