//! The frame loop allocates nothing after the first frame (core issue, stepper clause), and a
//! further cloth of a shared model holds only its state (speed issue, memory clause).
//!
//! This test binary installs a counting global allocator, so it holds a single test: other tests
//! running beside it would add their own allocations to the process-wide count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

use glam::Vec3;
use isocloth::{BaseMesh, Cloth, ClothMesh, Material, SolverMethod, SolverSettings};

mod common;

/// Counts every allocation and reallocation in the process, on any thread (rayon workers
/// included), and forwards to the system allocator.
struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
/// Live heap bytes.
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every method forwards its arguments unchanged to `System`, which upholds the
// `GlobalAlloc` contract; the counter is a relaxed atomic increment with no other effect.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The 2,025-node sheet (22 x 22 base cells, 1 m) hanging in the XY plane, and its top row's
/// nodes (pinned).
fn hanging_sheet() -> (ClothMesh, Vec<u32>) {
    let cells = 22;
    let base = BaseMesh::rectangle(1.0, 1.0, cells, cells)
        .unwrap()
        .map_positions(|p| Vec3::new(p.x, p.y, 0.0));
    let mesh = ClothMesh::new(&base).unwrap();
    let top: Vec<u32> = (0..=cells)
        .map(|i| BaseMesh::grid_index(cells, i, cells))
        .collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    (mesh, pins)
}

/// After a first frame, 120 frames of a 2,025-node hanging sheet (both solvers, BDF2, moving pin
/// targets, frames of uneven length that exercise the accumulator, render positions and normals
/// written into reused buffers; and with tethers, max distance and backstops from moving skin
/// targets and self-collision on, after 30 frames; and with the strain cap's global pass at 1 %)
/// make zero heap allocations on any thread. A second cloth of the
/// same model, stepped 60 frames on the same thread, then holds at most 200 KiB (its state).
/// Then the same with a body pushing the cloth (below).
#[test]
fn frame_loop_allocates_nothing_after_the_first_frame_and_instances_hold_only_state() {
    let (mesh, pins) = hanging_sheet();
    for (method, limits, global) in [
        (SolverMethod::Anderson { history: 5 }, false, false),
        (SolverMethod::LocalGlobal, false, false),
        (SolverMethod::Anderson { history: 5 }, true, false),
        (SolverMethod::Anderson { history: 5 }, false, true),
    ] {
        // The last: the strain cap at 1 % with its global pass (its own factor and solves).
        let strain_cap = if global {
            isocloth::StrainCap {
                tolerance: 0.01,
                global_iterations: 4,
                ..Default::default()
            }
        } else {
            isocloth::StrainCap::default()
        };
        let settings = SolverSettings {
            method,
            strain_cap,
            ..Default::default()
        };
        let mut cloth =
            Cloth::from_mesh(mesh.clone(), Material::default(), &pins, settings).unwrap();
        let rest = cloth.positions().to_vec();
        let mut skin = rest.clone();
        if limits {
            let n = rest.len();
            cloth
                .set_limit_settings(isocloth::LimitSettings {
                    tether_scale: 1.02,
                    max_distance: vec![0.1; n],
                    backstop_distance: vec![0.02; n],
                    backstop_radius: vec![1.0; n],
                    ..Default::default()
                })
                .unwrap();
            cloth
                .set_self_collision(isocloth::SelfCollisionSettings {
                    enabled: true,
                    ..Default::default()
                })
                .unwrap();
        }
        let (mut render, mut normals) = (Vec::new(), Vec::new());
        let start: Vec<_> = pins
            .iter()
            .map(|&p| cloth.positions()[p as usize])
            .collect();
        let mut targets = start.clone();
        let mut frame = |cloth: &mut Cloth, k: usize, targets: &mut Vec<glam::DVec3>| {
            let shift = glam::DVec3::new(0.1 * (k as f64 * 0.05).sin(), 0.0, 0.0);
            for (t, s) in targets.iter_mut().zip(&start) {
                *t = *s + shift;
            }
            cloth.set_pin_targets(targets).unwrap();
            if limits {
                for (s, r) in skin.iter_mut().zip(&rest) {
                    *s = *r + shift;
                }
                cloth.set_skin_targets(&skin).unwrap();
            }
            let dt = if k.is_multiple_of(3) {
                1.0 / 45.0
            } else {
                1.0 / 60.0
            };
            cloth.step(dt).unwrap();
            cloth.write_render_positions(&mut render);
            cloth.write_render_normals(&mut normals);
        };
        // With limits (and self-collision) the candidate list grows to the most limits ever near their bound at
        // once, then holds (as contact's does with the nodes touching several bodies).
        let warm_up = if limits { 30 } else { 1 };
        for k in 0..warm_up {
            frame(&mut cloth, k, &mut targets);
        }
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for k in warm_up..warm_up + 120 {
            frame(&mut cloth, k, &mut targets);
        }
        let made = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert_eq!(
            made, 0,
            "{method:?} (limits {limits}): {made} allocations in 120 frames"
        );
        if limits || global {
            continue; // the memory clause is measured without them
        }

        // A second cloth of the same model, stepped on the same thread, adds only its own
        // state: 4 x 2,025 x 24 B of positions and velocities, pin targets, contact flags.
        let before = LIVE.load(Ordering::Relaxed);
        let mut second = Cloth::new(cloth.model().clone());
        for _ in 0..60 {
            second.step(1.0 / 60.0).unwrap();
        }
        let held = LIVE.load(Ordering::Relaxed) - before;
        assert!(
            held <= 200 * 1024,
            "{method:?}: a further cloth holds {held} bytes"
        );
    }
    frame_loop_with_contact_allocates_nothing_after_warm_up();
}

