//! The character-cape scene of the `cape` demo, shared with `contact_gallery`: the procedural
//! character of `isocloth::rig` (bone entities with `BonePose` and `BoneCollider`) walking the
//! demo animation with its cape, all through the bevy_ecs layer; one [`CapeScene::tick`] is one
//! 1/60 s schedule run.

use std::time::Instant;

use bevy_ecs::prelude::*;
use glam::DVec3;
use isocloth::ecs::{
    BonePose, ClothColliders, ClothConfig, ClothConfigOverride, ClothRenderMesh, ClothSim,
    DemoCharacter, add_cloth_systems, init_cloth_resources, spawn_demo_character,
};
use isocloth::rig::{Animation, BONES, CharacterRig};
use isocloth::{ColliderSet, ColliderShape, Pose};

/// Length of one tick in seconds.
pub const DT: f64 = 1.0 / 60.0;

/// The world, its cloth schedule, the walking character and its cape.
pub struct CapeScene {
    world: World,
    schedule: Schedule,
    /// The character's animation.
    pub walker: CharacterRig,
    bones: Vec<Entity>,
    cape: Entity,
    /// Bone poses at the end of the last tick.
    poses: Vec<Pose>,
}

impl CapeScene {
    /// The character at the origin, its cape built with `config`'s budget (so the first tick
    /// does not refactor), and `config` as the world's [`ClothConfig`]. With `limits`, the cape
    /// gets the demo's game constraints (`rig::demo_cape_limits`: max distance from 0 at the
    /// collar to 0.4 m at the hem, a backstop 1 cm behind its skinned pose) through a
    /// [`ClothConfigOverride`] on its entity.
    pub fn new(config: ClothConfig, limits: bool) -> Result<Self, Box<dyn std::error::Error>> {
        let settings = config.budget.settings(config.timestep, config.gravity)?;
        let mut world = World::new();
        world.insert_resource(config);
        init_cloth_resources(&mut world);
        let mut schedule = Schedule::default();
        add_cloth_systems(&mut schedule);
        let walker = CharacterRig::new(Animation::Demo, DVec3::ZERO, 0.0);
        let DemoCharacter { bones, cape } = spawn_demo_character(&mut world, &walker, settings)?;
        if limits {
            let cloth = &world.get::<ClothSim>(cape).expect("cape").cloth;
            let over = ClothConfig {
                limits: isocloth::rig::demo_cape_limits(cloth),
                ..world.resource::<ClothConfig>().clone()
            };
            world.entity_mut(cape).insert(ClothConfigOverride(over));
        }
        Ok(Self {
            world,
            schedule,
            walker,
            bones,
            cape,
            poses: Vec::new(),
        })
    }

    /// One tick: advances the animation, writes the bone poses and runs the schedule. Returns
    /// the wall time of the schedule run (the whole ECS tick) in milliseconds.
    pub fn tick(&mut self) -> f64 {
        self.walker.advance(DT);
        self.walker.poses(&mut self.poses);
        for (b, &e) in self.bones.iter().enumerate() {
            self.world.get_mut::<BonePose>(e).expect("bone").0 = self.poses[b];
        }
        let start = Instant::now();
        self.schedule.run(&mut self.world);
        start.elapsed().as_secs_f64() * 1e3
    }

    /// Moves every cape node by at most `amplitude` metres per coordinate (deterministic for a
    /// `seed`; 0 moves nothing): a rounding-level perturbation to see how much a run's figures
    /// depend on rounding.
    #[allow(dead_code)] // used by contact_gallery, not by cape
    pub fn jitter(&mut self, seed: u64, amplitude: f64) -> Result<(), isocloth::ClothError> {
        let mut sim = self.world.get_mut::<ClothSim>(self.cape).expect("cape");
        let x = jittered(sim.cloth.positions(), seed, amplitude);
        sim.cloth.set_positions(&x)
    }

    /// The cape's simulation component.
    pub fn sim(&self) -> &ClothSim {
        self.world.get::<ClothSim>(self.cape).expect("cape")
    }

    /// The cape's render mesh, as of the last tick.
    #[allow(dead_code)] // used by cape and contact_gallery, not by self_collide
    pub fn mesh(&self) -> &ClothRenderMesh {
        self.world.get::<ClothRenderMesh>(self.cape).expect("mesh")
    }

    /// The bodies the cape collided with in the last tick.
    pub fn colliders(&self) -> &ColliderSet {
        &self.world.resource::<ClothColliders>().set
    }

    /// The character's collision shapes at the end of the last tick, for drawing.
    pub fn bodies(&self) -> Vec<(ColliderShape, Pose)> {
        (0..BONES.len())
            .filter_map(|b| CharacterRig::bone_collider(b).map(|(s, o)| (s, self.poses[b].mul(&o))))
            .collect()
    }

    /// The point a camera following the character looks at.
    pub fn camera_target(&self) -> DVec3 {
        self.walker.position + DVec3::new(0.0, 1.0, 0.0)
    }
}

/// How many of `points` are inside any of `colliders` (signed distance below zero) at the
/// frame's end poses: the `nodes_inside_body` figure.
#[allow(dead_code)] // used by cape and contact_gallery, not by self_collide
pub fn nodes_inside(colliders: &ColliderSet, points: &[DVec3]) -> usize {
    colliders.count_inside(points)
}

/// `x` with every coordinate moved by at most `amplitude` (xorshift from `seed`; seed 0 leaves
/// it as it is).
pub fn jittered(x: &[DVec3], seed: u64, amplitude: f64) -> Vec<DVec3> {
    if seed == 0 {
        return x.to_vec();
    }
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        ((state >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 2.0 * amplitude
    };
    x.iter()
        .map(|p| *p + DVec3::new(next(), next(), next()))
        .collect()
}
