//! World colliders beyond capsules, spheres and planes: boxes, cylinders, tapered capsules,
//! convex hulls, height fields and triangle meshes, with the queries contact needs of them.
//!
//! Every query is on the shape **inflated by the cloth thickness** `t` (the set of points within
//! `t` of the shape), in the body's local frame and in `f64`:
//! - [`Query::surface`]: the nearest point of the inflated surface, the outward normal there and
//!   the signed distance (negative inside);
//! - [`Query::cast`]: the first point of a segment on the inflated surface (continuous
//!   detection).
//!
//! The surface of a shape grown by `t` is its own nearest point `q` moved by `t` along the
//! direction from `q` to the query point (away from it when the point is inside), so each shape
//! only has to give `q`, whether the point is inside, and a normal for the point on its surface
//! (a face's). Around a box's edges and corners this normal turns smoothly: the inflated box is
//! rounded, which is what keeps a sheet draped over an edge from tearing on a normal that flips.
//! A tapered capsule is grown exactly by growing its radii.
//!
//! Closed forms for boxes, cylinders and tapered capsules; a convex hull's faces as planes (a
//! point behind every plane is inside and nearest the least deep face; one in front of some
//! faces is nearest one of those faces' triangles); a height field's triangles near the point;
//! parry3d's `TriMesh` (bounding-volume tree, pseudo-normals for inside and outside) for meshes.
//! None of them allocates.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use glam::{DVec2, DVec3, Vec3};
use parry3d::query::PointQueryWithLocation;
use parry3d::shape::{TriMesh, TriMeshFlags};
use serde::{Deserialize, Serialize};

use super::ColliderError;

/// Largest size (metres) of any collider dimension or coordinate.
const MAX_SIZE: f64 = 1e3;

/// Below this distance (metres) from the query point, the nearest point's direction is taken
/// from the shape's face normal instead of the difference of the two.
const ON_SURFACE: f64 = 1e-12;

/// A convex hull of points (a rock, a crate with bevels, a vehicle part), in its body's frame.
/// Built by [`ConvexHull::new`]; serialises as its points.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(try_from = "HullPoints", into = "HullPoints")]
pub struct ConvexHull {
    /// The points as given.
    points: Vec<DVec3>,
    /// The hull's triangles (counter-clockwise seen from outside).
    triangles: Vec<[DVec3; 3]>,
    /// Per triangle: outward unit normal and offset (`n . x <= c` inside).
    planes: Vec<(DVec3, f64)>,
    /// Largest absolute coordinate per axis (a box around the origin holding the hull).
    half_extents: DVec3,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HullPoints {
    points: Vec<DVec3>,
}

impl TryFrom<HullPoints> for ConvexHull {
    type Error = ColliderError;
    fn try_from(h: HullPoints) -> Result<Self, ColliderError> {
        ConvexHull::new(h.points)
    }
}

impl From<ConvexHull> for HullPoints {
    fn from(h: ConvexHull) -> Self {
        HullPoints { points: h.points }
    }
}

impl PartialEq for ConvexHull {
    fn eq(&self, other: &Self) -> bool {
        self.points == other.points
    }
}

impl ConvexHull {
    /// The convex hull of `points` (body-local, metres). Refused: a non-finite or out-of-range
    /// point ([`ColliderError::BadVertex`]), fewer than four points, or points that span no
    /// volume, such as coplanar ones ([`ColliderError::DegenerateHull`]).
    pub fn new(points: Vec<DVec3>) -> Result<Self, ColliderError> {
        check_vertices(&points)?;
        let extent = points
            .iter()
            .fold(DVec3::ZERO, |m, p| m.max(p.abs()))
            .max_element();
        let degenerate = || ColliderError::DegenerateHull {
            points: points.len(),
        };
        if points.len() < 4 {
            return Err(degenerate());
        }
        let as_f32: Vec<Vec3> = points.iter().map(|p| p.as_vec3()).collect();
        let (hull, indices) =
            parry3d::transformation::try_convex_hull(&as_f32).map_err(|_| degenerate())?;
        // parry3d computes the hull in `f32`; its vertices are some of the given points, which
        // are taken back in `f64`.
        let vertices: Vec<DVec3> = hull
            .iter()
            .map(|v| {
                let k = as_f32.iter().position(|p| p == v);
                k.map_or(v.as_dvec3(), |k| points[k])
            })
            .collect();
        let mut triangles = Vec::with_capacity(indices.len());
        let mut planes = Vec::with_capacity(indices.len());
        let mut volume = 0.0;
        for t in &indices {
            let [a, b, c] = t.map(|i| vertices[i as usize]);
            let cross = (b - a).cross(c - a);
            volume += a.dot(cross) / 6.0;
            let Some(n) = cross.try_normalize() else {
                continue; // a sliver: its neighbours cover it
            };
            triangles.push([a, b, c]);
            planes.push((n, n.dot(a)));
        }
        // A hull thinner than a millionth of its size has no inside to speak of.
        if volume <= 1e-6 * extent.powi(3) || triangles.len() < 4 {
            return Err(degenerate());
        }
        let half_extents = vertices.iter().fold(DVec3::ZERO, |m, p| m.max(p.abs()));
        Ok(Self {
            points,
            triangles,
            planes,
            half_extents,
        })
    }

