//! Mesh validation and subdivision: what goes in, what comes out, and what is refused.

use glam::{Vec2, Vec3};
use isocloth::{BaseMesh, ClothMesh, MeshError};
use proptest::prelude::*;

fn quad() -> BaseMesh {
    BaseMesh::new(
        vec![Vec3::ZERO, Vec3::X, Vec3::new(1.0, 1.0, 0.0), Vec3::Y],
        vec![[0, 1, 2], [0, 2, 3]],
    )
}

/// Subdivision counts: |V| + |E| nodes, 4 render triangles and one rigid triangle per base
/// triangle; every render triangle keeps the base triangle's orientation (normal +z here).
#[test]
fn subdivision_has_red_black_counts_and_consistent_winding() {
    let mesh = ClothMesh::new(&quad()).unwrap();
    assert_eq!(mesh.base_vertex_count(), 4);
    assert_eq!(mesh.edges().len(), 5);
    assert_eq!(mesh.node_count(), 9);
    assert_eq!(mesh.render_triangles().len(), 8);
    assert_eq!(mesh.rigid_triangles().len(), 2);
    let x = mesh.initial_positions();
    for t in mesh.render_triangles() {
        let [a, b, c] = t.map(|i| x[i as usize]);
        assert!(
            (b - a).cross(c - a).z > 0.0,
            "render triangle {t:?} flipped"
        );
    }
    // Red nodes sit at edge midpoints.
    for (e, &[a, b]) in mesh.edges().iter().enumerate() {
        let r = mesh.red_node(e as u32).unwrap() as usize;
        assert!((x[r] - 0.5 * (x[a as usize] + x[b as usize])).length() < 1e-12);
    }
    // All four corners are boundary vertices; the quad's diagonal is the one interior edge.
    assert!((0..4).all(|v| mesh.is_boundary_vertex(v)));
    let interior = mesh
        .edge_triangles()
        .iter()
        .filter(|t| t[1] != u32::MAX)
        .count();
    assert_eq!(interior, 1);
}

/// Every kind of bad input gets its own typed error naming the offending element.
#[test]
fn bad_meshes_are_refused_with_typed_errors() {
    let ok = quad();
    let with = |f: &dyn Fn(&mut BaseMesh)| {
        let mut m = ok.clone();
        f(&mut m);
        ClothMesh::new(&m).unwrap_err()
    };
    assert_eq!(with(&|m| m.triangles.clear()), MeshError::NoTriangles);
    assert_eq!(
        with(&|m| m.triangles[1] = [0, 2, 9]),
        MeshError::IndexOutOfRange {
            triangle: 1,
            index: 9,
            vertex_count: 4
        }
    );
    assert_eq!(
        with(&|m| m.triangles[0] = [0, 1, 1]),
        MeshError::RepeatedIndex {
            triangle: 0,
            index: 1
        }
    );
    assert_eq!(
        with(&|m| m.positions[2] = Vec3::new(f32::NAN, 0.0, 0.0)),
        MeshError::NonFiniteVertex { vertex: 2 }
    );
    assert_eq!(
        with(&|m| m.positions[3] = Vec3::new(0.0, f32::INFINITY, 0.0)),
        MeshError::NonFiniteVertex { vertex: 3 }
    );
    assert_eq!(
        with(&|m| m.positions[2] = Vec3::new(0.5, 0.0, 0.0)),
        MeshError::DegenerateTriangle { triangle: 0 }
    );
    assert_eq!(
        with(&|m| m.triangles.push([2, 0, 1])),
        MeshError::DuplicateTriangle {
            first: 0,
            second: 2
        }
    );
    assert_eq!(
        with(&|m| m.triangles[1] = [0, 3, 2]),
        MeshError::InconsistentWinding {
            triangle: 1,
            a: 0,
            b: 2
        }
    );
    assert_eq!(
        with(&|m| {
            m.positions.push(Vec3::new(0.5, 0.5, 1.0));
            m.triangles.push([0, 2, 4]);
        }),
        MeshError::NonManifoldEdge {
            a: 0,
            b: 2,
            triangle: 2
        }
    );
    assert_eq!(
        with(&|m| m.positions.push(Vec3::Z)),
        MeshError::UnreferencedVertex { vertex: 4 }
    );
    assert_eq!(
        with(&|m| m.pattern = Some(vec![Vec2::ZERO; 3])),
        MeshError::PatternMismatch {
            expected: 4,
            found: 3
        }
    );
    assert_eq!(
        with(&|m| m.pattern = Some(vec![Vec2::ZERO, Vec2::X, Vec2::NAN, Vec2::Y])),
        MeshError::NonFinitePattern { vertex: 2 }
    );
    // Two fans meeting at one vertex (a bow-tie).
    let bowtie = BaseMesh::new(
        vec![
            Vec3::ZERO,
            Vec3::new(1.0, 0.0, 0.0),
            Vec3::new(1.0, 1.0, 0.0),
            Vec3::new(-1.0, 0.0, 0.0),
            Vec3::new(-1.0, -1.0, 0.0),
        ],
        vec![[0, 1, 2], [0, 3, 4]],
    );
    assert_eq!(
        ClothMesh::new(&bowtie).unwrap_err(),
        MeshError::NonManifoldVertex { vertex: 0 }
    );
    // Generators refuse impossible shapes instead of panicking.
    assert!(BaseMesh::rectangle(0.0, 1.0, 4, 4).is_err());
    assert!(BaseMesh::rectangle(1.0, 1.0, 0, 4).is_err());
    assert!(BaseMesh::jittered_rectangle(1.0, 1.0, 4, 4, 0.7, 1).is_err());
}

