//! The cloth's energy terms in projective-dynamics form, `sum_c (w_c / 2) |A_c x - p_c|^2`.
//!
//! Every term acts on the three coordinates alike, so each `A_c` is a small *scalar* row block over
//! nodes and the system matrix is one scalar `n x n` matrix shared by x, y and z.
//!
//! * **isometry** (`RigidElements`): each red (middle) triangle's deformation gradient `F`
//!   (3x2) is projected onto the nearest rotation of its rest shape; weight `SolverWeights::isometry
//!   x rest area`.
//! * **conformity and boundary** (`LinearRows`): black node = mean of the corners its triangles
//!   extrapolate (Wang 2012, eq. 3.3); boundary triangles meeting at a vertex extrapolate the same
//!   corner (eq. 3.4). Linear with target 0, so they live entirely in the matrix.
//! * **bending** (`BendingRows`): quadratic Crouzeix-Raviart bending on interior base edges,
//!   `(k_b / 2) sum_i |(L x)_i - b_i|^2 / m_i`. Flat rows (`b_i = 0`) cost nothing per iteration;
//!   curved rows rotate their rest curvature vector into the current local frame (eq. 3.8).

use glam::{DVec2, DVec3};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{ClothError, non_negative, positive};
use crate::lanes::{self, LANES, Lanes, V3, each};
use crate::mesh::{ClothMesh, Discretization, NO_TRIANGLE};

/// Where the bending energy's rest curvature comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum BendingRest {
    /// Flat rest state: bending pulls towards a plane. Costs nothing per iteration.
    #[default]
    Flat,
    /// The curvature of the mesh's authored 3D positions (a pre-shaped collar, a curved cape).
    /// Rows where that curvature is negligible stay flat and free.
    Curved,
}

/// What a fabric is: its density and bending (the cloth's physics, whatever the budget). All
/// fields have documented defaults ([`Material::default`]).
///
/// How far a cloth may stretch is the strain cap's tolerance ([`crate::StrainCap::tolerance`]),
/// and the weights the solver converges with are the preset's ([`SolverWeights`], in
/// [`crate::SolverSettings::weights`]): a material file that still names `stretch_stiffness`,
/// `conformity_ratio` or `render_edge_stiffness` is refused with an error saying where they went.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "MaterialFile")]
pub struct Material {
    /// Surface density in kg/m^2. Default `0.2` (a medium cotton).
    pub density: f64,
    /// Bending stiffness `k_b` in N*m (joules). Default `1e-4`; silk is around `1e-6`, leather
    /// around `1e-2`.
    pub bending_stiffness: f64,
    /// Rest state of the bending energy. Default [`BendingRest::Flat`].
    pub bending_rest: BendingRest,
}

impl Default for Material {
    fn default() -> Self {
        Self {
            density: 0.2,
            bending_stiffness: 1e-4,
            bending_rest: BendingRest::Flat,
        }
    }
}

/// A material as files write it: the fields of [`Material`], and the three weights that were
/// material fields before they became the solver's, read only to be refused with a pointer to
/// their new place.
#[derive(Deserialize)]
#[serde(rename = "Material", default, deny_unknown_fields)]
struct MaterialFile {
    density: f64,
    bending_stiffness: f64,
    bending_rest: BendingRest,
    stretch_stiffness: Named,
    conformity_ratio: Named,
    render_edge_stiffness: Named,
}

/// Whether a file named a field, whatever value it gave it (the value is skipped).
#[derive(Default, Clone, Copy)]
struct Named(bool);

impl<'de> Deserialize<'de> for Named {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(Named(true))
    }
}

impl Default for MaterialFile {
    fn default() -> Self {
        let m = Material::default();
        Self {
            density: m.density,
            bending_stiffness: m.bending_stiffness,
            bending_rest: m.bending_rest,
            stretch_stiffness: Named(false),
            conformity_ratio: Named(false),
            render_edge_stiffness: Named(false),
        }
    }
}

impl TryFrom<MaterialFile> for Material {
    type Error = String;

    fn try_from(f: MaterialFile) -> Result<Self, String> {
        let moved = [
            ("stretch_stiffness", f.stretch_stiffness, "isometry"),
            ("conformity_ratio", f.conformity_ratio, "conformity_ratio"),
            (
                "render_edge_stiffness",
                f.render_edge_stiffness,
                "render_edge",
            ),
        ];
        if let Some((old, _, new)) = moved.iter().find(|(_, named, _)| named.0) {
            return Err(format!(
                "`{old}` is no longer a material setting: the solver's weights are the preset's, \
                 `weights: ({new}: ...)` in the budget preset (SolverWeights); how far the cloth \
                 may stretch is `strain_cap: (tolerance: ...)`"
            ));
        }
        Ok(Self {
            density: f.density,
            bending_stiffness: f.bending_stiffness,
            bending_rest: f.bending_rest,
        })
    }
}

impl Material {
    /// Checks every field for a finite, physically meaningful value.
    pub fn validate(&self) -> Result<(), ClothError> {
        positive("density", self.density)?;
        non_negative("bending_stiffness", self.bending_stiffness)
    }
}

