//! Characters from their first frame: a cape laid out on a character starts unstrained at the
//! pose and scale the character has when the cloth first steps, hangs centred on its back, and
//! a skeleton the cape's heuristic cannot read names its spine. On humanoids written here
//! (`common::gltf::humanoid_glb`): a first clip frame far from the bind pose, a root node that
//! scales the skeleton, an origin at the hips, a spine joint off the midline.

mod common;

use std::sync::Arc;

use bevy_transform::prelude::*;
use common::gltf::{Rig, humanoid_glb};
use common::plugin_app;
use glam::{Quat, Vec3};
use isocloth::{AttachmentSettings, ColliderShape, Material};
use isocloth_bevy::character::{CapeJoints, CapeLayout, Character, CharacterError};
use isocloth_bevy::{ClothCollider, ClothSim};

/// Per fixed tick: max strain, mean strain, and cloth nodes inside a body or under the ground.
struct Run {
    ticks: Vec<(f64, f64, usize)>,
}

impl Run {
    fn first(&self) -> f64 {
        self.ticks[0].0
    }
    fn worst(&self) -> f64 {
        self.ticks.iter().map(|t| t.0).fold(0.0, f64::max)
    }
    fn inside(&self) -> usize {
        self.ticks.iter().map(|t| t.2).max().unwrap_or(0)
    }
}

/// `gltf_cape`'s scene on `c`: the character playing its first clip, the cape laid out at the
/// clip's first frame hanging from `joints` (rigid pins), the ground at the skin's lowest point
/// over the clip; `ticks` fixed ticks.
fn cape_run(c: Character, joints: &CapeJoints, ticks: usize) -> Run {
    let clip = c.clip(None).unwrap();
    let layout = c.cape_on(joints, Some(clip), 0.0, 10, 14, 0.15);
    let ground = c.lowest_point(Some(clip));
    let mut app = plugin_app();
    let world = app.world_mut();
    let player = isocloth_bevy::spawn_character(world, Arc::new(c), clip);
    let bones = world
        .get::<isocloth_bevy::CharacterPlayer>(player)
        .unwrap()
        .joints
        .clone();
    world.spawn((
        Transform::from_xyz(0.0, ground, 0.0),
        ClothCollider::new(ColliderShape::Plane),
    ));
    let cape = layout.spawn(
        world,
        &bones,
        Material::default(),
        AttachmentSettings {
            rigid_pins: true,
            ..AttachmentSettings::default()
        },
    );
    app.update();
    let mut out = Vec::new();
    for _ in 0..ticks {
        app.update();
        let world = app.world();
        let sim = world.get::<ClothSim>(cape).expect("built");
        assert!(sim.last_error.is_none(), "{:?}", sim.last_error);
        let m = sim.cloth.measures();
        let set = &world.resource::<isocloth::ecs::ClothColliders>().set;
        let inside = set.count_inside(sim.cloth.positions());
        out.push((m.max_strain, m.mean_strain, inside));
    }
    Run { ticks: out }
}

fn rig(r: Rig) -> Character {
    Character::from_glb(&humanoid_glb(r)).unwrap()
}

/// Where the cape's middle is across the body and how far it hangs behind it: the top row's
/// mean, relative to `point`, along the cape's side axis and along its facing.
fn across(layout: &CapeLayout, point: Vec3) -> (f32, f32) {
    let side = Vec3::Y.cross(layout.forward);
    let top: Vec<Vec3> = layout
        .pins
        .iter()
        .map(|p| layout.positions[p.0 as usize])
        .collect();
    let mean = top.iter().sum::<Vec3>() / top.len() as f32;
    ((mean - point).dot(side), (point - mean).dot(layout.forward))
}

/// The clip's first frame far from the bind pose (hips turned 100 degrees, spine bent 35
/// degrees forward, both arms raised 120 degrees), easing back to it over a second, and the
/// same character with its skeleton under a root node scaling it by 0.01 (translations and
/// vertices in centimetres): at console the cape's first frame strains at most 0.5 % (the
/// issue's bound; measured 0.007 %), the whole 2 s clip at most 3 % (measured 1.4 %), no node
/// ever inside a body, and the two rigs give the same figures (to 0.1 point).
#[test]
fn a_cape_starts_unstrained_on_a_character_far_from_its_bind_pose_or_scaled_by_its_root() {
    let mut runs = Vec::new();
    for root_scale in [1.0, 0.01] {
        let c = rig(Rig {
            far_first_frame: true,
            root_scale,
            ..Rig::default()
        });
        let joints = c.cape_joints().unwrap();
        let run = cape_run(c, &joints, 120);
        assert!(run.first() <= 0.005, "first frame {}", run.first());
        assert!(run.worst() <= 0.03, "clip {}", run.worst());
        assert_eq!(run.inside(), 0);
        runs.push(run);
    }
    assert!((runs[0].worst() - runs[1].worst()).abs() < 1e-3);
}

