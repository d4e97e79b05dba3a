//! Contact with kinematic bodies: resting on a capsule, friction on a slope, a fast thin limb
//! that must not tunnel, and bad collider data. Each test states the behaviour and tolerance.

use glam::{DQuat, DVec3, Vec3};
use isocloth::{
    BaseMesh, Cloth, ClothMesh, ColliderSet, ColliderShape, ContactSettings, Material, Pose,
    SolverMethod, SolverSettings,
};

/// A square sheet of `size` metres and `cells` base cells, horizontal at height `y`, centred on
/// the origin; `pin_top` pins the row of vertices at -z.
fn sheet(size: f64, cells: usize, y: f64, pinned: &[u32], vertical: bool) -> Cloth {
    sheet_with(size, cells, y, pinned, vertical, SolverSettings::default())
}

fn sheet_with(
    size: f64,
    cells: usize,
    y: f64,
    pinned: &[u32],
    vertical: bool,
    settings: SolverSettings,
) -> Cloth {
    let base = BaseMesh::rectangle(size as f32, size as f32, cells, cells)
        .unwrap()
        .map_positions(|p| {
            let (u, v) = (p.x - 0.5 * size as f32, p.y - 0.5 * size as f32);
            if vertical {
                Vec3::new(u, y as f32 + v, 0.0)
            } else {
                Vec3::new(u, y as f32, -v)
            }
        });
    let mesh = ClothMesh::new(&base).unwrap();
    let pins = mesh.nodes_for_vertices(pinned, true);
    Cloth::from_mesh(mesh, Material::default(), &pins, settings).unwrap()
}

/// A capsule lying along the world X axis (local Y turned onto X), tilted by `tilt` radians
/// about Z.
fn lying_capsule(center: DVec3, half_height: f64, radius: f64, tilt: f64) -> (ColliderShape, Pose) {
    let rotation =
        DQuat::from_rotation_z(tilt) * DQuat::from_rotation_z(-std::f64::consts::FRAC_PI_2);
    (
        ColliderShape::Capsule {
            half_height,
            radius,
        },
        Pose::new(center, rotation),
    )
}

/// What a drop did over its 4 s.
struct Drop {
    /// Worst penetration into the thickness layer at a frame's end (m).
    penetration: f64,
    /// Worst max and mean strain over the frames.
    max_strain: f64,
    mean_strain: f64,
    /// Max strain at the end.
    rest_strain: f64,
    /// Kinetic energy at the end over the energy the fall released.
    kinetic: f64,
    /// Centre-of-mass height at the end (m).
    height: f64,
}

/// Drops a 0.6 m sheet (12 x 12 base cells, Coulomb coefficient `friction`) flat from height
/// `y` onto a capsule of `radius` lying along X through the origin for 4 s.
fn drop_on_capsule(settings: SolverSettings, radius: f64, friction: f64, y: f64) -> Drop {
    drop_on_capsule_for(settings, radius, friction, y, 240, (true, 0.0))
}

/// [`drop_on_capsule`] for `frames` frames at 60 Hz, with or without split impulses, the
/// capsule moved by `offset` metres across its axis (along Z) from under the sheet's centre.
fn drop_on_capsule_for(
    settings: SolverSettings,
    radius: f64,
    friction: f64,
    y: f64,
    frames: u32,
    (split_impulses, offset): (bool, f64),
) -> Drop {
    let mut cloth = sheet_with(0.6, 12, y, &[], false, settings);
    let contact = ContactSettings {
        friction,
        split_impulses,
        ..*cloth.contact_settings()
    };
    cloth.set_contact_settings(contact).unwrap();
    let mut colliders = ColliderSet::new();
    let (shape, pose) = lying_capsule(DVec3::new(0.0, 0.0, offset), 0.4, radius, 0.0);
    colliders.add(shape, pose).unwrap();
    let thickness = cloth.contact_settings().thickness;
    let (mut penetration, mut max_strain, mut mean_strain) = (0.0f64, 0.0f64, 0.0f64);
    let e0 = cloth.measures().gravitational_energy;
    for _ in 0..frames {
        cloth.step_with(1.0 / 60.0, &colliders).unwrap();
        colliders.finish_frame();
        penetration = penetration.max(colliders.max_penetration(cloth.positions(), thickness));
        let m = cloth.measures();
        max_strain = max_strain.max(m.max_strain);
        mean_strain = mean_strain.max(m.mean_strain);
    }
    let end = cloth.measures();
    let released = e0 - end.gravitational_energy;
    assert!(released > 0.0);
    Drop {
        penetration,
        max_strain,
        mean_strain,
        rest_strain: end.max_strain,
        kinetic: end.kinetic_energy / released,
        height: cloth.center_of_mass().y,
    }
}

