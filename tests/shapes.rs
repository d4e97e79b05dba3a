//! World collider shapes: boxes, cylinders, tapered capsules, convex hulls, height fields and
//! triangle meshes. Their signed distances against closed forms and against each other, and the
//! typed errors for bad data.

use std::sync::Arc;

use glam::{DVec2, DVec3};
use isocloth::{
    ColliderError, ColliderSet, ColliderShape, ConvexHull, HeightField, Pose, TriangleMesh,
};
use proptest::prelude::*;

/// Signed distance of `p` from `shape` at the origin.
fn sd(shape: ColliderShape, p: DVec3) -> f64 {
    let mut set = ColliderSet::new();
    let id = set.add(shape, Pose::IDENTITY).unwrap();
    set.signed_distance(id, p).unwrap()
}

/// The exact signed distance of a box with half extents `e` (Quilez's closed form).
fn box_sd(e: DVec3, p: DVec3) -> f64 {
    let q = p.abs() - e;
    q.max(DVec3::ZERO).length() + q.max_element().min(0.0)
}

fn cube_corners(e: DVec3) -> Vec<DVec3> {
    (0..8)
        .map(|i| {
            DVec3::new(
                if i & 1 == 0 { -e.x } else { e.x },
                if i & 2 == 0 { -e.y } else { e.y },
                if i & 4 == 0 { -e.z } else { e.z },
            )
        })
        .collect()
}

/// A closed box mesh, wound counter-clockwise seen from outside.
fn box_mesh(e: DVec3) -> (Vec<DVec3>, Vec<[u32; 3]>) {
    let v = cube_corners(e);
    let faces: [[u32; 4]; 6] = [
        [0, 2, 3, 1], // -z
        [4, 5, 7, 6], // +z
        [0, 1, 5, 4], // -y
        [2, 6, 7, 3], // +y
        [0, 4, 6, 2], // -x
        [1, 3, 7, 5], // +x
    ];
    let tris = faces
        .iter()
        .flat_map(|f| [[f[0], f[1], f[2]], [f[0], f[2], f[3]]])
        .collect();
    (v, tris)
}

const E: DVec3 = DVec3::new(0.4, 0.1, 0.3);