/// The weights the local-global iterations converge with: a solver setting, chosen per budget
/// for motion, not a property of the fabric. All fields have documented defaults
/// ([`SolverWeights::default`], the shipped presets' weights, equal to [`SolverWeights::STIFF`]).
///
/// The converged cloth hardly depends on them (the converged runs at [`SolverWeights::SOFT`] and
/// at the stiff defaults move within 0.3-3.5 % of the cloth's size of each other on the repo's
/// banner, cape and tablecloth), but a budgeted run does: stiff weights converge slowly, and an
/// unconverged step acts as extra stiffness and damping (at the console's budget the banner
/// stands out in the wind, the tablecloth stays flat on its ball). Soft weights converge in the
/// budget and move like the converged stiff cloth, but stretch more where the strain cap cannot
/// undo it within its steps: a cape whose pins are jerked 15 cm in one frame ends at 87 %
/// strain at the soft weights against 3.0 % at the stiff ones (docs/lab/2026-12-02-weights.md).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SolverWeights {
    /// Isometry weight `W` in N/m: how hard each red triangle is pulled to its rest shape,
    /// times its rest area. Default `1e5`.
    pub isometry: f64,
    /// Weight of the linear conformity and boundary constraints, as a multiple of `isometry`.
    /// They are met by every global solve to within about `1 / conformity_ratio` of the
    /// isometry mismatch. Default `1e3`.
    pub conformity_ratio: f64,
    /// Stiffness in N/m of the render-edge term: soft rest-length springs on the black-to-red
    /// edges of the render mesh. They hold the rendered cloth together where red triangles
    /// twist against each other (mesh-scale crumples that weak bending lets through) and cost
    /// nothing to first order in smooth bending. Independent of `isometry`: raising the
    /// isometry weight must not stiffen the cloth (no locking). `0` turns them off. Default
    /// `3e4`.
    pub render_edge: f64,
}

impl Default for SolverWeights {
    fn default() -> Self {
        Self::STIFF
    }
}

impl SolverWeights {
    /// The stiff weights (isometry `1e5`, conformity `1e3` x, render edges `3e4`): the default,
    /// and the converged reference's (`presets/reference.ron`, 32 substeps x 20 iterations),
    /// the inextensible cloth every preset is measured against.
    pub const STIFF: SolverWeights = SolverWeights {
        isometry: 1e5,
        conformity_ratio: 1e3,
        render_edge: 3e4,
    };

    /// The soft weights (isometry `3e3`, conformity `1e3` x, render edges `1e3`): at the
    /// console's budget they move within 1.3-7.9 % of the converged stiff cloth where the stiff
    /// weights are 13-27 % off, but a whipped cape ends at 87 % strain (the cap cannot bring it
    /// back within its steps) and the running cape at 4.2 %. An opt-in until the strain cap
    /// holds them (docs/lab/2026-12-02-weights.md).
    pub const SOFT: SolverWeights = SolverWeights {
        isometry: 3e3,
        conformity_ratio: 1e3,
        render_edge: 1e3,
    };

    /// Checks every weight for a finite value in the range the factorisation supports.
    pub fn validate(&self) -> Result<(), ClothError> {
        positive("weights.isometry", self.isometry)?;
        positive("weights.conformity_ratio", self.conformity_ratio)?;
        non_negative("weights.render_edge", self.render_edge)?;
        // Beyond these the matrix's condition number leaves f64 (about 1e16) little to work with.
        if self.render_edge > 1e12 {
            return Err(ClothError::InvalidSetting {
                name: "weights.render_edge",
                reason: format!("at most 1e12 is supported, got {}", self.render_edge),
            });
        }
        if self.isometry > 1e12 || self.conformity_ratio > 1e8 {
            return Err(ClothError::InvalidSetting {
                name: "weights.isometry",
                reason: "isometry <= 1e12 and conformity_ratio <= 1e8 are supported".into(),
            });
        }
        Ok(())
    }
}

/// Below this many elements a local step runs on the calling thread: waking rayon's workers costs
/// more than projecting a few thousand triangles (measured: tens of microseconds per wake-up).
pub(crate) const PARALLEL_MIN_ELEMENTS: usize = 4096;

/// Runs `kernel(element, slot) -> energy` over every element (see [`for_each_block`]).
fn for_each_element<P: Send, const SUM: bool>(
    out: &mut [P],
    energy: &mut Vec<f64>,
    kernel: impl Fn(usize, &mut P) -> f64 + Sync,
) -> f64 {
    let block = |e0: usize, p: &mut [P]| each(|l| kernel(e0 + l, &mut p[l]));
    for_each_block::<P, SUM>(out, energy, block, &kernel)
}

/// Runs `block(first, slots) -> energies` over every run of [`LANES`] consecutive elements
/// (`slots` exactly `LANES` long) and `kernel(element, slot) -> energy` over the few left at the
/// end of each chunk of 64, and returns the energies' sum, formed in element order: on the
/// calling thread below [`PARALLEL_MIN_ELEMENTS`] (a chunk's kernels first, then its energies
/// summed in order, so that the sum's chain of additions stays out of the kernels' loop), else
/// in parallel into `energy` (sized here; small models never touch it) and summed after. Each
/// element writes only its own slot, so the result does not depend on the thread count, and it
/// is the same bit for bit whether an element went through `block` or `kernel` when their
/// energies are.
///
/// Without `SUM` the energies are neither summed nor kept (the right-hand-side form of
/// local-global needs none; summing them as it goes cost its frame 2-3 %) and 0 is returned.
fn for_each_block<P: Send, const SUM: bool>(
    out: &mut [P],
    energy: &mut Vec<f64>,
    block: impl Fn(usize, &mut [P]) -> Lanes + Sync,
    kernel: impl Fn(usize, &mut P) -> f64 + Sync,
) -> f64 {
    // Elements `first..` of `chunk` (at most 64) into `en`.
    let run = |first: usize, chunk: &mut [P], en: &mut [f64]| {
        let mut k = 0;
        for b in chunk.chunks_exact_mut(LANES) {
            en[k..k + LANES].copy_from_slice(&block(first + k, b));
            k += LANES;
        }
        for (j, p) in chunk[k..].iter_mut().enumerate() {
            en[k + j] = kernel(first + k + j, p);
        }
    };
    const CHUNK: usize = 64;
    if out.len() < PARALLEL_MIN_ELEMENTS {
        let mut sum = 0.0;
        let mut en = [0.0f64; CHUNK];
        for (c, chunk) in out.chunks_mut(CHUNK).enumerate() {
            run(CHUNK * c, chunk, &mut en);
            if SUM {
                for &e in &en[..chunk.len()] {
                    sum += e;
                }
            }
        }
        return sum;
    }
    if !SUM {
        out.par_chunks_mut(CHUNK)
            .enumerate()
            .with_min_len(PARALLEL_MIN_ELEMENTS / 2 / CHUNK)
            .for_each(|(c, chunk)| run(CHUNK * c, chunk, &mut [0.0; CHUNK]));
        return 0.0;
    }
    energy.resize(out.len(), 0.0);
    out.par_chunks_mut(CHUNK)
        .zip(energy.par_chunks_mut(CHUNK))
        .enumerate()
        .with_min_len(PARALLEL_MIN_ELEMENTS / 2 / CHUNK)
        .for_each(|(c, (chunk, en))| run(CHUNK * c, chunk, en));
    energy.iter().sum()
}

