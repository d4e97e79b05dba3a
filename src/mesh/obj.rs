//! OBJ import: an artist's export as a [`BaseMesh`].
//!
//! The rules, each tested on small files under `tests/corpus/obj_loader/` (`tests/obj.rs`):
//!
//! 1. **Polygons are triangulated in their own plane** ([`triangulate`]), keeping their winding.
//!    A triangle stays as it is. A convex quad is split along its shorter diagonal (the one
//!    from the first corner on a tie); a concave quad along the one diagonal that lies inside
//!    it. A larger polygon, convex or concave, is ear-clipped in the plane of its Newell normal,
//!    taking the best-shaped ear each time: an `n`-gon gives `n - 2` triangles of positive
//!    area that cover it exactly. Corners on a straight stretch of the outline (collinear) are
//!    kept and joined to triangles, so neighbouring faces that use them stay connected.
//! 2. **Only a polygon that is degenerate in itself is refused**, naming the face and its line
//!    ([`ObjError::DegenerateFace`]): fewer than three distinct corners, no area, an outline
//!    that crosses or touches itself, or one so warped out of its plane that it folds over.
//!    Corners repeated in a row (a collapsed edge) count once.
//! 3. **Corners that name the same `v` are one cloth vertex**, whatever their `vt` and `vn`
//!    indices: UV seams and hard normals split only texture and shading, not the cloth.
//! 4. **Distinct `v` at exactly the same position are merged** into one cloth vertex (the first
//!    of them in file order), as exporters that split vertices along UV seams write them, unless
//!    the vertex is listed in [`ObjOptions::keep_open`]: a listed vertex is never merged, so a
//!    slit whose two sides coincide stays open when one side's vertices are listed.
//! 5. **Base vertex `k` is the `k`-th vertex a face uses**, counting merged vertices once, in
//!    the file's `v` order. In a file where every `v` is used and none coincide, OBJ vertex `i`
//!    (0-based: Blender's vertex index) is base vertex `i`. Vertices no face uses are dropped.
//! 6. **Vertex colours** (`v x y z r g b`, as Blender and MeshLab write them) are kept per base
//!    vertex ([`ObjMesh::vertex_colours`]) when every used vertex has one: a painted channel
//!    for per-node values such as max distance ([`ObjMesh::colour_channel`]).
//! 7. Everything else is ignored: texture coordinates and normals, materials, objects and groups
//!    (all faces form one mesh), smoothing groups, lines, points, curves and unknown statements.
//!    A line that does not start with a statement keyword is refused with its number.
//!
//! Faces and vertices are numbered from 0 in file order (as Blender numbers them), lines from 1
//! (as a text editor does). Files over 16 MiB, more than 200,000 vertices or 400,000 triangles
//! (counting `n - 2` for an `n`-gon), polygons of more than 256 corners and coordinates farther
//! than 10 km from the origin are refused, so a file cannot make the loader hang or exhaust
//! memory.

use std::collections::HashMap;
use std::io::{BufRead, Read};

use glam::{DVec2, DVec3, Vec3};

use crate::error::{MeshError, ObjError, PolygonError};
use crate::mesh::BaseMesh;

/// Largest OBJ text accepted, in bytes.
pub const MAX_BYTES: usize = 16 << 20;
/// Most `v` statements accepted.
pub const MAX_VERTICES: usize = 200_000;
/// Most triangles accepted, counted before triangulating (`n - 2` for an `n`-gon): this also
/// bounds the time triangulation takes (about a second at most).
pub const MAX_TRIANGLES: usize = 400_000;
/// Most corners of one polygon.
pub const MAX_CORNERS: usize = 256;
/// Largest coordinate magnitude accepted, in metres.
pub const MAX_COORDINATE: f64 = 1e4;

/// A triangle whose doubled area is at most this times its longest edge squared has no area
/// (ten times stricter than [`crate::ClothMesh::new`], so that what passes here passes there).
const FLAT: f64 = 1e-8;

/// How an OBJ file becomes a base mesh.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjOptions {
    /// OBJ vertices (0-based `v` indices in file order) never merged with others at the same
    /// position: list one side of a slit to keep it open.
    pub keep_open: Vec<u32>,
}

