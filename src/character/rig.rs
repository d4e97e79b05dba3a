//! A procedural test character: 15 bones, 13 collision capsules and built-in animations.
//!
//! For demos, scenario files and tuning without an animation pipeline: [`CharacterRig`] walks,
//! runs, turns and stops along the ground, and gives every bone's world pose each tick plus the
//! collision shape it carries ([`CharacterRig::bone_collider`]). The skeleton is a pelvis
//! (root), spine, chest, neck, head, two clavicles, upper arms, forearms, thighs and shins, about
//! 1.8 m tall, facing +z at heading 0.

use glam::{DQuat, DVec3};
use serde::{Deserialize, Serialize};

use crate::attachment::{AttachmentSettings, Attachments, Influence};
use crate::cloth::Cloth;
use crate::collision::{ColliderShape, Pose};
use crate::energy::Material;
use crate::error::ClothError;
use crate::mesh::{BaseMesh, ClothMesh};
use crate::model::SolverSettings;

/// Bone names, in pose order.
pub const BONES: [&str; 15] = [
    "pelvis",
    "spine",
    "chest",
    "neck",
    "head",
    "clavicle.L",
    "clavicle.R",
    "upper_arm.L",
    "upper_arm.R",
    "forearm.L",
    "forearm.R",
    "thigh.L",
    "thigh.R",
    "shin.L",
    "shin.R",
];

/// Index of a bone by name.
pub fn bone(name: &str) -> Option<usize> {
    BONES.iter().position(|&b| b == name)
}

/// What the character does. Reading one refuses unknown fields (`Spin(rate: 1.0)` only).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub enum Animation {
    /// Stands still.
    Idle,
    /// Walks straight at 1.4 m/s.
    Walk,
    /// Runs straight at 4 m/s.
    Run,
    /// Turns on the spot at `rate` rad/s.
    Spin {
        /// Turn rate in rad/s.
        rate: f64,
    },
    /// The demo sequence over 10 s: idle, start, walk, run, turn 180 degrees while walking,
    /// stop, idle.
    #[default]
    Demo,
    /// Walks (1.4 m/s) for 2 s, runs (4 m/s) for 2 s, stops by 4.8 s, then sits down over 1 s
    /// from 5 s (the pelvis 0.5 m lower, thighs level, shins upright) and stays seated: on
    /// [`CharacterRig::seat`] if the game puts one there.
    Sit,
}

impl Animation {
    /// Speed (m/s), turn rate (rad/s) and the name of the phase at time `t`.
    pub fn gait(&self, t: f64) -> (f64, f64, &'static str) {
        match *self {
            Animation::Idle => (0.0, 0.0, "idle"),
            Animation::Walk => (1.4 * (t / 0.5).min(1.0), 0.0, "walk"),
            Animation::Run => (4.0 * (t / 0.5).min(1.0), 0.0, "run"),
            Animation::Spin { rate } => (0.0, rate, "spin"),
            Animation::Demo => demo_gait(t),
            Animation::Sit => sit_gait(t),
        }
    }

    /// How far the character has sat down at time `t`: 0 standing, 1 seated.
    pub fn sitting(&self, t: f64) -> f64 {
        match self {
            Animation::Sit => {
                let s = ((t - SIT_START) / SIT_TIME).clamp(0.0, 1.0);
                s * s * (3.0 - 2.0 * s)
            }
            _ => 0.0,
        }
    }
}

/// When [`Animation::Sit`] starts sitting down, and how long it takes (seconds).
const SIT_START: f64 = 5.0;
const SIT_TIME: f64 = 1.0;
/// How far the pelvis goes down when seated (metres).
const SIT_DROP: f64 = 0.5;

