//! Layers (`isocloth::layers`, `isocloth::layering`): cloths that meet each other never pass
//! through each other, keep their thickness apart and come to rest, at the console preset
//! (the crate's default).

use glam::{DQuat, DVec3};
use isocloth::layers::{layer_crossings, layer_separation};
use isocloth::{Cloth, ClothLayers, ColliderSet, ColliderShape, LayerError, LayerSettings, Pose};

mod common;

const DT: f64 = 1.0 / 60.0;

/// A `size` m square sheet (see `common::turned_sheet`) thrown at `velocity`.
fn sheet(
    size: f32,
    cells: usize,
    tilt: DQuat,
    centre: DVec3,
    pins: &[usize],
    velocity: DVec3,
) -> Cloth {
    let mut cloth = common::turned_sheet(size, cells, tilt, centre, pins);
    let v = vec![velocity; cloth.positions().len()];
    cloth.set_velocities(&v).unwrap();
    cloth
}

fn crossings(a: &Cloth, b: &Cloth) -> usize {
    layer_crossings(
        (a.model().mesh().render_triangles(), a.positions()),
        (b.model().mesh().render_triangles(), b.positions()),
    )
}

fn separation(a: &Cloth, b: &Cloth) -> f64 {
    layer_separation(
        (a.model().mesh().render_triangles(), a.positions()),
        (b.model().mesh().render_triangles(), b.positions()),
        0.05,
    )
}

fn ground() -> ColliderSet {
    let mut c = ColliderSet::new();
    c.add(ColliderShape::Plane, Pose::default()).unwrap();
    c
}

/// What a run of two layered cloths did: the most crossed triangle pairs at any frame's end,
/// the least separation seen, the largest speed at the end, and whether everything stayed
/// finite.
#[derive(Debug)]
struct Run {
    worst_crossings: usize,
    least_separation: f64,
    end_speed: f64,
    end_mean_speed: f64,
    max_strain: f64,
    end_strain: f64,
}

fn run(
    mut cloths: Vec<Cloth>,
    colliders: &ColliderSet,
    frames: usize,
    layered: bool,
) -> (Run, Vec<Cloth>) {
    let mut layers = ClothLayers::new(LayerSettings::default(), 2, &[[0, 1]]).unwrap();
    let mut reports = Vec::new();
    let mut r = Run {
        worst_crossings: 0,
        least_separation: f64::INFINITY,
        end_speed: 0.0,
        end_mean_speed: 0.0,
        max_strain: 0.0,
        end_strain: 0.0,
    };
    for _f in 0..frames {
        if layered {
            layers
                .step(&mut cloths, DT, colliders, &mut reports)
                .unwrap();
        } else {
            for c in cloths.iter_mut() {
                c.step_with(DT, colliders).unwrap();
            }
        }
        r.worst_crossings = r.worst_crossings.max(crossings(&cloths[0], &cloths[1]));
        r.least_separation = r.least_separation.min(separation(&cloths[0], &cloths[1]));
        for c in &cloths {
            r.max_strain = r.max_strain.max(c.measures().max_strain);
        }
        if std::env::var("TRACE_LAYERS").is_ok() && _f % 10 == 0 {
            let ms = |c: &Cloth| {
                c.velocities().iter().map(|v| v.length()).sum::<f64>() / c.velocities().len() as f64
            };
            let mx = |c: &Cloth| {
                c.velocities()
                    .iter()
                    .map(|v| v.length())
                    .fold(0.0, f64::max)
            };
            let ylo = |c: &Cloth| {
                c.positions()
                    .iter()
                    .map(|p| p.y)
                    .fold(f64::INFINITY, f64::min)
            };
            println!(
                "frame {} speed {:.4} {:.4} max {:.3} {:.3} ylo {:.4} {:.4} sep {:.4} contacts {:?}",
                _f,
                ms(&cloths[0]),
                ms(&cloths[1]),
                mx(&cloths[0]),
                mx(&cloths[1]),
                ylo(&cloths[0]),
                ylo(&cloths[1]),
                separation(&cloths[0], &cloths[1]),
                reports.iter().map(|r| r.contacts).collect::<Vec<_>>()
            );
        }
    }
    let speeds: Vec<f64> = cloths
        .iter()
        .flat_map(|c| c.velocities())
        .map(|v| v.length())
        .collect();
    r.end_speed = speeds.iter().fold(0.0f64, |m, &v| m.max(v));
    r.end_mean_speed = speeds.iter().sum::<f64>() / speeds.len() as f64;
    r.end_strain = cloths
        .iter()
        .map(|c| c.measures().max_strain)
        .fold(0.0, f64::max);
    (r, cloths)
}