/// Rigid (isometry) elements: one per red triangle.
#[derive(Debug, Clone)]
pub(crate) struct RigidElements {
    /// The three nodes.
    pub nodes: Vec<[u32; 3]>,
    /// Gradient operator: `F = sum_j x_j grad[j]^T` (3x2).
    pub grad: Vec<[DVec2; 3]>,
    /// `SolverWeights::isometry x rest area`.
    pub weight: Vec<f64>,
    /// Rest edge lengths `[|x1-x0|, |x2-x1|, |x0-x2|]` for the isometry residual.
    pub rest_lengths: Vec<[f64; 3]>,
}

/// Rest-length springs on render edges (black node to red node).
#[derive(Debug, Clone, Default)]
pub(crate) struct SpringElements {
    pub nodes: Vec<[u32; 2]>,
    pub rest: Vec<f64>,
    /// `SolverWeights::render_edge x (area served) / rest^2`.
    pub weight: Vec<f64>,
}

/// Sparse rows `sum_j c_j x_j` stored CSR-style, each with a weight.
#[derive(Debug, Clone, Default)]
pub(crate) struct SparseRows {
    pub offsets: Vec<u32>,
    pub nodes: Vec<u32>,
    pub coefs: Vec<f64>,
    pub weight: Vec<f64>,
    /// The number of entries every row has, or 0 when the rows differ (or there are none).
    width: usize,
}

impl SparseRows {
    fn new() -> Self {
        Self {
            offsets: vec![0],
            ..Self::default()
        }
    }
    fn push(&mut self, entries: &[(u32, f64)], weight: f64) {
        // Merge repeated nodes so each row lists a node once.
        let start = self.nodes.len();
        for &(n, c) in entries {
            match self.nodes[start..].iter().position(|&m| m == n) {
                Some(k) => self.coefs[start + k] += c,
                None => {
                    self.nodes.push(n);
                    self.coefs.push(c);
                }
            }
        }
        let width = self.nodes.len() - start;
        self.width = match self.weight.is_empty() {
            true => width,
            false if self.width == width => width,
            false => 0,
        };
        self.offsets.push(self.nodes.len() as u32);
        self.weight.push(weight);
    }
    pub fn len(&self) -> usize {
        self.weight.len()
    }
    pub fn row(&self, r: usize) -> (&[u32], &[f64]) {
        let range = self.offsets[r] as usize..self.offsets[r + 1] as usize;
        (&self.nodes[range.clone()], &self.coefs[range])
    }
    /// `sum_j c_j x_j` for row `r`.
    pub fn apply(&self, r: usize, x: &[DVec3]) -> DVec3 {
        let (nodes, coefs) = self.row(r);
        nodes
            .iter()
            .zip(coefs)
            .map(|(&n, &c)| c * x[n as usize])
            .sum()
    }

    /// `e + (1/2) sum_r w_r |row_r . x|^2` over the rows `keep` selects (summed in row order
    /// onto `e`), adding each row's gradient `w_r row_r^T (row_r . x)` to `grad`, row by row.
    ///
    /// Rows of one width (every bending row of a red/black mesh has five entries) run through
    /// a kernel of that fixed width: no offsets read and no loop over a row's entries (the
    /// same operations in the same order, so the same result to the bit).
    fn quadratic_gradient(
        &self,
        mut e: f64,
        x: &[DVec3],
        grad: &mut [DVec3],
        keep: impl Fn(usize) -> bool,
    ) -> f64 {
        match self.width {
            5 => self.fixed_width::<5>(e, x, grad, keep),
            _ => {
                let ends = self.offsets.windows(2);
                for (r, (end, &w)) in ends.zip(&self.weight).enumerate() {
                    if keep(r) {
                        let range = end[0] as usize..end[1] as usize;
                        let (nodes, coefs) = (&self.nodes[range.clone()], &self.coefs[range]);
                        // A conformity row of a black node with six base triangles round it
                        // has thirteen entries: most rows of a red/black mesh.
                        e += match (nodes.as_array::<13>(), coefs.as_array::<13>()) {
                            (Some(n), Some(c)) => quadratic_row((n, c), w, x, grad),
                            _ => quadratic_row((nodes, coefs), w, x, grad),
                        };
                    }
                }
                e
            }
        }
    }

    fn fixed_width<const N: usize>(
        &self,
        mut e: f64,
        x: &[DVec3],
        grad: &mut [DVec3],
        keep: impl Fn(usize) -> bool,
    ) -> f64 {
        let (nodes, _) = self.nodes.as_chunks::<N>();
        let (coefs, _) = self.coefs.as_chunks::<N>();
        for (r, ((nodes, coefs), &w)) in nodes.iter().zip(coefs).zip(&self.weight).enumerate() {
            if keep(r) {
                e += quadratic_row((nodes, coefs), w, x, grad);
            }
        }
        e
    }
}