fn sit_gait(t: f64) -> (f64, f64, &'static str) {
    let keys: [(f64, f64, &str); 6] = [
        (0.0, 0.0, "idle"),
        (0.5, 1.4, "start"),
        (2.0, 1.4, "walk"),
        (2.5, 4.0, "run"),
        (4.0, 4.0, "run"),
        (4.8, 0.0, "stop"),
    ];
    if t >= keys[keys.len() - 1].0 {
        let name = if t < SIT_START {
            "stop"
        } else if t < SIT_START + SIT_TIME {
            "sit down"
        } else {
            "seated"
        };
        return (0.0, 0.0, name);
    }
    let k = keys.iter().rposition(|k| k.0 <= t).unwrap_or(0);
    let (a, b) = (keys[k], keys[k + 1]);
    let s = (t - a.0) / (b.0 - a.0);
    (a.1 + s * (b.1 - a.1), 0.0, b.2)
}

fn demo_gait(t: f64) -> (f64, f64, &'static str) {
    let keys: [(f64, f64, f64, &str); 8] = [
        (0.0, 0.0, 0.0, "idle"),
        (1.0, 1.4, 0.0, "start"),
        (3.0, 1.4, 0.0, "walk"),
        (3.5, 4.0, 0.0, "run"),
        (5.5, 4.0, 0.0, "run"),
        (6.0, 1.6, 1.57, "turn"),
        (7.5, 1.6, 1.57, "turn"),
        (8.5, 0.0, 0.0, "stop"),
    ];
    if t >= keys[keys.len() - 1].0 {
        return (0.0, 0.0, if t < 9.0 { "stop" } else { "idle" });
    }
    let k = keys.iter().rposition(|k| k.0 <= t).unwrap_or(0);
    let (a, b) = (keys[k], keys[k + 1]);
    let s = (t - a.0) / (b.0 - a.0);
    (a.1 + s * (b.1 - a.1), a.2 + s * (b.2 - a.2), b.3)
}

/// The character's state: where it is, where it faces, its gait phase and clock.
#[derive(Debug, Clone)]
pub struct CharacterRig {
    /// Ground position of the pelvis.
    pub position: DVec3,
    /// Heading in radians about +y (0 faces +z).
    pub heading: f64,
    animation: Animation,
    time: f64,
    phase: f64,
    speed: f64,
    phase_name: &'static str,
    /// How far the character has sat down (0 standing, 1 seated).
    sit: f64,
}

impl CharacterRig {
    /// A character at `position` facing `heading`, about to play `animation`.
    pub fn new(animation: Animation, position: DVec3, heading: f64) -> Self {
        Self {
            position,
            heading,
            animation,
            time: 0.0,
            phase: 0.0,
            speed: 0.0,
            phase_name: "idle",
            sit: 0.0,
        }
    }

    /// Seconds played.
    pub fn time(&self) -> f64 {
        self.time
    }

