//! Cost of contact on the frame: a 2,025-node cape (22x22 base cells, top row pinned) hanging
//! against a character of 20 capsules, against the same cape with no colliders.
//!
//! * `collide/cape_2025_nodes/no_colliders`: one 1/60 s frame, default budget.
//! * `collide/cape_2025_nodes/20_capsules_clear`: the same with a character of 20 capsules
//!   (torso and 19 limbs, swaying, so poses change every frame) none of which touches the
//!   cape: the cost of the broad phase.
//! * `collide/cape_2025_nodes/20_capsules_leaning`: the torso leans into the cape, which rests
//!   on its lower back: broad phase, narrow phase every iteration and the contact solve.
//! * `collide/cape_2025_nodes/trailing_on_floor`: the ground 0.6 m below the pins and the cape's
//!   lower third laid out on it (the nodes touching are counted and printed): the contact
//!   issue's "600 nodes touching a body", to compare with `no_colliders`.
//!
//! * `collide/shapes_leaning/{capsule,tapered,box,hull_34,trimesh_2016}`: the cape resting on a
//!   leaning torso alone, the torso being a capsule (0.15 m radius, 0.3 m half height), a
//!   tapered capsule of the same length (0.17 m and 0.13 m radii), a box of the capsule's size,
//!   the convex hull of 34 points on the capsule, and a closed 2,016-triangle mesh of the
//!   capsule: what each shape's queries cost on the same contact (world colliders issue: a box
//!   or hull at most 1.5x the capsule, a 2,000-triangle mesh at most 2x).
//!
//! Run: `cargo bench --bench collide`.

use std::f64::consts::{FRAC_PI_2, TAU};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, criterion_group, criterion_main};
use glam::{DQuat, DVec3, Vec3};
use isocloth::{
    BaseMesh, Cloth, ClothMesh, ColliderSet, ColliderShape, ConvexHull, Material, Pose,
    SolverSettings, TriangleMesh,
};

const CELLS: usize = 22;

fn cape() -> Cloth {
    cape_shaped(|p| Vec3::new(p.x - 0.3, 0.5 + p.y, 0.0))
}

/// The cape hanging from 1.4 m with its lower third laid out on a floor at 0.8 m (towards +z).
fn trailing_cape() -> Cloth {
    cape_shaped(|p| {
        if p.y >= 0.3 {
            Vec3::new(p.x - 0.3, 0.5 + p.y, 0.0)
        } else {
            Vec3::new(p.x - 0.3, 0.805, 0.3 - p.y)
        }
    })
}

fn cape_shaped(place: impl Fn(Vec3) -> Vec3) -> Cloth {
    let base = BaseMesh::rectangle(0.6, 0.9, CELLS, CELLS)
        .expect("valid rectangle")
        .map_positions(place);
    let mesh = ClothMesh::new(&base).expect("valid mesh");
    let top: Vec<u32> = (0..=CELLS)
        .map(|i| BaseMesh::grid_index(CELLS, i, CELLS))
        .collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    Cloth::from_mesh(mesh, Material::default(), &pins, SolverSettings::default())
        .expect("valid cloth")
}

/// Torso behind the hanging cape (leaning into it: its lower back pushes the cape out by about
/// 5 cm, so the cape rests on it; or upright 5 cm clear of it), 19 limbs around.
fn character(sway: f64, leaning: bool) -> Vec<(ColliderShape, Pose)> {
    let torso = if leaning {
        Pose::new(DVec3::new(sway, 1.0, -0.16), DQuat::from_rotation_x(-0.2))
    } else {
        Pose::new(DVec3::new(sway, 1.0, -0.21), DQuat::IDENTITY)
    };
    let mut out = vec![(
        ColliderShape::Capsule {
            half_height: 0.3,
            radius: 0.15,
        },
        torso,
    )];
    for k in 0..19 {
        let a = std::f64::consts::TAU * k as f64 / 19.0;
        out.push((
            ColliderShape::Capsule {
                half_height: 0.15,
                radius: 0.05,
            },
            Pose::new(
                DVec3::new(
                    sway + 0.5 * a.cos(),
                    0.2 + 0.1 * k as f64,
                    -0.16 + 0.5 * a.sin(),
                ),
                DQuat::from_rotation_z(a),
            ),
        ));
    }
    out
}

/// Nodes within 1 mm of the first collider's thickness layer.
fn touching(cloth: &Cloth, colliders: &ColliderSet) -> usize {
    let thickness = cloth.contact_settings().thickness;
    cloth
        .positions()
        .iter()
        .filter(|p| {
            colliders
                .signed_distance(0, **p)
                .is_some_and(|d| d < thickness + 1e-3)
        })
        .count()
}

fn bench_collide(c: &mut Criterion) {
    let mut group = c.benchmark_group("collide/cape_2025_nodes");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(4));
    let mut cloth = cape();
    for _ in 0..60 {
        cloth.step(1.0 / 60.0).expect("finite step");
    }
    group.bench_function("no_colliders", |b| {
        b.iter(|| cloth.step(black_box(1.0 / 60.0)).expect("finite step"))
    });
    for leaning in [false, true] {
        let name = if leaning {
            "20_capsules_leaning"
        } else {
            "20_capsules_clear"
        };
        let shapes = character(0.0, leaning)
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        bench_swaying(&mut group, name, shapes, |sway| {
            character(sway, leaning)
                .into_iter()
                .map(|(_, p)| p)
                .collect()
        });
    }
    {
        let mut cloth = trailing_cape();
        let mut colliders = ColliderSet::new();
        colliders
            .add(
                ColliderShape::Plane,
                Pose::new(DVec3::new(0.0, 0.8, 0.0), DQuat::IDENTITY),
            )
            .expect("valid collider");
        for _ in 0..120 {
            cloth
                .step_with(1.0 / 60.0, &colliders)
                .expect("finite step");
        }
        let near = touching(&cloth, &colliders);
        eprintln!("trailing on the floor: {near} nodes within 1 mm of its thickness layer");
        group.bench_function("trailing_on_floor", |b| {
            b.iter(|| {
                cloth
                    .step_with(black_box(1.0 / 60.0), &colliders)
                    .expect("finite step")
            })
        });
    }
    group.finish();
}

