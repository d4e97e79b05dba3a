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
//! A substep's first step tests every half edge; a later step tests only the rows held and the
//! half edges at the nodes the last step moved (no other half edge changed).
//!
//! **The global pass** (opt-in, [`StrainCap::global_iterations`]). Before its first step, a
//! substep with no body or limit near the cloth that finds half edges outside the band may run a few majorise-minimise iterations of
//! `E(x) = 1/2 sum_e w_e dist(A_e x, band_e)^2` with one constant matrix, `M / (k m) + L` (`L`
//! the half edges' Laplacian, factored once per model as the global step's matrix is): each
//! gives every half edge outside the band a target on the band along its direction and moves the
//! free nodes to the least-squares fit (one solve). No iteration raises `E`, and the solve
//! moves the whole cloth, so a jerk's stretch is carried down a cape at once. It converges
//! slowly where the fix needs the half edges to turn (each in-band half edge is held at its
//! whole vector, not only its length): on the soft whipped cape the worst half edge went 8.4 ->
//! 5.3 % over six iterations. What it buys, measured on the whipped cape (worst frame of 90,
//! `tests/strain_cap.rs`, default work bound): at the soft weights, 3 %, 128 % without it and
//! 13.6 % with 4 iterations; at the stiff weights, 3.0-3.6 % either way, and at 1 % without a
//! work bound 4.3 % without it and 1.0 % with 2 or 4 (docs/lab/2026-12-02-cap-global.md).
//!
//! The cost is bounded three ways: [`StrainCap::steps`], [`StrainCap::cg_iterations`] a step,
//! and [`StrainCap::work`], the work a substep's cap may do per node (its edge tests and its
//! rows times its iterations, at the weights of [`crate::StepCounters::work`]): a step gets
//! the iterations the bound leaves, and a cap that runs out stops and says so
//! ([`crate::StepCounters::cap_unmet`]). The default bound, 24 work units a node (about two
//! quiet substeps), took the soak's dearest frame (`soak -- 3`) from 4.2x the median frame's
//! work to 3.0x, at the same per-frame strain p99 (2.96 %) and p99.9 (3.04 %); the whipped cape
//! (`tests/strain_cap.rs`) goes from 3.0 to 3.6 %. A substep within the tolerance pays one pass
//! over the edges (docs/lab/2026-12-02-counters.md).

use glam::DVec3;
use serde::{Deserialize, Serialize};

use crate::counters::{StepCounters, weight};
use crate::error::ClothError;
use crate::factor::{Lane4, ModelFactor, SymbolicFactor};
use crate::mesh::StrainEdge;
use crate::model::ClothModel;
use crate::sparse::CsrMatrix;

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
    /// Most work a substep's cap may do, per node of the cloth, in the units of
    /// [`crate::StepCounters::work`] (its tests of the half edges and its conjugate-gradient
    /// iterations; a quiet substep's iterations are about 11 a node at 5 iterations). A step
    /// is shortened to the iterations the bound leaves, and the cap stops where not one is
    /// left; the substep then counts as unmet ([`crate::StepCounters::cap_unmet`]) and ends
    /// with the strain the cap reached, the bodies and limits still satisfied. Default `24`
    /// (about two quiet substeps' work; see the module docs for what it keeps); positive,
    /// `f64::INFINITY` for no bound beyond `steps` x `cg_iterations`.
    pub work: f64,
    /// Iterations of the cap's global pass, run before its first step where a substep with no
    /// body or limit near the cloth finds half edges outside the band (it has no contact rows):
    /// each projects every half edge onto the band and takes the
    /// least-squares positions from one solve with the cap's constant matrix (see the module
    /// docs), carrying a stretch down the whole cloth at once. `0` skips it. Default `0`, an
    /// opt-in: on the whipped cape at the soft weights ([`crate::SolverWeights::SOFT`], 3 %,
    /// the default work bound) 4 iterations leave 13.6 % where the steps alone leave 128 %, but
    /// at the stiff weights the steps alone do about as well (3.0-3.6 % either way), and each
    /// iteration costs one solve (docs/lab/2026-12-02-cap-global.md).
    pub global_iterations: u32,
}