/// Budgets of the shipped presets (the accelerated local-global map): mobile (1 x 5), console
/// (2 x 5, the default), desktop (4 x 10).
fn presets() -> [(&'static str, SolverSettings); 3] {
    let with = |substeps, iterations| SolverSettings {
        substeps,
        iterations,
        method: SolverMethod::Anderson { history: 5 },
        ..Default::default()
    };
    [
        ("mobile", with(1, 5)),
        ("console", SolverSettings::default()),
        ("desktop", with(4, 10)),
    ]
}

/// Dropped onto a forearm-sized capsule (radius 0.1 m) with friction 0.3 from 0.15 to 0.25 m
/// above it, a 0.6 m sheet does not tear at any shipped preset: over 4 s its max strain stays
/// under 10 % at every frame (measured 0.7-5.7 %; before per-node contact forces, 230-870 %
/// whenever a sheet wrapped a bar without sticking) and no node ends a frame deeper than
/// 0.1 mm inside the body's thickness layer.
///
/// That it then rests on the bar at every preset is pinned by
/// `a_sheet_dropped_on_a_bar_rests_on_it_at_every_preset`.
#[test]
fn sheet_dropped_on_a_capsule_does_not_tear_at_any_preset() {
    for (name, settings) in presets() {
        for y in [0.25, 0.3, 0.35] {
            let Drop {
                penetration: pen,
                max_strain: worst,
                ..
            } = drop_on_capsule(settings, 0.1, 0.3, y);
            assert!(pen < 1e-4, "{name} from {y}: penetration {pen}");
            assert!(worst < 0.1, "{name} from {y}: strain {worst}");
        }
    }
}

/// At a high budget (8 x 50) the same drop comes to rest on the capsule: no strain spike (max
/// strain under 1 % at every frame, measured 0.24-0.45 %), strain at rest under 0.1 %
/// (measured 0.013-0.018 %), kinetic energy at the end under 1 % of what the fall released
/// (measured 0.16-0.25 %), the sheet still on the capsule. Before per-node contact forces
/// the sheet was thrown at its first contact from these two heights (it rested from 0.25 and
/// 0.3 m, which measure alike now).
#[test]
fn sheet_dropped_on_a_capsule_at_a_high_budget_comes_to_rest_on_it() {
    let settings = SolverSettings {
        substeps: 8,
        iterations: 50,
        ..Default::default()
    };
    for y in [0.31, 0.35] {
        let Drop {
            penetration: pen,
            max_strain: worst,
            rest_strain: rest,
            kinetic,
            height,
            ..
        } = drop_on_capsule(settings, 0.1, 0.3, y);
        assert!(pen < 1e-4, "from {y}: penetration {pen}");
        assert!(worst < 0.01, "from {y}: strain {worst}");
        assert!(rest < 1e-3, "from {y}: strain at rest {rest}");
        assert!(kinetic < 0.01, "from {y}: kinetic / released {kinetic}");
        assert!(height > -0.05, "from {y}: fell to {height}");
    }
}

/// Rest without bounce: dropped flat onto a bar (radius 3, 5 and 10 cm, lying through the
/// origin) with friction 0.3 and 0.8 from 20 cm above it, a 0.6 m sheet comes to rest draped on
/// the bar at every shipped preset: after 4 s its centre of mass is above -0.15 m (draped over
/// a 3 cm bar it hangs at -0.086 m at the lowest measured; a sheet that slid off is metres
/// down), its kinetic energy is under 0.1 % of what the fall released (measured at most
/// 0.025 %) and its max strain at rest under 1 % (measured 0.02-0.21 %). Before split impulses
/// the sheet left the bar with the lift its first contact gave the flap and slid off at console
/// and mobile (docs/lab/2026-11-27-one-iteration.md).
#[test]
fn a_sheet_dropped_on_a_bar_rests_on_it_at_every_preset() {
    for (name, settings) in presets() {
        for radius in [0.03, 0.05, 0.1] {
            for friction in [0.3, 0.8] {
                let d = drop_on_capsule(settings, radius, friction, radius + 0.2);
                let at = format!("{name}, radius {radius}, friction {friction}");
                assert!(d.height > -0.15, "{at}: fell to {} m", d.height);
                assert!(d.kinetic < 1e-3, "{at}: kinetic / released {}", d.kinetic);
                assert!(
                    d.rest_strain < 0.01,
                    "{at}: strain at rest {}",
                    d.rest_strain
                );
                assert!(d.penetration < 1e-4, "{at}: penetration {}", d.penetration);
            }
        }
    }
}

/// Frictionless, a sheet dropped 3 cm off-centre on a capsule (radius 0.1 m) cannot stay: it
/// wraps, slides off one side and falls (centred, it may balance: with the accelerated
/// iteration nothing breaks the symmetry any more). Without split impulses
/// (`ContactSettings::split_impulses: false`) it does so without tearing: max strain under
/// 12 % at every frame at every preset (measured 4-11.7 %; 600-870 % before per-node contact
/// forces, `docs/lab/fidelity.md` section 5.7), no node deeper than 0.1 mm inside the
/// thickness layer at any frame's end, and the sheet ends below the capsule (more than 1 m down
/// after 8 s) at console and desktop. At mobile (1 x 5) the strain cap's squeeze limit slows the
/// wrap that starts the slide (the converged sheet leaves the bar within 1 s, 2 x 5 after 1.5 s
/// uncapped and 1.8 s capped, 1 x 5 after 1 s uncapped and 3-4 s capped), and from 0.31 m it is
/// still on the bar after 8 s (docs/lab/2026-11-29-motion.md section 2). With split impulses (the default) the split damps the motion the bar's support
/// passes through the cloth, so that even 3-6 cm off-centre the sheet stays on the bar at the
/// mobile and console presets (a known gap, `docs/lab/2026-11-27-one-iteration.md`); there it
/// must still hold without tearing (under 10 %, measured 0.4-4 %).
#[test]
fn frictionless_drop_slides_off_the_capsule_without_tearing() {
    for (name, settings) in presets() {
        for y in [0.25, 0.31, 0.35] {
            for split in [false, true] {
                let Drop {
                    penetration: pen,
                    max_strain: worst,
                    height,
                    ..
                } = drop_on_capsule_for(settings, 0.1, 0.0, y, 480, (split, 0.03));
                assert!(
                    pen < 1e-4,
                    "{name} from {y}, split {split}: penetration {pen} m"
                );
                if split {
                    assert!(worst < 0.1, "{name} from {y}, split: strain {worst}");
                } else {
                    assert!(worst < 0.12, "{name} from {y}: strain {worst}");
                    if name != "mobile" {
                        assert!(height < -1.0, "{name} from {y}: still at {height} m");
                    }
                }
            }
        }
    }
}

/// The first scene: a 0.6 m sheet dropped flat onto a lying capsule of radius 3.5 cm,
/// thinner than a forearm. Frictionless and at friction 0.3, at every preset, it neither tears
/// nor explodes: max strain under 10 % and mean under 1 % over 4 s (measured: console 2.7 % /
/// 0.33 % frictionless, 8.7 % / 0.90 % at 0.3; desktop 1.1 % / 0.09 % and 0.64 % / 0.06 %;
/// before per-node contact forces, frictionless: 280-390 %). The mobile preset (1 x 5
/// local-global) is held to it since the coupled contact step (13-180 % before,
/// `docs/lab/2026-11-26-coupled-contact.md`).
#[test]
fn no_explosion_on_a_thin_capsule() {
    for (name, settings) in presets() {
        for friction in [0.0, 0.3] {
            let Drop {
                max_strain: max,
                mean_strain: mean,
                ..
            } = drop_on_capsule(settings, 0.035, friction, 0.035 + 0.2);
            assert!(max < 0.1, "{name}, friction {friction}: max strain {max}");
            assert!(
                mean < 0.01,
                "{name}, friction {friction}: mean strain {mean}"
            );
        }
    }
}

/// Centre-of-mass travel along the axis of a capsule that tilts from level to 20 degrees
/// (tan = 0.36) over 1 s under a sheet laid on it (started `height` m up, settled 1 s): over the
/// tilt, and over the 2 s hold after it (the creep).
fn slide_on_tilting_capsule(friction: f64, height: f64) -> (f64, f64) {
    let mut cloth = sheet(0.5, 10, height, &[], false);
    cloth
        .set_contact_settings(ContactSettings {
            friction,
            ..Default::default()
        })
        .unwrap();
    let mut colliders = ColliderSet::new();
    let (shape, level) = lying_capsule(DVec3::ZERO, 1.0, 0.1, 0.0);
    let id = colliders.add(shape, level).unwrap();
    for _ in 0..60 {
        cloth.step_with(1.0 / 60.0, &colliders).unwrap();
    }
    let (_, tilted) = lying_capsule(DVec3::ZERO, 1.0, 0.1, 20f64.to_radians());
    let axis = tilted.transform_vector(DVec3::Y);
    let start = cloth.center_of_mass().dot(axis);
    let mut tilt_end = start;
    for frame in 1..=180 {
        let s = (frame as f64 / 60.0).min(1.0);
        colliders
            .set_pose(id, level.interpolate(&tilted, s))
            .unwrap();
        cloth.step_with(1.0 / 60.0, &colliders).unwrap();
        colliders.finish_frame();
        if frame == 60 {
            tilt_end = cloth.center_of_mass().dot(axis);
        }
    }
    let end = cloth.center_of_mass().dot(axis);
    ((tilt_end - start).abs(), (end - tilt_end).abs())
}

/// Friction 0.8 holds a sheet on a capsule that tilts to 20 degrees, from every start height
/// tried: less than 3 cm of travel while it tilts (measured 2.3-2.5 cm: the draped sheet
/// shifts as the axis turns) and less than 1 cm of creep over the 2 s hold after it (measured
/// 5-8 mm with sticking anchors; the static-friction bound), while friction 0 lets it
/// slide off (more than 20 cm).
#[test]
fn friction_holds_a_sheet_on_a_tilted_capsule_and_zero_friction_lets_it_slide() {
    for height in [0.105, 0.106, 0.107, 0.108, 0.11, 0.112] {
        let (tilt, creep) = slide_on_tilting_capsule(0.8, height);
        let (slid_tilt, slid_hold) = slide_on_tilting_capsule(0.0, height);
        assert!(
            tilt < 0.03,
            "start {height}: friction 0.8 moved {tilt} m in the tilt"
        );
        assert!(
            creep < 0.01,
            "start {height}: friction 0.8 crept {creep} m in the hold"
        );
        let slid = slid_tilt + slid_hold;
        assert!(slid > 0.2, "start {height}: friction 0 moved {slid} m");
    }
}

/// A forearm-sized capsule (radius 4 cm) sweeping at 10 m/s through a hanging 1 m sheet moves
/// 8 cm per substep at the default 2 x 5 budget, twice its diameter. Resolved against its motion,
/// it pushes the sheet: while it sweeps and for a few frames after, no node is behind it inside
/// its footprint, and at no frame does any node lie deeper than 0.1 mm inside its thickness
/// layer. (Later the pushed sheet swings up and over the limb and may hang behind it: that is
/// not tunnelling, so the footprint check stops when the limb has stopped.)
#[test]
fn fast_thin_limb_pushes_the_sheet_without_tunnelling() {
    let cells = 16;
    let top: Vec<u32> = (0..=cells)
        .map(|i| BaseMesh::grid_index(cells, i, cells))
        .collect();
    let mut cloth = sheet(1.0, cells, 0.5, &top, true);
    let (radius, half) = (0.04, 0.2);
    let mut colliders = ColliderSet::new();
    let (shape, pose0) = lying_capsule(DVec3::new(0.0, 0.4, -0.4), half, radius, 0.0);
    let id = colliders.add(shape, pose0).unwrap();
    let thickness = cloth.contact_settings().thickness;
    let (mut tunnelled, mut worst_pen, mut pushed) = (0usize, 0.0f64, f64::MIN);
    for frame in 0..60 {
        let z = (-0.4 + 10.0 * (frame + 1) as f64 / 60.0).min(0.4);
        let pose = Pose::new(DVec3::new(0.0, 0.4, z), pose0.rotation);
        colliders.set_pose(id, pose).unwrap();
        cloth.step_with(1.0 / 60.0, &colliders).unwrap();
        colliders.finish_frame();
        worst_pen = worst_pen.max(colliders.max_penetration(cloth.positions(), thickness));
        let behind = cloth
            .positions()
            .iter()
            .filter(|p| p.x.abs() < half && (p.y - 0.4).abs() < radius && p.z < z)
            .count();
        if frame < 10 {
            tunnelled = tunnelled.max(behind);
            pushed = pushed.max(cloth.center_of_mass().z);
        }
    }
    assert_eq!(tunnelled, 0, "nodes left behind the limb");
    assert!(worst_pen < 1e-4, "penetration {worst_pen}");
    // The sheet was pushed: its centre of mass moved forward with the limb.
    assert!(pushed > 0.1, "centre of mass reached z = {pushed}");
}

/// Friction may not stretch the cloth. A 0.5 m sheet pinned along one edge settles for 1 s over
/// a lying capsule (radius 0.1 m, friction 0.8), then the capsule spins about its own axis at
/// 5 rad/s (surface speed 0.5 m/s) for 2 s, both ways: friction drags the sheet against its
/// pins, and where the cloth resists, the contact nodes slide instead of being carried apart.
/// Render-mesh strain stays under 10 % on every frame and no node goes deeper than 0.1 mm.
/// Measured: 1.2 % and 1.4 %; before friction was limited, 16 % one way.
#[test]
fn a_spinning_body_drags_a_pinned_sheet_without_stretching_it() {
    let cells = 10;
    for spin in [5.0, -5.0] {
        let edge: Vec<u32> = (0..=cells)
            .map(|i| BaseMesh::grid_index(cells, i, cells))
            .collect();
        let mut cloth = sheet(0.5, cells, 0.12, &edge, false);
        cloth
            .set_contact_settings(ContactSettings {
                friction: 0.8,
                ..Default::default()
            })
            .unwrap();
        let mut colliders = ColliderSet::new();
        let (shape, pose) = lying_capsule(DVec3::ZERO, 0.5, 0.1, 0.0);
        let id = colliders.add(shape, pose).unwrap();
        for _ in 0..60 {
            cloth.step_with(1.0 / 60.0, &colliders).unwrap();
        }
        let thickness = cloth.contact_settings().thickness;
        let (mut worst_strain, mut worst_pen) = (0.0f64, 0.0f64);
        for frame in 1..=120 {
            // The capsule's axis is world X; spin about it.
            let angle = spin * frame as f64 / 60.0;
            let spun = Pose::new(DVec3::ZERO, DQuat::from_rotation_x(angle) * pose.rotation);
            colliders.set_pose(id, spun).unwrap();
            cloth.step_with(1.0 / 60.0, &colliders).unwrap();
            colliders.finish_frame();
            worst_strain = worst_strain.max(cloth.measures().max_strain);
            worst_pen = worst_pen.max(colliders.max_penetration(cloth.positions(), thickness));
        }
        println!("spin {spin}: worst strain {worst_strain}, penetration {worst_pen}");
        assert!(worst_strain < 0.1, "spin {spin}: strain {worst_strain}");
        assert!(worst_pen < 1e-4, "spin {spin}: penetration {worst_pen}");
    }
}

/// A sheet resting on the ground keeps one contact force per pushed node between steps (its
/// snapshot lists them, each with a node inside the cloth and a finite force); a reset drops
/// them, since they held the cloth where it was; and a snapshot naming a node beyond the cloth
/// is refused with a typed error.
#[test]
fn contact_forces_carry_over_and_a_reset_drops_them() {
    let mut cloth = sheet(0.5, 10, 0.01, &[], false);
    let mut colliders = ColliderSet::new();
    colliders
        .add(
            ColliderShape::Plane,
            Pose::new(DVec3::ZERO, DQuat::IDENTITY),
        )
        .unwrap();
    for _ in 0..30 {
        cloth.step_with(1.0 / 60.0, &colliders).unwrap();
    }
    let snapshot = cloth.snapshot();
    let n = cloth.positions().len() as u32;
    assert!(!snapshot.contact_forces.is_empty());
    assert!(
        snapshot
            .contact_forces
            .iter()
            .all(|f| f.node < n && f.force.is_finite())
    );
    cloth.reset();
    assert!(cloth.snapshot().contact_forces.is_empty());
    let mut bad = snapshot.clone();
    bad.contact_forces[0].node = n;
    assert!(cloth.restore(&bad).is_err());
    cloth.restore(&snapshot).unwrap();
    assert_eq!(cloth.snapshot().contact_forces, snapshot.contact_forces);
}

/// A removed collider collides with nothing: a sheet draped over a capsule for 2 s, then 0.5 s
/// more, ends over 30 cm lower with the capsule removed than kept (free fall: 1.2 m in 0.5 s;
/// kept, the sheet stays within 5 cm of its draped height). The
/// removed id reads `None` and refuses poses, and the next `add` reuses it.
#[test]
fn a_removed_collider_lets_the_cloth_fall_and_its_id_is_reused() {
    let mean_y =
        |c: &Cloth| c.positions().iter().map(|p| p.y).sum::<f64>() / c.positions().len() as f64;
    let run = |remove: bool| {
        let mut cloth = sheet(0.4, 6, 0.06, &[], false);
        let mut colliders = ColliderSet::new();
        let (shape, pose) = lying_capsule(DVec3::ZERO, 0.3, 0.05, 0.0);
        let id = colliders.add(shape.clone(), pose).unwrap();
        for _ in 0..120 {
            cloth.step_with(1.0 / 60.0, &colliders).unwrap();
            colliders.finish_frame();
        }
        let draped = mean_y(&cloth);
        if remove {
            colliders.remove(id).unwrap();
            assert_eq!(colliders.shape(id), None);
            assert_eq!(colliders.pose(id), None);
            assert!(colliders.set_pose(id, pose).is_err());
        }
        for _ in 0..30 {
            cloth.step_with(1.0 / 60.0, &colliders).unwrap();
            colliders.finish_frame();
        }
        if remove {
            assert_eq!(colliders.add(shape, pose).unwrap(), id);
        }
        (draped, mean_y(&cloth))
    };
    let (draped, kept) = run(false);
    assert!((kept - draped).abs() < 0.05, "kept: {draped} -> {kept}");
    let (_, fell) = run(true);
    assert!(fell < kept - 0.3, "removed: {fell}, kept: {kept}");
}