/// Points of a capsule's surface (axis local Y, `half_height`, `radius`): `seg` around, `m`
/// latitude steps per hemisphere, rings from the bottom pole up (the equator twice, once per
/// cap), poles first and last.
fn capsule_points(half_height: f64, radius: f64, seg: usize, m: usize) -> Vec<DVec3> {
    let mut out = vec![DVec3::new(0.0, -half_height - radius, 0.0)];
    // Latitude steps -m + 1 ..= 0 on the bottom cap, 0 ..= m - 1 on the top one.
    for (lo, hi, centre) in [(1, m, -half_height), (m, 2 * m - 1, half_height)] {
        for i in lo..=hi {
            let lat = -FRAC_PI_2 + FRAC_PI_2 * i as f64 / m as f64;
            for k in 0..seg {
                let a = TAU * k as f64 / seg as f64;
                out.push(DVec3::new(
                    radius * lat.cos() * a.cos(),
                    centre + radius * lat.sin(),
                    -radius * lat.cos() * a.sin(),
                ));
            }
        }
    }
    out.push(DVec3::new(0.0, half_height + radius, 0.0));
    out
}

/// A closed mesh of [`capsule_points`], wound counter-clockwise seen from outside:
/// `2 seg + 2 seg (2 m - 1)` triangles.
fn capsule_mesh(half_height: f64, radius: f64, seg: usize, m: usize) -> TriangleMesh {
    let vertices = capsule_points(half_height, radius, seg, m);
    let rings = 2 * m;
    let ring = |r: usize, k: usize| (1 + r * seg + k % seg) as u32;
    let top = (vertices.len() - 1) as u32;
    let mut triangles = Vec::new();
    for k in 0..seg {
        triangles.push([0, ring(0, k + 1), ring(0, k)]);
        triangles.push([top, ring(rings - 1, k), ring(rings - 1, k + 1)]);
        for r in 0..rings - 1 {
            let (a, b) = (ring(r, k), ring(r, k + 1));
            let (c, d) = (ring(r + 1, k), ring(r + 1, k + 1));
            triangles.push([a, b, c]);
            triangles.push([b, d, c]);
        }
    }
    TriangleMesh::new(vertices, triangles).expect("closed capsule mesh")
}

/// The cape resting on a leaning torso of each shape (see the module docs).
fn bench_shapes(c: &mut Criterion) {
    let mut group = c.benchmark_group("collide/shapes_leaning");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(4));
    let (h, r) = (0.3, 0.15);
    let hull = ConvexHull::new(capsule_points(h, r, 8, 2)).expect("capsule hull");
    assert_eq!(hull.points().len(), 34);
    let mesh = capsule_mesh(h, r, 42, 12);
    assert_eq!(mesh.triangles().len(), 2016);
    let shapes = [
        (
            "capsule",
            ColliderShape::Capsule {
                half_height: h,
                radius: r,
            },
        ),
        (
            "tapered",
            ColliderShape::TaperedCapsule {
                half_height: h,
                bottom_radius: r + 0.02,
                top_radius: r - 0.02,
            },
        ),
        (
            "box",
            ColliderShape::Cuboid {
                half_extents: DVec3::new(r, h + r, r),
            },
        ),
        ("hull_34", ColliderShape::ConvexHull(Arc::new(hull))),
        ("trimesh_2016", ColliderShape::TriMesh(Arc::new(mesh))),
    ];
    for (name, shape) in shapes {
        bench_swaying(&mut group, name, vec![shape], |sway| {
            vec![Pose::new(
                DVec3::new(sway, 1.0, -0.16),
                DQuat::from_rotation_x(-0.2),
            )]
        });
    }
    group.finish();
}

/// Benchmarks one frame of the cape against `shapes` posed by `poses(sway)` (one pose a
/// shape), the sway moving with the frame, after 60 frames of settling; prints how many nodes
/// touch the first shape.
fn bench_swaying(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    shapes: Vec<ColliderShape>,
    poses: impl Fn(f64) -> Vec<Pose>,
) {
    let mut cloth = cape();
    let mut colliders = ColliderSet::new();
    for (shape, pose) in shapes.into_iter().zip(poses(0.0)) {
        colliders.add(shape, pose).expect("valid collider");
    }
    let mut frame = 0u64;
    let mut step = |cloth: &mut Cloth, colliders: &mut ColliderSet| {
        frame += 1;
        let sway = 0.05 * (frame as f64 * 0.1).sin();
        for (id, pose) in poses(sway).into_iter().enumerate() {
            colliders.set_pose(id, pose).expect("finite pose");
        }
        cloth
            .step_with(black_box(1.0 / 60.0), colliders)
            .expect("finite step");
        colliders.finish_frame();
    };
    for _ in 0..60 {
        step(&mut cloth, &mut colliders);
    }
    let near = touching(&cloth, &colliders);
    eprintln!("{name}: {near} nodes within 1 mm of the first collider's thickness layer");
    group.bench_function(name, |b| b.iter(|| step(&mut cloth, &mut colliders)));
}

criterion_group!(benches, bench_collide, bench_shapes);
criterion_main!(benches);