/// A base mesh read from OBJ, with where each of its parts came from in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjMesh {
    /// The mesh.
    pub base: BaseMesh,
    /// For each base triangle, the OBJ face it belongs to.
    pub triangle_faces: Vec<u32>,
    /// For each OBJ face, its line.
    pub face_lines: Vec<u32>,
    /// For each base vertex, the OBJ vertex it was made from (the first of those merged).
    pub vertex_sources: Vec<u32>,
    /// For each OBJ vertex, its line.
    pub vertex_lines: Vec<u32>,
    /// For each base vertex, the colour of the OBJ vertex it was made from (`v x y z r g b`);
    /// `None` unless every used vertex has one.
    pub vertex_colours: Option<Vec<[f32; 3]>>,
}

impl ObjMesh {
    /// Reads OBJ text (at most [`MAX_BYTES`]) and builds the base mesh by the module's rules.
    pub fn read(reader: &mut impl BufRead, options: &ObjOptions) -> Result<Self, ObjError> {
        let mut bytes = Vec::new();
        reader
            .take(MAX_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| ObjError::Io(e.to_string()))?;
        Self::parse(&bytes, options)
    }

    /// Builds the base mesh from OBJ text by the module's rules.
    pub fn parse(text: &[u8], options: &ObjOptions) -> Result<Self, ObjError> {
        if text.len() > MAX_BYTES {
            return Err(ObjError::TooLarge {
                what: "bytes",
                max: MAX_BYTES,
            });
        }
        let file = Statements::parse(text)?;
        file.build(options)
    }

    /// Where in the file the element a [`MeshError`] names came from ("face 4 at line 23"), for
    /// errors about a triangle or a vertex.
    pub fn locate(&self, error: &MeshError) -> Option<String> {
        let face = |t: usize| {
            let f = *self.triangle_faces.get(t)? as usize;
            Some(format!("face {f} at line {}", self.face_lines.get(f)?))
        };
        let vertex = |v: usize| {
            let o = *self.vertex_sources.get(v)? as usize;
            Some(format!(
                "OBJ vertex {o} at line {}",
                self.vertex_lines.get(o)?
            ))
        };
        match *error {
            MeshError::EdgeTooShort { triangle, .. }
            | MeshError::IndexOutOfRange { triangle, .. }
            | MeshError::RepeatedIndex { triangle, .. }
            | MeshError::DegenerateTriangle { triangle }
            | MeshError::NonManifoldEdge { triangle, .. }
            | MeshError::InconsistentWinding { triangle, .. } => face(triangle),
            MeshError::DuplicateTriangle { first, second } => {
                Some(format!("{} and {}", face(first)?, face(second)?))
            }
            MeshError::NonFiniteVertex { vertex: v }
            | MeshError::VertexTooFar { vertex: v, .. }
            | MeshError::NonManifoldVertex { vertex: v }
            | MeshError::UnreferencedVertex { vertex: v } => vertex(v),
            _ => None,
        }
    }

    /// One channel of the vertex colours (0 red, 1 green, 2 blue) times `scale`, per base
    /// vertex: painted per-vertex values, for example a max distance in metres with `scale`
    /// the radius that full intensity means. Spread them to the cloth's nodes with
    /// [`crate::ClothMesh::node_values`]. `None` without colours or for a channel past 2.
    pub fn colour_channel(&self, channel: usize, scale: f32) -> Option<Vec<f32>> {
        let colours = self.vertex_colours.as_ref()?;
        (channel < 3).then(|| colours.iter().map(|c| c[channel] * scale).collect())
    }

    /// `error` followed by where it comes from in the file, when [`ObjMesh::locate`] knows.
    pub fn describe(&self, error: &MeshError) -> String {
        match self.locate(error) {
            Some(at) => format!("{error} ({at})"),
            None => error.to_string(),
        }
    }
}

/// One `f` statement: its line and its corners (0-based vertex indices, checked at the end).
struct Face {
    line: usize,
    corners: std::ops::Range<usize>,
}

