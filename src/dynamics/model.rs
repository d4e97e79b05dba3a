//! The prepared, immutable form of a cloth: mesh, energy terms, masses, pin set and the
//! prefactored system matrix.
//!
//! A [`ClothModel`] is what a game builds once per asset (a fabric) and shares, through `Arc`,
//! between every cloth instance made from it: 64 capes from one asset hold one factor. It changes
//! only when the substep length, the weights or the pin set change, and then a new model is built
//! (that is the refactorisation; [`ClothModel::new`] reports what it costs through
//! [`ModelStats`]).

use std::sync::Arc;

use glam::DVec3;
use serde::{Deserialize, Serialize};

use crate::energy::{Material, SolverWeights, Terms};
use crate::error::ClothError;
use crate::error::positive;
use crate::factor::{ModelFactor, SymbolicFactor};
use crate::integrator::{Integrator, Scheme};
use crate::mesh::ClothMesh;
use crate::sparse::CsrMatrix;
use crate::strain_cap::StrainCap;

/// Marks a node that is not free in [`ClothModel`]'s node-to-unknown map.
pub(crate) const PINNED: u32 = u32::MAX;

/// The iteration used for each substep. [`SolverMethod::Anderson`] (the default) and
/// [`SolverMethod::LocalGlobal`] use the prefactored matrix and cost one evaluation of the
/// local-global map per iteration; [`SolverMethod::Newton`] is the converged reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum SolverMethod {
    /// Plain local-global (projective dynamics): project, then solve. Monotone but slow on stiff
    /// isometry: an unconverged step acts as extra stiffness and damping.
    LocalGlobal,
    /// Newton's method on each substep's energy with the true (projected) Hessian, refactored
    /// every iteration, run until the force residual is below a thousandth of a node's weight
    /// or `iterations` Newton steps. The converged reference that budgeted runs are measured
    /// against (`Cloth::relax`'s solver, with inertia): it allocates and costs milliseconds
    /// per iteration, so it is not for the frame loop. Contacts are resolved after the solve
    /// only (the last pass, no contact forces).
    Newton,
    /// The local-global map `G` (local step, global solve, coupled contact step) accelerated
    /// by Anderson mixing: each iteration evaluates `G` once at a combination of its last
    /// outputs, fitted to cancel the fixed-point residual `|G(x) - x|` over the last `history`
    /// differences (Walker and Ni 2011; Peng et al. 2018). Safeguarded by that residual, not by
    /// an energy: an input whose residual grows is refused and the iteration goes back to the
    /// last accepted output and its contact forces. Contact stays consistent with the
    /// iteration (forces answer through `K^-1`, as in [`SolverMethod::LocalGlobal`]). The
    /// product's iteration: every preset runs it.
    Anderson {
        /// Differences remembered (1..=16).
        history: u32,
    },
}

impl Default for SolverMethod {
    fn default() -> Self {
        SolverMethod::Anderson { history: 5 }
    }
}

/// Time-stepping settings. All fields have documented defaults ([`SolverSettings::default`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SolverSettings {
    /// Nominal frame length in seconds. Default `1/60`.
    pub frame_time: f64,
    /// Fixed substeps per nominal frame; the substep is `frame_time / substeps`. Default `2`.
    pub substeps: u32,
    /// Local-global iterations per substep. Default `5` (10 per frame with 2 substeps).
    pub iterations: u32,
    /// Most frames' worth of substeps one call to [`Cloth::step`](crate::Cloth::step) may run to
    /// catch up after a long frame (`catch_up_frames * substeps` substeps); the rest of the
    /// backlog is dropped, so the cloth runs slow for a moment rather than stalling the game.
    /// Default `2`.
    pub catch_up_frames: u32,
    /// Integrator. Default [`Integrator::Bdf2`].
    pub integrator: Integrator,
    /// How each substep's minimisation is iterated. Default [`SolverMethod::Anderson`] with a
    /// history of 5.
    pub method: SolverMethod,
    /// Gravity in m/s^2. Default `(0, -9.81, 0)`.
    pub gravity: DVec3,
    /// The strain cap at the end of each substep ([`crate::strain_cap`]). Default
    /// [`StrainCap::default`]: 3 %, at most 16 projection steps of 20 conjugate-gradient
    /// iterations within 24 work units a node a substep; [`StrainCap::OFF`] steps exactly as
    /// without one.
    pub strain_cap: StrainCap,
    /// The weights the iterations converge with ([`SolverWeights`]; they are in the factored
    /// matrix, so another set refactors). Default [`SolverWeights::default`] (the stiff weights,
    /// isometry `1e5`, render edges `3e4`), the shipped presets' and the converged reference's;
    /// [`SolverWeights::SOFT`] moves like the converged cloth at a game's budget but stretches
    /// more where the strain cap cannot hold it.
    pub weights: SolverWeights,
}