fn point() -> impl Strategy<Value = DVec3> {
    (-0.8..0.8f64, -0.5..0.5f64, -0.8..0.8f64).prop_map(|(x, y, z)| DVec3::new(x, y, z))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A box's signed distance is the closed form, inside and out, to 1e-12 m.
    #[test]
    fn box_distance_is_exact(p in point()) {
        let d = sd(ColliderShape::Cuboid { half_extents: E }, p);
        prop_assert!((d - box_sd(E, p)).abs() < 1e-12, "{d} vs {}", box_sd(E, p));
    }

    /// The convex hull of a box's corners (plus points inside it) is the box: the same signed
    /// distance to 1e-9 m.
    #[test]
    fn hull_of_a_box_is_the_box(p in point()) {
        let mut points = cube_corners(E);
        points.push(DVec3::new(0.1, 0.0, -0.1));
        let hull = ColliderShape::ConvexHull(Arc::new(ConvexHull::new(points).unwrap()));
        let d = sd(hull, p);
        prop_assert!((d - box_sd(E, p)).abs() < 1e-9, "{d} vs {}", box_sd(E, p));
    }

    /// A closed triangle mesh of a box is the box (its vertices are stored in `f32` by parry3d:
    /// to 2e-6 m).
    #[test]
    fn closed_mesh_of_a_box_is_the_box(p in point()) {
        let (v, t) = box_mesh(E);
        let mesh = ColliderShape::TriMesh(Arc::new(TriangleMesh::new(v, t).unwrap()));
        let d = sd(mesh, p);
        prop_assert!((d - box_sd(E, p)).abs() < 2e-6, "{d} vs {}", box_sd(E, p));
    }

    /// A tapered capsule with equal radii is a capsule (to 1e-6 m, parry3d's `f32`).
    #[test]
    fn tapered_capsule_with_equal_radii_is_a_capsule(p in point()) {
        let t = sd(ColliderShape::TaperedCapsule { half_height: 0.3, bottom_radius: 0.1, top_radius: 0.1 }, p);
        let c = sd(ColliderShape::Capsule { half_height: 0.3, radius: 0.1 }, p);
        prop_assert!((t - c).abs() < 1e-6, "{t} vs {c}");
    }

    /// A tapered capsule's signed distance is 1-Lipschitz and zero on its surface: the
    /// distance to the nearest of 4,000 surface samples (the hull of two balls sampled on both
    /// balls' spheres, outside the other ball's cone) bounds it from above, and the signed
    /// distance of a point moved along the gradient by the distance lands on the surface.
    #[test]
    fn tapered_capsule_distance_is_a_distance(p in point()) {
        let shape = ColliderShape::TaperedCapsule { half_height: 0.25, bottom_radius: 0.12, top_radius: 0.05 };
        let d = sd(shape.clone(), p);
        let eps = 1e-6;
        let grad = DVec3::new(
            sd(shape.clone(), p + DVec3::X * eps) - sd(shape.clone(), p - DVec3::X * eps),
            sd(shape.clone(), p + DVec3::Y * eps) - sd(shape.clone(), p - DVec3::Y * eps),
            sd(shape.clone(), p + DVec3::Z * eps) - sd(shape.clone(), p - DVec3::Z * eps),
        ) / (2.0 * eps);
        prop_assert!((grad.length() - 1.0).abs() < 1e-4, "gradient length {}", grad.length());
        let on = p - d * grad;
        prop_assert!(sd(shape, on).abs() < 1e-6, "moved onto the surface: {}", d);
    }

    /// A cylinder's signed distance is the closed form (Quilez's capped cylinder).
    #[test]
    fn cylinder_distance_is_exact(p in point()) {
        let (h, r) = (0.3, 0.15);
        let q = DVec2::new(DVec2::new(p.x, p.z).length() - r, p.y.abs() - h);
        let exact = q.max(DVec2::ZERO).length() + q.max_element().min(0.0);
        let d = sd(ColliderShape::Cylinder { half_height: h, radius: r }, p);
        prop_assert!((d - exact).abs() < 1e-12, "{d} vs {exact}");
    }

    /// A flat height field is the ground plane over its footprint (to 1e-12 m), and a tilted
    /// one is the tilted plane (away from its borders).
    #[test]
    fn height_fields_are_their_planes(x in -0.4..0.4f64, y in -0.3..0.3f64, z in -0.4..0.4f64) {
        let flat = HeightField::new(5, 7, DVec2::new(1.2, 1.0), vec![0.05; 35]).unwrap();
        let d = sd(ColliderShape::HeightField(Arc::new(flat)), DVec3::new(x, y, z));
        prop_assert!((d - (y - 0.05)).abs() < 1e-12);
        // Height 0.5 x: the plane through the origin with normal (-0.5, 1, 0) / |.|.
        let heights = (0..9).flat_map(|_| (0..9).map(|c| 0.5 * (-1.0 + 2.0 * c as f64 / 8.0))).collect();
        let tilted = HeightField::new(9, 9, DVec2::new(2.0, 2.0), heights).unwrap();
        let p = DVec3::new(x, y, z);
        let exact = DVec3::new(-0.5, 1.0, 0.0).normalize().dot(p);
        let d = sd(ColliderShape::HeightField(Arc::new(tilted)), p);
        prop_assert!((d - exact).abs() < 1e-12, "{d} vs {exact}");
    }
}

/// An open mesh (a single square sheet of two triangles) has no inside: points on either side
/// are at their plain distance from it, so the cloth is kept off both sides.
#[test]
fn an_open_mesh_is_two_sided() {
    let v = vec![
        DVec3::new(-1.0, 0.0, -1.0),
        DVec3::new(1.0, 0.0, -1.0),
        DVec3::new(1.0, 0.0, 1.0),
        DVec3::new(-1.0, 0.0, 1.0),
    ];
    let mesh = TriangleMesh::new(v, vec![[0, 2, 1], [0, 3, 2]]).unwrap();
    assert!(!mesh.is_closed());
    let shape = ColliderShape::TriMesh(Arc::new(mesh));
    for y in [0.2, 0.01, -0.01, -0.2] {
        let d = sd(shape.clone(), DVec3::new(0.3, y, -0.2));
        assert!((d - f64::abs(y)).abs() < 1e-6, "{y}: {d}");
    }
}