    /// Current ground speed in m/s.
    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// Name of the current phase ("walk", "run", ...).
    pub fn phase_name(&self) -> &'static str {
        self.phase_name
    }

    /// Plays `dt` seconds.
    pub fn advance(&mut self, dt: f64) {
        let (speed, turn, name) = self.animation.gait(self.time);
        self.time += dt;
        self.speed = speed;
        self.phase_name = name;
        self.heading += turn * dt;
        let forward = DVec3::new(self.heading.sin(), 0.0, self.heading.cos());
        self.position += speed * dt * forward;
        let stride = 1.2 + 0.35 * speed;
        self.phase += std::f64::consts::TAU * speed * dt / stride;
        self.sit = self.animation.sitting(self.time);
    }

    /// A seat for [`Animation::Sit`]: a box 0.5 m wide, 0.4 m deep and 0.32 m high (6 cm
    /// under the seated pelvis and thighs, room for the cloth sat on), under where the pelvis
    /// is now, in the character's frame (place it once the character has stopped).
    pub fn seat(&self) -> (ColliderShape, Pose) {
        let height = 1.0 - SIT_DROP - 0.12 - 0.06;
        let yaw = DQuat::from_rotation_y(self.heading);
        let centre = self.position + yaw * DVec3::new(0.0, 0.5 * height, -0.05);
        (
            ColliderShape::Cuboid {
                half_extents: DVec3::new(0.25, 0.5 * height, 0.2),
            },
            Pose::new(centre, yaw),
        )
    }

    /// World pose of every bone ([`BONES`] order) now, written into `out`.
    pub fn poses(&self, out: &mut Vec<Pose>) {
        let speed = self.speed;
        let amount = (speed / 4.0).min(1.0);
        let (s, c) = self.phase.sin_cos();
        let swing = (0.3 + 0.35 * amount) * s * (speed / 1.4).min(1.0);
        let bob = 0.03 * amount * c.abs();
        let lean = 0.25 * amount;
        let yaw = DQuat::from_rotation_y(self.heading);
        let sit = self.sit;
        let root = Pose::new(
            self.position + DVec3::new(0.0, 1.0 - bob - SIT_DROP * sit, 0.0),
            yaw,
        );
        let local = |parent: &Pose, offset: DVec3, rotation: DQuat| {
            parent.mul(&Pose::new(offset, rotation))
        };
        let pelvis = root;
        let spine = local(
            &pelvis,
            DVec3::new(0.0, 0.1, 0.0),
            DQuat::from_rotation_x(lean * 0.5),
        );
        let chest = local(
            &spine,
            DVec3::new(0.0, 0.22, 0.0),
            DQuat::from_rotation_x(lean * 0.5),
        );
        let neck = local(
            &chest,
            DVec3::new(0.0, 0.3, 0.0),
            DQuat::from_rotation_x(-lean * 0.5),
        );
        let head = local(&neck, DVec3::new(0.0, 0.1, 0.0), DQuat::IDENTITY);
        let clav = |side: f64| local(&chest, DVec3::new(0.12 * side, 0.26, 0.0), DQuat::IDENTITY);
        let arm = |side: f64| {
            local(
                &chest,
                DVec3::new(0.22 * side, 0.24, 0.0),
                DQuat::from_rotation_x(-0.8 * swing * side) * DQuat::from_rotation_z(0.12 * side),
            )
        };
        let forearm = |upper: &Pose| {
            local(
                upper,
                DVec3::new(0.0, -0.3, 0.0),
                DQuat::from_rotation_x(0.3 + 0.6 * amount),
            )
        };
        let thigh = |side: f64| {
            local(
                &pelvis,
                DVec3::new(0.1 * side, -0.05, 0.0),
                DQuat::from_rotation_x(swing * side - std::f64::consts::FRAC_PI_2 * sit),
            )
        };
        let phase = self.phase;
        let shin = |upper: &Pose, side: f64| {
            let bend = (0.2 + 0.9 * amount) * (0.5 - 0.5 * (phase * side).sin()).max(0.0);
            local(
                upper,
                DVec3::new(0.0, -0.45, 0.0),
                DQuat::from_rotation_x(-bend + std::f64::consts::FRAC_PI_2 * sit),
            )
        };
        let (al, ar) = (arm(1.0), arm(-1.0));
        let (tl, tr) = (thigh(1.0), thigh(-1.0));
        out.clear();
        out.extend([
            pelvis,
            spine,
            chest,
            neck,
            head,
            clav(1.0),
            clav(-1.0),
            al,
            ar,
            forearm(&al),
            forearm(&ar),
            tl,
            tr,
            shin(&tl, 1.0),
            shin(&tr, -1.0),
        ]);
    }

    /// The collision shape carried by `bone` and its offset in the bone's frame, if any (the
    /// clavicles carry none).
    pub fn bone_collider(bone: usize) -> Option<(ColliderShape, Pose)> {
        let capsule = |half_height, radius, y: f64, lying: bool| {
            let rotation = if lying {
                DQuat::from_rotation_z(std::f64::consts::FRAC_PI_2)
            } else {
                DQuat::IDENTITY
            };
            Some((
                ColliderShape::Capsule {
                    half_height,
                    radius,
                },
                Pose::new(DVec3::new(0.0, y, 0.0), rotation),
            ))
        };
        match *BONES.get(bone)? {
            "pelvis" => capsule(0.08, 0.12, 0.0, true),
            "spine" => capsule(0.06, 0.13, 0.1, false),
            "chest" => capsule(0.1, 0.15, 0.12, false),
            "neck" => capsule(0.03, 0.05, 0.05, false),
            "head" => Some((
                ColliderShape::Sphere { radius: 0.1 },
                Pose::from_translation(DVec3::new(0.0, 0.12, 0.0)),
            )),
            "upper_arm.L" | "upper_arm.R" => capsule(0.1, 0.05, -0.15, false),
            "forearm.L" | "forearm.R" => capsule(0.1, 0.04, -0.14, false),
            "thigh.L" | "thigh.R" => capsule(0.15, 0.07, -0.22, false),
            "shin.L" | "shin.R" => capsule(0.16, 0.05, -0.22, false),
            _ => None,
        }
    }
}

