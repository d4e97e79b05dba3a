//! Runtime faults a game throws at cloth: bad poses, frame hitches, bodies spawned inside the
//! cloth, everything or nothing pinned, absurd settings. Each test states the behaviour it pins.

use glam::DVec3;
use isocloth::{
    AttachmentSettings, BaseMesh, Cloth, ClothError, ClothMesh, ColliderSet, ColliderShape,
    ContactSettings, Material, Pose, SolverSettings,
};

mod common;

fn cape() -> Cloth {
    common::hanging_cape(0.6, 0.8, 8)
}

use common::max_speed;

/// A NaN bone pose or collider pose is refused with a typed error and changes nothing: the
/// cloth steps on, finite, with its previous targets and the collider at its previous pose.
#[test]
fn nan_bone_and_collider_poses_are_refused_and_change_nothing() {
    let mut cloth = cape();
    let bind = Pose::from_translation(DVec3::new(0.0, 1.5, 0.0));
    let mut att = common::bind_pins_to_one_bone(&cloth, bind, AttachmentSettings::default());
    let nan = Pose::from_translation(DVec3::new(f64::NAN, 0.0, 0.0));
    assert!(att.apply(&mut cloth, &[nan]).is_err());
    let mut colliders = ColliderSet::new();
    let id = colliders
        .add(ColliderShape::Sphere { radius: 0.1 }, Pose::IDENTITY)
        .unwrap();
    assert!(colliders.set_pose(id, nan).is_err());
    assert_eq!(colliders.pose(id), Some(Pose::IDENTITY));
    for _ in 0..30 {
        cloth.step_with(1.0 / 60.0, &colliders).unwrap();
    }
    assert!(cloth.positions().iter().all(|p| p.is_finite()));
    assert_eq!(cloth.recoveries(), 0);
}

/// A 1 s frame hitch runs at most the catch-up cap of substeps (2 frames' worth), reports the
/// rest as dropped, and gives no speed spike: the hanging cape moves slower than 1 m/s.
#[test]
fn one_second_hitch_is_capped_without_a_spike() {
    let mut cloth = cape();
    for _ in 0..30 {
        cloth.step(1.0 / 60.0).unwrap();
    }
    let report = cloth.step(1.0).unwrap();
    let s = cloth.settings();
    assert_eq!(report.substeps, s.catch_up_frames * s.substeps);
    assert!(report.dropped_substeps > 100, "{report:?}");
    assert!(max_speed(&cloth) < 1.0, "{}", max_speed(&cloth));
}

/// A sphere spawned overlapping the hanging cape (15 cm deep): the cloth stays finite and after
/// 1 s no node is inside the sphere's thickness layer. Nodes found inside are pushed out at the
/// depenetration speed (1 m/s), but the strain that pushing creates still throws the cape: its
/// centre of mass reaches 11.0 m/s (12.3 m/s with the strain cap, which takes the stretch out of
/// the pushed band at once) and its fastest node, on the free edge, under 40 m/s (measured with
/// the local-global map and its coupled contact step; 4.5 m/s under L-BFGS's per-node update,
/// the default before 2026-11-27; the node figure is chaotic and moved between 8 and 29 m/s
/// with small changes to the contact pass). Bounded here at 13 and 40 m/s. Easing it out gently
/// is part of the open contact work.
#[test]
fn body_spawned_inside_the_cloth_eases_it_out() {
    let mut cloth = cape();
    let mut colliders = ColliderSet::new();
    colliders
        .add(
            ColliderShape::Sphere { radius: 0.2 },
            Pose::from_translation(DVec3::new(0.0, 1.0, -0.05)),
        )
        .unwrap();
    let masses = cloth.model().masses().to_vec();
    let total: f64 = masses.iter().sum();
    let (mut worst, mut worst_com) = (0.0f64, 0.0f64);
    for _ in 0..60 {
        cloth.step_with(1.0 / 60.0, &colliders).unwrap();
        worst = worst.max(max_speed(&cloth));
        let momentum = cloth
            .velocities()
            .iter()
            .zip(&masses)
            .fold(DVec3::ZERO, |a, (v, &m)| a + *v * m);
        worst_com = worst_com.max(momentum.length() / total);
    }
    assert!(worst < 40.0, "node speed {worst}");
    assert!(worst_com < 13.0, "centre of mass speed {worst_com}");
    assert!(cloth.positions().iter().all(|p| p.is_finite()));
    let pen = colliders.max_penetration(cloth.positions(), cloth.contact_settings().thickness);
    assert!(pen < 1e-4, "penetration {pen}");
}

