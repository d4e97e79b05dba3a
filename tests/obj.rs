//! OBJ import as artists export it: each rule of `isocloth::obj` on a small file under
//! `tests/corpus/obj_loader/` (the OBJ fuzz target's seeds), and the triangulation on random
//! simple polygons.

use std::path::Path;

use glam::{DVec2, DVec3};
use isocloth::obj::{ObjMesh, ObjOptions, triangulate};
use isocloth::{ClothMesh, MeshError, ObjError, PolygonError};
use proptest::prelude::*;

fn corpus(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus/obj_loader")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn load(name: &str) -> Result<ObjMesh, ObjError> {
    ObjMesh::parse(&corpus(name), &ObjOptions::default())
}

/// Twice the signed area of triangle `abc` in the x-y plane.
fn cross(a: DVec2, b: DVec2, c: DVec2) -> f64 {
    (b - a).perp_dot(c - a)
}

/// Checks that `triangles` (indices into `outline`, a simple counter-clockwise polygon in the
/// x-y plane) are `n - 2` counter-clockwise triangles of positive area whose areas add up to the
/// polygon's, and that every sample point strictly inside the polygon lies in exactly one of
/// them (away from edges by `margin`): they cover it without overlap.
fn assert_covers(outline: &[DVec2], triangles: &[[usize; 3]], margin: f64) {
    let n = outline.len();
    assert_eq!(triangles.len(), n - 2, "{triangles:?}");
    let polygon: f64 = (0..n)
        .map(|i| outline[i].perp_dot(outline[(i + 1) % n]))
        .sum();
    let mut sum = 0.0;
    for t in triangles {
        let a = cross(outline[t[0]], outline[t[1]], outline[t[2]]);
        assert!(a > 0.0, "triangle {t:?} has area {a}");
        sum += a;
    }
    assert!(
        (sum - polygon).abs() <= 1e-9 * polygon,
        "{sum} != {polygon}"
    );
    let (lo, hi) = outline
        .iter()
        .fold((DVec2::INFINITY, -DVec2::INFINITY), |(l, h), &p| {
            (l.min(p), h.max(p))
        });
    let inside_polygon = |p: DVec2| {
        // Even-odd rule, and the point must be farther than `margin` from every edge.
        let mut inside = false;
        for i in 0..n {
            let (a, b) = (outline[i], outline[(i + 1) % n]);
            let d = b - a;
            let s = ((p - a).dot(d) / d.length_squared()).clamp(0.0, 1.0);
            if (a + s * d).distance(p) < margin {
                return None;
            }
            if (a.y > p.y) != (b.y > p.y) && p.x < a.x + (p.y - a.y) / (b.y - a.y) * (b.x - a.x) {
                inside = !inside;
            }
        }
        Some(inside)
    };
    let steps = 60;
    for i in 0..=steps {
        for j in 0..=steps {
            let p = lo + (hi - lo) * DVec2::new(i as f64, j as f64) / steps as f64;
            let Some(inside) = inside_polygon(p) else {
                continue;
            };
            let holders = triangles
                .iter()
                .filter(|t| {
                    let [a, b, c] = t.map(|k| outline[k]);
                    cross(a, b, p) > 0.0 && cross(b, c, p) > 0.0 && cross(c, a, p) > 0.0
                })
                .count();
            let near_a_diagonal = triangles.iter().any(|t| {
                (0..3).any(|k| {
                    let (a, b) = (outline[t[k]], outline[t[(k + 1) % 3]]);
                    let d = b - a;
                    let s = ((p - a).dot(d) / d.length_squared()).clamp(0.0, 1.0);
                    (a + s * d).distance(p) < margin
                })
            });
            if !near_a_diagonal {
                assert_eq!(holders, usize::from(inside), "point {p} ({inside})");
            }
        }
    }
}