/// One row of [`SparseRows::quadratic_gradient`]: `(1/2) w |v|^2` for `v = sum_j c_j x_j`,
/// adding `c_j w v` to `grad` at each node `j`.
#[inline(always)]
fn quadratic_row((nodes, coefs): (&[u32], &[f64]), w: f64, x: &[DVec3], grad: &mut [DVec3]) -> f64 {
    let mut v = DVec3::ZERO;
    for (&n, &c) in nodes.iter().zip(coefs) {
        v += c * x[n as usize];
    }
    let wv = w * v;
    for (&n, &c) in nodes.iter().zip(coefs) {
        grad[n as usize] += c * wv;
    }
    0.5 * w * v.length_squared()
}

/// Linear constraints with target zero: conformity rows then boundary rows.
pub(crate) type LinearRows = SparseRows;

/// A curved bending row: its rest curvature vector in the rest local frame, and how to build the
/// frame (two triangles for the normal, a node pair for the tangent).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CurvedRow {
    pub row: u32,
    pub rest_local: DVec3,
    pub tri_a: [u32; 3],
    pub tri_b: [u32; 3],
    pub tangent: [u32; 2],
}

/// Bending rows `(L x)_i` with weight `k_b / m_i`, and the curved subset.
#[derive(Debug, Clone)]
pub(crate) struct BendingRows {
    pub rows: SparseRows,
    pub curved: Vec<CurvedRow>,
}

impl BendingRows {
    /// Whether row `r` has a rest curvature target.
    fn is_curved(&self, r: usize) -> bool {
        self.curved
            .binary_search_by_key(&(r as u32), |c| c.row)
            .is_ok()
    }
}

/// All energy terms of one cloth model.
#[derive(Debug, Clone)]
pub(crate) struct Terms {
    pub rigid: RigidElements,
    pub springs: SpringElements,
    pub linear: LinearRows,
    pub bending: BendingRows,
}

impl Terms {
    pub fn new(mesh: &ClothMesh, material: &Material, weights: &SolverWeights) -> Self {
        let rigid = rigid_elements(mesh, weights.isometry);
        let springs = render_springs(mesh, weights.render_edge);
        let linear = linear_rows(mesh, weights.isometry * weights.conformity_ratio);
        let bending = bending_rows(mesh, material);
        let mut terms = Self {
            rigid,
            springs,
            linear,
            bending,
        };
        terms.shrink_to_fit();
        terms
    }

    /// Gives back the spare capacity the builders left (a model lives as long as its cloths).
    fn shrink_to_fit(&mut self) {
        let r = &mut self.rigid;
        r.nodes.shrink_to_fit();
        r.grad.shrink_to_fit();
        r.weight.shrink_to_fit();
        r.rest_lengths.shrink_to_fit();
        let s = &mut self.springs;
        s.nodes.shrink_to_fit();
        s.rest.shrink_to_fit();
        s.weight.shrink_to_fit();
        for rows in [&mut self.linear, &mut self.bending.rows] {
            rows.offsets.shrink_to_fit();
            rows.nodes.shrink_to_fit();
            rows.coefs.shrink_to_fit();
            rows.weight.shrink_to_fit();
        }
        self.bending.curved.shrink_to_fit();
    }

    /// Adds `sum_c w_c A_c^T A_c` to `triplets` (both triangles of the symmetric matrix).
    pub fn add_to_matrix(&self, triplets: &mut Vec<(u32, u32, f64)>) {
        let r = &self.rigid;
        for e in 0..r.nodes.len() {
            for a in 0..3 {
                for b in 0..3 {
                    let v = r.weight[e] * r.grad[e][a].dot(r.grad[e][b]);
                    triplets.push((r.nodes[e][a], r.nodes[e][b], v));
                }
            }
        }
        let sp = &self.springs;
        for (&[a, b], &w) in sp.nodes.iter().zip(&sp.weight) {
            triplets.extend([(a, a, w), (b, b, w), (a, b, -w), (b, a, -w)]);
        }
        for rows in [&self.linear, &self.bending.rows] {
            for row in 0..rows.len() {
                let (nodes, coefs) = rows.row(row);
                let w = rows.weight[row];
                for (i, &a) in nodes.iter().enumerate() {
                    for (j, &b) in nodes.iter().enumerate() {
                        triplets.push((a, b, w * coefs[i] * coefs[j]));
                    }
                }
            }
        }
    }

    /// Local step for isometry: projects every red triangle onto its nearest rotation, writing the
    /// two columns of `R` to `proj`. Parallel on large models. The energy is not computed (the
    /// right-hand-side form needs none): see [`Self::rigid_residuals`], which returns it.
    pub fn project_rigid(&self, x: &[DVec3], proj: &mut [[DVec3; 2]]) {
        self.rigid_kernel::<false>(x, proj, &mut Vec::new());
    }

    /// The same projections, writing the residuals `F - R` instead of `R`: scattered with
    /// [`Self::scatter_rigid`] they give the gradient `sum_e w_e A_e^T (A_e x - R_e)`.
    pub fn rigid_residuals(
        &self,
        x: &[DVec3],
        res: &mut [[DVec3; 2]],
        energy: &mut Vec<f64>,
    ) -> f64 {
        self.rigid_kernel::<true>(x, res, energy)
    }