/// The statements of an OBJ file that matter: vertices and faces.
#[derive(Default)]
struct Statements {
    vertices: Vec<Vec3>,
    vertex_lines: Vec<u32>,
    /// Per OBJ vertex, its colour if the line gave one.
    colours: Vec<Option<[f32; 3]>>,
    faces: Vec<Face>,
    /// Every face's corners, as written (1-based or negative) and resolved (0-based).
    corners: Vec<(i64, i64)>,
    /// Triangles the faces will make.
    triangles: usize,
}

impl Statements {
    fn parse(text: &[u8]) -> Result<Self, ObjError> {
        let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        let mut file = Statements::default();
        let mut physical = text.split(|&b| b == b'\n').enumerate();
        while let Some((number, first)) = physical.next() {
            let line = number + 1;
            // A backslash at the end of a line continues the statement on the next.
            let mut statement = String::from_utf8_lossy(first).into_owned();
            while statement.trim_end().ends_with('\\') {
                let cut = statement.trim_end().len() - 1;
                statement.truncate(cut);
                statement.push(' ');
                match physical.next() {
                    Some((_, more)) => statement.push_str(&String::from_utf8_lossy(more)),
                    None => break,
                }
            }
            let content = statement.split('#').next().unwrap_or("");
            let mut tokens = content.split_ascii_whitespace();
            let Some(keyword) = tokens.next() else {
                continue;
            };
            match keyword {
                "v" => file.vertex(line, tokens)?,
                "f" => file.face(line, tokens)?,
                _ if keyword
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && keyword.starts_with(|c: char| c.is_ascii_alphabetic()) => {}
                _ => {
                    let shown: String = keyword.chars().take(16).collect();
                    return Err(ObjError::Syntax {
                        line,
                        reason: format!("`{}` is not an OBJ statement", shown.escape_default()),
                    });
                }
            }
        }
        Ok(file)
    }

