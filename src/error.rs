//! Typed errors for everything a user or an asset file can get wrong.
//!
//! Each variant names the offending element (a triangle, a vertex, an edge, a setting) so that a
//! tool can point an artist at it. Nothing in the crate panics on bad input; it returns one of these.

use thiserror::Error;

/// A base mesh that cannot be turned into a cloth.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum MeshError {
    /// The mesh has no triangles.
    #[error("mesh has no triangles")]
    NoTriangles,
    /// The mesh has more vertices or triangles than the crate's `u32` indices can address.
    #[error("mesh is too large: {count} {what} (at most {max})")]
    TooLarge {
        /// What overflowed ("vertices", "triangles", "nodes").
        what: &'static str,
        /// How many there were.
        count: usize,
        /// The largest supported count.
        max: usize,
    },
    /// A vertex position is NaN or infinite.
    #[error("vertex {vertex} has a non-finite position")]
    NonFiniteVertex {
        /// Index of the vertex.
        vertex: usize,
    },
    /// A vertex (or pattern coordinate) lies farther from the origin than
    /// [`crate::mesh::MAX_COORDINATE`] (100 km): almost certainly a unit or export error, and
    /// beyond what f32 render positions resolve at cloth scale.
    #[error("vertex {vertex} lies {distance} m from the origin (at most 1e5 m)")]
    VertexTooFar {
        /// Index of the vertex.
        vertex: usize,
        /// Its largest coordinate's magnitude.
        distance: f32,
    },
    /// A triangle has an edge shorter than [`crate::mesh::MIN_EDGE`] (1 micrometre) in its rest
    /// shape.
    #[error("triangle {triangle} has a rest edge of {length} m (at least 1e-6 m)")]
    EdgeTooShort {
        /// Index of the triangle.
        triangle: usize,
        /// The edge's rest length.
        length: f64,
    },
    /// A pattern (2D rest) coordinate is NaN or infinite.
    #[error("pattern coordinate {vertex} is not finite")]
    NonFinitePattern {
        /// Index of the vertex.
        vertex: usize,
    },
    /// The pattern has a different number of coordinates than the mesh has vertices.
    #[error("pattern has {found} coordinates but the mesh has {expected} vertices")]
    PatternMismatch {
        /// Number of mesh vertices.
        expected: usize,
        /// Number of pattern coordinates given.
        found: usize,
    },
    /// A triangle refers to a vertex that does not exist.
    #[error(
        "triangle {triangle} refers to vertex {index}, but the mesh has {vertex_count} vertices"
    )]
    IndexOutOfRange {
        /// Index of the triangle.
        triangle: usize,
        /// The bad vertex index.
        index: u32,
        /// Number of vertices in the mesh.
        vertex_count: usize,
    },
    /// A triangle uses the same vertex twice.
    #[error("triangle {triangle} repeats vertex {index}")]
    RepeatedIndex {
        /// Index of the triangle.
        triangle: usize,
        /// The repeated vertex index.
        index: u32,
    },
    /// A triangle has (numerically) zero area in its rest shape.
    #[error("triangle {triangle} has zero area in its rest shape")]
    DegenerateTriangle {
        /// Index of the triangle.
        triangle: usize,
    },
    /// Two triangles use the same three vertices.
    #[error("triangles {first} and {second} use the same three vertices")]
    DuplicateTriangle {
        /// The earlier triangle.
        first: usize,
        /// The later triangle.
        second: usize,
    },
    /// An edge is shared by more than two triangles.
    #[error(
        "edge ({a}, {b}) is shared by more than two triangles (triangle {triangle} is the third)"
    )]
    NonManifoldEdge {
        /// First vertex of the edge.
        a: u32,
        /// Second vertex of the edge.
        b: u32,
        /// The third triangle found on the edge.
        triangle: usize,
    },
    /// Two triangles sharing an edge traverse it in the same direction (inconsistent winding).
    #[error("triangle {triangle} is wound against its neighbour across edge ({a}, {b})")]
    InconsistentWinding {
        /// The triangle found to disagree with an earlier neighbour.
        triangle: usize,
        /// First vertex of the shared edge.
        a: u32,
        /// Second vertex of the shared edge.
        b: u32,
    },
    /// The triangles around a vertex do not form a single fan (a "bow-tie" vertex).
    #[error("vertex {vertex} is non-manifold: its triangles do not form a single fan")]
    NonManifoldVertex {
        /// Index of the vertex.
        vertex: usize,
    },
    /// A vertex belongs to no triangle; it would be a massless, unconstrained node.
    #[error("vertex {vertex} is not used by any triangle")]
    UnreferencedVertex {
        /// Index of the vertex.
        vertex: usize,
    },
    /// A generator was asked for an impossible shape.
    #[error("invalid generator parameter: {0}")]
    InvalidGenerator(String),
}