/// The file: four quads around a concave 7-gon with a notch, written as Blender writes
/// it (texture coordinates, normals, object, material, smoothing group). The 7-gon gives 5
/// triangles of positive area that cover it exactly (no overlap, no gap, sampled on a 61 x 61
/// grid), each quad 2, and the whole mesh is a valid cloth (was: "triangle 12 has zero area").
#[test]
fn concave_heptagon_gives_five_triangles_covering_it() {
    let obj = load("ngon_notched_heptagon.obj").unwrap();
    assert_eq!(obj.base.triangles.len(), 5 + 4 * 2);
    assert_eq!(obj.base.positions.len(), 15);
    // The 7-gon's corners in its own order.
    let outline: Vec<DVec2> = [
        (0.0, 0.0),
        (3.0, 0.0),
        (3.0, 2.0),
        (2.0, 2.0),
        (1.5, 1.0),
        (1.0, 2.0),
        (0.0, 2.0),
    ]
    .map(|(x, y)| DVec2::new(x, y))
    .to_vec();
    // Base vertex k is OBJ vertex k here (rule 5), so face 0's triangles index the outline.
    let flat: Vec<[usize; 3]> = obj
        .base
        .triangles
        .iter()
        .zip(&obj.triangle_faces)
        .filter(|(_, f)| **f == 0)
        .map(|(t, _)| t.map(|v| v as usize))
        .collect();
    assert_covers(&outline, &flat, 1e-6);
    ClothMesh::new(&obj.base).unwrap();
}

/// A convex 8-gon gives 6 triangles covering it; an L-shaped 9-gon with three corners on
/// straight stretches of its outline keeps all nine (7 triangles, each of positive area).
#[test]
fn convex_and_collinear_ngons_are_covered() {
    for (file, corners) in [
        ("ngon_convex_octagon.obj", 8),
        ("ngon_collinear_corners.obj", 9),
    ] {
        let obj = load(file).unwrap();
        let outline: Vec<DVec2> = obj
            .base
            .positions
            .iter()
            .map(|p| p.truncate().as_dvec2())
            .collect();
        assert_eq!(outline.len(), corners, "{file}");
        let triangles: Vec<[usize; 3]> = obj
            .base
            .triangles
            .iter()
            .map(|t| t.map(|v| v as usize))
            .collect();
        assert_covers(&outline, &triangles, 1e-6);
        ClothMesh::new(&obj.base).unwrap();
    }
}

/// Convex quads are split along the shorter diagonal, whichever corner it starts from; a
/// concave quad (an arrowhead) along the one diagonal inside it, even though it is the longer.
#[test]
fn quads_split_along_the_shorter_diagonal_inside() {
    let obj = load("quad_shorter_diagonal.obj").unwrap();
    let uses_edge = |t: &[u32; 3], a: u32, b: u32| t.contains(&a) && t.contains(&b);
    assert!(obj.base.triangles[..2].iter().all(|t| uses_edge(t, 1, 3)));
    assert!(obj.base.triangles[2..].iter().all(|t| uses_edge(t, 4, 6)));
    let dart = load("quad_concave_dart.obj").unwrap();
    assert!(dart.base.triangles.iter().all(|t| uses_edge(t, 1, 3)));
    for obj in [&obj, &dart] {
        ClothMesh::new(&obj.base).unwrap();
    }
}

/// Corners naming the same `v` with different texture coordinates are one cloth vertex (6
/// vertices, the seam edge shared by both quads). Distinct `v` at the same position are merged
/// the same way, unless one side is listed in `keep_open`: then the seam stays open (8
/// vertices, no vertex shared between the two quads).
#[test]
fn seams_are_merged_unless_kept_open() {
    let shared = load("seam_uv_split.obj").unwrap();
    assert_eq!(shared.base.positions.len(), 6);
    let merged = load("seam_duplicated_vertices.obj").unwrap();
    assert_eq!(merged.base.positions.len(), 6);
    for obj in [&shared, &merged] {
        let mesh = ClothMesh::new(&obj.base).unwrap();
        // Two quads sharing one edge: 4 + 4 - 1 sides and 2 diagonals.
        assert_eq!(mesh.edges().len(), 9, "the seam edge is shared");
    }
    let open = ObjMesh::parse(
        &corpus("seam_duplicated_vertices.obj"),
        &ObjOptions {
            keep_open: vec![6, 7],
        },
    )
    .unwrap();
    assert_eq!(open.base.positions.len(), 8);
    let first: Vec<u32> = open.base.triangles[..2].concat();
    assert!(
        open.base.triangles[2..]
            .iter()
            .flatten()
            .all(|v| !first.contains(v))
    );
    assert_eq!(ClothMesh::new(&open.base).unwrap().edges().len(), 10);
    let missing = ObjMesh::parse(
        &corpus("seam_duplicated_vertices.obj"),
        &ObjOptions { keep_open: vec![8] },
    );
    assert_eq!(
        missing.unwrap_err(),
        ObjError::NoSuchVertex {
            vertex: 8,
            count: 8
        }
    );
}