impl Default for SolverSettings {
    fn default() -> Self {
        Self {
            frame_time: 1.0 / 60.0,
            substeps: 2,
            iterations: 5,
            catch_up_frames: 2,
            integrator: Integrator::Bdf2,
            method: SolverMethod::default(),
            gravity: DVec3::new(0.0, -9.81, 0.0),
            strain_cap: StrainCap::default(),
            weights: SolverWeights::default(),
        }
    }
}

impl SolverSettings {
    /// Whether a model factored for `self` serves `other` too: the same substep length,
    /// integrator, method and weights (iterations, gravity, catch-up and the strain cap are
    /// read each step).
    pub fn factors_like(&self, other: &SolverSettings) -> bool {
        self.substep() == other.substep()
            && self.integrator == other.integrator
            && self.method == other.method
            && self.weights == other.weights
    }

    /// Largest accepted iteration count per substep.
    pub const MAX_ITERATIONS: u32 = 10_000;
    /// Largest accepted substep count per frame.
    pub const MAX_SUBSTEPS: u32 = 256;

    /// Most substeps one call to [`Cloth::step`](crate::Cloth::step) runs.
    pub fn max_substeps_per_step(&self) -> u32 {
        self.catch_up_frames * self.substeps
    }

    /// The fixed substep length `h` in seconds.
    pub fn substep(&self) -> f64 {
        self.frame_time / self.substeps as f64
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<(), ClothError> {
        positive("frame_time", self.frame_time)?;
        if self.frame_time > 1.0 {
            return Err(ClothError::InvalidSetting {
                name: "frame_time",
                reason: format!("at most 1 s, got {}", self.frame_time),
            });
        }
        let range = |name, v: u32, max: u32| {
            if (1..=max).contains(&v) {
                Ok(())
            } else {
                Err(ClothError::InvalidSetting {
                    name,
                    reason: format!("must be in 1..={max}, got {v}"),
                })
            }
        };
        range("substeps", self.substeps, Self::MAX_SUBSTEPS)?;
        range("iterations", self.iterations, Self::MAX_ITERATIONS)?;
        range("catch_up_frames", self.catch_up_frames, 8)?;
        if let SolverMethod::Anderson { history } = self.method {
            range("method.history", history, 16)?;
        }
        if !self.gravity.is_finite() {
            return Err(ClothError::InvalidSetting {
                name: "gravity",
                reason: "must be finite".into(),
            });
        }
        self.strain_cap.validate()?;
        self.weights.validate()
    }
}

/// Sizes and costs of a prepared model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ModelStats {
    /// Simulation nodes.
    pub nodes: usize,
    /// Free nodes (unknowns per coordinate).
    pub free_nodes: usize,
    /// Nonzeros of the free-free system matrix (both triangles).
    pub matrix_nnz: usize,
    /// Nonzeros of one Cholesky factor `L`.
    pub factor_nnz: usize,
    /// Bytes held by the numeric factor.
    pub factor_bytes: usize,
    /// Seconds spent assembling and factoring.
    pub build_seconds: f64,
    /// Of which the factorisation: ordering and symbolic analysis, then the numeric factor.
    pub factor_seconds: f64,
}

/// Free-to-pinned coupling rows `-S_FP`, applied to pin positions every substep.
#[derive(Debug, Clone, Default)]
pub(crate) struct PinCoupling {
    /// For each free unknown, a range into `pins`/`vals`.
    pub row_ptr: Vec<u32>,
    pub pins: Vec<u32>,
    pub vals: Vec<f64>,
}

