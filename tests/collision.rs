//! Contact with kinematic bodies: resting on a capsule, friction on a slope, a fast thin limb
//! that must not tunnel, and bad collider data. Each test states the behaviour and tolerance.

use glam::{DQuat, DVec3, Vec3};
use isocloth::{
    BaseMesh, Cloth, ClothMesh, ColliderSet, ColliderShape, ContactSettings, Material, Pose,
    SolverSettings,
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

fn kinetic(cloth: &Cloth) -> f64 {
    cloth.measures().kinetic_energy
}

/// Drops a 0.6 m sheet (12 x 12 base cells, Coulomb coefficient `friction`) from height `y`
/// onto a lying capsule of radius 0.1 m for 4 s: (worst penetration into the thickness layer,
/// worst max strain, max strain at the end, kinetic energy at the end over the energy the fall
/// released, centre of mass height at the end).
fn drop_on_capsule(settings: SolverSettings, friction: f64, y: f64) -> (f64, f64, f64, f64, f64) {
    let mut cloth = sheet_with(0.6, 12, y, &[], false, settings);
    let contact = ContactSettings {
        friction,
        ..*cloth.contact_settings()
    };
    cloth.set_contact_settings(contact).unwrap();
    let mut colliders = ColliderSet::new();
    let (shape, pose) = lying_capsule(DVec3::ZERO, 0.4, 0.1, 0.0);
    colliders.add(shape, pose).unwrap();
    let thickness = cloth.contact_settings().thickness;
    let (mut worst_pen, mut worst_strain) = (0.0f64, 0.0f64);
    let e0 = cloth.measures().gravitational_energy;
    for _ in 0..240 {
        cloth.step_with(1.0 / 60.0, &colliders).unwrap();
        colliders.finish_frame();
        worst_pen = worst_pen.max(colliders.max_penetration(cloth.positions(), thickness));
        worst_strain = worst_strain.max(cloth.measures().max_strain);
    }
    let released = e0 - cloth.measures().gravitational_energy;
    assert!(released > 0.0);
    (
        worst_pen,
        worst_strain,
        cloth.measures().max_strain,
        kinetic(&cloth) / released,
        cloth.center_of_mass().y,
    )
}

/// At the default budget (2 x 5), a 0.6 m sheet dropped onto a 0.1 m capsule from 0.15 to
/// 0.25 m above it drapes over it and comes to rest on it: over 4 s no node deeper than 0.1 mm
/// inside the body's thickness layer at any frame, no strain spike (max strain below 10 % at
/// every frame; measured 2.4-5.4 %), kinetic energy at the end below 1 % of what the fall
/// released, and the sheet on the capsule, not fallen past it. Before sticking contacts were
/// held in the solve (docs/fidelity.md section 5.6) every one of these drops wrapped with
/// 770-810 % strain and fell off. Strain at rest is pinned below 4 % (measured 0.6-3.2 %):
/// friction keeps what the wrap had when the nodes stuck, above the 1 % the fidelity targets
/// ask for, a known gap.
#[test]
fn sheet_dropped_on_a_capsule_comes_to_rest_on_it() {
    for y in [0.25, 0.3, 0.31, 0.35] {
        let (pen, worst, rest, kinetic, height) =
            drop_on_capsule(SolverSettings::default(), 0.3, y);
        assert!(pen < 1e-4, "from {y}: penetration {pen}");
        assert!(worst < 0.1, "from {y}: strain {worst}");
        assert!(rest < 0.04, "from {y}: strain at rest {rest}");
        assert!(kinetic < 0.01, "from {y}: kinetic / released {kinetic}");
        assert!(height > -0.05, "from {y}: fell to {height}");
    }
}

/// The same drop at a high budget (8 x 50) should rest too, with strain at rest below 0.1 %.
///
/// **Known failing, ignored until fixed (collision issue open).** Measured again
/// (2026-11-22): from 0.25 and 0.3 m it rests (2.1 % and 0.88 % strain at rest, worst 27 %
/// and 0.88 %); from 0.31 and 0.35 m the sheet is thrown at its first contact, before any
/// node sticks (25 nodes, coupled; L-BFGS memory extrapolated from the projected iterate,
/// docs/fidelity.md section 5.3), and falls off. Resetting the memory when the contact set
/// changes makes all four rest (rest strain 1.0-2.4 %, still above 0.1 %) but doubles the
/// default budget's strain elsewhere (section 5.7). A line search that judges the projected
/// iterate also makes all four rest (rest strain 0.4-4.1 %) but raises the default budget's
/// `collide` drop from 1.2-1.6 % to 10-14 % (section 5.8). So do correction pairs made
/// through the projection (rest strain 0.3-1.4 %; the same drop 0.8-11 %, section 5.8). The
/// desktop preset (4 x 10) is not launched.
#[test]
#[ignore = "known failing: thrown at first contact at 8 x 50 from some heights; see the doc comment"]
fn sheet_dropped_on_a_capsule_at_a_high_budget_comes_to_rest_on_it() {
    let settings = SolverSettings {
        substeps: 8,
        iterations: 50,
        ..Default::default()
    };
    for y in [0.25, 0.3, 0.31, 0.35] {
        let (pen, worst, rest, kinetic, height) = drop_on_capsule(settings, 0.3, y);
        assert!(pen < 1e-4, "from {y}: penetration {pen}");
        assert!(worst < 0.1, "from {y}: strain {worst}");
        assert!(rest < 1e-3, "from {y}: strain at rest {rest}");
        assert!(kinetic < 0.01, "from {y}: kinetic / released {kinetic}");
        assert!(height > -0.05, "from {y}: fell to {height}");
    }
}

/// Frictionless, nothing sticks and the drop of the tests above wraps with a strain the
/// fixed budget cannot hold (600-850 %, docs/fidelity.md section 5.7, a known gap). Even
/// then the last pass must leave no node deeper than 0.1 mm inside the capsule's thickness
/// layer at the end of any frame, over 4 s from three heights. Before nodes resting on the
/// surface were told apart from nodes spawned inside (`f32` rounding put them just inside),
/// frames ended with nodes 2.7-6.3 cm deep.
#[test]
fn frictionless_drop_leaves_no_node_inside_the_capsule() {
    for y in [0.25, 0.31, 0.35] {
        let (pen, ..) = drop_on_capsule(SolverSettings::default(), 0.0, y);
        assert!(pen < 1e-4, "from {y}: penetration {pen} m");
    }
}

/// Centre-of-mass travel along the axis of a capsule that tilts from level to 20 degrees
/// (tan = 0.36) over 1 s under a sheet laid on it (started `height` m up, settled 1 s), over
/// the tilt and the 2 s after it.
fn slide_on_tilting_capsule(friction: f64, max_coupled_contacts: u32, height: f64) -> f64 {
    let mut cloth = sheet(0.5, 10, height, &[], false);
    cloth
        .set_contact_settings(ContactSettings {
            friction,
            max_coupled_contacts,
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
    for frame in 1..=180 {
        let s = (frame as f64 / 60.0).min(1.0);
        colliders
            .set_pose(id, level.interpolate(&tilted, s))
            .unwrap();
        cloth.step_with(1.0 / 60.0, &colliders).unwrap();
        colliders.finish_frame();
    }
    (cloth.center_of_mass().dot(axis) - start).abs()
}

/// With node-by-node contact (`max_coupled_contacts: 0`), friction 0.8 holds a sheet on a
/// capsule that tilts to 20 degrees: less than 3 cm of travel over 3 s from every start height
/// tried (measured 1.34-1.40 cm), while friction 0 lets it slide off (more than 20 cm).
#[test]
fn friction_holds_a_sheet_on_a_tilted_capsule_and_zero_friction_lets_it_slide() {
    for height in [0.105, 0.107, 0.11, 0.112] {
        let held = slide_on_tilting_capsule(0.8, 0, height);
        let slid = slide_on_tilting_capsule(0.0, 0, height);
        assert!(held < 0.03, "start {height}: friction 0.8 moved {held} m");
        assert!(slid > 0.2, "start {height}: friction 0 moved {slid} m");
    }
}

/// The same with the default settings, where sticking contacts are held in the global solve
/// (docs/fidelity.md section 5.6): friction 0.8 holds the sheet from every start height tried,
/// less than 3 cm of travel (measured 1.8-2.6 cm, most of it the hanging sides settling under
/// the tilted bar). Before, coupled resting contact threw it off from three of these heights
/// (9.6 m).
#[test]
fn friction_holds_with_default_contact_settings() {
    let coupled = ContactSettings::default().max_coupled_contacts;
    for height in [0.105, 0.106, 0.107, 0.108, 0.11, 0.112] {
        let held = slide_on_tilting_capsule(0.8, coupled, height);
        assert!(held < 0.03, "start {height}: friction 0.8 moved {held} m");
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