    /// The points it was built from.
    pub fn points(&self) -> &[DVec3] {
        &self.points
    }

    /// The hull's triangles, counter-clockwise seen from outside.
    pub fn triangles(&self) -> &[[DVec3; 3]] {
        &self.triangles
    }

    fn base(&self, p: DVec3) -> Base {
        let (mut deepest, mut face) = (f64::NEG_INFINITY, 0);
        for (i, &(n, c)) in self.planes.iter().enumerate() {
            let s = n.dot(p) - c;
            if s > deepest {
                deepest = s;
                face = i;
            }
        }
        let n = self.planes[face].0;
        if deepest <= 0.0 {
            return Base {
                point: p - deepest * n,
                inside: true,
                normal: n,
            };
        }
        // The nearest point lies on a face whose plane has `p` in front (see the module docs).
        let mut best = (f64::INFINITY, p, n);
        for (t, &(n, c)) in self.triangles.iter().zip(&self.planes) {
            if n.dot(p) - c > 0.0 {
                let q = closest_on_triangle(p, t);
                let d2 = q.distance_squared(p);
                if d2 < best.0 {
                    best = (d2, q, n);
                }
            }
        }
        Base {
            point: best.1,
            inside: false,
            normal: best.2,
        }
    }
}

/// A height field: terrain, a slope, a mound. Heights on a regular grid of `rows` x `columns`
/// samples over `size` (metres along local X and Z, centred on the origin); the surface is the
/// grid's triangles (each cell split along its diagonal from its low-X low-Z corner) and
/// everything below it, over the grid's footprint, is inside.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "HeightFieldData", into = "HeightFieldData")]
pub struct HeightField {
    data: HeightFieldData,
    /// Cell size along X and Z.
    cell: DVec2,
    /// Largest absolute height.
    max_height: f64,
}

/// What a [`HeightField`] is built from (its serialised form).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeightFieldData {
    /// Samples along Z.
    rows: usize,
    /// Samples along X.
    columns: usize,
    /// Extent along X and Z (metres).
    size: DVec2,
    /// `rows * columns` heights (metres), row by row (row `r` at `z = -size.y / 2 + r * cell`).
    heights: Vec<f64>,
}

impl TryFrom<HeightFieldData> for HeightField {
    type Error = ColliderError;
    fn try_from(d: HeightFieldData) -> Result<Self, ColliderError> {
        HeightField::new(d.rows, d.columns, d.size, d.heights)
    }
}

impl From<HeightField> for HeightFieldData {
    fn from(h: HeightField) -> Self {
        h.data
    }
}

impl HeightField {
    /// A height field of `rows` x `columns` samples (each at least 2) over `size` metres along X
    /// and Z; `heights` holds `rows * columns` heights row by row. Refused: a wrong count or a
    /// grid under 2 x 2 ([`ColliderError::HeightFieldSamples`]), a non-finite or out-of-range
    /// height ([`ColliderError::BadHeight`]), a size that is not a finite positive size
    /// ([`ColliderError::BadSize`]).
    pub fn new(
        rows: usize,
        columns: usize,
        size: DVec2,
        heights: Vec<f64>,
    ) -> Result<Self, ColliderError> {
        if rows < 2 || columns < 2 || rows.checked_mul(columns) != Some(heights.len()) {
            return Err(ColliderError::HeightFieldSamples {
                rows,
                columns,
                got: heights.len(),
            });
        }
        for (what, v) in [
            ("height field size x", size.x),
            ("height field size z", size.y),
        ] {
            check_size(what, v)?;
        }
        if let Some(index) = heights
            .iter()
            .position(|h| !(h.is_finite() && h.abs() < MAX_SIZE))
        {
            return Err(ColliderError::BadHeight {
                index,
                height: heights[index],
            });
        }
        let max_height = heights.iter().fold(0.0f64, |m, h| m.max(h.abs()));
        let cell = DVec2::new(size.x / (columns - 1) as f64, size.y / (rows - 1) as f64);
        Ok(Self {
            data: HeightFieldData {
                rows,
                columns,
                size,
                heights,
            },
            cell,
            max_height,
        })
    }

