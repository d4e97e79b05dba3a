//! Pins and bodies on a character with arms, a neck and a head (#58): a cape hung from the neck
//! and shoulders, through a clip that swings both arms over the head and turns the head, with
//! the default collision groups and pin rule. Each test states the behaviour and its tolerance.
#![cfg(feature = "ecs")]

use bevy_ecs::prelude::*;
use glam::{DQuat, DVec3, Vec3};
use isocloth::ecs::{
    BoneCollider, BonePose, BudgetPreset, ClothAttachments, ClothColliders, ClothCollisionGroups,
    ClothConfig, ClothSim, add_cloth_systems, init_cloth_resources,
};
use isocloth::rig::{self, CharacterRig};
use isocloth::{
    AttachmentSettings, Attachments, BaseMesh, Cloth, ClothMesh, CollisionGroups, Influence,
    Material, Pose, SolverSettings,
};

/// The bones of the test character, in pose order.
const BONES: [&str; 9] = [
    "chest",
    "neck",
    "head",
    "clavicle.L",
    "clavicle.R",
    "upper_arm.L",
    "upper_arm.R",
    "forearm.L",
    "forearm.R",
];
/// The clip's length: 4 s at 60 Hz.
const FRAMES: usize = 240;

/// World poses at time `t`: standing, both arms swung forward and up over the head (to 3.3 rad,
/// a little behind the vertical) and down again every 2 s, the shoulders shrugging 0.1 rad
/// with them, the head turning 1 rad either way every 3 s (a twentieth of it at the neck).
/// How hard the rig pulls the collar: the neck's share of the head's turn, the shoulders'
/// shrug at full raise (rad), the neck's share of the collar's middle.
#[derive(Clone, Copy)]
struct Rig {
    neck_turn: f64,
    shrug: f64,
    neck_share: f64,
}

/// The rig of the tests: a twentieth of the turn at the neck, 0.1 rad of shrug, the collar's
/// middle 0.3 on the neck (0.7 on the chest).
const MILD: Rig = Rig {
    neck_turn: 0.05,
    shrug: 0.1,
    neck_share: 0.3,
};

/// A rig that stretches its collar: a fifth of the turn at the neck, 0.25 rad of shrug, the
/// collar's middle all on the neck (its pinned row alone strains 16 %).
const HARSH: Rig = Rig {
    neck_turn: 0.2,
    shrug: 0.25,
    neck_share: 1.0,
};

fn poses(t: f64, rig: Rig) -> Vec<Pose> {
    use std::f64::consts::TAU;
    let raise = 0.5 * (1.0 - (TAU * t / 2.0).cos());
    let turn = (TAU * t / 3.0).sin();
    let local =
        |parent: &Pose, offset: DVec3, rotation: DQuat| parent.mul(&Pose::new(offset, rotation));
    let chest = Pose::from_translation(DVec3::new(0.0, 1.32, 0.0));
    let neck = local(
        &chest,
        DVec3::new(0.0, 0.3, 0.0),
        DQuat::from_rotation_y(rig.neck_turn * turn),
    );
    let head = local(
        &neck,
        DVec3::new(0.0, 0.1, 0.0),
        DQuat::from_rotation_y((1.0 - rig.neck_turn) * turn),
    );
    let clavicle = |side: f64| {
        local(
            &chest,
            DVec3::new(0.12 * side, 0.26, 0.0),
            DQuat::from_rotation_z(rig.shrug * raise * side),
        )
    };
    let upper = |side: f64| {
        local(
            &chest,
            DVec3::new(0.22 * side, 0.24, 0.0),
            DQuat::from_rotation_x(-3.3 * raise) * DQuat::from_rotation_z(0.12 * side),
        )
    };
    let fore = |upper: &Pose| {
        local(
            upper,
            DVec3::new(0.0, -0.3, 0.0),
            DQuat::from_rotation_x(-0.3),
        )
    };
    let (ul, ur) = (upper(1.0), upper(-1.0));
    vec![
        chest,
        neck,
        head,
        clavicle(1.0),
        clavicle(-1.0),
        ul,
        ur,
        fore(&ul),
        fore(&ur),
    ]
}