/// Skin weights hanging a cape's `nodes` (at `positions`) from the shoulders of a character
/// whose pelvis is at `root`: each node follows the chest, blended toward the clavicle on its
/// side by up to 0.8 at the cape's outer edges (measured across the nodes' width in the
/// character's frame).
pub fn shoulder_bindings(
    positions: &[glam::DVec3],
    nodes: &[u32],
    root: &Pose,
) -> Vec<(u32, Vec<Influence>)> {
    let index = |name: &str| bone(name).map_or(0, |b| b as u32);
    let (chest, left, right) = (index("chest"), index("clavicle.L"), index("clavicle.R"));
    let local: Vec<f64> = nodes
        .iter()
        .map(|&n| root.inverse_transform_point(positions[n as usize]).x)
        .collect();
    let half = local.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1e-9);
    nodes
        .iter()
        .zip(&local)
        .map(|(&n, &x)| {
            let w = (x.abs() / half).min(1.0);
            let mut inf = vec![Influence {
                bone: chest,
                weight: 1.0 - 0.8 * w,
            }];
            if w > 0.0 {
                inf.push(Influence {
                    bone: if x > 0.0 { left } else { right },
                    weight: 0.8 * w,
                });
            }
            (n, inf)
        })
        .collect()
}

/// The demo cape of the `cape` example and the soak: 0.5 m wide and 0.9 m long (10 x 18 base
/// cells, 777 nodes), hanging behind the back of a character standing at the origin facing +z,
/// its top edge (vertices and edges) pinned at shoulder height.
pub fn demo_cape(settings: SolverSettings) -> Result<Cloth, ClothError> {
    let (cx, cy) = (10, 18);
    let (width, length) = (0.5f32, 0.9f32);
    let base = BaseMesh::rectangle(width, length, cx, cy)?
        .map_positions(|p| glam::Vec3::new(p.x - 0.5 * width, 1.46 - length + p.y, -0.19));
    let mesh = ClothMesh::new(&base)?;
    let top: Vec<u32> = (0..=cx).map(|i| BaseMesh::grid_index(cx, i, cy)).collect();
    let pins = mesh.nodes_for_vertices(&top, true);
    Cloth::from_mesh(mesh, Material::default(), &pins, settings)
}

/// Skins `cloth`'s pins to the shoulders ([`shoulder_bindings`]) of a character at bind
/// `poses` (bone 0 its root), with the demo's inertia scales: linear 0.8, angular 0.6; every
/// node is skinned the same way ([`Attachments::with_skin`]), so that max distance and
/// backstops ([`demo_cape_limits`]) follow the character.
pub fn demo_cape_attachments(
    cloth: &Cloth,
    poses: &[Pose],
) -> Result<Attachments, crate::attachment::AttachError> {
    let root = poses.first().copied().unwrap_or(Pose::IDENTITY);
    let bindings = shoulder_bindings(cloth.positions(), cloth.pins(), &root);
    let settings = AttachmentSettings {
        linear_inertia: 0.8,
        angular_inertia: 0.6,
        ..Default::default()
    };
    let all: Vec<u32> = (0..cloth.positions().len() as u32).collect();
    let skin = shoulder_bindings(cloth.positions(), &all, &root);
    Attachments::bind(cloth, &bindings, poses, 0, settings)?.with_skin(cloth, &skin, poses)
}