/// The cape is laid out at the pose of the first frame: on the character turned 100 degrees
/// about the vertical there, it faces the turned way (its facing within 1 degree of the rest
/// facing turned by 100 degrees) and hangs behind the back (its top row 5-30 cm behind the
/// upper spine along that facing, centred across it to 2 cm).
#[test]
fn the_cape_is_laid_out_behind_the_back_the_character_has_in_its_first_frame() {
    let c = rig(Rig {
        far_first_frame: true,
        ..Rig::default()
    });
    let clip = c.clip(None).unwrap();
    let joints = c.cape_joints().unwrap();
    let layout = c.cape_on(&joints, Some(clip), 0.0, 10, 14, 0.15);
    let expected = Quat::from_rotation_y(100f32.to_radians()) * Vec3::Z;
    assert!(
        layout.forward.angle_between(expected) < 1f32.to_radians(),
        "{:?}",
        layout.forward
    );
    let mut pose = Vec::new();
    c.joint_transforms(Some(clip), 0.0, &mut pose);
    let (side, back) = across(&layout, pose[joints.spine].w_axis.truncate());
    assert!(side.abs() < 0.02, "{side}");
    assert!((0.05..0.3).contains(&back), "{back}");
}

/// A rig whose origin is at its hips (its feet 0.95 m below): the skin's lowest point over the
/// clip is under the toe joint (0.93 m down) by at most the toe's 5 cm tube, and with the ground
/// on it the cape's first frame strains at most 0.5 % with no node under the ground (with the
/// ground at height 0 instead, the cape starts half under it: 22.5 % in the first frame).
#[test]
fn a_character_with_its_origin_at_its_hips_stands_on_the_ground_under_its_feet() {
    let c = rig(Rig {
        origin_at_hips: true,
        ..Rig::default()
    });
    let lowest = c.lowest_point(c.clip(None).ok());
    assert!((-0.98..=-0.93).contains(&lowest), "{lowest}");
    let joints = c.cape_joints().unwrap();
    let run = cape_run(c, &joints, 60);
    assert!(run.first() <= 0.005, "first frame {}", run.first());
    assert_eq!(run.inside(), 0);
}

/// On a rig whose upper spine joint is 6 cm to the side of the body's midline (its children
/// compensate), the cape is centred on the skin of the back: its middle within 1 cm of the
/// midline (the spine joint 6 cm off), and at least as wide as the torso (0.34 m).
#[test]
fn the_cape_is_centred_on_the_skin_of_the_back_not_on_an_off_centre_spine_joint() {
    let c = rig(Rig {
        offset_spine: true,
        ..Rig::default()
    });
    let joints = c.cape_joints().unwrap();
    assert_eq!(c.joint_names()[joints.spine], "Chest");
    let layout = c.cape_on(&joints, None, 0.0, 10, 14, 0.15);
    let mut rest = Vec::new();
    c.joint_transforms(None, 0.0, &mut rest);
    let spine = rest[joints.spine].w_axis.truncate();
    assert!((spine.x + 0.06).abs() < 1e-4, "{spine}");
    let (off_spine, _) = across(&layout, spine);
    let (off_midline, _) = across(&layout, spine.with_x(0.0));
    assert!(off_midline.abs() < 0.01, "{off_midline} from the midline");
    assert!(off_spine.abs() > 0.05, "{off_spine} from the spine joint");
    assert!(layout.size[0] >= 0.34 - 1e-3, "{:?}", layout.size);
}

/// A skeleton where no joint but the hips has three children: the heuristic refuses it with
/// the joints' names (it does not hang the cape from the hips), a name the skeleton lacks is
/// refused naming the joints, and the named chest carries a cape centred on the back (to 1 cm),
/// as wide as the torso, whose first frame strains at most 0.5 % at console.
#[test]
fn a_skeleton_the_heuristic_cannot_read_names_the_joint_to_hang_the_cape_from() {
    let c = rig(Rig {
        no_branching_joint: true,
        ..Rig::default()
    });
    match c.cape_joints() {
        Err(CharacterError::NoUpperSpine { joints }) => assert!(joints.contains(&"Chest".into())),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        c.cape_joints_from("Torso"),
        Err(CharacterError::NoSuchJoint { .. })
    ));
    let joints = c.cape_joints_from("Chest").unwrap();
    let layout = c.cape_on(&joints, None, 0.0, 10, 14, 0.15);
    let (off, _) = across(&layout, Vec3::new(0.0, 0.0, 0.0));
    assert!(off.abs() < 0.01, "{off}");
    assert!(layout.size[0] >= 0.34 - 1e-3, "{:?}", layout.size);
    let run = cape_run(c, &joints, 60);
    assert!(run.first() <= 0.005, "first frame {}", run.first());
    assert_eq!(run.inside(), 0);
}