impl Default for StrainCap {
    fn default() -> Self {
        Self {
            tolerance: 0.03,
            steps: 16,
            cg_iterations: 20,
            work: 24.0,
            global_iterations: 0,
        }
    }
}

impl StrainCap {
    /// No cap: the substep ends where its iterations left it.
    pub const OFF: StrainCap = StrainCap {
        tolerance: 0.03,
        steps: 0,
        cg_iterations: 20,
        work: f64::INFINITY,
        global_iterations: 0,
    };

    /// Most steps, and most conjugate-gradient iterations a step, accepted.
    pub const MAX_ITERATIONS: u32 = 1000;

    /// Checks the tolerance (in (0, 1)), the steps (at most [`StrainCap::MAX_ITERATIONS`]), the
    /// conjugate-gradient iterations (1 to [`StrainCap::MAX_ITERATIONS`]) and the work bound
    /// (positive).
    pub fn validate(&self) -> Result<(), ClothError> {
        if !(self.tolerance > 0.0 && self.tolerance < 1.0) {
            return Err(ClothError::InvalidSetting {
                name: "strain_cap.tolerance",
                reason: format!("must be in (0, 1), got {}", self.tolerance),
            });
        }
        if self.global_iterations > Self::MAX_ITERATIONS {
            return Err(ClothError::InvalidSetting {
                name: "strain_cap.global_iterations",
                reason: format!(
                    "at most {}, got {}",
                    Self::MAX_ITERATIONS,
                    self.global_iterations
                ),
            });
        }
        if self.steps > Self::MAX_ITERATIONS {
            return Err(ClothError::InvalidSetting {
                name: "strain_cap.steps",
                reason: format!("at most {}, got {}", Self::MAX_ITERATIONS, self.steps),
            });
        }
        if self.work.is_nan() || self.work <= 0.0 {
            return Err(ClothError::InvalidSetting {
                name: "strain_cap.work",
                reason: format!("must be positive (or infinite), got {}", self.work),
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
    scratch.begin(model, cap, false);
    for _ in 0..cap.steps {
        if !project(model, x, cap, &[], scratch) {
            break;
        }
    }
    scratch.end(cap);
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

/// The half edges the cap holds (each base edge's two halves through its red midpoint, or the
/// edge itself on a plain mesh) with their rest lengths, and the half edges at each node: a
/// step moves only its rows' nodes, so the next step tests only the half edges at those.
#[derive(Debug, Clone, Default)]
pub(crate) struct HalfEdges {
    /// Per half edge: its two nodes and its rest length.
    halves: Vec<(u32, u32, f64)>,
    /// The half edges at node `n` are `at[start[n]..start[n + 1]]`.
    start: Vec<u32>,
    at: Vec<u32>,
}

impl HalfEdges {
    /// The half edges of `edges` on a mesh of `nodes` nodes.
    pub(crate) fn new(edges: &[StrainEdge], nodes: usize) -> Self {
        let mut halves = Vec::with_capacity(2 * edges.len());
        for e in edges {
            match e.mid {
                Some(m) => {
                    let h = 0.5 * e.rest_length;
                    halves.push((e.a, m, h));
                    halves.push((m, e.b, h));
                }
                None => halves.push((e.a, e.b, e.rest_length)),
            }
        }
        let mut start = vec![0u32; nodes + 1];
        for &(i, j, _) in &halves {
            start[i as usize + 1] += 1;
            start[j as usize + 1] += 1;
        }
        for n in 0..nodes {
            start[n + 1] += start[n];
        }
        let mut fill = start.clone();
        let mut at = vec![0u32; 2 * halves.len()];
        for (k, &(i, j, _)) in halves.iter().enumerate() {
            for n in [i, j] {
                at[fill[n as usize] as usize] = k as u32;
                fill[n as usize] += 1;
            }
        }
        Self { halves, start, at }
    }

    /// The half edges at node `n`.
    fn at(&self, n: u32) -> &[u32] {
        &self.at[self.start[n as usize] as usize..self.start[n as usize + 1] as usize]
    }
}

/// How stiff the half edges of the cap's constant matrix are against the nodes' masses: the
/// matrix is `M / (GLOBAL_STIFFNESS m) + sum_e w_e A_e^T A_e` (`m` the mean free node's mass),
/// so the mass term only regularises (it keeps a free cloth's mass-weighted centre where it
/// is) and the solve is, to a part in `GLOBAL_STIFFNESS`, the least-squares fit of the nodes
/// to the half edges' targets.
const GLOBAL_STIFFNESS: f64 = 1e4;

/// The cap's constant matrix over the free nodes, factored once per model: `M / (k m) + L`,
/// `L = sum_e w_e A_e^T A_e` the half edges' Laplacian with `w_e = (r / rest_e)^2` (`r` the
/// mean rest length, so each half edge weighs its strain alike) and `A_e x = x_j - x_i`.
#[derive(Debug)]
pub(crate) struct CapSystem {
    symbolic: SymbolicFactor,
    factor: ModelFactor,
    /// Node of each row of the permuted system.
    order: Vec<u32>,
    /// Per half edge, `w_e`.
    weight: Vec<f64>,
}

impl CapSystem {
    /// Assembles and factors the matrix for `halves` over `free` (the model's free nodes, in
    /// order; the others held) with node masses `masses`. `None` where every node is pinned.
    pub(crate) fn new(
        halves: &HalfEdges,
        masses: &[f64],
        free: &[u32],
    ) -> Result<Option<Self>, ClothError> {
        if free.is_empty() || halves.halves.is_empty() {
            return Ok(None);
        }
        let mut unknown = vec![u32::MAX; masses.len()];
        for (u, &i) in free.iter().enumerate() {
            unknown[i as usize] = u as u32;
        }
        let mean_mass = free.iter().map(|&i| masses[i as usize]).sum::<f64>() / free.len() as f64;
        let mean_rest = halves.halves.iter().map(|h| h.2).sum::<f64>() / halves.halves.len() as f64;
        let weight: Vec<f64> = halves
            .halves
            .iter()
            .map(|&(_, _, rest)| (mean_rest / rest).powi(2))
            .collect();
        let mut triplets = Vec::with_capacity(free.len() + 4 * halves.halves.len());
        for (u, &i) in free.iter().enumerate() {
            let m = masses[i as usize] / (GLOBAL_STIFFNESS * mean_mass);
            triplets.push((u as u32, u as u32, m));
        }
        for (&(i, j, _), &w) in halves.halves.iter().zip(&weight) {
            let (ui, uj) = (unknown[i as usize], unknown[j as usize]);
            for u in [ui, uj] {
                if u != u32::MAX {
                    triplets.push((u, u, w));
                }
            }
            if ui != u32::MAX && uj != u32::MAX {
                triplets.push((ui, uj, -w));
                triplets.push((uj, ui, -w));
            }
        }
        let k = CsrMatrix::from_triplets(free.len(), &mut triplets);
        drop(triplets);
        let mut symbolic = SymbolicFactor::analyze(&k)?;
        let factor = ModelFactor::factorize(&symbolic, &k)?;
        symbolic.release_analysis();
        let order = symbolic.perm().iter().map(|&u| free[u as usize]).collect();
        Ok(Some(Self {
            symbolic,
            factor,
            order,
            weight,
        }))
    }
}

/// The fast projection's buffers, reused from substep to substep (sized for the largest model
/// seen: a workspace that has served it allocates nothing more).
#[derive(Debug, Default)]
pub(crate) struct ProjectionScratch {
    active: Vec<Active>,
    /// The global pass's solve rows (sized when a cap with the pass begins).
    lanes: Vec<Lane4>,
    /// Whether this substep's cap may still run its global pass (at its first step that finds
    /// half edges outside the band).
    global_pending: bool,
    cg: Cg,
    /// Per node, `J^T v` of the vector being multiplied.
    node: Vec<DVec3>,
    /// Per half edge, whether a step of this substep's cap has made it a row: it stays one
    /// (held at its length where it is now within the band), so that the next steps do not
    /// carry it back out. `held_list` lists them.
    held: Vec<bool>,
    held_list: Vec<u32>,
    /// The half edges this step made rows (joining `held_list` after it).
    held_new: Vec<u32>,
    /// Per half edge, the number of the last test that saw it (a step tests each half edge
    /// once), and that number now.
    seen: Vec<u32>,
    test: u32,
    /// The nodes the last step moved (whose half edges the next step tests).
    moved: Vec<u32>,
    /// Whether this substep's cap has tested every half edge (its first test does).
    scanned: bool,
    /// Steps taken in this substep's cap.
    substep_steps: u32,
    /// Work this substep's cap may still do (units of [`StepCounters::work`]), and whether it
    /// stopped for want of it.
    work_left: f64,
    out_of_work: bool,
    /// Counts of the frame's cap steps (gathered by `Workspace::take_counters`).
    pub(crate) counters: StepCounters,
}

impl ProjectionScratch {
    /// Sizes the buffers for `model` (every half edge may be active).
    pub(crate) fn ensure(&mut self, model: &ClothModel) {
        let halves = model.cap_halves().halves.len();
        let nodes = model.mesh.node_count();
        // Every half edge and every node (a contact row) may be active.
        let rows = halves + nodes;
        let cg = &mut self.cg;
        for v in [&mut cg.lambda, &mut cg.r, &mut cg.z, &mut cg.p, &mut cg.ap] {
            v.reserve(rows.saturating_sub(v.len()));
        }
        self.active.reserve(rows.saturating_sub(self.active.len()));
        for v in [&mut self.held_list, &mut self.held_new] {
            v.reserve(halves.saturating_sub(v.len()));
        }
        self.moved.reserve(nodes.saturating_sub(self.moved.len()));
        self.node.resize(nodes, DVec3::ZERO);
        if self.held.len() < halves {
            self.held.resize(halves, false);
            self.seen.resize(halves, 0);
        }
    }

    /// Starts a substep's cap on `model`: no half edge held yet, its work bound whole. With
    /// `bodies_near` (the contact pass has bodies or limits about) the cap runs no global pass:
    /// it has no contact rows, and where it ran it drew nodes across a limb sweeping through a
    /// sheet (412 % strain) and a tablecloth off its ball (docs/lab/2026-12-02-cap-global.md).
    pub(crate) fn begin(&mut self, model: &ClothModel, cap: &StrainCap, bodies_near: bool) {
        for &k in &self.held_list {
            self.held[k as usize] = false;
        }
        self.held_list.clear();
        self.moved.clear();
        self.scanned = false;
        self.global_pending = cap.global_iterations > 0 && !bodies_near;
        self.substep_steps = 0;
        self.work_left = cap.work * model.mesh.node_count() as f64;
        self.out_of_work = false;
        if cap.global_iterations > 0 {
            // The global pass's matrix and rows are made at the first substep that may use
            // them, not at the first that needs them (that one could be any later frame).
            let _ = model.cap_system();
            self.lanes.resize(model.free_nodes.len(), Lane4::default());
        }
    }

    /// Ends a substep's cap: counts it unmet if it used every step `cap` allows (the last
    /// one found half edges outside the band) or ran out of work.
    pub(crate) fn end(&mut self, cap: &StrainCap) {
        if cap.is_on() && (self.substep_steps >= cap.steps || self.out_of_work) {
            self.counters.cap_unmet += 1;
        }
    }

    /// A new test number (every half edge unseen by it).
    fn next_test(&mut self) -> u32 {
        self.test = self.test.wrapping_add(1);
        if self.test == 0 {
            self.seen.fill(0);
            self.test = 1;
        }
        self.test
    }
}

/// One step of the fast projection onto the band of `cap` (see the module docs): the half
/// edges outside it, linearised, brought onto its nearer end together, the system solved by at
/// most `cap.cg_iterations` Jacobi-preconditioned conjugate-gradient iterations (fewer where
/// the work bound [`StrainCap::work`] leaves fewer). The substep's first step tests every half
/// edge; each later one, the rows held and the half edges at the nodes the last step moved
/// (no other half edge has changed). Returns whether any half edge was outside the band and
/// the positions moved.
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
    if s.scanned && s.work_left <= 0.0 {
        s.out_of_work = true;
        return false;
    }
    let topo = model.cap_halves();
    let test = s.next_test();
    s.active.clear();
    let mut outside = false;
    let mut tests = 0u64;
    s.held_new.clear();
    let (active, held, held_new, seen) = (&mut s.active, &mut s.held, &mut s.held_new, &mut s.seen);
    let mut half = |k: u32, x: &[DVec3]| {
        let ku = k as usize;
        if seen[ku] == test {
            return;
        }
        seen[ku] = test;
        tests += 1;
        let (i, j, rest) = topo.halves[ku];
        let (i, j) = (i as usize, j as usize);
        let d = x[j] - x[i];
        let (dd, r2) = (d.length_squared(), rest * rest);
        let within = dd >= lo * r2 && dd <= hi * r2;
        if within && !held[ku] {
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
        if !held[ku] {
            held[ku] = true;
            held_new.push(k);
        }
        active.push(Active {
            i: i as u32,
            j: j as u32,
            n: d / len,
            wi,
            wj,
            c: len - target,
        });
    };
    if !s.scanned {
        for k in 0..topo.halves.len() as u32 {
            half(k, x);
        }
    } else {
        // The rows held, then the half edges at the nodes the last step moved.
        for &k in &s.held_list {
            half(k, x);
        }
        for &n in &s.moved {
            for &k in topo.at(n) {
                half(k, x);
            }
        }
    }
    s.scanned = true;
    s.held_list.extend_from_slice(&s.held_new);
    s.counters.cap_edge_tests += tests;
    s.work_left -= tests as f64 * weight::CAP_EDGE_TEST;
    if !outside {
        return false;
    }
    if s.global_pending {
        s.global_pending = false;
        if let Some(system) = model.cap_system()
            && global_pass(model, system, x, cap, s)
        {
            return true;
        }
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
    // The iterations the work bound leaves (each multiplies every row once).
    let per_iteration = s.active.len() as f64 * weight::CAP_ROW_ITERATION;
    let affordable = (s.work_left / per_iteration).floor();
    if affordable < 1.0 {
        s.out_of_work = true;
        return false;
    }
    let iterations = cap
        .cg_iterations
        .min(affordable.min(u32::MAX as f64) as u32);
    s.substep_steps += 1;
    s.counters.cap_steps += 1;
    let done = solve(&s.active, iterations, &mut s.cg, &mut s.node);
    s.work_left -= f64::from(done) * per_iteration;
    s.counters.cap_cg_iterations += done;
    s.counters.cap_row_iterations += s.active.len() as u64 * u64::from(done);
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
    s.moved.clear();
    for a in act {
        for (n, w) in [(a.i, a.wi), (a.j, a.wj)] {
            let n = n as usize;
            if n != NO_NODE as usize && w > 0.0 && s.node[n] != DVec3::ZERO {
                x[n] -= w * s.node[n];
                s.node[n] = DVec3::ZERO;
                s.moved.push(n as u32);
            }
        }
    }
    true
}

/// The cap's global pass (see [`StrainCap::global_iterations`]): up to `cap.global_iterations`
/// majorise-minimise iterations of `E(x) = 1/2 sum_e w_e dist(A_e x, band_e)^2`: each sets
/// every half edge outside the band a target, its direction at the band's nearer end (those
/// inside are their own), and moves the free nodes by the least-squares fit to the targets,
/// `(M / (k m) + L) dx = sum_e w_e A_e^T (d_e - A_e x)` (one solve with [`CapSystem`]'s factor,
/// pins held). The fit's energy bounds `E` from above and touches it at `x`, so no iteration
/// raises `E`; and the solve moves the whole cloth at once, so a stretch the pins' jerk put
/// next to them is carried down a cape in one iteration, where the steps' linearised rows
/// carry it a few edges a step. Returns whether it moved the nodes (after it the next step
/// tests every half edge again, none held).
fn global_pass(
    model: &ClothModel,
    system: &CapSystem,
    x: &mut [DVec3],
    cap: &StrainCap,
    s: &mut ProjectionScratch,
) -> bool {
    let free = model.free_nodes.len();
    let topo = model.cap_halves();
    let cost = free as f64 * weight::SOLVE_NODE + topo.halves.len() as f64 * weight::CAP_EDGE_TEST;
    let tol = cap.tolerance;
    let (lo, hi) = ((1.0 - tol) * (1.0 - tol), (1.0 + tol) * (1.0 + tol));
    let aim = tol * (1.0 - AIM_INSIDE);
    let mut moved = false;
    // The right-hand side gathers in the steps' per-node scratch, which they clear before use.
    let rhs = &mut s.node;
    for _ in 0..cap.global_iterations {
        if s.work_left < cost {
            break;
        }
        rhs.fill(DVec3::ZERO);
        let mut outside = false;
        for (&(i, j, rest), &w) in topo.halves.iter().zip(&system.weight) {
            let (i, j) = (i as usize, j as usize);
            let d = x[j] - x[i];
            let (dd, r2) = (d.length_squared(), rest * rest);
            if (dd >= lo * r2 && dd <= hi * r2) || dd == 0.0 {
                continue;
            }
            outside = true;
            let len = dd.sqrt();
            let target = if dd > hi * r2 {
                (1.0 + aim) * rest
            } else {
                (1.0 - aim) * rest
            };
            // `w_e A_e^T (d_e - A_e x)`: the half edge's two nodes drawn to its target.
            let f = (w * (len - target) / len) * d;
            rhs[i] += f;
            rhs[j] -= f;
        }
        s.counters.cap_edge_tests += topo.halves.len() as u64;
        s.work_left -= topo.halves.len() as f64 * weight::CAP_EDGE_TEST;
        if !outside {
            break;
        }
        for (l, &node) in s.lanes.iter_mut().zip(&system.order) {
            *l = Lane4::from_vec(rhs[node as usize]);
        }
        system.factor.solve_lanes(&system.symbolic, &mut s.lanes);
        for (l, &node) in s.lanes.iter().zip(&system.order) {
            x[node as usize] += l.vec();
        }
        s.counters.solves += 1;
        s.counters.solve_nodes += free as u64;
        s.work_left -= free as f64 * weight::SOLVE_NODE;
        moved = true;
    }
    if moved {
        // The next step tests every half edge again and holds none yet.
        for &k in &s.held_list {
            s.held[k as usize] = false;
        }
        s.held_list.clear();
        s.moved.clear();
        s.scanned = false;
        s.substep_steps += 1;
        s.counters.cap_steps += 1;
    }
    moved
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
/// Returns the iterations run.
fn solve(act: &[Active], iterations: u32, cg: &mut Cg, node: &mut [DVec3]) -> u32 {
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
    let mut done = 0;
    for _ in 0..iterations {
        multiply(&cg.p, node, &mut cg.ap);
        done += 1;
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
    done
}