fn thrown() -> Vec<Cloth> {
    vec![
        sheet(
            0.6,
            10,
            DQuat::from_rotation_z(1.4),
            DVec3::new(-0.5, 0.8, 0.0),
            &[],
            DVec3::new(3.0, 0.0, 0.0),
        ),
        sheet(
            0.6,
            10,
            DQuat::from_rotation_x(1.4),
            DVec3::new(0.5, 0.85, 0.1),
            &[],
            DVec3::new(-3.0, 0.0, 0.0),
        ),
    ]
}

/// Two 0.6 m sheets thrown into each other at 3 m/s each, crossed at right angles, falling on
/// the ground: with layers no triangle pair of one crosses the other at the end of any frame
/// over 5 s, nothing explodes (max strain under 100 % at every frame: the impact's worst frame
/// reaches about 70 %, where the last pass moves single nodes; under 5 % at the end) and they
/// come to rest where they land (mean node speed under 0.05 m/s at the end). Without layers
/// they pass through each other (over 10 crossed pairs at some frame).
#[test]
fn two_sheets_thrown_into_each_other_never_cross_and_come_to_rest() {
    let g = ground();
    let (off, _) = run(thrown(), &g, 300, false);
    let (on, _) = run(thrown(), &g, 300, true);
    println!("off {off:?}\non {on:?}");
    assert!(off.worst_crossings > 10, "{off:?}");
    assert_eq!(on.worst_crossings, 0, "{on:?}");
    assert!(on.max_strain < 1.0 && on.end_strain < 0.05, "{on:?}");
    assert!(on.end_mean_speed < 0.05, "{on:?}");
}

/// A 0.5 m cape dropped from 0.3 m onto a 1 m sheet draped over a sphere: no crossing at any
/// frame's end over 5 s, no explosion (max strain under 50 %), both at rest at the end (mean
/// node speed under 0.05 m/s), and never closer than the thickness less 1 mm.
#[test]
fn a_cape_dropped_on_a_draped_sheet_rests_on_it() {
    let mut colliders = ground();
    colliders
        .add(
            ColliderShape::Sphere { radius: 0.3 },
            Pose::from_translation(DVec3::new(0.0, 0.3, 0.0)),
        )
        .unwrap();
    let mut drape = sheet(
        1.0,
        14,
        DQuat::IDENTITY,
        DVec3::new(0.0, 0.65, 0.0),
        &[],
        DVec3::ZERO,
    );
    for _ in 0..120 {
        drape.step_with(DT, &colliders).unwrap();
    }
    let cape = sheet(
        0.5,
        10,
        DQuat::from_rotation_y(0.5),
        DVec3::new(0.05, 0.95, 0.02),
        &[],
        DVec3::ZERO,
    );
    let (on, _) = run(vec![drape, cape], &colliders, 300, true);
    println!("on {on:?}");
    assert_eq!(on.worst_crossings, 0, "{on:?}");
    assert!(on.max_strain < 0.5, "{on:?}");
    assert!(on.end_mean_speed < 0.05, "{on:?}");
    assert!(
        on.least_separation > LayerSettings::default().thickness - 1e-3,
        "{on:?}"
    );
}

/// The layers' results do not depend on the number of threads: the thrown sheets after 1 s
/// on one thread and on four are bit-identical.
#[test]
fn layers_are_identical_across_thread_counts() {
    let g = ground();
    let on = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| run(thrown(), &g, 60, true).1)
    };
    let (one, four) = (on(1), on(4));
    for (a, b) in one.iter().zip(&four) {
        assert_eq!(a.positions(), b.positions());
        assert_eq!(a.velocities(), b.velocities());
    }
}

/// A pair naming one cloth twice, a cloth that is not there, a negative or infinite thickness
/// and a negative friction are typed errors.
#[test]
fn bad_layer_settings_are_typed_errors() {
    let ok = LayerSettings::default();
    assert_eq!(
        ClothLayers::new(ok, 2, &[[1, 1]]).unwrap_err(),
        LayerError::SelfPair(1)
    );
    assert!(matches!(
        ClothLayers::new(ok, 2, &[[0, 2]]).unwrap_err(),
        LayerError::NoSuchCloth {
            a: 0,
            b: 2,
            count: 2
        }
    ));
    for t in [-0.01, 0.0, f64::INFINITY, f64::NAN, 1.5] {
        let bad = LayerSettings { thickness: t, ..ok };
        assert!(
            matches!(
                ClothLayers::new(bad, 2, &[[0, 1]]),
                Err(LayerError::Thickness(_))
            ),
            "{t}"
        );
    }
    let bad = LayerSettings {
        friction: -1.0,
        ..ok
    };
    assert!(matches!(
        ClothLayers::new(bad, 2, &[[0, 1]]),
        Err(LayerError::Friction(_))
    ));
}