/// A 0.44 x 0.8 m cape (10 x 16 base cells) behind the back, its top row at clavicle height on
/// the chest capsule's surface (the row below it inside the thickness layer), pinned along it:
/// the middle to the chest (0.7) and the neck (0.3), blending toward the clavicle on each side
/// (all of it at the outer corners), as a rigger weights a cape's collar.
fn cape(bind: &[Pose], rig: Rig) -> (Cloth, Attachments) {
    let (cx, cy, w, l) = (10, 16, 0.44f32, 0.8f32);
    let base = BaseMesh::rectangle(w, l, cx, cy)
        .unwrap()
        .map_positions(|p| Vec3::new(p.x - 0.5 * w, 1.58 - l + p.y, -0.145));
    let mesh = ClothMesh::new(&base).unwrap();
    let top: Vec<u32> = (0..=cx).map(|i| BaseMesh::grid_index(cx, i, cy)).collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    let cloth =
        Cloth::from_mesh(mesh, Material::default(), &pins, SolverSettings::default()).unwrap();
    let half = 0.5 * f64::from(w);
    let nodes: Vec<(u32, Vec<Influence>)> = pins
        .iter()
        .map(|&n| {
            let x = cloth.positions()[n as usize].x;
            let s = (x.abs() / half).min(1.0);
            let mut inf = vec![
                Influence {
                    bone: 0,
                    weight: (1.0 - rig.neck_share) * (1.0 - s) + 1e-6,
                },
                Influence {
                    bone: 1,
                    weight: rig.neck_share * (1.0 - s) + 1e-6,
                },
            ];
            if s > 0.0 {
                inf.push(Influence {
                    bone: if x > 0.0 { 3 } else { 4 },
                    weight: s,
                });
            }
            (n, inf)
        })
        .collect();
    let attachments =
        Attachments::bind(&cloth, &nodes, bind, 0, AttachmentSettings::default()).unwrap();
    (cloth, attachments)
}

/// What the clip gave: worst free max strain, worst pinned strain, most nodes inside a body
/// at a frame's end, and the exclusions the cape ended with.
struct Clip {
    max_strain: f64,
    pinned_max_strain: f64,
    inside: usize,
    excluded: usize,
}

fn play(rig: Rig, rings: u32, rigid_pins: bool) -> Clip {
    let mut world = World::new();
    init_cloth_resources(&mut world);
    world.insert_resource(ClothConfig {
        budget: BudgetPreset::console(),
        ..ClothConfig::default()
    });
    let mut schedule = Schedule::default();
    add_cloth_systems(&mut schedule);
    let bind = poses(0.0, rig);
    let bones: Vec<Entity> = BONES
        .iter()
        .zip(&bind)
        .map(|(name, pose)| {
            let mut e = world.spawn(BonePose(*pose));
            let b = rig::bone(name).unwrap();
            if let Some((shape, offset)) = CharacterRig::bone_collider(b) {
                e.insert(BoneCollider { shape, offset });
            }
            e.id()
        })
        .collect();
    let (cloth, mut attachments) = cape(&bind, rig);
    attachments
        .set_settings(AttachmentSettings {
            unpushed_rings: rings,
            rigid_pins,
            ..AttachmentSettings::default()
        })
        .unwrap();
    let cape = world
        .spawn((
            ClothSim::new(cloth),
            ClothAttachments::new(bones.clone(), attachments),
        ))
        .id();
    let mut clip = Clip {
        max_strain: 0.0,
        pinned_max_strain: 0.0,
        inside: 0,
        excluded: 0,
    };
    for frame in 1..=FRAMES {
        for (e, p) in bones.iter().zip(poses(frame as f64 / 60.0, rig)) {
            world.get_mut::<BonePose>(*e).unwrap().0 = p;
        }
        schedule.run(&mut world);
        let sim = world.get::<ClothSim>(cape).unwrap();
        assert!(sim.last_error.is_none(), "{:?}", sim.last_error);
        let m = sim.cloth.measures();
        clip.max_strain = clip.max_strain.max(m.max_strain);
        clip.pinned_max_strain = clip.pinned_max_strain.max(m.pinned_max_strain);
        let set = &world.resource::<ClothColliders>().set;
        let inside = set.count_inside(sim.cloth.positions());
        clip.inside = clip.inside.max(inside);
        clip.excluded = sim.cloth.body_exclusions().len();
    }
    clip
}

/// With the default pin rule (the pinned row and the ring next to it not pushed by the
/// neck's and the chest's bodies), the cape keeps its free max strain at or under 5 % at the
/// console preset through the whole clip (4.0 % measured; 3.5 % with the rule off: on this
/// character the rule neither helps nor hurts beyond the clip's chaos), and no node ends a
/// frame inside a body.
#[test]
fn a_cape_hung_from_neck_and_shoulders_holds_through_arms_over_the_head() {
    let with = play(MILD, AttachmentSettings::default().unpushed_rings, false);
    let without = play(MILD, 0, false);
    eprintln!(
        "pin rule on: max strain {:.4}, pinned {:.4}, inside {}, exclusions {}; off: max strain {:.4}, inside {}",
        with.max_strain,
        with.pinned_max_strain,
        with.inside,
        with.excluded,
        without.max_strain,
        without.inside
    );
    assert!(with.excluded > 0);
    assert_eq!(without.excluded, 0);
    assert!(with.max_strain <= 0.05, "max strain {}", with.max_strain);
    assert_eq!(with.inside, 0);
}