/// Game constraints for a cape hanging from a collar (`cloth` at its rest pose, gravity
/// along -y): max distance painted from 0 at the collar (its highest nodes) to `hem_radius`
/// at the hem (its lowest), linear in rest height, and a backstop `backstop_distance` behind
/// the skinned surface on the body's side (a sphere of 1 m, nearly a plane), the body lying on
/// the side the render normal points to when `body_along_normal`.
pub fn cape_limits(
    cloth: &Cloth,
    hem_radius: f32,
    backstop_distance: f32,
    body_along_normal: bool,
) -> crate::LimitSettings {
    let x = cloth.positions();
    let (lo, hi) = x
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.y), hi.max(p.y))
        });
    let span = (hi - lo).max(1e-9);
    let max_distance = x
        .iter()
        .map(|p| hem_radius * ((hi - p.y) / span) as f32)
        .collect();
    let n = x.len();
    crate::LimitSettings {
        max_distance,
        backstop_distance: vec![backstop_distance; n],
        backstop_radius: vec![1.0; n],
        backstop_flip: body_along_normal,
        ..Default::default()
    }
}

/// The demo cape's constraints ([`cape_limits`]): max distance from 0 at the collar to 0.4 m
/// at the hem, and a backstop 1 cm behind its skinned pose, toward the back (the cape's render
/// normal points at the body).
pub fn demo_cape_limits(cloth: &Cloth) -> crate::LimitSettings {
    cape_limits(cloth, 0.4, 0.01, true)
}

/// Random motion for soak tests: every 1-6 s the character switches to walking (30 %),
/// running (25 %), spinning at up to 3 rad/s either way (20 %) or standing (25 %), and one
/// switch in twenty also teleports it 100 m along x. Deterministic for a seed (xorshift).
#[derive(Debug, Clone)]
pub struct RandomMotion {
    state: u64,
    switch_at: f64,
    teleports: u32,
}

impl RandomMotion {
    /// A generator from `seed` (any value; zero is replaced by a fixed non-zero seed).
    pub fn new(seed: u64) -> Self {
        Self {
            state: if seed == 0 {
                0x9E37_79B9_7F4A_7C15
            } else {
                seed
            },
            switch_at: 0.0,
            teleports: 0,
        }
    }

    fn next(&mut self) -> f64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        (self.state >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Teleports so far.
    pub fn teleports(&self) -> u32 {
        self.teleports
    }

    /// At time `t` (seconds, increasing), replaces `rig` by a new motion from where it stands
    /// if the current one has run its course.
    pub fn drive(&mut self, rig: &mut CharacterRig, t: f64) {
        if t < self.switch_at {
            return;
        }
        let pick = self.next();
        let animation = if pick < 0.3 {
            Animation::Walk
        } else if pick < 0.55 {
            Animation::Run
        } else if pick < 0.75 {
            Animation::Spin {
                rate: 6.0 * (self.next() - 0.5),
            }
        } else {
            Animation::Idle
        };
        let mut position = rig.position;
        if self.next() < 0.05 {
            position += DVec3::new(100.0, 0.0, 0.0);
            self.teleports += 1;
        }
        *rig = CharacterRig::new(animation, position, rig.heading);
        self.switch_at = t + 1.0 + 5.0 * self.next();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The demo walks forward, runs, turns about 180 degrees and stops: after 10 s the heading
    /// has turned by 3.53 rad (the integral of the turn rate) to within 0.05, the character
    /// stands still, and every bone pose is finite with a unit rotation.
    #[test]
    fn demo_animation_turns_and_stops() {
        let mut rig = CharacterRig::new(Animation::Demo, DVec3::ZERO, 0.0);
        let mut poses = Vec::new();
        for _ in 0..600 {
            rig.advance(1.0 / 60.0);
            rig.poses(&mut poses);
            assert_eq!(poses.len(), BONES.len());
            assert!(poses.iter().all(|p| p.is_valid()));
        }
        let turned = 0.5 * 0.5 * 1.57 + 1.5 * 1.57 + 0.5 * 1.0 * 1.57;
        assert!((rig.heading - turned).abs() < 0.05, "{}", rig.heading);
        assert_eq!(rig.speed(), 0.0);
        assert!(rig.position.length() > 10.0);
    }
}