    /// Samples along Z.
    pub fn rows(&self) -> usize {
        self.data.rows
    }

    /// Samples along X.
    pub fn columns(&self) -> usize {
        self.data.columns
    }

    /// Extent along X and Z (metres).
    pub fn size(&self) -> DVec2 {
        self.data.size
    }

    /// The heights, row by row.
    pub fn heights(&self) -> &[f64] {
        &self.data.heights
    }

    fn vertex(&self, r: usize, c: usize) -> DVec3 {
        DVec3::new(
            -0.5 * self.data.size.x + c as f64 * self.cell.x,
            self.data.heights[r * self.data.columns + c],
            -0.5 * self.data.size.y + r as f64 * self.cell.y,
        )
    }

    /// The two triangles of cell (`r`, `c`), counter-clockwise seen from above.
    fn cell_triangles(&self, r: usize, c: usize) -> [[DVec3; 3]; 2] {
        let (a, b) = (self.vertex(r, c), self.vertex(r, c + 1));
        let (d, e) = (self.vertex(r + 1, c), self.vertex(r + 1, c + 1));
        [[a, d, e], [a, e, b]]
    }

    /// Cell holding local (x, z), clamped to the grid, and the fractions inside it.
    fn cell_at(&self, x: f64, z: f64) -> (usize, usize, f64, f64) {
        let fx =
            ((x + 0.5 * self.data.size.x) / self.cell.x).clamp(0.0, (self.data.columns - 1) as f64);
        let fz =
            ((z + 0.5 * self.data.size.y) / self.cell.y).clamp(0.0, (self.data.rows - 1) as f64);
        let c = (fx as usize).min(self.data.columns - 2);
        let r = (fz as usize).min(self.data.rows - 2);
        (r, c, fx - c as f64, fz - r as f64)
    }

    /// Whether local (x, z) lies over the grid.
    fn over(&self, x: f64, z: f64) -> bool {
        x.abs() <= 0.5 * self.data.size.x && z.abs() <= 0.5 * self.data.size.y
    }

    /// Height of the surface over local (x, z), clamped to the grid.
    fn height_at(&self, x: f64, z: f64) -> f64 {
        let (r, c, u, v) = self.cell_at(x, z);
        let h = |dr, dc| self.data.heights[(r + dr) * self.data.columns + c + dc];
        // The diagonal runs from (0, 0) to (1, 1): below it u >= v.
        if u >= v {
            h(0, 0) + u * (h(0, 1) - h(0, 0)) + v * (h(1, 1) - h(0, 1))
        } else {
            h(0, 0) + v * (h(1, 0) - h(0, 0)) + u * (h(1, 1) - h(1, 0))
        }
    }

    fn base(&self, p: DVec3) -> Base {
        let over = self.over(p.x, p.z);
        let surface = DVec3::new(
            p.x.clamp(-0.5 * self.data.size.x, 0.5 * self.data.size.x),
            0.0,
            p.z.clamp(-0.5 * self.data.size.y, 0.5 * self.data.size.y),
        );
        let surface = DVec3::new(surface.x, self.height_at(surface.x, surface.z), surface.z);
        // A point of the surface bounds the distance; only cells within it can hold a nearer.
        let reach = p.distance(surface);
        let (r0, c0, ..) = self.cell_at(p.x - reach, p.z - reach);
        let (r1, c1, ..) = self.cell_at(p.x + reach, p.z + reach);
        let mut best = (f64::INFINITY, surface, DVec3::Y);
        for r in r0..=r1 {
            for c in c0..=c1 {
                for t in self.cell_triangles(r, c) {
                    let q = closest_on_triangle(p, &t);
                    let d2 = q.distance_squared(p);
                    if d2 < best.0 {
                        let n = (t[1] - t[0]).cross(t[2] - t[0]).normalize_or(DVec3::Y);
                        best = (d2, q, n);
                    }
                }
            }
        }
        Base {
            point: best.1,
            // Over the grid, `surface` is the point straight above or below.
            inside: over && p.y < surface.y,
            normal: best.2,
        }
    }
}