/// A polygon degenerate in itself is refused with its face number (0-based) and line: corners
/// on one line (zero area), a crossing outline (a pentagram, a bow-tie quad), an outline that
/// passes through one corner twice.
#[test]
fn degenerate_polygons_are_refused_with_face_and_line() {
    let cases = [
        ("bad_ngon_collinear.obj", 1, 9, PolygonError::ZeroArea),
        (
            "bad_ngon_self_intersecting.obj",
            0,
            7,
            PolygonError::SelfIntersecting,
        ),
        ("bad_quad_bowtie.obj", 0, 6, PolygonError::SelfIntersecting),
        (
            "bad_ngon_touches_itself.obj",
            0,
            7,
            PolygonError::RepeatedCorner { corner: 3 },
        ),
    ];
    for (file, face, line, reason) in cases {
        let err = load(file).unwrap_err();
        assert_eq!(
            err,
            ObjError::DegenerateFace { face, line, reason },
            "{file}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&format!("face {face} (line {line})")),
            "{text}"
        );
    }
}

/// What the cloth mesh refuses after triangulation is traced back to the OBJ face and line
/// (inconsistent winding: face 1, line 6) or vertex and line.
#[test]
fn mesh_errors_name_the_obj_face_and_line() {
    let obj = load("bad_inconsistent_winding.obj").unwrap();
    let err = ClothMesh::new(&obj.base).unwrap_err();
    assert!(matches!(err, MeshError::InconsistentWinding { .. }));
    assert_eq!(obj.locate(&err).as_deref(), Some("face 1 at line 6"));
    let text = obj.describe(&err);
    assert!(text.ends_with("(face 1 at line 6)"), "{text}");
}

/// Statements are read as OBJ writes them: comments, a backslash continuing a statement,
/// negative (relative) indices, `v` with colours, unknown keywords ignored; a line that is not
/// a statement, a vertex index 0, a face with two corners and a missing coordinate are refused
/// with their line.
#[test]
fn statements_parse_with_their_lines() {
    let text = b"# comment\nv 0 0 0 1 0 0\nv 1 0 0 # trailing\nv 1 1 \\\n 0\nvp 0.5\n\
                 cstype bezier\nf -3 -2 \\\n -1\n";
    let obj = ObjMesh::parse(text, &ObjOptions::default()).unwrap();
    assert_eq!(obj.base.triangles, vec![[0, 1, 2]]);
    assert_eq!(obj.face_lines, vec![8]);
    assert_eq!(obj.vertex_lines, vec![2, 3, 4]);
    let refused = [
        (&b"v 0 0 0\n%%% 1\n"[..], 2),
        (b"v 0 0 0\nv 1 0 0\nv 0 1 0\nf 0 1 2\n", 4),
        (b"v 0 0 0\nv 1 0 0\n\nf 1 2\n", 4),
        (b"v 0 0\n", 1),
        (b"v 0 0 x\n", 1),
        (b"v 0 0 1e30\n", 1),
    ];
    for (text, line) in refused {
        let err = ObjMesh::parse(text, &ObjOptions::default()).unwrap_err();
        assert!(
            err.to_string().contains(&format!("line {line}")),
            "{err} does not name line {line}"
        );
    }
}