/// Rigid pins (`AttachmentSettings::rigid_pins`) on a rig that stretches its collar: with the
/// pins skinned point by point the pinned row strains 16 % and the free row beside it follows
/// (18 % max strain); with the row moved as one rigid piece by its bones' blended rotation, the
/// pinned row keeps its length (`pinned_max_strain` under 1e-6) and the cape's free max strain
/// stays at or under 5 % (2.6 % measured) through the clip. (A rigid row does not follow the
/// skin exactly: one node ends a frame inside the chest's capsule on this rig.)
#[test]
fn rigid_pins_keep_a_collar_that_the_rig_stretches_from_straining_the_cape() {
    let skinned = play(HARSH, 1, false);
    let rigid = play(HARSH, 1, true);
    eprintln!(
        "harsh rig: skinned pins {:.4} (row {:.4}), rigid pins {:.4} (row {:.2e}), inside {}",
        skinned.max_strain,
        skinned.pinned_max_strain,
        rigid.max_strain,
        rigid.pinned_max_strain,
        rigid.inside
    );
    assert!(skinned.pinned_max_strain > 0.1);
    assert!(
        rigid.pinned_max_strain < 1e-6,
        "{}",
        rigid.pinned_max_strain
    );
    assert!(rigid.max_strain <= 0.05, "{}", rigid.max_strain);
}

/// Collision groups on a bare World: a cape whose groups meet only group 1 does not see a
/// body in group 2 (a sphere swept through it and back moves no node by 1 mm), and is pushed
/// by it (by over 10 cm) once its filter names group 2.
#[test]
fn a_cape_meets_only_the_bodies_its_groups_allow() {
    let mut world = World::new();
    init_cloth_resources(&mut world);
    let mut schedule = Schedule::default();
    add_cloth_systems(&mut schedule);
    let cloth = {
        let base = BaseMesh::rectangle(0.6, 0.6, 6, 6)
            .unwrap()
            .map_positions(|p| Vec3::new(p.x - 0.3, 0.9 + p.y, 0.0));
        let mesh = ClothMesh::new(&base).unwrap();
        let top: Vec<u32> = (0..=6).map(|i| BaseMesh::grid_index(6, i, 6)).collect();
        let pins = mesh.nodes_for_vertices(&top, true);
        Cloth::from_mesh(mesh, Material::default(), &pins, SolverSettings::default()).unwrap()
    };
    let rest = cloth.positions().to_vec();
    // A sphere that sweeps through the sheet's middle from behind.
    let body = world
        .spawn((
            BonePose(Pose::from_translation(DVec3::new(0.0, 1.1, -0.3))),
            BoneCollider {
                shape: isocloth::ColliderShape::Sphere { radius: 0.12 },
                offset: Pose::IDENTITY,
            },
            ClothCollisionGroups(CollisionGroups::from_lists(&[2], &[1, 2]).unwrap()),
        ))
        .id();
    let cape = world
        .spawn((
            ClothSim::new(cloth),
            ClothCollisionGroups(CollisionGroups::from_lists(&[1], &[1]).unwrap()),
        ))
        .id();
    let sweep = |world: &mut World, schedule: &mut Schedule, forward: bool| {
        for k in 0..30 {
            let z = if forward {
                -0.3 + 0.02 * k as f64
            } else {
                0.28 - 0.02 * k as f64
            };
            world.get_mut::<BonePose>(body).unwrap().0 =
                Pose::from_translation(DVec3::new(0.0, 1.1, z));
            schedule.run(world);
        }
    };
    sweep(&mut world, &mut schedule, true);
    sweep(&mut world, &mut schedule, false);
    let moved = |world: &World| {
        world
            .get::<ClothSim>(cape)
            .unwrap()
            .cloth
            .positions()
            .iter()
            .zip(&rest)
            .map(|(p, r)| (p.z - r.z).abs())
            .fold(0.0f64, f64::max)
    };
    assert!(
        moved(&world) < 1e-3,
        "pushed by a body it does not meet: {}",
        moved(&world)
    );
    world.get_mut::<ClothCollisionGroups>(cape).unwrap().0 =
        CollisionGroups::from_lists(&[1], &[1, 2]).unwrap();
    sweep(&mut world, &mut schedule, true);
    assert!(
        moved(&world) > 0.1,
        "the sphere went through: {}",
        moved(&world)
    );
}