/// The immutable prepared form of a cloth. See the module docs.
#[derive(Debug)]
pub struct ClothModel {
    pub(crate) mesh: Arc<ClothMesh>,
    pub(crate) material: Material,
    pub(crate) settings: SolverSettings,
    pub(crate) masses: Vec<f64>,
    pub(crate) terms: Terms,
    pub(crate) pins: Vec<u32>,
    pub(crate) free_nodes: Vec<u32>,
    /// Whether each node is pinned.
    pub(crate) pinned_mask: Vec<bool>,
    /// Node of each row of the factored (permuted) system.
    pub(crate) solve_order: Vec<u32>,
    pub(crate) coupling: PinCoupling,
    pub(crate) symbolic: Option<SymbolicFactor>,
    /// Factor of `M / h~^2 + S_FF` for the integrator's scheme (none when every node is pinned).
    pub(crate) factor: Option<ModelFactor>,
    /// Per node, `(K^-1)_ii`: how far a unit force on that node alone moves it in one global
    /// solve, the rest of the cloth following (m/N; zero for pinned nodes). Contact forces are
    /// updated with it (see [`crate::collision`]).
    pub(crate) compliance: Vec<f64>,
    /// Each free node's nearest pin and rest geodesic distance to it (the tethers).
    pub(crate) tethers: crate::limits::Tethers,
    /// The render mesh's triangles, edges and hierarchy for self-collision, built on first use
    /// ([`ClothModel::self_topology`]): a model none of whose cloths collide with itself
    /// neither builds nor holds them.
    self_topology: std::sync::OnceLock<crate::self_contact::SelfTopology>,
    /// The strain cap's half edges and the half edges at each node, built on first use
    /// ([`ClothModel::cap_halves`]).
    cap_halves: std::sync::OnceLock<crate::dynamics::strain_cap::HalfEdges>,
    /// The strain cap's constant matrix, factored on first use ([`ClothModel::cap_system`]).
    cap_system: std::sync::OnceLock<Option<crate::dynamics::strain_cap::CapSystem>>,
    /// `K` itself, assembled on first use ([`ClothModel::system`]; the factor's tests).
    #[cfg(test)]
    pub(crate) system: std::sync::OnceLock<CsrMatrix>,
    pub(crate) stats: ModelStats,
}

impl ClothModel {
    /// Prepares a model: validates the settings, assembles `M/h~^2 + sum_c w_c A_c^T A_c` over the
    /// free nodes, and factors it once (symbolic, then numeric for the integrator's
    /// scheme). `pins` are node indices held by targets (see [`ClothMesh::nodes_for_vertices`]).
    pub fn new(
        mesh: Arc<ClothMesh>,
        material: Material,
        pins: &[u32],
        settings: SolverSettings,
    ) -> Result<Arc<Self>, ClothError> {
        let start = std::time::Instant::now();
        material.validate()?;
        settings.validate()?;
        let n = mesh.node_count();
        let mut pins = pins.to_vec();
        pins.sort_unstable();
        pins.dedup();
        if let Some(&bad) = pins.iter().find(|&&p| p as usize >= n) {
            return Err(ClothError::NodeOutOfRange {
                node: bad as usize,
                node_count: n,
            });
        }
        let masses = mesh.lumped_masses(material.density);
        let terms = Terms::new(&mesh, &material, &settings.weights);

        let mut unknown = vec![0u32; n];
        for &p in &pins {
            unknown[p as usize] = PINNED;
        }
        let mut free_nodes = Vec::with_capacity(n - pins.len());
        for (i, u) in unknown.iter_mut().enumerate() {
            if *u != PINNED {
                *u = free_nodes.len() as u32;
                free_nodes.push(i as u32);
            }
        }

        let h = settings.substep();
        let ht = scheme_of(settings.integrator).effective_step(h);
        let nf = free_nodes.len();
        let (k, coupling) = assemble_system(&terms, &masses, &unknown, &free_nodes, ht);
        let factor_start = std::time::Instant::now();
        let (symbolic, factor) = if nf == 0 {
            (None, None)
        } else {
            let mut symbolic = SymbolicFactor::analyze(&k)?;
            let numeric = ModelFactor::factorize(&symbolic, &k)?;
            symbolic.release_analysis();
            (Some(symbolic), Some(numeric))
        };
        let matrix_nnz = k.nnz();
        drop(k);
        // Each free node's compliance in the whole cloth, `(K^-1)_ii` (contact's per-node
        // response, docs/design.md section 5); zero for pinned nodes.
        let mut compliance = vec![0.0; n];
        if let (Some(symbolic), Some(factor)) = (&symbolic, &factor) {
            let diag = factor.inverse_diagonal(symbolic);
            for (&fi, &d) in symbolic.perm().iter().zip(&diag) {
                compliance[free_nodes[fi as usize] as usize] = d;
            }
        }

        let factor_seconds = factor_start.elapsed().as_secs_f64();
        let solve_order: Vec<u32> = match &symbolic {
            Some(s) => s.perm().iter().map(|&i| free_nodes[i as usize]).collect(),
            None => Vec::new(),
        };
        let stats = ModelStats {
            nodes: n,
            free_nodes: nf,
            matrix_nnz,
            factor_nnz: symbolic.as_ref().map_or(0, |s| s.factor_nnz()),
            factor_bytes: factor.as_ref().map_or(0, |f| f.bytes()),
            build_seconds: start.elapsed().as_secs_f64(),
            factor_seconds,
        };
        let mut pinned_mask = vec![false; n];
        for &p in &pins {
            pinned_mask[p as usize] = true;
        }
        let tethers = crate::limits::Tethers::new(&mesh, &pins);
        Ok(Arc::new(Self {
            mesh,
            material,
            settings,
            masses,
            terms,
            pins,
            free_nodes,
            pinned_mask,
            solve_order,
            coupling,
            symbolic,
            factor,
            compliance,
            tethers,
            self_topology: std::sync::OnceLock::new(),
            cap_halves: std::sync::OnceLock::new(),
            cap_system: std::sync::OnceLock::new(),
            #[cfg(test)]
            system: std::sync::OnceLock::new(),
            stats,
        }))
    }

