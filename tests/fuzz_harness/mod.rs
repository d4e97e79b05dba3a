//! What each fuzz target checks, shared by `fuzz/fuzz_targets/*.rs` (cargo-fuzz) and by
//! `tests/bad_input.rs`, which replays the corpus under `tests/corpus/<target>/` on every test
//! run. A harness panics only on a real bug: a panic inside the crate, or a cloth that accepts
//! input and then holds non-finite positions. Anything refused comes back as
//! [`Outcome::Refused`] with the crate's error message.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use glam::{DVec2, DVec3, Vec2, Vec3};
use isocloth::collision::{ColliderSet, ColliderShape, ConvexHull, Pose, TriangleMesh};
use isocloth::mesh::{BaseMesh, ClothMesh};
use isocloth::obj::{ObjMesh, ObjOptions, triangulate};
use isocloth::{Cloth, Material, SolverSettings};

/// What a harness did with one input.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The input was accepted (and, where it makes a cloth, stepped with finite results).
    Accepted,
    /// The input was refused with this error.
    Refused(String),
}

fn refused(e: impl std::fmt::Display) -> Outcome {
    Outcome::Refused(e.to_string())
}

/// Reads little-endian values off the front of the fuzzer's bytes, zeros once they run out.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn f32(&mut self) -> f32 {
        f32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Steps an accepted cloth a few frames against a capsule and a ground plane and checks that
/// it stays finite (a NaN inside must have been caught and rolled back).
fn step_and_check(mut cloth: Cloth) -> Outcome {
    let mut set = ColliderSet::new();
    let capsule = ColliderShape::Capsule {
        half_height: 0.2,
        radius: 0.1,
    };
    if let Err(e) = set.add(capsule, Pose::from_translation(DVec3::new(0.0, -0.3, 0.0))) {
        return refused(e);
    }
    if let Err(e) = set.add(
        ColliderShape::Plane,
        Pose::from_translation(DVec3::new(0.0, -1.0, 0.0)),
    ) {
        return refused(e);
    }
    for _ in 0..3 {
        if let Err(e) = cloth.step_with(1.0 / 60.0, &set) {
            return refused(e);
        }
        assert!(
            cloth.positions().iter().all(|p| p.is_finite()),
            "an accepted cloth went non-finite and was not recovered"
        );
    }
    Outcome::Accepted
}

/// Settings small enough that a fuzz input steps in well under a millisecond.
fn quick_settings() -> SolverSettings {
    SolverSettings {
        substeps: 1,
        iterations: 3,
        ..Default::default()
    }
}

/// Builds a base mesh from raw bytes (vertex count, raw f32 coordinates that may be NaN,
/// infinite, tiny or huge, raw indices that may be out of range or repeated, an optional raw
/// pattern, then pinned vertex indices), subdivides it and, if accepted, makes a cloth and steps
/// it.
pub fn mesh_builder(data: &[u8]) -> Outcome {
    let mut b = Bytes(data);
    let nv = (b.u8() % 48) as usize;
    let nt = (b.u8() % 64) as usize;
    let flags = b.u8();
    let positions: Vec<Vec3> = (0..nv)
        .map(|_| Vec3::new(b.f32(), b.f32(), b.f32()))
        .collect();
    // Indices reach a little past the vertex count so out-of-range ones occur.
    let span = nv as u32 + 2;
    let triangles: Vec<[u32; 3]> = (0..nt)
        .map(|_| [0, 0, 0].map(|_: u32| u32::from(b.u8()) % span))
        .collect();
    let mut base = BaseMesh::new(positions, triangles);
    if flags & 1 != 0 {
        base.pattern = Some((0..nv).map(|_| Vec2::new(b.f32(), b.f32())).collect());
    }
    let mut pinned = Vec::new();
    while !b.is_empty() && pinned.len() < 8 {
        pinned.push(u32::from(b.u8()) % span);
    }
    let mesh = match ClothMesh::new(&base) {
        Ok(m) => m,
        Err(e) => return refused(e),
    };
    let pins = mesh.nodes_for_vertices(&pinned, flags & 2 != 0);
    match Cloth::from_mesh(mesh, Material::default(), &pins, quick_settings()) {
        Ok(cloth) => step_and_check(cloth),
        Err(e) => refused(e),
    }
}

