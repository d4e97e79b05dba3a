//! Base meshes and their red/black subdivision.
//!
//! A [`BaseMesh`] is what an artist authors: vertices, triangles and optionally 2D pattern
//! coordinates that define the rest shape. [`ClothMesh::new`] validates it and subdivides every base
//! triangle 4:1 (docs/design.md section 1, Wang 2012 section 3.1):
//!
//! * node `v` for `v < base_vertex_count` is the **black** node sitting on base vertex `v`;
//! * node `base_vertex_count + e` is the **red** node at the midpoint of base edge `e`.
//!
//! Base triangle `(a, b, c)` with edge midpoints `r_ab, r_bc, r_ca` becomes the corner triangles
//! `(a, r_ab, r_ca)`, `(r_ab, b, r_bc)`, `(r_ca, r_bc, c)` and the middle (red) triangle
//! `(r_ab, r_bc, r_ca)`, all wound like the base triangle. The middle triangles carry the isometry
//! constraint; black nodes are tied to them by linear conformity and boundary constraints
//! (see [`crate::energy`]).
//!
//! [`ClothMesh::plain`] builds the *un*-subdivided mesh with every base triangle held rigid. It exists
//! to show locking next to the red/black mesh (tests, docs); it is not meant for production cloth.

pub mod obj;

use std::collections::HashMap;

use glam::{DVec3, Vec2, Vec3};
use serde::{Deserialize, Serialize};

use crate::error::MeshError;

/// Sentinel for "no triangle" in [`ClothMesh::edge_triangles`].
pub const NO_TRIANGLE: u32 = u32::MAX;

/// Largest coordinate magnitude a base mesh (or its pattern) may have, in metres: 100 km.
pub const MAX_COORDINATE: f64 = 1e5;

/// Shortest rest edge a base triangle may have, in metres: 1 micrometre.
pub const MIN_EDGE: f64 = 1e-6;

/// An indexed triangle mesh as authored: the input to [`ClothMesh::new`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaseMesh {
    /// Vertex positions in metres: the cloth's initial shape.
    pub positions: Vec<Vec3>,
    /// Triangles as vertex indices; all triangles must be wound consistently.
    pub triangles: Vec<[u32; 3]>,
    /// Optional 2D pattern (sewing-pattern) coordinates in metres, one per vertex. When present
    /// they define the rest lengths, areas and angles (the rest *metric*); `positions` then only
    /// give the initial placement and, with [`BendingRest::Curved`](crate::BendingRest), the rest
    /// curvature. When absent, `positions` are the rest shape.
    pub pattern: Option<Vec<Vec2>>,
}

impl BaseMesh {
    /// A mesh from positions and triangles, rest shape = positions.
    pub fn new(positions: Vec<Vec3>, triangles: Vec<[u32; 3]>) -> Self {
        Self {
            positions,
            triangles,
            pattern: None,
        }
    }

    /// The same mesh with pattern coordinates defining its rest metric.
    pub fn with_pattern(mut self, pattern: Vec<Vec2>) -> Self {
        self.pattern = Some(pattern);
        self
    }

    /// A `width` x `height` rectangle in the XY plane (x to the right, y up), its lower-left corner
    /// at the origin, split into `cells_x` x `cells_y` quads of two triangles each. Diagonals
    /// alternate in a checkerboard so that the mesh has no preferred shear direction.
    ///
    /// Vertex `(i, j)` (column `i` in `0..=cells_x`, row `j` in `0..=cells_y`, row 0 at the bottom)
    /// has index `j * (cells_x + 1) + i`.
    pub fn rectangle(
        width: f32,
        height: f32,
        cells_x: usize,
        cells_y: usize,
    ) -> Result<Self, MeshError> {
        Self::grid(width, height, cells_x, cells_y, 0.0, 0)
    }

