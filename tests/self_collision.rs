//! Self-collision (`isocloth::self_contact`): cloth that folds onto itself, is squeezed flat or
//! hangs free, at the console preset (the crate's default).

use glam::{DQuat, DVec3, Vec3};
use isocloth::self_contact::self_intersections;
use isocloth::{
    BaseMesh, Cloth, ClothMesh, ColliderSet, ColliderShape, Material, Pose, SelfCollisionSettings,
    SolverSettings,
};

const DT: f64 = 1.0 / 60.0;

fn on() -> SelfCollisionSettings {
    SelfCollisionSettings {
        enabled: true,
        ..Default::default()
    }
}

fn crossed(cloth: &Cloth) -> usize {
    self_intersections(cloth.model().mesh().render_triangles(), cloth.positions())
}

/// A 1 m sheet (16 x 16 cells) tilted 60 degrees and turned by `turn` radians about the
/// vertical, its lowest point 0.5 m above the ground: it lands edge first and folds onto itself.
fn tilted_sheet(turn: f64) -> (Cloth, ColliderSet) {
    let tilt = DQuat::from_rotation_y(turn) * DQuat::from_rotation_x(-std::f64::consts::FRAC_PI_3);
    let lift = 0.5 + 0.5 * std::f64::consts::FRAC_PI_3.sin();
    let base = BaseMesh::rectangle(1.0, 1.0, 16, 16)
        .unwrap()
        .map_positions(|p| {
            let q = DVec3::new(f64::from(p.x) - 0.5, 0.0, f64::from(p.y) - 0.5);
            (tilt * q + DVec3::new(0.0, lift, 0.0)).as_vec3()
        });
    let cloth = Cloth::from_mesh(
        ClothMesh::new(&base).unwrap(),
        Material::default(),
        &[],
        SolverSettings::default(),
    )
    .unwrap();
    let mut colliders = ColliderSet::new();
    colliders
        .add(ColliderShape::Plane, Pose::default())
        .unwrap();
    (cloth, colliders)
}

/// The most crossed triangle pairs at the end of any of `frames` steps.
fn worst_crossings(cloth: &mut Cloth, colliders: &ColliderSet, frames: usize) -> usize {
    let mut worst = 0;
    for _ in 0..frames {
        cloth.step_with(DT, colliders).unwrap();
        worst = worst.max(crossed(cloth));
    }
    worst
}

/// A sheet dropped edge first folds onto itself on the ground: with self-collision no pair of
/// triangles crosses at the end of any step over 2 s, for two turns of the drop. (Without it
/// the layers used to pass through each other, over 20 crossed pairs at some frame; since the
/// contact gives no bounce and sticking nodes keep their anchors,
/// `docs/lab/2026-11-27-one-iteration.md`, the sheet lands calmly and crosses itself in 0-1
/// pairs without self-collision too, so this scene no longer shows the need: the squeezed tube
/// below does.)
#[test]
fn a_sheet_folding_onto_itself_on_the_ground_never_crosses_itself() {
    for turn in [0.6, 1.1] {
        let (mut cloth, colliders) = tilted_sheet(turn);
        cloth.set_self_collision(on()).unwrap();
        let worst = worst_crossings(&mut cloth, &colliders, 120);
        assert_eq!(worst, 0, "turn {turn}");
        let m = cloth.measures();
        assert!(m.max_strain.is_finite() && m.max_strain < 0.5, "{m:?}");
    }
}

/// A tube hanging from its top ring, squeezed between two capsules closing in 1 s to 4 cm
/// apart: its two walls are pressed together between them (every node near the capsules'
/// height within 3 cm of the middle plane at the end), and no triangle pair crosses at the end
/// of any step.
#[test]
fn a_tube_squeezed_flat_between_two_capsules_keeps_its_walls_apart() {
    let (around, along) = (24, 8);
    let base = BaseMesh::tube(0.15, 0.45, around, along)
        .unwrap()
        .map_positions(|p| p + Vec3::new(0.0, 0.55, 0.0));
    let mesh = ClothMesh::new(&base).unwrap();
    let top: Vec<u32> = (0..around as u32)
        .map(|i| i + (along * around) as u32)
        .collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    let mut cloth =
        Cloth::from_mesh(mesh, Material::default(), &pins, SolverSettings::default()).unwrap();
    cloth.set_self_collision(on()).unwrap();
    let radius = 0.05;
    let capsule = ColliderShape::Capsule {
        half_height: 0.3,
        radius,
    };
    let along_z = DQuat::from_rotation_x(std::f64::consts::FRAC_PI_2);
    let offset = |t: f64| {
        let s = (t / 1.0).min(1.0);
        0.32 + (radius + 0.02 - 0.32) * s * s * (3.0 - 2.0 * s)
    };
    let pose = |side: f64, t: f64| Pose::new(DVec3::new(side * offset(t), 0.75, 0.0), along_z);
    let mut colliders = ColliderSet::new();
    let a = colliders.add(capsule.clone(), pose(1.0, 0.0)).unwrap();
    let b = colliders.add(capsule, pose(-1.0, 0.0)).unwrap();
    for frame in 0..90 {
        let t = (frame + 1) as f64 * DT;
        colliders.set_pose(a, pose(1.0, t)).unwrap();
        colliders.set_pose(b, pose(-1.0, t)).unwrap();
        cloth.step_with(DT, &colliders).unwrap();
        colliders.finish_frame();
        assert_eq!(crossed(&cloth), 0, "frame {frame}");
    }
    // Squeezed: the nodes near the capsules' height lie within 3 cm of the middle plane.
    let squeezed = cloth
        .positions()
        .iter()
        .filter(|p| (p.y - 0.75).abs() < 0.02 && p.z.abs() < 0.1)
        .all(|p| p.x.abs() < 0.03);
    assert!(squeezed, "the capsules must press the walls together");
}

/// A sheet hanging from its top edge never comes near itself: with self-collision on, every
/// step is bit-identical to the same cloth with it off (the broad phase finds no pair and the
/// continuous check finds no crossing, so nothing moves).
#[test]
fn a_cloth_far_from_itself_is_untouched_by_self_collision() {
    let make = || {
        let base = BaseMesh::rectangle(1.0, 1.0, 10, 10).unwrap();
        let mesh = ClothMesh::new(&base).unwrap();
        let top: Vec<u32> = (0..=10).map(|i| BaseMesh::grid_index(10, i, 10)).collect();
        let pins = mesh.nodes_for_vertices(&top, true);
        Cloth::from_mesh(mesh, Material::default(), &pins, SolverSettings::default()).unwrap()
    };
    let (mut plain, mut selfc) = (make(), make());
    selfc.set_self_collision(on()).unwrap();
    for _ in 0..60 {
        plain.step(DT).unwrap();
        selfc.step(DT).unwrap();
        assert_eq!(plain.positions(), selfc.positions());
    }
}

/// A bad thickness is refused with a typed error naming it, and the cloth keeps its settings.
#[test]
fn bad_self_collision_thickness_is_refused() {
    let (mut cloth, _) = tilted_sheet(0.0);
    for thickness in [0.0, -1.0, f64::NAN, 2.0] {
        let err = cloth
            .set_self_collision(SelfCollisionSettings {
                enabled: true,
                thickness,
            })
            .unwrap_err();
        assert!(
            err.to_string().contains("self_collision.thickness"),
            "{err}"
        );
    }
    assert!(!cloth.self_collision().enabled);
}