/// A cloth with every node pinned steps (there is nothing to solve) and follows its targets
/// exactly.
#[test]
fn every_node_pinned_follows_its_targets() {
    let base = BaseMesh::rectangle(0.5, 0.5, 4, 4).unwrap();
    let mesh = ClothMesh::new(&base).unwrap();
    let all: Vec<u32> = (0..mesh.node_count() as u32).collect();
    let mut cloth =
        Cloth::from_mesh(mesh, Material::default(), &all, SolverSettings::default()).unwrap();
    let moved: Vec<DVec3> = cloth
        .positions()
        .iter()
        .map(|p| *p + DVec3::new(0.1, 0.2, 0.3))
        .collect();
    cloth.set_pin_targets(&moved).unwrap();
    cloth.step(1.0 / 60.0).unwrap();
    assert_eq!(cloth.positions(), moved.as_slice());
}

/// A cloth with no pins falls freely for 10 simulated minutes (36,000 frames; the hour-long
/// run is documented in the notes): it stays finite, keeps its shape (max strain below 1e-6)
/// and its centre of mass follows `g t^2 / 2` to 1e-6 relative.
#[test]
fn free_fall_for_ten_minutes_stays_finite_and_rigid() {
    let base = BaseMesh::rectangle(0.5, 0.5, 4, 4).unwrap();
    let mesh = ClothMesh::new(&base).unwrap();
    let mut cloth =
        Cloth::from_mesh(mesh, Material::default(), &[], SolverSettings::default()).unwrap();
    let y0 = cloth.center_of_mass().y;
    let frames = 36_000;
    for _ in 0..frames {
        cloth.step(1.0 / 60.0).unwrap();
    }
    let t = frames as f64 / 60.0;
    let drop = y0 - cloth.center_of_mass().y;
    let want = 0.5 * 9.81 * t * t;
    assert!(cloth.positions().iter().all(|p| p.is_finite()));
    assert!(((drop - want) / want).abs() < 1e-6, "{drop} vs {want}");
    assert!(
        cloth.measures().max_strain < 1e-6,
        "{}",
        cloth.measures().max_strain
    );
    assert_eq!(cloth.recoveries(), 0);
}

/// Absurd settings are typed errors: zero or negative step, zero or a million iterations, zero
/// or negative density, negative thickness or friction.
#[test]
fn absurd_settings_are_typed_errors() {
    let bad_settings = [
        SolverSettings {
            frame_time: 0.0,
            ..Default::default()
        },
        SolverSettings {
            frame_time: -1.0 / 60.0,
            ..Default::default()
        },
        SolverSettings {
            iterations: 0,
            ..Default::default()
        },
        SolverSettings {
            iterations: 1_000_000,
            ..Default::default()
        },
        SolverSettings {
            substeps: 0,
            ..Default::default()
        },
    ];
    for s in bad_settings {
        assert!(
            matches!(s.validate(), Err(ClothError::InvalidSetting { .. })),
            "{s:?}"
        );
    }
    for density in [0.0, -1.0, f64::NAN] {
        let m = Material {
            density,
            ..Default::default()
        };
        assert!(matches!(
            m.validate(),
            Err(ClothError::InvalidSetting { .. })
        ));
    }
    let mut cloth = cape();
    for c in [
        ContactSettings {
            thickness: -0.01,
            ..Default::default()
        },
        ContactSettings {
            friction: -1.0,
            ..Default::default()
        },
    ] {
        assert!(matches!(
            cloth.set_contact_settings(c),
            Err(ClothError::InvalidSetting { .. })
        ));
    }
    assert!(cloth.step(-1.0).is_err());
    assert!(cloth.step(f64::NAN).is_err());
}