    /// A rectangle like [`BaseMesh::rectangle`] whose interior vertices are moved randomly by up to
    /// `jitter` times the cell size (boundary vertices slide along their side only, corners stay),
    /// and whose quads are split along the diagonal that satisfies the Delaunay (opposite angles)
    /// condition. The result is an irregular mesh with no straight lines of edges across it: the
    /// mesh on which plain rigid triangles lock. Deterministic for a given `seed`.
    pub fn jittered_rectangle(
        width: f32,
        height: f32,
        cells_x: usize,
        cells_y: usize,
        jitter: f32,
        seed: u64,
    ) -> Result<Self, MeshError> {
        if !(0.0..0.5).contains(&jitter) {
            return Err(MeshError::InvalidGenerator(format!(
                "jitter must be in [0, 0.5), got {jitter}"
            )));
        }
        Self::grid(width, height, cells_x, cells_y, jitter, seed)
    }

    fn grid(
        width: f32,
        height: f32,
        cells_x: usize,
        cells_y: usize,
        jitter: f32,
        seed: u64,
    ) -> Result<Self, MeshError> {
        if !(width.is_finite() && height.is_finite() && width > 0.0 && height > 0.0) {
            return Err(MeshError::InvalidGenerator(format!(
                "rectangle size must be positive and finite, got {width} x {height}"
            )));
        }
        const MAX_CELLS: usize = 4096;
        if cells_x == 0 || cells_y == 0 || cells_x > MAX_CELLS || cells_y > MAX_CELLS {
            return Err(MeshError::InvalidGenerator(format!(
                "cell counts must be in 1..={MAX_CELLS}, got {cells_x} x {cells_y}"
            )));
        }
        let (dx, dy) = (width / cells_x as f32, height / cells_y as f32);
        let mut rng = SplitMix64(seed);
        let mut positions = Vec::with_capacity((cells_x + 1) * (cells_y + 1));
        for j in 0..=cells_y {
            for i in 0..=cells_x {
                let mut p = Vec3::new(i as f32 * dx, j as f32 * dy, 0.0);
                if jitter > 0.0 {
                    let (ox, oy) = (rng.symmetric() * jitter * dx, rng.symmetric() * jitter * dy);
                    if i != 0 && i != cells_x {
                        p.x += ox;
                    }
                    if j != 0 && j != cells_y {
                        p.y += oy;
                    }
                }
                positions.push(p);
            }
        }
        let idx = |i: usize, j: usize| (j * (cells_x + 1) + i) as u32;
        let mut triangles = Vec::with_capacity(2 * cells_x * cells_y);
        for j in 0..cells_y {
            for i in 0..cells_x {
                let (a, b, c, d) = (idx(i, j), idx(i + 1, j), idx(i + 1, j + 1), idx(i, j + 1));
                let split_ac = if jitter > 0.0 {
                    // Delaunay: split along a-c when the angles opposite it (at b and d) sum to
                    // at most pi.
                    let p = |k: u32| positions[k as usize];
                    angle(p(b), p(a), p(c)) + angle(p(d), p(c), p(a)) <= std::f32::consts::PI
                } else {
                    (i + j) % 2 == 0
                };
                if split_ac {
                    triangles.push([a, b, c]);
                    triangles.push([a, c, d]);
                } else {
                    triangles.push([a, b, d]);
                    triangles.push([b, c, d]);
                }
            }
        }
        Ok(Self::new(positions, triangles))
    }