/// A triangle mesh collider (a table, a ship's rail, a statue), static or moved as one rigid
/// body. A **closed** mesh (every edge shared by exactly two triangles, wound alike) is solid:
/// its inside is inside, and it must be wound counter-clockwise seen from outside. An **open**
/// mesh (a terrain patch, a sail) has no inside: it is a two-sided sheet the cloth is kept the
/// thickness away from on whichever side it is, and which continuous detection keeps it from
/// crossing. Built by [`TriangleMesh::new`]; serialises as its vertices and triangles.
#[derive(Clone, Serialize, Deserialize)]
#[serde(try_from = "MeshData", into = "MeshData")]
pub struct TriangleMesh {
    data: MeshData,
    closed: bool,
    mesh: TriMesh,
    /// Per triangle: its unit normal.
    normals: Vec<DVec3>,
    half_extents: DVec3,
    /// The triangle the last query found (see [`TriangleMesh::base`]).
    last: LastTriangle,
}

/// The triangle a mesh's last query found: queries come in node order, so it is near the next
/// one's and bounds its search. It only prunes the search, never changes its answer, so a
/// mesh shared by cloths on several threads answers alike whichever wrote it last (relaxed
/// loads and stores: any value is a valid hint).
#[derive(Default)]
struct LastTriangle(AtomicU32);

impl Clone for LastTriangle {
    fn clone(&self) -> Self {
        Self(AtomicU32::new(self.0.load(Ordering::Relaxed)))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MeshData {
    vertices: Vec<DVec3>,
    triangles: Vec<[u32; 3]>,
}

impl TryFrom<MeshData> for TriangleMesh {
    type Error = ColliderError;
    fn try_from(d: MeshData) -> Result<Self, ColliderError> {
        TriangleMesh::new(d.vertices, d.triangles)
    }
}

impl From<TriangleMesh> for MeshData {
    fn from(m: TriangleMesh) -> Self {
        m.data
    }
}

impl PartialEq for TriangleMesh {
    fn eq(&self, other: &Self) -> bool {
        self.data == other.data
    }
}

impl std::fmt::Debug for TriangleMesh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TriangleMesh")
            .field("vertices", &self.data.vertices.len())
            .field("triangles", &self.data.triangles.len())
            .field("closed", &self.closed)
            .finish()
    }
}

impl TriangleMesh {
    /// A mesh of `triangles` (indices into `vertices`, body-local metres). Refused: no
    /// triangles ([`ColliderError::EmptyMesh`]), a non-finite or out-of-range vertex
    /// ([`ColliderError::BadVertex`]), an index past the vertices
    /// ([`ColliderError::BadIndex`]), a triangle of zero area
    /// ([`ColliderError::DegenerateTriangle`]), and a closed mesh wound inside out
    /// ([`ColliderError::InvertedMesh`]).
    pub fn new(vertices: Vec<DVec3>, triangles: Vec<[u32; 3]>) -> Result<Self, ColliderError> {
        if triangles.is_empty() {
            return Err(ColliderError::EmptyMesh);
        }
        check_vertices(&vertices)?;
        let mut normals = Vec::with_capacity(triangles.len());
        let mut volume = 0.0;
        for (triangle, t) in triangles.iter().enumerate() {
            if let Some(&index) = t.iter().find(|&&i| i as usize >= vertices.len()) {
                return Err(ColliderError::BadIndex {
                    triangle,
                    index,
                    vertices: vertices.len(),
                });
            }
            let [a, b, c] = t.map(|i| vertices[i as usize]);
            let cross = (b - a).cross(c - a);
            let scale = (b - a).length_squared().max((c - a).length_squared());
            if cross.length_squared() <= 1e-18 * scale * scale || scale == 0.0 {
                return Err(ColliderError::DegenerateTriangle { triangle });
            }
            volume += a.dot(cross) / 6.0;
            normals.push(cross.normalize());
        }
        let closed = is_closed(&triangles);
        if closed && volume <= 0.0 {
            return Err(ColliderError::InvertedMesh { volume });
        }
        let flags = if closed {
            TriMeshFlags::ORIENTED
        } else {
            TriMeshFlags::empty()
        };
        let mesh = TriMesh::with_flags(
            vertices.iter().map(|v| v.as_vec3()).collect(),
            triangles.clone(),
            flags,
        )
        .map_err(|e| ColliderError::BadMesh {
            reason: e.to_string(),
        })?;
        let half_extents = vertices.iter().fold(DVec3::ZERO, |m, p| m.max(p.abs()));
        Ok(Self {
            data: MeshData {
                vertices,
                triangles,
            },
            closed,
            mesh,
            normals,
            half_extents,
            last: LastTriangle::default(),
        })
    }