    fn vertex<'a>(
        &mut self,
        line: usize,
        mut tokens: impl Iterator<Item = &'a str>,
    ) -> Result<(), ObjError> {
        if self.vertices.len() >= MAX_VERTICES {
            return Err(ObjError::TooLarge {
                what: "vertices",
                max: MAX_VERTICES,
            });
        }
        let mut p = [0.0f32; 3];
        let mut written = Vec::with_capacity(3);
        for c in &mut p {
            let token = tokens.next().ok_or_else(|| ObjError::Syntax {
                line,
                reason: "a vertex needs three coordinates".into(),
            })?;
            *c = token.parse().map_err(|_| ObjError::Syntax {
                line,
                reason: format!("`{}` is not a number", token.escape_default()),
            })?;
            written.push(token);
        }
        let p = Vec3::from(p);
        if !p.is_finite() || f64::from(p.abs().max_element()) > MAX_COORDINATE {
            return Err(ObjError::BadVertex {
                line,
                vertex: self.vertices.len(),
                max: MAX_COORDINATE,
                text: written.join(" ").escape_default().to_string(),
            });
        }
        // Three more numbers are a colour (`v x y z r g b`); anything else after the position
        // (a `w`, nothing) is not.
        let rest: Vec<&str> = tokens.take(4).collect();
        let colour = match rest[..] {
            [r, g, b] => match (r.parse::<f32>(), g.parse::<f32>(), b.parse::<f32>()) {
                (Ok(r), Ok(g), Ok(b)) if r.is_finite() && g.is_finite() && b.is_finite() => {
                    Some([r, g, b])
                }
                _ => None,
            },
            _ => None,
        };
        self.vertices.push(p);
        self.vertex_lines.push(line as u32);
        self.colours.push(colour);
        Ok(())
    }

    fn face<'a>(
        &mut self,
        line: usize,
        tokens: impl Iterator<Item = &'a str>,
    ) -> Result<(), ObjError> {
        let face = self.faces.len();
        let start = self.corners.len();
        for token in tokens {
            if self.corners.len() - start >= MAX_CORNERS {
                return Err(ObjError::DegenerateFace {
                    face,
                    line,
                    reason: PolygonError::TooManyCorners {
                        corners: self.corners.len() - start + 1,
                        max: MAX_CORNERS,
                    },
                });
            }
            let v = token.split('/').next().unwrap_or("");
            let written: i64 = v.parse().map_err(|_| ObjError::Syntax {
                line,
                reason: format!("`{}` is not a vertex index", token.escape_default()),
            })?;
            // Positive indices count from 1 over the whole file; negative ones back from the
            // last vertex defined so far.
            let resolved = match written {
                0 => {
                    return Err(ObjError::Syntax {
                        line,
                        reason: "vertex index 0 (OBJ counts from 1)".into(),
                    });
                }
                w if w > 0 => w - 1,
                w => self.vertices.len() as i64 + w,
            };
            self.corners.push((written, resolved));
        }
        let corners = self.corners.len() - start;
        if corners < 3 {
            return Err(ObjError::DegenerateFace {
                face,
                line,
                reason: PolygonError::TooFewCorners { corners },
            });
        }
        self.triangles += corners - 2;
        if self.triangles > MAX_TRIANGLES {
            return Err(ObjError::TooLarge {
                what: "triangles",
                max: MAX_TRIANGLES,
            });
        }
        self.faces.push(Face {
            line,
            corners: start..self.corners.len(),
        });
        Ok(())
    }

    fn build(self, options: &ObjOptions) -> Result<ObjMesh, ObjError> {
        let count = self.vertices.len();
        let mut used = vec![false; count];
        for (f, face) in self.faces.iter().enumerate() {
            for &(written, resolved) in &self.corners[face.corners.clone()] {
                if resolved < 0 || resolved >= count as i64 {
                    return Err(ObjError::IndexOutOfRange {
                        face: f,
                        line: face.line,
                        index: written,
                        count,
                    });
                }
                used[resolved as usize] = true;
            }
        }
        let mut open = vec![false; count];
        for &v in &options.keep_open {
            *open
                .get_mut(v as usize)
                .ok_or(ObjError::NoSuchVertex { vertex: v, count })? = true;
        }
        // Merge used vertices at the same position into the first of them, then number the
        // survivors in file order.
        const UNUSED: u32 = u32::MAX;
        let mut base_of = vec![UNUSED; count];
        let mut first_at: HashMap<[u32; 3], u32> = HashMap::new();
        let mut positions = Vec::new();
        let mut vertex_sources = Vec::new();
        for v in (0..count).filter(|&v| used[v]) {
            let p = self.vertices[v];
            // +0.0 and -0.0 are the same position.
            let key = (p + Vec3::ZERO).to_array().map(f32::to_bits);
            let merged_into = if open[v] {
                None
            } else {
                first_at.get(&key).copied()
            };
            base_of[v] = match merged_into {
                Some(b) => b,
                None => {
                    let b = positions.len() as u32;
                    if !open[v] {
                        first_at.insert(key, b);
                    }
                    positions.push(p);
                    vertex_sources.push(v as u32);
                    b
                }
            };
        }
        let mut triangles = Vec::new();
        let mut triangle_faces = Vec::new();
        let mut polygon: Vec<u32> = Vec::new();
        let mut points: Vec<DVec3> = Vec::new();
        for (f, face) in self.faces.iter().enumerate() {
            polygon.clear();
            polygon.extend(
                self.corners[face.corners.clone()]
                    .iter()
                    .map(|&(_, r)| base_of[r as usize]),
            );
            polygon.dedup();
            while polygon.len() > 1 && polygon.first() == polygon.last() {
                polygon.pop();
            }
            points.clear();
            points.extend(polygon.iter().map(|&b| positions[b as usize].as_dvec3()));
            let degenerate = |reason| ObjError::DegenerateFace {
                face: f,
                line: face.line,
                reason,
            };
            let tris = triangulate(&points).map_err(degenerate)?;
            for t in tris {
                triangles.push(t.map(|k| polygon[k]));
                triangle_faces.push(f as u32);
            }
        }
        let vertex_colours = vertex_sources
            .iter()
            .map(|&v| self.colours[v as usize])
            .collect();
        Ok(ObjMesh {
            base: BaseMesh::new(positions, triangles),
            triangle_faces,
            face_lines: self.faces.iter().map(|f| f.line as u32).collect(),
            vertex_sources,
            vertex_lines: self.vertex_lines,
            vertex_colours,
        })
    }
}