    /// The same mesh, material and settings with another pin set (a refactorisation).
    pub fn with_pins(&self, pins: &[u32]) -> Result<Arc<Self>, ClothError> {
        Self::new(self.mesh.clone(), self.material, pins, self.settings)
    }

    /// The same mesh, material and pins with other settings (a new factorisation; shares nothing
    /// with this model).
    pub fn with_settings(&self, settings: SolverSettings) -> Result<Arc<Self>, ClothError> {
        Self::new(self.mesh.clone(), self.material, &self.pins, settings)
    }

    /// The mesh.
    pub fn mesh(&self) -> &Arc<ClothMesh> {
        &self.mesh
    }
    /// The material.
    pub fn material(&self) -> &Material {
        &self.material
    }
    /// The solver settings the matrix was factored for.
    pub fn settings(&self) -> &SolverSettings {
        &self.settings
    }
    /// Lumped node masses in kg.
    pub fn masses(&self) -> &[f64] {
        &self.masses
    }
    /// Pinned nodes, sorted.
    pub fn pins(&self) -> &[u32] {
        &self.pins
    }
    /// Each free node's tether: its nearest pin over the mesh and the rest geodesic distance
    /// to it (shared by every cloth of this model).
    pub fn tethers(&self) -> &crate::limits::Tethers {
        &self.tethers
    }
    /// Sizes and build cost.
    pub fn stats(&self) -> &ModelStats {
        &self.stats
    }

    /// The render mesh's triangles, edges and bounding volume hierarchy for self-collision,
    /// built from the initial shape the first time a cloth of this model collides with itself.
    pub(crate) fn self_topology(&self) -> &crate::self_contact::SelfTopology {
        self.self_topology.get_or_init(|| {
            crate::self_contact::SelfTopology::new(
                self.mesh.render_triangles(),
                self.mesh.initial_positions(),
            )
        })
    }

    /// The strain cap's half edges (built on first use; see [`crate::dynamics::strain_cap`]).
    pub(crate) fn cap_halves(&self) -> &crate::dynamics::strain_cap::HalfEdges {
        self.cap_halves.get_or_init(|| {
            crate::dynamics::strain_cap::HalfEdges::new(
                self.mesh.strain_edges(),
                self.mesh.node_count(),
            )
        })
    }