    /// Whether the mesh is closed (solid; see the type's docs).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The vertices as given.
    pub fn vertices(&self) -> &[DVec3] {
        &self.data.vertices
    }

    /// The triangles as given.
    pub fn triangles(&self) -> &[[u32; 3]] {
        &self.data.triangles
    }

    /// The nearest point of the mesh. The search of parry3d's tree is bounded by the distance
    /// to the last query's triangle: a subtree is skipped only when its box is farther than
    /// that, and no nearest triangle lies in such a subtree, so the bound leaves the answer
    /// (the first nearest triangle in the tree's order) as it is and prunes most of the walk
    /// for points away from the surface, where the boxes of a curved mesh are all nearer than
    /// the distance found first.
    fn base(&self, p: DVec3) -> Base {
        let q = p.as_vec3();
        let hint = self.last.0.load(Ordering::Relaxed);
        let bound = if (hint as usize) < self.normals.len() {
            let (proj, _) = self
                .mesh
                .triangle(hint)
                .project_local_point_and_get_location(q, false);
            // Above the hint's own distance by far more than the `f32` rounding of the box
            // distances (a hundred ulps at the point's scale), so that no box of a nearest
            // triangle is pruned for rounding.
            let cost = (proj.point - q).length();
            cost + 1e-5 * (1.0 + cost + q.abs().max_element())
        } else {
            f32::MAX
        };
        let (proj, (triangle, _)) = self
            .mesh
            .project_local_point_and_get_location_with_max_dist(q, false, bound)
            .unwrap_or_else(|| self.mesh.project_local_point_and_get_location(q, false));
        if triangle != hint {
            self.last.0.store(triangle, Ordering::Relaxed);
        }
        let point = proj.point.as_dvec3();
        let mut normal = self
            .normals
            .get(triangle as usize)
            .copied()
            .unwrap_or(DVec3::Y);
        let inside = self.closed && proj.is_inside;
        if !self.closed && normal.dot(p - point) < 0.0 {
            normal = -normal; // a sheet's side is the side the point is on
        }
        Base {
            point,
            inside,
            normal,
        }
    }
}

/// Whether every edge of `triangles` is shared by exactly two of them, wound in opposite
/// directions (a closed, consistently oriented surface).
fn is_closed(triangles: &[[u32; 3]]) -> bool {
    let mut edges: Vec<(u32, u32)> = triangles
        .iter()
        .flat_map(|t| [(t[0], t[1]), (t[1], t[2]), (t[2], t[0])])
        .collect();
    edges.sort_unstable();
    if edges.windows(2).any(|w| w[0] == w[1]) {
        return false; // two triangles wound the same way along an edge
    }
    edges
        .iter()
        .all(|&(a, b)| edges.binary_search(&(b, a)).is_ok())
}

fn check_size(what: &'static str, value: f64) -> Result<(), ColliderError> {
    if value.is_finite() && value > 0.0 && value < MAX_SIZE {
        Ok(())
    } else {
        Err(ColliderError::BadSize { what, value })
    }
}

fn check_vertices(points: &[DVec3]) -> Result<(), ColliderError> {
    match points
        .iter()
        .position(|p| !(p.is_finite() && p.abs().max_element() < MAX_SIZE))
    {
        Some(index) => Err(ColliderError::BadVertex {
            index,
            vertex: points[index],
        }),
        None => Ok(()),
    }
}

/// A shape's nearest point to a query point.
struct Base {
    /// The nearest point of the shape's surface.
    point: DVec3,
    /// Whether the query point is inside the shape.
    inside: bool,
    /// Outward normal of the surface there, used when the query point is on it.
    normal: DVec3,
}