    /// An open tube (a skirt, a sleeve) of `radius` around the Y axis from `y = 0` up to
    /// `y = length`, split into `around` x `along` quads of two triangles each (diagonals
    /// alternating), closed around: vertex `(i, j)` (`i` in `0..around` counterclockwise seen
    /// from above from the +X axis, ring `j` in `0..=along` from the bottom) has index
    /// `j * around + i`.
    pub fn tube(radius: f32, length: f32, around: usize, along: usize) -> Result<Self, MeshError> {
        if !(radius.is_finite() && length.is_finite() && radius > 0.0 && length > 0.0) {
            return Err(MeshError::InvalidGenerator(format!(
                "tube radius and length must be positive and finite, got {radius} and {length}"
            )));
        }
        const MAX_CELLS: usize = 4096;
        if !(3..=MAX_CELLS).contains(&around) || !(1..=MAX_CELLS).contains(&along) {
            return Err(MeshError::InvalidGenerator(format!(
                "a tube needs 3..={MAX_CELLS} cells around and 1..={MAX_CELLS} along, got \
                 {around} x {along}"
            )));
        }
        let mut positions = Vec::with_capacity(around * (along + 1));
        for j in 0..=along {
            for i in 0..around {
                let a = -(i as f32) / around as f32 * std::f32::consts::TAU;
                let y = length * j as f32 / along as f32;
                positions.push(Vec3::new(radius * a.cos(), y, radius * a.sin()));
            }
        }
        let idx = |i: usize, j: usize| (j * around + i % around) as u32;
        let mut triangles = Vec::with_capacity(2 * around * along);
        for j in 0..along {
            for i in 0..around {
                let (a, b, c, d) = (idx(i, j), idx(i + 1, j), idx(i + 1, j + 1), idx(i, j + 1));
                if (i + j) % 2 == 0 {
                    triangles.push([a, b, c]);
                    triangles.push([a, c, d]);
                } else {
                    triangles.push([a, b, d]);
                    triangles.push([b, c, d]);
                }
            }
        }
        Ok(Self::new(positions, triangles))
    }

    /// Index of vertex `(i, j)` of a mesh made by [`BaseMesh::rectangle`] with `cells_x` columns.
    pub fn grid_index(cells_x: usize, i: usize, j: usize) -> u32 {
        (j * (cells_x + 1) + i) as u32
    }

    /// The same mesh with every position mapped through `f` (the pattern is left as it is).
    pub fn map_positions(mut self, f: impl Fn(Vec3) -> Vec3) -> Self {
        for p in &mut self.positions {
            *p = f(*p);
        }
        self
    }
}

/// Angle at `at` between the rays to `p` and `q`.
fn angle(at: Vec3, p: Vec3, q: Vec3) -> f32 {
    (p - at).angle_between(q - at)
}

/// Tiny deterministic generator for mesh jitter (no dependency needed for this).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [-1, 1).
    fn symmetric(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// How a base mesh is discretised into simulation nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Discretization {
    /// 4:1 red/black subdivision with isometric middle triangles (the product).
    RedBlack,
    /// The base mesh as it is, every triangle held rigid. Locks; for comparison only.
    Plain,
}

/// One base edge as seen by the strain measure: its two end nodes, the node at its midpoint (red
/// node; `None` on a plain mesh) and its rest length.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StrainEdge {
    /// Node at the first end (black).
    pub a: u32,
    /// Node at the midpoint (red), if the mesh is subdivided.
    pub mid: Option<u32>,
    /// Node at the second end (black).
    pub b: u32,
    /// Rest length of the base edge in metres.
    pub rest_length: f64,
}

/// A validated base mesh and its simulation discretisation: nodes, render triangles, rigid
/// (isometry) triangles, fans and boundary. Immutable once built; share it with `Arc`.
#[derive(Debug, Clone)]
pub struct ClothMesh {
    discretization: Discretization,
    base_vertex_count: usize,
    base_triangles: Vec<[u32; 3]>,
    edges: Vec<[u32; 2]>,
    edge_triangles: Vec<[u32; 2]>,
    triangle_edges: Vec<[u32; 3]>,
    initial_positions: Vec<DVec3>,
    /// Empty when the rest metric is the initial shape (no pattern): then
    /// [`ClothMesh::metric_positions`] is `initial_positions` (one copy less, 24 bytes a node).
    metric_positions: Vec<DVec3>,
    render_triangles: Vec<[u32; 3]>,
    rigid_triangles: Vec<[u32; 3]>,
    fan_offsets: Vec<u32>,
    fans: Vec<u32>,
    boundary_vertex: Vec<bool>,
    strain_edges: Vec<StrainEdge>,
    base_areas: Vec<f64>,
}