/// An error building or driving a [`Cloth`](crate::Cloth).
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ClothError {
    /// The mesh is invalid.
    #[error(transparent)]
    Mesh(#[from] MeshError),
    /// A setting is out of its valid range.
    #[error("invalid setting `{name}`: {reason}")]
    InvalidSetting {
        /// Name of the setting, as in the struct field.
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A node index is out of range.
    #[error("node {node} does not exist (the cloth has {node_count} nodes)")]
    NodeOutOfRange {
        /// The bad node index.
        node: usize,
        /// Number of nodes in the cloth.
        node_count: usize,
    },
    /// A pin target or other per-frame input is NaN or infinite.
    #[error("non-finite input for node {node}")]
    NonFiniteInput {
        /// The node whose input was not finite.
        node: usize,
    },
    /// The number of values does not match what is expected.
    #[error("expected {expected} {what}, got {found}")]
    LengthMismatch {
        /// What was counted.
        what: &'static str,
        /// Expected count.
        expected: usize,
        /// Count given.
        found: usize,
    },
    /// A per-node value out of its range (a painted radius, a distance).
    #[error("{what}[{index}] = {value}: {reason}")]
    BadNodeValue {
        /// The per-node array, as in the settings field.
        what: &'static str,
        /// The node (index into the array).
        index: usize,
        /// The value found.
        value: f64,
        /// What it must be.
        reason: &'static str,
    },
    /// The system matrix could not be factored (it should always be positive definite; this
    /// points at absurd weights or masses).
    #[error("the system matrix could not be factored: {0}")]
    Factorization(String),
    /// A snapshot taken from a cloth of another mesh (or another pin set).
    #[error("snapshot does not fit this cloth: {reason}")]
    SnapshotMismatch {
        /// What differs.
        reason: String,
    },
}

/// Why a polygon cannot be triangulated: it is degenerate in itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum PolygonError {
    /// Fewer than three distinct corners (after corners repeated in a row count once).
    #[error("has {corners} distinct corners (at least 3)")]
    TooFewCorners {
        /// Distinct corners found.
        corners: usize,
    },
    /// More corners than the triangulation accepts.
    #[error("has {corners} corners (at most {max})")]
    TooManyCorners {
        /// Corners found.
        corners: usize,
        /// The largest accepted count.
        max: usize,
    },
    /// A corner that is not neighbour to itself comes back later: the outline touches itself.
    #[error("passes through corner {corner} twice")]
    RepeatedCorner {
        /// Position of the repeated corner in the polygon (0-based).
        corner: usize,
    },
    /// A corner coordinate is NaN or infinite.
    #[error("has a non-finite corner")]
    NonFinite,
    /// The polygon encloses (numerically) no area: its corners lie on one line or one point.
    #[error("has zero area")]
    ZeroArea,
    /// The outline crosses itself, or folds over when projected into its own plane (a strongly
    /// warped polygon).
    #[error("crosses itself (or folds over in its own plane)")]
    SelfIntersecting,
}

/// An OBJ file that cannot become a base mesh. Lines are numbered from 1 as in a text editor;
/// faces and vertices from 0 in file order (Blender's indices).
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ObjError {
    /// The text could not be read.
    #[error("{0}")]
    Io(String),
    /// A statement could not be parsed.
    #[error("line {line}: {reason}")]
    Syntax {
        /// Line of the statement.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A vertex is NaN, infinite or absurdly far from the origin.
    #[error("line {line}: vertex {vertex} is not finite or lies farther than {max} m: {text}")]
    BadVertex {
        /// Line of the `v` statement.
        line: usize,
        /// Index of the vertex (0-based, in file order).
        vertex: usize,
        /// The largest accepted coordinate magnitude.
        max: f64,
        /// The coordinates as written.
        text: String,
    },
    /// A face corner names a vertex that does not exist.
    #[error(
        "face {face} (line {line}) refers to vertex {index}, but the file has {count} vertices"
    )]
    IndexOutOfRange {
        /// Index of the face (0-based, in file order).
        face: usize,
        /// Line of the `f` statement.
        line: usize,
        /// The index as written (1-based, or negative counted back from the last vertex).
        index: i64,
        /// Vertices in the file.
        count: usize,
    },
    /// A face is degenerate in itself.
    #[error("face {face} (line {line}) {reason}")]
    DegenerateFace {
        /// Index of the face (0-based, in file order).
        face: usize,
        /// Line of the `f` statement.
        line: usize,
        /// What is wrong with the polygon.
        reason: PolygonError,
    },
    /// A vertex listed to be kept open does not exist.
    #[error("keep_open vertex {vertex} does not exist (the file has {count} vertices)")]
    NoSuchVertex {
        /// The listed index (0-based).
        vertex: u32,
        /// Vertices in the file.
        count: usize,
    },
    /// The file is larger than the loader accepts.
    #[error("too large: more than {max} {what}")]
    TooLarge {
        /// What overflowed ("bytes", "vertices", "triangles").
        what: &'static str,
        /// The largest accepted count.
        max: usize,
    },
}

/// A settings file (RON) that could not be read: where, and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{line}:{column}: {}{message}", field_prefix(.path))]
pub struct RonError {
    /// Line of the value at fault, from 1.
    pub line: usize,
    /// Column of the value at fault, from 1.
    pub column: usize,
    /// Path of fields to the value (`colliders[2].shape.Sphere.radius`); empty at the top.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl RonError {
    pub(crate) fn new(e: ron::error::SpannedError, path: impl Into<String>) -> Self {
        Self {
            line: e.span.start.line,
            column: e.span.start.col,
            path: path.into(),
            message: e.code.to_string(),
        }
    }
}

fn field_prefix(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{path}: ")
    }
}

/// `Ok` if the setting `name` is finite and above zero, else a typed error naming it.
pub(crate) fn positive(name: &'static str, v: f64) -> Result<(), ClothError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(ClothError::InvalidSetting {
            name,
            reason: format!("must be positive and finite, got {v}"),
        })
    }
}

/// `Ok` if the setting `name` is finite and not negative, else a typed error naming it.
pub(crate) fn non_negative(name: &'static str, v: f64) -> Result<(), ClothError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(ClothError::InvalidSetting {
            name,
            reason: format!("must be non-negative and finite, got {v}"),
        })
    }
}