/// One of the shapes of this module with its dimensions, as [`super::Body`] poses it.
#[derive(Clone, Debug)]
pub(super) enum Query {
    /// Half extents along local X, Y, Z.
    Cuboid(DVec3),
    /// Half height along local Y and radius.
    Cylinder(f64, f64),
    /// Half height along local Y, radius at `-half_height` and at `+half_height`, already grown
    /// by the thickness.
    Tapered(f64, f64, f64),
    Hull(Arc<ConvexHull>),
    Field(Arc<HeightField>),
    Mesh(Arc<TriangleMesh>),
}

/// The most marching steps [`Query::cast`] takes along one segment.
const CAST_STEPS: usize = 32;

/// [`Query::cast`] stops when the segment's point is this close to the surface (metres).
const CAST_TOLERANCE: f64 = 1e-7;

impl Query {
    /// Whether the shape is convex (a tangent plane of the inflated surface keeps the shape on
    /// one side).
    fn convex(&self) -> bool {
        !matches!(self, Query::Field(_) | Query::Mesh(_))
    }

    /// Local half extents of a box around the origin holding the shape.
    pub(super) fn half_extents(&self) -> DVec3 {
        match self {
            Query::Cuboid(e) => *e,
            Query::Cylinder(h, r) => DVec3::new(*r, *h, *r),
            Query::Tapered(h, a, b) => DVec3::new(a.max(*b), h + a.max(*b), a.max(*b)),
            Query::Hull(hull) => hull.half_extents,
            Query::Field(f) => DVec3::new(0.5 * f.data.size.x, f.max_height, 0.5 * f.data.size.y),
            Query::Mesh(m) => m.half_extents,
        }
    }

    fn base(&self, p: DVec3) -> Base {
        match self {
            Query::Cuboid(e) => cuboid_base(*e, p),
            Query::Cylinder(h, r) => cylinder_base(*h, *r, p),
            Query::Tapered(..) => unreachable!("a tapered capsule is grown exactly"),
            Query::Hull(hull) => hull.base(p),
            Query::Field(f) => f.base(p),
            Query::Mesh(m) => m.base(p),
        }
    }

    /// The nearest point of the surface grown by `t`, the outward normal there and the signed
    /// distance of `p` from it (negative inside).
    pub(super) fn surface(&self, p: DVec3, t: f64) -> (DVec3, DVec3, f64) {
        if let Query::Tapered(h, ra, rb) = *self {
            return tapered_surface(h, ra, rb, p);
        }
        let b = self.base(p);
        let d = b.point.distance(p);
        let (n, sd) = if d <= ON_SURFACE {
            (b.normal, if b.inside { -d } else { d })
        } else if b.inside {
            ((b.point - p) / d, -d)
        } else {
            ((p - b.point) / d, d)
        };
        (b.point + t * n, n, sd - t)
    }

    /// First fraction in [0, 1] of the segment `p0 -> p1` on the surface grown by `t`, with the
    /// outward normal there. A convex shape is marched to the tangent plane at the nearest
    /// point (the shape lies behind it, so the march never passes the surface, and it reaches
    /// a flat face in one step); other shapes by the distance (sphere tracing). A segment still
    /// outside after [`CAST_STEPS`] steps counts as missing (a grazing path: the last pass of
    /// contact puts any node that ends inside back on the surface).
    pub(super) fn cast(&self, p0: DVec3, p1: DVec3, t: f64) -> Option<(f64, DVec3)> {
        let d = p1 - p0;
        let len = d.length();
        let mut s = 0.0;
        for _ in 0..CAST_STEPS {
            let p = p0 + s * d;
            let (_, n, sd) = self.surface(p, t);
            if sd <= CAST_TOLERANCE {
                return Some((s, n));
            }
            let step = if self.convex() {
                let closing = -n.dot(d);
                if closing <= 0.0 {
                    return None; // moving away from a plane the shape lies behind
                }
                sd / closing
            } else if len > 0.0 {
                sd / len
            } else {
                return None;
            };
            s += step;
            if s > 1.0 {
                return None;
            }
        }
        None
    }
}

fn cuboid_base(e: DVec3, p: DVec3) -> Base {
    let excess = p.abs() - e;
    let sign = |v: f64| if v < 0.0 { -1.0 } else { 1.0 };
    let axis = |i: usize, s: f64| {
        let mut n = DVec3::ZERO;
        n[i] = s;
        n
    };
    if excess.max_element() > 0.0 {
        let i = excess.max_position();
        return Base {
            point: p.clamp(-e, e),
            inside: false,
            normal: axis(i, sign(p[i])),
        };
    }
    let i = excess.max_position(); // the least deep face
    let mut q = p;
    q[i] = sign(p[i]) * e[i];
    Base {
        point: q,
        inside: true,
        normal: axis(i, sign(p[i])),
    }
}