impl ClothMesh {
    /// Validates `base` and subdivides it 4:1 into the red/black mesh.
    pub fn new(base: &BaseMesh) -> Result<Self, MeshError> {
        Self::build(base, Discretization::RedBlack)
    }

    /// Validates `base` and keeps it un-subdivided, every triangle rigid: the mesh that locks.
    /// For comparisons only.
    pub fn plain(base: &BaseMesh) -> Result<Self, MeshError> {
        Self::build(base, Discretization::Plain)
    }

    fn build(base: &BaseMesh, discretization: Discretization) -> Result<Self, MeshError> {
        let nv = base.positions.len();
        let nt = base.triangles.len();
        if nt == 0 {
            return Err(MeshError::NoTriangles);
        }
        // Nodes are V + E <= V + 3T; keep every index comfortably inside u32.
        const MAX: usize = (u32::MAX / 8) as usize;
        if nv > MAX {
            return Err(MeshError::TooLarge {
                what: "vertices",
                count: nv,
                max: MAX,
            });
        }
        if nt > MAX / 3 {
            return Err(MeshError::TooLarge {
                what: "triangles",
                count: nt,
                max: MAX / 3,
            });
        }
        if let Some(v) = base.positions.iter().position(|p| !p.is_finite()) {
            return Err(MeshError::NonFiniteVertex { vertex: v });
        }
        let too_far = |m: f32| m > MAX_COORDINATE as f32;
        if let Some(v) = base
            .positions
            .iter()
            .position(|p| too_far(p.abs().max_element()))
        {
            return Err(MeshError::VertexTooFar {
                vertex: v,
                distance: base.positions[v].abs().max_element(),
            });
        }
        if let Some(pattern) = &base.pattern {
            if pattern.len() != nv {
                return Err(MeshError::PatternMismatch {
                    expected: nv,
                    found: pattern.len(),
                });
            }
            if let Some(v) = pattern.iter().position(|p| !p.is_finite()) {
                return Err(MeshError::NonFinitePattern { vertex: v });
            }
            if let Some(v) = pattern.iter().position(|p| too_far(p.abs().max_element())) {
                return Err(MeshError::VertexTooFar {
                    vertex: v,
                    distance: pattern[v].abs().max_element(),
                });
            }
        }
        for (t, tri) in base.triangles.iter().enumerate() {
            for &i in tri {
                if i as usize >= nv {
                    return Err(MeshError::IndexOutOfRange {
                        triangle: t,
                        index: i,
                        vertex_count: nv,
                    });
                }
            }
            if tri[0] == tri[1] || tri[0] == tri[2] {
                return Err(MeshError::RepeatedIndex {
                    triangle: t,
                    index: tri[0],
                });
            }
            if tri[1] == tri[2] {
                return Err(MeshError::RepeatedIndex {
                    triangle: t,
                    index: tri[1],
                });
            }
        }

        let initial: Vec<DVec3> = base.positions.iter().map(|p| p.as_dvec3()).collect();
        let metric: Vec<DVec3> = match &base.pattern {
            Some(pattern) => pattern
                .iter()
                .map(|p| DVec3::new(p.x as f64, p.y as f64, 0.0))
                .collect(),
            None => initial.clone(),
        };

        // Rest areas, degenerate triangles.
        let mut base_areas = Vec::with_capacity(nt);
        for (t, tri) in base.triangles.iter().enumerate() {
            let [a, b, c] = tri.map(|i| metric[i as usize]);
            let twice_area = (b - a).cross(c - a).length();
            let longest = (b - a)
                .length_squared()
                .max((c - b).length_squared())
                .max((a - c).length_squared());
            let shortest = (b - a)
                .length_squared()
                .min((c - b).length_squared())
                .min((a - c).length_squared());
            if shortest < MIN_EDGE * MIN_EDGE {
                return Err(MeshError::EdgeTooShort {
                    triangle: t,
                    length: shortest.sqrt(),
                });
            }
            if twice_area.is_nan() || twice_area <= 1e-9 * longest || longest <= 0.0 {
                return Err(MeshError::DegenerateTriangle { triangle: t });
            }
            base_areas.push(0.5 * twice_area);
        }

        // Duplicate triangles (same vertex set) would pass the edge checks as a closed pillow.
        let mut seen: HashMap<[u32; 3], usize> = HashMap::with_capacity(nt);
        for (t, tri) in base.triangles.iter().enumerate() {
            let mut key = *tri;
            key.sort_unstable();
            if let Some(&first) = seen.get(&key) {
                return Err(MeshError::DuplicateTriangle { first, second: t });
            }
            seen.insert(key, t);
        }
        drop(seen);

        // Edges, in order of first appearance, with their triangles and winding check.
        let mut edge_ids: HashMap<(u32, u32), u32> = HashMap::with_capacity(nt * 2);
        let mut edges: Vec<[u32; 2]> = Vec::with_capacity(nt * 2);
        let mut edge_triangles: Vec<[u32; 2]> = Vec::with_capacity(nt * 2);
        let mut triangle_edges = Vec::with_capacity(nt);
        for (t, tri) in base.triangles.iter().enumerate() {
            let mut te = [0u32; 3];
            for k in 0..3 {
                let (a, b) = (tri[k], tri[(k + 1) % 3]);
                let key = (a.min(b), a.max(b));
                let e = match edge_ids.get(&key) {
                    Some(&e) => {
                        let slot = &mut edge_triangles[e as usize];
                        if slot[1] != NO_TRIANGLE {
                            return Err(MeshError::NonManifoldEdge {
                                a: key.0,
                                b: key.1,
                                triangle: t,
                            });
                        }
                        // The first triangle stored the edge as it traversed it: a -> b must now
                        // run the other way.
                        if edges[e as usize] == [a, b] {
                            return Err(MeshError::InconsistentWinding {
                                triangle: t,
                                a: key.0,
                                b: key.1,
                            });
                        }
                        slot[1] = t as u32;
                        e
                    }
                    None => {
                        let e = edges.len() as u32;
                        edge_ids.insert(key, e);
                        edges.push([a, b]);
                        edge_triangles.push([t as u32, NO_TRIANGLE]);
                        e
                    }
                };
                te[k] = e;
            }
            triangle_edges.push(te);
        }
        drop(edge_ids);

        // Vertex fans (incident triangles in rotational order) and boundary flags.
        let mut counts = vec![0u32; nv + 1];
        for tri in &base.triangles {
            for &v in tri {
                counts[v as usize + 1] += 1;
            }
        }
        if let Some(v) = (0..nv).find(|&v| counts[v + 1] == 0) {
            return Err(MeshError::UnreferencedVertex { vertex: v });
        }
        let mut fan_offsets = counts;
        for v in 0..nv {
            fan_offsets[v + 1] += fan_offsets[v];
        }
        let mut incident = vec![0u32; fan_offsets[nv] as usize];
        let mut fill = fan_offsets.clone();
        for (t, tri) in base.triangles.iter().enumerate() {
            for &v in tri {
                incident[fill[v as usize] as usize] = t as u32;
                fill[v as usize] += 1;
            }
        }
        let mut boundary_vertex = vec![false; nv];
        for (e, tris) in edge_triangles.iter().enumerate() {
            if tris[1] == NO_TRIANGLE {
                boundary_vertex[edges[e][0] as usize] = true;
                boundary_vertex[edges[e][1] as usize] = true;
            }
        }
        let mut fans = vec![0u32; incident.len()];
        for v in 0..nv {
            let range = fan_offsets[v] as usize..fan_offsets[v + 1] as usize;
            order_fan(
                v as u32,
                &incident[range.clone()],
                &mut fans[range],
                &base.triangles,
                &triangle_edges,
                &edge_triangles,
            )
            .ok_or(MeshError::NonManifoldVertex { vertex: v })?;
        }

        let ne = edges.len();
        let (node_count, render_triangles, rigid_triangles) = match discretization {
            Discretization::RedBlack => {
                let red = |e: u32| nv as u32 + e;
                let mut render = Vec::with_capacity(4 * nt);
                let mut rigid = Vec::with_capacity(nt);
                for (tri, te) in base.triangles.iter().zip(&triangle_edges) {
                    let [a, b, c] = *tri;
                    let [rab, rbc, rca] = te.map(red);
                    render.push([a, rab, rca]);
                    render.push([rab, b, rbc]);
                    render.push([rca, rbc, c]);
                    render.push([rab, rbc, rca]);
                    rigid.push([rab, rbc, rca]);
                }
                (nv + ne, render, rigid)
            }
            Discretization::Plain => (nv, base.triangles.clone(), base.triangles.clone()),
        };
        if node_count > MAX {
            return Err(MeshError::TooLarge {
                what: "nodes",
                count: node_count,
                max: MAX,
            });
        }

        let mut initial_positions = initial;
        let mut metric_positions = metric;
        if discretization == Discretization::RedBlack {
            for &[a, b] in &edges {
                let (a, b) = (a as usize, b as usize);
                initial_positions.push(0.5 * (initial_positions[a] + initial_positions[b]));
                metric_positions.push(0.5 * (metric_positions[a] + metric_positions[b]));
            }
        }
        let strain_edges = edges
            .iter()
            .enumerate()
            .map(|(e, &[a, b])| StrainEdge {
                a,
                mid: (discretization == Discretization::RedBlack).then_some(nv as u32 + e as u32),
                b,
                rest_length: metric_positions[a as usize].distance(metric_positions[b as usize]),
            })
            .collect();

        if metric_positions == initial_positions {
            metric_positions = Vec::new();
        }
        let mut mesh = Self {
            discretization,
            base_vertex_count: nv,
            base_triangles: base.triangles.clone(),
            edges,
            edge_triangles,
            triangle_edges,
            initial_positions,
            metric_positions,
            render_triangles,
            rigid_triangles,
            fan_offsets,
            fans,
            boundary_vertex,
            strain_edges,
            base_areas,
        };
        mesh.shrink_to_fit();
        Ok(mesh)
    }