/// Triangulates one polygon (its corners in order, in 3D) in its own plane, by the module's
/// rule 1: returns triangles as corner indices, wound like the polygon, `n - 2` of them, each
/// of positive area, together covering the polygon. A polygon degenerate in itself (rule 2) is
/// refused with the reason. Corners at the same position are refused as a repeated corner.
pub fn triangulate(corners: &[DVec3]) -> Result<Vec<[usize; 3]>, PolygonError> {
    let n = corners.len();
    if n > MAX_CORNERS {
        return Err(PolygonError::TooManyCorners {
            corners: n,
            max: MAX_CORNERS,
        });
    }
    if n < 3 {
        return Err(PolygonError::TooFewCorners { corners: n });
    }
    if corners.iter().any(|c| !c.is_finite()) {
        return Err(PolygonError::NonFinite);
    }
    for (j, c) in corners.iter().enumerate() {
        if corners[..j].contains(c) {
            return Err(PolygonError::RepeatedCorner { corner: j });
        }
    }
    let origin = corners[0];
    let local: Vec<DVec3> = corners.iter().map(|&c| c - origin).collect();
    // Newell's normal: twice the polygon's area along it, for any outline, planar or not.
    let normal: DVec3 = (0..n).map(|i| local[i].cross(local[(i + 1) % n])).sum();
    let extent = local.iter().map(|p| p.length_squared()).fold(0.0, f64::max);
    if normal.length() <= FLAT * extent {
        return Err(PolygonError::ZeroArea);
    }
    // A right-handed frame (u, v, normal): the outline runs counter-clockwise in (u, v).
    let axis = normal.normalize();
    let u = axis.any_orthonormal_vector();
    let v = axis.cross(u);
    let points: Vec<DVec2> = local
        .iter()
        .map(|p| DVec2::new(p.dot(u), p.dot(v)))
        .collect();
    if n > 3 && crosses_itself(&points, extent) {
        return Err(PolygonError::SelfIntersecting);
    }
    let triangles = match n {
        3 => vec![[0, 1, 2]],
        4 => split_quad(&points, corners)?,
        _ => ear_clip(&points)?,
    };
    if !triangles
        .iter()
        .all(|t| solid(points[t[0]], points[t[1]], points[t[2]]))
    {
        return Err(PolygonError::ZeroArea);
    }
    Ok(triangles)
}

/// Whether the closed outline `p` touches or crosses itself: two edges that are not neighbours
/// meet (a corner on another edge counts), or two neighbours fold back onto each other.
fn crosses_itself(p: &[DVec2], extent: f64) -> bool {
    let n = p.len();
    // Orientation of `c` against the line `ab`, zero within rounding at the polygon's scale.
    let side = |a: DVec2, b: DVec2, c: DVec2| {
        let d = twice_area(a, b, c);
        if d.abs() <= 1e-12 * extent {
            0.0
        } else {
            d.signum()
        }
    };
    let on_segment = |a: DVec2, b: DVec2, c: DVec2| {
        side(a, b, c) == 0.0 && c.cmpge(a.min(b)).all() && c.cmple(a.max(b)).all()
    };
    for i in 0..n {
        let (a, b, c) = (p[i], p[(i + 1) % n], p[(i + 2) % n]);
        // A spike: the next edge runs back along this one.
        if side(a, b, c) == 0.0 && (b - a).dot(c - b) < 0.0 {
            return true;
        }
        // Edges i and j that share no corner.
        for j in i + 2..n {
            if (j + 1) % n == i {
                continue;
            }
            let (q, r) = (p[j], p[(j + 1) % n]);
            let (d1, d2) = (side(q, r, a), side(q, r, b));
            let (d3, d4) = (side(a, b, q), side(a, b, r));
            if d1 * d2 < 0.0 && d3 * d4 < 0.0 {
                return true;
            }
            if on_segment(q, r, a)
                || on_segment(q, r, b)
                || on_segment(a, b, q)
                || on_segment(a, b, r)
            {
                return true;
            }
        }
    }
    false
}