fn cylinder_base(h: f64, r: f64, p: DVec3) -> Base {
    let rho = DVec2::new(p.x, p.z).length();
    let radial = if rho > 0.0 {
        DVec3::new(p.x / rho, 0.0, p.z / rho)
    } else {
        DVec3::X
    };
    let cap = if p.y < 0.0 { -DVec3::Y } else { DVec3::Y };
    if rho > r || p.y.abs() > h {
        let point = radial * rho.min(r) + DVec3::Y * p.y.clamp(-h, h);
        let normal = if p.y.abs() - h > rho - r { cap } else { radial };
        return Base {
            point,
            inside: false,
            normal,
        };
    }
    if r - rho < h - p.y.abs() {
        Base {
            point: radial * r + DVec3::Y * p.y,
            inside: true,
            normal: radial,
        }
    } else {
        Base {
            point: DVec3::new(p.x, cap.y * h, p.z),
            inside: true,
            normal: cap,
        }
    }
}

/// The surface of the hull of a ball of radius `ra` at local `(0, -h, 0)` and one of radius `rb`
/// at `(0, h, 0)`: nearest point, outward normal and signed distance of `p` (exact inside and
/// out). In the plane of the axis and `p`, with `x` along the axis from the first centre and
/// `y` away from it, the side is the line tangent to both circles, with normal
/// `(sin a, cos a)`, `sin a = (ra - rb) / 2h`; a point whose coordinate along that line is
/// before the first tangent point is nearest the first ball, after the second the second ball.
fn tapered_surface(h: f64, ra: f64, rb: f64, p: DVec3) -> (DVec3, DVec3, f64) {
    let len = 2.0 * h;
    let x = p.y + h;
    let y = DVec2::new(p.x, p.z).length();
    let radial = if y > 0.0 {
        DVec3::new(p.x / y, 0.0, p.z / y)
    } else {
        DVec3::X
    };
    let sin = (ra - rb) / len;
    let cos = (1.0 - sin * sin).sqrt();
    let along = x * cos - y * sin;
    let ball = |centre: DVec3, radius: f64| {
        let v = p - centre;
        let d = v.length();
        let n = if d > 0.0 { v / d } else { radial };
        (centre + radius * n, n, d - radius)
    };
    if along < 0.0 {
        ball(DVec3::new(0.0, -h, 0.0), ra)
    } else if along > len * cos {
        ball(DVec3::new(0.0, h, 0.0), rb)
    } else {
        let n = radial * cos + DVec3::Y * sin;
        let sd = x * sin + y * cos - ra;
        (p - sd * n, n, sd)
    }
}

/// Checks a tapered capsule's sizes: radii and half height finite, positive and under 1 km, and
/// neither ball holding the other (`|ra - rb| < 2 h`).
pub(super) fn check_tapered(h: f64, ra: f64, rb: f64) -> Result<(), ColliderError> {
    check_size("tapered capsule bottom radius", ra)?;
    check_size("tapered capsule top radius", rb)?;
    check_size("tapered capsule half height", h)?;
    if (ra - rb).abs() >= 2.0 * h {
        return Err(ColliderError::TaperTooSteep {
            half_height: h,
            bottom_radius: ra,
            top_radius: rb,
        });
    }
    Ok(())
}

/// Checks a box's half extents.
pub(super) fn check_cuboid(e: DVec3) -> Result<(), ColliderError> {
    for (what, v) in [
        ("box half extent x", e.x),
        ("box half extent y", e.y),
        ("box half extent z", e.z),
    ] {
        check_size(what, v)?;
    }
    Ok(())
}

/// Checks a cylinder's sizes.
pub(super) fn check_cylinder(h: f64, r: f64) -> Result<(), ColliderError> {
    check_size("cylinder half height", h)?;
    check_size("cylinder radius", r)
}

/// The point of triangle `t` nearest `p`.
fn closest_on_triangle(p: DVec3, t: &[DVec3; 3]) -> DVec3 {
    let [u, v, w] = crate::contact::self_contact::closest_on_triangle(p, t[0], t[1], t[2]);
    u * t[0] + v * t[1] + w * t[2]
}