    /// Gives back the spare capacity the builder left (a mesh lives as long as its models).
    fn shrink_to_fit(&mut self) {
        self.base_triangles.shrink_to_fit();
        self.edges.shrink_to_fit();
        self.edge_triangles.shrink_to_fit();
        self.triangle_edges.shrink_to_fit();
        self.initial_positions.shrink_to_fit();
        self.metric_positions.shrink_to_fit();
        self.render_triangles.shrink_to_fit();
        self.rigid_triangles.shrink_to_fit();
        self.fan_offsets.shrink_to_fit();
        self.fans.shrink_to_fit();
        self.boundary_vertex.shrink_to_fit();
        self.strain_edges.shrink_to_fit();
        self.base_areas.shrink_to_fit();
    }

    /// How the base mesh was discretised.
    pub fn discretization(&self) -> Discretization {
        self.discretization
    }
    /// Number of simulation nodes (black + red; base vertices on a plain mesh).
    pub fn node_count(&self) -> usize {
        self.initial_positions.len()
    }
    /// Number of base vertices (= black nodes, which come first).
    pub fn base_vertex_count(&self) -> usize {
        self.base_vertex_count
    }
    /// Base triangles as authored.
    pub fn base_triangles(&self) -> &[[u32; 3]] {
        &self.base_triangles
    }
    /// Base edges as vertex pairs, in order of first appearance.
    pub fn edges(&self) -> &[[u32; 2]] {
        &self.edges
    }
    /// The one or two base triangles on each edge ([`NO_TRIANGLE`] for the missing one on a
    /// boundary edge).
    pub fn edge_triangles(&self) -> &[[u32; 2]] {
        &self.edge_triangles
    }
    /// Edges of each base triangle `(a, b, c)`: `[ab, bc, ca]`.
    pub fn triangle_edges(&self) -> &[[u32; 3]] {
        &self.triangle_edges
    }
    /// Node of base vertex `v` (black nodes share the base vertex numbering).
    pub fn black_node(&self, v: u32) -> u32 {
        v
    }
    /// Red node at the midpoint of base edge `e`, if the mesh is subdivided.
    pub fn red_node(&self, e: u32) -> Option<u32> {
        (self.discretization == Discretization::RedBlack)
            .then_some(self.base_vertex_count as u32 + e)
    }
    /// Initial node positions (the authored shape, red nodes at edge midpoints).
    pub fn initial_positions(&self) -> &[DVec3] {
        &self.initial_positions
    }
    /// Node positions in the rest metric (pattern coordinates at z = 0, or the initial shape).
    pub fn metric_positions(&self) -> &[DVec3] {
        if self.metric_positions.is_empty() {
            &self.initial_positions
        } else {
            &self.metric_positions
        }
    }
    /// Triangles to render and collide: 4 per base triangle, wound like the base mesh.
    pub fn render_triangles(&self) -> &[[u32; 3]] {
        &self.render_triangles
    }
    /// Triangles held rigid by the isometry constraint (the red middle triangles).
    pub fn rigid_triangles(&self) -> &[[u32; 3]] {
        &self.rigid_triangles
    }
    /// Base triangles around vertex `v`, in rotational order; on the boundary the first and last
    /// are the two triangles with a boundary edge at `v`.
    pub fn fan(&self, v: usize) -> &[u32] {
        &self.fans[self.fan_offsets[v] as usize..self.fan_offsets[v + 1] as usize]
    }
    /// Whether base vertex `v` lies on the boundary.
    pub fn is_boundary_vertex(&self, v: usize) -> bool {
        self.boundary_vertex[v]
    }
    /// Base edges seen by the strain measure.
    pub fn strain_edges(&self) -> &[StrainEdge] {
        &self.strain_edges
    }
    /// Rest area of each base triangle.
    pub fn base_areas(&self) -> &[f64] {
        &self.base_areas
    }
    /// Total rest area in square metres.
    pub fn area(&self) -> f64 {
        self.base_areas.iter().sum()
    }
    /// Mean rest length of the render mesh's edges (half a base edge on a red/black mesh).
    pub fn mean_render_edge_length(&self) -> f64 {
        let sum: f64 = self.strain_edges.iter().map(|e| e.rest_length).sum();
        let mean_base = sum / self.strain_edges.len() as f64;
        match self.discretization {
            Discretization::RedBlack => 0.5 * mean_base,
            Discretization::Plain => mean_base,
        }
    }