/// A star-shaped simple polygon around the origin: corners at increasing angles with random
/// radii, some preceded by an extra corner halfway from the previous one (collinear with both).
fn star(radii: &[f64], gaps: &[f64], collinear: &[bool]) -> Vec<DVec2> {
    let total: f64 = gaps.iter().sum();
    let mut angle = 0.0;
    let mut points: Vec<DVec2> = Vec::new();
    for (i, (&r, &g)) in radii.iter().zip(gaps).enumerate() {
        points.push(r * DVec2::from_angle(angle * std::f64::consts::TAU / total));
        angle += g;
        if collinear[i] && points.len() >= 2 {
            let n = points.len();
            let (a, b) = (points[n - 2], points[n - 1]);
            points.push(a.lerp(b, 0.5));
            points.swap(n - 1, n);
        }
    }
    points
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Random simple polygons (star-shaped, convex or concave, 3 to 40 corners, some collinear
    /// on straight stretches, tilted out of the x-y plane) give n - 2 triangles of positive
    /// area, wound like the polygon, that cover it without overlap.
    #[test]
    fn random_simple_polygons_are_covered(
        spec in prop::collection::vec((0.2f64..2.0, 0.5f64..1.0, prop::bool::weighted(0.2)), 3..40),
        tilt in 0.0f64..1.2,
    ) {
        let radii: Vec<f64> = spec.iter().map(|s| s.0).collect();
        let gaps: Vec<f64> = spec.iter().map(|s| s.1).collect();
        let collinear: Vec<bool> = spec.iter().map(|s| s.2).collect();
        let outline = star(&radii, &gaps, &collinear);
        let rotation = glam::DQuat::from_rotation_x(tilt);
        let corners: Vec<DVec3> = outline.iter().map(|p| rotation * p.extend(0.0)).collect();
        match triangulate(&corners) {
            Ok(triangles) => assert_covers(&outline, &triangles, 1e-6),
            // Only a polygon that is degenerate in itself may be refused. With radii of at
            // least 0.2 and every gap under half a turn (each at most twice any other), each of
            // these is star-shaped about the origin, hence simple and of positive area.
            Err(e) => prop_assert!(false, "{e}: {outline:?}"),
        }
    }
}

/// Triangles are counted before any polygon is triangulated: a 1.6 MB file of 1,600 copies of
/// one 256-gon (406,400 triangles, over the 400,000 accepted) is refused, in under a second,
/// before triangulating (a 16 MiB file of them took 12 s to triangulate without the cap).
#[test]
fn too_many_triangles_are_refused_before_triangulating() {
    let mut text = String::new();
    for k in 0..256 {
        let a = std::f64::consts::TAU * f64::from(k) / 256.0;
        text.push_str(&format!("v {} {} 0\n", a.cos(), a.sin()));
    }
    let face: String = (1..=256).map(|i| format!(" {i}")).collect();
    for _ in 0..1600 {
        text.push_str(&format!("f{face}\n"));
    }
    let start = std::time::Instant::now();
    let err = ObjMesh::parse(text.as_bytes(), &ObjOptions::default()).unwrap_err();
    assert_eq!(
        err,
        ObjError::TooLarge {
            what: "triangles",
            max: isocloth::obj::MAX_TRIANGLES
        }
    );
    assert!(start.elapsed().as_secs_f64() < 1.0, "{:?}", start.elapsed());
}

/// Rule 6: `v x y z r g b` colours are kept per base vertex (merged seam vertices keep the first
/// one's), one channel times a scale gives per-vertex values, and `ClothMesh::node_values`
/// spreads them to the nodes (a red node takes the mean of its edge's ends, exactly). A file
/// where one used vertex has no colour has none.
#[test]
fn vertex_colours_give_a_painted_channel() {
    let text = b"v 0 0 0 1 0 0\nv 1 0 0 0.5 0 0\nv 0 1 0 0 0 0\nv 1 1 0 0.25 0 1\nf 1 2 4 3\n";
    let obj = ObjMesh::parse(text, &ObjOptions::default()).unwrap();
    let colours = obj.vertex_colours.as_ref().unwrap();
    assert_eq!(colours[3], [0.25, 0.0, 1.0]);
    let red = obj.colour_channel(0, 0.4).unwrap();
    assert_eq!(red, vec![0.4, 0.2, 0.0, 0.1]);
    assert!(obj.colour_channel(3, 1.0).is_none());
    let mesh = ClothMesh::new(&obj.base).unwrap();
    let nodes = mesh.node_values(&red).unwrap();
    assert_eq!(nodes.len(), mesh.node_count());
    assert_eq!(&nodes[..4], &red[..]);
    for (e, &[a, b]) in mesh.edges().iter().enumerate() {
        let mid = nodes[mesh.red_node(e as u32).unwrap() as usize];
        assert_eq!(mid, 0.5 * (red[a as usize] + red[b as usize]));
    }
    assert!(mesh.node_values(&red[..3]).is_err());
    let partly = b"v 0 0 0 1 0 0\nv 1 0 0\nv 0 1 0 0 0 0\nf 1 2 3\n";
    let obj = ObjMesh::parse(partly, &ObjOptions::default()).unwrap();
    assert!(obj.vertex_colours.is_none() && obj.colour_channel(0, 1.0).is_none());
}