    /// The strain cap's constant matrix for its global pass, factored on first use; `None`
    /// where every node is pinned or the factorisation failed (the cap then runs its steps
    /// alone).
    pub(crate) fn cap_system(&self) -> Option<&crate::dynamics::strain_cap::CapSystem> {
        self.cap_system
            .get_or_init(|| {
                crate::dynamics::strain_cap::CapSystem::new(
                    self.cap_halves(),
                    &self.masses,
                    &self.free_nodes,
                )
                .ok()
                .flatten()
            })
            .as_ref()
    }

    /// The factored matrix `K` over the free nodes (free-node order), assembled again on first
    /// use and kept (the factor's tests compare against it).
    #[cfg(test)]
    pub(crate) fn system(&self) -> &CsrMatrix {
        self.system.get_or_init(|| {
            let mut unknown = vec![0u32; self.mesh.node_count()];
            for &p in &self.pins {
                unknown[p as usize] = PINNED;
            }
            for (fi, &node) in self.free_nodes.iter().enumerate() {
                unknown[node as usize] = fi as u32;
            }
            let ht = self.scheme().effective_step(self.settings.substep());
            assemble_system(&self.terms, &self.masses, &unknown, &self.free_nodes, ht).0
        })
    }

    /// The scheme every substep solves with (the factor's `h~`).
    pub(crate) fn scheme(&self) -> Scheme {
        scheme_of(self.settings.integrator)
    }
}

/// The system matrix over the free nodes, `K = M / h~^2 + S_FF` (rows in free-node order, with a
/// diagonal entry in every row), and the free-pinned coupling `S_FP`. `unknown` maps each node
/// to its free index or [`PINNED`].
fn assemble_system(
    terms: &Terms,
    masses: &[f64],
    unknown: &[u32],
    free_nodes: &[u32],
    ht: f64,
) -> (CsrMatrix, PinCoupling) {
    let n = unknown.len();
    // S = sum_c w_c A_c^T A_c over all nodes.
    let mut triplets = Vec::new();
    terms.add_to_matrix(&mut triplets);
    let stiffness = CsrMatrix::from_triplets(n, &mut triplets);
    drop(triplets);

    // Split into the free-free block (with a diagonal slot for the mass term) and the
    // free-pinned coupling. Free indices grow with node indices, so each row's columns stay
    // sorted; the diagonal slot is inserted in order if the row has none.
    let nf = free_nodes.len();
    let mut k = CsrMatrix {
        n: nf,
        row_ptr: Vec::with_capacity(nf + 1),
        cols: Vec::with_capacity(stiffness.nnz() + nf),
        vals: Vec::with_capacity(stiffness.nnz() + nf),
    };
    k.row_ptr.push(0);
    let mut coupling = PinCoupling {
        row_ptr: vec![0],
        ..Default::default()
    };
    for (fi, &node) in free_nodes.iter().enumerate() {
        let (cols, vals) = stiffness.row(node as usize);
        let mass = masses[node as usize] / (ht * ht);
        let mut diagonal = false;
        for (&c, &v) in cols.iter().zip(vals) {
            match unknown[c as usize] {
                PINNED => {
                    coupling.pins.push(c);
                    coupling.vals.push(v);
                }
                fj => {
                    if !diagonal && fj >= fi as u32 {
                        if fj > fi as u32 {
                            k.cols.push(fi as u32);
                            k.vals.push(mass);
                        }
                        diagonal = true;
                    }
                    k.cols.push(fj);
                    k.vals.push(if fj == fi as u32 { v + mass } else { v });
                }
            }
        }
        if !diagonal {
            k.cols.push(fi as u32);
            k.vals.push(mass);
        }
        k.row_ptr.push(k.cols.len() as u32);
        coupling.row_ptr.push(coupling.pins.len() as u32);
    }
    (k, coupling)
}

/// The scheme, and so the factored matrix, of an integrator: BDF2 runs every step as BDF2, its
/// first from a free-fall past (see [`crate::cloth`]).
fn scheme_of(integrator: Integrator) -> Scheme {
    match integrator {
        Integrator::BackwardEuler => Scheme::BackwardEuler,
        Integrator::Bdf2 => Scheme::Bdf2,
    }
}