    fn rigid_kernel<const RESIDUAL: bool>(
        &self,
        x: &[DVec3],
        out: &mut [[DVec3; 2]],
        energy: &mut Vec<f64>,
    ) -> f64 {
        let r = &self.rigid;
        let kernel = |e: usize, p: &mut [DVec3; 2]| {
            let f = deformation_gradient(&r.nodes[e], &r.grad[e], x);
            let rot = nearest_rotation(f);
            let d = [f[0] - rot[0], f[1] - rot[1]];
            *p = if RESIDUAL { d } else { rot };
            0.5 * r.weight[e] * (d[0].length_squared() + d[1].length_squared())
        };
        // The same four elements at a time (bit-identical; see `lanes`).
        let block = |e0: usize, p: &mut [[DVec3; 2]]| -> Lanes {
            let node = |l: usize, k: usize| x[r.nodes[e0 + l][k] as usize];
            let (x0, x1, x2) = (
                V3::gather(|l| node(l, 0)),
                V3::gather(|l| node(l, 1)),
                V3::gather(|l| node(l, 2)),
            );
            let g = &r.grad[e0..e0 + LANES];
            // F's columns: sum_j grad[j].{x,y} x_j, summed as `deformation_gradient` sums.
            let column = |c: fn(&DVec2) -> f64| {
                let w = |k: usize| each(|l| c(&g[l][k]));
                let (w0, w1, w2) = (w(0), w(1), w(2));
                V3 {
                    x: each(|l| w0[l] * x0.x[l] + w1[l] * x1.x[l] + w2[l] * x2.x[l]),
                    y: each(|l| w0[l] * x0.y[l] + w1[l] * x1.y[l] + w2[l] * x2.y[l]),
                    z: each(|l| w0[l] * x0.z[l] + w1[l] * x1.z[l] + w2[l] * x2.z[l]),
                }
            };
            let (fa, fb) = (column(|g| g.x), column(|g| g.y));
            let ([r0, r1], ok) = lanes::nearest_rotation(&fa, &fb);
            let (d0, d1) = (fa.sub(&r0), fb.sub(&r1));
            let (s0, s1) = (d0.dot(&d0), d1.dot(&d1));
            let mut en = each(|l| 0.5 * r.weight[e0 + l] * (s0[l] + s1[l]));
            for l in 0..LANES {
                if ok[l] {
                    p[l] = if RESIDUAL {
                        [d0.lane(l), d1.lane(l)]
                    } else {
                        [r0.lane(l), r1.lane(l)]
                    };
                } else {
                    en[l] = kernel(e0 + l, &mut p[l]);
                }
            }
            en
        };
        for_each_block::<_, RESIDUAL>(out, energy, block, kernel)
    }

    /// Adds `sum_e w_e A_e^T p_e` for the isometry projections to `rhs`.
    pub fn scatter_rigid(&self, proj: &[[DVec3; 2]], rhs: &mut [DVec3]) {
        let r = &self.rigid;
        for e in 0..r.nodes.len() {
            let w = r.weight[e];
            for a in 0..3 {
                let g = r.grad[e][a];
                rhs[r.nodes[e][a] as usize] += w * (g.x * proj[e][0] + g.y * proj[e][1]);
            }
        }
    }

    /// Local step for render-edge springs: the edge vector `x_a - x_b` scaled to its rest length.
    /// Parallel like [`Self::project_rigid`].
    pub fn project_springs(&self, x: &[DVec3], proj: &mut [DVec3]) {
        self.spring_kernel::<false>(x, proj, &mut Vec::new());
    }

    /// The same, writing the residual `(x_a - x_b) - p` (the gradient's part, like
    /// [`Self::rigid_residuals`]).
    pub fn spring_residuals(&self, x: &[DVec3], res: &mut [DVec3], energy: &mut Vec<f64>) -> f64 {
        self.spring_kernel::<true>(x, res, energy)
    }

    fn spring_kernel<const RESIDUAL: bool>(
        &self,
        x: &[DVec3],
        out: &mut [DVec3],
        energy: &mut Vec<f64>,
    ) -> f64 {
        let sp = &self.springs;
        let kernel = |e: usize, p: &mut DVec3| {
            let [a, b] = sp.nodes[e];
            let d = x[a as usize] - x[b as usize];
            let len = d.length();
            let dir = if len > 1e-300 { d / len } else { DVec3::X };
            let target = dir * sp.rest[e];
            *p = if RESIDUAL { d - target } else { target };
            0.5 * sp.weight[e] * (len - sp.rest[e]) * (len - sp.rest[e])
        };
        // The same four springs at a time (bit-identical; see `lanes`).
        let block = |e0: usize, p: &mut [DVec3]| -> Lanes {
            let end = |k: usize| V3::gather(|l| x[sp.nodes[e0 + l][k] as usize]);
            let d = end(0).sub(&end(1));
            let dd = d.dot(&d);
            let len = each(|l| dd[l].sqrt());
            let rest = each(|l| sp.rest[e0 + l]);
            let dir = d.div(&len);
            let target = dir.scale(&rest);
            let out = if RESIDUAL { d.sub(&target) } else { target };
            let mut en =
                each(|l| 0.5 * sp.weight[e0 + l] * (len[l] - rest[l]) * (len[l] - rest[l]));
            for l in 0..LANES {
                if len[l] > 1e-300 {
                    p[l] = out.lane(l);
                } else {
                    en[l] = kernel(e0 + l, &mut p[l]);
                }
            }
            en
        };
        for_each_block::<_, RESIDUAL>(out, energy, block, kernel)
    }

    /// Adds `sum_e w_e A_e^T p_e` for the spring projections to `rhs`.
    pub fn scatter_springs(&self, proj: &[DVec3], rhs: &mut [DVec3]) {
        let sp = &self.springs;
        for ((&[a, b], &w), &p) in sp.nodes.iter().zip(&sp.weight).zip(proj) {
            rhs[a as usize] += w * p;
            rhs[b as usize] -= w * p;
        }
    }

    /// Local step for curved bending rows: the rest curvature rotated into the current frame.
    pub fn project_curved(&self, x: &[DVec3], targets: &mut [DVec3]) {
        self.curved_kernel::<false>(x, targets, &mut Vec::new());
    }