/// A pattern defines the rest metric: a mesh placed crumpled in 3D with a flat pattern has the
/// pattern's area and edge lengths, to 1e-6.
#[test]
fn pattern_coordinates_define_the_rest_metric() {
    let base = quad()
        .map_positions(|p| Vec3::new(p.x * 0.3, p.y * 0.2, p.x * p.y))
        .with_pattern(vec![
            Vec2::ZERO,
            Vec2::X * 2.0,
            Vec2::new(2.0, 1.0),
            Vec2::Y,
        ]);
    let mesh = ClothMesh::new(&base).unwrap();
    assert!((mesh.area() - 2.0).abs() < 1e-6);
    let e01 = mesh
        .strain_edges()
        .iter()
        .find(|e| (e.a, e.b) == (0, 1))
        .unwrap();
    assert!((e01.rest_length - 2.0).abs() < 1e-6);
}

proptest! {
    /// Lumped masses total area x density (to 1e-9 relative) on any rectangle, regular or
    /// jittered, and black nodes get a third of what red nodes around them get per triangle.
    #[test]
    fn lumped_masses_total_area_times_density(
        w in 0.1f32..3.0, h in 0.1f32..3.0, nx in 1usize..12, ny in 1usize..12,
        jitter in 0.0f32..0.4, seed in 0u64..1000, density in 0.01f64..2.0,
    ) {
        let base = BaseMesh::jittered_rectangle(w, h, nx, ny, jitter, seed).unwrap();
        let mesh = ClothMesh::new(&base).unwrap();
        let m = mesh.lumped_masses(density);
        let total: f64 = m.iter().sum();
        let expected = mesh.area() * density;
        prop_assert!((total - expected).abs() <= 1e-9 * expected);
        prop_assert!((mesh.area() - (w as f64 * h as f64)).abs() < 1e-5 * (w * h) as f64);
        let black: f64 = m[..mesh.base_vertex_count()].iter().sum();
        prop_assert!((black - expected / 4.0).abs() <= 1e-9 * expected);
        prop_assert!(m.iter().all(|&mi| mi > 0.0));
    }
}