fn twice_area(a: DVec2, b: DVec2, c: DVec2) -> f64 {
    (b - a).perp_dot(c - a)
}

fn longest_squared(a: DVec2, b: DVec2, c: DVec2) -> f64 {
    (b - a)
        .length_squared()
        .max((c - b).length_squared())
        .max((a - c).length_squared())
}

/// Counter-clockwise with an area that is not numerically zero.
fn solid(a: DVec2, b: DVec2, c: DVec2) -> bool {
    twice_area(a, b, c) > FLAT * longest_squared(a, b, c)
}

/// A quad along its shorter diagonal (3D lengths), or along the other when only that one lies
/// inside it (a concave quad).
fn split_quad(p: &[DVec2], corners: &[DVec3]) -> Result<Vec<[usize; 3]>, PolygonError> {
    let along_02 = solid(p[0], p[1], p[2]) && solid(p[0], p[2], p[3]);
    let along_13 = solid(p[0], p[1], p[3]) && solid(p[1], p[2], p[3]);
    let shorter_02 =
        corners[0].distance_squared(corners[2]) <= corners[1].distance_squared(corners[3]);
    if along_02 && (shorter_02 || !along_13) {
        Ok(vec![[0, 1, 2], [0, 2, 3]])
    } else if along_13 {
        Ok(vec![[0, 1, 3], [1, 2, 3]])
    } else {
        Err(PolygonError::SelfIntersecting)
    }
}

/// Ear clipping of a counter-clockwise outline: repeatedly cuts off the best-shaped ear (a
/// corner whose triangle with its neighbours is counter-clockwise, not flat, and holds no other
/// corner, even on its boundary).
fn ear_clip(p: &[DVec2]) -> Result<Vec<[usize; 3]>, PolygonError> {
    let n = p.len();
    let mut prev: Vec<usize> = (0..n).map(|i| (i + n - 1) % n).collect();
    let mut next: Vec<usize> = (0..n).map(|i| (i + 1) % n).collect();
    let extent = p.iter().map(|q| q.length_squared()).fold(0.0, f64::max);
    let ear = |i: usize, prev: &[usize], next: &[usize]| -> Option<f64> {
        let (a, b, c) = (p[prev[i]], p[i], p[next[i]]);
        if !solid(a, b, c) {
            return None;
        }
        // Inside or on the triangle, up to rounding at the polygon's scale.
        let tolerance = -1e-12 * extent;
        let mut r = next[next[i]];
        while r != prev[i] {
            let q = p[r];
            if twice_area(a, b, q) >= tolerance
                && twice_area(b, c, q) >= tolerance
                && twice_area(c, a, q) >= tolerance
            {
                return None;
            }
            r = next[r];
        }
        // Shape quality in (0, 1]: 1 for an equilateral triangle.
        let edges = (b - a).length_squared() + (c - b).length_squared() + (a - c).length_squared();
        Some(2.0 * 3f64.sqrt() * twice_area(a, b, c) / edges)
    };
    let mut quality: Vec<Option<f64>> = (0..n).map(|i| ear(i, &prev, &next)).collect();
    let mut alive = vec![true; n];
    let mut triangles = Vec::with_capacity(n - 2);
    // Each cut leaves one corner fewer; the last three form the last triangle.
    for _ in 3..n {
        let best = (0..n)
            .filter(|&i| alive[i])
            .filter_map(|i| quality[i].map(|q| (i, q)))
            .max_by(|x, y| x.1.total_cmp(&y.1))
            .map(|(i, _)| i)
            .ok_or(PolygonError::SelfIntersecting)?;
        let (a, c) = (prev[best], next[best]);
        triangles.push([a, best, c]);
        alive[best] = false;
        next[a] = c;
        prev[c] = a;
        quality[a] = ear(a, &prev, &next);
        quality[c] = ear(c, &prev, &next);
    }
    let last = (0..n)
        .find(|&i| alive[i])
        .ok_or(PolygonError::SelfIntersecting)?;
    triangles.push([prev[last], last, next[last]]);
    Ok(triangles)
}