    /// The same, writing the residual `L_i x - b_i` (the gradient's part, like
    /// [`Self::rigid_residuals`]).
    pub fn curved_residuals(&self, x: &[DVec3], res: &mut [DVec3], energy: &mut Vec<f64>) -> f64 {
        self.curved_kernel::<true>(x, res, energy)
    }

    fn curved_kernel<const RESIDUAL: bool>(
        &self,
        x: &[DVec3],
        out: &mut [DVec3],
        energy: &mut Vec<f64>,
    ) -> f64 {
        let b = &self.bending;
        let kernel = |k: usize, t: &mut DVec3| {
            let c = &b.curved[k];
            let frame = local_frame(c, x);
            let target =
                frame[0] * c.rest_local.x + frame[1] * c.rest_local.y + frame[2] * c.rest_local.z;
            let lx = b.rows.apply(c.row as usize, x);
            *t = if RESIDUAL { lx - target } else { target };
            0.5 * b.rows.weight[c.row as usize] * (lx - target).length_squared()
        };
        for_each_element::<_, RESIDUAL>(out, energy, kernel)
    }

    /// Adds `sum_i w_i L_i^T b_i` for the curved bending targets to `rhs`.
    pub fn scatter_curved(&self, targets: &[DVec3], rhs: &mut [DVec3]) {
        let b = &self.bending;
        for (c, &t) in b.curved.iter().zip(targets) {
            let row = c.row as usize;
            let w = b.rows.weight[row];
            let (nodes, coefs) = b.rows.row(row);
            for (&n, &coef) in nodes.iter().zip(coefs) {
                rhs[n as usize] += (w * coef) * t;
            }
        }
    }

    /// Energy of the terms that need no projection (linear rows and flat bending rows),
    /// `(1/2) sum w |row . x|^2`, adding its gradient `sum w row^T (row . x)` to `grad`.
    pub fn quadratic_gradient(&self, x: &[DVec3], grad: &mut [DVec3]) -> f64 {
        let b = &self.bending;
        let e = self.linear.quadratic_gradient(0.0, x, grad, |_| true);
        match b.curved.is_empty() {
            true => b.rows.quadratic_gradient(e, x, grad, |_| true),
            false => b.rows.quadratic_gradient(e, x, grad, |r| !b.is_curved(r)),
        }
    }

    /// Bending energy `(1/2) sum_i w_i |L_i x - b_i|^2` (b_i from the current frame for curved rows).
    pub fn bending_energy(&self, x: &[DVec3]) -> f64 {
        let b = &self.bending;
        let mut target = vec![DVec3::ZERO; b.rows.len()];
        for c in &b.curved {
            let frame = local_frame(c, x);
            target[c.row as usize] =
                frame[0] * c.rest_local.x + frame[1] * c.rest_local.y + frame[2] * c.rest_local.z;
        }
        (0..b.rows.len())
            .map(|r| 0.5 * b.rows.weight[r] * (b.rows.apply(r, x) - target[r]).length_squared())
            .sum()
    }
}

/// `F = sum_j x_j g_j^T` as its two columns.
#[inline]
pub(crate) fn deformation_gradient(nodes: &[u32; 3], grad: &[DVec2; 3], x: &[DVec3]) -> [DVec3; 2] {
    let (x0, x1, x2) = (
        x[nodes[0] as usize],
        x[nodes[1] as usize],
        x[nodes[2] as usize],
    );
    [
        grad[0].x * x0 + grad[1].x * x1 + grad[2].x * x2,
        grad[0].y * x0 + grad[1].y * x1 + grad[2].y * x2,
    ]
}

/// The 3x2 matrix with orthonormal columns nearest (Frobenius) to `f`: the rotational part of its
/// polar decomposition. Works in the plane of `f`'s columns, where it is a closed-form 2x2 polar
/// decomposition; robust to collapsed triangles.
#[inline]
pub(crate) fn nearest_rotation(f: [DVec3; 2]) -> [DVec3; 2] {
    let [a, b] = f;
    let la = a.length();
    let u = if la > 1e-300 { a / la } else { DVec3::X };
    let n = u.cross(b);
    let ln = n.length();
    let v = if ln > 1e-12 * b.length().max(1e-300) {
        n.cross(u) / ln
    } else {
        u.any_orthonormal_vector()
    };
    // F in the (u, v) basis: [[la, u.b], [0, v.b]]; nearest rotation angle atan2(0 - u.b, la + v.b).
    let (p, q) = (la + v.dot(b), -u.dot(b));
    let h = (p * p + q * q).sqrt();
    let (c, s) = if h > 1e-300 {
        (p / h, q / h)
    } else {
        (1.0, 0.0)
    };
    [c * u + s * v, c * v - s * u]
}

/// Orthonormal frame `[t, n x t, n]` for a curved bending row (columns).
fn local_frame(c: &CurvedRow, x: &[DVec3]) -> [DVec3; 3] {
    let normal = |t: &[u32; 3]| {
        let [a, b, d] = t.map(|i| x[i as usize]);
        (b - a).cross(d - a)
    };
    let n = (normal(&c.tri_a).normalize_or_zero() + normal(&c.tri_b).normalize_or_zero())
        .normalize_or(DVec3::Z);
    let t0 = x[c.tangent[1] as usize] - x[c.tangent[0] as usize];
    let t = (t0 - n * n.dot(t0)).normalize_or(n.any_orthonormal_vector());
    [t, n.cross(t), n]
}