/// Bad shape data is refused with an error naming what is wrong and where.
#[test]
fn bad_shape_data_is_refused_with_what_and_where() {
    let flat: Vec<DVec3> = (0..6)
        .map(|i| DVec3::new(i as f64 * 0.1, 0.0, (i % 3) as f64 * 0.2))
        .collect();
    assert_eq!(
        ConvexHull::new(flat).unwrap_err(),
        ColliderError::DegenerateHull { points: 6 }
    );
    let mut nan = cube_corners(E);
    nan[5].y = f64::NAN;
    assert!(matches!(
        ConvexHull::new(nan).unwrap_err(),
        ColliderError::BadVertex { index: 5, .. }
    ));
    let (v, mut t) = box_mesh(E);
    assert_eq!(
        TriangleMesh::new(v.clone(), vec![]).unwrap_err(),
        ColliderError::EmptyMesh
    );
    t[3][1] = 8;
    assert_eq!(
        TriangleMesh::new(v.clone(), t).unwrap_err(),
        ColliderError::BadIndex {
            triangle: 3,
            index: 8,
            vertices: 8
        }
    );
    let (_, t) = box_mesh(E);
    let inverted: Vec<[u32; 3]> = t.iter().map(|&[a, b, c]| [a, c, b]).collect();
    assert!(matches!(
        TriangleMesh::new(v.clone(), inverted).unwrap_err(),
        ColliderError::InvertedMesh { .. }
    ));
    let mut sliver = t.clone();
    sliver[0] = [0, 0, 1];
    assert_eq!(
        TriangleMesh::new(v, sliver).unwrap_err(),
        ColliderError::DegenerateTriangle { triangle: 0 }
    );
    assert_eq!(
        HeightField::new(3, 4, DVec2::ONE, vec![0.0; 11]).unwrap_err(),
        ColliderError::HeightFieldSamples {
            rows: 3,
            columns: 4,
            got: 11
        }
    );
    let mut heights = vec![0.0; 12];
    heights[7] = f64::INFINITY;
    assert!(matches!(
        HeightField::new(3, 4, DVec2::ONE, heights).unwrap_err(),
        ColliderError::BadHeight { index: 7, .. }
    ));
    let mut set = ColliderSet::new();
    for (shape, what) in [
        (
            ColliderShape::Cuboid {
                half_extents: DVec3::new(0.1, -0.1, 0.1),
            },
            "box half extent y",
        ),
        (
            ColliderShape::Cylinder {
                half_height: 0.1,
                radius: f64::NAN,
            },
            "cylinder radius",
        ),
    ] {
        match set.add(shape, Pose::IDENTITY).unwrap_err() {
            ColliderError::BadSize { what: w, .. } => assert_eq!(w, what),
            e => panic!("{e}"),
        }
    }
    assert!(matches!(
        set.add(
            ColliderShape::TaperedCapsule {
                half_height: 0.1,
                bottom_radius: 0.3,
                top_radius: 0.05
            },
            Pose::IDENTITY
        )
        .unwrap_err(),
        ColliderError::TaperTooSteep { .. }
    ));
    assert!(set.is_empty());
}

/// Shapes round-trip through RON as scenario files write them.
#[test]
fn shapes_round_trip_through_ron() {
    let (v, t) = box_mesh(E);
    let shapes = [
        ColliderShape::Cuboid { half_extents: E },
        ColliderShape::Cylinder {
            half_height: 0.5,
            radius: 0.02,
        },
        ColliderShape::TaperedCapsule {
            half_height: 0.2,
            bottom_radius: 0.06,
            top_radius: 0.04,
        },
        ColliderShape::ConvexHull(Arc::new(ConvexHull::new(cube_corners(E)).unwrap())),
        ColliderShape::TriMesh(Arc::new(TriangleMesh::new(v, t).unwrap())),
        ColliderShape::HeightField(Arc::new(
            HeightField::new(
                2,
                3,
                DVec2::new(1.0, 2.0),
                vec![0.0, 0.1, 0.2, 0.0, 0.1, 0.3],
            )
            .unwrap(),
        )),
    ];
    for s in shapes {
        let text = ron::to_string(&s).unwrap();
        let back: ColliderShape = ron::from_str(&text).unwrap();
        assert_eq!(back, s, "{text}");
    }
    let bad = "ConvexHull((points: [(0, 0, 0), (1, 0, 0), (0, 0, 1), (1, 0, 1)]))";
    let e = ron::from_str::<ColliderShape>(bad).unwrap_err();
    assert!(e.to_string().contains("spans no volume"), "{e}");
}