/// The ECS layer steps `ClothLayer` entities with the same stages: two thrown sheets as
/// entities (the first the inner layer) end 1 s bit-identical to `ClothLayers::step` on the
/// same cloths, without a crossing; with the entities' groups not meeting, they pass through
/// each other as cloths without layers do.
#[cfg(feature = "ecs")]
#[test]
fn ecs_layers_match_the_core_and_follow_groups() {
    use bevy_ecs::prelude::*;
    use isocloth::CollisionGroups;
    use isocloth::ecs::{
        ClothColliders, ClothCollisionGroups, ClothLayer, ClothLayering, ClothSim,
        add_cloth_systems, init_cloth_resources,
    };
    let world_run = |groups: Option<[CollisionGroups; 2]>| {
        let mut world = World::new();
        init_cloth_resources(&mut world);
        world.resource_mut::<ClothColliders>().set = ground();
        world.insert_resource(ClothLayering::new(LayerSettings::default()));
        let mut schedule = Schedule::default();
        add_cloth_systems(&mut schedule);
        let mut ids = Vec::new();
        for (k, c) in thrown().into_iter().enumerate() {
            let mut e = world.spawn((ClothSim::new(c), ClothLayer { order: k as u32 }));
            if let Some(g) = groups {
                e.insert(ClothCollisionGroups(g[k]));
            }
            ids.push(e.id());
        }
        let worst = worst_crossings(&mut world, &mut schedule, [ids[0], ids[1]], 60);
        let positions: Vec<Vec<DVec3>> = ids
            .iter()
            .map(|&e| world.get::<ClothSim>(e).unwrap().cloth.positions().to_vec())
            .collect();
        (worst, positions)
    };
    let (worst, ecs) = world_run(None);
    let (_, core) = run(thrown(), &ground(), 60, true);
    assert_eq!(worst, 0);
    for (a, b) in ecs.iter().zip(&core) {
        assert_eq!(&a[..], b.positions());
    }
    let apart = [CollisionGroups::new(1, 1), CollisionGroups::new(2, 2)];
    let (worst, _) = world_run(Some(apart));
    assert!(worst > 10, "{worst}");
}

/// With level of detail (a `ClothLod` whose ladder simulates every tick at 2 x 5 of the
/// accelerated map), the layered entities step among each other at their rung: the two thrown
/// sheets never cross in 1 s (without layers they do, see above), and both cloths' ticks are
/// measured for the scheduler (its last tick's total is its layered steps' time).
#[cfg(feature = "ecs")]
#[test]
fn layers_hold_under_level_of_detail() {
    use bevy_ecs::prelude::*;
    use isocloth::ecs::{
        ClothColliders, ClothLayer, ClothLayering, ClothLod, ClothSim, add_cloth_systems,
        init_cloth_resources,
    };
    use isocloth::{ClothBudget, Rung, SolverMethod};
    let mut world = World::new();
    init_cloth_resources(&mut world);
    world.resource_mut::<ClothColliders>().set = ground();
    world.insert_resource(ClothLayering::new(LayerSettings::default()));
    let ladder = vec![Rung::Simulate {
        substeps: 2,
        iterations: 5,
        method: SolverMethod::Anderson { history: 5 },
    }];
    let budget = ClothBudget {
        frame_ms: 1000.0,
        ladder,
        ..Default::default()
    };
    world.insert_resource(ClothLod::new(budget).unwrap());
    let mut schedule = Schedule::default();
    add_cloth_systems(&mut schedule);
    let ids: Vec<Entity> = thrown()
        .into_iter()
        .enumerate()
        .map(|(k, c)| {
            world
                .spawn((ClothSim::new(c), ClothLayer { order: k as u32 }))
                .id()
        })
        .collect();
    let worst = worst_crossings(&mut world, &mut schedule, [ids[0], ids[1]], 60);
    assert_eq!(worst, 0);
    assert!(world.get::<ClothSim>(ids[0]).unwrap().last_error.is_none());
    let lod = world.resource::<ClothLod>();
    assert_eq!(lod.rung_of(ids[0]), Some(0));
    assert!(lod.last_total_ms() > 0.0);
}

/// Runs `schedule` `frames` times; the most triangle pairs of the two cloth entities `ids`
/// crossed after any frame.
#[cfg(feature = "ecs")]
fn worst_crossings(
    world: &mut bevy_ecs::world::World,
    schedule: &mut bevy_ecs::schedule::Schedule,
    ids: [bevy_ecs::entity::Entity; 2],
    frames: usize,
) -> usize {
    use isocloth::ecs::ClothSim;
    let mut worst = 0;
    for _ in 0..frames {
        schedule.run(world);
        let a = &world.get::<ClothSim>(ids[0]).unwrap().cloth;
        let b = &world.get::<ClothSim>(ids[1]).unwrap().cloth;
        worst = worst.max(crossings(a, b));
    }
    worst
}