/// With a body pushing the cloth (a ball swinging through the hanging 2,025-node sheet, so the
/// contact set changes every frame), the frame loop allocates nothing after two swings (126
/// frames: the cloth's contact lists take their bound, the node count, at its first contact;
/// /// the workspace's candidate lists grow to the most nodes ever near a body at once, then hold),
/// with plain local-global iterations and with the accelerated map (the coupled contact step
/// and its extra solve; mixing, refusals and restarts). Called from the test above: the counter is
/// global, so the two must not run at once.
fn frame_loop_with_contact_allocates_nothing_after_warm_up() {
    use isocloth::{ColliderSet, ColliderShape, Pose};
    let (mesh, pins) = hanging_sheet();
    for method in [
        SolverMethod::LocalGlobal,
        SolverMethod::Anderson { history: 5 },
    ] {
        let settings = SolverSettings {
            method,
            ..Default::default()
        };
        let mut cloth =
            Cloth::from_mesh(mesh.clone(), Material::default(), &pins, settings).unwrap();
        let centre = cloth.center_of_mass();
        let mut colliders = ColliderSet::new();
        let ball = colliders
            .add(
                ColliderShape::Sphere { radius: 0.15 },
                Pose::from_translation(centre + glam::DVec3::new(0.0, 0.0, -0.3)),
            )
            .unwrap();
        let mut render = Vec::new();
        let mut frame = |cloth: &mut Cloth, colliders: &mut ColliderSet, k: usize| {
            let z = 0.25 * (k as f64 * 0.1).sin();
            let pose = Pose::from_translation(centre + glam::DVec3::new(0.0, -0.1, z));
            colliders.set_pose(ball, pose).unwrap();
            cloth.step_with(1.0 / 60.0, colliders).unwrap();
            colliders.finish_frame();
            cloth.write_render_positions(&mut render);
        };
        for k in 0..126 {
            frame(&mut cloth, &mut colliders, k);
        }
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for k in 126..246 {
            frame(&mut cloth, &mut colliders, k);
        }
        let made = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert_eq!(made, 0, "{method:?}: {made} allocations in 120 frames");
    }
    layered_frame_allocates_nothing_after_warm_up();
}

/// Layers (`isocloth::layers`): a 0.5 m cape lying on a 1 m sheet draped over a sphere, the
/// two stepped as one group (`ClothLayers::step`, in a two-thread pool): after 8 s of warm-up, 2 s more allocate nothing (contact lists that must grow
/// grow to their bound, the node count, at once: before that policy the resting cape's
/// jittering contact set made 3 allocations here). Called from the test above.
fn layered_frame_allocates_nothing_after_warm_up() {
    use glam::{DQuat, DVec3};
    use isocloth::{ClothLayers, ColliderSet, ColliderShape, LayerSettings, Pose};
    let sheet = |size: f32, cells: usize, turn: f64, centre: DVec3| {
        common::turned_sheet(size, cells, DQuat::from_rotation_y(turn), centre, &[])
    };
    let mut colliders = ColliderSet::new();
    colliders.add(ColliderShape::Plane, Pose::IDENTITY).unwrap();
    colliders
        .add(
            ColliderShape::Sphere { radius: 0.3 },
            Pose::from_translation(DVec3::new(0.0, 0.3, 0.0)),
        )
        .unwrap();
    let mut cloths = vec![
        sheet(1.0, 14, 0.0, DVec3::new(0.0, 0.65, 0.0)),
        sheet(0.5, 10, 0.5, DVec3::new(0.05, 0.8, 0.02)),
    ];
    let mut layers = ClothLayers::new(LayerSettings::default(), 2, &[[0, 1]]).unwrap();
    let mut reports = Vec::new();
    let dt = 1.0 / 60.0;
    let mut frame = |cloths: &mut Vec<Cloth>| {
        layers.step(cloths, dt, &colliders, &mut reports).unwrap();
    };
    // Inside a pool: a join called from outside one injects its job into the pool's queue,
    // which allocates a block every 63 jobs (rayon's, not ours).
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let made = pool.install(|| {
        for _ in 0..480 {
            frame(&mut cloths);
        }
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for _ in 0..120 {
            frame(&mut cloths);
        }
        ALLOCATIONS.load(Ordering::Relaxed) - before
    });
    assert_eq!(made, 0, "layers: {made} allocations in 120 frames");
}