/// Reads OBJ text (any bytes) into a base mesh by the rules of `isocloth::obj` (n-gons
/// triangulated in their plane, seam vertices merged; a first line `# keep_open 3 4` lists
/// vertices kept open), checks that every triangle is traced to a face, subdivides it and, if
/// accepted and small, makes a cloth and steps it.
pub fn obj_loader(data: &[u8]) -> Outcome {
    let keep_open = data
        .strip_prefix(b"# keep_open ")
        .map(|rest| {
            let line = rest.split(|&b| b == b'\n').next().unwrap_or(b"");
            String::from_utf8_lossy(line)
                .split_ascii_whitespace()
                .filter_map(|t| t.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let obj = match ObjMesh::parse(data, &ObjOptions { keep_open }) {
        Ok(o) => o,
        Err(e) => return refused(e),
    };
    assert_eq!(obj.triangle_faces.len(), obj.base.triangles.len());
    assert_eq!(obj.vertex_sources.len(), obj.base.positions.len());
    check_obj_colliders(&obj);
    let mesh = match ClothMesh::new(&obj.base) {
        Ok(m) => m,
        Err(e) => return refused(obj.describe(&e)),
    };
    if mesh.node_count() > 5_000 {
        // Accepted; too large to step quickly inside a fuzzer.
        return Outcome::Accepted;
    }
    match Cloth::from_mesh(mesh, Material::default(), &[], quick_settings()) {
        Ok(cloth) => step_and_check(cloth),
        Err(e) => refused(e),
    }
}

/// The OBJ as a collider, as a scenario's `obj:` reads it: its triangle mesh and its convex
/// hull are each refused with a typed error or give finite signed distances around it.
fn check_obj_colliders(obj: &ObjMesh) {
    let vertices: Vec<DVec3> = obj.base.positions.iter().map(|p| p.as_dvec3()).collect();
    let shapes = [
        TriangleMesh::new(vertices.clone(), obj.base.triangles.clone())
            .map(|m| ColliderShape::TriMesh(Arc::new(m))),
        ConvexHull::new(vertices.clone()).map(|h| ColliderShape::ConvexHull(Arc::new(h))),
    ];
    for shape in shapes.into_iter().flatten() {
        let mut set = ColliderSet::new();
        let id = set
            .add(shape, Pose::IDENTITY)
            .expect("a built shape is valid");
        for p in vertices.iter().take(8) {
            for q in [*p, *p + DVec3::new(0.01, 0.02, -0.03), *p * 0.5] {
                let d = set.signed_distance(id, q).expect("the collider exists");
                assert!(d.is_finite(), "non-finite distance {d} at {q:?}");
            }
        }
    }
}

/// Triangulates a polygon decoded from raw bytes (3 to 66 corners, as small integer steps or
/// as raw f32 that may be NaN, huge or tiny) and, if accepted, checks the triangulation: n - 2
/// triangles over distinct corners, each wound like the polygon (positive along its Newell
/// normal) and of non-zero area, no two overlapping in the polygon's plane.
pub fn polygon(data: &[u8]) -> Outcome {
    let mut b = Bytes(data);
    let n = 3 + usize::from(b.u8() % 64);
    let raw = b.u8() & 1 != 0;
    let corners: Vec<DVec3> = (0..n)
        .map(|_| {
            if raw {
                DVec3::new(b.f32().into(), b.f32().into(), b.f32().into())
            } else {
                let step = |v: u8| f64::from(v as i8) / 8.0;
                DVec3::new(step(b.u8()), step(b.u8()), step(b.u8()) / 4.0)
            }
        })
        .collect();
    let triangles = match triangulate(&corners) {
        Ok(t) => t,
        Err(e) => return refused(e),
    };
    assert_eq!(triangles.len(), n - 2, "{corners:?}");
    let normal: DVec3 = (0..n)
        .map(|i| (corners[i] - corners[0]).cross(corners[(i + 1) % n] - corners[0]))
        .sum();
    let axis = normal.normalize();
    let (u, v) = (
        axis.any_orthonormal_vector(),
        axis.cross(axis.any_orthonormal_vector()),
    );
    let flat: Vec<DVec2> = corners
        .iter()
        .map(|&c| DVec2::new((c - corners[0]).dot(u), (c - corners[0]).dot(v)))
        .collect();
    for t in &triangles {
        assert!(t.iter().all(|&k| k < n) && t[0] != t[1] && t[1] != t[2] && t[0] != t[2]);
        let [a, b, c] = t.map(|k| flat[k]);
        assert!(
            (b - a).perp_dot(c - a) > 0.0,
            "{t:?} is flat or wound backwards: {corners:?}"
        );
    }
    for (i, s) in triangles.iter().enumerate() {
        for t in &triangles[i + 1..] {
            assert!(
                !overlap(s.map(|k| flat[k]), t.map(|k| flat[k])),
                "{s:?} and {t:?} overlap: {corners:?}"
            );
        }
    }
    Outcome::Accepted
}

/// Whether two counter-clockwise triangles share interior area: no edge of either separates
/// them by more than rounding (separating axis test; shared edges and corners do not count).
fn overlap(s: [DVec2; 3], t: [DVec2; 3]) -> bool {
    let scale = s
        .iter()
        .chain(&t)
        .map(|p| p.length_squared())
        .fold(1e-300, f64::max);
    let separates = |tri: [DVec2; 3], other: [DVec2; 3]| {
        (0..3).any(|k| {
            let (a, b) = (tri[k], tri[(k + 1) % 3]);
            other
                .iter()
                .all(|&p| (b - a).perp_dot(p - a) <= 1e-9 * scale)
        })
    };
    !separates(s, t) && !separates(t, s)
}

/// Loads scenario text (any bytes; OBJ paths resolve against a directory that does not exist)
/// and, if accepted, runs its first two frames.
pub fn scenario_loader(data: &[u8]) -> Outcome {
    let Ok(text) = std::str::from_utf8(data) else {
        return Outcome::Refused("not UTF-8".into());
    };
    let mut loaded = match isocloth::scenario::load(text, Path::new("/nonexistent-isocloth-dir")) {
        Ok(l) => l,
        Err(e) => return refused(e),
    };
    loaded.truncate_frames(2);
    match loaded.run(None) {
        Ok((_, _, summary)) => {
            assert_eq!(
                summary.nan_frames, 0,
                "a loaded scenario produced NaN frames"
            );
            Outcome::Accepted
        }
        Err(e) => refused(e),
    }
}

/// Parses a budget preset and a whole cloth configuration from RON text (any bytes).
pub fn preset_loader(data: &[u8]) -> Outcome {
    let Ok(text) = std::str::from_utf8(data) else {
        return Outcome::Refused("not UTF-8".into());
    };
    let preset = isocloth::ecs::BudgetPreset::from_ron(text);
    let config = isocloth::ecs::ClothConfig::from_ron(text);
    match (preset, config) {
        (Err(a), Err(b)) => Outcome::Refused(format!("{a}; {b}")),
        _ => Outcome::Accepted,
    }
}

/// Restores a cloth from a JSON snapshot (any bytes) and steps it. A snapshot that does not
/// fit the cloth must be refused and leave the cloth as it was.
pub fn snapshot_restore(data: &[u8]) -> Outcome {
    let Ok(snapshot) = serde_json::from_slice::<isocloth::ClothSnapshot>(data) else {
        return Outcome::Refused("not a snapshot".into());
    };
    let mut cloth = snapshot_cloth();
    let before = cloth.fingerprint();
    let positions = cloth.positions().to_vec();
    match cloth.restore(&snapshot) {
        Ok(()) => step_and_check(cloth),
        Err(e) => {
            assert_eq!(cloth.fingerprint(), before);
            assert_eq!(
                cloth.positions(),
                &positions[..],
                "a refused snapshot changed the cloth"
            );
            refused(e)
        }
    }
}

/// The cloth [`snapshot_restore`] restores into: a 4x4-cell sheet pinned on its top edge.
pub fn snapshot_cloth() -> Cloth {
    let base = BaseMesh::rectangle(0.4, 0.4, 4, 4).expect("valid rectangle");
    let mesh = ClothMesh::new(&base).expect("valid mesh");
    let top: Vec<u32> = (0..5).map(|i| 4 * 5 + i).collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    Cloth::from_mesh(mesh, Material::default(), &pins, quick_settings()).expect("valid cloth")
}

/// Replays every file of `tests/corpus/<target>/` through `harness`. Files whose names start
/// with `bad_` must be refused; every other file must simply not panic.
pub fn replay(target: &str, harness: fn(&[u8]) -> Outcome) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(target);
    let mut count = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let data = std::fs::read(&path).expect("corpus file");
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let outcome = std::panic::catch_unwind(|| harness(&data))
            .unwrap_or_else(|_| panic!("{target}/{name} panicked"));
        if name.starts_with("bad_") {
            assert!(
                matches!(outcome, Outcome::Refused(_)),
                "{target}/{name} was accepted"
            );
        }
        count += 1;
    }
    count
}