fn rigid_elements(mesh: &ClothMesh, stretch: f64) -> RigidElements {
    let metric = mesh.metric_positions();
    let tris = mesh.rigid_triangles();
    let mut out = RigidElements {
        nodes: Vec::with_capacity(tris.len()),
        grad: Vec::with_capacity(tris.len()),
        weight: Vec::with_capacity(tris.len()),
        rest_lengths: Vec::with_capacity(tris.len()),
    };
    for tri in tris {
        let [x0, x1, x2] = tri.map(|i| metric[i as usize]);
        let (e1, e2) = (x1 - x0, x2 - x0);
        let u = e1.normalize();
        let v = e1.cross(e2).cross(e1).normalize();
        // Dm = [[u.e1, u.e2], [v.e1, v.e2]] (rest edges in the triangle's own 2D frame).
        let (m00, m01, m10, m11) = (u.dot(e1), u.dot(e2), v.dot(e1), v.dot(e2));
        let det = m00 * m11 - m01 * m10;
        // Rows of Dm^-1 give the gradient weights of x1 and x2.
        let g1 = DVec2::new(m11, -m01) / det;
        let g2 = DVec2::new(-m10, m00) / det;
        let area = 0.5 * det.abs();
        out.nodes.push(*tri);
        out.grad.push([-(g1 + g2), g1, g2]);
        out.weight.push(stretch * area);
        out.rest_lengths
            .push([x0.distance(x1), x1.distance(x2), x2.distance(x0)]);
    }
    out
}

/// Springs on the two halves of every base edge (black-red render edges). Each base triangle's
/// area is shared among its six half-edges. Empty on a plain mesh or with zero weight.
fn render_springs(mesh: &ClothMesh, stiffness: f64) -> SpringElements {
    let mut out = SpringElements::default();
    if mesh.discretization() != Discretization::RedBlack || stiffness == 0.0 {
        return out;
    }
    let areas = mesh.base_areas();
    let nv = mesh.base_vertex_count() as u32;
    for (e, (&[a, b], ts)) in mesh.edges().iter().zip(mesh.edge_triangles()).enumerate() {
        let area: f64 = ts
            .iter()
            .filter(|&&t| t != NO_TRIANGLE)
            .map(|&t| areas[t as usize] / 6.0)
            .sum();
        let half = 0.5 * mesh.strain_edges()[e].rest_length;
        let red = nv + e as u32;
        for black in [a, b] {
            out.nodes.push([black, red]);
            out.rest.push(half);
            out.weight.push(stiffness * area / (half * half));
        }
    }
    out
}

/// Conformity rows for every black node, then boundary rows. Empty on a plain mesh.
fn linear_rows(mesh: &ClothMesh, weight: f64) -> LinearRows {
    let mut rows = SparseRows::new();
    if mesh.discretization() != Discretization::RedBlack {
        return rows;
    }
    let nv = mesh.base_vertex_count();
    let tris = mesh.base_triangles();
    let tedges = mesh.triangle_edges();
    // Corner of base triangle t at vertex v, extrapolated from its red nodes:
    // x_a + x_b - x_c with a, b the reds on the edges at v and c the red opposite.
    let corner = |t: u32, v: u32, scale: f64, out: &mut Vec<(u32, f64)>| {
        let tri = tris[t as usize];
        let k = tri.iter().position(|&x| x == v).unwrap_or(0);
        let red = |local: usize| nv as u32 + tedges[t as usize][local];
        // Local edge k joins corners k, k+1; local edge k+2 joins k+2, k; k+1 is opposite.
        out.push((red(k), scale));
        out.push((red((k + 2) % 3), scale));
        out.push((red((k + 1) % 3), -scale));
    };
    let mut entries = Vec::new();
    for v in 0..nv {
        let fan = mesh.fan(v);
        entries.clear();
        entries.push((v as u32, 1.0));
        let s = 1.0 / fan.len() as f64;
        for &t in fan {
            corner(t, v as u32, -s, &mut entries);
        }
        rows.push(&entries, weight);
    }
    for v in 0..nv {
        let fan = mesh.fan(v);
        if mesh.is_boundary_vertex(v) && fan.len() >= 2 {
            entries.clear();
            corner(fan[0], v as u32, 1.0, &mut entries);
            corner(fan[fan.len() - 1], v as u32, -1.0, &mut entries);
            rows.push(&entries, weight);
        }
    }
    rows
}

/// Cotangent of the angle at `at` in triangle (at, p, q).
fn cot(at: DVec3, p: DVec3, q: DVec3) -> f64 {
    let (u, v) = (p - at, q - at);
    u.dot(v) / u.cross(v).length()
}