    /// Lumped node masses for a surface density in kg/m^2: each render triangle's mass is shared
    /// equally by its three nodes. A red node gets `A_t * density / 4` from each base triangle
    /// around it, a black node `A_t * density / 12`; the total is area x density.
    pub fn lumped_masses(&self, density: f64) -> Vec<f64> {
        let mut m = vec![0.0; self.node_count()];
        for (t, &area) in self.base_areas.iter().enumerate() {
            match self.discretization {
                Discretization::RedBlack => {
                    for k in 0..3 {
                        m[self.base_triangles[t][k] as usize] += area * density / 12.0;
                        let red = self.base_vertex_count + self.triangle_edges[t][k] as usize;
                        m[red] += area * density / 4.0;
                    }
                }
                Discretization::Plain => {
                    for k in 0..3 {
                        m[self.base_triangles[t][k] as usize] += area * density / 3.0;
                    }
                }
            }
        }
        m
    }

    /// Nodes to pin so that the base vertices `vertices` are held: their black nodes and, with
    /// `with_edges`, the red nodes of every base edge whose two ends are both in the set (clamping
    /// the edge itself, not only its ends). Sorted, without repeats; vertices that do not exist
    /// are skipped.
    pub fn nodes_for_vertices(&self, vertices: &[u32], with_edges: bool) -> Vec<u32> {
        let mut held = vec![false; self.base_vertex_count];
        let mut nodes = Vec::new();
        for &v in vertices {
            if (v as usize) < self.base_vertex_count && !held[v as usize] {
                held[v as usize] = true;
                nodes.push(v);
            }
        }
        if with_edges && self.discretization == Discretization::RedBlack {
            for (e, &[a, b]) in self.edges.iter().enumerate() {
                if held[a as usize] && held[b as usize] {
                    nodes.push(self.base_vertex_count as u32 + e as u32);
                }
            }
        }
        nodes.sort_unstable();
        nodes
    }

