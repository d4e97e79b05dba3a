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
//! Run: `cargo bench --bench collide`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use glam::{DQuat, DVec3, Vec3};
use isocloth::{
    BaseMesh, Cloth, ClothMesh, ColliderSet, ColliderShape, Material, Pose, SolverSettings,
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
        let mut cloth = cape();
        let mut colliders = ColliderSet::new();
        for (shape, pose) in character(0.0, leaning) {
            colliders.add(shape, pose).expect("valid collider");
        }
        let mut frame = 0u64;
        let mut step = |cloth: &mut Cloth, colliders: &mut ColliderSet| {
            frame += 1;
            let sway = 0.05 * (frame as f64 * 0.1).sin();
            for (id, (_, pose)) in character(sway, leaning).into_iter().enumerate() {
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
        eprintln!("leaning {leaning}: {near} nodes within 1 mm of the torso's thickness layer");
        let name = if leaning {
            "20_capsules_leaning"
        } else {
            "20_capsules_clear"
        };
        group.bench_function(name, |b| b.iter(|| step(&mut cloth, &mut colliders)));
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

criterion_group!(benches, bench_collide);
criterion_main!(benches);