fn bending_rows(mesh: &ClothMesh, material: &Material) -> BendingRows {
    let metric = mesh.metric_positions();
    let tris = mesh.base_triangles();
    let areas = mesh.base_areas();
    let kb = material.bending_stiffness;
    let mut rows = SparseRows::new();
    let mut curved = Vec::new();
    let mut entries = Vec::new();
    match mesh.discretization() {
        Discretization::RedBlack => {
            let nv = mesh.base_vertex_count() as u32;
            let tedges = mesh.triangle_edges();
            let initial = mesh.initial_positions();
            for (e, ts) in mesh.edge_triangles().iter().enumerate() {
                if ts[1] == NO_TRIANGLE {
                    continue;
                }
                entries.clear();
                // Crouzeix-Raviart: for edges i, j of a triangle meeting at a corner with angle
                // theta, L_ij = -2 cot(theta); the diagonal makes the row sum to zero.
                for &t in ts {
                    let [a, b, c] = tris[t as usize].map(|i| metric[i as usize]);
                    let te = tedges[t as usize];
                    let k = te.iter().position(|&x| x as usize == e).unwrap_or(0);
                    // Local edge k meets edge k+1 at corner k+1 and edge k+2 at corner k.
                    let corners = [a, b, c];
                    let angle_cot = |corner: usize| {
                        let (p, q) = (corners[(corner + 1) % 3], corners[(corner + 2) % 3]);
                        cot(corners[corner], p, q)
                    };
                    let w_next = -2.0 * angle_cot((k + 1) % 3);
                    let w_prev = -2.0 * angle_cot(k);
                    entries.push((nv + te[(k + 1) % 3], w_next));
                    entries.push((nv + te[(k + 2) % 3], w_prev));
                    entries.push((nv + e as u32, -(w_next + w_prev)));
                }
                let m = (areas[ts[0] as usize] + areas[ts[1] as usize]) / 3.0;
                let row = rows.len() as u32;
                rows.push(&entries, kb / m);
                if material.bending_rest == BendingRest::Curved && kb > 0.0 {
                    let rest = rows.apply(row as usize, initial);
                    let scale = metric[tris[ts[0] as usize][0] as usize]
                        .distance(metric[tris[ts[0] as usize][1] as usize]);
                    if rest.length() > 1e-9 * scale {
                        let mid = |t: u32| tedges[t as usize].map(|e| nv + e);
                        let k = tedges[ts[0] as usize]
                            .iter()
                            .position(|&x| x as usize == e)
                            .unwrap_or(0);
                        // The red-red edge of the middle triangle opposite this edge's red node
                        // runs parallel to the base edge: r_(k+1) - r_(k+2) = (x_(k+1) - x_k) / 2.
                        let m0 = mid(ts[0]);
                        let mut c = CurvedRow {
                            row,
                            rest_local: DVec3::ZERO,
                            tri_a: m0,
                            tri_b: mid(ts[1]),
                            tangent: [m0[(k + 2) % 3], m0[(k + 1) % 3]],
                        };
                        let f = local_frame(&c, initial);
                        c.rest_local = DVec3::new(f[0].dot(rest), f[1].dot(rest), f[2].dot(rest));
                        curved.push(c);
                    }
                }
            }
        }
        Discretization::Plain => {
            // Conforming cotangent Laplacian on interior vertices (flat rest only).
            let nv = mesh.base_vertex_count();
            for v in 0..nv {
                if mesh.is_boundary_vertex(v) {
                    continue;
                }
                entries.clear();
                let mut m = 0.0;
                for &t in mesh.fan(v) {
                    let tri = tris[t as usize];
                    let k = tri.iter().position(|&x| x as usize == v).unwrap_or(0);
                    let (p, q) = (tri[(k + 1) % 3], tri[(k + 2) % 3]);
                    let [xv, xp, xq] = [v as u32, p, q].map(|i| metric[i as usize]);
                    // Edge v-p is opposite corner q, edge v-q opposite corner p.
                    let wp = -0.5 * cot(xq, xv, xp);
                    let wq = -0.5 * cot(xp, xq, xv);
                    entries.push((p, wp));
                    entries.push((q, wq));
                    entries.push((v as u32, -(wp + wq)));
                    m += areas[t as usize] / 3.0;
                }
                rows.push(&entries, kb / m);
            }
        }
    }
    BendingRows { rows, curved }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nearest rotation of a rotation is itself, and of a scaled rotation the rotation, to 1e-12.
    #[test]
    fn nearest_rotation_recovers_rotation_of_stretched_frame() {
        let q = glam::DQuat::from_euler(glam::EulerRot::XYZ, 0.3, -1.1, 2.0);
        let r = [q * DVec3::X, q * DVec3::Y];
        let got = nearest_rotation([1.7 * r[0], 0.4 * r[1]]);
        assert!((got[0] - r[0]).length() < 1e-12 && (got[1] - r[1]).length() < 1e-12);
        let collapsed = nearest_rotation([DVec3::X, DVec3::X]);
        assert!((collapsed[0].length() - 1.0).abs() < 1e-12);
        assert!(collapsed[0].dot(collapsed[1]).abs() < 1e-12);
    }

    /// The quadratic rows' fixed-width kernels (rows of five and of thirteen entries) give the
    /// general kernel's energy and gradient to the bit, rows mixed with other widths and rows
    /// skipped included: they run the same operations in the same order.
    #[test]
    fn quadratic_rows_of_fixed_width_match_the_general_kernel() {
        let x: Vec<DVec3> = (0..40)
            .map(|i| {
                let t = i as f64;
                DVec3::new((0.7 * t).sin(), (1.3 * t).cos(), 0.1 * t)
            })
            .collect();
        let row = |first: u32, width: u32| -> Vec<(u32, f64)> {
            (0..width)
                .map(|k| {
                    (
                        (first + 7 * k) % 40,
                        0.3 + 0.1 * k as f64 - 0.05 * first as f64,
                    )
                })
                .collect()
        };
        for widths in [vec![5u32; 9], vec![13, 13, 4, 13, 7, 13, 13]] {
            let mut rows = SparseRows::new();
            for (r, &w) in widths.iter().enumerate() {
                rows.push(&row(r as u32, w), 1.0 + r as f64);
            }
            let keep = |r: usize| r != 2;
            let (mut g_fixed, mut g_general) = (vec![DVec3::ONE; 40], vec![DVec3::ONE; 40]);
            let e_fixed = rows.quadratic_gradient(0.25, &x, &mut g_fixed, keep);
            // The row loop as written before the fixed-width kernels.
            let mut e_general = 0.25;
            for r in (0..rows.len()).filter(|&r| keep(r)) {
                let (nodes, coefs) = rows.row(r);
                let mut v = DVec3::ZERO;
                for (&n, &c) in nodes.iter().zip(coefs) {
                    v += c * x[n as usize];
                }
                let w = rows.weight[r];
                e_general += 0.5 * w * v.length_squared();
                for (&n, &c) in nodes.iter().zip(coefs) {
                    g_general[n as usize] += c * (w * v);
                }
            }
            assert_eq!(e_fixed.to_bits(), e_general.to_bits());
            assert_eq!(g_fixed, g_general);
        }
    }
}