    /// Per-node values from values painted on the base mesh's vertices (a vertex-colour
    /// channel, a weight map): a black node takes its vertex's value, a red node the mean of
    /// its edge's two ends. Fails if `vertex_values` has not one value per base vertex.
    pub fn node_values(&self, vertex_values: &[f32]) -> Result<Vec<f32>, crate::ClothError> {
        if vertex_values.len() != self.base_vertex_count {
            return Err(crate::ClothError::LengthMismatch {
                what: "vertex values (one per base vertex)",
                expected: self.base_vertex_count,
                found: vertex_values.len(),
            });
        }
        let mut out = vertex_values.to_vec();
        if self.discretization == Discretization::RedBlack {
            out.extend(
                self.edges
                    .iter()
                    .map(|&[a, b]| 0.5 * (vertex_values[a as usize] + vertex_values[b as usize])),
            );
        }
        Ok(out)
    }
}

/// Orders the triangles `incident` around vertex `v` into `out`, walking across shared edges.
/// Returns `None` if they do not form one fan (a non-manifold vertex).
fn order_fan(
    v: u32,
    incident: &[u32],
    out: &mut [u32],
    triangles: &[[u32; 3]],
    triangle_edges: &[[u32; 3]],
    edge_triangles: &[[u32; 2]],
) -> Option<()> {
    // In triangle t wound (v, p, q), the edge (v, q) leads to the next triangle of the fan and
    // the edge (v, p) to the previous one. Local edge k of a triangle joins corners k and k+1.
    let local = |t: u32| -> (usize, usize) {
        let tri = triangles[t as usize];
        let k = tri.iter().position(|&x| x == v).unwrap_or(0);
        // edge (v, p) is local edge k; edge (q, v) is local edge k + 2.
        (k, (k + 2) % 3)
    };
    let other = |t: u32, e: u32| -> u32 {
        let [t0, t1] = edge_triangles[e as usize];
        if t0 == t { t1 } else { t0 }
    };
    // Start on a triangle with no predecessor if there is one (boundary vertex).
    let start = incident
        .iter()
        .copied()
        .find(|&t| {
            let (prev_edge, _) = local(t);
            other(t, triangle_edges[t as usize][prev_edge]) == NO_TRIANGLE
        })
        .unwrap_or(incident[0]);
    let mut t = start;
    let len = out.len();
    for (filled, slot) in out.iter_mut().enumerate() {
        *slot = t;
        let (_, next_edge) = local(t);
        let next = other(t, triangle_edges[t as usize][next_edge]);
        if filled + 1 == len {
            // An interior fan must close on its start; a boundary fan must end on the boundary.
            return (next == NO_TRIANGLE || next == start).then_some(());
        }
        if next == NO_TRIANGLE || next == start {
            return None;
        }
        t = next;
    }
    None
}
